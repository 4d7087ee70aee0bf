"""Replay a chain of recorded aten ops as a runnable program: the ops the trace recorded, on random
inputs of the recorded shapes, dtypes and strides.

A trace records each op's name, ``Input Dims``, ``Input type``, ``Concrete Inputs`` and ``Input
Strides`` but no tensor identities, so the program links its tensors by the shape-and-dtype dataflow the
fusion finder's byte model reads too (``fuseprof.model.dataflow``, one module for both): a tensor
argument whose shape and dtype an earlier op of the chain produced is that op's output (the latest one
not yet consumed, then the latest one consumed, then the latest one a reduction consumed: h ·
rsqrt(mean(h²)) multiplies h, not h²; one op never takes the same producer twice); any other is an
external input, made with the recorded strides. Each op is called through the aten overload whose schema
fits the recorded argument kinds (Tensor, Scalar, ScalarList, TensorList, None), keyword-only arguments
by name; only ops the registry calls replayable are called at all. The op's outputs are found by running
the program once on meta tensors.

These rules keep a replay faithful to what the trace ran:
- the first argument an op overwrites (``copy_``, ``fill_``, ``zero_``, an ``out=``) is a fresh buffer
  allocated inside the program, as ``.to()`` and ``torch.full`` allocate it; the target of an in-place
  indexed write (``index_copy_``, ``scatter_``, …) is an external input, a cache, whatever its shape;
- an in-place op that reads what it overwrites (``add_``, ``mul_``, …) on an external input is replayed
  out of place (the same bytes), so calling the program twice gives the same result;
- index tensors hold valid indices of the dimension they index (the registry's ``OpRole.indexing``),
  unique where they fit;
- a Python number the op took as a 0-dim float64 or int64 tensor (the trace records no value for it) is
  1e-6 or 1: an epsilon's size, harmless as addend, factor or divisor, and RMSNorm's own eps.

The program returns the values no later op consumed and the external inputs it wrote (a KV cache).
Its float64 twin (every floating tensor and dtype argument in float64) is the reference.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from fuseprof.errors import FuseprofError
from fuseprof.model.dataflow import Producer, ShapeDataflow, Value, links_to_nothing, tensor_value
from fuseprof.model.op_models import PROFILER_DTYPES
from fuseprof.model.registry import OpRole, Registry


class ReplayError(FuseprofError):
    """A recorded op that cannot be replayed (no aten overload fits, a custom op, no shapes)."""


# torch.profiler's 'Input type' strings -> torch dtypes (those of the model's table this torch has)
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, dtype) for name, (dtype, _) in PROFILER_DTYPES.items()
                                  if isinstance(getattr(torch, dtype, None), torch.dtype)}
# what 'Input type' records for an argument that is not a tensor ('': not recorded)
_ARGUMENT_KINDS = ("", "Scalar", "ScalarList", "TensorList")
# c10::ScalarType numbering, as 'Concrete Inputs' records a dtype argument
_SCALAR_TYPES: dict[int, torch.dtype] = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 9: torch.complex64, 10: torch.complex128, 11: torch.bool, 15: torch.bfloat16,
}
_MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last,
                   3: torch.channels_last_3d}

# A Python float or int passed to a tensor argument: a 0-d tensor of these dtypes the trace records no value of
_WRAPPED_NUMBERS = (torch.float64, torch.int64)


@dataclass(frozen=True)
class RecordedOp:
    """One op as the trace recorded it."""

    name: str
    dims: list[Any]
    types: list[Any]
    concrete: list[Any]
    strides: list[Any] | None = None


@dataclass(frozen=True)
class TensorSpec:
    """An external input or a buffer the program allocates: shape, strides, dtype and, for an index
    tensor, the size of the dimension it indexes (``bound``) and whether its indices must be unique."""

    dims: tuple[int, ...]
    strides: tuple[int, ...] | None
    dtype: torch.dtype
    bound: int | None = None
    unique: bool = False
    number: float | None = None  # a wrapped Python number: its value (the op's OpRole.wrapped_number)


@dataclass(frozen=True)
class Ref:
    """Where an argument's value comes from: an external input, an earlier step's output, a buffer the
    program allocates, a Python value, a list of refs (a TensorList), or the device the program runs on."""

    kind: Literal["input", "step", "buffer", "value", "list", "device"]
    index: int = -1
    value: Any = None


@dataclass(frozen=True)
class Step:
    op: str  # the overload it calls, e.g. aten::add.Tensor
    fn: Any  # the torch.ops overload
    args: tuple[Ref, ...]
    kwargs: tuple[tuple[str, Ref], ...]


@dataclass
class _Values:
    """What refs resolve to in one run of a program: real tensors, or the meta tensors of the build."""

    inputs: list[torch.Tensor]
    buffers: list[torch.Tensor]
    results: list[Any]
    device: torch.device
    float64: bool = False

    def __call__(self, ref: Ref) -> Any:
        if ref.kind == "input":
            return self.inputs[ref.index]
        if ref.kind == "step":
            result = self.results[ref.index]
            return result if ref.value is None else result[ref.value]
        if ref.kind == "buffer":
            return self.buffers[ref.index]
        if ref.kind == "list":
            return [self(r) for r in ref.value]
        if ref.kind == "device":
            return self.device
        return _promoted(ref.value) if self.float64 else ref.value

    def call(self, step: Step) -> Any:
        return step.fn(*[self(a) for a in step.args], **{k: self(r) for k, r in step.kwargs})


@dataclass
class Program:
    """A replayable chain: ``run(*inputs, device=…)`` returns its outputs (see the module docstring)."""

    steps: list[Step] = field(default_factory=list)
    inputs: list[TensorSpec] = field(default_factory=list)
    buffers: list[TensorSpec] = field(default_factory=list)
    outputs: list[Ref] = field(default_factory=list)
    precision: torch.dtype = torch.float32  # its least precise floating tensor's dtype: the check's tolerance

    @property
    def mutates_inputs(self) -> bool:
        """Whether running it writes one of its inputs (each variant then needs inputs of its own)."""
        return any(ref.kind == "input" for ref in self.outputs)

    def run(self, *inputs: torch.Tensor, device: torch.device, float64: bool = False) -> tuple[torch.Tensor, ...]:
        values = _Values(list(inputs), [_empty(spec, device, float64) for spec in self.buffers], [], device, float64)
        for step in self.steps:
            values.results.append(values.call(step))
        return tuple(values(ref) for ref in self.outputs)

    def make_inputs(self, device: torch.device, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        return tuple(_random(spec, device, generator) for spec in self.inputs)

    def describe(self) -> list[str]:
        """One line per step: the overload and where each argument comes from (for the bundle's manifest)."""
        return [f"{step.op}({', '.join([_show(a) for a in step.args] + [f'{k}={_show(r)}' for k, r in step.kwargs])})"
                for step in self.steps]


def _show(ref: Ref) -> str:
    if ref.kind == "list":
        return "[" + ", ".join(_show(r) for r in ref.value) + "]"
    if ref.kind in ("value", "device"):
        return repr(ref.value) if ref.kind == "value" else "device"
    element = f".{ref.value}" if ref.kind == "step" and ref.value is not None else ""  # one of an op's outputs
    return {"input": "in", "step": "op", "buffer": "new"}[ref.kind] + str(ref.index) + element


def most_common_floating(dtypes: Sequence[torch.dtype], default: torch.dtype) -> torch.dtype:
    """The floating dtype met most often (the first met on a tie), or ``default`` when there is none."""
    floating = [d for d in dtypes if d.is_floating_point]
    return max(dict.fromkeys(floating), key=floating.count) if floating else default


def _promoted(value: Any) -> Any:
    """A dtype argument in the float64 twin: floating dtypes become float64."""
    return torch.float64 if isinstance(value, torch.dtype) and value.is_floating_point else value


def _empty(spec: TensorSpec, device: torch.device, float64: bool = False) -> torch.Tensor:
    dtype = torch.float64 if float64 and spec.dtype.is_floating_point else spec.dtype
    if spec.strides is None:
        return torch.empty(spec.dims, dtype=dtype, device=device)
    return torch.empty_strided(spec.dims, spec.strides, dtype=dtype, device=device)


def _random(spec: TensorSpec, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    """Values in [0.5, 1.5) for floating tensors (positive: a chain may take a root or a log), valid
    indices for index tensors, random bits for masks; written over all the memory the recorded strides
    span, so a broadcast (stride 0) or padded view gets values without writing one element twice."""
    dims = spec.dims
    strides = spec.strides or torch.empty(dims, device="meta").stride()
    size = 1 + sum((d - 1) * s for d, s in zip(dims, strides)) if all(dims) else 0
    if spec.number is not None:
        return torch.full((), spec.number, dtype=spec.dtype, device=device)
    if spec.dtype.is_floating_point:
        values = torch.rand(size, generator=generator, device=device, dtype=torch.float32) + 0.5
    elif spec.dtype == torch.bool:
        values = torch.rand(size, generator=generator, device=device) < 0.5
    else:
        bound = spec.bound or 16
        if spec.unique and size <= bound:
            values = torch.randperm(bound, generator=generator, device=device)[:size]
        else:
            values = torch.randint(0, bound, (size,), generator=generator, device=device)
    return values.to(spec.dtype).as_strided(dims, strides)


def _literal(text: Any) -> Any:
    """A 'Concrete Inputs' string as a Python value: '-65504.' → -65504.0, '[-1]' → [-1], 'True' → True."""
    if not isinstance(text, str):
        return text
    if len(text) > 10_000:  # no argument of a replayable op is that long; never parse what a trace pads
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:  # what literal_eval does not read: 'inf', '-inf', 'nan' (a mask's fill value)
        return float(text)
    except ValueError:
        return text


def _fits(arg: Any, dims: Any, recorded: Any) -> bool:
    """Whether a recorded argument (its 'Input type' and 'Input Dims') can fill a schema argument; an
    unrecorded one ('') fills an optional argument or one with a default (gelu's approximate='none')."""
    schema_type = str(arg.type)
    optional = schema_type.startswith("Optional[")
    inner = schema_type[len("Optional["):-1] if optional else schema_type
    if recorded == "":
        return optional or arg.has_default_value()
    if recorded == "TensorList":
        return inner in ("List[Tensor]", "List[Optional[Tensor]]")
    if recorded == "ScalarList":
        return inner.startswith("List[") and "Tensor" not in inner
    if recorded == "Scalar":
        return inner in ("number", "int", "float", "bool", "SymInt", "Device", "Layout", "str")
    if recorded in DTYPES:
        return inner == "Tensor" and isinstance(dims, list)
    return False


def resolve_overload(op: RecordedOp, registry: Registry) -> tuple[str, Any]:
    """The aten overload whose schema takes the recorded arguments, default overload first. Only ops the
    registry calls replayable (``OpRole.replayable``: pure tensor ops) are looked up at all: the trace chose
    the name."""
    namespace, _, name = op.name.partition("::")
    if not registry.role(op.name).replayable:
        what = ("a custom op" if namespace != "aten" else
                "not one of the ops known to compute on tensors and touch nothing else")
        raise ReplayError(f"{op.name}: not replayed ({what}; fuseprof replays only the ops its registry calls "
                          "replayable, since a trace names the ops it would run)")
    unknown = sorted({str(t) for t in op.types if t not in DTYPES and t not in _ARGUMENT_KINDS})
    if unknown:
        raise ReplayError(f"{op.name}: recorded argument type {', '.join(map(repr, unknown))} is neither a dtype "
                          "fuseprof can build (fuseprof/model/op_models.py, PROFILER_DTYPES) nor a "
                          "scalar or list; add it there if this PyTorch has it")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        raise ReplayError(f"{op.name}: no such op in this PyTorch's torch.ops.aten")
    overloads = sorted(packet.overloads(), key=lambda o: o != "default")
    for overload in overloads:
        fn = getattr(packet, overload)
        arguments = fn._schema.arguments
        if len(arguments) == len(op.types) and all(
                _fits(a, d, t) for a, d, t in zip(arguments, op.dims, op.types)):
            return overload, fn
    for overload in overloads:  # the right arity, but an argument the profiler did not record
        arguments = getattr(packet, overload)._schema.arguments
        missing = [f"{a.name} ({a.type})" for a, t in zip(arguments, op.types) if t == "" and not _fits(a, [], t)]
        if len(arguments) == len(op.types) and missing:
            raise ReplayError(f"{op.name}: the profiler recorded no value for {', '.join(missing)}")
    raise ReplayError(f"{op.name}: no overload of torch.ops.{namespace}.{name} takes the recorded arguments "
                      f"{op.types} (the trace may come from another PyTorch version)")


def _python_value(name: str, text: Any) -> Any:
    """A non-tensor argument; a dtype, memory format or layout argument in its torch form."""
    value = _literal(text)
    if name == "dtype" and isinstance(value, int):
        return _SCALAR_TYPES.get(value, value)
    if name == "memory_format" and isinstance(value, int):
        return _MEMORY_FORMATS.get(value, value)
    if name == "layout" and isinstance(value, int):
        return torch.strided
    return value


# The most memory one replayed chain may take (its inputs, buffers and every op's outputs): a trace's
# shapes are the trace's to choose, and the chains a fused kernel replaces take megabytes to a few GB.
MAX_REPLAY_BYTES = 8 << 30


def _tensor_bytes(value: Any) -> int:
    return sum(t.nbytes for t in _tensors(value))


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _tensors(v)] if isinstance(value, (tuple, list)) else []


def _spec_bytes(spec: TensorSpec) -> int:
    strides = spec.strides or torch.empty(spec.dims, device="meta").stride()
    span = 1 + sum((d - 1) * s for d, s in zip(spec.dims, strides)) if all(spec.dims) else 0
    return span * torch.empty((), dtype=spec.dtype, device="meta").element_size()


def _checked_dims(op: str, dims: Any) -> list[int]:
    """A recorded shape as a list of non-negative ints, else ReplayError (a trace may hold anything)."""
    if not isinstance(dims, list) or not all(type(d) is int and d >= 0 for d in dims):
        raise ReplayError(f"{op}: a tensor shape {dims!r} that is not a list of non-negative integers")
    return dims


class _Builder:
    """A program being built: each op's tensor arguments linked by the shared shape-and-dtype dataflow
    (``fuseprof.model.dataflow``), resolved while the program runs once on meta tensors."""

    def __init__(self, default_dtype: torch.dtype, registry: Registry) -> None:
        self.default_dtype = default_dtype
        self.registry = registry
        self.allocated = 0  # bytes the program will hold: inputs, buffers and outputs
        self.program = Program()
        self.meta = _Values([], [], [], torch.device("meta"))
        self.flow = ShapeDataflow()
        self.refs: dict[Producer, Ref] = {}  # each op's output(s), as the dataflow names them (op, output)
        self.ops = 0  # ops added: the dataflow's and the op graph's index of the next (a step may be a view)
        self.produced: list[torch.Tensor] = []  # their meta values, in order
        self.mutated: list[int] = []  # external inputs an op wrote

    def input_ref(self, spec: TensorSpec) -> Ref:
        self.hold(_spec_bytes(spec))
        self.program.inputs.append(spec)
        self.meta.inputs.append(_empty(spec, self.meta.device))
        return Ref("input", len(self.program.inputs) - 1)

    def hold(self, nbytes: int) -> None:
        """Count memory the program will take; ReplayError past ``MAX_REPLAY_BYTES``."""
        self.allocated += nbytes
        if self.allocated > MAX_REPLAY_BYTES:
            raise ReplayError(f"the chain would take over {MAX_REPLAY_BYTES / 2**30:.0f} GiB to replay (its recorded "
                              "shapes); not replayed")

    def list_dtype(self, dims: list[int]) -> torch.dtype:
        """A TensorList element's dtype, which the trace does not record: the latest producer of that
        shape's, else the chain's most common floating type."""
        return next((t.dtype for t in reversed(self.produced) if list(t.shape) == dims), self.default_dtype)

    def buffer_ref(self, dims: list[int], dtype: torch.dtype, strides: Any) -> Ref:
        spec = TensorSpec(tuple(dims), _strides(strides, dims), dtype)
        self.hold(_spec_bytes(spec))
        self.program.buffers.append(spec)
        self.meta.buffers.append(_empty(spec, self.meta.device))
        return Ref("buffer", len(self.program.buffers) - 1)

    def viewed(self, ref: Ref, spec: TensorSpec) -> Ref:
        """``ref`` as the argument the trace recorded: the same tensor where its shape and strides match,
        else a view of it at the recorded shape and strides (the op graph links through views the chain
        does not hold: ``k.transpose(-2, -1)`` read by a ``copy_``). The recorded strides are laid over the
        replay's storage: the view's elements where the producer's layout is the recorded one, others of
        the same tensor where it is not — the same amount of work either way, and the float64 twin reads
        the same ones."""
        tensor = self.meta(ref)
        strides = spec.strides or torch.empty(spec.dims, device="meta").stride()
        same_layout = all(a == b for a, b, d in zip(tensor.stride(), strides, spec.dims) if d > 1)  # 1-long: any
        if tuple(tensor.shape) == spec.dims and (spec.strides is None or same_layout):
            return ref
        span = 1 + sum((d - 1) * s for d, s in zip(spec.dims, strides)) if all(spec.dims) else 0
        if span > tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1):
            return ref  # not a view of it: the op's own call says what is wrong
        view = torch.ops.aten.as_strided.default
        step = Step(f"{view.name()}.{view._overloadname}", view,
                    (ref, Ref("value", value=list(spec.dims)), Ref("value", value=list(strides))), ())
        self.program.steps.append(step)
        self.meta.results.append(self.meta.call(step))
        return Ref("step", len(self.program.steps) - 1)

    def produce(self, index: int, result: Any) -> None:
        """Step ``index``'s outputs: one tensor, or several (native_layer_norm's out, mean and rstd)."""
        outputs = [result] if isinstance(result, torch.Tensor) else list(result) if isinstance(result, (
            tuple, list)) else []
        single = isinstance(result, torch.Tensor)
        for k, t in enumerate(outputs):
            if isinstance(t, torch.Tensor):
                self.refs[(self.ops, k)] = Ref("step", index, None if single else k)
                self.produced.append(t)
        self.flow.produce(self.ops, [_value(t) if isinstance(t, torch.Tensor) else None for t in outputs])
        self.ops += 1


@dataclass(frozen=True)
class _Pending:
    """A tensor argument waiting for the dataflow to say where it comes from (slot ``slot`` of the op's
    linked arguments; made from ``spec`` where nothing produced it)."""

    slot: int
    spec: TensorSpec


# torch dtypes -> the profiler's 'Input type' strings: the dataflow's dtype names
_PROFILER_TYPES = {dtype: name for name, dtype in DTYPES.items()}


def _value(tensor: torch.Tensor) -> Value:
    return Value(tuple(tensor.shape), _PROFILER_TYPES.get(tensor.dtype, str(tensor.dtype)))


def _strides(strides: Any, dims: list[int]) -> tuple[int, ...] | None:
    """The recorded strides when they fit the shape, else None (contiguous)."""
    if isinstance(strides, list) and len(strides) == len(dims) and all(isinstance(s, int) and s >= 0 for s in strides):
        return tuple(strides)
    return None


def _index_bound(op: RecordedOp, role: OpRole, position: int) -> tuple[int | None, bool]:
    """For an index argument (the registry's ``OpRole.indexing``): the size of the dim it indexes and whether
    its indices must be unique (an in-place write by index)."""
    row = role.indexing
    if row is None or row[2] != position:
        return None, False
    source, dim_at, _ = row
    dims = op.dims[source] if source < len(op.dims) else None
    if not isinstance(dims, list) or not dims:
        return None, False
    dim = _literal(op.concrete[dim_at]) if dim_at is not None and dim_at < len(op.concrete) else 0
    dim = dim if isinstance(dim, int) else 0
    return dims[dim % len(dims)], op.name.endswith("_")


def _out_of_place(op: RecordedOp, reads_external_self: bool, registry: Registry) -> RecordedOp:
    """``add_`` on an external input is replayed as ``add`` (see the module docstring)."""
    if reads_external_self and op.name.endswith("_") and not registry.role(op.name).repeatable:
        functional = op.name[:-1]
        if registry.role(functional).replayable:
            return RecordedOp(functional, op.dims, op.types, op.concrete, op.strides)
    return op


# Per op of a chain, argument position -> the (step, output) of the chain that produced it (a TensorList's
# elements in order): the op graph's edges where an execution trace gives tensor identities.
Links = tuple[dict[int, list[tuple[int, int]]], ...]


def build_program(ops: Sequence[RecordedOp], registry: Registry, links: Links | None = None) -> Program:
    """The program that replays ``ops`` in order, with the op knowledge of ``registry``; its tensors linked
    by ``links`` (the op graph's, from an execution trace) where given, else by the shared shape-and-dtype
    dataflow. ReplayError names the first op it cannot replay."""
    recorded = [DTYPES[t] for op in ops if isinstance(op.types, list) for t in op.types if t in DTYPES]
    builder = _Builder(most_common_floating(recorded, torch.bfloat16), registry)
    for index, op in enumerate(ops):
        _add_step(builder, op, links[index] if links is not None else None)
    program = builder.program
    read = _read_refs(program)
    leaves = [ref for ref in builder.refs.values() if ref not in read and not _writes_input(program.steps[ref.index])]
    program.outputs = leaves + [Ref("input", i) for i in dict.fromkeys(builder.mutated)]
    if not program.outputs:
        raise ReplayError("the chain has no output to compare")
    program.precision = least_precise([t.dtype for t in _tensors(builder.meta.results)]
                                      + [builder.meta(ref).dtype for ref in program.outputs], builder.default_dtype)
    return program


def _read_refs(program: Program) -> set[Ref]:
    """The step outputs some step takes as an argument (however they were linked: the op graph's edges
    or the shape dataflow): the others are the chain's outputs."""
    read: set[Ref] = set()
    pending = [ref for step in program.steps for ref in (*step.args, *(r for _, r in step.kwargs))]
    while pending:
        ref = pending.pop()
        if ref.kind == "list":
            pending.extend(ref.value)
        elif ref.kind == "step":
            read.add(ref)
    return read


# floating dtypes from the least precise (fewest mantissa bits) up: a chain is as exact as its least
# precise tensor, so its outputs are checked at that dtype's tolerance
_PRECISION_ORDER = (torch.float8_e5m2, torch.float8_e4m3fn, torch.bfloat16, torch.float16, torch.float32, torch.float64)


def least_precise(dtypes: Sequence[torch.dtype], default: torch.dtype) -> torch.dtype:
    """The least precise floating dtype among ``dtypes`` (``default`` when none is floating)."""
    ranked = [d for d in _PRECISION_ORDER if d in set(dtypes)]
    return ranked[0] if ranked else default


def _writes_input(step: Step) -> bool:
    alias = step.fn._schema.arguments[0].alias_info if step.fn._schema.arguments else None
    return bool(step.args) and step.args[0].kind == "input" and alias is not None and alias.is_write


def _add_step(builder: _Builder, op: RecordedOp, links_of_op: dict[int, list[tuple[int, int]]] | None) -> None:
    if not (isinstance(op.dims, list) and isinstance(op.types, list)) or len(op.dims) != len(op.types):
        raise ReplayError(f"{op.name}: the trace recorded no input shapes (profile with record_shapes=True)")
    concrete = op.concrete if isinstance(op.concrete, list) else [""] * len(op.types)
    strides = op.strides if isinstance(op.strides, list) else [None] * len(op.types)
    op = RecordedOp(op.name, op.dims, op.types, concrete, strides)
    first = tensor_value(op.dims[0], op.types[0]) if op.types else None
    op = _out_of_place(op, first is not None and not builder.flow.has(first), builder.registry)
    role = builder.registry.role(op.name)
    overload, fn = resolve_overload(op, builder.registry)
    linked: list[Value | None] = []  # the op's tensor arguments, in order, for the dataflow
    skip: list[bool] = []
    planned: list[tuple[Any, Any]] = []  # (schema argument, its Ref or what is pending)
    for position, (arg, dims, kind, text, stride) in enumerate(zip(fn._schema.arguments, op.dims, op.types,
                                                                       concrete, strides)):
        planned.append((arg, _argument(builder, op, role, position, arg, dims, kind, text, stride, linked, skip)))
    links = builder.flow.link(linked, skip, role.reduces) if links_of_op is None else _given(
        planned, links_of_op, builder)

    def resolve(item: Any) -> Ref:
        if isinstance(item, _Pending):
            producer = links[item.slot]
            return builder.viewed(builder.refs[producer], item.spec) if producer is not None else builder.input_ref(
                item.spec)
        if isinstance(item, Ref) and item.kind == "list":
            return Ref("list", value=tuple(resolve(r) for r in item.value))
        return item  # type: ignore[no-any-return]

    refs = [(arg, resolve(item)) for arg, item in planned]
    args = tuple(ref for arg, ref in refs if not arg.kwarg_only)
    kwargs = tuple((arg.name, ref) for arg, ref in refs if arg.kwarg_only)
    step = Step(f"{op.name}.{overload}", fn, args, kwargs)
    try:
        result = builder.meta.call(step)
    except (RuntimeError, TypeError, ValueError, NotImplementedError, IndexError) as exc:
        raise ReplayError(f"{step.op}: the recorded arguments do not run ({str(exc).splitlines()[0]})") from None
    if any(t.device.type != "meta" for t in _tensors(result)):  # the build must never touch real memory
        raise ReplayError(f"{step.op}: made a tensor off the meta device while the replay was built; not replayed")
    builder.hold(_tensor_bytes(result))
    index = len(builder.program.steps)
    builder.program.steps.append(step)
    builder.meta.results.append(result)
    for _, ref in refs:
        if ref.kind == "buffer":  # an out= buffer the op resized: allocate it at its final size
            meta = builder.meta.buffers[ref.index]
            spec = builder.program.buffers[ref.index]
            builder.program.buffers[ref.index] = TensorSpec(tuple(meta.shape), tuple(meta.stride()), spec.dtype)
    if _writes_input(step):
        builder.mutated.append(step.args[0].index)
    builder.produce(index, result)


def _given(planned: list[tuple[Any, Any]], links_of_op: dict[int, list[tuple[int, int]]],
           builder: _Builder) -> list[Producer | None]:
    """Per pending slot, the producer the op graph names (argument position, then element of a TensorList),
    when that step's output is in the program; else None (an external input)."""
    found: list[Producer | None] = []
    for position, (_, item) in enumerate(planned):
        pending = list(item.value) if isinstance(item, Ref) and item.kind == "list" else [item]
        given = links_of_op.get(position, [])
        for k, p in enumerate(x for x in pending if isinstance(x, _Pending)):
            producer = given[k] if k < len(given) else None
            found.append(producer if producer is not None and producer in builder.refs else None)
    return found


def _argument(builder: _Builder, op: RecordedOp, role: OpRole, position: int, arg: Any, dims: Any, kind: Any,
              text: Any, stride: Any, linked: list[Value | None], skip: list[bool]) -> Ref | _Pending:
    """One schema argument: a Ref, or a tensor pending the dataflow (appended to ``linked``/``skip``)."""

    def pending(dims: list[int], dtype: torch.dtype, stride: Any, bound: int | None = None, unique: bool = False,
                external: bool = False, number: float | None = None) -> _Pending:
        linked.append(Value(tuple(dims), _PROFILER_TYPES.get(dtype, str(dtype))))
        skip.append(external)
        return _Pending(len(linked) - 1, TensorSpec(tuple(dims), _strides(stride, dims), dtype, bound, unique, number))

    if kind == "TensorList":
        if not isinstance(dims, list) or not all(isinstance(d, list) for d in dims):
            raise ReplayError(f"{op.name}: a TensorList without shapes")
        dims = [_checked_dims(op.name, d) for d in dims]
        strides = stride if isinstance(stride, list) and len(stride) == len(dims) else [None] * len(dims)
        return Ref("list", value=tuple(pending(d, builder.list_dtype(d), s) for d, s in zip(dims, strides)))
    if kind in DTYPES:
        dtype = DTYPES[kind]
        dims = _checked_dims(op.name, dims)
        if (role.first_argument == "overwritten" and position == 0) or (arg.kwarg_only and arg.name == "out"):
            return builder.buffer_ref(dims, dtype, stride)
        bound, unique = _index_bound(op, role, position)
        number = (role.wrapped_number if dtype.is_floating_point else 1) if (
            not dims and bound is None and dtype in _WRAPPED_NUMBERS) else None
        return pending(dims, dtype, stride, bound, unique, external=links_to_nothing(role, position),
                       number=number)  # external: a cache
    if "Device" in str(arg.type):  # recorded or not: the program's device (a factory's default is the CPU)
        return Ref("device")
    if kind == "":  # not recorded: the default where the schema has one, else None
        return Ref("value", value=arg.default_value if arg.has_default_value() else None)
    return Ref("value", value=_python_value(arg.name, text))

"""Dataflow by shape and dtype: which earlier output each tensor argument of an op is, when the trace
records no tensor identities (a Kineto trace records each op's shapes and dtypes, not which tensor).

One rule, used by every reader of dataflow (the op graph of a trace, the fusion finder's fused bytes,
the ``--verify`` replay), so they cannot disagree:

- a tensor argument is the output of an earlier op with the same shape and dtype — the latest one not
  yet consumed, else the latest one consumed, else the latest one a reduction consumed (in
  h · rsqrt(mean(h²)), the mul takes h, not h², which the mean reduced) — and one op never takes the
  same producer twice (in silu(gate) · up, ``up`` is not silu's output);
- an argument the op overwrites without reading (``copy_``'s destination: the registry's
  ``first_argument = "overwritten"``) or writes into by index (a KV cache: ``indexed write``) links to
  nothing: the first is a buffer the op fills, the second an external tensor it updates;
- where no producer fits, the argument is external (read from memory).

``infer_outputs`` gives an op's outputs the way the byte models assume them (the broadcast shape of its
tensor arguments in the first one's dtype — in arithmetic the widest floating one, as torch promotes mixed
precisions; a reduction drops its last dimension to 1; a matrix product the rows of its activation by the
columns of its weight), for readers that cannot run the op; the replay, which runs every op on meta tensors,
gives the real ones.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from fuseprof.model.op_models import DTYPE_BYTES, broadcast_shape
from fuseprof.model.registry import OpRole
from fuseprof.model.value_key import value_key


class Value(NamedTuple):
    """A tensor as a trace records it: its shape and the profiler's dtype name (``c10::BFloat16``). A named
    tuple: the dataflow hashes and compares Values hundreds of thousands of times on a long trace, and a
    tuple's hash and equality run in C (a frozen dataclass's are Python; a dict lookup cost 3.6× as much).
    Equal where the dataclass it was was equal, with the same hash."""

    dims: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        size = 1
        for d in self.dims:
            size *= d
        return size * DTYPE_BYTES.get(self.dtype, 0)


Producer = tuple[int, int]  # (node, which of its outputs)


def tensor_value(dims: Any, dtype: Any) -> Value | None:
    """The recorded argument as a Value, or None when it is no tensor of known dtype (a Python float is
    recorded as 'double' with no dims)."""
    if not isinstance(dims, list) or not dims or not all(type(d) is int for d in dims) or dtype not in DTYPE_BYTES:
        return None
    return Value(tuple(dims), str(dtype))


def tensor_arguments(dims: Any, types: Any) -> list[Value | None]:
    """Each recorded argument as a Value (None for a non-tensor)."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return []
    return [tensor_value(d, t) for d, t in zip(dims, types)]


def links_to_nothing(role: OpRole, position: int) -> bool:
    """Whether the argument at ``position`` is written by the op, never read from a producer."""
    return position == 0 and role.first_argument != "read"


def infer_outputs(role: OpRole, arguments: Sequence[Value | None]) -> list[Value]:
    """The op's output as the byte models assume it (module docstring); none for an indexed write (it
    updates its target in place) or an op with no tensor argument."""
    tensors = [v for v in arguments if v is not None]
    if not tensors or role.first_argument == "indexed write":
        return []
    gemm = role.gemm
    if gemm is not None and len(arguments) > max(gemm.activation, gemm.weight):
        a, b = arguments[gemm.activation], arguments[gemm.weight]
        if a is not None and b is not None:
            n = b.dims[0] if gemm.weight_layout == "NK" else b.dims[-1]
            return [Value((*a.dims[:-1], n), a.dtype)]
    out = broadcast_shape([list(v.dims) for v in tensors])
    if role.reduces and out:
        out = out[:-1] + [1]
    return [Value(tuple(out), promoted_dtype(role, tensors))]


_FLOAT_RANK = {"c10::Half": 1, "c10::BFloat16": 1, "float": 2, "double": 3}


def promoted_dtype(role: OpRole, tensors: Sequence[Value]) -> str:
    """The output dtype of ``role``'s op on its recorded tensor arguments: the first's, but for out-of-place
    arithmetic (``OpRole.promotes``, a registry row) the widest floating dtype among them — as torch promotes, half
    and bfloat16 together give float. A 0-dim tensor is recorded without dims and is no Value here, so it takes no part, as in torch. With
    the first's alone, an eager attention's bf16 scores plus its fp32 causal mask (``scores + mask``: fp32) read
    as bf16, the fp32 softmax after it had no producer, and the attention was not found."""
    first = tensors[0].dtype
    floats = {v.dtype for v in tensors if v.dtype in _FLOAT_RANK}
    if not role.promotes or not floats or floats == {first}:
        return first
    top = max(_FLOAT_RANK[d] for d in floats)
    widest = sorted(d for d in floats if _FLOAT_RANK[d] == top)
    return "float" if len(widest) > 1 else widest[0]


class RecordedShapes:
    """Each op's recorded arguments (``tensor_arguments``) and outputs (``infer_outputs``), worked out once per
    distinct (op, dims, types): a trace repeats the same few shapes step after step, and the recorded lists'
    text (``value_key``) is cheaper to look up than the Values are to build. Kept by one pass over a trace (not
    process-wide: a long-lived process reads many traces)."""

    def __init__(self) -> None:
        self._arguments: dict[bytes | str, tuple[Value | None, ...]] = {}
        self._outputs: dict[tuple[str, bytes | str], tuple[Value, ...]] = {}
        self._by_identity: dict[tuple[int, int], tuple[Any, Any, bytes | str]] = {}

    def arguments(self, dims: Any, types: Any) -> tuple[Value | None, ...]:
        return self._arguments_of(self._key(dims, types), dims, types)

    def _key(self, dims: Any, types: Any) -> bytes | str:
        """``value_key`` of the pair, remembered per pair of list objects: the decoder gives ops that recorded one
        text one list (``fuseprof.parse.shared_lists``), so most ops hand over objects seen already. The pair is
        held with its key, so its ids stay theirs while this lives."""
        pair = (id(dims), id(types))
        held = self._by_identity.get(pair)
        if held is not None and held[0] is dims and held[1] is types:
            return held[2]
        key = value_key((dims, types))
        self._by_identity[pair] = (dims, types, key)
        return key

    def of(self, op: str, role: OpRole, dims: Any, types: Any) -> tuple[tuple[Value | None, ...], tuple[Value, ...]]:
        """The op's recorded arguments and ``infer_outputs`` of them (``role``: ``op``'s in the registry): the
        recorded lists' text made once for both."""
        key = self._key(dims, types)
        arguments = self._arguments_of(key, dims, types)
        found = self._outputs.get((op, key))
        if found is None:
            found = self._outputs[(op, key)] = tuple(infer_outputs(role, arguments))
        return arguments, found

    def _arguments_of(self, key: bytes | str, dims: Any, types: Any) -> tuple[Value | None, ...]:
        found = self._arguments.get(key)
        if found is None:
            found = self._arguments[key] = tuple(tensor_arguments(dims, types))
        return found


class ShapeDataflow:
    """Links the tensor arguments of ops, fed in program order, to earlier outputs (module docstring)."""

    def __init__(self, reshapes: bool = False) -> None:
        """``reshapes``: where no output has an argument's shape, take one of another shape with as many
        elements, as wide a last dimension and the dtype (a view that only regroups rows: [B·L, N] read as
        [B, L, N]) — for ops whose views the trace does not hold (a graph replay's)."""
        self._reshapes = reshapes
        self._by_size: dict[tuple[int, int, str], set[Value]] = {}
        self._outputs: dict[Value, list[Producer]] = {}  # every output so far, by value, in order
        self._consumed: set[Producer] = set()
        self._reduced: set[Producer] = set()  # outputs a reduction consumed
        self._fresh: dict[Value, list[Producer]] = {}  # outputs not yet consumed, by value (pruned lazily)
        self._by_dims: dict[tuple[int, ...], set[Value]] = {}  # the values of each shape (TensorLists' lookup)

    def consumed(self, producer: Producer) -> bool:
        """Whether a later op took this output."""
        return producer in self._consumed

    def has(self, value: Value) -> bool:
        """Whether an earlier op produced a tensor of this shape and dtype."""
        return bool(self._outputs.get(value))

    def link(self, arguments: Sequence[Value | None], skip: Sequence[bool] = (), reduces: bool = False) -> list[
            Producer | None]:
        """Per argument, the producer it is (None: external, skipped, or no tensor). ``skip`` marks the
        arguments that link to nothing (``links_to_nothing``, or known to come from outside); ``reduces``:
        the op is a reduction (what it consumes is taken last from then on). Marks the producers consumed."""
        taken: set[Producer] = set()
        found: list[Producer | None] = []
        for position, value in enumerate(arguments):
            if value is None or (position < len(skip) and skip[position]):
                found.append(None)
                continue
            pick = self._pick(value, taken)
            if pick is None and self._reshapes:
                picks = [p for v in self._by_size.get(_size_key(value), ()) if (p := self._pick(v, taken)) is not None]
                pick = max(picks, key=lambda p: (not self.consumed(p), p[0])) if picks else None
            if pick is not None:
                taken.add(pick)
            found.append(pick)
        for pick in taken:
            self._consumed.add(pick)
            if reduces:
                self._reduced.add(pick)
        return found

    def link_list(self, shapes: Sequence[Any]) -> list[Producer]:
        """The producers of a TensorList argument's tensors (a trace records their shapes, not their dtypes:
        each is the latest output of that shape in any dtype, by the rule of ``link``). Marks them consumed."""
        found: list[Producer] = []
        taken: set[Producer] = set()
        for dims in shapes:
            if not isinstance(dims, list) or not dims or not all(type(d) is int for d in dims):
                continue
            picks = [p for v in self._by_dims.get(tuple(dims), ()) if (p := self._pick(v, taken)) is not None]
            if picks:
                pick = max(picks, key=lambda p: (not self.consumed(p), p[0]))
                taken.add(pick)
                found.append(pick)
        self._consumed.update(taken)
        return found

    def source(self, value: Value | None) -> Producer | None:
        """The producer ``link`` would give a lone argument of this value, without marking it consumed (what a
        view reads)."""
        return None if value is None else self._pick(value, set())

    def _pick(self, value: Value, taken: set[Producer]) -> Producer | None:
        """The latest output of this value not in ``taken``: unconsumed first, then consumed, then reduced
        (the rule of the module docstring), scanning back only as far as the first unconsumed one."""
        fresh = self._fresh.get(value)
        if fresh:
            fresh[:] = [p for p in fresh if p not in self._consumed]  # consumed since: dropped here, lazily
            for p in reversed(fresh):
                if p not in taken:
                    return p
        best: Producer | None = None
        for p in reversed(self._outputs.get(value, ())):
            if p in taken:
                continue
            if p not in self._reduced:
                return p
            best = best or p
        return best

    def alias(self, producer: Producer, values: Sequence[Value]) -> None:
        """Record ``values`` (a view's shapes) as the same output of ``producer``: an op reading the view reads it."""
        for value in values:
            self._outputs.setdefault(value, []).append(producer)
            self._by_dims.setdefault(value.dims, set()).add(value)
            self._by_size.setdefault(_size_key(value), set()).add(value)
            if producer not in self._consumed:
                self._fresh.setdefault(value, []).append(producer)

    def produce(self, node: int, outputs: Sequence[Value | None]) -> None:
        """Record node ``node``'s outputs (None: an output that is no tensor)."""
        for k, value in enumerate(outputs):
            if value is not None:
                self._outputs.setdefault(value, []).append((node, k))
                self._by_dims.setdefault(value.dims, set()).add(value)
                self._by_size.setdefault(_size_key(value), set()).add(value)
                self._fresh.setdefault(value, []).append((node, k))


def _size_key(value: Value) -> tuple[int, int, str]:
    numel = 1
    for d in value.dims:
        numel *= d
    return numel, value.dims[-1] if value.dims else 1, value.dtype


def _size(text: Any, numel: int) -> list[int] | None:
    """A recorded size argument ('[8, 512, -1]') as ints, a -1 filled in from the element count."""
    value = _literal(text)
    if not isinstance(value, (list, tuple)) or not all(type(v) is int for v in value):
        return None
    size = list(value)
    if size.count(-1) == 1:
        known = 1
        for v in size:
            known *= v if v != -1 else 1
        size[size.index(-1)] = numel // known if known else 0
    return size


def _literal(text: Any) -> Any:
    if not isinstance(text, str) or len(text) > 2_000:
        return text
    return _parsed(text)


@lru_cache(maxsize=4096)
def _parsed(text: str) -> Any:
    """A recorded concrete argument as a Python value (a trace repeats the same few thousands of them)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


VIEW_RULES = ("size", "same", "t", "transpose", "permute", "unsqueeze", "squeeze", "expand", "select", "slice",
              "narrow")  # the rules view_shape knows: a registry file's OpRole.view is one of them


def view_shape(rule: str, dims: Any, concrete: Any) -> tuple[int, ...] | None:
    """The shape of a view op's output, by the registry's rule for it (``OpRole.view``): ``size`` (the size
    argument: view, reshape, as_strided), ``transpose``, ``t``, ``permute``, ``unsqueeze``, ``squeeze``,
    ``expand``, ``select``, ``slice``, ``narrow`` or ``same``; None when the recorded arguments do not say."""
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return None
    x, recorded = list(dims[0]), concrete if isinstance(concrete, list) else []
    numel = 1
    for d in x:
        numel *= d if isinstance(d, int) else 0

    def arg(i: int) -> Any:
        return _literal(recorded[i]) if i < len(recorded) else None

    def dim(i: int, rank: int) -> int | None:
        v = arg(i)
        return v % rank if type(v) is int and rank else None

    try:
        if rule == "size":
            size = _size(concrete[1] if isinstance(concrete, list) and len(concrete) > 1 else None, numel)
            return tuple(size) if size is not None else None
        if rule == "same":
            return tuple(x)
        if rule == "t":
            return tuple(reversed(x))
        if rule == "transpose" and (a := dim(1, len(x))) is not None and (b := dim(2, len(x))) is not None:
            x[a], x[b] = x[b], x[a]
            return tuple(x)
        if rule == "permute" and isinstance(arg(1), (list, tuple)):
            return tuple(x[d % len(x)] for d in arg(1))
        if rule == "unsqueeze" and (a := dim(1, len(x) + 1)) is not None:
            return tuple(x[:a] + [1] + x[a:])
        if rule == "squeeze":
            a = dim(1, len(x))
            return tuple(d for i, d in enumerate(x) if d != 1 or (a is not None and i != a))
        if rule == "expand" and isinstance(arg(1), (list, tuple)):
            size, padded = list(arg(1)), [1] * (len(arg(1)) - len(x)) + x
            return tuple(p if s == -1 else s for p, s in zip(padded, size))
        if rule == "select" and (a := dim(1, len(x))) is not None:
            return tuple(x[:a] + x[a + 1:])
        if rule == "narrow" and (a := dim(1, len(x))) is not None and type(arg(3)) is int:
            x[a] = arg(3)
            return tuple(x)
        if rule == "slice" and (a := dim(1, len(x))) is not None:
            start, end, step = arg(2) or 0, arg(3), arg(4) or 1
            end = x[a] if end is None or end > x[a] else end + x[a] if end < 0 else end
            start = start + x[a] if start < 0 else start
            x[a] = max(0, (end - start + step - 1) // step)
            return tuple(x)
    except (TypeError, ValueError, IndexError):
        return None
    return None

"""The op registry: everything fuseprof knows about ops and kernels, as one frozen value.

A ``Registry`` holds
- ``families``: op and kernel-name families, each with its category, cost model (FLOPs and bytes from
  recorded shapes, ``fuseprof.model.op_models``) and fusion role (``anchor`` families — GEMM,
  convolution, attention, communication — end a fusion chain). A GPU event is matched by the CPU op
  that launched it first (``aten::addmm`` is a GEMM whatever the library names its kernel), then by its
  kernel name (graph-replayed and Inductor kernels have no op of their own); the first matching row wins.
- ``roles``: what an op does to its tensors, by exact op name (``OpRole``): which argument it
  overwrites, whether it reduces, gathers or writes into a cache by index, its GEMM operands, whether it
  can be a GEMM's epilogue, whether a ``--verify`` replay may run it at all;
- ``op_kinds`` and ``kind_rules``: what each op or kernel computes, as the kinds the fusion patterns of
  the op graph read (``OpKinds``, ``KindRule``: ``silu``, ``mul``, ``rms norm``, ``rotary``, ``cache write``);
- ``host_causes``: what the host calls and ranges an idle GPU waits through mean (``HostCause``: a
  synchronising copy, the DataLoader, the allocator, an event wait);
- ``optimizers``: what an optimizer step moves per parameter (``OptimizerModel``: its state tensors; what fuses
  it), by the optimizer's range (``fuseprof.analysis.judgements.optimizer``);
- ``phase_ranges``: the ranges that mark a training step's phases beyond what autograd records
  (``PhaseRange``: ``Optimizer.step#…`` is the optimizer; ``fuseprof.analysis.facts.phases``);
- ``iteration_ranges``: the ranges that mark one iteration of a loop (``IterationRange``: torch.profiler's
  ``ProfilerStep#N``, a serving engine's own step; ``fuseprof.analysis.facts.iterations``);
- the fusion catalogue the audit reads (``CatalogueEntry``: which pattern finds each fusion), the kernels known to fuse a chain
  (``KnownFusion``), fuseprof's own kernels that compute a replayed chain (``KernelMatch``) and the named
  chain classes (``ChainClass``).

Every judgement reads op knowledge from the registry it is given, and from nowhere else; the default
tables are ``fuseprof.model.registry_data``. A user extends a registry into a new one, in code::

    from fuseprof.model.registry import OpFamily, OpRole
    from fuseprof.model.registry_data import DEFAULT
    from fuseprof.model.op_models import Elementwise
    mine = DEFAULT.extend(families=[OpFamily("elementwise", op=r"^mylib::fused_gelu$", cost=Elementwise(8))],
                          roles=[OpRole("mylib::fused_gelu", epilogue=True)])
    fuseprof.analyze("trace.json.gz", registry=mine)

or in a TOML file given to any trace verb as ``--registry FILE`` (``fuseprof.model.registry_schema.load_registry``; the format and a
worked example are in docs/registry.md). A registry's ``fingerprint`` is part of the name a stored analysis is kept under, so an
extended registry never gets an answer made with another one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from fuseprof.errors import InvalidArgumentError
from fuseprof.model.inductor_names import operators
from fuseprof.model.op_models import CostModel, Estimate, OpInputs

if TYPE_CHECKING:  # classify takes pandas columns; the registry itself needs no pandas
    import pandas as pd

CATEGORIES = ("GEMM", "convolution", "attention", "normalization", "elementwise", "reduction", "copy/cast",
              "memcpy", "memset", "communication", "MoE", "other")  # MoE: routing, sorting, finalize (not its GEMMs)
ANCHOR_CATEGORIES = frozenset({"GEMM", "convolution", "attention", "communication"})


def _check_patterns(what: str, *patterns: str) -> None:
    """A row's regular expressions compile, else one line naming the row."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidArgumentError(f"{what}: a bad regular expression {pattern!r} ({exc})") from None


@dataclass(frozen=True)
class OpFamily:
    """Events whose launching op matches ``op`` or whose kernel name matches ``kernel`` (regular
    expressions, searched; the kernel's case-insensitively; either may be empty) are ``category``;
    ``cost`` gives an op's FLOPs and bytes from its shapes; ``role`` is ``anchor`` or ``fusible``
    (empty: from the category); ``family`` names the library or vendor in tables."""

    category: str
    op: str = ""
    kernel: str = ""
    cost: CostModel | None = None
    role: str = ""
    family: str = ""
    _op: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _kernel: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise InvalidArgumentError(f"op family {self.family or self.op or self.kernel!r}: category "
                                       f"{self.category!r} is not one of {', '.join(CATEGORIES)}")
        try:
            object.__setattr__(self, "_op", re.compile(self.op) if self.op else None)
            object.__setattr__(self, "_kernel", re.compile(self.kernel, re.IGNORECASE) if self.kernel else None)
        except re.error as exc:
            raise InvalidArgumentError(f"op family {self.family or self.category!r}: a bad regular expression "
                                       f"({exc})") from None
        object.__setattr__(self, "role", self.role or ("anchor" if self.category in ANCHOR_CATEGORIES else "fusible"))


@dataclass(frozen=True)
class GemmOperands:
    """Where a matrix product's operands sit among its arguments: the activation (the input the model
    computed), the weight (or second operand), whether that weight is stored N×K (``F.linear``) or K×N,
    and whether the product is batched (``bmm``: QKᵀ and ·V of an eager attention)."""

    activation: int = 0
    weight: int = 1
    weight_layout: Literal["KN", "NK"] = "KN"
    batched: bool = False


@dataclass(frozen=True)
class OpRole:
    """What one op (by exact name) does to its tensors.

    ``first_argument``: ``read`` (an ordinary input), ``overwritten`` (written whole, never read: the
    destination of ``copy_``, ``fill_``, ``zero_``) or ``indexed write`` (rows written in place by index:
    a cache, ``index_copy_``, ``scatter_``); ``accumulates``: an indexed write that adds (``index_add_``);
    ``reduces``: the output drops the reduced (last) dimension (``mean``, ``sum``, ``amax``);
    ``gathers``: reads only the rows it gathers (``index_select``, ``embedding``); ``indexing``: (argument
    holding the indexed tensor, argument holding the dim or None for 0, index argument);
    ``gemm``: the operands of a matrix product; ``epilogue``: an elementwise op a GEMM's epilogue can do;
    ``softmax``: a softmax (eager attention's middle); ``functional_inputs``: how many inputs the op's
    functional form takes (Inductor calls the ``out=`` overload, which records one more); ``causal``:
    (argument, the recorded values that mean a causal mask); ``replayable``: a ``--verify`` replay may
    run it — it computes on the tensors it is given and touches nothing else (no file, process,
    network, device setting or RNG state); ``view``: the op returns a view of its first input, shaped by
    this rule (``fuseprof.model.dataflow.view_shape``); ``wrapped_number``: what an unrecorded Python float
    passed where a tensor goes stands for in a ``--verify`` replay (the profiler records no value for it):
    1.0 keeps a scale or a divisor neutral, so a chain's values stay in its dtypes' range (a float8 cast
    of x / (amax / 448) is not all zeros); a norm's ``+ eps`` is 1e-6; ``promotes``: out-of-place arithmetic whose
    output takes the widest floating dtype of its tensor arguments, as torch promotes (bf16 scores + an fp32 mask is
    fp32; ``fuseprof.model.dataflow.promoted_dtype``), where other ops keep their first argument's."""

    name: str
    first_argument: Literal["read", "overwritten", "indexed write"] = "read"
    accumulates: bool = False
    reduces: bool = False
    gathers: bool = False
    indexing: tuple[int, int | None, int] | None = None
    gemm: GemmOperands | None = None
    epilogue: bool = False
    softmax: bool = False
    functional_inputs: int | None = None
    causal: tuple[int, tuple[str, ...]] | None = None
    replayable: bool = False
    view: str = ""  # a view's shape rule (fuseprof.model.dataflow.view_shape): the op graph reads through it
    wrapped_number: float = 1.0
    promotes: bool = False

    @property
    def repeatable(self) -> bool:
        """Calling it twice gives what calling it once gave (its first argument is overwritten, not read)."""
        return self.first_argument == "overwritten" or (self.first_argument == "indexed write" and not self.accumulates)


@dataclass(frozen=True)
class OpKinds:
    """What an op (``op``: a regex searched in its name) or, for a kernel with no op of its own or whose op
    no row names, a kernel (``kernel``: searched case-insensitively) computes, as *kinds* the fusion
    patterns read (``fuseprof.analysis.judgements.patterns``): ``kinds`` given outright; ``named``: a group of the
    match whose text is one more kind (an aten op computes what it is called: ``aten::silu_`` is
    ``silu``); ``listed``: a group whose text lists more, operator names joined by ``_`` (the ops an Inductor
    kernel's name says it fused: ``triton_poi_fused_index_copy_mul_silu_3`` computes ``index_copy``, ``mul`` and
    ``silu``; read back against torch's operator names by ``fuseprof.model.inductor_names``, leading and trailing
    underscores dropped)."""

    op: str = ""
    kernel: str = ""
    kinds: tuple[str, ...] = ()
    named: str = ""
    listed: str = ""
    _op: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _kernel: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_patterns(f"op kinds {self.op or self.kernel!r}", self.op, self.kernel)
        object.__setattr__(self, "_op", re.compile(self.op) if self.op else None)
        object.__setattr__(self, "_kernel", re.compile(self.kernel, re.IGNORECASE) if self.kernel else None)

    def kinds_of(self, match: re.Match[str]) -> set[str]:
        found = set(self.kinds)
        if self.named and match.group(self.named):
            found.add(match.group(self.named))
        if self.listed and match.group(self.listed):
            ops, unknown = operators(match.group(self.listed))
            found |= {t.strip("_") for t in (*ops, *unknown) if t.strip("_")}
        return found


@dataclass(frozen=True)
class KindRule:
    """A kind implied by others: ``kind`` holds for a unit computing any of ``any_of``, or all of ``all_of``
    (a unit computing ``silu`` is an ``activation``; one computing ``pow``, ``mean`` and ``rsqrt`` is an
    ``rms norm``, as an Inductor kernel that fused the decomposed norm is)."""

    kind: str
    any_of: tuple[str, ...] = ()
    all_of: tuple[str, ...] = ()


CATALOGUE_PATTERNS = ("add_rmsnorm", "silu_mul", "gate_up", "qkv", "attention", "epilogue", "rope_cache",
                      "dequant_gemm", "sampling", "optimizer", "clip", "zero_grad", "grad_scaler", "linear_ce", "cross_entropy", "chain",
                      "kernels")  # fuseprof.analysis.judgements.patterns.PATTERNS' names (a test keeps the two one list)


@dataclass(frozen=True)
class CatalogueEntry:
    """A fusion of the audit's catalogue: ``pattern`` names the dataflow pattern that finds it, fused and
    unfused, in the op graph (``fuseprof.analysis.judgements.patterns.PATTERNS``; ``kernels`` for an entry that is only
    a set of kernels); ``fused``: a regex (searched case-insensitively in kernel names and launching ops)
    for kernels that do it, beyond the kinds the pattern reads (an engine's own kernel is a row away);
    ``region``: a regex on the user annotations a pattern's ops run inside (``Optimizer.step#``);
    ``kinds``: what the ``chain`` pattern follows — a unit computing the first feeding (through casts) one
    computing the second, and so on (``("add", "native_layer_norm")``: add + LayerNorm)."""

    name: str
    pattern: str = "kernels"
    fused: str = ""
    region: str = ""
    kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_patterns(f"catalogue entry {self.name!r}", self.fused, self.region)


@dataclass(frozen=True)
class HostCause:
    """What a host call or range means for an idle GPU (``fuseprof.analysis.facts.idle``): ``cause`` (``sync``: the
    host blocked on the GPU; ``data loading``: it waited for input; ``start-up``: it did one-time CUDA start-up
    (context, handles, module loading; any call of a second or more that does not wait for the GPU as well);
    ``allocator``: it allocated or freed device memory; ``event wait``: it queued the next work behind an event)
    for runtime/driver calls matching ``calls`` or user annotations matching ``ranges`` (regular expressions,
    searched)."""

    cause: Literal["sync", "data loading", "start-up", "allocator", "event wait"]
    calls: str = ""
    ranges: str = ""

    def __post_init__(self) -> None:
        _check_patterns(f"host cause {self.cause!r}", self.calls, self.ranges)


@dataclass(frozen=True)
class OptimizerModel:
    """One optimizer's step as a fused kernel would run it, for steps whose range matches ``ranges`` (a regular
    expression searched in the range's name: torch.optim writes ``Optimizer.step#AdamW.step``): per parameter
    element it reads the weight, its gradient and ``states`` state tensors and writes the weight and the states —
    ``(3 + 2 · states)`` elements (Adam/AdamW: m and v, 7; SGD with momentum: 5) — and ``fused`` runs it so
    (``fuseprof.analysis.judgements.optimizer``)."""

    ranges: str
    states: int
    fused: str = ""

    def __post_init__(self) -> None:
        _check_patterns(f"optimizer model {self.ranges!r}", self.ranges)
        if self.states < 0:
            raise InvalidArgumentError(f"optimizer model {self.ranges!r}: states must be 0 or more")

    def elements_moved(self, parameters: int) -> int:
        """Elements a fused step reads and writes over ``parameters`` elements."""
        return parameters * (3 + 2 * self.states)


@dataclass(frozen=True)
class PhaseRange:
    """The phase of GPU work launched inside a ``record_function`` range matching ``ranges`` (a regular
    expression, searched): ``optimizer`` (the optimizer's step and zero_grad). Backward is autograd's own record
    (``autograd::engine::evaluate_function``), forward what a step launches before it (``fuseprof.analysis.facts.phases``)."""

    phase: Literal["optimizer"]
    ranges: str

    def __post_init__(self) -> None:
        _check_patterns(f"phase range {self.phase!r}", self.ranges)


@dataclass(frozen=True)
class IterationRange:
    """A ``record_function`` range that marks one iteration of a loop — a training step, an engine's decode
    step — written by ``source`` (``torch.profiler``, ``SGLang``, ``vLLM``) under names matching ``ranges`` (a
    regular expression, searched). ``default``: the tables cover only these iterations unless ``--window`` says
    otherwise (torch.profiler's steps, as TraceLens and HTA analyse them); an engine's steps are shown per step
    while the tables keep the whole trace (``fuseprof.analysis.facts.iterations``)."""

    source: str
    ranges: str
    default: bool = False

    def __post_init__(self) -> None:
        _check_patterns(f"iteration range {self.source!r}", self.ranges)


_OP_NAME = re.compile(r"[A-Za-z_]\w*::\w+")


@functools.lru_cache(maxsize=None)
def _needed_ops(pattern: str) -> tuple[frozenset[str], ...] | None:
    """Per top-level alternative of a known fusion's pattern, the op names it holds literally; None where the
    pattern holds more than op names, ' → ' and ``.*`` (groups, classes, optional parts: only the regex says)."""
    needed = []
    for alternative in pattern.split("|"):
        names = [t for t in re.split(r"\s*→\s*|\.\*", alternative) if t]
        if not names or not all(_OP_NAME.fullmatch(t) for t in names):
            return None
        needed.append(frozenset(names))
    return tuple(needed)


def _may_match(pattern: str, signature: str) -> bool:
    """Whether ``signature`` can match ``pattern``: False only when every alternative names an op that is
    nowhere in the signature's text (a regex's literal must appear, even as part of a longer name)."""
    needed = _needed_ops(pattern)
    return needed is None or any(all(name in signature for name in names) for names in needed)


@dataclass(frozen=True)
class KnownFusion:
    """A kernel that already fuses chains whose signature matches ``pattern`` (a regex over the op names
    joined by ' → ')."""

    pattern: str
    kernel: str

    def __post_init__(self) -> None:
        _check_patterns(f"known fusion {self.kernel!r}", self.pattern)


@dataclass(frozen=True)
class KernelArgument:
    """One argument of a fuseprof kernel, taken from a replayed chain: argument ``argument`` of the
    chain's ``step`` (``first``, ``last`` or an index), or that step's external input (``argument =
    "input"``), as 2-D rows when ``rows`` (fuseprof's row kernels take (M, N))."""

    step: Literal["first", "last"] | int
    argument: int | Literal["input"]
    rows: bool = True


@dataclass(frozen=True)
class KernelMatch:
    """fuseprof's own kernel for chains whose whole signature matches ``pattern``: the built-in ``case``
    and ``variant`` to call, its arguments from the replay, and which of its results is the chain's
    output (None: the result itself)."""

    pattern: str
    case: str
    variant: str
    arguments: tuple[KernelArgument, ...]
    output: int | None = None

    def __post_init__(self) -> None:
        _check_patterns(f"kernel match {self.case}:{self.variant}", self.pattern)
        from fuseprof.builtin_cases import builtin_case_names

        known = builtin_case_names()  # a registry names no code to run: a path or module here would be imported
        if not isinstance(self.case, str) or not self.case.isidentifier() or (known and self.case not in known):
            raise InvalidArgumentError(f"case: a registry may name only a built-in case (fuseprof cases: "
                                       f"{', '.join(known) or 'none installed'}), not {self.case!r}")


@dataclass(frozen=True)
class ChainClass:
    """A named kind of memory-bound chain: every op of ``all_of`` and at least one of ``any_of`` (when
    given) among its ops. Checked in order; a chain of no class is a plain memory-bound chain. A ``backward``
    class is matched against the forward ops a backward chain differentiates (autograd's sequence numbers:
    ``fuseprof.analysis.facts.phases``), not its own gradient ops; ``fused_by`` names what fuses the class where no
    known fusion names its ops."""

    name: str
    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    backward: bool = False
    fused_by: str = ""


_KIND_FAMILIES = {kind: OpFamily(kind, family=kind) for kind in ("memcpy", "memset")}
FALLBACK = OpFamily("other", family="(no rule)")
_NO_ROLE = OpRole("")
_KEY = msgspec.json.Encoder().encode
_ESTIMATES: dict[tuple[Any, ...], Estimate | None] = {}


def _inputs_key(dims: Any, types: Any, concrete: Any) -> bytes | str:
    """The recorded inputs as one hashable text: msgspec's JSON (8× faster than formatting the lists),
    or their repr where a value is not JSON (a numpy scalar from a hand-made frame)."""
    try:
        return _KEY((dims, types, concrete))
    except TypeError:
        return f"{dims}|{types}|{concrete}"


def _identity(value: Any) -> Any:
    """A value as plain data for the fingerprint: dataclasses field by field, a function by its module,
    name and code (the same code gives the same fingerprint from run to run; any edit changes it)."""
    if is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, {f.name: _identity(getattr(value, f.name)) for f in fields(value)
                                       if not f.name.startswith("_")}]
    if isinstance(value, (list, tuple)):
        return [_identity(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _identity(v) for k, v in sorted(value.items())}
    if callable(value):
        code = getattr(value, "__code__", None)
        body = hashlib.blake2b((code.co_code + repr(code.co_consts).encode()) if code else repr(value).encode(),
                               digest_size=8).hexdigest()
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}#{body}"
    return value


@dataclass(frozen=True)
class Registry:
    """Op and kernel knowledge as one value (the module docstring)."""

    families: tuple[OpFamily, ...]
    roles: tuple[OpRole, ...] = ()
    catalogue: tuple[CatalogueEntry, ...] = ()
    known_fusions: tuple[KnownFusion, ...] = ()
    kernel_matches: tuple[KernelMatch, ...] = ()
    chain_classes: tuple[ChainClass, ...] = ()
    op_kinds: tuple[OpKinds, ...] = ()
    kind_rules: tuple[KindRule, ...] = ()
    host_causes: tuple[HostCause, ...] = ()
    phase_ranges: tuple[PhaseRange, ...] = ()
    iteration_ranges: tuple[IterationRange, ...] = ()
    optimizers: tuple[OptimizerModel, ...] = ()
    default_fusion: str = "torch.compile"  # what fuses a chain no known fusion names
    _by_name: dict[str, OpRole] = field(default_factory=dict, init=False, repr=False, compare=False)
    _cost_rows: dict[str, OpFamily | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    _fingerprint: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _kinds: dict[tuple[str, tuple[str, ...]], frozenset[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({r.name: r for r in self.roles})

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (sent to a worker process with each trace) as its fields and fingerprint, without its memos; a
        process that already received it gets that one back (``_received``), its memos and fingerprint warm: a
        copy per rank cost ~10 ms of every rank (5 ms the fingerprint, the rest unpickling and matches made
        again)."""
        return _received, (self.fingerprint(), {f.name: getattr(self, f.name) for f in fields(self) if f.init})

    # --- what an op or kernel is

    def role(self, op: str | None) -> OpRole:
        """The op's role, or a plain one (reads its inputs, nothing more is known) for an op with no row."""
        return self._by_name.get(op or "", _NO_ROLE)

    def optimizer(self, range_name: str) -> OptimizerModel | None:
        """The model of the optimizer whose step range is ``range_name`` (the first row matching), or None."""
        return next((m for m in self.optimizers if re.search(m.ranges, range_name)), None)

    def match(self, kind: str, op: str, kernel: str) -> OpFamily:
        """The family of one GPU event: memcpy and memset by kind, else the first row matching its op,
        else the first matching its kernel name, else 'other'."""
        if kind in _KIND_FAMILIES:
            return _KIND_FAMILIES[kind]
        for row in self.families:
            if row._op is not None and op and row._op.search(op):
                return row
        for row in self.families:
            if row._kernel is not None and row._kernel.search(kernel):
                return row
        return FALLBACK

    def kinds(self, op: str | None, kernels: Iterable[str] = ()) -> frozenset[str]:
        """What a unit computes (``OpKinds``, then ``KindRule``): by its op where a row names the op, else by
        its kernels' names (remembered per op and kernel)."""
        names = tuple(sorted(set(kernels)))
        key = (op or "", names)  # the names as a tuple: hashed from their cached hashes, no kilobytes joined
        if key not in self._kinds:
            found: set[str] = set()
            for row in self.op_kinds:
                hit = row._op.search(op) if row._op is not None and op else None
                if hit:
                    found |= row.kinds_of(hit)
            if not found:
                for row in self.op_kinds:
                    for name in names:
                        hit = row._kernel.search(name) if row._kernel is not None else None
                        if hit:
                            found |= row.kinds_of(hit)
            for rule in self.kind_rules:
                if (rule.any_of and found & set(rule.any_of)) or (rule.all_of and set(rule.all_of) <= found):
                    found.add(rule.kind)
            self._kinds[key] = frozenset(found)
        return self._kinds[key]

    def cost_family(self, op: str) -> OpFamily | None:
        """The first family whose op pattern matches ``op`` and that has a cost model (remembered per op)."""
        if op not in self._cost_rows:
            self._cost_rows[op] = next((row for row in self.families if row.cost is not None and row._op is not None
                                        and row._op.search(op)), None)
        return self._cost_rows[op]

    def estimate(self, op: str, dims: Any, types: Any, concrete: Any) -> Estimate | None:
        """The op's analytic cost from its recorded inputs, or None (no model, or no shapes recorded).

        Memoised on the cost model, the causal rule and the inputs: a decode trace repeats a few hundred
        distinct calls tens of thousands of times, and the per-op roofline and the fusion finder both ask."""
        if not isinstance(dims, list) or not isinstance(types, list):
            return None
        row = self.cost_family(op)
        if row is None or row.cost is None:
            return None
        causal = self.role(op).causal
        key = (row.cost, causal, _inputs_key(dims, types, concrete))
        if key not in _ESTIMATES:
            if len(_ESTIMATES) > 100_000:
                _ESTIMATES.clear()
            values = concrete if isinstance(concrete, list) else []
            is_causal = causal is not None and causal[0] < len(values) and str(values[causal[0]]) in causal[1]
            try:
                _ESTIMATES[key] = row.cost(OpInputs(dims, types, values, is_causal))
            except (TypeError, ValueError, IndexError):
                _ESTIMATES[key] = None  # shapes of an unexpected form: no estimate rather than a wrong one
        return _ESTIMATES[key]

    def known_fusion(self, signature: str) -> str:
        """The kernel that already fuses a chain of this signature (``default_fusion`` when none is known). A
        pattern that names ops the chain lacks is not searched: ``.*`` in a regex costs the square of a long
        signature's length (minutes on a 100,000-kernel chain)."""
        return next((row.kernel for row in self.known_fusions if _may_match(row.pattern, signature)
                     and re.search(row.pattern, signature)), self.default_fusion)

    def chain_class(self, ops: Iterable[str], differentiates: Iterable[str] | None = None) -> ChainClass | None:
        """The class of a chain of these ops (None: a plain memory-bound chain); of a backward chain (the forward
        ops it ``differentiates`` given), the first backward class its forward ops match."""
        present = set(ops) if differentiates is None else set(differentiates)
        for row in self.chain_classes:
            if row.backward == (differentiates is not None) and set(row.all_of) <= present and (
                    not row.any_of or present & set(row.any_of)):
                return row
        return None

    # --- a value that says what it holds

    def fingerprint(self) -> str:
        """A short hash of everything the registry holds: equal registries, equal fingerprints, run to run."""
        if not self._fingerprint:
            text = json.dumps(_identity({f.name: getattr(self, f.name) for f in fields(self) if f.init}),
                              sort_keys=True, default=str)
            self._fingerprint.append(hashlib.blake2b(text.encode(), digest_size=8).hexdigest())
        return self._fingerprint[0]

    def extend(self, families: Iterable[OpFamily] = (), roles: Iterable[OpRole] = (),
               catalogue: Iterable[CatalogueEntry] = (), known_fusions: Iterable[KnownFusion] = (),
               kernel_matches: Iterable[KernelMatch] = (), chain_classes: Iterable[ChainClass] = (),
               op_kinds: Iterable[OpKinds] = (), kind_rules: Iterable[KindRule] = (),
               host_causes: Iterable[HostCause] = (), phase_ranges: Iterable[PhaseRange] = (),
               optimizers: Iterable[OptimizerModel] = (),
               iteration_ranges: Iterable[IterationRange] = ()) -> Registry:
        """A new registry: the given families, known fusions, kernel matches and chain classes ahead of
        these (the first match wins, so a user's rows win), roles replacing those of the same op, catalogue
        entries replacing the one of the same name or added at the end, op kinds, kind rules, host causes, phase
        ranges, iteration ranges and optimizer models added (a user's host causes, ranges and optimizers first)."""
        new_roles = {r.name: r for r in self.roles}
        new_roles.update({r.name: r for r in roles})
        entries = {e.name: e for e in self.catalogue}
        entries.update({e.name: e for e in catalogue})
        return replace(self, families=(*families, *self.families), roles=tuple(new_roles.values()),
                       catalogue=tuple(entries.values()), known_fusions=(*known_fusions, *self.known_fusions),
                       kernel_matches=(*kernel_matches, *self.kernel_matches),
                       chain_classes=(*chain_classes, *self.chain_classes),
                       op_kinds=(*op_kinds, *self.op_kinds), kind_rules=(*self.kind_rules, *kind_rules),
                       host_causes=(*host_causes, *self.host_causes),
                       phase_ranges=(*phase_ranges, *self.phase_ranges),
                       iteration_ranges=(*iteration_ranges, *self.iteration_ranges),
                       optimizers=(*optimizers, *self.optimizers))


_RECEIVED: dict[str, Registry] = {}  # this process's registries received from another, by fingerprint


def _received(fingerprint: str, fields_: dict[str, Any]) -> Registry:
    """The registry a pickle holds (``Registry.__reduce__``): the one this process received before under that
    fingerprint (a registry is a value: equal fingerprints, equal contents), else one made of its fields."""
    found = _RECEIVED.get(fingerprint)
    if found is None:
        found = _RECEIVED[fingerprint] = Registry(**fields_)
        found._fingerprint.append(fingerprint)
    return found


def classify(registry: Registry, kind: pd.Series, op: pd.Series, kernel: pd.Series) -> pd.DataFrame:
    """``category``, ``role`` and ``family`` per GPU event (pandas Series of its kind, launching op — may
    be null — and kernel name, as a DataFrame on their index); each distinct triple is matched once."""
    import pandas as pd

    cache: dict[tuple[str, str, str], OpFamily] = {}
    rows = []
    for key in zip(kind.astype(object), op.astype(object).where(op.notna(), ""), kernel.astype(object)):
        if key not in cache:
            cache[key] = registry.match(*key)
        rows.append(cache[key])
    return pd.DataFrame({"category": pd.array([r.category for r in rows], dtype="string"),
                         "role": pd.array([r.role for r in rows], dtype="string"),
                         "family": pd.array([r.family for r in rows], dtype="string")}, index=kind.index)

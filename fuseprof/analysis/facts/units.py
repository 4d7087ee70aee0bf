"""The op graph as the fusion patterns read it: each op that ran GPU work in the window as a *unit* — what
it computes (the registry's kinds), its category, its tensor arguments and outputs, its GPU time — and the
walks the patterns take along the graph's edges (``Units``).

A unit is one op call (its External id; a graph replay's attributed op once per replay), or one kernel no
op launched (a kernel of a replay no capture attributed: only its name says what it computes), or one kernel
of compiled code whose only op is the region around it (the registry's ``compiled region`` ops:
``Torch-Compiled Region``, a CUDA-graph tree's replay inside it): a region runs a whole model's kernels, so
judged as one op it would compute everything its kernels do. The edges
are the op graph's (``fuseprof.analysis.facts.opgraph``: by the execution trace where one was recorded, else by
the shape rule); a replay's ops are linked among the replayed kernels in their replay order, by the same
shape rule (``event_op_graph``), since the capture's ops ran in another trace.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.opgraph import OpGraph, op_graph_of_nodes
from fuseprof.model.dataflow import RecordedShapes, Value
from fuseprof.model.registry import GemmOperands, Registry

_KERNEL_ONLY = 10**15  # ids of units that are a kernel with no op: _KERNEL_ONLY + the event's position


@dataclass(frozen=True)
class Unit:
    """One op call (or an op-less kernel) of the window: see the module docstring."""

    op_id: int
    op: str
    kinds: frozenset[str]
    category: str
    gemm: GemmOperands | None
    args: tuple[Value | None, ...]
    outputs: tuple[Value, ...]
    time_ns: int
    kernels: int
    kernel: str  # its longest kernel's name
    ranges: str  # the user annotations it ran inside
    order: int  # position of its first kernel among the window's units
    inputs: tuple[Any, Any, Any] = (None, None, None)  # as recorded: dims, types, concrete (cost models read them)
    labels: tuple[Any, ...] = ()  # its events' labels in the window's events (what opportunity rows hold)
    module: str = ""  # the nn.Module path that ran it
    phase: str = ""  # its training phase (forward, backward, recomputation, optimizer, other; fuseprof.analysis.facts.phases)
    forward_op: str = ""  # a backward unit's: the outermost forward op it differentiates (aten::cross_entropy_loss)

    def computes(self, *kinds: str) -> bool:
        return self.kinds.issuperset(kinds)

    def tensors(self) -> list[tuple[int, Value]]:
        """(argument position, value) of each tensor argument."""
        return [(i, v) for i, v in enumerate(self.args) if v is not None]

    @property
    def is_gemm(self) -> bool:
        return self.category == "GEMM"

    @property
    def batched(self) -> bool:
        return self.gemm is not None and self.gemm.batched

    def operand(self, which: str) -> Value | None:
        """A GEMM's ``activation`` or ``weight`` argument (the registry's operands; the first two otherwise)."""
        operands = self.gemm or GemmOperands()
        i = operands.activation if which == "activation" else operands.weight
        return self.args[i] if i < len(self.args) else None

    @property
    def width(self) -> int | None:
        """The last dimension of its first output (a GEMM's N)."""
        return self.outputs[0].dims[-1] if self.outputs and self.outputs[0].dims else None


class Units:
    """The window's units in order, with the op graph's edges among them."""

    def __init__(self, units: dict[int, Unit], graph: OpGraph, regions: tuple[str, ...] = ()) -> None:
        self.by_id = units
        self.regions = regions  # the user annotations that ran in the window, kernels or none (zero_grad's)
        self.ordered = sorted(units.values(), key=lambda u: u.order)
        self._producers: dict[int, dict[int, list[int]]] = {}
        self._consumers: dict[int, list[int]] = {}
        for producer, consumer, argument in zip(graph.edges["producer"].tolist(), graph.edges["consumer"].tolist(),
                                                graph.edges["argument"].tolist()):
            if producer in units and consumer in units:
                self._producers.setdefault(consumer, {}).setdefault(argument, []).append(producer)
                found = self._consumers.setdefault(producer, [])
                if consumer not in found:
                    found.append(consumer)
        self._chain_alone()
        self.basis = graph.basis
        self.forward_of = {i: f for i, f in graph.forward_of.items() if i in units}  # a backward op → its forward op
        # a backward op (run by autograd for a forward one): no forward pattern's part
        self.backward = set(self.forward_of) | {i for i, u in units.items() if u.computes("backward")}

    def _chain_alone(self) -> None:
        """Kernels alone (no op, no tensors: a compiled region's, a replay's) launched one after another: each reads
        what the one before it wrote (argument 0) — the launch order, the one dataflow such a trace keeps."""
        previous: Unit | None = None
        for unit in self.ordered:
            alone = unit.op_id >= _KERNEL_ONLY and not unit.tensors()
            if alone and previous is not None and unit.op_id not in self._producers:
                self._producers[unit.op_id] = {0: [previous.op_id]}
                self._consumers.setdefault(previous.op_id, []).append(unit.op_id)
            previous = unit if alone else None

    def __iter__(self) -> Iterator[Unit]:
        return iter(self.ordered)

    def between(self, after: int, before: int) -> list[Unit]:
        """The units strictly between two orders, by bisection (a pattern asks this once per site)."""
        if not hasattr(self, "_orders"):
            self._orders = [u.order for u in self.ordered]
        return self.ordered[bisect.bisect_right(self._orders, after):bisect.bisect_left(self._orders, before)]

    def launched_around(self, unit: Unit, stop: Callable[[Unit], bool], before: bool = True,
                        limit: int = 64) -> list[Unit]:
        """The units launched before ``unit`` (after it, when not ``before``), nearest first, up to the first that is
        ``stop`` (left out) and at most ``limit``: what a unit whose tensors the trace does not record — a kernel of a
        compiled region or of a graph replay, linked to nothing — can read or feed. Launch order is the only dataflow
        such a trace keeps (a model computes an attention's q, k and v, or an MLP's gate and up, after the norm that
        feeds them, and a GEMM's epilogue right after it)."""
        if not hasattr(self, "_place"):
            self._place = {u.op_id: i for i, u in enumerate(self.ordered)}
        at = self._place[unit.op_id]
        side = reversed(self.ordered[max(0, at - limit):at]) if before else iter(self.ordered[at + 1:at + 1 + limit])
        found = []
        for other in side:
            if stop(other):
                break
            found.append(other)
        return found

    def producers(self, op_id: int, argument: int | None = None) -> list[Unit]:
        """The units that produced argument ``argument`` of ``op_id`` (every argument's when None)."""
        return [self.by_id[i] for i in dict.fromkeys(self._producer_ids(op_id, argument))]

    def producer_ids(self, op_id: int, argument: int | None = None) -> set[int]:
        """``producers``' op ids, for a caller that only compares them (no unit is looked up)."""
        return set(self._producer_ids(op_id, argument))

    def _producer_ids(self, op_id: int, argument: int | None) -> list[int]:
        by_argument = self._producers.get(op_id, {})
        return by_argument.get(argument, []) if argument is not None else [p for ps in by_argument.values() for p in ps]

    def forward(self) -> list[Unit]:
        """The units that are not backward ops, in order."""
        return [u for u in self.ordered if u.op_id not in self.backward]

    def computing(self, *kinds: str, forward: bool = False) -> list[Unit]:
        """The units that compute at least one of ``kinds``, in order (``forward``: backward ops left out). Where a
        pattern acts only on units of some kinds, it walks these instead of asking every unit: a long trace has
        tens of thousands of units and a pattern a few kinds, so a million ``computes`` calls became a lookup each."""
        if not hasattr(self, "_by_kind"):
            self._by_kind: dict[str, list[Unit]] = {}
            for unit in self.ordered:
                for kind in unit.kinds:
                    self._by_kind.setdefault(kind, []).append(unit)
        found = {u.op_id: u for kind in kinds for u in self._by_kind.get(kind, ())}
        return sorted((u for u in found.values() if not (forward and u.op_id in self.backward)),
                      key=lambda u: u.order)

    def same_input(self, a: Unit, b: Unit) -> bool:
        """Whether two GEMMs read one activation: the same producer (through casts: autocast casts it once per
        GEMM) where the graph links both, else the same shape and dtype."""
        operands = [(g.gemm.activation if g.gemm else 0) for g in (a, b)]
        first, second = ({p.op_id for p in self.sources(g.op_id, i, lambda u: u.category == "copy/cast", 3)[0]}
                         for g, i in zip((a, b), operands))
        if first and second:
            return first == second
        return a.operand("activation") == b.operand("activation")

    def consumers(self, op_id: int) -> list[Unit]:
        return [self.by_id[i] for i in self._consumers.get(op_id, [])]

    def sources(self, op_id: int, argument: int, through: Callable[[Unit], bool], depth: int = 10
                ) -> tuple[list[Unit], list[Unit]]:
        """Walking up from one argument: the first units that are not ``through`` on each path (the
        sources) and the ``through`` units passed on the way; at most ``depth`` units up."""
        found: dict[int, Unit] = {}
        passed: dict[int, Unit] = {}
        frontier = self.producers(op_id, argument)
        for _ in range(depth):
            step: list[Unit] = []
            for unit in frontier:
                if unit.op_id in found or unit.op_id in passed:
                    continue
                if through(unit):
                    passed[unit.op_id] = unit
                    step += self.producers(unit.op_id)
                else:
                    found[unit.op_id] = unit
            frontier = step
            if not frontier:
                break
        return list(found.values()), list(passed.values())

    def reaches(self, op_id: int, target: Callable[[Unit], bool], through: Callable[[Unit], bool],
                depth: int = 10) -> list[Unit]:
        """Walking down from a unit's outputs: the units that are ``target`` reached through ``through``
        units only; at most ``depth`` units down."""
        found: dict[int, Unit] = {}
        seen: set[int] = set()
        frontier = self.consumers(op_id)
        for _ in range(depth):
            step: list[Unit] = []
            for unit in frontier:
                if unit.op_id in seen:
                    continue
                seen.add(unit.op_id)
                if target(unit):
                    found[unit.op_id] = unit
                elif through(unit):
                    step += self.consumers(unit.op_id)
            frontier = step
            if not frontier:
                break
        return list(found.values())


def event_op_graph(events: pd.DataFrame, registry: Registry) -> OpGraph:
    """The op graph of the window's op calls in their kernels' order, by the shape rule: for traces whose
    ops ran elsewhere (graph replays attributed through their capture)."""
    called = events.dropna(subset=["op_id", "op"]).sort_values("start_ns", kind="stable").drop_duplicates("op_id")
    nodes = pd.DataFrame({"op_id": called["op_id"].astype("int64").to_numpy(), "op": called["op"].astype(str).to_numpy(),
                          "start_ns": called["start_ns"].to_numpy(), "tid": called["tid"].to_numpy(),
                          "input_dims": called["input_dims"].to_numpy(), "input_type": called["input_type"].to_numpy()})
    return op_graph_of_nodes(nodes, registry)


def _first_per_unit(positions: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of event ``positions`` (in a chosen order): each unit's first one, in the order the units first appear
    there, and those units' codes."""
    found, first = np.unique(codes[positions], return_index=True)
    at = np.argsort(first, kind="stable")
    return positions[first[at]], found[at]


class _PerUnit(NamedTuple):
    """The units' sums and picks. Indexed by a unit's code (its place among the units by first event):
    ``time_ns`` summed, ``kernels`` (its events), ``order`` (its first place by start, from 1). One per unit, in the
    order of their longest events: ``codes``, ``longest`` (that event's position) and ``described`` (the position
    of the event whose kernel and category it takes: its longest kernel, else its longest event). Per event:
    ``event_codes``, its unit's code."""

    time_ns: np.ndarray
    kernels: np.ndarray
    order: np.ndarray
    codes: np.ndarray
    longest: np.ndarray
    described: np.ndarray
    event_codes: np.ndarray


def _per_unit(events: pd.DataFrame, apart: np.ndarray | None = None) -> tuple[np.ndarray, _PerUnit]:
    """Each event's unit id (its op call; ``_KERNEL_ONLY`` + its position where no op launched it, or where
    ``apart`` marks it: a kernel of a compiled region), and the units' sums and picks (``_PerUnit``), on
    positions: the module's ``window_units`` says what they are."""
    n = len(events)
    keys = events["op_id"].astype("Float64").to_numpy(dtype="float64", na_value=np.nan)
    if apart is not None:
        keys = np.where(apart, np.nan, keys)
    unit = np.where(np.isnan(keys), _KERNEL_ONLY + np.arange(n), keys).astype(np.int64)
    codes = pd.factorize(unit)[0]
    k = int(codes.max()) + 1 if n else 0
    dur = events["dur_ns"].to_numpy()
    time_ns = np.zeros(k, dur.dtype)
    np.add.at(time_ns, codes, dur)
    rank = np.empty(n, np.int64)  # the event's place by start (ties: the earlier row), from 1
    rank[np.argsort(events["start_ns"].to_numpy(), kind="stable")] = np.arange(1, n + 1)
    order = np.full(k, n + 1, np.int64)
    np.minimum.at(order, codes, rank)
    by_length = np.argsort(-dur, kind="stable")  # longest first, ties in the window's order
    longest, longest_codes = _first_per_unit(by_length, codes)
    kernel_rows = by_length[(events["kind"] == "kernel").to_numpy(bool)[by_length]]
    main_rows, main_codes = _first_per_unit(kernel_rows, codes)
    main_of = np.full(k, -1, np.int64)
    main_of[main_codes] = main_rows
    described = np.where(main_of[longest_codes] >= 0, main_of[longest_codes], longest)
    return unit, _PerUnit(time_ns, np.bincount(codes, minlength=k), order, longest_codes, longest, described, codes)


def _in_regions(events: pd.DataFrame, registry: Registry) -> np.ndarray | None:
    """Which events a compiled region's op launched (the registry's ``compiled region`` kind), or None."""
    if "op" not in events or not len(events):
        return None
    regions = [op for op in events["op"].dropna().unique().tolist()
               if isinstance(op, str) and "compiled region" in registry.kinds(op)]
    return events["op"].isin(regions).to_numpy(bool) if regions else None


def window_units(events: pd.DataFrame, graph: OpGraph | None, registry: Registry,
                 regions: tuple[str, ...] = ()) -> Units:
    """The units of the window's events, linked by ``graph`` (the trace's op graph), or by the window's
    own op order when its ops were replayed from a graph (or no graph is given); ``regions``: the names of the
    user annotations that ran in the window (a range that launched nothing is evidence too).

    Each unit's sums and picks are made on positions (NumPy), not by grouping and sorting the window's frame
    of forty-odd columns: that cost ~5 ms a trace however few its events, once per rank of a rank set. A unit
    is described by its longest event (ties: the earlier), its category and kernel by its longest kernel where
    it has one; the units come in the order of their longest events, longest first."""
    replayed = bool(events["graph_attributed"].any()) if "graph_attributed" in events else False
    if graph is None or replayed:
        graph = event_op_graph(events, registry)
    unit, per = _per_unit(events, _in_regions(events, registry))
    longest, described = per.longest, per.described
    # each unit's events' labels and kernel names in the window's order, one slice per unit (between its code's
    # bounds), not a dict of lists filled an event at a time
    by_unit = np.argsort(per.event_codes, kind="stable")
    labels, names = events.index.to_numpy()[by_unit].tolist(), events["name"].astype(str).to_numpy()[by_unit].tolist()
    bounds = np.concatenate([[0], np.cumsum(per.kernels)]).tolist()

    def at_longest(column: str, as_object: bool = False) -> list[Any]:
        if column not in events:
            return [None] * len(longest)
        picked = events[column].take(longest)
        return (picked.astype(object) if as_object else picked).tolist()

    units: dict[int, Unit] = {}
    shapes = RecordedShapes()
    for key, code, op, dims, types, concrete, ranges, module, phase, forward_op, category, kernel in zip(
            unit[longest].tolist(), per.codes.tolist(), at_longest("op", True), at_longest("input_dims"),
            at_longest("input_type"), at_longest("concrete"), at_longest("ranges"), at_longest("module", True),
            at_longest("phase", True), at_longest("forward_op", True),
            events["category"].take(described).astype(object).tolist(),
            events["name"].take(described).astype(object).tolist()):
        if key >= _KERNEL_ONLY:  # a kernel alone: its name says what it is, not the region's op or arguments
            op, dims, types, concrete = "", None, None, None
        op = op if isinstance(op, str) else ""
        role = registry.role(op)
        arguments, outputs = shapes.of(op, role, dims, types)
        units[key] = Unit(
            op_id=key, op=op, kinds=registry.kinds(op, names[bounds[code]:bounds[code + 1]]), category=str(category),
            gemm=role.gemm, args=arguments, outputs=outputs,
            time_ns=int(per.time_ns[code]), kernels=int(per.kernels[code]), kernel=str(kernel),
            ranges=ranges if isinstance(ranges, str) else "", order=int(per.order[code]),
            inputs=(dims, types, concrete), labels=tuple(labels[bounds[code]:bounds[code + 1]]),
            module=module if isinstance(module, str) else "",
            phase=phase if isinstance(phase, str) else "", forward_op=forward_op if isinstance(forward_op, str) else "")
    return Units(units, graph, regions)

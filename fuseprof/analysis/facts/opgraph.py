"""The op graph of a trace: the ops that launched GPU work, each tensor argument linked to the op that
produced it, and each backward op to the forward op it differentiates.

Tensor identity comes from one of two bases, and the graph says which (``basis``):

- ``execution trace``: when the user captured a PyTorch execution trace beside the Kineto trace
  (``torch.profiler.ExecutionTraceObserver``; ``fuseprof profile`` and ``fuseprof run`` record one in the
  bundle's ``raw/execution_trace.json.gz``), each op is joined to its execution-trace node by its record
  function id, and an argument's producer is the latest op before it that wrote the storage the argument
  reads (views and slices read their base's storage, so the link goes through them);
- ``shapes``: otherwise, the one shape-and-dtype rule of ``fuseprof.model.dataflow``, over the ops in
  program order, with outputs as the byte models assume them.

Edges are per tensor argument: the k-th tensor among the op's recorded arguments (``argument``). The
graph is what judgements about dataflow read (``within``: the edges among a set of ops, e.g. a fusion
chain's; ``producers``/``consumers``). A backward op — one run inside autograd's
``autograd::engine::evaluate_function: …`` on the backward thread — is linked to the forward op whose
``Sequence number`` (and ``Fwd thread id``) that function carries (``forward_of``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

from fuseprof.model.dataflow import RecordedShapes, ShapeDataflow, Value, links_to_nothing, view_shape
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import enclosing

Basis = Literal["execution trace", "shapes"]


@dataclass
class OpGraph:
    """Nodes (one row per op: ``op_id`` — its External id —, ``op``, ``start_ns``, ``tid``, …) and edges
    (``producer`` op id and which of its ``output``s, ``consumer`` op id and its ``argument``: the position
    among the op's recorded arguments); see the module docstring."""

    basis: Basis
    nodes: pd.DataFrame
    edges: pd.DataFrame
    forward_of: dict[int, int] = field(default_factory=dict)
    _by_consumer: dict[int, dict[int, list[tuple[int, int]]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        columns = (self.edges[c].astype("int64").tolist() for c in ("producer", "output", "consumer", "argument"))
        for producer, output, consumer, argument in zip(*columns):
            self._by_consumer.setdefault(consumer, {}).setdefault(argument, []).append((producer, output))

    def producers(self, op_id: int) -> dict[int, list[tuple[int, int]]]:
        """Argument position → the (op, output) that produced it (a TensorList's several); arguments from
        outside the graph are absent."""
        return self._by_consumer.get(int(op_id), {})

    def consumers(self, op_id: int) -> list[int]:
        """The ops that read an output of ``op_id``, in order."""
        return self.edges.loc[self.edges["producer"] == op_id, "consumer"].drop_duplicates().tolist()

    def within(self, op_ids: Iterable[int]) -> dict[int, dict[int, list[tuple[int, int]]]]:
        """For a set of ops (a fusion chain): each one's arguments produced by an op of the set."""
        members = {int(o) for o in op_ids}
        return {o: {a: [p for p in ps if p[0] in members] for a, ps in self.producers(o).items()
                    if any(p[0] in members for p in ps)} for o in members}


Edge = tuple[int, int, int, int]  # producer, output, consumer, argument


def _shape_edges(nodes: pd.DataFrame, views: pd.DataFrame, registry: Registry, reshapes: bool = False) -> list[Edge]:
    """Edges by the shape rule over the ops in program order, read through the views between them (a view's
    shape becomes one more shape of the tensor it views); ``reshapes``: without the views, a tensor may be
    read regrouped (``ShapeDataflow``)."""
    flow, shapes = ShapeDataflow(reshapes), RecordedShapes()
    edges = []
    nothing: dict[tuple[str, int], list[bool]] = {}
    steps = sorted([(s, 0, i) for i, s in enumerate(nodes["start_ns"].tolist())] + [(s, 1, i) for i, s in enumerate(
        views["start_ns"].tolist())])  # a view at the same time as an op comes after it (a view of its output)
    view_rows = list(zip(*(views[c].tolist() for c in ("name", "input_dims", "input_type", "concrete"))))
    node_rows = list(zip(nodes["op_id"].astype("int64").tolist(), *(nodes[c].tolist() for c in ("op", "input_dims",
                                                                                                 "input_type"))))
    for _, is_view, i in steps:
        if is_view:
            name, dims, types, concrete = view_rows[i]
            arguments = shapes.arguments(dims, types)
            base = flow.source(arguments[0]) if arguments else None
            shape = view_shape(registry.role(name).view, dims, concrete)
            if base is not None and shape is not None and arguments[0] is not None:
                flow.alias(base, [Value(shape, arguments[0].dtype)])
            continue
        op_id, op, dims, types = node_rows[i]
        role = registry.role(op)
        arguments, outputs = shapes.of(op, role, dims, types)
        if (op, len(arguments)) not in nothing:  # an op's arguments that link to nothing: by its role, once a name
            nothing[(op, len(arguments))] = [links_to_nothing(role, k) for k in range(len(arguments))]
        links = flow.link(arguments, nothing[(op, len(arguments))], role.reduces)
        edges += [(int(p[0]), int(p[1]), int(op_id), k) for k, p in enumerate(links) if p is not None]
        for k, listed in enumerate(dims if isinstance(dims, list) else []):  # a TensorList: cat's, stack's inputs
            if isinstance(listed, list) and listed and isinstance(listed[0], list):
                edges += [(int(p[0]), int(p[1]), int(op_id), k) for p in flow.link_list(listed)]
        flow.produce(int(op_id), outputs)
    return edges


def _execution_trace_edges(nodes: pd.DataFrame, et: pd.DataFrame, registry: Registry) -> list[Edge] | None:
    """Edges by storage: an argument's producer is the latest op before it that wrote the storage it
    reads; an argument the op overwrites without reading (``copy_``'s destination: the registry's role)
    reads nothing, whoever wrote its memory before. None when under 90% of the ops join the execution trace
    by record function id and name (it is another run's)."""
    by_rf = {int(r): (n, reads, writes) for r, n, reads, writes in
             zip(et["rf_id"], et["name"], et["reads"], et["writes"])}
    joined = [by_rf.get(int(r)) if pd.notna(r) else None for r in nodes["rf_id"]]
    matching = [j is not None and j[0] == op for j, op in zip(joined, nodes["op"])]
    if not len(nodes) or sum(matching) < 0.9 * len(nodes):
        return None
    writer: dict[int, tuple[int, int]] = {}  # storage -> (op, output) that wrote it last
    edges: list[Edge] = []
    for op_id, node, ok in zip(nodes["op_id"], joined, matching):
        if not ok or node is None:
            continue
        name, reads, writes = node
        role = registry.role(name)
        for position, read in enumerate(reads):
            if links_to_nothing(role, position):
                continue
            for storage in read if isinstance(read, list) else [] if read is None else [read]:
                producer = writer.get(storage)
                if producer is not None and producer[0] != int(op_id):
                    edges.append((*producer, int(op_id), position))
        for output, written in enumerate(writes):
            for storage in written if isinstance(written, list) else [] if written is None else [written]:
                writer[storage] = (int(op_id), output)
    return edges


def _forward_links(autograd: pd.DataFrame, nodes: pd.DataFrame) -> dict[int, int]:
    """Backward op → forward op: the autograd function a backward op runs inside carries the sequence
    number of the forward op that made that function (the first op with that number)."""
    if autograd.empty or "sequence" not in nodes:
        return {}
    numbered = autograd.assign(name=autograd["sequence"].astype("Int64").astype("string"))
    inside = enclosing(numbered.dropna(subset=["sequence"]), nodes[["start_ns", "tid"]], None)
    forward = nodes[inside.isna().to_numpy()].dropna(subset=["sequence"]).drop_duplicates("sequence")
    first = dict(zip(forward["sequence"].astype("int64").astype(str), forward["op_id"]))
    return {int(o): int(first[s]) for o, s in zip(nodes["op_id"], inside) if pd.notna(s) and s in first}


def op_graph_of_nodes(nodes: pd.DataFrame, registry: Registry, views: pd.DataFrame | None = None) -> OpGraph:
    """The graph of ops given as nodes (``op_id``, ``op``, ``start_ns``, ``tid``, ``input_dims``,
    ``input_type``), in start order, by the shape rule (through ``views``, the host-only view ops, if given;
    else reading regrouped rows as the same tensor)."""
    no_views = pd.DataFrame({c: pd.Series(dtype=object) for c in ("name", "input_dims", "input_type", "concrete")}
                            ).assign(start_ns=pd.Series(dtype="int64"))
    edges = _shape_edges(nodes, views if views is not None else no_views, registry, reshapes=views is None)
    frame = pd.DataFrame(edges, columns=["producer", "output", "consumer", "argument"]).astype("int64")
    return OpGraph("shapes", nodes, frame)


def op_graph(tables: TraceTables, registry: Registry, execution_trace: pd.DataFrame | None = None) -> OpGraph:
    """The graph of a trace's ops (those that launched GPU work), by the execution trace when one is given
    and joins, else by shapes; backward ops linked to forward ones through ``tables.autograd``."""
    launched = tables.ops.dropna(subset=["external_id"]).drop_duplicates("external_id")
    nodes = launched.sort_values("start_ns", kind="stable").rename(columns={"name": "op"})
    nodes = nodes.assign(op_id=nodes["external_id"].astype("int64")).reset_index(drop=True)
    if "rf_id" not in nodes:
        nodes["rf_id"] = pd.NA
    found = _execution_trace_edges(nodes, execution_trace, registry) if execution_trace is not None else None
    basis: Basis = "execution trace" if found is not None else "shapes"
    views = tables.host_ops[[bool(registry.role(n).view) for n in tables.host_ops["name"]]] if len(
        tables.host_ops) else tables.host_ops
    edges = found if found is not None else _shape_edges(nodes, views.sort_values("start_ns", kind="stable"), registry)
    frame = pd.DataFrame(edges, columns=["producer", "output", "consumer", "argument"]).astype("int64")
    columns = [c for c in ("op_id", "op", "start_ns", "tid", "input_dims", "input_type", "rf_id", "sequence")
               if c in nodes]
    return OpGraph(basis, nodes[columns], frame, _forward_links(tables.autograd, nodes))

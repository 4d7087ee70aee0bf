"""One dataflow pass (issue 60, point 3, where it touches the audit): the fusion table's fused bytes read the same op
graph the audit reads. Before, a chain's fused bytes came from a second shape-and-dtype pass over the chain alone
(no views, no ops around it), and on the committed eager Llama trace 45 of its 118 chains disagreed with the op
graph's edges. Here each chain's fused bytes are recomputed from the graph's edges among the chain's own ops
(``OpGraph.within``: an argument another op of the chain produced is not read from memory) and must be the table's.
"""

from __future__ import annotations

import math

import pandas as pd

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.opgraph import OpGraph, op_graph
from fuseprof.analysis.judgements.fusion import find_chains, fused_bytes
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.verify.chains import chains_to_verify
from tests.conftest import FIXTURES, TRACES

EAGER = TRACES / "llama4l-eager-h200"


def test_fusion_chains_read_the_op_graph_the_audit_reads() -> None:
    (result,) = analyze(EAGER)
    (raw,) = (EAGER / "raw").glob("*.json.gz")
    graph = op_graph(read_trace_tables(raw), DEFAULT)
    assert graph.basis == "shapes"  # no execution trace: the case where the two passes differed
    chains = find_chains(result.events, DEFAULT, graph)
    events = result.events
    checked = 0
    for members, table_bytes, chain_bytes in zip(chains["members"], chains["fused_bytes"], chains["chain_bytes"]):
        if math.isnan(table_bytes):
            continue
        rows = events.loc[members]
        ids = [int(o) for o in rows["op_id"]]
        within = graph.within(ids)
        internal = [frozenset(a for a, producers in within[o].items() if any(p[0] != o for p in producers))
                    for o in ids]
        inputs = [(op, dims, types, concrete) for op, dims, types, concrete in
                  zip(rows["op"].astype(str), rows["input_dims"], rows["input_type"], rows["concrete"])]
        assert table_bytes == min(fused_bytes(inputs, DEFAULT, internal), chain_bytes), rows["op"].tolist()
        checked += 1
    assert checked >= 100



TRAIN = FIXTURES / "truth" / "train_foreach.json.gz"  # a training step: forward, backward, optimizer


def _graph_bytes(members: list[object], events: pd.DataFrame, graph: OpGraph, chain_bytes: float) -> float:
    """A chain's fused bytes from the graph's edges among its own ops (as the test above reads them)."""
    rows = events.loc[members].drop_duplicates("op_id")
    ids = [int(o) for o in rows["op_id"]]
    within = graph.within(ids)
    internal = [frozenset(a for a, producers in within[o].items() if any(p[0] != o for p in producers)) for o in ids]
    inputs = list(zip(rows["op"].astype(str), rows["input_dims"], rows["input_type"], rows["concrete"]))
    return min(fused_bytes(inputs, DEFAULT, internal), chain_bytes)


def test_verify_reads_the_fusion_tables_op_graph() -> None:
    """``fusion --verify``'s chains (``verify.chains``) take their fused bytes and tensor links from the op graph
    the fusion table read, whatever its basis: on a training trace (no execution trace, so by shapes) each
    verified chain's bytes are those of the table's first chain of its shapes, recomputed from the graph's edges.
    Before, verify read the graph only where an execution trace gave it, and its second pass disagreed on 4 of
    the 17 chains (a RoPE chain 7.86 MB where the graph reads 4.72, the loss's gather 31.7 where it reads 27.5)."""
    (result,) = analyze(TRAIN)
    events = result.events
    graph = op_graph(read_trace_tables(TRAIN), DEFAULT)
    assert graph.basis == "shapes"
    chains = find_chains(events, DEFAULT, graph)
    checked = 0
    for c in chains_to_verify(events, result.fusion, {}, 200, DEFAULT, graph):
        if math.isnan(c.fused_bytes):
            continue
        shapes = [(o.name, repr(o.dims)) for o in c.ops]
        members = set(result.fusion.loc[c.fusion_row, "members"])
        first = next(ch for ch in chains.itertuples() if set(ch.members) <= members and [
            (str(op), repr(d)) for op, d in events.loc[ch.members].drop_duplicates("op_id")[["op", "input_dims"]]
            .itertuples(index=False)] == shapes)
        assert c.fused_bytes == _graph_bytes(first.members, events, graph, first.chain_bytes), c.signature
        assert c.links is not None and len(c.links) == len(c.ops)  # the replay links tensors by the same edges
        checked += 1
    assert checked >= 15

"""One dataflow pass (issue 60, point 3, where it touches the audit): the fusion table's fused bytes read the same op
graph the audit reads. Before, a chain's fused bytes came from a second shape-and-dtype pass over the chain alone
(no views, no ops around it), and on the committed eager Llama trace 45 of its 118 chains disagreed with the op
graph's edges. Here each chain's fused bytes are recomputed from the graph's edges among the chain's own ops
(``OpGraph.within``: an argument another op of the chain produced is not read from memory) and must be the table's.
"""

from __future__ import annotations

import math

from fuseprof.analysis import analyze
from fuseprof.analysis.fusion import find_chains, fused_bytes
from fuseprof.analysis.opgraph import op_graph
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import TRACES

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

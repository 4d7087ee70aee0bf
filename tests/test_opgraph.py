"""The op graph of a trace: edges by the execution trace's tensor storages where one was captured (checked
against the raw execution-trace JSON), by shapes otherwise; backward ops linked to their forward ops through
autograd's sequence numbers (checked against the raw Kineto JSON); captures record the execution trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fuseprof.analysis.facts.opgraph import op_graph
from fuseprof.analysis.judgements.fusion import fused_bytes
from fuseprof.cli import main
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.execution_trace import EXECUTION_TRACE, read_execution_trace
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES, shared_traces

BUNDLE = FIXTURES / "execution-trace" / "run-mlp-cpu"
TRACE, ET = BUNDLE / "raw" / "profiler_trace.json.gz", BUNDLE / "raw" / EXECUTION_TRACE


def _json(path: Path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _external_ids() -> dict[int, int]:
    """Record function id -> External id of every cpu_op in the raw Kineto trace."""
    return {e["args"]["Record function id"]: e["args"]["External id"] for e in _json(TRACE)["traceEvents"]
            if e.get("cat") == "cpu_op"}


def test_edges_follow_the_execution_traces_storages() -> None:
    """Every op that read a storage another op wrote last has that edge, and no other: computed here from
    the raw execution trace's nodes (inputs and outputs as [tensor, storage, offset, ...]). The destination
    an op overwrites without reading (copy_, fill_, zero_: schema ``Tensor(a!) self``) reads nothing, though
    the caching allocator may hand it memory another op wrote."""
    graph = op_graph(read_trace_tables(TRACE), DEFAULT, read_execution_trace(ET))
    assert graph.basis == "execution trace"
    ids = _external_ids()
    nodes = {n["id"]: n for n in _json(ET)["nodes"]}
    rf = {n["id"]: next(a["value"] for a in n["attrs"] if a["name"] == "rf_id") for n in nodes.values()}
    in_graph = set(graph.nodes["op_id"])
    ordered = sorted((n for n in nodes.values() if ids.get(rf[n["id"]]) in in_graph),
                     key=lambda n: graph.nodes.set_index("op_id").loc[ids[rf[n["id"]]], "start_ns"])
    writer, expected = {}, set()
    for n in ordered:
        me = ids[rf[n["id"]]]
        for position, (value, kind) in enumerate(zip(n["inputs"]["values"], n["inputs"]["types"])):
            overwritten = position == 0 and n["name"] in ("aten::copy_", "aten::fill_", "aten::zero_")
            if kind.startswith("Tensor") and isinstance(value, list) and value[1] in writer and writer[value[1]][0] != me \
                    and not overwritten:
                expected.add((*writer[value[1]], me, position))
        for k, (value, kind) in enumerate(zip(n["outputs"]["values"], n["outputs"]["types"])):
            if kind.startswith("Tensor") and isinstance(value, list):
                writer[value[1]] = (me, k)
    got = set(zip(graph.edges["producer"], graph.edges["output"], graph.edges["consumer"], graph.edges["argument"]))
    assert got == expected and len(got) > 50
    names = dict(zip(graph.nodes["op_id"], graph.nodes["op"]))
    silu = [o for o, name in names.items() if name == "aten::silu"]
    assert all("aten::mul" in {names[c] for c in graph.consumers(o)} for o in silu) and len(silu) == 2


def test_without_an_execution_trace_the_shapes_rule_links_silu_to_its_product() -> None:
    """The committed eager Llama trace (H200, no execution trace): each SiLU's output feeds the mul after it."""
    graph = op_graph(read_trace_tables(TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"), DEFAULT)
    assert graph.basis == "shapes"
    names = dict(zip(graph.nodes["op_id"], graph.nodes["op"]))
    silu = [o for o, name in names.items() if name == "aten::silu"]
    assert silu and all("aten::mul" in {names[c] for c in graph.consumers(o)} for o in silu)


def test_an_execution_trace_of_another_run_is_not_used() -> None:
    other = read_execution_trace(ET)
    other["name"] = "aten::nothing"
    assert op_graph(read_trace_tables(TRACE), DEFAULT, other).basis == "shapes"


@pytest.mark.shared
def test_backward_ops_are_linked_to_their_forward_ops() -> None:
    """On the shared DDP training step: each backward op inside `evaluate_function: GeluBackward0` is linked
    to the forward op with that function's sequence number (read here from the raw trace)."""
    trace = shared_traces() / "h200_2gpu" / "ddp_step_rank0.json.gz"
    graph = op_graph(read_trace_tables(trace), DEFAULT)
    events = _json(trace)["traceEvents"]
    gelu_backward = [e for e in events if e.get("cat") == "cpu_op" and e["name"].endswith("GeluBackward0")]
    forward_gelu = {e["args"]["Sequence number"]: e["args"]["External id"] for e in events
                    if e.get("cat") == "cpu_op" and e["name"] == "aten::gelu"}
    names = dict(zip(graph.nodes["op_id"], graph.nodes["op"]))
    linked = {names[b]: names[f] for b, f in graph.forward_of.items() if names[f] == "aten::gelu"}
    assert linked == {"aten::gelu_backward": "aten::gelu"} and gelu_backward
    for function in gelu_backward:
        inner = [e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::gelu_backward"
                 and function["ts"] <= e["ts"] <= function["ts"] + function["dur"]]
        for op in inner:
            assert graph.forward_of[op["args"]["External id"]] == forward_gelu[function["args"]["Sequence number"]]


def test_fused_bytes_read_the_graphs_edges_where_given() -> None:
    """silu(gate) · up: with the graph saying the mul's first input is silu's output and its second comes from
    outside, gate and up are read and the product written, whatever the shapes would say."""
    bf16, m = "c10::BFloat16", [64, 1024]
    chain = [("aten::silu", [m], [bf16], []), ("aten::mul", [m, m], [bf16, bf16], [])]
    element = 64 * 1024 * 2
    assert fused_bytes(chain, DEFAULT, [frozenset(), frozenset({0})]) == 3 * element
    assert fused_bytes(chain, DEFAULT, [frozenset(), frozenset({0, 1})]) == 2 * element  # both inside: gate only


@pytest.mark.parametrize("verb", ["run", "profile"])
def test_captures_record_the_execution_trace(verb: str, tmp_path: Path) -> None:
    argv = (["run", "--no-ncu", "--out", str(tmp_path), str(FIXTURES / "execution-trace" / "mlp.py")] if verb == "run"
            else ["profile", "silu_mul", "--shapes", "64x256", "--device", "cpu", "--out", str(tmp_path)])
    assert main(argv) == 0
    (bundle,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    graph = op_graph(read_trace_tables(next((bundle / "raw").glob("profiler_trace.json*"))), DEFAULT,
                     read_execution_trace(bundle / "raw" / EXECUTION_TRACE))
    assert graph.basis == "execution trace" and len(graph.edges) > 0

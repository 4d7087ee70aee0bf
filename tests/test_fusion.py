"""The fusion finder and the A/B diff on the committed H200 Llama traces (4 layers, one prefill and
8 decode steps = 9 profiler steps; eager and torch.compile), and the finder's time model against
the fused kernels measured in the committed bench."""

from __future__ import annotations

import json

import pytest

import fuseprof
from fuseprof.analysis import analyze
from fuseprof.analysis.judgements.diff import diff_by_category, diff_by_op, diff_totals
from fuseprof.analysis.judgements.fusion import copy_model_from_bench, fused_bytes, prediction_check
from fuseprof.cli import main
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import TRACES

EAGER, COMPILED = TRACES / "llama4l-eager-h200", TRACES / "llama4l-compiled-h200"
BENCH = TRACES / "bench-h200-20261129t093240z"
RMSNORM = "aten::add → aten::copy_ → aten::pow → aten::mean → aten::add → aten::rsqrt → aten::mul → aten::copy_ → aten::mul"
ROPE = "aten::mul → aten::neg → aten::cat → aten::mul → aten::add"


@pytest.fixture(scope="module")
def eager():
    return analyze(EAGER, ceilings=TRACES)[0]  # the H200's measured roofs and the bench's copy model


@pytest.fixture(scope="module")
def compiled():
    return analyze(COMPILED, ceilings=TRACES)[0]


def test_top_opportunities_are_the_rope_and_rmsnorm_chains(eager) -> None:
    top = eager.fusion.head(2).set_index("signature")
    rope = top[top.index.str.startswith(f"{ROPE} → {ROPE} → aten::index_copy_")]
    rms = top.loc[RMSNORM]
    # RoPE of q and k, the two KV-cache writes and the mask, in each of 4 layers x 9 steps
    assert len(rope) == 1 and rope["count"].iloc[0] == 4 * 9 and rope["kernels_per_chain"].iloc[0] == 15
    # residual add + RMSNorm: after attention in every layer, before the MLP's successor layers and the
    # final norm: (4 + 3 + 1) x 9 steps; the first layer's input norm follows the embedding instead
    assert rms["count"] == 8 * 9 and rms["kernels_per_chain"] == 9
    assert "add_rms_norm" in rms["known_fusion"]
    for _, row in top.iterrows():
        assert row["saving_ns"] > 0.5 * row["measured_ns"]  # tiny decode tensors: launches, not bytes
        assert row["launches_saved"] == row["count"] * (row["kernels_per_chain"] - 1)


def test_group_times_add_up_from_the_trace(eager) -> None:
    events = eager.events
    rms = eager.fusion.set_index("signature").loc[RMSNORM]
    norm_ops = events[events["module"].fillna("").str.contains("RMSNorm")]
    # every RMSNorm kernel but the first layer's input norm (9 steps x 8 kernels) is in the group
    assert rms["measured_ns"] > norm_ops["dur_ns"].sum() - norm_ops["dur_ns"].sum() * 0.2
    assert rms["share_of_busy_pct"] == pytest.approx(100 * rms["saving_ns"] / eager.timeline["busy_ns"].iloc[0])


def test_fused_bytes_follow_the_tensors_through_a_decode_rmsnorm() -> None:
    bf16, f32, h = "c10::BFloat16", "float", [1, 1, 2048]
    chain = [("aten::add", [h, h, []], [bf16, bf16, "Scalar"], []),
             ("aten::copy_", [h, h, []], [f32, bf16, "Scalar"], []),
             ("aten::pow", [h, []], [f32, "Scalar"], []),
             ("aten::mean", [h, [], [], []], [f32, "ScalarList", "Scalar", ""], []),
             ("aten::add", [[1, 1, 1], [], []], [f32, "double", "Scalar"], []),
             ("aten::rsqrt", [[1, 1, 1]], [f32], []),
             ("aten::mul", [h, [1, 1, 1]], [f32, f32], []),
             ("aten::copy_", [h, h, []], [bf16, f32, "Scalar"], []),
             ("aten::mul", [[2048], h], [bf16, bf16], [])]
    # read x and the residual (2 x 4096 B) and the weight (4096 B) once, write y (4096 B) once
    assert fused_bytes(chain, DEFAULT) == 4 * 2048 * 2


def test_one_op_takes_each_producer_once_so_silu_mul_reads_up_from_dram() -> None:
    """silu(gate) · up at Llama-3-8B prefill: ``up`` has the shape and dtype silu produced but is not
    silu's output. The model once counted it internal (117 MB); running the fusion (``fusion --verify``
    on the decoder layer) measured 45 µs, the time of gate and up read and the product written."""
    bf16, m = "c10::BFloat16", [2048, 14336]
    chain = [("aten::silu", [m], [bf16], []), ("aten::mul", [m, m], [bf16, bf16], [])]
    assert fused_bytes(chain, DEFAULT) == 3 * 2048 * 14336 * 2  # gate and up read, the product written
    # two producers of one shape may feed one op: q·cos, (q·cos)·sin, then the add of both products reads
    # neither from DRAM (a trace has no tensor identities: the second mul's q-shaped input is the first's output)
    q = [1, 16, 1, 128]
    rope = [("aten::mul", [q, [1, 128]], [bf16, bf16], []), ("aten::mul", [q, [1, 128]], [bf16, bf16], []),
            ("aten::add", [q, q, []], [bf16, bf16, "Scalar"], [])]
    assert fused_bytes(rope, DEFAULT) == 16 * 128 * 2 + 2 * (128 * 2) + 16 * 128 * 2  # q, cos and sin read; the sum written


def test_compiled_trace_has_neither_chain_and_the_diff_shows_them_gone(eager, compiled) -> None:
    signatures = " | ".join(compiled.fusion["signature"])
    assert "aten::pow → aten::mean" not in signatures and "aten::neg → aten::cat" not in signatures
    ops = diff_by_op(eager, compiled).set_index("key")
    for op in ("aten::pow [[1, 1, 2048], []]", "aten::rsqrt [[1, 1, 1]]", "aten::neg [[1, 16, 1, 64]]"):
        assert ops.loc[op, "change"] == "disappeared" and ops.loc[op, "launches_b"] == 0
    # GEMMs are matched by op and shapes although Inductor calls mm with an out= buffer
    gate = ops.loc["aten::mm [[1, 2048], [2048, 5632]]"]
    assert gate["launches_a"] == gate["launches_b"] == 64
    assert abs(gate["time_delta_ns"]) < 0.01 * gate["time_ns_a"]
    cats = diff_by_category(eager, compiled).set_index("key")
    assert cats.loc["copy/cast", "change"] == "disappeared"
    totals = diff_totals(eager, compiled).set_index("metric")
    assert totals.loc["events", "a"] == 1742 and totals.loc["events", "b"] == 574


def test_prediction_is_within_25_percent_of_the_measured_fused_kernels() -> None:
    timings = fuseprof.load_timings(BENCH)
    copy = copy_model_from_bench(timings)
    assert copy is not None and 4.1e12 < copy.bytes_per_s < 4.5e12 and 1_000 < copy.fixed_ns < 5_000
    check = prediction_check(timings, copy)
    large = check[check["m"] >= 1024]
    assert len(large) == 32  # 4 cases x 8 shapes
    assert large["error_pct"].abs().max() < 25


def test_fusion_and_diff_commands(capsys) -> None:
    assert main(["fusion", str(EAGER), "--top", "2", "--ceilings", str(TRACES)]) == 0
    out = capsys.readouterr().out
    assert "Fusion opportunities" in out and max(len(line) for line in out.splitlines()) <= 120
    assert "4.31 TB/s + 2.95 µs, fit to 32 same-bytes copies" in out.replace("\n  ", " ")
    assert main(["fusion", str(EAGER), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["count"] == 36
    assert main(["diff", str(EAGER), str(COMPILED), "--top", "5"]) == 0
    assert "disappeared" in capsys.readouterr().out
    assert main(["diff", str(EAGER), "no/such.json"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_copy_model_comes_from_the_newest_bench_not_a_capture_with_copies() -> None:
    """traces/ holds a decoder-layer capture with 4 same-bytes copies, newer than every bench and
    named after its case ("decoder…" sorts after "bench…"): the model must still be the newest bench's."""
    model = copy_model_from_bench(fuseprof.load_timings(TRACES))
    newest = copy_model_from_bench(fuseprof.load_timings(TRACES / "bench-h200-20261129t174201z"))
    assert model == newest and model.source == "fit to 32 same-bytes copies"


def test_eager_attention_is_found_and_predicted_as_one_sdpa_kernel() -> None:
    """tests/fixtures/h200-attention: a ViT-style block with the scores materialised (batch 8, 197 tokens,
    12 heads of 64, bf16), 3 iterations on the H200. Every number below from the raw trace and the shapes.
    The attention is what its dataflow holds — QKᵀ, the scale, the softmax, ·V — and the layout copies that only
    feed its batched GEMMs (q and kᵀ made contiguous after the projection, V's layout copy) or lay out ·V's output:
    SDPA reads the strided tensors and writes its output once, so they go with it (the captured pair in tests/fixtures/whatif: SDPA's trace has none)."""
    import gzip

    path = TRACES.parent / "h200-attention" / "eager-attention.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = {e["args"]["External id"]: e["name"] for e in raw if e.get("cat") == "cpu_op"}
    kernels = sorted((e for e in raw if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    names = [ops.get(e["args"].get("External id")) for e in kernels]
    spans = []  # the layout copies before QKᵀ through the one after ·V, each iteration
    for i, name in enumerate(names):
        if name == "aten::_softmax":
            first = max(j for j in range(i) if names[j] == "aten::bmm")
            while names[first - 1] == "aten::copy_":  # q and kᵀ laid out for QKᵀ, after the projection's GEMM
                first -= 1
            last = min(j for j in range(i + 1, len(names)) if names[j] == "aten::bmm")
            last += names[last + 1] == "aten::copy_"  # ·V's output laid out for the projection
            spans.append(kernels[first:last + 1])
    assert len(spans) == 3
    (result,) = analyze(path)
    row = result.fusion.iloc[0]
    assert row["class"] == "eager attention → SDPA" and row["count"] == 3
    assert row["measured_ns"] == sum(round(e["dur"] * 1000) for span in spans for e in span)
    b, h, n, d = 8, 12, 197, 64
    qkvo = 4 * b * h * n * d * 2  # bf16 Q, K, V read and O written once
    assert row["fused_bytes"] == 3 * qkvo
    flops = 4 * b * h * n * n * d
    roof = result.roof
    one = max(flops / roof.peak("tensor_bf16"), qkvo / roof.dram_bytes_per_s) * 1e9 + row["fixed_ns"]
    assert row["predicted_fused_ns"] == pytest.approx(3 * one)
    audit = result.audit.set_index("fusion")
    assert audit.loc["flash attention", "verdict"] == "not fused"


def test_a_rows_launches_count_its_members_not_replayed_from_a_graph() -> None:
    """opportunities._launched: per row, its members launched one by one — a member replayed from a CUDA graph
    launches nothing of its own, one that is no event of the trace counts as launched — repeats counted each time."""
    import numpy as np
    import pandas as pd

    from fuseprof.analysis.judgements.opportunities import _launched

    index = pd.Index([10, 11, 12, 13])
    replayed = np.array([False, True, True, False])
    members = pd.Series([[10, 11, 12, 13], [11, 12], [10, 10, 99], []], dtype=object)
    assert _launched(members, index, replayed) == [2, 0, 3, 0]

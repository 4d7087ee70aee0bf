"""What the fusion finder may never say, checked on every trace the project has: the committed H200
captures, the test fixtures and the shared third-party traces (AMD, serving engines, Inductor).

A chain holds no anchor (GEMM, attention, convolution, communication by the op registry, whatever the
vendor), no copy or memset, no graph-replayed kernel whose op is unknown; it stays inside one profiler
step and spans no idle gap over the trace's limit; its fused bytes never exceed its bytes; a chain
whose bytes are unknown has no saving; no row saves nothing; no two rows are the same chain. No row of
any class claims more than a kernel (each kernel in at most one row), the span (the savings together are at
most the busy time), the launches it had, or a roof (no op above 100% of its roof).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.judgements.fusion import find_chains, gap_limit_ns
from fuseprof.parse.names import short_kernel_name
from tests.conftest import FIXTURES, ROOT, SHARED, SHARED_FILES, TRACES, by_name, trace_at


def _traces() -> list[str]:
    """The committed bundles and fixtures, and the shared traces (their cases marked `shared`), by name."""
    bundles = sorted(p for p in TRACES.iterdir() if (p / "raw").is_dir() and list((p / "raw").glob("*.json*")))
    fixtures = sorted(p for p in FIXTURES.glob("*/*.json.gz") if not p.name.endswith(".et.json.gz"))
    return [str(p.relative_to(ROOT)) for p in bundles + fixtures] + [SHARED + n for n in SHARED_FILES if "/" not in n]


@pytest.mark.parametrize("name", by_name(*_traces()))
def test_no_impossible_row(name: str) -> None:
    for result in analyze(trace_at(name)):
        events = result.events
        chains = find_chains(events, result.registry)
        limit = gap_limit_ns(events)
        for members in chains.get("members", pd.Series(dtype=object)):
            rows = events.loc[members]
            assert (rows["role"] == "fusible").all() and (rows["kind"] == "kernel").all()
            assert not (rows["graph_replay"].notna() & rows["op"].isna()).any()
            assert rows["profiler_step"].astype("string").fillna("").nunique() == 1
            gaps = rows["start_ns"].iloc[1:].to_numpy() - (rows["start_ns"] + rows["dur_ns"]).iloc[:-1].to_numpy()
            assert (gaps <= limit).all()
        fusion = result.fusion
        if fusion.empty:
            continue
        both = fusion["chain_bytes"].notna() & fusion["fused_bytes"].notna()
        assert (fusion.loc[both, "fused_bytes"] <= fusion.loc[both, "chain_bytes"]).all()
        chains = fusion["class"].isin(["memory-bound chain", "RoPE + KV-cache write", "sampling chain"])
        unknown = chains & fusion["chain_bytes"].isna()  # a chain's prediction needs its bytes
        assert fusion.loc[unknown, ["fused_bytes", "predicted_fused_ns", "saving_ns"]].isna().all().all()
        known = fusion["saving_ns"].notna()
        assert (fusion.loc[known, "saving_ns"] > 0).all()
        # one row per chain up to linking: a kernel left unnamed ('?kernel') is one the trace never linked
        linked = set(events.loc[events["op"].notna(), "name"].map(short_kernel_name))
        unnamed = {k[1:] for key in fusion["key"] for k in key.split(" → ") if k.startswith("?")}
        assert not unnamed & linked and fusion["key"].is_unique
        ranked = fusion.loc[known, "saving_ns"].tolist()
        assert ranked == sorted(ranked, reverse=True)
        assert known.tolist() == sorted(known.tolist(), reverse=True)  # unknown rows last
        # no row claims more than a kernel, the span, or a roof: each kernel in at most one row, so the
        # savings together are at most the GPU's busy time; no launch saving beyond the launches it had
        held = [m for members in fusion["members"] for m in members]
        assert len(held) == len(set(held))
        assert (fusion.loc[known, "saving_ns"] <= fusion.loc[known, "measured_ns"]).all()
        whole = result.timeline.set_index("stream").loc["all"]
        assert fusion.loc[known, "saving_ns"].sum() <= whole["busy_ns"]
        launch_time = events["launch_dur_ns"].astype("float64").where(~events["launch_api"].astype("string")
                                                                     .str.contains("GraphLaunch").fillna(False)).sum()
        assert fusion["host_launch_ns_saved"].sum() <= launch_time + 1
        roofline = result.op_roofline
        if not roofline.empty:
            assert not (roofline["pct_of_roof"] > 100.5).any(), roofline.loc[roofline["pct_of_roof"] > 100.5,
                                                                              ["signature", "pct_of_roof"]]


def test_the_same_trace_gives_the_same_answer_in_any_folder(tmp_path: Path) -> None:
    import shutil

    alone = tmp_path / "alone"
    shutil.copytree(TRACES / "llama4l-eager-h200", alone)
    here, there = analyze(TRACES / "llama4l-eager-h200")[0], analyze(alone)[0]
    pd.testing.assert_frame_equal(here.fusion, there.fusion)
    assert here.roof == there.roof and here.roof.label == "H200 (datasheet)"
    measured = analyze(alone, ceilings=TRACES)[0]
    assert measured.roof.label == "NVIDIA H200 (measured)"
    assert measured.fusion["rate_source"].iloc[0] == "fit to 32 same-bytes copies"


def test_an_unlinked_kernel_is_named_by_the_op_that_launches_it_most_elsewhere() -> None:
    """linked_keys: a chain's '?kernel' part becomes the op that launches that kernel (by its short name) most often
    among the linked events, ties to the first seen; a kernel no linked event names keeps its own name, and a trace whose
    chains are all linked keeps every key (its events' ops are then not read: a frame without them serves)."""
    from fuseprof.analysis.judgements.fusion import linked_keys

    events = pd.DataFrame({"op": ["aten::add", None, "aten::mul", "aten::mul", "aten::add"],
                           "name": ["void add_kernel<float>", "void add_kernel<float>", "void add_kernel<float>",
                                    "void add_kernel<float>", "void exp_kernel<float>"]})
    add = short_kernel_name("void add_kernel<float>")
    chains = pd.DataFrame({"key": [f"aten::neg → ?{add}", "?other_kernel → aten::neg"]})
    assert linked_keys(chains, events).tolist() == ["aten::neg → aten::mul", "other_kernel → aten::neg"]
    linked = pd.DataFrame({"key": ["aten::neg → aten::exp", "aten::mul"]})
    assert linked_keys(linked, pd.DataFrame()).tolist() == ["aten::neg → aten::exp", "aten::mul"]

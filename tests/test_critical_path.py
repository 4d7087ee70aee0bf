"""The critical path and the what-if on real captures: a step built with a known path, the replay of an unchanged
graph, a host-bound decode whose fusion saves step time the GPU saving does not show, and the captured A/B pairs'
errors (docs/whatif.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.paths.critical_path import walk
from fuseprof.analysis.paths.path import result_graphs
from fuseprof.analysis.paths.plan import Plan
from fuseprof.analysis.paths.whatif import replay, replayed
from fuseprof.cli import main
from fuseprof.parse.store import default_store

TRUTH = Path(__file__).parent / "fixtures" / "truth"
PAIRS = Path(__file__).parent / "fixtures" / "whatif"


def _graphs(path: Path):  # type: ignore[no-untyped-def]
    result = analyze([path])[0]
    return result, result_graphs(result, default_store().tables(path)[0])


def test_the_known_path_is_the_path() -> None:
    """known_path's step: small kernels, a 2 ms host sleep, a long GEMM on a side stream the default stream then
    waits for, a synchronize, small kernels; ten small ops run on the host meanwhile (overlapped_small): every
    range of the truth file's path is on the path, overlapped_small is not, and the GEMM's slack is less than its
    time (the host's path takes over)."""
    truth = json.loads((TRUTH / "known_path.truth.json").read_text())
    result = analyze([TRUTH / "known_path.json.gz"])[0]
    top = analyze([TRUTH / "known_path.json.gz"], top=200)[0].path_top
    on_path = top.groupby("ranges")["time_ns"].sum()
    assert set(truth["critical_path"]) <= set(on_path.index), on_path
    assert all(name not in on_path.index for name in truth["off_path"])
    sleep = on_path["host_sleep"] / len(result.critical_path)
    assert truth["host_sleep_ms"] * 1e6 <= sleep < 1.3 * truth["host_sleep_ms"] * 1e6
    gemm = top[top["ranges"] == "long_gemm"].sort_values("time_ns").iloc[-1]
    assert gemm["bound"] == "GPU kernel" and 0 < gemm["step_saving_if_zero_ns"] < gemm["time_ns"]
    assert (result.critical_path["path_ns"] == result.critical_path["span_ns"]).all()


@pytest.mark.parametrize("name", ["known_path", "decode_eager", "train_foreach", "prefill_compiled", "sync_bound",
                                  "dataloader_wait"])
def test_an_unchanged_graph_replays_every_step_to_the_ns(name: str) -> None:
    _, graphs = _graphs(TRUTH / f"{name}.json.gz")
    assert graphs and all(replay(g) == g.span_ns for g in graphs)
    for g in graphs:  # the path walked again on the replayed times: the same path
        again = walk(replayed(g, Plan()))
        assert again[["start_ns", "end_ns", "category"]].equals(walk(g)[["start_ns", "end_ns", "category"]])


def test_on_a_host_bound_decode_the_step_saving_is_not_the_gpu_saving() -> None:
    """decode_eager is host-bound on its path: fusing the top row removes launches and their host time, which the
    step waited for, so its step saving exceeds the GPU saving many times over."""
    result = analyze([TRUTH / "decode_eager.json.gz"])[0]
    assert set(result.critical_path["bound"]) == {"launch/host"}
    row = result.fusion.iloc[0]
    assert row["step_saving_ns"] > 5 * row["saving_ns"] > 0


def test_the_pairs_errors_are_kept() -> None:
    """The closed loop over the captured pairs equals the table in docs/whatif.md."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
    from whatif_pairs import pair_rows

    doc = (Path(__file__).parent.parent / "docs" / "whatif.md").read_text()
    for row in pair_rows(PAIRS):
        line = next(x for x in doc.splitlines() if x.startswith(f"| {row['pair']} "))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[5]) == row["error vs traced %"] and float(cells[9]) == row["error vs measured %"], line


def test_whatif_prints_the_step_before_and_after(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", str(PAIRS / "optimizer_a.json.gz"), "--fuse", "optimizer", "--step-time", "20.784"]) == 0
    out = capsys.readouterr().out
    assert "median step" in out and "predicted" in out and "GPU saving" in out
    assert "The critical path by bound, all steps, before and after at the measured scale" in out


@pytest.mark.parametrize("args", [[], ["--fuse", "no such class"], ["--fuse", "top:0"], ["--graph", "no_such_range"]])
def test_whatif_refuses_a_plan_it_cannot_apply(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", str(PAIRS / "qkv_a.json.gz"), *args]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_plan_file_is_the_options_it_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"compile": ["step"]}))
    assert main(["whatif", str(PAIRS / "compile_a.json.gz"), "--plan", str(plan), "--format", "json"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main(["whatif", str(PAIRS / "compile_a.json.gz"), "--compile", "step", "--format", "json"]) == 0
    assert by_file == json.loads(capsys.readouterr().out) and all(r["step_saving_ns"] > 0 for r in by_file)
    plan.write_text(json.dumps({"fuse": "top:1"}))  # a string where a list belongs
    assert main(["whatif", str(PAIRS / "compile_a.json.gz"), "--plan", str(plan)]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.shared
def test_a_rank_not_late_and_communication_overlapped_shorten_the_others_steps(capsys: pytest.CaptureFixture[str]
                                                                              ) -> None:
    """ddp_step: rank 1 is last to all 24 all-reduces (labels.json: rank 0 waits 14,107.5 µs in all). Replayed
    with rank 1 not late, every step of rank 0 is shorter, by no more than the waits it had; with the
    all-reduces overlapped, shorter too."""
    from tests.conftest import shared_traces

    ranks = sorted((shared_traces() / "h200_2gpu").glob("ddp_step_rank*.json.gz"))
    assert main(["whatif", *map(str, ranks), "--not-late", "1", "--format", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)
    assert {s["trace"] for s in steps} == {ranks[0].name}  # the late rank itself is not replayed
    assert all(s["step_saving_ns"] > 0 for s in steps) and sum(s["step_saving_ns"] for s in steps) <= 14_107_535
    assert main(["whatif", str(ranks[0]), "--overlap-communication", "--format", "json"]) == 0
    assert all(s["step_saving_ns"] > 0 for s in json.loads(capsys.readouterr().out))
    assert main(["whatif", str(ranks[0]), "--not-late", "1"]) == 2  # one rank: nothing to wait for


def test_labelling_a_path_whose_gpu_event_is_missing_is_an_error() -> None:
    """The path's GPU items are labelled from the events by position: an event the table lacks is refused, not
    given another event's labels (an index position of -1 is the last row)."""
    from fuseprof.analysis.paths.path import step_paths

    result, graphs = _graphs(TRUTH / "known_path.json.gz")
    tables = default_store().tables(TRUTH / "known_path.json.gz")[0]
    assert len(step_paths(graphs, result.events, tables, result.registry))
    gpu_events = {e for g in graphs for e in g.event if e is not None and e in result.events.index}
    assert gpu_events
    with pytest.raises(KeyError):  # the path of a step with GPU work holds some GPU item
        step_paths(graphs, result.events.drop(index=list(gpu_events)), tables, result.registry)


def test_each_threads_wait_calls_are_its_stream_waits_in_start_order() -> None:
    """The wait calls' guess reads, per thread, when it queued a stream wait: the starts of its calls whose role is
    'wait call', in order, other roles left out, and a call with no thread in no thread's list."""
    import numpy as np
    import pandas as pd

    from fuseprof.analysis.paths.critical_path import _wait_times

    calls = pd.DataFrame({"tid": pd.Series(["7", "7", "9", None, "7", "9"], dtype=object).astype(str).where(
        [True, True, True, False, True, True], np.nan),
        "start_ns": [500, 100, 300, 50, 900, 200], "role": ["wait call", "wait call", "wait call", "wait call",
                                                            "launch", "sync"]})
    assert _wait_times(calls) == {"7": [100, 500], "9": [300]}


def test_the_sync_saving_of_each_step_is_its_own_replays_difference(tmp_path: Path) -> None:
    """sync_savings replays every step at once, those without a sync unchanged: each step with one gets the step time
    its sequential replay (``whatif.replay``, one step alone) loses when its syncs take no time, the host scaled in
    both; a step without one gets none. A generated rank whose steps make a sync in some steps and not in others."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from make_rank_set import make_rank_set

    from fuseprof.analysis.paths.sync_saving import no_sync_plan, sync_savings

    make_rank_set(tmp_path, ranks=1, steps=20, seed=3)
    _, graphs = _graphs(next(tmp_path.glob("*.json")))
    syncing = [g for g in graphs if any(on >= 0 for on in g.sync_on)]
    assert 0 < len(syncing) < len(graphs)  # both kinds of step, or the test tells nothing
    for scale in (1.0, 0.6):
        expected = {g.step: replay(g, Plan(host_scale=scale)) - replay(g, no_sync_plan(g, scale)) for g in syncing}
        assert sync_savings(graphs, scale) == expected


def test_a_threads_host_spans_are_its_rows_in_order_and_a_missing_thread_is_none() -> None:
    """HostLookup.spans: per thread (as text), its ops' (start, start + duration, name) in the table's order; a row
    with no thread is no thread's, a thread with no row has none, a nullable start left missing stays missing."""
    from types import SimpleNamespace

    import pandas as pd

    from fuseprof.analysis.paths.critical_path import HostLookup
    from fuseprof.model.registry_data import DEFAULT

    ops = pd.DataFrame({"tid": pd.Series([7, "8", None, 7, 7], dtype=object),
                        "start_ns": pd.array([30, 10, 5, None, 20], dtype="Int64"), "dur_ns": [4, 2, 1, 9, 3],
                        "name": ["c", "b", "x", "d", "a"]})
    lookup = HostLookup(SimpleNamespace(ops=ops), DEFAULT)  # type: ignore[arg-type]
    assert lookup.spans("ops", "7") == [(30, 34, "c"), (pd.NA, pd.NA, "d"), (20, 23, "a")]
    assert lookup.spans("ops", "8") == [(10, 12, "b")]
    assert lookup.spans("ops", "9") == [] and lookup.spans("ops", "None") == []


def test_the_loop_period_is_the_module_docstrings_max_or_alone_whether_joined_or_not(tmp_path: Path) -> None:
    """loop_periods (a small step set: its kinds of row in one replay call) per row and step: a step that waits for
    the GPU replayed alone, host scaled; another the larger of its host alone (GPU items at no time) and its GPU
    alone (no host time), each replayed on its own; the same with the calls kept apart (a large window's way)."""
    import numpy as np

    from fuseprof.analysis.paths import loop_period
    from fuseprof.analysis.paths.sync_saving import no_sync_plan

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from make_rank_set import make_rank_set

    make_rank_set(tmp_path, ranks=1, steps=20, seed=3)
    _, graphs = _graphs(next(tmp_path.glob("*.json")))
    plans = [[Plan()] * len(graphs), [no_sync_plan(g) for g in graphs]]
    waits = np.array(loop_period.waits_for_gpu(graphs))
    assert waits.any() and not waits.all()
    scale = 0.7
    expected = [[replay(g, p.merge(Plan(host_scale=scale))) if w else
                 max(replay(g, p.merge(Plan(host_scale=scale, gpu_scale=0.0))),
                     replay(g, loop_period._no_host(g, p).merge(Plan(host_scale=0.0))))
                 for g, p, w in zip(graphs, row, waits)] for row in plans]
    assert loop_period.loop_periods(graphs, plans, scale).tolist() == expected
    joined, loop_period.JOINED_CELLS = loop_period.JOINED_CELLS, 0
    try:
        assert loop_period.loop_periods(graphs, plans, scale).tolist() == expected
    finally:
        loop_period.JOINED_CELLS = joined

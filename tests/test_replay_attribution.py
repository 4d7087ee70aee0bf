"""Graph replays attributed without their capture (issue 63, point 1): aligned to an eager twin, to the trace's own
eager warm-up steps, else named by the kernel families — each kernel compared with the capture-based attribution
(fuseprof.analysis.facts.graphs, the existing code), kernel by kernel, on the committed and shared graph replays."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis.facts.events import TWIN_CHECK, attributed_without_capture, categorized_events
from fuseprof.analysis.facts.graphs import attribute_replays, capture_windows
from fuseprof.cli import main
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from fuseprof.parse.trace_link import link_gpu_events
from tests.conftest import FUZZ_RESULTS, ROOT, held_safely, shared_traces

TRUTH = ROOT / "tests" / "fixtures" / "truth_unprofiled"
GRAPHS = [(card, name) for card in ("h100", "h100b") for name in ("decode_graph", "infer_graph")]


def by_capture(replay: Path, capture: Path) -> pd.DataFrame:
    """The replayed kernels as the capture attributes them (the existing ``--graph-capture`` path)."""
    events, _ = attribute_replays(link_gpu_events(read_trace_tables(replay)), capture_windows(read_trace_tables(capture)))
    return events[events["graph_replay"].notna()]


def agreeing_share(reference: pd.DataFrame, got: pd.DataFrame) -> float:
    """The share of replayed GPU time (%) whose op and module, kernel by kernel, equal the reference's."""
    assert (reference["start_ns"].to_numpy() == got["start_ns"].to_numpy()).all()  # the same kernels, row for row
    def text(column: pd.Series) -> list[str]:
        return column.astype(object).fillna("(none)").tolist()

    same = [(a, b) == (c, d) for a, b, c, d in zip(text(reference["op"]), text(reference["module"]), text(got["op"]),
                                                     text(got["module"]))]
    dur = reference["dur_ns"].to_numpy(dtype=float)
    return 100 * float(dur[same].sum() / dur.sum())


def truth_twin(card: str, name: str) -> Path:
    """The eager twin a graph capture's truth file names."""
    import json

    return TRUTH / card / f"{json.loads((TRUTH / card / f'{name}.truth.json').read_text())['eager_twin']}.json.gz"


@pytest.mark.parametrize(("card", "name"), GRAPHS)
def test_an_eager_twin_attributes_the_replay_as_its_capture_does(card: str, name: str) -> None:
    reference = by_capture(TRUTH / card / f"{name}.json.gz", TRUTH / card / f"{name}.capture.json.gz")
    events, checked = categorized_events(read_trace_tables(TRUTH / card / f"{name}.json.gz"), DEFAULT, None,
                                         (read_trace_tables(truth_twin(card, name)),))
    got = events[events["graph_replay"].notna()]
    assert reference["op"].notna().all() and len(got) == len(reference) > 0
    assert agreeing_share(reference, got) >= 95.0
    assert checked == TWIN_CHECK
    assert set(got["attributed_by"]) <= {"eager twin", "family"}
    twin = got[got["attributed_by"] == "eager twin"]
    assert twin["attribution_confidence"].between(0.5, 1.0).all()
    assert twin["op_id"].lt(0).all()  # one op per replay, as a capture gives it


def test_the_traces_own_eager_steps_attribute_its_replays_as_warm_up() -> None:
    # the replay and its twin's eager steps in one frame: an engine's warm-up before its graphs replay
    replay = TRUTH / "h100" / "decode_graph.json.gz"
    eager, _ = attribute_replays(link_gpu_events(read_trace_tables(truth_twin("h100", "decode_graph"))), [])
    replayed, _ = attribute_replays(link_gpu_events(read_trace_tables(replay)), [])
    both = pd.concat([eager.assign(start_ns=eager["start_ns"] - 10**12), replayed], ignore_index=True)
    got = attributed_without_capture(both, ())
    got = got[got["graph_replay"].notna()]
    reference = by_capture(replay, TRUTH / "h100" / "decode_graph.capture.json.gz")
    assert set(got["attributed_by"]) == {"warm-up"}
    assert agreeing_share(reference, got) >= 95.0


def test_a_piecewise_graph_s_pieces_take_their_own_layers() -> None:
    # each replay cut where the capture's layer changes, each piece a replay of its own (vLLM's piecewise graphs):
    # the pieces of Layer_0 and Layer_1 run kernels of the same names, and each must take its own layer's modules
    replay = TRUTH / "h100" / "decode_graph.json.gz"
    reference = by_capture(replay, TRUTH / "h100" / "decode_graph.capture.json.gz")
    layer = reference["module"].astype(str).str.extract(r"(Layer_\d+)")[0].fillna("")
    cut = (layer != layer.shift()) | (reference["graph_replay"] != reference["graph_replay"].shift())
    events, _ = attribute_replays(link_gpu_events(read_trace_tables(replay)), [])
    pieces = events.loc[reference.index]
    events.loc[reference.index, "graph_replay"] = cut.cumsum().to_numpy()
    assert events["graph_replay"].nunique() >= 4 * pieces["graph_replay"].nunique()  # Layer_0, Layer_1 and more
    got = attributed_without_capture(events, (read_trace_tables(truth_twin("h100", "decode_graph")),))
    got = got.loc[reference.index]
    in_layer_1 = layer == "Layer_1"
    assert in_layer_1.any() and got.loc[in_layer_1, "module"].str.contains("Layer_1").all()
    assert agreeing_share(reference, got) >= 95.0


def test_without_twin_or_warm_up_the_families_name_the_kernels_and_modules_are_unknown() -> None:
    events, checked = categorized_events(read_trace_tables(TRUTH / "h100" / "decode_graph.json.gz"), DEFAULT)
    got = events[events["graph_replay"].notna()]
    assert checked is None and got["module"].isna().all() and got["op"].isna().all()
    known = got["family"] != "(no rule)"
    assert (got.loc[known, "attributed_by"] == "family").all() and (got.loc[~known, "attributed_by"] == "none").all()
    assert events.loc[events["graph_replay"].isna(), "attributed_by"].isna().all()


def test_the_integrity_table_says_what_share_is_attributed_which_way() -> None:
    from fuseprof.analysis import analyze

    result = analyze([TRUTH / "h100" / "decode_graph.json.gz"], workers=1,
                     graph_capture=truth_twin("h100", "decode_graph"))[0]
    row = result.integrity.set_index("check").loc["graph_kernel_time_attributed_pct"]
    assert float(row["value"]) == 100.0
    assert "eager twin 100%" in row["detail"] and "capture 0%" in row["detail"]
    said = [n for n in result.notes if n.startswith("graph replays attributed")]
    assert said and "--eager-twin" in said[0] and "capture trace" not in said[0]


def test_check_with_an_eager_twin_passes_and_says_how(capsys: pytest.CaptureFixture[str]) -> None:
    replay = TRUTH / "h100" / "decode_graph.json.gz"
    assert main(["check", str(replay), "--eager-twin", str(truth_twin("h100", "decode_graph"))]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "graph_kernel_time_attributed_pct 100 ok" in out


@pytest.mark.parametrize("twin", ["missing.json.gz", "README.md"])
def test_an_eager_twin_that_is_no_trace_is_a_clear_error(twin: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", str(TRUTH / "h100" / "decode_graph.json.gz"), "--eager-twin", str(TRUTH / twin)])
    err = capsys.readouterr().err.strip()
    clear = code == 2 and err.startswith("fuseprof: error:") and len(err.splitlines()) == 1
    FUZZ_RESULTS["clear error" if clear else "traceback"] += 1
    assert clear, err


@pytest.mark.parametrize("twin", ["truth_unprofiled/h100/train_fused.json.gz", "truth_unprofiled/h100/decode_graph.json.gz",
                                  "truth_unprofiled/h100/data_bound.json.gz", "writers/torch213_cpu_kineto.gz",
                                  "h200-graphs/graph-replay.json.gz"])
def test_a_twin_of_another_computation_gives_nothing(twin: str) -> None:
    # another model's eager trace (its generic kernels align 57% of the replay), the replay itself (no ops), a
    # data-bound loop, a CPU-only trace (no kernel), another model's graph replay: nothing is taken from them
    events, _ = categorized_events(read_trace_tables(TRUTH / "h100" / "decode_graph.json.gz"), DEFAULT, None,
                                   (read_trace_tables(ROOT / "tests" / "fixtures" / twin),))
    got = events[events["graph_replay"].notna()]
    taken = got[got["attributed_by"] == "eager twin"]
    held_safely(None if taken.empty else f"{len(taken)} kernels", f"twin {twin}")


@pytest.mark.shared
def test_the_h200_decode_replay_aligned_to_its_eager_twin_agrees_with_its_capture() -> None:
    turn4 = shared_traces() / "h200-turn4"
    reference = by_capture(turn4 / "decode_graph_replay.json.gz", turn4 / "decode_graph_capture.json.gz")
    events, _ = categorized_events(read_trace_tables(turn4 / "decode_graph_replay.json.gz"), DEFAULT, None,
                                   (read_trace_tables(turn4 / "decode_eager.json.gz"),))
    got = events[events["graph_replay"].notna()]
    assert reference["op"].notna().all()
    assert agreeing_share(reference, got) >= 95.0


@pytest.mark.shared
@pytest.mark.parametrize("name", ["vllm_decode_full_graph_execution", "vllm_prefilldecode_piecewise_graph_execution",
                                  "sglang_Qwen3-8B_decode"])
def test_engine_replays_get_their_category_from_the_families(name: str) -> None:
    tables = read_trace_tables(shared_traces() / f"{name}.json.gz")
    events, _ = categorized_events(tables, DEFAULT)
    got = events[events["graph_replay"].notna()]
    dur = got["dur_ns"].astype(float)
    assert 100 * dur[got["attributed_by"] == "family"].sum() / dur.sum() >= 95.0
    # no op and no layer is made up: the module is the one the replay's launch ran in (a piecewise graph's
    # GraphModule), as the trace records it, or none
    linked = link_gpu_events(tables)
    assert got["op"].isna().all()
    assert got["module"].astype(object).fillna("").tolist() == \
        linked.loc[got.index, "module"].astype(object).fillna("").tolist()


def verdicts(replay: Path, given: Path | None) -> dict[str, str]:
    """The audit's verdict per catalogue entry, the replay analysed with ``given`` (a capture, an eager twin)."""
    from fuseprof.analysis import analyze

    result = analyze([replay], workers=1, graph_capture=given)[0]
    return dict(zip(result.audit["fusion"], result.audit["verdict"]))


def test_the_audit_with_an_eager_twin_gives_the_capture_s_verdicts() -> None:
    replay = TRUTH / "h100" / "decode_graph.json.gz"
    with_capture = verdicts(replay, TRUTH / "h100" / "decode_graph.capture.json.gz")
    assert "not fused" in with_capture.values()  # entries found, so equal verdicts say something
    assert verdicts(replay, truth_twin("h100", "decode_graph")) == with_capture


@pytest.mark.shared
@pytest.mark.parametrize(("name", "capture", "apart"), [
    ("vllm_decode_full_graph_execution", "vllm_decode_full_graph_capture", set()),
    ("vllm_prefilldecode_piecewise_graph_execution", "vllm_prefilldecode_piecewise_graph_capture", set()),
    # sampling: an argmax over the logits, read by its shapes with the capture and, without, as the argmax kernel
    # launched right after the LM head's GEMM
    ("sglang_Qwen3-8B_decode", "sglang_decode_capture_bs32", set())])
def test_engine_replays_audited_from_the_families_give_the_capture_s_verdicts(name: str, capture: str,
                                                                               apart: set[str]) -> None:
    replay = shared_traces() / f"{name}.json.gz"
    with_capture, alone = verdicts(replay, shared_traces() / f"{capture}.json.gz"), verdicts(replay, None)
    differ = {e for e, v in with_capture.items() if alone.get(e) != v}
    assert differ == apart, {e: (alone.get(e), with_capture[e]) for e in differ}

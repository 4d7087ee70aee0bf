"""Attribution of CUDA-graph replays without their capture, scored against the capture-based one (issue 63).

Per trace: the replay attributed once with its capture trace (``--graph-capture``, fuseprof.analysis.facts.graphs) and once
without it — aligned to its eager twin, or to its own eager warm-up steps, else named by the kernel families
(fuseprof.analysis.facts.replay_twin) — then compared kernel by kernel: the share of replayed GPU time whose op and module
agree, and the share attributed each way. Run from the repository root: ``python scripts/score_replay_attribution.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("FUSEPROF_CACHE", "off")  # every analysis made by this code, none read back from the store

import pandas as pd

from fuseprof.analysis import analyze
from fuseprof.analysis.facts.events import categorized_events
from fuseprof.analysis.facts.graphs import capture_windows
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables

FIXTURES = Path("tests/fixtures/truth_unprofiled")
SHARED = Path("../shared/thirdparty-traces")
METHODS = ("capture", "eager twin", "warm-up", "family", "none")


def cases() -> list[tuple[str, Path, Path | None, Path | None]]:
    """(name, replay, capture, eager twin) for every committed and shared graph replay."""
    out: list[tuple[str, Path, Path | None, Path | None]] = []
    for card in ("h100", "h100b"):
        for name in ("decode_graph", "infer_graph"):
            twin = name.replace("_graph", "_eager")
            out.append((f"{card}/{name}", FIXTURES / card / f"{name}.json.gz",
                        FIXTURES / card / f"{name}.capture.json.gz", FIXTURES / card / f"{twin}.json.gz"))
    turn4 = SHARED / "h200-turn4"
    out.append(("h200-turn4/decode_graph", turn4 / "decode_graph_replay.json.gz",
                turn4 / "decode_graph_capture.json.gz", turn4 / "decode_eager.json.gz"))
    for name, capture in (("vllm_decode_full_graph_execution", "vllm_decode_full_graph_capture"),
                          ("vllm_prefilldecode_piecewise_graph_execution",
                           "vllm_prefilldecode_piecewise_graph_capture"),
                          ("sglang_Qwen3-8B_decode", "sglang_decode_capture_bs32")):
        out.append((name, SHARED / f"{name}.json.gz", SHARED / f"{capture}.json.gz", None))
    return out


def replayed_pair(replay: Path, capture: Path | None, twin: Path | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The replayed kernels attributed with the capture, and without it (the twin, warm-up, families), row for row."""
    tables = read_trace_tables(replay)
    windows = capture_windows(read_trace_tables(capture)) if capture is not None else None
    with_capture, _ = categorized_events(tables, DEFAULT, windows)
    twins = (read_trace_tables(twin),) if twin is not None else ()
    without, _ = categorized_events(tables, DEFAULT, None, twins)
    replayed = with_capture["graph_replay"].notna()
    return with_capture[replayed], without[replayed]


def agreement(with_capture: pd.DataFrame, without: pd.DataFrame) -> dict[str, float]:
    """Shares of replayed GPU time (%): op and module equal to the capture's, and attributed each way."""
    dur = without["dur_ns"].astype("float64")
    total = dur.sum() or 1.0
    same_op = with_capture["op"].astype(object).fillna("") == without["op"].astype(object).fillna("")
    same_module = with_capture["module"].astype(object).fillna("") == without["module"].astype(object).fillna("")
    out = {"op+module agree": 100 * dur[same_op & same_module].sum() / total,
           "op agree": 100 * dur[same_op].sum() / total,
           "capture attributed": 100 * dur[with_capture["op"].notna()].sum() / total}
    for method in METHODS:
        out[method] = 100 * dur[without["attributed_by"] == method].sum() / total
    out["family category"] = 100 * dur[without["family"] != "(no rule)"].sum() / total  # any kernel-name row
    out["mined family"] = 100 * dur[without["family"].astype(str).str.endswith("(mined)")].sum() / total
    out["category agree"] = 100 * dur[with_capture["category"] == without["category"]].sum() / total
    return out


def verdicts(replay: Path, given: Path | None) -> dict[str, str]:
    """The audit's verdict per catalogue entry, the replay analysed with ``given`` (a capture or an eager twin)."""
    result = analyze([replay], workers=1, graph_capture=given)[0]
    return dict(zip(result.audit["fusion"], result.audit["verdict"]))


def same_verdicts(replay: Path, capture: Path, twin: Path | None) -> str:
    """How many of the audit's verdicts with the capture the audit without it gives (``k/n``), and the differences."""
    with_capture, without = verdicts(replay, capture), verdicts(replay, twin)
    differ = [f"{e}: {without.get(e)} (capture: {v})" for e, v in with_capture.items() if without.get(e) != v]
    return f"{len(with_capture) - len(differ)}/{len(with_capture)}" + (f" [{'; '.join(differ)}]" if differ else "")


def main() -> int:
    rows, audits = {}, {}
    for name, replay, capture, twin in cases():
        if not replay.exists() or capture is None or not capture.exists():
            print(f"{name}: {replay} or its capture not here, skipped", file=sys.stderr)
            continue
        rows[name] = agreement(*replayed_pair(replay, capture, twin))
        audits[name] = same_verdicts(replay, capture, twin)
        if twin is not None:  # and without the twin: the trace's own warm-up steps, else the families alone
            rows[f"{name} (no twin)"] = agreement(*replayed_pair(replay, capture, None))
            audits[f"{name} (no twin)"] = same_verdicts(replay, capture, None)
    print("Shares of replayed GPU time (%), attribution without the capture against the capture's:")
    print(pd.DataFrame(rows).T.round(1).to_string())
    print("\nAudit verdicts without the capture equal to those with it:")
    for name, said in audits.items():
        print(f"  {name}: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

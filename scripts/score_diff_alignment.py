"""Score ``fuseprof diff``'s alignment against pairs of runs whose changes are known (issue 62's "Done when").

    python scripts/score_diff_alignment.py [TRUTH_OR_FOLDER...] [--vendors] [--markdown]

    e.g. python scripts/score_diff_alignment.py tests/fixtures/diff_pairs/h100_d768   (one set, pooled)

Each ``<pair>.truth.json`` (default: tests/fixtures/diff_truth/ and tests/fixtures/diff_pairs/*/) names A and B
(``a.trace``, ``b.trace``, ``b.capture`` for a graph replay's capture; paths relative to the truth file) and what
each part of A must match in B, in either of two forms:

- ``matches`` (scripts/capture_diff_pairs.py's): one row per module of A — ``a`` its path, ``b`` the path in B it
  must match, ``class`` the class of change — and ``regions`` for the work outside any module (the optimizer's
  ``Optimizer.step#…`` range, the backward), matched by the phase word they name;
- ``patterns`` (tests/fixtures/diff_truth/'s, written by hand): rows whose ``a`` is a regular expression over A's
  module paths, the first that matches applies; ``b`` "same" means the same path.

For every GPU event of A (every step) the score asks: is it in a matched group whose B side holds a kernel of the
expected B module (its own module, or where B names none, the modules of the A work the group joins: an Inductor
kernel that fused an RMSNorm with the residual add before it computes both), and is its module's class the
expected one? It prints, per pair and pooled, the share of A's GPU time right on the module, on the class, on
both, and the share no truth row judges; with several folders, each folder pooled too. ``--vendors`` adds the shared H100/MI300 pairs of one model
(../shared/thirdparty-traces): matched share and the top modules; ``--markdown`` prints those as a table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from fuseprof.analysis import analyze  # noqa: E402
from fuseprof.analysis.judgements.changes import Changes, changes  # noqa: E402

DEFAULT = [ROOT / "tests" / "fixtures" / "diff_truth", *sorted((ROOT / "tests" / "fixtures" / "diff_pairs").glob("*/"))]
SHARED = ROOT.parent / "shared" / "thirdparty-traces"
VENDORS = [("bert_small_uncased", "h100_bert_small_uncased", "mi300_bert_small_uncased"),
           ("falconsai_nsfw_image_detection", "h100_falconsai_nsfw_image_detection",
            "mi300_falconsai_nsfw_image_detection"),
           ("Qwen1.5-0.5B", "h100_Qwen_Qwen1.5-0.5B-Chat__1016005", "mi300_Qwen1.5-0.5B"),
           ("timesformer", "h100_facebook_timesformer-base-finetuned-k400__1016002", "mi300_timesformer")]
SAME = (None, "same", "the same")
BACKWARD = " (backward)"


def _base(path: str) -> str:
    return path[: -len(BACKWARD)] if path.endswith(BACKWARD) else path


def _rule(truth: dict[str, Any], module: str, named: bool) -> dict[str, Any] | None:
    """The truth row that judges a unit of A counted under ``module`` (named: a module path, else a phase)."""
    if named:
        base = _base(module)
        for row in truth.get("matches", []):
            if row["a"] == base:
                return {**row, "b": base if row.get("b") in SAME else row["b"]}
        for row in truth.get("patterns", []):
            if re.search(row["a"], base):
                return {**row, "b": base if row.get("b") in SAME else row["b"]}
        return None
    phase = module.strip("()").lower()
    for row in truth.get("regions", []):
        if phase and phase in str(row["a"]).lower():
            return {**row, "b": module}
    return None


def score(truth_path: Path) -> dict[str, Any]:
    """One pair's shares of A's GPU time (ns) right on module, class, both, and unjudged."""
    truth = json.loads(truth_path.read_text())
    here = truth_path.parent
    a = analyze(here / truth["a"]["trace"])[0]
    capture = truth["b"].get("capture")
    b = analyze(here / truth["b"]["trace"], graph_capture=[here / capture] if capture else None)[0]
    found = changes(a, b)
    units = found.alignment.units
    ua, ub = units[units["side"] == "A"], units[(units["side"] == "B") & units["reference"]]
    b_paths = {g: {_base(str(x)) for x in set(f["module"]) | set(f["part"])} for g, f in ub.groupby("group")}
    for g, f in ua[ua["reference"]].groupby("group"):  # a B kernel that names no module computes its group's A modules
        if g in b_paths and not ub.loc[ub["group"] == g, "has_module"].any():
            b_paths[g] |= {_base(str(x)) for x in f["module"]}
    classes = found.modules.set_index("part")["change"].to_dict()
    out = {"pair": f"{here.name}/{truth.get('pair', truth_path.stem)}", "set": here.name, "a_ns": 0, "module_ns": 0, "class_ns": 0, "both_ns": 0,
           "unjudged_ns": 0, "wrong": {}}
    for unit in ua.itertuples():
        out["a_ns"] += unit.dur_ns
        row = _rule(truth, str(unit.module), bool(unit.has_module))
        if row is None:
            out["unjudged_ns"] += unit.dur_ns
            continue
        expected = _base(str(row["b"]))  # B's kernel inside the expected module (or under it) is in it
        module_right = unit.group >= 0 and any(p == expected or p.startswith(expected + " / ")
                                               for p in b_paths.get(unit.group, set()))
        class_right = classes.get(unit.part) == row["class"]
        out["module_ns"] += unit.dur_ns * module_right
        out["class_ns"] += unit.dur_ns * class_right
        out["both_ns"] += unit.dur_ns * (module_right and class_right)
        if not (module_right and class_right):
            key = f"{_base(str(unit.module))}: expected {row['b']} {row['class']}, got " \
                  f"{'unmatched' if unit.group < 0 else 'other module' if not module_right else 'ok'} " \
                  f"{classes.get(unit.part)}"
            out["wrong"][key] = out["wrong"].get(key, 0) + unit.dur_ns
    out["matched_a_pct"] = found.summary["matched_a_pct"]
    return out


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _line(label: str, r: dict[str, Any]) -> str:
    return (f"{label:32} {r['a_ns'] / 1e3:10.1f} {_pct(r['module_ns'], r['a_ns']):>8} "
            f"{_pct(r['class_ns'], r['a_ns']):>8} {_pct(r['both_ns'], r['a_ns']):>8} "
            f"{_pct(r['unjudged_ns'], r['a_ns']):>9}")


def pooled(rows: list[dict[str, Any]]) -> dict[str, int]:
    """The rows' shares summed (each pair weighs its A time)."""
    return {k: sum(r[k] for r in rows) for k in ("a_ns", "module_ns", "class_ns", "both_ns", "unjudged_ns")}


def print_scores(rows: list[dict[str, Any]]) -> None:
    """Per pair (``folder/pair``) with its largest misses, pooled per folder where there are several, then all."""
    print(f"{'pair':32} {'A µs':>10} {'module':>8} {'class':>8} {'both':>8} {'unjudged':>9}")
    for r in rows:
        print(_line(r["pair"], r))
        for what, ns in sorted(r["wrong"].items(), key=lambda kv: -kv[1])[:4]:
            print(f"    {_pct(ns, r['a_ns']):>6}  {what[:150]}")
    sets = list(dict.fromkeys(r["set"] for r in rows))
    for name in sets if len(sets) > 1 else []:
        print(_line(f"pooled {name}", pooled([r for r in rows if r["set"] == name])))
    print(_line("pooled", pooled(rows)))


def vendor_rows(found: Changes, top: int) -> pd.DataFrame:
    table = found.modules.sort_values("time_ns_a", ascending=False, kind="stable").head(top)
    return pd.DataFrame({"module": table["part"].str.split(" / ").str[-3:].str.join(" / "),
                         "H100 µs": (table["time_ns_a"] / 1e3).round(1), "MI300 µs": (table["time_ns_b"] / 1e3).round(1),
                         "kernels": table["kernels_a"].astype(int).astype(str) + " → " +
                         table["kernels_b"].astype(int).astype(str), "change": table["change"]})


def _markdown(rows: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows.itertuples(index=False)]
    return "\n".join(lines)


def print_vendors(top: int, markdown: bool) -> None:
    for model, h100, mi300 in VENDORS:
        pa, pb = SHARED / f"{h100}.json.gz", SHARED / f"{mi300}.json.gz"
        if not pa.exists() or not pb.exists():
            print(f"{model}: not here ({SHARED})")
            continue
        found = changes(analyze(pa)[0], analyze(pb)[0])
        s = found.summary
        print(f"\n{model}: H100 step {s['step_a_ns'] / 1e3:,.1f} µs, MI300 {s['step_b_ns'] / 1e3:,.1f} µs; matched "
              f"{s['matched_a_pct']:.2f}% of H100's GPU time; unmatched H100 {s['unmatched_a_ns'] / 1e3:,.1f} µs, "
              f"MI300 {s['unmatched_b_ns'] / 1e3:,.1f} µs; classes {found.modules['change'].value_counts().to_dict()}")
        rows = vendor_rows(found, top)
        print(_markdown(rows) if markdown else rows.to_string(index=False))
        units = found.alignment.units
        lost = units[(units["group"] < 0) & units["reference"]]
        for side, part in lost.groupby(["side", "part"])["dur_ns"].sum().sort_values(ascending=False).head(4).items():
            print(f"  unmatched {side[0]} {side[1]}: {part / 1e3:,.1f} µs "
                  f"({', '.join(lost[(lost['side'] == side[0]) & (lost['part'] == side[1])]['op'].unique()[:4])})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="truth files or folders of them")
    parser.add_argument("--vendors", action="store_true", help="the shared H100/MI300 pairs too")
    parser.add_argument("--markdown", action="store_true", help="the vendor tables as markdown")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    paths = args.paths or ([] if args.vendors else DEFAULT)
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.glob("*.truth.json")))]
    rows = [score(f) for f in files]
    if rows:
        print_scores(rows)
    if args.vendors:
        print_vendors(args.top, args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

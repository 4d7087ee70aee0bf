"""Every committed and shared trace's analysis as JSON, one file per trace, to compare two versions of fuseprof:

    python scripts/snapshot_analyses.py out/before          # on the old code
    python scripts/snapshot_analyses.py out/after           # on the new
    python scripts/snapshot_analyses.py --compare out/before out/after

Each file is ``fuseprof analyze --format json`` of one trace (every table, the fusion finder and the audit
included), with the store off; the compare lists, per trace, the tables that differ and their first
differing rows. Graph capture/replay pairs are analysed together, as a user passes them."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "thirdparty-traces"
PAIRS = {"vllm_decode_full_graph_execution.json.gz": "vllm_decode_full_graph_capture.json.gz",
         "vllm_prefilldecode_piecewise_graph_execution.json.gz": "vllm_prefilldecode_piecewise_graph_capture.json.gz",
         "sglang_Qwen3-8B_decode.json.gz": "sglang_decode_capture_bs32.json.gz",
         "graph-replay.json.gz": "graph-capture.json.gz"}


def traces() -> list[tuple[str, list[str]]]:
    """(name, analyze arguments) for every trace: bundles under traces/, fixtures, the shared traces."""
    found = [(b.name, [str(b)]) for b in sorted((ROOT / "traces").iterdir()) if (b / "raw").is_dir()
             and any((b / "raw").glob("*.json*"))]
    files = sorted((ROOT / "tests" / "fixtures").rglob("*.json.gz")) + sorted(SHARED.rglob("*.json.gz"))
    for path in files:
        if "bundles" in path.parts or "raw" in path.parts or path.name.endswith(".et.json.gz"):
            continue  # bundles are listed above; an execution trace is read beside its trace
        args = [str(path)]
        if path.name in PAIRS:
            args += ["--graph-capture", str(path.with_name(PAIRS[path.name]))]
        found.append((f"{path.parent.name}__{path.name}", args))
    return found


def snapshot(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "FUSEPROF_CACHE": "off"}
    for name, args in traces():
        done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "analyze", *args, "--format", "json"],
                              capture_output=True, text=True, env=env, cwd=ROOT)
        text = done.stdout if done.returncode == 0 else json.dumps({"exit": done.returncode, "stderr": done.stderr})
        (out / f"{name}.json").write_text(text)
        print(f"{name}: exit {done.returncode}", file=sys.stderr)


def compare(before: Path, after: Path) -> int:
    differ = 0
    for path in sorted(before.glob("*.json")):
        other = after / path.name
        a, b = json.loads(path.read_text()), json.loads(other.read_text()) if other.exists() else {}
        for trace in sorted(set(a) | set(b)):
            ta, tb = a.get(trace, {}), b.get(trace, {})
            if not isinstance(ta, dict) or not isinstance(tb, dict):
                if ta != tb:
                    differ += 1
                    print(f"{path.stem} :: {trace}: {ta!r} -> {tb!r}"[:300])
                continue
            for table in sorted(set(ta) | set(tb)):
                if ta.get(table) != tb.get(table):
                    differ += 1
                    rows_a, rows_b = ta.get(table), tb.get(table)
                    print(f"{path.stem} :: {trace} :: {table}")
                    if isinstance(rows_a, list) and isinstance(rows_b, list):
                        for i, (ra, rb) in enumerate(zip(rows_a, rows_b)):
                            if ra != rb and isinstance(ra, dict) and isinstance(rb, dict):
                                keys = [k for k in set(ra) | set(rb) if ra.get(k) != rb.get(k)]
                                print(f"    row {i}: " + "; ".join(f"{k}: {ra.get(k)!r} -> {rb.get(k)!r}" for k in keys))
                                break
                            if ra != rb:  # a list of texts (the notes)
                                print(f"    item {i}: {ra!r} -> {rb!r}"[:300])
                                break
                        if len(rows_a) != len(rows_b):
                            print(f"    rows {len(rows_a)} -> {len(rows_b)}")
                    else:
                        print(f"    {rows_a!r} -> {rows_b!r}"[:300])
    print(f"{differ} table(s) differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--compare", action="store_true", help="compare two snapshot folders")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.folders)
    snapshot(args.folders[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

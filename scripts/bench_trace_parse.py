"""Parse + analyze of a big trace against a plain ``json.load`` of the same file, side by side.

    python scripts/bench_trace_parse.py [--mb 131] [--scales 1,2,4] [--repeats 3]

Builds a decode-sized torch.profiler trace by repeating the committed H200 Llama trace (each copy
shifted in time, its correlation and External ids offset, so joins stay one-to-one) until it
holds about MB megabytes of JSON, then times, each in a fresh interpreter, (a) ``json.load`` and
(b) ``fuseprof.analysis.analyze_trace`` (decode, link, timeline, categories, top tables,
per-op roofline). Prints wall time and peak RSS of both and their ratios; peak RSS is counted
above each process's own baseline after its imports (what reading the trace costs), and as the
whole process. The machines are shared: compare the ratios, which come from one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
which, path = sys.argv[1], Path(sys.argv[2])
if which == "fuseprof":
    from fuseprof.analysis import analyze_trace
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if which == "json":
    with open(path) as fh:
        data = json.load(fh)
    n = len(data["traceEvents"])
else:
    result = analyze_trace(path)
    n = len(result.events)
wall = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall_s": wall, "peak_mb": peak / 1024, "added_mb": (peak - base) / 1024, "n": n}))
"""


def build(target_mb: float, out: Path) -> dict[str, int]:
    """Write a trace of about ``target_mb`` MB to ``out``; return its event and kernel counts."""
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = [e for e in trace["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    one_copy = len(json.dumps(events))
    copies = max(1, round(target_mb * 1e6 / one_copy))
    stamps = [e["ts"] for e in events if "ts" in e]
    span = max(stamps) - min(stamps) + 1000.0
    ids = [e.get("args", {}).get(k, 0) for e in events for k in ("correlation", "External id")]
    id_step = max(v for v in ids if isinstance(v, int)) + 1
    with out.open("w") as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": ' + json.dumps(trace.get("deviceProperties", [])))
        fh.write(', "traceEvents": [')
        first = True
        for e in meta:
            fh.write(("" if first else ",") + json.dumps(e))
            first = False
        for c in range(copies):
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(e["ts"] + c * span, 3)
                if isinstance(e.get("args"), dict):
                    args = dict(e["args"])
                    for key in ("correlation", "External id"):
                        if isinstance(args.get(key), int):
                            args[key] += c * id_step
                    e2["args"] = args
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + c * id_step
                fh.write(("" if first else ",") + json.dumps(e2))
                first = False
        fh.write("]}")
    kernels = sum(1 for e in events if e.get("cat") == "kernel") * copies
    return {"copies": copies, "events": (len(events) * copies) + len(meta), "kernels": kernels}


def measure(which: str, path: Path, repeats: int) -> dict[str, float]:
    runs = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", _CHILD, which, str(path)], capture_output=True, text=True,
                              check=True, cwd=ROOT)
        runs.append(json.loads(done.stdout))
    best = min(runs, key=lambda r: r["wall_s"])  # the least disturbed run of each, as timeit does
    return {**best, "peak_mb": max(r["peak_mb"] for r in runs), "added_mb": max(r["added_mb"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=131, help="size of the 1x trace in MB of JSON (default 131)")
    parser.add_argument("--scales", default="1,2,4", help="multiples of --mb to measure (default 1,2,4)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side per size (default 3)")
    args = parser.parse_args()
    print(f"{'size':>6} {'MB':>6} {'events':>9} {'kernels':>8} | {'json.load s':>11} {'fuseprof s':>10} {'time x':>6} | "
          f"{'json +MB':>8} {'fuseprof +MB':>12} {'RSS x':>6} | {'json peak':>9} {'fp peak':>8} {'peak x':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (float(s) for s in args.scales.split(",")):
            path = Path(tmp) / f"trace-{scale:g}x.json"
            counts = build(args.mb * scale, path)
            plain, ours = measure("json", path, args.repeats), measure("fuseprof", path, args.repeats)
            print(f"{scale:>5g}x {path.stat().st_size / 1e6:>6.0f} {counts['events']:>9,} {counts['kernels']:>8,} | "
                  f"{plain['wall_s']:>11.2f} {ours['wall_s']:>10.2f} {ours['wall_s'] / plain['wall_s']:>6.2f} | "
                  f"{plain['added_mb']:>8.0f} {ours['added_mb']:>12.0f} {ours['added_mb'] / plain['added_mb']:>6.2f} | "
                  f"{plain['peak_mb']:>9.0f} {ours['peak_mb']:>8.0f} {ours['peak_mb'] / plain['peak_mb']:>6.2f}",
                  flush=True)
            path.unlink()


if __name__ == "__main__":
    main()

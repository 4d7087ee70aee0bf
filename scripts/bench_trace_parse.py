"""The whole ``fuseprof analyze`` command against a plain ``json.load`` of the same file, cold and warm.

    python scripts/bench_trace_parse.py [--mb 131] [--scales 1,2,4] [--repeats 3] [--public PATH|none]
                                        [--hta-python PYTHON] [--plain-only]

A 1 GB-class trace (issue 61's memory target: the cold command's peak RSS <= 3x the decompressed JSON's bytes):

    python scripts/bench_trace_parse.py --mb 1000 --scales 1 --repeats 1 --public none --plain-only

Builds decode-sized torch.profiler traces by repeating the committed H200 Llama trace (each copy
shifted in time, its correlation and External ids offset, so joins stay one-to-one) to about MB ×
scale megabytes of JSON, plain and gzipped, and measures beside them a public trace without repeating
steps, as it is (``public_trace``: /work/bench-traces/long_decode.json.gz where it has been made, else
the largest shared trace with no ProfilerStep). Then, per file, interleaved ``repeats`` times, each a
fresh process timed from outside (start-up and imports included):

    json.load  python -c 'json.load(open(f))' (gzip.open for .gz): the baseline of every ratio
    cold       fuseprof analyze f --format json, into an empty trace store: every section, the fusion
               finder included, and the store written
    warm       the same command again: the store answers
    HTA        where HolisticTraceAnalysis imports (in this interpreter, or the one ``--hta-python``
               names): its TraceAnalysis of the file and its kernel and temporal breakdowns

It prints the medians, each side's ratio to json.load of the same bytes (CPU time, the process's and its
children's, as the median of each round's own ratio: this machine's speed drifts within minutes; wall
time; peak RSS: each process's own VmHWM, and the cold command's over the JSON's bytes, ``RSS/B``), the MB of JSON per second per core (the command runs on one
core), and seconds per 100 MB (linear growth keeps it flat across sizes). The machines are shared:
compare the ratios, which come from one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
SHARED = ROOT.parent / "shared" / "thirdparty-traces"
LONG_DECODE = Path("/work/bench-traces/long_decode.json.gz")  # an eager decode of thousands of tokens, when made

_PEAK = ("next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) / 1024")
_JSON = ("import gzip, json, sys\np = sys.argv[1]\nwith (gzip.open(p) if p.endswith('.gz') else open(p)) as fh:\n"
         "    json.load(fh)\nprint(" + _PEAK + ", file=sys.stderr)")
_FUSEPROF = ("import contextlib, io, sys\nfrom fuseprof.cli import main\n"
             "with open('/dev/null', 'w') as sink, contextlib.redirect_stdout(sink):\n"
             "    code = main(['analyze', sys.argv[1], '--format', 'json'])\n"
             "print(" + _PEAK + ", file=sys.stderr)\nsys.exit(code)")
# HTA's own reading of a trace (its parse into frames), then the two breakdowns a first look asks of it
_HTA = ("import os, sys, warnings\nwarnings.simplefilter('ignore')\nfrom hta.trace_analysis import TraceAnalysis\n"
        "p = sys.argv[1]\na = TraceAnalysis(trace_files={0: os.path.basename(p)}, trace_dir=os.path.dirname(p))\n"
        "a.get_gpu_kernel_breakdown(visualize=False)\na.get_temporal_breakdown(visualize=False)\n"
        "print(" + _PEAK + ", file=sys.stderr)")


def hta_python(given: str | None) -> str | None:
    """The interpreter that runs HTA: ``given``, else this one where HTA imports in it; None: not installed."""
    for python in ([given] if given else [sys.executable]):
        if subprocess.run([python, "-c", "import hta"], capture_output=True).returncode == 0:
            return python
    return None


def public_trace(given: str | None) -> Path | None:
    """The public trace without repeating steps: ``given`` ('none': none), else the long decode where it has been
    made, else the largest shared trace whose events hold no ProfilerStep."""
    if given:
        return None if given == "none" else Path(given)
    if LONG_DECODE.exists():
        return LONG_DECODE
    stepless = [p for p in SHARED.glob("*.json.gz") if b"ProfilerStep#" not in gzip.decompress(p.read_bytes())]
    return max(stepless, key=lambda p: p.stat().st_size, default=None)


def build(target_mb: float, out: Path) -> dict[str, int]:
    """Write a trace of about ``target_mb`` MB to ``out``; return its event and kernel counts."""
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = [e for e in trace["traceEvents"] if e.get("ph") != "M"]
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M"]
    copies = max(1, round(target_mb * 1e6 / len(json.dumps(events))))
    stamps = [e["ts"] for e in events if "ts" in e]
    span = max(stamps) - min(stamps) + 1000.0
    ids = [e.get("args", {}).get(k, 0) for e in events for k in ("correlation", "External id")]
    id_step = max(v for v in ids if isinstance(v, int)) + 1
    with out.open("w") as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": ' + json.dumps(trace.get("deviceProperties", [])))
        fh.write(', "traceEvents": [' + ",".join(json.dumps(e) for e in meta))
        for c in range(copies):
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(e["ts"] + c * span, 3)
                if isinstance(e.get("args"), dict):
                    e2["args"] = {k: v + c * id_step if k in ("correlation", "External id") and isinstance(v, int)
                                  else v for k, v in e["args"].items()}
                if isinstance(e.get("id"), int):
                    e2["id"] = e["id"] + c * id_step
                fh.write("," + json.dumps(e2))
        fh.write("]}")
    return {"events": len(events) * copies + len(meta),
            "kernels": sum(1 for e in events if e.get("cat") == "kernel") * copies}


def run(code: str, path: Path, store: Path, python: str = sys.executable) -> tuple[float, float, float]:
    """Wall seconds of a fresh process running ``code`` on ``path``, its CPU seconds (its own and its
    children's, from our children's rusage) and its peak RSS in MB."""
    env = {**os.environ, "FUSEPROF_CACHE": str(store)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{path}: failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, float(done.stderr.strip().splitlines()[-1])


def measure(path: Path, repeats: int, tmp: Path, hta: str | None) -> dict[str, tuple[float, float, float, float]]:
    """Per side: the median wall and CPU seconds over ``repeats`` interleaved runs, the largest peak RSS and the
    median of each round's CPU ratio to that round's json.load."""
    runs: dict[str, list[tuple[float, float, float]]] = {"json": [], "cold": [], "warm": [], **({"hta": []} if hta else {})}
    for r in range(repeats):
        store = tmp / f"store-{path.name}-{r}"
        runs["json"].append(run(_JSON, path, store))
        runs["cold"].append(run(_FUSEPROF, path, store))
        runs["warm"].append(run(_FUSEPROF, path, store))
        if hta:
            runs["hta"].append(run(_HTA, path, store, hta))
    return {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v), max(p for *_, p in v),
                statistics.median(c / j[1] for (_, c, _), j in zip(v, runs["json"]))) for k, v in runs.items()}


def report(path: Path, mb: float, events: str, m: dict[str, tuple[float, float, float, float]]) -> None:
    """One row: the medians and every side's ratio to json.load of the same bytes (``measure``)."""
    (j, jc, jp, _), (c, cc, cp, cx), (w, wc, _, wx) = m["json"], m["cold"], m["warm"]
    hta = f"{m['hta'][1]:>6.2f} {m['hta'][3]:>6.2f}" if "hta" in m else f"{'-':>6} {'-':>6}"
    print(f"{path.name[:24]:>24} {mb:>7.0f} {events:>9} | {j:>11.2f} {c:>7.2f} {w:>7.2f} | "
          f"{c / j:>6.2f} {w / j:>6.2f} | {jc:>9.2f} {cc:>6.2f} {wc:>5.2f} {cx:>6.2f} {wx:>6.2f} | {hta} | "
          f"{jp:>7.0f} {cp:>7.0f} {cp / jp:>5.2f} {cp * 2**20 / (mb * 1e6):>5.2f} | {mb / c:>9.1f} {100 * c / mb:>7.2f}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=131, help="size of the 1x trace in MB of JSON (default 131)")
    parser.add_argument("--scales", default="1,2,4", help="multiples of --mb to measure (default 1,2,4; '' for none)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each side per file (default 3)")
    parser.add_argument("--public", default=None, help="the public trace to measure as is (default: public_trace; "
                                                       "'none': none)")
    parser.add_argument("--hta-python", default=None, help="an interpreter with HolisticTraceAnalysis installed")
    parser.add_argument("--plain-only", action="store_true", help="measure the built traces as plain JSON only, "
                                                                 "not gzipped too (a 1 GB trace: half the run)")
    args = parser.parse_args()
    hta = hta_python(args.hta_python)
    print(f"Every ratio (x) is to json.load of the same bytes in the same round; CPU x: the median of {args.repeats} "
          f"rounds' own ratios (the process and its children); HTA: {'beside' if hta else 'not installed'}")
    print(f"{'file':>24} {'JSON MB':>7} {'events':>9} | {'json.load s':>11} {'cold s':>7} {'warm s':>7} | "
          f"{'cold x':>6} {'warm x':>6} | {'CPU: json':>9} {'cold':>6} {'warm':>5} {'cold x':>6} {'warm x':>6} | "
          f"{'HTA':>6} {'HTA x':>6} | {'json MB':>7} {'cold MB':>7} {'RSS x':>5} {'RSS/B':>5} | {'MB/s/core':>9} {'s/100MB':>7}")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        public = public_trace(args.public)
        if public is not None:
            with gzip.open(public) if public.name.endswith(".gz") else public.open("rb") as fh:
                mb = sum(len(chunk) for chunk in iter(lambda: fh.read(2**24), b"")) / 1e6
            report(public, mb, "public", measure(public, args.repeats, tmp, hta))
        for scale in (float(s) for s in args.scales.split(",") if s):
            plain = tmp / f"trace-{scale:g}x.json"
            counts = build(args.mb * scale, plain)
            gz = plain.with_suffix(".json.gz")
            if not args.plain_only:
                with plain.open("rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                    while chunk := src.read(2**24):
                        dst.write(chunk)
            mb = plain.stat().st_size / 1e6
            for path in (plain,) if args.plain_only else (plain, gz):
                report(path, mb, f"{counts['events']:,}", measure(path, args.repeats, tmp, hta))
            plain.unlink()
            gz.unlink(missing_ok=True)

if __name__ == "__main__":
    main()

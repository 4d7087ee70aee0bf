"""Where a cold analysis's CPU time goes, phase by phase, as multiples of a plain ``json.load`` of the same file.

    python scripts/bench_phases.py PATH [--traces 8] [--sections 8]

PATH is a trace, a bundle or a folder of traces (a rank set of ``scripts/make_rank_set.py``). In one process, per trace:
``json.load`` of the file, then the phases of a cold ``fuseprof analyze``: the decode into tables
(``TraceStore.tables``, less its write), the analysis (``analyze_tables``: the window's events, then every section), and the
store's two writes (the tables, the analysis). It prints each phase's median CPU time per trace, its multiple
of ``json.load``'s, and the sections that cost most (a lazily built input — the step graphs, the units — counts
in the first section that asks for it). What a run adds around these (imports, workers, the parent's merge and
output) is ``scripts/bench_ranks.py --speed``'s and ``scripts/bench_trace_parse.py``'s.

Why: the speed targets are ratios to ``json.load``; this says which phase holds the distance to them, on this
machine, in one run. The first trace of a folder is a warm-up (imports, first-call caches) and is not counted.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuseprof.analysis.running import sections  # noqa: E402
from fuseprof.analysis.running.analyze import Options, analyze_tables, trace_files  # noqa: E402
from fuseprof.analysis.running.collector import fewer_collections  # noqa: E402
from fuseprof.analysis.running.stored import analysis_part, save_analysis  # noqa: E402
from fuseprof.errors import FuseprofError  # noqa: E402
from fuseprof.parse.store import TraceStore, content_key  # noqa: E402

# the module, not the function ``fuseprof.analysis`` exports under its name: its ``build_all`` is timed
analyze_module = importlib.import_module("fuseprof.analysis.running.analyze")

PHASES = ("json.load", "decode", "analysis", "store: tables", "store: analysis")


def cpu(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the CPU seconds it took."""
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


@contextmanager
def replaced(owner: Any, name: str, by: Callable[[Any], Any]) -> Iterator[None]:
    """``owner.name`` is ``by(the original)`` inside, the original again after."""
    before = getattr(owner, name)
    setattr(owner, name, by(before))
    try:
        yield
    finally:
        setattr(owner, name, before)


def timed_sections(into: dict[str, float]) -> Any:
    """Inside, each section's CPU time is added to ``into``: ``analyze_tables`` builds them one by one with
    ``sections.build_all``, replaced by the same loop, timed."""
    def build_all(context: sections.Context) -> dict[str, Any]:
        for section in sections.build_order():
            assert section.build is not None
            built, spent = cpu(partial(section.build, context))
            context.built.update(built)
            into[section.name] += spent
        return context.built

    return replaced(analyze_module, "build_all", lambda _: build_all)


def timed_writes(into: list[float]) -> Any:
    """Inside, the store's writes' CPU time is added to ``into[0]`` (``TraceStore.put_frames``, timed)."""
    def timed(put_frames: Callable[..., bool]) -> Callable[..., bool]:
        def put(*args: Any, **kwargs: Any) -> bool:
            done, spent = cpu(partial(put_frames, *args, **kwargs))
            into[0] += spent
            return bool(done)
        return put

    return replaced(TraceStore, "put_frames", timed)


def one_trace(path: Path, store: TraceStore, options: Options, into: dict[str, float]
              ) -> dict[str, float]:
    """The phases' CPU seconds for one trace (``into``: its sections' added): ``json.load`` as a script runs it
    (the collector's settings as they are), fuseprof's phases as the command runs them (``fewer_collections``)."""
    times: dict[str, float] = {}
    with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as f:
        _, times["json.load"] = cpu(lambda: json.load(f))
    with fewer_collections():
        times.update(fuseprof_phases(path, store, options, into))
    return times


def fuseprof_phases(path: Path, store: TraceStore, options: Options, into: dict[str, float]
                    ) -> dict[str, float]:
    """A cold ``fuseprof analyze``'s phases: the tables decoded and stored, the analysis made and stored."""
    times: dict[str, float] = {}
    key = content_key(path)
    writes = [0.0]
    with timed_writes(writes):
        (tables, _), both = cpu(lambda: store.tables(path, key))
    times["decode"], times["store: tables"] = both - writes[0], writes[0]
    with timed_sections(into):
        result, times["analysis"] = cpu(lambda: analyze_tables(tables, options))
    _, times["store: analysis"] = cpu(lambda: save_analysis(store, key, analysis_part(None, options), result))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="a trace, or a folder of traces (a rank set)")
    parser.add_argument("--traces", type=int, default=8, help="a folder's first N traces, the first a warm-up")
    parser.add_argument("--sections", type=int, default=8, help="how many of the costliest sections to list")
    args = parser.parse_args()
    try:
        paths = trace_files(args.path)[:args.traces]
    except FuseprofError as exc:
        sys.exit(f"bench_phases: {exc}")
    options = Options()
    runs: list[dict[str, float]] = []
    section_runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = TraceStore(Path(tmp))
        for k, path in enumerate(paths):
            into: dict[str, float] = defaultdict(float)
            times = one_trace(path, store, options, into)
            if k or len(paths) == 1:  # the first of several warms the process up
                runs.append(times)
                section_runs.append(into)
            print(f"  {path.name}: " + ", ".join(f"{p} {times[p] * 1e3:.1f} ms" for p in PHASES), flush=True)
    median = {p: statistics.median(r[p] for r in runs) for p in PHASES}
    base = median["json.load"]
    size = statistics.median(p.stat().st_size for p in paths) / 1e6
    print(f"\n{len(runs)} trace(s) counted, {size:.1f} MB each (median); CPU per trace, medians")
    print(f"{'phase':>18} {'ms':>9} {'x json.load':>12}")
    for p in PHASES:
        print(f"{p:>18} {median[p] * 1e3:>9.1f} {median[p] / base:>12.2f}")
    whole = sum(median[p] for p in PHASES[1:])
    print(f"{'all four':>18} {whole * 1e3:>9.1f} {whole / base:>12.2f}")
    names = {n for r in section_runs for n in r}
    costs = sorted(((statistics.median(r.get(n, 0.0) for r in section_runs), n) for n in names), reverse=True)
    print(f"\ncostliest sections (of {len(names)}; with the window's events and op graph, the analysis' rest):")
    for spent, name in costs[:args.sections]:
        print(f"{name:>18} {spent * 1e3:>9.1f} {spent / base:>12.2f}")
    rest = median["analysis"] - sum(spent for spent, _ in costs)
    print(f"{'(events, graph)':>18} {rest * 1e3:>9.1f} {rest / base:>12.2f}")


if __name__ == "__main__":
    main()

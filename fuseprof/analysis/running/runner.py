"""``fuseprof.analysis.analyze``: many traces, each decoded once, in parallel, with bounded memory.

Two passes over the traces, each job run in this process (one trace), a local pool of worker
processes (several), or on a Dask cluster (``scheduler``: a ``dask.distributed`` address):

    1. decode   each trace's tables into the trace store (``fuseprof.parse.store``) unless already
                there, and the two facts pairing needs (does it replay graphs? was it taken while
                capturing them?)
    2. analyse  each trace (with its capture trace, paired as before) into the store unless already
                there, under a name of everything that shapes the answer (``stored.analysis_part``)

A worker hands each analysis it made back as its tables (``Handed``; one found in the store is read back
from it), its events only when a caller uses them (rebuilt from the stored tables): for N ranks the parent
holds N sets of small tables, not N traces. One trace alone is kept in
this process and stored in the background. With the store off (FUSEPROF_CACHE=off) one trace needs
none, and several pass through a temporary store, removed at exit. Workers on a cluster need
the traces and the store folder at the same paths (a shared filesystem): they write the tables, the
parent rebuilds events from them.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from fuseprof.analysis.facts.graphs import has_graph_replays, is_capture_trace
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.running.analyze import (
    Options,
    analyze_tables,
    measured_rates,
    trace_files,
    windowed_events,
)
from fuseprof.analysis.running.collector import fewer_collections
from fuseprof.analysis.running.stored import analysis_from, analysis_meta, analysis_part, load_analysis, save_analysis
from fuseprof.bundle.files import is_bundle
from fuseprof.errors import FuseprofError, FuseprofWarning, InvalidArgumentError, NotATraceError, TraceFormatError
from fuseprof.model.devices import require_device
from fuseprof.model.registry import Registry
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.registry_schema import load_registry
from fuseprof.parse.arrow_pool import prefer_jemalloc
from fuseprof.parse.execution_trace import execution_trace_beside, read_execution_trace
from fuseprof.parse.hashing import file_sha256
from fuseprof.parse.store import TraceStore, content_key, default_store, wait_for_writes
from fuseprof.parse.trace_events import TraceTables

Captures = tuple[tuple[Path, str], ...]  # capture traces: (path, content key)

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Job:
    """One trace to analyse: its printed name, file, a bundle's ncu rows and the execution trace recorded
    beside it (which tensor each op took: the op graph's exact dataflow)."""

    name: str
    path: Path
    ncu_rows: pd.DataFrame | None = None
    execution_trace: Path | None = None
    in_folder: bool = False  # found by reading a folder, not named: a JSON there that is no trace is skipped


Facts = tuple[str, bool, bool, list[str]]  # content key, replays graphs, is a capture trace, decoding's warnings


class Handed(NamedTuple):
    """An analysis a worker computed and stored, handed back as its tables and metadata (``stored.analysis_meta``):
    pickled, a rank's two dozen small tables reach the parent in ~2 ms, where reading them back from the store
    costs ~25 ms — in the parent, one rank after another, once every worker is done. Never its events: the parent
    rebuilds them from the stored tables if a caller uses them."""

    frames: dict[str, pd.DataFrame]
    meta: dict[str, Any]

_LAST: dict[str, TraceTables] = {}  # the tables this process decoded last: its pass 2 reads them from no file


def _tables(store: TraceStore, path: Path, key: str) -> TraceTables:
    return _LAST[key] if key in _LAST else store.tables(path, key)[0]


@fewer_collections()
def _decode(path: Path, root: str | None, alone: bool = False) -> Facts:
    """Pass 1 for one trace: (content key, replays graphs, is a capture trace, its decoding's warnings).
    ``alone``: the only trace, analysed in this process: its tables are stored in the background."""
    prefer_jemalloc()
    store = TraceStore(Path(root) if root else None)
    key = content_key(path) if store.root is not None else f"unstored:{path.resolve()}"  # no store: no hashing
    found = store.get_frames(key, "facts")
    if found is not None:
        return key, bool(found[1]["replays"]), bool(found[1]["capture"]), found[1]["warnings"]
    tables, said = store.tables(path, key, background=alone)
    if not alone:  # a worker keeps the last trace it decoded; one trace alone keeps its capture trace too
        _LAST.clear()
    _LAST[key] = tables
    replays, capture = has_graph_replays(tables), is_capture_trace(tables)
    store.put_frames(key, "facts", {}, {"replays": replays, "capture": capture, "warnings": said})
    return key, replays, capture, said


@fewer_collections()
def _analyse(job: Job, key: str, captures: Captures, options: Options, root: str | None,
             alone: bool = False, here: bool = False) -> str | TraceAnalysis | Handed:
    """Pass 2 for one trace: the name of its stored analysis where one was there already; one it computed and
    stored, as ``Handed``; the analysis itself where it is not stored (a bundle's ncu rows, a store that cannot be
    written) or is the only one, analysed in this process (then stored in the background). ``here``: run in the
    process that asked (``--workers 1``): an analysis it computed and stored comes back as it is, its events to be
    rebuilt when used."""
    prefer_jemalloc()
    store = TraceStore(Path(root) if root else None)
    et_key = file_sha256(job.execution_trace) if job.execution_trace is not None else None
    part = analysis_part(",".join(k for _, k in captures) or None, options, et_key) if job.ncu_rows is None else None
    # a trace this process has just decoded had no entry: no stored analysis to look for (and looking
    # would wait for its tables' background write)
    if part is not None and key not in _LAST and store.get_frames(key, part, only=()) is not None:
        return part
    result = analyze_tables(_tables(store, job.path, key), options, job.name,
                            [_tables(store, *c) for c in captures], job.ncu_rows,
                            read_execution_trace(job.execution_trace) if job.execution_trace is not None else None)
    if alone:
        if part is not None:
            save_analysis(store, key, part, result, background=True)
        return result
    if part is None or not save_analysis(store, key, part, result):
        return result
    if here:
        result.defer_events(partial(_rebuilt_events, root, job.path, key, captures, options))
        return result
    return Handed(dict(result.frames), analysis_meta(result))


def _rebuilt_events(root: str | None, path: Path, key: str, captures: Captures, options: Options) -> pd.DataFrame:
    """A stored analysis's events, from its trace's stored tables (decoded again if they are gone)."""
    store = TraceStore(Path(root) if root else None)
    return windowed_events(store.tables(path, key)[0], options, [store.tables(*c)[0] for c in captures]).events


def _run(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]], workers: int, scheduler: str | None,
         progress: Progress | None, what: str) -> list[Any]:
    """``fn`` over ``calls``: here for one call or ``workers`` 1, else a process pool or a Dask cluster."""
    results: list[Any] = [None] * len(calls)
    if not calls:
        return results
    if scheduler is None and (len(calls) == 1 or workers == 1):
        for i, call in enumerate(calls):
            results[i] = fn(*call)
            if progress:
                progress(what, i + 1, len(calls))
        return results
    if scheduler is not None:
        from fuseprof.analysis.running.cluster import run_on_cluster

        return run_on_cluster(scheduler, fn, calls, progress, what)
    from concurrent.futures import ProcessPoolExecutor, as_completed  # with multiprocessing: ~19 ms to import
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=min(workers, len(calls)), mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(fn, *call): i for i, call in enumerate(calls)}
        for done, future in enumerate(as_completed(futures), start=1):
            results[futures[future]] = future.result()
            if progress:
                progress(what, done, len(calls))
    return results


def _expanded(paths: Sequence[Path]) -> list[Path]:
    """Paths as given, a quoted glob ('ranks/*.json.gz': the shell left it to us) as the files it matches."""
    out: list[Path] = []
    for path in paths:
        if not path.exists() and any(c in str(path) for c in "*?["):
            matches = sorted(Path(p) for p in glob.glob(str(path)))
            if not matches:
                raise TraceFormatError(f"{path}: matches no file")
            out += matches
        else:
            out.append(path)
    return out


def _jobs(paths: Sequence[Path]) -> list[Job]:
    jobs = []
    for path in _expanded(paths):
        ncu_rows = None
        if path.is_dir() and is_bundle(path):
            from fuseprof.bundle.loading import load  # pyarrow.parquet: 15 ms to import, for bundles only

            kernels = load(path)
            ncu_rows = kernels[kernels["source"] == "ncu"]
            ncu_rows = ncu_rows if not ncu_rows.empty else None
        for trace in trace_files(path):
            name = f"{path.name}/{trace.relative_to(path)}" if path.is_dir() else trace.name
            jobs.append(Job(name, trace, ncu_rows, execution_trace_beside(trace), path.is_dir()))
    return jobs


def _temporary_root() -> str:
    root = tempfile.mkdtemp(prefix="fuseprof-store-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def _given_paths(paths: object) -> list[Path]:
    """The paths a caller gave (one, or a list or tuple of them), each a str or path-like; anything else — a
    number, an empty list, a list holding a DataFrame — is one InvalidArgumentError saying what to give."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    if isinstance(paths, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in paths):
        if not paths:
            raise InvalidArgumentError("analyze: no trace given (an empty list); give a trace file, a bundle or a "
                                       "folder of traces, or a list of them")
        return [Path(p) for p in paths]
    got = type(paths).__name__ if not isinstance(paths, (list, tuple)) else \
        f"a {type(paths).__name__} holding {', '.join(sorted({type(p).__name__ for p in paths}))}"
    raise InvalidArgumentError(f"analyze: give a trace file, a bundle or a folder of traces (a str or Path), or a list "
                               f"of them; got {got}")


def analyze(paths: list[Path] | Path, device: str | None = None, top: int = 15,
            registry: Registry | Path | str | None = None, window: str | None = None,
            graph_capture: Path | Sequence[Path] | None = None, ceilings: Path | None = None, workers: int | None = None,
            scheduler: str | None = None, store: TraceStore | None = None,
            progress: Progress | None = None) -> list[TraceAnalysis]:
    """``analyze_tables`` over trace files, folders of traces and bundles (one result per trace). Rates
    come from the trace's GPU (datasheet), or from the measured bundles in ``ceilings``; op knowledge from
    ``registry`` (a ``Registry``, or a TOML file extending the default one). ``workers``
    processes (default 1: this one; more need the calling script's work under ``if __name__ ==
    "__main__":``, as any spawned pool does) or a Dask ``scheduler`` run several traces at once."""
    paths = _given_paths(paths)
    if device is not None:
        require_device(device)
    if workers is not None and workers < 1:
        raise InvalidArgumentError(f"--workers {workers}: give at least 1")
    measured, copy = measured_rates(Path(ceilings)) if ceilings is not None else (None, None)
    if isinstance(registry, (str, Path)):
        registry = load_registry(Path(registry), DEFAULT)
    options = Options(device, top, registry or DEFAULT, window, measured, copy)
    store = store or default_store()
    if scheduler is not None and store.root is None:
        raise FuseprofError("--scheduler: the cluster's workers hand their results over through the trace store; "
                            "set FUSEPROF_CACHE to a folder every worker and this process share (it is off)")
    jobs = _jobs(paths)
    workers = workers or 1
    alone = len(jobs) == 1 and scheduler is None  # one trace: kept in this process, stored in the background
    # with the store off, one trace needs none; several pass their analyses through a temporary one
    root = str(store.root) if store.root is not None else None if alone else _temporary_root()
    store = TraceStore(Path(root) if root else None)
    given = [Path(graph_capture)] if isinstance(graph_capture, (str, Path)) else [Path(p) for p in graph_capture or ()]
    here = scheduler is None and (workers == 1 or len(jobs) == 1)
    jobs, facts, captures, kept, answers = _both_passes(jobs, given, options, root, alone, workers, scheduler,
                                                        progress, here)
    capture_names = ", ".join(j.name for j in jobs if any(j.path == c[0] for c in captures))
    results = [_result(store, root, job, facts[i][0], answer, captures, options, capture_names)
               for (i, job), answer in zip(kept, answers)]
    wait_for_writes()  # the store is whole, and its warnings said, when the results are handed over
    _distinct_ranks(results)
    return results


def _both_passes(jobs: list[Job], given: list[Path], options: Options, root: str | None, alone: bool, workers: int,
                 scheduler: str | None, progress: Progress | None, here: bool
                 ) -> tuple[list[Job], list[Facts], Captures, list[tuple[int, Job]], list[Any]]:
    """Pass 1 (every trace decoded, and analysed where no capture trace can shape it) and pass 2 (the rest): the
    jobs left, every trace's facts, the capture traces, the jobs analysed (with their positions) and each one's
    answer (``_analyse``'s)."""
    try:
        jobs, facts, early = _pass_one(jobs, given, root, alone, workers, scheduler, progress,
                                       options if not given and not alone else None, here)
        captures, kept = _pair(jobs, facts, given)
        answers: list[Any] = [early[i] if not captures else None for i, _ in kept]
        todo = [k for k, answer in enumerate(answers) if answer is None]
        ready = len(kept) - len(todo)
        if progress:
            for k in range(1, ready + 1):  # the analyses pass 1 made count among the analysed
                progress("analysed", k, len(kept))
        done = _run(_analyse, [(kept[k][1], facts[kept[k][0]][0], captures, options, root, alone, here) for k in todo],
                    workers, scheduler, (lambda what, k, n: progress(what, ready + k, ready + n)) if progress else None,
                    "analysed")
        for k, answer in zip(todo, done):
            answers[k] = answer
    finally:
        _LAST.clear()  # a notebook analysing trace after trace keeps none of their tables
    return jobs, facts, captures, kept, answers


def _result(store: TraceStore, root: str | None, job: Job, key: str, answer: str | TraceAnalysis | Handed,
            captures: Captures, options: Options, capture_names: str) -> TraceAnalysis:
    """One job's analysis from its answer: itself, its handed tables, or read back from the store (computed and
    stored again, here, where the stored one was found damaged and removed)."""
    events = partial(_rebuilt_events, root, job.path, key, captures, options)

    def analysis(answer: str | TraceAnalysis | Handed) -> TraceAnalysis | None:
        if isinstance(answer, Handed):
            return analysis_from(answer.frames, answer.meta, job.name, events, options.registry)
        return answer if isinstance(answer, TraceAnalysis) else load_analysis(store, key, answer, job.name, events,
                                                                              options.registry)

    result = analysis(answer)
    if result is None:
        result = analysis(_analyse(job, key, captures, options, root))
    if result is None:
        raise FuseprofError(f"trace store: the analysis of {job.path} cannot be stored and read back under "
                            f"{root}; set FUSEPROF_CACHE=off to work without the store")
    result.name, result.source = job.name, job.path
    if capture_names:
        result.notes.append(f"graph capture {capture_names} used to attribute the replayed kernels")
    return result


def _pass_one(jobs: list[Job], given: list[Path], root: str | None, alone: bool, workers: int, scheduler: str | None,
              progress: Progress | None, options: Options | None, here: bool
              ) -> tuple[list[Job], list[Facts], list[str | TraceAnalysis | Handed | None]]:
    """Every trace and given capture decoded (and stored): the jobs left once the folder files that are no trace
    are set aside, each one's facts (``_decode``) and, per job, its analysis where pass 1 made it
    (``_decode_member``; None: pass 2 makes it)."""
    members = [(j.path, root, alone, j.in_folder, j, options, here) for j in jobs] + \
        [(p, root, alone, False, None, None, here) for p in given]
    found = _run(_decode_member, members, workers, scheduler, progress, "decoded")
    facts_found = [f[0] if f is not None else None for f in found]
    answers = [f[1] if f is not None else None for f in found[:len(jobs)]]
    jobs_kept, traces, facts = _without_non_traces(jobs, given, facts_found)
    _after_decoding(traces, facts)
    early = [a for a, f in zip(answers, facts_found) if f is not None]  # the jobs' own (the given captures follow)
    return jobs_kept, facts, early


def _decode_member(path: Path, root: str | None, alone: bool, skippable: bool, job: Job | None = None,
                   options: Options | None = None, here: bool = False
                   ) -> tuple[Facts, str | TraceAnalysis | Handed | None] | None:
    """``_decode``, and, for a trace that neither replays graphs nor was taken while capturing them, its analysis
    with no capture trace (``_analyse``) while its tables are still in this process — what pass 2 would make
    unless another trace of the run replays graphs (then its captures shape every analysis, and pass 2 makes
    them: the one made here is stored under another name and unused); an analysis that fails is left to pass 2,
    whose error comes where it always came. None for a file read from a folder that is valid JSON but no trace
    (``NotATraceError``)."""
    try:
        facts = _decode(path, root, alone)
    except NotATraceError:
        if skippable:
            return None
        raise
    key, replays, capture, _ = facts
    if job is None or options is None or replays or capture or key not in _LAST:
        return facts, None  # no job, a capture given by name, a graph pair, or found decoded in the store
    try:
        return facts, _analyse(job, key, (), options, root, alone, here)
    except FuseprofError:  # said by pass 2, in its turn: after every trace's decoding, its warnings and checks
        return facts, None


def _without_non_traces(jobs: list[Job], given: list[Path], found: list[Facts | None]
                        ) -> tuple[list[Job], list[Path], list[Facts]]:
    """The jobs, trace paths and pass-1 facts without the folder files that are no trace, each named in a
    warning; none left is an error."""
    kept = [k for k, f in enumerate(found[:len(jobs)]) if f is not None]
    for k in sorted(set(range(len(jobs))) - set(kept)):
        warnings.warn(f"{jobs[k].path}: skipped, not a torch.profiler trace (JSON without 'traceEvents')",
                      FuseprofWarning, stacklevel=3)
    if not kept:
        raise TraceFormatError(f"{', '.join(sorted({str(j.path.parent) for j in jobs}))}: no torch.profiler trace "
                               "among its JSON files")
    facts = [found[k] for k in kept] + found[len(jobs):]  # a capture given by name is never skipped
    jobs = [jobs[k] for k in kept]
    return jobs, [j.path for j in jobs] + given, facts  # type: ignore[return-value]


def _after_decoding(traces: list[Path], facts: list[Facts]) -> None:
    """What pass 1 found, before any analysis: its decoding warnings said, and each trace given once."""
    for _, _, _, said in facts:
        for text in said:
            warnings.warn(text, FuseprofWarning, stacklevel=3)
    _given_once(traces, [key for key, _, _, _ in facts])


def _given_once(traces: list[Path], keys: list[str]) -> None:
    """Each trace once: the same file given twice (or a copy of it) would be two ranks that agree to the ns, or a
    capture paired with itself."""
    first: dict[str, Path] = {}
    for trace, key in zip(traces, keys):
        if key in first:
            same = "is given twice" if first[key].resolve() == trace.resolve() else f"holds the same bytes as {first[key]}"
            raise InvalidArgumentError(f"{trace} {same}: give each trace once")
        first[key] = trace


def _distinct_ranks(results: list[TraceAnalysis]) -> None:
    """No two traces of a rank set with the same collectives to the ns: two ranks' kernels never start and end
    together, so that is one trace given twice in two forms (compressed and not, re-exported)."""
    seen: dict[bytes, str] = {}
    for result in results:
        if result.collectives.empty:
            continue
        times = result.collectives[["start_ns", "end_ns"]].to_numpy("int64").tobytes()
        if times in seen:
            raise InvalidArgumentError(f"{result.name} holds the same collectives, to the ns, as {seen[times]}: the "
                                       "same trace given twice; give each rank once")
        seen[times] = result.name


def _pair(jobs: list[Job], facts: list[Facts], given: list[Path]
          ) -> tuple[Captures, list[tuple[int, Job]]]:
    """The capture traces (given, or the captures among traces when some replay graphs: an engine that
    captures each batch size in its own run leaves several) and the jobs to analyse: a capture trace found
    among them attributes the others' kernels and is not analysed."""
    everything = list(enumerate(jobs))
    if given:
        return tuple((p, facts[len(jobs) + k][0]) for k, p in enumerate(given)), everything
    if not any(replays for _, replays, _, _ in facts[:len(jobs)]):
        return (), everything
    found = [i for i, (_, replays, capture, _) in enumerate(facts[:len(jobs)]) if capture and not replays]
    return tuple((jobs[i].path, facts[i][0]) for i in found), [(i, j) for i, j in everything if i not in found]


def analyze_trace(path: Path, device: str | None = None, top: int = 15, registry: Registry | Path | None = None,
                  window: str | None = None, graph_capture: Path | Sequence[Path] | None = None) -> TraceAnalysis:
    """Every table for one trace file. ``device`` names the GPU when the trace lacks
    ``deviceProperties`` (or overrides it): 'H100 SXM', 'NVIDIA H200', 'MI300X', ..."""
    return analyze([Path(path)], device, top, registry, window, graph_capture)[0]

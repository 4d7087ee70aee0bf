"""``fuseprof analyze``: a whole-model torch.profiler trace as tables, on traces fuseprof did not capture.

The facade: decode (``fuseprof.parse``), link each GPU event to its launch and op, attribute graph
replays through a capture trace (``graphs``), classify by the op registry (``events``), choose the
window (``steps``), then every section's tables (``fuseprof.analysis.running.sections``: integrity, steps,
timeline, idle, categories, tops, launches, roofline, fusion, slow ops, audit, verdict). Times are
integer nanoseconds throughout.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fuseprof.analysis.facts.events import TWIN_CHECK, categorized_events
from fuseprof.analysis.facts.graphs import capture_windows, is_capture_trace
from fuseprof.analysis.facts.iterations import NONE as NO_ITERATIONS
from fuseprof.analysis.facts.iterations import Iterations, find_iterations
from fuseprof.analysis.facts.opgraph import OpGraph, op_graph
from fuseprof.analysis.facts.phases import gpu_phases
from fuseprof.analysis.facts.result import TraceAnalysis
from fuseprof.analysis.facts.steps import profiler_steps, window_mask
from fuseprof.analysis.facts.summaries import attach_ncu
from fuseprof.analysis.judgements.fusion import CopyModel, copy_model_from_bench, kernel_floor_ns, within_peak
from fuseprof.analysis.running.sections import Context, build_all
from fuseprof.bundle.files import RAW, is_bundle
from fuseprof.errors import FuseprofWarning, TraceFormatError
from fuseprof.model.devices import identify
from fuseprof.model.registry import Registry
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.roofline import Roof, capture_roof, dram_limit
from fuseprof.parse.dispatch import inside
from fuseprof.parse.execution_trace import is_execution_trace
from fuseprof.parse.foreign import holds_trace
from fuseprof.parse.text_arrays import python_strings
from fuseprof.parse.trace_events import TraceTables


@dataclass(frozen=True)
class Options:
    """How to analyse: the GPU to judge against, rows per top table, the op registry (every judgement's
    op knowledge), the window (``all``, ``steps``, ``N``, ``N-M``) and measured roofs and copy model where a
    bundle folder has them."""

    device: str | None = None
    top: int = 15
    registry: Registry = DEFAULT
    window: str | None = None
    measured: dict[str, Roof] | None = None
    copy: CopyModel | None = None


def _regular(path: Path) -> bool:
    """Whether a folder's entry named as a trace is a regular file to read; a FIFO, socket, device or broken link by
    that name is skipped with a warning (reading one would wait for a writer forever, or never end)."""
    if path.is_file() or path.is_dir():
        return path.is_file()
    warnings.warn(f"{path}: skipped, not a regular file (a pipe, socket, device or broken link)", FuseprofWarning,
                  stacklevel=3)
    return False


def _bundle_traces(bundle: Path) -> list[Path]:
    """A bundle's raw profiler traces: in ``raw/``, or one per rank in ``raw/rank<r>/`` (``profile --gpus N``)."""
    raw = bundle / RAW
    ranks = sorted((p for p in raw.glob("rank*") if p.is_dir() and p.name[4:].isdigit()), key=lambda p: int(p.name[4:]))
    return [inside(p, raw) for folder in (raw, *ranks) for p in sorted(folder.glob("*.json*"))
            if not is_execution_trace(p)]


def trace_files(path: Path) -> list[Path]:
    """The trace(s) behind a path: a trace file, a bundle's raw profiler trace(s), or the traces in a
    folder."""
    if path.is_dir():  # an execution trace beside a trace is read with it (fuseprof.analysis.facts.opgraph), not alone
        found = _bundle_traces(path) if is_bundle(path) else sorted(
            p for p in path.iterdir() if _regular(p) and not is_execution_trace(p)
            and (p.name.endswith((".json", ".json.gz")) or holds_trace(p)))
        if not found:
            hint = (f" under {RAW}/" if is_bundle(path) else
                    "; it holds bundles: name one of them" if any(is_bundle(p) for p in path.iterdir()) else "")
            raise TraceFormatError(f"{path}: holds no torch.profiler trace (no .json or .json.gz file, nor one whose content is a trace){hint}")
        return found
    if not path.exists():
        raise TraceFormatError(f"{path}: no such file")
    if is_execution_trace(path):
        raise TraceFormatError(f"{path}: a PyTorch execution trace; give the torch.profiler trace it was recorded "
                               "beside (X.json.gz for X.et.json.gz): fuseprof reads the two together")
    return [path]


def _device_of(tables: TraceTables, events: pd.DataFrame) -> tuple[str | None, dict[str, int], str | None]:
    """The GPU the events ran on — the name ``deviceProperties`` gives, else the table's row its other
    properties describe — with those properties (``devices.identify`` weighs them before the name) and a note
    where the row came from the properties rather than the name."""
    for device in events["device"].dropna().unique():
        name, properties = tables.device_name(device), tables.properties_of(device)
        found = identify(name, properties)
        if found.key is not None and found.key != identify(name).key:
            return name or found.key, properties, f"device: {found.why}"
        if name or found.key:
            return name or found.key, properties, None
    return None, {}, None


def _notes(events: pd.DataFrame, roof: Roof, graph_check: str | None, settings: dict[str, object]) -> list[str]:
    """What limits the analysis, said once; a missing column is blamed on a capture setting only where the trace
    does not say that setting was on (``settings``: what torch wrote at its top level)."""
    notes = []
    if not roof.judged:
        notes.append(f"roof: {roof.label}; no row is judged against a roof")
    if events["input_dims"].map(lambda d: isinstance(d, list)).sum() == 0:
        why = ("the trace says record_shapes was on, and no launching op recorded one" if settings.get("record_shapes")
               else "captured without record_shapes=True")
        notes.append(f"no input shapes in the trace ({why}): no per-op roofline, and the "
                     "audit sees fused kernels only (the op graph that shows unfused ones needs shapes)")
    if events["module"].isna().all():
        on = settings.get("with_stack") or settings.get("with_modules")
        notes.append("no nn.Module paths (" + ("the trace says with_stack or with_modules was on, but no kernel was "
                                               "launched inside an nn.Module's call: a graph replay launches its "
                                               "kernels outside it" if on else
                                               "captured without with_stack=True / with_modules=True") + ")")
    if graph_check == TWIN_CHECK:
        notes.append("graph replays attributed by aligning their kernels, in order, to the eager trace's given "
                     "beside them (--eager-twin; the integrity table says how much time was attributed so)")
    elif graph_check:
        notes.append(f"graph replays attributed through the capture trace, checked by {graph_check}")
    return notes


def _dataflow_note(graph: OpGraph, execution_trace_given: bool) -> list[str]:
    if not execution_trace_given:
        return []
    if graph.basis == "execution trace":
        return [f"dataflow from the execution trace beside the trace: {len(graph.edges):,} tensor edges among "
                f"{len(graph.nodes):,} ops (fused bytes count the tensors each chain really shares)"]
    return ["the execution trace beside the trace does not match its ops (another run's?): dataflow by shapes"]


@dataclass
class WindowedEvents:
    """A trace's linked, classified GPU events (``every``), those of the window (``events``, with ncu's
    measurements where a bundle has them), the window's mask and name, how replays were matched and the
    trace's iterations."""

    every: pd.DataFrame
    events: pd.DataFrame
    mask: pd.Series
    window: str
    graph_check: str | None
    iterations: Iterations = NO_ITERATIONS


def no_gpu_reason(tables: TraceTables) -> str:
    """Why a trace holds no GPU work, from what it does hold: CPU ops with no GPU runtime call is a CPU-only run;
    runtime calls without their kernels is a GPU activity that was not recorded."""
    if len(tables.launches):
        return (f"it holds {len(tables.launches):,} CUDA/HIP runtime calls but none of their GPU work — the GPU "
                "activity was not recorded (ProfilerActivity.CUDA not given, or the GPU tracer failed to start)")
    if len(tables.ops):
        return (f"it holds {len(tables.ops):,} CPU ops and no GPU runtime call — a CPU-only run, which analyze "
                "cannot place on a GPU timeline (for a `--device cpu` capture bundle: fuseprof summary, breakdown, "
                "compare)")
    return "it holds no CPU op or runtime call either (an empty or foreign trace)"


@python_strings()
def windowed_events(tables: TraceTables, options: Options = Options(), captures: Sequence[TraceTables] = (),
                    ncu_rows: pd.DataFrame | None = None) -> WindowedEvents:
    """The events an analysis's tables are computed from (a stored analysis rebuilds them with this
    when a caller asks for them)."""
    taken = [c for c in captures if is_capture_trace(c)]  # the rest: eager twins, aligned to (replay_twin)
    every, graph_check = categorized_events(tables, options.registry, capture_windows(*taken) if taken else None,
                                            tuple(c for c in captures if not is_capture_trace(c)))
    if every.empty:
        raise TraceFormatError(f"{tables.path}: no GPU kernels, memcpys or memsets: {no_gpu_reason(tables)}")
    iterations = find_iterations(tables, every, options.registry)
    every["profiler_step"] = profiler_steps(every, iterations)
    every = pd.concat([every, gpu_phases(every, tables, options.registry)], axis=1)
    mask, window = window_mask(every, options.window, iterations)
    events = every[mask].reset_index(drop=True)
    if ncu_rows is not None and not ncu_rows.empty:
        events = attach_ncu(events, ncu_rows)
    return WindowedEvents(every, events, mask, window, graph_check, iterations)


@python_strings()
def analyze_tables(tables: TraceTables, options: Options = Options(), name: str | None = None,
                   captures: Sequence[TraceTables] = (), ncu_rows: pd.DataFrame | None = None,
                   execution_trace: pd.DataFrame | None = None) -> TraceAnalysis:
    """Every table for one decoded trace; ``captures`` are the traces of its graphs' capture,
    ``execution_trace`` the PyTorch execution trace recorded beside it (``fuseprof.parse.execution_trace``)."""
    found = windowed_events(tables, options, captures, ncu_rows)
    events = found.events
    device_name, recognised = options.device, None
    properties: dict[str, int] = {}
    if device_name is None:
        device_name, properties, recognised = _device_of(tables, events)
    roof = capture_roof(device_name, options.measured, properties)
    copy = options.copy or CopyModel(roof.dram_bytes_per_s, kernel_floor_ns(events),
                                     f"{roof.label} DRAM + the trace's kernel floor")
    peak = max(roof.dram_bytes_per_s, dram_limit(device_name, options.measured)) if roof.judged else float("nan")
    copy, bounded = within_peak(copy, peak, roof.label)
    graph = op_graph(tables, options.registry, execution_trace)  # by shapes where no execution trace is given
    frames = build_all(Context(tables, found.every, events, found.mask, options.registry, options.top, roof, copy,
                               graph, found.iterations, window_asked=options.window))
    return TraceAnalysis(name=name or tables.path.name, device=device_name, roof=roof, events=events, frames=frames,
                         window=found.window, rank=tables.rank, world_size=tables.world_size, registry=options.registry, top=options.top,
                         notes=_notes(events, roof, found.graph_check, tables.capture) + _dataflow_note(graph, execution_trace is not None)
                         + ([recognised] if recognised else []) + ([bounded] if bounded else []))


def measured_rates(ceilings: Path) -> tuple[dict[str, Roof], CopyModel | None]:
    """The measured roofs (``fuseprof ceilings`` bundles) and copy model (the newest ``fuseprof bench``
    bundle's same-bytes copies) in a bundle or folder the user named (``--ceilings``): the answer for a
    trace never depends on what happens to lie beside it."""
    from fuseprof.bundle.files import find_bundles
    from fuseprof.bundle.loading import load_timings
    from fuseprof.model.roofline import measured_roofs

    if not ceilings.is_dir() or not find_bundles(ceilings):
        raise TraceFormatError(f"--ceilings {ceilings}: no fuseprof bundle there (a `fuseprof ceilings` or "
                               "`fuseprof bench` bundle, or a folder holding them)")
    roofs, copy = measured_roofs(ceilings), copy_model_from_bench(load_timings(ceilings))
    if not roofs and copy is None:
        raise TraceFormatError(f"--ceilings {ceilings}: holds neither a ceilings bundle nor a bench bundle with "
                               "same-bytes copies")
    return roofs, copy

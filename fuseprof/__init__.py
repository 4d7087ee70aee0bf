"""fuseprof: measure what fusing GPU kernels buys.

``fuseprof.load(path)`` gives one DataFrame of kernel launches over a bundle or a folder of
bundles; ``fuseprof.load_timings(path)`` the per-variant timings; ``fuseprof.analyze(trace)`` every
table of a whole-model trace, which a notebook shows as the report's sections; ``fuseprof.sql(query,
traces)`` one SQL statement over their tables (DuckDB: ``fuseprof[interop]``). Importing the package
touches no GPU and imports no torch.
"""

from __future__ import annotations

__version__ = "0.2.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from fuseprof.bundle.loading import load, load_timings
    from fuseprof.export.sql import sql
    from fuseprof.model.registry import Registry
    from fuseprof.regions import region, step
    from fuseprof.report import Report

__all__ = ["analyze", "load", "load_timings", "region", "sql", "step", "__version__"]


def __getattr__(name: str) -> Any:
    """``fuseprof.load`` and ``fuseprof.load_timings`` import pandas on first use, not at
    ``import fuseprof``: the CLI's fast paths (``cases``, ``dashboard``) never pay for it."""
    if name in ("load", "load_timings"):
        from fuseprof.bundle import loading

        return getattr(loading, name)
    if name == "sql":
        from fuseprof.export.sql import sql

        return sql
    if name in ("region", "step"):
        from fuseprof import regions

        return getattr(regions, name)
    raise AttributeError(f"module 'fuseprof' has no attribute {name!r}")


def analyze(paths: str | Path | Sequence[str | Path], device: str | None = None, top: int = 15,
            registry: Registry | str | Path | None = None, window: str | None = None,
            graph_capture: str | Path | Sequence[str | Path] | None = None, ceilings: str | Path | None = None,
            workers: int | None = None, scheduler: str | None = None) -> Report:
    """Analyse torch.profiler traces as ``fuseprof analyze`` does; one ``TraceAnalysis`` per trace, in a ``Report``.

    paths: a trace file (.json, .json.gz), a bundle, a folder of traces (one per rank), a quoted glob, or a list
        of them. device: the GPU to judge against when the trace names none, or to override it ('H100 SXM').
    top: rows of the top tables. registry: a TOML file (or ``Registry``) extending the op registry.
    window: 'steps', 'all', 'N' or 'N-M' (default: the profiler steps where the trace has them).
    graph_capture: the trace(s) taken while CUDA graphs were captured. ceilings: a bundle of measured roofs.
    workers: processes for several traces (call under ``if __name__ == "__main__":``). scheduler: a Dask address.

    ``print(report)`` gives each trace's verdict and its sections with how to reach each
    (``report[0].fusion`` or ``report[0].frames["fusion"]``: DataFrames in base units); a notebook shows the
    report's HTML sections."""
    from fuseprof.analysis import analyze as analyze_paths
    from fuseprof.report import Report

    return Report(analyze_paths(paths, device, top, registry=registry, window=window,  # type: ignore[arg-type]
                                graph_capture=graph_capture, ceilings=ceilings, workers=workers,  # type: ignore[arg-type]
                                scheduler=scheduler))

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
    from fuseprof.bundle.loading import load, load_timings
    from fuseprof.export.sql import sql
    from fuseprof.regions import region

__all__ = ["analyze", "load", "load_timings", "region", "sql", "__version__"]


def __getattr__(name: str) -> Any:
    """``fuseprof.load`` and ``fuseprof.load_timings`` import pandas on first use, not at
    ``import fuseprof``: the CLI's fast paths (``cases``, ``dashboard``) never pay for it."""
    if name in ("load", "load_timings"):
        from fuseprof.bundle import loading

        return getattr(loading, name)
    if name == "analyze":
        return _analyze
    if name == "sql":
        from fuseprof.export.sql import sql

        return sql
    if name == "region":
        from fuseprof.regions import region

        return region
    raise AttributeError(f"module 'fuseprof' has no attribute {name!r}")


def _analyze(paths: Any, *args: Any, **kwargs: Any) -> Any:
    """``fuseprof.analysis.analyze`` (same arguments), as a ``fuseprof.report.Report``: a list of
    ``TraceAnalysis`` that Jupyter displays as the report's sections."""
    from fuseprof.analysis import analyze
    from fuseprof.report import Report

    return Report(analyze(paths, *args, **kwargs))

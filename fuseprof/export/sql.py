"""SQL over analysed traces: DuckDB (the optional extra ``fuseprof[interop]``) over one table per kind of row,
across every trace and rank given, each row with its ``trace`` and ``rank``.

The tables (``TABLES``; their columns: ``fuseprof sql --tables``, docs/interop.md). Units are in the column names
(``_ns`` integer nanoseconds on the trace's clock, ``_pct``, ``bytes``):
    kernels          every GPU event of the analysed window (kernels, collectives, memcpys, memsets: ``kind``
                     'kernel', 'communication', 'memcpy', 'memset') with its launch, op, module, category, role
                     and profiler step: the analysis's linked events (the default window, the profiler steps,
                     leaves out those outside every step; the CLI says the window on stderr)
    cpu_ops          the CPU ops that launched GPU work, not every op (the name is kept for scripts that use it;
                     ``external_id`` is a kernel's ``op_id``), runtime_calls the runtime/driver calls, modules the
                     ``nn.Module`` ranges, annotations the ``record_function`` ranges: the whole trace
    <section table>  every table of ``fuseprof analyze`` by its name (steps, timeline, idle, categories,
                     top_kernels, top_ops, launches, op_roofline, fusion, audit, integrity, collectives, …)
    rank_summary, collective_skew, late_arrivals, stragglers
                     across ranks, when several ranks are given
Views: ``kernel_ops`` (each kernel beside the CPU op that launched it: kernel ↔ op ↔ module) and
``gemm_per_step`` (GEMM time per profiler step and trace). Values that are lists in the analysis (input
shapes, a fusion row's members) are JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.ranks import across_ranks
from fuseprof.errors import FuseprofError
from fuseprof.parse.store import default_store

if TYPE_CHECKING:
    from fuseprof.analysis.facts.result import TraceAnalysis

RAW_TABLES = {"cpu_ops": "ops", "runtime_calls": "launches", "modules": "modules", "annotations": "annotations"}
ACROSS = {"rank_summary": "ranks", "collective_skew": "collectives", "late_arrivals": "late_arrivals",
          "stragglers": "stragglers"}
VIEWS = {
    "kernel_ops": "SELECT k.trace, k.rank, k.name AS kernel, k.category, k.start_ns, k.dur_ns, k.op, k.module, "
                  "k.profiler_step, o.start_ns AS op_start_ns, o.dur_ns AS op_dur_ns, o.input_dims AS op_input_dims "
                  "FROM kernels k LEFT JOIN cpu_ops o ON o.trace = k.trace AND o.external_id = k.op_id "
                  "AND k.linked_by = 'External id'",
    "gemm_per_step": "SELECT trace, rank, profiler_step, count(*) AS kernels, sum(dur_ns) AS gemm_ns FROM kernels "
                     "WHERE category = 'GEMM' GROUP BY trace, rank, profiler_step",
}


def _json_text(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return value


def sql_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with object columns that hold lists or mixed values as JSON text (DuckDB types a column by its
    values; a list beside a string is neither) and nullable pandas dtypes as DuckDB reads them."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object:
            values = out[column].dropna()
            if values.empty or not values.map(lambda v: isinstance(v, str)).all():  # all null: text, not NULL
                out[column] = out[column].map(_json_text).astype("string")
    return out


def trace_keys(results: list[TraceAnalysis]) -> list[str]:
    """Each result's ``trace`` value, unique across ``results``: its name, or where two share a name (``a/t.json``
    and ``b/t.json`` are both ``t.json``) the fewest trailing parts of their paths that tell them apart, else its
    position (the same file given twice). The views join tables on ``trace``: a name two traces share joined one
    trace's kernels to the other's ops."""
    keys = [r.name for r in results]
    for name in {k for k in keys if keys.count(k) > 1}:
        clash = [i for i, k in enumerate(keys) if k == name]
        sources = [results[i].source for i in clash]
        parts = [Path(source).resolve().parts if source is not None else () for source in sources]
        depth = next((d for d in range(2, max(map(len, parts), default=0) + 1)
                      if len({p[-d:] for p in parts}) == len(parts)), None)
        for i, p in zip(clash, parts):
            keys[i] = "/".join(p[-depth:]) if depth is not None and all(parts) else f"{name} #{clash.index(i) + 1}"
    return keys


def _with_source(frame: pd.DataFrame, result: TraceAnalysis, key: str) -> pd.DataFrame:
    return frame.assign(trace=key, rank=pd.array([result.rank] * len(frame), dtype="Int64"))


def catalog(results: list[TraceAnalysis]) -> dict[str, pd.DataFrame]:
    """Every table ``fuseprof sql`` queries, by name, over ``results`` (see the module docstring); each row's
    ``trace`` is its trace's key (``trace_keys``)."""
    store = default_store()
    parts: dict[str, list[pd.DataFrame]] = {"kernels": []}
    for result, key in zip(results, trace_keys(results)):
        parts["kernels"].append(_with_source(result.events, result, key))
        raw = store.tables(result.source)[0] if result.source is not None else None
        for name, attribute in RAW_TABLES.items():
            if raw is not None:
                parts.setdefault(name, []).append(_with_source(getattr(raw, attribute), result, key))
        for name, frame in result.frames.items():
            parts.setdefault(name, []).append(_with_source(frame, result, key))
    tables = {n: sql_ready(pd.concat([f for f in fs if not f.empty] or fs[:1], ignore_index=True))
              for n, fs in parts.items()}
    if sum(not r.collectives.empty for r in results) >= 2:
        across = across_ranks(results)
        tables.update({n: sql_ready(across[a]) for n, a in ACROSS.items()})
    return tables


def connect(tables: Mapping[str, pd.DataFrame], external_access: bool = False) -> Any:
    """An in-memory DuckDB connection with ``tables`` registered (DataFrames in this process, no file read) and
    the views made. Unless ``external_access`` is asked for, the query can reach nothing outside them: DuckDB's
    file system (``read_csv('/etc/…')``, URLs) is off, no extension is installed or loaded on demand (a network
    fetch), and the setting is locked, so the query cannot turn it back on."""
    try:
        import duckdb
    except ImportError:
        raise FuseprofError("fuseprof sql needs DuckDB: pip install 'fuseprof[interop]' (or pip install duckdb)") \
            from None
    locked = {"enable_external_access": False, "autoinstall_known_extensions": False,
              "autoload_known_extensions": False, "lock_configuration": True}
    config: dict[str, Any] = {} if external_access else locked
    connection = duckdb.connect(":memory:", config=config)
    for name, frame in tables.items():
        connection.register(name, frame)
    for name, query in VIEWS.items():
        if {"kernels", "cpu_ops"} <= set(tables) or name == "gemm_per_step":
            connection.execute(f"CREATE VIEW {name} AS {query}")
    return connection


def query(tables: Mapping[str, pd.DataFrame], text: str, external_access: bool = False) -> pd.DataFrame:
    """The result of one SQL statement over ``tables`` (``connect``: nothing outside them unless ``external_access``);
    DuckDB's message, in one line, for a bad one."""
    import duckdb

    try:
        statements = duckdb.extract_statements(text)
    except duckdb.Error as exc:
        raise FuseprofError(f"sql: {str(exc).strip().splitlines()[0]}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        what = f"{len(statements)} statements" if len(statements) != 1 else f"a {statements[0].type.name} statement"
        raise FuseprofError(f"sql: give one SELECT (or WITH … SELECT) statement; this is {what}")
    connection = connect(tables, external_access)
    try:
        relation = connection.sql(text)
        if relation is None:  # a statement that returns no rows
            return pd.DataFrame()
        huge = {c for c, t in zip(relation.columns, relation.dtypes) if str(t) == "HUGEINT"}
        if huge:  # DuckDB sums BIGINT as HUGEINT, which pandas would get as floats: integer ns stay integers
            relation = relation.project(", ".join(f'CAST("{c}" AS BIGINT) AS "{c}"' if c in huge else f'"{c}"'
                                                  for c in relation.columns))
        return relation.df()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FuseprofError(f"sql: {first} (the tables: fuseprof sql --tables)") from None
    finally:
        connection.close()


def described(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per table and column with its DuckDB type: what ``--tables`` prints."""
    connection = connect(tables)
    try:
        rows = [{"table": name, "column": c[0], "type": c[1]} for name in [*tables, *VIEWS]
                if name in tables or _has_view(connection, name)
                for c in connection.execute(f"DESCRIBE {name}").fetchall()]
    finally:
        connection.close()
    return pd.DataFrame(rows)


def _has_view(connection: Any, name: str) -> bool:
    return bool(connection.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchone()[0])


def sql(text: str, traces: Any, external_access: bool = False, **analyze_options: Any) -> pd.DataFrame:
    """``fuseprof.sql``: one SQL statement over ``traces`` — paths (analysed with ``analyze_options``, as
    ``fuseprof.analyze`` takes them) or analyses already made (``fuseprof.analyze``'s report, a list of
    ``TraceAnalysis``) — as a DataFrame; files, URLs and extensions only with ``external_access`` (``connect``)."""
    from fuseprof.analysis.facts.result import TraceAnalysis

    items = list(traces) if isinstance(traces, (list, tuple)) else [traces]
    if items and all(isinstance(t, TraceAnalysis) for t in items):
        results = items
    else:
        from fuseprof.analysis import analyze

        results = analyze(items, **analyze_options)
    return query(catalog(results), text, external_access)

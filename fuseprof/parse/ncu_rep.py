"""``.ncu-rep`` reports into kernel-frame rows through NVIDIA's own reader, ``ncu_report``.

The reader needs no GPU or CUDA (native libraries from PyPI's ``ncu-report``, in the ``capture`` extra, or the
copy in Nsight Compute's ``extras/python``) and gives each kernel's NVTX push/pop stack, which maps it back to
fuseprof's variant and shape. Where neither is installed but ``ncu`` is on PATH, the report is read as
``ncu --import FILE --csv --page raw`` output (what a capture keeps in its bundle, the same rows).
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from fuseprof.errors import MissingExtraError, NcuFailedError, TraceFormatError
from fuseprof.parse.ncu_metrics import NCU_METRICS, columns_from_metrics, physical_problem
from fuseprof.parse.sources import NCU_SOURCE
from fuseprof.parse.units import scale_to_base
from fuseprof.ranges import parse_range_label

_EXTRAS_GLOBS = ("/opt/nvidia/nsight-compute/*/extras/python", "/usr/local/cuda*/nsight-compute*/extras/python")


def _ncu_extras_dir() -> str | None:
    """Nsight Compute ships the same reader in <install>/extras/python; /usr/local/cuda/bin/ncu
    is often a wrapper script, so look beside it and in the usual install folders."""
    ncu = shutil.which("ncu")
    candidates = [Path(os.path.realpath(ncu)).parent / "extras" / "python"] if ncu else []
    for pattern in _EXTRAS_GLOBS:
        candidates += [Path(p) for p in sorted(glob.glob(pattern), reverse=True)]
    return next((str(c) for c in candidates if (c / "ncu_report.py").exists()), None)


def _import_reader() -> Any | None:
    """NVIDIA's ``ncu_report`` module, from the install or beside ``ncu``; None where neither has it."""
    try:
        import ncu_report
    except ImportError:
        extras = _ncu_extras_dir()
        if extras is None:
            return None
        sys.path.append(extras)
        import ncu_report
    return ncu_report


def _read_through_ncu(path: Path) -> pd.DataFrame:
    """The report's rows from ``ncu --import FILE --csv --page raw --print-units base``, parsed as a capture's CSV."""
    from fuseprof.parse.ncu_csv import ncu_csv_frame
    from fuseprof.parse.ncu_import import import_csv_argv, run_capture_output

    ncu = shutil.which("ncu")
    if ncu is None:
        raise MissingExtraError("ncu_report", f"reading {path.name}", "or put Nsight Compute's ncu on PATH")
    try:
        text = run_capture_output(import_csv_argv(ncu, path))
    except NcuFailedError as exc:
        raise TraceFormatError(f"{path}: ncu --import could not read it ({exc})") from None
    return ncu_csv_frame(path, text)


def _metric_value(action: Any, name: str) -> float | str | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    value = metric.value()
    if isinstance(value, (int, float)):
        return float(value) * scale_to_base(metric.unit())
    return value


def _range_of(action: Any) -> tuple[str, str] | None:
    state = action.nvtx_state()
    if state is None:
        return None
    for domain_id in state.domains():
        for label in state.domain_by_id(domain_id).push_pop_ranges():
            found = parse_range_label(label)
            if found:
                return found
    return None


def read_ncu_rep(path: Path) -> pd.DataFrame:
    """One row per profiled kernel, columns named as in ``fuseprof.bundle.schema``."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    reader = _import_reader()
    if reader is None:
        return _read_through_ncu(path)
    try:
        context = reader.load_report(str(path))
    except Exception as exc:  # the reader raises plain RuntimeError/ValueError for damaged files
        raise TraceFormatError(f"{path}: ncu_report could not load it ({exc})") from None
    rows = []
    for r in range(context.num_ranges()):
        report_range = context.range_by_idx(r)
        for a in range(report_range.num_actions()):
            action = report_range.action_by_idx(a)
            metrics = {name: _metric_value(action, name) for name in NCU_METRICS}
            cols = columns_from_metrics(metrics)
            cols["kernel"] = action.name(reader.IAction.NameBase_DEMANGLED)
            problem = physical_problem(cols)
            if problem:
                raise TraceFormatError(f"{path}: kernel {a} of range {r} ({str(cols['kernel'])[:60]}): {problem}")
            found = _range_of(action)
            cols["variant"], cols["shape"] = found if found else (None, None)
            cols["source"], cols["kind"] = NCU_SOURCE, "kernel"
            rows.append(cols)
    if not rows:
        raise TraceFormatError(f"{path}: the report holds no profiled kernel (empty, or truncated)")
    frame = pd.DataFrame(rows)
    measured = frame[["duration_ns", "dram_read_bytes", "registers_per_thread"]]
    if measured.isna().all(axis=1).any():  # a kernel entry without its metrics: a cut or foreign report
        first = int(measured.isna().all(axis=1).to_numpy().argmax())
        raise TraceFormatError(f"{path}: kernel {first} ({frame['kernel'].iloc[first]!r}) has none of the metrics "
                               "fuseprof reads; is the report truncated, or profiled without them?")
    return frame

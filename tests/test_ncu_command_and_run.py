"""ncu argv built purely; ncu's failure modes classified from its real messages.

The runner tests use a stand-in executable that prints lines copied from real ncu 2025.3.1
output and exits with ncu's codes; the real ncu is exercised by the GPU tests.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from fuseprof.capture.ncu_command import NcuRequest, profile_argv
from fuseprof.capture.ncu_run import UnknownMetricsError, run_ncu
from fuseprof.errors import NcuFailedError, NcuNoKernelsError, NcuPermissionError, NcuTimeoutError
from fuseprof.parse.ncu_import import import_csv_argv
from fuseprof.parse.ncu_metrics import NCU_METRICS


def _request(labels: list[str]) -> NcuRequest:
    return NcuRequest(ncu="/opt/ncu", report_path=Path("/tmp/r.ncu-rep"), range_labels=labels,
                      metrics=NCU_METRICS[:3], target_argv=["python3", "-m", "x"])


def test_profile_argv_never_touches_clocks_and_filters_on_ranges() -> None:
    argv = profile_argv(_request(["fuseprof:eager:1x8", "fuseprof:compiled:1x8"]))
    assert argv[:3] == ["/opt/ncu", "--clock-control", "none"]
    assert argv[argv.index("--nvtx") + 1:argv.index("--nvtx") + 5] == [
        "--nvtx-include", "fuseprof:eager:1x8/", "--nvtx-include", "fuseprof:compiled:1x8/"]
    assert argv[argv.index("--metrics") + 1] == ",".join(NCU_METRICS[:3])
    assert argv[-3:] == ["python3", "-m", "x"]


def test_profile_argv_refuses_to_profile_everything() -> None:
    with pytest.raises(ValueError, match="NVTX range"):
        profile_argv(_request([]))


def test_import_csv_uses_base_units() -> None:
    assert import_csv_argv("ncu", Path("r.ncu-rep"))[-4:] == ["--page", "raw", "--print-units", "base"]


def _stub(tmp_path: Path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_progress_is_reported_per_kernel(tmp_path: Path) -> None:
    ncu = _stub(tmp_path, 'echo \'==PROF== Profiling "reduce_kernel" - 0: 0%....50%....100% - 3 passes\'\n'
                          'echo \'==PROF== Profiling "triton_red_fused" - 1: 0%....50%....100% - 9 passes\'\n')
    seen: list[tuple[int, str, int]] = []
    run = run_ncu([ncu], 30, lambda i, name, passes: seen.append((i, name, passes)))
    assert seen == [(1, "reduce_kernel", 3), (2, "triton_red_fused", 9)]
    assert run.passes == [("reduce_kernel", 3), ("triton_red_fused", 9)]


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        ("echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
         "Counters on the target device 0.'; exit 1", NcuPermissionError, "ERR_NVGPUCTRPERM"),
        ("echo '==WARNING== No kernels were profiled.'; exit 0", NcuNoKernelsError, "profiled no kernel"),
        ("echo '==ERROR== Failed to find metric regex:^launch__grid_dim_w$'; exit 1", UnknownMetricsError,
         "launch__grid_dim_w"),
        ("echo '==ERROR== The application returned an error code (1).'; exit 1", NcuFailedError,
         "application returned an error code"),
        ("sleep 30", NcuTimeoutError, "ran past 1 s"),
    ],
)
def test_failures_are_named(tmp_path: Path, body: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        run_ncu([_stub(tmp_path, body)], 1)


def test_unknown_metrics_are_listed_for_a_retry(tmp_path: Path) -> None:
    ncu = _stub(tmp_path, "echo '==ERROR== Failed to find metric regex:^a__b.sum$'\n"
                          "echo '==ERROR== Failed to find metric c__d.avg'; exit 1")
    with pytest.raises(UnknownMetricsError) as info:
        run_ncu([ncu], 10)
    assert info.value.metrics == ["a__b.sum", "c__d.avg"]

"""GPU tests: the whole capture on a real device. Run on the H200 through the device tool."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import fuseprof
from fuseprof.capture.profile import ProfileOptions, run_profile
from fuseprof.errors import NcuError

pytestmark = pytest.mark.gpu


def test_profile_without_ncu_writes_checked_timed_traced_bundle(tmp_path: Path) -> None:
    path = run_profile(ProfileOptions(case="rmsnorm_swiglu", shapes=((64, 4096),), ncu=False, out_dir=tmp_path,
                                      repeats=10, repo_root=tmp_path), log=lambda _: None)
    timings = fuseprof.load_timings(path)
    assert timings["correct"].all()
    assert (timings["gpu_median_ns"] > 500).all()  # a real kernel, not a no-op
    assert (timings["as_called_median_ns"] >= timings["gpu_median_ns"] * 0.8).all()
    kernels = fuseprof.load(path)
    assert set(kernels["source"]) == {"torch.profiler"}
    eager = kernels[kernels["variant"] == "eager"]
    compiled = kernels[kernels["variant"] == "compiled"]
    # the eager chain launches one kernel per op; Inductor fuses it into one or two
    assert eager.groupby("invocation").size().max() > compiled.groupby("invocation").size().max()
    assert compiled["launch_api"].isin(["cuLaunchKernelEx", "cuLaunchKernel"]).all()
    assert kernels["duration_ns"].gt(0).all()
    # the traced window also ran without the profiler; analyze uses that measurement, not its estimate (issue 59)
    measured = json.loads((path / "manifest.json").read_text())["profiler"]["unprofiled_window_ns"]
    unprofiled = fuseprof.analyze(path)[0].frames["unprofiled"]
    assert len(measured) == 5 and unprofiled["source"].str.startswith("measured").all()
    removed = (unprofiled["span_ns"] - statistics.median(measured)).clip(lower=0)
    assert (unprofiled["host_removed_ns"] == removed.round()).all() and unprofiled["source"].str.contains("CUDA").all()


@pytest.mark.ncu
def test_profile_with_ncu_fills_hardware_columns(tmp_path: Path) -> None:
    path = run_profile(ProfileOptions(case="rmsnorm_swiglu", shapes=((256, 4096),), out_dir=tmp_path,
                                      repeats=5, repo_root=tmp_path), log=lambda _: None)
    ncu = fuseprof.load(path).query("source == 'ncu'")
    assert len(ncu) > 0
    for column in ("dram_read_bytes", "duration_ns", "registers_per_thread", "theoretical_occupancy_pct",
                   "achieved_occupancy_pct", "spill_load_bytes", "flops_fp32"):
        assert ncu[column].notna().all(), column
    compiled = ncu[ncu["variant"] == "compiled"]
    # the fused kernel must read at least x and g once: 2 * 256 * 4096 * 2 bytes
    assert compiled["dram_read_bytes"].sum() >= 0.9 * 2 * 256 * 4096 * 2


def test_bad_ncu_path_keeps_profiler_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("fuseprof.capture.ncu_run._SEARCH_DIRS", ())
    with pytest.raises(NcuError, match="saved without ncu"):
        run_profile(ProfileOptions(case="rmsnorm_swiglu", shapes=((64, 4096),), variants=["eager"],
                                   out_dir=tmp_path, repeats=3, repo_root=tmp_path), log=lambda _: None)
    (bundle,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert len(fuseprof.load(bundle)) > 0


@pytest.mark.gpu
def test_denied_counters_give_a_complete_modelled_roofline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ncu on PATH that fails as cloud hosts make it fail (ERR_NVGPUCTRPERM): the profile still
    writes its bundle, exits normally, and every variant and shape has a roofline point marked modelled."""
    import os

    from fuseprof.model.roofline import place

    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
                    "NVIDIA GPU Performance Counters on the target device 0.'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    messages: list[str] = []
    path = run_profile(ProfileOptions(case="rmsnorm_swiglu", shapes=((1024, 4096),), variants=["eager", "compiled"],
                                      out_dir=tmp_path / "out", repeats=5, repo_root=tmp_path), log=messages.append)
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["ncu"]["status"] == "denied"
    assert any("ERR_NVGPUCTRPERM" in m and "modelled" in m and "NVreg_RestrictProfilingToAdminUsers" in m
               for m in messages)
    kernels = fuseprof.load(path)
    modelled = kernels[kernels["source"] == "model"]
    assert sorted(modelled["variant"]) == ["compiled", "eager"]
    timings = fuseprof.load_timings(path).set_index("variant")
    for row in modelled.itertuples():
        assert row.duration_ns == int(timings.loc[row.variant, "gpu_median_ns"])
        assert row.dram_read_bytes == timings.loc[row.variant, "nominal_bytes"]
    placed = place(kernels)
    assert len(placed) == 2 and placed["pct_of_roof"].notna().all() and (placed["flops"] > 0).all()
    # judged against the GPU that ran them (the manifest's, from NVML), not a stand-in
    assert (placed["device"] == manifest["device"]["name"]).all() and not placed["roof"].str.contains("unknown").any()
    assert placed["kernel"].str.endswith("(whole call, modelled)").all()

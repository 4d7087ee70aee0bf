"""Bundles: atomic, never overwritten; load() over the committed H200 capture."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import fuseprof
from fuseprof.bundle.files import BundleWriter, find_bundles
from fuseprof.bundle.reparse import reparse
from fuseprof.bundle.schema import KERNEL_COLUMN_NAMES
from fuseprof.errors import BundleError
from tests.conftest import SEED_BUNDLE, TRACES

NCU_REQUIRED = ["dram_read_bytes", "dram_write_bytes", "duration_ns", "registers_per_thread",
                "theoretical_occupancy_pct", "achieved_occupancy_pct", "spill_load_bytes", "spill_store_bytes",
                "flops_fp16", "flops_fp32", "flops_fp64", "l2_read_bytes", "l2_write_bytes", "occupancy_limiter"]


def test_every_ncu_kernel_of_the_committed_captures_has_the_hardware_columns() -> None:
    frame = fuseprof.load(TRACES)
    ncu = frame[frame["source"] == "ncu"]
    assert len(ncu) >= 56
    assert ncu[NCU_REQUIRED].notna().all().all()
    assert ncu["variant"].notna().all()


def test_load_gives_the_documented_columns_in_order() -> None:
    frame = fuseprof.load(SEED_BUNDLE)
    assert tuple(frame.columns) == KERNEL_COLUMN_NAMES
    assert set(frame["bundle"]) == {SEED_BUNDLE.name}
    assert frame["duration_ns"].dtype == pd.Int64Dtype()


def test_timings_hold_correctness_before_speed() -> None:
    timings = fuseprof.load_timings(SEED_BUNDLE)
    assert len(timings) == 8 and timings["correct"].all()
    assert (timings["rel_err"] < 3e-4).all()  # fp16 output rounding, against float64
    gpu = timings.set_index(["variant", "shape"])["gpu_median_ns"]
    assert (gpu.loc["eager"] > 4 * gpu.loc["compiled"]).all()  # 13 launches against one fused kernel


def _write(out: Path, name: str) -> Path:
    writer = BundleWriter(out, name)
    writer.write_manifest({"kind": "test"})
    return writer.commit()


def test_a_bundle_is_never_overwritten(tmp_path: Path) -> None:
    first, second = _write(tmp_path, "same"), _write(tmp_path, "same")
    assert (first.name, second.name) == ("same", "same-2")


def test_failed_write_leaves_nothing_and_partials_are_not_bundles(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with BundleWriter(tmp_path, "broken") as writer:
            writer.write_manifest({"kind": "test"})
            raise RuntimeError("capture died")
    assert list(tmp_path.iterdir()) == []
    BundleWriter(tmp_path, "half").write_manifest({"kind": "test"})  # never committed
    assert find_bundles(tmp_path) == []


def test_load_refuses_a_folder_without_bundles(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="holds no fuseprof bundle"):
        fuseprof.load(tmp_path)


def test_load_refuses_another_schema_version(tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(SEED_BUNDLE, copy)
    manifest = (copy / "manifest.json").read_text().replace('"schema_version": 1', '"schema_version": 99')
    (copy / "manifest.json").write_text(manifest)
    with pytest.raises(BundleError, match="bundle schema 99"):
        fuseprof.load(copy)


def test_reparse_rebuilds_the_same_frame_from_raw_artifacts(tmp_path: Path) -> None:
    copy = tmp_path / SEED_BUNDLE.name
    shutil.copytree(SEED_BUNDLE, copy)
    (copy / "kernels.parquet").unlink()
    assert reparse(copy) == 224
    pd.testing.assert_frame_equal(fuseprof.load(copy), fuseprof.load(SEED_BUNDLE))

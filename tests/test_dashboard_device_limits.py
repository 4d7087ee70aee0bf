"""Issue 60 point 4: the dashboard's Occupancy calculator uses the kernel's own GPU's per-SM limits
(``devices.SM_LIMITS`` by compute capability), never Hopper's, and says "unknown" where the table has none; the
Roofline page says when a GPU has no roof of its own. Run headless by AppTest on the seed bundle with its kernels'
device renamed (a copy in tmp_path), the expected values worked from the CUDA programming guide's limits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import SEED_BUNDLE

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = str(Path(__file__).parent.parent / "dashboards" / "app.py")


def _app(tmp_path: Path, device: str, page: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    bundle = shutil.copytree(SEED_BUNDLE, tmp_path / SEED_BUNDLE.name)
    kernels = pd.read_parquet(bundle / "kernels.parquet")
    kernels["device"] = pd.array([device] * len(kernels), dtype=kernels["device"].dtype)
    kernels.to_parquet(bundle / "kernels.parquet")
    monkeypatch.setenv("FUSEPROF_TRACES", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["page"] = page
    at.query_params["variant"] = ["compiled"]
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_ada_gpu_gets_its_own_48_warps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An L4 (compute capability 8.9: 48 resident warps, 100 KB shared memory per SM). 128 registers x 512 threads
    = 65,536 registers: one block of 16 warps, 16/48 = 33.3% (Hopper's 64 warps would read 25.0%)."""
    at = _app(tmp_path, "NVIDIA L4", "Occupancy", monkeypatch)
    assert "NVIDIA L4: 48 warps of 32 threads, 65,536 registers, 102,400 B shared memory per SM" in at.subheader[0].value
    at.number_input(key="occ-regs-0").set_value(128).run()
    assert not at.exception
    assert at.metric[0].value == "33.3%"
    assert at.number_input(key="occ-smem-0").max == 102400 - 1024  # the SM's shared memory less the runtime's 1 KB


def test_a_turing_gpu_bounds_the_block_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An RTX 2080 Ti (7.5: 32 warps, so at most 1,024 threads resident, 64 KB shared memory, none reserved)."""
    at = _app(tmp_path, "NVIDIA GeForce RTX 2080 Ti", "Occupancy", monkeypatch)
    assert "32 warps of 32 threads" in at.subheader[0].value
    assert at.number_input(key="occ-smem-0").max == 65536


def test_a_gpu_without_limits_says_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An MI300X: the table holds no per-CU limits, so no calculator, no Hopper numbers: "unknown"."""
    at = _app(tmp_path, "AMD Instinct MI300X", "Occupancy", monkeypatch)
    assert any("Per-SM limits unknown for AMD Instinct MI300X" in i.value for i in at.info)
    assert not at.metric
    table = at.dataframe[0].value
    assert (table["computed_limiter"] == "unknown").all() and table["computed_occupancy_pct"].isna().all()


def test_a_gpu_without_a_roof_is_said_on_the_roofline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _app(tmp_path, "Mystery GPU 9000", "Roofline", monkeypatch)
    assert any(w.value.startswith("Roof unknown: unknown GPU") for w in at.warning)

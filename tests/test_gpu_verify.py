"""GPU test of ``fuseprof fusion --verify``: the eager Llama trace's top chain replayed and timed on the GPU.
Run on the H200 through the device tool (``bash scripts/h200.sh install verifytests``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
TRACE = Path(__file__).parent.parent / "traces" / "llama4l-eager-h200"


def test_the_top_chains_run_fused_faster_with_the_same_outputs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fuseprof.cli", "fusion", str(TRACE), "--verify", "2", "--repeats", "20",
                           "--out", str(tmp_path), "--format", "json"], capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    row, norm = json.loads(done.stdout)
    assert row["verdict"] == "outputs agree"
    # 15 recorded ops, 15 kernels eager; Inductor fuses them into fewer, and the replay is faster
    assert row["chain_kernels"] == 15 and row["compiled_kernels"] < 15
    assert row["realised_saving_ns"] > 0 and row["eager_ns"] > row["compiled_ns"]
    assert (tmp_path / Path(row["bundle"]).name / "timings.parquet").exists()
    # the add + RMSNorm chain also runs as fuseprof's add_rms_norm kernel, with the chain's outputs
    assert norm["verdict"] == "outputs agree" and 0 < norm["fuseprof_ns"] < norm["eager_ns"]

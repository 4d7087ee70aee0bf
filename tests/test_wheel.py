"""A normal (non-editable) install works from any directory: build the wheel, install it into a fresh
venv, and from an empty temporary directory run the commands a new user runs first. Slow (a venv
and its dependencies, from pip's cache): marked ``wheel``; CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, dashboard, require_browser
from tests.conftest import FIXTURES, ROOT, TRACES

pytestmark = pytest.mark.wheel


def run(argv: list[str], cwd: Path, timeout: float = 900) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv[:4]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ of a fresh venv with the wheel installed (torch pinned first: the CPU wheel on disk)."""
    work = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(ROOT)], work)
    (wheel,) = (work / "dist").glob("fuseprof-*.whl")
    run([sys.executable, "-m", "venv", str(work / "venv")], work)
    pip = [str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    run([*pip, "torch==2.13.0"], work)
    run([*pip, str(wheel)], work)
    return work / "venv" / "bin"


def test_installed_commands_work_from_another_directory(installed: Path, tmp_path: Path) -> None:
    fuseprof = str(installed / "fuseprof")
    assert "Measure what fusing GPU kernels buys" in run([fuseprof, "--help"], tmp_path)
    summary = run([fuseprof, "summary", str(TRACES)], tmp_path)
    assert "rmsnorm_swiglu" in summary and "llama_mlp" in summary
    analysis = run([fuseprof, "analyze", str(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz")], tmp_path)
    assert "GPU timeline" in analysis and "307.197" in analysis
    cases = run([fuseprof, "cases", "--wide"], tmp_path)  # one line a case
    # every case folder of the checkout is in the wheel (pyproject lists the packages one by one)
    folders = sorted(p.name for p in (ROOT / "kernels").iterdir() if (p / "__init__.py").is_file()
                     and not p.name.startswith("_"))
    assert [line.split()[0] for line in cases.splitlines()[1:]] == folders
    # every subpackage of the checkout is in the wheel too
    packages = sorted(f"fuseprof.{p.name}" for p in (ROOT / "fuseprof").iterdir() if (p / "__init__.py").is_file())
    imports = run([str(installed / "python"), "-c", f"import {', '.join(packages)}, fuseprof.figures, "
                                                  "fuseprof_dashboards, fuseprof_kernels.decoder_layer"], tmp_path)
    assert imports == "" and "fuseprof.verify" in packages
    verified = run([fuseprof, "compare", str(ROOT / "traces" / "verify")], tmp_path)
    assert "Predictions checked by running them" in verified and "median 9%, worst 20%" in verified
    # the sharded path from the installed package: torchrun starts its ranks with -m fuseprof.capture.shard
    bench = run([fuseprof, "bench", "silu_mul", "--device", "cpu", "--variants", "eager", "--shapes", "4x64,8x64",
                 "--repeats", "2", "--gpus", "2", "--out", str(tmp_path)], tmp_path)
    rows = pd.read_parquet(Path(bench.strip().splitlines()[-1]) / "timings.parquet")
    assert sorted(zip(rows["shape"], rows["rank"], strict=True)) == [("4x64", 1), ("8x64", 0)]


def test_installed_dashboard_draws_its_first_chart(installed: Path, tmp_path: Path) -> None:
    sync_playwright, executable = require_browser()
    with dashboard(TRACES, command=[str(installed / "fuseprof")], cwd=tmp_path) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector(PLOT_SELECTOR, timeout=90_000)
        assert page.locator('[data-testid="stException"]').count() == 0
        browser.close()


def test_the_gate_recipe_installs_as_written(installed: Path, tmp_path: Path) -> None:
    """docs/gate.md's install step, run verbatim (its ``python`` is the venv's) in a folder where the workflow's
    second checkout put fuseprof's repository, installs a fuseprof whose gate runs."""
    recipe = (ROOT / "docs" / "gate.md").read_text()
    (line,) = [s.split("run: ", 1)[1] for s in recipe.splitlines() if "run: python -m pip install" in s]
    (tmp_path / ".fuseprof").symlink_to(ROOT)
    env_path = f"{installed}:/usr/bin:/bin"
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PATH": env_path})
    assert done.returncode == 0, done.stderr[-2000:]
    gate = subprocess.run([str(installed / "fuseprof"), "diff", str(TRACES / "llama4l-eager-h200"),
                           str(TRACES / "llama4l-compiled-h200"), "--fail-on", "busy:+5%,kernels:+0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert gate.returncode == 0, gate.stderr[-2000:]

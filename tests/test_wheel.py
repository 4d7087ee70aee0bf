"""A normal (non-editable) install works from any directory: build the wheel, install it into a fresh
venv, and from an empty temporary directory run the commands a new user runs first. Slow (a venv
and its dependencies, from pip's cache): marked ``wheel``; CI runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, dashboard, require_browser
from tests.conftest import FIXTURES, ROOT, TRACES, shared_traces

pytestmark = pytest.mark.wheel


def run(argv: list[str], cwd: Path, timeout: float = 900) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv[:4]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the checkout, built once for the module's venvs."""
    work = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(work), str(ROOT)], work)
    (built,) = work.glob("fuseprof-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ of a fresh venv with the wheel and every extra of ``all`` installed (torch pinned first: the CPU
    wheel on disk)."""
    work = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "venv", str(work / "venv")], work)
    pip = [str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    run([*pip, "torch==2.13.0"], work)
    run([*pip, f"{wheel}[all]"], work)
    return work / "venv" / "bin"


@pytest.fixture(scope="module")
def core(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ of a fresh venv with the wheel alone, no extra (pip as a user runs it: PyPI, pip's cache); its
    install time and size are printed (``-s``) and written beside it, in core-install.txt."""
    work = tmp_path_factory.mktemp("core")
    start = time.perf_counter()
    run([sys.executable, "-m", "venv", str(work / "venv")], work)
    run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], work)
    seconds = time.perf_counter() - start
    size = sum(f.lstat().st_size for f in (work / "venv").rglob("*") if f.is_file() and not f.is_symlink())
    said = f"core install: {seconds:.1f} s (venv and pip install {wheel.name}), venv {size / 1e6:,.1f} MB"
    (work / "core-install.txt").write_text(said + "\n")
    print(said)
    return work / "venv" / "bin"


def test_the_core_install_analyses_traces_without_torch(core: Path, tmp_path: Path) -> None:
    """No extra: torch, streamlit, jupyter, nvidia-ml-py and ncu-report are absent, `import torch` fails, and from
    another directory `analyze`, `check` and `report` of a committed trace exit 0 with the trace's numbers (the
    BERT trace's busy time, 307.197 µs, as the full install prints it); a capture verb is one line naming
    ``fuseprof[capture]``."""
    python = str(core / "python")
    listed = {line.split("==")[0].lower() for line in run([python, "-m", "pip", "freeze"], tmp_path).splitlines()}
    assert not listed & {"torch", "streamlit", "jupyter", "nvidia-ml-py", "ncu-report", "triton"}, listed
    assert {"pandas", "pyarrow", "plotly", "msgspec", "numpy"} <= listed
    no_torch = subprocess.run([python, "-c", "import torch"], capture_output=True, text=True, cwd=tmp_path)
    assert no_torch.returncode == 1 and "No module named 'torch'" in no_torch.stderr
    fuseprof, trace = str(core / "fuseprof"), str(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz")
    assert "307.197" in run([fuseprof, "analyze", trace], tmp_path)
    assert "integrity" in run([fuseprof, "check", trace], tmp_path).lower()
    run([fuseprof, "report", trace, "-o", str(tmp_path / "r.html")], tmp_path)
    assert "Plotly.newPlot" in (tmp_path / "r.html").read_text()
    assert run([python, "-c", "import importlib.resources as r; print(r.files('fuseprof').joinpath('py.typed')"
                              ".is_file())"], tmp_path).strip() == "True"
    profile = subprocess.run([fuseprof, "profile", "silu_mul", "--device", "cpu", "--out", str(tmp_path / "o")],
                             capture_output=True, text=True, cwd=tmp_path, timeout=900)
    assert profile.returncode == 2 and profile.stderr.strip() == (
        "fuseprof: error: fuseprof profile needs torch, which this install lacks: pip install 'fuseprof[capture]'")


@pytest.mark.shared
def test_the_core_install_analyses_a_shared_trace(core: Path, tmp_path: Path) -> None:
    """The issue's words: the core extra, in a fresh venv without torch, analyses a shared trace (vLLM's, graph
    replays and all) and checks it."""
    trace = str(shared_traces() / "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    assert "GPU timeline" in run([str(core / "fuseprof"), "analyze", trace], tmp_path)
    run([str(core / "fuseprof"), "check", trace], tmp_path)


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

"""``fuseprof run`` on a user script marked with ``fuseprof.region``: on CPU here (CI), on the H200
with ncu through scripts/h200.sh step ``regions``."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

import fuseprof
from tests.conftest import FUSEPROF, ROOT

DEMO = ROOT / "examples" / "region_demo.py"


def test_run_captures_each_region_of_a_user_script(tmp_path: Path) -> None:
    done = subprocess.run([FUSEPROF, "run", "--out", str(tmp_path / "out"), str(DEMO), "--steps", "3"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ran 3 steps on cpu" in done.stdout  # the script's own output, its arguments passed through
    bundle = Path(done.stdout.strip().splitlines()[-1])
    kernels = fuseprof.load(bundle)
    assert set(kernels["variant"]) == {"rmsnorm", "gate"} and set(kernels["shape"]) == {"region"}
    ops = kernels.groupby("variant")["kernel"].apply(set)
    assert {"aten::pow", "aten::mean", "aten::rsqrt"} <= ops["rmsnorm"] and {"aten::silu", "aten::mul"} <= ops["gate"]
    # three steps: every op of a region once per step
    assert (kernels[kernels["kernel"] == "aten::silu"]["invocation"].tolist()) == [0, 1, 2]


@pytest.mark.parametrize(("body", "message"), [
    ("print('no regions here')\n", "entered no fuseprof.region"),
    ("import fuseprof\nwith fuseprof.region('x'):\n    1 / 0\n", "script.py:3: ZeroDivisionError"),
    ("import sys\nsys.exit(3)\n", "exited with status 3"),
])
def test_run_reports_script_problems_in_one_line(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "script.py").write_text(body)
    done = subprocess.run([FUSEPROF, "run", "--out", str(tmp_path / "out"), str(tmp_path / "script.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    errors = [line for line in done.stderr.splitlines() if line.startswith("fuseprof: error:")]
    assert done.returncode == 2 and len(errors) == 1 and message in errors[0], done.stderr[-1500:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FUSEPROF, "run", "--no-ncu", "--out", str(tmp_path / "out"), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})


def test_unprofiled_steps_run_timed_before_the_profiler_starts(tmp_path: Path) -> None:
    """The demo marks each of its 6 steps with fuseprof.step(): the first call marks where timing begins, steps 2-4
    run timed with no profiler on, and steps 5 and 6 (and the script's tail) are traced as ProfilerSteps (issue 59:
    the steps as they run without the profiler, measured in the same run, the script run once)."""
    done = _run(tmp_path, "--unprofiled-steps", "3", str(DEMO), "--steps", "6")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("ran 6 steps on cpu") == 1  # the script ran once
    bundle = Path(done.stdout.strip().splitlines()[-1])
    raw = json.loads(gzip.decompress((bundle / "raw" / "profiler_trace.json.gz").read_bytes()))
    measured = raw["fuseprof_unprofiled"]
    assert measured["method"] == "host clock" and len(measured["step_ns"]) == 3
    assert all(isinstance(t, int) and t > 0 for t in measured["step_ns"])
    assert json.loads((bundle / "manifest.json").read_text())["profiler"]["unprofiled_step_ns"] == measured["step_ns"]
    events = raw["traceEvents"]
    assert sorted(e["name"] for e in events if e.get("cat") == "user_annotation"
                  and e["name"].startswith("ProfilerStep#")) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    assert sum(e.get("name") == "aten::silu" and e.get("cat") == "cpu_op" for e in events) == 2  # steps 5 and 6 only


@pytest.mark.parametrize(("args", "message"), [
    (["--unprofiled-steps", "6", str(DEMO), "--steps", "6"], "called fuseprof.step() 6 times; --unprofiled-steps 6 "
                                                             "needs at least 8"),
    (["--unprofiled-steps", "5", str(DEMO), "--steps", "6"], "called fuseprof.step() 6 times; --unprofiled-steps 5 "
                                                             "needs at least 7"),
    (["--unprofiled-steps", "-1", str(DEMO)], "'-1': a whole number, 0 or more"),
])
def test_unprofiled_steps_that_leave_nothing_to_trace_are_an_error(tmp_path: Path, args: list[str],
                                                                   message: str) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr[-1500:]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("child_ends", ["sys.exit(0)", "sys.exit(4)", "raise RuntimeError('child')", "pass"])
def test_a_forked_child_ending_its_own_way_is_not_the_run(child_ends: str, tmp_path: Path) -> None:
    """The script forks; the child ends by sys.exit, an exception or running off the end of its branch. The
    parent's run is what is captured: one bundle, exit 0, no false failure, no hang (the child ran on into the
    capture's end before: a second bundle and a lock the fork copied held)."""
    (tmp_path / "script.py").write_text(
        "import os, sys\nimport torch\nimport fuseprof\n"
        "pid = os.fork()\n"
        f"if pid == 0:\n    {child_ends}\nelse:\n    os.waitpid(pid, 0)\n"
        "    with fuseprof.region('work'):\n        torch.ones(64).mul(2)\n    print('parent done')\n")
    done = subprocess.run([FUSEPROF, "run", "--out", str(tmp_path / "out"), str(tmp_path / "script.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-1500:]
    assert "parent done" in done.stdout and "fuseprof: error" not in done.stderr
    assert len(list((tmp_path / "out").iterdir())) == 1


@pytest.mark.gpu
@pytest.mark.ncu
def test_run_profiles_the_regions_with_ncu_on_a_gpu(tmp_path: Path) -> None:
    done = subprocess.run([FUSEPROF, "run", "--out", str(tmp_path), str(DEMO), "--steps", "2"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    kernels = fuseprof.load(Path(done.stdout.strip().splitlines()[-1]))
    ncu = kernels[kernels["source"] == "ncu"]
    assert set(ncu["variant"]) == {"rmsnorm", "gate"}
    assert ncu["dram_read_bytes"].notna().all() and (ncu["duration_ns"] > 0).all()
    profiled = kernels[kernels["source"] == "torch.profiler"]
    in_regions = profiled[(profiled["kind"] == "kernel") & profiled["variant"].notna()]
    assert len(ncu) == len(in_regions)  # every kernel inside a region, and none outside

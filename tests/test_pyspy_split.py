"""``scripts/pyspy_split.py`` on a py-spy raw profile written out here: each sample inside the analysis put to the
library of its deepest frame that is not the standard library, in py-spy's own path forms."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pyspy_split.py"
# py-spy's raw form: frames from the root to the leaf, ';' between them, then the sample count
RAW = "\n".join([
    # 5 samples in pandas under fuseprof: pandas'
    "<module> (run.py:1);analyze_tables (fuseprof/analysis/running/analyze.py:9);top_ops (fuseprof/analysis/facts/summaries.py:3);"
    "DataFrame.__getitem__ (pandas/core/frame.py:4000) 5",
    # 3 in the standard library called from fuseprof: fuseprof's (bisect runs for it)
    "<module> (run.py:1);analyze_tables (fuseprof/analysis/running/analyze.py:9);bind (fuseprof/analysis/paths/critical_path.py:150);"
    "bisect_right (/usr/lib/python3.11/bisect.py:10) 3",
    # 1 in NumPy, its path written whole under a checkout folder called fuseprof: NumPy's
    "<module> (run.py:1);analyze_tables (fuseprof/analysis/running/analyze.py:9);bind (fuseprof/analysis/paths/critical_path.py:150);"
    "unique (/home/u/fuseprof/.venv/lib/python3.11/site-packages/numpy/lib/_arraysetops_impl.py:1) 1",
    # 7 outside the analysis (the decode): not counted
    "<module> (run.py:1);read_trace_tables (fuseprof/parse/trace_events.py:5) 7",
])


def test_each_sample_goes_to_its_deepest_library(tmp_path: Path) -> None:
    raw = tmp_path / "analysis.raw"
    raw.write_text(RAW + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(raw)], capture_output=True, text=True, check=True).stdout
    lines = [line.split() for line in out.splitlines()]
    assert lines[0][:2] == ["9", "samples"]  # 5 + 3 + 1
    shares = {line[0]: line[1] for line in lines[1:4]}
    assert shares == {"pandas": "55.6%", "fuseprof": "33.3%", "numpy": "11.1%"}  # 5/9, 3/9, 1/9
    assert "33.3% bind (analysis/paths/critical_path.py)" in out


@pytest.mark.parametrize("content", [None, "<module> (run.py:1);read_trace_tables (fuseprof/parse/x.py:5) 7\n"])
def test_nothing_to_split_is_one_error(tmp_path: Path, content: str | None) -> None:
    raw = tmp_path / "analysis.raw"
    if content is not None:
        raw.write_text(content)
    done = subprocess.run([sys.executable, str(SCRIPT), str(raw)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert ("no such file" if content is None else "no sample inside analyze_tables") in done.stderr

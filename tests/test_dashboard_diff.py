"""The Diff page (issue 62): two traces of one model compared by what they compute, run headless by AppTest on
the committed H100 eager and compiled decode traces; expected values from the raw trace JSON."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = str(ROOT / "dashboards" / "app.py")
H100 = FIXTURES / "truth_unprofiled" / "h100"


def _gpu_ns_per_step(path: Path) -> float:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = sum(e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
                for e in events)
    return sum(round(e["dur"] * 1000) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")) / steps


def test_the_diff_page_aligns_eager_and_compiled_by_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("decode_eager", "decode_compiled"):
        shutil.copy(H100 / f"{name}.json.gz", tmp_path / f"{name}.json.gz")
    monkeypatch.setenv("FUSEPROF_TRACES", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = "Diff"
    at.query_params["diff-a"] = "decode_eager.json.gz"
    at.run()
    assert not at.exception and not at.error, ([e.value for e in at.exception], [e.value for e in at.error])
    assert "Diff" in at.radio(key="choice-page").options
    assert at.selectbox(key="choice-diff-b").value == "decode_compiled.json.gz"
    assert any("100.0% of A's GPU time matched to B" in m.value.replace("\\", "") for m in at.markdown)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["title"]["text"] == "A against B, per module (aligned)"
    modules = next(d.value for d in at.dataframe if "part" in d.value.columns and "op" not in d.value.columns)
    # every GPU event of A's step is counted under one module: the medians' sum is near the mean step
    assert modules["time_ns_a"].sum() == pytest.approx(_gpu_ns_per_step(H100 / "decode_eager.json.gz"), rel=0.02)
    assert modules["time_ns_b"].sum() == pytest.approx(_gpu_ns_per_step(H100 / "decode_compiled.json.gz"), rel=0.02)
    assert {"compiled", "same"} <= set(modules["change"])


def test_the_diff_notebook_runs_and_its_conclusions_hold() -> None:
    """notebooks/diff_two_runs.ipynb: fresh outputs equal the committed ones; its conclusion's step times are the
    raw traces' GPU time per step (within the median step's spread), every graph-replayed module graphed."""
    pytest.importorskip("nbclient")
    from tests.test_notebooks import execute

    markdown, _ = execute("diff_two_runs")
    text = markdown[-1]
    numbers = re.search(r"GPU time \(([\d.,]+) µs → ([\d.,]+) µs per step\)", text)
    assert numbers is not None and "torch.compile matched 100.0%" in text
    eager, compiled = (float(v.replace(",", "")) * 1e3 for v in numbers.groups())
    assert eager == pytest.approx(_gpu_ns_per_step(H100 / "decode_eager.json.gz"), rel=0.02)
    assert compiled == pytest.approx(_gpu_ns_per_step(H100 / "decode_compiled.json.gz"), rel=0.02)
    assert "every module graphed, 1 launch per module per step" in text

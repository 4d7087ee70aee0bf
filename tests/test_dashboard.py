"""The Streamlit app run headless by AppTest on the committed traces: every page renders, and its
charts and tables hold the values of a known kernel."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.conftest import ROOT, SEED_BUNDLE

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = str(ROOT / "dashboards" / "app.py")


def run_page(page: str, **params: str | list[str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = page
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _values(array: object) -> list:
    """Plotly's JSON writes numeric arrays as {"dtype", "bdata": base64}; decode those."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array or [])


def figure(at: AppTest, index: int = 0) -> dict:
    """The chart's traces (name, x, y) and title, from the JSON Streamlit sends the browser."""
    spec = json.loads(at.get("plotly_chart")[index].proto.spec)
    traces = [{"name": t.get("name"), "x": _values(t.get("x")), "y": _values(t.get("y"))} for t in spec["data"]]
    return {"data": traces, "title": spec["layout"]["title"]["text"]}


def seed_only(**extra: str | list[str]) -> dict:
    return {"bundle": [SEED_BUNDLE.name], **extra}


def test_roofline_draws_the_known_kernel_where_the_model_puts_it() -> None:
    at = run_page("Roofline", **seed_only(variant=["compiled"], shape=["1024x8192"]))
    data = figure(at)["data"]
    compiled = next(t for t in data if t.get("name") == "compiled")
    assert list(compiled["x"]) == [pytest.approx(123_731_968 / 35_713_536)]
    assert list(compiled["y"]) == [pytest.approx(123_731_968 / 15_008e-9)]
    assert data[0]["name"] == "DRAM 3.35 TB/s"  # the H100 SXM datasheet roof by default
    table = at.dataframe[0].value
    assert len(table) == 1 and table["pct_of_roof"].iloc[0] == pytest.approx(71.03, abs=0.01)


def test_roofline_against_the_measured_capture_gpu() -> None:
    at = run_page("Roofline", roof="NVIDIA H200 (measured)", **seed_only())
    fig = figure(at)
    assert fig["title"] == "Roofline against NVIDIA H200 (measured)"
    assert fig["data"][0]["name"] == "DRAM 4.25 TB/s"
    stars = next(t for t in fig["data"] if t.get("name") == "unfused chain (whole)")
    assert len(stars["x"]) == 4  # the eager chain at each of the seed's four shapes


def test_occupancy_page_sets_computed_beside_measured() -> None:
    at = run_page("Occupancy", **seed_only(variant=["compiled"]))
    table = at.dataframe[0].value
    assert len(table) == 4
    assert (table["computed_occupancy_pct"] == table["theoretical_occupancy_pct"]).all()
    assert table["achieved_occupancy_pct"].between(5, 100).all()
    bars = figure(at, 0)["data"]
    assert [t["name"] for t in bars] == ["theoretical (ncu)", "theoretical (computed)", "achieved (ncu)"]
    curves = figure(at, 1)["data"]
    assert curves[2]["name"] == "this kernel" and list(curves[2]["x"]) == [27]  # 27 registers (ptxas via ncu)


def test_fusion_page_shows_bytes_and_launches_per_call() -> None:
    at = run_page("Fusion", **seed_only())
    table = at.dataframe[0].value.set_index(["variant", "shape"])
    assert table.loc[("eager", "1024x4096"), "dram_bytes"] == 192_691_712
    assert table.loc[("compiled", "1024x4096"), "dram_bytes"] == 16_812_288
    assert table.loc[("eager", "1024x4096"), "kernels_per_call"] == 13
    assert table.loc[("eager", "1024x4096"), "nominal_bytes"] == 2 * (3 * 1024 * 4096 + 4096)


def test_launches_page_times_one_call() -> None:
    at = run_page("Launches", **seed_only())
    gaps = at.dataframe[0].value.set_index("variant")
    assert gaps.loc["eager", "kernels"] == 13 and gaps.loc["compiled", "kernels"] == 1
    assert gaps.loc["eager", "gap_ns"] > 0  # 13 launches leave the GPU idle between kernels
    names = [t["name"] for t in figure(at)["data"]]
    assert "eager kernels" in names and "eager launch calls" in names


def test_every_chart_has_a_csv_download() -> None:
    for page in ("Roofline", "Occupancy", "Fusion", "Launches"):
        at = run_page(page, **seed_only())
        assert len(at.get("download_button")) >= 1, page

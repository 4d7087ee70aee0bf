"""End to end: ``fuseprof dashboard`` on the committed traces, each page loaded in headless
Chromium; the Plotly chart must render and no Streamlit exception may show. Screenshots are
saved to tests/artifacts/. Needs Debian's chromium and the playwright package (.ci/run installs
both); elsewhere it skips, but under CI a missing browser is a failure, not a skip."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, dashboard, require_browser
from tests.conftest import ROOT, TRACES

pytestmark = pytest.mark.browser
ARTIFACTS = ROOT / "tests" / "artifacts"


@pytest.fixture(scope="module")
def browser_page():
    sync_playwright, executable = require_browser()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        yield page
        browser.close()


@pytest.fixture(scope="module")
def url():
    with dashboard(TRACES) as address:
        yield address


@pytest.mark.parametrize("name", ["Roofline", "Occupancy", "Fusion", "Launches", "Model", "Layer"])
def test_page_renders_its_plotly_chart(browser_page, url: str, name: str) -> None:
    browser_page.goto(f"{url}/?page={name}")
    browser_page.wait_for_selector(PLOT_SELECTOR, timeout=60_000)
    browser_page.wait_for_timeout(500)
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / f"dashboard-{name.lower()}.png"))
    assert browser_page.locator('[data-testid="stException"]').count() == 0
    assert browser_page.locator(".js-plotly-plot").count() >= 1
    assert browser_page.get_by_text(f"fuseprof — {name}").count() == 1
    if name == "Roofline":  # markers drawn, not just axes
        assert browser_page.locator(".js-plotly-plot .scatterlayer .point").count() > 50
    if name == "Model":  # timeline, categories, per-op roofline and the diff, on the 1,742-event trace
        browser_page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4", timeout=60_000)
        assert browser_page.get_by_text("Fusion opportunities").count() >= 1


def test_six_consecutive_page_and_roof_changes_each_take_effect(browser_page, url: str) -> None:
    page = browser_page
    page.goto(f"{url}/?page=Roofline")
    page.wait_for_selector(PLOT_SELECTOR, timeout=60_000)
    sidebar = page.locator('[data-testid="stSidebar"]')
    for name in ["Occupancy", "Fusion", "Launches", "Model", "Roofline", "Occupancy"]:
        sidebar.get_by_text(name, exact=True).click()
        page.get_by_role("heading", name=f"fuseprof — {name}").wait_for(timeout=30_000)
        assert f"page={name}" in page.url
    sidebar.get_by_text("Roofline", exact=True).click()
    page.get_by_role("heading", name="fuseprof — Roofline").wait_for(timeout=30_000)
    for roof in ["H100 SXM (datasheet)", "H200 (datasheet)", "A100 80GB (datasheet)", "B200 (datasheet)",
                 "H100 PCIe (datasheet)", "NVIDIA H200 (measured)"]:
        sidebar.locator('[data-testid="stSelectbox"]').filter(has_text="Roof").click()
        page.get_by_role("option", name=roof, exact=True).click()
        page.wait_for_function(f"[...document.querySelectorAll('.gtitle')].some(t => t.textContent.endsWith({roof!r}))",
                               timeout=30_000)

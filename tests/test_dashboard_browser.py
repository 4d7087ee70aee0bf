"""End to end: ``fuseprof dashboard`` on the committed traces, each page loaded in headless
Chromium; the Plotly chart must render and no Streamlit exception may show. Screenshots are
saved to tests/artifacts/. Needs Debian's chromium and the playwright package (.ci/run installs
both); elsewhere it skips, but under CI a missing browser is a failure, not a skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import CHROMIUM_ARGS, PLOT_SELECTOR, dashboard, require_browser
from tests.conftest import ROOT, TRACES, held_safely

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
    if name == "Model":  # the kernel timeline, then the fusion section and the diff, on the 1,742-event trace
        browser_page.goto(f"{url}/?page=Model&section=fusion")
        browser_page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=60_000)
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
        page.keyboard.type(roof)  # the list is virtual: with 25 datasheet roofs the measured one is not drawn until typed
        page.get_by_role("option", name=roof, exact=True).click()
        page.wait_for_function(f"[...document.querySelectorAll('.gtitle')].some(t => t.textContent.endsWith({roof!r}))",
                               timeout=30_000)


def test_names_written_as_markup_are_shown_as_text_and_fetch_nothing(tmp_path: Path, browser_page) -> None:
    """Case, variant, kernel, launch call, GPU and trace kernel names holding a Markdown image, an HTML link
    and a CSS url(), each aimed at a local beacon: every page shows them as text, hovering every chart's points
    draws no link or style, and the beacon receives no request."""
    import gzip
    import json
    import shutil

    import pandas as pd

    from fuseprof.cli import main
    from tests.browser import beacon, hostile_name, hover_plot_points
    from tests.conftest import FIXTURES, SEED_BUNDLE

    folder = tmp_path / "traces"
    bundle = shutil.copytree(SEED_BUNDLE, folder / SEED_BUNDLE.name)
    page = browser_page  # the module's one browser: Playwright's sync API runs one loop per process
    with beacon() as (port, hits):
        for table in ("kernels.parquet", "timings.parquet"):
            frame = pd.read_parquet(bundle / table)
            for column in {"case", "variant", "kernel", "kernel_short", "launch_api", "device"} & set(frame):
                names = {v: hostile_name(port, f"{column}{i}") for i, v in enumerate(sorted(frame[column].dropna().unique()))}
                frame[column] = frame[column].map(names)
            frame.to_parquet(bundle / table)
        manifest = json.loads((bundle / "manifest.json").read_text())
        (bundle / "manifest.json").write_text(json.dumps({**manifest, "case": hostile_name(port, "case0")}))
        trace = json.loads(gzip.decompress((FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz").read_bytes()))
        trace["deviceProperties"][0]["name"] = hostile_name(port, "gpu")
        next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")["name"] = hostile_name(port, "kernel")
        (tmp_path / "evil.json").write_text(json.dumps(trace))
        assert main(["ingest", str(tmp_path / "evil.json"), "--out", str(folder)]) == 0
        markup = {}
        with dashboard(folder) as url:
            for name in ("Roofline", "Occupancy", "Fusion", "Launches", "Model", "Layer"):
                page.goto(f"{url}/?page={name}")
                page.wait_for_selector(PLOT_SELECTOR, timeout=90_000)
                page.wait_for_timeout(1500)
                assert page.locator('[data-testid="stException"]').count() == 0, name
                markup[name] = hover_plot_points(page)
                if name == "Model":
                    text = page.inner_text("body")
        page.wait_for_timeout(500)
    held_safely(hits or {k: v for k, v in markup.items() if v}, "the dashboard fetched URLs or rendered markup")
    assert f"![x](http://127.0.0.1:{port}/md-gpu.png)" in text  # the GPU name, shown as the text it is


def test_the_dashboard_works_from_the_folder_that_holds_a_checkout(tmp_path: Path, browser_page) -> None:
    """Started where a folder named fuseprof (a checkout) sits in the working directory: that folder must not
    shadow the package (every page failed with ImportError)."""
    from tests.conftest import FUSEPROF, TRACES

    (tmp_path / "fuseprof" / "docs").mkdir(parents=True)
    with dashboard(TRACES, command=[FUSEPROF], cwd=tmp_path) as url:
        browser_page.goto(f"{url}/?page=Roofline")
        browser_page.wait_for_selector(PLOT_SELECTOR, timeout=90_000)
        assert browser_page.locator('[data-testid="stException"]').count() == 0


def _bundle_of(kernels: int, folder: Path) -> Path:
    """The seed capture bundle cut to ``kernels`` ncu kernels (its first), or grown to that many by repeating
    them, every kernel named apart with a long templated name as CUTLASS writes them; one variant's timings
    when one kernel is left."""
    import shutil

    import pandas as pd

    from tests.conftest import SEED_BUNDLE

    bundle = shutil.copytree(SEED_BUNDLE, folder / f"{SEED_BUNDLE.name}-{kernels}k")
    frame = pd.read_parquet(bundle / "kernels.parquet")
    ncu = frame[frame["source"] == "ncu"]
    rows = pd.concat([ncu] * (kernels // len(ncu) + 1), ignore_index=True).head(kernels)
    if kernels > 1:
        long = [f"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, "
                f"cutlass::gemm::collective::CollectiveMma<cute::tuple<cute::C<{64 + i}>>, float>, void>>"
                for i in range(kernels)]
        rows = rows.assign(kernel=long, kernel_short=[f"GemmUniversal_{i}_cutlass_device_kernel_sm90" for i in range(kernels)])
    rows.to_parquet(bundle / "kernels.parquet")
    if kernels == 1:
        timings = pd.read_parquet(bundle / "timings.parquet")
        timings[timings["variant"] == rows["variant"].iloc[0]].to_parquet(bundle / "timings.parquet")
    return bundle


# what "readable" means, measured on every chart of every page: tall enough to read, its plotting areas (side by
# side: their widths add up) not squeezed out by labels, the page no wider than the window (Occupancy's was 64 px)
_READABLE = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => {
    const box = p.getBoundingClientRect(), rows = {};
    const areas = [...p.querySelectorAll('.nsewdrag')].map(a => a.getBoundingClientRect());
    areas.forEach(a => { rows[Math.round(a.top)] = (rows[Math.round(a.top)] || 0) + a.width; });
    const ticks = [...p.querySelectorAll('.xtick text, .ytick text')].map(t => t.getBoundingClientRect())
        .filter(t => t.width > 0).sort((a, b) => a.left - b.left || a.top - b.top);
    const overlapping = ticks.filter((t, i) => i > 0 && ticks.slice(Math.max(0, i - 3), i).some(u =>
        t.left < u.right - 1 && u.left < t.right - 1 && t.top < u.bottom - 1 && u.top < t.bottom - 1)).length;
    return {height: box.height, width: box.width, overlapping_ticks: overlapping,
            area_width: areas.length ? Math.max(...Object.values(rows)) : box.width,
            area_height: areas.length ? Math.min(...areas.map(a => a.height)) : box.height};
})"""


@pytest.mark.parametrize("kernels", [1, 300])
def test_every_page_is_readable_at_one_and_at_300_kernels_with_long_names(kernels: int, tmp_path: Path,
                                                                          browser_page) -> None:
    """A capture bundle of one kernel, and of 300 with 150-character names: on each page every chart is at
    least 250 px tall, its plotting area at least 35% of its width and 120 px tall, no two tick labels
    overlap, and the page fits the window; screenshots in tests/artifacts/ (dashboard-1k-*.png, dashboard-300k-*.png)."""
    folder = tmp_path / "bundles"
    folder.mkdir()
    _bundle_of(kernels, folder)
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    unreadable = {}
    with dashboard(folder) as url:
        for name in _pages(page, url):
            page.goto(f"{url}/?page={name}")
            page.get_by_role("heading", name=f"fuseprof — {name}").wait_for(timeout=90_000)
            page.wait_for_timeout(2500)
            assert page.locator('[data-testid="stException"]').count() == 0, name
            page.screenshot(path=str(ARTIFACTS / f"dashboard-{kernels}k-{name.lower()}.png"), full_page=True)
            charts = page.evaluate(_READABLE)
            bad = [c for c in charts if c["height"] < 250 or c["area_width"] < 0.35 * c["width"] or c["area_height"] < 120
                   or c["overlapping_ticks"]]
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            if bad or overflow > 5:
                unreadable[name] = {"charts": bad, "overflow_px": overflow}
    assert not unreadable, unreadable


def _pages(page, url: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The page names the sidebar offers."""
    page.goto(url)
    page.get_by_role("heading", name="fuseprof — ", exact=False).first.wait_for(timeout=90_000)
    page.wait_for_selector('[data-testid="stSidebar"] [role="radiogroup"] label', timeout=30_000)
    return [t.strip() for t in page.locator('[data-testid="stSidebar"] [role="radiogroup"] label').all_inner_texts()]


EXAMPLE = ROOT / "traces" / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
BARS = ".js-plotly-plot .barlayer .point"


def _raw_gpu_events(trace: Path) -> tuple[list[dict], list[dict]]:
    """The trace file's GPU events (kernels, memcpys, memsets) and its GPU-side annotation ranges, read with json."""
    import gzip
    import json

    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ranges = sorted((e for e in events if e.get("cat") == "gpu_user_annotation"), key=lambda e: e["ts"])
    return gpu, ranges


def test_a_trace_file_opens_itself_on_a_real_timeline_with_its_choices_in_the_url(browser_page) -> None:
    """`fuseprof dashboard TRACE.json.gz` (no ingest): the Model page alone (no page that could only say "nothing
    here"); its GPU timeline draws one bar per GPU event of the first step — as many as the raw trace's kernels,
    memcpys and memsets inside its first GPU annotation — each hover naming its kernel; a URL's window, section
    and rows are the view it opens, and a choice made on the page goes into the URL."""
    gpu, ranges = _raw_gpu_events(EXAMPLE)
    first, fourth = ranges[0], ranges[4]  # prefill, decode_step #3
    inside = [e for e in gpu if first["ts"] <= e["ts"] <= first["ts"] + first["dur"]]
    page = browser_page
    with dashboard(EXAMPLE) as url:
        assert _pages(page, url) == ["Model"]
        page.wait_for_selector(BARS, timeout=90_000)
        page.wait_for_timeout(1000)
        assert page.locator(BARS).count() == len(inside) == 188
        assert page.get_by_text(f"GPU timeline: {first['name']}").count() == 1
        assert page.locator('[data-testid="stAlert"]').count() == 0 and page.locator('[data-testid="stException"]').count() == 0
        widest = max(range(page.locator(BARS).count()), key=lambda i: page.locator(BARS).nth(i).bounding_box()["width"])
        page.locator(BARS).nth(widest).hover(force=True)
        page.wait_for_selector(".hoverlayer .hovertext", timeout=10_000)
        label = page.locator(".hoverlayer .hovertext").first.text_content() or ""
        assert any(e["name"][:40] in label for e in inside), label
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-trace-timeline.png"))
        # a URL reproduces a view: the fourth step's window, the fusion section, five rows a table
        page.goto(f"{url}/?window=decode_step%20%233&section=fusion&top=5")
        page.get_by_text("GPU timeline: decode_step #3").wait_for(timeout=60_000)
        page.get_by_role("heading", name="Fusion opportunities").first.wait_for(timeout=60_000)
        expected = [e for e in gpu if fourth["ts"] <= e["ts"] <= fourth["ts"] + fourth["dur"]]
        page.wait_for_timeout(1000)
        assert page.locator(".js-plotly-plot").first.locator(".barlayer .point").count() == len(expected)
        assert "top=5" in page.url and "section=fusion" in page.url
        # a choice made on the page goes into the URL
        page.locator('[data-testid="stSelectbox"]').filter(has_text="Window (step)").click()
        page.get_by_role("option", name="decode_step #6", exact=True).click()
        page.get_by_text("GPU timeline: decode_step #6").wait_for(timeout=60_000)
        page.wait_for_function("location.search.includes('window=decode_step+%236') || "
                               "location.search.includes('window=decode_step%20%236')", timeout=30_000)


def test_a_folder_of_trace_files_and_an_ingested_trace_show_only_pages_with_something_to_show(tmp_path: Path,
                                                                                              browser_page) -> None:
    """A folder holding two trace files offers the Model and Diff pages, each trace chosen by name (in the URL); an
    ingested trace's bundle offers Launches and Model — where Roofline, Occupancy, Fusion and Layer were info boxes
    — and no page it offers is only an alert."""
    import shutil

    from fuseprof.cli import main
    from tests.conftest import FIXTURES

    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(EXAMPLE, traces / "llama-eager.json.gz")
    shutil.copy(FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz", traces / "bert.json.gz")
    page = browser_page
    with dashboard(traces) as url:
        assert _pages(page, url) == ["Model", "Diff"]  # two traces: the Diff page compares them (2e10872)
        page.goto(f"{url}/?trace=bert.json.gz")
        page.wait_for_selector(BARS, timeout=90_000)
        assert page.get_by_text("bert.json.gz ·", exact=False).count() >= 1
        assert page.locator('[data-testid="stException"]').count() == 0
    ingested = tmp_path / "ingested"
    assert main(["ingest", str(EXAMPLE), "--out", str(ingested)]) == 0
    with dashboard(ingested) as url:
        pages = _pages(page, url)
        assert pages == ["Launches", "Model"]
        for name in pages:
            page.goto(f"{url}/?page={name}")
            page.wait_for_selector(PLOT_SELECTOR, timeout=90_000)
            page.wait_for_timeout(1000)
            assert page.locator('[data-testid="stAlert"]').count() == 0, name
            assert page.locator('[data-testid="stException"]').count() == 0, name

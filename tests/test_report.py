"""``fuseprof report`` opened in headless Chromium as a reader would: no console error, every chart
drawn, no request leaves the file, and at most 5 MB for the 1,742-event eager Llama trace. Also
``scripts/report_screenshots.py`` takes the docs' screenshots the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuseprof.cli import main
from tests.browser import CHROMIUM_ARGS, beacon, hostile_name, hover_plot_points, require_browser
from tests.conftest import ROOT, TRACES, held_safely, shared_traces

pytestmark = pytest.mark.browser
ARTIFACTS = ROOT / "tests" / "artifacts"


def _open(report: Path, hover: bool = False) -> dict[str, object]:
    sync_playwright, executable = require_browser()
    seen: dict[str, list[str]] = {"errors": [], "requests": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: seen["errors"].append(str(e)))
        page.on("request", lambda r: seen["requests"].append(r.url))
        page.goto(report.resolve().as_uri())
        page.wait_for_selector("body[data-drawn='1']", timeout=90_000)
        figures = page.locator("[data-figure]").count()
        drawn = page.locator("[data-figure] .main-svg").count()
        text = page.inner_text("body")
        markup = hover_plot_points(page) if hover else 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{report.stem}.png"))
        browser.close()
    return {**seen, "figures": figures, "drawn": drawn, "text": text, "markup": markup}


@pytest.mark.parametrize("trace", ["llama", pytest.param("mi300", marks=pytest.mark.shared)])
def test_the_report_opens_offline_with_every_chart_drawn(trace: str, tmp_path: Path, capsys) -> None:
    source = TRACES / "llama4l-eager-h200" if trace == "llama" else shared_traces() / "mi300_bert_small_uncased.json.gz"
    report = tmp_path / f"report-{trace}.html"
    assert main(["report", str(source), "-o", str(report)]) == 0
    assert report.stat().st_size <= 5e6
    seen = _open(report)
    assert not seen["errors"], seen["errors"]
    outside = [u for u in seen["requests"] if not str(u).startswith(("file:", "data:", "blob:"))]
    assert not outside, outside
    assert seen["figures"] >= 3 and seen["drawn"] >= seen["figures"]  # each Plotly chart draws one or more svgs
    text = str(seen["text"])
    for heading in ("Worth doing", "Integrity", "GPU timeline", "Time by category", "Top ops", "Fusion audit"):
        assert heading in text
    if trace == "llama":
        assert "host-bound" in text and "Per-op roofline" in text
    else:
        assert "MI300X (datasheet)" in text


@pytest.mark.shared
def test_names_written_as_markup_are_text_in_the_report(tmp_path: Path, capsys) -> None:
    """A trace whose GPU, kernel and op names hold an HTML link, a CSS url() and a Markdown image aimed at a
    local beacon: the report draws them as text, hovering every chart's points draws no link or style, and
    nothing is fetched."""
    import gzip
    import json

    with beacon() as (port, hits):
        trace = json.loads(gzip.decompress((shared_traces() / "h100_bert_small_uncased.json.gz").read_bytes()))
        trace["deviceProperties"][0]["name"] = hostile_name(port, "gpu")
        kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
        for i, event in enumerate(kernels[:5]):
            event["name"] = hostile_name(port, f"kernel{i}")
        ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
        ops[0]["name"] = hostile_name(port, "op")
        (tmp_path / "evil.json").write_text(json.dumps(trace))
        report = tmp_path / "evil.html"
        assert main(["report", str(tmp_path / "evil.json"), "-o", str(report)]) == 0
        seen = _open(report, hover=True)
    held_safely(hits or seen["markup"], "the report fetched URLs or rendered markup from trace names")
    assert f"![x](http://127.0.0.1:{port}/md-gpu.png)" in str(seen["text"])


def test_the_report_never_overwrites_and_leaves_no_partial_file(tmp_path: Path, capsys) -> None:
    report = tmp_path / "r.html"
    report.write_text("mine")
    assert main(["report", str(TRACES / "llama4l-eager-h200"), "-o", str(report)]) == 2
    assert report.read_text() == "mine" and "--force" in capsys.readouterr().err
    assert main(["report", "no/such.json", "-o", str(tmp_path / "x.html")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_a_report_of_several_ranks_holds_the_communication_tables(tmp_path: Path, capsys) -> None:
    from tests.conftest import FIXTURES

    ranks = sorted((FIXTURES / "tp2").glob("tp_mlp-rank*.json.gz"))
    report = tmp_path / "ranks.html"
    assert main(["report", *map(str, ranks), "-o", str(report)]) == 0
    text = report.read_text()
    assert "Across ranks" in text and "Communication per rank" in text and "Collectives" in text
    assert text.count("<h2>") == 3  # one section per rank, then the across-ranks tables

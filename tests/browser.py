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


def wait_healthy(proc: subprocess.Popen, port: int, timeout_s: float = 90) -> None:
    """Until Streamlit's health endpoint on ``port`` answers; an error if ``proc`` exits first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://localhost:{port}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the dashboard did not come up on port {port} (exit {proc.poll()})")
        time.sleep(0.3)


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

"""``fuseprof dashboard`` stops with its server: after SIGTERM or SIGINT no process serves the port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.browser import free_port, wait_healthy
from tests.conftest import TRACES


def _serving(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_server(sig: signal.Signals) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fuseprof.cli", "dashboard", str(TRACES), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(proc, port)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        time.sleep(0.5)
        assert not _serving(port), f"a server still answers on {port} after {sig.name}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

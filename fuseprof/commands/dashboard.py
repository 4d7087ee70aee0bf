"""``fuseprof dashboard``: this process becomes the Streamlit server over a folder of bundles."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuseprof.commands.base import Command, folder_argument
from fuseprof.errors import FuseprofError


def dashboard_app() -> Path:
    """app.py of the installed dashboard package (``dashboards/`` in a checkout)."""
    import importlib.util

    spec = importlib.util.find_spec("fuseprof_dashboards")
    if spec is None or spec.origin is None:
        raise FuseprofError("the dashboard package (fuseprof_dashboards) is not installed; reinstall fuseprof")
    return Path(spec.origin).with_name("app.py")


def _arguments(p: argparse.ArgumentParser) -> None:
    folder_argument(p, "folder of bundles")
    p.add_argument("--address", default="localhost", help="address to listen on")
    p.add_argument("--port", type=int, default=8501, help="port to listen on")


def _dashboard(args: argparse.Namespace) -> int:
    import os

    if not args.dir.is_dir():
        raise FuseprofError(f"{args.dir}: no such folder; give a folder of bundles")
    from fuseprof.bundle.files import find_bundles  # no pandas: this process is about to become the server

    if not find_bundles(args.dir):
        raise FuseprofError(f"{args.dir}: holds no fuseprof bundle to show")
    argv = [sys.executable, "-m", "streamlit", "run", str(dashboard_app()), "--server.address", args.address,
            "--server.port", str(args.port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--", "--traces", str(args.dir.resolve())]
    print(f"fuseprof dashboard: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr, flush=True)
    # Become the server rather than wait on a child: SIGTERM and SIGINT then reach Streamlit itself,
    # and no server outlives the command (a child survived its parent's SIGTERM before).
    os.execv(sys.executable, argv)
    return 0  # not reached


COMMANDS = (
    Command("dashboard", "open the Streamlit dashboard over a folder of bundles", _dashboard, _arguments,
            "Roofline, occupancy, fusion and launch pages over the bundles in DIR (default: traces). Listens on "
            "localhost unless --address says otherwise."),
)

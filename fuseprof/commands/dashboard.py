"""``fuseprof dashboard``: this process becomes the Streamlit server over a trace, a bundle or a folder of them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuseprof.commands.base import Command, folder_argument
from fuseprof.errors import FuseprofError, MissingExtraError

MEMORY_MB_ENV = "FUSEPROF_DASHBOARD_MB"  # --memory-mb, read by dashboards/app.py
REGISTRY_ENV = "FUSEPROF_REGISTRY"  # --registry, read by the Model page (dashboards/model_page.py, serve.py)
DEFAULT_MEMORY_MB = 1024  # of estimated frame memory (fuseprof.bundle.loading.frame_bytes)
# Streamlit's settings for the dashboard's server (scripts/bench_dashboard_first_chart.py gives its floor the same).
# No full garbage collection after each script run (runner.postScriptGC): with a trace's analysis in memory it walked
# every object for 0.2-0.8 s holding the interpreter, just after the first chart was queued, so the server sent
# neither the chart nor Plotly's script meanwhile (Python's own generational collection still runs). No "magic"
# (runner.magicEnabled; app.py writes nothing by bare expressions): rewriting app.py's syntax tree took 0.07-0.27 s
# of each new tab's first run, as Streamlit drops its compiled script whenever the last session closes.
SERVER_FLAGS = ("--server.headless", "true", "--browser.gatherUsageStats", "false", "--runner.postScriptGC", "false",
                "--runner.magicEnabled", "false")


def checked_budget(budget_mb: float, given_as: str) -> float:
    """The memory budget, refused unless above 0 MB (NaN included): one rule for ``--memory-mb`` and for
    ``FUSEPROF_DASHBOARD_MB``, so that a bad value names itself rather than reading "no bundle fits"."""
    if not budget_mb > 0:
        raise FuseprofError(f"{given_as}: give the dashboard's memory budget in MB, a number above 0")
    return budget_mb


def dashboard_app() -> Path:
    """app.py of the installed dashboard package (``dashboards/`` in a checkout), once Streamlit is there to run it
    (the ``dashboard`` extra)."""
    import importlib.util

    if importlib.util.find_spec("streamlit") is None:
        raise MissingExtraError("streamlit", "fuseprof dashboard")
    spec = importlib.util.find_spec("fuseprof_dashboards")
    if spec is None or spec.origin is None:
        raise FuseprofError("the dashboard package (fuseprof_dashboards) is not installed; reinstall fuseprof")
    return Path(spec.origin).with_name("app.py")


def _arguments(p: argparse.ArgumentParser) -> None:
    folder_argument(p, "a torch.profiler trace (.json, .json.gz), a bundle, or a folder of traces and bundles")
    p.add_argument("--address", default="localhost", help="address to listen on")
    p.add_argument("--port", type=int, default=8501, help="port to listen on")
    p.add_argument("--memory-mb", type=float, metavar="MB",
                   help="memory the bundles' kernel tables may take, estimated from their Parquet footers before "
                        f"reading (default: {DEFAULT_MEMORY_MB}); a bundle past it is left out with a note")
    p.add_argument("--registry", type=Path, metavar="FILE",
                   help="a TOML file extending fuseprof's op registry, for the Model page's analyses (as `fuseprof "
                        "analyze --registry`; format: docs/registry.md)")
    p.add_argument("--ceilings", type=Path, metavar="BUNDLE",
                   help="measured rates for the Model page's traces: a `fuseprof ceilings` and/or `fuseprof bench` "
                        "bundle, or a folder of them (default: the datasheet of each trace's GPU)")


def _dashboard(args: argparse.Namespace) -> int:
    import os

    if not 0 < args.port < 65536:
        raise FuseprofError(f"--port {args.port}: give a port from 1 to 65535")
    if args.memory_mb is not None:
        checked_budget(args.memory_mb, f"--memory-mb {args.memory_mb:g}")
    from fuseprof_dashboards.inputs import find_inputs  # no pandas: this process is about to become the server

    find_inputs(args.dir)  # a path with nothing to show is refused here, in one line, not on an empty page
    from fuseprof.bundle.files import find_bundles

    if args.ceilings is not None:
        if not args.ceilings.is_dir() or not find_bundles(args.ceilings):
            raise FuseprofError(f"--ceilings {args.ceilings}: no fuseprof bundle there (a `fuseprof ceilings` or "
                                "`fuseprof bench` bundle, or a folder holding them)")
        os.environ["FUSEPROF_CEILINGS"] = str(args.ceilings.resolve())  # read by the Model page
    if args.memory_mb is not None:
        os.environ[MEMORY_MB_ENV] = str(args.memory_mb)
    if args.registry is not None:
        from fuseprof.model.registry_data import DEFAULT
        from fuseprof.model.registry_schema import load_registry

        load_registry(args.registry, DEFAULT)  # a wrong file is refused here, in its own lines, not on a page
        os.environ[REGISTRY_ENV] = str(args.registry.resolve())
    argv = [sys.executable, "-m", "fuseprof_dashboards.serve", "run", str(dashboard_app()), "--server.address", args.address,
            "--server.port", str(args.port), *SERVER_FLAGS, "--", "--traces", str(args.dir.resolve())]
    print(f"fuseprof dashboard: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr, flush=True)
    # Become the server rather than wait on a child: SIGTERM and SIGINT then reach Streamlit itself,
    # and no server outlives the command (a child survived its parent's SIGTERM before).
    os.execv(sys.executable, argv)
    return 0  # not reached


COMMANDS = (
    Command("dashboard", "open the Streamlit dashboard over traces and bundles", _dashboard, _arguments,
            "The pages that PATH has something for (default: traces): the Model page's analysis of each "
            "torch.profiler trace (a .json/.json.gz file, a bundle keeping one, or those in a folder; through the "
            "trace store, as `fuseprof analyze`), and the roofline, occupancy, fusion, launch and layer pages of "
            "capture bundles. Listens on localhost unless --address says otherwise."),
)

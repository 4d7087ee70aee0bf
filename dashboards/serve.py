"""The dashboard's server process (``fuseprof dashboard`` becomes it): Streamlit's own command line, with the
work of the first page begun on a thread while the server starts and the browser loads Streamlit's page
(two seconds and more): the imports, and, where the input is traces only (the Model page comes first), the
first trace's analysis from the trace store and its first chart (the first window's timeline: the first use of
pandas' and Plotly's code paths costs more than the figure). The first script run then finds them done (``take``)."""

from __future__ import annotations

import contextlib
import inspect
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fuseprof.first_view import FIRST_TOP  # the Model page's rows per top table unless the URL says otherwise

_lock = threading.Lock()
_ready: dict[tuple[Any, ...], Any] = {}  # what the start-up work made, by what take() is asked for


def _listening(port: int, timeout_s: float = 30) -> None:
    """Until the server accepts connections on ``port`` (or ``timeout_s`` passes): the thread's imports and reads
    hold the interpreter, and started at once they slowed the server's own start by as much as they took."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)


def _warm(path: Path, port: int) -> None:
    with _lock:  # held from the start: a page that asks first waits for the work rather than doing it twice
        _listening(port)
        from fuseprof_dashboards import first_view

        if first_view.kept(path):  # the first run draws the chart from it, then imports and analyses itself:
            return  # warming here would only share the interpreter with that first chart's run
        from fuseprof_dashboards import model_page  # what every page imports (pandas, Plotly, the analysis) and more
        from fuseprof_dashboards.inputs import find_inputs

        from fuseprof.analysis import analyze
        from fuseprof.analysis.facts.timeline import timeline_windows
        from fuseprof.commands.dashboard import REGISTRY_ENV
        from fuseprof.errors import FuseprofError

        # Streamlit's first element of the process looks at the call stack (env_util.is_repl: inspect.stack()), which
        # maps every loaded module to its file once: 0.1-0.35 s with pandas, Plotly and the analysis loaded, in the
        # first run before anything is drawn. Done here, that run maps only the modules loaded since.
        inspect.stack()
        try:
            inputs = find_inputs(path)
            if inputs.traces and not inputs.bundles:
                trace, ceilings = str(next(iter(inputs.traces.values()))), os.environ.get("FUSEPROF_CEILINGS") or None
                registry = os.environ.get(REGISTRY_ENV) or None
                result = analyze(Path(trace), top=FIRST_TOP, ceilings=Path(ceilings) if ceilings else None,
                                 registry=Path(registry) if registry else None)[0]
                _ready[trace, ceilings, registry, FIRST_TOP] = result
                window = timeline_windows(result.events)[0]  # the page's default window: its first chart
                _ready[trace, ceilings, registry, FIRST_TOP, window] = model_page.timeline_figure(result.events, window)
        except FuseprofError:
            pass  # the page says it, in its own words


def take(*key: Any) -> Any:
    """What was begun at start for ``key`` (waiting for it if it is still running), once; else None: a trace's
    analysis under (trace, ceilings, registry, top), the first window's timeline figure under the same and the
    window."""
    with _lock:
        return _ready.pop(key, None)


def main() -> None:
    # Streamlit first: its import draws a Plotly figure, whose check for pandas (in sys.modules) would meet the
    # thread's pandas half imported
    from streamlit.web.cli import main as streamlit

    if "--traces" in sys.argv:
        port = int(sys.argv[sys.argv.index("--server.port") + 1]) if "--server.port" in sys.argv else 8501
        threading.Thread(target=_warm, args=(Path(sys.argv[sys.argv.index("--traces") + 1]), port), daemon=True).start()

    sys.argv = ["streamlit", *sys.argv[1:]]
    streamlit()


if __name__ == "__main__":  # ``python -m``: run the package's module, the one the app's pages import and ``take`` from
    from fuseprof_dashboards.serve import main as serve

    serve()

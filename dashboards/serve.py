"""The dashboard's server process (``fuseprof dashboard`` becomes it): Streamlit's own command line, with the
work of the first page begun on a thread while the server starts and the browser loads Streamlit's page
(two seconds and more): the imports, and, where the input is traces only (the Model page comes first), the
first trace's analysis from the trace store. The first script run then finds them done (``take``)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_ready: dict[tuple[str, str | None, str | None, int], Any] = {}
FIRST_TOP = 15  # the Model page's rows per top table unless the URL says otherwise (``fuseprof analyze``'s default)


def _warm(path: Path) -> None:
    with _lock:
        from fuseprof_dashboards.inputs import find_inputs

        import fuseprof.figures  # noqa: F401  (what every page imports: pandas, Plotly, the models)
        from fuseprof.analysis import analyze
        from fuseprof.commands.dashboard import REGISTRY_ENV
        from fuseprof.errors import FuseprofError

        try:
            inputs = find_inputs(path)
            if inputs.traces and not inputs.bundles:
                trace, ceilings = str(next(iter(inputs.traces.values()))), os.environ.get("FUSEPROF_CEILINGS") or None
                registry = os.environ.get(REGISTRY_ENV) or None
                _ready[trace, ceilings, registry, FIRST_TOP] = analyze(
                    Path(trace), top=FIRST_TOP, ceilings=Path(ceilings) if ceilings else None,
                    registry=Path(registry) if registry else None)[0]
        except FuseprofError:
            pass  # the page says it, in its own words


def take(trace: str, ceilings: str | None, registry: str | None, top: int) -> Any:
    """The analysis begun at start for these arguments (waiting for it if it is still running), once; else None."""
    with _lock:
        return _ready.pop((trace, ceilings, registry, top), None)


def main() -> None:
    # Streamlit first: its import draws a Plotly figure, whose check for pandas (in sys.modules) would meet the
    # thread's pandas half imported
    from streamlit.web.cli import main as streamlit

    if "--traces" in sys.argv:
        threading.Thread(target=_warm, args=(Path(sys.argv[sys.argv.index("--traces") + 1]),), daemon=True).start()

    sys.argv = ["streamlit", *sys.argv[1:]]
    streamlit()


if __name__ == "__main__":  # ``python -m``: run the package's module, the one the app's pages import and ``take`` from
    from fuseprof_dashboards.serve import main as serve

    serve()

"""Widgets drawn after the page's first chart, where they show unchanged (a sidebar, or a container made above the
chart): the browser loads each kind of element's code when the first one arrives, in arrival order, and Plotly's
(4.7 MB) is the longest to load and run. With the page's radio and the Model page's two selectboxes sent before
the chart, their code was fetched first, and the chart's request came 0.2-1 s after the floor's (Radio, Selectbox
and PlotlyChart requests on scripts/bench_dashboard_first_chart.py's example trace)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st


class Deferred:
    """One script run's widgets to draw later. ``later(widget)`` stands in for ``widget`` in a keyed choice whose
    state is set before it is called (``app._keyed_choice`` seeds ``st.session_state`` from the URL): it returns
    that state, the value the widget will show, and keeps the call for ``draw()``."""

    def __init__(self) -> None:
        self._calls: list[Callable[[], Any]] = []

    def __call__(self, widget: Callable[..., Any]) -> Callable[..., Any]:
        def stand_in(label: str, options: list[str], key: str) -> Any:
            self._calls.append(lambda: widget(label, options, key=key))
            return st.session_state[key]
        return stand_in

    def draw(self) -> None:
        """Every widget kept so far, in the order they were asked for."""
        calls, self._calls = self._calls, []
        for call in calls:
            call()

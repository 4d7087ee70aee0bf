"""The window's units (``fuseprof.analysis.facts.units.window_units``) against the events they are made from, worked out
row by row in plain Python: each op call's (or op-less kernel's) summed time, kernel count, first place by start,
its events' labels in the window's order, and its kernel and category from its longest kernel (ties: the earlier
event), on a real eager trace and on a graph replay with no capture (every kernel a unit of its own)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis.facts.units import window_units
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.model.registry_data import DEFAULT
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

TRACES_WITH_UNITS = [TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz",
                     FIXTURES / "h200-graphs" / "graph-replay.json.gz"]


@pytest.mark.parametrize("trace", TRACES_WITH_UNITS, ids=lambda p: p.parent.parent.name if p.parent.name == "raw"
                         else p.name)
def test_each_unit_sums_and_names_its_own_events(trace: Path) -> None:
    events = windowed_events(read_trace_tables(trace)).events
    units = window_units(events, None, DEFAULT).by_id
    rows = list(zip(events.index, events["op_id"], events["dur_ns"], events["start_ns"], events["name"],
                    events["kind"], events["category"]))
    by_start = sorted(range(len(rows)), key=lambda i: (rows[i][3], i))
    place = {i: k + 1 for k, i in enumerate(by_start)}
    mine: dict[int, list[int]] = {}
    for i, (_, op_id, *_rest) in enumerate(rows):
        mine.setdefault(10**15 + i if pd.isna(op_id) else int(op_id), []).append(i)
    assert sorted(units) == sorted(mine) and len(units) > 10
    kernel_only = 0
    for key, positions in mine.items():
        unit = units[key]
        kernels = [i for i in positions if rows[i][5] == "kernel"] or positions
        longest = max(kernels, key=lambda i: (rows[i][2], -i))  # the longest, the earlier of equals
        assert unit.time_ns == sum(int(rows[i][2]) for i in positions)
        assert unit.kernels == len(positions)
        assert unit.order == min(place[i] for i in positions)
        assert unit.labels == tuple(rows[i][0] for i in positions)
        assert (unit.kernel, unit.category) == (str(rows[longest][4]), str(rows[longest][6]))
        kernel_only += key >= 10**15
    assert kernel_only > 0 if "graph" in trace.name else kernel_only == 0


def test_units_computing_kinds_are_those_whose_kinds_hold_one_in_order() -> None:
    """What the patterns walk (``Units.computing``): on the eager trace, for each kind and for pairs, the units whose
    kinds hold one of them, in the units' order; with ``forward``, the backward ops left out."""
    units = window_units(windowed_events(read_trace_tables(TRACES_WITH_UNITS[0])).events, None, DEFAULT)
    every_kind = sorted({k for u in units for k in u.kinds})
    assert len(every_kind) >= 3
    for kinds in [(k,) for k in every_kind] + [tuple(every_kind[:2]), ("mul", "no such kind")]:
        wanted = [u.op_id for u in units if set(u.kinds) & set(kinds)]
        assert [u.op_id for u in units.computing(*kinds)] == wanted
        assert [u.op_id for u in units.computing(*kinds, forward=True)] == \
            [i for i in wanted if i not in units.backward]
    assert units.computing("no such kind") == []

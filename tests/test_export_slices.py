"""The Perfetto export's finding slices never overlap a neighbour on their track (issue 58: "the Perfetto export's
finding slices overlap their neighbours by 1 ns, start and duration rounded apart"). Checked from the exported
JSON alone, on committed decode traces whose critical path is hundreds of back-to-back slices: read exactly (the
decimals fuseprof writes) and as a viewer reading doubles would (each ``ts`` and ``dur`` rounded to ns apart)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from fuseprof.cli import main
from tests.conftest import FIXTURES

DECODE = [FIXTURES / "truth" / "decode_eager.json.gz", FIXTURES / "whatif" / "decode_a.json.gz"]


def _tracks(exported: Path) -> dict[tuple[object, object], list[tuple[Decimal, Decimal]]]:
    """The findings' complete events per (pid, tid), as (ts, dur) in exact decimal µs."""
    data = json.loads(exported.read_text(), parse_float=Decimal)
    tracks: dict[tuple[object, object], list[tuple[Decimal, Decimal]]] = defaultdict(list)
    for event in data["traceEvents"]:
        if event.get("ph") == "X" and event.get("cat") == "fuseprof":
            tracks[(event["pid"], event["tid"])].append((Decimal(event["ts"]), Decimal(event["dur"])))
    return tracks


def _overlaps(slices: list[tuple[int, int]]) -> int:
    ordered = sorted(slices)
    return sum(1 for (s1, e1), (s2, _) in zip(ordered, ordered[1:]) if e1 > s2)


@pytest.mark.parametrize("trace", DECODE, ids=lambda p: p.name)
def test_no_two_finding_slices_of_one_track_overlap(trace: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "annotated.json"
    assert main(["export", str(trace), "--perfetto", str(out)]) == 0
    tracks = _tracks(out)
    adjacent = sum(1 for v in tracks.values() for (a, da), (b, _) in zip(sorted(v), sorted(v)[1:]) if a + da == b)
    assert adjacent > 300  # the critical path's segments meet end to start: where a 1 ns overlap would show
    for key, slices in tracks.items():
        exact = [(int(ts * 1000), int((ts + dur) * 1000)) for ts, dur in slices]
        assert all((ts * 1000) % 1 == 0 and (dur * 1000) % 1 == 0 for ts, dur in slices)  # whole ns
        assert _overlaps(exact) == 0, key
        for rounding in (math.trunc, round):  # a viewer parsing doubles, truncating or rounding each apart
            viewed = [(rounding(float(ts) * 1000), rounding(float(ts) * 1000) + rounding(float(dur) * 1000))
                      for ts, dur in slices]
            assert _overlaps(viewed) == 0, (key, rounding)

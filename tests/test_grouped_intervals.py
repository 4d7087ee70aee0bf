"""Every step's timeline at once (``timeline.breakdowns`` on ``intervals.apart``) against a plain sweep over each
step's own GPU events, on real traces; the same where the groups cannot share one int64 line (the group-by-group
path: the trace's clock jumps); and each stream's kernel overlap at once against a sweep per stream."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fuseprof.analysis.facts.integrity import _overlap_on_streams
from fuseprof.analysis.facts.timeline import breakdowns
from fuseprof.analysis.running.analyze import Options, windowed_events
from fuseprof.model.intervals import apart, grouped_in_start_order
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import ROOT, SHARED, TRACES, covered_ns, trace_at

REAL = {"tp2": "tests/fixtures/tp2/tp_mlp-rank0.json.gz",  # GEMM, elementwise, GEMM, all-reduce per step
        "register sweep": f"{TRACES.relative_to(ROOT)}/rmsnorm_swiglu_register_sweep-float16-h200-20261129t094431z"
                          "/raw/profiler_trace.json.gz",
        "b200": "tests/fixtures/thirdparty/b200_eager.json.gz",  # kernels that overlap on one stream
        # communication and memcpy beside the kernels, on streams of their own
        "ddp": "shared:h200_2gpu/ddp_step_rank0.json.gz",
        "mi300 resnet": "shared:mi300_resnet_act_checkpoint.json.gz"}
CASES = [pytest.param(n, marks=pytest.mark.shared) if at.startswith(SHARED) else n for n, at in REAL.items()]


def _events(name: str) -> pd.DataFrame:
    return windowed_events(read_trace_tables(trace_at(REAL[name])), Options()).events


def _swept(part: pd.DataFrame) -> dict[str, int]:
    """One group's timeline by the tests' own sweep (``conftest.covered_ns``) over its rows; time shared by two
    sets is |A| + |B| - |A ∪ B|."""
    rows = list(zip(part["start_ns"].tolist(), (part["start_ns"] + part["dur_ns"]).tolist(), part["kind"].tolist()))
    of = {k: [(s, e) for s, e, kind in rows if kind == k] for k in ("kernel", "communication", "memcpy", "memset")}
    length = {k: covered_ns(spans) for k, spans in of.items()}

    def exposed(k: str) -> int:  # its time minus the time it shares with computation
        return length[k] - (length[k] + length["kernel"] - covered_ns(of[k] + of["kernel"]))

    span = max(e for _, e, _ in rows) - min(s for s, _, _ in rows)
    busy = covered_ns([(s, e) for s, e, _ in rows])
    return {"span_ns": span, "busy_ns": busy, "idle_ns": span - busy, "computation_ns": length["kernel"],
            "communication_ns": length["communication"], "exposed_communication_ns": exposed("communication"),
            "memcpy_ns": length["memcpy"], "exposed_memcpy_ns": exposed("memcpy"), "memset_ns": length["memset"],
            "events": len(rows)}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("jump", [0, 1 << 61], ids=["as recorded", "the clock jumps before the last group"])
def test_every_groups_timeline_at_once_is_each_groups_own(name: str, jump: int) -> None:
    """By profiler step (by kind where the trace has no steps); with the last group moved 2⁶¹ ns later, the
    groups cannot share one int64 line and go one by one, to the same values."""
    events = _events(name)
    key = "profiler_step" if events["profiler_step"].notna().any() else "kind"
    last = events[key] == events[key].dropna().iloc[-1]
    events = events.assign(start_ns=events["start_ns"] + np.where(last, jump, 0))
    groups = list(events.groupby(key, sort=False))
    assert len(groups) >= 2
    got = breakdowns(events, key)
    assert [g for g, _ in got] == [g for g, _ in groups]  # the groups' order, as groupby(sort=False) gives them
    assert [t for _, t in got] == [_swept(part) for _, part in groups]
    if name in ("ddp", "mi300 resnet"):  # the traces where communication runs under computation
        assert any(t["exposed_communication_ns"] < t["communication_ns"] for _, t in got)
    start = events["start_ns"].to_numpy(np.int64)
    end = start + events["dur_ns"].to_numpy(np.int64)
    codes = pd.factorize(events[key])[0]
    assert (apart(codes, start, end, len(groups)) is None) == (jump > 0)


@pytest.mark.parametrize("name", CASES)
def test_kernel_overlap_on_one_stream_is_the_sum_of_each_streams_own(name: str) -> None:
    events = _events(name)
    kernels = events[events["kind"].isin(["kernel", "communication"])]
    want = 0
    for _, part in kernels.groupby(kernels["stream"].astype(str)):
        spans = list(zip(part["start_ns"].tolist(), (part["start_ns"] + part["dur_ns"]).tolist()))
        want += sum(e - s for s, e in spans) - covered_ns(spans)
    assert _overlap_on_streams(events) == want
    if name == "b200":
        assert want > 0


def test_grouped_in_start_order_groups_by_code_then_start_ties_in_row_order() -> None:
    """By hand: codes [1, 0, 1, 0, 1] with starts [5, 9, 2, 9, 2]: group 0 is rows 1, 3 (a tie at 9: row order),
    group 1 rows 2, 4 (a tie at 2), then 0 (start 5); bounds [0, 2, 5]. Nothing to group: no rows, one bound."""
    order, bounds = grouped_in_start_order(np.array([1, 0, 1, 0, 1]), np.array([5, 9, 2, 9, 2]))
    assert order.tolist() == [1, 3, 2, 4, 0] and bounds == [0, 2, 5]
    order, bounds = grouped_in_start_order(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert order.tolist() == [] and bounds == [0]

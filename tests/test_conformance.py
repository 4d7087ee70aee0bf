"""Conformance: every committed and shared trace, rewritten into the forms other generations write
(tests/trace_forms.py), decodes to the same tables — times shifted by the form's offset, exactly — and,
on traces of each vendor and kind, analyses to the same tables. The rule is tested, not the files: a form
is a class of trace, and every trace at hand is tried in it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.parse.execution_trace import execution_trace_beside, is_execution_trace
from fuseprof.parse.trace_events import TraceTables, read_trace_tables
from tests import trace_forms
from tests.conftest import ROOT, SHARED, SHARED_FILES, by_name, shared_traces, trace_at

TABLES = ("gpu", "ops", "launches", "modules", "annotations", "autograd", "host_ops")
_ORDER = ["start_ns", "dur_ns", "name", "pid", "tid", "correlation", "external_id", "stream"]


# a trace with no timeline to decode, refused in every form (tests/test_writer_shapes.py: CUPTI's range profiler)
NO_TIMELINE = {"hta_cupti_range_profiler_counters_a100.json.gz"}


def _names() -> list[str]:
    """Every committed trace (from the checkout's root) and every shared one (``shared:PATH``), by name: the
    shared ones are resolved inside the tests that are marked for them."""
    committed = [p for base in (ROOT / "traces", ROOT / "tests" / "fixtures") for p in sorted(base.rglob("*.json.gz"))]
    names = [str(p.relative_to(ROOT)) for p in committed] + [SHARED + n for n in SHARED_FILES]
    return [n for n in names if not is_execution_trace(Path(n)) and Path(n).name not in NO_TIMELINE]  # by name


EVERY_TRACE = _names()


def _load(path: Path) -> dict:
    return trace_forms.load(path)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in _ORDER if c in frame]
    return frame.sort_values(keys, kind="stable", key=lambda s: s.astype("string") if s.dtype == object else s) \
        .reset_index(drop=True)


def _differences(a: TraceTables, b: TraceTables, offset_ns: int, reorder: bool, same_devices: bool = True) -> list[str]:
    found = []
    for name in TABLES:
        x, y = getattr(a, name), getattr(b, name)
        y = y.assign(start_ns=y["start_ns"] - offset_ns)
        if reorder:
            x, y = _sorted(x), _sorted(y)
        try:
            pd.testing.assert_frame_equal(x, y, check_exact=True)
        except AssertionError as exc:
            found.append(f"{name}: {str(exc).splitlines()[0]}")
    if a.rank != b.rank or (same_devices and a.devices != b.devices):
        found.append("devices or rank")
    return found


# Shared traces that decode differently in some form: none. The 14 this round's fresh4/ folder added were of two
# classes, both fixed: 'shuffled' on µs traces where two ops share one span on one thread (which was the launching
# op, or a host leaf, followed the file's order: now their External ids, then names), and µs-since-the-epoch clocks
# with ns decimals (1.7e15 µs: the forms were rewritten through floats, 0.25 µs apart there: now from the text,
# ``trace_forms.load``). The set is exact: a trace that comes to differ fails this test.
KNOWN_DIFFERING: set[str] = set()


@pytest.mark.parametrize(("where", "at_least"), [("committed", 80), pytest.param("shared", 59, marks=pytest.mark.shared)])
def test_every_trace_in_every_form_decodes_the_same(where: str, at_least: int, tmp_path: Path, capsys) -> None:
    traces = [trace_at(n) for n in EVERY_TRACE if n.startswith(SHARED) == (where == "shared")]
    assert len(traces) >= at_least  # the committed captures, or the shared traces: all of them
    tried, differ = 0, []
    for path in traces:
        trace = _load(path)
        for form, (rewrite, offset) in trace_forms.FORMS.items():
            original = trace_forms.original_of(form, trace)
            base = read_trace_tables(trace_forms.write(original, tmp_path / "a.json")) if original is not trace \
                else read_trace_tables(path)
            variant = read_trace_tables(trace_forms.write(rewrite(trace), tmp_path / "b.json"))
            tried += 1
            differ += [f"{path.name} {form}: {d}" for d in _differences(base, variant, offset, form in trace_forms.REORDERED,
                                                                         form not in trace_forms.DEVICES_CHANGED)]
    with capsys.disabled():
        print(f"\nconformance: {len(traces)} traces x {len(trace_forms.FORMS)} forms = {tried} variants decoded, "
              f"{len(differ)} differences")
    differing = {d.split(" ", 1)[0] for d in differ}
    assert differing == (KNOWN_DIFFERING if where == "shared" else set()), sorted(set(differ))[:20]


@pytest.mark.parametrize("name", by_name("tests/fixtures/truth/decode_eager.json.gz",
                                          "shared:mi300_bert_small_uncased.json.gz",
                                          "shared:h200_2gpu/tp_mlp_rank0.json.gz"))
@pytest.mark.parametrize("form", ["epoch_fraction", "old_writer", "old_ids", "several_devices"])
def test_the_analysis_is_the_same_in_another_form(name: str, form: str, tmp_path: Path) -> None:
    path = trace_at(name)
    rewrite, offset = trace_forms.FORMS[form]
    (a,) = analyze(path)
    variant = tmp_path / path.name.removesuffix(".gz")
    beside = execution_trace_beside(path)
    if beside is not None:  # the op graph by the same execution trace
        shutil.copy(beside, tmp_path / f"{variant.name.removesuffix('.json')}.et.json.gz")
    (b,) = analyze(trace_forms.write(rewrite(_load(path)), variant))
    for table, x in shown_tables(a).items():
        y = shown_tables(b)[table]
        for column in x.columns:
            if column.endswith("start_ns") or column.endswith("end_ns"):
                y = y.assign(**{column: y[column] - offset})
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=table)


@pytest.mark.parametrize("name", by_name("shared:h100_bert_small_uncased.json.gz", "shared:mi300_Qwen1.5-0.5B.json.gz",
                                          "traces/llama4l-eager-h200/raw/0-profiler_trace.json.gz"))
def test_kernels_are_attributed_by_time_where_the_ids_say_nothing(name: str, tmp_path: Path) -> None:
    """GPU events and launch calls whose External id is their correlation id (no op's id, or another op's):
    each is linked to the innermost op around its launch call, and the analysis is the trace's own."""
    path = trace_at(name)
    (a,) = analyze(shutil.copy(path, tmp_path / "original.json.gz"))  # both alone: no bundle's bench beside
    (b,) = analyze(trace_forms.write(trace_forms.ids_by_correlation(_load(path)), tmp_path / "ids.json"))
    said = shown_tables(b)["integrity"].set_index("check").loc["attributed_kernel_time_pct", "detail"]
    kernels = int(said.split(" of ")[0])
    assert f"({kernels:,} by the op around the launch call" in said  # the integrity table says how
    for table, x in shown_tables(a).items():
        y = shown_tables(b)[table]
        if table == "integrity":
            x, y = x.drop(columns="detail"), y.drop(columns="detail")
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=table)


@pytest.mark.parametrize("name", by_name("shared:torch_compile_triton.json.gz", "shared:mi300_Qwen1.5-0.5B.json.gz",
                                          "tests/fixtures/truth/decode_eager.json.gz"))
def test_launch_calls_without_ids_change_nothing(name: str, tmp_path: Path) -> None:
    """Launch calls with no External id (the id on ops and kernels only): kernels link through their own id or
    the op around the launch call, and every table is the trace's own (how each was linked aside)."""
    path = trace_at(name)
    (a,) = analyze(shutil.copy(path, tmp_path / "original.json.gz"))
    (b,) = analyze(trace_forms.write(trace_forms.launches_without_ids(_load(path)), tmp_path / "bare.json"))
    for table, x in shown_tables(a).items():
        y = shown_tables(b)[table]
        if table == "integrity":
            x, y = x.drop(columns="detail"), y.drop(columns="detail")
        pd.testing.assert_frame_equal(x, y, check_exact=True, obj=table)


@pytest.mark.shared
def test_a_trace_without_device_properties_says_so_and_keeps_its_tables(tmp_path: Path) -> None:
    path = shared_traces() / "h100_bert_small_uncased.json.gz"
    (a,) = analyze(path)
    (b,) = analyze(trace_forms.write(trace_forms.no_devices(_load(path)), tmp_path / "bare.json"))
    assert a.roof.label == "H100 SXM (datasheet)" and not b.roof.judged and "unknown GPU" in b.roof.label
    assert any("names no device" in n for n in b.notes)
    for table in ("timeline", "categories", "top_kernels", "steps", "idle"):
        pd.testing.assert_frame_equal(shown_tables(a)[table], shown_tables(b)[table], check_exact=True, obj=table)

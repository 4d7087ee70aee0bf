"""The trace store: a warm run gives what a cold one gave, to the bit, without decoding the JSON; a damaged,
foreign-version or unwritable store is rebuilt or bypassed, never trusted."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fuseprof.parse.store as store_module
import fuseprof.parse.trace_events as trace_events
from fuseprof.analysis import analyze
from fuseprof.analysis.running.analyze import windowed_events
from fuseprof.analysis.running.sections import shown_tables
from fuseprof.cli import main
from fuseprof.errors import FuseprofWarning
from fuseprof.parse.frames import COMPRESS_FROM_BYTES, frame_table, pack_frames, unpack_frame
from fuseprof.parse.trace_events import read_trace_tables
from tests.conftest import FIXTURES, TRACES

EAGER = TRACES / "llama4l-eager-h200" / "raw" / "0-profiler_trace.json.gz"
REAL = [EAGER, FIXTURES / "tp2" / "tp_mlp-rank0.json.gz", FIXTURES / "h200-graphs" / "graph-replay.json.gz",
        FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz"]


@pytest.fixture
def store(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "store"
    monkeypatch.setenv("FUSEPROF_CACHE", str(root))
    return root


def _no_decoding(monkeypatch) -> None:
    def refuse(path):  # type: ignore[no-untyped-def]
        raise AssertionError(f"{path} was decoded from JSON; the store should have answered")
    monkeypatch.setattr(trace_events, "read_trace_tables", refuse)


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    assert shown_tables(a).keys() == shown_tables(b).keys()
    for name, table in shown_tables(a).items():
        pd.testing.assert_frame_equal(table, shown_tables(b)[name], check_exact=True)
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    assert (a.device, a.roof, a.window, a.rank, a.notes) == (b.device, b.roof, b.window, b.rank, b.notes)


@pytest.mark.parametrize("trace", REAL, ids=lambda p: p.name)
def test_frames_round_trip_the_decoded_tables_exactly(trace: Path) -> None:
    tables = read_trace_tables(trace)
    names = ("gpu", "ops", "launches", "modules", "annotations", "autograd", "host_ops", "forward_ops", "parameters",
             "memory")
    data, spans = pack_frames({name: getattr(tables, name) for name in names})
    assert list(spans) == list(names)
    ends = [start + length for start, length in spans.values()]
    assert [start for start, _ in spans.values()] == [0, *ends[:-1]] and ends[-1] == len(data)  # back to back
    for name in reversed(names):  # each read alone, from its own span
        start, length = spans[name]
        pd.testing.assert_frame_equal(unpack_frame(data[start:start + length]), getattr(tables, name), check_exact=True)


@pytest.mark.parametrize("trace", REAL[1::2], ids=lambda p: p.name)
def test_frames_round_trip_an_analysis_exactly(trace: Path) -> None:
    """An analysis's two dozen tables hold every dtype the store reads back by its own path (NumPy numbers from
    Arrow's buffers, Int64/Float64/boolean/string through their Arrow conversion, text and nested cells as
    objects): each comes back with its dtype, values and kind of null."""
    from fuseprof.analysis.running.analyze import analyze_tables

    frames = dict(analyze_tables(read_trace_tables(trace)).frames)
    data, spans = pack_frames(frames)
    kinds = {str(t.dtype) for f in frames.values() for _, t in f.items()}
    assert {"int64", "float64", "object", "Int64", "Float64"} <= kinds, kinds  # each path taken
    for name, (start, length) in spans.items():
        back = unpack_frame(data[start:start + length])
        pd.testing.assert_frame_equal(back, frames[name], check_exact=True)
        for column in back.columns:  # None, NaN and pd.NA told apart, cell by cell
            got, want = back[column].to_numpy(object), frames[name][column].to_numpy(object)
            assert [(type(a), a is pd.NA) for a in got] == [(type(b), b is pd.NA) for b in want], (name, column)


def test_only_frames_of_a_quarter_megabyte_or_more_are_compressed() -> None:
    """A frame's Arrow bytes (its column and its index, 16 bytes a row) at the threshold: its span is well
    below them (LZ4 took the runs of zeros); just under it, the span is above them (the bytes plus the stream's
    framing): compressing a few rows cost ~10x writing them. Both read back exactly."""
    rows = COMPRESS_FROM_BYTES // 16
    big, small = pd.DataFrame({"x": np.zeros(rows)}), pd.DataFrame({"x": np.zeros(rows - 1)})
    assert frame_table(big).nbytes == COMPRESS_FROM_BYTES > frame_table(small).nbytes
    data, spans = pack_frames({"big": big, "small": small})
    assert spans["big"][1] < 0.75 * COMPRESS_FROM_BYTES
    assert spans["small"][1] > frame_table(small).nbytes
    for name, frame in (("big", big), ("small", small)):
        start, length = spans[name]
        pd.testing.assert_frame_equal(unpack_frame(data[start:start + length]), frame, check_exact=True)


def test_frames_keep_each_kind_of_null_and_nested_cells() -> None:
    frame = pd.DataFrame({"shapes": [[[2048, 4096], []], None, float("nan"), pd.NA, [["a", 1.5]]],
                          "n": pd.array([1, None, 3, 4, 2**62], dtype="Int64"), "f": [0.1, np.nan, 2.0, -0.0, 1e300]},
                         index=pd.Index([10, 3, 7, 8, 1], name="label"))
    frame.insert(1, "text", pd.Series(["aten::mm", None, float("nan"), "x", ""], dtype=object, index=frame.index))
    data, spans = pack_frames({"f": frame, "empty": frame.iloc[:0]})
    back = unpack_frame(data[:spans["f"][1]])
    pd.testing.assert_frame_equal(unpack_frame(data[spans["f"][1]:]), frame.iloc[:0], check_exact=True)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert back["shapes"].iloc[1] is None and back["shapes"].iloc[3] is pd.NA and np.isnan(back["shapes"].iloc[2])
    assert back["text"].iloc[1] is None and np.isnan(back["text"].iloc[2])


@pytest.mark.parametrize("null", [pd.NaT, np.float32("nan"), np.datetime64("NaT")], ids=str)
def test_a_text_column_whose_nulls_are_of_other_kinds_is_stored(null: object) -> None:
    """Nulls that are neither None, NaN nor NA (NumPy's NaN, NaT) in a text column are stored as missing (read back
    as None), as the factorized codes stored them, not refused by Arrow's text array."""
    frame = pd.DataFrame({"text": pd.Series(["aten::mm", null, "x"], dtype=object)})
    back = unpack_frame(pack_frames({"f": frame})[0])
    assert back["text"].tolist() == ["aten::mm", None, "x"]


@pytest.mark.parametrize("storage", ["python", "pyarrow"])
def test_frames_keep_text_dtypes_with_their_storage_in_the_labels_too(storage: str) -> None:
    text = pd.StringDtype(storage, na_value=np.nan)
    frame = pd.DataFrame({"kind": pd.array(["kernel", None, "memcpy"], dtype=text),
                          "op": pd.array(["aten::mm", "x", None], dtype=pd.StringDtype(storage))},
                         index=pd.Index(["a", "b", "c"], dtype=text))
    frame.columns = pd.Index(frame.columns, dtype=text)
    data, spans = pack_frames({"f": frame})
    back = unpack_frame(data)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert (back.columns.dtype, back.index.dtype, back["op"].dtype) == (text, text, pd.StringDtype(storage))


def test_frames_with_labels_that_are_not_text_keep_their_values() -> None:
    """Labels other than text come back as their text (as the Parquet store gave them), with every value."""
    for labels in ([0, 1], [0.5, 2.0], [True, False]):
        frame = pd.DataFrame([[1, 2], [3, 4]], columns=labels)
        back = unpack_frame(pack_frames({"f": frame})[0])
        assert list(back.columns) == [str(x) for x in labels] and back.to_numpy().tolist() == [[1, 2], [3, 4]]


def test_frames_with_a_label_twice_or_a_nested_index_are_refused() -> None:
    """A frame the store could not give back as it was is an error, not a damaged entry: a column label twice (its
    columns would come back as one), an index of several levels."""
    with pytest.raises(ValueError, match="column labels are unique"):
        pack_frames({"f": pd.DataFrame([[1, 2.5]], columns=["a", "a"])})
    with pytest.raises(ValueError, match="single-level index"):
        pack_frames({"f": pd.DataFrame({"a": [1]}, index=pd.MultiIndex.from_tuples([(1, 2)]))})


def test_tables_hold_python_backed_text_whatever_the_callers_setting() -> None:
    """The decoder and the analysis build their tables with pandas' Python-backed text (fuseprof.parse.text_arrays),
    so a table is the same whoever made it; the caller's own setting is left as it was."""
    with pd.option_context("mode.string_storage", "pyarrow"):
        tables = read_trace_tables(EAGER)
        events = windowed_events(tables).events
        assert pd.get_option("mode.string_storage") == "pyarrow"
    text = [d for d in [*tables.gpu.dtypes, *events.dtypes] if isinstance(d, pd.StringDtype)]
    assert len(text) > 5 and {d.storage for d in text} == {"python"}


def test_a_warm_run_reads_the_store_and_gives_the_same_answer(store: Path, monkeypatch) -> None:
    cold = analyze([EAGER])[0]
    _no_decoding(monkeypatch)
    warm = analyze([EAGER])[0]
    _same(cold, warm)
    assert len(store_module.TraceStore(store).entries()) == 1


def test_a_copy_under_another_name_hits_the_same_entry(store: Path, tmp_path: Path, monkeypatch) -> None:
    cold = analyze([EAGER])[0]
    copy = tmp_path / "renamed.json.gz"
    shutil.copy(EAGER, copy)
    _no_decoding(monkeypatch)
    warm = analyze([copy])[0]
    assert warm.name == "renamed.json.gz"
    pd.testing.assert_frame_equal(cold.fusion, warm.fusion, check_exact=True)


def test_an_edited_trace_misses(store: Path, tmp_path: Path) -> None:
    trace = json.loads(gzip.decompress(EAGER.read_bytes()))
    first = tmp_path / "t.json"
    first.write_text(json.dumps(trace))
    before = analyze([first])[0]
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    kernel["dur"] += 1000.0  # one kernel 1 ms longer: the store must not answer with the old busy time
    first.write_text(json.dumps(trace))
    after = analyze([first])[0]
    busy = lambda r: int(r.timeline.set_index("stream").loc["all", "busy_ns"])  # noqa: E731
    assert busy(after) - busy(before) > 0
    assert len(store_module.TraceStore(store).entries()) == 2


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest", "missing", "metadata", "no metadata"])
def test_a_damaged_entry_is_rebuilt_with_a_warning(store: Path, damage: str) -> None:
    cold = analyze([EAGER])[0]
    [entry] = store_module.TraceStore(store).entries()
    analysis = next(entry.glob("analysis-*"))
    victim = analysis / "frames.arrows"  # every frame of the analysis, packed; the fusion table's span damaged
    start, length, _ = json.loads((analysis / "manifest.json").read_text())["frames"]["fusion"]
    if damage == "flip":
        data = bytearray(victim.read_bytes())
        data[start + length // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:start + length // 2])
    elif damage == "manifest":
        (analysis / "manifest.json").write_text("{")
    elif damage == "metadata":  # the device and notes edited, the frames and the manifest left whole
        meta = json.loads((analysis / "meta.json").read_text())
        meta = {**meta, "device": "NVIDIA B200", "notes": ["a note nobody wrote"]}
        (analysis / "meta.json").write_text(json.dumps(meta))
    elif damage == "no metadata":
        (analysis / "meta.json").unlink()
    else:
        victim.unlink()
    with pytest.warns(FuseprofWarning, match="is damaged"):
        rebuilt = analyze([EAGER])[0]
    _same(cold, rebuilt)
    store_module.wait_for_writes()
    assert (analysis / "manifest.json").is_file()  # and stored again, whole


def test_metadata_comes_back_as_written_whatever_it_holds(tmp_path: Path) -> None:
    """The metadata is read by msgspec where it can and by the standard library where msgspec refuses the text
    ``json.dumps`` wrote (NaN, infinities, a lone surrogate): either way the value written."""
    store = store_module.TraceStore(tmp_path / "store")
    for meta in ({"stdout": "x" * 1000 + "\u00e9\n", "n": 2**70, "f": 0.1}, {"nan": float("nan"), "inf": float("-inf")},
                 {"text": "\ud800"}):
        assert store.put_frames("k" * 32, "p", {}, meta)
        found = store.get_frames("k" * 32, "p")
        assert found is not None and json.dumps(found[1]) == json.dumps(meta)
        shutil.rmtree(store.root)  # type: ignore[arg-type]


def test_an_entry_whose_manifest_lost_a_table_is_rebuilt(store: Path) -> None:
    """A table's line taken out of a tables entry's manifest (the frames and metadata whole): the entry is damaged and
    rebuilt with a warning, not read into a KeyError."""
    cold = analyze([EAGER])[0]
    [entry] = store_module.TraceStore(store).entries()
    manifest = json.loads((entry / "tables" / "manifest.json").read_text())
    del manifest["frames"]["syncs"]
    (entry / "tables" / "manifest.json").write_text(json.dumps(manifest))
    for part in entry.glob("analysis-*"):  # the analysis too, so that the tables are read
        shutil.rmtree(part)
    with pytest.warns(FuseprofWarning, match="lacks its syncs table"):
        _same(cold, analyze([EAGER])[0])


def test_another_fuseprof_version_never_reads_the_entry(store: Path, monkeypatch) -> None:
    analyze([EAGER])
    this_version = store_module.code_version()
    decoded = []
    real = trace_events.read_trace_tables
    monkeypatch.setattr(trace_events, "read_trace_tables", lambda p: decoded.append(p) or real(p))
    monkeypatch.setattr(store_module, "code_version", lambda: "v1-9.9.9-0123456789ab")
    analyze([EAGER])
    assert decoded == [EAGER]  # rebuilt under the new version's folder
    assert {e.parents[1].name for e in store_module.TraceStore(store).entries()} == {"v1-9.9.9-0123456789ab", this_version}


def test_an_unwritable_store_is_a_warning_not_an_error(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("FUSEPROF_CACHE", str(blocker / "store"))
    with pytest.warns(FuseprofWarning, match="cannot write under"):
        result = analyze([EAGER])[0]
    assert int(result.timeline.set_index("stream").loc["all", "busy_ns"]) > 0


def test_the_store_turned_off_keeps_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    result = analyze([EAGER])[0]
    assert not (tmp_path / ".cache").exists()
    assert len(result.events) == len(read_trace_tables(EAGER).gpu)


def test_decoding_warnings_are_shown_warm_too(store: Path, tmp_path: Path) -> None:
    trace = json.loads(gzip.decompress(EAGER.read_bytes()))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    trace["traceEvents"] += kernels[:5]
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(trace))
    for _ in range(2):
        with pytest.warns(FuseprofWarning, match=f"{path}: 5 GPU events appear twice"):
            analyze([path])


def test_the_store_command_counts_and_clears(store: Path, capsys) -> None:
    analyze([EAGER, FIXTURES / "tp2" / "tp_mlp-rank0.json.gz"])
    assert main(["store"]) == 0
    assert "2 stored trace(s)" in capsys.readouterr().out
    assert main(["store", "--clear"]) == 0
    assert "removed 2 stored trace(s)" in capsys.readouterr().out
    assert store_module.TraceStore(store).entries() == []


def test_ingest_reads_a_trace_through_the_same_store(store: Path, tmp_path: Path, monkeypatch) -> None:
    analyze([EAGER])
    _no_decoding(monkeypatch)  # analysed once: ingest reads the stored tables
    assert main(["ingest", str(EAGER), "--out", str(tmp_path / "bundles")]) == 0
    bundle = next((tmp_path / "bundles").iterdir())
    kernels = pd.read_parquet(bundle / "kernels.parquet")
    raw = json.loads(gzip.decompress(EAGER.read_bytes()))["traceEvents"]
    gpu = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(kernels) == len(gpu) == 1729 + 9 + 4  # the eager trace's kernels, memcpys and memsets


def test_clear_removes_only_what_the_store_wrote(store: Path, capsys) -> None:
    """A store folder the user also keeps things in: `store --clear` removes fuseprof's entries and none of
    theirs, however their names look."""
    analyze([EAGER])
    mine = ["vllm-traces/run1.json", "venv-3.11/bin/python", "v2-backup/notes.txt", "v1-0.1.0-000000000000/keep.txt",
            ".notes.txt.tmp-4000000", "notes.txt"]
    for name in mine:
        (store / name).parent.mkdir(parents=True, exist_ok=True)
        (store / name).write_text("the user's")
    assert main(["store", "--clear"]) == 0
    assert "removed 1 stored trace(s)" in capsys.readouterr().out
    assert all((store / name).read_text() == "the user's" for name in mine)
    assert store_module.TraceStore(store).entries() == []


def test_clear_in_a_folder_fuseprof_never_wrote_removes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    """FUSEPROF_CACHE pointed at the user's own folder by mistake: nothing there carries the store's marker."""
    folder = tmp_path / "home"
    for name in ("v1-0.1.0-abcdefabcdef/x", "v2-old/y", "vacation/z"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("keep")
    monkeypatch.setenv("FUSEPROF_CACHE", str(folder))
    assert main(["store", "--clear"]) == 0
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "v1-0.1.0-abcdefabcdef/x", "v2-old/y", "vacation/z"]


@pytest.mark.skipif(not hasattr(__import__("os"), "getuid"), reason="file modes are POSIX")
def test_an_entry_others_can_write_is_never_served(store: Path, monkeypatch) -> None:
    """A poisoned entry in a shared, world-writable store: its tables are not read (the trace is decoded
    again) and a warning says why."""
    (cold,) = analyze([EAGER])
    for path in [store, *store.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o002)
    monkeypatch.setattr(store_module, "_UNTRUSTED", set())
    decoded = []
    real = trace_events.read_trace_tables
    monkeypatch.setattr(trace_events, "read_trace_tables", lambda p: decoded.append(p) or real(p))
    with pytest.warns(FuseprofWarning, match="writable by others; its entries are not used"):
        (warm,) = analyze([EAGER])
    assert decoded == [EAGER]
    _same(cold, warm)


def test_what_a_killed_write_left_is_removed_by_the_next_write(store: Path) -> None:
    """A run killed with -9 while it wrote an entry leaves its temporary folder (named as this host's, of a
    process that is gone): the next run that writes there removes it; a live process's is left alone."""
    from fuseprof.bundle.files import temporary_name

    analyze([EAGER])
    [entry] = store_module.TraceStore(store).entries()
    here = temporary_name("", "tmp").removeprefix(".").rsplit("-", 1)[0]  # .fuseprof-tmp-HOST
    dead, live = entry / f".tables-k1ll3d{here}-999999999", entry / f".analysis-busy{temporary_name('', 'tmp')[1:]}"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "gpu.parquet").write_bytes(b"half")
    shutil.rmtree(next(entry.glob("analysis-*")))  # so the next run writes here
    analyze([EAGER])
    store_module.wait_for_writes()
    assert not dead.exists() and live.exists()


def test_what_the_store_writes_under_a_group_writable_umask_is_read_back(tmp_path: Path, monkeypatch) -> None:
    """Under umask 002 (each user with a group of their own) folders and files made with the default mode are
    group-writable, which the store does not trust: it makes its own, from the root down, for its user alone, so
    an entry written there is read back, with no warning."""
    monkeypatch.setattr(store_module, "_UNTRUSTED", set())
    root = tmp_path / "not yet" / "store"
    store = store_module.TraceStore(root)
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", None]})
    old = os.umask(0o002)
    try:
        assert store.put_frames("ab" * 16, "tables", {"t": frame}, {"m": 1})
    finally:
        os.umask(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FuseprofWarning)
        found = store.get_frames("ab" * 16, "tables")
    assert found is not None and found[1] == {"m": 1}
    pd.testing.assert_frame_equal(found[0]["t"], frame)
    written = [tmp_path / "not yet", *(tmp_path / "not yet").rglob("*")]
    assert written and all(p.stat().st_mode & 0o077 == 0 for p in written), \
        {str(p): oct(p.stat().st_mode & 0o777) for p in written}


def test_a_marker_made_by_another_writer_between_look_and_write_is_no_failure(store: Path, monkeypatch) -> None:
    """Two background writes of one entry (its tables and its analysis, ``analyze`` of a lone trace) both find the
    store's markers missing and both write them: the second's exclusive create meets the first's file. That is
    the marker in place, not an unwritable store (CI saw "cannot write under … (File exists)" and a warm run that
    decoded again). Made deterministic here: the marker appears just before this write's create."""
    real = store_module.write_private

    def raced(path: Path, data: bytes) -> None:
        if path.name in (store_module.ROOT_MARKER, store_module.VERSION_MARKER) and not path.exists():
            real(path, data)  # the other writer's marker, made first
            raise FileExistsError(17, "File exists", str(path))
        real(path, data)

    monkeypatch.setattr(store_module, "write_private", raced)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FuseprofWarning)
        cold = analyze([EAGER])[0]
    _no_decoding(monkeypatch)
    _same(cold, analyze([EAGER])[0])
    assert (store / store_module.ROOT_MARKER).exists()

"""Every class of malformed input to ``fuseprof ingest`` is one line, a non-zero exit, no bundle."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from fuseprof.cli import main
from tests.conftest import FIXTURES, SEED_BUNDLE

TRACE = SEED_BUNDLE / "raw" / "profiler_trace.json.gz"
CSV = SEED_BUNDLE / "raw" / "ncu_raw.csv.gz"


def _truncated_gzip(tmp: Path) -> Path:
    path = tmp / "cut.json.gz"
    path.write_bytes(TRACE.read_bytes()[:5000])
    return path


def _truncated_json(tmp: Path) -> Path:
    path = tmp / "cut.json"
    path.write_bytes(gzip.decompress(TRACE.read_bytes())[:20000])
    return path


def _json_without_events(tmp: Path) -> Path:
    path = tmp / "other.json"
    path.write_text('{"schemaVersion": 1, "events": []}')
    return path


def _csv_without_header(tmp: Path) -> Path:
    path = tmp / "noheader.csv"
    path.write_text("==PROF== Connected to process 1\nnot,a,report\n")
    return path


def _csv_truncated_row(tmp: Path) -> Path:
    text = gzip.decompress(CSV.read_bytes()).decode()
    path = tmp / "cut.csv"
    path.write_text(text[: len(text) // 2])  # ends inside a row
    return path


def _csv_header_only(tmp: Path) -> Path:
    text = gzip.decompress(CSV.read_bytes()).decode().splitlines()
    path = tmp / "empty.csv"
    path.write_text("\n".join(text[:2]) + "\n")
    return path


def _binary_as_csv(tmp: Path) -> Path:
    path = tmp / "binary.csv"
    path.write_bytes(bytes(range(256)) * 4)
    return path


def _damaged_report(tmp: Path) -> Path:
    path = tmp / "damaged.ncu-rep"
    path.write_bytes((FIXTURES / "compiled_128x4096.ncu-rep").read_bytes()[:3000])
    return path


def _unknown_suffix(tmp: Path) -> Path:
    path = tmp / "trace.txt"
    path.write_text("hello")
    return path


def _missing(tmp: Path) -> Path:
    return tmp / "does-not-exist.json"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_truncated_gzip, "damaged or truncated gzip"),
        (_truncated_json, "not valid JSON"),
        (_json_without_events, "no 'traceEvents' list"),
        (_csv_without_header, "no ncu header row"),
        (_csv_truncated_row, "fields, the header has"),
        (_csv_header_only, "no kernel rows"),
        (_binary_as_csv, "not UTF-8"),
        (_damaged_report, "holds no profiled kernel (empty, or truncated)"),
        (_unknown_suffix, "unknown kind of file"),
        (_missing, "no such file"),
    ],
)
def test_malformed_input_is_one_line_error_and_no_bundle(make, message: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = make(tmp_path)
    out = tmp_path / "bundles"
    code = main(["ingest", str(TRACE), str(bad), "--out", str(out)])
    lines = capsys.readouterr().err.splitlines()
    errors = [line for line in lines if line.startswith("fuseprof: error: ")]
    assert code == 2
    assert len(errors) == 1 and errors[0] == lines[-1]  # progress lines, then exactly one error line
    assert str(bad) in errors[0] and message in errors[0]
    assert not out.exists() or list(out.iterdir()) == []  # not even a .partial folder


def test_good_inputs_make_one_bundle_with_raw_copies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = tmp_path / "compiled.ncu-rep"
    shutil.copyfile(FIXTURES / "compiled_128x4096.ncu-rep", rep)
    code = main(["ingest", str(TRACE), str(CSV), str(rep), "--out", str(tmp_path / "b"), "--name", "mine"])
    assert code == 0
    bundle = tmp_path / "b" / "mine"
    assert capsys.readouterr().out.strip() == str(bundle)
    assert sorted(p.name for p in (bundle / "raw").iterdir()) == [
        "0-profiler_trace.json.gz", "1-ncu_raw.csv.gz", "2-report.ncu-rep"]
    import fuseprof

    frame = fuseprof.load(bundle)
    assert frame.groupby("source").size().to_dict() == {"ncu": 57, "torch.profiler": 168}
    assert frame["case"].isna().all()


def test_sigterm_during_ingest_leaves_nothing_behind(tmp_path: Path) -> None:
    """A large trace being ingested, stopped with SIGTERM as soon as its half-written bundle appears: the
    command says so and exits 130, and no hidden .partial folder is left."""
    import gzip
    import json
    import signal
    import subprocess
    import time

    from tests.conftest import FUSEPROF

    trace = json.loads(gzip.decompress((FIXTURES / "thirdparty" / "h100_bert_small_uncased.json.gz").read_bytes()))
    trace["traceEvents"] = trace["traceEvents"] * 150
    big = tmp_path / "big.json"
    big.write_text(json.dumps(trace))
    out = tmp_path / "out"
    proc = subprocess.Popen([FUSEPROF, "ingest", str(big), "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob(".*.fuseprof-partial-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the ingest finished before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err
    assert list(out.iterdir()) == []


def test_an_interrupt_between_a_bundles_creation_and_its_with_block_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The moment the SIGTERM test above can hit on a loaded machine: the half-written bundle exists, marked, but
    its ``with`` block has not begun, so no ``__exit__`` will remove it. The interrupt (SIGTERM raises
    KeyboardInterrupt, as Ctrl-C does) still leaves nothing behind, and a finished bundle beside it stays."""
    from fuseprof.bundle.files import BundleWriter

    out = tmp_path / "out"
    assert main(["ingest", str(TRACE), "--out", str(out)]) == 0
    kept = sorted(out.iterdir())
    capsys.readouterr()

    def interrupted(self: BundleWriter) -> BundleWriter:
        assert self.path.is_dir()  # created and marked: only an interrupt handler can remove it now
        raise KeyboardInterrupt

    monkeypatch.setattr(BundleWriter, "__enter__", interrupted)
    assert main(["ingest", str(TRACE), "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert sorted(out.iterdir()) == kept and len(kept) == 1

"""A trace is known by its content, not its name (issue 63 point 3): the folder listing, ``ingest`` and a sharded
bundle's rank folders find every trace however it is named, and leave other files alone.

Expected counts come from the raw JSON (GPU records counted with ``json``), not from fuseprof."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from fuseprof.analysis.running.analyze import trace_files
from fuseprof.bundle.ingest import ingest
from fuseprof.cli import main
from fuseprof.errors import TraceFormatError

from .conftest import FUZZ_RESULTS

FIXTURES = Path(__file__).parent / "fixtures"
TRACE = FIXTURES / "whatif" / "attention_a.json.gz"
SHARDED = Path(__file__).parents[1] / "traces" / "silu_mul-bfloat16-h200-20261129t180657z"


def _gpu_records_in(path: Path) -> int:
    """GPU activity records (kernels, memsets, memcpys): the rows an ingested bundle's manifest counts."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return sum(1 for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy"))


def _renamed_forms(folder: Path) -> dict[str, Path]:
    """The same trace as torch 2.13 writes it for ``x.pftrace`` (JSON text), as gzip without ``.gz``, and as
    ``.txt``; beside it a text file and a binary file that are no trace."""
    text = gzip.decompress(TRACE.read_bytes())
    forms = {"pftrace": folder / "step.pftrace", "gzip": folder / "step.trace", "txt": folder / "step.txt"}
    forms["pftrace"].write_bytes(text)
    shutil.copyfile(TRACE, forms["gzip"])
    forms["txt"].write_bytes(text)
    (folder / "notes.txt").write_text("kernel timings, see the trace\n")
    (folder / "weights.bin").write_bytes(bytes(range(256)) * 4)
    return forms


def test_a_folder_lists_every_trace_whatever_its_name_and_nothing_else(tmp_path: Path) -> None:
    forms = _renamed_forms(tmp_path)
    assert trace_files(tmp_path) == sorted(forms.values())
    FUZZ_RESULTS["held"] += 1  # two files that are not traces, skipped


def test_ingest_reads_a_trace_by_its_content_and_keeps_its_kind(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    forms = _renamed_forms(tmp_path / "in")
    for form, raw_name in (("pftrace", "0-profiler_trace.json"), ("gzip", "0-profiler_trace.json.gz")):
        bundle = ingest([forms[form]], tmp_path / form, name=form, log=lambda _: None)
        assert sorted(p.name for p in (bundle / "raw").iterdir()) == [raw_name]
        manifest = json.loads((bundle / "manifest.json").read_text())
        assert manifest["sources"][0]["kernels"] == _gpu_records_in(TRACE)


def test_ingest_still_refuses_a_file_that_is_no_trace(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("kernel timings, see the trace\n")
    with pytest.raises(TraceFormatError, match="unknown kind of file"):
        ingest([notes], tmp_path / "out", log=lambda _: None)
    FUZZ_RESULTS["clear error"] += 1


def test_a_sharded_bundle_is_read_rank_by_rank(capsys: pytest.CaptureFixture[str]) -> None:
    """``profile --gpus 2`` keeps each rank's trace in raw/rank<r>/: check reads both (it exited 2, 'holds no
    torch.profiler trace under raw/')."""
    found = trace_files(SHARDED)
    assert [p.parent.name for p in found] == ["rank0", "rank1"]
    assert main(["check", str(SHARDED)]) == 0
    assert "rank1/profiler_trace.json.gz" in capsys.readouterr().err

"""``fuseprof sql`` over two different traces that share a file name in different folders (issue 58: "two traces
sharing a file name corrupt sql's views"): each keeps rows of its own under a ``trace`` value of its own, and
the ``kernel_ops`` view joins each kernel only to its own trace's ops. The expected rows are each trace's, queried
alone, where no name can clash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fuseprof.cli import main
from tests.conftest import FIXTURES

A, B = FIXTURES / "truth" / "decode_eager.json.gz", FIXTURES / "whatif" / "decode_b.json.gz"
PER_TRACE = ("SELECT trace, count(*) AS kernels, sum(dur_ns) AS gpu_ns, count(DISTINCT op_id) AS ops FROM kernels "
             "GROUP BY trace ORDER BY trace")
VIEW = "SELECT trace, count(*) AS rows, count(op_start_ns) AS with_op FROM kernel_ops GROUP BY trace ORDER BY trace"


def _sql(query: str, traces: list[Path], capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["sql", query, *map(str, traces), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_two_traces_named_alike_keep_their_own_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = tmp_path / "run1" / "trace.json.gz", tmp_path / "run2" / "trace.json.gz"
    for source, copy in ((A, first), (B, second)):
        copy.parent.mkdir()
        shutil.copyfile(source, copy)
    alone = [_sql(PER_TRACE, [t], capsys)[0] | {"view": _sql(VIEW, [t], capsys)[0]} for t in (first, second)]
    assert alone[0]["kernels"] != alone[1]["kernels"] or alone[0]["gpu_ns"] != alone[1]["gpu_ns"]  # two traces
    together = _sql(PER_TRACE, [first, second], capsys)
    view = _sql(VIEW, [first, second], capsys)
    assert [r["trace"] for r in together] == ["run1/trace.json.gz", "run2/trace.json.gz"]
    for row, view_row, own in zip(together, view, alone):
        assert (row["kernels"], row["gpu_ns"], row["ops"]) == (own["kernels"], own["gpu_ns"], own["ops"])
        # each kernel joined to at most one op, of its own trace: as many rows, as many with an op, as alone
        assert (view_row["rows"], view_row["with_op"]) == (own["view"]["rows"], own["view"]["with_op"])
        assert view_row["rows"] == row["kernels"]

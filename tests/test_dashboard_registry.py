"""``fuseprof dashboard --registry FILE`` (issue 60: "the dashboard takes no --registry"): the file is checked before
the server starts (a wrong one is the schema's lines, exit 2) and the Model page analyses each trace with it —
an answer the default registry gives is never shown for it. The expected FLOPs are counted from the raw BERT
trace, as tests/test_registry.py counts them."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from fuseprof.cli import main
from fuseprof.commands.dashboard import REGISTRY_ENV
from fuseprof.model.registry_data import DEFAULT
from fuseprof.model.registry_schema import load_registry
from tests.conftest import FUZZ_RESULTS
from tests.test_registry import BERT, TOML, _layer_norms

pytest.importorskip("streamlit")


def test_a_wrong_registry_is_refused_before_the_server_starts(tmp_path: Path, capsys,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("[[role]]\nname = 'aten::x'\nreplayable = 'no'\n")
    started: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: started.append(argv))  # the server is not started
    assert main(["dashboard", str(BERT), "--registry", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--registry {path}, [[role]] #1, replayable: expected true or false, got 'no'" in err and not started
    FUZZ_RESULTS["clear error"] += 1


def test_the_model_page_analyses_with_the_registry_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(TOML)
    started: list[list[str]] = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: started.append(argv))
    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    assert main(["dashboard", str(BERT), "--registry", str(path)]) == 0 and started
    named = os.environ[REGISTRY_ENV]  # what the server process reads
    assert Path(named) == path.resolve()
    monkeypatch.setenv(REGISTRY_ENV, named)  # undone after the test

    from fuseprof_dashboards.model_page import analysis

    result = analysis(str(BERT), None, named, 15)
    assert result.registry.fingerprint() == load_registry(path, DEFAULT).fingerprint() != DEFAULT.fingerprint()
    norm = result.op_roofline[result.op_roofline["op"] == "aten::native_layer_norm"].iloc[0]
    assert norm["flops"] == 11 * math.prod(_layer_norms()[0]["args"]["Input Dims"][0])  # the file's cost model
    default = analysis(str(BERT), None, None, 15)
    norm = default.op_roofline[default.op_roofline["op"] == "aten::native_layer_norm"].iloc[0]
    assert norm["flops"] == 5 * math.prod(_layer_norms()[0]["args"]["Input Dims"][0])

"""A case's byte model is refused at capture unless it gives a whole number of bytes above 0 (issue 58: "a
negative ``nominal_bytes`` is stored"): stored, a negative count reads back as a negative bandwidth, NaN as a
bandwidth no table flags. Each case runs ``fuseprof profile CASE --device cpu`` on a one-variant user case
whose ``nominal_bytes`` returns the value under test; a refused one leaves no bundle behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import fuseprof
from tests.conftest import FUZZ_RESULTS
from tests.test_fuzz_inputs import _run

pytest.importorskip("torch")

CASE_SOURCE = '''
import numpy as np
import torch
from fuseprof.case import Case, Variant

def reference(x):
    return x.double() * 2

def twice(x):
    return x * 2

def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, device=device).to(getattr(torch, dtype)),)

CASE = Case(name="twice", description="x * 2", variants=(Variant("unfused", twice, "unfused"),),
            make_inputs=make_inputs, reference=reference, nominal_bytes=lambda shape, dtype: {value},
            default_shapes=((4, 8),), dtypes=("float32",))
'''

REFUSED = {"negative": "-8", "NaN": "float('nan')", "infinite": "float('inf')", "zero": "0",
           "a fraction of a byte": "1.5", "a bool": "True", "a string": "'256'", "a negative numpy int": "np.int64(-256)"}


def _profile(value: str, tmp_path: Path, capsys, monkeypatch) -> tuple[int, str, str, Path]:  # type: ignore[no-untyped-def]
    module = f"bytes_case_{abs(hash(value)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(CASE_SOURCE.format(value=value))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    out = tmp_path / "out"
    code, stdout, err = _run(["profile", f"{module}:CASE", "--device", "cpu", "--repeats", "3", "--out", str(out)],
                             capsys)
    return code, stdout, err, out


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_byte_model_that_is_not_a_positive_whole_number_is_refused(name: str, tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    code, _, err, out = _profile(REFUSED[name], tmp_path, capsys, monkeypatch)
    assert code == 2 and "twice.nominal_bytes(4x8, 'float32') returned" in err and "above 0" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2  # the run's header line and the error
    assert not out.exists() or not any(out.iterdir())  # no bundle stored
    FUZZ_RESULTS["clear error"] += 1


def test_a_whole_float_is_stored_as_its_integer(tmp_path: Path, capsys, monkeypatch) -> None:
    code, stdout, err, _ = _profile("256.0", tmp_path, capsys, monkeypatch)
    assert code == 0, err
    timings = fuseprof.load_timings(Path(stdout.strip()))
    assert timings["nominal_bytes"].tolist() == [256]
    FUZZ_RESULTS["identical"] += 1

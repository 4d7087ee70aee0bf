"""The JSON output's writer (``trace_views.indented_json``) against the standard library's ``json.dumps(indent=1)``,
which it replaces for speed: byte for byte on a real trace's whole analysis and on the values JSON writers differ on
(non-ASCII and control characters, negative zero, extreme floats, huge integers, empty containers), and the standard
library's own text where strict JSON has no word (NaN, infinity)."""

from __future__ import annotations

import json

import pytest

from fuseprof.analysis import analyze
from fuseprof.commands.trace_views import indented_json, to_json
from tests.conftest import TRACES

TRICKY = [{"k\u00e9y": ["\x00\x1f\u2028\"\\/", -0.0, 1e300, 5e-324, 0.1 + 0.2, 2**70, -2**63]}, [[[]], [{}], {"a": {}}],
          {}, [], "text", 1.5, None, True]


def test_a_real_analysis_is_written_as_the_standard_library_writes_it() -> None:
    body = json.loads(to_json(analyze([TRACES / "llama4l-eager-h200"])))
    assert len(body) == 2 and body["schema_version"] == 1 and len(json.dumps(body)) > 10_000  # one trace and the version
    assert indented_json(body) == json.dumps(body, indent=1)


@pytest.mark.parametrize("value", TRICKY, ids=range(len(TRICKY)))
def test_values_writers_differ_on_are_written_the_same(value: object) -> None:
    assert indented_json(value) == json.dumps(value, indent=1)


@pytest.mark.parametrize("value", [{"a": float("nan")}, [float("inf"), -float("inf")]])
def test_nan_and_infinity_are_written_as_the_standard_library_writes_them(value: object) -> None:
    assert indented_json(value) == json.dumps(value, indent=1)

"""``fuseprof compare A B``: two capture folders side by side, per case, variant, shape and dtype. Expected values
from the folders' own timings.parquet files, read here with pandas alone."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fuseprof.cli import main
from tests.conftest import TRACES

A, B = TRACES / "bench-h200-20261129t092218z", TRACES / "bench-h200-20261129t174201z"


def _raw(folder: Path) -> pd.DataFrame:
    """The variants of a bench bundle's timings.parquet, keyed by case, variant, shape and dtype."""
    raw = pd.read_parquet(folder / "timings.parquet")
    raw = raw[~raw["variant"].astype(str).str.startswith("copy")]
    return raw.assign(**{k: raw[k].astype(str) for k in ("case", "variant", "shape", "dtype")}).set_index(
        ["case", "variant", "shape", "dtype"])


def test_two_bench_runs_compared_per_case_variant_shape_and_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(A), str(B), "--format", "json"]) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out))
    a, b = _raw(A), _raw(B)
    both = a.index.intersection(b.index)
    assert len(both) > 100 and (rows["timed"] == "GPU").all()  # every bench row, on one side or both, has a GPU time
    keyed = rows.set_index(["case", "variant", "shape", "dtype"])
    for key in both:
        row = keyed.loc[key]
        assert row["a_ns"] == a.loc[key, "gpu_median_ns"] and row["b_ns"] == b.loc[key, "gpu_median_ns"]
        assert row["ratio"] == pytest.approx(b.loc[key, "gpu_median_ns"] / a.loc[key, "gpu_median_ns"], rel=1e-9)
        spread = max((s.loc[key, "gpu_p90_ns"] - s.loc[key, "gpu_p10_ns"]) / s.loc[key, "gpu_median_ns"] for s in (a, b))
        beyond = abs(row["ratio"] - 1) > spread / 2
        assert row["change"] == ("within noise" if not beyond else "slower" if row["ratio"] > 1 else "faster"), key
    only_a = a.index.difference(b.index)
    assert set(keyed.loc[only_a, "change"]) == {"only in A"} and len(keyed) == len(a.index.union(b.index))


def test_a_folder_against_itself_is_within_noise_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(A), str(A), "--format", "json"]) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert (rows["ratio"] == 1.0).all() and (rows["change"] == "within noise").all()


@pytest.mark.parametrize("argv, message", [
    (["{A}", "{A}", "{A}"], "give one folder, or two (A and B); got 3"),
    (["{A}", "{missing}"], "missing: no such file or directory"),  # said while the arguments are read
    (["{A}", "{empty}"], "holds no fuseprof bundle"),
    (["{A}", "{verify}"], "bundles/verify: no such file or directory"),
])
def test_compare_two_errors_are_one_line(argv: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    names = {"{A}": str(A), "{missing}": str(tmp_path / "missing"), "{empty}": str(tmp_path),
             "{verify}": str(TRACES / "verify")}
    assert main(["compare", *(names[a] for a in argv)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err


def test_a_key_captured_twice_in_a_folder_is_taken_from_the_newer_capture(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A folder holding a capture and a later bench of the same case, variant and shape: the row is the one
    whose manifest says it was made later, whatever the bundles' names sort as."""
    older, newer = TRACES / "silu_mul-bfloat16-h200-20261129t173937z", B
    created = {p.name: json.loads((p / "manifest.json").read_text())["created_utc"] for p in (older, newer)}
    assert created[newer.name] > created[older.name] and older.name > newer.name  # the names sort the other way
    for bundle in (older, newer):
        (tmp_path / bundle.name).symlink_to(bundle)
    assert main(["compare", str(tmp_path), str(A), "--format", "json"]) == 0
    rows = pd.DataFrame(json.loads(capsys.readouterr().out))
    both = _raw(older).index.intersection(_raw(newer).index)
    keyed = rows.set_index(["case", "variant", "shape", "dtype"])
    assert len(both) and set(keyed.loc[both, "a_bundle"]) == {newer.name}

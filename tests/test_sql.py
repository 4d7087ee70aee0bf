"""``fuseprof sql``: the queries a user writes, on committed and shared traces, answer what the matching
``fuseprof analyze`` tables say (each computed there by pandas, here by DuckDB over the rows)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from fuseprof.analysis import analyze
from fuseprof.cli import main
from fuseprof.errors import FuseprofError
from fuseprof.export.sql import catalog, query, sql
from tests.conftest import FIXTURES, shared_traces

pytest.importorskip("duckdb")
TRAINING = FIXTURES / "truth" / "train_foreach.json.gz"  # three profiler steps, GEMMs, modules


def test_top_kernels_equal_the_analysis_table() -> None:
    result = analyze([TRAINING])[0]
    got = sql("SELECT name, count(*) AS count, sum(dur_ns) AS time_ns FROM kernels GROUP BY name "
              "ORDER BY time_ns DESC, name LIMIT 15", [result])
    expected = result.top_kernels[["name", "count", "time_ns"]].sort_values(["time_ns", "name"],
                                                                             ascending=[False, True])
    # values and names to the bit; not the text's storage (the analysis holds Python-backed text:
    # fuseprof.parse.text_arrays; DuckDB's answer is built with pandas' default)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False,
                                  check_column_type=False)


def test_gemm_time_per_step_equals_each_steps_categories() -> None:
    got = sql("SELECT profiler_step, gemm_ns FROM gemm_per_step ORDER BY profiler_step", [TRAINING])
    assert len(got) == 3
    for step, gemm_ns in zip(got["profiler_step"], got["gemm_ns"]):
        alone = analyze([TRAINING], window=str(step).removeprefix("ProfilerStep#"))[0].categories
        assert int(gemm_ns) == int(alone.set_index("category").loc["GEMM", "time_ns"])


def test_top_kernels_per_module_from_the_kernel_op_view() -> None:
    result = analyze([TRAINING])[0]
    got = sql("SELECT module, kernel, sum(dur_ns) AS time_ns FROM kernel_ops WHERE module IS NOT NULL "
              "GROUP BY module, kernel QUALIFY row_number() OVER (PARTITION BY module ORDER BY sum(dur_ns) DESC, "
              "kernel) = 1 ORDER BY module", [result])
    events = result.events[result.events["module"].notna()]
    per = events.groupby(["module", "name"])["dur_ns"].sum().reset_index()
    top = per.sort_values(["dur_ns", "name"], ascending=[False, True]).groupby("module").head(1).sort_values("module")
    assert got["kernel"].tolist() == top["name"].tolist() and got["time_ns"].astype(int).tolist() == top["dur_ns"].tolist()
    assert len(got) > 3


def test_kernel_op_view_joins_each_kernel_to_the_op_that_launched_it() -> None:
    result = analyze([TRAINING])[0]
    tables = catalog([result])
    joined = query(tables, "SELECT count(*) AS n FROM kernel_ops k JOIN kernels USING (trace, start_ns, dur_ns) "
                           "WHERE kernels.linked_by = 'External id' AND k.op_start_ns = kernels.op_start_ns")
    linked = int((result.events["linked_by"] == "External id").sum())
    assert linked > 0 and int(joined["n"].iloc[0]) >= linked


@pytest.mark.shared
def test_straggler_waits_per_collective_equal_the_skew_table() -> None:
    pair = sorted((shared_traces() / "h200_2gpu").glob("tp_mlp_straggle_rank*.json.gz"))
    results = analyze(pair)
    got = sql("SELECT match, rank, max(start_ns) OVER (PARTITION BY match) - start_ns AS wait_ns FROM collectives "
              "QUALIFY count(*) OVER (PARTITION BY match) = 2 ORDER BY match, rank", results)
    skew = catalog(results)["collective_skew"]
    expected = skew.melt(id_vars="match", value_vars=["wait_ns_rank0", "wait_ns_rank1"], var_name="rank",
                         value_name="wait_ns").assign(rank=lambda f: f["rank"].str[-1].astype(int))
    merged = got.merge(expected, on=["match", "rank"], suffixes=("", "_table"))
    assert len(merged) == len(expected) == len(got) > 0
    assert (merged["wait_ns"] == merged["wait_ns_table"]).all()


def test_the_command_prints_rows_and_says_what_a_bad_query_is(capsys) -> None:
    assert main(["sql", "SELECT category, sum(dur_ns) AS time_ns FROM kernels GROUP BY 1 ORDER BY 2 DESC",
                 str(TRAINING), "--format", "csv"]) == 0
    printed = pd.read_csv(io.StringIO(capsys.readouterr().out))
    categories = analyze([TRAINING])[0].categories
    assert dict(zip(printed["category"], printed["time_ns"])) == dict(zip(categories["category"],
                                                                          categories["time_ns"]))
    assert main(["sql", "SELECT nope FROM kernels", str(TRAINING)]) == 2
    assert "sql:" in capsys.readouterr().err
    assert main(["sql", "--tables", str(TRAINING), "--format", "json"]) == 0
    listed = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert {"kernels", "cpu_ops", "audit", "fusion", "kernel_ops", "gemm_per_step"} <= set(listed["table"])
    with pytest.raises(FuseprofError, match="sql:"):
        sql("SELECT * FROM no_such_table", [TRAINING])


def test_the_docs_list_every_table_and_column() -> None:
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "interop.md").read_text()
    listed = {line.split("`")[1]: line.split("|")[2] for line in text.splitlines() if line.startswith("| `")}
    from fuseprof.export.sql import described

    tables = described(catalog(analyze([TRAINING])))
    for name, part in tables.groupby("table"):
        assert name in listed, name
        assert [c.strip() for c in listed[name].split(",")] == part["column"].tolist(), name


def test_one_select_only_and_every_column_shown(tmp_path, capsys) -> None:
    with pytest.raises(FuseprofError, match="2 statements"):
        sql("SELECT 1; SELECT 2", [TRAINING])
    written = tmp_path / "copied.csv"
    with pytest.raises(FuseprofError, match="COPY statement"):
        sql(f"COPY (SELECT 1) TO '{written}'", [TRAINING])
    assert not written.exists()
    assert main(["sql", "SELECT collective, name FROM kernels LIMIT 1", str(TRAINING)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["collective", "name"]  # an all-null column too
    assert main(["sql", "SELECT name FROM kernels WHERE dur_ns < 0", str(TRAINING)]) == 0
    assert capsys.readouterr().out.strip().endswith("(0 rows)")

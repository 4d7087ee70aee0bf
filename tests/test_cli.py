"""The CLI on the committed traces, the CPU capture path, and argument errors as messages."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

import fuseprof
from fuseprof.cli import main
from tests.conftest import FIXTURES, ROOT, SEED_BUNDLE, TRACES


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_ls_lists_the_committed_bundle(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["ls", str(TRACES), "--wide"], capsys)  # one line a bundle, however long
    assert code == 0
    line = next(line for line in out.splitlines() if SEED_BUNDLE.name in line)
    for word in ("rmsnorm_swiglu", "eager,compiled", "128x4096,512x4096,1024x4096,1024x8192", "NVIDIA H200", "ok"):
        assert word in line


def test_show_json_round_trips_the_kernel_frame(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["show", str(SEED_BUNDLE), "--format", "json", "--source", "ncu"], capsys)
    rows = json.loads(out)
    assert code == 0 and len(rows) == 56
    assert {r["source"] for r in rows} == {"ncu"}


def test_show_csv_of_timings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["show", str(SEED_BUNDLE), "--timings", "--format", "csv"], capsys)
    header, *body = out.strip().splitlines()
    assert code == 0 and len(body) == 8
    assert header.split(",")[:4] == ["bundle", "case", "variant", "shape"]


def test_summary_shows_bytes_and_launches_per_call(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["summary", str(SEED_BUNDLE), "--format", "json"], capsys)
    rows = {(r["variant"], r["shape"]): r for r in json.loads(out)}
    assert code == 0 and len(rows) == 8
    eager, fused = rows[("eager", "1024x4096")], rows[("compiled", "1024x4096")]
    assert (eager["kernels_per_call"], fused["kernels_per_call"]) == (13, 1)
    assert eager["dram_bytes"] == 192_691_712 and fused["dram_bytes"] == 16_812_288
    assert eager["nominal_bytes"] == fused["nominal_bytes"] == 2 * (3 * 1024 * 4096 + 4096)


def test_columns_documents_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["columns"], capsys)
    assert code == 0
    assert "dram__bytes_read.sum" in out and "sm__warps_active.avg.pct_of_peak_sustained_active" in out


def test_cuda_capture_without_gpu_is_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    code, _, err = run(["profile", "rmsnorm_swiglu", "--out", str(tmp_path)], capsys)
    assert code == 2
    assert "no CUDA GPU" in err and "--device cpu" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile", "no_such_case", "--device", "cpu"], "Built-in cases: add_rms_norm, decoder_layer, gemm_bias_gelu, llama_mlp, qkv_projection, rmsnorm_swiglu, silu_and_mul, silu_mul"),
        (["profile", "rmsnorm_swiglu", "--device", "cpu", "--shapes", "12xq"], "not of the form MxN"),
        (["profile", "rmsnorm_swiglu", "--device", "cpu", "--variants", "fused9"], "choose from: eager, compiled"),
        (["profile", "rmsnorm_swiglu", "--device", "cpu", "--dtype", "int8"], "--dtype 'int8'"),
        (["profile", "rmsnorm_swiglu", "--device", "tpu"], "use cuda, cuda:N or cpu"),
        (["show", "/nonexistent/bundle"], "no such file or directory"),
        (["ls", str(FIXTURES)], None),
    ],
)
def test_bad_arguments_are_messages(args: list[str], message: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(args, capsys)
    if message is None:
        assert code == 0 and "no bundles" in out
    else:
        assert code == 2 and message in err and "Traceback" not in err


def test_cpu_capture_path_end_to_end_with_a_user_case(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(FIXTURES))
    code, out, err = run(["profile", "user_case:CASE", "--device", "cpu", "--shapes", "8x64,3x100",
                          "--repeats", "5", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    bundle = Path(out.strip())
    timings = fuseprof.load_timings(bundle)
    assert timings["correct"].all() and (timings["rel_err"] < 1e-6).all()
    assert timings["timing_method"].eq("cpu-perf-counter").all()
    kernels = fuseprof.load(bundle)
    assert set(kernels["cpu_op"]) == {"aten::silu", "aten::mul"}
    assert kernels.groupby("shape").size().to_dict() == {"3x100": 6, "8x64": 6}  # 2 ops x 3 profiled calls
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["ncu"] == {"status": "skipped", "reason": "CPU device"}
    assert manifest["command_line"][0] == sys.argv[0]
    # the traced window was also run without the profiler, and the trace itself carries those times (issue 59)
    raw = json.loads(gzip.decompress((bundle / "raw" / "profiler_trace.json.gz").read_bytes()))
    measured = json.loads(raw["fuseprof_unprofiled"]) if isinstance(raw["fuseprof_unprofiled"], str) \
        else raw["fuseprof_unprofiled"]
    assert measured["method"] == "host clock" and measured["torch"] == __import__("torch").__version__
    assert len(measured["step_ns"]) == 5 and all(isinstance(t, int) and t > 0 for t in measured["step_ns"])
    assert manifest["profiler"]["unprofiled_window_ns"] == measured["step_ns"]


def test_summary_filters_by_case(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["summary", str(TRACES), "--case", "silu_and_mul", "--format", "json"], capsys)
    rows = json.loads(out)
    assert code == 0 and {r["case"] for r in rows} == {"silu_and_mul"}
    code, _, err = run(["summary", str(TRACES), "--case", "nope"], capsys)
    assert code == 2 and "cases: add_rms_norm" in err


def _parsers():
    from fuseprof.cli import build_parser

    root = build_parser()
    sub = next(a for a in root._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    return root, sub.choices


def test_every_option_has_help_and_every_help_renders(capsys) -> None:
    root, commands = _parsers()
    for name, parser in commands.items():
        for action in parser._actions:
            assert action.help, f"fuseprof {name} {action.option_strings or action.dest} has no help text"
        parser.format_help()  # a stray % in a help string breaks --help
    assert "(default:" in commands["profile"].format_help()


def test_summary_is_one_readable_line_per_case_variant_and_shape_under_its_bundle(capsys) -> None:
    from fuseprof.cli import main

    assert main(["summary", str(TRACES)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120
    rows = [line for line in lines if line.endswith((" yes", " WRONG"))]
    assert len(rows) == 115  # capture rows only; the 960 bench rows are one line pointing to compare
    # each capture bundle's name stands above its rows, with its case and dtype
    captures = {p.name for p in TRACES.iterdir() if not p.name.startswith(("bench-", "ceilings-", "llama4l-", "run-"))}
    assert captures <= {line.split("  (")[0] for line in lines}
    assert any(line.startswith("+ 3 bench bundle(s)") for line in lines)


def test_the_command_reference_is_written_from_the_command_table() -> None:
    """docs/commands.md is what `python -m fuseprof.commands.reference` writes today, and names every verb
    and every option the parser has."""
    import argparse

    from fuseprof.cli import build_parser
    from fuseprof.commands import COMMANDS
    from fuseprof.commands.reference import markdown

    text = (ROOT / "docs" / "commands.md").read_text()
    assert text == markdown(), "docs/commands.md is stale: run python -m fuseprof.commands.reference"
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(COMMANDS)
    for name, parser in sub.choices.items():
        assert f"### `fuseprof {name}`" in text
        for action in parser._actions:
            for option in action.option_strings:
                assert option in text or option in ("-h", "--help"), (name, option)


@pytest.mark.parametrize("argv", [
    ["ls", "{T}"], ["show", "{T}/silu_mul-bfloat16-h200-20261129t180657z"],
    ["show", "{T}/silu_mul-bfloat16-h200-20261129t180657z", "--timings"], ["summary", "{T}"], ["compare", "{T}"],
    ["compare", "{T}/bench-h200-20261129t092218z", "{T}/bench-h200-20261129t174201z"],
    ["breakdown", "{T}/decoder_layer-bfloat16-h200-20261129t174445z"], ["roofline", "{T}"],
    ["analyze", "{T}/llama4l-eager-h200"], ["fusion", "{T}/llama4l-eager-h200"],
    ["diff", "{T}/llama4l-eager-h200", "{T}/llama4l-compiled-h200"], ["columns"], ["cases"],
    ["analyze", "{F}/tp2/tp_mlp-rank0.json.gz", "{F}/tp2/tp_mlp-rank1.json.gz"],
    ["analyze", "{F}/h200-graphs"], ["analyze", "{F}/thirdparty/b200_eager.json.gz"],
])
def test_every_terminal_table_fits_120_columns(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace("{T}", str(TRACES)).replace("{F}", str(ROOT / "tests" / "fixtures")) for a in argv]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= 120, max(lines, key=len)
    if argv[0] in ("analyze", "fusion", "roofline", "show", "ls"):  # their content is wider than 120
        assert main([*argv, "--wide"]) == 0
        assert max(len(line) for line in capsys.readouterr().out.splitlines()) > 120


@pytest.mark.shared
def test_check_prints_the_integrity_checks_and_a_missing_capture_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """A graph replay given without its capture: the raw trace's replayed kernels (those sharing a
    hipGraphLaunch's correlation id) have no op, so the attribution checks fail — a capture setting (issue 63,
    point 4: what the capture left out is a note naming what fills it in, exit 0), a failure, exit 1, only with
    --require graph-capture; with the capture every check passes, exit 0."""
    from tests.conftest import shared_traces

    replay = shared_traces() / "sglang_Qwen3-8B_decode.json.gz"
    import gzip
    raw = json.loads(gzip.decompress(replay.read_bytes()))["traceEvents"]
    graphs = {e["args"]["correlation"] for e in raw if e.get("cat") == "cuda_runtime" and "GraphLaunch" in e["name"]}
    assert sum(e.get("cat") == "kernel" and e["args"].get("correlation") in graphs for e in raw) > 500
    assert main(["check", str(replay)]) == 0
    out, err = capsys.readouterr()
    assert "graph_kernel_time_attributed_pct" in out and "FAILED" in out and "setting" in out
    assert "failed:" not in err and "graph_kernel_time_attributed_pct (capture setting 'graph-capture'" in err
    assert main(["check", str(replay), "--require", "graph-capture"]) == 1
    assert "graph_kernel_time_attributed_pct (--require graph-capture)" in capsys.readouterr().err
    assert main(["check", str(replay), str(shared_traces() / "sglang_decode_capture_bs32.json.gz")]) == 0
    assert "FAILED" not in capsys.readouterr().out
    assert main(["check", str(replay), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["check"]: r["kind"] for r in rows if not r["ok"]}["graph_kernel_time_attributed_pct"] == "setting"


def test_names_are_never_broken_when_a_table_wraps() -> None:
    """The committed bundles' names (up to 48 characters), in a text column beside other text and numbers that
    must wrap to fit 80 columns, a word before and after each: each name stays whole on one line."""
    import pandas as pd

    from fuseprof.commands.render import table_text

    names = sorted(p.name for p in TRACES.iterdir() if p.is_dir() and len(p.name) <= 48)
    cells = [f"in {n} (captured)" for n in names]  # each name once: a broken one is nowhere whole
    frame = pd.DataFrame({"bundle": cells, "note": ["several words that have to wrap onto more lines " * 2] * len(cells),
                          "µs": [1234.567] * len(cells)})
    lines = table_text(frame, width=80).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert all(any(n in line for line in lines) for n in names), [n for n in names if not any(n in x for x in lines)]


def test_version_and_help_that_says_each_default_once(capsys) -> None:
    """`fuseprof --version` names the installed version; no subcommand's help ends an option with "(default:
    None)" or "(default: False)", nor says a default its own text already gives."""
    from importlib.metadata import version

    from fuseprof.cli import build_parser
    from fuseprof.commands import COMMANDS

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"fuseprof {version('fuseprof')}"
    parser = build_parser()
    for name in COMMANDS:
        text = " ".join(parser._subparsers._group_actions[0].choices[name].format_help().split())  # type: ignore[union-attr]
        assert "(default: None)" not in text and "(default: False)" not in text, name
        assert not re.search(r"default: [^()]*\) \(default:", text), name

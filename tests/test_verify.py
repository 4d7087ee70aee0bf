"""``fuseprof fusion --verify``: chains replayed from their recorded ops, checked on the CPU; the H200's
verification bundles read against the finder's predictions of today. The GPU run is tests/test_gpu_verify.py."""

from __future__ import annotations

import gzip
import hashlib
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest
import torch

from fuseprof.analysis import analyze
from fuseprof.capture.correctness import compare
from fuseprof.cli import main
from fuseprof.model.registry_data import DEFAULT
from fuseprof.verify.chains import chains_to_verify, recorded_strides
from fuseprof.verify.replay import RecordedOp, ReplayError, build_program
from tests.conftest import ROOT, TRACES, held_safely

EAGER = TRACES / "llama4l-eager-h200"
RAW = EAGER / "raw" / "0-profiler_trace.json.gz"
VERIFY = ROOT / "traces" / "verify"
BF16 = "c10::BFloat16"


@pytest.fixture(scope="module")
def chains():
    (result,) = analyze(EAGER)
    return chains_to_verify(result.events, result.fusion, recorded_strides(RAW), 3, DEFAULT)


def _raw_ops(name: str, trace: Path = RAW) -> list[dict]:
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return [e["args"] for e in events if e.get("cat") == "cpu_op" and e["name"] == name]


def test_the_rope_chain_replays_the_recorded_ops_with_their_strides(chains) -> None:
    rope = chains[0]
    assert rope.chain_class == "RoPE + KV-cache write" and rope.chain_kernels == 15
    program = build_program(rope.ops, DEFAULT)
    assert [line.split("(")[0] for line in program.describe()] == [
        "aten::mul.Tensor", "aten::neg.default", "aten::cat.default", "aten::mul.Tensor", "aten::add.Tensor",
        "aten::mul.Tensor", "aten::neg.default", "aten::cat.default", "aten::mul.Tensor", "aten::add.Tensor",
        "aten::index_copy_.default", "aten::index_copy_.default", "aten::fill_.Scalar", "aten::fill_.Scalar",
        "aten::where.self"]
    # rotate-half: cat takes the neg's output and an input; add takes both products; the KV cache is written
    assert program.describe()[2] == "aten::cat.default([op1, in3], -1)"
    assert program.describe()[4] == "aten::add.Tensor(op3, op0, alpha=1)"
    # the decode step's q half (1 token) as the raw trace recorded it: a transposed view, not contiguous
    neg = next(a for a in _raw_ops("aten::neg") if a["Input Dims"] == [[1, 16, 1, 64]])
    q_half = program.inputs[2]
    assert list(q_half.dims) == neg["Input Dims"][0] and list(q_half.strides) == neg["Input Strides"][0]
    # the cache is an input the chain writes (an output), and its indices are valid, unique rows of dim 2
    copy = next(a for a in _raw_ops("aten::index_copy_") if a["Input Dims"][2] == [1])
    cache = program.inputs[program.outputs[-1].index]
    assert list(cache.dims) == copy["Input Dims"][0] and cache.bound is None
    index = next(s for s in program.inputs if s.dtype == torch.int64)
    assert index.bound == copy["Input Dims"][0][int(copy["Concrete Inputs"][1])] == 1024 and index.unique


def test_the_rmsnorm_multiplies_h_not_its_square(chains) -> None:
    """h·rsqrt(mean(h²)+eps): the mul takes the cast h (op1), not pow's output (op2), which the mean reduced."""
    program = build_program(chains[1].ops, DEFAULT)
    assert program.describe()[6] == "aten::mul.Tensor(op1, op5)"


def test_replays_agree_with_their_float64_twin(chains) -> None:
    for chain in chains:
        program = build_program(chain.ops, DEFAULT)
        inputs = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(1))
        wide = [x.double() if x.dtype.is_floating_point else x.clone() for x in inputs]
        expected = program.run(*wide, device=torch.device("cpu"), float64=True)
        check = compare(program.run(*inputs, device=torch.device("cpu")), expected, 1e-2)
        assert check["correct"], (chain.signature, check)
        assert all(o.dtype != torch.float64 for o in program.run(*inputs, device=torch.device("cpu"))
                   if o.is_floating_point())


def test_index_tensors_hold_unique_valid_rows() -> None:
    op = RecordedOp("aten::index_copy_", [[1, 4, 1024, 128], [], [256], [1, 4, 256, 128]],
                    [BF16, "Scalar", "long int", BF16], ["", "2", "", ""], [[524288, 131072, 128, 1], [], [1],
                                                                             [131072, 128, 512, 1]])
    program = build_program([op], DEFAULT)
    _, index, source = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(0))
    assert index.unique().numel() == 256 and int(index.max()) < 1024
    assert source.stride() == (131072, 128, 512, 1)  # the recorded strides, not contiguous ones


def test_a_broadcast_input_keeps_its_zero_stride() -> None:
    """An expanded tensor (stride 0, as `x.expand(...)` records it) is made as a view over one row."""
    op = RecordedOp("aten::mul", [[64, 2048], [64, 2048]], [BF16, BF16], ["", ""], [[2048, 1], [0, 1]])
    program = build_program([op], DEFAULT)
    x, row = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(0))
    assert row.stride() == (0, 1) and row.untyped_storage().nbytes() == 2048 * 2 and torch.equal(row[0], row[63])
    assert torch.equal(program.run(x, row, device=torch.device("cpu"))[0], x * row)


def test_write_only_and_in_place_ops_replay_as_the_trace_ran_them() -> None:
    h = [1, 1, 2048]
    to_float = RecordedOp("aten::copy_", [h, h, []], ["float", BF16, "Scalar"], ["", "", "False"])
    accumulate = RecordedOp("aten::add_", [h, h, []], [BF16, BF16, "Scalar"], ["", "", "1"])
    scale = RecordedOp("aten::mul_", [h, []], ["float", "Scalar"], ["", "2"])
    program = build_program([to_float, accumulate, scale], DEFAULT)
    # .to() allocates its destination; add_ on an input becomes add (same bytes, and a second call gives the
    # same result); mul_ on the chain's own buffer stays in place
    assert program.describe() == ["aten::copy_.default(new0, in0, False)", "aten::add.Tensor(in1, in2, alpha=1)",
                                  "aten::mul_.Scalar(op0, 2)"]
    inputs = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(0))
    first = [t.clone() for t in program.run(*inputs, device=torch.device("cpu"))]
    second = program.run(*inputs, device=torch.device("cpu"))
    assert len(first) == 2 and all(torch.equal(a, b) for a, b in zip(first, second))


@pytest.mark.parametrize(("op", "message"), [
    (RecordedOp("vllm::rotary_embedding", [[4, 8]], [BF16], [""]), "a custom op"),
    (RecordedOp("aten::index", [[2048, 128], []], [BF16, ""], ["", ""]), "recorded no value for indices"),
    (RecordedOp("aten::mul", None, None, None), "record_shapes=True"),  # type: ignore[arg-type]
    (RecordedOp("aten::mul", [[4, 8], [3, 5]], [BF16, BF16], ["", ""]), "do not run"),
])
def test_ops_that_cannot_be_replayed_say_why(op, message) -> None:
    with pytest.raises(ReplayError, match=message):
        build_program([op], DEFAULT)


def test_verify_on_a_cpu_checks_outputs_and_writes_a_bundle(tmp_path: Path, capsys) -> None:
    assert main(["fusion", str(EAGER), "--verify", "2", "--verify-device", "cpu", "--out", str(tmp_path),
                 "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in rows] == ["outputs agree (no GPU time: run on the CPU)"] * 2
    bundle = Path(rows[0]["bundle"])
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["kind"] == "verify" and manifest["trace_sha256_128"] == hashlib.sha256(RAW.read_bytes()).hexdigest()[:32]
    timings = pd.read_parquet(bundle / "timings.parquet")
    assert sorted(timings["variant"]) == ["compiled", "compiled", "eager", "eager"] and timings["correct"].all()
    assert timings["replay_program"].str.startswith("aten::").all()


def test_a_chain_torch_cannot_run_on_this_device_says_torchs_reason(tmp_path: Path, capsys) -> None:
    """The eager trace with every bf16 tensor recorded as float8_e4m3fn: the CPU has no float8 kernels for most
    ops, so `fusion --verify` on it reports each such chain as not replayed with torch's own reason, and no
    file and line of fuseprof's (the replay is fuseprof's code, not the user's)."""
    trace = json.loads(gzip.decompress(RAW.read_bytes()))
    for event in trace["traceEvents"]:
        types = (event.get("args") or {}).get("Input type")
        if isinstance(types, list):
            event["args"]["Input type"] = ["c10::Float8_e4m3fn" if t == BF16 else t for t in types]
    fp8 = tmp_path / "fp8.json"
    fp8.write_text(json.dumps(trace))
    assert main(["fusion", str(fp8), "--verify", "2", "--verify-device", "cpu", "--out", str(tmp_path / "out"),
                 "--format", "json"]) == 0
    said = [r["verdict"] for r in json.loads(capsys.readouterr().out)]
    assert said and all(s.startswith("not replayed: the replay does not run on this cpu: ") for s in said), said
    assert any("not implemented for 'Float8_e4m3fn'" in s for s in said) and not any("fuseprof/" in s for s in said)


@pytest.mark.parametrize("recorded", ["c10::Float2_e1m0", "GenericList"])
def test_an_argument_type_fuseprof_does_not_know_is_named(recorded: str) -> None:
    with pytest.raises(ReplayError, match=f"recorded argument type '{recorded}' is neither a dtype"):
        build_program([RecordedOp("aten::mul", [[4, 8], [4, 8]], [recorded, recorded], ["", ""])], DEFAULT)


TRUTH = ROOT / "tests" / "fixtures" / "truth"


@pytest.mark.parametrize(("capture", "chains", "precision"), [
    # amax → scale → x / scale → float8 cast: checked at float8's rounding, not bf16's; the scale's unrecorded
    # Python number (448 in the model) is neutral, so the cast is not all zeros
    ("fp8_gemm", 1, {"float8_e4m3fn"}),
    # a training step: an in-place update of a parameter (each variant gets inputs of its own), an RMSNorm
    # whose fp32 result is cast to bf16 (bf16's tolerance), a RoPE backward reading views the chain does not hold
    ("train_foreach", 4, {"float32", "bfloat16"}),
])
def test_verify_on_captures_of_known_truth_agrees(capture: str, chains: int, precision: set[str], tmp_path: Path,
                                                 capsys) -> None:
    assert main(["fusion", str(TRUTH / f"{capture}.json.gz"), "--verify", str(chains), "--verify-device", "cpu",
                 "--out", str(tmp_path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in rows] == ["outputs agree (no GPU time: run on the CPU)"] * chains
    timings = pd.read_parquet(Path(rows[0]["bundle"]) / "timings.parquet")
    assert timings["correct"].all() and set(timings["dtype"]) == precision
    assert (timings["rel_err"] > 0).all()  # an all-zero float8 output would be "exact" against zeros


def test_a_string_infinity_is_a_float() -> None:
    """A mask's fill value is recorded as '-inf', which literal_eval does not read."""
    mask = RecordedOp("aten::masked_fill", [[2, 64, 64], [64, 64], []], ["float", "bool", "Scalar"], ["", "", "-inf"])
    program = build_program([mask], DEFAULT)
    assert program.describe() == ["aten::masked_fill.Scalar(in0, in1, -inf)"]
    scores, where = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(0))
    (out,) = program.run(scores, where, device=torch.device("cpu"))
    assert torch.equal(out.isneginf(), where.expand_as(out)) and torch.equal(out[~where.expand_as(out)], scores[~where.expand_as(out)])


@pytest.mark.parametrize(("argv", "message"), [
    (["--verify", "0"], "--verify 0: give a positive number"),
    (["--verify", "1", "--repeats", "0"], "--repeats 0"),
    ([str(TRACES / "llama4l-compiled-h200"), "--verify", "1"], "give one trace"),
])
def test_verify_arguments_are_checked(argv, message, tmp_path: Path, capsys) -> None:
    assert main(["fusion", str(EAGER), *argv, "--out", str(tmp_path)]) != 0
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message for a machine without a GPU")
def test_verify_on_cuda_without_a_gpu_names_the_cpu_option(tmp_path: Path, capsys) -> None:
    assert main(["fusion", str(EAGER), "--verify", "1", "--verify-device", "cuda", "--out", str(tmp_path)]) != 0
    assert "--verify-device cpu" in capsys.readouterr().err


def _committed() -> pd.DataFrame:
    frames = []
    for bundle in (VERIFY / "verify-h200-20261130t221153z", VERIFY / "verify-h200-20261130t221209z"):
        timings = pd.read_parquet(bundle / "timings.parquet")
        frames.append(timings.assign(trace=json.loads((bundle / "manifest.json").read_text())["trace"]))
    return pd.concat(frames, ignore_index=True)


def test_the_h200_bundles_hold_todays_predictions_and_programs() -> None:
    """The committed bundles' predictions and replayed programs equal what this code makes of the traces."""
    committed = _committed()
    for trace, part in committed.groupby("trace"):
        (result,) = analyze(ROOT / Path(trace).parent.parent)
        # by signature: a row's number moves when another class of opportunity ranks above it
        now = {c.signature: c for c in chains_to_verify(result.events, result.fusion, recorded_strides(ROOT / trace), 50,
                                                           DEFAULT)}
        for row in part.drop_duplicates("case").itertuples():
            chain = now[row.signature]
            assert (chain.signature, chain.chain_kernels) == (row.signature, row.chain_kernels)
            stored = [float("nan") if pd.isna(v) else float(v) for v in (row.trace_chain_ns, row.predicted_fused_ns)]
            assert [chain.trace_chain_ns, chain.predicted_fused_ns] == pytest.approx(stored, nan_ok=True)
            if pd.notna(row.replay_program):  # and the replay ran the program this code builds
                assert "\n".join(build_program(chain.ops, DEFAULT).describe()) == row.replay_program


def test_the_h200_predictions_are_within_the_goal() -> None:
    """Each replayed chain's realised saving (eager − compiled GPU medians of one run, from the raw rows)
    against its predicted saving: median |error| ≤ 15 %, worst ≤ 35 % (issue 19's goal), outputs agreeing."""
    committed = _committed()
    timed = committed[committed["variant"].notna()]
    assert timed["correct"].all() and len(timed) == 17  # 7 chains eager and compiled, 3 with fuseprof's kernel
    assert sorted(timed.loc[timed["variant"] == "fuseprof", "signature"].str[:22]) == [
        "aten::add → aten::copy", "aten::add → aten::copy", "aten::silu → aten::mul"]
    errors = []
    for _, part in timed.groupby(["trace", "case"]):
        gpu = part.set_index("variant")["gpu_median_ns"]
        realised = gpu["eager"] - gpu["compiled"]
        errors.append(abs(part["predicted_saving_ns"].iloc[0] - realised) / realised)
    assert statistics.median(errors) <= 0.15 and max(errors) <= 0.35
    # the one chain not replayed is the decoder layer's RoPE: its aten::index has no recorded indices
    skipped = committed[committed["variant"].isna()]
    assert skipped["skipped"].str.contains("recorded no value for indices").all() and len(skipped) == 1


@pytest.mark.parametrize(("row", "case"), [(0, "add_rms_norm"), (1, "silu_mul")])
def test_fuseprof_kernels_get_the_chains_tensors(row, case, chains) -> None:
    """The kernel rows map a replay's tensors onto the kernel's arguments: the case's float64 reference on
    them equals the chain's float64 replay (on the CPU, where the CUDA kernels themselves do not run)."""
    from fuseprof.case import load_case
    from fuseprof.verify.kernels import arguments, kernel_variant, output

    match = DEFAULT.kernel_matches[row]
    if case == "add_rms_norm":
        program = build_program(chains[1].ops, DEFAULT)
    else:
        m = [64, 1024]
        program = build_program([RecordedOp("aten::silu", [m], [BF16], [""]),
                                 RecordedOp("aten::mul", [m, m], [BF16, BF16], ["", ""])], DEFAULT)
    assert kernel_variant(" → ".join(op.split(".")[0] for op in [d.split("(")[0] for d in program.describe()]),
                          program, "cpu", DEFAULT) is None  # CUDA only
    inputs = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(2))
    wide = tuple(x.double() if x.dtype.is_floating_point else x for x in inputs)
    expected = program.run(*wide, device=torch.device("cpu"), float64=True)[0]
    got = output(match, load_case(case).reference(*arguments(match, program, wide)))
    assert torch.allclose(got.reshape(expected.shape), expected, rtol=1e-12, atol=1e-12)


def test_a_bert_trace_replays_layer_norm_outputs_and_gelu_defaults() -> None:
    """A trace fuseprof did not make (H100 BERT, shared by a peer): native_layer_norm's three outputs
    are the chain's outputs, and gelu's unrecorded `approximate` takes its schema default."""
    trace = ROOT / "tests" / "fixtures" / "thirdparty" / "h100_bert_small_uncased.json.gz"
    (result,) = analyze(trace)
    found = {c.signature: c for c in chains_to_verify(result.events, result.fusion, recorded_strides(trace), 6, DEFAULT)}
    norm = build_program(found["aten::add → aten::native_layer_norm"].ops, DEFAULT)
    layer_norm = _raw_ops("aten::native_layer_norm", trace)[0]
    assert norm.describe()[1] == (f"aten::native_layer_norm.default(op0, {layer_norm['Concrete Inputs'][1]}, in2, in3, "
                                  f"{float(layer_norm['Concrete Inputs'][4])})")
    assert [(o.index, o.value) for o in norm.outputs] == [(1, 0), (1, 1), (1, 2)]  # out, mean, rstd
    gelu = build_program(found["aten::gelu → aten::native_layer_norm"].ops, DEFAULT)
    assert gelu.describe()[0] == "aten::gelu.default(in0, approximate='none')"
    for program in (norm, gelu):
        inputs = program.make_inputs(torch.device("cpu"), torch.Generator().manual_seed(3))
        expected = program.run(*[x.double() for x in inputs], device=torch.device("cpu"), float64=True)
        assert compare(program.run(*inputs, device=torch.device("cpu")), expected, 1e-2)["correct"]  # bf16



# --- A shared trace names the ops a replay runs: only pure tensor ops ever run, with bounded memory. -----

@pytest.mark.parametrize(("op", "said"), [
    # a file: from_file maps it (shared=True writes through), here at a path the trace chose
    (RecordedOp("aten::from_file", [[], [], [], [], [], [], []], ["Scalar"] * 3 + [""] * 4,
                ["'{path}'", "True", "64", "", "", "", ""]), "not one of the ops known"),
    (RecordedOp("aten::save", [[]], ["Scalar"], ["'{path}'"]), "not one of the ops known"),
    # random numbers: the process's RNG state
    (RecordedOp("aten::multinomial", [[4, 8], [], [], []], [BF16, "Scalar", "Scalar", ""], ["", "1", "False", ""]),
     "not one of the ops known"),
    (RecordedOp("aten::bernoulli_", [[4, 8], [], []], [BF16, "Scalar", ""], ["", "0.5", ""]), "not one of the ops"),
    # the network, a process, other libraries' ops, and names that reach torch.ops' own methods
    (RecordedOp("c10d::allreduce_", [[[4]]], ["TensorList"], [""]), "a custom op"),
    (RecordedOp("os::system", [[]], ["Scalar"], ["'touch {path}'"]), "a custom op"),
    (RecordedOp("load_library::x", [[]], ["Scalar"], ["'{path}'"]), "a custom op"),
    (RecordedOp("aten::load_library", [[]], ["Scalar"], ["'{path}'"]), "not one of the ops known"),
    # memory the trace's shapes ask for
    (RecordedOp("aten::mul", [[1 << 20, 1 << 20], [1 << 20, 1 << 20]], [BF16, BF16], ["", ""]), "over 8 GiB"),
    (RecordedOp("aten::full", [[], [], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", "", ""],
                ["[65536, 65536, 4]", "1", "6", "", "", ""]), "over 8 GiB"),
    # shapes no profiler writes
    (RecordedOp("aten::mul", [[2.5, 3], [3]], [BF16, BF16], ["", ""]), "not a list of non-negative integers"),
    (RecordedOp("aten::mul", [[-4, 3], [3]], [BF16, BF16], ["", ""]), "not a list of non-negative integers"),
])
def test_a_replay_runs_only_pure_ops_within_bounded_memory(op: RecordedOp, said: str, tmp_path: Path) -> None:
    target = tmp_path / "written-by-a-trace"
    op = RecordedOp(op.name, op.dims, op.types, [str(c).replace("{path}", str(target)) for c in op.concrete])
    with pytest.raises(ReplayError, match=said):
        build_program([op, RecordedOp("aten::mul_", [[64], []], [BF16, "Scalar"], ["", "2"])], DEFAULT)
    held_safely(list(tmp_path.iterdir()), f"replaying {op.name} wrote files")


def test_a_hostile_trace_writes_nothing_through_verify(tmp_path: Path, capsys) -> None:
    """The eager trace with its top chain's first op renamed aten::from_file(PATH, True, 64): `fusion
    --verify` reports that chain (now among the top 8) as not replayed, and no file appears at PATH."""
    target = tmp_path / "victim.bin"
    trace = json.loads(gzip.decompress(RAW.read_bytes()))
    (result,) = analyze(EAGER)
    first = chains_to_verify(result.events, result.fusion, recorded_strides(RAW), 1, DEFAULT)[0].ops[0]
    op = next(e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == first.name
              and e["args"].get("Input Dims") == first.dims)
    op["name"] = "aten::from_file"
    op["args"].update({"Input Dims": [[], [], []], "Input type": ["Scalar"] * 3,
                       "Concrete Inputs": [repr(str(target)), "True", "64"]})
    hostile = tmp_path / "hostile.json.gz"
    hostile.write_bytes(gzip.compress(json.dumps(trace).encode()))
    code = main(["fusion", str(hostile), "--verify", "8", "--verify-device", "cpu", "--out", str(tmp_path / "out"),
                 "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and sum("aten::from_file: not replayed" in r["verdict"] for r in rows) == 1
    held_safely(target.exists(), "fusion --verify wrote the file a trace named")

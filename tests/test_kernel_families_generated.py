"""Kernel families of generated and assembly kernels: hipBLASLt's Tensile solutions, MIOpen's kernels, aiter's
prebuilt asm kernels and the whole aiter / Composable Kernel / DeepEP trees (issue 60, build 1).

``scripts/mine_kernel_families.py`` reads them with ``git grep`` (``GREPPED``): Tensile's ``KernelNameMin`` in
hipBLASLt's library logic, ``.amdhsa_kernel`` in MIOpen's assembly, ``__kernel void`` in its OpenCL, the
``knl_name`` column of aiter's ``hsa/*.csv``. What each name must be is read here from the name and the path it
came from, not from the data file's families: Tensile names a GEMM solution ``Cijk_`` + its index orders; MIOpen's
``igemm_fwd/bwd/wrw`` are a convolution's passes; aiter files its asm kernels by what they do (``fmoe*/`` MoE expert
GEMMs, ``fmha_*``/``pa``/``mla`` attention, ``*gemm*`` GEMMs). ``--keep`` carries over the sources not at hand:
the committed file is its own fixed point.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from fuseprof.model.kernel_families import FAMILIES_FILE
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import FUZZ_RESULTS, ROOT

DATA = json.loads(FAMILIES_FILE.read_text(encoding="utf-8"))
HIPBLASLT, MIOPEN, AITER = "ROCm/hipBLASLt", "ROCm/MIOpen", "ROCm/aiter"


def _from(repo: str, under: str = "") -> list[tuple[str, str]]:
    """(name, path) of the data file's names read from ``repo`` (at its recorded commit), under a path prefix."""
    commit = DATA["sources"][repo][:12]
    out = []
    for family in DATA["families"]:
        for row in family["names"]:
            if row["source"].startswith(f"{repo}@{commit}:{under}"):
                out.append((row["name"], row["source"].split(":", 1)[1]))
    return out


def _script():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mine_kernel_families as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return script


def test_the_generated_names_are_counted_and_a_spread_kept() -> None:
    """hipBLASLt's logic names 24,200 Tensile solutions' kernels (counted with git grep at 7d9fb683db25: 24,014
    distinct KernelNameMin and the custom kernels' .amdhsa_kernel); MIOpen's assembly thousands of igemm
    kernels. Of each, at most 40 a family are kept as tests, every one from the recorded commit."""
    found = DATA["generated_names_found"]
    assert found[HIPBLASLT]["hipBLASLt / Tensile GEMM"] > 24_000
    assert found[MIOPEN]["convolution (implicit GEMM)"] > 4_000
    assert DATA["sources"][HIPBLASLT].startswith("7d9fb683db25") and DATA["sources"][MIOPEN].startswith("2d1fd997a6fc")
    tensile = _from(HIPBLASLT, "library/src/amd_detail/rocblaslt/src/Tensile/Logic/")
    assert 0 < len(tensile) <= 40


@pytest.mark.parametrize(("name", "path"), _from(HIPBLASLT, "library/src/amd_detail/rocblaslt/src/Tensile/Logic/")
                         + _from(HIPBLASLT, "tensilelite/"))
def test_a_tensile_solution_is_a_gemm(name: str, path: str) -> None:
    """Tensile's naming: 'Cijk_' then A's and B's index orders (Ailk/Alik, Bljk/Bjlk), then types and options; a
    custom kernel prefixes it. Each is a GEMM of the Tensile family, whatever its epilogue words (Bias, HA, Amax)."""
    assert re.match(r"(?:Custom\w*?_)?Cijk_A(?:il|li)k_B(?:lj|jl)k_", name), name
    row = DEFAULT.match("kernel", "", name)
    assert (row.category, row.family) == ("GEMM", "hipBLASLt / Tensile GEMM (mined)"), (name, path)


def _miopen_expected(name: str) -> str:
    """What MIOpen's kernel is, from its own name (MIOpen's naming, independent of the families' patterns)."""
    lowered = name.lower()
    if "batchnorm" in lowered or "asmbn" in lowered:
        return "normalization"
    if "transpose" in lowered:
        return "copy/cast"
    if lowered.startswith(("subtensorop", "op1dtensor", "op2dtensor", "op3dtensor", "op4dtensor", "op5dtensor",
                           "optensor")):
        return "elementwise"
    if "adam" in lowered:
        return "elementwise"  # an optimizer step (kinds: fused optimizer)
    if "layernorm" in lowered:
        return "normalization"
    if "attention" in lowered:  # MIOpenSoftmaxAttn.cpp's fused attention
        return "attention"
    if lowered.startswith("rope"):  # MIOpenRoPE.cpp: rotary embedding, an element-wise kernel
        return "elementwise"
    if re.search(r"igemm|conv|winograd|col2im|im2col", lowered):
        return "convolution"
    return "?"


@pytest.mark.parametrize(("name", "path"), _from(MIOPEN))
def test_a_miopen_kernel_is_what_its_name_says(name: str, path: str) -> None:
    expected = _miopen_expected(name)
    assert expected != "?", f"{name} ({path}): a MIOpen name this test cannot read"
    assert DEFAULT.match("kernel", "", name).category == expected, (name, path)
    if "adam" in name.lower():
        assert "fused optimizer" in DEFAULT.kinds(None, [name])


def _aiter_expected(path: str) -> tuple[str, str]:
    """The category and kind of an aiter asm kernel from the folder aiter files it in (hsa/<gfx>/<what>/…)."""
    what = path.split("/")[2]
    if what.startswith("fmoe"):
        return "GEMM", "moe"
    if what.startswith(("fmha", "pa", "mla")):
        return "attention", "flash attention"
    if what == "topksoftmax":
        return "MoE", "moe"
    if "gemm" in what:
        return "GEMM", ""
    return "?", ""


@pytest.mark.parametrize(("name", "path"), _from(AITER, "hsa/"))
def test_an_aiter_asm_kernel_is_what_its_folder_says(name: str, path: str) -> None:
    """aiter's asm kernels as a trace names them (the csv's knl_name, _ZN5aiter…E): their folder says what they do."""
    category, kind = _aiter_expected(path)
    assert category != "?", path
    assert name.startswith("_ZN5aiter") and name.endswith("E")
    assert DEFAULT.match("kernel", "", name).category == category, (name, path)
    if kind:
        assert kind in DEFAULT.kinds(None, [name]), (name, path)


def test_every_aiter_asm_folder_gave_names() -> None:
    """MoE GEMMs, attention (fmha fwd/bwd, paged, MLA) and dense GEMMs all come from hsa/: the whole folder read."""
    folders = {path.split("/")[2] for _, path in _from(AITER, "hsa/")}
    assert {"fmoe", "fmha_v3_fwd", "fmha_v3_bwd", "pa", "mla", "bf16gemm"} <= folders, folders


def test_whole_trees_are_read() -> None:
    """aiter beyond csrc/ and its Triton ops, CK's classic device kernels (include/ck/) beside ck_tile, DeepEP
    beyond csrc/kernels: names from each."""
    sources = [row["source"] for family in DATA["families"] for row in family["names"]]
    assert any(re.match(r"ROCm/composable_kernel@\w+:include/ck/", s) for s in sources)
    assert any(re.match(r"ROCm/aiter@\w+:hsa/", s) for s in sources)
    row = DEFAULT.match("kernel", "", "ck::tensor_operation::device::kernel_grouped_conv_fwd_multiple_d_grouped_gemm"
                                       "_xdl_cshuffle<...>")
    assert row.category == "convolution"  # a grouped convolution, though its name holds grouped_gemm


def test_keep_alone_rewrites_the_committed_file_unchanged(tmp_path: Path) -> None:
    """With no snapshot at hand, --keep carries every source over: the data equal the committed file's, and a
    keep file that is not a data file is one clear error (exit 2), nothing written."""
    data, errors = _script().build({}, kept=DATA)
    assert errors == [] and data == DATA
    out = tmp_path / "families.json"
    for text in ("not json", json.dumps({"families": "no list"})):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(SystemExit) as error:
            _script().main(["--keep", str(bad), "--out", str(out)])
        assert error.value.code == 2 and not out.exists()
        FUZZ_RESULTS["clear error"] += 1


def test_keep_gives_kept_names_to_the_families_the_patterns_say() -> None:
    """A kept name is re-read by the current patterns: a name no family takes, or two take, is an error naming it."""
    kept = json.loads(json.dumps(DATA))
    kept["families"][0]["names"].append({"name": "no_family_takes_this", "source": "NVIDIA/apex@0:x.cu"})
    _, errors = _script().build({}, kept=kept)
    assert errors == ["kept NVIDIA/apex@0:x.cu: no_family_takes_this matches []"]
    FUZZ_RESULTS["clear error"] += 1


@pytest.mark.shared
def test_hipblaslt_kernels_of_an_mi300x_trace_are_tensile_gemms() -> None:
    """Every Cijk_ kernel of the MI300X Qwen1.5 trace (the raw file read with gzip + json) is a Tensile GEMM."""
    from tests.conftest import shared_traces

    with gzip.open(shared_traces() / "mi300_Qwen1.5-0.5B.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("Cijk_")}
    assert len(names) >= 3
    for name in names:
        row = DEFAULT.match("kernel", "", name)
        assert (row.category, row.family) == ("GEMM", "hipBLASLt / Tensile GEMM (mined)"), name


@pytest.mark.parametrize(("name", "category", "kinds"), [
    # TRT-LLM cpp/tensorrt_llm/kernels/fusedQKNormRopeKernel.cu @567239f: "Perform per-head QK Norm and RoPE in a
    # single kernel" (rsqrtf of the mean square times the weight, then cos/sin rotation; qkv written in place)
    ("void tensorrt_llm::kernels::fusedQKNormRopeKernel<128, false>(__nv_bfloat16*, int, int)", "elementwise",
     {"rms norm", "rotary"}),
    ("void flashinfer::fusedQKNormRopeKernel<128, true>(__nv_bfloat16*)", "elementwise", {"rms norm", "rotary"}),
    # TRT-LLM's CUTLASS MoE (vendored in FlashInfer csrc/fused_moe/cutlass_backend): tokens copied to their experts'
    # rows, and the experts' prefix sums: MoE bookkeeping
    ("void tensorrt_llm::kernels::cutlass_kernels::expandInputRowsKernel<__nv_bfloat16, true>(...)", "MoE", {"moe"}),
    ("void tensorrt_llm::kernels::cutlass_kernels::blockExpertPrefixSumKernel<256>(...)", "MoE", {"moe"}),
    # XQA (FlashInfer csrc/xqa/mha.cu): the decode attention kernel
    ("kernel_mha", "attention", {"flash attention"}),
    # TRT-LLM's MNNVL all-reduce's RMSNorm over the reduced sum (trtllm_mnnvl_allreduce.cuh): communication fused
    # with the residual add + RMSNorm
    ("void flashinfer::trtllm_mnnvl_allreduce::rmsNormLamport<8, __nv_bfloat16>(...)", "communication",
     {"add", "rms norm"}),
    ("void kernels::helixAllToAllKernel<true>(...)", "communication", set()),
])
def test_engine_kernels_read_from_their_sources(name: str, category: str, kinds: set[str]) -> None:
    assert DEFAULT.match("kernel", "", name).category == category, name
    assert kinds <= DEFAULT.kinds(None, [name]), (name, DEFAULT.kinds(None, [name]))
    if "QKNormRope" in name:
        assert "cache write" not in DEFAULT.kinds(None, [name])  # the cache is not written: not RoPE + KV write


def test_tensorrt_llm_s_fused_qk_norm_rope_is_indexed_at_its_commit() -> None:
    files = DATA["sources"]["NVIDIA/TensorRT-LLM"]
    assert files["cpp/tensorrt_llm/kernels/fusedQKNormRopeKernel.cu"].startswith("567239fcd40b")


@pytest.mark.shared
def test_kernel_coverage_counts_every_distinct_kernel_of_the_raw_trace() -> None:
    """scripts/kernel_coverage.py on SGLang's MI300X decode: its distinct kernels are the raw file's distinct
    cat=kernel names (gzip + json), split into mined / written rows / unknown with shares adding to 100%; aiter's
    add_rmsnorm_quant_kernel is named by a mined family."""
    from tests.conftest import shared_traces

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import kernel_coverage
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    trace = shared_traces() / "sglang_Qwen3-8B_decode.json.gz"
    with gzip.open(trace, "rt") as handle:
        raw = {e["name"] for e in json.load(handle)["traceEvents"] if e.get("cat") == "kernel"}
    by_name, _ = kernel_coverage.kernels(trace)
    assert set(by_name.index) == raw
    parts = [kernel_coverage.share(by_name, k) for k in ("mined", "row", "unknown")]
    assert sum(n for n, _ in parts) == len(raw)
    assert sum(pct for _, pct in parts) == pytest.approx(100.0)
    assert {by_name.loc[n, "named_by"] for n in raw if "add_rmsnorm_quant_kernel" in n} == {"mined"}
    table = kernel_coverage.markdown([trace])
    assert table[2].startswith(f"| {trace.name} | {len(raw)} | ")


@pytest.mark.parametrize("name", [
    # FlashInfer include/flashinfer/mamba: Mamba's selective state update (the SSM's decode step: state = dA*state
    # + dB*x, y = C·state); aiter's Triton chunked gated delta rule (Qwen3-Next's GDN prefill); FlashInfer's GDN
    # decode and KDA kernels: token mixers by recurrence, attention's place in the layer
    "void flashinfer::mamba::selective_state_update_kernel_simple<__nv_bfloat16, float>(...)",
    "chunk_gated_delta_rule_fwd_kernel_h_blockdim64",
    "gdn_fused_decode_kernel",
    "kernel_flashinfer_packed_kda_t1_cpasync_tile128",
])
def test_recurrent_token_mixers_are_attention_not_unknown(name: str) -> None:
    row = DEFAULT.match("kernel", "", name)
    assert (row.category, row.family) == ("attention", "linear attention / state-space recurrence (mined)"), name
    assert "flash attention" not in DEFAULT.kinds(None, [name])  # no softmax attention to audit as flash attention

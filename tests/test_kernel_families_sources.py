"""Kernel families from the closed libraries' wheels and from single files of the serving engines (issue 60, build 1).

``scripts/mine_kernel_families.py --wheel`` reads the kernel names cuBLASLt (nvidia-cublas-cu12 12.9.3.13) and cuDNN
(nvidia-cudnn-cu12 9.28.0.42) hold as whole strings in their shared libraries; ``INDEXED`` lists names read from one
file of vLLM or SGLang at a named commit (their trees are too large to snapshot here). The names are in
``kernel_families.json``; this file checks what they say independently of the data file's own words: a cuDNN
``fprop``/``dgrad``/``wgrad`` implicit GEMM is a convolution (a convolution's passes, as cuDNN's engine names call
them), a cuBLASLt ``…gemm…`` kernel is a GEMM, SGLang's position and KV-index kernels are bookkeeping, not "no rule".
A quantisation word (E4m3, int4, awq) makes a GEMM kernel a quantized GEMM and never makes a non-GEMM one: TRT-LLM-gen's
FP8 attention was read as "dequant + GEMM fused" by the E4m3 in its name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fuseprof.model.kernel_families import FAMILIES_FILE
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import FUZZ_RESULTS, ROOT

DATA = json.loads(FAMILIES_FILE.read_text(encoding="utf-8"))
BY_NAME = {f["name"]: f for f in DATA["families"]}
SCRIPT = ROOT / "scripts" / "mine_kernel_families.py"
CUBLAS, CUDNN = "nvidia-cublas-cu12==12.9.3.13", "nvidia-cudnn-cu12==9.28.0.42"
FP8_ATTENTION = "fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128HVPerCtaQTileSize64PagedKvDenseP64VarSeqQ8Kv128StaticSwapsAbForGen"


def _from(package: str) -> list[tuple[str, str]]:
    return [(f["name"], n["name"]) for f in DATA["families"] for n in f["names"]
            if n["source"].startswith(package + ":")]


def test_the_wheels_gave_names_and_their_counts_are_recorded() -> None:
    """Each wheel's names in a family are a spread of what it holds (up to 40), never more than the count found."""
    for package in (CUBLAS, CUDNN):
        found = DATA["closed_names_found"][package]
        kept: dict[str, int] = {}
        for family, _ in _from(package):
            kept[family] = kept.get(family, 0) + 1
        assert kept and all(0 < n <= min(found[family], 40) for family, n in kept.items()), (package, kept, found)
    assert DATA["closed_names_found"][CUBLAS]["dense GEMMs"] > 1000  # cuBLASLt 12.9 holds thousands of GEMMs


@pytest.mark.parametrize(("family", "name"), _from(CUDNN) + _from(CUBLAS))
def test_a_closed_library_s_name_is_what_its_name_says(family: str, name: str) -> None:
    """Read from the name's own words, not the family table: cuDNN's and cuBLAS's kernels name their operation."""
    category = DEFAULT.match("kernel", "", name).category
    if re.search(r"fprop|dgrad|wgrad", name):
        assert category == "convolution", name
    elif re.search(r"layer_norm", name):
        assert category == "normalization", name
    elif re.search(r"sdpa", name):
        assert category == "attention", name
    else:
        assert "gemm" in name and category == "GEMM", name


def test_sglang_s_bookkeeping_kernels_are_named_not_unknown() -> None:
    """Three of the SGLang decode traces' kernels had no rule (kernel_coverage: '(no rule)'); their sources (SGLang's
    jit_kernel and attention utils, files at the commits recorded) say they compute positions and KV indices."""
    for name in ("void (anonymous namespace)::resolve_future_token_ids_kernel<long>(long*, long const*, unsigned long)",
                 "void (anonymous namespace)::clamp_position_kernel<long>(long*, long const*, unsigned long)",
                 "create_flashinfer_kv_indices_triton"):
        row = DEFAULT.match("kernel", "", name)
        assert row.family == "serving engine's batch bookkeeping (mined)" and row.category == "other", name
    sources = DATA["sources"]["sgl-project/sglang"]
    assert sources["python/sglang/jit_kernel/csrc/elementwise/clamp_position.cuh"].startswith("369fa46b1151")


def test_vllm_s_fused_add_rms_norm_adds_and_normalises() -> None:
    """vLLM's csrc/layernorm_kernels.cu: fused_add_rms_norm_kernel adds the residual (temp += residual_v[id]) and
    scales by rsqrt of the mean square, in one kernel."""
    name = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, " \
           "c10::BFloat16 const*, float, int, int)"
    assert {"add", "rms norm"} <= DEFAULT.kinds(None, [name])
    assert DEFAULT.match("kernel", "", name).category == "normalization"
    assert "add" not in DEFAULT.kinds(None, ["void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*)"])


def test_a_quantisation_word_makes_no_gemm_of_an_attention_kernel() -> None:
    """Before: the kernel row 'e4m3' (a substring) gave TRT-LLM-gen's FP8 flash attention 'quantized gemm', so the
    dequant + GEMM entry read "fused" for an attention kernel; cuBLASLt's own FP8 GEMMs keep it."""
    assert "quantized gemm" not in DEFAULT.kinds(None, [FP8_ATTENTION])
    assert "flash attention" in DEFAULT.kinds(None, [FP8_ATTENTION])
    fp8_gemms = [n for f, n in _from(CUBLAS) if re.search(r"gemm_e4m3|gemm_f8_f8", n)]
    assert fp8_gemms and all("quantized gemm" in DEFAULT.kinds(None, [n]) for n in fp8_gemms)
    assert "quantized gemm" not in DEFAULT.kinds(None, ["awq_dequantize_kernel"])  # a dequantise apart: no GEMM
    # FBGEMM's namespace says gemm in every kernel's name: its fp8 quantisation is no GEMM (DeepGEMM's fp8 GEMM is)
    assert "quantized gemm" not in DEFAULT.kinds(None, ["void fbgemm_gpu::quantize_fp8_row_kernel<float>"])
    assert "quantized gemm" in DEFAULT.kinds(None, ["void deep_gemm::fp8_gemm_kernel<128u, 128u>(float*)"])
    assert "quantized gemm" not in DEFAULT.kinds(None, ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_hostile_wheels_are_clear_errors_or_read_safely(tmp_path: Path) -> None:
    """A file that is no wheel, a damaged zip, a wheel with no libraries, and a library whose strings are huge or
    hold a name two families take: one clear line each (exit 2, or 1 with the name), or nothing read; never a
    traceback, never the output file written on an error."""
    out = tmp_path / "families.json"
    work = tmp_path / "library"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "empty"], check=True)
    empty_git = work / ".git"  # a library with no kernels: only the wheels are in question
    missing = _run(f"x/y={empty_git}", "--wheel", f"a==1={tmp_path / 'absent.whl'}", "--out", str(out))
    assert missing.returncode == 2 and "PACKAGE==VERSION=WHEEL" in missing.stderr and "Traceback" not in missing.stderr
    no_version = _run(f"x/y={empty_git}", "--wheel", f"nvidia-cublas-cu12={SCRIPT}", "--out", str(out))
    assert no_version.returncode == 2 and "Traceback" not in no_version.stderr
    FUZZ_RESULTS["clear error"] += 2
    damaged = tmp_path / "damaged.whl"
    damaged.write_bytes(b"PK\x03\x04 not really a zip")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mine_kernel_families as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    with pytest.raises(SystemExit) as error:
        script.main([f"x/y={empty_git}", "--wheel", f"p==1={damaged}", "--out", str(out)])
    assert error.value.code == 2 and not out.exists()
    FUZZ_RESULTS["clear error"] += 1
    bare = tmp_path / "bare.whl"
    with zipfile.ZipFile(bare, "w") as archive:
        archive.writestr("nvidia/cublas/include/cublas.h", "sm90_xmma_gemm_in_a_header_only")
    assert script.wheel_kernels(bare) == []  # only the libraries' strings count
    huge = tmp_path / "huge.whl"
    with zipfile.ZipFile(huge, "w") as archive:
        archive.writestr("nvidia/cublas/lib/libcublasLt.so.12",
                         b"\x00sm90_xmma_gemm_" + b"a" * 5_000 + b"\x00cutlass3x_sm90_tensorop_gemm_f16\x00"
                         + b"\x00sm90_xmma_gemm_e4m3_attention_fmha_rms_norm\x00")
    names = [n for n, _ in script.wheel_kernels(huge)]
    assert names == ["cutlass3x_sm90_tensorop_gemm_f16", "sm90_xmma_gemm_e4m3_attention_fmha_rms_norm"]
    FUZZ_RESULTS["held"] += 2
    _, errors = script.build({}, {"p==1": huge})  # attention (fmha) and RMSNorm both take the last name
    assert errors == ["p==1:nvidia/cublas/lib/libcublasLt.so.12: sm90_xmma_gemm_e4m3_attention_fmha_rms_norm matches "
                      "RMSNorm, flash / fused attention"]
    FUZZ_RESULTS["clear error"] += 1


def test_every_inductor_kernel_category_has_a_row() -> None:
    """Inductor names a kernel triton_<category[:3]>_<ops>_<n> (torch/_inductor/codegen/triton.py), its categories
    those of wrapper_benchmark.py's _kernel_category_choices in the installed torch: each category's name is
    categorised by some row (the written pointwise/reduction/template rows, or a mined family: foreach, split
    scan), never '(no rule)'. Before: triton_for_ and triton_spl_ kernels had no rule."""
    names = DATA["inductor_names"]
    assert {n.split("_")[1] for n in names} >= {"poi", "red", "per", "tem", "for", "spl"}
    for name in names:
        assert DEFAULT.match("kernel", "", name).family != "(no rule)", name
    assert DEFAULT.match("kernel", "", "triton_for_fused_0").family == "Inductor foreach kernel (mined)"
    assert DEFAULT.match("kernel", "", "triton_spl_fused_cumsum_0").category == "reduction"
    assert any(k.startswith("torch==2.13") for k in DATA["sources"])


def test_tensorrt_llm_s_moe_routing_is_moe_bookkeeping() -> None:
    """TRT-LLM's routingRenormalize launchClusterKernel.cu: routingIndicesClusterKernel takes each token's top-k
    experts (routingTopKExperts) and permutes the token indices by expert: routing, not a reduction."""
    name = "void moe::dev::routing::routingRenormalize::routingIndicesClusterKernel<KernelParams>(KernelParams)"
    row = DEFAULT.match("kernel", "", name)
    assert row.category == "MoE" and row.family == "MoE routing, sorting and finalize (mined)"
    files = DATA["sources"]["NVIDIA/TensorRT-LLM"]
    assert any(path.endswith("routingRenormalize/launchClusterKernel.cu") for path in files)

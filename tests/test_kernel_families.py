"""Kernel families mined from the libraries' sources (issue 60, build 1): ``fuseprof/model/kernel_families.json``,
written by ``scripts/mine_kernel_families.py`` from FlashInfer, aiter, CK, DeepEP, FlashAttention, Liger, Apex,
TransformerEngine, torchao, FBGEMM and NCCL at named commits.

Each family's test names are the kernels its library's sources define: every one must match its family's pattern
and no other family's, and the default registry must give it its family's category and kinds. The names issue 60
quotes from real traces (kept apart: seen only in traces) must land in their families. The data file is loaded
through the registry's schema: a damaged one is one clear line, never a traceback. On the shared serving traces
(``shared``), the audit reads the fusions those kernels do."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest

from fuseprof.errors import InvalidArgumentError
from fuseprof.model.kernel_families import FAMILIES_FILE, mined_rows, read
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import FUZZ_RESULTS, ROOT

DATA = json.loads(FAMILIES_FILE.read_text(encoding="utf-8"))
PATTERNS = {f["name"]: re.compile(f["kernel"], re.IGNORECASE) for f in DATA["families"]}
BY_NAME = {f["name"]: f for f in DATA["families"]}
SOURCE_NAMES = [(f["name"], n["name"], n["source"]) for f in DATA["families"] for n in f["names"]]
# what the registry's first matching row gives a name of each family: a row ahead of the mined ones that takes the
# same names says the same (NCCL's and DeepEP's communication rows, Inductor's)
_EARLIER_SAME = {"communication"}


def _mined(family: str) -> str:
    return f"{family} (mined)"


@pytest.mark.parametrize(("family", "name", "source"), SOURCE_NAMES, ids=[f"{f}:{n}" for f, n, _ in SOURCE_NAMES])
def test_each_source_name_is_its_family_s_and_no_other_s(family: str, name: str, source: str) -> None:
    assert PATTERNS[family].search(name), f"{name} ({source}) does not match {family!r}"
    others = [other for other, pattern in PATTERNS.items() if other != family and pattern.search(name)]
    assert others == [], f"{name} ({source}) matches {others} too"
    row = DEFAULT.match("kernel", "", name)
    assert row.category == BY_NAME[family]["category"]
    assert row.family == _mined(family) or row.category in _EARLIER_SAME, row.family
    assert set(BY_NAME[family]["kinds"]) <= DEFAULT.kinds(None, [name])


@pytest.mark.parametrize("case", DATA["trace_names"], ids=[c["name"][:60] for c in DATA["trace_names"]])
def test_the_names_seen_in_traces_land_in_their_families(case: dict[str, str]) -> None:
    """Issue 60's list: FlashInfer's CuTe FusedAddRMSNormKernel and aiter's add_rmsnorm_quant_kernel are add + RMSNorm
    (the first was attention, by "flash" in flashinfer), fmhaSm100f…PagedKv…, paged_attention_ll4mi_QKV_mfma16 and
    cuDNN SDPA are attention, fused_rope_store_kernel and _fused_qk_rope_reshape_and_cache_kernel RoPE + cache write,
    moe::dev routing/finalize and ck_tile's MoeSortingKernel MoE, dpsk::ep communication, apex's AdamFunctor a fused
    optimizer, FBGEMM's quantize kernels quantisation (not GEMM, which 'fbgemm' read as)."""
    family = BY_NAME[case["family"]]
    name = case["name"]
    assert [f for f, p in PATTERNS.items() if p.search(name)] == [case["family"]]
    row = DEFAULT.match("kernel", "", name)
    assert row.category == family["category"]
    assert set(family["kinds"]) <= DEFAULT.kinds(None, [name])


def test_the_issue_s_kernels_get_the_categories_it_names() -> None:
    """Stated by issue 60, independently of the data file's own words."""
    expected = {
        "kernel_cutlass_kernel_flashinfernormkernelsfused_add_rmsnormFusedAddRMSNormKernel_object_at_0x7f":
            ("normalization", {"add", "rms norm"}),
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib":
            ("normalization", {"add", "rms norm"}),
        "fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128HVPerCtaQTileSize64PagedKvDenseP64VarSeqQ8Kv128StaticSwapsAbForGen":
            ("attention", set()),
        "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16>": ("attention", set()),
        "fused_rope_store_kernel": ("elementwise", {"rotary", "cache write"}),
        "_fused_qk_rope_reshape_and_cache_kernel": ("elementwise", {"rotary", "cache write"}),
        "void moe::dev::routing::routingRenormalize::routingIndicesClusterKernel<KernelParams>": ("MoE", {"moe"}),
        "void moe::dev::finalize::finalizeKernelVecLoad<KernelParams>": ("MoE", {"moe"}),
        "void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*)": ("communication", set()),
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>": ("elementwise",
                                                                                           {"fused optimizer"}),
        "void fbgemm_gpu::quantize_fp8_row_kernel<float>": ("elementwise", {"quantize"}),
    }
    for name, (category, kinds) in expected.items():
        assert DEFAULT.match("kernel", "", name).category == category, name
        assert kinds <= DEFAULT.kinds(None, [name]), name
    assert DEFAULT.match("kernel", "aten::_weight_int8pack_mm", "weird_kernel").category == "GEMM"


_INDEXED = " (one file, read through the index)"


def test_every_name_says_where_it_came_from() -> None:
    """Three forms: ``repo@commit:path`` of a snapshot read whole (its commit in ``sources``), the same with
    ``(one file, read through the index)`` for a file read alone (``sources[repo][path]`` is that file's commit),
    and ``package==version:library`` for a closed library's name read from its vendor wheel, or Inductor's from the
    installed torch's sources (``sources[package]`` names that version)."""
    for _, name, source in SOURCE_NAMES:
        if "==" in source.split(":", 1)[0]:
            package, _, library = source.partition(":")
            version = package.split("==")[1]
            assert version in DATA["sources"][package], source
            assert re.fullmatch(r"lib\w+\.so[.\d]*|torch/[\w/]+\.py", library), source
            continue
        repo, _, rest = source.removesuffix(_INDEXED).partition("@")
        commit, _, path = rest.partition(":")
        given = DATA["sources"][repo]
        given = given[path] if source.endswith(_INDEXED) else given
        assert given.startswith(commit) and len(commit) == 12, source
        assert path and not path.startswith("/"), source
    commits = [c for k, c in DATA["sources"].items() if isinstance(c, str) and "==" not in k]
    commits += [c for files in DATA["sources"].values() if isinstance(files, dict) for c in files.values()]
    assert commits and all(re.fullmatch(r"[0-9a-f]{40}", c) for c in commits)
    assert all(c["seen_in"] for c in DATA["trace_names"])


def test_the_data_file_is_what_the_script_writes_today() -> None:
    """The script's families (patterns, categories, kinds) are the file's: an edit to one is regenerated into the
    other (the names need the snapshots: ``python scripts/mine_kernel_families.py OWNER/NAME=GIT_DIR ...``)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import mine_kernel_families as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert [(f.name, f.pattern, f.category, list(f.kinds), list(f.catalogue)) for f in script.FAMILIES] == \
        [(f["name"], f["kernel"], f["category"], f["kinds"], f["catalogue"]) for f in DATA["families"]]
    assert [list(t) for t in script.TRACE_NAMES] == [[c["name"], c["family"], c["seen_in"]] for c in DATA["trace_names"]]
    catalogue = {e.name for e in DEFAULT.catalogue}
    assert all(set(f["catalogue"]) <= catalogue for f in DATA["families"])
    assert all(f["names"] or f["name"] in {c["family"] for c in DATA["trace_names"]} for f in DATA["families"])


HOSTILE = {
    "not JSON": "{",
    "a list, not an object": "[]",
    "families not a list": json.dumps({"families": "everything"}),
    "a nested repeat": json.dumps({"families": [{"name": "x", "kernel": "(a+)+$", "category": "attention",
                                                 "kinds": []}]}),
    "kinds as one string": json.dumps({"families": [{"name": "x", "kernel": "add_norm", "category": "normalization",
                                                     "kinds": "add"}]}),
    "a bad regex and category": json.dumps({"families": [{"name": "x", "kernel": "[", "category": "nope"}]}),
    "no pattern": json.dumps({"families": [{"name": "x", "category": "GEMM"}]}),
    "an empty pattern": json.dumps({"families": [{"name": "x", "kernel": "", "category": "GEMM"}]}),
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_damaged_families_file_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "kernel_families.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidArgumentError) as error:
        mined_rows(path)
    message = str(error.value)
    assert str(path) in message and len(message) < 2_000 and "Traceback" not in message
    FUZZ_RESULTS["clear error"] += 1


def test_the_shipped_file_reads_and_makes_a_row_per_family() -> None:
    families, kinds = mined_rows()
    assert len(families) == len(read()["families"]) == len(DATA["families"])
    assert len(kinds) == sum(1 for f in DATA["families"] if f["kinds"])


def _replayed_layer(path: Path) -> Path:
    """A graph replay's trace as Kineto writes it, two steps of one MoE layer's tail: kernels only (no op, no shapes:
    only their names say what they compute) — FlashInfer's fused add + RMSNorm, the merged gate/up GEMM, a shared
    expert's GEMM, a SwiGLU kernel (one input holding gate and up), the down GEMM."""
    names = ["void flashinfer::norm::FusedAddRMSNormKernel<8, __nv_bfloat16>", "nvjet_tst_64x8_64x16_4x1_v_bz_TNT",
             "nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "void cuda::swiglu_forward_kernel<__nv_bfloat16>",
             "nvjet_tst_64x8_64x16_4x1_v_bz_TNN"]
    events = [{"ph": "X", "cat": "kernel", "name": name, "ts": 1000.0 + 6 * i, "dur": 5.0, "pid": 0, "tid": 7,
               "args": {"stream": 7, "device": 0, "correlation": i + 1}} for i, name in enumerate(names * 2)]
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def test_a_replayed_layer_s_kernels_read_as_the_fusions_their_sources_do(tmp_path: Path) -> None:
    """Before the mined families the FlashInfer norm was attention ("flash" in flashinfer): add + RMSNorm read "not
    present"; and the two GEMMs launched before the SwiGLU read gate / up "not fused", though a gated activation's
    kernel reads gate and up from one tensor — one GEMM's output."""
    from fuseprof.analysis import analyze

    (result,) = analyze([_replayed_layer(tmp_path / "replay.json.gz")], workers=1)
    verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"]))
    assert verdicts["add + RMSNorm"] == "fused"
    assert verdicts["SiLU · mul"] == "fused"
    assert verdicts["gate / up projection"] == "fused"
    assert verdicts["flash attention"] == "not present"


# --- the audit on the shared serving traces


@pytest.mark.shared
def test_sglang_decode_on_mi300x_reads_its_fused_kernels() -> None:
    """SGLang's Qwen3-8B decode on MI300X (graph-replayed: kernels without ops, only their names say what they are):
    aiter's add_rmsnorm_quant_kernel does residual add + RMSNorm in one and sgl_hip's act_and_mul SiLU · mul in one —
    both entries fused, as the kernels' sources say (labels.json labels the same trace: add + RMSNorm fused); the
    ll4mi paged attention and its reduce are attention, sglang's create_flashinfer_kv_indices_triton is not ("flash"
    in flashinfer made it attention), and of the kernel time no more than 0.2% is left without a family (SGLang's own
    resolve_future_token_ids and clamp_position kernels)."""
    from fuseprof.analysis import analyze
    from tests.conftest import shared_traces

    (result,) = analyze([shared_traces() / "sglang_Qwen3-8B_decode.json.gz"], workers=1, window="all")
    verdicts = dict(zip(result.audit["fusion"], result.audit["verdict"]))
    assert verdicts["add + RMSNorm"] == "fused"
    assert verdicts["SiLU · mul"] == "fused"
    kernels = result.events[result.events["kind"] == "kernel"]
    category = dict(zip(kernels["name"], kernels["category"]))
    assert {c for n, c in category.items() if "paged_attention_ll4mi" in n} == {"attention"}
    assert category["create_flashinfer_kv_indices_triton"] != "attention"
    unknown = kernels[kernels["family"] == "(no rule)"]
    assert unknown["dur_ns"].sum() <= 0.002 * kernels["dur_ns"].sum()


@pytest.mark.shared
def test_deepseek_s_deepep_kernels_are_communication() -> None:
    """DeepSeek-V3 on H800: the dpsk::ep dispatch/combine kernels are communication — 36 kernels, 113,440 µs,
    46.5% of the kernel time (labels_turn4.json, from an exact reading of the raw trace)."""
    from fuseprof.analysis import analyze
    from tests.conftest import shared_traces

    (result,) = analyze([shared_traces() / "fresh4" / "deepseek_v3_train_ep64_h800_rank0.json.gz"], workers=1,
                        window="all")
    events = result.events[result.events["kind"].isin(["kernel", "communication"])]  # every kernel, collectives too
    deepep = events[events["name"].str.contains("dpsk::ep::", regex=False)]
    assert len(deepep) == 36
    assert set(deepep["category"]) == {"communication"}
    assert deepep["dur_ns"].sum() / events["dur_ns"].sum() == pytest.approx(113_440 / 244_041, abs=0.005)

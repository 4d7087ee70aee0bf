"""Names by family, not by vendor: communication kernels of every collective library and engine, embedding
kernels, allocator calls, and devices a trace describes without naming. Each class is tested by rewriting a
real trace's names into the family's and checking the figure against the original, counted from the raw file."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from fuseprof.analysis import analyze
from fuseprof.model.devices import device_from_properties, spec_for_device_name
from fuseprof.model.registry_data import DEFAULT
from tests.conftest import FIXTURES, shared_traces

TP2 = FIXTURES / "tp2" / "tp_mlp-rank0.json.gz"
SYNC_BOUND = FIXTURES / "truth" / "sync_bound.json.gz"

# kernel names as each library or engine writes them (the namespaces and kernel names of their sources)
COMMUNICATION_KERNELS = [
    "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, long*, float*, int*, int*, int, int)",
    "void deep_ep::internode_ll::combine<false, 7168>(void*, int*, void const*, void const*, long const*, int)",
    "void nvshmemi_transfer_rma_kernel<(nvshmemi_op_t)0>(void*, void const*, unsigned long, int)",
    "void mscclpp::allreduce8<__nv_bfloat16>(__nv_bfloat16*, mscclpp::DeviceHandle<mscclpp::SmChannel>*, int)",
    "void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, int)",
    "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)",
    "void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 8>(c10::BFloat16**, unsigned long)",
    "void quickreduce::allreduce_prototype_twoshot<quickreduce::CodecQ4>(half const*, half*, unsigned int)",
]


def _raw(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def _union_ns(intervals: list[tuple[float, float]]) -> int:
    """The time the intervals (µs) cover, in ns, each instant once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return round(total * 1000)


@pytest.mark.parametrize("name", COMMUNICATION_KERNELS, ids=lambda n: n.split("::")[0][5:] + "…")
def test_communication_is_read_by_family_whatever_library_wrote_it(name: str, tmp_path: Path) -> None:
    trace = _raw(TP2)
    nccl = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel")]
    assert nccl
    for e in nccl:
        e["name"] = name
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(trace))
    (result,) = analyze(path)
    whole = result.timeline.iloc[0]
    assert whole["communication_ns"] == _union_ns([(e["ts"], e["ts"] + e["dur"]) for e in nccl])
    assert set(result.events.loc[result.events["name"] == name, "category"]) == {"communication"}


@pytest.mark.parametrize("name", [
    "void fbgemm_gpu::split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, 128>(...)",
    "void fbgemm_gpu::batch_index_select_dim0_codegen_forward_small_kernel<float, float, float, long>(...)",
    "void bounds_check_indices_kernel_v1<long, 1>(at::PackedTensorAccessor32<long, 1>)",
    "void linearize_index_kernel<long, int>(at::PackedTensorAccessor32<int, 1>)",
])
def test_embedding_kernels_are_not_gemms(name: str) -> None:
    """FBGEMM's name says gemm; its table-batched embedding kernels gather rows."""
    assert DEFAULT.match("kernel", "", name).category == "other"
    assert DEFAULT.match("kernel", "", "void fbgemm_gpu::f8f8bf16_rowwise_kernel<128>(...)").category == "GEMM"
    assert DEFAULT.match("kernel", "", "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)").category \
        == "elementwise"


def _renamed_sync_calls(call: str, folder: Path) -> Any:
    trace = _raw(SYNC_BOUND)
    for e in trace["traceEvents"]:
        if e.get("cat") == "cuda_runtime" and e["name"] == "cudaStreamSynchronize":
            e["name"] = call
    path = folder / f"{call}.json"
    path.write_text(json.dumps(trace))
    (result,) = analyze(path)
    return result.frames["idle"]


@pytest.mark.parametrize("call", ["hipFree", "hipMalloc", "cuMemFree_v2", "cuMemAlloc_v2", "cudaMallocAsync"])
def test_an_allocator_call_is_an_idle_cause_by_any_runtimes_name(call: str, tmp_path: Path) -> None:
    """The synchronising calls of a sync-bound trace renamed to an allocator's: the idle before each launch that
    the calls covered is the allocator's, the same under every runtime's spelling (cudaFree's, the reference),
    and no longer the sync's."""
    (before,) = analyze(SYNC_BOUND)
    reference, renamed = _renamed_sync_calls("cudaFree", tmp_path), _renamed_sync_calls(call, tmp_path)
    assert reference["idle_alloc_ns"].sum() > 0 and renamed["idle_alloc_ns"].tolist() == \
        reference["idle_alloc_ns"].tolist()
    moved = before.frames["idle"]["idle_sync_ns"].sum() - renamed["idle_sync_ns"].sum()
    assert moved >= renamed["idle_alloc_ns"].sum()


def _described_devices(paths: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in sorted(paths):
        if ".et." in path.name:
            continue
        for device in (_raw(path).get("deviceProperties") or [])[:1]:
            found.setdefault(device["name"] or path.name, (path.name, device))
    return sorted(found.values(), key=lambda item: item[1]["name"])


def _shared_and_committed() -> list[Path]:
    return [*shared_traces().glob("*.json.gz"), *FIXTURES.glob("**/*.json.gz")]


def _properties(device: dict[str, Any]) -> dict[str, int]:
    return {"sms": device["numSms"], "memory_bytes": device["totalGlobalMem"], "major": device["computeMajor"],
            "minor": device["computeMinor"], "warp": device["warpSize"]}


@pytest.mark.parametrize(("trace", "device"), [d for d in _described_devices(list(FIXTURES.glob("**/*.json.gz")))
                                                if d[1]["name"]], ids=lambda v: v if isinstance(v, str) else "")
def test_a_device_is_recognised_from_its_properties_as_from_its_name(trace: str, device: dict[str, Any]) -> None:
    assert device_from_properties(_properties(device)) == spec_for_device_name(device["name"]).name  # type: ignore


@pytest.mark.shared
def test_the_shared_traces_devices_are_recognised_from_their_properties_as_from_their_names() -> None:
    named = [(trace, d) for trace, d in _described_devices(_shared_and_committed()) if d["name"]]
    assert len(named) >= 3  # H100, MI300X, H200 at least
    assert [(trace, d["name"]) for trace, d in named
            if device_from_properties(_properties(d)) != spec_for_device_name(d["name"]).name] == []  # type: ignore


@pytest.mark.shared
def test_the_real_traces_that_name_no_device_are_the_mi300x_their_source_says() -> None:
    """vLLM's traces (SOURCE.md: MI300X) write deviceProperties with empty names: 304 CUs, gfx 9.4."""
    unnamed = [(trace, d) for trace, d in _described_devices(_shared_and_committed()) if not d["name"]]
    assert unnamed and {device_from_properties(_properties(d)) for _, d in unnamed} == {"MI300X"}


@pytest.mark.shared
def test_a_trace_that_names_no_device_is_judged_against_the_one_it_describes(tmp_path: Path) -> None:
    path = shared_traces() / "mi300_bert_small_uncased.json.gz"
    trace = _raw(path)
    unnamed = copy.deepcopy(trace)
    for device in unnamed["deviceProperties"]:
        device["name"] = ""
    target = tmp_path / "unnamed.json"
    target.write_text(json.dumps(unnamed))
    (named,), (described,) = analyze(path), analyze(target)
    assert described.roof.label == named.roof.label == "MI300X (datasheet)"
    assert any("recognised from deviceProperties (304 SMs/CUs" in n for n in described.notes)
    partitioned = copy.deepcopy(unnamed)
    for device in partitioned["deviceProperties"]:
        device["numSms"] = 38  # an MI300X in CPX mode: a part no row describes
    target.write_text(json.dumps(partitioned))
    (unknown,) = analyze(target)
    assert not unknown.roof.judged and "unknown GPU" in unknown.roof.label


@pytest.mark.parametrize(("name", "key", "dram_tb_per_s"), [
    ("Tesla V100-SXM2-32GB", "V100", 0.9), ("NVIDIA A100-SXM4-40GB", "A100 40GB", 1.555),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB", 2.039), ("AMD Instinct MI210", "MI210", 1.6),
    ("AMD Instinct MI250X/MI250", "MI250X", 1.6), ("AMD Instinct MI250", "MI250", 1.6),
])
def test_older_devices_have_their_own_roofs(name: str, key: str, dram_tb_per_s: float) -> None:
    spec = spec_for_device_name(name)
    assert spec is not None and spec.name == key and spec.dram_bytes_per_s == pytest.approx(dram_tb_per_s * 1e12)

"""Issue 59, point 2: the idle's causes from the dependency chain, per gap and per step — sync by call (the idle
after a sync until the next launch is the sync's), data loading before a step's first kernel (the step's, not
"between steps"), exposed communication, one-time start-up (not "allocator") — the communication- and data-bound
verdicts, the advice they bring, and the 2021 ResNet-50 trace shape (ProfilerStep and DataLoader written as
``Operator``, shapes under ``Input dims``), built here from that description.

Expected values are arithmetic on the raw events each case writes (or a committed H200 trace holds), read apart
from fuseprof: the step's start, the DataLoader range, the first GPU event and its launch call."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from fuseprof.analysis import analyze
from tests.conftest import FIXTURES, FUZZ_RESULTS

_GPU = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy")


class Trace:
    """A Chrome trace written event by event: ``op`` (a CPU op or range), ``launch`` (a call and its GPU work)."""

    def __init__(self, base: int = 1_000_000, old: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr, self.old, self.base = 1, old, base

    def x(self, cat: str, name: str, ts: float, dur: float, tid: object = 1, **args: Any) -> dict[str, Any]:
        event = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": self.base + ts, "dur": dur,
                 "args": args}
        self.events.append(event)
        return event

    def op(self, name: str, ts: float, dur: float, **args: Any) -> None:
        cat = "Operator" if self.old else ("user_annotation" if "#" in name or "(" in name else "cpu_op")
        self.x(cat, name, ts, dur, **args)

    def launch(self, call: str, ts: float, dur: float, gpu: str, start: float, length: float,
               kind: str = "kernel", stream: int = 7) -> None:
        cat_call, cat_gpu = ("Runtime", {"kernel": "Kernel", "gpu_memcpy": "Memcpy"}[kind]) if self.old else \
            ("cuda_runtime", kind)
        ids = {"external id" if self.old else "External id": self.corr}
        self.x(cat_call, call, ts, dur, correlation=self.corr, **ids)
        self.x(cat_gpu, gpu, start, length, tid=f"stream {stream}", device=0, stream=stream, correlation=self.corr,
               **ids)
        self.corr += 1

    def write(self, path: Path) -> Path:
        path.write_bytes(gzip.compress(json.dumps({"traceEvents": self.events}).encode()))
        return path


def _analyse(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(path)[0]


def _resnet_2021(path: Path, steps: int = 3, data_us: int = 60_000) -> Path:
    """A ResNet-50 training loop as PyTorch 1.8 wrote it: integer µs since the epoch, ``Operator``-category
    ProfilerStep#N and DataLoader ranges, "Input dims", "external id"; each step waits ``data_us`` in the
    DataLoader, copies the batch, then runs three kernels back to back and reads the loss with ``.item()``."""
    t = Trace(base=1_621_401_187_223_005, old=True)
    kernels = (("void cudnn::conv_fwd", "aten::conv2d", 9_000), ("volta_sgemm_128x64_nn", "aten::mm", 12_000),
               ("void at::native::relu_kernel", "aten::relu", 3_000))
    s = 0
    for k in range(1, steps + 1):
        t.op(f"ProfilerStep#{k}", s, data_us + 26_000)
        t.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 10, data_us)
        h = s + 10 + data_us + 5
        t.op("aten::copy_", h, 40, **{"Input dims": [[32, 3, 224, 224], [32, 3, 224, 224], []]})
        t.launch("cudaMemcpyAsync", h + 5, 20, "Memcpy HtoD (Pageable -> Device)", h + 30, 500, "gpu_memcpy")
        g, hh = h + 530, h + 60
        for gpu, op, d in kernels:
            t.op(op, hh, 100, **{"Input dims": [[32, 64, 56, 56], [64, 64, 3, 3]]})
            t.launch("cudaLaunchKernel", hh + 20, 10, gpu, max(g, hh + 40), d)
            g, hh = max(g, hh + 40) + d, hh + 120
        t.op("aten::item", g - 50, 80)
        t.op("aten::_local_scalar_dense", g - 49, 78)
        t.launch("cudaMemcpyAsync", g - 48, 4, "Memcpy DtoH (Device -> Pageable)", g, 2, "gpu_memcpy")
        t.x("Runtime", "cudaStreamSynchronize", g - 44, 50)
        s = g + 60
    return t.write(path)


def _by_name(path: Path) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    calls = {e["args"]["correlation"]: e for e in events if e["cat"] in ("Runtime", "cuda_runtime")
             and "correlation" in e["args"]}
    return events, calls


def _leading(path: Path, step: str) -> dict[str, float]:
    """From the raw events: the step's time from its start to its first GPU work, split at that work's launch
    call's return — before it the DataLoader range's overlap (data) and the rest (launch), after it other."""
    events, calls = _by_name(path)
    s = next(e for e in events if e["name"] == step)
    loader = next(e for e in events if "DataLoader" in e["name"] and s["ts"] <= e["ts"] < s["ts"] + s["dur"])
    first = min((e for e in events if e["cat"] in _GPU and e["ts"] >= s["ts"]), key=lambda e: e["ts"])
    call = calls[first["args"]["correlation"]]
    returned = call["ts"] + call["dur"]
    data = max(0, min(loader["ts"] + loader["dur"], returned) - max(loader["ts"], s["ts"]))
    return {"data": data, "launch": returned - s["ts"] - data, "other": first["ts"] - returned}


def test_the_2021_resnet_shape_reads_data_bound_with_dataloader_advice(tmp_path: Path) -> None:
    path = _resnet_2021(tmp_path / "resnet50_2021.json.gz")
    result = _analyse(path)
    verdict, idle = result.frames["verdict"].iloc[0], result.frames["idle"].set_index("step")
    assert list(idle.index[:3]) == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]  # steps, not periods
    # the first step owns its DataLoader wait too, though no GPU work came before it (issue 59: a step owns the
    # whole gap between its start and its first kernel; it read GPU-bound with the wait left out)
    for step in ("ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"):
        expected = _leading(path, step)
        row = idle.loc[step]
        assert (row["idle_data_ns"], row["idle_launch_ns"], row["idle_other_ns"]) == \
            (expected["data"] * 1000, expected["launch"] * 1000, expected["other"] * 1000), step
        assert row["verdict"] == row["verdict_as_traced"] == "data-bound"
    assert verdict["bound"] == verdict["bound_as_traced"] == "data-bound"
    first = result.frames["worth_doing"].iloc[0]
    assert first["what"].startswith("overlap data loading") and "CUDA graphs" not in first["what"]
    shapes = " ".join(result.frames["top_ops"]["signature"].astype(str))
    assert "[32, 3, 224, 224]" in shapes and "[32, 64, 56, 56]" in shapes  # read under "Input dims"


def test_a_dataloader_wait_before_the_first_kernel_is_the_steps_own() -> None:
    """A committed H200 capture: 5 ms in the DataLoader's iterator at each step's start, then ~0.7 ms of GEMMs.
    Each step owns its wait (it read GPU-bound per step while the wait sat "between steps")."""
    path = FIXTURES / "truth" / "dataloader_wait.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    result = _analyse(path)
    idle = result.frames["idle"].set_index("step")
    for step in ("ProfilerStep#2", "ProfilerStep#3"):
        s = next(e for e in events if e.get("name") == step and e.get("cat") == "user_annotation")
        loader = next(e for e in events if "DataLoader" in str(e.get("name")) and s["ts"] <= e["ts"] < s["ts"] + s["dur"])
        assert idle.loc[step, "idle_data_ns"] == round(loader["dur"] * 1000)  # it lies whole before the launch
        assert idle.loc[step, "verdict"] == idle.loc[step, "verdict_as_traced"] == "data-bound"
    assert result.frames["verdict"]["bound_as_traced"].iloc[0] == "data-bound"


def _item_loop(path: Path, items: int = 24, host_after_us: int = 60) -> Path:
    """A loop calling ``.item()`` ``items`` times a step: a 10 µs kernel, the D2H copy and a stream sync, then
    ``host_after_us`` of Python before the next launch."""
    t = Trace()
    s = 0
    for k in range(1, 3):
        t.op(f"ProfilerStep#{k}", s, items * (host_after_us + 100) + 50)
        h = s + 5
        for _ in range(items):
            t.op("aten::mul", h, 20)
            t.launch("cudaLaunchKernel", h + 5, 10, "elementwise_kernel", h + 20, 10)
            t.op("aten::item", h + 25, 45)
            t.op("aten::_local_scalar_dense", h + 26, 43)
            t.launch("cudaMemcpyAsync", h + 27, 5, "Memcpy DtoH (Device -> Pageable)", h + 33, 2, "gpu_memcpy")
            t.x("cuda_runtime", "cudaStreamSynchronize", h + 33, 4)
            h += 40 + host_after_us
        s = h + 50
    return t.write(path)


def test_the_idle_after_item_until_the_next_launch_is_the_syncs(tmp_path: Path) -> None:
    path = _item_loop(tmp_path / "item.json.gz")
    events, calls = _by_name(path)
    result = _analyse(path)
    idle = result.frames["idle"].set_index("step")
    # from the raw events: each gap that opens while cudaStreamSynchronize runs is sync until the next launch
    # call starts, that call's own time launch, the rest other; the step's part of the gap before its first
    # kernel opens at the step's start
    syncs = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"] == "cudaStreamSynchronize"]
    gpu = sorted((e for e in events if e["cat"] in _GPU), key=lambda e: e["ts"])
    step2 = next(e for e in events if e["name"] == "ProfilerStep#2")
    sync = launch = reads = 0.0
    for before, after in zip(gpu, gpu[1:]):
        start, call = before["ts"] + before["dur"], calls[after["args"]["correlation"]]
        if not step2["ts"] <= call["ts"] < step2["ts"] + step2["dur"] or after["ts"] <= start:
            continue
        start = max(start, step2["ts"])
        held = any(a <= start < b for a, b in syncs)
        sync += (call["ts"] - start) if held else 0
        reads += held
        launch += call["dur"] if held else min(call["ts"] + call["dur"], after["ts"]) - start
    row = idle.loc["ProfilerStep#2"]
    assert row["idle_sync_ns"] == row["idle_sync_item_ns"] == round(sync * 1000)
    assert row["idle_sync_ns"] > 0.75 * (row["span_ns"] - row["busy_ns"])  # most of the idle follows the copy
    # 24 a step; the last one's copy leaves no gap (no GPU work follows in the trace)
    assert row["verdict"] == "sync-bound" and row["sync_reads"] == reads == 23
    what = result.frames["worth_doing"]["what"].astype(str).tolist()
    graphs = [i for i, w in enumerate(what) if w.startswith("close the host-bound gaps")]
    assert what[0].startswith("remove synchronisations") and all(i > 0 for i in graphs)
    assert ".item()" in result.frames["worth_doing"]["why"].iloc[0]


def _calls_by_kind(path: Path) -> Path:
    """One step with each synchronising call kind once, each followed by 100 µs of host work: a copy to the host
    (``aten::to`` with a blocking ``cudaMemcpy``), ``torch.cuda.synchronize`` and an event synchronisation."""
    t = Trace()
    t.op("ProfilerStep#1", 0, 1_000)
    h = 5
    for op, call in (("aten::to", "cudaMemcpy"), ("", "cudaDeviceSynchronize"), ("", "cudaEventSynchronize")):
        t.launch("cudaLaunchKernel", h, 5, "k", h + 10, 20)
        if op:
            t.op(op, h + 8, 40)
        t.x("cuda_runtime", call, h + 10, 25)
        h += 150
    t.launch("cudaLaunchKernel", h, 5, "k", h + 10, 20)
    return t.write(path)


def test_each_sync_is_named_by_its_call(tmp_path: Path) -> None:
    row = _analyse(_calls_by_kind(tmp_path / "kinds.json.gz")).frames["idle"].set_index("step").loc["ProfilerStep#1"]
    # each kernel ends at h + 30 while its sync (h + 10, 25 µs) runs to h + 35: the next launch starts at h + 150
    assert (row["idle_sync_copy_ns"], row["idle_sync_synchronize_ns"], row["idle_sync_event_ns"]) == \
        (120_000, 120_000, 120_000)
    assert row["idle_sync_item_ns"] == 0 and row["idle_sync_ns"] == 360_000


def _startup(path: Path, free_us: int = 2_800_000) -> Path:
    """cuDNN's lazy init inside the first step: a ``cudaFree`` of seconds and a module load between kernels."""
    t = Trace()
    t.op("ProfilerStep#1", 0, free_us + 10_000)
    t.launch("cudaLaunchKernel", 5, 5, "k", 10, 20)
    t.x("cuda_runtime", "cudaFree", 40, free_us)
    t.x("cuda_driver", "cuModuleLoadData", free_us + 50, 3_000)
    t.x("cuda_runtime", "cudaMalloc", free_us + 3_060, 200)
    t.launch("cudaLaunchKernel", free_us + 3_300, 5, "k", free_us + 3_310, 20)
    return t.write(path)


def test_one_time_start_up_is_not_the_allocator(tmp_path: Path) -> None:
    result = _analyse(_startup(tmp_path / "startup.json.gz"))
    row = result.frames["idle"].set_index("step").loc["ProfilerStep#1"]
    assert row["idle_startup_ns"] == (2_800_000 + 3_000) * 1000  # the cudaFree and the module load, whole
    assert row["idle_alloc_ns"] == 200_000  # the cudaMalloc of 200 µs stays the allocator's
    assert row["verdict"] == "host-bound" and result.frames["verdict"]["bound"].iloc[0] == "host-bound"
    worth = result.frames["worth_doing"].set_index("what")
    assert worth.index[0].startswith("profile past one-time start-up")
    graphs = worth[worth.index.str.startswith("close the host-bound gaps")]["saving_ns"]
    assert graphs.sum() <= row["idle_launch_ns"] - row["idle_startup_ns"]  # the 2.8 s are no graphs' to save


def _ddp(path: Path, overlap: bool) -> Path:
    """One step: 21 ms of computation and a 35 ms all-reduce after it (exposed) or beside it on another stream."""
    t = Trace()
    t.op("ProfilerStep#1", 0, 60_000)
    t.launch("cudaLaunchKernel", 5, 5, "volta_sgemm_128x64_nn", 10, 21_000)
    start = 50 if overlap else 21_010
    t.launch("cudaLaunchKernel", 20, 5, "ncclKernel_AllReduce_RING_LL_Sum_float", start, 35_000, stream=20)
    return t.write(path)


@pytest.mark.parametrize(("overlap", "bound"), [(False, "communication-bound"), (True, "GPU-bound")])
def test_exposed_communication_is_its_own_verdict(tmp_path: Path, overlap: bool, bound: str) -> None:
    result = _analyse(_ddp(tmp_path / "ddp.json.gz", overlap))
    row = result.frames["idle"].set_index("step").loc["ProfilerStep#1"]
    exposed = 35_000_000 - (21_000_000 - 40_000 if overlap else 0)  # the all-reduce less its overlap
    assert row["comm_exposed_ns"] == exposed and row["busy_compute_ns"] == row["busy_ns"] - exposed
    assert row["verdict"] == result.frames["verdict"]["bound"].iloc[0] == bound
    assert result.frames["verdict"]["bound_as_traced"].iloc[0] == "GPU-bound"  # the labels' rule: NCCL is busy
    if not overlap:
        assert result.frames["worth_doing"]["what"].iloc[0].startswith("overlap communication")


def _hostile(kind: str, path: Path) -> Path:
    t = Trace(old=kind.startswith("old"))
    t.op("ProfilerStep#1", 0, 500)
    t.launch("cudaLaunchKernel", 5, 5, "k", 10, 20)
    if kind == "old dims not a list":
        t.op("aten::mm", 40, 10, **{"Input dims": "[[2, 2]]x"})
    elif kind == "old step twice":
        t.x("user_annotation", "ProfilerStep#1", 0, 500)
    elif kind == "dataloader without duration":
        t.x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 35, 0)
    elif kind == "sync that never returns":
        t.x("cuda_runtime", "cudaStreamSynchronize", 25, 10**9)
    elif kind == "step starts after its work":
        t.events[0]["ts"] = t.base + 100
    elif kind == "nccl alone":
        t.events = t.events[:1]
        t.launch("cudaLaunchKernel", 5, 5, "ncclKernel_AllReduce", 10, 200)
    elif kind == "old long call that synchronises":
        t.x("Runtime", "cudaDeviceSynchronize", 35, 2_000_000)
    elif kind == "old dataloader as operator only":
        t.op("DataLoader.__next__", 35, 300)
    t.launch("cudaLaunchKernel", 400, 5, "k", 410, 20)
    return t.write(path)


_KINDS = ["old dims not a list", "old step twice", "dataloader without duration", "sync that never returns",
          "step starts after its work", "nccl alone", "old long call that synchronises",
          "old dataloader as operator only"]


@pytest.mark.parametrize("kind", _KINDS)
def test_hostile_shapes_of_the_causes_are_held(tmp_path: Path, kind: str) -> None:
    """Each case reads without a traceback, its idle adds up (busy plus the causes is the step's span) and its
    verdict is one of the verdicts."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            result = analyze(_hostile(kind, tmp_path / "hostile.json.gz"))[0]
        except Exception:
            FUZZ_RESULTS["traceback"] += 1
            raise
    idle = result.frames["idle"]
    steps = idle[idle["step"].astype(str) != "(between steps)"]
    causes = steps[[f"idle_{c}_ns" for c in ("launch", "sync", "data", "alloc", "event", "other")]].sum(axis=1)
    right = (causes == steps["span_ns"] - steps["busy_ns"]).all() and steps["verdict"].isin(
        ["GPU-bound", "communication-bound", "host-bound", "sync-bound", "data-bound", "allocator", "event wait",
         "other idle"]).all()
    if kind == "old long call that synchronises":  # a sync of 2 s waits for the GPU: never start-up
        right = right and int(steps["idle_startup_ns"].sum()) == 0
    if kind == "old dataloader as operator only":
        right = right and int(steps["idle_data_ns"].sum()) > 0
    FUZZ_RESULTS["silently wrong" if not right else "warning" if said else "held"] += 1
    assert right, idle.to_string()


def test_host_activity_has_the_same_columns_whether_or_not_anything_overlapped() -> None:
    """The host-activity table (what the host did in host-bound gaps) keeps text, text, int64 and float64 columns
    when no op or range overlaps a gap (a thread that recorded none), as when one does: an op's whole interval as a
    gap overlaps it for exactly its duration, read from the trace's own row."""
    import pandas as pd

    from fuseprof.analysis.facts.idle import host_activity
    from fuseprof.parse.trace_events import read_trace_tables

    tables = read_trace_tables(FIXTURES / "tp2" / "tp_mlp-rank0.json.gz")
    op = tables.ops.sort_values("dur_ns").iloc[-1]
    no_steps = pd.DataFrame({"start_ns": pd.Series([], dtype="int64"), "dur_ns": pd.Series([], dtype="int64")})

    def gap(tid: str) -> pd.DataFrame:
        return pd.DataFrame({"idle_launch_ns": [int(op["dur_ns"])], "tid": [tid], "gap_start_ns": [int(op["start_ns"])],
                             "launch_ns": [int(op["start_ns"] + op["dur_ns"])]})

    found = host_activity(gap(str(op["tid"])), tables, no_steps)
    row = found[(found["name"] == op["name"]) & (found["kind"] == "op")]
    assert row["overlap_ns"].tolist() == [int(op["dur_ns"])]
    nothing = host_activity(gap("a thread that recorded nothing"), tables, no_steps)
    assert nothing.empty and nothing.dtypes.to_dict() == found.dtypes.to_dict()
    assert host_activity(gap(str(op["tid"])).iloc[:0], tables, no_steps).dtypes.to_dict() == found.dtypes.to_dict()

"""Timing a call two ways: as called (host dispatch included) and as GPU work (graph replay).

As-called time is CUDA events around a plain call, which includes the host's launch work
whenever the GPU waits for it: the figure a decode step sees. GPU time is CUDA events around
one CUDA-graph replay, which removes per-launch host cost. Caches are flushed before every
sample by *reading* a buffer twice the L2's size, so no sample reads inputs left in L2 (inputs
under the H200's 60 MB L2 otherwise report more than the HBM can deliver). Reading, not
writing: a zero-fill flush left up to 60 MB of dirty lines that the timed kernel then paid to
write back (seen on the H200: a 25 MB copy timed 13.8 µs, 1.8 TB/s, after a zero-fill flush).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

L2_FLUSH_POLICY = "L2 flushed before each sample (read of a 2x L2-size buffer)"
CPU_POLICY = "none (CPU wall clock)"


class L2Flusher:
    """Evicts L2 by reading a buffer of twice its size; the lines it leaves are clean."""

    def __init__(self, device: torch.device) -> None:
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20
        self._buffer = torch.ones(2 * l2_bytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        torch.sum(self._buffer, dtype=torch.int64)


def summarize(samples_ns: Sequence[float], prefix: str) -> dict[str, float]:
    """Median and 10th/90th percentiles, keyed '<prefix>_median_ns' etc."""
    ordered = sorted(samples_ns)
    deciles = statistics.quantiles(ordered, n=10) if len(ordered) > 1 else [ordered[0]] * 9
    return {
        f"{prefix}_median_ns": statistics.median(ordered),
        f"{prefix}_p10_ns": deciles[0],
        f"{prefix}_p90_ns": deciles[-1],
    }


def _elapsed_ns(pairs: list[tuple[torch.cuda.Event, torch.cuda.Event]]) -> list[float]:
    torch.cuda.synchronize()
    return [float(round(start.elapsed_time(end) * 1e6)) for start, end in pairs]  # ms -> whole ns


def _event_pair() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def time_as_called(fn: Callable[..., Any], inputs: Sequence[Any], flush: L2Flusher, repeats: int) -> list[float]:
    pairs = []
    for _ in range(repeats):
        flush()
        torch.cuda.synchronize()  # the host starts each call with an idle GPU, as a fresh step would
        start, end = _event_pair()
        start.record()
        fn(*inputs)
        end.record()
        pairs.append((start, end))
    return _elapsed_ns(pairs)


def _clear_cublas_workspaces() -> None:
    """Drop cuBLAS's cached workspaces, so a capture allocates its own inside the graph's pool.

    cuBLAS keeps one workspace per stream outside any graph; a graph captured with it keeps its
    address, and the next clear (torch.compile's CUDA graphs clear before and after each recording)
    frees it under the graph: a decoder-layer run that kept one graph per shape beside
    mode="reduce-overhead" died with "unspecified launch failure" on replay. PyTorch's own CUDA
    graph trees clear the same way.
    """
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def capture_graph(fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Warm up on a side stream (as CUDA graph capture requires), then capture one call; returns
    the graph and the captured call's outputs (filled by each replay, not by the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    _clear_cublas_workspaces()
    with torch.cuda.graph(graph):
        outputs = fn(*inputs)
    torch.cuda.synchronize()
    _clear_cublas_workspaces()
    return graph, outputs


def time_graph_replay(fn: Callable[..., Any], inputs: Sequence[Any], flush: L2Flusher, repeats: int) -> list[float]:
    graph, _ = capture_graph(fn, inputs)
    pairs = []
    for _ in range(repeats):
        flush()
        start, end = _event_pair()
        start.record()
        graph.replay()
        end.record()
        pairs.append((start, end))
    return _elapsed_ns(pairs)


def host_dispatch_ns(fn: Callable[..., Any], inputs: Sequence[Any], calls: int = 100) -> float:
    """Mean host time per call over back-to-back calls with no sync: what a decode loop pays on
    the CPU per op while the GPU queue absorbs the launches."""
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(*inputs)
    elapsed = time.perf_counter_ns() - t0
    torch.cuda.synchronize()
    return elapsed / calls


def time_cpu(fn: Callable[..., Any], inputs: Sequence[Any], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn(*inputs)
        samples.append(float(time.perf_counter_ns() - t0))
    return samples

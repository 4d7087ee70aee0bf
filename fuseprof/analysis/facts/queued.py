"""The gap a GPU leaves between kernels even when they are queued back to back, per idle gap.

A GPU fed faster than it runs still starts each kernel a little after the previous one ended: about 1.4 µs
between stream launches and 0.4 µs between a graph's nodes on H100 and H200 (the medians of the queued gaps in
``tests/fixtures/truth_unprofiled/h100m``: whole gaps after a launch call that had returned before the gap
began). The un-profiled truth measures a step's GPU busy that way, its kernels queued behind a spin kernel, and
states its bound on it ("GPU-bound when busy >= 80% of the un-profiled step"); the union of the kernels' intervals
leaves those gaps out, 7-34% less on the paired captures (h100m, h200l), where the union with each gap's queued
latency added is 0.99-1.10x the measured busy. So the bound counts, per gap, at most that latency as the GPU's own
time (``idle_queued_ns``), not only the union.

The latency is the trace's own where it holds enough queued gaps of the kind (``MIN_QUEUED``): their median,
for gaps before a graph's node and before a stream launch apart, at most ``MAX_NS`` (a larger median is waits on
another stream or rank, not the GPU's own gap: 189 µs before hta_torchrec's graph nodes); else the H100/H200
figure above, on any GPU (a trace with few queued gaps is host-bound throughout, where a microsecond a gap does not
move its bound). A trace whose kernels abut (AMD traces, vLLM's graph replays: 1 ns apart) keeps its own median.

What CUDA graphs close after a launch (``graph_closes_ns``) is the submission latency of a late launch, a few
microseconds: at most ``SUBMIT_NS`` of a gap's other part counts, the rest of a long wait after the launch returned
being a dependency (another rank, another stream) a graph keeps.
"""

from __future__ import annotations

import numpy as np

DEFAULT_NS = {False: 1_400, True: 430}  # by whether a graph launch queued the gap's next work
MIN_QUEUED = 20  # queued gaps of a kind a trace needs for its own median (5 gave mi300_bert_small 6.9 µs)
MAX_NS = 5_000  # the most a trace's median may be
SUBMIT_NS = 10_000  # the most of a gap's other part that is a launch's submission latency


def latencies(length: np.ndarray, graph: np.ndarray, other: np.ndarray) -> dict[bool, int]:
    """The trace's queued latency before a stream launch (False) and a graph's node (True): the median of its
    queued gaps of the kind (all of the gap after the next work's launch call returned: no host, sync or event wait
    in it), ``DEFAULT_NS`` where it has fewer than ``MIN_QUEUED``."""
    queued = (other == length) & (length > 0)
    out = {}
    for kind in (False, True):
        seen = length[queued & (graph == kind)]
        out[kind] = min(int(np.median(seen)), MAX_NS) if seen.size >= MIN_QUEUED else DEFAULT_NS[kind]
    return out


def queued_ns(length: np.ndarray, graph: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per gap (``idle.idle_gaps``': its ``length``, whether a graph launch queued its next work, its ``other``
    part): the part of it a GPU fed back to back would leave too, at most the gap: the trace's queued latency for
    the kind of work after it."""
    latency = latencies(length, graph, other)
    return np.minimum(length, np.where(graph, latency[True], latency[False]))


def graph_closes_ns(length: np.ndarray, graph: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per gap before a stream launch: its ``other`` part (at most ``SUBMIT_NS``) beyond what a graph's node leaves
    (the trace's graph latency, at most the gap), which a CUDA graph of the step closes along with the launch idle:
    the submission latency after each launch call (0.4 against 1.4 µs queued, 2-5 µs after a late launch on H100);
    0 before a graph's node."""
    node = np.minimum(length, latencies(length, graph, other)[True])
    return np.where(graph, 0, np.maximum(np.minimum(other, SUBMIT_NS) - node, 0))

"""Programmatic dependent launch (PDL): the one way two kernels of one stream legally overlap.

On sm90 and later a kernel launched with the programmatic-stream-serialization attribute may start once its
predecessor on the stream signals (``cudaTriggerProgrammaticLaunchCompletion``, ``griddepcontrol.launch_dependents``)
instead of when it ends; its ``cudaGridDependencySynchronize`` then waits for the predecessor's results. The
attribute can be set only through ``cudaLaunchKernelEx``/``cuLaunchKernelEx`` or on a graph's kernel node, so a
graph replay or such a launch is the only place it can occur. On B300 SGLang graph replays kernels start 0.16-1.7 µs
before their predecessor ends; in the committed B200 trace (tests/fixtures/thirdparty/b200_eager.json.gz) 74
TensorRT-LLM MoE kernels launched by cuLaunchKernelEx/cudaLaunchKernelExC start 0.13-3.74 µs early, every one
ending after its predecessor. The integrity check (``fuseprof.analysis.facts.integrity``) subtracts what this module
recognises from the stream overlap it calls wrong timestamps.

A pair is recognised when the later kernel was launched by a graph or ``*LaunchKernelEx*``, starts at most
``PDL_LEAD_NS`` before its predecessor ends, and ends no earlier than it (the dependent waits for the predecessor's
results, so it cannot finish first).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.graphs import is_graph_launch
from fuseprof.analysis.facts.timeline import stream_labels

PDL_LEAD_NS = 4_000  # the longest early start recognised: B300 graph replays show 1.7 µs, B200 MoE GEMMs 3.74
_EX_LAUNCH = r"LaunchKernelEx"  # cudaLaunchKernelExC, cuLaunchKernelEx: the launches that can carry the attribute


def may_launch_dependently(launch_api: pd.Series) -> np.ndarray:
    """Which kernels were launched where the programmatic-serialization attribute can be set: CUDA's graph and
    ``*LaunchKernelEx*`` calls (ROCm has no such launch: a ``hip*`` call never qualifies)."""
    api = launch_api.astype(object)
    cuda = api.map(lambda a: isinstance(a, str) and a.startswith("cu")).to_numpy(bool)
    ex = api.map(lambda a: isinstance(a, str) and _EX_LAUNCH in a).to_numpy(bool)
    return cuda & (is_graph_launch(api).to_numpy(bool) | ex)


def dependent_launch_overlap_ns(kernels: pd.DataFrame) -> tuple[int, int]:
    """The overlap (ns) and number of kernel pairs on one stream that programmatic dependent launch explains:
    each kernel against the one before it on its stream (by start), overlap = predecessor's end - its start."""
    if kernels.empty:
        return 0, 0
    # each stream's kernels together, by start (ties in the trace's order), on positions, not a sorted copy of the
    # frame: which stream comes first does not matter, only each kernel's predecessor on its own
    codes = pd.factorize(stream_labels(kernels))[0]
    order = np.lexsort((kernels["start_ns"].to_numpy(np.int64), codes))
    start = kernels["start_ns"].to_numpy(np.int64)[order]
    end = start + kernels["dur_ns"].to_numpy(np.int64)[order]
    stream = codes[order]
    dependent = may_launch_dependently(kernels["launch_api"].iloc[order]) if "launch_api" in kernels else \
        np.zeros(len(order), bool)
    same = (stream[1:] == stream[:-1]) & (stream[1:] >= 0)
    lead = end[:-1] - start[1:]
    legal = same & dependent[1:] & (lead > 0) & (lead <= PDL_LEAD_NS) & (end[1:] >= end[:-1])
    return int(lead[legal].sum()), int(legal.sum())

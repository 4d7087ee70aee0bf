"""Every rule of torch's own trace validator (torch 2.13, ``torch.profiler._trace_validator``), as integrity
rows with the share of GPU time each puts in doubt (``fuseprof.analysis.facts.completeness``). Where fuseprof reads a
rule differently from torch, the docstring says how and why; docs/validation.md has the table.

    kernel_before_launch      torch: per External id, the earliest kernel before the earliest ``cudaLaunchKernel``.
                              fuseprof: each GPU event before its own launch call (correlation id: one call, one
                              kernel; every launch API, ``cuLaunchKernel``, ``hipLaunchKernel``, graph launches).
    stream_wait_ids           torch: a stream wait or event sync without ``wait_on_cuda_event_record_corr_id`` ≥ 0
                              is a violation. fuseprof: absent from every wait is what an older Kineto
                              wrote (a capture setting: the version); negative is a link Kineto failed to make.
                              fuseprof computes nothing from waits: no GPU time in doubt either way.
    stream_wait_forward       torch: the event record a wait names is missing, or later than the wait. fuseprof:
                              the same, no GPU time in doubt (as above); a missing record is told apart when the
                              wait comes before the trace's first event record (its record was before the
                              profiler started: the trace's edge).
    stream_sync_early         torch: a ``Stream Sync`` that *starts* while a kernel of its stream runs. That is
                              what a sync is for (the host waits for the running kernel; the shared HTA traces do
                              it), so fuseprof flags a sync that *ends* — returns to the host — more than 1 µs
                              before a kernel of its stream that had started before the sync began: the kernel's
                              or the sync's times are wrong, and that kernel's time is in doubt. torch's count is
                              in the detail.
    nccl_metadata             torch: every ``record_param_comms`` carries Collective name, dtype, In/Out msg nelems
                              and Group size. fuseprof: the same, as a capture setting (older torch did not write
                              them): a note, unless ``--require nccl``.
    backward_sequence_shared  torch: one autograd ``Sequence number`` with two backward op names. fuseprof: per
                              (sequence number, forward thread): the counter is per thread, so two threads' forward
                              ops may share a number without fault. The kernels launched under such backward nodes
                              have their forward op (and module) in doubt.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.completeness import Finding
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_notes import TraceNotes

SYNC_SLACK_US = 1.0  # a sync's end this far inside a kernel is clock jitter between host and GPU stamps
WAITS = ("Stream Wait Event", "Event Sync")


def kernel_before_launch(every: pd.DataFrame) -> Finding:
    """GPU events starting before their own launch call started (``every``: the linked GPU events)."""
    launch = every["launch_start_ns"]  # on the columns' arrays: only counted and summed
    start, called = every["start_ns"].to_numpy(np.int64), launch.fillna(0).to_numpy(np.int64)
    early = launch.notna().to_numpy(bool) & (start < called)
    n = int(early.sum())
    return Finding("kernel_before_launch", n, n == 0,
                   f"{n:,} GPU event(s) start before their launch call (up to "
                   f"{(called[early] - start[early]).max() / 1e3:,.3f} µs): host and GPU clocks "
                   "disagree, or the stamps are damaged" if n else "every GPU event starts after its launch",
                   "damage" if n else None, float(every["dur_ns"].to_numpy(np.int64)[early].sum()))


def stream_wait_rows(notes: TraceNotes) -> list[Finding]:
    """torch's two stream-wait rules (module docstring): ids absent or negative, and ids naming no earlier record."""
    waits = notes.syncs[notes.syncs["kind"].isin(WAITS)]
    absent, negative = waits["wait_corr"].isna(), waits["wait_corr"].fillna(0) < 0
    every_absent = bool(len(waits)) and bool(absent.all())
    n = int(absent.sum() + negative.sum())
    ids = waits.loc[waits["kind"].eq("Stream Wait Event") & waits["wait_corr"].notna() & ~negative]
    missing, later, edge = _forward_of(ids, notes.records)
    forward = int(missing.sum() - edge.sum() + later.sum())
    return [
        Finding("stream_wait_ids", n, n == 0,
                f"{n:,} of {len(waits):,} stream waits name no event record (wait_on_cuda_event_record_corr_id "
                + ("absent from every one: an older Kineto, which did not write it" if every_absent else "absent or < 0")
                + "); fuseprof computes nothing from them" if n else
                f"{len(waits):,} stream waits, each naming its record" if len(waits) else "no stream waits",
                ("setting" if every_absent else "damage") if n else None, 0.0),
        Finding("stream_wait_forward", forward, forward == 0,
                f"{forward:,} stream wait(s) name an event record that is not in the trace or comes after the wait "
                f"({int(later.sum()):,} after); fuseprof computes nothing from them" if forward else
                "every named event record precedes its wait" + (f" ({int(edge.sum()):,} recorded before the profiler "
                                                                "started)" if edge.any() else ""),
                "damage" if forward else None, 0.0),
    ]


def _forward_of(ids: pd.DataFrame, records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per wait naming a record (``ids``): whether its record is missing, later than the wait, or missing and
    the wait before the trace's first record (the edge). No such wait: no record is read."""
    if ids.empty:
        return (np.zeros(0, bool),) * 3
    records = records.melt(id_vars="ts", value_vars=["correlation", "external_id"]).dropna()
    first = records.groupby("value")["ts"].min()
    at = first.reindex(ids["wait_corr"].to_numpy()).to_numpy("float64")
    missing, later = np.isnan(at), at > ids["ts"].to_numpy("float64")
    before_any = ids["ts"].to_numpy("float64") < (records["ts"].min() if len(records) else np.inf)
    return missing, later, missing & before_any


def stream_sync_early(notes: TraceNotes) -> Finding:
    """Stream syncs that return while a kernel of their stream, started before the sync began, still runs; with
    torch's own count (a sync starting inside a running kernel) in the detail."""
    syncs = notes.syncs[notes.syncs["kind"].eq("Stream Sync")]
    kernels = notes.kernels
    torch_count, early, doubt_us = 0, 0, 0.0
    for (device, stream), group in syncs.groupby(["device", "stream"], dropna=False):
        on = kernels[(kernels["device"] == device) & (kernels["stream"] == stream)]
        if on.empty:
            continue
        start, end = on["ts"].to_numpy("float64"), (on["ts"] + on["dur"]).to_numpy("float64")
        for ts, dur in zip(group["ts"].to_numpy("float64"), group["dur"].to_numpy("float64")):
            torch_count += int(((start < ts) & (ts < end)).sum())
            bad = (start < ts) & (ts + dur + SYNC_SLACK_US < end)
            early += int(bad.sum())
            doubt_us += float((end - start)[bad].sum())
    return Finding("stream_sync_early", early, early == 0,
                   (f"{early:,} stream sync(s) return while a kernel of their stream that started before them still "
                    "runs: the sync's or the kernel's stamps are wrong" if early else
                    f"no stream sync returns before its stream's running kernel ({len(syncs):,} syncs)" if len(syncs)
                    else "no stream syncs")
                   + (f"; torch's rule (a sync starting inside a running kernel) counts {torch_count:,}, which a sync "
                      "waiting on its kernel does" if len(syncs) else ""), "damage" if early else None, doubt_us * 1e3)


def nccl_metadata(notes: TraceNotes) -> Finding:
    """record_param_comms ops without the NCCL metadata torch's validator asks for: a capture setting."""
    without = notes.comms[notes.comms["missing"].astype(str) != ""]
    return Finding("nccl_metadata", len(without), without.empty,
                   f"{len(without):,} of {len(notes.comms):,} record_param_comms ops lack "
                   f"{without['missing'].iloc[0]}" if len(without) else
                   f"{len(notes.comms):,} record_param_comms ops, each with its NCCL metadata" if len(notes.comms)
                   else "no record_param_comms ops",
                   "setting" if len(without) else None, 0.0)


def backward_sequence_shared(tables: TraceTables, every: pd.DataFrame) -> Finding:
    """Backward nodes of one forward thread sharing a sequence number with another op's: the kernels launched
    under them (on their thread, inside their span) have their forward op in doubt."""
    nodes = tables.autograd.dropna(subset=["sequence"]) if len(tables.autograd) else tables.autograd
    numbers, torch_shared, doubt = _shared_sequences(nodes, every) if len(nodes) else (0, 0, 0.0)
    return Finding("backward_sequence_shared", numbers, numbers == 0,
                   (f"{numbers:,} autograd sequence number(s) of one forward thread name two backward ops: their "
                    "kernels' forward op is in doubt" if numbers else "one backward op per sequence number and thread")
                   + (f"; torch's rule (any thread) counts {torch_shared:,}" if torch_shared != numbers else ""),
                   "damage" if numbers else None, doubt)


def _shared_sequences(nodes: pd.DataFrame, every: pd.DataFrame) -> tuple[int, int, float]:
    """For backward nodes with a sequence number (a trace without any, an inference's, reads none of this): the
    numbers one forward thread shares between two backward ops, torch's count of them (any thread), and the GPU
    time of the kernels launched under those nodes."""
    op = nodes["name"].astype(str).str.split(":", n=1).str[-1].str.strip()
    key = [nodes["sequence"], nodes["fwd_tid"].astype(str)]
    shared = op.groupby(key).transform("nunique") > 1
    torch_shared = int((op.groupby(nodes["sequence"]).nunique() > 1).sum())
    bad = nodes[shared.to_numpy(bool)]
    doubt = 0.0
    launched = every[every["launch_start_ns"].notna()] if len(bad) else every
    for _, node in bad.iterrows():
        inside = launched["launch_start_ns"].between(node["start_ns"], node["start_ns"] + node["dur_ns"]) & (
            launched["tid"].astype(str) == str(node["tid"]))
        doubt += float(launched.loc[inside, "dur_ns"].sum())
    numbers = bad.groupby(["sequence", bad["fwd_tid"].astype(str)]).ngroups if len(bad) else 0
    return numbers, torch_shared, doubt


def findings(tables: TraceTables, every: pd.DataFrame, notes: TraceNotes) -> list[Finding]:
    """Every rule of torch's validator, as fuseprof reads it (module docstring)."""
    return [kernel_before_launch(every), *stream_wait_rows(notes), stream_sync_early(notes), nccl_metadata(notes),
            backward_sequence_shared(tables, every)]

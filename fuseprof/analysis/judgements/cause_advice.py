"""What the idle section's newer causes advise (``fuseprof.analysis.facts.idle``): which calls the syncs were, one-time
start-up and exposed communication as rows of "worth doing", and CUDA graphs kept below the syncs they cannot hold.

A CUDA graph cannot capture a step that reads a value back on the host (``.item()``, a copy to the host, a
data-dependent shape such as ``nonzero``): where the steps read back more than once each (``sync_reads``: one, the
loss logged at the step's end, leaves the step's body to a graph), graphs come only after the syncs are gone, so
their row says both ("remove synchronisations, then close the host-bound gaps") and saves both: in a loop the host
bounds, removing the syncs alone saves little (the host's work then leaves launch gaps) and graphs after them most.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fuseprof.analysis.facts.idle import SYNC_CALLS

GRAPHS = "close the host-bound gaps"  # how the worth-doing rows these rules move begin (sections/verdict.py)
SYNCS = "remove synchronisations"
THEN = "remove synchronisations, then "  # how the graph row begins where the syncs must go first
_SAID = {"item": ".item()", "copy": "copies to the host (.cpu(), .tolist(), nonzero)",
         "synchronize": "stream/device synchronize", "event": "event synchronize"}


def _steps(idle: pd.DataFrame) -> pd.DataFrame:
    return idle[idle["step"].astype(str) != "(between steps)"] if len(idle) > 1 else idle


def sync_why(idle: pd.DataFrame) -> str:
    """The sync row's why: which calls the host waited in, each with its idle (µs), largest first."""
    totals = {c: float(idle[f"idle_sync_{c}_ns"].sum()) for c in SYNC_CALLS if f"idle_sync_{c}_ns" in idle}
    named = [f"{_SAID[c]} {v / 1e3:,.1f} µs" for c, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v > 0]
    return "the host waited for the GPU" + (f" in {', '.join(named)}" if named else "") + ", then had to launch again"


def cause_rows(idle: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows for "worth doing": one-time start-up in the window (profile past it) and the communication the GPU
    did not overlap with computation."""
    rows = []
    startup = float(idle["idle_startup_ns"].sum()) if "idle_startup_ns" in idle else 0.0
    rows.append({"what": "profile past one-time start-up (torch.profiler.schedule wait/warmup steps)",
                 "saving_ns": startup, "gpu_saving_ns": float("nan"),
                 "why": "CUDA context, handles and module loading in the window: paid once, not per step"})
    exposed = float(_steps(idle)["comm_exposed_ns"].sum()) if "comm_exposed_ns" in idle else 0.0
    rows.append({"what": "overlap communication with computation (DDP buckets, async collectives; check for a "
                         "late rank)", "saving_ns": exposed, "gpu_saving_ns": exposed,
                 "why": "NCCL/RCCL kernels ran with no computation beside them"})
    return rows


def graphs_after_syncs(frame: pd.DataFrame, idle: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (ranked worth-doing rows) where the steps read values back more than once each (``READ_BACKS``):
    the CUDA-graph row becomes the syncs' removal and then graphs (``THEN``), its saving both rows' (the sync row's
    is what removing them saves, ``fuseprof.analysis.paths.sync_saving``; the graph row's the launch idle left, which
    holds the host work the syncs no longer make the GPU wait for), ranked again; the sync row stays as it is."""
    steps = _steps(idle)
    reads = float(steps["sync_reads"].mean()) if "sync_reads" in steps and len(steps) else 0.0
    what = frame["what"].astype(str)
    graphs, syncs = frame.index[what.str.startswith(GRAPHS)], frame.index[what.str.startswith(SYNCS)]
    if reads <= 1 or graphs.empty or syncs.empty:
        return frame
    out = frame.copy()
    # without the syncs the host runs ahead and the launches queue: the submission latency a graph would close
    # (``idle_graph_closes_ns``) is gone with them, in the sync row's saving (h100n/sync_bound: graphs after the
    # syncs saved 0.114 ms a step more than the syncs alone, where the launch idle and that latency add to 0.33)
    closes = float(steps["idle_graph_closes_ns"].sum()) if "idle_graph_closes_ns" in steps else 0.0  # the row's own
    graph_part = max(float(out.loc[graphs[0], "saving_ns"]) - closes, 0.0)
    out.loc[graphs[0], "what"] = THEN + str(out.loc[graphs[0], "what"])
    out.loc[graphs[0], "saving_ns"] = graph_part + float(out.loc[syncs[0], "saving_ns"])
    out.loc[graphs[0], "why"] = f"{out.loc[graphs[0], 'why']}; a CUDA graph cannot hold .item() or a copy to the " \
                                "host: the syncs go first, and this saving is both"
    return out.sort_values("saving_ns", ascending=False, kind="stable")

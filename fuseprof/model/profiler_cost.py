"""What torch.profiler adds to the host, and what the host does without it, per recorded event under each setting:
the calibration table (``scripts/calibrate_profiler_cost.py``, ``docs/profiler-cost.md``) and the settings a trace
was recorded with.

A trace's host time is the host's time *while the profiler recorded*. Per step, ``fuseprof.analysis.facts.unprofiled``
takes off the profiler's **share** of the host's time: ``SHARE_SCALE`` × Σ count × cost / Σ count × (cost + the same
event's time without the profiler), counted by kind from the events the step recorded. A share, not a sum of µs:
the profiler's cost and the host's own work grow together on a slower host (two H100 hosts of 2026-12-07 ran the same
traced steps 1.8-2.1x apart, and the profiler's measured cost with them), so the share holds across hosts where a sum
of one host's µs did not. The table is the run of 2026-12-07 on an H100 (torch 2.11.0+cu130;
``docs/measurements/profiler-cost-h100-20261207-timefirst.json``) whose loops without the profiler were timed before
the process ran any profiler: an ended profiler session leaves the process slower for the rest of its life
(``scripts/probe_profiler_after_effect.py``), and the table of 2026-12-06, timed against loops between profiled ones,
carried that and put a launch's cost at 1.0-1.2 µs where it is 7.0-8.6.

``SHARE_SCALE`` is the fit on real steps (``scripts/fit_profiler_cost.py``,
``docs/measurements/profiler-cost-fit-h100-20261207.json``): the median over host-bound captures with truth timed
before any profiler ran of their measured share over the table's. A call that a plan drops removes its own time less
the profiler's cost in it, in µs: the table's cost × ``SHARE_SCALE`` × the host's speed against the calibration's
(the trace's median kernel-launch call over ``REFERENCE_LAUNCH_US``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fuseprof.errors import InvalidArgumentError

# per setting, µs of host time the profiler adds per recorded event (op: any CPU op; launch: a kernel launch, memcpy
# or memset call with its GPU record; range: a record_function range; frame: a Python call with_stack records;
# module: an nn.Module call's record beyond its op; graph_launch: a graph replay; sync: .item()'s cost beyond its ops
# and its copy)
H100_TORCH_2_11: dict[str, dict[str, float]] = {
    "activities": {"op": 1.496, "range": 1.213, "frame": 0.033, "launch": 7.028, "module": 0.0,
                   "graph_launch": 10.591, "sync": 13.147},
    "shapes": {"op": 1.860, "range": 1.244, "frame": 0.023, "launch": 7.392, "module": 0.950,
               "graph_launch": 9.924, "sync": 16.143},
    "stack": {"op": 2.623, "range": 13.247, "frame": 0.614, "launch": 8.571, "module": 2.529,
              "graph_launch": 11.998, "sync": 18.808},
    "memory": {"op": 2.251, "range": 0.768, "frame": 0.031, "launch": 7.268, "module": 1.655,
               "graph_launch": 9.648, "sync": 16.680},
}
# µs of host time per event of each kind without the profiler, in a process that never ran one (the same run)
H100_TORCH_2_11_UNPROFILED: dict[str, float] = {"op": 3.409, "range": 13.551, "frame": 0.087, "launch": 8.656,
                                                "module": 4.572, "graph_launch": 10.662, "sync": 17.025}
SETTINGS = {"activities": "activities (CPU + CUDA)", "shapes": "+ record_shapes",
            "stack": "+ record_shapes, with_modules, with_stack", "memory": "+ record_shapes, profile_memory"}
# the fit on top of the table (docs/measurements/profiler-cost-fit-h100-20261207.json, scripts/fit_profiler_cost.py)
SHARE_SCALE = 1.204
MAX_SHARE = 0.9  # the profiler never made more of a step's host time than this on any capture measured
REFERENCE_LAUNCH_US = 8.57  # the calibration host's median traced kernel-launch call (h100i's traces, same machine)
MIN_LAUNCHES = 20  # fewer kernel launches than this say nothing of the host's speed
UNCERTAINTY = 0.25  # the fit's residuals on 18 of its 19 captures (docs/profiler-cost.md says where it misses)
UNCALIBRATED = 0.50  # a vendor or torch the table was not measured on
TORCH_CALIBRATED = ("2.11", "2.12", "2.13")
# the script's units and the kinds they measure (``_kind_rows``): a kind is its unit less the unit it builds on
_UNITS = {"op": ("cpu_op", None), "launch": ("cuda_op", "cpu_op"), "module": ("module", "cuda_op"),
          "range": ("range", None), "frame": ("py_call", None), "graph_launch": ("graph_replay", None),
          "sync": ("item_sync", "cuda_op")}


@dataclass(frozen=True)
class Calibration:
    """Per setting, µs per recorded event of each kind (the profiler's cost), the same events' µs without the
    profiler, and where the figures were measured."""

    per_event_us: dict[str, dict[str, float]] = field(default_factory=lambda: H100_TORCH_2_11)
    unprofiled_us: dict[str, float] = field(default_factory=lambda: H100_TORCH_2_11_UNPROFILED)
    source: str = f"H100, torch 2.11 (docs/profiler-cost.md), share ×{SHARE_SCALE} (fit)"
    share_scale: float = SHARE_SCALE  # real steps' share over the unit loops' (the fit; 1: the unit loops alone)

    @classmethod
    def from_file(cls, path: Path) -> Calibration:
        """The table ``scripts/calibrate_profiler_cost.py --out DIR`` wrote (``DIR/profiler_cost.json``): a
        re-calibration on the user's own machine. A table written before the script timed its loops before any
        profiler ran has no such loops, and is refused, as is one measured without a GPU (it has no launch cost, and
        would read a CUDA trace's steps as nearly free of the profiler) or without every setting."""
        measured = json.loads(path.read_text())
        workloads = measured.get("workloads", {})
        if not workloads or any("never_profiled" not in w for w in workloads.values()):
            raise InvalidArgumentError(f"{path}: no loops timed before any profiler ran (never_profiled); "
                                       "re-run scripts/calibrate_profiler_cost.py to write them")
        missing = [s for s in SETTINGS if not all(s in w for w in workloads.values())]
        if missing or "cuda_op" not in workloads:
            what = f"no {', '.join(missing)} setting" if missing else "no CUDA loops (measured without a GPU)"
            raise InvalidArgumentError(f"{path}: {what}; run scripts/calibrate_profiler_cost.py on the machine that "
                                       "took the trace, with its GPU")
        first = {name: w["never_profiled"]["median_us"] for name, w in workloads.items()}
        table = {setting: _kind_rows({name: w[setting]["cost_us"] for name, w in workloads.items()})
                 for setting in SETTINGS}
        facts = measured.get("machine", {})
        where = f"{facts.get('gpu', facts.get('cpu', '?'))}, torch {facts.get('torch', '?')} ({path})"
        return cls(table, _kind_rows(first), f"{where}, share ×{SHARE_SCALE} (the H100 fit)")

    def cost_us(self, setting: str, kind: str) -> float:
        """One recorded event's cost; a kind the table lacks (a CPU-only calibration has no launch) costs 0."""
        return max(0.0, self.per_event_us[setting].get(kind, 0.0))


def _kind_rows(units: dict[str, float]) -> dict[str, float]:
    """Per kind, µs from the script's units (each kind its unit less the unit it builds on, at least 0); a kind
    whose unit did not run (CUDA's on a CPU) is left out."""
    return {kind: max(0.0, units[unit] - (units[base] if base else 0.0)) for kind, (unit, base) in _UNITS.items()
            if unit in units and (base is None or base in units)}


DEFAULT = Calibration()


def sync_call_us(row: dict[str, float]) -> float:
    """The cost of one synchronising call alone: the table's ``sync`` is an ``.item()`` beyond one CUDA op —
    two more ops (``aten::item``, ``aten::_local_scalar_dense``), a device-to-host copy (a launch with its GPU
    record) and the synchronising call — and the ops and the copy are counted as ops and launches."""
    return max(0.0, row.get("sync", 0.0) - 2 * row.get("op", 0.0) - row.get("launch", 0.0))


def setting_of(record_shapes: bool, with_stack: bool, with_modules: bool, profile_memory: bool) -> str:
    """The calibrated setting nearest to the one a trace was recorded with: stack and modules cost most,
    then profile_memory, then shapes."""
    if with_stack or with_modules:
        return "stack"
    if profile_memory:
        return "memory"
    return "shapes" if record_shapes else "activities"


def uncertainty(vendor: str | None, torch_version: str | None) -> tuple[float, str]:
    """The estimate's relative uncertainty and why: the fit's residual range where the table describes the trace's
    vendor and torch, twice that where not (said)."""
    if vendor not in (None, "NVIDIA"):
        return UNCALIBRATED, f"±{UNCALIBRATED:.0%}: calibrated on NVIDIA only, the trace is {vendor}"
    if torch_version is not None and not torch_version.startswith(TORCH_CALIBRATED):
        return UNCALIBRATED, f"±{UNCALIBRATED:.0%}: calibrated on torch 2.11-2.13, the trace is torch {torch_version}"
    return UNCERTAINTY, f"±{UNCERTAINTY:.0%} (the fit's residuals; held out, a host that drifts misses it: docs/profiler-cost.md)"

"""What torch.profiler adds to the host per recorded event, under each setting: the calibration table
(``scripts/calibrate_profiler_cost.py``, ``docs/profiler-cost.md``) and the settings a trace was recorded with.

A trace's host time is the host's time *while the profiler recorded*; ``fuseprof.analysis.facts.unprofiled`` takes
off, per step, the count of each recorded event times its cost here. The table is the mean of the two runs of
2026-12-06 on an H100 (torch 2.11.0+cu130; ``docs/measurements/profiler-cost-h100-20261206-{a,b}.json``).
Counts × costs explained 76–108% of the profiler's measured cost on a held-out decode step, so an estimate
carries ±25% (``UNCERTAINTY``); a trace from another vendor or torch, which this table does not describe,
carries twice that, and says so.

On real steps the unit loops under-count: a fit of the traced step less the measured un-profiled step on the
host-bound H100 captures with truth (``scripts/fit_profiler_cost.py``,
``docs/measurements/profiler-cost-fit-h100-20261206.json``) gives the profiler's cost per step as
``PER_STEP_US`` + ``SCALE`` × Σ count × the table's cost (deeper stacks, larger shapes and busier CUPTI buffers than a
unit loop has, and the profiler's own per-step work), times the host's speed against the fit's (the trace's median
kernel-launch call over ``REFERENCE_LAUNCH_US``); the estimate applies all three.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

# µs of host time per recorded event (op: any CPU op; launch: a kernel launch, memcpy or memset call with its
# GPU record; range: a record_function range; frame: a Python call with_stack records; module: an nn.Module
# call's record beyond its op; graph_launch: a graph replay; sync: .item()'s cost beyond its ops and its copy)
H100_TORCH_2_11: dict[str, dict[str, float]] = {
    "activities": {"op": 0.973, "range": 1.085, "frame": 0.016, "launch": 1.047, "module": 0.0,
                   "graph_launch": 3.398, "sync": 5.120},
    "shapes": {"op": 1.152, "range": 1.114, "frame": 0.017, "launch": 1.099, "module": 0.116,
               "graph_launch": 3.402, "sync": 6.329},
    "stack": {"op": 1.540, "range": 6.990, "frame": 0.282, "launch": 1.169, "module": 1.747,
              "graph_launch": 3.406, "sync": 7.429},
    "memory": {"op": 1.292, "range": 1.142, "frame": 0.021, "launch": 1.005, "module": 0.374,
               "graph_launch": 3.403, "sync": 6.473},
}
SETTINGS = {"activities": "activities (CPU + CUDA)", "shapes": "+ record_shapes",
            "stack": "+ record_shapes, with_modules, with_stack", "memory": "+ record_shapes, profile_memory"}
# the fit on top of the table (docs/measurements/profiler-cost-fit-h100-20261206.json, scripts/fit_profiler_cost.py)
SCALE = 2.202
PER_STEP_US = 256.3
REFERENCE_LAUNCH_US = 7.72  # the fit's traces' median traced kernel-launch call: the host speed the fit holds for
MIN_LAUNCHES = 20  # fewer kernel launches than this say nothing of the host's speed
UNCERTAINTY = 0.25  # the fit's leave-one-out error on 7 of its 9 traces (docs/profiler-cost.md)
UNCALIBRATED = 0.50  # a vendor or torch the table was not measured on
TORCH_CALIBRATED = ("2.11", "2.12", "2.13")
# the script's names for the kinds (``per_event_us`` of its JSON) and this table's
_SCRIPT_KINDS = {"op": "op", "range": "range", "stack_frame": "frame", "launch_with_kernel": "launch",
                 "module": "module", "graph_launch": "graph_launch", "sync": "sync"}


@dataclass(frozen=True)
class Calibration:
    """Per setting, µs per recorded event of each kind, and where the figures were measured."""

    per_event_us: dict[str, dict[str, float]] = field(default_factory=lambda: H100_TORCH_2_11)
    source: str = f"H100, torch 2.11 (docs/profiler-cost.md) ×{SCALE} + {PER_STEP_US:.0f} µs a step (fit)"
    scale: float = SCALE  # the real steps' cost over the unit loops' (the fit; 1: the unit loops alone)
    per_step_us: float = PER_STEP_US  # the profiler's cost per step beyond its events (the fit)

    @classmethod
    def from_file(cls, path: Path) -> Calibration:
        """The table ``scripts/calibrate_profiler_cost.py --out DIR`` wrote (``DIR/profiler_cost.json``): a
        re-calibration on the user's own machine."""
        measured = json.loads(path.read_text())
        table = {setting: {_SCRIPT_KINDS[k]: max(0.0, float(v)) for k, v in row.items() if k in _SCRIPT_KINDS}
                 for setting, row in measured["per_event_us"].items()}
        facts = measured.get("machine", {})
        where = f"{facts.get('gpu', facts.get('cpu', '?'))}, torch {facts.get('torch', '?')} ({path})"
        return cls(table, f"{where} ×{SCALE} + {PER_STEP_US:.0f} µs a step (the H100 fit)")

    def cost_us(self, setting: str, kind: str) -> float:
        """One recorded event's cost; a kind the table lacks (a CPU-only calibration has no launch) costs 0."""
        return max(0.0, self.per_event_us[setting].get(kind, 0.0))


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
    """The estimate's relative uncertainty and why: the held-out error where the table describes the trace's
    vendor and torch, twice that where not (said)."""
    if vendor not in (None, "NVIDIA"):
        return UNCALIBRATED, f"±{UNCALIBRATED:.0%}: calibrated on NVIDIA only, the trace is {vendor}"
    if torch_version is not None and not torch_version.startswith(TORCH_CALIBRATED):
        return UNCALIBRATED, f"±{UNCALIBRATED:.0%}: calibrated on torch 2.11-2.13, the trace is torch {torch_version}"
    return UNCERTAINTY, f"±{UNCERTAINTY:.0%} (held-out error of the calibration)"

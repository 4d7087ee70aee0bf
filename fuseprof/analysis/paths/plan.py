"""A what-if plan: the changes to one step's dependency graph that ``whatif`` replays.

Its own module because both the sequential replay (``whatif``) and the batched one (``replay_lanes``) read it;
kept beside either, the other would import it back and the two would form an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Plan:
    """Changes to a step graph: item → new duration, (item, dependency position) → new lag, a factor on every
    host time left unchanged (calls' own time and the host work between them: ``host_scale``, see
    ``fuseprof.analysis.paths.whatif.calibrated_scale``), and a factor on every GPU item's duration, the plan's own
    included (``gpu_scale``: 0 replays the host's own time per step, ``paths.loop_period``)."""

    duration: dict[int, int] = field(default_factory=dict)
    lag: dict[tuple[int, int], int] = field(default_factory=dict)
    host_scale: float = 1.0
    gpu_scale: float = 1.0

    def merge(self, other: Plan) -> Plan:
        return Plan({**self.duration, **other.duration}, {**self.lag, **other.lag}, self.host_scale * other.host_scale,
                    self.gpu_scale * other.gpu_scale)

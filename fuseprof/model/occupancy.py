"""Theoretical occupancy from registers, shared memory and block size, as the CUDA occupancy
calculator computes it, against the per-SM limits of the GPU that ran the kernel (``devices.limits_for``: its
compute capability's, with the trace's own registers, shared memory and threads per SM over them); checked
against ncu's ``sm__maximum_warps_per_active_cycle_pct`` on every committed kernel. A GPU whose limits are
unknown (an AMD CU, an unknown part) gets no computed occupancy: NaN, limiter "unknown".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from fuseprof.model.devices import SM_LIMITS, SmLimits, identify, limits_for

HOPPER = SM_LIMITS[(9, 0)]


@dataclass(frozen=True)
class Occupancy:
    blocks_by_warps: int
    blocks_by_registers: int
    blocks_by_shared_mem: int
    blocks_by_block_limit: int
    warps_per_block: int
    limits: SmLimits

    @property
    def blocks(self) -> int:
        return min(self.blocks_by_warps, self.blocks_by_registers, self.blocks_by_shared_mem, self.blocks_by_block_limit)

    @property
    def theoretical_pct(self) -> float:
        return 100.0 * self.blocks * self.warps_per_block / self.limits.max_warps

    @property
    def limiter(self) -> str:
        named = {"registers": self.blocks_by_registers, "shared_mem": self.blocks_by_shared_mem,
                 "warps": self.blocks_by_warps, "blocks": self.blocks_by_block_limit}  # ncu's order
        return "+".join(k for k, v in named.items() if v == self.blocks)


def occupancy(threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int,
              limits: SmLimits = HOPPER) -> Occupancy:
    """Resident blocks per SM allowed by each resource, for one kernel launch configuration."""
    if threads_per_block <= 0:
        raise ValueError("threads_per_block must be positive")
    warps = math.ceil(threads_per_block / limits.warp_width)
    regs_per_warp = math.ceil(max(registers_per_thread, 1) * limits.warp_width / limits.register_unit) * limits.register_unit
    warps_per_partition = (limits.registers // limits.register_partitions) // regs_per_warp
    by_regs = (warps_per_partition * limits.register_partitions) // warps
    if registers_per_thread > limits.max_registers_per_thread:
        by_regs = 0
    smem = math.ceil((shared_bytes_per_block + limits.shared_reserved_per_block) / limits.shared_unit) * limits.shared_unit
    return Occupancy(
        blocks_by_warps=limits.max_warps // warps,
        blocks_by_registers=by_regs,
        blocks_by_shared_mem=limits.shared_bytes // smem if smem else limits.max_blocks,  # none used: no bound
        blocks_by_block_limit=limits.max_blocks,
        warps_per_block=warps,
        limits=limits,
    )


def device_limits(device: object) -> SmLimits | None:
    """The per-SM limits of a kernel's device as ncu or a trace names it; None where unknown."""
    return limits_for(identify(device).key) if isinstance(device, str) and device else None


def occupancy_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """ncu rows with the computed theoretical occupancy and limiter beside ncu's own, against each row's
    device's limits (NaN and "unknown" where the device's limits are unknown)."""
    rows = kernels[kernels["source"] == "ncu"].dropna(subset=["threads_per_block", "registers_per_thread"]).copy()
    devices = rows["device"] if "device" in rows else pd.Series([None] * len(rows), index=rows.index)
    limits = {d: device_limits(d) for d in devices.astype(object).unique()}
    calc = [occupancy(int(t), int(r), int(s) if pd.notna(s) else 0, lim) if (lim := limits[d]) else None
            for t, r, s, d in zip(rows["threads_per_block"], rows["registers_per_thread"], rows["shared_mem_bytes"],
                                  devices.astype(object))]
    rows["computed_occupancy_pct"] = [c.theoretical_pct if c else float("nan") for c in calc]
    rows["computed_limiter"] = [c.limiter if c else "unknown" for c in calc]
    return rows


def occupancy_curve(threads_per_block: int, shared_bytes_per_block: int, registers: range = range(1, 256),
                    limits: SmLimits = HOPPER) -> pd.DataFrame:
    """Theoretical occupancy at every register count, the rest of the launch fixed (every count:
    sampling every 8 and holding each value drew a 34-register kernel at 32 registers' 100%)."""
    return pd.DataFrame({"registers_per_thread": list(registers),
                         "theoretical_occupancy_pct": [occupancy(threads_per_block, r, shared_bytes_per_block,
                                                                 limits).theoretical_pct for r in registers]})


def block_size_curve(registers_per_thread: int, shared_bytes_per_block: int,
                     block_sizes: range = range(32, 1025, 32), limits: SmLimits = HOPPER) -> pd.DataFrame:
    """Theoretical occupancy as the block size varies, registers and shared memory fixed."""
    return pd.DataFrame({"threads_per_block": list(block_sizes),
                         "theoretical_occupancy_pct": [occupancy(b, registers_per_thread, shared_bytes_per_block,
                                                                 limits).theoretical_pct for b in block_sizes]})

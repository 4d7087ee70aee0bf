"""The Nsight Compute metrics fuseprof asks for and how each becomes a kernel-frame column.

One table shared by the CSV and ``.ncu-rep`` parsers and by the ``ncu`` command builder, so
the metric list and the formulas cannot drift apart. FLOP formulas are those of Nsight Compute's
own roofline sections (``sections/SpeedOfLight_Hierarchical*RooflineChart.section``):

- FP32 and FP64 (SIMT pipes): add + mul + 2·fma thread instructions.
- FP16 (SIMT pipe): thread instructions are packed pairs (HADD2, HMUL2, HFMA2), so
  2·hadd + 2·hmul + 4·hfma.
- Tensor cores: ``sm__ops_path_tensor_src_<precision>.sum`` counts operations by source
  precision across every tensor instruction family (Hopper's wgmma, mma.sync, DMMA, IMMA); on the
  H200 it equalled exactly 2·M·N·K for cuBLAS GEMMs. Integer precisions count integer operations.
"""

from __future__ import annotations

from collections.abc import Mapping

L2_SECTOR_BYTES = 32

_FLOP_OPS = {"fp16": "h", "fp32": "f", "fp64": "d"}
# Operations per thread instruction of (add, mul, fma): a packed half instruction does two.
_OPS_PER_INST = {"h": (2.0, 2.0, 4.0), "f": (1.0, 1.0, 2.0), "d": (1.0, 1.0, 2.0)}

# Tensor-pipe counters by source precision, as ``ncu --query-metrics --chip gh100`` names them
# (ncu 2025.3): bf16 and tf32 exist only with their fp32 destination in the name. The column is
# ``flops_tensor_<precision>``.
TENSOR_METRICS: dict[str, str] = {
    "fp16": "sm__ops_path_tensor_src_fp16.sum",
    "bf16": "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "tf32": "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "fp8": "sm__ops_path_tensor_src_fp8.sum",
    "fp64": "sm__ops_path_tensor_src_fp64.sum",
    "int8": "sm__ops_path_tensor_src_int8.sum",
}
TENSOR_PRECISIONS: tuple[str, ...] = tuple(TENSOR_METRICS)


def _inst(prefix: str, op: str) -> str:
    return f"sm__sass_thread_inst_executed_op_{prefix}{op}_pred_on.sum"


def tensor_metric(precision: str) -> str:
    return TENSOR_METRICS[precision]


OCCUPANCY_LIMITS: dict[str, str] = {
    "registers": "launch__occupancy_limit_registers",
    "shared_mem": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
}

GRID_DIMS = tuple(f"launch__grid_dim_{a}" for a in "xyz")
BLOCK_DIMS = tuple(f"launch__block_dim_{a}" for a in "xyz")

# The metrics every capture requests: 3 replay passes per kernel on the H200 (ncu 2025.3.1).
BASE_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_op_write.sum",
    *(_inst(p, op) for p in _FLOP_OPS.values() for op in ("add", "mul", "fma")),
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "sm__maximum_warps_per_active_cycle_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__grid_size",
    "launch__block_size",
    *GRID_DIMS,
    *BLOCK_DIMS,
    *OCCUPANCY_LIMITS.values(),
    "sm__cycles_elapsed.avg.per_second",
    "dram__cycles_elapsed.avg.per_second",
    "dram__bytes.sum.peak_sustained",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "device__attribute_display_name",
)

# What a kernel executes and how its grid fills the GPU: the numbers that explain a memory-bound
# kernel that trails another moving the same bytes (same pass count as BASE_METRICS on the H200).
# Collected since fuseprof 0.3; older captures lack them and their columns stay null, unwarned.
EXECUTION_METRICS: dict[str, str] = {
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "warp_instructions": "smsp__inst_executed.sum",
    "global_load_instructions": "sm__sass_inst_executed_op_global_ld.sum",
    "global_store_instructions": "sm__sass_inst_executed_op_global_st.sum",
}

# Every metric the parsers read (and a .ncu-rep is searched for).
NCU_METRICS: tuple[str, ...] = (*BASE_METRICS, *EXECUTION_METRICS.values(), *TENSOR_METRICS.values())

# Each tensor counter costs about one more replay pass (measured on the H200 with
# scripts/ncu_passes.py: base 3 passes, + bf16 and fp16 5, + all six 8), so a capture collects
# the tensor precision of its input dtype unless told otherwise.
DTYPE_TENSOR_PRECISIONS: dict[str, tuple[str, ...]] = {
    "bfloat16": ("bf16",), "float16": ("fp16",), "float32": ("tf32",), "float64": ("fp64",),
    "float8_e4m3fn": ("fp8",), "float8_e5m2": ("fp8",), "int8": ("int8",),
}


def tensor_precisions_for(dtype: str) -> tuple[str, ...]:
    """The tensor-core precisions a capture in ``dtype`` collects by default."""
    return DTYPE_TENSOR_PRECISIONS.get(dtype, ())


def capture_metrics(tensor_precisions: tuple[str, ...]) -> list[str]:
    """The ncu metric list of a capture: the base list plus the named tensor counters."""
    unknown = [p for p in tensor_precisions if p not in TENSOR_METRICS]
    if unknown:
        raise ValueError(f"unknown tensor precision(s) {unknown}; known: {', '.join(TENSOR_METRICS)}")
    return [*BASE_METRICS, *EXECUTION_METRICS.values(), *(TENSOR_METRICS[p] for p in tensor_precisions)]


Metrics = Mapping[str, float | str | None]


def _num(m: Metrics, name: str) -> float | None:
    value = m.get(name)
    return None if value is None or isinstance(value, str) else float(value)


def _mul(*values: float | None) -> float | None:
    out = 1.0
    for v in values:
        if v is None:
            return None
        out *= v
    return out


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _dims(m: Metrics, names: tuple[str, ...]) -> str | None:
    values = [_num(m, n) for n in names]
    if any(v is None for v in values):
        return None
    return ",".join(str(int(v)) for v in values if v is not None)


def _flops(m: Metrics, prefix: str) -> float | None:
    counts = (_num(m, _inst(prefix, op)) for op in ("add", "mul", "fma"))
    return _sum(*(_mul(c, k) for c, k in zip(counts, _OPS_PER_INST[prefix])))


def occupancy_limiter(m: Metrics) -> str | None:
    """Name of the resource that allows the fewest resident blocks per SM (ties joined by '+')."""
    limits = {name: _num(m, metric) for name, metric in OCCUPANCY_LIMITS.items()}
    known = {k: v for k, v in limits.items() if v is not None}
    if not known:
        return None
    low = min(known.values())
    return "+".join(k for k, v in known.items() if v == low)


def _int_or_none(v: float | None) -> int | None:
    return None if v is None else int(v)


def columns_from_metrics(m: Metrics) -> dict[str, object]:
    """Kernel-frame columns from one kernel's raw metric values (base units: bytes, ns, Hz)."""
    sm_hz = _num(m, "sm__cycles_elapsed.avg.per_second")
    dram_hz = _num(m, "dram__cycles_elapsed.avg.per_second")
    block_size = _num(m, "launch__block_size")
    display_name = m.get("device__attribute_display_name")
    return {
        "duration_ns": _int_or_none(_num(m, "gpu__time_duration.sum")),
        "dram_read_bytes": _num(m, "dram__bytes_read.sum"),
        "dram_write_bytes": _num(m, "dram__bytes_write.sum"),
        "l2_read_bytes": _mul(_num(m, "lts__t_sectors_op_read.sum"), L2_SECTOR_BYTES),
        "l2_write_bytes": _mul(_num(m, "lts__t_sectors_op_write.sum"), L2_SECTOR_BYTES),
        "flops_fp16": _flops(m, "h"),
        "flops_fp32": _flops(m, "f"),
        "flops_fp64": _flops(m, "d"),
        **{f"flops_tensor_{p}": _num(m, tensor_metric(p)) for p in TENSOR_PRECISIONS},
        "spill_load_bytes": _num(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"),
        "spill_store_bytes": _num(m, "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
        "theoretical_occupancy_pct": _num(m, "sm__maximum_warps_per_active_cycle_pct"),
        "achieved_occupancy_pct": _num(m, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "occupancy_limiter": occupancy_limiter(m),
        **{column: _num(m, metric) for column, metric in EXECUTION_METRICS.items()},
        "registers_per_thread": _int_or_none(_num(m, "launch__registers_per_thread")),
        "shared_mem_bytes": _int_or_none(
            _sum(_num(m, "launch__shared_mem_per_block_static"), _num(m, "launch__shared_mem_per_block_dynamic"))
        ),
        "blocks": _int_or_none(_num(m, "launch__grid_size")),
        "threads_per_block": _int_or_none(block_size),
        "grid": _dims(m, GRID_DIMS),
        "block": _dims(m, BLOCK_DIMS),
        "sm_clock_hz": sm_hz,
        "dram_clock_hz": dram_hz,
        "peak_dram_bytes_per_s": _mul(_num(m, "dram__bytes.sum.peak_sustained"), dram_hz),
        "peak_flops_fp32_per_s": _mul(
            _num(m, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"), 2.0, sm_hz
        ),
        "device": display_name if isinstance(display_name, str) else None,
    }


MAX_REGISTERS_PER_THREAD = 255  # CUDA's limit on every architecture since Kepler


def physical_problem(cols: Mapping[str, object]) -> str | None:
    """What in one kernel's columns no GPU can measure — a negative time, byte or FLOP count, occupancy
    outside 0–100%, more registers per thread than the hardware has — or None."""
    for column, value in cols.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0 and (
                column.endswith(("_ns", "_bytes", "_pct")) or column.startswith("flops")):
            return f"{column} is negative ({value:g})"
    for column in ("theoretical_occupancy_pct", "achieved_occupancy_pct"):
        value = cols.get(column)
        if isinstance(value, float) and value > 100:
            return f"{column} is {value:g}%, above 100%"
    registers = cols.get("registers_per_thread")
    if isinstance(registers, int) and registers > MAX_REGISTERS_PER_THREAD:
        return f"registers_per_thread is {registers}, more than the {MAX_REGISTERS_PER_THREAD} a thread can have"
    return None

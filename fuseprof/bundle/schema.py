"""The kernel frame: one row per kernel launch, from torch.profiler or from Nsight Compute.

Every column is documented with the raw field or metric it comes from and the formula
applied, so each number the toolkit shows can be checked by hand against the raw artifacts
kept in the bundle (``raw/profiler_trace.json.gz``, ``raw/ncu_raw.csv.gz``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fuseprof.parse.ncu_metrics import TENSOR_METRICS

if TYPE_CHECKING:  # pandas is imported where frames are built: reading a manifest needs none of it
    import pandas as pd

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype name
    origin: str  # raw field or metric and the formula applied


KERNEL_COLUMNS: tuple[Column, ...] = (
    Column("bundle", "string", "bundle directory name"),
    Column("case", "string", "case name from the manifest (capture) or null (ingested trace)"),
    Column("variant", "string", "variant whose NVTX range / record_function range enclosed the launch"),
    Column("shape", "string", "input shape of that range, 'MxN'"),
    Column("dtype", "string", "input dtype of the capture"),
    Column("device", "string", "GPU name (profiler deviceProperties / ncu device__attribute_display_name)"),
    Column("source", "string", "'torch.profiler' or 'ncu': which tool measured the row; 'model' for a call modelled where "
           "ncu was refused the counters (fuseprof/capture/modelled.py)"),
    Column("rank", "Int64", "profiler: distributedInfo.rank of the trace (one trace per rank); null otherwise"),
    Column("kernel", "string", "kernel name as the tool reports it (demangled)"),
    Column("kind", "string",
           "profiler: 'kernel', 'memcpy' or 'memset' (event cat kernel / gpu_memcpy / gpu_memset), 'cpu_op' on a CPU "
           "capture; ncu: 'kernel'"),
    Column("kernel_short", "string",
           "kernel's function name without return type, namespaces, template arguments, parameters "
           "(equal across torch.profiler and ncu, whose demanglers differ)"),
    Column("invocation", "Int64", "0-based index of this launch among launches of the same kernel in its range"),
    Column("duration_ns", "Int64",
           "profiler: kernel event 'dur' (µs, exact decimal) × 1000; ncu: gpu__time_duration.sum (ns)"),
    Column("start_ns", "Int64", "profiler: kernel event 'ts' × 1000 (trace clock); ncu: null"),
    Column("grid", "string", "profiler: args.grid; ncu: launch__grid_dim_{x,y,z}; written 'x,y,z'"),
    Column("block", "string", "profiler: args.block; ncu: launch__block_dim_{x,y,z}; written 'x,y,z'"),
    Column("threads_per_block", "Int64", "product of block dims (ncu: launch__block_size)"),
    Column("blocks", "Int64", "product of grid dims (ncu: launch__grid_size)"),
    Column("registers_per_thread", "Int64",
           "profiler: args['registers per thread']; ncu: launch__registers_per_thread"),
    Column("shared_mem_bytes", "Int64",
           "profiler: args['shared memory']; ncu: launch__shared_mem_per_block_static + _dynamic"),
    Column("stream", "Int64", "profiler: args.stream; ncu: null"),
    Column("launch_api", "string", "profiler: runtime/driver event sharing the kernel's correlation id"),
    Column("launch_api_ns", "Int64", "profiler: duration of that launch API call × 1000 (host enqueue time)"),
    Column("launch_start_ns", "Int64", "profiler: ts of the launch API call × 1000 (trace clock)"),
    Column("cpu_op", "string", "profiler: the cpu_op that launched the kernel (its 'External id', or the launch "
                               "call's)"),
    Column("step", "string",
           "profiler: outermost record_function range around that op (ProfilerStep#N, or the user's range, "
           "numbered ' #k' when its name repeats); null outside any range"),
    Column("dram_read_bytes", "Float64", "ncu: dram__bytes_read.sum"),
    Column("dram_write_bytes", "Float64", "ncu: dram__bytes_write.sum (writes still in L2 at kernel end are not counted)"),
    Column("l2_read_bytes", "Float64", "ncu: lts__t_sectors_op_read.sum × 32 B"),
    Column("l2_write_bytes", "Float64", "ncu: lts__t_sectors_op_write.sum × 32 B"),
    Column("flops_fp16", "Float64",
           "ncu: 2·hadd + 2·hmul + 4·hfma (sm__sass_thread_inst_executed_op_h*_pred_on.sum; packed HADD2/HMUL2/"
           "HFMA2 do two operations per thread instruction, as in ncu's half-precision roofline section)"),
    Column("flops_fp32", "Float64", "ncu: fadd + fmul + 2·ffma (sm__sass_thread_inst_executed_op_f*_pred_on.sum)"),
    Column("flops_fp64", "Float64", "ncu: dadd + dmul + 2·dfma (sm__sass_thread_inst_executed_op_d*_pred_on.sum)"),
    *(Column(f"flops_tensor_{p}", "Float64",
             f"ncu: {m} (tensor-core operations with {p} sources, every instruction family; an FMA counts 2; "
             "null when the capture did not collect it)") for p, m in TENSOR_METRICS.items()),
    Column("spill_load_bytes", "Float64",
           "ncu: l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum (local-memory loads: spills and local arrays)"),
    Column("spill_store_bytes", "Float64", "ncu: l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
    Column("theoretical_occupancy_pct", "Float64",
           "ncu: sm__maximum_warps_per_active_cycle_pct (profiler's 'est. achieved occupancy %' is not used: "
           "it is a theoretical estimate, not a measurement)"),
    Column("achieved_occupancy_pct", "Float64", "ncu: sm__warps_active.avg.pct_of_peak_sustained_active"),
    Column("occupancy_limiter", "string",
           "ncu: the smallest of launch__occupancy_limit_{registers,shared_mem,warps,blocks} (ties joined by '+')"),
    Column("waves_per_sm", "Float64",
           "ncu: launch__waves_per_multiprocessor (blocks ÷ blocks resident at once; a fraction past a whole "
           "number is a partly idle last wave)"),
    Column("warp_instructions", "Float64", "ncu: smsp__inst_executed.sum (warp-level instructions executed)"),
    Column("global_load_instructions", "Float64", "ncu: sm__sass_inst_executed_op_global_ld.sum (warp-level)"),
    Column("global_store_instructions", "Float64", "ncu: sm__sass_inst_executed_op_global_st.sum (warp-level)"),
    Column("sm_clock_hz", "Float64", "ncu: sm__cycles_elapsed.avg.per_second during the kernel"),
    Column("dram_clock_hz", "Float64", "ncu: dram__cycles_elapsed.avg.per_second during the kernel"),
    Column("peak_dram_bytes_per_s", "Float64",
           "ncu: dram__bytes.sum.peak_sustained (B/cycle) × dram__cycles_elapsed.avg.per_second"),
    Column("peak_flops_fp32_per_s", "Float64",
           "ncu: sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained × 2 × sm__cycles_elapsed.avg.per_second"),
)

KERNEL_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in KERNEL_COLUMNS)


TIMING_COLUMNS: tuple[Column, ...] = (
    Column("bundle", "string", "bundle directory name"),
    Column("case", "string", "case name"),
    Column("variant", "string", "variant name"),
    Column("shape", "string", "'MxN'"),
    Column("dtype", "string", "input dtype"),
    Column("device", "string", "device name"),
    Column("gpu", "Int64", "index of the GPU that timed the row in a sharded run (--gpus N); null otherwise"),
    Column("rank", "Int64", "torch.distributed rank that timed the row in a sharded run; null otherwise"),
    Column("nominal_bytes", "Int64", "case's byte model: each input read once, each output written once"),
    Column("max_abs_err", "Float64", "max |out − ref| against the float64 reference"),
    Column("rel_err", "Float64", "‖out − ref‖₂ / ‖ref‖₂ against the float64 reference"),
    Column("tolerance", "Float64", "rel_err bound for the dtype (case tolerance table)"),
    Column("correct", "boolean", "rel_err ≤ tolerance, no NaN, every output element written"),
    Column("as_called_median_ns", "Float64", "median of CUDA events around one plain call (L2 flushed before)"),
    Column("as_called_p10_ns", "Float64", "10th percentile of the same samples"),
    Column("as_called_p90_ns", "Float64", "90th percentile of the same samples"),
    Column("gpu_median_ns", "Float64", "median of CUDA events around one CUDA-graph replay (L2 flushed before)"),
    Column("gpu_p10_ns", "Float64", "10th percentile of the same samples"),
    Column("gpu_p90_ns", "Float64", "90th percentile of the same samples"),
    Column("host_dispatch_ns", "Float64",
           "mean host wall time per call over 100 back-to-back calls without sync (perf_counter)"),
    Column("repeats", "Int64", "samples behind each median"),
    Column("timing_method", "string", "'cuda-events+graph', 'cuda-events (own graph)' (a variant that replays its own CUDA graph: as-called only, GPU columns null) or 'cpu-perf-counter'"),
    Column("l2_policy", "string", "how caches were cleared between samples"),
    Column("effective_bandwidth_bytes_per_s", "Float64", "nominal_bytes / (gpu_median_ns × 1e-9)"),
    # a `fuseprof fusion --verify` bundle: each case is one chain of a trace (fuseprof/verify/chains.py)
    Column("fusion_row", "Int64", "verify: the chain's group, as its row in the trace's fusion table"),
    Column("signature", "string", "verify: the chain's ops in order"),
    Column("chain_class", "string", "verify: memory-bound chain, RoPE + KV-cache write or sampling chain"),
    Column("chain_count", "Int64", "verify: chains in the group"),
    Column("chain_instances", "Int64", "verify: chains of the group with the replayed chain's shapes"),
    Column("chain_kernels", "Int64", "verify: kernels of the replayed chain in the trace"),
    Column("trace_chain_ns", "Float64", "verify: median over those chains of Σ kernel durations in the trace"),
    Column("fused_bytes", "Float64", "verify: the finder's fused bytes of one chain (fuseprof/analysis/judgements/fusion.py)"),
    Column("predicted_fused_ns", "Float64", "verify: fused_bytes / copy rate + fixed cost (the fusion table's model)"),
    Column("predicted_saving_ns", "Float64", "verify: trace_chain_ns − predicted_fused_ns"),
    Column("kernels_per_call", "Int64", "verify: GPU kernels one call of the variant launches (torch.profiler)"),
    Column("replay_program", "string", "verify: the replayed aten overloads, one per line, with their arguments' sources"),
    Column("skipped", "string", "verify: why the chain was not replayed"),
)

TIMING_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in TIMING_COLUMNS)


def _conform(rows: pd.DataFrame, columns: tuple[Column, ...]) -> pd.DataFrame:
    import pandas as pd

    out = pd.DataFrame(index=rows.index)
    for col in columns:
        values = rows[col.name] if col.name in rows.columns else pd.Series(pd.NA, index=rows.index)
        out[col.name] = values.astype(col.dtype)
    return out.reset_index(drop=True)


def conform_kernels(rows: pd.DataFrame) -> pd.DataFrame:
    """Order, complete (with nulls) and type a kernel table to the schema."""
    return _conform(rows, KERNEL_COLUMNS)


def conform_timings(rows: pd.DataFrame) -> pd.DataFrame:
    """Order, complete (with nulls) and type a timing table to the schema."""
    return _conform(rows, TIMING_COLUMNS)


def describe_columns(computed: dict[str, tuple[Column, ...]] | None = None) -> pd.DataFrame:
    """The schema as a table (table, name, dtype, origin) for ``fuseprof columns`` and the README;
    ``computed`` adds computed tables by name (``derived``: per-kernel metrics, ``breakdown``: per
    variant and shape)."""
    import pandas as pd

    rows = [("kernels", c.name, c.dtype, c.origin) for c in KERNEL_COLUMNS]
    rows += [("timings", c.name, c.dtype, c.origin) for c in TIMING_COLUMNS]
    rows += [(table, c.name, c.dtype, c.origin) for table, columns in (computed or {}).items() for c in columns]
    return pd.DataFrame(rows, columns=["table", "column", "dtype", "origin"])

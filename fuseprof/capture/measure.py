"""Check every variant against the float64 reference, then time it; optionally a same-bytes copy.

The copy is the physical limit for a memory-bound op: a device-to-device copy that reads and
writes as many bytes in total as the op's nominal byte count, timed the same way in the same run.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from fuseprof.capture import timing
from fuseprof.capture.correctness import compare
from fuseprof.capture.torch_profile import Call
from fuseprof.case import Case, Shape, Variant, shape_label, shape_seed, user_call
from fuseprof.console import Log
from fuseprof.errors import InvalidArgumentError
from fuseprof.ranges import range_label

# Two ways to move the same bytes: cudaMemcpy (which a CUDA graph may hand to a copy engine)
# and an elementwise kernel on the SMs (x * 1 in fp16, 16-byte accesses). The faster is the limit.
COPY_VARIANTS = {"copy": lambda s, d: d.copy_(s), "copy_sm": lambda s, d: torch.mul(s, 1, out=d)}


def time_callable(fn: Callable[..., Any], inputs: tuple[Any, ...], device: torch.device, repeats: int,
                  flusher: timing.L2Flusher | None, own_graph: bool = False) -> dict[str, Any]:
    """As-called and (on CUDA) graph-replay statistics of ``fn(*inputs)``. A function that replays
    a CUDA graph of its own (``own_graph``) has no separate GPU time: a capture around it would
    nest, and its as-called time holds whatever host work precedes its launch (torch.compile's
    guards and input copies), so its GPU columns stay null and the profiler's kernel times stand in."""
    for _ in range(3):  # warm-up: compilation, autotuning, allocator growth
        fn(*inputs)
    if device.type == "cpu":
        samples = timing.time_cpu(fn, inputs, repeats)
        return {**timing.summarize(samples, "as_called"), "timing_method": "cpu-perf-counter",
                "l2_policy": timing.CPU_POLICY, "repeats": repeats}
    assert flusher is not None
    as_called = timing.time_as_called(fn, inputs, flusher, repeats)
    gpu = (dict.fromkeys(("gpu_median_ns", "gpu_p10_ns", "gpu_p90_ns"), float("nan")) if own_graph
           else timing.summarize(timing.time_graph_replay(fn, inputs, flusher, repeats), "gpu"))
    return {**timing.summarize(as_called, "as_called"), **gpu,
            "host_dispatch_ns": timing.host_dispatch_ns(fn, inputs),
            "timing_method": "cuda-events (own graph)" if own_graph else "cuda-events+graph",
            "l2_policy": timing.L2_FLUSH_POLICY, "repeats": repeats}


def nominal_bytes(case: Case, shape: Shape, dtype: str) -> int:
    """The case's byte model at one shape, refused unless a whole number above 0: a negative, NaN or infinite
    count would be stored and read back as a bandwidth (a negative GB/s, or NaN that no table flags)."""
    label = f"{case.name}.nominal_bytes({shape_label(shape)}, {dtype!r})"
    value = user_call(label, case.nominal_bytes, shape, dtype)
    whole = isinstance(value, numbers.Integral) or (isinstance(value, numbers.Real) and math.isfinite(value)
                                                    and float(value).is_integer())
    if isinstance(value, bool) or not whole or value <= 0:
        raise InvalidArgumentError(f"{label} returned {str(value)[:60]!s}; give the bytes the op must move: a whole "
                                   "number above 0 (each input read once, each output written once)")
    return int(value)


def copy_rows(case: Case, shape: Shape, dtype: str, device: torch.device, repeats: int,
               flusher: timing.L2Flusher | None) -> list[dict[str, Any]]:
    """A copy that reads half the op's nominal bytes and writes the other half, timed both ways."""
    elements = nominal_bytes(case, shape, dtype) // 4  # fp16: 2 bytes read + 2 written per element
    src = torch.randn(elements, dtype=torch.float16, device=device)
    dst = torch.empty_like(src)
    return [{"case": case.name, "variant": name, "shape": shape_label(shape), "dtype": dtype,
             "nominal_bytes": 4 * elements, **time_callable(fn, (src, dst), device, repeats, flusher)}
            for name, fn in COPY_VARIANTS.items()]


def check_and_time(case: Case, variants: tuple[Variant, ...], shapes: tuple[Shape, ...], dtype: str,
                   device: torch.device, repeats: int, seed: int, log: Log, keep_calls: bool = True,
                   copy_baseline: bool = False) -> tuple[pd.DataFrame, list[Call]]:
    """One timing row per variant and shape (plus a copy row per shape if asked), and the calls
    (label, function, inputs) for the profiler when ``keep_calls``."""
    generator = torch.Generator(device=device)
    flusher = timing.L2Flusher(device) if device.type == "cuda" else None
    rows: list[dict[str, Any]] = []
    calls: list[Call] = []
    for shape in shapes:
        label = shape_label(shape)
        moved = nominal_bytes(case, shape, dtype)  # checked before any variant runs
        generator.manual_seed(shape_seed(seed, shape))
        inputs = user_call(f"{case.name}.make_inputs({label})", case.make_inputs, shape, dtype, str(device), generator)
        expected = user_call(f"{case.name}.reference at {label}", case.reference, *inputs)
        for k, variant in enumerate(variants):
            if case.mutates_inputs and k:  # the variant before wrote them: the same inputs again, fresh
                generator.manual_seed(shape_seed(seed, shape))
                inputs = user_call(f"{case.name}.make_inputs({label})", case.make_inputs, shape, dtype, str(device),
                                   generator)
            outputs = user_call(f"variant {variant.name!r} of {case.name} at {label}", variant.fn, *inputs)
            check = compare(outputs, expected, case.tolerances[dtype])
            verdict = "ok" if check["correct"] else f"WRONG: {check['problem']}"
            where = "" if device.type == "cuda" else " on the CPU (as called; no GPU time)"
            log(f"  {variant.name:<12} {label:>12}: rel_err {check['rel_err']:.2e} {verdict}; timing {repeats} samples"
                f"{where}")
            rows.append({"case": case.name, "variant": variant.name, "shape": label, "dtype": dtype,
                         "nominal_bytes": moved,
                         **{k: v for k, v in check.items() if k != "problem"},
                         **time_callable(variant.fn, inputs, device, repeats, flusher, variant.own_graph)})
            if keep_calls:
                calls.append(Call(range_label(variant.name, label), variant.fn, inputs))
        del expected, inputs
        if copy_baseline:
            rows.extend(copy_rows(case, shape, dtype, device, repeats, flusher))
        if device.type == "cuda" and not keep_calls:
            torch.cuda.empty_cache()
    frame = pd.DataFrame(rows)
    if "gpu_median_ns" in frame:
        frame["effective_bandwidth_bytes_per_s"] = frame["nominal_bytes"] / (frame["gpu_median_ns"] * 1e-9)
    return frame, calls

"""The optimizer step as a fusion opportunity: what a fused step would cost, from the parameters autograd
recorded, beside what the trace's step ran.

An instance is one run of the catalogue's optimizer region (``Optimizer.step#…``); its kernels are those
launched inside it (on its thread). A step whose kernels already compute a ``fused optimizer`` (the registry's
op kinds: ``aten::_fused_adamw_``, apex's FusedAdam) is no opportunity. The parameters it updates are the
``AccumulateGrad`` runs of the backward pass before it (the decoder's ``parameters``: each parameter's shape and
dtype as its gradient arrived), and the optimizer's model (the registry's ``OptimizerModel``, by the range's
name) says how many elements a fused step moves per parameter element:

    fused_bytes        = Σ over parameters  numel · element bytes · (3 + 2 · states)
                         (Adam/AdamW: reads w, g, m, v and writes w, m, v — 7 elements, torch.optim's docs)
    element bytes      = the scalar type the step's own kernels are built for, where they name one: a foreach
                         kernel's functor is templated on it (``multi_tensor_apply_kernel<…,
                         BinaryOpScalarFunctor<float, …>>``), and it is what the step reads and writes — fp32
                         shards and state under FSDP2, whose gradients arrive as the bf16 unsharded parameter's;
                         else the gradient's dtype as autograd recorded it (several scalar types: each parameter's)
    predicted_fused_ns = fused_bytes / the copy rate + one kernel's floor   (as every memory-bound chain)
    measured_ns        = the GPU time of the kernels the step ran

A step with no recorded parameters (no ``record_shapes``, no backward pass in the trace) or an optimizer the
registry does not model has unknown bytes and no prediction."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from fuseprof.analysis.facts.phases import launch_points
from fuseprof.analysis.judgements.fusion import CopyModel
from fuseprof.model.op_models import DTYPE_BYTES
from fuseprof.model.registry import Registry
from fuseprof.parse.trace_events import TraceTables
from fuseprof.parse.trace_link import rows_named

CLASS = "optimizer step"
# a foreach kernel's functor names the scalar type it runs on first: BinaryOpScalarFunctor<float, 1, 1, 0>
_FUNCTOR_SCALAR = re.compile(r"Functor<(float|double|c10::BFloat16|c10::Half|at::BFloat16|at::Half)\s*[,>]")
_SCALAR_BYTES = {"float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "at::BFloat16": 2, "at::Half": 2}


def kernel_element_bytes(names: Iterable[object]) -> int | None:
    """The element bytes of the one scalar type the kernels' functors name (module docstring); None where they
    name none or several (then each parameter's recorded dtype decides)."""
    found = {_SCALAR_BYTES[m.group(1)] for n in names if isinstance(n, str) for m in [_FUNCTOR_SCALAR.search(n)] if m}
    return found.pop() if len(found) == 1 else None


def _parameter_bytes(parameters: pd.DataFrame, width: int | None = None) -> tuple[int, int, int | None]:
    """(parameters, elements, bytes of one copy of them, each element ``width`` bytes where given, else its
    recorded dtype's); bytes None where a shape, or a dtype needed, is unrecorded."""
    elements, nbytes = 0, 0
    known = True
    for dims, types in zip(parameters["input_dims"], parameters["input_type"]):
        shape = dims[0] if isinstance(dims, list) and dims and isinstance(dims[0], list) else None
        dtype = types[0] if isinstance(types, list) and types else None
        if shape is None:
            known = False
            continue
        n = math.prod(int(d) for d in shape)
        elements += n
        size = width or DTYPE_BYTES.get(str(dtype))
        if size:
            nbytes += n * size
        else:
            known = False
    return len(parameters), elements, nbytes if known and len(parameters) else None


def optimizer_instances(events: pd.DataFrame, tables: TraceTables, registry: Registry,
                        copy: CopyModel) -> list[dict[str, object]]:
    """One row per unfused optimizer step in the window, with the columns of the other classes' instances."""
    entry = next((e for e in registry.catalogue if e.pattern == "optimizer" and e.region), None)
    if entry is None or events.empty:
        return []
    steps = rows_named(tables.annotations, entry.region).sort_values("start_ns", kind="stable")
    if steps.empty:  # no optimizer range (inference): no launch points to place
        return []
    points = launch_points(events)
    launch, tid = points["start_ns"].to_numpy(np.int64), points["tid"].to_numpy()
    rows, previous_end = [], -1
    for step in steps.itertuples(index=False):
        start, end = int(step.start_ns), int(step.start_ns) + int(step.dur_ns)
        inside = (launch >= start) & (launch < end) & (tid == str(step.tid))
        mine = events.loc[points.index[inside]]
        params = tables.parameters[(tables.parameters["start_ns"] > previous_end)
                                   & (tables.parameters["start_ns"] < start)]
        previous_end = end
        fused = any(registry.kinds(op if isinstance(op, str) else None, [name]) & {"fused optimizer"}
                    for op, name in zip(mine["op"], mine["name"]))
        if mine.empty or fused:
            continue
        model = registry.optimizer(str(step.name))
        count, elements, one_copy = _parameter_bytes(params, kernel_element_bytes(mine["name"]))
        moved = one_copy * (3 + 2 * model.states) if model is not None and one_copy is not None else None
        rows.append({"class": CLASS, "signature": f"{step.name}: {len(mine)} kernels over {count} parameters "
                                                  f"({elements:,} elements) → one fused step",
                     "kernels": len(mine), "measured_ns": int(mine["dur_ns"].sum()), "chain_bytes": np.nan,
                     "fused_bytes": float(moved) if moved is not None else np.nan,
                     "predicted_ns": float(moved) / copy.bytes_per_s * 1e9 + copy.fixed_ns if moved is not None
                     else np.nan, "module": None, "known_fusion": model.fused if model is not None else None,
                     "members": mine.index.tolist()})
    return rows

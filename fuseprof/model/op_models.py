"""Cost models: analytic FLOPs and bytes of an op from the shapes torch.profiler recorded
(``record_shapes``). Which op gets which model is the op registry's business
(``fuseprof.model.registry``); a user's own op gets a row there, e.g.
``OpFamily("elementwise", op=r"^mylib::fused_gelu$", cost=Elementwise(8))``.

Each model is a small frozen value (so the registry that holds it has a stable fingerprint, and a
stored analysis names the models it was computed with) called with the op's ``Input Dims``, ``Input
type`` and ``Concrete Inputs``; it returns FLOPs, bytes (every input tensor read once, every output
written once: the minimum traffic) and the pipe the work runs on (``tensor_bf16`` for a bf16 GEMM,
``memory`` for ops whose FLOPs do not matter). Conventions, chosen to agree with TraceLens's perf
models where both exist:
    mm (M,K)x(K,N): 2·M·N·K FLOPs; (MK + KN + MN) elements moved
    addmm: the mm plus M·N for the bias add; the bias is read once
    bmm/baddbmm: the same per batch
    attention (q: B,H,Sq,D; k/v: B,Hkv,Sk,D): 4·B·H·Sq·Sk·D (QKᵀ and PV), halved when the op's
        causal argument says so (the registry's ``OpRole.causal``: only the lower triangle is computed);
        q, k, v read, out written
    elementwise: FLOPs per output element (1 for add, 4 for SiLU, 8 for GELU: the registry's table)
    norms/softmax: 4-5 FLOPs per element; reductions one per input element; copies and gathers 0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# torch.profiler's 'Input type' strings -> (torch's dtype name, bytes per element), as torch 2.13's profiler writes
# each dtype (checked by recording one op on a tensor of each); fuseprof.verify.replay builds its torch dtypes from it
PROFILER_DTYPES: dict[str, tuple[str, int]] = {
    "c10::BFloat16": ("bfloat16", 2), "c10::Half": ("float16", 2), "float": ("float32", 4), "double": ("float64", 8),
    "long int": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2), "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1), "bool": ("bool", 1), "short unsigned int": ("uint16", 2),
    "unsigned int": ("uint32", 4), "long unsigned int": ("uint64", 8),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1), "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "c10::Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "c10::Float8_e8m0fnu": ("float8_e8m0fnu", 1), "c10::Float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),
    "c10::complex<c10::Half>": ("complex32", 4), "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}
DTYPE_BYTES: dict[str, int] = {name: size for name, (_, size) in PROFILER_DTYPES.items()}
# 'Input type' -> tensor-core pipe of a matrix op in that precision (fuseprof.model.devices.PIPES)
MATRIX_PIPE: dict[str, str] = {
    "c10::BFloat16": "tensor_bf16", "c10::Half": "tensor_fp16", "float": "fp32", "double": "tensor_fp64",
    "c10::Float8_e4m3fn": "tensor_fp8", "c10::Float8_e5m2": "tensor_fp8", "signed char": "tensor_int8",
}


@dataclass(frozen=True)
class OpInputs:
    dims: Sequence[Any]
    types: Sequence[Any]
    concrete: Sequence[Any]
    causal: bool = False  # the op's causal argument as recorded (read by the registry: ``OpRole.causal``)

    def tensor(self, i: int) -> list[int] | None:
        """Shape of input ``i`` if it is a tensor (a list of ints), else None."""
        if i >= len(self.dims):
            return None
        d = self.dims[i]
        return list(d) if isinstance(d, list) and all(isinstance(x, int) for x in d) and self.is_tensor(i) else None

    def is_tensor(self, i: int) -> bool:
        t = self.types[i] if i < len(self.types) else ""
        return isinstance(t, str) and t in DTYPE_BYTES

    def itemsize(self, i: int) -> int:
        return DTYPE_BYTES.get(str(self.types[i]), 0) if i < len(self.types) else 0

    def tensor_bytes(self, i: int) -> int:
        shape = self.tensor(i)
        return 0 if shape is None else math.prod(shape) * self.itemsize(i)

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.tensor(i) is not None]


@dataclass(frozen=True)
class Estimate:
    flops: float
    bytes: float
    pipe: str  # a key of fuseprof.model.devices.PIPES, or "memory"


CostModel = Callable[[OpInputs], "Estimate | None"]


def _pipe(x: OpInputs, i: int) -> str:
    return MATRIX_PIPE.get(str(x.types[i]), "fp32") if i < len(x.types) else "fp32"


@dataclass(frozen=True)
class Matmul:
    """(M,K)x(K,N), optionally batched and with a bias as the first input."""

    bias: bool
    batched: bool

    def __call__(self, x: OpInputs) -> Estimate | None:
        first = 1 if self.bias else 0
        a, b = x.tensor(first), x.tensor(first + 1)
        if not a or not b or len(a) != (3 if self.batched else 2) or len(b) != len(a):
            return None
        batch = a[0] if self.batched else 1
        m, k, n = a[-2], a[-1], b[-1]
        flops = 2 * batch * m * n * k + (batch * m * n if self.bias else 0)
        size = x.itemsize(first)
        moved = batch * (m * k + k * n + m * n) * size + (x.tensor_bytes(0) if self.bias else 0)
        return Estimate(flops, moved, _pipe(x, first))


@dataclass(frozen=True)
class Linear:
    """F.linear(x: …×K, weight: N×K, bias?)."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        inp, weight = x.tensor(0), x.tensor(1)
        if not inp or not weight or len(weight) != 2:
            return None
        rows, (n, k) = math.prod(inp[:-1]), weight
        bias = x.tensor(2) is not None
        flops = 2 * rows * n * k + (rows * n if bias else 0)
        moved = (rows * k + n * k + rows * n) * x.itemsize(0) + (x.tensor_bytes(2) if bias else 0)
        return Estimate(flops, moved, _pipe(x, 0))


# c10::ScalarType's numbers (c10/core/ScalarType.h's order), as a recorded ``out_dtype`` argument writes them
SCALAR_TYPE_BYTES = {"0": 1, "1": 1, "3": 4, "5": 2, "6": 4, "7": 8, "15": 2, "23": 1, "24": 1, "25": 1, "26": 1}


@dataclass(frozen=True)
class ScaledMatmul:
    """``_scaled_mm(a: M×K, b: K×N, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)``: the
    fp8 (or int8) operands at their own width, each scale and the bias at theirs (a per-tensor scale is one
    element, a row-wise one M or N), the output in ``out_dtype`` as recorded (a ScalarType number: 15 bf16), else
    in the first operand's dtype, as ATen makes it."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        a, b = x.tensor(0), x.tensor(1)
        if not a or not b or len(a) != 2 or len(b) != 2:
            return None
        (m, k), n = a, b[1]
        asked = x.concrete[6] if len(x.concrete) > 6 else None
        out = SCALAR_TYPE_BYTES.get(str(asked).strip()) or x.itemsize(0)
        moved = m * k * x.itemsize(0) + k * n * x.itemsize(1) + sum(x.tensor_bytes(i) for i in (2, 3, 4, 5)) \
            + m * n * out
        return Estimate(2 * m * n * k, moved, _pipe(x, 0))


@dataclass(frozen=True)
class WeightOnlyMatmul:
    """``_weight_int8pack_mm(x: …×K, weight: N×K int8, scales: N)``: the activations and the output in x's dtype,
    the weight at its own width (1 B) and its scales; computed in x's precision (the weight is widened)."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        inp, weight = x.tensor(0), x.tensor(1)
        if not inp or not weight or len(weight) != 2:
            return None
        rows, (n, k) = math.prod(inp[:-1]), weight
        moved = (rows * k + rows * n) * x.itemsize(0) + n * k * x.itemsize(1) + x.tensor_bytes(2)
        return Estimate(2 * rows * n * k, moved, _pipe(x, 0))


@dataclass(frozen=True)
class Attention:
    """q, k, v as the first three inputs, in layout 'BHLD' (SDPA) or 'BLHD' (flash/efficient forward);
    a causal call halves the FLOPs."""

    layout: Literal["BHLD", "BLHD"]

    def __call__(self, x: OpInputs) -> Estimate | None:
        q, k, v = x.tensor(0), x.tensor(1), x.tensor(2)
        if not q or not k or not v or len(q) != 4 or len(k) != 4:
            return None
        if self.layout == "BHLD":
            (b, h, length, d), s = q, k[2]
        else:
            (b, length, h, d), s = q, k[1]
        flops = 4 * b * h * length * s * d
        if x.causal:
            flops //= 2
        moved = x.tensor_bytes(0) + x.tensor_bytes(1) + x.tensor_bytes(2) + x.tensor_bytes(0)  # q, k, v in; out
        return Estimate(flops, moved, _pipe(x, 0))


def broadcast_shape(shapes: list[list[int]]) -> list[int]:
    """The shape of an elementwise op's output over inputs of these shapes (numpy's broadcasting)."""
    rank = max(len(s) for s in shapes)
    return [max(s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0) for i in range(rank)]


@dataclass(frozen=True)
class Elementwise:
    """Inputs read once, one output of the broadcast shape (in the first tensor's dtype) written once;
    an in-place op (``add_``) writes its first input; ``overwrites``: the first input is written, never
    read (``fill_``, ``zero_``)."""

    flops_per_element: float = 1.0
    overwrites: bool = False

    def __call__(self, x: OpInputs) -> Estimate | None:
        tensors = x.tensors()
        if not tensors:
            return None
        out = math.prod(broadcast_shape([x.tensor(i) or [] for i in tensors]))
        read = tensors[1:] if self.overwrites else tensors
        moved = sum(x.tensor_bytes(i) for i in read) + out * x.itemsize(tensors[0])
        return Estimate(self.flops_per_element * out, moved, "memory")


@dataclass(frozen=True)
class PerElement:
    """Norms, softmax, reductions: read the first tensor (and small weights), write an output of the
    same size (or a negligible one for a reduction)."""

    flops_per_element: float
    out_equals_input: bool = True

    def __call__(self, x: OpInputs) -> Estimate | None:
        first = x.tensor(0)
        if first is None:
            return None
        n = math.prod(first)
        extra = sum(x.tensor_bytes(i) for i in x.tensors()[1:])
        moved = x.tensor_bytes(0) * (2 if self.out_equals_input else 1) + extra
        return Estimate(self.flops_per_element * n, moved, "memory")


@dataclass(frozen=True)
class Copy:
    """copy_(dst, src) reads src and writes dst; _to_copy/clone read and write the first input."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        tensors = x.tensors()
        if not tensors:
            return None
        moved = sum(x.tensor_bytes(i) for i in tensors[:2]) if len(tensors) >= 2 else 2 * x.tensor_bytes(tensors[0])
        return Estimate(0.0, moved, "memory")


@dataclass(frozen=True)
class Gather:
    """embedding(weight (V, D), indices) / index_select(self, dim, index): read the indices (at their recorded
    width: int32 positions are 4 B, int64 ids 8) and the gathered rows, write the output."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        at = 2 if x.tensor(1) is None else 1
        weight, index = x.tensor(0), x.tensor(at)
        if not weight or index is None:
            return None
        rows = math.prod(index)
        row_bytes = math.prod(weight[1:]) * x.itemsize(0)
        return Estimate(0.0, 2 * rows * row_bytes + rows * (x.itemsize(at) or 8), "memory")


@dataclass(frozen=True)
class GatherElements:
    """gather(self, dim, index) / take_along_dim: one element of self per index element (not a row): read the
    index and the elements it picks, write as many."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        index = x.tensor(2)
        if x.tensor(0) is None or index is None:
            return None
        picked = math.prod(index)
        return Estimate(0.0, 2 * picked * x.itemsize(0) + x.tensor_bytes(2), "memory")


@dataclass(frozen=True)
class IndexCopy:
    """index_copy_(self, dim, index, source): reads the index and the source, writes the source's rows
    into self (a KV-cache write)."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        source, index = x.tensor(3), x.tensor(2)
        if source is None or index is None:
            return None
        return Estimate(0.0, 2 * x.tensor_bytes(3) + x.tensor_bytes(2), "memory")


@dataclass(frozen=True)
class Arange:
    """arange(start, end[, step]): writes (end − start) / step int64 elements (from ``Concrete Inputs``)."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        numbers = []
        for value in x.concrete[:3]:
            try:
                numbers.append(float(value))
            except (TypeError, ValueError):
                break
        if len(numbers) < 2:
            return None
        step = numbers[2] if len(numbers) > 2 and numbers[2] else 1.0
        return Estimate(0.0, max(0.0, (numbers[1] - numbers[0]) / step) * 8, "memory")


@dataclass(frozen=True)
class Cat:
    """cat(tensors): the inputs arrive as one TensorList ('Input Dims' holds a list of shapes)."""

    def __call__(self, x: OpInputs) -> Estimate | None:
        if not x.dims or not isinstance(x.dims[0], list) or not x.dims[0] or not isinstance(x.dims[0][0], list):
            return None
        size = DTYPE_BYTES.get(str(x.types[0]).removeprefix("TensorList"), 2) if x.types else 2
        moved = 2 * sum(math.prod(s) for s in x.dims[0]) * size
        return Estimate(0.0, moved, "memory")


# The models a registry file names (``cost = {model = "elementwise", flops_per_element = 8}``).
@dataclass(frozen=True)
class Picks:
    """A loss over class scores (``nll_loss``): of the (…, C) scores at input ``scores``, one per row is read
    (forward) or written into a gradient zeroed before (backward), with the row's target (the next input)."""

    scores: int = 0

    def __call__(self, x: OpInputs) -> Estimate | None:
        shape = x.tensor(self.scores)
        if not shape:
            return None
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        return Estimate(float(rows), rows * x.itemsize(self.scores) + x.tensor_bytes(self.scores + 1), "memory")


COST_MODELS: dict[str, type] = {
    "matmul": Matmul, "linear": Linear, "attention": Attention, "elementwise": Elementwise,
    "per_element": PerElement, "copy": Copy, "gather": Gather, "gather_elements": GatherElements,
    "index_copy": IndexCopy, "arange": Arange, "cat": Cat, "picks": Picks, "scaled_matmul": ScaledMatmul,
    "weight_only_matmul": WeightOnlyMatmul,
}

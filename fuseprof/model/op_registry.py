"""The op registry: one table of op and kernel-name families, each with its category, its cost model
(FLOPs and bytes from recorded shapes, ``fuseprof.model.op_models``) and its fusion role. It replaces
three tables that had to be kept in step by hand (category rules, op models, the fusion finder's
anchors), as TraceLens keeps one mapping from op names to perf models.

A GPU event is matched by the CPU op that launched it first (``aten::addmm`` is a GEMM whatever the
library names its kernel), then by its kernel name (graph-replayed kernels and Inductor kernels have
no op of their own); the first matching row wins. Users add rows at the front::

    from fuseprof.model.op_registry import REGISTRY, OpFamily
    from fuseprof.model.op_models import elementwise
    REGISTRY.insert(0, OpFamily("attention", kernel=r"my_paged_attention", family="my attention"))
    REGISTRY.insert(0, OpFamily("elementwise", op=r"^mylib::fused_gelu$", cost=elementwise(8)))

Roles: ``anchor`` families (GEMM, convolution, attention, communication) end a fusion chain, and the
fusion finder never puts them inside one; every other family is ``fusible``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pandas as pd

from fuseprof.model.op_models import (
    ELEMENTWISE_FLOPS,
    CostModel,
    Estimate,
    OpInputs,
    arange,
    attention,
    cat,
    copy,
    elementwise,
    gather,
    index_copy,
    linear,
    matmul,
    per_element,
)

CATEGORIES = ("GEMM", "convolution", "attention", "normalization", "elementwise", "reduction", "copy/cast",
              "memcpy", "memset", "communication", "other")
ANCHOR_CATEGORIES = frozenset({"GEMM", "convolution", "attention", "communication"})


@dataclass
class OpFamily:
    """Events whose launching op matches ``op`` or whose kernel name matches ``kernel`` (regular
    expressions, searched; the kernel's case-insensitively; either may be empty) are ``category``;
    ``cost`` gives an op's FLOPs and bytes from its shapes; ``role`` is ``anchor`` or ``fusible``
    (empty: from the category); ``family`` names the library or vendor in tables."""

    category: str
    op: str = ""
    kernel: str = ""
    cost: CostModel | None = None
    role: str = ""
    family: str = ""
    _op: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    _kernel: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._op = re.compile(self.op) if self.op else None
        self._kernel = re.compile(self.kernel, re.IGNORECASE) if self.kernel else None
        self.role = self.role or ("anchor" if self.category in ANCHOR_CATEGORIES else "fusible")


def _ops(*names: str) -> str:
    return rf"^aten::({'|'.join(names)})$"


_GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "_scaled_mm", "_int_mm",
             "einsum", "_addmm_activation")
_SDPA = r"^aten::(scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention)$"
_REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "all", "any", "prod", "argmax", "norm")

REGISTRY: list[OpFamily] = [
    # --- by op: what PyTorch called, whatever library ran it
    OpFamily("GEMM", op=r"^aten::(mm|matmul)$", cost=matmul(bias=False, batched=False), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::addmm$", cost=matmul(bias=True, batched=False), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::bmm$", cost=matmul(bias=False, batched=True), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::baddbmm$", cost=matmul(bias=True, batched=True), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::linear$", cost=linear, family="aten GEMM"),
    OpFamily("GEMM", op=_ops(*_GEMM_OPS), family="aten GEMM"),
    OpFamily("GEMM", op=r"^(aiter::gemm_a16w16\w*|vllm::rocm_unquantized_gemm\w*)$", cost=linear,
             family="engine GEMMs (x: M×K, weight: N×K, as F.linear)"),
    OpFamily("convolution", op=r"^aten::(convolution|_convolution|convolution_backward|cudnn_convolution\w*|"
                               r"conv\dd|conv_transpose\dd|miopen_convolution\w*|_convolution_mode|"
                               r"mkldnn_convolution)$", family="aten convolution"),
    OpFamily("attention", op=_SDPA, cost=attention("BHLD"), family="aten SDPA"),
    OpFamily("attention", op=r"^aten::_(flash|efficient)_attention_forward$", cost=attention("BLHD"),
             family="aten flash/efficient"),
    OpFamily("attention", op=r"^aten::(_?scaled_dot_product\w*|_flash_attention_\w+|_efficient_attention_\w+|"
                             r"_cudnn_attention_\w+)$|^flash_attn\w*::|^\w+::\w*attention\w*$",
             family="attention ops"),
    OpFamily("normalization", op=_ops("native_layer_norm", "layer_norm"), cost=per_element(5),
             family="aten norm"),
    OpFamily("normalization", op=_ops("_fused_rms_norm", "rms_norm"), cost=per_element(4), family="aten norm"),
    OpFamily("normalization", op=_ops("native_group_norm", "group_norm", "native_batch_norm", "batch_norm",
                                      r"_batch_norm_\w+", "cudnn_batch_norm", r"\w+_norm_backward",
                                      r"miopen_batch_norm\w*"), family="aten norm"),
    OpFamily("normalization", op=r"^(fuseprof|aiter|sgl_kernel|_C|vllm)::\w*(rms_?norm|layer_?norm)\w*$",
             family="engine norms"),
    OpFamily("reduction", op=_ops("_softmax", "softmax"), cost=per_element(5), family="aten softmax"),
    OpFamily("reduction", op=_ops(*_REDUCTIONS), cost=per_element(1, out_equals_input=False),
             family="aten reduction"),
    OpFamily("reduction", op=_ops("linalg_vector_norm", "var", "std", "var_mean", "cumsum", "_log_softmax",
                                  "log_softmax", "topk", "sort", r"\w*_pool\dd\w*", r"_softmax_backward_data"),
             family="aten reduction"),
    OpFamily("copy/cast", op=_ops("copy_", "_to_copy", "clone"), cost=copy, family="aten copy"),
    OpFamily("copy/cast", op=_ops("cat", "_cat"), cost=cat, family="aten copy"),
    OpFamily("copy/cast", op=_ops("to", "contiguous", "stack", r"index_copy_?", "flip", "roll", "_reshape_copy",
                                  "expand_copy", "repeat", "repeat_interleave", "constant_pad_nd"),
             family="aten copy"),
    OpFamily("copy/cast", op=r"^(sglang|_C|vllm|_C_cache_ops)::\w*(store_cache|store_kvcache|reshape_and_cache\w*|"
                             r"concat_and_cache\w*)$", family="KV-cache write"),
    OpFamily("other", op=_ops("embedding", "index_select", "gather"), cost=gather, family="aten gather"),
    OpFamily("copy/cast", op=_ops("index_copy_", "index_copy"), cost=index_copy, family="aten copy"),
    OpFamily("other", op=_ops("arange"), cost=arange, family="aten factory"),
    OpFamily("reduction", op=_ops("cumsum"), cost=per_element(1), family="aten reduction"),
    *(OpFamily("elementwise", op=rf"^aten::{name}_?$", cost=elementwise(flops), family="aten elementwise")
      for name, flops in ELEMENTWISE_FLOPS.items()),
    OpFamily("elementwise", op=r"^aten::(bitwise_\w+|logical_\w+|floor|ceil|round|sign|threshold|hardtanh|"
                               r"leaky_relu|glu|_foreach_\w+|\w+_backward)_?$", family="aten elementwise"),
    OpFamily("elementwise", op=r"^(fuseprof|sgl_kernel|_C|vllm)::\w*(silu|gelu)\w*$", family="engine activations"),
    OpFamily("elementwise", op=r"^\w+::\w*rotary_embedding\w*$", family="engine RoPE"),
    # --- by kernel name: graph replays, Inductor, libraries whose op is not in the trace
    OpFamily("communication", kernel=r"^nccl|ncclDevKernel|ncclKernel|^rccl|cross_device_reduce",
             family="NCCL/RCCL"),
    OpFamily("GEMM", kernel=r"^triton_tem_", family="Inductor template GEMM"),
    OpFamily("normalization", kernel=r"^triton_(red|per)_fused\w*(rsqrt|layer_norm|var_mean)",
             family="Inductor norm"),
    OpFamily("reduction", kernel=r"^triton_(red|per)_", family="Inductor reduction"),
    OpFamily("elementwise", kernel=r"^triton_poi_", family="Inductor pointwise"),
    # Attention before GEMM: Hopper's flash kernels name their wgmma instructions (cuDNN's SDPA on the
    # H200); lean_reduction_kernel is cuDNN SDPA's split-KV reduction (aten::_cudnn_attention_forward).
    OpFamily("attention", kernel=r"flash|fmha|attention|attn|^lean_reduction_kernel$|paged_attention|"
                                 r"BatchPrefill|BatchDecode|SinglePrefill|SingleDecode|mha_(fwd|bwd)|"
                                 r"^_fwd_(grouped_)?kernel", family="flash/cuDNN/CK/aiter/flashinfer attention"),
    # convolution before GEMM: cuDNN's implicit-GEMM kernels say gemm too
    OpFamily("convolution", kernel=r"conv\w*(fprop|dgrad|wgrad)|implicit_?gemm|MIOpen\w*Conv|naive_conv|igemm",
             family="cuDNN/MIOpen convolution"),
    OpFamily("GEMM", kernel=r"^Cijk_|hipblaslt|device_gemm|DeviceGemm|wvSplitK|^_matmul_ogs|matmul_kernel|"
                            r"^bmm_\w+_t\d+x\d+", family="AMD Tensile/hipBLASLt/CK, Triton and TRT-LLM GEMMs"),
    OpFamily("GEMM", kernel=r"gemm|gemv|nvjet|cutlass.*tensorop|xmma|cublas|wgmma|splitKreduce",
             family="cuBLAS/cuBLASLt/nvjet/CUTLASS GEMMs"),
    OpFamily("normalization", kernel=r"layer_?norm|rms_?norm|batch_?norm|group_?norm|MIOpenBatchNorm",
             family="norm kernels"),
    OpFamily("reduction", kernel=r"reduce_kernel|softmax|reduction|argmax|topk|moe::dev::(routing|finalize)|"
                                 r"_combined_routing|_sum_bitmatrix|_finalize_matmul", family="reductions, MoE routing"),
    OpFamily("copy/cast", kernel=r"copy|memcpy\d|CatArray|cat_|transpose|permute|store_kvcache|reshape_and_cache",
             family="copies, KV-cache writes"),
    OpFamily("elementwise", kernel=r"elementwise|pointwise|vectorized|act_and_mul|silu|gelu|rotary|quant",
             family="elementwise kernels"),
]

# The ops a ``fuseprof fusion --verify`` replay may call. A trace names the ops it replays, and traces
# are shared, so only ops known to compute on the tensors they are given and touch nothing else are run:
# no file (``aten::from_file`` maps one and writes through it), process, network, device setting or RNG
# state (``multinomial``, ``dropout`` draw from the process's generator). Any other op makes its chain
# "not replayable" with that reason. A user adds their own pure ops here.
REPLAYABLE: frozenset[str] = frozenset(f"aten::{name}" for name in (
    # elementwise, in- and out-of-place
    *(n + suffix for n in (
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "atan", "atan2", "bitwise_and", "bitwise_not",
        "bitwise_or", "bitwise_xor", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos", "cosh", "div", "elu",
        "eq", "erf", "erfc", "exp", "exp2", "expm1", "floor", "floor_divide", "fmod", "frac", "ge", "gelu", "gt",
        "hardsigmoid", "hardswish", "hardtanh", "le", "leaky_relu", "lerp", "log", "log10", "log1p", "log2",
        "logical_and", "logical_not", "logical_or", "logical_xor", "lt", "masked_fill", "mish", "mul", "ne", "neg",
        "pow", "reciprocal", "relu", "remainder", "round", "rsqrt", "sigmoid", "sign", "silu", "sin", "sinh",
        "sqrt", "square", "sub", "tanh", "threshold", "tril", "triu", "true_divide", "trunc", "fill", "zero")
      for suffix in ("", "_")),
    "rsub", "where", "maximum", "minimum", "isfinite", "isinf", "isnan", "glu", "softplus", "type_as",
    "silu_backward", "gelu_backward", "threshold_backward", "sigmoid_backward", "tanh_backward",
    # reductions, norms, softmax
    "sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "all", "any", "norm",
    "linalg_vector_norm", "var", "std", "var_mean", "logsumexp", "cumsum", "cumprod", "softmax", "_softmax",
    "_safe_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data", "topk", "sort",
    "native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm", "native_group_norm", "group_norm",
    "native_layer_norm_backward",
    # copies, casts, layout and views of the tensors given
    "copy_", "_to_copy", "to", "clone", "contiguous", "cat", "_cat", "stack", "flip", "roll", "repeat",
    "repeat_interleave", "constant_pad_nd", "expand", "expand_as", "expand_copy", "view", "view_as", "reshape",
    "_reshape_alias", "_unsafe_view", "_reshape_copy", "permute", "transpose", "t", "unsqueeze", "squeeze",
    "flatten", "unflatten", "slice", "select", "narrow", "split", "split_with_sizes", "chunk", "unbind", "alias",
    "detach", "lift_fresh",
    # indexing (indices made valid by the replay: fuseprof.verify.replay.INDEXING)
    "index", "index_select", "gather", "embedding", "index_copy", "index_copy_", "index_add", "index_add_",
    "index_fill_", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_",
    # factories (the replay bounds what they allocate)
    "arange", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like",
    # matrix products, met at a chain's edge
    "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "outer", "einsum",
))

_FALLBACK = OpFamily("other", family="(no rule)")
_KIND_FAMILIES = {kind: OpFamily(kind, family=kind) for kind in ("memcpy", "memset")}


def match(kind: str, op: str, kernel: str, registry: Iterable[OpFamily] | None = None) -> OpFamily:
    """The family of one GPU event: memcpy and memset by kind, else the first row matching its op,
    else the first matching its kernel name, else 'other'."""
    if kind in _KIND_FAMILIES:
        return _KIND_FAMILIES[kind]
    rows = REGISTRY if registry is None else list(registry)
    for row in rows:
        if row._op is not None and op and row._op.search(op):
            return row
    for row in rows:
        if row._kernel is not None and row._kernel.search(kernel):
            return row
    return _FALLBACK


def classify(kind: pd.Series, op: pd.Series, kernel: pd.Series,
             registry: list[OpFamily] | None = None) -> pd.DataFrame:
    """``category``, ``role`` and ``family`` per GPU event from its kind, launching op (may be null)
    and kernel name; each distinct triple is matched once."""
    cache: dict[tuple[str, str, str], OpFamily] = {}
    rows = []
    for key in zip(kind.astype(object), op.astype(object).where(op.notna(), ""), kernel.astype(object)):
        if key not in cache:
            cache[key] = match(*key, registry=registry)
        rows.append(cache[key])
    return pd.DataFrame({"category": pd.array([r.category for r in rows], dtype="string"),
                         "role": pd.array([r.role for r in rows], dtype="string"),
                         "family": pd.array([r.family for r in rows], dtype="string")}, index=kind.index)


def categorize(kind: pd.Series, op: pd.Series, kernel: pd.Series,
               registry: list[OpFamily] | None = None) -> pd.Series:
    """The category column of ``classify``."""
    return classify(kind, op, kernel, registry)["category"]


_ESTIMATES: dict[tuple[str, CostModel, bytes | str], Estimate | None] = {}
_KEY = msgspec.json.Encoder().encode


_COST_FAMILIES: dict[str, OpFamily | None] = {}
_COST_FAMILIES_OF: list[tuple[int, int, int]] = [(0, 0, 0)]


def cost_family(op: str) -> OpFamily | None:
    """The first registry row whose op pattern matches ``op`` and that has a cost model. Remembered
    per op name until rows are added at either end of the registry (the documented way to extend it)."""
    fingerprint = (len(REGISTRY), id(REGISTRY[0]) if REGISTRY else 0, id(REGISTRY[-1]) if REGISTRY else 0)
    if _COST_FAMILIES_OF[0] != fingerprint:
        _COST_FAMILIES.clear()
        _COST_FAMILIES_OF[0] = fingerprint
    if op not in _COST_FAMILIES:
        _COST_FAMILIES[op] = next((row for row in REGISTRY if row.cost is not None and row._op is not None
                                   and row._op.search(op)), None)
    return _COST_FAMILIES[op]


def _inputs_key(dims: Any, types: Any, concrete: Any) -> bytes | str:
    """The recorded inputs as one hashable text: msgspec's JSON (8× faster than formatting the lists),
    or their repr where a value is not JSON (a numpy scalar from a hand-made frame)."""
    try:
        return _KEY((dims, types, concrete))
    except TypeError:
        return f"{dims}|{types}|{concrete}"


def estimate(op: str, dims: Any, types: Any, concrete: Any) -> Estimate | None:
    """The op's analytic cost from its recorded inputs, or None (no model, or no shapes recorded).

    Memoised per op, cost model and inputs: a decode trace repeats a few hundred distinct calls tens
    of thousands of times, and both the per-op roofline and the fusion finder ask. The key holds the
    cost model itself (not an id a freed row's successor could reuse), so an edited table is never
    answered from the old one."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    row = cost_family(op)
    if row is None or row.cost is None:
        return None
    key = (op, row.cost, _inputs_key(dims, types, concrete))
    if key not in _ESTIMATES:
        if len(_ESTIMATES) > 100_000:
            _ESTIMATES.clear()
        try:
            _ESTIMATES[key] = row.cost(OpInputs(dims, types, concrete if isinstance(concrete, list) else [], op))
        except (TypeError, ValueError, IndexError):
            _ESTIMATES[key] = None  # shapes of an unexpected form: no estimate rather than a wrong one
    return _ESTIMATES[key]

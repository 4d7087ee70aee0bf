"""Which category a GPU event belongs to: a table of rules a user can extend.

The CPU op that launched a kernel decides first (``aten::addmm`` is a GEMM whatever cuBLAS names
its kernel); the kernel's own name decides when there is no op or no op rule matches (Inductor's
``triton_poi_*``, NCCL, library kernels). memcpy and memset events are their own categories, and
NCCL kernels are communication whatever launched them. First matching rule wins::

    from fuseprof.analysis.categories import RULES, Rule
    RULES.insert(0, Rule("attention", kernel=r"my_paged_attention"))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

CATEGORIES = ("GEMM", "convolution", "attention", "normalization", "elementwise", "reduction", "copy/cast", "memcpy", "memset",
              "communication", "other")


@dataclass
class Rule:
    """A category for events whose launching op matches ``op`` or whose kernel name matches
    ``kernel`` (regular expressions, searched; either may be empty)."""

    category: str
    op: str = ""
    kernel: str = ""
    _op: re.Pattern[str] | None = field(default=None, init=False, repr=False)
    _kernel: re.Pattern[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._op = re.compile(self.op) if self.op else None
        self._kernel = re.compile(self.kernel, re.IGNORECASE) if self.kernel else None


_ELEMENTWISE_OPS = ("add|sub|rsub|mul|div|neg|abs|silu|gelu|relu|sigmoid|tanh|exp|log|pow|rsqrt|sqrt|reciprocal|where|"
                    "eq|ne|lt|gt|le|ge|fill|zero|masked_fill|clamp|minimum|maximum|sin|cos|erf|bitwise_\\w+|"
                    "logical_\\w+|floor|ceil|round|sign|lerp|addcmul|addcdiv|threshold|hardtanh|leaky_relu|glu")
RULES: list[Rule] = [
    Rule("communication", kernel=r"^nccl|ncclDevKernel|ncclKernel"),
    Rule("GEMM", op=r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|_scaled_mm|_int_mm|einsum|"
                    r"_addmm_activation)$"),
    Rule("convolution", op=r"^aten::(convolution|_convolution|cudnn_convolution\w*|conv\dd|conv_transpose\dd|"
                           r"miopen_convolution\w*|_convolution_mode|mkldnn_convolution)$"),
    Rule("attention", op=r"^aten::(_?scaled_dot_product\w*|_flash_attention_\w+|_efficient_attention_\w+|"
                         r"_cudnn_attention_\w+)$|^flash_attn\w*::|^\w+::\w*attention\w*$"),
    Rule("normalization", op=r"^aten::(native_layer_norm|layer_norm|rms_norm|_fused_rms_norm|native_group_norm|"
                             r"group_norm|native_batch_norm|batch_norm|_batch_norm_\w+|cudnn_batch_norm)$"),
    Rule("reduction", op=r"^aten::(sum|mean|amax|amin|max|min|all|any|argmax|argmin|prod|norm|linalg_vector_norm|"
                         r"var|std|var_mean|cumsum|_softmax|softmax|_log_softmax|log_softmax|topk|sort)$"),
    Rule("copy/cast", op=r"^aten::(copy_|_to_copy|to|contiguous|clone|cat|stack|_cat|index_copy_?|flip|roll|"
                         r"_reshape_copy|expand_copy|repeat|repeat_interleave|constant_pad_nd)$"),
    Rule("elementwise", op=rf"^aten::({_ELEMENTWISE_OPS})_?$"),
    Rule("normalization", op=r"^fuseprof::\w*norm"),
    Rule("elementwise", op=r"^fuseprof::silu"),
    # Inductor names its kernels after everything fused into them: the prefix says what kind of loop it is
    Rule("GEMM", kernel=r"^triton_tem_"),
    Rule("normalization", kernel=r"^triton_(red|per)_fused\w*(rsqrt|layer_norm|var_mean)"),
    Rule("reduction", kernel=r"^triton_(red|per)_"),
    Rule("elementwise", kernel=r"^triton_poi_"),
    # Inside a CUDA graph no op launches a kernel, so its name must say what it is. Attention before
    # GEMM: Hopper's flash kernels name their wgmma instructions (cuDNN's SDPA on the H200);
    # lean_reduction_kernel is cuDNN SDPA's split-KV reduction (aten::_cudnn_attention_forward
    # launches it), splitKreduce cuBLAS's split-K epilogue (aten::mm launches it).
    Rule("attention", kernel=r"flash|fmha|attention|attn|^lean_reduction_kernel$"),
    Rule("GEMM", kernel=r"gemm|gemv|nvjet|cutlass.*tensorop|xmma|cublas|wgmma|splitKreduce"),
    Rule("normalization", kernel=r"layer_?norm|rms_?norm|batch_?norm|group_?norm"),
    Rule("reduction", kernel=r"reduce_kernel|softmax|reduction|argmax|topk"),
    Rule("copy/cast", kernel=r"copy|memcpy\d|CatArray|cat_|transpose|permute"),
    Rule("elementwise", kernel=r"elementwise|pointwise|vectorized"),
]


def categorize(kind: pd.Series, op: pd.Series, kernel: pd.Series, rules: list[Rule] | None = None) -> pd.Series:
    """A category per GPU event from its kind ('kernel', 'memcpy', 'memset', 'communication'), the
    name of the op that launched it (may be null) and its kernel name."""
    rules = RULES if rules is None else rules
    cache: dict[tuple[str, str, str], str] = {}
    out = []
    for k, o, n in zip(kind.astype(object), op.astype(object).where(op.notna(), ""), kernel.astype(object)):
        key = (k, o, n)
        if key not in cache:
            cache[key] = _category(k, o, n, rules)
        out.append(cache[key])
    return pd.Series(out, index=kind.index, dtype="string")


def _category(kind: str, op: str, kernel: str, rules: list[Rule]) -> str:
    if kind in ("memcpy", "memset", "communication"):
        return kind
    for rule in rules:
        if rule._op is not None and op and rule._op.search(op):
            return rule.category
    for rule in rules:
        if rule._kernel is not None and rule._kernel.search(kernel):
            return rule.category
    return "other"

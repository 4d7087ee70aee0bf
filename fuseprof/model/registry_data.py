"""The default registry's tables: every op and kernel name fuseprof knows, and nothing else.

This is the one module of fuseprof that names ops (a test keeps it so: tests/test_layers.py). The
families are checked in order, first by launching op, then by kernel name; the roles are by exact op
name. ``DEFAULT`` is the value every analysis uses unless it is given another
(``fuseprof.model.registry.Registry.extend``, ``--registry FILE``).
"""

from __future__ import annotations

from fuseprof.model.kernel_families import mined_rows
from fuseprof.model.op_models import (
    Arange,
    Attention,
    Cat,
    Copy,
    Elementwise,
    Gather,
    GatherElements,
    IndexCopy,
    Linear,
    Matmul,
    PerElement,
    Picks,
    ScaledMatmul,
    WeightOnlyMatmul,
)
from fuseprof.model.registry import (
    CatalogueEntry,
    ChainClass,
    GemmOperands,
    HostCause,
    IterationRange,
    KernelArgument,
    KernelMatch,
    KindRule,
    KnownFusion,
    OpFamily,
    OpKinds,
    OpRole,
    OptimizerModel,
    PhaseRange,
    Registry,
)


def _ops(*names: str) -> str:
    return rf"^aten::({'|'.join(names)})$"


_GEMM_OPS = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "_scaled_mm", "_int_mm",
             "einsum", "_addmm_activation", "_weight_int8pack_mm", "_weight_int4pack_mm", "_scaled_grouped_mm",
             "_grouped_mm")
# kernel families mined from the libraries' sources (scripts/mine_kernel_families.py → kernel_families.json)
_MINED_FAMILIES, _MINED_KINDS = mined_rows()
# A GEMM kernel that reads quantized operands: a quantisation word (e4m3, int4, awq, ...) qualifies a kernel whose
# name says it is a GEMM, never makes one: TRT-LLM-gen's FP8 attention ("fmhaSm100fKernel_QkvE4m3...") and a
# dequantise kernel apart ("awq_dequantize") hold the word and are no GEMM. The name's GEMM words are cuBLASLt's and
# CUTLASS's (…gemm_e4m3…, cutlass3x_…gemm_f8_f8…: libcublasLt.so of nvidia-cublas-cu12 12.9.3.13), the engines' (fp8
# _matmul, marlin) and ATen's (_weight_int4pack_mm); "gemm" in a library's name is none (fbgemm_gpu::, deep_gemm::
# name every kernel of theirs: FBGEMM's quantize_fp8_row_kernel is no GEMM).
_QUANTIZED_GEMM = (r"^(?=.*(?:(?<!fb)(?<!deep_)gemm|gemv|matmul|marlin|(?<![a-z])_?mm(?![a-z])))(?!.*(?:attn|attention|fmha|flash|"
                   r"sdpa|mla))"
                   r".*?(?:mxfp4|MxE\dm\d|w4a16|w8a8|awq|gptq|marlin|fp8|int4|e4m3|e5m2|_f8_)")
_SDPA = r"^aten::(scaled_dot_product_attention|_scaled_dot_product_(flash|efficient|cudnn)_attention)$"
_REDUCTIONS = ("sum", "mean", "amax", "amin", "max", "min", "all", "any", "prod", "argmax", "norm")
# FLOPs per output element of elementwise ops (1 for add, 4 for SiLU, 8 for GELU)
ELEMENTWISE_FLOPS = {
    "add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "abs": 1, "pow": 1, "rsqrt": 1, "sqrt": 1,
    "reciprocal": 1, "exp": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 1, "sigmoid": 4, "silu": 4, "gelu": 8,
    "relu": 1, "where": 1, "eq": 1, "ne": 1, "lt": 1, "gt": 1, "le": 1, "ge": 1, "masked_fill": 1, "clamp": 1,
    "fill": 0, "zero": 0, "minimum": 1, "maximum": 1, "erf": 1, "addcmul": 2, "addcdiv": 2, "lerp": 2,
}

_OVERWRITES = ("fill", "zero")  # they write their first argument without reading it

FAMILIES: tuple[OpFamily, ...] = (
    # --- by op: what PyTorch called, whatever library ran it
    OpFamily("GEMM", op=r"^aten::(mm|matmul)$", cost=Matmul(bias=False, batched=False), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::addmm$", cost=Matmul(bias=True, batched=False), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::bmm$", cost=Matmul(bias=False, batched=True), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::baddbmm$", cost=Matmul(bias=True, batched=True), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::linear$", cost=Linear(), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::_scaled_mm$", cost=ScaledMatmul(), family="aten GEMM"),
    OpFamily("GEMM", op=r"^aten::_weight_int8pack_mm$", cost=WeightOnlyMatmul(), family="aten GEMM"),
    OpFamily("GEMM", op=_ops(*_GEMM_OPS), family="aten GEMM"),
    OpFamily("GEMM", op=r"^(aiter::gemm_a16w16\w*|vllm::rocm_unquantized_gemm\w*)$", cost=Linear(),
             family="engine GEMMs (x: M×K, weight: N×K, as F.linear)"),
    OpFamily("convolution", op=r"^aten::(convolution|_convolution|convolution_backward|cudnn_convolution\w*|"
                               r"conv\dd|conv_transpose\dd|miopen_convolution\w*|_convolution_mode|"
                               r"mkldnn_convolution)$", family="aten convolution"),
    OpFamily("attention", op=_SDPA, cost=Attention("BHLD"), family="aten SDPA"),
    OpFamily("attention", op=r"^aten::_(flash|efficient)_attention_forward$", cost=Attention("BLHD"),
             family="aten flash/efficient"),
    OpFamily("attention", op=r"^aten::(_?scaled_dot_product\w*|_flash_attention_\w+|_efficient_attention_\w+|"
                             r"_cudnn_attention_\w+)$|^flash_attn\w*::|^\w+::\w*attention\w*$",
             family="attention ops"),
    OpFamily("normalization", op=_ops("native_layer_norm", "layer_norm"), cost=PerElement(5), family="aten norm"),
    OpFamily("normalization", op=_ops("_fused_rms_norm", "rms_norm"), cost=PerElement(4), family="aten norm"),
    OpFamily("normalization", op=_ops("native_group_norm", "group_norm", "native_batch_norm", "batch_norm",
                                      r"_batch_norm_\w+", "cudnn_batch_norm", r"\w+_norm_backward",
                                      r"miopen_batch_norm\w*"), family="aten norm"),
    OpFamily("normalization", op=r"^(fuseprof|aiter|sgl_kernel|_C|vllm)::\w*(rms_?norm|layer_?norm)\w*$",
             family="engine norms"),
    OpFamily("reduction", op=_ops("_softmax", "softmax"), cost=PerElement(5), family="aten softmax"),
    OpFamily("reduction", op=_ops("_log_softmax", "log_softmax"), cost=PerElement(5), family="aten softmax"),
    # (grad_output, output): both read, the gradient written
    OpFamily("reduction", op=_ops("_log_softmax_backward_data", "_softmax_backward_data"), cost=Elementwise(3),
             family="aten softmax"),
    OpFamily("other", op=_ops("nll_loss_forward", "nll_loss2d_forward"), cost=Picks(0), family="aten loss"),
    OpFamily("elementwise", op=_ops("nll_loss_backward", "nll_loss2d_backward"), cost=Picks(1), family="aten loss"),
    OpFamily("elementwise", op=_ops("silu_backward", "gelu_backward", "sigmoid_backward", "tanh_backward",
                                    "threshold_backward"), cost=Elementwise(5), family="aten elementwise"),
    # (grad_output, indices, …): the gradient rows read and added into the weight's gradient
    OpFamily("other", op=_ops("embedding_dense_backward"), cost=PerElement(1), family="aten gather"),
    OpFamily("reduction", op=_ops(*_REDUCTIONS), cost=PerElement(1, out_equals_input=False),
             family="aten reduction"),
    OpFamily("reduction", op=_ops("linalg_vector_norm", "var", "std", "var_mean", "cumsum", "_log_softmax",
                                  "log_softmax", "topk", "sort", r"\w*_pool\dd\w*", r"_softmax_backward_data"),
             family="aten reduction"),
    OpFamily("copy/cast", op=_ops("copy_", "_to_copy", "clone"), cost=Copy(), family="aten copy"),
    OpFamily("copy/cast", op=_ops("cat", "_cat"), cost=Cat(), family="aten copy"),
    OpFamily("copy/cast", op=_ops("to", "contiguous", "stack", r"index_copy_?", "flip", "roll", "_reshape_copy",
                                  "expand_copy", "repeat", "repeat_interleave", "constant_pad_nd"),
             family="aten copy"),
    OpFamily("copy/cast", op=r"^(sglang|_C|vllm|_C_cache_ops)::\w*(store_cache|store_kvcache|reshape_and_cache\w*|"
                             r"concat_and_cache\w*)$", family="KV-cache write"),
    OpFamily("other", op=_ops("embedding", "index_select"), cost=Gather(), family="aten gather"),
    OpFamily("other", op=_ops("gather", "take_along_dim"), cost=GatherElements(), family="aten gather"),
    OpFamily("copy/cast", op=_ops("index_copy_", "index_copy"), cost=IndexCopy(), family="aten copy"),
    OpFamily("other", op=_ops("arange"), cost=Arange(), family="aten factory"),
    OpFamily("reduction", op=_ops("cumsum"), cost=PerElement(1), family="aten reduction"),
    *(OpFamily("elementwise", op=rf"^aten::{name}_?$", cost=Elementwise(flops, overwrites=name in _OVERWRITES),
               family="aten elementwise") for name, flops in ELEMENTWISE_FLOPS.items()),
    OpFamily("elementwise", op=r"^aten::(bitwise_\w+|logical_\w+|floor|ceil|round|sign|threshold|hardtanh|"
                               r"leaky_relu|glu|_foreach_\w+|\w+_backward)_?$", family="aten elementwise"),
    OpFamily("elementwise", op=r"^(fuseprof|sgl_kernel|_C|vllm)::\w*(silu|gelu)\w*$", family="engine activations"),
    OpFamily("elementwise", op=r"^\w+::\w*rotary_embedding\w*$", family="engine RoPE"),
    # communication ops of the functional collectives, DeepEP and the engines' own all-reduce
    OpFamily("communication", op=r"^(c10d|_c10d_functional|c10d_functional|symm_mem|deep_ep|_C_custom_ar|"
                                 r"trtllm)::\w+$|^\w+::\w*(all_reduce|all_gather|reduce_scatter|all_to_all)\w*$",
             family="collective ops"),
    OpFamily("other", op=r"^fbgemm::\w*(embedding|tbe|index_select|jagged|bounds_check|permute)\w*$",
             family="FBGEMM/TorchRec embeddings"),
    # --- by kernel name: graph replays, Inductor, libraries whose op is not in the trace
    # communication by what it does, whoever wrote it: collective libraries (NCCL, RCCL, MSCCL++, NVSHMEM, Gloo's
    # CUDA path), expert-parallel all-to-all (DeepEP's dispatch/combine, pplx), and the engines' own all-reduce
    # kernels (vLLM/SGLang/aiter cross_device_reduce, vLLM's ROCm quick all-reduce, TRT-LLM's one/two-shot and
    # fused all-reduce, PyTorch symmetric memory's one/two-shot and multimem all-reduce)
    OpFamily("communication", kernel=r"^nccl|ncclDevKernel|ncclKernel|^rccl|cross_device_reduce",
             family="NCCL/RCCL"),
    OpFamily("communication", kernel=r"mscclpp|nvshmem|gloo::|deep_ep::|pplx::|quickreduce|"
                                     r"(one|two)_?shot_?all_?reduce|all_?reduce_?fusion|multimem_all_\w*|"
                                     r"custom_?all_?reduce|lamport|(all_?reduce|all_?gather|all_?to_?all|"
                                     r"reduce_?scatter)\w*_?kernel",
             family="MSCCL++/NVSHMEM/Gloo, DeepEP/pplx all-to-all, engines' custom all-reduce"),
    # embedding lookups (FBGEMM's table-batched embeddings under TorchRec) gather rows; their kernels' names say
    # fbgemm, which the GEMM row below would take for a GEMM
    OpFamily("other", kernel=r"split_embedding\w*|(?<!rotary_)embedding_(forward|backward)|batch_index_select|"
                             r"bounds_check_indices|linearize_index|(jagged|dense)_to_(dense|jagged)|"
                             r"fbgemm_gpu::(?!.*(gemm|f8f8|bf16bf16|fp8|quant))", family="FBGEMM/TorchRec embeddings"),
    OpFamily("GEMM", kernel=r"^triton_tem_", family="Inductor template GEMM"),
    OpFamily("normalization", kernel=r"^triton_(red|per)_fused\w*(rsqrt|layer_norm|var_mean)",
             family="Inductor norm"),
    OpFamily("reduction", kernel=r"^triton_(red|per)_", family="Inductor reduction"),
    OpFamily("elementwise", kernel=r"^triton_poi_", family="Inductor pointwise"),
    # the libraries' own kernels, by the families mined from their sources, before the generic words below
    *_MINED_FAMILIES,
    # Attention before GEMM: Hopper's flash kernels name their wgmma instructions (cuDNN's SDPA on the
    # H200); lean_reduction_kernel is cuDNN SDPA's split-KV reduction (aten::_cudnn_attention_forward).
    OpFamily("attention", kernel=r"flash(?!infer)|fmha|attention|attn|^lean_reduction_kernel$|paged_attention|"
                                 r"BatchPrefill|BatchDecode|SinglePrefill|SingleDecode|mha_(fwd|bwd)|"
                                 r"^_fwd_(grouped_)?kernel", family="flash/cuDNN/CK/aiter/flashinfer attention"),
    # convolution before GEMM: cuDNN's implicit-GEMM kernels say gemm too
    OpFamily("convolution", kernel=r"conv\w*(fprop|dgrad|wgrad)|implicit_?gemm|MIOpen\w*Conv|naive_conv|igemm",
             family="cuDNN/MIOpen convolution"),
    OpFamily("GEMM", kernel=r"^Cijk_|hipblaslt|device_gemm|DeviceGemm|wvSplitK|^_matmul_ogs|matmul_kernel|"
                            r"^bmm_\w+_t\d+x\d+|weight_int(8|4)pack_mm", family="AMD Tensile/hipBLASLt/CK, Triton and TRT-LLM GEMMs"),
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
)


def _aten(*names: str) -> tuple[str, ...]:
    return tuple(f"aten::{n}" for n in names)


def _with_in_place(*names: str) -> tuple[str, ...]:
    return tuple(f"aten::{n}{suffix}" for n in names for suffix in ("", "_"))


# The ops a ``fuseprof fusion --verify`` replay may call. A trace names the ops it replays, and traces are
# shared, so only ops known to compute on the tensors they are given and touch nothing else are run: no
# file (``aten::from_file`` maps one and writes through it), process, network, device setting or RNG state
# (``multinomial``, ``dropout`` draw from the process's generator). Any other op makes its chain "not
# replayable" with that reason.
_PURE = (
    *_with_in_place(
        "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "asin", "atan", "atan2", "bitwise_and", "bitwise_not",
        "bitwise_or", "bitwise_xor", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos", "cosh", "div", "elu",
        "eq", "erf", "erfc", "exp", "exp2", "expm1", "floor", "floor_divide", "fmod", "frac", "ge", "gelu", "gt",
        "hardsigmoid", "hardswish", "hardtanh", "le", "leaky_relu", "lerp", "log", "log10", "log1p", "log2",
        "logical_and", "logical_not", "logical_or", "logical_xor", "lt", "masked_fill", "mish", "mul", "ne", "neg",
        "pow", "reciprocal", "relu", "remainder", "round", "rsqrt", "sigmoid", "sign", "silu", "sin", "sinh",
        "sqrt", "square", "sub", "tanh", "threshold", "tril", "triu", "true_divide", "trunc", "fill", "zero"),
    *_aten(
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
        # indexing (the replay makes the indices valid: OpRole.indexing)
        "index", "index_select", "gather", "embedding", "index_copy", "index_copy_", "index_add", "index_add_",
        "index_fill_", "index_put_", "scatter", "scatter_", "scatter_add", "scatter_add_",
        # factories (the replay bounds what they allocate)
        "arange", "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like",
        # matrix products, met at a chain's edge
        "mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "outer", "einsum"),
)

# Roles beyond "a pure op that reads its inputs": by op name.
_SPECIAL: tuple[OpRole, ...] = (
    *(OpRole(n, first_argument="overwritten") for n in _aten("copy_", "fill_", "zero_")),
    *(OpRole(n, first_argument="indexed write", indexing=(0, 1, 2)) for n in _aten("index_copy_", "index_fill_",
                                                                                  "scatter_")),
    OpRole("aten::index_put_", first_argument="indexed write"),
    *(OpRole(n, first_argument="indexed write", accumulates=True, indexing=(0, 1, 2))
      for n in _aten("index_add_", "scatter_add_")),
    *(OpRole(n, indexing=(0, 1, 2)) for n in _aten("index_copy", "index_add", "scatter", "scatter_add")),
    *(OpRole(n, gathers=True, indexing=(0, 1, 2)) for n in _aten("index_select", "gather")),
    OpRole("aten::embedding", gathers=True, indexing=(0, None, 1)),
    *(OpRole(n, reduces=True) for n in _aten("mean", "sum", "amax", "amin", "var", "std", "norm",
                                              "linalg_vector_norm", "logsumexp")),
    *(OpRole(n, softmax=True) for n in _aten("_softmax", "softmax", "_safe_softmax")),
    *(OpRole(n, epilogue=True, wrapped_number=1e-6) for n in _with_in_place("add")),  # a norm's + eps
    *(OpRole(n, epilogue=True) for n in _with_in_place("gelu", "silu", "relu")),
    *(OpRole(n, epilogue=True) for n in _aten("sigmoid", "tanh")),
    OpRole("aten::mm", gemm=GemmOperands(0, 1), functional_inputs=2),
    OpRole("aten::addmm", gemm=GemmOperands(1, 2), functional_inputs=3),
    OpRole("aten::linear", gemm=GemmOperands(0, 1, "NK")),
    OpRole("aten::bmm", gemm=GemmOperands(0, 1, batched=True), functional_inputs=2),
    OpRole("aten::baddbmm", gemm=GemmOperands(1, 2, batched=True), functional_inputs=3),
    OpRole("aten::matmul", gemm=GemmOperands(0, 1, batched=True)),
    OpRole("aten::scaled_dot_product_attention", causal=(5, ("True", "1"))),
    OpRole("aten::_scaled_dot_product_flash_attention", causal=(4, ("True", "1"))),
    OpRole("aten::_scaled_dot_product_efficient_attention", causal=(6, ("True", "1"))),
    OpRole("aten::_scaled_dot_product_cudnn_attention", causal=(6, ("True", "1"))),
    OpRole("aten::_flash_attention_forward", causal=(8, ("True", "1"))),
    OpRole("aten::_efficient_attention_forward", causal=(9, ("1", "2"))),  # custom_mask_type 1 or 2: causal
    # views: what the op graph follows a tensor through (a leaf that launched nothing: as_strided under
    # transpose, slice and split; view under reshape)
    *(OpRole(n, view="size") for n in _aten("view", "reshape", "_unsafe_view", "_reshape_alias", "as_strided")),
    *(OpRole(n, view="same") for n in _aten("alias", "detach", "lift_fresh", "contiguous", "to", "view_as",
                                            "expand_as", "type_as")),
    *(OpRole(f"aten::{n}", view=n) for n in ("t", "transpose", "permute", "unsqueeze", "squeeze", "expand",
                                               "select", "slice", "narrow")),
)


# torch's type promotion for the out-of-place arithmetic that mixes precisions (OpRole.promotes); in-place forms and
# copies keep the destination's dtype
_PROMOTING = _aten("add", "sub", "rsub", "mul", "div", "where", "minimum", "maximum", "addcmul", "addcdiv", "lerp",
                   "pow")


def _roles() -> tuple[OpRole, ...]:
    """One role per op: the special ones (replayable where pure, promoting where listed), and a plain role for
    the other pure or promoting ops."""
    special = {r.name: r for r in _SPECIAL}
    pure, promoting = set(_PURE), set(_PROMOTING)
    out = [OpRole(**{**r.__dict__, "replayable": r.name in pure, "promotes": r.name in promoting})
           for r in special.values()]
    return (*out, *(OpRole(name, replayable=name in pure, promotes=name in promoting)
                    for name in dict.fromkeys((*_PURE, *_PROMOTING)) if name not in special))


KNOWN_FUSIONS: tuple[KnownFusion, ...] = (
    KnownFusion(r"aten::add → .*aten::pow → aten::mean → .*aten::rsqrt",
                "fuseprof add_rms_norm (kernels/add_rms_norm); Liger LigerFusedAddRMSNorm; torch.compile"),
    KnownFusion(r"aten::pow → aten::mean → .*aten::rsqrt",
                "fuseprof rmsnorm_swiglu's norm (kernels/rmsnorm_swiglu); Liger LigerRMSNorm; torch.compile"),
    KnownFusion(r"aten::silu → aten::mul|aten::sigmoid → aten::mul → aten::mul",
                "fuseprof silu_mul (kernels/silu_mul); Liger swiglu"),
    KnownFusion(r"aten::neg → aten::cat → aten::mul → aten::add", "Liger liger_rotary_pos_emb; torch.compile"),
)

KERNEL_MATCHES: tuple[KernelMatch, ...] = (
    # x and residual: the first add's two inputs; the weight: the last mul's external input; (y, h): y
    KernelMatch(r"aten::add → aten::copy_ → aten::pow → aten::mean → aten::add → aten::rsqrt → aten::mul → "
                r"aten::copy_ → aten::mul", "add_rms_norm", "fused_cuda",
                (KernelArgument("first", 0), KernelArgument("first", 1), KernelArgument("last", "input", rows=False)),
                output=0),
    # gate: silu's input; up: the mul's external input
    KernelMatch(r"aten::silu → aten::mul", "silu_mul", "fused_cuda",
                (KernelArgument("first", 0), KernelArgument("last", "input"))),
)

CHAIN_CLASSES: tuple[ChainClass, ...] = (
    # the cache write is an indexed write into the cache (a plain copy_ is a layout copy: a RoPE backward has one)
    ChainClass("RoPE + KV-cache write", all_of=_aten("neg", "cat"), any_of=_aten("index_copy_", "index_put_",
                                                                                  "index_copy", "scatter_")),
    ChainClass("sampling chain", any_of=_aten("argmax", "topk", "multinomial", "sort")),
    ChainClass("cross-entropy", all_of=_aten("_log_softmax"), any_of=_aten("nll_loss_forward", "nll_loss2d_forward"),
               fused_by="Liger LigerFusedLinearCrossEntropy (never writes the logits); torch.compile"),
    # backward chains, by the forward ops their kernels differentiate
    ChainClass("cross-entropy backward", any_of=_aten("nll_loss_nd", "nll_loss", "_log_softmax", "log_softmax",
                                                      "cross_entropy_loss"), backward=True,
               fused_by="Liger LigerFusedLinearCrossEntropy (never writes the logits); torch.compile"),
    ChainClass("RMSNorm backward", all_of=_aten("mean", "rsqrt"), backward=True,  # rsqrt of a mean: the RMS
               fused_by="Liger LigerRMSNorm; torch.compile"),
    ChainClass("RMSNorm backward", any_of=_aten("rms_norm", "_fused_rms_norm"), backward=True,
               fused_by="Liger LigerRMSNorm; torch.compile"),
    ChainClass("RoPE backward", all_of=_aten("neg"), any_of=_aten("cat", "chunk"), backward=True,
               fused_by="Liger liger_rotary_pos_emb; torch.compile"),
    ChainClass("activation backward", any_of=_aten("silu", "gelu", "relu", "tanh", "sigmoid"), backward=True,
               fused_by="Liger LigerSiLUMulFunction; torch.compile"),
)

# ATen's own CUDA kernels, seen without their op (an eager model's kernels replayed from a CUDA graph): the kernel
# function or functor each is instantiated with names the op it computes (aten/src/ATen/native/cuda: silu_kernel,
# MulFunctor, MeanOps, CatArrayBatchedCopy, index_copy_kernel_impl)
ATEN_KERNEL = r"\bat::native::"  # a kernel of ATen's own (what torch.compile replaces: Inductor lowers its op)
_NATIVE = r"at::native::(?:\(anonymous namespace\)::|\w+::)?"  # a kernel function or functor of ATen's, in a template
ATEN_KERNEL_KINDS: tuple[OpKinds, ...] = tuple(OpKinds(kernel=_NATIVE + pattern, kinds=(kind,)) for pattern, kind in (
    ("silu_kernel", "silu"), ("gelu_kernel|GeluCUDAKernelImpl", "gelu"), ("neg_kernel", "neg"),
    ("rsqrt_kernel", "rsqrt"), ("pow_tensor_\\w*kernel", "pow"), ("MeanOps<", "mean"), ("MulFunctor<", "mul"),
    ("(CUDAFunctor(OnSelf)?_add|AddFunctor)<", "add"), ("CatArrayBatchedCopy", "cat"),
    ("index_copy_kernel", "index_copy"), ("ArgMaxOps<", "argmax"), ("sigmoid_kernel", "sigmoid"),
    ("tanh_kernel", "tanh")))

# What ops and kernels compute, as the kinds the fusion patterns of the op graph read
# (fuseprof.analysis.judgements.patterns). An op's rows are all applied; a kernel's only where no row names its op.
OP_KINDS: tuple[OpKinds, ...] = (
    # an aten op computes what it is called (aten::silu_ is silu, aten::_softmax is softmax)
    OpKinds(op=r"^aten::_*(?P<name>[a-z0-9]+(?:_[a-z0-9]+)*?)_?$", named="name"),
    # an Inductor kernel (its own op in a compiled graph's trace) lists the ops it fused
    OpKinds(op=r"^triton_[a-z]+_fused_+(?P<ops>\w+?)_\d+$", listed="ops"),
    OpKinds(kernel=r"^triton_[a-z]+_fused_+(?P<ops>\w+?)_\d+$", listed="ops"),
    OpKinds(op=r"^aten::(_scaled_mm|_int_mm|_scaled_grouped_mm|_weight_int8pack_mm|_weight_int4pack_mm)$",
            kinds=("quantized gemm",)),
    OpKinds(op=r"^aten::(addmm|_addmm_activation)$", kinds=("gemm epilogue",)),  # the bias added in the GEMM
    OpKinds(op=r"^aten::_fused_(adam|adamw|sgd|adagrad)_?$", kinds=("fused optimizer",)),
    OpKinds(op=r"^aten::_foreach_\w+$", kinds=("foreach",)),
    OpKinds(op=r"^aten::(linalg_vector_norm|norm|_foreach_norm)$", kinds=("vector norm",)),  # clipping's norms
    OpKinds(op=r"^aten::_amp_(foreach_non_finite_check_and_unscale|update_scale)_$", kinds=("grad scaler",)),
    OpKinds(op=r"_backward\w*$|Backward", kinds=("backward",)),  # a gradient: no forward pattern's part
    OpKinds(op=r"^aten::(argmax|topk|multinomial)$", kinds=("sample",)),
    # ops that only wrap the kernels of compiled code (torch.compile's region and its graph call, AOTAutograd's
    # function): each kernel inside is judged by itself (fuseprof.analysis.facts.units), never the region as one op
    OpKinds(op=r"^Torch-Compiled Region|^## Call CompiledFxGraph|^CompiledFunction(Backward)?$",
            kinds=("compiled region",)),
    # engines' own ops
    OpKinds(op=r"::\w*(silu_and_mul|silu_mul|swiglu)\w*$", kinds=("silu", "mul")),
    OpKinds(op=r"::\w*gelu\w*_and_mul\w*$", kinds=("gelu", "mul")),
    OpKinds(op=r"::\w*(fused_add_rms_?norm|add_rms_?norm|rms_?norm\w*add)\w*$", kinds=("add", "rms norm")),
    OpKinds(op=r"::\w*rms_?norm\w*$|^aten::(rms_norm|_fused_rms_norm)$", kinds=("rms norm",)),
    # Composable Kernel's RMSNorm says in its mangled template whether it adds the residual first
    # (ck_tile's Rmsnorm2dFusedAddEnum: 0 NO_ADD, 1 PRE_ADD_STORE, 2 PRE_ADD): a graph replay's aiter norm, no op
    OpKinds(kernel=r"Rmsnorm2dFusedAddEnumE[12]", kinds=("add", "rms norm")),
    OpKinds(op=r"::\w*(rotary|rope)\w*$", kinds=("rotary",)),
    OpKinds(op=r"::\w*(store_cache|store_kvcache|reshape_and_cache|concat_and_cache)\w*$", kinds=("cache write",)),
    OpKinds(op=r"::\w*(sampling|top_?k_?top_?p|sampler)\w*$", kinds=("fused sampling",)),
    # kernels whose op is not in the trace, or names no row: the mined families', then the generic words
    *_MINED_KINDS,
    OpKinds(kernel=r"silu_and_mul|act_and_mul|swiglu|silu_mul", kinds=("silu", "mul")),
    OpKinds(kernel=r"rotary", kinds=("rotary",)),
    OpKinds(kernel=r"store_kvcache|reshape_and_cache|concat_and_cache", kinds=("cache write",)),
    OpKinds(kernel=r"sampling_from|top_?k_?top_?p|sample_kernel", kinds=("fused sampling",)),
    OpKinds(kernel=_QUANTIZED_GEMM, kinds=("quantized gemm",)),
    OpKinds(kernel=r"multi_tensor_apply_kernel\w*(Fused|fused)(Adam|SGD)|fused_adam|FusedAdam",
            kinds=("fused optimizer",)),
    # the loss over the logits in one kernel: Liger's (its fused linear cross-entropy's too)
    OpKinds(kernel=r"liger_cross_entropy|fused_linear_cross_entropy",
            kinds=("fused cross entropy",)),
    *ATEN_KERNEL_KINDS,
)
KIND_RULES: tuple[KindRule, ...] = (
    # clamp_min: what aten::relu runs as (its kernel's op in older traces: relu → clamp_min)
    KindRule("activation", any_of=("silu", "gelu", "relu", "tanh", "sigmoid", "hardswish", "mish", "elu",
                                   "leaky_relu", "quick_gelu", "erf", "clamp_min")),
    KindRule("rms norm", all_of=("pow", "mean", "rsqrt")),  # a compiler's fused form of the decomposed norm
    KindRule("sample", any_of=("argmax", "topk", "multinomial")),
)

CATALOGUE: tuple[CatalogueEntry, ...] = (
    CatalogueEntry("add + RMSNorm", "add_rmsnorm"),
    CatalogueEntry("SiLU · mul", "silu_mul"),
    CatalogueEntry("QKV projection", "qkv"),
    CatalogueEntry("gate / up projection", "gate_up"),
    CatalogueEntry("GEMM + bias + activation epilogue", "epilogue",
                   fused=r"gemm\w*(gelu|relu)|_addmm_activation|_swiglu"),
    CatalogueEntry("RoPE + KV-cache write", "rope_cache"),
    CatalogueEntry("flash attention", "attention"),
    CatalogueEntry("dequant + GEMM", "dequant_gemm"),
    CatalogueEntry("sampling", "sampling"),
    CatalogueEntry("optimizer step", "optimizer", region=r"^Optimizer\.step#"),
    CatalogueEntry("gradient clipping", "clip", region=r"^Optimizer\.step#"),
    CatalogueEntry("zero-grad", "zero_grad", region=r"^Optimizer\.zero_grad#"),
    CatalogueEntry("grad scaler", "grad_scaler"),
    CatalogueEntry("linear cross-entropy", "linear_ce"),
    CatalogueEntry("cross-entropy", "cross_entropy"),
)
# What the host's calls and ranges mean while the GPU is idle (fuseprof.analysis.facts.idle), in priority order
HOST_CAUSES: tuple[HostCause, ...] = (
    HostCause("data loading", ranges=r"^enumerate\(DataLoader\)|DataLoader\w*Iter|^DataLoader\.__next__"),
    # one-time: context and handle creation, device queries, module and library loading (any call of a second or
    # more that does not wait for the GPU is start-up too, a cudaFree(0) or a first launch: fuseprof.analysis.facts.idle)
    HostCause("start-up", calls=r"^(?:cu|hip)(?:Init|ModuleLoad\w*|LibraryLoad\w*|DevicePrimaryCtx\w*|CtxCreate\w*)$"
                                r"|^(?:cuda|hip)(?:GetDeviceCount|DriverGetVersion|RuntimeGetVersion|GetDeviceProperties"
                                r"\w*|StreamCreate\w*|DeviceGetStreamPriorityRange)$"),
    # what .item() and .cpu() do: a blocking copy, or a synchronisation
    HostCause("sync", calls=r"Synchronize|^(?:cuda|hip)Memcpy(?:WithStream)?$|^cuMemcpy[DH]to[DH](?:_v2)?$"),
    HostCause("allocator", calls=r"^(?:cuda|hip)(?:Malloc|Free)\w*$|^cuMem(?:Alloc|Free)\w*$"),
    HostCause("event wait", calls=r"StreamWaitEvent"),
)
# Which call a sync was (fuseprof.analysis.facts.idle's idle_sync_<call>_ns; item and copy are read-backs, what a CUDA
# graph cannot hold): the op around it, or the runtime call itself for a copy
SYNC_OPS = {"item": r"^aten::(?:item|_local_scalar_dense)$",
            "copy": r"^aten::(?:copy_|to|_to_copy|cpu|tolist|nonzero|masked_select|unique\w*|repeat_interleave)$"
                    r"|Memcpy(?!Async)|^cuMemcpy"}
# The phases of a training step that autograd does not record (fuseprof.analysis.facts.phases)
PHASE_RANGES: tuple[PhaseRange, ...] = (
    PhaseRange("optimizer", r"^Optimizer\.(step|zero_grad)#"),  # torch.optim's own ranges, per optimizer class
)
# The ranges that mark one iteration of a loop (fuseprof.analysis.facts.iterations), first match wins: torch.profiler's
# steps; SGLang's scheduler writes step[DECODE bs=32] / step[EXTEND bs=1 toks=128] around each batch it runs
# (sglang/srt/managers/scheduler.py); vLLM's model runner execute_<n>_context_<n>(…)_generation_<n>(…)
# (vllm/v1/worker/gpu_model_runner.py, record_function around execute_model)
ITERATION_RANGES: tuple[IterationRange, ...] = (
    IterationRange("torch.profiler", r"^ProfilerStep#\d+$", default=True),
    IterationRange("SGLang", r"^step\[[A-Z_]+ bs=\d+"),
    IterationRange("vLLM", r"^execute_\d+_context_\d+\(.*\)_generation_\d+\("),
)
# What one step of each torch.optim optimizer moves per parameter element (fuseprof.analysis.judgements.optimizer):
# state tensors per parameter, from torch.optim's docs (Adam/AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer)
OPTIMIZERS: tuple[OptimizerModel, ...] = (
    OptimizerModel(r"#(AdamW|Adam)\.step$", states=2, fused="torch.optim fused=True (_fused_adamw_ / _fused_adam_)"),
    OptimizerModel(r"#(NAdam|RAdam|Adamax)\.step$", states=2, fused="torch.compile of the step"),
    OptimizerModel(r"#(SGD)\.step$", states=1, fused="torch.optim.SGD(fused=True) (_fused_sgd_)"),
    OptimizerModel(r"#(Adagrad|RMSprop|Lion)\.step$", states=1, fused="torch.compile of the step"),
)
DEFAULT = Registry(families=FAMILIES, roles=_roles(), catalogue=CATALOGUE, known_fusions=KNOWN_FUSIONS,
                   kernel_matches=KERNEL_MATCHES, chain_classes=CHAIN_CLASSES, op_kinds=OP_KINDS, kind_rules=KIND_RULES,
                   host_causes=HOST_CAUSES, phase_ranges=PHASE_RANGES, optimizers=OPTIMIZERS,
                   iteration_ranges=ITERATION_RANGES)

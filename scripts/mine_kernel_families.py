"""Mine kernel names from the sources of the libraries whose kernels fill real traces, and write the registry's
kernel families: ``fuseprof/model/kernel_families.json``.

    python scripts/mine_kernel_families.py OWNER/NAME=GIT_DIR [...] [--wheel PACKAGE==VERSION=WHEEL ...]
        [--torch DIR] [--keep fuseprof/model/kernel_families.json] [--out PATH]

Each argument names a library's repository and a snapshot of it: a bare git directory (read at its HEAD, with
``git ls-tree`` and ``git show``; no network). From each, the kernels its sources define are read —

    CUDA / HIP   ``__global__`` (and ``CUTLASS_GLOBAL``) functions, ``__launch_bounds__`` skipped, qualified by
                 their namespaces as a trace's names are
    Triton       functions under ``@triton.jit`` (and ``@triton.autotune`` / ``@triton.heuristics`` stacks)
    CuTe DSL     classes holding a ``@cute.kernel`` method (a CuTe kernel's trace name holds its class's name)
    CK tile      ``struct ...Kernel`` templates (a kernel's trace name is ``ck_tile::kentry<..., ck_tile::NAME<...>>``)
    multi-tensor ``struct ...Functor`` in apex's ``multi_tensor_*`` sources (the kernel is
                 ``multi_tensor_apply_kernel<..., AdamFunctor<...>>``)
    NCCL         ``ncclDevKernel_<coll>_<algo>_<proto>``, built from the lists ``src/device/generate.py`` reads
    generated    (``GREPPED``, read with ``git grep``) Tensile's solution names in hipBLASLt's library logic
                 (``KernelNameMin: Cijk_Ailk_Bljk_…``) and its custom kernels, MIOpen's assembly (``.amdhsa_kernel
                 igemm_fwd_gtcx3_…``) and OpenCL (``__kernel void MIOpenBatchNorm…``) kernels, aiter's prebuilt asm
                 kernels as its ``hsa/*.csv`` lists them (``_ZN5aiter…fmoe_…E``, the name a trace shows); thousands a
                 library, so up to 40 per family kept (spread over the sorted list) with the count found

``--keep`` carries over the sources of an earlier data file (the committed one) that this run does not read — a
snapshot or a wheel not at hand here — with their commits, counts and names, each name given to the family the
current patterns give it: the tables regenerate offline from the snapshots at hand. With ``--keep`` alone the
committed file is rewritten unchanged (a test checks it).

Closed libraries are read from their vendor wheels (``--wheel nvidia-cublas-cu12==12.9.3.13=...whl``,
``nvidia-cudnn-cu12``): the kernel names their shared libraries hold as whole strings (``sm90_xmma_gemm_…``,
``cutlass3x_…``, cuDNN's ``…fprop/dgrad/wgrad…implicit_gemm…``), up to 40 per family kept (spread over the sorted
list) with the count found. Libraries too large to snapshot here (vLLM, SGLang) give ``INDEXED``: names read from
one file each, at the commit recorded with it.

— and each name is given to the family whose pattern it matches (``FAMILIES`` below: name pattern → what the kernel
computes, its category, the kinds the audit's patterns read, the catalogue entries it does). A name two families
match is an error (the patterns are made exclusive, so a family's test names say what its pattern takes); names no
family matches are counted per library and left out. ``TRACE_NAMES`` are names seen only in traces (closed
libraries — cuDNN's engines, cuBLAS — and the traces issue 60 quotes), kept apart with where they were seen.

The output is data, never code: ``fuseprof.model.kernel_families`` loads it and checks its rows with
``fuseprof.model.registry_schema``; ``tests/test_kernel_families.py`` checks each family's names against its pattern.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fuseprof" / "model" / "kernel_families.json"
SOURCE_SUFFIXES = (".cu", ".cuh", ".hip", ".h", ".hpp", ".cpp", ".py")
MAX_FILE_BYTES = 2 << 20  # generated tables and vendored blobs are not kernel sources


@dataclass(frozen=True)
class Family:
    """A kernel family: names matching ``kernel`` and not ``unless`` (searched case-insensitively) are ``category``
    (the registry's) and compute ``kinds``; ``computes`` says what in a word (attention, norm, gemm, moe,
    communication, quant, rope, activation, optimizer, cache), ``catalogue`` the audit entries it does, ``what`` in
    a line."""

    name: str
    kernel: str
    category: str
    computes: str
    what: str
    kinds: tuple[str, ...] = ()
    catalogue: tuple[str, ...] = ()
    unless: str = ""

    @property
    def pattern(self) -> str:
        """The registry's regex: ``kernel`` where nothing of ``unless`` is in the name."""
        return rf"^(?!.*(?:{self.unless})).*?(?:{self.kernel})" if self.unless else self.kernel


# Made exclusive: a mined name matching two families' patterns stops the script.
_COMM = r"all_?reduce|allgather|all_?to_?all|lamport|mnnvl"
_MOE_BOOKKEEPING = r"moe_?(?:align|sort|sum|fused_gate|topk|finalize|routing|permute|unpermute)|moe::dev|moesorting|" \
                   r"moetopk|topk_?(?:gating|softmax)|hash_topk|expert_?(?:count|map|offsets)|fused_router|aux_loss|" \
                   r"_combined_routing|_sum_bitmatrix|_routing_(?:compute|sigmoid|memset)|_expt_data|routing_from_topk|" \
                   r"_finalize_matmul|^_topk_forward|expandinputrows|expertprefixsum|computestridestma|" \
                   r"moe_kernel_topk|deepseek_v3_topk|deepseek_routing|moeoutputmemset|_pack_topk_routes|" \
                   r"_route_(?:count|prefix)|compact_topk_ids"
_GEMM = r"(?<!fb)(?<!deep_)gemm"  # a GEMM's name, not a library's (fbgemm_gpu::, deep_gemm:: name every kernel)
_ROPE_KV = r"rope\w*(?:and_cache|kv_?cache|quant_?cache|cache_?(?:mla|shuffle)|append_paged|_kv_?(?:write|store))|" \
           r"rope_cache_kernel|rope\w*swa_write|" \
           r"fused_rope_store|qk_?rope\w*(?:reshape|concat|store)|rotary\w*kv_?cache"
# Tensile's solution naming (hipBLASLt, rocBLAS): "Cijk_" + A's and B's index orders + types and options,
# a custom kernel's name prefixed ("CustomGSUs_Cijk_…")
_TENSILE = r"^(?:Custom\w*?_)?Cijk_A[a-z]+_B[a-z]+_"
_CONV = r"(?:fprop|dgrad|wgrad)\w*implicit_?gemm|implicit_?gemm\w*(?:fprop|dgrad|wgrad)|xmma_(?:fprop|dgrad|wgrad)|" \
        r"depthwise_convolution|^igemm_(?:fwd|bwd|wrw|v\d)|miopen\w*conv|naive_conv|grouped_conv|conv_?(?:fwd|bwd)|" \
        r"conv\w*(?:fwd|bwd|wrw)_|winograd|sp3asmconv|^conv1x1|^conv3x3|gridwise_convolution|im2col|col2im|" \
        r"convolution_?(?:forward|backward)|conv[123]d"
# aiter's prebuilt attention kernels: MLA decode (mla_a8w8_…, mla_a16w16_…) and paged attention (pa_bf16_…)
_ATTN_ASM = r"(?<![a-z])mla_a\d+w\d+|(?<![a-z])pa_(?:bf16|fp16|fp8)_|(?<![a-z])mla_(?:dec|pfl)_|(?<![a-z])pa_a\d+w\d+_"
_QK_NORM_ROPE = r"qk_?norm_?rope"
_RECURRENT = r"selective_?state_?update|selective_?scan|(?<![a-z])ssd_?kernel|gated_?delta|delta_?rule|(?<![a-z])gdn_|" \
             r"(?:^|_)kda_|flashkda|chunk_?gated|fused_?recurrent|recurrent_?kda|lightning_?attn|" \
             r"(?:^|_)chunk_?(?:scan|state)_|state_?passing|checkpointing_ssu|gateddeltanet|gdndecode"
FAMILIES: tuple[Family, ...] = (
    Family("DeepEP expert-parallel dispatch/combine", r"deep_ep::|dpsk::ep::", "communication", "communication",
           "DeepEP's all-to-all: tokens dispatched to their experts' ranks and combined back (NVLink/RDMA, NVSHMEM)"),
    Family("NCCL/RCCL collectives", r"^nccl(Dev)?Kernel_", "communication", "communication",
           "a collective (all-reduce, all-gather, reduce-scatter, send/recv) of NCCL or RCCL"),
    Family("all-reduce fused with residual add + RMSNorm",
           r"all_?reduce\w*rms_?norm|rms_?norm\w*all_?reduce|lamport\w*rms_?norm|all_?reduce_?fusion|rms_?norm_?lamport|"
           r"all_?reduce_?norm",
           "communication", "communication",
           "a tensor-parallel all-reduce that also adds the residual and applies RMSNorm (TRT-LLM/FlashInfer fusion)",
           ("add", "rms norm"), ("add + RMSNorm",)),
    Family("engines' own collectives",
           r"cross_device_reduce|(one|two)_?shot_?all_?reduce|custom_?all_?reduce|quick_?reduce|"
           r"all_?reduce_?kernel|allreduce\w*(oneshot|twoshot|lamport)|multimem_all|all_?gather_?(?:kernel|impl|vec|"
           r"lastdim)|reduce_?scatter_?(?:kernel|impl|split)|ipc_\w*push|push_oneshot|moe_?all_?to_?all|alltoall::|"
           r"all_?to_?all_?kernel|_a2a_kernel|moea2a",
           "communication", "communication",
           "an engine's own all-reduce, all-gather, reduce-scatter or all-to-all over peer memory "
           "(vLLM/SGLang/aiter/TRT-LLM/FlashInfer)", unless=r"rms_?norm|all_?reduce_?fusion|all_?reduce_?norm"),
    Family("fused RoPE + KV-cache write", _ROPE_KV, "elementwise", "rope",
           "rotary embedding of q and k, with k (and v) written into the paged KV cache in the same kernel",
           ("rotary", "cache write"), ("RoPE + KV-cache write",), unless=r"cos_?sin_?cache"),
    Family("fused residual add + RMSNorm",
           r"fused_?add_?rms_?norm|add_?rms_?norm|rms_?norm_?add|residual_?rms_?norm", "normalization", "norm",
           "residual add and RMSNorm in one kernel (the sum kept as the next residual), optionally quantising its "
           "output", ("add", "rms norm"), ("add + RMSNorm",), unless=_COMM + "|rope|rotary"),
    Family("flash-attn fused dropout + add + LayerNorm/RMSNorm", r"layer_norm::ln_fwd", "normalization", "norm",
           "flash-attention's DropoutAddLayerNorm: dropout, residual add and LayerNorm or RMSNorm (is_rms_norm) in "
           "one kernel", ("add", "rms norm"), ("add + RMSNorm",)),
    Family("RMSNorm", r"rms_?norm", "normalization", "norm", "RMSNorm alone (q/k norms, gated and quantising variants)",
           ("rms norm",), unless=_COMM + r"|add_?rms_?norm|rms_?norm_?add|residual_?rms|rope|rotary"),
    Family("LayerNorm", r"layer_?norm|ln_(?:fwd|bwd)|ln_parallel", "normalization", "norm",
           "LayerNorm (its backward too), with or without a residual add", unless=r"layer_norm::ln_fwd|rms_?norm"),
    Family("flash / fused attention",
           r"flash_?attn|flash_fwd|flash_bwd|flashattn|compute_attn|fmha|mha_(?:fwd|bwd)|paged_?attention|"
           r"batch_?(?:prefill|decode)|single_?(?:prefill|decode)|_attn_(?:fwd|bwd)|attention_?kernel|sdpa|"
           r"mla_?(?:decode|prefill|fwd)|merge_?state|persistent_?attention|multi_?head_?attention|latent_?attention|"
           r"query_?attention|compressed_?attention|unified_attention|^reduce_segments|paged_?attn|pa_decode|"
           r"prefill_?with_?kv_?cache|attention_?(?:sum|forward|backward)|flash_?attention|sparse_?attn|sage_fwd|"
           r"mla_softmax|^attn_fwd|^_attention_inner|^_bwd_(?:kernel|preprocess|dkdv|dq)|_fwd_kernel_(?:alibi|stage)|"
           r"compute_?lse|" + _ATTN_ASM + r"|(?:fwd|bwd)_?attention|^kernel_mha|pod_?with_?kv_?cache|mla\w*page_?attention|"
           r"^state_merge$",
           "attention", "attention",
           "attention in one kernel (flash/paged, prefill or decode, its split-KV merge): QKᵀ, softmax and ·V never "
           "written out", ("flash attention",), ("flash attention",), unless=r"rope|rotary|cache_?write"),
    Family("linear attention / state-space recurrence", _RECURRENT, "attention", "attention",
           "a token mixer by recurrence instead of softmax attention: gated delta-net / KDA linear attention (chunked "
           "prefill, recurrent decode) or a Mamba selective state update / SSD scan; its state, not a KV cache, carries "
           "the past"),
    Family("MoE routing, sorting and finalize", _MOE_BOOKKEEPING, "MoE", "moe",
           "a MoE layer's bookkeeping: routing scores' top-k, tokens sorted by expert, the experts' outputs "
           "gathered back and weighted", ("moe",), unless=_COMM),
    Family("MoE expert GEMMs",
           r"fused_?moe|moe_?gemm|moegemm|fmoe|moe_?stage|grouped_?gemm|grouped_?mm|cutlass_?moe|moe_?mm|mega_?moe|"
           r"matmul_ogs",
           "GEMM", "moe", "the experts' GEMMs of a MoE layer (grouped or fused over experts, an activation "
           "sometimes in their epilogue)", ("moe",), unless=_MOE_BOOKKEEPING + "|" + _COMM + "|conv"),
    Family("sampling", r"sampling|sample_kernel|greedy_sample|random_sample|mix_sample|renorm_?(?:prob|write)|"
           r"topk_?mask_?logits|top_?p_?(?:renorm|sampling)", "reduction", "sampling",
           "the next token drawn from the logits in one kernel (top-k, top-p, min-p, temperature, greedy)",
           ("fused sampling",), ("sampling",)),
    Family("dense GEMMs", _GEMM + r"|gemv|wv_?splitk|matmul|(?<![a-z])_?mm_|llgemm", "GEMM", "gemm",
           "a matrix product of the activations by one weight (dense; bf16, fp8, int8, fp4, with its dequantising "
           "scales and, some, an epilogue)", unless=_MOE_BOOKKEEPING + "|" + _COMM + r"|fused_?moe|moe_?gemm|moegemm|"
           r"fmoe|moe_?stage|grouped_?gemm|grouped_?mm|cutlass_?moe|moe_?mm|mega_?moe|matmul_ogs|attn|attention|fmha|flash|"
           r"rms_?norm|"
           r"layer_?norm|rope|rotary|act_and_mul|swiglu|silu_mul|sampl|mqa_logits|conv|implicit_?gemm|igemm|fprop|dgrad|"
           r"wgrad|winograd"),
    Family("gated activation (SiLU/GELU · mul)",
           r"act_and_mul|silu_and_mul|gelu_and_mul|gelu_tanh_and_mul|swiglu|geglu|silu_mul|gelu_mul|dogatedactivation",
           "elementwise", "activation",
           "a gated activation: act(gate) · up in one kernel, reading gate and up from one tensor of twice the "
           "width (the gate / up GEMM's merged output)", ("silu", "mul", "gated activation"),
           ("SiLU · mul", "gate / up projection"), unless=_GEMM + r"|grouped|moe|_mm\b|matmul"),
    Family("fused q/k RMSNorm + RoPE", _QK_NORM_ROPE, "elementwise", "rope",
           "per-head RMSNorm of q and k and their rotary embedding in one kernel (Qwen3-style q/k norms), the KV cache "
           "not written", ("rms norm", "rotary"), unless=_ROPE_KV),
    Family("rotary embedding (RoPE)", r"rotary|rope(?![nr])", "elementwise", "rope",
           "rotary position embedding of q and k, alone", ("rotary",),
           unless=_ROPE_KV + r"|rms_?norm|attn|attention|fmha|" + _QK_NORM_ROPE),
    Family("KV-cache write", r"store_?kv_?cache|reshape_and_cache|(?:con)?cat_and_cache|append_?paged_?kv_?cache|"
           r"kv_?cache_?(?:write|store|append)", "copy/cast", "cache", "k and v written into the paged KV cache",
           ("cache write",), unless=r"rope|rotary"),
    Family("fused optimizer step (multi-tensor)",
           r"(?:adam|lamb|sgd|novograd|adagrad|lion)\w*functor|multi_tensor_(?:adam|lamb|sgd|novograd|adagrad)|"
           r"fused_?adam|_fused_(?:adam|sgd)|adamw?contiguous|adamupdatestep", "elementwise", "optimizer",
           "an optimizer's whole update (moments, bias correction, weight decay, step) over a chunk of many "
           "tensors in one kernel", ("fused optimizer",), ("optimizer step",)),
    Family("quantisation", r"quantize|quant_|_quant|cast_to_fp8|to_fp8|fp8_cast|per_token_cast|per_channel_cast|"
           r"scaled_fp8|dequant", "elementwise", "quant",
           "a tensor quantised to (or dequantised from) int8 / fp8 / fp4 with its scales, apart from any GEMM",
           ("quantize",), unless=r"rms_?norm|layer_?norm|rope|rotary|act_and_mul|silu_mul|swiglu|" + _GEMM + r"|_mm\b|matmul|moe|cache|"
           r"attn|attention|fmha|" + _ATTN_ASM + "|" + _COMM),
    Family("convolution (implicit GEMM)", _CONV, "convolution", "convolution",
           "a convolution's forward (fprop) or its gradients (dgrad/bwd, wgrad/wrw) as an implicit GEMM over the "
           "image, or a direct or Winograd one (cuDNN's engines, MIOpen's igemm/Winograd/direct kernels, CK's "
           "grouped convolutions)", unless=r"batch_?norm|transpose"),
    Family("hipBLASLt / Tensile GEMM", _TENSILE, "GEMM", "gemm",
           "a GEMM of hipBLASLt's (or rocBLAS's) Tensile library: its name is the solution's, C = A·B with the "
           "layouts (Ailk/Alik, Bljk/Bjlk), data types, tile (MT…), and epilogue (Bias, activation HA…) it was "
           "generated with"),
    Family("BatchNorm", r"batch_?norm|MIOpenBatchNorm|bn_?(?:fwd|bwd)_|gcnasmbn", "normalization", "norm",
           "batch normalisation (its statistics, the normalised output, its backward), alone or with an "
           "activation"),
    Family("MIOpen tensor ops", r"^SubTensorOpWith|^Op[1-5]dTensor|^OpTensor", "elementwise", "elementwise",
           "MIOpen's element-wise tensor operations (a sub-tensor set/scale/copy/cast, op(A, B) with "
           "broadcasting)"),
    Family("layout transform (transpose)", r"batched_transpose_|transpose_(?:NCHW2CNHW|CNHW2NCHW)|"
           r"^transpose_?(?:nchw|nhwc|cnhw)|nchw_?to_?nhwc|nhwc_?to_?nchw", "copy/cast", "copy",
           "a tensor's layout changed (NCHW ↔ NHWC, a batched transpose) before or after a convolution or GEMM: "
           "bytes moved, no math"),
    Family("Inductor foreach kernel", r"^triton_for_", "elementwise", "elementwise",
           "torch.compile's horizontal fusion: one pointwise update over a list of tensors (a compiled foreach "
           "optimizer step, a list's copies); the ops it fused are in its name"),
    Family("Inductor split scan", r"^triton_spl_", "reduction", "scan",
           "torch.compile's scan (cumsum, cumprod) split over blocks of the scanned dimension"),
    Family("serving engine's batch bookkeeping",
           r"future_token_ids|clamp_position|compute_position_kernel|create_\w*kv_indices", "other", "bookkeeping",
           "a serving engine's per-step index work: positions, the KV-cache page indices an attention kernel "
           "reads, overlapped-schedule token ids (no model math)"),
)

# Names seen only in traces: closed libraries, and the traces issue 60 names (their families must take them).
TRACE_NAMES: tuple[tuple[str, str, str], ...] = (
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x128_1x4x1_cga1x1x1_kernel0_0",
     "flash / fused attention", "../shared/thirdparty-traces/h200-turn4/decode_compiled_ro.json.gz (cuDNN SDPA)"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_4x1x1_kernel0_0",
     "flash / fused attention", "cuDNN 9 SDPA backward (engine names: closed library)"),
    ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128HVPerCtaQTileSize64PagedKvDenseP64VarSeqQ8Kv128StaticSwapsAbForGen",
     "flash / fused attention", "issue 60: SGLang decode on B300 (TRT-LLM-gen FMHA cubin via FlashInfer)"),
    ("void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16>",
     "flash / fused attention", "../shared/thirdparty-traces/sglang_Qwen3-8B_decode.json.gz (MI300X)"),
    ("_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefill",
     "flash / fused attention", "../shared/thirdparty-traces/sglang_qwen3_8b_prefilldecode.json.gz (MI300X)"),
    ("void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>>",
     "flash / fused attention", "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("kernel_cutlass_kernel_flashinfernormkernelsfused_add_rmsnormFusedAddRMSNormKernel_object_at_0x7f",
     "fused residual add + RMSNorm", "issue 60: SGLang decode on B300 (FlashInfer CuTe DSL norm)"),
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
     "fused residual add + RMSNorm", "../shared/thirdparty-traces/sglang_Qwen3-8B_decode.json.gz (MI300X)"),
    ("void layer_norm::ln_fwd_kernel<layer_norm::Kernel_traits<__nv_bfloat16, __nv_bfloat16, 7168u>>",
     "flash-attn fused dropout + add + LayerNorm/RMSNorm",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("kernel_unified_attention_3d", "flash / fused attention",
     "../shared/thirdparty-traces/vllm_decode_full_graph_execution.json.gz (vLLM's Triton unified attention)"),
    ("reduce_segments", "flash / fused attention",
     "../shared/thirdparty-traces/vllm_decode_full_graph_execution.json.gz (its split-KV segments' reduction)"),
    ("fused_rope_store_kernel", "fused RoPE + KV-cache write", "issue 60: SGLang decode on B300"),
    ("_fused_qk_rope_reshape_and_cache_kernel", "fused RoPE + KV-cache write",
     "issue 60: SGLang decode on MI300X (aiter Triton)"),
    ("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>",
     "DeepEP expert-parallel dispatch/combine",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>", "DeepEP expert-parallel dispatch/combine",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("void moe::dev::routing::routingRenormalize::routingIndicesClusterKernel<KernelParams>",
     "MoE routing, sorting and finalize", "issue 60: SGLang MoE decode on B300 (TRT-LLM-gen MoE)"),
    ("_combined_routing_compute", "MoE routing, sorting and finalize",
     "../shared/thirdparty-traces/vllm_decode_full_graph_execution.json.gz (triton_kernels' routing, gpt-oss MoE)"),
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "MoE expert GEMMs",
     "../shared/thirdparty-traces/vllm_decode_full_graph_execution.json.gz (triton_kernels' expert GEMM)"),
    ("void moe::dev::finalize::finalizeKernelVecLoad<KernelParams>", "MoE routing, sorting and finalize",
     "issue 60: SGLang MoE decode on B300 (TRT-LLM-gen MoE)"),
    ("_ZN7ck_tile6kentryILi1ENS_16MoeSortingKernelINS_17MoeSortingProblemEx", "MoE routing, sorting and finalize",
     "issue 60: Qwen3-30B-A3B MoE decode on MI300X (CK tile)"),
    ("_ZN7ck_tile6kentryILi1ENS_18FusedMoeGemmKernelINS_22FusedMoeGemmPipeline", "MoE expert GEMMs",
     "issue 60: Qwen3-30B-A3B MoE decode on MI300X (CK tile)"),
    ("void cutlass::device_kernel<dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel>", "MoE expert GEMMs",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
     "gated activation (SiLU/GELU · mul)", "../shared/thirdparty-traces/sglang_Qwen3-8B_decode.json.gz (MI300X)"),
    ("void cuda::swiglu_forward_with_weight_and_per_token_cast_to_fp8_with_channels_impl<__nv_bfloat16, true>",
     "gated activation (SiLU/GELU · mul)",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>", "quantisation",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)",
     "KV-cache write", "../shared/thirdparty-traces/sglang_Qwen3-8B_decode.json.gz (MI300X)"),
    ("void fbgemm_gpu::quantize_fp8_row_kernel<float>", "quantisation", "FBGEMM's fp8 row quantisation (its name "
     "says fbgemm, which the generic GEMM words took)"),
    ("rotary_kernel", "rotary embedding (RoPE)",
     "../shared/thirdparty-traces/fresh4/deepseek_v3_train_ep64_h800_rank0.json.gz"),
    ("compute_position_kernel", "serving engine's batch bookkeeping",
     "../shared/thirdparty-traces/sglang_qwen3_8b_prefilldecode.json.gz (SGLang's Triton positions of an extend "
     "batch, model_executor/forward_batch_info.py)"),
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float>",
     "fused optimizer step (multi-tensor)",
     "../shared/thirdparty-traces/fresh4/hta_torchrec_a100_rank0_of16_graphs_triton.json.gz (apex FusedAdam)"),
)

# Kernels of libraries too large to snapshot here (vLLM, SGLang, TensorRT-LLM): each name as its file defines it, the file read
# whole at the commit given (``__global__`` functions and ``@triton.jit`` ones, as ``mine`` reads them).
INDEXED: tuple[tuple[str, str, str, str], ...] = (
    ("vllm::rms_norm_kernel", "vllm-project/vllm", "0112cf233e0c60674c2844a09695ddeb2b901dc0",
     "csrc/layernorm_kernels.cu"),
    ("vllm::fused_add_rms_norm_kernel", "vllm-project/vllm", "0112cf233e0c60674c2844a09695ddeb2b901dc0",
     "csrc/layernorm_kernels.cu"),
    ("resolve_future_token_ids_kernel", "sgl-project/sglang", "5d7264af44bd00f642fb047dc3ef29c446f909d7",
     "python/sglang/jit_kernel/csrc/elementwise/resolve_future_token_ids.cuh"),
    ("resolve_future_token_ids_int32_vec4_kernel", "sgl-project/sglang", "5d7264af44bd00f642fb047dc3ef29c446f909d7",
     "python/sglang/jit_kernel/csrc/elementwise/resolve_future_token_ids.cuh"),
    ("clamp_position_kernel", "sgl-project/sglang", "369fa46b1151bb3e8b73ddd17fee059fad72dd2f",
     "python/sglang/jit_kernel/csrc/elementwise/clamp_position.cuh"),
    ("create_flashinfer_kv_indices_triton", "sgl-project/sglang", "03ca015ebcd791d10c7396296f84f2999c06321d",
     "python/sglang/srt/layers/attention/utils.py"),
    ("create_flashmla_kv_indices_triton", "sgl-project/sglang", "03ca015ebcd791d10c7396296f84f2999c06321d",
     "python/sglang/srt/layers/attention/utils.py"),
    ("tensorrt_llm::kernels::fusedQKNormRopeKernel", "NVIDIA/TensorRT-LLM", "567239fcd40bda119965a3a8abf43856c63c9527",
     "cpp/tensorrt_llm/kernels/fusedQKNormRopeKernel.cu"),
    ("moe::dev::routing::routingRenormalize::routingIndicesClusterKernel", "NVIDIA/TensorRT-LLM",
     "cff5a04097f8add42c740b386db6ad4b5e5fdea1",
     "cpp/tensorrt_llm/kernels/trtllmGenKernels/blockScaleMoe/routingRenormalize/launchClusterKernel.cu"),
)

# Where each library keeps its kernels (path prefixes; every file under them with a source suffix is read).
WHERE: dict[str, tuple[str, ...]] = {
    "flashinfer-ai/flashinfer": ("include/flashinfer/", "csrc/", "flashinfer/"),
    "ROCm/aiter": ("csrc/", "aiter/ops/triton/"),
    "ROCm/composable_kernel": ("include/ck_tile/ops/",),
    "deepseek-ai/DeepEP": ("csrc/kernels/",),
    "deepseek-ai/DeepGEMM": ("deep_gemm/include/", "csrc/"),
    "deepseek-ai/FlashMLA": ("csrc/",),
    "Dao-AILab/flash-attention": ("csrc/flash_attn/", "csrc/layer_norm/", "hopper/", "flash_attn/"),
    "linkedin/Liger-Kernel": ("src/liger_kernel/ops/",),
    "NVIDIA/apex": ("csrc/", "apex/contrib/csrc/"),
    "NVIDIA/TransformerEngine": ("transformer_engine/common/", "transformer_engine/pytorch/triton/"),
    "pytorch/ao": ("torchao/",),
    "pytorch/FBGEMM": ("fbgemm_gpu/src/", "fbgemm_gpu/experimental/gemm/", "fbgemm_gpu/fbgemm_gpu/triton/"),
    "NVIDIA/nccl": ("src/device/generate.py",),
    "ROCm/hipBLASLt": ("library/src/amd_detail/rocblaslt/src/kernels/",),
    "ROCm/MIOpen": ("src/kernels/",),
}
WHERE.update({  # whole kernel trees (tests and benchmarks left out by ``mine``)
    "ROCm/aiter": ("csrc/", "aiter/"),
    "ROCm/composable_kernel": ("include/ck_tile/", "include/ck/"),
    "deepseek-ai/DeepEP": ("csrc/", "deep_ep/"),
})

# Generated and assembly kernels, too many files to show one by one: read with ``git grep`` (path prefix, the
# line that names a kernel). Tensile writes each solution's kernel name into the library logic it generates
# (``KernelNameMin``); an assembly kernel names itself in ``.amdhsa_kernel``; aiter lists its prebuilt asm kernels
# (``hsa/<gfx>/…/*.csv``, column ``knl_name``: the mangled name a trace shows); OpenCL kernels are ``__kernel void``.
GREPPED: dict[str, tuple[tuple[str, str], ...]] = {
    "ROCm/hipBLASLt": (("library/src/amd_detail/rocblaslt/src/Tensile/Logic/", r"KernelNameMin: (\w+)"),
                       ("tensilelite/Tensile/CustomKernels/", r"^\.amdhsa_kernel\s+(\w+)")),
    "ROCm/MIOpen": (("src/kernels/", r"^\.amdhsa_kernel\s+(\w+)"), ("src/kernels/", r"__kernel\s+void\s+(\w+)")),
    "ROCm/aiter": (("hsa/", r"(?:^|,)(_ZN5aiter\w+)(?:,|$)"),),
}


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True,
                          errors="replace").stdout


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_CALL = re.compile(r"(\w+)\s*\(|[;{]")
_ATTRIBUTES = {"__launch_bounds__", "__cluster_dims__", "__attribute__", "alignas", "__declspec", "void"}
_TRITON = re.compile(r"@(?:triton\.)?jit\b[^\n]*\n(?:[ \t]*@[^\n]*\n|[ \t]*[^\n]*\)\s*\n)*?[ \t]*def\s+(\w+)")
_CUTE_CLASS = re.compile(r"^class\s+(\w+)", re.MULTILINE)
_CK_STRUCT = re.compile(r"^\s*struct\s+(\w+Kernel)\s*(?:$|:|\{)", re.MULTILINE)
_FUNCTOR = re.compile(r"^\s*struct\s+(\w+Functor)\b", re.MULTILINE)  # a multi-tensor kernel is named by its functor
_NAMESPACE = re.compile(r"namespace\s+([\w:]+)\s*\{|[{}]")


def _namespaces_at(text: str, position: int) -> list[str]:
    """The named namespaces open at ``position`` (brace counting; comments and strings are not kernels' concern)."""
    stack: list[str | None] = []
    for m in _NAMESPACE.finditer(text, 0, position):
        if m.group(1):
            stack.append(m.group(1))
        elif m.group(0) == "{":
            stack.append(None)
        elif stack:
            stack.pop()
    return [s for s in stack if s]


def cuda_kernels(text: str) -> list[str]:
    """``__global__`` functions' names, qualified by the namespaces they sit in (as a trace's names are)."""
    names = []
    for m in re.finditer(r"__global__|CUTLASS_GLOBAL", text):  # CUTLASS_GLOBAL: CUTLASS's __global__ (DeepGEMM)
        rest = _LAUNCH_BOUNDS.sub(" ", text[m.end():m.end() + 400])
        calls = []
        for call in _CALL.finditer(rest):
            if not call.group(1):
                break
            calls.append(call.group(1))
        name = next((c for c in calls if c not in _ATTRIBUTES), None)
        if name:
            names.append("::".join([*_namespaces_at(text, m.start()), name]))
    return names


def python_kernels(text: str) -> list[str]:
    """Triton ``@triton.jit`` functions and CuTe DSL classes holding a ``@cute.kernel`` method."""
    names = [m.group(1) for m in _TRITON.finditer(text)] if "triton" in text else []
    if "@cute.kernel" in text:
        classes = [(m.start(), m.group(1)) for m in _CUTE_CLASS.finditer(text)]
        for m in re.finditer(r"@cute\.kernel", text):
            owner = [name for start, name in classes if start < m.start()]
            names += owner[-1:]
    return names


def nccl_kernels(text: str) -> list[str]:
    """NCCL's device kernels, ``ncclDevKernel_<coll>_<algo>_<proto>``, from the lists its generator reads."""
    lists: dict[str, list[str]] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.List):
            lists[node.targets[0].id] = [str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)]
    return [f"ncclDevKernel_{c}_{a}_{p}" for c in lists.get("all_colls", []) for a in lists.get("all_algos", [])
            for p in lists.get("all_protos", [])]


def grepped_kernels(repo: str, git_dir: Path) -> list[tuple[str, str]]:
    """The (kernel name, path) pairs ``GREPPED``'s lines name in the snapshot (a blob the snapshot lacks is
    skipped: ``git grep`` reads what is there)."""
    found: dict[str, str] = {}
    for prefix, line in GREPPED.get(repo, ()):
        pattern = re.compile(line)
        listing = subprocess.run(["git", f"--git-dir={git_dir}", "grep", "-I", "--full-name", "-E",
                                  _posix(line), "HEAD", "--", prefix],
                                 capture_output=True, text=True, errors="replace", check=False).stdout
        for row in listing.splitlines():
            _, path, text = row.split(":", 2)
            m = pattern.search(text)
            if m and "/test" not in path:
                found.setdefault(m.group(1), path)
    return sorted(found.items())


def _posix(line: str) -> str:
    """``line`` for ``git grep -E`` (POSIX classes; non-capturing groups as groups)."""
    return line.replace("\\w", "[A-Za-z0-9_]").replace("\\s", "[[:space:]]").replace("\\.", "[.]").replace("(?:", "(")


def mine(repo: str, git_dir: Path) -> tuple[str, list[tuple[str, str]]]:
    """The snapshot's commit and every (kernel name, path) its sources define."""
    commit = git(git_dir, "rev-parse", "HEAD").strip()
    listing = git(git_dir, "ls-tree", "-r", "-l", "HEAD").splitlines()
    found = []
    for line in listing:
        meta, path = line.split("\t", 1)
        size = meta.split()[3]
        if not path.startswith(WHERE.get(repo, ("",))) or not path.endswith(SOURCE_SUFFIXES) \
                or not size.isdigit() or int(size) > MAX_FILE_BYTES or "/test" in path:
            continue
        text = git(git_dir, "show", f"HEAD:{path}")
        if repo == "NVIDIA/nccl":
            names = nccl_kernels(text)
        elif path.endswith(".py"):
            names = python_kernels(text)
        else:
            names = cuda_kernels(text)
            names += [m.group(1) for m in _CK_STRUCT.finditer(text)] if "ck_tile" in path else []
            names += [m.group(1) for m in _FUNCTOR.finditer(text)] if "multi_tensor" in path else []
        found += [(name, path) for name in dict.fromkeys(names)]
    return commit, found


# Closed libraries (cuBLASLt, cuDNN): the kernel names their vendor wheels hold as whole strings (a cubin's symbol
# table, a runtime-compiled engine's name prefix); nvjet's own kernels are compiled into compressed fatbins, so the
# wheel gives only their namespace (nvjet::, the nvjet_matmulAlgo dispatch), and their names stay trace-only.
_CLOSED_NAME = re.compile(rb"(?<![A-Za-z0-9_])((?:sm\d{2,3}_xmma_|cutlass3x_|cutlass_\d+_|cudnn_generated_|"
                          rb"(?:ampere|volta|turing|hopper)_(?=\w*gemm))[A-Za-z0-9_]{4,300})(?![A-Za-z0-9_])")
WHEEL_MEMBERS = re.compile(r"/lib/lib(?:cublasLt|cublas|cudnn_engines_precompiled|cudnn_engines_runtime_compiled|"
                           r"cudnn_adv|cudnn_ops|cudnn_cnn)\.so[.\d]*$")
CLOSED_KEPT = 40  # of a closed library's thousands of names, this many per family (spread over the sorted list)


def wheel_kernels(wheel: Path) -> list[tuple[str, str]]:
    """The (kernel name, library member) pairs a vendor wheel's shared libraries hold as whole strings."""
    found: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if WHEEL_MEMBERS.search(member):
                blob = archive.read(member)
                for m in _CLOSED_NAME.finditer(blob):
                    found.setdefault(m.group(1).decode("ascii"), member)
    return sorted(found.items())


# Inductor names a Triton kernel "_".join(["triton", category[:3], fused_name, suffix]) (torch/_inductor/codegen/
# triton.py), its category one of wrapper_benchmark.py's _kernel_category_choices: the names its generator writes
# with descriptive_names off (fused_name "") are read from the installed torch, with its version.
_INDUCTOR_JOIN = '["triton", kernel_category, fused_name, wrapper.next_kernel_suffix()]'


def inductor_kernels(torch_dir: Path) -> tuple[str, list[tuple[str, str]]]:
    """Torch's version and the (kernel name, file) pairs Inductor's naming gives each kernel category."""
    codegen = (torch_dir / "_inductor" / "codegen" / "triton.py").read_text(encoding="utf-8")
    if _INDUCTOR_JOIN not in codegen or "get_kernel_category_by_source_code(src_code)[:3]" not in codegen:
        raise ValueError(f"{torch_dir}: Inductor's kernel naming is not the one this script reads")
    choices: list[str] = []
    for node in ast.parse((torch_dir / "_inductor" / "wrapper_benchmark.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_kernel_category_choices" \
                and isinstance(node.value, ast.List):
            choices = [str(e.value) for e in node.value.elts if isinstance(e, ast.Constant)]
    found = re.search(r"^__version__ = '([^']+)'", (torch_dir / "version.py").read_text(encoding="utf-8"), re.M)
    version = found.group(1) if found else "unknown"
    return version, [("_".join(["triton", c[:3], "", "0"]), "torch/_inductor/wrapper_benchmark.py") for c in choices]


def _spread(names: list[str], kept: int) -> list[str]:
    """``kept`` of ``names`` (sorted), evenly spaced: every kind of tile, dtype and epilogue, not the first few."""
    names = sorted(names)
    return names if len(names) <= kept else [names[i * len(names) // kept] for i in range(kept)]


def _closed_names(package: str, wheel: Path, compiled: list[tuple[Family, re.Pattern[str]]]) \
        -> tuple[dict[str, dict[str, str]], dict[str, int], int, list[str]]:
    """A wheel's names kept per family (``CLOSED_KEPT``, with their sources), the count found per family, the count
    no family takes, and the errors (a name two families take)."""
    by_family: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    missed, errors = 0, []
    for name, member in wheel_kernels(wheel):
        families = classify(name, compiled)
        if len(families) > 1:
            errors.append(f"{package}:{member}: {name} matches {', '.join(f.name for f in families)}")
        elif families:
            by_family.setdefault(families[0].name, []).append(name)
            where[name] = member.rsplit("/", 1)[-1]
        else:
            missed += 1
    kept = {family: {name: f"{package}:{where[name]}" for name in _spread(found, CLOSED_KEPT)}
            for family, found in by_family.items()}
    return kept, {family: len(found) for family, found in sorted(by_family.items())}, missed, errors


def _generated_names(snapshots: dict[str, Path], compiled: list[tuple[Family, re.Pattern[str]]],
                     names: dict[str, dict[str, str]], unmatched: Counter[str], errors: list[str]) \
        -> dict[str, dict[str, int]]:
    """``GREPPED``'s names (generated solutions, assembly kernels: thousands a library) added to ``names``, up to
    ``CLOSED_KEPT`` per family and library spread over the sorted list as a wheel's are; the count found per family
    returned, the rest counted in ``unmatched``."""
    counts: dict[str, dict[str, int]] = {}
    for repo, git_dir in sorted(snapshots.items()):
        if repo not in GREPPED:
            continue
        commit = git(git_dir, "rev-parse", "HEAD").strip()
        by_family: dict[str, list[str]] = {}
        where: dict[str, str] = {}
        for name, path in grepped_kernels(repo, git_dir):
            families = classify(name, compiled)
            if len(families) > 1:
                errors.append(f"{repo}:{path}: {name} matches {', '.join(f.name for f in families)}")
            elif families:
                by_family.setdefault(families[0].name, []).append(name)
                where[name] = path
            else:
                unmatched[repo] += 1
        for family, found in by_family.items():
            for name in _spread(found, CLOSED_KEPT):
                names[family].setdefault(name, f"{repo}@{commit[:12]}:{where[name]}")
        counts[repo] = {family: len(found) for family, found in sorted(by_family.items())}
    return counts


def classify(name: str, compiled: list[tuple[Family, re.Pattern[str]]]) -> list[Family]:
    return [family for family, pattern in compiled if pattern.search(name)]


def _named_one_by_one(torch_dir: Path | None, compiled: list[tuple[Family, re.Pattern[str]]],
                      names: dict[str, dict[str, str]], sources: dict[str, Any], errors: list[str]) -> list[str]:
    """Names not mined from a whole tree: Inductor's (generated from the installed torch's naming), and
    ``INDEXED``'s (one file each): added to ``names`` and ``sources``; Inductor's names returned."""
    data_inductor: list[str] = []
    if torch_dir is not None:
        version, generated = inductor_kernels(torch_dir)
        sources[f"torch=={version}"] = f"torch {version} (installed: {torch_dir.name}/_inductor)"
        for name, path in generated:
            families = classify(name, compiled)
            if len(families) == 1:
                names[families[0].name].setdefault(name, f"torch=={version}:{path}")
            data_inductor.append(name)
    for name, repo, commit, path in INDEXED:
        families = classify(name, compiled)
        if len(families) != 1:
            errors.append(f"{repo}:{path}: {name} matches {[f.name for f in families] or 'no family'}")
        else:
            names[families[0].name].setdefault(name, f"{repo}@{commit[:12]}:{path} (one file, read through the index)")
            sources.setdefault(repo, {})[path] = commit  # a file's commit, not a snapshot's: read one by one
    return data_inductor


def _carry(kept: dict[str, Any], compiled: list[tuple[Family, re.Pattern[str]]], names: dict[str, dict[str, str]],
           sources: dict[str, Any], unmatched: Counter[str], found: tuple[dict[str, dict[str, int]], ...],
           errors: list[str]) -> list[str]:
    """The sources of ``kept`` (an earlier data file) this run did not read again — a snapshot or wheel not at
    hand — carried over: their commits, counts and names, each name given to the family the current patterns
    give it (one, or it is an error). ``found``: the closed and the generated names' counts. Returns the kept
    Inductor names."""
    closed_found, generated_found = found
    for source, commit in kept.get("sources", {}).items():
        if source in sources or isinstance(commit, dict) or source.startswith("torch=="):
            continue  # read again, or an INDEXED repository (its files are in this script)
        sources[source] = commit
        if source in kept.get("unmatched_names", {}):
            unmatched[source] = kept["unmatched_names"][source]
        if source in kept.get("closed_names_found", {}):
            closed_found[source] = kept["closed_names_found"][source]
        if source in kept.get("generated_names_found", {}):
            generated_found[source] = kept["generated_names_found"][source]
        for family in kept.get("families", []):
            for row in family.get("names", []):
                if row["source"].startswith((f"{source}@", f"{source}:")):
                    taken = classify(row["name"], compiled)
                    if len(taken) != 1:
                        errors.append(f"kept {row['source']}: {row['name']} matches {[f.name for f in taken]}")
                    else:
                        names[taken[0].name].setdefault(row["name"], row["source"])
    for source, commit in kept.get("sources", {}).items():
        if source.startswith("torch==") and source not in sources and not any(s.startswith("torch==") for s in sources):
            sources[source] = commit
            for family in kept.get("families", []):
                for row in family.get("names", []):
                    if row["source"].startswith(f"{source}:"):
                        taken = classify(row["name"], compiled)
                        if len(taken) == 1:
                            names[taken[0].name].setdefault(row["name"], row["source"])
    return list(kept.get("inductor_names", []))


def build(snapshots: dict[str, Path], wheels: dict[str, Path] | None = None,
          torch_dir: Path | None = None, kept: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The data file's content, and the errors (a name two families take). ``wheels``: vendor wheels by
    ``package==version``, whose closed libraries' kernel names are read as strings; ``torch_dir``: an installed
    torch, whose Inductor names its generated kernels by category (``inductor_kernels``); ``kept``: an earlier
    data file whose other sources are carried over (``_carry``)."""
    wheels = wheels or {}
    from fuseprof.model.registry_schema import regex_problem

    errors = [f"{f.name}: {problem}" for f in FAMILIES if (problem := regex_problem(f.pattern))]
    compiled = [(f, re.compile(f.pattern, re.IGNORECASE)) for f in FAMILIES]
    names: dict[str, dict[str, str]] = {f.name: {} for f in FAMILIES}
    sources: dict[str, Any] = {}
    unmatched: Counter[str] = Counter()
    for repo, git_dir in sorted(snapshots.items()):
        commit, found = mine(repo, git_dir)
        sources[repo] = commit
        for name, path in found:
            families = classify(name, compiled)
            if len(families) > 1:
                errors.append(f"{repo}:{path}: {name} matches {', '.join(f.name for f in families)}")
            elif families:
                names[families[0].name].setdefault(name, f"{repo}@{commit[:12]}:{path}")
            else:
                unmatched[repo] += 1
    generated_found = _generated_names(snapshots, compiled, names, unmatched, errors)
    closed_found: dict[str, dict[str, int]] = {}
    for package, wheel in sorted(wheels.items()):
        kept, closed_found[package], missed, wrong = _closed_names(package, wheel, compiled)
        sources[package], unmatched[package], errors = wheel.name, missed, errors + wrong
        for family, chosen in kept.items():
            for name, source in chosen.items():
                names[family].setdefault(name, source)
    inductor = _named_one_by_one(torch_dir, compiled, names, sources, errors)
    if kept is not None:
        kept_inductor = _carry(kept, compiled, names, sources, unmatched, (closed_found, generated_found), errors)
        inductor = inductor or kept_inductor
    trace_names = []
    for name, family, seen in TRACE_NAMES:
        taken = [f.name for f in classify(name, compiled)]
        if taken != [family]:
            errors.append(f"trace name {name[:80]} is taken by {taken or 'no family'}, not {family!r}")
        trace_names.append({"name": name, "family": family, "seen_in": seen})
    data = {
        "generated_by": "scripts/mine_kernel_families.py (do not edit: run it again)",
        "sources": dict(sorted(sources.items())),
        "unmatched_names": dict(sorted(unmatched.items())),
        "closed_names_found": dict(sorted(closed_found.items())),
        "generated_names_found": dict(sorted(generated_found.items())),
        "inductor_names": inductor,  # every category's name: the written Inductor rows take the rest
        "families": [{"name": f.name, "kernel": f.pattern, "category": f.category, "computes": f.computes,
                      "what": f.what, "kinds": list(f.kinds), "catalogue": list(f.catalogue),
                      "names": [{"name": n, "source": s} for n, s in sorted(names[f.name].items())]}
                     for f in FAMILIES],
        "trace_names": trace_names,
    }
    return data, errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snapshots", nargs="*", metavar="OWNER/NAME=GIT_DIR")
    parser.add_argument("--wheel", action="append", default=[], metavar="PACKAGE==VERSION=WHEEL",
                        help="a closed library's vendor wheel (nvidia-cublas-cu12, nvidia-cudnn-cu12): its kernel names "
                             "are read from its shared libraries' strings")
    parser.add_argument("--torch", type=Path, metavar="DIR", help="an installed torch package (its directory): "
                        "Inductor's kernel categories are read from its sources")
    parser.add_argument("--keep", type=Path, metavar="JSON", help="an earlier data file (the committed one): the "
                        "sources it names and this run does not read (a snapshot or wheel not at hand) are carried "
                        "over, their names given to the families the current patterns say")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    kept = None
    if args.keep is not None:
        try:
            kept = json.loads(args.keep.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            parser.error(f"--keep {args.keep}: not a readable data file ({str(exc)[:120]})")
        if not isinstance(kept, dict) or not isinstance(kept.get("families"), list):
            parser.error(f"--keep {args.keep}: not a kernel-families data file (no 'families' list)")
    wheels = {}
    for item in args.wheel:
        package, _, path = item.rpartition("=")
        if "==" not in package or not Path(path).is_file():
            parser.error(f"--wheel {item}: give PACKAGE==VERSION=WHEEL (the vendor's wheel file)")
        wheels[package] = Path(path)
    if not (args.snapshots or args.wheel or args.keep):
        parser.error("give a snapshot, a --wheel or --keep: nothing to read")
    snapshots = {}
    for item in args.snapshots:
        repo, _, path = item.partition("=")
        if not path or not Path(path).is_dir():
            parser.error(f"{item}: give OWNER/NAME=GIT_DIR (a bare git directory of the library)")
        snapshots[repo] = Path(path)
    try:
        data, errors = build(snapshots, wheels, args.torch, kept)
    except zipfile.BadZipFile as exc:
        parser.error(f"--wheel: not a readable wheel ({exc})")
    if errors:
        print("\n".join(errors[:60]) + (f"\n... {len(errors) - 60} more" if len(errors) > 60 else ""), file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    counts = ", ".join(f"{f['name']}: {len(f['names'])}" for f in data["families"])
    print(f"wrote {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())

"""Inputs, float64 reference and byte model of the decoder-layer case.

A shape is ``(batch, tokens, kv_len)``: prefill is ``1x2048x2048`` (2048 new tokens filling a
2048-slot cache), decode is ``Bx1x2048`` (one new token per sequence at slot 2047, attending to
2047 cached positions and itself). The cache history is random, as after a prefill of random text.
"""

from __future__ import annotations

import torch
from fuseprof_kernels._inputs import activations, itemsize, norm_weight, projection_weight
from fuseprof_kernels.decoder_layer.layer import (
    EPS,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    KV_HEADS,
    ROPE_THETA,
    DecoderLayer,
)

from fuseprof.errors import InvalidArgumentError

WEIGHT_SHAPES: dict[str, tuple[int, ...]] = {
    "input_norm": (HIDDEN,),
    "w_qkv": ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN),
    "w_o": (HIDDEN, HEADS * HEAD_DIM),
    "post_attn_norm": (HIDDEN,),
    "w_gate": (INTERMEDIATE, HIDDEN),
    "w_up": (INTERMEDIATE, HIDDEN),
    "w_down": (HIDDEN, INTERMEDIATE),
}


def split_shape(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(batch, tokens, kv_len), refusing what this layer does not model."""
    if len(shape) != 3:
        raise InvalidArgumentError(f"decoder_layer shapes are BATCHxTOKENSxKV_LEN (e.g. 1x1x2048), got {shape}")
    batch, tokens, kv_len = shape
    if tokens not in (1, kv_len):
        raise InvalidArgumentError(f"decoder_layer shape {shape}: tokens must be 1 (decode) or equal to kv_len "
                                   "(prefill into an empty cache)")
    return batch, tokens, kv_len


def make_inputs(shape: tuple[int, ...], dtype: str, device: str,
                generator: torch.Generator) -> tuple[object, ...]:
    """(layer, hidden, residual, positions): the layer holds random weights and a random cache history."""
    batch, tokens, kv_len = split_shape(shape)
    weights = {name: norm_weight(dims[0], dtype, device, generator) if len(dims) == 1
               else projection_weight(*dims, dtype, device, generator) for name, dims in WEIGHT_SHAPES.items()}
    cache = (batch, KV_HEADS, kv_len, HEAD_DIM)
    layer = DecoderLayer(weights, activations(cache, dtype, device, generator),
                         activations(cache, dtype, device, generator))
    positions = torch.arange(kv_len - tokens, kv_len, device=device)
    return (layer, activations((batch, tokens, HIDDEN), dtype, device, generator),
            activations((batch, tokens, HIDDEN), dtype, device, generator), positions)


def _rms_norm(h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return h * torch.rsqrt(h.square().mean(dim=-1, keepdim=True) + EPS) * weight.double()


def reference(layer: DecoderLayer, hidden: torch.Tensor, residual: torch.Tensor,
              positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (mlp_out, residual), written out from the definitions (explicit softmax attention,
    rotary angles in float64); the layer's own cache is not touched."""
    batch, tokens, _ = hidden.shape
    h = hidden.double() + residual.double()
    qkv = _rms_norm(h, layer.input_norm) @ layer.w_qkv.double().T
    q, k, v = qkv.view(batch, tokens, HEADS + 2 * KV_HEADS, HEAD_DIM).transpose(1, 2).split(
        [HEADS, KV_HEADS, KV_HEADS], dim=1)
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64, device=h.device) / HEAD_DIM)
    angles = positions.double()[:, None] * inv_freq[None, :]
    cos, sin = torch.cat((angles, angles), -1).cos(), torch.cat((angles, angles), -1).sin()

    def rope(x: torch.Tensor) -> torch.Tensor:
        half = HEAD_DIM // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    q, k = rope(q), rope(k)
    keys, values = layer.k_cache.double().clone(), layer.v_cache.double().clone()
    keys[:, :, positions], values[:, :, positions] = k, v
    group = HEADS // KV_HEADS
    keys, values = keys.repeat_interleave(group, dim=1), values.repeat_interleave(group, dim=1)
    scores = q @ keys.transpose(-1, -2) / HEAD_DIM**0.5
    slots = torch.arange(keys.shape[2], device=h.device)
    scores = scores.masked_fill(slots[None, :] > positions[:, None], float("-inf"))  # no attending ahead
    attn = (scores.softmax(dim=-1) @ values).transpose(1, 2).reshape(batch, tokens, HEADS * HEAD_DIM)
    h = h + attn @ layer.w_o.double().T
    y = _rms_norm(h, layer.post_attn_norm)
    gate, up = y @ layer.w_gate.double().T, y @ layer.w_up.double().T
    return (torch.nn.functional.silu(gate) * up) @ layer.w_down.double().T, h


def weight_bytes(dtype: str) -> int:
    return itemsize(dtype) * sum(torch.Size(dims).numel() for dims in WEIGHT_SHAPES.values())


def nominal_bytes(shape: tuple[int, ...], dtype: str) -> int:
    """What one layer call must move at least: every weight once, the whole KV cache read once, the
    new tokens' K and V written once, the rotary rows of the new positions, and the activations
    (hidden and residual in; mlp_out and residual out)."""
    batch, tokens, kv_len = split_shape(shape)
    size = itemsize(dtype)
    kv_read = 2 * batch * KV_HEADS * kv_len * HEAD_DIM * size
    kv_write = 2 * batch * KV_HEADS * tokens * HEAD_DIM * size
    rotary = 2 * tokens * HEAD_DIM * size
    return weight_bytes(dtype) + kv_read + kv_write + rotary + 4 * batch * tokens * HIDDEN * size


def flops(shape: tuple[int, ...]) -> int:
    """Matrix FLOPs of one call (2 per multiply-add): the projections over every new token, and
    QKᵀ and PV over the slots each query attends to (causal prefill attends to half the square)."""
    batch, tokens, kv_len = split_shape(shape)
    projections = sum(2 * d[0] * d[1] for d in WEIGHT_SHAPES.values() if len(d) == 2) * batch * tokens
    attended = kv_len * tokens if tokens == 1 else tokens * (tokens + 1) // 2
    return projections + 2 * 2 * batch * HEADS * HEAD_DIM * attended

"""Llama-style decoder: embedding, N × (RMSNorm, attention with RoPE and a static KV cache,
RMSNorm, SwiGLU MLP), final norm, LM head."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class Config:
    vocab: int = 32000
    hidden: int = 2048
    intermediate: int = 5632
    layers: int = 4
    heads: int = 16
    kv_heads: int = 4
    max_len: int = 1024
    rope_theta: float = 10000.0
    eps: float = 1e-6

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm: upcast, pow, mean, add, rsqrt, mul, downcast, mul."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return (x * cos) + (rotate_half(x) * sin)


class Attention(nn.Module):
    def __init__(self, cfg: Config, batch: int) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.head_dim
        self.qkv = nn.Linear(cfg.hidden, (cfg.heads + 2 * cfg.kv_heads) * d, bias=False)
        self.o = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)
        cache = (batch, cfg.kv_heads, cfg.max_len, d)
        self.register_buffer("k_cache", torch.zeros(cache), persistent=False)
        self.register_buffer("v_cache", torch.zeros(cache), persistent=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        cfg, (b, t, _) = self.cfg, x.shape
        q, k, v = self.qkv(x).split([cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim,
                                     cfg.kv_heads * cfg.head_dim], dim=-1)
        q = q.view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)
        k = k.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        v = v.view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        self.k_cache.index_copy_(2, positions, k)
        self.v_cache.index_copy_(2, positions, v)
        out = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, enable_gqa=True)
        return self.o(out.transpose(1, 2).reshape(b, t, cfg.heads * cfg.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.gate = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config, batch: int) -> None:
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.attn = Attention(cfg, batch)
        self.post_attn_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), cos, sin, positions, mask)
        return x + self.mlp(self.post_attn_norm(x))


class Decoder(nn.Module):
    def __init__(self, cfg: Config, batch: int = 1) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.rotary = Rotary(cfg)
        self.layers = nn.ModuleList(DecoderLayer(cfg, batch) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Logits of the last position; ``positions`` are the cache slots of ``tokens``."""
        x = self.embed(tokens)
        cos, sin = self.rotary(positions, x.dtype)
        keys = torch.arange(self.cfg.max_len, device=tokens.device)
        mask = (keys[None, :] <= positions[:, None])[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, positions, mask)
        return self.lm_head(self.norm(x[:, -1:]))

"""A llama-architecture transformer whose maths matches llama.cpp's LLM_ARCH_LLAMA graph.

- RMSNorm: x / sqrt(mean(x^2) + eps) * weight (eps = llama.attention.layer_norm_rms_epsilon)
- RoPE: llama.cpp's LLAMA ("normal") type rotates ADJACENT pairs (x[2i], x[2i+1]) with
  theta_i = pos * base^(-2i/head_dim); the cos/sin table is computed like ggml (float32,
  theta multiplied by theta_scale step by step). Weights are exported unpermuted, so the
  HF rotate-half permutation of llama.cpp's convert script does not apply.
- attention: softmax(q k^T * 1/sqrt(head_dim) + causal mask) v, then wo
- SwiGLU FFN: down(silu(gate(x)) * up(x)); no biases anywhere; output tied to token embedding.

Parity with llama.cpp (tools/parity): with the KV cache in F32, llama.cpp's log-probabilities
equal this model's (F16-rounded weights, float64 maths) to about 1e-5. With llama.cpp's default
F16 KV cache, K, V, Q and the attention probabilities get rounded to F16, which moves
log-probabilities by up to about 1e-3 on this model; that is an inference-time approximation,
not a difference in the model's maths.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_table(context, head_dim, base):
    theta_scale = np.float32(np.power(np.float32(base), np.float32(-2.0) / np.float32(head_dim)))
    cos = np.zeros((context, head_dim // 2), dtype=np.float32)
    sin = np.zeros((context, head_dim // 2), dtype=np.float32)
    for pos in range(context):
        theta = np.float32(pos)
        for i in range(head_dim // 2):
            cos[pos, i] = np.cos(theta)
            sin[pos, i] = np.sin(theta)
            theta = np.float32(theta * theta_scale)
    return torch.from_numpy(cos), torch.from_numpy(sin)


def apply_rope(x, cos, sin):
    # x: (B, T, H, D); adjacent pairs
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
    return out.flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, ff = cfg["embd"], cfg["ff"]
        self.heads = cfg["heads"]
        self.head_dim = d // self.heads
        self.attn_norm = RMSNorm(d, cfg["eps"])
        self.wq = nn.Linear(d, d, bias=False)
        self.wk = nn.Linear(d, d, bias=False)
        self.wv = nn.Linear(d, d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.ffn_norm = RMSNorm(d, cfg["eps"])
        self.w_gate = nn.Linear(d, ff, bias=False)
        self.w_up = nn.Linear(d, ff, bias=False)
        self.w_down = nn.Linear(ff, d, bias=False)

    def forward(self, h, cos, sin):
        B, T, D = h.shape
        x = self.attn_norm(h)
        q = self.wq(x).view(B, T, self.heads, self.head_dim)
        k = self.wk(x).view(B, T, self.heads, self.head_dim)
        v = self.wv(x).view(B, T, self.heads, self.head_dim)
        q = apply_rope(q, cos[:T], sin[:T]).transpose(1, 2)
        k = apply_rope(k, cos[:T], sin[:T]).transpose(1, 2)
        v = v.transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.full((T, T), float("-inf"), dtype=h.dtype, device=h.device).triu(1)
        probs = torch.softmax(scores + mask, dim=-1)
        out = probs @ v
        out = out.transpose(1, 2).reshape(B, T, D)
        h = h + self.wo(out)
        x = self.ffn_norm(h)
        a = F.silu(self.w_gate(x)) * self.w_up(x)
        return h + self.w_down(a)


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab"], cfg["embd"])
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg["layers"])])
        self.norm = RMSNorm(cfg["embd"], cfg["eps"])
        cos, sin = rope_table(cfg["context"], cfg["embd"] // cfg["heads"], cfg["rope_base"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg["layers"]) if name.endswith(("wo.weight", "w_down.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids):
        h = self.tok_emb(ids)
        for block in self.blocks:
            h = block(h, self.cos, self.sin)
        return self.norm(h) @ self.tok_emb.weight.t()

    def round_weights_to_f16(self):
        """Rounds every matrix to F16 as the exported GGUF stores them (norms stay F32)."""
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.copy_(p.half().float())

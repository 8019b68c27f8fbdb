"""A Llama-style decoder over a paged KV cache: RMSNorm, rotary embeddings, GQA, SwiGLU.

Shapes: T = tokens in this step (all sequences flattened), D = hidden_size, H = num_heads,
K = num_kv_heads, G = H // K (query heads per KV head), d = head_dim, S = cache slots
(num_blocks * block_size). The KV cache of one layer is `[2, K, S, d]` (keys, values).

Each layer writes its new keys/values into their cache slots, then attends through the
step's plan (`reference_server.engine.attention`: length-bucketed decodes, one call per
prefill chunk, each at its real length). The linear layers see all T tokens at once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine_core.architecture import ModelArchitecture
from reference_server.engine.attention import StepAttention


def unsupported_features(arch: ModelArchitecture) -> list[str]:
    """Architecture features this Llama-style model does not implement (empty: it can run `arch`)."""
    checks = {   # getattr: the shared type may grow fields this model predates
        "MoE experts": getattr(arch, "num_experts", 1) != 1,
        "MLA attention": getattr(arch, "kv_lora_rank", None) is not None,
        "sliding-window attention": bool(getattr(arch, "sliding_window", None)),
        "a non-gated MLP": not getattr(arch, "mlp_gated", True),
        "linear biases": getattr(arch, "qkv_bias", False) or getattr(arch, "linear_bias", False),
        "LayerNorm biases": getattr(arch, "norm_bias", False),
        "learned position embeddings": bool(getattr(arch, "learned_position_embeddings", 0)),
    }
    return [name for name, present in checks.items() if present]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return x32.to(x.dtype) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_tables(head_dim: int, max_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: [max_len, d] (HF "rotate_half" layout, float32)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().float(), emb.sin().float()


class Attention(nn.Module):
    def __init__(self, arch: ModelArchitecture) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = arch.num_heads, arch.num_kv_heads, arch.head_dim
        self.q_size = arch.num_heads * arch.head_dim
        self.kv_size = arch.num_kv_heads * arch.head_dim
        # fused q|k|v projection: one matmul instead of three
        self.qkv_proj = nn.Linear(arch.hidden_size, self.q_size + 2 * self.kv_size, bias=False)
        self.o_proj = nn.Linear(self.q_size, arch.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                kv_layer: torch.Tensor, meta: StepAttention) -> torch.Tensor:
        num_tokens = x.shape[0]
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(num_tokens, self.num_heads, self.head_dim)                 # [T, H, d]
        k = k.view(num_tokens, self.num_kv_heads, self.head_dim)              # [T, K, d]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # write the new K/V into their slots first, so every query reads keys from one place
        new_kv = torch.stack((k, v.view(num_tokens, self.num_kv_heads, self.head_dim))).transpose(1, 2)
        kv_layer.index_copy_(2, meta.slot_mapping, new_kv)                    # [2, K, T, d] -> slots
        return self.o_proj(meta.attend(q, kv_layer))                           # [T, H * d] -> [T, D]


class MLP(nn.Module):
    def __init__(self, arch: ModelArchitecture) -> None:
        super().__init__()
        self.intermediate_size = arch.intermediate_size
        self.gate_up_proj = nn.Linear(arch.hidden_size, 2 * arch.intermediate_size, bias=False)  # fused
        self.down_proj = nn.Linear(arch.intermediate_size, arch.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).split(self.intermediate_size, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, arch: ModelArchitecture) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(arch.hidden_size, arch.norm_eps)
        self.self_attn = Attention(arch)
        self.post_attention_layernorm = RMSNorm(arch.hidden_size, arch.norm_eps)
        self.mlp = MLP(arch)

    def forward(self, x, cos, sin, kv_layer, meta):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_layer, meta)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    """The whole decoder; `forward` returns hidden states, `compute_logits` the chosen rows' logits."""

    def __init__(self, arch: ModelArchitecture, max_model_len: int) -> None:
        super().__init__()
        unsupported = unsupported_features(arch)
        if unsupported:
            raise ValueError(f"model {arch.name!r}: the reference model runs dense Llama-style "
                             f"architectures only; this one has {', '.join(unsupported)}")
        self.arch = arch
        self.embed_tokens = nn.Embedding(arch.vocab_size, arch.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(arch) for _ in range(arch.num_layers))
        self.norm = RMSNorm(arch.hidden_size, arch.norm_eps)
        self.lm_head = nn.Linear(arch.hidden_size, arch.vocab_size, bias=False)
        if arch.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_tables(arch.head_dim, max_model_len, arch.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, kv_cache: torch.Tensor,
                meta: StepAttention) -> torch.Tensor:
        """input_ids, positions: [T]; kv_cache: [layers, 2, K, S, d] -> hidden [T, D]."""
        x = self.embed_tokens(input_ids)
        cos = self.rope_cos[positions].to(x.dtype).unsqueeze(1)               # [T, 1, d]
        sin = self.rope_sin[positions].to(x.dtype).unsqueeze(1)
        for layer, kv_layer in zip(self.layers, kv_cache):
            x = layer(x, cos, sin, kv_layer, meta)
        return self.norm(x)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)                                            # [N, vocab]


@torch.no_grad()
def init_random_weights(model: Transformer, seed: int) -> None:
    """Seeded N(0, 0.02) weights (norms at 1), drawn on the CPU so every device gets the same model."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        if name.endswith("layernorm.weight") or name == "norm.weight":
            param.fill_(1.0)
        else:
            param.copy_(torch.empty(param.shape, dtype=torch.float32).normal_(0.0, 0.02, generator=generator))

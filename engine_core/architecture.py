"""The model-architecture type shared by the calculators and the reference server.

One frozen dataclass holds the fields that decide memory and compute: the
reference server builds its transformer from it, and `calculators` predicts KV
bytes, weight bytes and step time from the same object, so prediction and the
real allocation cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelArchitecture:
    """A decoder-only transformer, Llama-style unless a field says otherwise.

    Attributes:
        name: catalog id, lowercase with hyphens (e.g. ``llama-3.1-8b``).
        num_layers: decoder blocks.
        hidden_size: residual stream width (d_model).
        num_heads: query heads per layer.
        num_kv_heads: key/value heads per layer (GQA when < num_heads; MHA when equal).
        head_dim: width of one attention head.
        intermediate_size: MLP hidden width (per expert for MoE).
        vocab_size: embedding rows.
        tie_embeddings: output projection shares the input embedding matrix.
        max_position_embeddings: longest context the model supports.
        rope_theta: rotary embedding base.
        norm_eps: RMSNorm epsilon.
        num_experts: MLP experts per layer (1 = dense).
        num_active_experts: experts each token is routed to (top-k).
        sliding_window: attention window in tokens for sliding-window layers, None = full.
        num_sliding_window_layers: how many layers use the sliding window (rest are full).
        kv_lora_rank: MLA compressed KV rank (DeepSeek-style), None for ordinary attention.
        qk_rope_head_dim: MLA decoupled rotary key width, stored beside the latent.
        mlp_gated: SwiGLU (3 matrices) when True, plain up/down MLP (2 matrices) when False.
        qkv_bias: q/k/v projections carry biases (Qwen2).
        linear_bias: every linear layer carries a bias (OPT, GPT-2); implies qkv_bias.
        norm_bias: LayerNorm with a bias (OPT) instead of RMSNorm.
        learned_position_embeddings: rows of a learned absolute position table (OPT: 2050), 0 = rotary.
        q_lora_rank: MLA query compression rank, None = full-rank query projection.
        v_head_dim: MLA value head width (None = head_dim); for MLA, head_dim = nope + rope key width.
        moe_intermediate_size: expert MLP width when it differs from intermediate_size (DeepSeek).
        num_shared_experts: always-active experts per MoE layer (DeepSeek).
        num_dense_layers: leading layers with a dense MLP in an MoE model (DeepSeek first_k_dense_replace).
        quantize_experts_only: a checkpoint in a quantized format quantizes the routed experts only; attention,
            routers, embeddings and the head stay 16-bit (gpt-oss: MXFP4 experts, the rest in
            ``quantization_config.modules_to_not_convert``).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool = False
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    num_experts: int = 1
    num_active_experts: int = 1
    sliding_window: int | None = None
    num_sliding_window_layers: int = 0
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    mlp_gated: bool = True
    qkv_bias: bool = False
    linear_bias: bool = False
    norm_bias: bool = False
    learned_position_embeddings: int = 0
    q_lora_rank: int | None = None
    v_head_dim: int | None = None
    moe_intermediate_size: int | None = None
    num_shared_experts: int = 0
    num_dense_layers: int = 0
    quantize_experts_only: bool = False

    def __post_init__(self) -> None:
        positive = (
            "num_layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
            "intermediate_size", "vocab_size", "max_position_embeddings",
            "num_experts", "num_active_experts",
        )
        for field_name in positive:
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{field_name} must be a positive integer, got {value!r}")
        if self.num_kv_heads > self.num_heads:
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) must not exceed num_heads ({self.num_heads})"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if self.num_active_experts > self.num_experts:
            raise ValueError(
                f"num_active_experts ({self.num_active_experts}) must not exceed num_experts ({self.num_experts})"
            )
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ValueError(f"sliding_window must be positive or None, got {self.sliding_window!r}")
        if not 0 <= self.num_sliding_window_layers <= self.num_layers:
            raise ValueError(
                f"num_sliding_window_layers must be in [0, num_layers], got {self.num_sliding_window_layers!r}"
            )
        if self.kv_lora_rank is not None and self.kv_lora_rank <= 0:
            raise ValueError(f"kv_lora_rank must be positive or None, got {self.kv_lora_rank!r}")
        for field_name in ("q_lora_rank", "v_head_dim", "moe_intermediate_size"):
            value = getattr(self, field_name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{field_name} must be a positive integer or None, got {value!r}")
        for field_name in ("learned_position_embeddings", "num_shared_experts", "qk_rope_head_dim"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{field_name} must be a non-negative integer, got {value!r}")
        if not 0 <= self.num_dense_layers <= self.num_layers:
            raise ValueError(f"num_dense_layers must be in [0, num_layers], got {self.num_dense_layers!r}")
        if self.rope_theta <= 0 or self.norm_eps <= 0:
            raise ValueError("rope_theta and norm_eps must be positive")

    @property
    def uses_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

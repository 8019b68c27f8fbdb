"""Parameter count and weight bytes of a decoder-only transformer.

Counting (per layer, h = hidden, d = head_dim, H = heads, K = kv heads, I = MLP width):
  attention  q: h*H*d, k and v: h*K*d each, o: H*d*h  (MLA: q [via q_lora], kv_a, kv_b, o)
  MLP        gated (SwiGLU) 3*h*I, plain 2*h*I; MoE: E experts of 3*h*I_e + router h*E + shared experts
  norms      2*h (x2 with LayerNorm bias); biases where the architecture has them
plus input embedding V*h, output head V*h unless tied, learned positions, final norm.
Llama-3.1-8B: 8,030,261,248 parameters -> 16.06e9 bytes in BF16 (published: "8B", 16.06 GB).

Bytes: linear weights in ``dtype`` (group quantization adds its scale/zero overhead,
see ``engine_core.dtypes``); embeddings in ``dtype`` unless ``keep_embeddings_16bit``
keeps them (and the output head) at 16 bits, as GPTQ/AWQ checkpoints do; norms,
biases and routers stay at 16 bits in quantized formats (the dtype itself otherwise).
A model whose checkpoints quantize the routed experts only (``quantize_experts_only``, gpt-oss)
keeps every other linear weight and the embeddings at 16 bits in a quantized format.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import DType, parse_dtype


@dataclass(frozen=True)
class ParamCounts:
    """Parameters by role (whole model, all tensor-parallel shards together)."""

    embedding: int        # input embedding + learned positions
    lm_head: int          # 0 when tied
    attention: int        # linear weights of all attention blocks
    dense_mlp: int        # dense MLP linear weights (all layers of a dense model)
    routed_experts: int   # all routed experts' linear weights (MoE)
    shared_experts: int
    small: int            # norms, biases, routers: never quantized
    active_routed_experts: int  # routed expert weights one token passes through

    @property
    def total(self) -> int:
        return (self.embedding + self.lm_head + self.attention + self.dense_mlp
                + self.routed_experts + self.shared_experts + self.small)

    @property
    def active_per_token(self) -> int:
        """Parameters one token touches (MoE: top-k experts; embedding lookup excluded from FLOPs elsewhere)."""
        return self.total - self.routed_experts + self.active_routed_experts

    @property
    def linear(self) -> int:
        return self.attention + self.dense_mlp + self.routed_experts + self.shared_experts


def _attention_params(arch: ModelArchitecture) -> tuple[int, int]:
    """(linear weights, biases + extra norms) of one attention block."""
    h, d, heads, kv = arch.hidden_size, arch.head_dim, arch.num_heads, arch.num_kv_heads
    if arch.uses_mla:
        rope, v_dim = arch.qk_rope_head_dim, arch.v_head_dim or d
        nope = d - rope
        rank = arch.kv_lora_rank
        if arch.q_lora_rank:
            q = h * arch.q_lora_rank + arch.q_lora_rank * heads * d
            extra = arch.q_lora_rank  # q_a_layernorm
        else:
            q, extra = h * heads * d, 0
        kv_a = h * (rank + rope)
        kv_b = rank * heads * (nope + v_dim)
        o = heads * v_dim * h
        return q + kv_a + kv_b + o, extra + rank  # kv_a_layernorm
    linear = h * heads * d + 2 * h * kv * d + heads * d * h
    bias = 0
    if arch.qkv_bias or arch.linear_bias:
        bias += (heads + 2 * kv) * d
    if arch.linear_bias:
        bias += h
    return linear, bias


def _mlp_params(width: int, arch: ModelArchitecture) -> tuple[int, int]:
    """(linear weights, biases) of one MLP of hidden width ``width``."""
    h = arch.hidden_size
    if arch.mlp_gated:
        return 3 * h * width, (2 * width + h) if arch.linear_bias else 0
    return 2 * h * width, (width + h) if arch.linear_bias else 0


# cached (ModelArchitecture and DType are frozen, so are the results): the step-cost model asks for the
# same model's counts on every simulated step and every point of a fit
@lru_cache(maxsize=1024)
def param_counts(arch: ModelArchitecture) -> ParamCounts:
    """Parameters by role; see the module docstring for the formula."""
    h = arch.hidden_size
    attn, attn_small = _attention_params(arch)
    norm = 2 * h * (2 if arch.norm_bias else 1)
    dense_layers = arch.num_layers - arch.num_moe_layers
    dense_mlp, dense_bias = _mlp_params(arch.intermediate_size, arch)
    expert, expert_bias = _mlp_params(arch.expert_intermediate_size, arch)
    moe = arch.num_moe_layers
    return ParamCounts(
        embedding=(arch.vocab_size + arch.learned_position_embeddings) * h,
        lm_head=0 if arch.tie_embeddings else arch.vocab_size * h,
        attention=arch.num_layers * attn,
        dense_mlp=dense_layers * dense_mlp,
        routed_experts=moe * arch.num_experts * expert,
        shared_experts=moe * arch.num_shared_experts * expert,
        small=(arch.num_layers * (attn_small + norm) + dense_layers * dense_bias
               + moe * ((arch.num_experts + arch.num_shared_experts) * expert_bias + h * arch.num_experts)
               + h * (2 if arch.norm_bias else 1)),
        active_routed_experts=moe * arch.num_active_experts * expert,
    )


@dataclass(frozen=True)
class Weights:
    """Weight memory of one model in one format (``--json`` keys: weight_bytes, param_count)."""

    model: str
    dtype: str
    param_count: int
    active_param_count: int
    weight_bytes: int
    embedding_bytes: int     # input embedding, positions and output head
    linear_bytes: int
    small_bytes: int
    routed_expert_bytes: int
    lm_head_bytes: int       # the output projection (the embedding matrix itself when tied): read every step
    keep_embeddings_16bit: bool

    def bytes_per_gpu(self, tp: int, dp: int = 1) -> int:
        """Tensor parallel splits linear layers and (vocab-parallel) embeddings; norms are replicated. With
        dp data-parallel attention ranks (an MoE replica, calculators.moe_layout) the routed experts spread
        over all tp x dp GPUs, sharded or whole, and the rest is copied on each rank."""
        if dp == 1:
            return (self.linear_bytes + self.embedding_bytes) // tp + self.small_bytes
        rest = self.linear_bytes - self.routed_expert_bytes + self.embedding_bytes
        return rest // tp + self.routed_expert_bytes // (tp * dp) + self.small_bytes


@lru_cache(maxsize=1024)
def weights(arch: ModelArchitecture, dtype: str | DType = "bf16", *, keep_embeddings_16bit: bool = False) -> Weights:
    """Weight bytes of ``arch`` stored in ``dtype`` (see module docstring for the rule)."""
    dt = dtype if isinstance(dtype, DType) else parse_dtype(dtype)
    counts = param_counts(arch)
    small_bytes_each = dt.bytes_per_element if dt.is_float else 2.0
    experts_only = arch.quantize_experts_only and dt.is_quantized
    embed_bytes_each = (2.0 if (keep_embeddings_16bit or experts_only) and dt.bytes_per_element < 2
                        else dt.bytes_per_element)
    other_linear_each = 2.0 if experts_only else dt.bytes_per_element
    linear_bytes = round(counts.routed_experts * dt.bytes_per_element
                         + (counts.linear - counts.routed_experts) * other_linear_each)
    embedding_bytes = round((counts.embedding + counts.lm_head) * embed_bytes_each)
    small_bytes = round(counts.small * small_bytes_each)
    return Weights(
        model=arch.name,
        dtype=dt.name,
        param_count=counts.total,
        active_param_count=counts.active_per_token,
        weight_bytes=linear_bytes + embedding_bytes + small_bytes,
        embedding_bytes=embedding_bytes,
        linear_bytes=linear_bytes,
        small_bytes=small_bytes,
        routed_expert_bytes=round(counts.routed_experts * dt.bytes_per_element),
        lm_head_bytes=round(arch.vocab_size * arch.hidden_size * embed_bytes_each),
        keep_embeddings_16bit=keep_embeddings_16bit or experts_only,
    )

"""Read a Hugging Face ``config.json`` into a ``ModelArchitecture``.

Understands Llama/Mistral/Qwen2/Mixtral key names (``num_hidden_layers``,
``num_key_value_heads``, ``num_local_experts``...), OPT's (``ffn_dim``,
``enable_bias``, learned positions) and DeepSeek's MLA keys (``kv_lora_rank``...).
Missing ``num_key_value_heads`` means multi-head attention (kv heads = heads), as in
transformers. ``tie_word_embeddings`` defaults to True, transformers' default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine_core.architecture import ModelArchitecture
from contract.checks import positive_int

# our field -> HF keys tried in order
_KEYS = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size",),
}
_UNGATED_TYPES = {"opt", "gpt2", "gpt_neox", "gptj", "falcon", "gpt_bigcode", "bloom"}
_EXPERT_BIAS_TYPES = {"gpt_oss"}   # experts carry gate_up and down biases beside attention's (transformers' GptOss)


def _quantizes_experts_only(config: dict) -> bool:
    """A quantized checkpoint that leaves attention unconverted quantizes its experts only (gpt-oss's
    ``quantization_config.modules_to_not_convert``: self_attn, router, embed_tokens, lm_head)."""
    quant = config.get("quantization_config")
    skipped = quant.get("modules_to_not_convert") if isinstance(quant, dict) else None
    return isinstance(skipped, list) and any("self_attn" in str(name) for name in skipped)


def _first(config: dict, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def _sliding(config: dict, num_layers: int) -> tuple[int | None, int]:
    """(window, layers that use it). Qwen2 uses it only when use_sliding_window is true."""
    window = config.get("sliding_window")
    if window is None or config.get("use_sliding_window") is False:
        return None, 0
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list):
        return window, sum(1 for kind in layer_types if kind == "sliding_attention")
    if "max_window_layers" in config and config.get("model_type", "").startswith("qwen"):
        return window, max(0, num_layers - int(config["max_window_layers"]))
    return window, num_layers


def architecture_from_hf_config(config: dict, name: str = "custom", source: str = "config.json") -> ModelArchitecture:
    """``ModelArchitecture`` from a parsed config.json dict; ValueError names the missing or bad key."""
    if not isinstance(config, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(config).__name__}")
    config = {**config.get("text_config", {}), **config} if isinstance(config.get("text_config"), dict) else config
    values: dict[str, Any] = {}
    for field, keys in _KEYS.items():
        value = _first(config, keys)
        if value is None:
            raise ValueError(f"{source}: missing {field} (one of {', '.join(keys)})")
        values[field] = positive_int(f"{source}: {keys[0]}", value)
    hidden, heads, layers = values["hidden_size"], values["num_heads"], values["num_layers"]
    model_type = str(config.get("model_type", "")).lower()
    kv_heads = config.get("num_key_value_heads")
    if kv_heads is None:
        kv_heads = 1 if config.get("multi_query") else heads
    values["num_kv_heads"] = positive_int(f"{source}: num_key_value_heads", kv_heads)
    mla = config.get("kv_lora_rank") is not None
    if mla:
        nope = positive_int(f"{source}: qk_nope_head_dim", config.get("qk_nope_head_dim"))
        rope = positive_int(f"{source}: qk_rope_head_dim", config.get("qk_rope_head_dim"))
        values.update(head_dim=nope + rope,
                      kv_lora_rank=positive_int(f"{source}: kv_lora_rank", config["kv_lora_rank"]),
                      qk_rope_head_dim=rope, q_lora_rank=config.get("q_lora_rank"),
                      v_head_dim=config.get("v_head_dim"))
    else:
        head_dim = config.get("head_dim")
        if head_dim is None:
            if hidden % heads:
                raise ValueError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
            head_dim = hidden // heads
        values["head_dim"] = positive_int(f"{source}: head_dim", head_dim)
    intermediate = _first(config, ("intermediate_size", "ffn_dim", "n_inner")) or 4 * hidden
    values["intermediate_size"] = positive_int(f"{source}: intermediate_size", intermediate)
    experts = _first(config, ("num_local_experts", "n_routed_experts", "num_experts"))
    if experts:
        values["num_experts"] = positive_int(f"{source}: num_local_experts", experts)
        values["num_active_experts"] = positive_int(f"{source}: num_experts_per_tok",
                                                    config.get("num_experts_per_tok", 2))
        values["moe_intermediate_size"] = config.get("moe_intermediate_size")
        values["num_shared_experts"] = int(config.get("n_shared_experts") or 0)
        values["num_dense_layers"] = int(config.get("first_k_dense_replace") or 0)
    values["sliding_window"], values["num_sliding_window_layers"] = _sliding(config, layers)
    values["tie_embeddings"] = bool(config.get("tie_word_embeddings", True))
    values["max_position_embeddings"] = positive_int(
        f"{source}: max_position_embeddings",
        _first(config, ("max_position_embeddings", "n_positions", "max_sequence_length")) or 2048)
    rope = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    values["rope_theta"] = float(config.get("rope_theta") or rope.get("rope_theta") or 10000.0)
    values["norm_eps"] = float(_first(config, ("rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps")) or 1e-5)
    ungated = model_type in _UNGATED_TYPES or ("ffn_dim" in config and "intermediate_size" not in config)
    values["mlp_gated"] = not ungated
    if model_type == "opt" or ungated:
        values["linear_bias"] = bool(config.get("enable_bias", True))
        values["norm_bias"] = True
        if model_type == "opt":
            values["learned_position_embeddings"] = values["max_position_embeddings"] + 2  # OPT's offset of 2
    else:
        values["qkv_bias"] = bool(config.get("attention_bias", model_type.startswith("qwen2")))
        mlp_bias = bool(config.get("mlp_bias", model_type in _EXPERT_BIAS_TYPES))
        values["linear_bias"] = mlp_bias and values["qkv_bias"]
    values["quantize_experts_only"] = values.get("num_experts", 1) > 1 and _quantizes_experts_only(config)
    try:
        return ModelArchitecture(name=name, **values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: {error}") from None


def load_hf_config(path: str | Path) -> ModelArchitecture:
    """Read ``path`` (a config.json, or a directory holding one); ValueError when missing or malformed."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ValueError(f"model config {str(path)!r} does not exist")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"model config {str(path)!r} is not valid JSON: {error}") from None
    name = str((config.get("_name_or_path") if isinstance(config, dict) else None) or path.parent.name or "custom")
    name = name.rstrip("/").split("/")[-1].lower() or "custom"
    return architecture_from_hf_config(config, name=name, source=str(path))


def load_hf_config_dtype(path: str | Path) -> str | None:
    """The weights' dtype a config.json names (``dtype``, older ``torch_dtype``), e.g. "float32", or the
    4-bit format its ``quantization_config`` stores them in ("mxfp4"); None if none."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
    if str(quant.get("quant_method", "")).lower() in ("mxfp4", "nvfp4"):
        return str(quant["quant_method"]).lower()   # the stored format, not the compute dtype beside it
    value = config.get("dtype") or config.get("torch_dtype") or text.get("dtype") or text.get("torch_dtype")
    return value if isinstance(value, str) else None

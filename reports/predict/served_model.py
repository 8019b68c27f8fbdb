"""Which model the predictions are for, and the KV cache the calculators predict for the engine that served it.

The architecture comes from `--model-config` (an HF config.json, given to `servecap report` or recorded
by `servecap sweep`), else, for the reference server only, from its preset or checkpoint name. An
external --url target is never matched to a preset by its served name ("tiny" on vLLM is not the
reference preset "tiny"): without --model-config its predictions are unavailable, and say why.

KV comparisons (summary.json's `predicted.comparisons`):
- `kv_bytes_per_token`: 2 x layers x kv_heads x head_dim x dtype bytes (calculators.kv) against the
  engine's own, KV memory / (blocks x block size);
- `kv_blocks_total`: the blocks the engine's stated KV memory holds at its block size
  (calculators.kv.kv_blocks_for_memory) against the block count the engine allocated.
The KV dtype is the engine's cache dtype, or the model's own (config.json) where the engine says
"auto" (vLLM's default: the cache takes the weights' dtype).
"""

from __future__ import annotations

from pathlib import Path

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import parse_kv_dtype
from engine_core.hf_config import load_hf_config, load_hf_config_dtype
from calculators.kv import kv_blocks_for_memory, kv_bytes_per_token
from engine_core.models import get_model
from contract.run_json import RunInfo

_UNSTATED = (None, "", "auto", "unknown")


def served_architecture(run: RunInfo, model_config: str | None) -> tuple[ModelArchitecture | None, str]:
    """(architecture, where it came from) or (None, why there is none)."""
    if model_config:
        try:
            return load_hf_config(model_config), f"--model-config {model_config}"
        except ValueError as exc:
            return None, f"--model-config: {exc}"
    if run.target.kind == "url":
        return None, ("the external engine's architecture is not known (its served name is not a preset): "
                      "give --model-config PATH (the model's config.json)")
    if not run.server.model:
        return None, "run.json has no server.model: nothing to predict from"
    name = str(run.server.model)
    if Path(name, "config.json").is_file():
        return load_hf_config(name), f"checkpoint {name}"
    try:
        return get_model(name), f"preset {name}"
    except ValueError as exc:
        return None, str(exc)


def kv_dtype_for(config: dict, model_config: str | None) -> tuple[str | None, str]:
    """(the KV cache's dtype name, how it is known) or (None, why it is not)."""
    stated = config.get("kv_cache_dtype")
    if stated not in _UNSTATED:
        name = "fp8" if str(stated).startswith("fp8") else str(stated)
        return name, f"the engine's cache dtype {stated}"
    dtype = config.get("kv_dtype") or config.get("dtype")
    if dtype not in _UNSTATED:
        return str(dtype), "the engine's dtype"
    from_config = load_hf_config_dtype(model_config) if model_config else None
    if from_config:
        return from_config, f"the model's dtype in its config.json ({from_config}; the engine's cache dtype is auto)"
    return None, "neither the engine nor a --model-config names the KV cache's dtype"


def kv_comparisons(arch: ModelArchitecture, config: dict, kv_dtype: str) -> dict[str, tuple[float | None, float | None, str]]:
    """{quantity: (predicted, the engine's own, unit)} for what the engine's description allows."""
    parse_kv_dtype(kv_dtype)   # a name the calculators cannot size: ValueError, said by the caller
    out = {}
    block_size, blocks = config.get("block_size"), config.get("num_kv_blocks") or config.get("kv_blocks")
    memory = config.get("kv_cache_memory_bytes") or config.get("kv_cache_bytes")
    per_token = kv_bytes_per_token(arch, kv_dtype)
    measured_per_token = memory / (int(blocks) * int(block_size)) if memory and blocks and block_size else None
    out["kv_bytes_per_token"] = (float(per_token), measured_per_token, "bytes")
    if memory and block_size:
        predicted_blocks = kv_blocks_for_memory(arch, int(memory), kv_dtype, int(block_size))
        out["kv_blocks_total"] = (float(predicted_blocks), float(blocks) if blocks else None, "blocks")
    return out

"""Local HF-style checkpoints: `config.json` + `*.safetensors`. Never a hub download.

The model fuses q|k|v and gate|up into single matrices; on disk the tensors keep Llama's
Hugging Face names (`model.layers.0.self_attn.q_proj.weight`, ...), split on save and
concatenated on load, so a real Llama-architecture checkpoint directory loads too.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from engine_core.architecture import ModelArchitecture

CONFIG_FIELDS = {   # HF config.json key -> ModelArchitecture field
    "num_hidden_layers": "num_layers", "hidden_size": "hidden_size", "num_attention_heads": "num_heads",
    "num_key_value_heads": "num_kv_heads", "head_dim": "head_dim", "intermediate_size": "intermediate_size",
    "vocab_size": "vocab_size", "tie_word_embeddings": "tie_embeddings",
    "max_position_embeddings": "max_position_embeddings", "rope_theta": "rope_theta", "rms_norm_eps": "norm_eps",
}


def is_checkpoint_dir(path: str) -> bool:
    return Path(path).is_dir() and (Path(path) / "config.json").is_file()


def read_architecture(path: str | Path) -> ModelArchitecture:
    """The architecture in `path/config.json`; ValueError names a missing or bad field."""
    config_path = Path(path) / "config.json"
    try:
        raw = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read checkpoint config {config_path}: {exc}") from None
    fields: dict = {"name": raw.get("_name_or_path") or Path(path).name}
    for hf_key, field in CONFIG_FIELDS.items():
        if hf_key in raw:
            fields[field] = raw[hf_key]
    rope = raw.get("rope_parameters")   # transformers 5 nests rope_theta here
    if "rope_theta" not in fields and isinstance(rope, dict) and "rope_theta" in rope:
        if rope.get("rope_type", "default") != "default":
            raise ValueError(f"checkpoint config {config_path}: rope_type {rope['rope_type']!r} is not supported "
                             "(the reference model implements plain rotary embeddings)")
        fields["rope_theta"] = rope["rope_theta"]
    if "num_kv_heads" not in fields and "num_heads" in fields:
        fields["num_kv_heads"] = fields["num_heads"]
    if "head_dim" not in fields and "num_heads" in fields and "hidden_size" in fields:
        fields["head_dim"] = fields["hidden_size"] // fields["num_heads"]
    missing = [hf for hf, f in CONFIG_FIELDS.items() if f not in fields and f in
               ("num_layers", "hidden_size", "num_heads", "intermediate_size", "vocab_size")]
    if missing:
        raise ValueError(f"checkpoint config {config_path} lacks {', '.join(missing)}")
    return ModelArchitecture(**fields)


def _hf_names(layer: int) -> dict[str, str]:
    p = f"model.layers.{layer}."
    return {"q": p + "self_attn.q_proj.weight", "k": p + "self_attn.k_proj.weight",
            "v": p + "self_attn.v_proj.weight", "gate": p + "mlp.gate_proj.weight",
            "up": p + "mlp.up_proj.weight"}


def to_hf_state_dict(model_state: dict[str, torch.Tensor], arch: ModelArchitecture) -> dict[str, torch.Tensor]:
    """Our fused parameter names -> Llama HF names (q/k/v and gate/up split)."""
    out: dict[str, torch.Tensor] = {}
    q_size, kv_size = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    for name, tensor in model_state.items():
        tensor = tensor.detach().contiguous()
        if name.startswith("rope_"):
            continue
        if name.endswith("self_attn.qkv_proj.weight"):
            hf = _hf_names(int(name.split(".")[1]))
            q, k, v = tensor.split([q_size, kv_size, kv_size])
            out[hf["q"]], out[hf["k"]], out[hf["v"]] = q.clone(), k.clone(), v.clone()
        elif name.endswith("mlp.gate_up_proj.weight"):
            hf = _hf_names(int(name.split(".")[1]))
            gate, up = tensor.split(arch.intermediate_size)
            out[hf["gate"]], out[hf["up"]] = gate.clone(), up.clone()
        elif name == "lm_head.weight":
            if not arch.tie_embeddings:
                out[name] = tensor
        else:
            out["model." + name] = tensor
    return out


def from_hf_state_dict(hf: dict[str, torch.Tensor], arch: ModelArchitecture) -> dict[str, torch.Tensor]:
    """Llama HF names -> our fused names; ValueError lists missing tensors."""
    state: dict[str, torch.Tensor] = {}
    try:
        for layer in range(arch.num_layers):
            names = _hf_names(layer)
            state[f"layers.{layer}.self_attn.qkv_proj.weight"] = torch.cat([hf[names[k]] for k in ("q", "k", "v")])
            state[f"layers.{layer}.mlp.gate_up_proj.weight"] = torch.cat([hf[names["gate"]], hf[names["up"]]])
            for short in ("self_attn.o_proj.weight", "mlp.down_proj.weight",
                          "input_layernorm.weight", "post_attention_layernorm.weight"):
                state[f"layers.{layer}.{short}"] = hf[f"model.layers.{layer}.{short}"]
        state["embed_tokens.weight"] = hf["model.embed_tokens.weight"]
        state["norm.weight"] = hf["model.norm.weight"]
        state["lm_head.weight"] = hf["model.embed_tokens.weight"] if arch.tie_embeddings else hf["lm_head.weight"]
    except KeyError as exc:
        raise ValueError(f"checkpoint lacks tensor {exc.args[0]!r}") from None
    return state


def load_checkpoint(path: str | Path) -> tuple[ModelArchitecture, dict[str, torch.Tensor]]:
    """(architecture, state dict in our names, on the CPU) from a local directory."""
    arch = read_architecture(path)
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ValueError(f"checkpoint directory {path} has no *.safetensors files")
    hf: dict[str, torch.Tensor] = {}
    for file in files:
        hf.update(load_file(str(file)))
    return arch, from_hf_state_dict(hf, arch)


def save_checkpoint(path: str | Path, arch: ModelArchitecture, model_state: dict[str, torch.Tensor]) -> None:
    """Write `config.json` + `model.safetensors` (HF Llama layout) into `path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": arch.name}
    config.update({hf: getattr(arch, field) for hf, field in CONFIG_FIELDS.items()})
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tensors = {k: v.cpu().contiguous() for k, v in to_hf_state_dict(model_state, arch).items()}
    save_file(tensors, str(path / "model.safetensors"))

"""Where a LoRA adapter comes from, checked before anything loads: json only, no torch.

    adapter_rank(name, source, max_lora_rank) -> its rank; ValueError names the adapter and the problem

A source is "random" (rank max_lora_rank), "random:RANK", or a PEFT directory whose
adapter_config.json gives `r` beside at least one *.safetensors file. `servecap serve` checks every
source with this at flag time, so a bad adapter exits 2 instead of failing the engine's start.
"""

from __future__ import annotations

import json
from pathlib import Path


def peft_config(name: str, directory: str) -> dict:
    path = Path(directory)
    if not path.is_dir():
        raise ValueError(f"lora_modules: adapter {name!r}: {directory} is not a directory")
    try:
        config = json.loads((path / "adapter_config.json").read_text())
        int(config["r"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"lora_modules: adapter {name!r}: cannot read {path / 'adapter_config.json'} "
                         f"({exc.__class__.__name__}: {exc})") from None
    if int(config["r"]) < 1:
        raise ValueError(f"lora_modules: adapter {name!r}: adapter_config.json's r must be a positive rank, "
                         f"got {config['r']!r}")
    if config.get("use_rslora") or config.get("use_dora"):
        raise ValueError(f"lora_modules: adapter {name!r}: rsLoRA and DoRA adapters are not served "
                         "(plain LoRA, scaled by lora_alpha / r)")
    if not any(path.glob("*.safetensors")):
        raise ValueError(f"lora_modules: adapter {name!r}: {directory} has no *.safetensors file")
    return config


def adapter_rank(name: str, source: str, max_lora_rank: int) -> int:
    if source == "random":
        rank = max_lora_rank
    elif source.startswith("random:"):
        text = source.removeprefix("random:")
        rank = int(text) if text.isdigit() else 0
        if rank < 1:
            raise ValueError(f"lora_modules: adapter {name!r}: random:RANK needs a positive rank, got {text!r}")
    else:
        rank = int(peft_config(name, source)["r"])
    if rank > max_lora_rank:
        raise ValueError(f"lora_modules: adapter {name!r} has rank {rank}, above max_lora_rank {max_lora_rank}")
    return rank

"""Model catalog: named architectures, looked up case-insensitively.

The catalog is data (catalog/models.json); this module only parses it into
`ModelArchitecture` objects. Reading the packaged JSON is the one I/O allowed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from functools import lru_cache
from importlib import resources

from engine_core.architecture import ModelArchitecture
from engine_core.hf_config import load_hf_config


@lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelArchitecture]:
    raw = json.loads(resources.files("engine_core").joinpath("catalog/models.json").read_text())
    return {
        name: ModelArchitecture(name=name, **fields)
        for name, fields in raw.items()
        if not name.startswith("_")
    }


def model_names() -> list[str]:
    return sorted(_catalog())


def get_model(name: str) -> ModelArchitecture:
    """The catalog architecture called `name` (case-insensitive); ValueError names the choices."""
    key = name.strip().lower()
    try:
        return _catalog()[key]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r}; known models: {', '.join(model_names())}"
        ) from None


def resolve_model(name_or_path: str | ModelArchitecture) -> ModelArchitecture:
    """A catalog name, a path to a Hugging Face config.json (or its directory), or an architecture as is."""
    if isinstance(name_or_path, ModelArchitecture):
        return name_or_path
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise ValueError(f"model must be a catalog name or a config.json path, got {name_or_path!r}")
    if name_or_path.strip().lower() in _catalog():
        return get_model(name_or_path)
    if name_or_path.endswith(".json") or "/" in name_or_path or Path(name_or_path).exists():
        return load_hf_config(name_or_path)
    return get_model(name_or_path)

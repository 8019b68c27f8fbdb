"""Model catalog: named architectures, looked up case-insensitively.

The catalog is data (catalog/models.json); this module only parses it into
`ModelArchitecture` objects. Reading the packaged JSON is the one I/O allowed here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from calculators.architecture import ModelArchitecture


@lru_cache(maxsize=1)
def _catalog() -> dict[str, ModelArchitecture]:
    raw = json.loads(resources.files("calculators").joinpath("catalog/models.json").read_text())
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

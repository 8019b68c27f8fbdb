"""Which model each request asks for: a weighted mix of names, or a Zipf over N adapters.

    mix = parse_model_mix("sql:0.5,chat:0.3,base:0.2")   names and weights (normalized)
    mix = parse_model_mix("zipf:64:1.1")                  lora-1 ... lora-64 (what `servecap serve
                                                          --random-loras 64` serves), weight 1 / rank^1.1
    mix.pick(rng, base="tiny") -> the model name for one request ("base" is the server's base model)

Real tenant mixes are skewed (a few adapters take most requests, a long tail the rest), which a Zipf
law describes with one exponent; the exponent defaults to 1. Picks come from the request's seeded RNG,
so a run's sequence of models is reproducible; the simulator draws from the same mix (`draw_many`).
Pure: numpy only, no I/O (the load generator and the calculators both import it).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass

import numpy as np

BASE = "base"   # in a mix: the server's base model, whatever its name


@dataclass(frozen=True)
class ModelMix:
    names: tuple[str, ...]
    cumulative: tuple[float, ...]   # rising to 1.0

    def pick(self, rng: random.Random, base: str) -> str:
        name = self.names[min(bisect.bisect_right(self.cumulative, rng.random()), len(self.names) - 1)]
        return base if name == BASE else name

    def draw_many(self, rng, n: int) -> list[str]:
        """`n` names at once from a numpy Generator ("base" left as it is: the caller's base model)."""
        picks = np.searchsorted(np.asarray(self.cumulative), rng.random(n), side="right")
        return [self.names[min(int(i), len(self.names) - 1)] for i in picks]

    def share(self, name: str) -> float:
        i = self.names.index(name)
        return self.cumulative[i] - (self.cumulative[i - 1] if i else 0.0)


def _zipf(spec: str) -> ModelMix:
    parts = spec.split(":")[1:]
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"--model-mix {spec!r}: expected zipf:N or zipf:N:EXPONENT")
    try:
        count, exponent = int(parts[0]), float(parts[1]) if len(parts) == 2 else 1.0
    except ValueError:
        raise ValueError(f"--model-mix {spec!r}: N must be an integer and EXPONENT a number") from None
    if count < 1 or not (math.isfinite(exponent) and exponent >= 0):
        raise ValueError(f"--model-mix {spec!r}: N must be >= 1 and EXPONENT >= 0")
    weights = [1.0 / (k ** exponent) for k in range(1, count + 1)]
    return _normalized([f"lora-{k}" for k in range(1, count + 1)], weights)


def _normalized(names: list[str], weights: list[float]) -> ModelMix:
    total = sum(weights)
    cumulative = [w / total for w in itertools.accumulate(weights)]
    cumulative[-1] = 1.0
    return ModelMix(tuple(names), tuple(cumulative))


def mix_of(weights: dict[str, float]) -> ModelMix:
    """A mix from {name: weight} (e.g. the counts a run measured), in the dict's order."""
    if not weights or any(not (math.isfinite(w) and w > 0) for w in weights.values()):
        raise ValueError("a model mix needs at least one name, every weight > 0")
    return _normalized(list(weights), list(weights.values()))


def parse_model_mix(spec: str) -> ModelMix:
    """ValueError names the part of `spec` that is wrong."""
    spec = spec.strip()
    if spec.startswith("zipf:"):
        return _zipf(spec)
    names, weights = [], []
    for part in spec.split(","):
        name, sep, weight = part.strip().rpartition(":")
        if not sep or not name:
            raise ValueError(f"--model-mix {part.strip()!r}: expected NAME:WEIGHT (e.g. sql:0.5,base:0.5) or zipf:N")
        try:
            value = float(weight)
        except ValueError:
            raise ValueError(f"--model-mix {part.strip()!r}: the weight must be a number") from None
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"--model-mix {part.strip()!r}: the weight must be > 0")
        if name in names:
            raise ValueError(f"--model-mix: {name!r} is given twice")
        names.append(name)
        weights.append(value)
    return _normalized(names, weights)

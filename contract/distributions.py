"""Token-length distributions for `--prompt-tokens` / `--output-tokens`.

Spec strings (every value is in tokens):

    128                 every request the same length
    uniform:64:512      integers in [64, 512], both ends included
    normal:256:64       mean 256, standard deviation 64, clamped to >= 1
    lognormal:256:0.5   mean 256 of the lengths; 0.5 is sigma of the underlying normal
                        (mu = ln(mean) - sigma^2 / 2), rounded, >= 1
    file:PATH           lengths read from PATH (one positive integer per line, '#' comments),
                        drawn uniformly with replacement

Sampling takes a `random.Random`, so a seed plus a request's index gives the same
length on every run and every worker. The simulator draws its lengths many at once with
`sample_array` (a numpy Generator): the same distribution, other draws.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from contract.checks import non_negative_number, positive_int

KINDS = ("fixed", "uniform", "normal", "lognormal", "file")
_PARAMS = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2, "file": 0}


@dataclass(frozen=True)
class LengthDistribution:
    """One of the module doc's distributions: `params` are (length,), (low, high), (mean, sd) or
    (mean, sigma); kind "file" draws from `values`. `parse_length_distribution` builds it from a spec
    and names the option in its errors; built directly, it is checked here."""

    kind: str
    params: tuple[float, ...] = ()
    values: tuple[int, ...] = field(default=(), repr=False)  # only for kind "file"
    spec: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.params) != _PARAMS[self.kind]:
            raise ValueError(f"length {self.kind} takes {_PARAMS[self.kind]} parameters, got {self.params!r}")
        if self.kind == "fixed":
            positive_int("length", self.params[0])
        elif self.kind == "uniform":
            low, high = positive_int("length low", self.params[0]), positive_int("length high", self.params[1])
            if high < low:
                raise ValueError(f"length high ({high}) must be >= low ({low})")
        elif self.kind in ("normal", "lognormal"):
            mean = self.params[0]
            if not (isinstance(mean, (int, float)) and math.isfinite(mean) and mean >= 1):
                raise ValueError(f"length {self.kind} mean must be >= 1, got {mean!r}")
            non_negative_number(f"length {self.kind} spread", self.params[1])
        else:
            if not self.values or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0
                                      for v in self.values):
                raise ValueError("length values must be positive integers")
            object.__setattr__(self, "values", tuple(int(v) for v in self.values))

    @classmethod
    def fixed(cls, tokens: int) -> LengthDistribution:
        return cls("fixed", (tokens,), spec=str(tokens))

    @classmethod
    def uniform(cls, low: int, high: int) -> LengthDistribution:
        return cls("uniform", (low, high), spec=f"uniform:{low}:{high}")

    @classmethod
    def from_values(cls, values) -> LengthDistribution:
        """Drawn from `values` with replacement, as a lengths file's are."""
        return cls("file", (), tuple(values))

    def sample(self, rng: random.Random) -> int:
        kind, p = self.kind, self.params
        if kind == "fixed":
            return int(p[0])
        if kind == "uniform":
            return rng.randint(int(p[0]), int(p[1]))
        if kind == "normal":
            return max(1, round(rng.gauss(p[0], p[1])))
        if kind == "lognormal":
            return max(1, round(rng.lognormvariate(_log_mu(*p), p[1])))
        return self.values[rng.randrange(len(self.values))]

    def sample_array(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n lengths [n] (int64) drawn at once, as `sample` draws one."""
        kind, p = self.kind, self.params
        if kind == "fixed":
            return np.full(n, p[0], dtype=np.int64)
        if kind == "uniform":
            return rng.integers(p[0], p[1] + 1, size=n, dtype=np.int64)
        if kind == "normal":
            return np.maximum(1, np.rint(rng.normal(p[0], p[1], n))).astype(np.int64)
        if kind == "lognormal":
            return np.maximum(1, np.rint(rng.lognormal(_log_mu(*p), p[1], n))).astype(np.int64)
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=n)

    @property
    def mean(self) -> float:
        """Expected length (before clamping for normal/lognormal)."""
        if self.kind == "fixed":
            return self.params[0]
        if self.kind == "uniform":
            return (self.params[0] + self.params[1]) / 2
        if self.kind in ("normal", "lognormal"):
            return self.params[0]
        return sum(self.values) / len(self.values)


def _log_mu(mean: float, sigma: float) -> float:
    """mu of the underlying normal that gives lognormal lengths of mean `mean`: ln(mean) - sigma^2 / 2."""
    return math.log(mean) - sigma * sigma / 2


def _number(text: str, what: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{option}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{option}: {what} must be finite, got {text!r}")
    return value


def _positive_int(text: str, what: str, option: str) -> int:
    value = _number(text, what, option)
    if value != int(value) or value < 1:
        raise ValueError(f"{option}: {what} must be a whole number >= 1, got {text!r}")
    return int(value)


def _read_lengths_file(path_text: str, option: str) -> tuple[int, ...]:
    path = Path(path_text)
    if not path.is_file():
        raise ValueError(f"{option}: lengths file {path_text!r} does not exist")
    values = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            values.append(_positive_int(text, "length", option))
        except ValueError:
            raise ValueError(
                f"{option}: {path_text} line {number}: {text!r} is not a whole number >= 1"
            ) from None
    if not values:
        raise ValueError(f"{option}: lengths file {path_text!r} holds no lengths")
    return tuple(values)


def parse_length_distribution(spec: str, option: str = "--prompt-tokens") -> LengthDistribution:
    """Parse a spec string (see module doc); ValueError names the option and the problem."""
    text = str(spec).strip()
    if not text:
        raise ValueError(f"{option}: empty length spec")
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    if not rest:
        return LengthDistribution("fixed", (_positive_int(text, "length", option),), spec=text)
    if kind == "file":
        return LengthDistribution("file", (), _read_lengths_file(rest, option), spec=text)
    parts = rest.split(":")
    if kind not in ("uniform", "normal", "lognormal"):
        raise ValueError(
            f"{option}: unknown distribution {kind!r} in {text!r}; use N, uniform:LO:HI, "
            "normal:MEAN:SD, lognormal:MEAN:SIGMA or file:PATH"
        )
    if len(parts) != 2:
        raise ValueError(f"{option}: {kind} takes two values ({kind}:A:B), got {text!r}")
    if kind == "uniform":
        low = _positive_int(parts[0], "low", option)
        high = _positive_int(parts[1], "high", option)
        if high < low:
            raise ValueError(f"{option}: uniform high {high} is below low {low}")
        return LengthDistribution("uniform", (low, high), spec=text)
    mean = _number(parts[0], "mean", option)
    spread = _number(parts[1], "sd" if kind == "normal" else "sigma", option)
    if mean < 1:
        raise ValueError(f"{option}: {kind} mean must be >= 1, got {parts[0]!r}")
    if spread < 0:
        raise ValueError(f"{option}: {kind} spread must be >= 0, got {parts[1]!r}")
    return LengthDistribution(kind, (mean, spread), spec=text)

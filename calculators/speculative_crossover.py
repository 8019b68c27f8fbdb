"""Where speculative decoding stops paying, read off two curves over the same load levels. Pure.

    crossover(levels, plain_tpot, speculative_tpot, plain_tokens_per_s, speculative_tokens_per_s)

The TPOT crossover is the first level (in the order given, rising load) at which speculation's
TPOT p50 is no lower than without it; the throughput crossover the first at which its output
tokens/s is no higher. At a fixed batch the two are the same level; over a closed loop's users or
an open loop's rate they may part, since speculation finishes requests sooner and so changes the
batch a level runs at. A curve's missing point (None) decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Crossover:
    axis: str                      # what a level is: "concurrency", "rate", "batch"
    tpot_level: float | None       # the first level where speculation's TPOT is no lower (None: never asked)
    throughput_level: float | None  # the first level where its tokens/s is no higher

    def statement(self) -> str:
        def at(level):
            return f"{self.axis} {level:g}"

        tpot = ("speculation lowers TPOT at every level measured" if self.tpot_level is None else
                f"speculation stops lowering TPOT at {at(self.tpot_level)}")
        tokens = ("raises tokens/s at every level" if self.throughput_level is None else
                  f"stops raising tokens/s at {at(self.throughput_level)}")
        return f"{tpot}; it {tokens}"


def _first(levels, plain, speculative, worse) -> float | None:
    for level, a, b in zip(levels, plain, speculative):
        if a is not None and b is not None and worse(a, b):
            return level
    return None


def crossover(axis: str, levels, plain_tpot, speculative_tpot, plain_tokens_per_s,
              speculative_tokens_per_s) -> Crossover:
    levels = list(levels)
    if any(len(curve) != len(levels) for curve in (plain_tpot, speculative_tpot, plain_tokens_per_s,
                                                    speculative_tokens_per_s)):
        raise ValueError("each curve needs one value per level")
    return Crossover(axis, _first(levels, plain_tpot, speculative_tpot, lambda plain, spec: spec >= plain),
                     _first(levels, plain_tokens_per_s, speculative_tokens_per_s, lambda plain, spec: spec <= plain))

"""The slice plan of a compare run. Pure: no I/O, no clock.

Slices are numbered across the whole run (0, 1, 2, ...). Pair p is two consecutive
slices, one per arm, in an order drawn for that pair (AB or BA, seeded), so neither arm
always goes first after a switch. Both slices of a pair share one request seed: they
send the same sequence of prompts and lengths (request k of the slice is drawn from
`random.Random(f"{seed}/{k}")` in either arm). Warm-up slices precede the pairs; their
records are phase "warmup".
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

ARMS = ("a", "b")


@dataclass(frozen=True)
class Slice:
    """One slice: `arm` gets the load for `duration_s`; requests use `seed`.

    Attributes:
        index: the slice number within the run (records carry it as `slice`).
        pair: the pair it belongs to (None for a warm-up slice).
        arm: "a" or "b".
        seed: request-sequence seed, shared by the two slices of a pair.
        duration_s: how long new requests are sent (the drain comes after).
        phase: "warmup" or "measure".
    """

    index: int
    pair: int | None
    arm: str
    seed: int
    duration_s: float
    phase: str

    def to_dict(self) -> dict:
        return asdict(self)


def pair_seed(run_seed: int, pair: int) -> int:
    return random.Random(f"{run_seed}/pair/{pair}").getrandbits(31)


def pair_order(run_seed: int, pair: int) -> tuple[str, str]:
    """("a", "b") or ("b", "a"), drawn per pair from the run seed."""
    return ARMS if random.Random(f"{run_seed}/order/{pair}").random() < 0.5 else ARMS[::-1]


def warmup_slices(first_index: int, duration_s: float, run_seed: int) -> list[Slice]:
    """One warm-up slice per arm (A then B), each with its own seed."""
    return [Slice(first_index + i, None, arm, pair_seed(run_seed, -1 - i), duration_s, "warmup")
            for i, arm in enumerate(ARMS)]


def pair_slices(first_pair: int, count: int, first_index: int, duration_s: float, run_seed: int) -> list[Slice]:
    """`count` pairs starting at pair `first_pair`, numbered from slice `first_index`."""
    if duration_s <= 0:
        raise ValueError(f"slice length must be positive, got {duration_s!r}")
    slices = []
    for pair in range(first_pair, first_pair + count):
        seed = pair_seed(run_seed, pair)
        for arm in pair_order(run_seed, pair):
            slices.append(Slice(first_index + len(slices), pair, arm, seed, duration_s, "measure"))
    return slices


def slice_length(median_e2e_s: float | None, *, minimum_s: float = 2.0, e2e_multiple: float = 5.0) -> float:
    """At least `e2e_multiple` x the median E2E (so a slice holds many whole requests) and `minimum_s`."""
    if median_e2e_s is None or median_e2e_s != median_e2e_s:   # None or NaN: the warm-up measured nothing
        return minimum_s
    return max(minimum_s, e2e_multiple * median_e2e_s)

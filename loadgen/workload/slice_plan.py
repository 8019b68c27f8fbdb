"""The slice plan of a compare run, and the file the compare driver hands to Locust. Pure: no clock.

Slices are numbered across the whole run (0, 1, 2, ...). Pair p is two consecutive
slices, one per arm, in an order drawn for that pair (AB or BA, seeded), so neither arm
always goes first after a switch. Both slices of a pair share one request seed: they
send the same sequence of prompts and lengths (request k of the slice is drawn from
`random.Random(f"{seed}/{k}")` in either arm). Warm-up slices precede the pairs; their
records are phase "warmup".

Two schedules (`SCHEDULES`):
- "interleaved": the two slices of a pair run one after the other, so slow drift hits
  both arms alike (randomized interleaved trials, Abedi & Brecht 2017);
- "duet": the two slices of a pair run at the same time, each arm with its own users on
  the same cores, so even the fast drift (another tenant of the host, a frequency step)
  hits both arms at once (duet benchmarking, Bulej et al. 2020). Each arm then runs beside
  the other: its absolute figures include that contention; its ratio to the other is the
  measurement. On this 2-core VM, in `servecap compare` at 4 users per arm, the per-pair SD
  of log(B/A) p50 TPOT was 1.1-2.9% in duet against 12.5-14.0% interleaved, minutes apart.

The plan file (`--slice-plan PATH`, JSON) is what one Locust process runs: the arms'
URLs, models and server PIDs, the schedule, the slices in order, what happens at a
switch, and where to log each slice as it ends (`slices.jsonl`). Records carry
`<arm>/<--level>`.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

ARMS = ("a", "b")
AT_SWITCH = ("drain", "exclude")
SCHEDULES = ("interleaved", "duet")


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


@dataclass(frozen=True)
class ArmRoute:
    """Where one arm's load goes: its URL, the model name to send, the PIDs whose CPU time is its cost."""

    url: str
    model: str
    pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class SlicePlan:
    """Everything one Locust process needs to run a batch of slices.

    Attributes:
        arms: "a" and "b" -> ArmRoute.
        slices: run in order; each is sent load for its duration, then drained or cut.
        schedule: "interleaved" (one slice at a time) or "duet" (each pair's two slices, and
            the two warm-up slices, at the same time).
        at_switch: "drain" (requests in flight at the switch finish before the next slice
            starts; their records say switch "drained") or "exclude" (they are cut off and
            recorded as incomplete, switch "excluded").
        drain_timeout_s: a drain that takes longer cuts the rest off ("excluded").
        slices_log: append one JSON line per finished slice here (slices.jsonl).
    """

    arms: dict[str, ArmRoute]
    slices: tuple[Slice, ...]
    at_switch: str = "drain"
    drain_timeout_s: float = 30.0
    slices_log: str | None = None
    schedule: str = "interleaved"

    def __post_init__(self) -> None:
        if set(self.arms) != set(ARMS):
            raise ValueError(f"a slice plan needs arms a and b, got {sorted(self.arms)}")
        if self.at_switch not in AT_SWITCH:
            raise ValueError(f"at_switch must be one of {AT_SWITCH}, got {self.at_switch!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not self.slices:
            raise ValueError("a slice plan needs at least one slice")
        unknown = {s.arm for s in self.slices} - set(ARMS)
        if unknown:
            raise ValueError(f"slices name unknown arms: {sorted(unknown)}")
        if not self.drain_timeout_s > 0:
            raise ValueError(f"drain_timeout_s must be positive, got {self.drain_timeout_s!r}")

    def groups(self) -> list[tuple[Slice, ...]]:
        """The slices that run at the same time, in order: one each when interleaved; in a duet the
        consecutive slices of one pair (or of the warm-up), one per arm."""
        if self.schedule == "interleaved":
            return [(s,) for s in self.slices]
        groups: list[list[Slice]] = []
        for s in self.slices:
            last = groups[-1] if groups else None
            if last and (last[0].pair, last[0].phase) == (s.pair, s.phase) and s.arm not in {x.arm for x in last}:
                last.append(s)
            else:
                groups.append([s])
        return [tuple(group) for group in groups]

    def to_json(self) -> str:
        return json.dumps({"schedule": self.schedule, "at_switch": self.at_switch,
                           "drain_timeout_s": self.drain_timeout_s,
                           "slices_log": self.slices_log,
                           "arms": {arm: {"url": r.url, "model": r.model, "pids": list(r.pids)}
                                    for arm, r in self.arms.items()},
                           "slices": [s.to_dict() for s in self.slices]}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "SlicePlan":
        """ValueError naming what is wrong with the file's content."""
        try:
            data = json.loads(text)
            arms = {arm: ArmRoute(str(r["url"]), str(r["model"]), tuple(int(p) for p in r.get("pids") or ()))
                    for arm, r in data["arms"].items()}
            slices = tuple(Slice(**s) for s in data["slices"])
            return cls(arms=arms, slices=slices, at_switch=data.get("at_switch", "drain"),
                       drain_timeout_s=float(data.get("drain_timeout_s", 30.0)), slices_log=data.get("slices_log"),
                       schedule=data.get("schedule", "interleaved"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"--slice-plan: not a slice plan ({type(exc).__name__}: {exc})") from None

    @classmethod
    def read(cls, path: str | Path) -> "SlicePlan":
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"--slice-plan: cannot read {path}: {exc}") from None
        return cls.from_json(text)

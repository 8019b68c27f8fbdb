"""A canary rollout: a second version's pool takes a weighted share of the requests, the weight moving
on a schedule over the day, and each version is judged and priced on its own share.

    schedule = CanarySchedule.parse("0:0.05,3600:0.1,7200:0.25")
    canary = plan_canary(demand, primary_config, canary_config, schedule, slo, window_s=300)

The split is what a weighted proxy does (nginx's `split_clients`, a KServe or Gateway API traffic
split): each request goes to the canary with probability w(t), the weight in force at its send
time, independently of the others (a seeded draw per request, on a stream of its own so that the
split does not move when the pools change). The two pools share nothing after the split, so each
is its own fleet run (its router, its replicas, the primary's autoscaler and faults) over its own
share, and the whole is the two runs merged back into the demand's order: the attainment a user
sees over both versions, and the cost of both pools.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from calculators.plan.demand import Demand
from calculators.plan.fleet import FleetConfig
from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.outcome import Outcome, PlanSlo, outcome
from calculators.plan.planner import Judged, judge

SPLIT_STREAM = 0xCA9A   # the split's own seed stream (beside the demand's and the router's)


@dataclass(frozen=True)
class CanarySchedule:
    """The canary's weight over time: (t_s, weight) steps, the first at t = 0; each weight holds until
    the next step's time. A weight is the canary's share in [0, 1]; the primary takes the rest."""

    steps: tuple[tuple[float, float], ...]
    one_sided: bool = False   # may send every request one way (a shadow's mirror at 100%); a canary may not

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a canary schedule needs at least one weight")
        if self.steps[0][0] != 0:
            raise ValueError(f"a canary schedule starts at t = 0 (its first step is at {self.steps[0][0]:g} s)")
        for (t0, _), (t1, _) in zip(self.steps, self.steps[1:]):
            if not t1 > t0:
                raise ValueError(f"a canary schedule's times must rise: {t1:g} s after {t0:g} s")
        for t, w in self.steps:
            if not (math.isfinite(t) and 0 <= w <= 1):
                raise ValueError(f"a canary weight is the canary's share in [0, 1], got {w:g} at {t:g} s")
        weights = {w for _, w in self.steps}
        if not self.one_sided and (weights <= {0.0} or weights <= {1.0}):
            raise ValueError(f"a canary schedule of weight {self.steps[0][1]:g} throughout sends every request to "
                             "one version")

    @classmethod
    def parse(cls, text: str, flag: str = "--canary-weight") -> CanarySchedule:
        """"0.1" (one weight all day) or "T:W,T:W,..." (T seconds from the demand's start, the first 0);
        a bad value raises ValueError naming `flag`."""
        try:
            steps = tuple((float(t), float(w)) if sep else (0.0, float(t))
                          for t, sep, w in (part.partition(":") for part in str(text).split(",")))
        except ValueError as exc:
            raise ValueError(f"{flag} {text!r}: not a weight or T:W steps ({exc})") from None
        try:
            return cls(steps)
        except ValueError as exc:
            raise ValueError(f"{flag} {text!r}: {exc}") from None

    def weight_at(self, t_s: np.ndarray) -> np.ndarray:
        """The canary's weight in force at each of `t_s`."""
        times = np.array([t for t, _ in self.steps])
        weights = np.array([w for _, w in self.steps])
        return weights[np.searchsorted(times, np.asarray(t_s, dtype=np.float64), side="right") - 1]

    def describe(self) -> str:
        if len(self.steps) == 1:
            return f"{self.steps[0][1]:.0%} of requests"
        return ", ".join(f"{w:.0%} from {t:,.0f} s" for t, w in self.steps)


def canary_mask(demand: Demand, schedule: CanarySchedule, seed: int) -> np.ndarray:
    """bool per request: sent to the canary (a draw under the weight in force at its send time)."""
    draws = np.random.default_rng([seed, SPLIT_STREAM]).random(len(demand))
    return draws < schedule.weight_at(demand.t_s)


def check_split(demand: Demand, schedule: CanarySchedule, seed: int) -> np.ndarray:
    """The split's mask; ValueError when it leaves a version no request (its attainment would be no
    figure at all)."""
    mask = canary_mask(demand, schedule, seed)
    for name, count in (("primary", int((~mask).sum())), ("canary", int(mask.sum()))):
        if not count:
            raise ValueError(f"the canary schedule ({schedule.describe()}) leaves the {name} no request of the "
                             f"{len(demand):,}")
    return mask


def merge_runs(parts: list[tuple[FleetRun, np.ndarray]], n: int) -> FleetRun:
    """One run over the whole demand from runs over disjoint parts of it (`indices` into the demand, in
    order): the requests back in the demand's order, every replica's life (ids renumbered after the
    first part's), the decisions of the first part (the autoscaled pool's)."""
    def gather(name: str, fill, dtype) -> np.ndarray | None:
        if all(getattr(run, name) is None for run, _ in parts):
            return None
        out = np.full(n, fill, dtype=dtype)
        for run, idx in parts:
            value = getattr(run, name)
            out[idx] = value if value is not None else (run.first_token_s if name == "first_answer_s" else fill)
        return out

    lives: list[ReplicaLife] = []
    replica = np.full(n, -1, dtype=np.int64)
    for run, idx in parts:
        offset = len(lives)
        lives += [ReplicaLife(**{**life.__dict__, "id": life.id + offset}) for life in run.lives]
        replica[idx] = np.where(run.replica >= 0, run.replica + offset, -1)
    return FleetRun(send_s=gather("send_s", math.nan, np.float64), first_token_s=gather("first_token_s", math.inf, np.float64),
                    end_s=gather("end_s", math.inf, np.float64), output=gather("output", 0, np.int64), replica=replica,
                    retried=gather("retried", False, bool), lives=lives, decisions=list(parts[0][0].decisions),
                    horizon_s=max(run.horizon_s for run, _ in parts), lost=gather("lost", False, bool),
                    first_answer_s=gather("first_answer_s", math.inf, np.float64),
                    errored=gather("errored", False, bool))


@dataclass(frozen=True)
class CanaryPlan:
    """Each version on its share, and both together (attainment over every request; cost of both pools)."""

    schedule: CanarySchedule
    mask: np.ndarray            # bool per request of the demand: the canary's
    primary: Judged
    canary: Judged
    both: Outcome
    draws: tuple[tuple[float | None, float | None], ...] = ()   # (primary, canary) attainment per split drawn

    def attainment_over_draws(self, version: str) -> dict | None:
        """A version's attainment over the split's draws (this plan's first): median, min, max, how many."""
        values = [row[0 if version == "primary" else 1] for row in self.draws]
        values = [v for v in values if v is not None]
        if not values:
            return None
        return {"median": float(np.median(values)), "min": min(values), "max": max(values), "draws": len(values)}

    @property
    def usd(self) -> float | None:
        costs = (self.primary.outcome.usd, self.canary.outcome.usd)
        return None if None in costs else sum(costs)

    @property
    def usd_per_day(self) -> float | None:
        """Each pool's cost a day (its cost over its own run's span), added."""
        days = (self.primary.outcome.usd_per_day, self.canary.outcome.usd_per_day)
        return None if None in days else sum(days)

    @property
    def gpu_hours(self) -> float:
        return self.primary.outcome.gpu_hours + self.canary.outcome.gpu_hours


def plan_canary(demand: Demand, primary: FleetConfig, canary: FleetConfig, schedule: CanarySchedule,
                slo: PlanSlo, *, window_s: float, seed: int, splits: int = 1,
                on_progress: Callable[[str], None] | None = None) -> CanaryPlan:
    """Split `demand` by `schedule` and run each version's pool on its share (`primary` may autoscale
    and carry faults; `canary` is its own config). A version given no request is refused (`check_split`).

    `splits` > 1: the split is drawn again splits - 1 times (seeds seed + 1, ...) and each version's
    attainment kept per draw (`draws`). A proxy draws its split afresh in every run, and a canary's
    windows hold few requests, so which ones land there moves its attainment as much as the pools do:
    the draws' median is the figure a run is likeliest near, their range the luck of one run."""
    mask = check_split(demand, schedule, seed)
    shares = (np.flatnonzero(~mask), np.flatnonzero(mask))
    if on_progress:
        on_progress(f"primary: {len(shares[0]):,} requests; canary: {len(shares[1]):,}")
    first = _judge_shares(demand, shares, (primary, canary), slo, window_s)
    both = outcome(merge_runs([(j.run, idx) for j, idx in zip(first, shares)], len(demand)), slo, window_s=window_s)
    draws = [first]
    for k in range(1, splits):
        if on_progress:
            on_progress(f"the split drawn again: {k + 1} of {splits}")
        redrawn = canary_mask(demand, schedule, seed + k)
        draws.append(_judge_shares(demand, (np.flatnonzero(~redrawn), np.flatnonzero(redrawn)), (primary, canary),
                                   slo, window_s))
    attainments = tuple(tuple(None if j is None else j.outcome.attainment for j in draw) for draw in draws)
    return CanaryPlan(schedule, mask, first[0], first[1], both, attainments)


def _judge_shares(demand: Demand, shares: tuple[np.ndarray, np.ndarray], configs: tuple[FleetConfig, FleetConfig],
                  slo: PlanSlo, window_s: float) -> tuple[Judged | None, Judged | None]:
    """Each version's pool run on its share (None: a share with no request)."""
    return tuple(judge(demand.select(idx), config, slo, window_s=window_s) if len(idx) else None
                 for idx, config in zip(shares, configs))

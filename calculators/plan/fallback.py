"""A fallback tier: a proxy in front of the primary pool's router sends a request to a fallback pool (a
smaller model, say) when the primary is full or has answered it an error, and every answer is counted by
the tier that gave it.

    rule = FallbackRule.parse("depth:32,errors")
    split = plan_fallback(demand, primary_config, fallback_config, rule, slo, window_s=300)

The rule is nginx's, the proxy the fleet runs it with (servecap.fleet.fallback_proxy): an upstream of
the primary's router with `max_conns=N` and the fallback's router as its `backup`, `max_fails=0` on both.
- **depth:N**: a request that arrives while the proxy already holds N requests open to the primary (sent,
  their answer not yet wholly passed back) goes to the fallback. nginx skips a peer at its `max_conns`
  and, with no primary peer left, takes the backup.
- **errors**: a request the primary's router answers with one of `FALLBACK_STATUSES` (after the router's
  own retries) is sent again to the fallback at that moment (`proxy_next_upstream` with those statuses
  and `non_idempotent`: a POST is re-sent). Without it an error is the client's answer.
`max_fails=0` keeps nginx from marking the primary down after a failure (its default marks it down for
10 s after one): each request is decided on its own, as here. The backup has no limit, so the proxy sheds
nothing; the fallback pool queues what it is given.

The decision reads only the primary's state, never the fallback's, so the primary's run (with the gate:
`Gate`, consulted by calculators.plan.fleet) decides which requests leave and when, and the fallback
pool is then its own fleet run over those requests, sent at the moments they left. Their client's clock
starts at the original send. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from calculators.plan.canary import merge_runs
from calculators.plan.demand import Demand
from calculators.plan.fallback_rule import FALLBACK_STATUSES, TIERS, FallbackRule
from calculators.plan.fleet_run import FleetRun
from calculators.plan.outcome import Outcome, PlanSlo, outcome
from calculators.plan.planner import Judged, judge

__all__ = ["FALLBACK_STATUSES", "TIERS", "FallbackPlan", "FallbackRule", "fallback_demand", "plan_fallback"]


@dataclass(frozen=True)
class FallbackPlan:
    """Each tier on the requests it answered, and both together (every request; both pools' cost)."""

    rule: FallbackRule
    tier: np.ndarray        # bool per request of the demand: the fallback's
    by_errors: int          # of those, passed on after an error (the rest: the primary was full)
    primary: Judged         # the primary's pool over every request, with the fallback's left unanswered there
    fallback: Judged | None  # the fallback pool over the requests it was given (None: none)
    both: Outcome           # every request on its client's clock; the cost of both pools
    merged: FleetRun        # both pools' runs in the demand's order (the fallback's replicas numbered after)

    def tier_outcome(self, name: str, slo: PlanSlo, window_s: float) -> Outcome:
        """One tier's requests judged on their client's clock (from their first send)."""
        mask = self.tier if name == "fallback" else ~self.tier
        return outcome(self.merged.take(np.flatnonzero(mask)), slo, window_s=window_s)


def fallback_demand(demand: Demand, left_s: np.ndarray) -> tuple[Demand, np.ndarray]:
    """The fallback pool's demand: the requests that left, each sent at the moment it left (in that order),
    and their indices into `demand`."""
    idx = np.flatnonzero(np.isfinite(left_s))
    idx = idx[np.argsort(left_s[idx], kind="stable")]
    return demand.select(idx, t_s=left_s[idx].astype(np.float64)), idx


def plan_fallback(demand: Demand, primary, fallback, slo: PlanSlo, *, window_s: float) -> FallbackPlan:
    """The primary's run with its fallback rule (`primary.fallback`), then the fallback's pool over what left
    it; merged on each request's own send time."""
    rule = primary.fallback
    first = judge(demand, primary, slo, window_s=window_s)
    left_s = first.run.left_s
    tier = np.isfinite(left_s)
    stayed = np.flatnonzero(~tier)
    parts = [(first.run.take(stayed), stayed)]
    second = None
    if tier.any():
        part, idx = fallback_demand(demand, left_s)
        second = judge(part, fallback, slo, window_s=window_s)
        parts.append((second.run, idx))
    merged = merge_runs(parts, len(demand))
    merged.send_s = demand.t_s.astype(np.float64).copy()   # each client's clock starts at its first send
    merged.router = first.run.router
    by_errors = int(first.run.left_by_errors.sum())
    return FallbackPlan(rule, tier, by_errors, first, second,
                        _priced(outcome(merged, slo, window_s=window_s), [j.outcome for j in (first, second) if j]),
                        merged)


def _priced(both: Outcome, pools: list[Outcome]) -> Outcome:
    """`both` with the pools' replica- and GPU-hours and cost added (each pool at its own GPUs and price)."""
    usd = None if any(o.usd is None for o in pools) else sum(o.usd for o in pools)
    return replace(both, replica_hours=sum(o.replica_hours for o in pools), gpu_hours=sum(o.gpu_hours for o in pools),
                   usd=usd, usd_per_day=None if any(o.usd_per_day is None for o in pools) else
                   sum(o.usd_per_day for o in pools),
                   usd_per_million_tokens=None if usd is None or not both.output_tokens else
                   usd / both.output_tokens * 1e6)

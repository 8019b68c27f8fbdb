"""A shadow pool: a fraction of the requests mirrored to a second version whose answers are recorded but
never returned, so production runs as it would alone and the shadow is judged and priced beside it.

    shadow = plan_shadow(demand, primary_config, shadow_config, fraction=1.0, slo=slo, window_s=300, seed=0)

The mirror is what a proxy's does (nginx's `mirror`, Envoy's `request_mirror_policies`, Istio's
`mirror` with `mirrorPercentage`): each request is copied to the shadow with probability `fraction`,
a seeded draw per request on the canary split's stream (calculators.plan.canary), at the same send
time. Production's pool sees every request, as without the shadow (the proxy does not wait for the
shadow's answer); the shadow's pool sees its copies, and nothing of its answers reaches a client.

Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from calculators.plan.canary import CanarySchedule, canary_mask
from calculators.plan.demand import Demand
from calculators.plan.fleet import FleetConfig
from calculators.plan.outcome import PlanSlo
from calculators.plan.planner import Judged, judge


def check_fraction(fraction: float, flag: str = "--shadow-fraction") -> float:
    if not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise ValueError(f"{flag} is the share of requests mirrored, in (0, 1], got {fraction:g}")
    return float(fraction)


def mirror_mask(demand: Demand, fraction: float, seed: int) -> np.ndarray:
    """bool per request: copied to the shadow."""
    return canary_mask(demand, CanarySchedule(((0.0, check_fraction(fraction)),), one_sided=True), seed)


@dataclass(frozen=True)
class ShadowPlan:
    fraction: float
    mask: np.ndarray      # bool per request of the demand: mirrored
    production: Judged    # the primary pool over every request
    shadow: Judged        # the shadow pool over the copies


def plan_shadow(demand: Demand, primary: FleetConfig, shadow: FleetConfig, *, fraction: float, slo: PlanSlo,
                window_s: float, seed: int) -> ShadowPlan:
    """Production over the whole demand and the shadow over its mirrored share (refused when the draw mirrors
    no request: the shadow would have no figure)."""
    mask = mirror_mask(demand, fraction, seed)
    if not mask.any():
        raise ValueError(f"--shadow-fraction {fraction:g} mirrors none of the {len(demand):,} requests")
    return ShadowPlan(fraction, mask, judge(demand, primary, slo, window_s=window_s),
                      judge(demand.select(np.flatnonzero(mask)), shadow, slo, window_s=window_s))

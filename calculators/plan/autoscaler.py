"""The fleet's autoscaler: Kubernetes' HorizontalPodAutoscaler on a per-replica metric, KEDA in front of
it for scaling from and to zero.

    scaler = Autoscaler(AutoscalerConfig(min_replicas=0, max_replicas=8, metric="in_flight", target=16))
    wanted = scaler.decide(t, current=3, per_replica=[20, 14], pending=0)   # every interval_s

The rule is HPA's, as the Kubernetes docs give it ("Horizontal Pod Autoscaling", Algorithm details,
and "Configurable scaling behavior") and as its controller computes it (`replica_calculator.go`,
`horizontal.go`), for a Pods metric with an AverageValue target:
1. Raw recommendation. ratio = mean(metric over ready replicas) / target. Within the tolerance
   (|ratio - 1| <= tolerance) the recommendation is the current count; else it is
   ceil(ratio * ready) = ceil(sum over ready replicas / target). It is computed as the sum over the
   target: the same number as the docs' ceil(currentReplicas * currentMetricValue / desiredMetric-
   Value) with the mean as the metric value and the ready replicas as the count, without the
   rounding of a mean multiplied back (ceil(3.0000000000000004) would add a replica).
   Replicas still starting (`current` minus the ready ones) are HPA's not-yet-ready pods: left out
   of the mean, and on a scale-up counted as using nothing, so the ratio is re-checked against the
   tolerance with them in (sum / (target * current)); replicas already asked for that cover the load
   stop a second scale-up while they start. With no ready replica and some starting, HPA has no
   metric and changes nothing.
2. Stabilisation (`behavior.scaleUp/scaleDown.stabilizationWindowSeconds`): every raw
   recommendation is kept with its time. The count may rise only to the lowest recommendation within
   `up_window_s` and fall only to the highest within `down_window_s` (default 300 s, HPA's); the
   current count seeds the history at the first decision, as HPA's controller does, so nothing scales
   down within a window of the start.
3. Rate limits (`behavior` policies; HPA's defaults): per `policy_period_s` (15 s), up by the larger
   of `scale_up_percent` (100%) and `scale_up_pods` (4 replicas), down by `scale_down_percent`
   (100%), counted from the count at the period's start (the changes made within it undone).
4. Bounds: [min_replicas, max_replicas]; a count outside them goes straight to the bound.
Scale from and to zero (KEDA; HPA itself keeps minReplicas >= 1): with no replica and requests
waiting at the router (`pending` > 0) the fleet activates at once to max(1, min_replicas); with
min_replicas = 0 and no load (the metric's sum 0 and nothing pending) the raw recommendation is 0,
and the down window plays KEDA's cooldownPeriod (300 s by default as well) before the last replica
goes.

Metrics (AUTOSCALE_METRICS), each per ready replica, as its /metrics shows them at a decision (the
gauges its last finished step set: calculators.plan.replica):
- "in_flight": requests in its engine, running or waiting (vLLM's num_requests_running +
  num_requests_waiting);
- "waiting": requests queued in its engine, not yet scheduled (num_requests_waiting);
- "kv_usage": the share of its KV cache in use, in [0, 1] (kv_cache_usage_perc).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from contract.options import option, parse_float, parse_int

AUTOSCALE_METRICS = ("in_flight", "waiting", "kv_usage")


@dataclass(frozen=True)
class AutoscalerConfig:
    """The rule's settings; the first seven are the autoscaler's options (`servecap plan`, `servecap fleet`:
    contract.options), the rest HPA's defaults."""

    min_replicas: int = option(parse=parse_int, help="autoscale between --min-replicas and --max-replicas")
    max_replicas: int = option(parse=parse_int, help="the most replicas the autoscaler asks for")
    metric: str = option("in_flight", choices=AUTOSCALE_METRICS,
                         help="the metric per ready replica it scales on (default in_flight)")
    target: float = option(8.0, parse=parse_float, text="",
                           help="the metric's wanted value per replica (autoscaling needs it; kv_usage: a share)")
    interval_s: float = option(15.0, parse=parse_float,
                               help="seconds between its decisions (HPA's sync period; default 15)")
    up_window_s: float = option(0.0, parse=parse_float, help="scale-up stabilisation window, s (default 0)")
    down_window_s: float = option(300.0, parse=parse_float,
                                  help="scale-down stabilisation window, s (default 300, HPA's and KEDA's)")
    tolerance: float = 0.1             # HPA's: no change while |ratio - 1| <= tolerance
    scale_up_percent: float = 100.0    # HPA's default scale-up policies: +100% or +4 pods per period,
    scale_up_pods: int = 4             # whichever is more
    scale_down_percent: float = 100.0  # HPA's default scale-down policy: -100% per period
    policy_period_s: float = 15.0

    def __post_init__(self) -> None:
        for name in ("min_replicas", "max_replicas", "scale_up_pods"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"autoscaler: {name} must be an integer >= 0, got {value!r}")
        if self.max_replicas < 1:
            raise ValueError(f"autoscaler: max_replicas must be >= 1, got {self.max_replicas}")
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"autoscaler: min_replicas ({self.min_replicas}) is above max_replicas "
                             f"({self.max_replicas})")
        if self.metric not in AUTOSCALE_METRICS:
            raise ValueError(f"autoscaler: unknown metric {self.metric!r} (choices: {', '.join(AUTOSCALE_METRICS)})")
        for name in ("target", "interval_s", "up_window_s", "down_window_s", "tolerance", "scale_up_percent",
                     "scale_down_percent", "policy_period_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"autoscaler: {name} must be a finite number, got {value!r}")
        for name in ("target", "interval_s", "policy_period_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"autoscaler: {name} must be > 0, got {getattr(self, name)!r}")
        for name in ("up_window_s", "down_window_s", "tolerance", "scale_up_percent"):
            if getattr(self, name) < 0:
                raise ValueError(f"autoscaler: {name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.scale_down_percent <= 100:
            raise ValueError(f"autoscaler: scale_down_percent must be in [0, 100], got {self.scale_down_percent!r}")
        if self.metric == "kv_usage" and self.target > 1:
            raise ValueError(f"autoscaler: target for kv_usage is a share of the KV cache in (0, 1], "
                             f"got {self.target!r}")


class Autoscaler:
    """HPA (with KEDA for zero) deciding a replica count at each call; the module doc gives the rule."""

    def __init__(self, config: AutoscalerConfig) -> None:
        self.config = config
        self._recommendations: deque[tuple[float, int]] = deque()   # (t, raw recommendation), oldest first
        self._events: deque[tuple[float, int]] = deque()            # (t, replicas added (+) or removed (-))
        self._seeded = False
        self.last_recommendation: int | None = None   # the last raw (unstabilised) recommendation

    def recommend(self, current: int, per_replica: Sequence[float], pending: int = 0) -> int | None:
        """Step 1, HPA's raw recommendation (None: no metric, no change)."""
        cfg = self.config
        ready = len(per_replica)
        if current == 0:
            return 1 if pending > 0 else 0
        if ready == 0:
            return None
        total = math.fsum(per_replica)
        if not math.isfinite(total) or total < 0:
            raise ValueError(f"autoscaler: the per-replica {cfg.metric} must be finite and >= 0, "
                             f"got {list(per_replica)}")
        ratio = total / (cfg.target * ready)
        wanted = math.ceil(total / cfg.target - 1e-9)   # the sum over the target (module doc); 1e-9: float dust
        if current > ready and ratio > 1.0:   # a scale-up with replicas starting: they count as using nothing
            ratio_all = total / (cfg.target * current)
            if abs(1.0 - ratio_all) <= cfg.tolerance or ratio_all < 1.0:
                return current
            return max(wanted, current)
        if abs(1.0 - ratio) <= cfg.tolerance:
            return current
        return wanted

    def decide(self, t: float, current: int, per_replica: Sequence[float], pending: int = 0) -> int:
        """The replica count wanted from time t on. `current`: replicas that exist, ready or starting;
        `per_replica`: the metric of each ready one; `pending`: requests waiting at the router for a
        ready replica."""
        cfg = self.config
        if isinstance(current, bool) or not isinstance(current, int) or current < 0:
            raise ValueError(f"autoscaler: current must be an integer >= 0, got {current!r}")
        if len(per_replica) > current:
            raise ValueError(f"autoscaler: {len(per_replica)} ready replicas' metrics for {current} replicas")
        if pending < 0:
            raise ValueError(f"autoscaler: pending must be >= 0, got {pending!r}")
        if current > cfg.max_replicas:
            return self._scaled(t, current, cfg.max_replicas)
        if current < cfg.min_replicas:
            return self._scaled(t, current, cfg.min_replicas)
        raw = self.recommend(current, per_replica, pending)
        self.last_recommendation = raw
        if raw is None:
            return current
        if not self._seeded:   # HPA seeds the scale-down window with the count it found
            self._recommendations.append((t, current))
            self._seeded = True
        if current == 0 and raw > 0:   # KEDA's activation: at once, past HPA's windows
            self._remember(t, raw)
            return self._scaled(t, current, max(1, cfg.min_replicas))
        up, down = raw, raw
        up_cut, down_cut = t - cfg.up_window_s, t - cfg.down_window_s
        for when, value in self._recommendations:
            if when > up_cut and value < up:
                up = value
            if when > down_cut and value > down:
                down = value
        self._remember(t, raw)
        wanted = min(max(current, up), down)   # HPA: raise to the up bound, then cap at the down bound
        return self._scaled(t, current, self._limited(t, current, wanted))

    def _remember(self, t: float, raw: int) -> None:
        recs = self._recommendations
        recs.append((t, raw))
        keep = t - max(self.config.up_window_s, self.config.down_window_s)
        while len(recs) > 1 and recs[0][0] <= keep:
            recs.popleft()

    def _limited(self, t: float, current: int, wanted: int) -> int:
        """Steps 3 and 4: HPA's rate policies over the last period, then [min, max]."""
        cfg = self.config
        cut = t - cfg.policy_period_s
        while self._events and self._events[0][0] <= cut:
            self._events.popleft()
        added = sum(change for _, change in self._events if change > 0)
        deleted = -sum(change for _, change in self._events if change < 0)
        start = current - added + deleted
        if wanted > current:
            limit = max(math.ceil(start * (1 + cfg.scale_up_percent / 100)), start + cfg.scale_up_pods)
            return min(wanted, max(limit, current), cfg.max_replicas)
        if wanted < current:
            limit = int(start * (1 - cfg.scale_down_percent / 100))
            return max(wanted, min(limit, current), cfg.min_replicas)
        return wanted

    def _scaled(self, t: float, current: int, wanted: int) -> int:
        if wanted != current:
            self._events.append((t, wanted - current))
        return wanted

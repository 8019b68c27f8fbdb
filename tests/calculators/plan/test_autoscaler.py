"""The autoscaler's decisions on scripted loads, each hand-checked against HPA's rule (the module doc)."""

from __future__ import annotations

import pytest

from calculators.plan.autoscaler import AUTOSCALE_METRICS, Autoscaler, AutoscalerConfig


def config(**changes) -> AutoscalerConfig:
    base = {"min_replicas": 1, "max_replicas": 6, "metric": "in_flight", "target": 10.0, "down_window_s": 60.0}
    return AutoscalerConfig(**{**base, **changes})


def test_defaults_are_hpa_defaults():
    cfg = AutoscalerConfig(min_replicas=1, max_replicas=4)
    assert (cfg.metric, cfg.interval_s, cfg.up_window_s, cfg.down_window_s, cfg.tolerance) == \
        ("in_flight", 15.0, 0.0, 300.0, 0.1)
    assert (cfg.scale_up_percent, cfg.scale_up_pods, cfg.scale_down_percent, cfg.policy_period_s) == \
        (100.0, 4, 100.0, 15.0)
    assert AUTOSCALE_METRICS == ("in_flight", "waiting", "kv_usage")


def test_a_load_that_rises_then_falls():
    scaler = Autoscaler(config())
    script = [   # (t, replicas that exist, the metric of each ready one, expected decision, why)
        (15, 2, [10, 10], 2, "ratio 1.0"),
        (30, 2, [10.5, 10.5], 2, "ratio 1.05: within the 0.1 tolerance"),
        (45, 2, [12, 12], 3, "ratio 1.2: ceil(24 / 10) = 3"),
        (60, 3, [20, 20], 4, "one starting: 40 / 30 = 1.33 still above, ceil(40 / 10) = 4"),
        (75, 4, [16, 16], 4, "two starting: 32 / 40 = 0.8, the ones asked for cover it: no second rise"),
        (90, 4, [8, 8, 8, 8], 4, "ratio 0.8 but ceil(32 / 10) = 4"),
        (105, 4, [5, 5, 5, 5], 4, "ceil(20 / 10) = 2, held by the 4s of the last 60 s"),
        (120, 4, [5, 5, 5, 5], 4, ""),
        (135, 4, [5, 5, 5, 5], 4, "the 4 of t=90 is still in (75, 135]"),
        (150, 4, [5, 5, 5, 5], 2, "the window (90, 150] holds only 2s: down to 2"),
        (165, 2, [0, 0], 2, "ceil(0) = 0, held by the 2s"),
        (210, 2, [0, 0], 1, "(150, 210] holds only 0s: 0, clamped to min_replicas 1"),
    ]
    for t, current, per_replica, expected, why in script:
        assert scaler.decide(t, current, per_replica) == expected, (t, why)


def test_hpa_docs_example_and_tolerance_edges():
    # the Kubernetes docs' example: 50 replicas at 90 against a target of 75 -> ceil(50 * 90 / 75) = 60
    scaler = Autoscaler(config(max_replicas=100, target=75.0))
    assert scaler.decide(15, 50, [90.0] * 50) == 60
    tight = Autoscaler(config(tolerance=0.0))
    assert tight.decide(15, 2, [10.5, 10.5]) == 3            # no tolerance: 21 / 10 -> 3
    assert Autoscaler(config()).decide(15, 2, [10.9, 10.9]) == 2    # |1.09 - 1| <= 0.1: no change
    assert Autoscaler(config()).decide(15, 2, [11.1, 11.1]) == 3    # just past it
    assert Autoscaler(config()).decide(15, 5, [9.1] * 5) == 5       # |0.91 - 1| <= 0.1


def test_scale_up_waits_for_the_up_window():
    scaler = Autoscaler(config(up_window_s=30.0))
    assert scaler.decide(15, 2, [10, 10]) == 2
    assert scaler.decide(30, 2, [30, 30]) == 2    # wants 6; the lowest in (0, 30] is the 2 of t=15
    assert scaler.decide(45, 2, [30, 30]) == 6    # (15, 45] holds only 6s (a time on the cut is out)


def test_min_max_clamps_and_rate_limits():
    capped = Autoscaler(config(max_replicas=5))
    assert capped.decide(15, 2, [60, 60]) == 5    # wants 12
    assert capped.decide(30, 9, [1] * 9) == 5     # above max: straight to it
    assert Autoscaler(config(min_replicas=3)).decide(15, 1, [0]) == 3   # below min: straight to it
    # HPA's default policies: up by max(+100%, +4) per 15 s, from the count at the period's start
    scaler = Autoscaler(config(max_replicas=20))
    assert scaler.decide(15, 1, [100]) == 5       # wants 10: 1 + 4
    assert scaler.decide(25, 5, [100]) == 5       # 10 s later: the period started at 1, +4 already made
    assert scaler.decide(40, 5, [100]) == 10      # wants ceil(100 / 10) = 10 (4 starting count as 0: 2.0)
    assert Autoscaler(config(max_replicas=20, scale_up_pods=1, scale_up_percent=50)).decide(15, 4, [40] * 4) == 6


def test_scale_from_zero_on_pending_and_back_to_zero_when_idle():
    scaler = Autoscaler(config(min_replicas=0, max_replicas=4))
    assert scaler.decide(15, 0, [], pending=0) == 0     # no load: stays at zero
    assert scaler.decide(30, 0, [], pending=3) == 1     # KEDA's activation on the waiting requests
    assert scaler.decide(45, 1, [], pending=0) == 1     # starting, no metric yet: no change
    assert scaler.decide(60, 1, [30]) == 3              # ceil(30 / 10)
    for t in (75, 90, 105):
        assert scaler.decide(t, 3, [0, 0, 0]) == 3      # idle, held by the 3 of t=60
    assert scaler.decide(120, 3, [0, 0, 0]) == 0        # (60, 120] holds only 0s: to zero
    assert Autoscaler(config(min_replicas=2)).decide(15, 0, [], pending=5) == 2   # from zero to min
    assert Autoscaler(config(min_replicas=0)).decide(15, 2, [0.0, 0.0]) == 2      # the start seeds the window


def test_other_metrics():
    kv = Autoscaler(config(metric="kv_usage", target=0.7))
    assert kv.decide(15, 3, [0.95, 0.9, 0.85]) == 4     # ceil(2.7 / 0.7) = ceil(3.86)
    waiting = Autoscaler(config(metric="waiting", target=2.0, max_replicas=10))
    assert waiting.decide(15, 2, [6, 4]) == 5           # ceil(10 / 2)


@pytest.mark.parametrize("changes, field", [
    ({"min_replicas": 5, "max_replicas": 3}, "min_replicas"),
    ({"min_replicas": -1}, "min_replicas"),
    ({"min_replicas": 1.5}, "min_replicas"),
    ({"min_replicas": True}, "min_replicas"),
    ({"max_replicas": 0, "min_replicas": 0}, "max_replicas"),
    ({"metric": "gpu_util"}, "metric"),
    ({"target": 0}, "target"),
    ({"target": -2.0}, "target"),
    ({"target": float("nan")}, "target"),
    ({"metric": "kv_usage", "target": 1.5}, "kv_usage"),
    ({"interval_s": 0}, "interval_s"),
    ({"up_window_s": -1}, "up_window_s"),
    ({"down_window_s": -30}, "down_window_s"),
    ({"tolerance": -0.1}, "tolerance"),
    ({"scale_down_percent": 150}, "scale_down_percent"),
    ({"scale_up_pods": -1}, "scale_up_pods"),
])
def test_bad_configs_raise_one_line_naming_the_field(changes, field):
    with pytest.raises(ValueError) as caught:
        config(**changes)
    message = str(caught.value)
    assert field in message and "\n" not in message and message.startswith("autoscaler: ")


def test_bad_calls():
    scaler = Autoscaler(config())
    with pytest.raises(ValueError, match="3 ready replicas' metrics for 2 replicas"):
        scaler.decide(15, 2, [1, 2, 3])
    with pytest.raises(ValueError, match="current must be an integer"):
        scaler.decide(15, -1, [])
    with pytest.raises(ValueError, match="must be finite and >= 0"):
        scaler.decide(15, 1, [float("nan")])

"""Load-generator health summary: CPU over 90% and send lateness over 1 ms flag the level."""

import pytest

from loadgen.scenario.generator_health import GeneratorHealth, merge_summaries


def test_quiet_generator_is_not_flagged():
    health = GeneratorHealth("local@h:1")
    health.cpu_samples = [20.0, 35.0]
    health.lateness_s = [0.0001] * 100
    summary = health.summary()
    assert summary["cpu_max_pct"] == 35.0 and summary["cpu_mean_pct"] == 27.5
    assert summary["lateness_p99_s"] == pytest.approx(0.0001)
    assert not summary["limited_by_loadgen"] and summary["warnings"] == []


def test_busy_or_late_generator_is_flagged_with_reasons():
    health = GeneratorHealth("worker0@h:2")
    health.cpu_samples = [50.0, 97.0]
    health.lateness_s = [0.0001] * 90 + [0.005] * 10
    health.inflight_cap_hits = 3
    summary = health.summary()
    assert summary["cpu_over_90"] and summary["limited_by_loadgen"]
    assert len(summary["warnings"]) == 3 and "97%" in summary["warnings"][0]
    merged = merge_summaries([summary, GeneratorHealth("worker1@h:3").summary()])
    assert merged["limited_by_loadgen"] and set(merged["processes"]) == {"worker0@h:2", "worker1@h:3"}
    assert all(w.startswith("worker0@h:2: ") for w in merged["warnings"])
    empty = GeneratorHealth("x").summary()  # no samples yet: nulls, not errors
    assert empty["cpu_max_pct"] is None and empty["lateness_p99_s"] is None and not empty["limited_by_loadgen"]


def test_loop_lag_is_recorded_as_the_timings_error_bar_not_judged_in_the_generator():
    # the report sets it beside each percentile's confidence interval (reports.summary.lag_limited)
    quiet, late = GeneratorHealth("worker0@h:1"), GeneratorHealth("worker1@h:2")
    quiet.loop_lag.lag_s.extend([0.0001] * 100)
    late.loop_lag.lag_s.extend([0.0001] * 90 + [0.004] * 10)
    q, s = quiet.summary(), late.summary()
    assert q["loop_lag_p50_s"] == pytest.approx(0.0001) and q["loop_lag_samples"] == 100
    assert not q["limited_by_loadgen"]
    assert s["loop_lag_p99_s"] == pytest.approx(0.004) and s["loop_lag_max_s"] == 0.004
    assert not s["limited_by_loadgen"] and s["warnings"] == []
    merged = merge_summaries([q, s])
    assert merged["loop_lag_p99_s"] == pytest.approx(0.004) and merged["loop_lag_p50_s"] == pytest.approx(0.0001)
    assert GeneratorHealth("x").summary()["loop_lag_p99_s"] is None and merge_summaries([])["loop_lag_p99_s"] is None


def test_gc_pauses_are_counted_per_generation():
    import gc

    health = GeneratorHealth("x")
    health.gc_pauses.start()
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        health.gc_pauses.stop()
    summary = health.summary()
    assert summary["gc_collections"][0] >= 1 and summary["gc_collections"][2] >= 1
    assert summary["gc_pause_max_s"][2] > 0 and summary["gc_pause_total_s"] >= summary["gc_pause_max_s"][2]
    gc.collect(2)   # stopped: no longer counted
    assert health.summary()["gc_collections"][2] == summary["gc_collections"][2]

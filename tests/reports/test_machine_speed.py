"""The machine's speed per sub-window, from the engine's steps, and the stability judged at constant speed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from servecap.experiment.level_stats import level_stats
from reports.diagnostics.machine_speed import speed_index
from contract.records import Record


def _steps(pieces) -> pd.DataFrame:
    """pieces: (start_s, end_s, step_s, batch, prefill_tokens): steps back to back over [start, end)."""
    rows = []
    for start, end, step_s, batch, prefill in pieces:
        for t in np.arange(start, end, step_s):
            rows.append({"source": "continuous", "t_start": float(t), "step_s": step_s, "batch": batch,
                         "prefill_tokens": prefill, "context_tokens": 100})
    return pd.DataFrame(rows)


def test_the_index_is_the_stretch_of_the_same_work_and_ignores_a_change_of_shape():
    slower_machine = _steps([(0, 6, 0.010, 4, 0), (6, 9, 0.013, 4, 0)])
    assert speed_index(slower_machine, 0, 9, 3) == pytest.approx((1.0, 1.0, 1.3))
    # bigger batches take longer per step, on a machine that did not change: no stretch
    bigger_batches = _steps([(0, 6, 0.010, 4, 0), (6, 9, 0.013, 8, 0)])
    assert speed_index(bigger_batches, 0, 9, 3) == pytest.approx((1.0, 1.0, 1.0))
    # prefill steps and decode steps are different work: each is compared with its own kind
    mixed = _steps([(0, 9, 0.010, 4, 0), (0.005, 9, 0.050, 4, 64)])
    assert speed_index(mixed, 0, 9, 3) == pytest.approx((1.0, 1.0, 1.0))


def test_no_index_without_enough_steps_in_every_window():
    assert speed_index(None, 0, 9, 3) is None
    assert speed_index(_steps([(0, 6, 0.010, 4, 0)]), 0, 9, 3) is None          # the last third has none
    assert speed_index(_steps([(0, 9, 0.5, 4, 0)]), 0, 9, 3) is None            # 6 steps per third
    assert speed_index(_steps([(0, 9, 0.010, 4, 0)]), 5, 5, 3) is None          # an empty span


def _stream(t, seconds, tokens):
    gap = (seconds - 0.1) / (tokens - 1)
    return Record(level="continuous/c=1", phase="measure", t_start=t, ttft_s=0.1, e2e_s=seconds,
                  itl_s=[gap] * (tokens - 1), output_tokens=tokens, status="ok")


# c=1 for 9 s: 31 tokens per 1.5 s request in the first two thirds, 24 in the last (23% fewer tokens/s)
RECORDS = [_stream(1.5 * i, 1.5, 31 if i < 4 else 24) for i in range(6)]


def test_a_level_slowed_by_the_machine_is_steady_at_constant_speed():
    stats = level_stats(RECORDS, "continuous/c=1", _steps([(0, 6, 0.010, 1, 0), (6, 9, 0.013, 1, 0)]))
    assert stats.spread > 0.2 and stats.spread_at_constant_speed < 0.05
    assert stats.machine_speed_spread == pytest.approx(0.3 / 1.1, rel=0.05)
    assert stats.is_stable(0.10) and stats.machine_drift(0.10)


def test_a_level_that_slowed_at_the_same_machine_speed_is_not_stable():
    same_speed = level_stats(RECORDS, "continuous/c=1", _steps([(0, 9, 0.010, 1, 0)]))
    assert same_speed.speed_index == pytest.approx((1.0, 1.0, 1.0))
    assert not same_speed.is_stable(0.10) and not same_speed.machine_drift(0.10)
    # an external server: no speed index, so the windows keep their speed; the requests' pace (the
    # same 1.5 s requests streaming fewer tokens: tokens/s -23%, requests/s flat) decides
    no_record = level_stats(RECORDS, "continuous/c=1")
    assert no_record.speed_index is None and 0.2 < no_record.spread_at_constant_speed < no_record.spread
    assert not no_record.is_stable(0.10)


def _idling_steps(pieces) -> pd.DataFrame:
    """pieces: (start_s, end_s, step_s, idle_s): a step, then the engine idles idle_s, over [start, end)."""
    rows = []
    for start, end, step_s, idle_s in pieces:
        for t in np.arange(start, end, step_s + idle_s):
            rows.append({"source": "static", "t_start": float(t), "step_s": step_s, "batch": 1,
                         "prefill_tokens": 0, "context_tokens": 100})
    return pd.DataFrame(rows)


def test_only_the_engines_busy_share_of_a_window_stretches_with_its_speed():
    """An engine busy half the time (10 ms steps, 10 ms waits) on a machine 30% slower in the last
    third: each cycle grows 20 -> 23 ms, so throughput falls 13%, not 23%. Scaling the whole window
    by the speed would call it a 13% change of the server's own; scaling the busy share finds none."""
    steps = _idling_steps([(0, 6, 0.010, 0.010), (6, 9, 0.013, 0.010)])
    records = [_stream(1.5 * i, 1.5, 31 if i < 4 else 27) for i in range(6)]
    stats = level_stats(records, "continuous/c=1", steps)
    assert stats.busy_share == pytest.approx((0.5, 0.5, 0.013 / 0.023), rel=0.03)
    assert stats.speed_index == pytest.approx((1.0, 1.0, 1.3))
    assert stats.spread > 0.1 and stats.spread_at_constant_speed < 0.03 and stats.is_stable(0.10)
    whole_window = [t * s for t, s in zip(stats.window_throughputs, stats.speed_index)]
    assert (max(whole_window) - min(whole_window)) / np.mean(whole_window) > 0.1


def test_levels_speeds_come_from_one_fit_that_chains_through_shared_shapes():
    from calculators.sim.step_model import StepTimeModel
    from reports.diagnostics.machine_speed import level_speeds

    # the work: batch 1 takes 10 ms, batch 4 20 ms, batch 16 40 ms at the usual speed.
    # c=1 ran batches 1 and 4 at speed 1.0; c=4 batches 4 and 16 at speed 1.2; c=16 only batch 16 at speed 0.9:
    # c=16 shares no shape with c=1, and is still put on the same scale through c=4
    c1 = _steps([(0, 3, 0.010, 1, 0), (3, 6, 0.020, 4, 0)])
    c4 = _steps([(0, 3, 0.024, 4, 0), (3, 6, 0.048, 16, 0)])
    c16 = _steps([(0, 3, 0.036, 16, 0)])
    lonely = _steps([(0, 3, 0.05, 64, 0)])                      # a shape nobody else ran: no common scale
    speeds = level_speeds({"c=1": c1, "c=4": c4, "c=16": c16, "c=64": lonely, "none": None})
    assert set(speeds) == {"c=1", "c=4", "c=16"}
    assert speeds["c=4"] / speeds["c=1"] == pytest.approx(1.2, rel=1e-3)
    assert speeds["c=16"] / speeds["c=1"] == pytest.approx(0.9, rel=1e-3)
    assert level_speeds({"c=1": c1}) == {}
    model = StepTimeModel(base_s=0.002, per_seq_s=0.001, batch_table=(0.003, 0.004)).scaled(1.5)
    assert model.step_s(1) == pytest.approx(0.0045) and model.step_s(4) == pytest.approx(1.5 * 0.006)

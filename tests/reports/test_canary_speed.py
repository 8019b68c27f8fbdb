"""Each core's speed over a level's windows, from canary.csv rows."""

import pandas as pd
import pytest

from reports.diagnostics.canary_speed import level_speed, window_speeds


def _canary(slow_from: float = 10.0, factor: float = 1.5) -> pd.DataFrame:
    """Two cores, one unit: core 1 takes `factor` times as long from t = slow_from on; core 0 never changes."""
    rows = []
    for tick in range(40):
        t = tick * 0.5
        for core in (0, 1):
            cpu = 0.001 * (factor if core == 1 and t >= slow_from else 1.0)
            rows.append({"t": t, "source": "continuous", "core": core, "unit": "numpy", "cpu_s": cpu,
                         "wall_s": cpu * 1.1})
    return pd.DataFrame(rows)


def test_a_core_that_slowed_reads_its_factor_over_the_usual_and_the_other_reads_one():
    speeds = window_speeds(_canary(), [(0.0, 5.0), (12.0, 18.0)])
    # the record's median is the slow time (20 of 40 ticks each way, median at the upper middle)
    assert speeds["core1 numpy cpu"] == pytest.approx((1 / 1.25, 1.5 / 1.25))
    assert speeds["core0 numpy cpu"] == pytest.approx((1.0, 1.0))
    assert speeds["core1 numpy wall"] == pytest.approx(speeds["core1 numpy cpu"])


def test_a_span_with_too_few_ticks_has_no_speed_and_a_source_filter_applies():
    assert window_speeds(_canary(), [(0.0, 5.0), (6.0, 6.9)])["core1 numpy cpu"] is None
    assert window_speeds(_canary(), [(0.0, 5.0)], source="static") == {}
    assert window_speeds(None, [(0.0, 5.0)]) == {}


def test_a_levels_rounds_pool_into_one_speed():
    canary = _canary(slow_from=10.0, factor=2.0)
    # 10 ticks fast and 6 slow: the median is fast; the usual (over all) is the fast-slow midpoint
    assert level_speed(canary, [(0.0, 5.0), (12.0, 15.0)], "core1 numpy cpu") == pytest.approx(1 / 1.5)
    assert level_speed(canary, [(0.0, 5.0)], "core0 numpy cpu") == pytest.approx(1.0)
    assert level_speed(canary, [(30.0, 40.0)], "core1 numpy cpu") is None


def test_steal_is_the_stolen_over_the_accounted_time_of_each_core_over_the_spans():
    from reports.diagnostics.canary_speed import steal_by_core

    # core 0: 0.1 s of every 0.5 s tick stolen from t = 5 on; core 1 never
    rows = [{"t": 0.5 * k, "source": "continuous", "core": core, "unit": "steal",
             "cpu_s": 0.1 if core == 0 and 0.5 * k > 5 else 0.0, "wall_s": 0.5}
            for k in range(1, 21) for core in (0, 1)]
    canary = pd.DataFrame(rows)
    assert steal_by_core(canary, [(5.0, 10.0)]) == pytest.approx({"0": 0.2, "1": 0.0})
    assert steal_by_core(canary, [(0.0, 4.0)]) == pytest.approx({"0": 0.0, "1": 0.0})
    assert steal_by_core(None, [(0.0, 4.0)]) == {}


def test_a_torn_canary_line_is_left_out_and_said(tmp_path):
    """A killed run's last line of canary.csv may be cut anywhere: the run still reports, without it."""
    from reports.run_data import load_run
    from reports.predict.simulated_run import write_simulated_run
    from calculators.sim.step_model import StepTimeModel

    run = write_simulated_run(tmp_path / "run", StepTimeModel(base_s=0.001, per_seq_s=0.0001), None,
                              concurrencies=(1, 2), duration_s=2.0)
    (run / "canary.csv").write_text("t,source,core,unit,cpu_s,wall_s\n"
                                    "1.0,continuous,1,python,0.0005,0.0006\n"
                                    "1.5,continuous,1,numpy,0.0004,0.0004\n"
                                    "2.0,contin\n")
    data = load_run(run)
    assert len(data.canary) == 2 and data.canary["core"].tolist() == [1, 1]
    assert "canary.csv: 1 row(s) unreadable, left out" in data.missing

"""The calibration's step noise: each level's slow paths and fast runs, and what a prediction draws."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from calculators.sim.simulate import SimServer
from contract.run_json import LoadPlan, RunInfo
from reports.predict.calibration import SLOW_BIN_S, arrival_cv2, calibrate
from reports.predict.evidence import LevelSample, StepRows

SERVER = SimServer.from_flags("continuous", max_num_seqs=8)


def level(name: str, tokens_per_s: float, slow_by_second: list[float], seed: int) -> LevelSample:
    """Decode steps of 1-4 sequences (1 ms + 0.5 ms a sequence) back to back, the machine's speed constant
    within each second."""
    rng = np.random.default_rng(seed)
    starts, durations, batches, t = [], [], [], 0.0
    while t < len(slow_by_second):
        batch = int(rng.integers(1, 5))
        duration = (0.001 + 0.0005 * batch) * slow_by_second[int(t)] * rng.lognormal(0.0, 0.03)
        starts.append(t)
        durations.append(duration)
        batches.append(batch)
        t += duration
    n = len(starts)
    steps = StepRows(np.array(batches), np.zeros(n), 100.0 * np.array(batches), np.array(durations),
                     np.zeros(n, dtype=int), np.array(starts) + 1e9)
    return LevelSample(level=f"continuous/{name}", strategy="continuous", kind="concurrency", load=2.0,
                       warmup_s=1.0, duration_s=float(len(slow_by_second)), lengths=((32, 16),) * 50, measured={},
                       output_tokens_per_s=tokens_per_s, steps=steps)


def test_each_level_keeps_its_slow_path_and_a_prediction_takes_its_neighbours():
    quiet = level("c=1", 100.0, [1.0, 1.0, 1.0, 1.0], seed=1)
    bursty = level("c=2", 200.0, [1.0, 1.0, 2.0, 1.0], seed=2)
    calibration = calibrate([quiet, bursty], SERVER)
    (_, _, quiet_paths), (_, _, bursty_paths) = calibration.residuals
    assert len(bursty_paths) == 1 and len(bursty_paths[0]) == 4 / SLOW_BIN_S
    path = np.asarray(bursty_paths[0])
    assert path[8:12] / path[:8].mean() == pytest.approx([2.0] * 4, rel=0.03)   # the slow second, 4 bins of it
    assert np.ptp(quiet_paths[0]) < 0.05
    model = calibration.step_model_at(200.0)
    assert model.slow_bin_s == SLOW_BIN_S and len(model.slow_paths) == 1
    assert np.max(model.slow_paths[0]) / np.min(model.slow_paths[0]) == pytest.approx(2.0, rel=0.05)
    assert np.std(np.log(model.jitter)) == pytest.approx(0.03, rel=0.2)   # the fast rest only


def test_the_slow_paths_mean_is_every_levels_and_their_swings_the_neighbours():
    """A level that ran 40% slow throughout (drift) lends its shape, not its mean, to a prediction near it."""
    steady = level("c=1", 100.0, [1.0] * 4, seed=3)
    drifted = level("c=2", 200.0, [1.4, 1.4, 2.8, 1.4], seed=4)
    calibration = calibrate([steady, drifted], SERVER)
    every = np.mean([f for _, _, paths in calibration.residuals for p in paths for f in p])
    for tokens_per_s in (100.0, 200.0):
        paths = calibration.step_model_at(tokens_per_s).slow_paths
        assert np.mean([f for p in paths for f in p]) == pytest.approx(every)
    near_drifted = np.asarray(calibration.step_model_at(200.0).slow_paths[0])
    assert near_drifted[8] / near_drifted[0] == pytest.approx(2.0, rel=0.05)


def waiting_level(name: str, tokens_per_s: float, busy_steps: int, seed: int) -> LevelSample:
    """Decode steps of 1-2 sequences (1 ms + 0.5 ms a sequence) in busy stretches of `busy_steps`, a 5 ms
    wait before each; the first steps after a wait 1.5x, 1.25x, 1.1x slower (the engine's warm-up)."""
    rng = np.random.default_rng(seed)
    warm = (1.5, 1.25, 1.1)
    starts, durations, since, batches, t = [], [], [], [], 0.0
    while t < 4.0:
        for k in range(busy_steps):
            batch = int(rng.integers(1, 3))
            duration = (0.001 + 0.0005 * batch) * (warm[k] if k < len(warm) else 1.0) * rng.lognormal(0.0, 0.03)
            batches.append(batch)
            starts.append(t)
            durations.append(duration)
            since.append(k)
            t += duration
        t += 0.005
    n = len(starts)
    steps = StepRows(np.array(batches), np.zeros(n), np.full(n, 100.0), np.array(durations), np.zeros(n, dtype=int),
                     np.array(starts) + 1e9, np.array(since))
    return LevelSample(level=f"continuous/{name}", strategy="continuous", kind="concurrency", load=1.0,
                       warmup_s=1.0, duration_s=4.0, lengths=((32, 16),) * 50, measured={},
                       output_tokens_per_s=tokens_per_s, steps=steps)


def test_the_engine_s_warm_up_after_a_wait_is_fitted_and_kept_out_of_the_shuffled_noise():
    calibration = calibrate([waiting_level("c=1", 100.0, 40, seed=5), waiting_level("c=2", 200.0, 400, seed=6)],
                            SERVER)
    curve = calibration.step_model.warm_up
    assert curve[:4] == pytest.approx([1.5, 1.25, 1.1, 1.0], rel=0.03)
    assert calibration.step_model_at(150.0).warm_up == curve   # every prediction takes it
    assert np.std(np.log(calibration.step_model_at(100.0).jitter)) == pytest.approx(0.03, rel=0.2)
    assert "warm_up" in calibration.sources and calibration.describe()["step_model"]["warm_up"][0] == curve[0]


def test_a_calibration_with_too_few_waits_predicts_without_warm_up_and_says_so():
    few = waiting_level("c=2", 200.0, 400, seed=6)   # a wait every 0.6 s: 7 in 4 s
    calibration = calibrate([few], SERVER)
    assert calibration.step_model.warm_up == ()
    assert any("warm-up" in line for line in calibration.unavailable)


@pytest.mark.parametrize("arrival, cv2", [("poisson", 1.0), ("gamma:2", 4.0), ("constant", 1e-6), (None, 1.0),
                                          ("closed", 1.0), ("trace", 1.0), ("gamma:x", 1.0)])
def test_the_runs_arrival_cv2_is_the_arrival_processs(arrival, cv2):
    """run.json's load_plan.arrival read by the one rule (ArrivalProcess.cv2); 1.0 where there are no gaps."""
    assert arrival_cv2(RunInfo(load_plan=LoadPlan(arrival=arrival))) == cv2


def test_an_open_loop_meets_the_front_end_at_its_streams_in_flight_not_at_its_rate_as_users():
    from calculators.sim.front_end import FrontEnd, FrontEndByLoad
    from calculators.sim.step_model import StepTimeModel
    from reports.predict.calibration import Calibration, predict

    def delays(ms: float) -> FrontEnd:
        return FrontEnd((ms / 1e3,) * 4, (ms / 1e3,) * 4, (ms / 1e3,) * 4)

    users = (1, 2, 4, 8, 16)   # closed loop: each delay 1 ms a user (the front end handles every stream in turn)
    front = FrontEndByLoad(users, tuple(delays(float(u)) for u in users), tuple(100.0 * u for u in users))
    calibration = Calibration("continuous", SERVER, StepTimeModel(base_s=0.001), np.array([[16, 8]] * 10), 1.0,
                              front, ("c=1",), counts=((16.0, 200.0),))
    # 16 req/s of 8-token requests at 1 ms a step: about 10 ms each, so 1.2 streams met, not 16 users
    open_loop = predict(calibration, "rate_rps", 16.0, 1.0, 10.0, replications=2)
    closed = predict(calibration, "concurrency", 16.0, 1.0, 10.0, replications=2)
    assert open_loop.value("ttft_s", "p50") < 0.006                        # ~1 ms in + ~1 step + ~1 ms out
    assert closed.value("ttft_s", "p50") > 0.032                            # 16 ms in + 16 ms out at 16 users
    assert LevelSample(level="x", strategy="continuous", kind="rate_rps", load=16.0, warmup_s=1, duration_s=10,
                       lengths=((16, 8),), measured={}, output_tokens_per_s=128.0, e2e_mean_s=0.01).streams == \
        pytest.approx(1.16)   # itself and the 0.16 in flight a Poisson arrival finds


def test_an_open_loop_calibrated_by_the_stage_takes_its_open_levels_delays_moved_along_the_closed_curve():
    from calculators.sim.front_end import FrontEnd, FrontEndByLoad
    from calculators.sim.step_model import StepTimeModel
    from reports.predict.calibration import Calibration, predict

    def delays(ms: float) -> FrontEnd:
        return FrontEnd((ms / 1e3,) * 4, (ms / 1e3,) * 4, (ms / 1e3,) * 4)

    users = (1, 2, 4, 8, 16)
    closed = FrontEndByLoad(users, tuple(delays(float(u)) for u in users), tuple(100.0 * u for u in users))
    opened = FrontEndByLoad((2.0,), (delays(5.0),), (200.0,))   # open arrivals: 5 ms where a closed loop had 2
    plain = Calibration("continuous", SERVER, StepTimeModel(base_s=0.001), np.array([[16, 8]] * 10), 1.0,
                        closed, ("c=1",), counts=((16.0, 200.0),))
    staged = replace(plain, open_front_end=opened)
    without = predict(plain, "rate_rps", 16.0, 1.0, 10.0, replications=2).value("ttft_s", "p50")
    with_stage = predict(staged, "rate_rps", 16.0, 1.0, 10.0, replications=2).value("ttft_s", "p50")
    # ~0.2 streams, held at the lowest calibrated (1): the open level's 5 ms x 1/2 (the closed curve from 2 to 1)
    assert with_stage == pytest.approx(2.5e-3 + 2.5e-3 + 1e-3, rel=0.25)
    assert without == pytest.approx(1e-3 + 1e-3 + 1e-3, rel=0.25)
    closed_at_16 = predict(staged, "concurrency", 16.0, 1.0, 10.0, replications=2).value("ttft_s", "p50")
    assert closed_at_16 == pytest.approx(predict(plain, "concurrency", 16.0, 1.0, 10.0, replications=2)
                                         .value("ttft_s", "p50"))   # a closed loop is the closed levels' alone


def test_bursts_scale_a_closed_loops_front_end_but_not_one_measured_under_open_arrivals():
    from calculators.sim.front_end import FrontEnd, FrontEndByLoad
    from calculators.sim.step_model import StepTimeModel
    from reports.predict.calibration import Calibration, predict

    users = (1, 2, 4, 8, 16)
    front = FrontEndByLoad(users, tuple(FrontEnd((u / 1e3,) * 4, (u / 1e3,) * 4, (u / 1e3,) * 4) for u in users))
    closed = Calibration("continuous", SERVER, StepTimeModel(base_s=0.001), np.array([[16, 8]] * 10), 16.0,
                         front, ("c=1",), counts=((16.0, 200.0),))   # gamma arrivals, cv^2 16: bursts
    opened = replace(closed, front_end_open_loop=True)
    bursty = predict(closed, "rate_rps", 60.0, 1.0, 10.0, replications=2).value("ttft_s", "p99")
    as_measured = predict(opened, "rate_rps", 60.0, 1.0, 10.0, replications=2).value("ttft_s", "p99")
    assert bursty > 1.3 * as_measured

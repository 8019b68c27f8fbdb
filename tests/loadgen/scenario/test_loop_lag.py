import sys
import time

import gevent
import numpy as np
import pytest

from loadgen.scenario.loop_lag import LoopLagProbe


def _block(seconds: float) -> None:
    """Hold the event loop, as a long parse or a descheduled process would."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the timerfd probe is Linux's")
def test_a_stall_counts_once_for_every_tick_it_made_late():
    probe = LoopLagProbe(interval_s=1e-3)
    probe.start()
    gevent.sleep(0.2)
    _block(0.030)
    gevent.sleep(0.2)
    probe.stop()
    lag = np.frombuffer(probe.lag_s)
    summary = probe.summary()
    assert summary["loop_lag_probe"] == "timerfd" and summary["loop_lag_samples"] == len(lag)
    # the 30 ms stall missed ~30 ticks: each is a sample, the oldest ~30 ms late, then 29, 28, ...
    assert summary["loop_lag_max_s"] >= 0.029
    assert np.sum(lag > 0.010) >= 15
    assert len(lag) >= 300                          # ~1 per ms over the 0.43 s, stall included


def test_samples_before_the_warm_up_ends_are_not_kept():
    probe = LoopLagProbe(interval_s=1e-3)
    probe.measure_from = time.perf_counter() + 0.15
    probe.start()
    _block(0.030)                                   # inside the warm-up: not counted
    gevent.sleep(0.3)
    probe.stop()
    assert 0 < probe.summary()["loop_lag_samples"] and probe.summary()["loop_lag_max_s"] < 0.029


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the timerfd probe is Linux's")
def test_the_work_of_stopping_the_test_does_not_count():
    # Locust's Runner.stop() walks inspect.stack() (tens of ms) and only then fires test_stopping, whose
    # listener stops the probe; the probe's timer came due meanwhile and its greenlet may run once more
    probe = LoopLagProbe(interval_s=1e-3)
    probe.start()
    gevent.sleep(0.2)
    _block(0.040)          # the stopping's own work, in the same call as the stop
    probe.stop()
    gevent.sleep(0.05)
    assert probe.summary()["loop_lag_samples"] >= 150 and probe.summary()["loop_lag_max_s"] < 0.020

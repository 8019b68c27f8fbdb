"""The fleet's t = 0 (`servecap.fleet.run.ReplayClock`) and the controller's clock on it: a controller armed by a
replica's gauges (a step late) is armed again on the first record's exact start, and what it had timed on the
first clock moves with the correction."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from servecap.fleet.controller import FleetClock, FleetController
from servecap.fleet.replicas import Replica
from servecap.fleet.run import ReplayClock


def _clock(tmp_path, armed):
    demand = SimpleNamespace(t_s=np.array([0.5, 1.0]))
    records = tmp_path / "requests.jsonl"
    clock = ReplayClock(records, demand, SimpleNamespace(ready=lambda: []), armed.append)
    return clock, records


def _first_record(records, t0_unix: float) -> None:
    # row 1 of the demand (at 1.0 s in it) was scheduled 1.0 s after the replay began
    records.write_text(json.dumps({"request_id": "trace#1", "t_sched": t0_unix + 1.0}) + "\n")


def test_an_arming_a_step_late_is_corrected_on_the_first_record(tmp_path):
    armed: list[float] = []
    clock, records = _clock(tmp_path, armed)
    t0 = time.time() - 2.0
    clock._arm(t0 + 0.3)   # the gauges showed the first request a prefill step (0.3 s) late
    _first_record(records, t0)
    clock._watch()
    assert clock.t0_unix == pytest.approx(t0)
    assert clock.rearmed_by_s == pytest.approx(0.3)
    assert clock.arm_error_s == 0.0
    assert len(armed) == 2 and armed[0] - armed[1] == pytest.approx(0.3, abs=2e-3)   # on the monotonic clock
    clock.http.close()


def test_an_arming_on_time_is_left_alone(tmp_path):
    armed: list[float] = []
    clock, records = _clock(tmp_path, armed)
    t0 = time.time() - 2.0
    clock._arm(t0 + 0.001)
    _first_record(records, t0)
    clock._watch()
    assert len(armed) == 1 and clock.rearmed_by_s is None
    assert clock.arm_error_s == pytest.approx(0.001, abs=1e-6)
    clock.http.close()


def test_armed_again_the_controller_moves_what_it_timed_by_the_correction():
    clock = FleetClock()
    replica = Replica(id=0, name="r0", requested_s=-5.0, ready_s=-1.0)
    controller = FleetController(SimpleNamespace(replicas=[replica]), router=None, clock=clock, autoscaler=None,
                                 faults=(), cold_start_s=0.0, horizon_s=10.0)
    controller.arm(clock.t0)   # no move: the clock already counts from there
    replica.drain_s = replica.stopped_s = 2.0
    controller.events = [(2.0, "killed", "r0", "")]
    controller.arm(clock.t0 - 0.3)   # the replay began 0.3 s before the first arming said
    assert controller.events == [(2.3, "killed", "r0", "")]
    assert (replica.requested_s, replica.ready_s, replica.drain_s, replica.stopped_s) == \
        pytest.approx((-4.7, -0.7, 2.3, 2.3))
    controller.http.close()

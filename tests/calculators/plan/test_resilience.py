"""The router's retries and circuit breakers in the plan (`calculators.plan.resilience`), on exact small cases:
a breaker opens after N failures and half-opens after its timeout, a backoff grows and is capped, and a
replica given an error burst is retried past, then skipped, with every request accounted for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.plan.demand import Demand
from calculators.plan.fleet import Fault as FleetFault
from calculators.plan.fleet import FleetConfig, ReplicaSpec, run_fleet
from calculators.plan.outcome import PlanSlo, outcome
from calculators.plan.resilience import Breaker, ReplicaErrors, RouterResilience
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer
from contract.faults import Fault, parse_replica_fault
from contract.slo import SLO

SPEC = ReplicaSpec(SimServer.from_flags("continuous", num_kv_blocks=4000), StepTimeModel(base_s=0.01), 4000)


def _demand(times) -> Demand:
    n = len(times)
    return Demand(t_s=np.asarray(times, dtype=float), prompt=np.full(n, 16, dtype=np.int64),
                  output=np.full(n, 10, dtype=np.int64), session=np.full(n, -1, dtype=np.int64), prefix=None)


def test_a_breaker_opens_after_its_failures_half_opens_after_its_timeout_and_closes_after_its_successes():
    breaker = Breaker(RouterResilience(cb_failure_threshold=3, cb_success_threshold=2, cb_timeout_duration_secs=10))
    for t in (1.0, 2.0):
        breaker.record(False, t)
    breaker.record(True, 2.5)                      # a success resets the count: two more failures do not open it
    breaker.record(False, 3.0)
    breaker.record(False, 4.0)
    assert breaker.can_execute(4.0) and breaker.state == "closed"
    breaker.record(False, 5.0)                     # the third in a row
    assert breaker.state == "open" and not breaker.can_execute(14.9) and breaker.opened == 1
    assert breaker.can_execute(15.0) and breaker.state == "half_open"   # 10 s after it opened
    breaker.record(False, 15.0)                    # one failure half-open: open again, from now
    assert not breaker.can_execute(24.9) and breaker.opened == 2
    assert breaker.can_execute(25.0)
    breaker.record(True, 25.0)
    assert breaker.state == "half_open"
    breaker.record(True, 25.1)
    assert breaker.state == "closed" and breaker.can_execute(25.2)
    off = Breaker(RouterResilience(cb_failure_threshold=1, disable_circuit_breaker=True))
    off.record(False, 0.0)
    assert off.can_execute(0.0) and off.opened == 0


def test_a_backoff_grows_by_its_multiplier_to_its_cap_within_its_jitter():
    policy = RouterResilience(retry_initial_backoff_ms=100, retry_max_backoff_ms=250, retry_backoff_multiplier=2.0,
                              retry_jitter_factor=0.0)
    rng = np.random.default_rng(0)
    assert [policy.backoff_s(k, rng) for k in range(4)] == [0.1, 0.2, 0.25, 0.25]
    jittered = RouterResilience(retry_initial_backoff_ms=400, retry_jitter_factor=0.5)
    draws = [jittered.backoff_s(0, rng) for _ in range(500)]
    assert 0.2 <= min(draws) < 0.25 and 0.55 < max(draws) <= 0.6   # [0.5x, 1.5x]


@pytest.mark.parametrize("field, value, message", [("retry_max_retries", 0, "--retry-max-retries"),
                                                   ("retry_backoff_multiplier", 0.5, "--retry-backoff-multiplier"),
                                                   ("retry_jitter_factor", 2.0, "--retry-jitter-factor"),
                                                   ("cb_timeout_duration_secs", -1, "--cb-timeout-duration-secs")])
def test_a_bad_setting_names_its_flag(field, value, message):
    with pytest.raises(ValueError, match=message):
        RouterResilience(**{field: value})


def test_the_router_flags_are_vllm_routers_own():
    flags = RouterResilience(retry_max_retries=2, disable_circuit_breaker=True).router_flags()
    assert flags[:2] == ["--retry-max-retries", "2"] and flags[-1] == "--disable-circuit-breaker"
    assert "--cb-timeout-duration-secs" in flags and "--retry-jitter-factor" in flags


def test_a_failing_replica_is_retried_past_then_skipped_once_its_circuit_opens():
    # two replicas, round robin; replica 1 answers every attempt 503 from t = 1 s on; one request a second
    policy = RouterResilience(cb_failure_threshold=3, cb_timeout_duration_secs=100, retry_jitter_factor=0.0)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=2, resilience=policy,
                         replica_errors=(ReplicaErrors(1, 1.0, math.inf, 503, 1.0),))
    run = run_fleet(_demand(np.arange(12.0)), config)
    router = run.router
    # sends: r0, r1 (fails, retried 50 ms later to r0), r1 (fails) ... until r1's third failure opens it
    assert router["failed_at"] == {"r1": 3} and router["breaker_opened"] == {"r1": 1}
    assert router["retries"] == 3 and router["errored"] == 0 and not run.errored.any()
    assert np.isfinite(run.end_s).all() and (run.replica[1:] == 0).all() and run.replica[0] == 0
    retried = np.flatnonzero(run.ttft_s > 0.05)
    assert len(retried) == 3 and np.allclose(run.ttft_s[retried], 0.05 + 0.01)   # the backoff, then a prefill step
    assert router["sent_to"] == {"r0": 12, "r1": 3} and router["attempts"] == 15


def test_without_retries_a_failed_attempt_is_the_clients_error_and_fails_its_window():
    policy = RouterResilience(retry_max_retries=1, cb_failure_threshold=100)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=2, resilience=policy,
                         replica_errors=(ReplicaErrors(1, 0.0, 4.0, 500, 1.0),))
    run = run_fleet(_demand(np.arange(8.0)), config)
    assert run.errored.tolist() == [False, True, False, True, False, False, False, False]
    assert np.isnan(run.end_s[run.errored]).all() and run.router["retries"] == 0
    judged = outcome(run, PlanSlo(SLO(ttft_ms=1000), attainment=0.99), window_s=4.0)
    assert [w.failed for w in judged.windows] == [2, 0]   # errors count against their window, as a real fleet's


def test_every_circuit_open_is_the_routers_own_503_and_retried():
    policy = RouterResilience(cb_failure_threshold=1, cb_timeout_duration_secs=1, retry_max_retries=3,
                              retry_jitter_factor=0.0)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=1, resilience=policy,
                         replica_errors=(ReplicaErrors(0, 0.0, 0.5, 503, 1.0),))
    run = run_fleet(_demand([0.0, 0.2]), config)
    # request 0 fails at 0 (opens the circuit), request 1 finds it open at 0.2 and at its two retries
    # (0.25, 0.325): the router's 503 three times; request 0's retries (0.05, 0.125) find it open too
    assert run.errored.tolist() == [True, True] and run.router["failed_at"] == {"r0": 1}
    assert run.router["attempts"] == 6 and run.router["sent_to"] == {"r0": 1}


def test_a_replica_fault_flag_reads_as_a_replica_and_a_fault_spec():
    rid, fault = parse_replica_fault("r1:errors:status=503,rate=0.5,at=60,for=30")
    assert rid == 1 and fault == Fault("errors", at_s=60.0, for_s=30.0, status=503, rate=0.5)
    assert Fault.parse(fault.spec()) == fault and fault.spec(at=False) == "errors:status=503,rate=0.5,for=30s"
    for bad, message in (("errors:status=503", "give ID:SPEC"), ("1:errors:rate=2", "needs status"),
                         ("x:stall", "give ID:SPEC")):
        with pytest.raises(ValueError, match=message):
            parse_replica_fault(bad)


def test_a_retry_that_waits_for_a_replica_keeps_its_attempt_count():
    # replica 0 answers 503; it is killed before the retry is due, so the retry waits at the router for
    # the replacement (also answering 503) and goes out then as the second attempt: the last one of two
    policy = RouterResilience(retry_max_retries=2, retry_jitter_factor=0.0)
    config = FleetConfig(SPEC, "round_robin", initial_replicas=1, cold_start_s=1.0, faults=(FleetFault(0.01, 0),),
                         resilience=policy, replica_errors=(ReplicaErrors(0, 0.0, math.inf, 503, 1.0),
                                                            ReplicaErrors(1, 0.0, math.inf, 503, 1.0)))
    run = run_fleet(_demand([0.0]), config)
    assert run.errored.tolist() == [True]
    assert run.router["attempts"] == 2 and run.router["sent_to"] == {"r0": 1, "r1": 1}

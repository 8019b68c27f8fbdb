"""Queueing models against textbook values, Little's law, a batch server and fleet sizing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.batch_queue import batch_queue
from calculators.fleet import fleet, max_rate_under_slo, replica, replica_from_roofline
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.queueing import erlang_c, ggc, littles_law, md1, mg1, mmc


@pytest.mark.parametrize("servers, load, expected", [
    (1, 0.5, 0.5),              # M/M/1: P(wait) = rho
    (2, 1.0, 1 / 3),
    (3, 2.0, 4 / 9),
    (5, 4.0, 0.554113),         # Kleinrock vol. 1, call-centre example
    (10, 8.0, 0.409180),
])
def test_erlang_c_textbook_values(servers, load, expected):
    assert erlang_c(servers, load) == pytest.approx(expected, rel=1e-5)


def test_erlang_c_is_stable_for_large_server_counts():
    value = erlang_c(2000, 1900.0)
    assert 0 < value < 1


def test_mm1_closed_forms_and_exact_tails():
    lam, mu = 3.0, 4.0
    result = mmc(lam, mu, 1)
    assert result.utilization == 0.75 and result.p_wait == pytest.approx(0.75)
    assert result.mean_wait_s == pytest.approx(0.75 / (mu - lam))
    assert result.mean_response_s == pytest.approx(1 / (mu - lam))
    assert result.response_p99_s == pytest.approx(math.log(100) / (mu - lam), rel=1e-6)   # sojourn ~ Exp(mu - lam)
    assert result.wait_p99_s == pytest.approx(math.log(75) / (mu - lam), rel=1e-9)      # P(W>t) = rho e^-(mu-lam)t


def test_mmc_response_p99_matches_a_direct_simulation():
    lam, mu, c = 8.0, 1.0, 10
    result = mmc(lam, mu, c)
    rng = np.random.default_rng(0)
    n = 60_000
    arrivals = np.cumsum(rng.exponential(1 / lam, n))
    service = rng.exponential(1 / mu, n)
    free = np.zeros(c)
    response = np.empty(n)
    for i in range(n):          # FCFS: each arrival takes the earliest free server
        k = int(np.argmin(free))
        start = max(arrivals[i], free[k])
        free[k] = start + service[i]
        response[i] = free[k] - arrivals[i]
    assert np.mean(response) == pytest.approx(result.mean_response_s, rel=0.03)
    assert np.percentile(response, 99) == pytest.approx(result.response_p99_s, rel=0.05)


def test_pollaczek_khinchine_and_allen_cunneen():
    assert md1(0.5, 1.0).mean_wait_s == pytest.approx(0.5 / (2 * 0.5))          # rho / (2 mu (1 - rho))
    assert mg1(0.5, 1.0, 1.0).mean_wait_s == pytest.approx(mmc(0.5, 1.0).mean_wait_s)
    assert mg1(0.5, 1.0, 3.0).mean_wait_s == pytest.approx(2 * mmc(0.5, 1.0).mean_wait_s)
    assert ggc(8, 1, 10).mean_wait_s == pytest.approx(mmc(8, 1, 10).mean_wait_s)
    assert ggc(8, 1, 10, arrival_cv2=0.5, service_cv2=0.5).mean_wait_s == pytest.approx(
        0.5 * mmc(8, 1, 10).mean_wait_s)
    kingman = ggc(0.9, 1.0, 1, arrival_cv2=0.3, service_cv2=0.7)
    assert kingman.mean_wait_s == pytest.approx(0.9 / 0.1 * (0.3 + 0.7) / 2)   # rho/(1-rho) (ca2+cs2)/2 / mu


def test_littles_law_holds_in_every_model_and_solves_for_the_missing_term():
    for result in (mmc(8, 1, 10), md1(0.7, 1), mg1(0.7, 1, 2.0), ggc(5, 1, 6, arrival_cv2=2)):
        assert result.mean_in_system == pytest.approx(result.arrival_rate * result.mean_response_s)
        assert result.mean_in_queue == pytest.approx(result.arrival_rate * result.mean_wait_s)
    assert littles_law(arrival_rate=4, mean_time_s=0.5) == 2
    assert littles_law(arrival_rate=4, mean_in_system=2) == 0.5
    assert littles_law(mean_time_s=0.5, mean_in_system=2) == 4
    with pytest.raises(ValueError, match="exactly two"):
        littles_law(arrival_rate=1)


@pytest.mark.parametrize("call, message", [
    (lambda: mmc(5, 1, 4), "unstable queue: arrival_rate 5"),
    (lambda: mmc(-1, 1), "arrival_rate must be positive"),
    (lambda: mmc(1, 0), "service_rate must be positive"),
    (lambda: mmc(1, 2, 0), "servers must be a positive integer"),
    (lambda: mg1(0.5, 1, -1), "service_cv2 must be >= 0"),
    (lambda: batch_queue(1000, 0.02, 0.001, 32), "unstable batch queue"),
    (lambda: batch_queue(10, 0.02, 0.001, 0), "max_batch_size must be a positive integer"),
])
def test_bad_or_unstable_input_is_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _greedy_batch_server(lam, base, per_item, max_batch, n=30_000, seed=1):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / lam, n))
    latency, now, i = np.empty(n), 0.0, 0
    while i < n:
        now = max(now, arrivals[i])
        j = min(int(np.searchsorted(arrivals, now, side="right")), i + max_batch)
        now += base + per_item * (j - i)
        latency[i:j] = now - arrivals[i:j]
        i = j
    return latency


@pytest.mark.parametrize("lam", [5.0, 60.0, 200.0, 400.0])
def test_batch_queue_against_a_simulated_greedy_batch_server(lam):
    result = batch_queue(lam, 0.02, 0.001, 32)
    latency = _greedy_batch_server(lam, 0.02, 0.001, 32)
    assert result.mean_response_s == pytest.approx(latency.mean(), rel=0.06)
    assert result.response_p99_s == pytest.approx(np.percentile(latency, 99), rel=0.2)
    assert result.max_stable_rate == pytest.approx(32 / 0.052)


def test_fleet_is_the_fewest_replicas_meeting_the_slo():
    rep = replica(10.0, slots=4)
    plan = fleet(100.0, 2.0, rep)
    assert plan.response_p99_s <= 2.0
    assert plan.utilization == pytest.approx(100 / (plan.replicas * 10))
    fewer = ggc(100.0, 1 / rep.service_time_s, (plan.replicas - 1) * 4) if plan.replicas - 1 > 10 else None
    assert fewer is None or fewer.response_p99_s > 2.0
    at_slo = max_rate_under_slo(rep, 2.0)
    assert 0 < at_slo < 10
    assert ggc(at_slo, 1 / rep.service_time_s, 4).response_p99_s == pytest.approx(2.0, rel=1e-3)


def test_fleet_rejects_an_unreachable_slo():
    with pytest.raises(ValueError, match="slo_p99 100 ms is unreachable"):
        fleet(10.0, 0.1, replica(10.0, slots=4))     # service time 0.4 s alone


def test_replica_from_roofline_is_consistent_with_its_parts():
    rep = replica_from_roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), prompt_tokens=512, output_tokens=256)
    assert 1 <= rep.slots <= 256
    assert rep.capacity_rps == pytest.approx(rep.slots / rep.service_time_s)
    assert rep.tokens_per_s == pytest.approx(rep.capacity_rps * 256)
    with pytest.raises(ValueError, match="does not fit"):
        replica_from_roofline(get_model("llama-3.1-70b"), get_gpu("l4"))

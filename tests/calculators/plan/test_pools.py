"""Pools behind vLLM's router with workers killed (`calculators.plan.pools`), on exact small cases: the router
pairs a request's workers as it arrives, each pool by its own round robin over the workers left; a killed
prefill worker fails what it holds and what its KV was still to be released for; a killed decode worker fails
what it holds and what was paired with it; nothing is replaced; what finished before the kill stands."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.pools import round_robin_picks, run_pools
from calculators.plan.topology import KvLink, Topology
from calculators.sim.simulate import SimServer
from calculators.sim.step_model import StepTimeModel

MODEL = StepTimeModel(base_s=0.004, per_seq_s=0.0005, per_prefill_token_s=2e-5, per_context_token_s=0.0)
SERVER = SimServer("continuous", num_kv_blocks=4000)
KV = KvLink(bytes_per_token=1e5, link_bytes_per_s=1e9)   # 0.1 ms a token
PROMPT, OUTPUT = 1000, 20
PREFILL_S = MODEL.step_s(1, PROMPT)                         # one prompt's prefill step, alone
DECODE_S = KV.transfer_s(PROMPT) + MODEL.step_s(1, 1) + (OUTPUT - 1) * MODEL.step_s(1)   # alone, after the handoff


def _run(topology: str, send: list[float], kills: dict[int, float] | None = None, hop_s: float = 0.0):
    send_s = np.asarray(send, dtype=float)
    n = len(send_s)
    return run_pools(SERVER, MODEL, Topology.parse(topology), send_s, np.full(n, PROMPT), np.full(n, OUTPUT),
                     kv=KV, hop_s=hop_s, kills=kills)


def test_the_round_robin_counts_on_over_the_workers_left():
    send = np.arange(8, dtype=float)
    assert round_robin_picks(send, 3).tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    # worker 1 leaves at t = 3.5: the counter goes on (4, 5, 6, 7) over [0, 2]
    assert round_robin_picks(send, 3, {1: 3.5}).tolist() == [0, 1, 2, 0, 0, 2, 0, 2]
    assert round_robin_picks(send, 1, {0: 2.0}).tolist() == [0, 0, -1, -1, -1, -1, -1, -1]


def test_nothing_killed_every_request_is_answered_by_its_decode_worker_in_arrival_turn():
    run = _run("1p2d", [0.0, 1.0, 2.0, 3.0])
    assert np.isnan(run.failed_s).all()
    assert run.worker.tolist() == [1, 2, 1, 2]   # decode workers 1 and 2 (after the prefill worker 0), in turn
    np.testing.assert_allclose(run.end - np.arange(4.0), PREFILL_S + DECODE_S, rtol=1e-9)


def test_a_killed_prefill_worker_fails_what_it_holds_at_once_and_the_rest_go_to_the_other():
    # requests 0 and 1 at t = 0 go to prefill workers 0 and 1; worker 1 dies mid-prefill
    kill = PREFILL_S / 2
    run = _run("2p1d", [0.0, 0.0, 1.0, 2.0], kills={1: kill})
    assert run.failed_s[1] == pytest.approx(kill)
    assert np.isnan(run.first_token[1]) and np.isnan(run.end[1]) and run.worker[1] == -1
    assert np.isfinite(run.end[[0, 2, 3]]).all()
    assert run.prefill_worker.tolist() == [0, 1, 0, 0]   # after the kill, every prompt to worker 0


def test_a_prompt_whose_kv_is_released_after_its_prefill_worker_died_fails_at_the_handoff():
    hop = 0.05
    kill = PREFILL_S + hop / 2   # its answer came before the kill; the decode worker asks after it
    run = _run("1p1d", [0.0, 5.0], kills={0: kill}, hop_s=hop)
    assert run.failed_s[0] == pytest.approx(PREFILL_S + hop)
    assert run.failed_s[1] == pytest.approx(5.0)   # no prefill worker left: the router refuses it as it comes
    # released before the kill: it stands
    again = _run("1p1d", [0.0], kills={0: PREFILL_S + hop * 2}, hop_s=hop)
    assert np.isnan(again.failed_s[0]) and np.isfinite(again.end[0])


def test_a_killed_decode_worker_fails_its_streams_and_what_was_paired_with_it():
    # request 0 -> decode worker 1, streaming at the kill; request 1 -> decode worker 2; request 2 -> decode
    # worker 1 again, paired just before the kill but handed over after it; request 3 comes after: worker 2
    streaming = float(_run("1p2d", [0.0, 0.0]).first_token[0])
    kill = streaming + 2 * MODEL.step_s(2)
    run = _run("1p2d", [0.0, 0.0, kill - 0.001, 1.0], kills={1: kill})
    assert run.failed_s[0] == pytest.approx(kill)   # cut mid-stream
    assert np.isnan(run.first_token[0]) and np.isnan(run.end[0])
    assert run.worker[1] == 2 and np.isnan(run.failed_s[1])
    assert run.failed_s[2] == pytest.approx(kill - 0.001 + PREFILL_S)   # refused at its handoff, not at the kill
    assert run.worker[3] == 2 and np.isfinite(run.end[3])


def test_what_finished_before_the_kill_stands():
    alone = _run("1p1d", [0.0])
    run = _run("1p1d", [0.0, 10.0], kills={1: float(alone.end[0]) + 1.0})
    assert run.end[0] == alone.end[0] and np.isnan(run.failed_s[0])
    assert run.failed_s[1] == pytest.approx(10.0 + PREFILL_S)   # its decode worker was gone at its handoff


def test_kills_are_refused_where_they_mean_nothing():
    with pytest.raises(ValueError, match="disaggregated"):
        _run("agg:2", [0.0], kills={0: 1.0})
    with pytest.raises(ValueError, match="no worker 3"):
        _run("1p2d", [0.0], kills={3: 1.0})

"""Aggregated and disaggregated topologies (`calculators.plan.topology`): a disaggregated request's first token is
its prefill worker's step, the hop, the KV transfer and the decode worker's first step, exactly; the decode
worker never computes a prompt; one aggregated replica is the simulator's own run; `calc simulate --topology`
judges each level by the one SLO rule and names the winner."""

from __future__ import annotations

import numpy as np
import pytest

from calculators.plan.topology import KvLink, Topology, simulate_topology
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.distributions import LengthDistribution as L

MODEL = StepTimeModel(base_s=0.004, per_seq_s=0.0005, per_prefill_token_s=2e-5, per_context_token_s=0.0)
SERVER = SimServer("continuous", num_kv_blocks=4000)
KV = KvLink(bytes_per_token=1e5, link_bytes_per_s=1e9, latency_s=0.001)   # 0.1 ms a token, 1 ms fixed


@pytest.mark.parametrize("text, expected", [("agg:2", Topology(replicas=2)), ("1p1d", Topology(prefill=1, decode=1)),
                                            (" 3P2D ", Topology(prefill=3, decode=2))])
def test_topologies_parse_as_written(text, expected):
    assert Topology.parse(text) == expected
    assert Topology.parse(str(expected)) == expected


@pytest.mark.parametrize("text, message", [("2", "give agg:N"), ("agg:0", "aggregated"), ("0p1d", "at least one"),
                                           ("1p", "give agg:N")])
def test_a_bad_topology_names_the_forms(text, message):
    with pytest.raises(ValueError, match=message):
        Topology.parse(text)


def _one_at_a_time(prompt: int, output: int, requests: int = 5) -> SimWorkload:
    """Arrivals 10 s apart: each request meets an idle deployment."""
    return SimWorkload(prompt_tokens=L.fixed(prompt), output_tokens=L.fixed(output), arrival_times=tuple(
        10.0 * k for k in range(requests)), warmup_fraction=0.0)


def test_a_disaggregated_first_token_is_prefill_hop_transfer_and_one_step():
    prompt, output, hop = 1000, 20, 0.003
    _, trace = simulate_topology(SERVER, _one_at_a_time(prompt, output), MODEL, Topology.parse("1p1d"), kv=KV,
                                 hop_s=hop)
    prefill_step = MODEL.step_s(1, prompt)          # the whole prompt in one step (within the token budget)
    first_step = MODEL.step_s(1, 1)                 # the decode worker computes the last prompt token only
    expected = prefill_step + hop + KV.transfer_s(prompt) + first_step
    np.testing.assert_allclose(trace.first_token - trace.arrival, expected, rtol=1e-9)
    assert KV.transfer_s(prompt) == pytest.approx(0.001 + 999 * 1e-4)
    decodes = (output - 1) * MODEL.step_s(1)        # then one sequence's decode steps
    np.testing.assert_allclose(trace.end - trace.first_token, decodes, rtol=1e-9)


def test_the_decode_worker_never_computes_a_prompt():
    workload = SimWorkload(prompt_tokens=L.fixed(2000), output_tokens=L.fixed(50), rate_rps=4.0, requests=80)
    agg, _ = simulate_topology(SERVER, workload, MODEL, Topology.parse("agg:2"))
    pd, trace = simulate_topology(SERVER, workload, MODEL, Topology.parse("1p1d"), kv=KV)
    assert np.isfinite(trace.end).all()
    # the same requests finish either way, and the prefill worker's steps carry every prompt
    assert pd.requests == agg.requests
    # without prefill among its decodes, no decode step carries a 2000-token chunk: TPOT is the decode step's
    assert pd.metrics["tpot_s"]["p99"] < agg.metrics["tpot_s"]["p99"]
    assert pd.metrics["ttft_s"]["p50"] > agg.metrics["ttft_s"]["p50"]   # a second step and the transfer first


def test_one_aggregated_replica_is_the_simulators_run():
    workload = SimWorkload(prompt_tokens=L.uniform(50, 400), output_tokens=L.uniform(5, 60), rate_rps=30.0,
                           requests=300, seed=3)
    _, trace = simulate_topology(SERVER, workload, MODEL, Topology.parse("agg:1"))
    plain = simulate_trace(SERVER, workload, MODEL)
    np.testing.assert_allclose(trace.first_token, plain.first_token, rtol=1e-12)
    np.testing.assert_allclose(trace.end, plain.end, rtol=1e-12)


def test_what_a_topology_cannot_simulate_is_refused():
    with pytest.raises(ValueError, match="open loop"):
        simulate_topology(SERVER, SimWorkload(concurrency=4), MODEL, Topology.parse("agg:2"))
    with pytest.raises(ValueError, match="KV link"):
        simulate_topology(SERVER, _one_at_a_time(10, 2), MODEL, Topology.parse("1p1d"))
    with pytest.raises(ValueError, match="continuous"):
        simulate_topology(SimServer("static", num_kv_blocks=100), _one_at_a_time(10, 2), MODEL,
                          Topology.parse("1p1d"), kv=KV)


def test_calc_simulate_topology_judges_each_level_and_names_the_winner(calc_json, calc):
    flags = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--max-model-len", "8704", "--prompt-tokens", "8000",
             "--output-tokens", "200", "--rates", "1,3,5", "--warmup", "5s", "--duration", "20s",
             "--topology", "agg:2,1p1d", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "15")
    out = calc_json("simulate", *flags)
    assert [(lv["topology"], lv["rate_rps"]) for lv in out["levels"]] == [
        ("agg:2", 1.0), ("agg:2", 3.0), ("agg:2", 5.0), ("1p1d", 1.0), ("1p1d", 3.0), ("1p1d", 5.0)]
    assert all(lv["gpus"] == 2 for lv in out["levels"])
    for lv in out["levels"]:   # a level meets the SLO exactly when its p99s are within the limits
        within = lv["metrics"]["ttft_s"]["p99"] <= 1.0 and lv["metrics"]["tpot_s"]["p99"] <= 0.015
        assert lv["meets_slo"] == within, lv
    best = {name: None if b is None else b["rate_rps"] for name, b in out["best"].items()}
    assert best == {"agg:2": 1.0, "1p1d": 3.0}   # 8000-token prompts among decodes break agg's TPOT at 3/s
    assert out["answer"].startswith("1p1d serves the most at the SLO: 3 req/s on 2 GPUs") and "+200% over agg:2" in out["answer"]
    assert out["kv_transfer"]["link_gbs"] == pytest.approx(450.0)   # the H100's NVLink, as an emulated worker's
    code, _, err = calc("simulate", *flags[:-6], "--topology", "2x")
    assert code == 2 and "give agg:N" in err and "Traceback" not in err
    code, _, err = calc("simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4",
                        "--topology", "1p1d")
    assert code == 2 and "open loop" in err


# -- the search over a GPU budget (calculators.plan.topology_search) ------------------------------------------
def _window(rate: float, seconds: float, prompt: int, output: int, seed: int = 0):
    from calculators.plan.topology_search import Window

    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, int(rate * seconds)))
    return Window(t, np.full(len(t), prompt), np.full(len(t), output), float(seconds))


def _replica():
    from calculators.plan.fleet import ReplicaSpec

    return ReplicaSpec(SERVER, MODEL, SERVER.num_kv_blocks, gpus=1, hourly_usd_per_gpu=2.0)


def test_an_aggregated_candidate_is_its_pools_first_replica_exactly():
    from calculators.plan.topology_search import _Searcher
    from contract.slo import SLO

    window = _window(20.0, 30.0, 600, 40)
    searcher = _Searcher(_replica(), window, SLO(ttft_ms=500), KV, 0.0)
    candidate = searcher.evaluate(Topology(replicas=3))
    workload = SimWorkload(prompt_tokens=L.fixed(600), output_tokens=L.fixed(40), arrival_times=tuple(window.t_s),
                           warmup_fraction=0.0)
    _, trace = simulate_topology(SERVER, workload, MODEL, Topology(replicas=3))
    ttft = (trace.first_token - trace.arrival)[0::3]   # replica 0's requests in the whole pool's run
    assert candidate.ttft_p99_s == pytest.approx(float(np.percentile(ttft, 99)), rel=1e-12)
    assert candidate.gpus == 3 and candidate.tokens_per_s_per_gpu == pytest.approx(20.0 * 30 * 40 / 30 / 3, rel=0.1)


def test_the_search_finds_the_fewest_gpus_of_each_kind_and_a_front_nobody_beats():
    from calculators.plan.topology_search import search_topologies
    from contract.slo import SLO

    result = search_topologies(_replica(), _window(30.0, 30.0, 3000, 60), SLO(ttft_ms=400, tpot_ms=12),
                               gpu_budget=12, kv=KV)
    by_name = {str(c.topology): c for c in result.candidates}
    for best in (result.best_aggregated, result.best_disaggregated):
        assert best is not None and best.meets
    n = result.best_aggregated.topology.replicas
    assert n == 1 or not by_name[f"agg:{n - 1}"].meets   # one fewer replica misses
    p, d = result.best_disaggregated.topology.prefill, result.best_disaggregated.topology.decode
    assert d == 1 or not by_name[f"{p}p{d - 1}d"].meets
    meeting = [c for c in result.candidates if c.meets]
    for c in result.pareto:   # no meeting candidate is better on both axes
        assert not any(o.tokens_per_s_per_gpu > c.tokens_per_s_per_gpu
                       and (o.tokens_per_s_per_user or 0) > (c.tokens_per_s_per_user or 0) for o in meeting)
    assert all(c.usd_per_million_tokens == pytest.approx(c.gpus * 2.0 / (c.tokens_per_s_per_gpu * c.gpus * 3600) * 1e6)
               for c in meeting)
    assert str(result.best_aggregated.topology) in result.answer() or str(result.best_disaggregated.topology) in result.answer()
    with pytest.raises(ValueError, match="SLO"):
        search_topologies(_replica(), _window(1.0, 10.0, 10, 2), SLO(), gpu_budget=4, kv=KV)


def test_plan_search_topology_from_the_command_line(tmp_path, capsys):
    import json

    from servecap.plan.cli import main

    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,2\n120,6\n240,2\n")
    flags = ["--rate-curve", str(curve), "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--max-model-len", "8704",
             "--prompt-tokens", "4000", "--output-tokens", "100", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "15",
             "--window-s", "60", "--search", "topology"]
    assert main([*flags, "--gpu-budget", "8", "--out", str(tmp_path / "plan")]) == 0
    answer = json.loads((tmp_path / "plan" / "plan.json").read_text())["topology"]
    assert 4 < answer["rate_rps"] < 7 and answer["requests_in_window"] > 200   # the busiest minute, near the peak
    assert answer["kv_transfer_gbs"] == pytest.approx(450.0) and answer["pareto"]
    shown = capsys.readouterr().err
    assert "Pareto front" in shown and answer["answer"][:60] in " ".join(shown.split())
    with pytest.raises(SystemExit) as stop:
        main(flags)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "servecap plan: error: --search topology needs --gpu-budget N (N >= 1 GPUs)"


def test_a_pool_whose_prefill_alone_breaks_the_ttft_fails_unrun_and_the_run_agrees():
    from calculators.plan.topology_search import _Searcher
    from contract.slo import SLO

    window = _window(40.0, 20.0, 3000, 20)   # 40 x 3000 tokens x 20 us = 2.4 s of prefill a second on one replica
    searcher = _Searcher(_replica(), window, SLO(ttft_ms=400), KV, 0.0)
    pruned = searcher.evaluate(Topology(replicas=1))
    assert not pruned.meets and "prefill alone" in pruned.reason and pruned.ttft_p99_s is None
    workload = SimWorkload(prompt_tokens=L.fixed(3000), output_tokens=L.fixed(20), arrival_times=tuple(window.t_s),
                           warmup_fraction=0.0)
    run, _ = simulate_topology(SERVER, workload, MODEL, Topology(replicas=1))
    bound_ms = float(pruned.reason.split(">= ")[1].split(" ms")[0])
    assert run.metrics["ttft_s"]["p99"] * 1e3 >= bound_ms > 400   # the bound holds: the run is slower still
    run_four = searcher.evaluate(Topology(replicas=4))   # 0.6 s of prefill a second each: run, not pruned
    assert "prefill alone" not in run_four.reason and run_four.ttft_p99_s is not None


def test_a_tie_at_the_rates_simulated_is_said_to_be_one():
    from calculators.cli.topology_command import TopologyLevel, _answer, _best

    def level(name, rate, meets):
        return TopologyLevel(name, 2, rate, None, meets, "")

    levels = [level("agg:2", 1.0, True), level("agg:2", 2.0, True), level("agg:2", 3.0, False),
              level("1p1d", 1.0, True), level("1p1d", 2.0, True), level("1p1d", 3.0, True)]
    best = {name: _best(levels, name) for name in ("agg:2", "1p1d")}
    assert (best["agg:2"].rate_rps, best["1p1d"].rate_rps) == (2.0, 3.0)
    assert _answer(best, levels).startswith("1p1d serves the most at the SLO: 3 req/s on 2 GPUs")
    assert "it may hold more" in _answer(best, levels)   # its best is the highest rate simulated
    tie = [lv for lv in levels if lv.rate_rps < 3.0]
    best = {name: _best(tie, name) for name in ("agg:2", "1p1d")}
    assert _answer(best, tie).startswith("agg:2 and 1p1d tie at the SLO: 1 req/s a GPU")
    # the report's rule: a level that meets the SLO above one that does not is not the best
    gap = [level("agg:2", 1.0, True), level("agg:2", 2.0, False), level("agg:2", 3.0, True)]
    assert _best(gap, "agg:2").rate_rps == 1.0

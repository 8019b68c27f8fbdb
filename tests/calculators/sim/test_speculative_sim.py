"""The simulator with speculative decoding: the engine's scheduler proposes, seeded draws keep, the step
model times the verification and the draft; and the crossover read off two simulated curves."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calculators.cli.commands import main
from calculators.sim.simulate import SimServer, SimWorkload, simulate, simulate_trace
from calculators.sim.speculative_step import SpeculativeStep
from calculators.sim.step_model import StepTimeModel
from calculators.speculative_crossover import crossover
from contract.distributions import LengthDistribution

MODEL = StepTimeModel(base_s=0.02, per_seq_s=0.0005, per_prefill_token_s=0.0002)
ONE_USER = SimWorkload(prompt_tokens=LengthDistribution.fixed(64), output_tokens=LengthDistribution.fixed(41),
                    requests=20, concurrency=1, warmup_fraction=0.0)


def _server(speculative=None):
    return SimServer.from_flags("continuous", max_num_seqs=8, speculative=speculative)


def test_nothing_kept_is_one_token_a_step_at_the_price_of_the_verification():
    plain = simulate_trace(_server(), ONE_USER, MODEL)
    rejected = simulate_trace(_server(SpeculativeStep(4, (0.0,))), ONE_USER, MODEL)
    assert rejected.steps == plain.steps                       # each verification keeps the target's own token only
    proposals = 20 * (36 * 4 + 3 + 2 + 1)   # k a step, fewer where max_tokens leaves less room
    assert rejected.busy_s - plain.busy_s == pytest.approx(proposals * MODEL.per_prefill_token_s, rel=1e-9)


def test_everything_kept_is_k_plus_one_tokens_a_step():
    kept = simulate_trace(_server(SpeculativeStep(4, (1.0,))), ONE_USER, MODEL)
    assert kept.steps == 20 * (1 + 40 // 5)   # a prefill step, then 40 tokens 5 at a time


def test_tpot_falls_by_about_the_expected_tokens_and_a_draft_costs_its_passes():
    ngram = SpeculativeStep(4, (0.7,))
    plain = simulate(_server(), ONE_USER, MODEL).p50("tpot_s")
    spec = simulate(_server(ngram), ONE_USER, MODEL).p50("tpot_s")
    step = MODEL.step_s(1) + 4 * MODEL.per_prefill_token_s
    assert spec == pytest.approx(step / ngram.expected_tokens, rel=0.15)
    draft = SpeculativeStep(4, (0.7,), StepTimeModel(base_s=0.002))
    assert simulate(_server(draft), ONE_USER, MODEL).p50("tpot_s") == pytest.approx(
        (step + 4 * 0.002) / ngram.expected_tokens, rel=0.15)
    assert spec < plain


def test_the_crossover_is_the_first_level_no_better():
    answer = crossover("concurrency", [1, 2, 4, 8], [10, 10, 11, 12], [5, 8, 11, 14], [100, 200, 300, 400],
                       [180, 260, 300, 330])
    assert (answer.tpot_level, answer.throughput_level) == (4, 4)
    assert answer.statement() == ("speculation stops lowering TPOT at concurrency 4; it stops raising tokens/s "
                                  "at concurrency 4")
    never = crossover("rate", [1, 2], [10, 10], [5, None], [1, 2], [2, 3])
    assert never.tpot_level is None and "every level" in never.statement()
    with pytest.raises(ValueError, match="one value per level"):
        crossover("rate", [1, 2], [1], [1, 2], [1, 2], [1, 2])


def test_calc_simulate_answers_with_and_without_and_names_the_crossover(capsys):
    base = ["simulate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--dtype", "fp8", "--max-model-len",
            "4096", "--concurrency", "1,8,64", "--prompt-tokens", "256", "--output-tokens", "64", "--requests", "150",
            "--jobs", "1"]   # in this process (the pool is tested on its own)
    spec = ["--speculative-method", "draft", "--num-speculative-tokens", "4", "--speculative-acceptance", "0.7",
            "--speculative-model", "llama-3.2-1b"]
    assert main([*base, *spec, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plain, side = out["levels"], out["speculative"]["levels"]
    assert len(plain) == len(side) == 3
    assert side[0]["metrics"]["tpot_s"]["p50"] < plain[0]["metrics"]["tpot_s"]["p50"] / 2   # weights-bound: pays
    assert out["speculative"]["crossover"]["axis"] == "concurrency" and out["speculative"]["statement"]
    assert main([*base, *spec]) == 0 and "beside without" in capsys.readouterr().out
    no_gpu = ["simulate", "--concurrency", "1", "--step-base-ms", "20", *spec]
    assert main(no_gpu) == 2 and "give --gpu" in capsys.readouterr().err


def test_a_prompts_last_chunk_of_one_token_proposes_nothing_and_every_request_gets_its_first_token():
    """A prompt one token longer than the step's budget ends in a one-token chunk, which looks like a decode."""
    server = SimServer.from_flags("continuous", max_num_seqs=4, max_num_batched_tokens=64,
                                     speculative=SpeculativeStep(3, (0.6,)))
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(65), output_tokens=LengthDistribution.fixed(12),
                        requests=12, concurrency=3, warmup_fraction=0.0)
    trace = simulate_trace(server, workload, MODEL)
    assert np.isfinite(trace.first_token).all() and np.isfinite(trace.end).all()
    assert (trace.first_token < trace.end).all()


def test_a_proposal_share_proposes_at_that_share_of_decodes():
    """Prompt lookup proposes only where the last tokens recur: the server's spec_drafts_per_decode."""
    plain = simulate_trace(_server(), ONE_USER, MODEL)
    quarter = simulate_trace(_server(SpeculativeStep(4, (0.0,), proposal_share=0.25)), ONE_USER, MODEL)
    everything = 20 * (36 * 4 + 3 + 2 + 1) * MODEL.per_prefill_token_s   # every decode proposing (the test above)
    assert (quarter.busy_s - plain.busy_s) / everything == pytest.approx(0.25, abs=0.04)
    with pytest.raises(ValueError, match=r"must lie in \(0, 1\]"):
        SpeculativeStep(4, (0.5,), proposal_share=0.0)

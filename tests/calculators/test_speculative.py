"""Speculative decoding's arithmetic: expected tokens per verification step, the verification pass's
cost, and the batch above which speculation stops paying."""

from __future__ import annotations

import json

import pytest

from calculators.cli.commands import main
from engine_core.dtypes import parse_dtype, parse_kv_dtype
from calculators.efficiency_profile import efficiencies_for
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.speculative import Speculation, speculative_decode
from calculators.step_cost import decode_cost

TARGET, DRAFT, GPU = get_model("llama-3.1-70b"), get_model("llama-3.2-1b"), get_gpu("h100-sxm")


@pytest.mark.parametrize("rates, expected", [((0.0,), 1.0), ((1.0,), 5.0), ((0.5,), 1 + 0.5 + 0.25 + 0.125 + 0.0625),
                                             ((0.8, 0.5, 0.5, 0.0), 1 + 0.8 + 0.5 + 0.5)])
def test_expected_tokens_per_step_is_the_accepted_prefix_plus_the_targets_own(rates, expected):
    assert Speculation("ngram", 4, rates).expected_tokens == pytest.approx(expected)
    if len(rates) == 1 and 0 < rates[0] < 1:   # the closed form for one rate
        a = rates[0]
        assert expected == pytest.approx((1 - a ** 5) / (1 - a))


def test_one_token_per_sequence_is_the_plain_decode_step_and_more_tokens_cost_only_compute():
    dt, kv = parse_dtype("fp8"), parse_kv_dtype("fp8")
    eff = efficiencies_for(GPU, dt, 1)
    plain = decode_cost(TARGET, GPU, dt, kv, batch=8, context=1024, tp=1, eff=eff)
    verify = decode_cost(TARGET, GPU, dt, kv, batch=8, context=1024, tp=1, eff=eff, tokens_per_seq=5)
    assert (verify.weight_bytes, verify.kv_bytes) == (plain.weight_bytes, plain.kv_bytes)
    assert verify.flops == pytest.approx(5 * plain.flops)
    assert verify.overhead_s == plain.overhead_s


def test_speculation_pays_at_low_batch_and_the_crossover_is_where_it_stops():
    answer = speculative_decode(TARGET, GPU, Speculation("draft", 4, (0.7,), DRAFT), dtype="fp8")
    first, last = answer.rows[0], answer.rows[-1]
    assert first.batch == 1 and first.speedup > 2.0                     # weights-bound: 5 tokens for the price of 1
    assert first.tpot_speculative_s == pytest.approx((first.draft_s + first.verify_step_s) / 2.7731)
    assert last.speedup < 1.0                                           # compute-bound: the rejected tokens are waste
    crossover = answer.crossover_batch
    before = [row for row in answer.rows if row.batch < crossover]
    assert before and all(row.speedup > 1 for row in before)
    at = next(row for row in answer.rows if row.batch == crossover)
    assert at.tpot_speculative_s >= at.tpot_plain_s and at.tokens_per_s_speculative <= at.tokens_per_s_plain
    ngram = speculative_decode(TARGET, GPU, Speculation("ngram", 4, (0.7,)), dtype="fp8")
    assert all(row.draft_s == 0 for row in ngram.rows) and ngram.crossover_batch >= crossover


@pytest.mark.parametrize("args, says", [
    (("ngram", 0, (0.5,)), "positive integer"), (("ngram", 3, (0.5, 0.5)), "one per position"),
    (("ngram", 2, (1.5,)), r"\[0, 1\]"), (("draft", 2, (0.5,)), "needs the draft model"),
    (("ngram", 2, (0.5, 0.6)), "cannot rise"),
    (("medusa", 2, (0.5,)), "must be one of")])
def test_bad_speculation_names_the_problem(args, says):
    with pytest.raises(ValueError, match=says):
        Speculation(*args)


def test_the_roofline_command_answers_with_and_without_side_by_side(capsys):
    base = ["roofline", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--dtype", "fp8"]
    assert main([*base, "--json", "--speculative-method", "draft", "--num-speculative-tokens", "4",
                 "--speculative-acceptance", "0.7", "--speculative-model", "llama-3.2-1b"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["roofline"]["batch"] == 1 and out["speculative"]["expected_tokens_per_step"] == pytest.approx(2.7731)
    assert out["speculative"]["crossover_batch"] in [row["batch"] for row in out["speculative"]["rows"]]
    assert main([*base, "--speculative-method", "ngram", "--num-speculative-tokens", "4"]) == 2
    assert "needs --speculative-method, --num-speculative-tokens and --speculative-acceptance" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:   # the engine's option, parsed by the parser: argparse's exit 2
        main([*base, "--speculative-method", "ngram", "--num-speculative-tokens", "4", "--speculative-acceptance", "x"])
    assert exit_info.value.code == 2
    assert "argument --speculative-acceptance: 'x' is not a rate" in capsys.readouterr().err
    assert main(base) == 0 and "Speculative" not in capsys.readouterr().out   # without the flags: the roofline alone

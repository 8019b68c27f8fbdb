"""When disaggregation pays (`calculators.plan.crossover`, `calc simulate --crossover`): the rate search brackets a
topology's most sustained rate, the cell's winner and gain follow from the brackets, and the command answers."""

from __future__ import annotations

import math

import pytest

from calculators.plan.crossover import Sustained, crossover, judge_cell, parse_cells, sustained_rate


@pytest.mark.parametrize("threshold, start", [(7.3, 1.0), (0.37, 1.0), (7.3, 50.0), (1.0, 1.0)])
def test_the_search_brackets_the_highest_rate_that_meets_within_its_precision(threshold, start):
    calls = []

    def meets(rate):
        calls.append(rate)
        return rate <= threshold

    low, high, n = sustained_rate(meets, start, precision=0.05)
    assert low <= threshold < high and high / low - 1 <= 0.05
    assert n == len(calls) and all(c > 0 for c in calls)
    assert n <= 12   # doubling or halving to a bracket, then halving it: a few calls, not a grid


def test_a_judge_that_never_meets_or_always_meets_stops_at_the_floor_or_ceiling():
    low, high, _ = sustained_rate(lambda rate: False, 1.0)
    assert low == 0 and high <= 1e-3
    low, high, _ = sustained_rate(lambda rate: True, 1.0)
    assert low >= 1e5 and math.isinf(high)


def test_a_winner_is_settled_only_when_its_low_beats_the_others_high():
    clear = judge_cell(8000, 200, [Sustained("agg:2", 2, 2.0, 2.1, 6), Sustained("1p1d", 2, 3.0, 3.15, 6)])
    assert clear.winner == "1p1d" and clear.runner_up == "agg:2" and clear.settled
    assert clear.gain == pytest.approx(0.5)
    assert clear.gain_range == pytest.approx((3.0 / 2.1 - 1, 3.15 / 2.0 - 1))
    close = judge_cell(2000, 500, [Sustained("agg:2", 2, 8.0, 8.4, 6), Sustained("1p1d", 2, 8.2, 8.6, 6)])
    assert close.winner == "1p1d" and not close.settled and close.gain_range[0] < 0 < close.gain_range[1]
    per_gpu = judge_cell(200, 200, [Sustained("agg:4", 4, 8.0, 8.4, 6), Sustained("1p1d", 2, 5.0, 5.2, 6)])
    assert per_gpu.winner == "1p1d" and per_gpu.gain == pytest.approx(5.0 / 2 / (8.0 / 4) - 1)   # a GPU's share
    nobody = judge_cell(9000, 9000, [Sustained("agg:2", 2, 0.0, 1e-3, 10), Sustained("1p1d", 2, 0.0, 1e-3, 10)])
    assert nobody.winner is None and not nobody.settled
    alone = judge_cell(9000, 9, [Sustained("agg:2", 2, 0.0, 1e-3, 10), Sustained("1p1d", 2, 1.0, 1.04, 8)])
    assert alone.winner == "1p1d" and math.isinf(alone.gain) and alone.settled


def test_every_cell_is_judged_over_every_topology_by_its_own_threshold():
    limits = {("agg:2", 200): 6.0, ("1p1d", 200): 4.0, ("agg:2", 8000): 2.0, ("1p1d", 8000): 3.0}
    cells = crossover(lambda name, prompt, output, rate: rate <= limits[name, prompt], [("agg:2", 2), ("1p1d", 2)],
                      parse_cells("200,8000/100"), precision=0.02)
    assert [(c.prompt_tokens, c.output_tokens, c.winner) for c in cells] == [(200, 100, "agg:2"), (8000, 100, "1p1d")]
    assert cells[0].gain == pytest.approx(0.5, rel=0.05) and cells[1].gain == pytest.approx(0.5, rel=0.05)


@pytest.mark.parametrize("text, message", [("200,2000", "give PROMPTS/OUTPUTS"), ("200/x", "whole token counts"),
                                           ("/200", "at least one prompt length"), ("0/200", "at least 1 token")])
def test_bad_crossover_cells_name_the_form(text, message):
    with pytest.raises(ValueError, match=message):
        parse_cells(text)


def test_calc_simulate_crossover_names_the_winner_per_length(calc_json, calc):
    flags = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--max-model-len", "8704", "--warmup", "2s",
             "--duration", "10s", "--topology", "agg:2,1p1d", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "15")
    out = calc_json("simulate", *flags, "--crossover", "8000/200", "--crossover-precision", "0.1")
    (cell,) = out["cells"]
    assert (cell["prompt_tokens"], cell["output_tokens"]) == (8000, 200)
    assert cell["winner"] == "1p1d" and cell["settled"]   # long prompts break agg's TPOT: disaggregation pays
    for found in cell["sustained"]:   # each bracket is the search's: within its precision, a rate that met below
        assert found["gpus"] == 2 and found["high_rps"] / found["low_rps"] - 1 <= 0.1
    assert "1p1d wins at 8000/200" in out["answer"]
    for bad, message in ((("--crossover", "8000/200", "--rates", "1,2"), "leave out --rates"),
                         (("--crossover", "8000"), "give PROMPTS/OUTPUTS"),
                         (("--crossover", "8000/200", "--crossover-precision", "2"), "between 0 and 1")):
        code, _, err = calc("simulate", *flags, *bad)
        assert code == 2 and message in err and "Traceback" not in err
    code, _, err = calc("simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--crossover", "8000/200",
                        "--slo-ttft-ms", "1000")
    assert code == 2 and "give --topology" in err
    code, _, err = calc("simulate", *flags[:-4], "--crossover", "8000/200")
    assert code == 2 and "give --slo-ttft-ms" in err

"""reports.verdict, reports.cost, reports.level_ids: verdicts on hand-made level tables."""

import numpy as np
import pytest

from engine_core.gpus import catalog_gpu_for, get_gpu
from reports.cost import cost_per_million, resolve_price
from reports.level_ids import parse_level_id
from reports.verdict import build_verdict, knee, max_sustainable
from contract.level_result import LevelResult
from contract.run_json import RunInfo
from contract.slo import SLO, SloSample
from contract.summary import OperatingPoint

_SAMPLES: dict[int, SloSample] = {}   # id(level) -> what the judge reads of it


def _level(strategy, c, tok_s, ttft_p99, ttft_ci, e2e_p99=1.0, failed=0, count=500, unfinished=0):
    """A summary level as summary.json holds it (the keys the verdict reads), with `count` ok requests, each at
    exactly the p99s its table shows (its sample: what the judge reads), `failed` failed ones and
    `unfinished` ones never answered."""
    metric = lambda p99, ci: {"p99": p99, "p99_ci95": ci, "count": count}  # noqa: E731
    p99s = {"ttft_s": ttft_p99, "tpot_s": 0.01, "e2e_s": e2e_p99}
    level = LevelResult.from_dict({
        "level": f"{strategy}/c={c}", "strategy": strategy, "offered": {"concurrency": c},
        "request_rate_rps": tok_s / 100, "output_tokens_per_s": tok_s, "prompt_tokens_per_s": tok_s,
        "error_rate": failed / (count + failed), "incomplete": unfinished,
        "metrics": {"ttft_s": metric(ttft_p99, ttft_ci), "tpot_s": metric(0.01, [0.009, 0.011]),
                    "e2e_s": metric(e2e_p99, [e2e_p99 * 0.9, e2e_p99 * 1.1])}})
    _SAMPLES[id(level)] = SloSample(ok=count, failed=failed, unfinished=unfinished,
                                    values={column: np.full(count, p99) for column, p99 in p99s.items()})
    return level


def _samples(levels):
    return {level.level: _SAMPLES[id(level)] for level in levels}


def test_level_ids_carry_strategy_and_offered_load():
    assert parse_level_id("continuous/c=8").offered == {"concurrency": 8}
    assert parse_level_id("none/rps=2.5").offered == {"rate_rps": 2.5}
    assert parse_level_id("c=4", default_strategy="static").strategy == "static"
    assert parse_level_id("warmup-burst").offered == {}


def test_max_sustainable_stops_at_the_first_failing_level_and_grades_confidence():
    levels = [
        _level("continuous", 1, 100, 0.05, [0.04, 0.06]),
        _level("continuous", 2, 200, 0.08, [0.07, 0.09]),
        _level("continuous", 4, 400, 0.095, [0.09, 0.11]),   # p99 under 100 ms, CI crosses it
        _level("continuous", 8, 500, 0.20, [0.18, 0.22]),    # fails
        _level("continuous", 16, 520, 0.05, [0.04, 0.06]),   # after a failure: not counted
    ]
    [row] = max_sustainable(levels, SLO(ttft_ms=100), _samples(levels))
    assert row.level == "continuous/c=4"
    assert row.confidence == "low" and row.confident_level == "continuous/c=2"
    assert row.first_failing_level == "continuous/c=8" and "ttft_s p99" in row.failing_reason
    # p99 crosses 100 ms about a twentieth of the way from c=4 (95 ms) to c=8 (200 ms)
    share = (0.100 - 0.095) / (0.20 - 0.095)
    assert row.interpolated.offered_load == pytest.approx(4 + share * 4)
    assert row.interpolated.output_tokens_per_s == pytest.approx(400 + share * 100)


def test_a_p99_from_fewer_than_100_values_is_never_high_confidence():
    levels = [_level("none", 1, 100, 0.05, [0.04, 0.06], count=99), _level("none", 2, 150, 0.05, [0.04, 0.06])]
    [row] = max_sustainable(levels[:1], SLO(ttft_ms=100), _samples(levels))
    assert row.level == "none/c=1" and row.confidence == "low" and row.confident_level is None
    [row] = max_sustainable(levels[1:], SLO(ttft_ms=100), _samples(levels))
    assert row.confidence == "high"


def test_errors_above_one_percent_make_a_level_unsustainable():
    levels = [_level("none", 1, 100, 0.05, [0.04, 0.06], failed=1, count=199),   # 0.5%: within the allowance
              _level("none", 2, 150, 0.05, [0.04, 0.06], failed=1, count=19)]    # 5%
    rows = {r.slo: r for r in max_sustainable(levels, SLO(ttft_ms=100, e2e_ms=2000), _samples(levels))}
    assert set(rows) == {"ttft_s", "e2e_s", "all"}
    assert rows["all"].level == "none/c=1" and rows["all"].failing_reason == "error rate 5.0% > 1%"
    assert rows["ttft_s"].interpolated is None   # errors broke it, not the p99: nothing to interpolate


def test_requests_still_in_flight_in_the_top_percent_break_a_level_whose_table_p99_is_under_the_limit():
    levels = [_level("none", 1, 100, 0.05, [0.04, 0.06], count=300, unfinished=2),   # at 297.99: two ok values
              _level("none", 2, 150, 0.05, [0.04, 0.06], count=300, unfinished=4),   # the top 1% is unfinished
              _level("none", 4, 170, 0.05, [0.04, 0.06])]
    [row] = max_sustainable(levels, SLO(ttft_ms=100), _samples(levels))
    assert (row.level, row.first_failing_level) == ("none/c=1", "none/c=2")
    assert row.failing_reason == "ttft_s p99 unbounded > 100.0 ms: 4 of 304 requests never finished"
    assert row.interpolated is None   # an unbounded p99 crosses the limit nowhere in particular


def test_knee_is_where_latency_starts_climbing_faster_than_throughput():
    curve = [(1, 100, 1.0), (2, 200, 1.1), (4, 300, 1.2), (8, 310, 4.0), (16, 315, 10.0)]
    levels = [_level("continuous", c, tok, 0.05, [0.04, 0.06], e2e_p99=e2e) for c, tok, e2e in curve]
    assert knee(levels).level == "continuous/c=4"
    assert knee(levels[:2]) is None  # fewer than 3 levels: no knee


def test_cost_per_million_tokens_from_the_hourly_price():
    point = OperatingPoint(level="x", output_tokens_per_s=1000.0, total_tokens_per_s=2000.0)
    price = resolve_price(RunInfo(), gpu_hourly=3.6, gpu=None)
    cost = cost_per_million(point, price)
    assert cost["usd_per_1m_output_tokens"] == pytest.approx(1.0)  # 3.6 $/h / 3.6 M tok/h
    assert cost["usd_per_1m_total_tokens"] == pytest.approx(0.5)


def test_catalog_price_comes_from_the_gpu_in_run_json():
    run = {"host": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}, {"name": "NVIDIA H100 80GB HBM3"}]}}
    price = resolve_price(RunInfo.from_dict(run), gpu_hourly=None, gpu=None)
    assert price["hourly_usd"] == get_gpu("h100-sxm").hourly_usd and price["num_gpus"] == 2
    assert catalog_gpu_for("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert catalog_gpu_for("NVIDIA L40S") is None
    assert "give --gpu-hourly" in resolve_price(RunInfo(), None, None)["unavailable"]


def test_verdict_prices_the_best_strategys_max_sustainable_level():
    levels = [_level("none", 1, 100, 0.05, [0.04, 0.06]), _level("none", 2, 120, 0.5, [0.4, 0.6]),
              _level("continuous", 1, 100, 0.05, [0.04, 0.06]), _level("continuous", 8, 700, 0.09, [0.08, 0.095])]
    price = resolve_price(RunInfo(), gpu_hourly=2.0, gpu=None)
    verdict = build_verdict(levels, SLO(ttft_ms=100), cost=lambda p: cost_per_million(p, price),
                            samples=_samples(levels))
    assert verdict.operating_point.level == "continuous/c=8"
    assert verdict.cost["usd_per_1m_output_tokens"] == pytest.approx(2.0 * 1e6 / (3600 * 700))

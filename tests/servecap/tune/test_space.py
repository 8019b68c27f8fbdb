"""servecap.tune.space: the grid, the guided search's budget and path, the Pareto front; and the CLI's refusals."""

from __future__ import annotations

import pytest

from servecap.tune.cli import main
from servecap.tune.measure import measure_level as measure
from contract.slo import SLO
from servecap.tune.space import Axis, Measurement, exhaustive, grid, guided_search, neighbours, pareto_front, server_args

AXES = [Axis("--classifier-max-queue-delay-us", ("0", "500", "1000", "2000")),
        Axis("--classifier-preferred-batch-sizes", ("none", "16,32", "32,64")),
        Axis("--classifier-instances", ("1", "2"))]


def surface(point, peak=(2, 1, 1), limit_ms=20.0):
    """A smooth throughput surface peaking at `peak`; the longest delay breaks the p99 limit."""
    throughput = 1000 - 100 * sum(abs(a - b) for a, b in zip(point, peak))
    p99 = 5.0 + 6.0 * point[0]
    return Measurement(float(throughput), "req/s", {"e2e_ms": p99}, p99 <= limit_ms,
                       max(p99 / limit_ms, 0.0))


def test_the_grid_and_its_flags():
    assert len(grid(AXES)) == 24
    assert server_args(AXES, (1, 0, 1)) == "--classifier-max-queue-delay-us 500 --classifier-instances 2"
    assert neighbours(AXES, (0, 0, 0)) == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]


def test_guided_search_finds_the_best_feasible_point_within_a_third_of_the_grid():
    calls = []
    result = guided_search(AXES, lambda p: calls.append(p) or surface(p), budget=8)
    full = exhaustive(AXES, surface)
    assert result.count == len(calls) <= 8 and len(set(calls)) == len(calls)   # never measures a point twice
    assert result.best == full.best == (2, 1, 1)
    assert calls[0] == (0, 0, 0)   # it starts at the least batching


def test_guided_search_walks_out_of_infeasible_points_and_keeps_its_budget():
    # the start breaks the limit; every delay step down the axis comes closer to meeting it
    measure = lambda p: surface(p, peak=(0, 2, 1), limit_ms=20.0) if p[0] < 3 else Measurement(
        5000.0, "req/s", {"e2e_ms": 99.0}, False, 4.95)
    result = guided_search(AXES, measure, budget=3)
    assert result.count == 3
    assert result.measured[result.best].meets


def test_a_point_that_fails_ranks_below_any_that_meets():
    meets = Measurement(10.0, "req/s", {"e2e_ms": 19.0}, True)
    misses = Measurement(5000.0, "req/s", {"e2e_ms": 21.0}, False, 1.05)
    assert meets.score > misses.score > Measurement(None, "", {}, False).score


def test_the_pareto_front_keeps_only_undominated_points():
    measured = {(0,): Measurement(100.0, "req/s", {"e2e_ms": 5.0}, True), (1,): Measurement(200.0, "req/s", {"e2e_ms": 9.0}, True),
                (2,): Measurement(150.0, "req/s", {"e2e_ms": 12.0}, True), (3,): Measurement(250.0, "req/s", {"e2e_ms": 30.0}, False)}
    assert pareto_front(measured, "e2e_ms") == [(0,), (1,), (3,)]


def _record(i, status="ok", e2e=0.01, **extra):
    return {"level": "c=4", "phase": "measure", "status": status, "t_start": float(i) / 100, "e2e_s": e2e,
            "output_tokens": None, "ttft_s": None, **extra}


def measure_level(records, scenario, slo):
    """The level's measurement as tune takes it: the runner's quick figures of these records, judged."""
    from dataclasses import replace

    from contract.records import Record
    from servecap.experiment.level_stats import level_stats
    from sweep_helpers import experiment

    stats = level_stats([Record.from_dict(r) for r in records], "c=4")
    return measure(stats, "c=4", replace(experiment("--scenario", scenario, "--concurrency", "4"), slo=slo))


def test_a_level_is_measured_from_its_records_and_judged_by_the_contract():
    records = [_record(i) for i in range(100)] + [_record(50, "http_429", 0.001)]
    found = measure_level(records, "classify", SLO(e2e_ms=20))
    assert found.throughput == pytest.approx(100 / (0.99 + 0.01)) and found.p99_ms == {"e2e_ms": pytest.approx(10.0)}
    assert found.meets and found.errors == 1 and found.excess == pytest.approx(0.5)
    missed = measure_level(records, "classify", SLO(e2e_ms=5))
    assert (missed.meets, missed.reason, missed.excess) == (False, "e2e_s p99 10.0 ms > 5.0 ms", pytest.approx(2.0))
    # 2 failed of 101 answered: over the 1% allowance (a failed request's own E2E is not a latency)
    failing = measure_level(records + [_record(60, "timeout")], "classify", SLO(e2e_ms=20))
    assert failing.reason == "error rate 2.0% > 1%"
    # a limit on a figure the level has none of fails: no TTFT for a classifier (tune skipped it before)
    blind = measure_level(records, "classify", SLO(ttft_ms=100, e2e_ms=20))
    assert (blind.meets, blind.reason) == (False, "no ttft_s values")
    assert blind.p99_ms == {"ttft_ms": None, "e2e_ms": pytest.approx(10.0)}
    # still in flight when the level stopped: unbounded, not left out
    stuck = measure_level(records + [_record(70, "incomplete", None)] * 2, "classify", SLO(e2e_ms=20))
    assert stuck.reason == "e2e_s p99 unbounded > 20.0 ms: 2 of 103 requests never finished"
    assert not stuck.meets and stuck.p99_ms == {"e2e_ms": None} and stuck.errors == 1
    # a reasoning model's first answer token is judged too
    chat = [_record(i, e2e=0.5, ttft_s=0.05, ttfa_s=0.1 + i / 100, output_tokens=20) for i in range(100)]
    thinking = measure_level(chat, "chat", SLO(ttft_ms=100, ttfa_ms=500))
    assert (thinking.meets, thinking.reason) == (False, "ttfa_s p99 1080.1 ms > 500.0 ms")
    assert set(thinking.p99_ms) == {"ttft_ms", "tpot_ms", "e2e_ms", "ttfa_ms"}


@pytest.mark.parametrize("flags, words", [
    (["--concurrency", "4", "--classifier-max-queue-delay-us", "0,500"], "give an SLO"),
    (["--concurrency", "4", "--slo-e2e-ms", "20"], "at least one axis"),
    (["--slo-e2e-ms", "20", "--classifier-instances", "1,2"], "choose the load levels"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--no-such-flag", "4,8"], "unrecognized arguments: --no-such-flag"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--classifier-instances", "1,1"], "listed twice"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--axis", "no-such-flag=1|2"], "no-such-flag"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--classifier-instances", "one"], "--classifier-instances"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--max-num-seqs"], "an axis is a target flag with its values"),
    (["--concurrency", "4", "--slo-e2e-ms", "20", "--strategies", "none,static", "--max-num-seqs", "2,4"],
     "tune searches one strategy's flags"),
])
def test_bad_tune_flags_exit_2_with_one_line(tmp_path, capsys, flags, words):
    assert main(["--out", str(tmp_path / "t"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("servecap tune: error:") and words in err and not (tmp_path / "t").exists()


def test_on_a_measured_grid_the_search_lands_within_5_percent_of_its_best_in_a_third_of_it():
    """The 24-configuration grid lab/results/tune/2026-12-05 measured exhaustively (p99 <= 20 ms): throughput
    jumps between neighbours as a level passes its SLO or not; the search, replayed on those measurements,
    must still land within 5% of the best while measuring at most 8."""
    import json
    from pathlib import Path

    grid = Path(__file__).resolve().parents[3] / "lab/results/tune/2026-12-05/exhaustive/tune.json"
    doc = json.loads(grid.read_text())
    table = {}
    for config in doc["configurations"]:
        values = dict(part.split("=") for part in config["config"].split(", "))
        table[(values["classifier-max-queue-delay-us"], values["classifier-preferred-batch-sizes"],
               values["classifier-instances"])] = Measurement(config["throughput"], "req/s", config["p99_ms"],
                                                              config["meets_slo"])
    axes = [Axis("--classifier-max-queue-delay-us", ("0", "500", "1000", "2000")),
            Axis("--classifier-preferred-batch-sizes", ("none", "16,32", "32,64")),
            Axis("--classifier-instances", ("1", "2"))]
    result = guided_search(axes, lambda p: table[tuple(a.values[i] for a, i in zip(axes, p))], budget=8)
    best = max(m.throughput for m in table.values() if m.meets)
    assert result.count <= 8 and result.measured[result.best].throughput >= 0.95 * best

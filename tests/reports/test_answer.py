"""reports.answer and reports.notices: the first screen's sentences, the strategy rows, the grouped warnings."""

from dataclasses import replace

import numpy as np

from reports import answer
from reports.notices import machine_drift_levels, notices, unstable_levels
from reports.verdict import build_verdict
from contract.level_result import LevelResult
from contract.run_json import LevelEntry, RunInfo
from contract.slo import SLO, SloSample
from contract.summary import Summary


def _level(strategy, c, rps, ttft_p99, tpot_p99=0.01, count=500):
    """A summary level as summary.json holds it (the keys the verdict reads)."""
    metric = lambda p99: {"p99": p99, "p99_ci95": [p99 * 0.95, p99 * 1.05], "count": count}  # noqa: E731
    return LevelResult.from_dict({
        "level": f"{strategy}/c={c}", "strategy": strategy, "offered": {"concurrency": c},
        "request_rate_rps": rps, "output_tokens_per_s": rps * 10, "prompt_tokens_per_s": rps * 20,
        "error_rate": 0.0, "metrics": {"ttft_s": metric(ttft_p99), "tpot_s": metric(tpot_p99),
                                       "e2e_s": metric(0.5 + ttft_p99)}})


def _samples(levels):
    """Each level's requests as the SLO's judge reads them: `count` ok requests at exactly its table's p99s."""
    return {lvl.level: SloSample(ok=lvl.metrics["ttft_s"].count,
                                 values={m: np.full(stats.count, stats.p99) for m, stats in lvl.metrics.items()
                                         if stats.p99 is not None})
            for lvl in levels}


PRICE = {"hourly_usd": 3.6, "num_gpus": 1, "source": "test"}


def _summary(levels, slo=SLO(ttft_ms=500, tpot_ms=50), price=PRICE, run=None):
    def cost(point):
        if price is None:
            return {"unavailable": "no GPU in run.json; give --gpu-hourly or --gpu NAME"}
        return {**price, "usd_per_1m_output_tokens": 1e6 * price["hourly_usd"] / (3600 * point.output_tokens_per_s)}
    return Summary(run=run or {"server": {"model": "tiny"}, "host": {"cpu_model": "Xeon", "cores": 2}},
                   levels=tuple(levels), verdict=build_verdict(levels, slo, cost, _samples(levels)))


THREE = [_level("none", 1, 10, 0.1), _level("none", 8, 12, 0.9),                       # none: c=1, 10 req/s
         _level("static", 1, 20, 0.1), _level("static", 8, 40, 0.2), _level("static", 16, 45, 0.8),
         _level("continuous", 1, 30, 0.1), _level("continuous", 8, 67, 0.2), _level("continuous", 16, 70, 0.3)]


def test_the_answer_names_the_best_strategy_its_load_ratios_and_cost():
    lines = answer.sentences(_summary(THREE))
    assert lines[0] == (
        "**continuous** batching sustains **70.0 req/s (700 output tokens/s)** at p99 TTFT ≤ 500 ms and "
        "p99 TPOT ≤ 50 ms on this setup (tiny on Xeon, 2 cores, no GPU), with high confidence: "
        "7.0x what none sustains, 1.8x static. That costs **$1.429 per 1M output tokens**.")
    bullets = [line for line in lines if line.startswith("- ")]
    assert len(bullets) == 3
    assert bullets[0].startswith("- **none**: up to c=1, 10.0 req/s (100 output tokens/s), high confidence; "
                                 "c=8 breaks it (p99 TTFT 900.0 ms > 500.0 ms)")
    assert "every level measured meets the SLOs, so the limit lies beyond the highest one" in bullets[2]
    assert lines[-1].startswith("*High confidence*: the p99's 95% interval lies under every limit")


def test_one_row_per_strategy_with_knee_and_cost():
    rows = answer.strategy_rows(_summary(THREE))
    assert list(rows["strategy"]) == ["none", "static", "continuous"]
    assert list(rows["max sustainable"]) == ["c=1", "c=8", "c=16"]
    assert list(rows["req/s"]) == ["10.0", "40.0", "70.0"]
    assert rows.loc[1, "breaks at"] == "c=16: p99 TTFT 800.0 ms > 500.0 ms"
    assert rows.loc[2, "$ per 1M output tokens"] == f"{1e6 * 3.6 / (3600 * 700):.3f}"
    assert rows.loc[1, "knee"].startswith("c=8")


def test_a_strategy_meeting_nothing_and_an_unknown_price_are_said_plainly():
    levels = [_level("none", 1, 10, 0.9), _level("continuous", 1, 30, 0.1)]
    lines = answer.sentences(_summary(levels, price=None))
    assert lines[0].endswith("with high confidence: none meets the SLOs at no level.")
    assert lines[1] == "Cost per 1M tokens: not known (no GPU in run.json; give --gpu-hourly or --gpu NAME)."
    assert "- **none**: no level meets the SLOs; already at c=1: p99 TTFT 900.0 ms > 500.0 ms." in lines
    nothing = answer.sentences(_summary([_level("none", 1, 10, 0.9)]))
    assert nothing[0] == "No strategy meets p99 TTFT ≤ 500 ms and p99 TPOT ≤ 50 ms at any measured level " \
                         "on this setup (tiny on Xeon, 2 cores, no GPU)."


def test_without_slo_the_knee_answers_and_says_how_to_get_a_max_load():
    lines = answer.sentences(_summary(THREE, slo=SLO()))
    assert "--slo-ttft-ms" in lines[0]
    assert lines[1].startswith("Highest knee of the throughput-latency curve: **continuous**")


def test_low_confidence_is_explained():
    levels = [_level("none", 1, 10, 0.1, count=50)]
    lines = answer.sentences(_summary(levels))
    assert "with low confidence" in lines[0]
    assert lines[-1].startswith("*Low confidence*: the p99 is under the limit but its 95% interval is not, "
                                "or it rests on fewer than 100 requests")


def test_warnings_are_grouped_once_with_their_fix():
    run = RunInfo(levels=[LevelEntry(level="none/c=1", stable=False, throughput_spread=0.23, exit_code=0),
                          LevelEntry(level="none/c=8", stable=False, throughput_spread=0.4, exit_code=0),
                          LevelEntry(level="static/c=1", stable=True, exit_code=0)])
    summary = _summary(THREE)
    summary = replace(summary, unstable_levels=tuple(unstable_levels(run)),
                      run={**summary.run, "load_plan": {"duration_s": 10.0}}, missing=("samples.csv is missing",))
    unstable, missing = notices(summary)
    assert unstable.title == "throughput not stable"
    assert unstable.items == ["none/c=1 (spread 23%)", "none/c=8 (spread 40%)"]
    assert unstable.fix == "measure longer: rerun with `servecap sweep ... --duration 30s` (this run measured 10 s per level)"
    assert missing.items == ["samples.csv is missing"] and missing.fix is None
    assert notices(_summary(THREE)) == []


def test_a_machine_that_drifted_is_a_note_and_an_unsteady_server_a_warning_at_constant_speed():
    run = RunInfo(levels=[
        LevelEntry(level="none/c=8", stable=True, machine_drift=True, throughput_spread=0.44,
                   spread_at_constant_speed=0.01, machine_speed_spread=0.43, exit_code=0),
        LevelEntry(level="static/c=8", stable=False, throughput_spread=0.30, spread_at_constant_speed=0.19,
                   machine_speed_spread=0.08, exit_code=0),
        LevelEntry(level="static/c=1", stable=True, machine_drift=False, throughput_spread=0.04, exit_code=0)])
    summary = replace(_summary(THREE), unstable_levels=tuple(unstable_levels(run)),
                      machine_drift_levels=tuple(machine_drift_levels(run)))
    assert [n.title for n in notices(summary)] == ["throughput not stable"]   # drift is a --diagnostics instrument
    unstable, drift = notices(replace(summary, diagnostics=True))
    assert (unstable.severity, unstable.items) == ("warning", ["static/c=8 (spread 19%)"])   # judged at constant speed
    assert drift.severity == "note" and drift.title == "the machine's speed drifted"
    assert drift.items == ["none/c=8 (machine 43%, throughput 44% raw, 1% at constant speed)"]


def test_a_host_that_took_cpu_is_a_warning_of_its_own_and_names_itself_at_an_unstable_level():
    run = RunInfo(levels=[LevelEntry(level="static/c=8", stable=False, throughput_spread=0.12,
                                     spread_at_constant_speed=0.11, exit_code=0)])
    steal = {"static/c=8": {"0": 0.22, "1": 0.03},
             "continuous/c=1": {"0": 0.06, "1": 0.0}}      # below the limit: not worth a word
    levels = [replace(lvl, host_steal=steal.get(lvl.level, {})) for lvl in THREE]
    summary = replace(_summary(levels), unstable_levels=tuple(unstable_levels(run)))
    (plain,) = notices(summary)   # without --diagnostics: neither the steal nor its notice
    assert plain.items == ["static/c=8 (spread 11%)"]
    unstable, host = notices(replace(summary, diagnostics=True))
    assert unstable.items == ["static/c=8 (spread 11%; the host took 22% of core 0)"]
    assert host.title == "the machine's host took CPU" and host.severity == "warning"
    assert host.items == ["static/c=8: the host took 22% of core 0"] and "quiet host" in host.fix


def test_the_console_says_each_kind_once_with_its_levels_on_one_line():
    from reports.notices import Notice, one_line

    lag = Notice("load generator limits", "m", None, [
        "its timing error was wider than the interval at: none/c=1 (ITL p50: lag 0.05 ms, CI 0.02 ms); "
        "static/rps=12.5 (ITL p95: lag 1.0 ms, CI 0.1 ms); none/c=1 (again)"])
    assert one_line(lag) == "warning: load generator limits: none/c=1, static/rps=12.5"
    external = Notice("throughput not stable", "m", None, ["c=4 (spread 12%)", "c=16 (spread 30%)"])
    assert one_line(external) == "warning: throughput not stable: c=4, c=16"
    missing = Notice("missing or damaged data", "m", None, ["samples.csv is empty"])
    assert one_line(missing) == "warning: missing or damaged data: samples.csv is empty"

"""`servecap sweep` end to end: real reference servers, the real `locust` command, then `servecap report`."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from contract.options import parse_duration, parse_number_list
from servecap.experiment.level_stats import level_stats
from servecap.experiment.spec import Experiment
from servecap.sweep.cli import build_parser, experiment_from_args
from contract.records import Record
from contract.run_json import RunInfo
from contract.server_metrics import SCRAPE_MARKER, kept_sample_names
from contract.slo import SLO
from waiting import wait_until

SERVECAP = [sys.executable, "-m", "servecap"]
# `servecap ARGS` in a process that, when the command is done, writes the names of every module it imported
TRACING_SERVECAP = [sys.executable, "-c", "import json, sys\nfrom servecap.cli import main\ncode = main(sys.argv[2:])\n"
                    "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules)))\nsys.exit(code)"]


# --- configuration ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("10", 10.0), ("30s", 30.0), ("2m", 120.0), ("500ms", 0.5), (3, 3.0)])
def test_durations(text, seconds):
    assert parse_duration(text, "--duration") == seconds


def experiment(*flags: str) -> Experiment:
    return experiment_from_args(build_parser().parse_args(["--out", "x", *flags]))


def test_bad_plans_name_the_flag():
    with pytest.raises(ValueError, match="--duration"):
        parse_duration("ten seconds", "--duration")
    with pytest.raises(ValueError, match="--concurrency: values must be positive"):
        parse_number_list("1,0", "--concurrency", int)
    with pytest.raises(ValueError, match="choose one load: --concurrency or --rates"):
        experiment("--concurrency", "1", "--rates", "2")
    with pytest.raises(ValueError, match="unknown fastest"):
        experiment("--strategies", "fastest", "--concurrency", "1")
    with pytest.raises(ValueError, match="--auto needs at least one SLO"):
        experiment("--auto")
    with pytest.raises(ValueError, match="choose a load"):
        experiment().profile()


def test_level_ids_carry_strategy_and_load():
    assert Experiment.level_id("continuous", 8, open_loop=False) == "continuous/c=8"
    assert Experiment.level_id("none", 2, open_loop=True) == "none/rps=2.0"
    assert Experiment.level_id(None, 2, open_loop=True) == "rps=2.0"
    assert Experiment.level_id("continuous", 2.5, open_loop=True, trace=True) == "continuous/trace"
    assert [t.key for t in experiment("--strategies", "none,static", "--concurrency", "1").targets] == ["none", "static"]
    assert experiment("--url", "http://127.0.0.1:1", "--rates", "2").targets[0].key is None


def _record(level, t, ttft, e2e, tokens, status="ok", phase="measure"):
    return Record(level=level, phase=phase, t_start=t, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, status=status)


def test_level_stats_and_slo_checks_by_hand():
    records = [_record("c=2", 0.0, 0.1, 1.1, 11), _record("c=2", 1.0, 0.2, 2.2, 21),
               _record("c=2", 0.5, None, 0.5, 0, status="http_500"), _record("c=2", 0.0, 9.0, 9.0, 2, phase="warmup"),
               _record("c=2", 0.2, None, None, None, status="incomplete"), _record("c=4", 0.0, 0.1, 0.2, 2)]
    stats = level_stats(records, "c=2")
    assert (stats.requests, stats.errors, stats.incomplete) == (3, 1, 1)  # incomplete: neither ok nor an error
    assert stats.error_rate == pytest.approx(1 / 3)
    assert stats.p99_tpot_s == pytest.approx(np.percentile([0.1, 0.1], 99))
    assert stats.output_tokens_per_s == pytest.approx(32 / 3.2)
    assert stats.p99_ttft_s == pytest.approx(np.percentile([0.1, 0.2], 99))
    check = stats.check(SLO(ttft_ms=1000))  # a third of the requests failed: over the 1% allowance
    assert not check.meets and check.reason == "error rate 33.3% > 1%"
    clean = level_stats(records[:2], "c=2")
    assert clean.check(SLO(ttft_ms=300)).meets and not clean.check(SLO(ttft_ms=150)).meets
    assert not level_stats([], "c=2").check(SLO(ttft_ms=300)).meets  # nothing measured: nothing meets
    # a request still in flight when the level stopped is unbounded in every p99: at 1 in 3 it is the p99
    stuck = level_stats(records[:2] + [records[4]], "c=2").check(SLO(ttft_ms=300))
    assert (stuck.meets, stuck.reason) == (False, "ttft_s p99 unbounded > 300.0 ms: 1 of 3 requests never finished")
    reasoned = [Record(level="c=1", phase="measure", t_start=float(i), ttft_s=0.1, ttfa_s=0.5 + i / 10, e2e_s=2.0,
                       output_tokens=20, status="ok") for i in range(5)]
    ttfa = level_stats(reasoned, "c=1").check(SLO(ttft_ms=300, ttfa_ms=800))   # a reasoning model's first answer
    assert (ttfa.meets, ttfa.broken_by) == (False, "ttfa_s") and ttfa.p99_s["ttfa_s"] == pytest.approx(0.896)


def _stream(t, seconds, tokens):
    """A streamed ok request whose tokens arrive evenly over `seconds` (its first one at 0.1 s)."""
    gap = (seconds - 0.1) / (tokens - 1)
    return Record(level="c=1", phase="measure", t_start=t, ttft_s=0.1, e2e_s=seconds, itl_s=[gap] * (tokens - 1),
                  output_tokens=tokens, status="ok")


def test_stability_counts_tokens_when_they_arrived():
    # c=1, 1.6 s requests back to back for 8 s: the three windows end 1, 2 and 2 requests (spread
    # 60% counted at request ends), but tokens arrived at one steady rate
    steady = [_stream(1.6 * i, 1.6, 33) for i in range(5)]
    stats = level_stats(steady, "c=1")
    assert stats.spread == pytest.approx(0, abs=0.05) and stats.is_stable(0.10)
    # a real stall: nothing arrives in the last 3 s of the span
    stalled = steady[:3] + [_stream(4.8, 3.2, 2)]
    assert not level_stats(stalled, "c=1").is_stable(0.10)
    # a warm-up request still streaming when the window opens counts for the tokens it sent in it:
    # without it the first window of this c=2 level would hold a sixth fewer tokens than the others
    warm = dataclasses.replace(_stream(-0.8, 1.6, 33), phase="warmup")
    assert level_stats([*steady, warm, *[_stream(1.6 * i + 0.8, 1.6, 33) for i in range(4)],
                        _stream(7.2, 0.8, 17)], "c=1").is_stable(0.10)


def _back_to_back(t: float, until: float, tokens: int, slow: float = 1.0) -> list[Record]:
    """c=1 requests one after another from t to `until`: 60 ms before the first token, then 1 ms a
    token, all x `slow`."""
    out, ttft, seconds = [], 0.06 * slow, (0.06 + 0.001 * tokens) * slow
    while t + seconds <= until:
        gap = (seconds - ttft) / (tokens - 1)
        out.append(Record(level="c=1", phase="measure", t_start=t, ttft_s=ttft, e2e_s=seconds,
                          itl_s=[gap] * (tokens - 1), output_tokens=tokens, status="ok"))
        t += seconds
    return out


def test_stability_judges_the_servers_pace_not_the_lengths_its_requests_drew():
    # one steady server whose three thirds drew replies of 20, 40 and 60 tokens: 250, 400 and 500
    # tokens/s (and 12.5, 10, 8.3 requests/s), the same pace
    drew = _back_to_back(0.0, 3.0, 20) + _back_to_back(3.0, 6.0, 40) + _back_to_back(6.0, 9.0, 60)
    stats = level_stats(drew, "c=1")
    assert stats.spread > 0.5
    assert stats.spread_at_constant_speed < 0.08 and stats.is_stable(0.10)
    # steady at its pace without a speed index: the lengths varied, not the machine (the sweep's
    # machine-drift note would have printed a speed spread it does not have: a --url run crashed on it)
    assert stats.speed_index is None and not stats.machine_drift(0.10)
    assert stats.fixed_share == pytest.approx(0.62, abs=0.03)
    # the same lengths everywhere, the last third 25% slower: fewer tokens and fewer requests per second
    slowed = _back_to_back(0.0, 6.0, 40) + _back_to_back(6.0, 9.0, 40, slow=1.25)
    assert not level_stats(slowed, "c=1").is_stable(0.10)


def _serial_server(users: int, lengths: list[int], per_token_s: float = 0.001) -> list[Record]:
    """A closed loop of `users` against a server that serves one request at a time (1 ms a token):
    most of each request's TTFT is its wait behind the others."""
    out, free, sends = [], 0.0, [0.0] * users
    for k, n in enumerate(lengths):
        send = sends[k % users]
        begin = max(send, free)
        free = begin + per_token_s * n
        out.append(Record(level="c=1", phase="measure", t_start=send, ttft_s=begin + per_token_s - send,
                          e2e_s=free - send, itl_s=[per_token_s] * (n - 1), output_tokens=n, status="ok"))
        sends[k % users] = free
    return out


def test_a_wait_behind_other_requests_is_not_taken_for_a_fixed_cost():
    # a serial server streams ~1,000 tokens/s whatever the lengths, while its requests/s follows
    # them; TTFT is three quarters wait here, so the pace would read the lengths: tokens/s stands
    queued = _serial_server(4, [20] * 150 + [40] * 75 + [60] * 50)
    stats = level_stats(queued, "c=1")
    assert stats.fixed_share > 0.6
    assert stats.spread < 0.05 and stats.is_stable(0.10)


def _open_loop(rps: float, seconds: float, seed: int, stall: tuple[float, float] | None = None) -> list[Record]:
    """Poisson sends at `rps` for `seconds` to a server that streams 20 tokens in 0.2 s; during `stall`
    (from, to) it streams nothing, and what it had then comes out after."""
    rng = np.random.default_rng(seed)
    sends = np.cumsum(rng.exponential(1 / rps, int(rps * seconds * 2)))
    out = []
    for t in sends[sends < seconds]:
        begin = t if stall is None or not stall[0] <= t < stall[1] else stall[1]
        out.append(Record(level="none/rps=2.0", phase="measure", t_sched=float(t), t_start=float(t),
                          ttft_s=begin - t + 0.01, e2e_s=begin - t + 0.2, itl_s=[0.19 / 19] * 19,
                          output_tokens=20, status="ok"))
    return out


def test_an_open_loop_is_judged_by_what_it_served_of_what_arrived_not_by_its_arrival_count():
    # 2 rps for 30 s: each third expects 20 arrivals, +-4.5 by Poisson alone
    steady = level_stats(_open_loop(2.0, 30.0, seed=1), "none/rps=2.0")
    assert steady.spread > 0.25                       # the arrivals' own count noise
    assert steady.served_spread < 0.05 and steady.is_stable(0.10)
    assert steady.judged_spread == steady.served_spread and not steady.machine_drift(0.10)
    # a server that streamed nothing from 15 s to 21 s, then caught up (in the last third)
    stalled = level_stats(_open_loop(2.0, 30.0, seed=1, stall=(15.0, 21.0)), "none/rps=2.0")
    assert stalled.served_spread > 0.25 and not stalled.is_stable(0.10)
    # a closed loop has no arrivals to hold it to: its tokens/s is judged
    closed = level_stats(_back_to_back(0.0, 9.0, 40), "c=1")
    assert closed.window_offered is None and closed.served_spread is None
    assert closed.judged_spread == closed.spread_at_constant_speed


def _in_rounds(paces: list[float]) -> list[Record]:
    """A c=1 level in len(paces) rounds of 2 s, 10 s apart (interleaved with other levels), round k's
    requests `paces[k]` times as slow."""
    return [dataclasses.replace(r, round=k) for k, pace in enumerate(paces)
            for r in _back_to_back(10.0 * k, 10.0 * k + 2.0, 40, slow=pace)]


def test_many_short_rounds_are_judged_as_three_windows_not_by_the_range_of_all_of_them():
    # a steady server whose ten 2 s rounds came out within +-7% of each other: their range is 14%,
    # over the tolerance however steady the server, while three groups of consecutive rounds agree
    jitter = [1.0, 0.93, 1.07, 0.95, 1.06, 0.94, 1.05, 0.96, 1.04, 1.0]
    steady = level_stats(_in_rounds(jitter), "c=1")
    assert steady.rounds == 10 and len(steady.window_throughputs) == 3
    per_round = [level_stats(_in_rounds([pace]), "c=1").output_tokens_per_s for pace in jitter]
    assert (max(per_round) - min(per_round)) / np.mean(per_round) > 0.12
    assert steady.is_stable(0.10)
    # the same level whose last three rounds ran 30% slower: a third of its time, still flagged
    assert not level_stats(_in_rounds(jitter[:7] + [1.3, 1.3, 1.3]), "c=1").is_stable(0.10)
    # three rounds are the three windows; four are grouped as (2, 1, 1) rounds
    assert len(level_stats(_in_rounds(jitter[:3]), "c=1").window_throughputs) == 3
    assert len(level_stats(_in_rounds(jitter[:4]), "c=1").window_throughputs) == 3


# --- end to end ------------------------------------------------------------------------------

def _recompute(records: list[dict], level: str) -> dict:
    ok = [r for r in records if r["level"] == level and r["phase"] == "measure" and r["status"] == "ok"]
    ttft = [r["ttft_s"] for r in ok]
    tpot = [(r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] >= 2]
    itl = [gap for r in ok for gap in r["itl_s"]]
    return {"count": len(ok), "ttft_p50": np.percentile(ttft, 50), "ttft_p99": np.percentile(ttft, 99),
            "tpot_p50": np.percentile(tpot, 50), "itl_p99": np.percentile(itl, 99),
            "tokens": sum(r["output_tokens"] for r in ok)}


# The tests below run whole sweeps (the module fixture, and an interrupted one): they are the e2e suite's,
# which keeps `make test` inside its time budget.
@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "run"
    result = subprocess.run(
        [*TRACING_SERVECAP, str(out.parent / "modules.json"),
         "sweep", "--out", str(out), "--strategies", "none,continuous", "--concurrency", "1,4",
         "--warmup", "1s", "--duration", "4s", "--prompt-tokens", "uniform:16:48", "--output-tokens", "uniform:8:24",
         "--sample-interval", "0.25", "--slo-tpot-ms", "200", "--diagnostics"],
        capture_output=True, text=True, timeout=420)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.e2e
def test_sweep_writes_every_file(swept):
    for name in ("run.json", "requests.jsonl", "samples.csv", "server_metrics.csv", "summary.json",
                 "report.html", "report.md", "server-none.log", "server-continuous.log", "canary.csv"):
        assert (swept / name).exists(), name
    run = json.loads((swept / "run.json").read_text())
    assert run["status"] == "complete"
    # --diagnostics: each server's canary timed both cores (the sweep itself is pinned to the load generator's)
    assert json.loads((swept / "summary.json").read_text())["diagnostics"] is True
    canary = pd.read_csv(swept / "canary.csv")
    assert {s: run["observers"][s]["canary_rows"] for s in ("none", "continuous")} == canary.groupby("source").size().to_dict()
    assert set(canary["core"]) == set(range(os.cpu_count()))
    assert [entry["level"] for entry in run["levels"]] == ["none/c=1", "none/c=4", "continuous/c=1", "continuous/c=4"]
    assert all(entry["status"] == "ok" and entry["requests"] > 0 for entry in run["levels"])
    assert run["server"]["engines"]["continuous"]["strategy"] == "continuous"
    assert run["server"]["kv_blocks"] == run["server"]["engines"]["none"]["num_kv_blocks"]
    # each strategy's limits stay in its own engine description, never flattened into `server`
    limits = run["server"]["engines"]["continuous"]["strategy_limits"]
    assert limits and not set(limits) & set(run["server"])
    assert "loadgen" not in run  # the generator's warnings are read from requests.meta.json, not copied
    assert RunInfo.from_dict(run).to_dict() == run  # the typed sections read back exactly what was written
    assert run["host"]["cores"] == os.cpu_count() and run["slo"] == {"tpot_ms": 200.0}
    # the server leaves a core to Locust unless told otherwise
    assert run["server"]["commands"]["none"][:4] == ["--model", "tiny", "--strategy", "none"]
    assert run["server"]["commands"]["none"][-2:] == ["--num-threads", str(max(1, len(os.sched_getaffinity(0)) - 1))]


@pytest.mark.slow
@pytest.mark.e2e
def test_the_engine_record_is_polled_and_joins_the_clients_records(swept):
    import pandas as pd

    run = json.loads((swept / "run.json").read_text())
    for strategy in ("none", "continuous"):
        observed = run["observers"][strategy]
        assert observed["engine_steps"] > 0 and observed["engine_requests"] > 0
        assert observed["engine_rows_dropped"] == 0 and "engine_record_unavailable" not in observed
    steps, engine = pd.read_csv(swept / "engine_steps.csv"), pd.read_csv(swept / "engine_requests.csv")
    assert set(steps["source"]) == set(engine["source"]) == {"none", "continuous"}
    assert steps.groupby("source")["seq"].apply(lambda s: list(s) == list(range(1, len(s) + 1))).all()
    assert steps.loc[steps["source"] == "none", "batch"].max() == 1
    records = pd.DataFrame([json.loads(line) for line in (swept / "requests.jsonl").read_text().splitlines()])
    ok = records[records["status"] == "ok"].merge(engine, on="response_id", suffixes=("", "_engine"))
    assert len(ok) == (records["status"] == "ok").sum()   # every answered request is in the engine's record
    # one clock: the engine has a request after the client sent it, and its tokens before the client does
    assert (ok["t_arrival"] >= ok["t_start"]).all() and (ok["t_first_token"] <= ok["t_start"] + ok["ttft_s"]).all()
    assert (ok["t_finish"] <= ok["t_start"] + ok["e2e_s"]).all() and (ok["output_tokens"] == ok["output_tokens_engine"]).all()
    validation = json.loads((swept / "summary.json").read_text())["validation"]
    assert validation["method"] == "leave-one-level-out"   # two levels a strategy: too few to leave one out
    assert all("needs at least 3" in note for note in validation["unavailable"])


@pytest.mark.slow
@pytest.mark.e2e
def test_the_sweep_reports_in_its_own_process_and_never_imports_torch(swept):
    modules = json.loads((swept.parent / "modules.json").read_text())
    assert "reports.report" in modules and "servecap.launch.process" in modules   # reported and launched here
    assert [m for m in modules if m.split(".")[0] in ("torch", "gevent")] == []


@pytest.mark.slow
@pytest.mark.e2e
def test_summary_matches_an_independent_recomputation(swept):
    records = [json.loads(line) for line in (swept / "requests.jsonl").read_text().splitlines()]
    summary = json.loads((swept / "summary.json").read_text())
    assert [lvl["level"] for lvl in summary["levels"]] == ["none/c=1", "none/c=4", "continuous/c=1", "continuous/c=4"]
    for level in summary["levels"]:
        expected = _recompute(records, level["level"])
        metrics = level["metrics"]
        assert metrics["ttft_s"]["count"] == expected["count"] > 0
        assert metrics["ttft_s"]["p50"] == pytest.approx(expected["ttft_p50"], rel=1e-9)
        assert metrics["ttft_s"]["p99"] == pytest.approx(expected["ttft_p99"], rel=1e-9)
        assert metrics["tpot_s"]["p50"] == pytest.approx(expected["tpot_p50"], rel=1e-9)
        assert metrics["itl_s"]["p99"] == pytest.approx(expected["itl_p99"], rel=1e-9)
        assert level["output_tokens"] == expected["tokens"]
        lo, hi = metrics["ttft_s"]["p99_ci95"]
        assert lo <= metrics["ttft_s"]["p99"] <= hi
    by_level = {lvl["level"]: lvl for lvl in summary["levels"]}
    # batching pays: 4 streams through continuous batching beat 4 streams served one at a time
    assert by_level["continuous/c=4"]["output_tokens_per_s"] > by_level["none/c=4"]["output_tokens_per_s"]
    # server-side means came from /metrics scraped during each level
    assert by_level["continuous/c=4"]["server"]["requests_running_mean"] > by_level["none/c=4"]["server"]["requests_running_mean"]


@pytest.mark.slow
@pytest.mark.e2e
def test_the_server_side_view_sits_beside_the_client_one(swept):
    """The reference server's own histograms give each level server-side percentiles; the engine's TTFT
    (route entry to first token) never exceeds what the client saw, and its queue and prefill phases fit in it."""
    summary = json.loads((swept / "summary.json").read_text())
    records = [json.loads(line) for line in (swept / "requests.jsonl").read_text().splitlines()]
    assert all(r["ttft_any_s"] is not None and r["ttft_any_s"] <= r["ttft_s"] for r in records if r["status"] == "ok")
    for level in summary["levels"]:
        server, pairs = level["server_latency"], level["client_vs_server"]
        assert level["server"]["engine"] == "servecap"
        assert {"ttft_s", "queue_s", "prefill_s", "decode_s", "inference_s", "e2e_s"} <= set(server)
        client = level["metrics"]["ttft_s"]
        # the server's window opens once the warm-up requests are done: (nearly) the measured requests only
        assert 0.7 * client["count"] <= server["ttft_s"]["count"] <= client["count"] + level["offered"]["concurrency"]
        lo, hi = server["ttft_s"]["p50_bucket"]
        assert lo <= server["ttft_s"]["p50"] <= hi
        # the server's p50 is only known to its bucket (interpolated inside it, as histogram_quantile does):
        # the bucket holding it starts at or below the client's p50
        assert lo <= client["p50"]
        # per request the engine's TTFT is below the client's (the engine-record test pairs them); the two
        # means are over sets that differ at the window's edges (the scrapes bracket it, at most `concurrency`
        # requests in flight at each end), so the server's mean may exceed the client's by at most that share
        # of the client's spread
        ttfts = [r["ttft_s"] for r in records if r["level"] == level["level"] and r["phase"] == "measure"
                 and r["status"] == "ok"]
        edge = 2 * level["offered"]["concurrency"] + abs(server["ttft_s"]["count"] - client["count"])
        slack = edge / min(server["ttft_s"]["count"], client["count"]) * (max(ttfts) - min(ttfts))
        assert server["ttft_s"]["mean"] <= client["mean"] + slack
        assert pairs["ttft_s"]["overhead_p50"] == pytest.approx(pairs["ttft_s"]["client_p50"] - pairs["ttft_s"]["server_p50"])
        split = pairs["ttft_split_mean"]
        assert split["overhead_s"] + split["front_end_s"] + split["queue_s"] + split["prefill_s"] == pytest.approx(split["client_s"])
        assert split["front_end_s"] >= 0 and split["overhead_s"] > -slack
        assert server["queue_s"]["mean"] + server["prefill_s"]["mean"] <= server["ttft_s"]["mean"]
    assert "Client versus server" in (swept / "report.md").read_text()
    scraped = pd.read_csv(swept / "server_metrics.csv", keep_default_na=False)
    assert set(scraped.name) <= kept_sample_names() | {SCRAPE_MARKER}   # only the families the report reads
    series = scraped[scraped.name != SCRAPE_MARKER].groupby(["name", "labels"])["value"]
    # a row only when its series changed; each server's scraper (two strategies here) starts with a full snapshot
    assert 0 < (series.diff() == 0).sum() <= series.ngroups


@pytest.mark.slow
@pytest.mark.e2e
def test_html_references_each_figure(swept):
    html = (swept / "report.html").read_text()
    figures = sorted(p.name for p in swept.glob("*.png"))
    assert len(figures) >= 5
    assert html.count("data:image/png;base64,") >= len(figures)
    for name in figures:
        assert name in html or name.removesuffix(".png") in html


@pytest.mark.slow
@pytest.mark.e2e
def test_interrupted_sweep_leaves_a_reportable_partial_run(tmp_path):
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*SERVECAP, "sweep", "--out", str(out), "--strategies", "continuous", "--concurrency", "2,4",
         "--warmup", "0s", "--duration", "30s", "--no-report"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    records = out / "requests.jsonl"
    wait_until(lambda: records.exists() and records.stat().st_size > 2000, timeout=180, interval=0.2,
               what="the first level's records (2 kB)")
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert "interrupted" in output
    assert not (out / "canary.csv").exists()   # the drift instruments run with --diagnostics only
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted"
    assert [e["status"] for e in run["levels"]] == ["interrupted", "not run"]
    report = subprocess.run([*SERVECAP, "report", str(out), "--no-figures"], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"] and summary["levels"][0]["level"] == "continuous/c=2"
    assert re.findall(r"level (\S+) is missing", " ".join(summary["missing"])) == ["continuous/c=4"]


@pytest.mark.slow
@pytest.mark.e2e
def test_existing_run_is_never_overwritten(swept):
    result = subprocess.run([*SERVECAP, "sweep", "--out", str(swept), "--concurrency", "1"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "already holds a run" in result.stderr

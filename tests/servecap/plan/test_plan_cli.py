"""`servecap plan` from flags to files: bad input is one line and exit 2; a small plan writes its answer."""

from __future__ import annotations

import json

import pytest

from servecap.plan.cli import main

GPU = ["--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--cold-start-s", "30"]
SLO = ["--slo-ttft-ms", "500"]


def _error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_bad_input_is_one_line_naming_the_problem(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert "no" in _error(capsys, ["--trace", str(empty), *GPU, *SLO, "--replicas", "2"]).lower()
    backwards = tmp_path / "curve.csv"
    backwards.write_text("t_s,rate_rps\n0,1\n10,2\n5,3\n")
    assert "backwards" in _error(capsys, ["--rate-curve", str(backwards), *GPU, *SLO, "--replicas", "2"])
    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    assert "--min-replicas 4 is above --max-replicas 2" in _error(
        capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--min-replicas", "4", "--max-replicas", "2", "--target", "8"])
    assert "unknown policy" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2",
                                               "--router", "fastest"])
    assert "give one demand" in _error(capsys, [*GPU, *SLO, "--replicas", "2"])
    sessions = tmp_path / "sessions.jsonl"
    sessions.write_text('{"session_id": "s", "timestamp": 0, "input_length": 5, "output_length": 1}\n'
                        '{"session_id": "s", "delay": 10, "input_length": 9, "output_length": 1}\n')
    assert "its sessions' turns wait on the previous answer (\"delay\"), and --topology splits the demand" in _error(
        capsys, ["--trace", str(sessions), *GPU, *SLO, "--topology", "1p1d"])
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text('{"session_id": "s", "delay": 10, "input_length": 5, "output_length": 1}\n')
    assert "line 1: the first row of session 's' needs a" in _error(
        capsys, ["--trace", str(malformed), *GPU, *SLO, "--replicas", "2"])
    assert "--session tool-latency" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2",
                                                       "--session", "turns:2,tool-latency:-1"])
    assert "--sessions gives single requests to users" in _error(
        capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2", "--session", "turns:2", "--sessions", "9"])
    assert "--session turns:2: its sessions' turns wait on the previous answer, and --canary-weight" in _error(
        capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2", "--session", "turns:2",
                 "--canary-weight", "0.1"])
    assert "at least one SLO" in _error(capsys, ["--rate-curve", str(curve), *GPU, "--replicas", "2"])
    assert "--cold-start-s" in _error(capsys, ["--rate-curve", str(curve), "--gpu", "h100-sxm", "--model",
                                               "llama-3.1-8b", *SLO, "--replicas", "2"])
    assert "--kill 'soon'" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2",
                                              "--kill", "soon"])
    assert "this fleet's replicas are 0 to 2" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "3",
                                                             "--replica-fault", "3:errors:status=503"])
    assert "the plan models error bursts" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2",
                                                             "--replica-fault", "1:slow:factor=3"])
    assert "give ID:SPEC" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2",
                                             "--replica-fault", "errors:status=503"])
    assert "--retry-jitter-factor must be in [0, 1]" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO,
                                                                        "--replicas", "2", "--retry-jitter-factor", "3"])
    assert "--replica-fault not with it" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--topology",
                                                            "1p1d", "--replica-fault", "0:errors:status=500"])
    silent = tmp_path / "silent.csv"
    silent.write_text("0,0.001\n5,0.001\n")   # a rate so low that the 5 s draw no request
    for shape in (["--replicas", "2"], ["--topology", "1p1d"], ["--search", "topology", "--gpu-budget", "4"]):
        assert "the demand has no requests" in _error(capsys, ["--rate-curve", str(silent), *GPU, *SLO, *shape])
    assert "--model-mix and --max-loras need --calibration RUN_DIR of a run that served LoRA" in _error(
        capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--replicas", "2", "--model-mix", "zipf:8"])


def test_a_small_plan_writes_its_answer(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,0.5\n120,2\n240,0.5\n")
    out = tmp_path / "plan"
    code = main(["--rate-curve", str(curve), *GPU, "--prompt-tokens", "256", "--output-tokens", "32",
                 "--min-replicas", "1", "--max-replicas", "3", "--target", "2", "--interval-s", "10",
                 "--slo-ttft-ms", "500", "--window-s", "60", "--static-max", "4", "--out", str(out)])
    assert code == 0
    answer = json.loads((out / "plan.json").read_text())
    plan = answer["plan"]
    assert plan["requests"] == answer["timeline"]["replicas"][0]["served"] + sum(
        r["served"] for r in answer["timeline"]["replicas"][1:])
    assert plan["unfinished"] == 0 and plan["meets_target"] is True
    assert answer["static"]["replicas"] == 1 and "n_plus_one" in answer and answer["band"]["relative"] > 0
    assert [w["start_s"] for w in answer["windows"]] == [0, 60, 120, 180]
    assert (out / "plan.png").stat().st_size > 10_000
    assert (out / "plan.md").read_text().startswith("# Fleet plan\n\n- plan: 100.0% of 60-s windows meet")
    assert "plan:" in capsys.readouterr().err


def test_fixed_pools_refuse_what_they_do_not_model(tmp_path, capsys):
    curve = tmp_path / "ok.csv"
    curve.write_text("0,1\n60,2\n")
    base = ["--rate-curve", str(curve), *GPU, *SLO]
    assert "--replicas not with it" in _error(capsys, [*base, "--topology", "1p1d", "--replicas", "2"])
    assert "--router cache_aware not with it" in _error(capsys, [*base, "--topology", "1p1d", "--router",
                                                                 "cache_aware"])
    assert "an aggregated fleet is --replicas N" in _error(capsys, [*base, "--topology", "agg:2"])
    assert "give agg:N" in _error(capsys, [*base, "--topology", "2x1"])
    assert "--kv-transfer-gbs must be > 0" in _error(capsys, [*base, "--topology", "1p1d", "--kv-transfer-gbs", "0"])
    sessions = ["--sessions", "4", "--session-prefix-tokens", "64"]
    assert "shared prefixes" in _error(capsys, [*base, "--topology", "1p1d", *sessions])
    assert "name the worker, T:ID" in _error(capsys, [*base, "--topology", "2p1d", "--kill", "30"])
    assert "ID 0 to 1 a prefill worker, 2 to 2 a decode worker" in _error(capsys, [*base, "--topology", "2p1d",
                                                                             "--kill", "30:3"])
    assert "--retry-lost not modelled with it" in _error(capsys, [*base, "--topology", "1p1d", "--kill", "30:1",
                                                                 "--retry-lost"])


def test_a_pd_plan_kills_the_worker_named_and_does_not_replace_it(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,4\n60,4\n")   # each decode worker holds about two streams at once
    base = ["--rate-curve", str(curve), *GPU, *SLO, "--prompt-tokens", "2000", "--output-tokens", "256",
            "--topology", "1p2d", "--window-s", "20", "--json"]
    plans = {}
    for name, kill in (("whole", []), ("decode", ["--kill", "30:2"]), ("prefill", ["--kill", "30:0"])):
        assert main([*base, *kill, "--out", str(tmp_path / name)]) == 0
        plans[name] = json.loads((tmp_path / name / "plan.json").read_text())
    whole, decode, prefill = (plans[k]["plan"] for k in ("whole", "decode", "prefill"))
    assert whole["lost_requests"] == 0 and whole["replicas_killed"] == 0
    # decode worker 2 gone at 30 s: what it held then fails, and the later requests all go to worker 1
    assert decode["replicas_killed"] == 1 and decode["replicas_started"] == 3   # not replaced
    assert 0 < decode["lost_requests"] < decode["requests"] / 4
    # the only prefill worker gone: every request from 30 s on fails as it comes (the router has none left)
    late = [w for w in plans["prefill"]["windows"] if w["start_s"] >= 40]
    assert prefill["lost_requests"] >= sum(w["requests"] for w in late) > 0
    assert [w["failed"] for w in late] == [w["requests"] for w in late]


def test_a_canary_plan_answers_per_version_and_refuses_what_it_cannot_split(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,2\n240,2\n")
    base = ["--rate-curve", str(curve), *GPU, *SLO, "--prompt-tokens", "256", "--output-tokens", "32",
            "--window-s", "60"]
    assert "--canary-dtype: a canary needs --canary-weight" in _error(capsys, [*base, "--replicas", "2",
                                                                             "--canary-dtype", "fp8"])
    assert "--canary-weight '0:0.1,0:0.2'" in _error(capsys, [*base, "--replicas", "2", "--canary-weight", "0:0.1,0:0.2"])
    assert "--canary-replicas must be at least 1" in _error(capsys, [*base, "--replicas", "2", "--canary-weight", "0.1",
                                                                   "--canary-replicas", "0"])
    assert "--canary-weight with --topology: a second pool beside fixed PD pools" in _error(capsys, [*base, "--topology", "1p1d",
                                                                       "--canary-weight", "0.1"])
    assert "leaves the canary no request" in _error(capsys, [*base, "--replicas", "2", "--canary-weight", "0.0001"])
    assert "every request to one version" in _error(capsys, [*base, "--replicas", "2", "--canary-weight", "1"])
    assert "--canary-splits must be at least 1" in _error(capsys, [*base, "--replicas", "2", "--canary-weight", "0.1",
                                                                 "--canary-splits", "0"])
    out = tmp_path / "plan"
    code = main([*base, "--replicas", "2", "--canary-weight", "0:0.1,120:0.5", "--canary-dtype", "fp8",
                 "--static-max", "4", "--no-n-plus-one", "--out", str(out)])
    assert code == 0
    answer = json.loads((out / "plan.json").read_text())
    canary, plan = answer["canary"], answer["plan"]
    assert canary["schedule"] == [{"t_s": 0, "weight": 0.1}, {"t_s": 120, "weight": 0.5}]
    assert "fp8" in canary["replica"] and "fp8" not in plan["config"]["replica"] and canary["replicas"] == 1
    assert canary["requests"] + plan["requests"] == canary["both"]["requests"] == sum(
        w["requests"] for w in answer["windows"]) + canary["requests"]
    assert 0.2 < canary["share"] < 0.4 and canary["both"]["unfinished"] == 0
    assert canary["both"]["usd_per_day"] == pytest.approx(canary["usd_per_day"] + plan["usd_per_day"])
    spread = canary["attainment_over_splits"]
    assert spread["canary"]["draws"] == spread["primary"]["draws"] == 8   # the split drawn 8 times by default
    assert spread["canary"]["min"] <= canary["attainment"] <= spread["canary"]["max"]
    md = (out / "plan.md").read_text()
    assert md.startswith("# Fleet plan\n\n- primary: ") and "- canary (10% from 0 s, 50% from 120 s: " in md
    assert "- both versions: 100.0% of windows" in md


def test_a_shadow_plan_mirrors_to_a_second_pool_and_leaves_production_as_it_was(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,2\n240,2\n")
    base = ["--rate-curve", str(curve), *GPU, *SLO, "--prompt-tokens", "256", "--output-tokens", "32",
            "--window-s", "60", "--replicas", "2", "--no-n-plus-one", "--static-max", "4"]
    assert "--shadow-dtype: a shadow needs --shadow-fraction" in _error(capsys, [*base, "--shadow-dtype", "fp8"])
    assert "in (0, 1], got 1.5" in _error(capsys, [*base, "--shadow-fraction", "1.5"])
    assert "one second pool at a time" in _error(capsys, [*base, "--shadow-fraction", "1", "--canary-weight", "0.1"])
    assert "--shadow-fraction with --search topology" in _error(capsys, [*base, "--shadow-fraction", "1", "--search",
                                                                         "topology", "--gpu-budget", "4"])
    alone, mirrored = tmp_path / "alone", tmp_path / "mirrored"
    assert main([*base, "--out", str(alone)]) == 0
    assert main([*base, "--shadow-fraction", "1", "--shadow-dtype", "fp8", "--out", str(mirrored)]) == 0
    before = json.loads((alone / "plan.json").read_text())
    answer = json.loads((mirrored / "plan.json").read_text())
    shadow = answer["shadow"]
    assert answer["plan"]["requests"] == before["plan"]["requests"] == shadow["requests"]
    assert answer["windows"] == before["windows"]   # production is the plan without the shadow
    assert "fp8" in shadow["replica"] and shadow["fraction"] == 1 and shadow["replicas"] == 1
    assert shadow["usd_per_day"] == pytest.approx(answer["plan"]["usd_per_day"] / 2)   # one replica beside two
    md = (mirrored / "plan.md").read_text()
    assert "- shadow (100% of requests mirrored: " in md and "answers never returned" in md


def test_a_hedged_plan_counts_the_copies_it_sends_and_refuses_what_it_cannot_race(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,6\n60,6\n")
    base = ["--rate-curve", str(curve), "--gpu", "l4", "--model", "llama-3.1-8b", "--max-model-len", "4096",
            "--cold-start-s", "30", *SLO,
            "--prompt-tokens", "512", "--output-tokens", "64", "--window-s", "30", "--replicas", "2",
            "--no-n-plus-one", "--static-max", "2"]
    assert "--hedge-after must not be negative" in _error(capsys, [*base, "--hedge-after", "-1"])
    assert "neither a delay" in _error(capsys, [*base, "--hedge-after", "soon"])
    assert "--hedge-after with --canary-weight" in _error(capsys, [*base, "--hedge-after", "1", "--canary-weight", "0.1"])
    assert "--hedge-after with --replica-fault" in _error(capsys, [*base, "--hedge-after", "1", "--replica-fault",
                                                                  "0:errors:status=503,at=10,for=5"])
    alone, hedged = tmp_path / "alone", tmp_path / "hedged"
    assert main([*base, "--out", str(alone)]) == 0
    assert main([*base, "--hedge-after", "0.3", "--out", str(hedged)]) == 0
    before, answer = (json.loads((d / "plan.json").read_text())["plan"] for d in (alone, hedged))
    hedge = answer["hedging"]
    assert before["hedging"] is None and answer["config"]["hedge_after"] == "0.3"
    assert hedge["after"] == "0.3s" and hedge["requests"] == answer["requests"] == before["requests"]
    assert 0 < hedge["hedged"] < hedge["requests"] and hedge["extra_requests"] == hedge["hedged"] / hedge["requests"]
    assert answer["unfinished"] == 0 and answer["ttft_p99_s"] != before["ttft_p99_s"]
    assert f"- hedging after 0.3s: {hedge['hedged']:,} of {hedge['requests']:,} requests sent twice" in (
        hedged / "plan.md").read_text()


def test_a_measured_front_end_puts_the_plan_on_the_clients_clock(tmp_path, capsys):
    import shutil

    from reports.predict.simulated_run import sample_run

    run = sample_run(tmp_path / "run", concurrencies=(1, 2, 4), duration_s=3.0)
    described = json.loads((run / "run.json").read_text())
    described["server"]["engines"]["continuous"]["num_kv_blocks"] = 4096   # the KV cache a calibration reads
    (run / "run.json").write_text(json.dumps(described))
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,20\n30,20\n")
    base = ["--rate-curve", str(curve), *SLO, "--prompt-tokens", "64", "--output-tokens", "16", "--window-s", "10",
            "--replicas", "1", "--cold-start-s", "1", "--no-n-plus-one", "--static-max", "1"]
    plans = {}
    for name, flags in (("calibrated", ["--calibration", str(run)]),
                        ("none", ["--calibration", str(run), "--front-end", "none"]),
                        ("gpu", [*GPU[:4], "--max-model-len", "4096", "--front-end", str(run)])):
        assert main([*base, *flags, "--out", str(tmp_path / name)]) == 0
        plans[name] = json.loads((tmp_path / name / "plan.json").read_text())["plan"]
    front = plans["calibrated"]["config"]["front_end"]
    assert [level["streams"] for level in front["levels"]] == sorted(level["streams"] for level in front["levels"])
    # the simulated run's delays: gamma(3, 0.5 ms) in, gamma(3, 0.4 ms) to the first token's client
    assert 1.0 < front["levels"][0]["in_ms"] < 2.0 and 0.8 < front["levels"][0]["first_out_ms"] < 1.6
    assert plans["none"]["config"]["front_end"] is None and plans["gpu"]["config"]["front_end"] == front
    assert "its front end" in plans["calibrated"]["config"]["replica"]
    gap_ms = (plans["calibrated"]["ttft_p50_s"] - plans["none"]["ttft_p50_s"]) * 1e3
    assert 1.5 < gap_ms < 5.0   # in + first_out at the replica's streams, beside the engine's own time
    # a catalog canary runs on the primary's host: the same front end; --search topology sizes engines alone
    assert main([*base, *GPU[:4], "--max-model-len", "4096", "--front-end", str(run), "--canary-weight", "0.3",
                 "--canary-dtype", "fp8", "--out", str(tmp_path / "canary")]) == 0
    assert json.loads((tmp_path / "canary" / "plan.json").read_text())["canary"]["front_end"] == front
    capsys.readouterr()
    assert "--front-end with --search topology" in _error(capsys, [*base, *GPU[:4], "--max-model-len", "4096",
                                                                   "--front-end", str(run), "--search", "topology",
                                                                   "--gpu-budget", "2"])
    bare = tmp_path / "bare"
    shutil.copytree(run, bare)
    (bare / "engine_requests.csv").unlink()
    capsys.readouterr()
    assert "has no engine request record" in _error(capsys, [*base, *GPU[:4], "--max-model-len", "4096",
                                                             "--front-end", str(bare)])


def test_a_fallback_plan_answers_by_tier_and_refuses_what_it_cannot_pass_on(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,6\n60,6\n")
    base = ["--rate-curve", str(curve), "--gpu", "l4", "--model", "llama-3.1-8b", "--max-model-len", "4096",
            "--cold-start-s", "30", *SLO, "--prompt-tokens", "512", "--output-tokens", "64", "--window-s", "30",
            "--replicas", "1", "--no-n-plus-one", "--static-max", "2"]
    assert "--fallback 'depth:0': depth:N is the primary's open requests" in _error(capsys, [*base, "--fallback",
                                                                                           "depth:0"])
    assert "--fallback-model: a fallback needs --fallback" in _error(capsys, [*base, "--fallback-model", "llama-3.2-1b"])
    assert "--hedge-after with --fallback" in _error(capsys, [*base, "--hedge-after", "1", "--fallback", "errors"])
    assert "--shadow-fraction and --fallback: one second pool at a time" in _error(
        capsys, [*base, "--shadow-fraction", "1", "--fallback", "errors"])
    assert "--fallback with --search topology" in _error(capsys, [*base, "--fallback", "errors", "--search", "topology",
                                                                  "--gpu-budget", "4"])
    out = tmp_path / "plan"
    assert main([*base, "--fallback", "depth:8", "--fallback-model", "llama-3.2-1b", "--out", str(out)]) == 0
    answer = json.loads((out / "plan.json").read_text())
    fallback, plan = answer["fallback"], answer["plan"]
    tiers = fallback["tiers"]
    assert tiers["primary"]["requests"] + tiers["fallback"]["requests"] == plan["requests"]
    assert fallback["left_full"] == tiers["fallback"]["requests"] > 0 and fallback["left_errors"] == 0
    assert plan["unfinished"] == 0 and plan["replicas_started"] == 2 and "llama-3.2-1b" in fallback["replica"]
    assert plan["usd_per_day"] == pytest.approx(fallback["pool"]["usd_per_day"] + fallback["primary_pool"]["usd_per_day"])
    assert tiers["fallback"]["ttft_p99_s"] < tiers["primary"]["ttft_p99_s"]   # a 1B model, never queued behind 8
    md = (out / "plan.md").read_text()
    assert md.startswith("# Fleet plan\n\n- both tiers: ") and "taken when the primary holds 8 open requests" in md


def test_a_trace_of_sessions_is_planned_turn_after_answer(tmp_path, capsys):
    # two sessions of three turns, each later turn 2 s after the answer before it (AIPerf's `delay`)
    trace = tmp_path / "sessions.jsonl"
    rows = []
    for s, start in (("a", 0), ("b", 500)):
        rows.append({"session_id": s, "timestamp": start, "input_length": 300, "output_length": 20, "hash_ids": [1]})
        rows += [{"session_id": s, "delay": 2000, "input_length": 600 + 300 * k, "output_length": 20,
                  "hash_ids": [1, 2 + k]} for k in range(2)]
    trace.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "plan"
    assert main(["--trace", str(trace), *GPU, *SLO, "--replicas", "1", "--window-s", "60", "--no-n-plus-one",
                 "--out", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())["plan"]
    assert plan["requests"] == 6 and plan["unfinished"] == 0 and plan["attainment"] == 1.0
    # the later turns go after the answers: the one replica is billed until the last session's third answer,
    # two delays and three answers (~0.15 s each on an H100) after its start at 0.5 s
    assert 0.5 + 2 * 2.0 + 3 * 0.1 < plan["gpu_hours"] * 3600 < 0.5 + 2 * 2.0 + 3 * 0.3


def test_agent_sessions_started_at_the_curves_rate_are_planned_turn_after_answer(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,0.2\n30,0.2\n")   # about 6 sessions in 30 s
    out = tmp_path / "plan"
    assert main(["--rate-curve", str(curve), "--session", "turns:2,tools:1,tool-latency:2,tool-result:32,schemas:1",
                 "--prompt-tokens", "64", "--output-tokens", "16", *GPU, *SLO, "--replicas", "1", "--window-s", "60",
                 "--no-n-plus-one", "--seed", "3", "--out", str(out)]) == 0
    answer = json.loads((out / "plan.json").read_text())
    plan = answer["plan"]
    assert plan["requests"] % 4 == 0 and plan["requests"] >= 8   # 4 requests a session: 2 turns of a call and an answer
    assert plan["unfinished"] == 0 and plan["attainment"] == 1.0
    assert "agent sessions (turns:2,tools:1" in plan["demand"]
    sessions = plan["sessions"]
    assert sessions["sessions"] == plan["requests"] // 4 == sessions["completed"]
    assert sessions["completion_s"]["p50"] > 2 * 2.0   # two tool waits of 2 s, then the answers
    assert 1 <= sessions["peak_open"] <= sessions["sessions"]


def test_agents_that_fan_out_are_planned_with_their_sub_agents(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,0.2\n30,0.2\n")
    out = tmp_path / "plan"
    assert main(["--rate-curve", str(curve), "--session", "turns:2,tools:1,fanout:2,tool-result:32,schemas:1",
                 "--prompt-tokens", "64", "--output-tokens", "16", *GPU, *SLO, "--replicas", "1", "--window-s", "60",
                 "--no-n-plus-one", "--seed", "3", "--out", str(out)]) == 0
    plan = json.loads((out / "plan.json").read_text())["plan"]
    # 8 requests a session: per turn a call, its two sub-agents, and the answer that joins them
    assert plan["requests"] % 8 == 0 and plan["requests"] >= 16 and plan["unfinished"] == 0
    assert plan["sessions"]["sessions"] == plan["requests"] // 8 == plan["sessions"]["completed"]


def test_an_moe_replica_laid_out_dep_is_planned_on_all_its_gpus(tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,2\n120,2\n")
    moe = ["--gpu", "h200", "--model", "qwen3-30b-a3b", "--dtype", "fp8", "--cold-start-s", "30"]
    out = tmp_path / "plan"
    code = main(["--rate-curve", str(curve), *moe, "--dp", "2", "--expert-parallel", "--prompt-tokens", "256",
                 "--output-tokens", "32", "--replicas", "1", "--slo-ttft-ms", "500", "--window-s", "60",
                 "--static-max", "2", "--no-n-plus-one", "--out", str(out)])
    assert code == 0
    answer = json.loads((out / "plan.json").read_text())
    assert answer["plan"]["config"]["gpus_per_replica"] == 2
    assert "h200, dp 2, expert parallel, qwen3-30b-a3b fp8" in answer["plan"]["config"]["replica"]
    assert answer["plan"]["unfinished"] == 0
    capsys.readouterr()
    assert "with --dp/--expert-parallel: a second pool beside an MoE layout is not modelled" in _error(
        capsys, ["--rate-curve", str(curve), *moe, *SLO, "--dp", "2", "--replicas", "1", "--canary-weight", "0.1"])
    assert "llama-3.1-8b is dense" in _error(capsys, ["--rate-curve", str(curve), *GPU, *SLO, "--dp", "2",
                                                        "--replicas", "1"])

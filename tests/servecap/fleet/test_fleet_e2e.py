"""A short real fleet: `servecap fleet` with emulated L4 replicas behind vLLM's router (round robin),
an autoscaler that scales up once as the rate ramps, and one replica killed mid-run.

The real command in a subprocess: the router, the replicas, Locust replaying the demand through the
router. What must hold: the autoscaler's one scale-up and the kill are in the timeline at their
times; every answered request names a replica that was in the router when it was sent; nothing is
sent to the killed replica after its kill; only requests it held fail; the run is judged per window
over every request sent.
"""

from __future__ import annotations

import csv

import pytest

from contract.records import read_records
from fleet_runs import run_fleet

pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.e2e, pytest.mark.timeout(300)]   # vLLM's router: the real-engine suite (make test-engines)

KILL_S = 22.0


def test_a_small_fleet_scales_up_loses_a_replica_and_says_who_served_what(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,1\n8,4\n30,4\n")
    out = tmp_path / "fleet"
    fleet, _ = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                         "--rate-curve", str(curve), "--horizon", "30", "--prompt-tokens", "256", "--output-tokens", "32",
                         "--router", "round_robin", "--min-replicas", "1", "--max-replicas", "2", "--target", "2",
                         "--interval-s", "3", "--down-window-s", "60", "--kill", f"{KILL_S:g}:0",
                         "--slo-ttft-ms", "3000", "--window-s", "10")
    replicas = {r["name"]: r for r in fleet["replicas"]}

    # one scale-up (1 -> 2), the kill of r0 at its time, then the autoscaler's replacement
    wanted = [d["wanted"] for d in fleet["decisions"]]
    assert wanted[0] <= 2 and 2 in wanted and max(wanted) == 2
    first_up = next(d["t_s"] for d in fleet["decisions"] if d["wanted"] == 2)
    assert replicas["r1"]["requested_s"] == pytest.approx(first_up, abs=1.0)
    assert replicas["r0"]["killed"] and replicas["r0"]["drain_s"] == pytest.approx(KILL_S, abs=1.0)
    assert "r2" in replicas and replicas["r2"]["requested_s"] > KILL_S and not replicas["r2"]["killed"]
    events = [(row["event"], row["replica"]) for row in csv.DictReader((out / "fleet_timeline.csv").open())]
    assert ("killed", "r0") in events and ("ready", "r1") in events and ("ready", "r2") in events

    # every answered request names a replica that was in the router when it was sent
    records = read_records(out / "requests.jsonl")
    t0 = fleet["t0_unix"]
    ok = [r for r in records if r["status"] == "ok"]
    assert len(records) == fleet["demand"]["requests"] and len(ok) >= 0.8 * len(records)
    assert fleet["unattributed"] == 0 and {r["replica"] for r in ok} <= {"r0", "r1", "r2"}
    for r in ok:
        life = replicas[r["replica"]]
        sent = r["t_start"] - t0
        assert life["ready_s"] - 0.5 <= sent and (life["drain_s"] is None or sent <= life["drain_s"] + 0.5), (r, life)
    assert all(replicas[name]["served"] > 0 for name in ("r0", "r1", "r2"))
    # only what r0 held at its kill failed
    for r in records:
        if r["status"] != "ok":
            sent = r["t_start"] - t0
            assert sent <= KILL_S + 0.5 <= sent + (r["e2e_s"] or 0) + 1.0, r

    # judged as the plan judges its windows, per 10 s window, over every request sent: an error failed,
    # a request still in flight at the end is unfinished
    windows = fleet["outcome"]["windows"]
    assert sum(w["requests"] for w in windows) == len(records)
    failed = sum(r["status"] not in ("ok", "incomplete") for r in records)
    assert fleet["outcome"]["failed"] == sum(w["failed"] for w in windows) == failed
    assert fleet["outcome"]["unfinished"] == len(records) - len(ok) - failed


def test_a_trace_of_sessions_sends_each_later_turn_its_delay_after_the_answer_to_its_sessions_replica(tmp_path):
    # 16 sessions of two turns (AIPerf's session_id and delay); a later turn shares its first's block. Over two
    # replicas, consistent_hash keys on the session header the replay sends: each session stays on one replica
    # and the sessions spread (vllm-router 0.1.17 sends every keyless request to one worker; with the header,
    # all 16 on one replica is a 2-in-65,536 chance)
    sessions = 16
    trace = tmp_path / "sessions.jsonl"
    trace.write_text("".join(
        f'{{"session_id": "s{k}", "timestamp": {100 * k}, "input_length": 600, "output_length": 8, '
        f'"hash_ids": [{k + 1}]}}\n' for k in range(sessions)) + "".join(
        f'{{"session_id": "s{k}", "delay": 400, "input_length": 700, "output_length": 8, "hash_ids": [{k + 1}]}}\n'
        for k in range(sessions)))
    out = tmp_path / "fleet"
    fleet, _ = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                         "--trace", str(trace), "--replicas", "2", "--router", "consistent_hash", "--slo-ttft-ms",
                         "3000", "--window-s", "10", "--cold-start-s", "0")
    assert fleet["accounting"] == {"sent": 2 * sessions, "by_status": {"ok": 2 * sessions}, "cancelled_copies": 0,
                                   "missing": 0}
    turns = {(r["conversation_id"], r["turn"]): r for r in read_records(out / "requests.jsonl")}
    for session in map(str, range(sessions)):   # the demand file numbers the sessions
        first, second = turns[(session, 1)], turns[(session, 2)]
        answered = first["t_start"] + first["e2e_s"]
        assert second["t_sched"] - answered == pytest.approx(0.4, abs=0.05)
        assert second["replica"] == first["replica"]
        assert second["cached_tokens"] >= 512   # its session's block, cached by the turn before it on that replica
    assert {r["replica"] for r in turns.values()} == {"r0", "r1"}


def test_agent_sessions_from_a_rate_curve_are_replayed_as_their_chains(tmp_path):
    # --session's agents started at 1/s for 6 s: each a chain of 2 turns of a tool round and an answer; the fleet
    # replays the plan's chains (each later request its wait after the answer before it) through consistent_hash
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,1\n6,1\n")
    out = tmp_path / "fleet"
    fleet, _ = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                         "--rate-curve", str(curve), "--session", "turns:2,tools:1,tool-latency:0.3,tool-result:32,"
                         "schemas:1,call-tokens:8", "--prompt-tokens", "64", "--output-tokens", "16", "--replicas", "2",
                         "--router", "consistent_hash", "--slo-ttft-ms", "3000", "--window-s", "10",
                         "--cold-start-s", "0", "--seed", "2")
    sent = fleet["accounting"]["sent"]
    assert sent >= 8 and sent % 4 == 0 and fleet["accounting"]["by_status"] == {"ok": sent}
    sessions: dict[str, list[dict]] = {}
    for record in read_records(out / "requests.jsonl"):
        sessions.setdefault(record["conversation_id"], []).append(record)
    assert len(sessions) == sent // 4
    measured = fleet["sessions"]   # fleet.json says what plan.json says of them, from the records
    assert measured["sessions"] == measured["completed"] == sent // 4 and measured["completion_s"]["p50"] > 2 * 0.3
    for turns in sessions.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [1, 2, 3, 4] and len({r["replica"] for r in turns}) == 1
        for before, after in zip(turns, turns[1:]):   # a tool's 0.3 s after a call, at once after an answer
            waited = after["t_sched"] - (before["t_start"] + before["e2e_s"])
            assert waited == pytest.approx(0.3 if after["turn"] % 2 == 0 else 0.0, abs=0.05)
        assert turns[-1]["cached_tokens"] >= turns[0]["prompt_tokens"] // 2   # the system prompt and the history


def test_agents_that_fan_out_are_replayed_with_their_sub_agents_at_once(tmp_path):
    # one turn a session: a call, two sub-agents sent at once at its answer, then the answer that joins them;
    # the plan of the same flags has the same requests and sessions
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,rate_rps\n0,1\n5,1\n")
    shared = ["--rate-curve", str(curve), "--session", "turns:1,tools:1,fanout:2,tool-result:16,schemas:1,"
              "call-tokens:8", "--prompt-tokens", "64", "--output-tokens", "16", "--replicas", "2", "--router",
              "consistent_hash", "--slo-ttft-ms", "3000", "--window-s", "10", "--cold-start-s", "0", "--seed", "2"]
    out = tmp_path / "fleet"
    fleet, _ = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", "--server-args", "--max-model-len 2048",
                         *shared)
    sent = fleet["accounting"]["sent"]
    assert sent >= 8 and sent % 4 == 0 and fleet["accounting"]["by_status"] == {"ok": sent}
    sessions: dict[str, list[dict]] = {}
    for record in read_records(out / "requests.jsonl"):
        sessions.setdefault(record["conversation_id"], []).append(record)
    for turns in sessions.values():
        turns.sort(key=lambda r: r["turn"])
        call, subs, join = turns[0], turns[1:3], turns[3]
        ends = [r["t_start"] + r["e2e_s"] for r in turns]
        for sub in subs:
            assert sub["t_sched"] == pytest.approx(ends[0], abs=0.05)   # at the call's answer, together
        assert join["t_sched"] == pytest.approx(max(ends[1:3]), abs=0.05)   # after the last sub-agent
    assert fleet["sessions"]["sessions"] == fleet["sessions"]["completed"] == sent // 4

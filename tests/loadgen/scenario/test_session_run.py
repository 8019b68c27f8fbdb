"""`--session`: agentic sessions against the real reference server, through the real `locust`: tool calls
asked and made on the wire, the tools' waits, results sent back, sub-agents at once; and what the
records and the report make of them."""

from collections import defaultdict

import pandas as pd
import pytest

from contract.records import read_records
from loadgen_helpers import run_locust, scripted_server
from reports.sessions import session_stats

pytestmark = pytest.mark.slow

SPEC = "turns:2,tools:1-2,tool-latency:0.05,tool-result:24,fanout:0-2,schemas:1"


def test_sessions_call_tools_and_send_their_results_back(reference_server_tiny, tmp_path):
    records = tmp_path / "r.jsonl"
    proc = run_locust("--host", reference_server_tiny.base_url, "-u", "3", "-r", "3", "-t", "3s", "--session", SPEC,
                      "--prompt-tokens", "16", "--output-tokens", "8", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_records(records)
    assert {r["status"] for r in rows} <= {"ok", "incomplete"}
    sessions = defaultdict(list)
    for row in rows:
        sessions[row["conversation_id"]].append(row)
    complete = [s for s in sessions.values() if any(r["session_end"] and r["status"] == "ok" for r in s)]
    assert len(complete) >= 3
    fanned = 0
    for session in complete:
        main = sorted((r for r in session if r["agent"] == "main"), key=lambda r: r["t_start"])
        assert sorted({r["turn"] for r in main}) == [1, 2]
        for turn in (1, 2):
            steps = [r for r in main if r["turn"] == turn]
            assert [r["step"] for r in steps] == list(range(1, len(steps) + 1)) and 2 <= len(steps) <= 3
            assert [r["tool_calls"] for r in steps] == [1] * (len(steps) - 1) + [0]   # a call a round, then the answer
            for before, after in zip(steps, steps[1:]):
                # the server saw the call and its 24-token result in the next prompt, and its prefix cache
                # held the history before it (the server's own count, from its usage)
                assert after["prompt_tokens"] > before["prompt_tokens"] + 24
                assert after["cached_tokens"] >= before["prompt_tokens"] - 16   # whole 16-token blocks
                subs = [r for r in session if r["agent"] != "main" and r["turn"] == turn and r["step"] == before["step"]]
                end = before["t_start"] + before["e2e_s"]
                if subs:   # a fan-out: its sub-agents ran between the round and the next request
                    fanned += 1
                    assert all(end <= s["t_start"] and s["t_start"] + s["e2e_s"] <= after["t_start"] for s in subs)
                    assert after["tool_wait_s"] >= max(s["t_start"] + s["e2e_s"] for s in subs) - end - 0.01
                else:
                    assert after["tool_wait_s"] >= 0.05 and after["t_start"] - end >= 0.05
    assert fanned >= 1
    stats = session_stats(pd.DataFrame(rows))
    assert stats.completed == len(complete) and stats.failed == 0 and stats.uncalled_rounds == 0
    assert 0 < stats.tool_wait_share < 1


def test_a_server_that_does_not_call_tools_is_named(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "2s", "--session", "turns:1,tools:1",
                          "--output-tokens", "4", "--records", str(records))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "answered tool_choice=required without a tool call: it does not call tools" in proc.stderr
        assert session_stats(pd.DataFrame(read_records(records))).uncalled_rounds >= 1
        bad = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "1s", "--session", "turns:2,tools:3-1")
        assert bad.returncode == 2 and "--session tools: '3-1' runs backwards" in bad.stderr, bad.stderr[-2000:]
        assert "Traceback" not in bad.stderr


def test_a_trace_of_sessions_waits_on_each_answer_then_the_delay(reference_server_tiny, tmp_path):
    trace = tmp_path / "sessions.jsonl"
    trace.write_text('{"session_id": "a", "timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [0]}\n'
                     '{"session_id": "b", "timestamp": 100, "input_length": 30, "output_length": 8}\n'
                     '{"session_id": "a", "delay": 300, "input_length": 60, "output_length": 8, "hash_ids": [0, 1]}\n'
                     '{"timestamp": 50, "input_length": 20, "output_length": 4}\n'
                     '{"session_id": "a", "delay": 200, "input_length": 90, "output_length": 8}\n'
                     '{"session_id": "b", "delay": 0, "input_length": 50, "output_length": 8}\n')
    records = tmp_path / "r.jsonl"
    proc = run_locust("--host", reference_server_tiny.base_url, "-u", "1", "-r", "1", "-t", "20s", "--trace",
                      str(trace), "--trace-block-tokens", "16", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trace replayed: 3 sessions, 6 requests" in proc.stderr
    rows = {(r["conversation_id"], r["turn"]): r for r in read_records(records)}
    assert sorted(rows, key=str) == sorted([("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), (None, 1)], key=str)
    assert all(r["status"] == "ok" for r in rows.values())
    for (session, turn), delay in ((("a", 2), 0.3), (("a", 3), 0.2), (("b", 2), 0.0)):
        before, row = rows[(session, turn - 1)], rows[(session, turn)]
        answered = before["t_start"] + before["e2e_s"]
        assert row["t_sched"] - answered == pytest.approx(delay, abs=0.01)   # the delay after the answer
        assert 0 <= row["t_start"] - row["t_sched"] < 0.02
    assert rows[("b", 1)]["t_sched"] - rows[("a", 1)]["t_sched"] == pytest.approx(0.1, abs=0.002)


def test_a_trace_of_sub_agents_sends_them_at_once_and_the_join_after_the_last(reference_server_tiny, tmp_path):
    trace = tmp_path / "fanout.jsonl"
    trace.write_text('{"session_id": "a", "timestamp": 0, "input_length": 40, "output_length": 8}\n'
                     '{"session_id": "a", "delay": 0, "parallel": 0, "input_length": 30, "output_length": 4}\n'
                     '{"session_id": "a", "delay": 0, "parallel": 0, "input_length": 30, "output_length": 24}\n'
                     '{"session_id": "a", "delay": 100, "input_length": 90, "output_length": 8}\n')
    records = tmp_path / "r.jsonl"
    proc = run_locust("--host", reference_server_tiny.base_url, "-u", "1", "-r", "1", "-t", "20s", "--trace",
                      str(trace), "--trace-block-tokens", "16", "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trace replayed: 1 sessions, 4 requests" in proc.stderr
    rows = {r["turn"]: r for r in read_records(records)}
    assert sorted(rows) == [1, 2, 3, 4] and all(r["status"] == "ok" for r in rows.values())

    def answered(r):
        return r["t_start"] + r["e2e_s"]

    for turn in (2, 3):   # both sub-agents at the call's answer
        assert rows[turn]["t_sched"] - answered(rows[1]) == pytest.approx(0.0, abs=0.01)
    last = max(answered(rows[2]), answered(rows[3]))
    assert answered(rows[3]) > answered(rows[2])   # the longer answer ends last
    assert rows[4]["t_sched"] - last == pytest.approx(0.1, abs=0.01)   # the join: its delay after the last

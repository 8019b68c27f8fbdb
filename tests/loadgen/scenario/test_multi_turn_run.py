"""`--turns`: conversations whose every turn sends the whole history, with the server's own answers."""

import json
from collections import defaultdict

import pytest

from contract.records import read_records
from loadgen_helpers import read_truth, run_locust, scripted_server

pytestmark = pytest.mark.slow


def _answer(tokens: int) -> str:   # what the scripted server streams for max_tokens
    return "Hello " + "tok " * (tokens - 1)


def test_dataset_conversations_send_their_history_turn_by_turn(tmp_path):
    dataset = tmp_path / "chat.jsonl"
    dataset.write_text(json.dumps({"messages": [
        {"role": "system", "content": "be kind"}, {"role": "user", "content": "first"},
        {"role": "assistant", "content": "x" * 3}, {"role": "user", "content": "second"},
        {"role": "assistant", "content": "y" * 5}, {"role": "user", "content": "third"}]}) + "\n")
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        proc = run_locust("--host", url, "-u", "2", "-r", "2", "-t", "3s", "--dataset", str(dataset),
                          "--turns", "all", "--chars-per-token", "1", "--think-time", "0.05",
                          "--records", str(records))
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = read_truth(truth_path)
    by_conversation = defaultdict(list)
    for row in read_records(records):
        if row["status"] == "ok":
            by_conversation[row["conversation_id"]].append(row)
    complete = [sorted(rows, key=lambda r: r["turn"]) for rows in by_conversation.values() if len(rows) == 3]
    assert len(complete) >= 4
    system = {"role": "system", "content": "be kind"}
    for turns in complete:
        assert [r["turn"] for r in turns] == [1, 2, 3]
        assert [r["output_tokens_asked"] for r in turns[:2]] == [3, 5]   # the data's reply lengths
        history = [system, {"role": "user", "content": "first"}]
        assert truth[turns[0]["response_id"]]["prompt_tokens"] == len(json.dumps(history).encode())
        history += [{"role": "assistant", "content": _answer(3)}, {"role": "user", "content": "second"}]
        assert truth[turns[1]["response_id"]]["prompt_tokens"] == len(json.dumps(history).encode())
        history += [{"role": "assistant", "content": _answer(5)}, {"role": "user", "content": "third"}]
        assert truth[turns[2]["response_id"]]["prompt_tokens"] == len(json.dumps(history).encode())
        # the think time separates an answer from the next turn; queue_s stays the generator's own delay
        for before, after in zip(turns, turns[1:]):
            assert after["t_start"] - (before["t_start"] + before["e2e_s"]) >= 0.05
            assert 0 <= after["queue_s"] < 0.05


def test_synthetic_turns_and_flags_that_do_not_fit(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "2s", "--turns", "2", "--output-tokens", "4",
                          "--prompt-tokens", "10", "--records", str(records))
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = [r for r in read_records(records) if r["status"] == "ok"]
        turns = defaultdict(set)
        for row in rows:
            turns[row["conversation_id"]].add(row["turn"])
        assert len(turns) >= 2 and all(seen <= {1, 2} for seen in turns.values())
        second = [r for r in rows if r["turn"] == 2]
        assert second and all(r["prompt_tokens_asked"] == 10 + len(_answer(4)) + 10 for r in second)
        for args, message in ((["--turns", "2", "--arrival", "poisson", "--rates", "2"], "run closed loop"),
                              (["--think-time", "1"], "needs --turns"), (["--turns", "all"], "needs --dataset")):
            bad = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "1s", *args)
            assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr, bad.stderr

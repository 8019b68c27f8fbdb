"""`locust -f loadgen/chat.py --dataset PATH`: the dataset's prompts reach the server with the data's lengths."""

import json

import pytest

from contract.records import read_records
from loadgen_helpers import read_truth, run_locust, scripted_server

pytestmark = pytest.mark.slow


def test_dataset_prompts_and_reply_lengths_reach_the_server(tmp_path):
    entries = [{"conversations": [{"from": "human", "value": "q" * (10 + i)}, {"from": "gpt", "value": "r" * (4 * (i + 2))}]}
               for i in range(5)]
    dataset = tmp_path / "sharegpt.json"
    dataset.write_text(json.dumps(entries))
    # what the scripted server counts as prompt tokens: the JSON of the messages it got
    expected = {len(json.dumps([{"role": "user", "content": "q" * (10 + i)}]).encode()): i + 2 for i in range(5)}
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        proc = run_locust("--host", url, "-u", "2", "-r", "2", "-t", "2s", "--dataset", str(dataset),
                          "--dataset-sampling", "without-replacement", "--records", str(records), "--seed", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = read_truth(truth_path)
    rows = [r for r in read_records(records) if r["status"] == "ok"]
    assert len(rows) >= 10
    for row in rows:
        server = truth[row["response_id"]]
        assert server["prompt_tokens"] in expected
        assert server["max_tokens"] == row["output_tokens_asked"] == expected[server["prompt_tokens"]]
    # without replacement: the first five sent cover the five entries
    first = sorted(rows, key=lambda r: r["t_start"])[:5]
    assert {truth[r["response_id"]]["prompt_tokens"] for r in first} == set(expected)


def test_output_tokens_flag_overrides_the_data_and_bad_file_exits_2(tmp_path):
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text('{"prompt": "hello", "output_tokens": 9}\n')
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, _):
        proc = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "1s", "--dataset", str(dataset),
                          "--output-tokens", "3", "--records", str(records), "--api", "completions")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert {r["output_tokens_asked"] for r in read_records(records)} == {3}
        dataset.write_text('{"prompt": "hello"}\n{"prompt": 5}\n')
        bad = run_locust("--host", url, "-u", "1", "-r", "1", "-t", "1s", "--dataset", str(dataset))
    assert bad.returncode == 2
    assert "prompts.jsonl: line 2: \"prompt\" must be a non-empty string" in bad.stderr
    assert "Traceback" not in bad.stderr

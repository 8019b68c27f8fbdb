"""`locust -f loadgen/chat.py` against the scripted SSE server: records checked field by field.

The scripted server logs when it read each request and wrote each token, so recorded
values are compared with its truth request by request (joined on response_id).
"""

import csv
import json
import re
import time

import pytest

from contract.loadgen_meta import meta_path
from contract.records import check_record, read_records
from loadgen_helpers import REPO, read_truth, run_locust, run_python, scripted_server

pytestmark = pytest.mark.slow


def test_headless_closed_loop_records_match_server_truth(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.03", "--itl", "0.005") as (url, truth_path):
        t0 = time.time()
        proc = run_locust("--host", url, "-u", "4", "-r", "4", "-t", "3s", "--prompt-tokens", "uniform:20:40",
                          "--output-tokens", "uniform:4:12", "--records", str(records), "--warmup", "0.5",
                          "--seed", "5", "--json-file", str(tmp_path / "stats"))
        t1 = time.time()
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = read_truth(truth_path)
    rows = read_records(records)
    assert len(rows) >= 20
    ttft_errors = []
    for row in rows:
        assert check_record(row) == [], row
        assert row["level"] == "c=4" and row["api"] == "chat" and row["t_sched"] is None
        assert row["worker"].startswith("local@") and row["status"] in ("ok", "incomplete")
        assert t0 < row["t_start"] < t1
        assert 20 <= row["prompt_tokens_asked"] - 0 <= 40 and 4 <= row["output_tokens_asked"] <= 12
        if row["status"] != "ok":
            continue
        server = truth[row["response_id"]]
        ttft_errors.append(row["ttft_s"] - (server["t_chunks"][0] - server["t_read"]))
        assert row["output_tokens"] == row["output_tokens_asked"] == server["max_tokens"]
        assert row["prompt_tokens"] == server["prompt_tokens"] and row["usage_from"] == "server"
        assert len(row["itl_s"]) == row["output_tokens"] - 1
        assert row["e2e_s"] >= row["ttft_s"] + sum(row["itl_s"]) - 1e-9
    # TTFT is timed from our send to the first *content* chunk (the role chunk comes 30 ms
    # earlier): errors stay near zero; a loaded CI box may stall a few requests
    ttft_errors.sort()
    assert abs(ttft_errors[len(ttft_errors) // 2]) < 0.003
    assert sum(abs(e) < 0.02 for e in ttft_errors) >= 0.8 * len(ttft_errors)
    ids = [r["response_id"] for r in rows if r["response_id"] is not None]
    assert len(ids) == len(set(ids))  # one record per answered request (several stopped ones have no id)
    # every request the server answered is recorded; only a request stopped before its first
    # byte came back can lack the server's id (it is still recorded, as incomplete)
    no_id = [r for r in rows if r["response_id"] is None]
    assert all(r["status"] == "incomplete" for r in no_id)
    assert len(set(truth) - set(ids)) <= len(no_id) and len(ids) + len(no_id) == len(rows)
    phases = {r["phase"] for r in rows}
    assert phases == {"warmup", "measure"}
    first = min(r["t_start"] for r in rows)
    assert all((r["phase"] == "warmup") == (r["t_start"] - first < 0.5) for r in rows if r["t_start"] - first < 0.45 or r["t_start"] - first > 0.6)
    # Locust's own stats count each finished request once; the token metrics have their own file
    ok = [r for r in rows if r["status"] == "ok"]
    (entry,) = json.loads((tmp_path / "stats.json").read_text())
    assert (entry["method"], entry["name"], entry["num_requests"]) == ("chat", "/v1/chat/completions", len(ok))
    assert entry["total_content_length"] == sum(r["output_tokens"] for r in ok)
    tokens = {e["name"]: e["num_requests"] for e in json.loads((tmp_path / "stats.tokens.json").read_text())}
    assert tokens == {"TTFT": len(ok), "TPOT": len(ok), "E2E": len(ok), "ITL": sum(len(r["itl_s"]) for r in ok)}
    meta = json.loads(meta_path(records).read_text())["levels"]["c=4"]
    (process,) = meta["processes"].values()
    assert process["requests_sent"] == len(rows) and process["cpu_max_pct"] is not None


def test_http_errors_completions_api_and_counted_tokens(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01", "--itl", "0.002", "--error-every", "3", "--no-usage") as (url, _):
        proc = run_locust("--host", url, "-u", "2", "-r", "2", "-t", "2s", "--api", "completions",
                          "--model", "scripted", "--output-tokens", "5", "--records", str(records),
                          "--level", "custom", "--csv", str(tmp_path / "out"))
    assert proc.returncode == 1  # Locust exits 1 when requests failed
    assert "http_503: scripted overload" in proc.stdout + proc.stderr
    rows = read_records(records)
    failed = [r for r in rows if r["status"] == "http_503"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert failed and ok and all(r["level"] == "custom" and r["api"] == "completions" for r in rows)
    assert all(r["error"] == "scripted overload" and r["ttft_s"] is None for r in failed)
    assert all(r["usage_from"] == "counted" and r["output_tokens"] == 5 for r in ok)
    # one Locust request per record: failures counted once (the console's exact final table;
    # Locust rewrites its own CSV once a second), the token tables only over ok requests
    console = proc.stdout + proc.stderr
    counts = re.findall(r"^completions\s+/v1/completions\s+(\d+)\s+(\d+)\(", console, re.MULTILINE)
    assert counts == [(str(len(failed) + len(ok)), str(len(failed)))]
    assert re.search(rf"^\s+Aggregated\s+{len(failed) + len(ok)}\s+{len(failed)}\(", console, re.MULTILINE)
    (entry, total) = list(csv.DictReader((tmp_path / "out_stats.csv").open()))
    assert entry["Name"] == "/v1/completions" and total["Name"] == "Aggregated"
    tokens = {row["Name"]: int(row["Request Count"]) for row in csv.DictReader((tmp_path / "out_tokens.csv").open())}
    assert tokens == {"TTFT": len(ok), "TPOT": len(ok), "E2E": len(ok), "ITL": 4 * len(ok)}
    assert "Token latency (ms)" in console and console.count("Aggregated") == 2   # Locust's two tables only


def test_environment_api_in_subprocess_non_streaming(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01", "--itl", "0.002") as (url, truth_path):
        script = f"""
import locust
from locust.argument_parser import get_parser
from locust.env import Environment
import loadgen.chat as chat
from waiting import wait_until  # its time.sleep is gevent's once locust is imported
options = get_parser().parse_args(["--no-stream", "--output-tokens", "6", "--records", {str(records)!r}])
env = Environment(user_classes=[chat.LoadUser], events=locust.events, host={url!r}, parsed_options=options)
runner = env.create_local_runner()
env.events.init.fire(environment=env, runner=runner, web_ui=None)
runner.start(3, spawn_rate=3)
wait_until(lambda: runner.stats.get("/v1/chat/completions", "chat").num_requests >= 10, timeout=30, what="ten finished requests")
runner.quit()
env.events.quitting.fire(environment=env, reverse=True)
print("requests", runner.stats.get("/v1/chat/completions", "chat").num_requests,
      "E2E", env.servecap.tokens.stats.get("E2E", "chat").num_requests)
"""
        proc = run_python(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_records(records)
    ok = [r for r in rows if r["status"] == "ok"]
    assert f"requests {len(ok)} E2E {len(ok)}" in proc.stdout and len(ok) >= 10
    truth = read_truth(truth_path)
    for row in ok:
        assert row["ttft_s"] is None and row["itl_s"] == [] and row["output_tokens"] == 6
        assert row["response_id"] in truth and row["level"] == "c=3"


@pytest.mark.parametrize("flag, value, message", [
    ("--prompt-tokens", "uniform:9:3", "below low"),
    ("--rates", "0", "--rates must be positive"),
    ("--model-mix", "sql:abc", "the weight must be a number"),
    ("--reasoning-tokens", "uniform:9:3", "--reasoning-tokens"),
])
def test_bad_flags_exit_2_with_one_clear_line(flag, value, message):
    proc = run_locust("--host", "http://127.0.0.1:9", "-t", "1s", flag, value, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_classify_kserve_v2_records(tmp_path):
    records = tmp_path / "r.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.01") as (url, truth_path):
        proc = run_locust("--host", url, "-u", "2", "-r", "2", "-t", "2s", "--rows", "uniform:1:4",
                          "--records", str(records), locustfile=str(REPO / "loadgen" / "classify.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    truth = read_truth(truth_path)
    ok = [r for r in read_records(records) if r["status"] == "ok"]
    assert len(ok) >= 20
    for row in ok:
        assert check_record(row) == [] and row["api"] == "classify" and row["ttft_s"] is None
        assert row["response_id"].startswith("req-") and truth[row["response_id"]]["prompt_tokens"] == row["prompt_tokens_asked"]
        assert 1 <= row["prompt_tokens_asked"] <= 4 and row["e2e_s"] >= 0.01


def test_locustfiles_import_neither_torch_nor_other_servecap_parts():
    proc = run_python("import sys, loadgen.chat, loadgen.classify, loadgen.shapes\n"
                      "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
                      "('torch', 'reference_server', 'calculators', 'reports'))\n"
                      "print('BAD', bad)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "BAD []" in proc.stdout

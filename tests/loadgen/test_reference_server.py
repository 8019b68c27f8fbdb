"""loadgen against the real reference server (`python -m reference_server --model tiny`):
the locust command and Locust's Environment API, with the sampler on the server's pid
and the scraper on its /metrics, as the sweep runs them."""

import pandas as pd
import pytest

from contract.records import check_record, read_records
from loadgen.observe.samplers import start_sampler
from loadgen.observe.scraper import start_scraper
from loadgen_helpers import REPO, run_locust, run_python
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with ServerProcess(ReferenceServerSpec.from_flags(["--model", "tiny"]), cwd=str(REPO)) as proc:
        yield proc


def test_chat_and_classify_against_reference_server(server, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # CI has no GPU: host path, said once
    records = tmp_path / "requests.jsonl"
    sampler = start_sampler(tmp_path / "samples.csv", 0.25, pid=server.process.pid)
    scraper = start_scraper(server.base_url + "/metrics", tmp_path / "server_metrics.csv", 0.25)
    try:
        # the tiny model on a busy CPU takes ~0.1 s a token: --stop-timeout lets the last requests finish
        chat = run_locust("--host", server.base_url, "-u", "4", "-r", "4", "-t", "2s", "--stop-timeout", "20",
                          "--prompt-tokens", "24", "--output-tokens", "6", "--records", str(records),
                          "--level", "tiny/c=4")
        classify = run_locust("--host", server.base_url, "-u", "2", "-r", "2", "-t", "2s", "--records", str(records),
                              "--level", "classify/c=2", locustfile=str(REPO / "loadgen" / "classify.py"))
    finally:
        sampler.stop()
        scraper.stop()
    assert chat.returncode == 0, chat.stderr[-3000:]
    assert classify.returncode == 0, classify.stderr[-3000:]
    rows = read_records(records)
    chat_ok = [r for r in rows if r["api"] == "chat" and r["status"] == "ok"]
    infer_ok = [r for r in rows if r["api"] == "classify" and r["status"] == "ok"]
    assert len(chat_ok) >= 4 and len(infer_ok) >= 10
    assert not [r for r in rows if r["api"] == "chat" and r["status"] != "ok"]  # all finished in the stop timeout
    assert all(check_record(r) == [] for r in rows)
    for row in chat_ok:
        assert row["level"] == "tiny/c=4" and row["response_id"].startswith("chatcmpl-")
        assert row["output_tokens"] == 6 and row["usage_from"] == "server"  # ignore_eos fixes the length
        assert row["prompt_tokens"] >= 24  # the byte-level count plus the chat template
        assert 0 < row["ttft_s"] < row["e2e_s"] and 1 <= len(row["itl_s"]) <= 5
    # a classify request still in flight when its 2 s run stops is recorded "incomplete", without an id
    assert {r["status"] for r in rows if r["api"] == "classify"} <= {"ok", "incomplete"}
    ok_ids = [r["response_id"] for r in rows if r["status"] == "ok"]
    assert all(ok_ids) and len(set(ok_ids)) == len(ok_ids)
    assert all(r["level"] == "classify/c=2" and r["e2e_s"] > 0 for r in infer_ok)
    samples = pd.read_csv(tmp_path / "samples.csv")
    assert set(samples.device) == {f"pid:{server.process.pid}"} and samples.mem_used_bytes.min() > 50 * 2**20
    metrics = pd.read_csv(tmp_path / "server_metrics.csv", keep_default_na=False)
    assert {"servecap_requests_running", "servecap_kv_blocks_total"} <= set(metrics.name)
    assert metrics[metrics.name == "servecap_requests_running"].value.max() >= 1


def test_environment_api_against_reference_server(server, tmp_path):
    records = tmp_path / "r.jsonl"
    script = f"""
import locust
from locust.argument_parser import get_parser
from locust.env import Environment
import loadgen.chat as chat
from waiting import wait_until  # its time.sleep is gevent's once locust is imported
options = get_parser().parse_args(["--api", "completions", "--output-tokens", "4", "--records", {str(records)!r}])
env = Environment(user_classes=[chat.LoadUser], events=locust.events, host={server.base_url!r}, parsed_options=options)
runner = env.create_local_runner()
env.events.init.fire(environment=env, runner=runner, web_ui=None)
runner.start(2, spawn_rate=2)
wait_until(lambda: runner.stats.get("/v1/completions", "completions").num_requests >= 2, timeout=60, what="two finished requests")
env.stop_timeout = 20  # let in-flight requests finish
runner.quit()
print("requests", runner.stats.get("/v1/completions", "completions").num_requests,
      "TTFT", env.servecap.tokens.stats.get("TTFT", "completions").num_requests)
"""
    proc = run_python(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok = [r for r in read_records(records) if r["status"] == "ok"]
    assert ok and f"requests {len(ok)} TTFT {len(ok)}" in proc.stdout
    assert all(r["api"] == "completions" and r["output_tokens"] == 4 and r["ttft_s"] > 0 for r in ok)

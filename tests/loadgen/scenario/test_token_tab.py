"""Locust's web UI with loadgen/chat.py: a swarm started through its web API, the request
counts against the records, the "Token latency" tab's rows, its page, charts and CSV."""

import csv
import io
import json

import pytest

from contract.records import read_records
from loadgen_helpers import http_get as _get, http_post_form as _post, locust_web_ui, scripted_server
from waiting import wait_until

pytestmark = pytest.mark.slow


def test_web_ui_counts_real_requests_and_shows_token_latency(tmp_path):
    records = tmp_path / "requests.jsonl"
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.004") as (url, _), \
            locust_web_ui(url, records, "--output-tokens", "8") as ui:
        page = _get(ui + "/")
        assert "Token latency" in page and "servecap-tokens" in page
        assert _post(ui + "/swarm", {"user_count": 4, "spawn_rate": 4, "host": url})["success"]
        # two chart points (one per 5 s) while running
        wait_until(lambda: len(json.loads(_get(ui + "/servecap/tokens/stats") or "{}").get("history", [])) >= 2,
                   timeout=30, interval=0.2, what="two token chart points")
        _post(ui + "/stop", {})
        wait_until(lambda: _stopped_stats(ui), timeout=30, interval=0.2, what="the swarm stopped")
        rows = read_records(records)
        ok = [r for r in rows if r["status"] == "ok"]
        finished = [r for r in rows if r["status"] != "incomplete"]
        # Locust's cached /stats/requests catches up within its cache time
        stats = wait_until(lambda: _aggregated(ui) == len(finished) and json.loads(_get(ui + "/stats/requests")),
                           timeout=10, interval=0.2, what="Locust's count equal to the records'")
        (entry, total) = stats["stats"]
        assert entry["name"] == "/v1/chat/completions" and total["name"] == "Aggregated"
        assert entry["num_requests"] == total["num_requests"] == len(finished) >= 30
        (tab,) = stats["extended_stats"]
        counts = {row["metric"]: row["count"] for row in tab["data"]}
        assert counts == {"TTFT": len(ok), "TPOT": len(ok), "E2E": len(ok), "ITL": 7 * len(ok)}
        ttft = next(row for row in tab["data"] if row["metric"] == "TTFT")
        assert 20 <= ttft["p50"] <= ttft["p95"] <= ttft["max"]   # the server waits 20 ms for the first token
        page = _get(ui + "/servecap/tokens")
        assert page.count('class="token-chart"') == 4 and "<td>TTFT</td>" in page
        table = csv.DictReader(io.StringIO(_get(ui + "/servecap/tokens/csv")))
        assert {row["Name"]: int(row["Request Count"]) for row in table} == counts


def _stopped_stats(ui: str):
    body = _get(ui + "/stats/requests")
    return body and json.loads(body)["state"] == "stopped"


def _aggregated(ui: str) -> int:
    body = _get(ui + "/stats/requests")
    return json.loads(body)["stats"][-1]["num_requests"] if body else -1

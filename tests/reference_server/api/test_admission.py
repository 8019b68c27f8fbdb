"""Overload (429 + Retry-After, nothing admitted dropped) and API-key auth, against a live server.

One sequence runs at a time (`--max-num-seqs 1`) and each step sleeps 20 ms, so a
long request holds the engine while others wait: the admission limit is exercised
deterministically, without racing the model.
"""

from __future__ import annotations

import threading

import httpx
import openai
import pytest

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec
from waiting import wait_until

pytestmark = pytest.mark.slow

KEY = "test-key-123"


@pytest.fixture(scope="module")
def server():
    args = ["--model", "tiny", "--max-num-seqs", "1", "--max-waiting", "2", "--inject-step-delay-ms", "20",
            "--retry-after-s", "2"]
    with ServerProcess(ReferenceServerSpec.from_flags(args), env={"SERVECAP_API_KEY": KEY}) as proc:
        yield proc


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


def metric(http: httpx.Client, name: str) -> float:
    text = http.get("/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


def test_request_beyond_max_waiting_gets_429_and_admitted_ones_all_finish(server, http):
    results: dict[str, httpx.Response] = {}

    def send(name: str, max_tokens: int) -> None:
        results[name] = http.post("/v1/completions", json={"prompt": name, "max_tokens": max_tokens,
                                                           "ignore_eos": True})

    long_body = {"prompt": "long", "max_tokens": 60, "ignore_eos": True, "stream": True}
    with http.stream("POST", "/v1/completions", json=long_body) as running:
        events = (line for line in running.iter_lines() if line.startswith("data: "))
        next(events)   # the long request is running: it holds the only sequence slot
        waiters = [threading.Thread(target=send, args=(f"w{i}", 5)) for i in range(2)]
        for thread in waiters:
            thread.start()
        wait_until(lambda: metric(http, "servecap_requests_admission_waiting") == 2, what="two requests waiting")

        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.RateLimitError) as rejected:
            client.completions.create(model="tiny", prompt="one too many", max_tokens=5)
        assert rejected.value.response.headers["Retry-After"] == "2"
        assert rejected.value.body["code"] == "queue_full"
        assert "--max-waiting 2" in rejected.value.body["message"]

        rest = [line for line in events]
    assert rest[-1] == "data: [DONE]" and len(rest) == 60   # 59 more tokens + [DONE]
    for thread in waiters:
        thread.join(60)
    for name in ("w0", "w1"):
        assert results[name].status_code == 200
        assert results[name].json()["usage"]["completion_tokens"] == 5
    assert metric(http, 'servecap_requests_rejected_total{reason="queue_full"}') == 1
    assert metric(http, "servecap_requests_admission_waiting") == 0


def test_missing_or_wrong_key_gets_401_on_v1_and_v2(server):
    url = server.base_url
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}):
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/completions"), ("POST", "/v1/chat/completions"),
                             ("GET", "/v2/models/tabular-mlp"), ("POST", "/v2/models/tabular-mlp/infer")):
            response = httpx.request(method, url + path, headers=headers, content=b"{not json")
            assert response.status_code == 401, (headers, path, response.text)
            assert response.headers["WWW-Authenticate"] == "Bearer"
            if path.startswith("/v1"):
                assert response.json()["error"]["type"] == "authentication_error"
            else:
                assert "API key" in response.json()["error"]


def test_openai_client_with_wrong_key_gets_authentication_error(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_right_key_works_and_ops_routes_stay_open(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    for path in ("/health", "/ready", "/metrics"):
        assert httpx.get(server.base_url + path).status_code == 200, path

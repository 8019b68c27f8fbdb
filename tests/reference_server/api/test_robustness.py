"""Bad input, oversized bodies, client disconnects and an OpenAPI fuzz against a live server.

Every bad request must get a clear 4xx in OpenAI's error shape (KServe's on /v2), never
a 5xx, and the engine must keep serving afterwards. `--max-model-len 48` keeps every
valid generation the fuzzer may ask for short.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec
from waiting import wait_until

pytestmark = pytest.mark.slow

MAX_BODY = 4096
MAX_MODEL_LEN = 48


@pytest.fixture(scope="module")
def server():
    args = ["--model", "tiny", "--max-model-len", str(MAX_MODEL_LEN), "--max-body-bytes", str(MAX_BODY)]
    with ServerProcess(ReferenceServerSpec.from_flags(args)) as proc:
        yield proc


@pytest.fixture(scope="module")
def slow_server():
    """Each engine step sleeps 50 ms, so a 40-token generation lasts ~2 s on any machine: a disconnect
    test then always catches the request mid-generation, however fast the host is."""
    args = ["--model", "tiny", "--max-model-len", str(MAX_MODEL_LEN), "--inject-step-delay-ms", "50"]
    with ServerProcess(ReferenceServerSpec.from_flags(args)) as proc:
        yield proc


@pytest.fixture(scope="module")
def slow_http(slow_server):
    with httpx.Client(base_url=slow_server.base_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def openai_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return error


def metric(http: httpx.Client, name: str) -> float:
    text = http.get("/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")))


@pytest.mark.parametrize("body, param, words", [
    ({"prompt": "x", "max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ({"prompt": "x", "max_tokens": -5}, "max_tokens", "greater than or equal to 1"),
    ({"prompt": "x", "max_tokens": "5"}, "max_tokens", "valid integer"),
    ({"prompt": 42}, "prompt", ""),
    ({"prompt": "x", "temperature": 9}, "temperature", "less than or equal to 2"),
    ({"prompt": "x", "top_p": 0}, "top_p", "greater than 0"),
    ({"prompt": "x", "n": 2}, None, "only n=1"),
    ({"prompt": "x", "frobnicate": True, "skip_special_tokens": "no"}, "skip_special_tokens", "valid boolean"),
    ({"prompt": "x", "top_k": 50}, None, "top_k: only -1 or 0"),
    ({"prompt": ["a", "b"]}, None, "one prompt per request"),
    ({"prompt": [300, 1]}, "prompt", "token ids must be in"),
    ({"prompt": "x", "stop": [""]}, "stop", "non-empty"),
    ({"prompt": "x", "min_tokens": 9, "max_tokens": 2}, None, "must not exceed"),
    ({"max_tokens": 3}, "prompt", "Field required"),
])
def test_bad_completion_fields_get_400_naming_the_problem(http, body, param, words):
    error = openai_error(http.post("/v1/completions", json=body), 400)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert words in error["message"]


@pytest.mark.parametrize("body, words", [
    ({"messages": []}, "at least 1 item"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "role"),
    ({"messages": [{"role": "user", "content": 5}]}, "content"),
    ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "max_completion_tokens": 5}, "disagree"),
])
def test_bad_chat_fields_get_400(http, body, words):
    assert words in openai_error(http.post("/v1/chat/completions", json=body), 400)["message"]


def test_malformed_json_gets_400(http):
    response = http.post("/v1/chat/completions", content=b'{"messages": [', headers={"content-type": "application/json"})
    assert "not valid JSON" in openai_error(response, 400)["message"]
    response = http.post("/v1/completions", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert "JSON object" in openai_error(response, 400)["message"]


def test_unknown_model_gets_404(http):
    error = openai_error(http.post("/v1/completions", json={"model": "gpt-9", "prompt": "x"}), 404)
    assert error["code"] == "model_not_found" and error["param"] == "model" and "'gpt-9'" in error["message"]


def test_prompt_longer_than_context_gets_400(http):
    error = openai_error(http.post("/v1/completions", json={"prompt": "y" * 200, "max_tokens": 1}), 400)
    assert str(MAX_MODEL_LEN) in error["message"]
    messages = [{"role": "user", "content": "z" * 50}]   # no max_tokens: nothing left for output
    assert "no room" in openai_error(http.post("/v1/chat/completions", json={"messages": messages}), 400)["message"]


def test_unknown_route_and_wrong_method_get_openai_errors(http):
    assert "no route" in openai_error(http.get("/v1/nothing"), 404)["message"]
    assert "not allowed" in openai_error(http.get("/v1/completions"), 405)["message"]


def test_oversized_body_gets_413_declared_or_chunked(http):
    big = {"prompt": "x" * (MAX_BODY + 10)}
    assert "limit" in openai_error(http.post("/v1/completions", json=big), 413)["message"]

    def chunks():   # no Content-Length: counted as it arrives
        for _ in range(10):
            yield b" " * 1000

    response = http.post("/v1/completions", content=chunks(), headers={"content-type": "application/json"})
    assert "limit" in openai_error(response, 413)["message"]


def test_engine_still_serves_after_bad_input(http):
    response = http.post("/v1/completions", json={"prompt": "ok", "max_tokens": 3, "ignore_eos": True})
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 3
    assert metric(http, 'servecap_requests_rejected_total{reason="invalid"}') >= 20


def wait_for_idle_kv(http: httpx.Client) -> None:
    wait_until(lambda: metric(http, "servecap_kv_blocks_used") == 0 and metric(http, "servecap_requests_running") == 0,
               what="the aborted request freeing its KV blocks")


def test_disconnect_mid_stream_frees_kv_blocks(slow_server, slow_http):
    server, http = slow_server, slow_http
    assert metric(http, "servecap_kv_blocks_used") == 0
    body = {"prompt": "p" * 4, "max_tokens": 40, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", server.base_url + "/v1/completions", json=body, timeout=30) as response:
        lines = response.iter_lines()
        received = [line for line, _ in zip((l for l in lines if l.startswith("data: ")), range(3))]
        assert len(received) == 3
        assert metric(http, "servecap_kv_blocks_used") > 0   # mid-generation
    # leaving the block closed the connection with ~37 tokens still to go
    wait_for_idle_kv(http)
    assert metric(http, 'servecap_requests_finished_total{finish_reason="abort"}') >= 1


def test_disconnect_while_waiting_for_non_streamed_response_frees_kv_blocks(slow_server, slow_http):
    server, http = slow_server, slow_http
    aborted_before = metric(http, 'servecap_requests_finished_total{finish_reason="abort"}')
    body = {"prompt": "q" * 4, "max_tokens": 40, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + "/v1/completions", json=body, timeout=httpx.Timeout(30, read=0.3))
    wait_for_idle_kv(http)
    assert metric(http, 'servecap_requests_finished_total{finish_reason="abort"}') == aborted_before + 1


@pytest.fixture(scope="module")
def fuzz_cases(server):
    """Valid and invalid requests for every operation in the server's own OpenAPI schema.
    (Hypothesis drives schemathesis' strategies directly: its pytest plugin fails on pytest 9.)"""
    api = schemathesis.openapi.from_url(server.base_url + "/openapi.json")
    return api.as_strategy(GenerationMode.POSITIVE) | api.as_strategy(GenerationMode.NEGATIVE)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_requests_never_get_5xx(server, fuzz_cases, data):
    case = data.draw(fuzz_cases)
    response = case.call(base_url=server.base_url, timeout=30)
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text)

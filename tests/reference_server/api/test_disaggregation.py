"""Disaggregated prefill and decode: two emulated workers (`--role prefill`, `--role decode`) behind the real
`vllm-router --vllm-pd-disaggregation`, driven by the official `openai` client.

The router sends the prefill worker a one-token copy with `kv_transfer_params.do_remote_decode`, then the
decode worker the original request with the params the prefill worker answered. Checked: every request
answers 200, streamed or not, chat and completions; the decode worker never computes a received prompt
(its steps' prompt tokens are one a request: the last, for its logits); the prefill worker computes each
prompt; the decode worker's wait before a request's first step is its KV over the link; bad params are
a 400 that names them.
"""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from servecap.fleet.router import RouterSpec, pd_router_argv
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(240)]   # vLLM's router: the real-engine suite (make test-engines)

MODEL = "llama-3.1-8b"
LINK_GBS = 2.0   # slow enough that a 600-token prompt's KV takes tens of ms
BASE = ["--emulate", "h100-sxm", "--model", MODEL, "--no-classifier", "--engine-mode", "thread",
        "--max-model-len", "4096"]


@pytest.fixture(scope="module")
def workers():
    with ServerProcess(ReferenceServerSpec.from_flags([*BASE, "--role", "prefill"]), startup_timeout_s=120) as p, \
            ServerProcess(ReferenceServerSpec.from_flags([*BASE, "--role", "decode", "--kv-transfer-gbs",
                                                          str(LINK_GBS)]), startup_timeout_s=120) as d:
        yield p, d


@pytest.fixture(scope="module")
def router(workers):
    prefill, decode = workers
    argv = pd_router_argv((prefill.base_url,), (decode.base_url,), request_timeout_s=60)
    with ServerProcess(RouterSpec(argv, ready_path="/health"), startup_timeout_s=60) as proc:
        yield proc


def _steps(server) -> list[dict]:
    table = httpx.get(server.base_url + "/v1/engine/steps", timeout=10).json()
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def test_the_router_splits_each_request_and_the_decode_worker_never_prefills(router, workers):
    prefill, decode = workers
    client = openai.OpenAI(base_url=router.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)
    prompts = [f"{k}: the prompt a prefill worker computes " * 16 for k in range(4)]   # distinct: no cache hits
    before_p, before_d = len(_steps(prefill)), len(_steps(decode))
    answers = [client.completions.with_raw_response.create(model=MODEL, prompt=prompts[0], max_tokens=8,
                                                           extra_body={"ignore_eos": True}),
               client.chat.completions.with_raw_response.create(
                   model=MODEL, messages=[{"role": "user", "content": prompts[1]}], max_tokens=8,
                   extra_body={"ignore_eos": True})]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].parse().usage.completion_tokens == answers[1].parse().usage.completion_tokens == 8
    with client.completions.with_streaming_response.create(model=MODEL, prompt=prompts[2], max_tokens=8,
                                                           stream=True, extra_body={"ignore_eos": True}) as streamed:
        assert streamed.status_code == 200
        assert [c.choices[0].finish_reason for c in streamed.parse()][-1] == "length"
    with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=[{"role": "user", "content": prompts[3]}], max_tokens=8, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}) as streamed:
        assert streamed.status_code == 200
        assert list(streamed.parse())[-1].usage.completion_tokens == 8
    prefilled = _steps(prefill)[before_p:]
    decoded = _steps(decode)[before_d:]
    assert sum(s["prefill_tokens"] for s in prefilled) >= sum(len(p.encode()) for p in prompts)   # each prompt
    assert sum(s["prefill_tokens"] for s in decoded) == 4                             # the last token, here
    assert sum(s["decode_seqs"] for s in prefilled) == 0                              # one token each: no decodes


def test_a_received_prompt_waits_its_kv_over_the_link(workers):
    prefill, decode = workers
    engine = httpx.get(decode.base_url + "/v1/engine", timeout=10).json()
    assert engine["disaggregation"]["role"] == "decode" and engine["disaggregation"]["kv_transfer_gbs"] == LINK_GBS
    body = {"model": MODEL, "prompt": "x" * 600, "max_tokens": 1, "temperature": 0}
    sent = httpx.post(prefill.base_url + "/v1/completions", json={**body, "kv_transfer_params": {
        "do_remote_decode": True}}, timeout=30).json()
    params = sent["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["remote_port"] == int(prefill.base_url.rsplit(":", 1)[1])
    assert len(params["remote_block_ids"]) == -(-(sent["usage"]["prompt_tokens"] + 1) // engine["block_size"])
    received = httpx.post(decode.base_url + "/v1/completions", json={**body, "max_tokens": 4,
                                                                     "kv_transfer_params": params}, timeout=30)
    assert received.status_code == 200 and received.json()["usage"]["completion_tokens"] == 4
    records = httpx.get(decode.base_url + "/v1/engine/requests", timeout=10).json()
    last = dict(zip(records["columns"], records["rows"][-1]))
    kv_bytes = (sent["usage"]["prompt_tokens"] - 1) * engine["kv_block_bytes"] / engine["block_size"]
    assert last["kv_transfer_s"] == pytest.approx(kv_bytes / (LINK_GBS * 1e9), rel=0.05), last
    assert last["t_scheduled"] - last["t_arrival"] >= last["kv_transfer_s"]   # the hand-over lies before it


@pytest.mark.parametrize("params, message", [
    ({"do_remote_prefill": True, "remote_block_ids": [1]}, "needs remote_engine_id, remote_request_id"),
    ({"do_remote_prefill": True, "do_remote_decode": True}, "both true"),
    ({"do_remote_prefill": "yes"}, "must be true or false"),
    ([1, 2], "kv_transfer_params: Input should be a valid dictionary"),
])
def test_bad_kv_transfer_params_are_a_400_that_names_them(workers, params, message):
    _, decode = workers
    answer = httpx.post(decode.base_url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 2,
                                                                   "kv_transfer_params": params}, timeout=30)
    assert answer.status_code == 400 and message in answer.json()["error"]["message"]


def test_a_worker_refuses_the_other_roles_half(workers):
    prefill, decode = workers
    remote = {"do_remote_prefill": True, "remote_block_ids": [1], "remote_engine_id": "e", "remote_request_id": "r",
              "remote_host": "127.0.0.1", "remote_port": 1}
    for server, params, role in ((prefill, remote, "only prefills"), (decode, {"do_remote_decode": True},
                                                                      "only decodes")):
        answer = httpx.post(server.base_url + "/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 1,
                                                                       "kv_transfer_params": params}, timeout=30)
        assert answer.status_code == 400 and role in answer.json()["error"]["message"]


def _kv_blocks_used(server, expected: float | None = None) -> float:
    """The gauge; with `expected`, read until it shows it (the engine publishes it after its next command
    or step, asynchronously to the HTTP answer that caused it), for at most 2 s."""
    deadline = time.monotonic() + 2.0
    while True:
        text = httpx.get(server.base_url + "/metrics", timeout=10).text
        used = next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("servecap_kv_blocks_used"))
        if expected is None or used == expected or time.monotonic() > deadline:
            return used
        time.sleep(0.01)


def test_a_sent_prompt_is_held_until_read_and_a_stale_read_is_a_400(workers):
    prefill, decode = workers
    body = {"model": MODEL, "prompt": "held " * 100, "max_tokens": 1, "temperature": 0}
    idle = _kv_blocks_used(prefill)
    params = httpx.post(prefill.base_url + "/v1/completions", json={**body, "kv_transfer_params": {
        "do_remote_decode": True}}, timeout=30).json()["kv_transfer_params"]
    held = idle + len(params["remote_block_ids"])
    assert _kv_blocks_used(prefill, held) == held                                # held for the decode worker
    first = httpx.post(decode.base_url + "/v1/completions", json={**body, "max_tokens": 2, "kv_transfer_params": params},
                       timeout=30)
    assert first.status_code == 200 and _kv_blocks_used(prefill, idle) == idle  # read: released
    again = httpx.post(decode.base_url + "/v1/completions", json={**body, "max_tokens": 2, "kv_transfer_params": params},
                       timeout=30)
    assert again.status_code == 400 and "stale kv_transfer_params" in again.json()["error"]["message"]
    assert _kv_blocks_used(decode, 0) == 0


def test_a_prefill_worker_gone_fails_the_decode_cleanly(workers):
    _, decode = workers
    with ServerProcess(ReferenceServerSpec.from_flags([*BASE, "--role", "prefill"]), startup_timeout_s=120) as p:
        body = {"model": MODEL, "prompt": "gone " * 100, "max_tokens": 1}
        params = httpx.post(p.base_url + "/v1/completions", json={**body, "kv_transfer_params": {
            "do_remote_decode": True}}, timeout=30).json()["kv_transfer_params"]
        p.stop()
    answer = httpx.post(decode.base_url + "/v1/completions", json={**body, "max_tokens": 4,
                                                                   "kv_transfer_params": params}, timeout=30)
    assert answer.status_code == 503 and "cannot be read" in answer.json()["error"]["message"]
    assert _kv_blocks_used(decode, 0) == 0 and httpx.get(decode.base_url + "/health", timeout=10).status_code == 200

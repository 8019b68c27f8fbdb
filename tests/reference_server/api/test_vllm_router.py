"""Two real reference servers behind the real vLLM router (`vllm-router --policy round_robin`).

The router adds vLLM's and SGLang's extension fields to every body it forwards (chat:
`separate_reasoning`, `stream_reasoning`, `include_reasoning`, `return_hidden_states`,
`continue_final_message`, `skip_special_tokens`, `no_stop_trim`, `ignore_eos`, `logprobs`;
completions: `echo`, `return_hidden_states`, `skip_special_tokens`, `no_stop_trim`, `ignore_eos`).
Through it, with the official `openai` client, chat and completions answer 200 streamed or not,
the fields with no meaning here come back named in `x-servecap-ignored-fields`, those with one
are honoured, and each server logs each ignored name once.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from reference_server.engine.tokenizer import SPECIAL_TOKENS
from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess, free_port
from servecap.launch.spec import ReferenceServerSpec

pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(240)]   # vLLM's router: the real-engine suite (make test-engines)

HEADER = "x-servecap-ignored-fields"
ROUTER = Path(sys.executable).with_name("vllm-router")   # the dev extra installs it beside python
CHAT_IGNORED = "include_reasoning,return_hidden_states,separate_reasoning,stream_reasoning"
COMPLETION_IGNORED = "return_hidden_states"
NOT_HONOURED = ("separate_reasoning", "stream_reasoning", "include_reasoning", "return_hidden_states")
PROMPT = "Hi"


@dataclass(frozen=True)
class RouterSpec(CommandSpec):
    """The router's argv; its Prometheus listener (on by default, port 29000) gets a free port of its own
    at each start attempt, so two test runs never share it."""

    def command(self, port: int) -> list[str]:
        return [arg.replace("{metrics_port}", str(free_port())) for arg in super().command(port)]


@pytest.fixture(scope="module")
def servers():
    flags = ["--model", "tiny", "--seed", "7", "--max-model-len", "128", "--engine-mode", "thread",
             "--no-classifier"]
    with ServerProcess(ReferenceServerSpec.from_flags(flags), startup_timeout_s=120) as first, \
            ServerProcess(ReferenceServerSpec.from_flags(flags), startup_timeout_s=120) as second:
        yield first, second


@pytest.fixture(scope="module")
def router(servers):
    assert ROUTER.exists(), f"{ROUTER} is missing: install the dev extra (pip install -c constraints.txt -e '.[dev]')"
    argv = (str(ROUTER), "--host", "127.0.0.1", "--port", "{port}", "--policy", "round_robin",
            "--worker-urls", *(server.base_url for server in servers), "--prometheus-port", "{metrics_port}",
            "--request-timeout-secs", "60", "--log-level", "warning")
    with ServerProcess(RouterSpec(argv, ready_path="/health"), startup_timeout_s=60) as proc:
        yield proc


@pytest.fixture(scope="module")
def client(router):
    return openai.OpenAI(base_url=router.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def finished(server: ServerProcess) -> float:
    text = httpx.get(server.base_url + "/metrics", timeout=10).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("servecap_requests_finished_total{"))


def test_chat_and_completions_through_the_router_streamed_or_not(client, servers):
    before = [finished(server) for server in servers]
    messages = [{"role": "user", "content": "Hello"}]
    chat = client.chat.completions.with_raw_response.create(
        model="tiny", messages=messages, max_tokens=6, extra_body={"ignore_eos": True})
    assert chat.status_code == 200 and chat.headers[HEADER] == CHAT_IGNORED
    body = chat.parse()
    assert body.choices[0].message.role == "assistant" and body.choices[0].finish_reason == "length"
    assert body.usage.completion_tokens == 6 and body.usage.prompt_tokens == 2 + 2 + len("Hello")

    with client.chat.completions.with_streaming_response.create(
            model="tiny", messages=messages, max_tokens=6, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}) as streamed:
        assert streamed.status_code == 200 and streamed.headers[HEADER] == CHAT_IGNORED
        chunks = list(streamed.parse())
    assert chunks[-1].usage.completion_tokens == 6
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content is not None) == 6

    completion = client.completions.with_raw_response.create(
        model="tiny", prompt=PROMPT, max_tokens=5, extra_body={"ignore_eos": True})
    assert completion.status_code == 200 and completion.headers[HEADER] == COMPLETION_IGNORED
    assert completion.parse().usage.completion_tokens == 5

    with client.completions.with_streaming_response.create(
            model="tiny", prompt=PROMPT, max_tokens=5, stream=True, extra_body={"ignore_eos": True}) as streamed:
        assert streamed.status_code == 200 and streamed.headers[HEADER] == COMPLETION_IGNORED
        assert [c.choices[0].finish_reason for c in streamed.parse()][-1] == "length"
    # round robin: both servers answered
    after = [finished(server) for server in servers]
    assert all(a - b >= 1 for a, b in zip(after, before)), (before, after)


def test_fields_the_router_forwards_are_honoured(client, servers):
    greedy = dict(model="tiny", prompt=PROMPT, max_tokens=10, temperature=0)
    reference = client.completions.create(**greedy, extra_body={"ignore_eos": True})
    text = reference.choices[0].text
    stop = text[len(text) // 2]
    cut = text.index(stop)
    # the router forwards no_stop_trim; both servers give the same greedy text (same seed)
    for _ in servers:
        trimmed = client.completions.create(**greedy, stop=[stop], extra_body={"ignore_eos": True})
        kept = client.completions.create(**greedy, stop=[stop], extra_body={"ignore_eos": True, "no_stop_trim": True})
        assert (trimmed.choices[0].text, kept.choices[0].text) == (text[:cut], text[:cut + 1])
        assert trimmed.choices[0].finish_reason == kept.choices[0].finish_reason == "stop"
    # continue_final_message: the assistant's message stays open (no <|end|>, no new <|assistant|>)
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure"}]
    continued = client.chat.completions.create(
        model="tiny", messages=messages, max_tokens=2,
        extra_body={"continue_final_message": True, "add_generation_prompt": False, "ignore_eos": True})
    assert continued.usage.prompt_tokens == 2 + (2 + 1) + (2 + 4) - 2
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="tiny", messages=messages, max_tokens=2,
                                       extra_body={"continue_final_message": True})
    assert "add_generation_prompt" in refused.value.message
    # skip_special_tokens reaches the server (the router sends true unless told): false writes special ids by name
    hello = dict(model="tiny", prompt="Hello", max_tokens=3, temperature=0)
    plain = client.completions.create(**hello, extra_body={"ignore_eos": True, "return_token_ids": True})
    ids = plain.model_dump()["choices"][0]["token_ids"]
    assert any(t >= 256 for t in ids) and all(t < 128 or 256 <= t < 264 for t in ids), \
        f"tiny (seed 7) was expected to write a special id among ASCII after 'Hello': {ids}"
    shown = client.completions.create(**hello, extra_body={"ignore_eos": True, "skip_special_tokens": False})
    assert plain.choices[0].text == "".join(chr(t) for t in ids if t < 256)
    assert shown.choices[0].text == "".join(SPECIAL_TOKENS[t - 256] if t >= 256 else chr(t) for t in ids)


def test_each_server_logs_each_ignored_name_once(client, servers):
    for _ in range(2):   # more requests: still one line per name
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], max_tokens=1)
    for server in servers:
        log = server.output()
        for name in NOT_HONOURED:
            assert log.count(f"request field {name!r} is not used") == 1, (name, server.log_tail(40))
        for name in ("skip_special_tokens", "no_stop_trim", "continue_final_message", "ignore_eos", "echo"):
            assert f"request field {name!r}" not in log

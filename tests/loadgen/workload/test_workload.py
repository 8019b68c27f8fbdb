"""Length distributions, prompt builder, request bytes and chat flags (pure modules)."""

import argparse
import json
import random
import statistics

import pytest

from contract.workload import WorkloadSpec

from loadgen.scenario.chat_config import ChatConfig
from loadgen.scenario.run_settings import RunSettings
from contract.distributions import parse_length_distribution
from loadgen.workload.prompts import PromptBuilder, ascii_text
from loadgen.client.request_bytes import Target, chat_body, completions_body, http_request, session_header_value


def _samples(spec, n=4000, seed=1):
    dist = parse_length_distribution(spec)
    rng = random.Random(seed)
    return [dist.sample(rng) for _ in range(n)]


def test_fixed_and_uniform():
    assert set(_samples("128", 50)) == {128}
    values = _samples("uniform:64:72")
    assert min(values) == 64 and max(values) == 72 and set(values) == set(range(64, 73))


def test_normal_and_lognormal_means():
    normal = _samples("normal:256:32")
    assert abs(statistics.mean(normal) - 256) < 3 and abs(statistics.stdev(normal) - 32) < 3
    lognormal = _samples("lognormal:200:0.5", n=20000)
    assert abs(statistics.mean(lognormal) - 200) < 5  # MEAN is the mean of the lengths
    assert min(_samples("normal:2:50")) >= 1          # clamped


def test_file_lengths(tmp_path):
    path = tmp_path / "lens.txt"
    path.write_text("# lengths\n10\n20\n\n30 # trailing\n")
    assert set(_samples(f"file:{path}", 300)) == {10, 20, 30}
    path.write_text("10\nabc\n")
    with pytest.raises(ValueError, match="line 2"):
        parse_length_distribution(f"file:{path}")
    with pytest.raises(ValueError, match="does not exist"):
        parse_length_distribution(f"file:{tmp_path / 'missing'}")


@pytest.mark.parametrize("spec, message", [
    ("0", "whole number >= 1"), ("1.5", "whole number"), ("uniform:9:3", "below low"),
    ("uniform:3", "two values"), ("zipf:1:2", "unknown distribution"), ("normal:x:1", "not a number"),
    ("normal:10:-1", ">= 0"), ("", "empty"),
])
def test_bad_specs_name_the_problem(spec, message):
    with pytest.raises(ValueError, match=message) as err:
        parse_length_distribution(spec, "--output-tokens")
    assert "--output-tokens" in str(err.value)


def test_same_seed_same_lengths():
    assert _samples("uniform:1:1000", 100, seed=7) == _samples("uniform:1:1000", 100, seed=7)
    assert _samples("uniform:1:1000", 100, seed=7) != _samples("uniform:1:1000", 100, seed=8)


def test_prompt_has_exact_byte_length_and_shared_prefix():
    rng = random.Random(3)
    for n in (1, 2, 7, 100, 1000):
        text = ascii_text(n, rng)
        assert len(text.encode()) == n and text.isascii()
    builder = PromptBuilder(shared_prefix_tokens=50, seed=9)
    a, b = builder.build(40, random.Random(1)), builder.build(40, random.Random(2))
    assert a.system == b.system and len(a.system) == 50
    assert a.user != b.user and len(a.completion_text) == 90
    assert PromptBuilder(0).build(5, random.Random(1)).system is None


def test_request_bytes_are_a_complete_http_request():
    target = Target.from_url("http://127.0.0.1:8123/base/")
    prompt = PromptBuilder(4, 0).build(6, random.Random(0))
    body = chat_body("m", prompt, 32, stream=True, ignore_eos=True)
    raw = http_request("POST", target, "/v1/chat/completions", body, api_key="sk-x", accept="text/event-stream")
    head, payload = raw.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /base/v1/chat/completions HTTP/1.1"
    assert "Host: 127.0.0.1:8123" in lines and "Accept-Encoding: identity" in lines
    assert "Authorization: Bearer sk-x" in lines and f"Content-Length: {len(payload)}" in lines
    sent = json.loads(payload)
    assert sent["messages"][0]["role"] == "system" and sent["max_tokens"] == 32
    assert sent["stream_options"] == {"include_usage": True} and sent["ignore_eos"] is True
    plain = completions_body("m", prompt, 8, stream=False, ignore_eos=False)
    assert "stream_options" not in plain and "ignore_eos" not in plain and plain["prompt"] == prompt.completion_text
    assert "reasoning_tokens" not in sent
    assert chat_body("m", prompt, 32, stream=True, ignore_eos=True, reasoning_tokens=24)["reasoning_tokens"] == 24


def test_a_session_key_goes_in_a_header_of_its_own_and_never_breaks_a_line():
    target = Target.from_url("http://127.0.0.1:8123")
    raw = http_request("POST", target, "/v1/chat/completions", {}, headers={"x-session-id": "w0/c3"})
    assert "x-session-id: w0/c3" in raw.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
    with pytest.raises(ValueError, match="not visible ASCII"):
        http_request("POST", target, "/v1/chat/completions", {}, headers={"x-session-id": "a\r\nx-evil: 1"})
    assert session_header_value("trace-7") == "trace-7"
    for key in ("a\r\nb", "sesión", " padded "):   # what cannot go on the wire as it is: a stable digest
        value = session_header_value(key)
        assert value.startswith("sha1-") and value == session_header_value(key) and value.isascii()
    assert session_header_value("a\nb") != session_header_value("a\nc")


def test_the_session_header_option():
    assert WorkloadSpec().session_header_name == "x-session-id"
    assert WorkloadSpec(session_header="X-User-Id").session_header_name == "X-User-Id"
    off = WorkloadSpec(session_header="none")
    assert off.session_header_name is None and off.locust_argv() == ["--session-header", "none"]
    assert WorkloadSpec().locust_argv() == []   # the default is not spelled out
    for bad in ("", "x session", "x:y", "sesión"):
        with pytest.raises(ValueError, match="--session-header must be an HTTP header name"):
            WorkloadSpec(session_header=bad)
    assert ChatConfig.from_options(argparse.Namespace(session_header="none")).session_header is None
    assert ChatConfig.from_options(argparse.Namespace(session_header="")).session_header == "x-session-id"


@pytest.mark.parametrize("url", ["", "127.0.0.1:80", "ftp://x", "http://:80", "http://h:notaport"])
def test_bad_host_is_named(url):
    with pytest.raises(ValueError, match="host"):
        Target.from_url(url)


def test_chat_config_and_run_settings_from_options_and_errors():
    ns = argparse.Namespace(prompt_tokens="uniform:4:8", output_tokens="16", arrival="gamma:2", rates="5",
                            stream="false", seed="3", records="", level="")
    config, settings = ChatConfig.from_options(ns), RunSettings.from_options(ns)
    assert settings.arrival.kind == "gamma" and settings.arrival.cv == 2.0 and settings.arrival.rate_rps == 5.0
    assert config.stream is False and settings.seed == 3 and settings.records is None
    assert ChatConfig.from_options(None) == ChatConfig() and RunSettings.from_options(None) == RunSettings()
    with pytest.raises(ValueError, match="--rates"):
        RunSettings.from_options(argparse.Namespace(arrival="poisson", rates="0"))
    with pytest.raises(ValueError, match="one open-loop rate"):
        RunSettings.from_options(argparse.Namespace(arrival="poisson", rates="1,2"))
    assert RunSettings.from_options(argparse.Namespace(arrival="poisson")).arrival.kind == "closed"
    with pytest.raises(ValueError, match="--seed"):
        RunSettings.from_options(argparse.Namespace(seed="1.5"))
    with pytest.raises(ValueError, match="--max-inflight"):
        RunSettings(max_inflight=0)
    with pytest.raises(ValueError, match="--request-timeout"):
        RunSettings.from_options(argparse.Namespace(request_timeout="0"))
    with pytest.raises(ValueError, match="--warmup"):
        RunSettings(warmup_s=-1.0)
    with pytest.raises(ValueError, match="api"):
        ChatConfig(WorkloadSpec(api="embeddings"))
    with pytest.raises(ValueError, match="--shared-prefix-tokens"):
        ChatConfig.from_options(argparse.Namespace(shared_prefix_tokens="-2"))
    assert ChatConfig.from_options(argparse.Namespace(reasoning_tokens="256")).reasoning_tokens.spec == "256"
    with pytest.raises(ValueError, match="--reasoning-tokens"):
        ChatConfig.from_options(argparse.Namespace(reasoning_tokens="lots"))
    with pytest.raises(ValueError, match="--reasoning-tokens is for --api chat"):
        ChatConfig.from_options(argparse.Namespace(reasoning_tokens="4", api="completions"))


def test_each_level_draws_requests_of_its_own_so_a_server_cache_cannot_replay_them():
    from loadgen.workload.prompts import PromptBuilder, request_rng

    builder = PromptBuilder(0, seed=0)
    text = lambda level: builder.build(64, request_rng(0, level, 0, 5)).user   # noqa: E731
    assert text("continuous/c=2") == text("continuous/c=2")
    assert text("continuous/c=2") != text("continuous/c=4") != text(None)
    assert request_rng(0, "c=1", 0, 1).random() != request_rng(0, "c=1", 1, 1).random()   # streams differ too

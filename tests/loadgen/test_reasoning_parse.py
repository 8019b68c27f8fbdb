"""A reasoning model's stream, as the load generator reads it: TTFT at the first token of either kind, the
time to the first answer token (TTFA) at the first `delta.content`, and the reasoning tokens counted."""

from __future__ import annotations

import json

import pytest

from loadgen.client.exchange import Exchange, summarize
from loadgen.client.sse import parse_stream


def line(delta: dict | None = None, usage: dict | None = None) -> bytes:
    body = {"id": "chatcmpl-1", "choices": [] if delta is None else [{"index": 0, "delta": delta}]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode()


def exchange(lines: list[tuple[float, bytes]]) -> Exchange:
    return Exchange(t_start=10.0, status_code=200, lines=[*lines, (lines[-1][0], b"data: [DONE]")],
                    t_last=lines[-1][0], complete=True)


# vLLM's shapes: the role first, reasoning chunks (`reasoning_content`, newer servers `reasoning`), then content
STREAM = [(10.1, line({"role": "assistant", "content": ""})), (10.2, line({"reasoning_content": "Let"})),
          (10.3, line({"reasoning": " me"})), (10.4, line({"reasoning_content": ""})),   # a token with no character yet
          (10.6, line({"content": "Yes"})), (10.7, line({"content": "."}))]


def test_ttfa_is_the_first_answer_token_and_reasoning_chunks_are_counted():
    parsed = parse_stream(STREAM)
    assert parsed.reasoning_chunks == 3 and parsed.answer_times == [10.6, 10.7]
    outcome = summarize(exchange(STREAM), stream=True, prompt_tokens_asked=5)
    assert outcome.ttft_s == pytest.approx(0.2) and outcome.ttfa_s == pytest.approx(0.6)
    assert outcome.reasoning_tokens == 3 and outcome.output_tokens == 4 and outcome.answer_tokens == 1


def test_the_servers_usage_count_wins_over_the_chunks():
    usage = {"prompt_tokens": 5, "completion_tokens": 6, "completion_tokens_details": {"reasoning_tokens": 4}}
    outcome = summarize(exchange([*STREAM, (10.8, line(usage=usage))]), stream=True, prompt_tokens_asked=5)
    assert (outcome.output_tokens, outcome.reasoning_tokens, outcome.answer_tokens) == (6, 4, 2)


def test_a_usage_count_below_the_reasoning_streamed_is_not_taken():
    """vLLM 0.32 with DeepSeek-R1's parser, whose template opens <think> in the prompt: three reasoning chunks
    streamed, usage says 0 (it counts only between a generated <think> and </think>)."""
    usage = {"prompt_tokens": 5, "completion_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 0}}
    outcome = summarize(exchange([*STREAM, (10.8, line(usage=usage))]), stream=True, prompt_tokens_asked=5)
    assert (outcome.output_tokens, outcome.reasoning_tokens, outcome.answer_tokens) == (4, 3, 1)


def test_without_reasoning_ttfa_is_ttft():
    plain = [(10.1, line({"role": "assistant", "content": "Hi"})), (10.2, line({"content": "!"}))]
    outcome = summarize(exchange(plain), stream=True, prompt_tokens_asked=5)
    assert outcome.ttfa_s == outcome.ttft_s == pytest.approx(0.1)
    assert outcome.reasoning_tokens == 0 and outcome.answer_tokens == 2


def test_a_stream_that_only_reasons_has_no_ttfa():
    thinking = [(10.1, line({"role": "assistant", "reasoning_content": "hm"})), (10.3, line({"reasoning": "m"}))]
    outcome = summarize(exchange(thinking), stream=True, prompt_tokens_asked=5)
    assert outcome.ttft_s == pytest.approx(0.1) and outcome.ttfa_s is None and outcome.answer_tokens == 0


@pytest.mark.slow
def test_the_locust_token_tab_shows_ttfa_only_for_streams_that_reasoned():
    from loadgen_helpers import run_python

    code = """
from types import SimpleNamespace as O
from loadgen.scenario.token_stats import TokenStats
stats = TokenStats()
stats.log("chat", O(ttft_s=0.1, ttfa_s=0.5, reasoning_tokens=8, e2e_s=1.0, output_tokens=16, itl_s=[0.06]))
stats.log("chat", O(ttft_s=0.1, ttfa_s=0.1, reasoning_tokens=0, e2e_s=1.0, output_tokens=16, itl_s=[0.06]))
print([(row["metric"], row["count"]) for row in stats.rows()])
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[('TTFT', 2), ('TTFA', 1), ('TPOT', 2), ('ITL', 2), ('E2E', 2)]"

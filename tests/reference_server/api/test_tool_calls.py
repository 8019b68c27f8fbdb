"""Tool calls on the wire: the choice rules (in-process), then a live server with the official `openai` client."""

from __future__ import annotations

import json
import random

import openai
import pytest

from reference_server.api.tool_calls import CallStream, choose_call

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}}}}}


def test_tool_choice_decides_whether_and_which():
    rng = random.Random(0)
    assert choose_call([WEATHER], "none", 1.0, rng) is None
    assert choose_call([WEATHER, SEARCH], "auto", 0.0, rng) is None
    call = choose_call([WEATHER, SEARCH], {"type": "function", "function": {"name": "search"}}, 0.0, rng)
    assert call.name == "search" and set(json.loads(call.arguments)) == {"query", "limit"}   # none required: all
    call = choose_call([WEATHER], "required", 0.0, rng)
    arguments = json.loads(call.arguments)
    assert call.name == "get_weather" and set(arguments) == {"city", "unit"} and arguments["unit"] == "celsius"
    assert sum(choose_call([WEATHER], "auto", 0.3, rng) is not None for _ in range(1000)) in range(240, 361)
    with pytest.raises(ValueError, match="tool_choice names 'nope', which is not among the tools offered"):
        choose_call([WEATHER], {"type": "function", "function": {"name": "nope"}}, 0.0, rng)


def test_a_call_streams_its_name_once_then_its_arguments_in_fragments():
    call = choose_call([WEATHER], "required", 0.0, random.Random(1))
    stream = CallStream(call)
    deltas = [stream.advance(3) for _ in range(len(call.text.encode()) // 3 + 1)]
    entries = [d["tool_calls"][0] for d in deltas if d]
    assert entries[0]["id"] == call.id and entries[0]["function"]["name"] == "get_weather"
    assert sum("name" in e.get("function", {}) for e in entries) == 1
    assert "".join(e["function"].get("arguments", "") for e in entries) == call.arguments
    cut = CallStream(call)
    cut.advance(call.arguments_span[0] + 5)
    assert cut.message_calls()[0]["function"]["arguments"] == call.arguments[:5]


@pytest.fixture(scope="module")
def client(reference_server_tiny):
    return openai.OpenAI(base_url=reference_server_tiny.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_the_tool_call_rate_flag_reaches_the_server_and_a_bad_one_exits_2(capsys):
    from reference_server.cli import build_parser, configs_from_args, main

    _, server, _ = configs_from_args(build_parser().parse_args(["--model", "tiny", "--tool-call-rate", "0.25"]))
    assert server.tool_call_rate == 0.25
    with pytest.raises(SystemExit) as exit_:
        main(["--model", "tiny", "--tool-call-rate", "1.5"])
    assert exit_.value.code == 2 and "--tool-call-rate must be in [0, 1], got 1.5" in capsys.readouterr().err


ASK = [{"role": "user", "content": "What is the weather in Oslo?"}]


@pytest.mark.slow
def test_required_answers_with_a_call_streamed_or_not(client):
    answer = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER, SEARCH],
                                            tool_choice="required", max_tokens=300)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        assert set(arguments) == {"city", "unit"}
    text = f'<tool_call>\n{{"name": {json.dumps(call.function.name)}, "arguments": {call.function.arguments}}}\n</tool_call>'
    assert answer.usage.completion_tokens == len(text.encode())   # the Hermes text, a token a byte

    chunks = list(client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER],
                                                 tool_choice={"type": "function", "function": {"name": "get_weather"}},
                                                 max_tokens=300, stream=True))
    calls = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert calls[0].id and calls[0].function.name == "get_weather" and calls[0].type == "function"
    assert set(json.loads("".join(c.function.arguments or "" for c in calls))) == {"city", "unit"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.slow
def test_none_auto_and_a_call_cut_short(client):
    plain = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER], tool_choice="none",
                                           max_tokens=8, extra_body={"ignore_eos": True})
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].finish_reason == "length"
    auto = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER], max_tokens=8,
                                          extra_body={"ignore_eos": True}).choices[0]
    assert auto.message.tool_calls is None and auto.finish_reason == "length"   # auto at the default rate 0
    cut = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER], tool_choice="required",
                                         max_tokens=20)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 20


@pytest.mark.slow
def test_a_tool_result_goes_back_into_the_prompt(client):
    call = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER], tool_choice="required",
                                          max_tokens=300).choices[0].message.tool_calls[0]
    history = [*ASK, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
               {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    before = client.chat.completions.create(model="tiny", messages=ASK, tools=[WEATHER], tool_choice="none",
                                            max_tokens=1).usage.prompt_tokens
    after = client.chat.completions.create(model="tiny", messages=history, tools=[WEATHER], tool_choice="none",
                                           max_tokens=1).usage.prompt_tokens
    call_text = f'<tool_call>\n{json.dumps({"name": "get_weather", "arguments": json.loads(call.function.arguments)})}' \
                '\n</tool_call>'
    response_text = "<tool_response>\nsunny, 21 C\n</tool_response>"
    assert after - before == (2 + len(call_text.encode())) + (2 + len(response_text.encode()))


@pytest.mark.slow
@pytest.mark.parametrize("kwargs, message", [
    ({"tool_choice": "required"}, "tool_choice: no tools were offered"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not among the tools"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "needs tool_call_id"),
])
def test_bad_tool_requests_are_a_400_that_says_why(client, kwargs, message):
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="tiny", **{"messages": ASK, "max_tokens": 4, **kwargs})
    assert message in str(error.value)

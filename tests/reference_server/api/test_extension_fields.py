"""vLLM's and SGLang's request extensions, and fields the server does not know, in-process.

The fields vllm-router adds to every request are accepted; those with a meaning here change the
prompt or the text; unknown ones are ignored, named in the `x-servecap-ignored-fields` header and
logged once per name; a known field with a bad value is still a 400 naming it. The app runs its
engine on a thread (no process); tests/reference_server/api/test_vllm_router.py goes through the
real router.
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from pydantic import ValidationError

from reference_server.api.chat_template import render_chat
from reference_server.api.errors import describe_validation_errors
from reference_server.api.ignored_fields import (HEADER, MAX_NAMES_IN_HEADER, WarnOnce, header_value,
                                                 ignored_fields)
from reference_server.api.openai_schemas import ChatCompletionRequest, CompletionRequest
from reference_server.api.output_text import OutputText
from reference_server.engine.tokenizer import ByteTokenizer
from tiny_app import tiny_app

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EOS, END, ASSISTANT = 257, 262, 261
# what vllm-router 0.1.17 adds to the bodies it forwards (seen on the wire)
ROUTER_COMPLETION_FIELDS = {"echo": False, "no_stop_trim": False, "ignore_eos": False, "skip_special_tokens": True,
                            "return_hidden_states": False}
ROUTER_CHAT_FIELDS = {"logprobs": False, "no_stop_trim": False, "ignore_eos": False, "continue_final_message": False,
                      "skip_special_tokens": True, "separate_reasoning": True, "stream_reasoning": True,
                      "return_hidden_states": False, "include_reasoning": True}
USER = [{"role": "user", "content": "hi"}]


def validation_message(model, body: dict) -> tuple[str, str | None]:
    with pytest.raises(ValidationError) as bad:
        model.model_validate(body)
    return describe_validation_errors(bad.value.errors(include_url=False))


# --- schemas ---------------------------------------------------------------------------------
def test_router_fields_are_accepted_and_only_the_unknown_ones_reported():
    completion = CompletionRequest.model_validate({"prompt": "x", **ROUTER_COMPLETION_FIELDS})
    assert ignored_fields(completion) == ["return_hidden_states"]
    chat = ChatCompletionRequest.model_validate({"messages": USER, **ROUTER_CHAT_FIELDS})
    assert ignored_fields(chat) == ["include_reasoning", "return_hidden_states", "separate_reasoning",
                                    "stream_reasoning"]


def test_nested_unknown_fields_are_reported_as_dotted_paths():
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]},
                         {"role": "assistant", "content": "b", "refusal": None}],
            "stream_options": {"include_usage": True, "x": 1}}
    request = ChatCompletionRequest.model_validate(body)
    assert ignored_fields(request) == ["messages.content.cache_control", "messages.refusal", "stream_options.x"]
    assert request.messages[1].text() == "b" and request.include_usage()


def test_known_fields_stay_strictly_typed_and_named():
    assert validation_message(CompletionRequest, {"prompt": "x", "max_tokens": "3", "bogus": 1}) \
        == ("max_tokens: Input should be a valid integer", "max_tokens")
    for field, value, words in (("skip_special_tokens", "yes", "valid boolean"),
                                ("no_stop_trim", 1, "valid boolean"),
                                ("include_stop_str_in_output", "true", "valid boolean"),
                                ("top_k", 2.5, "valid integer"),
                                ("min_p", "0", "valid number")):
        message, param = validation_message(CompletionRequest, {"prompt": "x", field: value})
        assert param == field and words in message, (field, message)
    message, param = validation_message(ChatCompletionRequest, {"messages": USER, "continue_final_message": "no"})
    assert param == "continue_final_message"


@pytest.mark.parametrize("field, value", [("top_k", 20), ("min_p", 0.1), ("repetition_penalty", 1.2)])
def test_sampling_extras_are_accepted_at_their_no_op_value_only(field, value):
    for no_op in (None, -1, 0) if field == "top_k" else (None, 0) if field == "min_p" else (None, 1, 1.0):
        CompletionRequest.model_validate({"prompt": "x", field: no_op})
    message, _ = validation_message(CompletionRequest, {"prompt": "x", field: value})
    assert f"{field}: only" in message


def test_continue_final_message_needs_add_generation_prompt_false_as_in_vllm():
    base = {"messages": USER, "continue_final_message": True}
    for add in ({}, {"add_generation_prompt": True}, {"add_generation_prompt": None}):
        message, _ = validation_message(ChatCompletionRequest, {**base, **add})
        assert "continue_final_message" in message and "add_generation_prompt" in message
    assert ChatCompletionRequest.model_validate({**base, "add_generation_prompt": False}).continue_final_message
    assert "echo" in validation_message(ChatCompletionRequest, {"messages": USER, "echo": True})[0]


def completion(**fields) -> CompletionRequest:
    return CompletionRequest.model_validate({"prompt": "x", **fields})


def test_keep_stop_is_either_name_and_null_means_the_default():
    assert not completion().keep_stop() and not completion(no_stop_trim=None).keep_stop()
    assert completion(no_stop_trim=True).keep_stop() and completion(include_stop_str_in_output=True).keep_stop()
    assert completion().skips_special_tokens() and completion(skip_special_tokens=None).skips_special_tokens()
    assert not completion(skip_special_tokens=False).skips_special_tokens()


# --- the header and the log ------------------------------------------------------------------
def test_header_names_are_sorted_percent_encoded_cut_and_bounded():
    assert header_value(["a,b é", "x"]) == "a%2Cb%20%C3%A9,x"
    assert header_value(["n" * 100]) == "n" * 64
    names = [f"f{i:03d}" for i in range(MAX_NAMES_IN_HEADER + 3)]
    assert header_value(names).split(",")[-2:] == [names[MAX_NAMES_IN_HEADER - 1], "+3 more"]
    header_value(["\r\n\x00\u2028"]).encode("latin-1")   # always a valid header value


def test_each_name_is_logged_once_and_the_log_is_bounded(caplog):
    warn = WarnOnce(limit=3)
    with caplog.at_level(logging.WARNING, logger="reference_server.api"):
        warn.warn(["a", "b"])
        warn.warn(["a", "b", "c"])
        warn.warn(["d", "e"])
        warn.warn(["f"])
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split("'")[1] for m in messages[:3]] == ["a", "b", "c"]
    assert len(messages) == 4 and "no longer logged" in messages[3]


# --- the text: special tokens, the stop token, stop strings -----------------------------------
def text_of(output: OutputText, *pieces: list[int], stop_token: bool = False) -> str:
    parts = [output.feed(p, ends_on_stop_token=stop_token and i == len(pieces) - 1) for i, p in enumerate(pieces)]
    return "".join(parts) + output.finish()


def test_skip_special_tokens_false_writes_special_tokens_by_name():
    ids = [*b"a", EOS, *"é".encode(), END]
    assert text_of(OutputText(), ids) == "aé"
    assert text_of(OutputText(skip_special_tokens=False), ids) == "a<|eos|>é<|end|>"
    # a special token inside a partial character ends it; ids outside the byte tokenizer have no text
    assert text_of(OutputText(skip_special_tokens=False), [0xC3, EOS, 300, 0xC3, 0xA9]) == "\ufffd<|eos|>é"


def test_the_stop_token_adds_no_text_unless_kept():
    ids = [*b"ab", EOS]
    assert text_of(OutputText(skip_special_tokens=False), ids, stop_token=True) == "ab"
    assert text_of(OutputText(skip_special_tokens=False, keep_stop=True), ids, stop_token=True) == "ab<|eos|>"
    assert text_of(OutputText(), [*b"ab", ord("\n")], stop_token=True) == "ab"   # a byte stop_token_id
    assert text_of(OutputText(keep_stop=True), [*b"ab", ord("\n")], stop_token=True) == "ab\n"


def test_a_stop_string_is_cut_or_kept_across_pieces():
    for keep, expected in ((False, "x "), (True, "x END")):
        output = OutputText(("END",), keep_stop=keep)
        assert text_of(output, list(b"x E"), list(b"N"), list(b"D tail")) == expected and output.stopped


def test_chat_template_switches():
    tok, sp = ByteTokenizer(), ByteTokenizer().special_ids
    messages = [("user", "q"), ("assistant", "Sure")]
    full = render_chat(tok, messages)
    assert full[-2:] == [END, ASSISTANT]
    assert render_chat(tok, messages, add_generation_prompt=False) == full[:-1]
    continued = render_chat(tok, messages, add_generation_prompt=False, continue_final_message=True)
    assert continued == full[:-2] and continued[-5:] == [sp["<|assistant|>"], *b"Sure"]
    with pytest.raises(ValueError, match="add_generation_prompt"):
        render_chat(tok, messages, continue_final_message=True)


# --- over HTTP, in-process ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def http():
    with tiny_app() as client:
        yield client


PROMPT = [10, 20, 30]   # tiny's greedy output for it holds a special id (<|pad|>)


def greedy(http, **fields) -> dict:
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True, **fields}
    response = http.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]


def test_unknown_fields_are_named_in_the_header_streamed_or_not_and_logged_once(http, caplog):
    unknown = f"made_up_{uuid.uuid4().hex[:8]}"
    body = {"messages": USER, "max_tokens": 3, unknown: {"any": "thing"}, **ROUTER_CHAT_FIELDS}
    expected = ",".join(sorted([unknown, "include_reasoning", "return_hidden_states", "separate_reasoning",
                                "stream_reasoning"]))
    with caplog.at_level(logging.WARNING, logger="reference_server.api"):
        plain = http.post("/v1/chat/completions", json=body)
        with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as streamed:
            events = [line for line in streamed.iter_lines() if line.startswith("data: ")]
    assert plain.status_code == streamed.status_code == 200
    assert plain.headers[HEADER] == streamed.headers[HEADER] == expected
    assert plain.json()["usage"]["completion_tokens"] == 3 and events[-1] == "data: [DONE]"
    assert sum(unknown in record.getMessage() for record in caplog.records) == 1
    assert HEADER not in http.post("/v1/completions", json={"prompt": "x", "max_tokens": 1}).headers


def test_any_unknown_name_gives_a_valid_header(http):
    odd = {"a\r\nSet-Cookie: x": 1, "é,ü": 2, "": 3, "k" * 5000: 4, **{f"u{i:02d}": i for i in range(40)}}
    response = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 1, **odd})
    assert response.status_code == 200, response.text
    names = response.headers[HEADER].split(",")
    assert names[:3] == ["", "a%0D%0ASet-Cookie%3A%20x", "k" * 64] and names[-1] == f"+{len(odd) - 32} more"
    assert "set-cookie" not in response.headers


@pytest.mark.parametrize("path, body, param, words", [
    ("/v1/completions", {"prompt": "x", "skip_special_tokens": "yes", "frobnicate": 1}, "skip_special_tokens",
     "valid boolean"),
    ("/v1/completions", {"prompt": "x", "top_k": 40}, None, "top_k: only -1 or 0"),
    ("/v1/chat/completions", {"messages": USER, "continue_final_message": True}, None,
     "continue_final_message: cannot be used with add_generation_prompt"),
    ("/v1/chat/completions", {"messages": USER, "continue_final_message": True, "add_generation_prompt": True},
     None, "send add_generation_prompt: false"),
])
def test_bad_extension_values_get_400_naming_the_field(http, path, body, param, words):
    response = http.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param and words in error["message"]


def test_continue_final_message_leaves_the_last_message_open(http):
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Sure"}]

    def prompt_ids(**fields) -> list[int]:
        body = {"messages": messages, "max_tokens": 1, "return_token_ids": True, **fields}
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        return response.json()["prompt_token_ids"]

    new_turn = prompt_ids()
    assert new_turn[-2:] == [END, ASSISTANT]
    assert prompt_ids(add_generation_prompt=False) == new_turn[:-1]
    assert prompt_ids(add_generation_prompt=False, continue_final_message=True) == new_turn[:-2]


def utf8(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def test_stop_strings_and_stop_tokens_are_trimmed_unless_kept(http):
    reference = greedy(http)
    ids, text = reference["token_ids"], reference["text"]
    assert text == utf8([t for t in ids if t < 256])
    # a stop token: the first id that did not open the output (so generation runs a token or more)
    at = next(i for i, token in enumerate(ids) if i > 0 and token not in ids[:i])
    trimmed = greedy(http, stop_token_ids=[ids[at]])
    assert trimmed["finish_reason"] == "stop" and trimmed["token_ids"] == ids[:at + 1]
    assert trimmed["text"] == utf8(ids[:at])
    for keep in ({"include_stop_str_in_output": True}, {"no_stop_trim": True}):
        assert greedy(http, stop_token_ids=[ids[at]], **keep)["text"] == utf8(ids[:at + 1])
    # a stop string: a character from the second half of the text
    stop = text[len(text) // 2]
    cut = text.index(stop)
    assert greedy(http, stop=[stop])["text"] == text[:cut]
    assert greedy(http, stop=[stop], no_stop_trim=True)["text"] == text[:cut + 1]
    body = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stop": [stop],
            "stream": True, "include_stop_str_in_output": True}
    streamed = http.post("/v1/completions", json=body)
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["text"] for c in chunks) == text[:cut + 1]


def test_skip_special_tokens_false_shows_the_special_tokens_generated(http):
    ids = greedy(http)["token_ids"]
    specials = [t for t in ids if 256 <= t < 264]
    assert specials, f"the greedy output of {PROMPT} on tiny was expected to hold a special id: {ids}"
    names = ByteTokenizer().special_ids
    by_id = {v: k for k, v in names.items()}
    expected, run = "", []
    for token in ids:
        if token in by_id:
            expected += utf8(run) + by_id[token]
            run = []
        else:
            run.append(token)
    expected += utf8(run)
    assert greedy(http, skip_special_tokens=False)["text"] == expected
    assert greedy(http, skip_special_tokens=True)["text"] == utf8([t for t in ids if t < 256])

"""The HTTP layer's pure pieces, in-process: stop strings, chat template, SSE framing,
admission, request schemas, error messages, metrics registries."""

from __future__ import annotations

import json

from engine_core.scheduling.sequence import RequestTimings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from reference_server.api.admission import AdmissionControl
from reference_server.api.chat_template import render_chat
from reference_server.api.errors import APIError, describe_validation_errors
from reference_server.api.generation import Delta
from reference_server.api.openai_responses import ResponseShape
from reference_server.api.openai_schemas import ChatCompletionRequest, CompletionRequest
from reference_server.api.sse import DONE, sse_event
from reference_server.api.stop_strings import StopStringMatcher
from reference_server.runtime.metrics import ServerMetrics
from reference_server.engine.tokenizer import ByteTokenizer


# --- stop strings ---------------------------------------------------------------------
def feed_all(stops: tuple[str, ...], pieces: list[str], keep: bool = False) -> tuple[str, bool]:
    matcher = StopStringMatcher(stops, keep=keep)
    out = "".join(matcher.feed(p) for p in pieces)
    return out + matcher.flush(), matcher.stopped


def test_stop_string_split_across_pieces_is_caught_and_removed():
    assert feed_all(("END",), ["abc E", "N", "D tail"]) == ("abc ", True)


def test_partial_match_is_held_back_then_released():
    matcher = StopStringMatcher(("\n\n",))
    assert matcher.feed("line\n") == "line"   # "\n" might start the stop string
    assert matcher.feed("next") == "\nnext"   # it did not
    assert matcher.flush() == ""


def test_earliest_stop_string_wins():
    assert feed_all(("cd", "b"), ["abcd"]) == ("a", True)


def test_no_stop_strings_passes_text_through():
    assert feed_all((), ["a", "b"]) == ("ab", False)


@given(text=st.text(max_size=40), stop=st.text(min_size=1, max_size=4), cuts=st.lists(st.integers(0, 40)))
def test_stop_matcher_equals_truncating_the_whole_text(text, stop, cuts):
    pieces, last = [], 0
    for cut in sorted(set(c for c in cuts if c <= len(text))):
        pieces.append(text[last:cut])
        last = cut
    pieces.append(text[last:])
    expected = text[: text.index(stop)] if stop in text else text
    assert feed_all((stop,), pieces) == (expected, stop in text)


@given(text=st.text(alphabet="abc", max_size=40), stops=st.lists(st.text(alphabet="abc", min_size=1, max_size=4),
                                                                  min_size=1, max_size=3),
       cuts=st.lists(st.integers(0, 40)))
def test_kept_stop_string_equals_cutting_the_whole_text_after_the_first_to_end(text, stops, cuts):
    pieces, last = [], 0
    for cut in sorted(set(c for c in cuts if c <= len(text))):
        pieces.append(text[last:cut])
        last = cut
    pieces.append(text[last:])
    ends = [text.index(s) + len(s) for s in stops if s in text]
    assert feed_all(tuple(stops), pieces, keep=True) == (text[: min(ends)] if ends else text, bool(ends))


# --- chat template, SSE -----------------------------------------------------------------
def test_chat_template_uses_special_ids_and_counts_exactly():
    tok = ByteTokenizer()
    ids = render_chat(tok, [("system", "S"), ("user", "hé")])
    sp = tok.special_ids
    assert ids == [tok.bos_id, sp["<|system|>"], ord("S"), sp["<|end|>"],
                   sp["<|user|>"], *"hé".encode(), sp["<|end|>"], sp["<|assistant|>"]]
    assert len(ids) == 2 + (2 + 1) + (2 + 3)


def test_chat_template_rejects_unknown_roles():
    with pytest.raises(ValueError, match="tool"):
        render_chat(ByteTokenizer(), [("tool", "x")])


def test_sse_event_is_one_data_line_with_compact_json():
    event = sse_event({"text": "a\nb", "n": 1})
    assert event == b'data: {"text":"a\\nb","n":1}\n\n'
    assert json.loads(event[6:]) == {"text": "a\nb", "n": 1}
    assert DONE == b"data: [DONE]\n\n"


def test_chunks_carry_role_once_and_usage_only_when_asked():
    delta = Delta("hi", 1, None, prompt_tokens=5, completion_tokens=1, cached_prompt_tokens=0)
    plain = ResponseShape(chat=True, model="tiny")
    first, second = plain.chunk(delta), plain.chunk(delta)
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "hi"}
    assert second["choices"][0]["delta"] == {"content": "hi"} and "usage" not in second
    assert first["id"] == second["id"] and first["id"].startswith("chatcmpl-")
    continuous = ResponseShape(chat=False, model="tiny", include_usage=True, continuous_usage=True)
    assert continuous.chunk(delta)["usage"]["total_tokens"] == 6
    final = continuous.usage_chunk(5, 3, 2)
    assert final["choices"] == [] and final["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}
    assert ResponseShape(chat=False, model="tiny", include_usage=True).chunk(delta)["usage"] is None


# --- admission --------------------------------------------------------------------------
def test_admission_turns_away_beyond_max_waiting_and_frees_slots_on_start():
    control = AdmissionControl(max_waiting=2, retry_after_s=3)
    first, second = control.admit(), control.admit()
    with pytest.raises(APIError) as full:
        control.admit()
    assert full.value.status == 429 and full.value.headers["Retry-After"] == "3"
    first.started()
    third = control.admit()                       # a waiting slot freed when `first` started
    assert (control.num_waiting, control.num_in_flight) == (2, 3)
    for ticket in (first, second, third, first):   # release twice: idempotent
        ticket.release()
    assert (control.num_waiting, control.num_in_flight) == (0, 0)


def test_admission_while_draining_is_503():
    control = AdmissionControl()
    control.draining = True
    with pytest.raises(APIError) as refused:
        control.admit()
    assert refused.value.status == 503 and refused.value.code == "draining"


# --- schemas and error messages -----------------------------------------------------------
def test_completion_request_is_strict_and_names_fields():
    with pytest.raises(ValidationError) as bad:
        CompletionRequest.model_validate({"prompt": "x", "max_tokens": "3", "bogus": 1})
    message, param = describe_validation_errors(bad.value.errors(include_url=False))
    assert param == "max_tokens" and message == "max_tokens: Input should be a valid integer"   # bogus: ignored
    assert CompletionRequest.model_validate({"prompt": "x", "bogus": 1}).model_extra == {"bogus": 1}


def test_single_prompt_unwraps_one_element_batches():
    assert CompletionRequest.model_validate({"prompt": ["hi"]}).single_prompt() == "hi"
    assert CompletionRequest.model_validate({"prompt": [[1, 2]]}).single_prompt() == [1, 2]
    assert CompletionRequest.model_validate({"prompt": [1, 2]}).single_prompt() == [1, 2]


def test_null_means_default_and_unsupported_values_are_refused():
    request = CompletionRequest.model_validate({"prompt": "x", "temperature": None, "n": None, "seed": None})
    assert request.temperature is None and request.stop_strings() == ()
    for field, value in (("n", 3), ("presence_penalty", 0.5), ("echo", True), ("logprobs", 2), ("best_of", 2)):
        with pytest.raises(ValidationError, match=field):
            CompletionRequest.model_validate({"prompt": "x", field: value})


def test_chat_request_token_limit_prefers_max_completion_tokens():
    base = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}
    request = ChatCompletionRequest.model_validate({**base, "max_completion_tokens": 7})
    assert request.token_limit() == 7 and request.messages[0].text() == "ab"
    assert ChatCompletionRequest.model_validate(base).token_limit() is None


# --- metrics ------------------------------------------------------------------------------
def stats(**overrides):
    from reference_server.engine.outputs import EngineStats

    fields = dict(num_running=1, num_waiting=2, kv_blocks_used=3, kv_blocks_total=10, last_batch_size=4,
                  last_step_s=0.01, last_forward_s=0.008, total_prefix_cache_hit_tokens=0,
                  total_prefix_cache_queries=0, total_preemptions=0, total_steps=1, last_num_tokens=6)
    return EngineStats(**{**fields, **overrides})


def test_each_metrics_object_has_its_own_registry():
    a, b = ServerMetrics(), ServerMetrics()   # would raise "Duplicated timeseries" on a shared registry
    a.generation_tokens.inc(5)
    assert a.registry.get_sample_value("servecap_generation_tokens_total") == 5
    assert b.registry.get_sample_value("servecap_generation_tokens_total") == 0


def test_observe_step_mirrors_gauges_and_adds_counter_deltas():
    m = ServerMetrics()
    m.observe_step(stats(total_prefix_cache_hit_tokens=32, total_preemptions=1), 4, did_work=True)
    m.observe_step(stats(total_prefix_cache_hit_tokens=48, total_preemptions=1, kv_blocks_used=0), 4, did_work=True)
    value = m.registry.get_sample_value
    assert value("servecap_prefix_cache_hits_total") == 48
    assert value("servecap_preemptions_total") == 1
    assert value("servecap_kv_blocks_used") == 0 and value("servecap_requests_waiting") == 2
    assert value("servecap_batch_size_count") == 2 and value("servecap_batch_size_sum") == 8
    assert value("servecap_generation_tokens_total") == 8
    assert value("servecap_iteration_tokens_count") == 2 and value("servecap_iteration_tokens_sum") == 12
    assert value("servecap_spec_decode_num_drafts_total") == 0   # no speculation: the counters stay at zero


def test_observe_step_adds_speculative_decodings_counter_deltas_per_position():
    m = ServerMetrics()
    m.observe_step(stats(spec_drafts=2, spec_draft_tokens=8, spec_accepted_tokens=3,
                         spec_accepted_per_position=(2, 1, 0, 0)), 5, did_work=True)
    m.observe_step(stats(spec_drafts=5, spec_draft_tokens=20, spec_accepted_tokens=9,
                         spec_accepted_per_position=(5, 3, 1, 0)), 5, did_work=True)
    value = m.registry.get_sample_value
    assert (value("servecap_spec_decode_num_drafts_total"), value("servecap_spec_decode_num_draft_tokens_total"),
            value("servecap_spec_decode_num_accepted_tokens_total")) == (5, 20, 9)
    per_position = [value("servecap_spec_decode_num_accepted_tokens_per_pos_total", {"position": str(i)})
                    for i in range(4)]
    assert per_position == [5, 3, 1, 0]


def test_observe_request_fills_the_phase_histograms_and_skips_requests_without_a_token():
    m = ServerMetrics()
    m.observe_request(RequestTimings(queue_s=0.5, prefill_s=0.02, decode_s=0.3, inference_s=0.32))
    m.observe_request(None)
    value = m.registry.get_sample_value
    assert value("servecap_request_queue_time_seconds_count") == 1
    assert value("servecap_request_queue_time_seconds_bucket", {"le": "0.5"}) == 1
    assert value("servecap_request_queue_time_seconds_bucket", {"le": "0.25"}) == 0
    assert value("servecap_request_inference_time_seconds_sum") == 0.32

"""SSE parsing and an exchange's record fields (TTFT, ITL, usage, statuses)."""

import json

from loadgen.client.exchange import Exchange, summarize
from loadgen.client.sse import DONE, chunk_text, parse_data_line, parse_stream


def _line(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n"


def _chat_stream(times, rid="r-1", usage=True):
    lines = [(times[0], _line({"id": rid, "choices": [{"delta": {"role": "assistant"}}]})), (times[0], b"\n")]
    for t in times[1:]:
        lines.append((t, _line({"id": rid, "choices": [{"delta": {"content": "x"}}]})))
        lines.append((t, b"\n"))
    if usage:
        lines.append((times[-1], _line({"id": rid, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(times) - 1}})))
    lines.append((times[-1], b"data: [DONE]\n"))
    return lines


def test_parse_data_line_kinds():
    assert parse_data_line(b"data: [DONE]\n") is DONE
    assert parse_data_line(b": keep-alive\n") is None and parse_data_line(b"\n") is None
    assert parse_data_line(b"event: x\n") is None
    assert parse_data_line(b"data: {\"a\": 1}\n") == {"a": 1}
    assert parse_data_line(b"data: oops\n") == {"_unparsed": "oops"}


def test_chunk_text_counts_content_not_role_or_usage():
    assert chunk_text({"choices": [{"delta": {"role": "assistant"}}]}) == ""
    assert chunk_text({"choices": [{"delta": {"content": "hi"}}]}) == "hi"
    assert chunk_text({"choices": [{"delta": {"reasoning_content": "hm"}}]}) == "hm"
    assert chunk_text({"choices": [{"text": "t"}]}) == "t"
    assert chunk_text({"choices": [], "usage": {}}) == ""


def test_summarize_stream_timings_and_usage():
    ex = Exchange(t_start=10.0, status_code=200, lines=_chat_stream([10.001, 10.05, 10.06, 10.08]),
                  t_last=10.081, complete=True)
    out = summarize(ex, stream=True, prompt_tokens_asked=5)
    assert out.status == "ok" and out.error is None and out.response_id == "r-1"
    assert abs(out.ttft_s - 0.05) < 1e-9  # first *content* chunk, not the role chunk
    assert [round(g, 6) for g in out.itl_s] == [0.01, 0.02]
    assert abs(out.e2e_s - 0.081) < 1e-9
    assert (out.prompt_tokens, out.output_tokens, out.usage_from) == (7, 3, "server")


def test_summarize_counts_chunks_without_usage():
    ex = Exchange(t_start=0.0, status_code=200, lines=_chat_stream([0.0, 0.1, 0.2], usage=False),
                  t_last=0.2, complete=True)
    out = summarize(ex, stream=True, prompt_tokens_asked=5)
    assert (out.prompt_tokens, out.output_tokens, out.usage_from) == (5, 2, "counted")


def test_summarize_http_error_keeps_openai_message():
    ex = Exchange(t_start=0.0, status_code=503, body=bytearray(b'{"error": {"message": "overloaded"}}'),
                  t_last=0.01, complete=True)
    out = summarize(ex, stream=True, prompt_tokens_asked=5)
    assert out.status == "http_503" and out.error == "overloaded" and out.ttft_s is None


def test_summarize_error_event_inside_stream():
    lines = [(0.1, _line({"id": "r", "error": {"message": "engine died"}})), (0.1, b"data: [DONE]\n")]
    out = summarize(Exchange(t_start=0.0, status_code=200, lines=lines, t_last=0.1, complete=True),
                    stream=True, prompt_tokens_asked=1)
    assert out.status == "error" and out.error == "engine died"


def test_summarize_stopped_timeout_and_cut_short():
    partial = Exchange(t_start=0.0, status_code=200, lines=_chat_stream([0.0, 0.1, 0.2])[:4], t_last=0.1)
    stopped = summarize(partial, stream=True, prompt_tokens_asked=1, stopped=True)
    assert stopped.status == "incomplete" and stopped.ttft_s == 0.1 and stopped.response_id == "r-1"
    assert summarize(partial, stream=True, prompt_tokens_asked=1).status == "error"
    timed_out = Exchange(t_start=0.0, failure="timeout", failure_message="no complete response")
    out = summarize(timed_out, stream=True, prompt_tokens_asked=1)
    assert out.status == "timeout" and out.e2e_s is None


def test_summarize_non_streamed():
    body = json.dumps({"id": "c-9", "choices": [{"message": {"content": "abc"}}],
                       "usage": {"prompt_tokens": 4, "completion_tokens": 3}}).encode()
    out = summarize(Exchange(t_start=1.0, status_code=200, body=bytearray(body), t_last=1.5, complete=True),
                    stream=False, prompt_tokens_asked=4)
    assert out.status == "ok" and out.ttft_s is None and out.itl_s == [] and out.e2e_s == 0.5
    assert (out.response_id, out.output_tokens) == ("c-9", 3)


def test_parse_stream_keeps_first_id():
    parsed = parse_stream(_chat_stream([0, 1], rid="first"))
    assert parsed.response_id == "first" and parsed.saw_done and len(parsed.content_times) == 1


def test_ttft_any_is_the_first_chunk_even_without_text():
    """vLLM holds back a partial UTF-8 character as an empty delta: ttft_s waits for text, ttft_any_s does not;
    a usage-only chunk (no choices) is not a first chunk."""
    lines = [(10.5, _line({"id": "r", "choices": [], "usage": None})),
             (11.0, _line({"id": "r", "choices": [{"text": ""}]})),
             (11.5, _line({"id": "r", "choices": [{"text": "é"}]})),
             (12.0, b"data: [DONE]\n")]
    out = summarize(Exchange(t_start=10.0, status_code=200, lines=lines, t_last=12.0, complete=True),
                    stream=True, prompt_tokens_asked=3)
    assert out.ttft_any_s == 1.0 and out.ttft_s == 1.5
    chat = summarize(Exchange(t_start=0.0, status_code=200, lines=_chat_stream([0.2, 0.3, 0.4]), t_last=0.4,
                              complete=True), stream=True, prompt_tokens_asked=3)
    assert chat.ttft_any_s == 0.2 and abs(chat.ttft_s - 0.3) < 1e-12   # the role-only chunk counts as a chunk
    assert summarize(Exchange(t_start=0.0, status_code=200, body=bytearray(b"{}"), t_last=0.1, complete=True),
                     stream=False, prompt_tokens_asked=3).ttft_any_s is None


def test_a_streamed_tool_call_is_content_with_a_first_token_and_its_fragments():
    def line(delta: dict) -> bytes:
        return b"data: " + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta}]}).encode()

    call = {"index": 0, "id": "chatcmpl-tool-1", "type": "function", "function": {"name": "get_weather"}}
    lines = [(0.1, line({"role": "assistant"})), (0.2, line({})),            # the call's opening tokens: no text yet
             (0.3, line({"tool_calls": [call]})),                             # the name: the first token
             (0.4, line({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]})),
             (0.5, line({"tool_calls": [{"index": 0, "function": {"arguments": '"oslo"}'}}]})),
             (0.6, b"data: [DONE]")]
    parsed = parse_stream(lines)
    assert parsed.content_times == parsed.answer_times == [0.3, 0.4, 0.5]
    assert parsed.first_chunk_time == 0.1 and parsed.text_chars == len('get_weather{"city": "oslo"}')

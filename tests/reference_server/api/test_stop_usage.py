"""A stop string that ends among several tokens delivered at once (`--stream-interval 4`): the text and
`usage.completion_tokens` are what one token at a time gives, counting up to the token that completed it."""

from __future__ import annotations

import openai
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chunked_server():
    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--seed", "7", "--stream-interval", "4"])
    with ServerProcess(spec) as server:
        yield server


def _client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_usage_counts_tokens_up_to_the_stop_string_whatever_the_chunking(reference_server_tiny, chunked_server):
    one_at_a_time, chunked = _client(reference_server_tiny), _client(chunked_server)
    mid_chunk = checked = 0
    for prompt in ("stop test", "hello", "abc"):
        kwargs = dict(model="tiny", prompt=prompt, max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
        reference = one_at_a_time.completions.create(**kwargs).choices[0].text
        assert chunked.completions.create(**kwargs).choices[0].text == reference   # same seed, same greedy text
        # one-character stop strings at their first place in the (random-byte) output
        stops = [ch for i, ch in enumerate(reference) if i and ch != "\ufffd" and reference.index(ch) == i][:4]
        for stop in stops:
            expected = one_at_a_time.completions.create(stop=[stop], **kwargs)
            got = chunked.completions.create(stop=[stop], **kwargs)
            assert got.choices[0].finish_reason == expected.choices[0].finish_reason == "stop"
            assert got.choices[0].text == expected.choices[0].text == reference[: reference.index(stop)]
            assert got.usage.completion_tokens == expected.usage.completion_tokens < 24, (prompt, stop)
            mid_chunk += (expected.usage.completion_tokens - 1) % 4 != 0   # the stop did not end a chunk of 4
            streamed = list(chunked.completions.create(stop=[stop], stream=True,
                                                       stream_options={"include_usage": True}, **kwargs))
            assert "".join(c.choices[0].text for c in streamed if c.choices) == expected.choices[0].text
            assert streamed[-1].usage.completion_tokens == expected.usage.completion_tokens
            checked += 1
    assert checked >= 6 and mid_chunk >= 1   # mid-chunk: the case that used to count the tokens after the stop

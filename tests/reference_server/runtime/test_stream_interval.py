"""--stream-interval N: the first token at once, then chunks of N tokens, the rest with the last step."""

from __future__ import annotations

import pytest

from reference_server.engine.outputs import StepOutput
from reference_server.runtime.engine_loop import ACCEPTED, AbortRequest, AddRequest, EngineLoop
from reference_server.runtime.stream_interval import StreamInterval
from engine_core.scheduling.sampling import SamplingParams


def _out(request_id: str, token: int, finished: bool = False) -> StepOutput:
    return StepOutput(request_id=request_id, new_token_ids=[token], finished=finished,
                      finish_reason="length" if finished else None, num_prompt_tokens=4, num_output_tokens=token,
                      num_cached_prompt_tokens=0)


def _chunks(interval: int, tokens: int) -> list[list[int]]:
    coalesce = StreamInterval(interval)
    sent = [coalesce.take(_out("r", t, finished=t == tokens)) for t in range(1, tokens + 1)]
    return [c.new_token_ids for c in sent if c is not None]


def test_the_first_token_goes_at_once_then_chunks_of_n_and_the_rest_at_the_end():
    assert _chunks(4, 11) == [[1], [2, 3, 4, 5], [6, 7, 8, 9], [10, 11]]
    assert _chunks(4, 5) == [[1], [2, 3, 4, 5]]
    assert _chunks(4, 1) == [[1]]
    assert _chunks(1, 3) == [[1], [2], [3]]


def test_a_chunk_keeps_the_latest_outputs_counts():
    coalesce = StreamInterval(3)
    coalesce.take(_out("r", 1))
    assert coalesce.take(_out("r", 2)) is None and coalesce.take(_out("r", 3)) is None
    chunk = coalesce.take(_out("r", 4))
    assert chunk.new_token_ids == [2, 3, 4] and chunk.num_output_tokens == 4


def test_an_aborted_requests_held_tokens_are_dropped():
    coalesce = StreamInterval(8)
    coalesce.take(_out("r", 1))
    coalesce.take(_out("r", 2))
    coalesce.forget("r")
    assert coalesce.take(_out("r", 3)).new_token_ids == [3]   # as a new request's first token


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_interval_is_refused_with_its_name(bad):
    with pytest.raises(ValueError, match="stream_interval must be an integer >= 1"):
        StreamInterval(bad)


def test_the_engine_loop_publishes_the_same_tokens_in_fewer_chunks():
    """The real engine (an emulated GPU: no forward pass), driven by the real loop."""
    from calculators.engine_profiles import engine_defaults
    from engine_core.gpus import get_gpu
    from reference_server.engine.config import EngineConfig
    from reference_server.engine.engine import Engine

    def run(interval: int) -> list[list[int]]:
        limits = engine_defaults("vllm", get_gpu("h100-sxm")).limit_flags()
        engine = Engine(EngineConfig.from_flags(model="llama-3.1-8b", emulate="h100-sxm", strategy="continuous",
                                                stream_interval=interval, **limits))
        commands = [[AddRequest("a", [5] * 32, SamplingParams(max_tokens=10, temperature=0.0, seed=1)),
                     AddRequest("b", [6] * 32, SamplingParams(max_tokens=10, temperature=0.0, seed=2))],
                    [AbortRequest("b")]]
        chunks: list[list[int]] = []

        def next_commands(_timeout):
            if commands:
                return commands.pop(0)
            return None if not engine.has_unfinished_requests() else []

        def publish(items, _stats, _new_tokens, _did_work):
            chunks.extend(item.new_token_ids for request_id, item in items if item != ACCEPTED and request_id == "a")

        EngineLoop(engine, next_commands, publish, stream_interval=interval).run()
        return chunks

    each, coalesced = run(1), run(4)
    assert [len(c) for c in each] == [1] * 10
    assert [len(c) for c in coalesced] == [1, 4, 4, 1]
    assert sum(coalesced, []) == sum(each, [])

"""The tiny engine the engine tests drive: a small cache and limits, the prompts, and a run to the end
that checks the finish bookkeeping on the way (shared by test_engine.py and test_speculative_engine.py)."""

from __future__ import annotations

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams

GREEDY = dict(temperature=0.0)
PROMPTS = {   # shared prefixes, lengths across block boundaries, one-token prompt
    "a": "The quick brown fox jumps over the lazy dog. " * 2,
    "b": "The quick brown fox jumps over the lazy cat!",
    "c": "x",
    "d": "Once upon a time, in a land far away, there lived a model.",
    "e": "Über naïve café: 世界",
    "f": "The quick brown fox jumps over the lazy dog. The end.",
}
MAX_TOKENS = {"a": 20, "b": 7, "c": 12, "d": 3, "e": 16, "f": 9}


def make_engine(**overrides) -> Engine:
    cfg = dict(model="tiny", block_size=4, batch_size=3, batch_timeout_ms=0.0, max_batch_size=4,
               max_queue_delay_us=0, max_num_seqs=4, max_num_batched_tokens=24)
    cfg.update(overrides)
    return Engine(EngineConfig.from_flags(**cfg))


def run(engine: Engine, requests: dict[str, tuple[list[int], SamplingParams]]) -> dict[str, list[int]]:
    """Add all requests, step until done; tokens per request. Checks the finish bookkeeping."""
    for rid, (ids, params) in requests.items():
        engine.add_request(rid, ids, params)
    out: dict[str, list[int]] = {rid: [] for rid in requests}
    finished: set[str] = set()
    for _ in range(10_000):
        if not engine.has_unfinished_requests():
            break
        for o in engine.step():
            assert o.request_id not in finished
            out.setdefault(o.request_id, []).extend(o.new_token_ids)
            assert o.num_output_tokens == len(out[o.request_id])
            if o.finished:
                finished.add(o.request_id)
                assert o.finish_reason in ("stop", "length")
    assert finished == set(out) >= set(requests)
    assert engine.stats().kv_blocks_used == 0 and engine.stats().num_running == 0
    return out



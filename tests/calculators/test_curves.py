"""calculators.curves: max concurrency vs context and cost vs utilization (used by the capacity notebook)."""

import math

import pytest

from calculators.curves import cost_vs_utilization, max_concurrency_vs_context
from calculators.fit import fit
from calculators.fleet import replica
from engine_core.gpus import get_gpu
from calculators.kv import kv_bytes_for_tokens
from engine_core.models import get_model

LLAMA_8B = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")


def test_concurrency_is_kv_budget_over_request_bytes():
    points = max_concurrency_vs_context(LLAMA_8B, H100, [131072, 8192, 1024], max_num_seqs=10_000)
    # max_num_seqs also sizes the sampler's logits in fit's activation estimate
    budget = fit(LLAMA_8B, H100, max_model_len=131072, max_num_seqs=10_000).kv_cache_bytes
    assert [p.context_tokens for p in points] == [1024, 8192, 131072]
    # Llama-3.1-8B BF16: 131,072 bytes per token, so 1024 tokens are 128 MiB
    assert points[0].kv_bytes_per_request == 131072 * 1024
    for p in points:
        assert p.max_concurrency == budget // kv_bytes_for_tokens(LLAMA_8B, p.context_tokens)
        assert p.kv_limited
    assert points[0].max_concurrency > points[1].max_concurrency > points[2].max_concurrency >= 1


def test_short_contexts_are_capped_by_max_num_seqs():
    short, long_ = max_concurrency_vs_context(LLAMA_8B, H100, [128, 65536], max_num_seqs=256)
    assert (short.max_concurrency, short.kv_limited) == (256, False)
    assert long_.kv_limited and long_.max_concurrency < 256


def test_fp8_kv_holds_twice_the_requests_of_bf16():
    bf16, = max_concurrency_vs_context(LLAMA_8B, H100, [32768], dtype="bf16", kv_dtype="bf16")
    fp8, = max_concurrency_vs_context(LLAMA_8B, H100, [32768], dtype="bf16", kv_dtype="fp8")
    assert fp8.kv_bytes_per_request * 2 == bf16.kv_bytes_per_request
    assert fp8.max_concurrency in (2 * bf16.max_concurrency, 2 * bf16.max_concurrency + 1)


@pytest.mark.parametrize("contexts, message", [([], "at least one"), ([0], "positive integers"),
                                               ([1.5], "positive integers")])
def test_bad_contexts_are_named(contexts, message):
    with pytest.raises(ValueError, match=message):
        max_concurrency_vs_context(LLAMA_8B, H100, contexts)


def test_model_that_does_not_fit_says_so():
    with pytest.raises(ValueError, match="does not fit"):
        max_concurrency_vs_context(get_model("llama-3.1-405b"), get_gpu("l4"), [1024])


def test_cost_falls_as_one_over_utilization_while_p99_rises():
    rep = replica(10.0, 4, tokens_per_s=1000.0)
    points = cost_vs_utilization(rep, 3.6, [0.9, 0.25, 0.5])
    assert [p.utilization for p in points] == [0.25, 0.5, 0.9]
    half = points[1]
    # 1e6 x 3.6 USD/h / (3600 s x 500 tokens/s) = 2.0 USD
    assert half.tokens_per_s == pytest.approx(500.0)
    assert half.rate_rps == pytest.approx(5.0)
    assert half.usd_per_million_tokens == pytest.approx(2.0)
    for p in points:
        assert p.usd_per_million_tokens * p.utilization == pytest.approx(1.0)
    p99s = [p.response_p99_s for p in points]
    assert p99s == sorted(p99s) and p99s[-1] > p99s[0] >= rep.service_time_s
    assert all(math.isfinite(v) for v in p99s)


@pytest.mark.parametrize("utilization", [0.0, 1.0, 1.2, -0.1])
def test_utilization_outside_the_open_interval_is_rejected(utilization):
    with pytest.raises(ValueError, match=r"utilizations must be in \(0, 1\)"):
        cost_vs_utilization(replica(10.0, 4, tokens_per_s=1000.0), 3.6, [utilization])


def test_replica_without_token_rate_cannot_be_priced():
    with pytest.raises(ValueError, match="tokens_per_s"):
        cost_vs_utilization(replica(10.0, 4), 3.6, [0.5])

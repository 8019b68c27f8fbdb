"""Engine profiles: each engine's cited defaults, and what they do to a GPU replica's sizing and schedule."""

import pytest

from calculators.engine_profiles import engine_defaults, engine_profile
from calculators.gpu_engine import gpu_engine
from engine_core.gpus import get_gpu
from engine_core.models import resolve_model

H100, A100 = get_gpu("h100-sxm"), get_gpu("a100-80gb")


def test_each_engine_starts_with_its_own_limits_and_policies():
    vllm, trt = engine_defaults("vllm", H100), engine_defaults("tensorrt-llm", H100)
    assert (vllm.max_num_seqs, vllm.max_num_batched_tokens, vllm.block_size) == (1024, 8192, 16)
    assert (engine_defaults("vllm", A100).max_num_seqs, engine_defaults("vllm", A100).max_num_batched_tokens) == (256, 2048)
    assert vllm.chunked_prefill and vllm.capacity_policy == "max-utilization"
    assert (trt.max_num_seqs, trt.max_num_batched_tokens, trt.block_size) == (2048, 8192, 32)
    assert not trt.chunked_prefill and trt.capacity_policy == "guaranteed-no-evict"
    assert trt.limit_flags() == {"max_num_seqs": 2048, "max_num_batched_tokens": 8192,
                                 "max_prefill_tokens_with_decodes": 0, "chunked_prefill": False,
                                 "capacity_policy": "guaranteed-no-evict"}
    assert engine_profile("sglang") == engine_profile("vllm", "0.11")   # not modelled apart yet: said so
    assert engine_profile("vllm", "main").gpu_memory_utilization == 0.92


def test_an_fp8_checkpoint_that_declares_an_fp8_cache_gets_one_where_the_engine_follows_it():
    trt, old, new = engine_defaults("tensorrt-llm", H100), engine_defaults("vllm", H100, "0.11"), \
        engine_defaults("vllm", H100, "main")
    assert [d.kv_dtype("fp8", declared="FP8") for d in (trt, old, new)] == ["fp8", "bf16", "fp8"]
    assert [d.kv_dtype("fp8") for d in (trt, old, new)] == ["bf16"] * 3      # a catalog model declares none
    assert trt.kv_dtype("int4-g128") == "bf16" and trt.kv_dtype("bf16") == "bf16"


def test_an_fp8_kv_cache_holds_twice_the_sequences():
    arch = resolve_model("llama-3.1-8b")
    bf16_kv = gpu_engine(arch, H100, dtype="fp8", engine="tensorrt-llm")
    fp8_kv = gpu_engine(arch, H100, dtype="fp8", engine="tensorrt-llm", checkpoint_kv_dtype="FP8")
    forced = gpu_engine(arch, H100, dtype="fp8", engine="vllm", engine_version="0.11", kv_dtype="fp8")
    assert (bf16_kv.kv_dtype, fp8_kv.kv_dtype, forced.kv_dtype) == ("bf16", "fp8", "fp8")
    blocks_per_8k_sequence = 8192 // 32
    held = [engine.num_kv_blocks // blocks_per_8k_sequence for engine in (bf16_kv, fp8_kv)]
    assert held[1] in (2 * held[0], 2 * held[0] + 1)
    # and each decode step reads half the KV bytes per token of context
    assert fp8_kv.step_model.per_context_token_s == pytest.approx(bf16_kv.step_model.per_context_token_s / 2)


@pytest.mark.parametrize("engine, version, message", [
    ("vllm", "0.99", "--engine-version '0.99': vllm has 0.11, main"),
    ("tensorrt-llm", "0.11", "--engine-version '0.11': tensorrt-llm has 1.x"),
    ("sglang", "0.5", "--engine-version: sglang has no profile of its own"),
])
def test_an_unknown_version_is_named_with_the_ones_there_are(engine, version, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        engine_profile(engine, version)

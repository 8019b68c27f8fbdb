"""KV cache, weights and the vLLM memory-budget fit, pinned to published values."""

from __future__ import annotations

import pytest

from calculators.fit import default_non_torch_bytes, fit, num_blocks_for_budget
from engine_core.gpus import GIB, get_gpu
from calculators.kv import kv, kv_bytes_for_tokens, kv_bytes_per_token
from engine_core.models import get_model
from calculators.weights import param_counts, weights


def test_published_kv_bytes_per_token():
    assert kv_bytes_per_token(get_model("llama-3.1-8b"), "bf16") == 131_072        # 2*32*8*128*2
    assert kv_bytes_per_token(get_model("opt-13b"), "fp16") == 819_200             # PagedAttention's "800 KB"
    assert kv_bytes_per_token(get_model("llama-3.1-70b"), "bf16") == 327_680
    assert kv_bytes_per_token(get_model("llama-3.1-8b"), "fp8") == 65_536


def test_tensor_parallel_splits_kv_heads_then_replicates_them():
    arch = get_model("llama-3.1-70b")                      # 8 kv heads
    assert kv(arch, "bf16", tp=4).kv_heads_per_gpu == 2
    assert kv(arch, "bf16", tp=4).kv_bytes_per_token == 327_680 // 4
    sixteen = kv(arch, "bf16", tp=16)                      # more GPUs than kv heads: one replica each
    assert sixteen.kv_heads_per_gpu == 1 and sixteen.kv_bytes_per_token == 327_680 // 8
    assert sixteen.kv_bytes_per_token_all_gpus == 2 * 327_680
    with pytest.raises(ValueError, match="tp \\(3\\) must divide num_heads"):
        kv(arch, "bf16", tp=3)


def test_mla_has_no_factor_two_and_sliding_windows_cap_the_request():
    assert kv_bytes_per_token(get_model("deepseek-v2-lite"), "bf16") == 27 * (512 + 64) * 2
    mistral = get_model("mistral-7b")                      # every layer slides over 4096 tokens
    capped = kv_bytes_for_tokens(mistral, 30_000, "bf16", block_size=16)
    assert capped == (4096 // 16 + 1) * 16 * 131_072
    assert kv_bytes_for_tokens(mistral, 1000, "bf16") == 1008 * 131_072


def test_request_rounds_up_to_whole_blocks():
    result = kv(get_model("llama-3.1-8b"), "bf16", prompt_tokens=1000, output_tokens=1, block_size=16)
    assert result.kv_bytes_per_request == 63 * 16 * 131_072   # 1001 tokens -> 63 blocks
    assert result.kv_block_bytes == 16 * 131_072


def test_published_weight_bytes_and_parameter_counts():
    assert weights(get_model("llama-3.1-8b"), "bf16").param_count == 8_030_261_248
    assert weights(get_model("llama-3.1-8b"), "bf16").weight_bytes == pytest.approx(16.06e9, rel=1e-3)
    assert weights(get_model("llama-3.1-70b"), "bf16").param_count == pytest.approx(70.55e9, rel=1e-3)
    assert weights(get_model("mixtral-8x7b"), "bf16").param_count == pytest.approx(46.70e9, rel=1e-3)
    assert param_counts(get_model("mixtral-8x7b")).active_per_token == pytest.approx(12.88e9, rel=1e-3)
    assert weights(get_model("qwen2.5-7b"), "bf16").param_count == pytest.approx(7.62e9, rel=1e-3)
    assert weights(get_model("opt-13b"), "fp16").param_count == pytest.approx(12.85e9, rel=1e-3)
    assert weights(get_model("mistral-7b"), "bf16").param_count == pytest.approx(7.24e9, rel=1e-3)


def test_quantized_weights_count_scales_zero_points_and_16_bit_embeddings():
    arch = get_model("llama-3.1-8b")
    counts = param_counts(arch)
    int4 = weights(arch, "int4-g128")
    assert int4.linear_bytes == round(counts.linear * (4 + 20 / 128) / 8)
    assert int4.small_bytes == counts.small * 2                        # norms stay 16-bit
    kept = weights(arch, "int4-g128", keep_embeddings_16bit=True)
    assert kept.embedding_bytes == (counts.embedding + counts.lm_head) * 2
    assert kept.weight_bytes > int4.weight_bytes
    assert weights(arch, "fp8").weight_bytes == pytest.approx(8.03e9, rel=1e-3)
    assert weights(arch, "fp32").weight_bytes == 4 * counts.total



def test_fp4_microscaling_formats_count_their_block_scales():
    from engine_core.dtypes import parse_dtype, parse_kv_dtype

    assert parse_dtype("mxfp4").bits_per_element == 4 + 8 / 32    # E2M1, one E8M0 scale per 32
    assert parse_dtype("NVFP4").bits_per_element == 4 + 8 / 16    # E2M1, one E4M3 scale per 16
    with pytest.raises(ValueError, match="not a KV cache format"):
        parse_kv_dtype("mxfp4")


@pytest.mark.parametrize("model, params, checkpoint_gib", [
    ("gpt-oss-120b", 116.83e9, 60.8),   # OpenAI's gpt-oss model card, table 1
    ("gpt-oss-20b", 20.91e9, 12.8),
])
def test_gpt_oss_in_mxfp4_weighs_what_its_published_checkpoint_does(model, params, checkpoint_gib):
    arch = get_model(model)
    counts = param_counts(arch)
    mxfp4 = weights(arch, "mxfp4")
    assert mxfp4.param_count == pytest.approx(params, rel=1e-3)
    assert mxfp4.weight_bytes / GIB == pytest.approx(checkpoint_gib, rel=0.02)
    # only the experts are 4-bit: attention and the embeddings stay bf16
    assert mxfp4.linear_bytes == round(counts.routed_experts * 4.25 / 8 + (counts.linear - counts.routed_experts) * 2)
    assert mxfp4.embedding_bytes == (counts.embedding + counts.lm_head) * 2
    assert weights(arch, "bf16").weight_bytes == 2 * counts.total


@pytest.mark.parametrize("model", ["deepseek-v3", "deepseek-r1"])
def test_deepseek_v3_counts_its_published_total_and_active_parameters(model):
    counts = param_counts(get_model(model))   # the technical report: 671B total, 37B activated per token
    assert counts.total == pytest.approx(671e9, rel=2e-3) and counts.active_per_token == pytest.approx(37.5e9, rel=0.02)
    assert kv_bytes_per_token(get_model(model), "bf16") == 61 * (512 + 64) * 2   # MLA: the latent and the rope key


@pytest.mark.parametrize("model, total, active", [
    ("qwen3-235b-a22b", 235e9, 22e9),    # Qwen3 model cards: 235B total, 22B activated
    ("qwen3-30b-a3b", 30.5e9, 3.3e9),    # 30.5B total, 3.3B activated
    ("llama-4-scout", 109e9, 17e9),      # Llama 4 model card (its totals include the vision encoder)
    ("llama-4-maverick", 400e9, 17e9),
    ("llama-3.3-70b", 70.6e9, 70.6e9),   # dense: every parameter is active
])
def test_newer_presets_count_their_published_total_and_active_parameters(model, total, active):
    counts = param_counts(get_model(model))
    assert counts.total == pytest.approx(total, rel=0.02)
    assert counts.active_per_token == pytest.approx(active, rel=0.02)


def test_llama_4_counts_every_layer_as_full_attention_and_maverick_half_its_layers_as_moe():
    scout, maverick = get_model("llama-4-scout"), get_model("llama-4-maverick")
    # chunked attention (3 of 4 layers) is not modelled: full-attention KV, an upper bound past 8192 tokens
    assert kv_bytes_per_token(scout, "bf16") == kv_bytes_per_token(maverick, "bf16") == 2 * 48 * 8 * 128 * 2
    assert scout.num_moe_layers == 48 and maverick.num_moe_layers == 24
    assert param_counts(get_model("llama-3.3-70b")) == param_counts(get_model("llama-3.1-70b"))
    assert kv_bytes_per_token(get_model("qwen3-235b-a22b"), "bf16") == 2 * 94 * 4 * 128 * 2


@pytest.mark.parametrize("gpu, fits", [("h200", False), ("mi325x", True), ("mi355x", True), ("b300", True)])
def test_llama_4_scout_in_bf16_fits_one_gpu_of_256_gb_or_more(gpu, fits):
    result = fit(get_model("llama-4-scout"), get_gpu(gpu), max_model_len=8192)
    assert result.fits == fits
    assert result.weight_bytes == weights(get_model("llama-4-scout"), "bf16").weight_bytes


def test_a_config_that_leaves_attention_unconverted_quantizes_the_experts_only(tmp_path):
    import json

    from engine_core.hf_config import load_hf_config, load_hf_config_dtype

    config = {"model_type": "gpt_oss", "num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 4,
              "vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
              "num_attention_heads": 64, "num_key_value_heads": 8, "sliding_window": 128, "attention_bias": True,
              "tie_word_embeddings": False, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
              "layer_types": ["sliding_attention", "full_attention"] * 12,
              "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
                  "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    arch = load_hf_config(tmp_path)
    assert arch.quantize_experts_only and arch.linear_bias and arch.num_sliding_window_layers == 12
    assert load_hf_config_dtype(tmp_path) == "mxfp4"
    assert weights(arch, "mxfp4").weight_bytes == weights(get_model("gpt-oss-20b"), "mxfp4").weight_bytes
    del config["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert not load_hf_config(tmp_path).quantize_experts_only and load_hf_config_dtype(tmp_path) == "bfloat16"


def test_fit_follows_the_vllm_budget_rule():
    arch, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    result = fit(arch, gpu, dtype="bf16", gpu_memory_utilization=0.9, activation_gib=2.0, non_torch_gib=0.5,
                 block_size=16, max_model_len=8192, prompt_tokens=1000, output_tokens=200)
    budget = int(gpu.usable_bytes * 0.9)
    expected_kv = budget - weights(arch, "bf16").weight_bytes - 2 * GIB - GIB // 2
    assert result.kv_cache_bytes == expected_kv
    assert result.num_blocks == expected_kv // (16 * 131_072)
    assert result.kv_tokens == result.num_blocks * 16
    assert result.max_concurrency == pytest.approx(expected_kv / (8192 * 131_072), abs=1e-3)
    assert result.max_concurrency_at_mean == expected_kv // (1200 * 131_072)   # 1200 = 75 whole blocks
    assert result.fits


def test_fit_defaults_and_tensor_parallel():
    arch, gpu = get_model("llama-3.1-70b"), get_gpu("h100-sxm")
    alone = fit(arch, gpu)
    assert not alone.fits and "does not fit" in alone.reason and alone.num_blocks == 0
    four = fit(arch, gpu, gpus=8, tp=4, max_model_len=8192)
    assert four.fits and four.replicas == 2
    assert four.weight_bytes == weights(arch, "bf16").bytes_per_gpu(4)
    assert four.non_torch_bytes == default_non_torch_bytes(4) == GIB
    assert four.max_concurrency_total == pytest.approx(2 * four.max_concurrency, abs=1e-2)


def test_fit_says_when_one_max_length_request_does_not_fit():
    result = fit(get_model("llama-3.1-8b"), get_gpu("l4"), max_model_len=131072)
    assert not result.fits and "fewer than one request" in result.reason


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization must be in \\(0, 1\\]"),
    ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization must be in \\(0, 1\\]"),
    ({"activation_gib": -1.0}, "activation_gib must be >= 0"),
    ({"gpus": 3, "tp": 2}, "gpus \\(3\\) must be a whole multiple of tp \\(2\\)"),
    ({"max_model_len": 10**7}, "max_model_len .* exceeds"),
    ({"block_size": 0}, "block_size must be a positive integer"),
    ({"prompt_tokens": -5, "output_tokens": 1}, "prompt_tokens must be >= 0"),
    ({"dtype": "bf17"}, "unknown dtype 'bf17'"),
])
def test_fit_rejects_bad_input_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fit(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), **kwargs)


def test_kv_rejects_negative_sizes():
    with pytest.raises(ValueError, match="prompt_tokens must be a non-negative integer"):
        kv(get_model("tiny"), "bf16", prompt_tokens=-1)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        num_blocks_for_budget(get_model("tiny"), 10_000, "bf16", block_size=-16)

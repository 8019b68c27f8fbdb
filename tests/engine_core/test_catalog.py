"""GPU and model catalogs, dtype names, and Hugging Face config.json parsing."""

from __future__ import annotations

import json

import pytest

from engine_core.dtypes import parse_dtype, parse_kv_dtype
from engine_core.gpus import GIB, get_gpu, gpu_names
from engine_core.hf_config import architecture_from_hf_config, load_hf_config
from calculators.kv import kv_bytes_per_token
from engine_core.models import get_model, model_names, resolve_model
from calculators.weights import weights

REQUIRED_GPUS = ["t4", "l4", "a10g", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "cpu"]
REQUIRED_MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b", "mixtral-8x7b", "opt-13b",
                   "tiny", "small"]


def test_catalogs_hold_the_required_entries_with_lowercase_hyphenated_ids():
    assert set(REQUIRED_GPUS) <= set(gpu_names())
    assert set(REQUIRED_MODELS) <= set(model_names())
    for name in gpu_names() + model_names():
        assert name == name.lower() and " " not in name and "_" not in name


def test_lookups_are_case_insensitive_and_unknown_names_list_the_choices():
    assert get_gpu("H100-SXM").name == "h100-sxm"
    assert get_model("Mixtral-8x7B").name == "mixtral-8x7b"
    with pytest.raises(ValueError, match="unknown gpu 'h100'.*h100-sxm"):
        get_gpu("h100")
    with pytest.raises(ValueError, match="unknown model 'llama-9'.*llama-3.1-8b"):
        get_model("llama-9")


def test_gpu_figures_and_prices():
    h100 = get_gpu("h100-sxm")
    assert h100.bandwidth_bytes_per_s == 3.35e12
    assert h100.flops_16bit == 989e12 and h100.flops_fp8 == 1979e12
    assert h100.usable_bytes == 81559 * 2**20 and h100.marketed_bytes == 80 * GIB
    assert h100.usable_bytes < h100.marketed_bytes
    assert h100.hourly_usd > 0
    assert get_gpu("a100-80gb").peak_flops(parse_dtype("fp8")) == 312e12   # no FP8 units: 16-bit peak
    assert get_gpu("h100-sxm", hourly_usd=1.5).hourly_usd == 1.5
    # NVFP4 multiplies in FP4 where the datasheet gives the peak (Blackwell); MXFP4 (weights only) in 16 bits
    assert get_gpu("b200").peak_flops(parse_dtype("nvfp4")) == 9000e12
    assert get_gpu("gb200").peak_flops(parse_dtype("nvfp4")) == 10000e12
    assert get_gpu("b200").peak_flops(parse_dtype("mxfp4")) == 2250e12
    assert h100.peak_flops(parse_dtype("nvfp4")) == 989e12 and h100.flops_fp4 is None


@pytest.mark.parametrize("name, family, usable_mib, bandwidth_gbs, tflops_16bit, interconnect_gbs", [
    ("b300", "blackwell", 275040, 7750, 2250, 900),     # nvidia-smi: 275040 MiB
    ("gb200", "blackwell", 189471, 8000, 2500, 900),    # nvidia-smi: 189471 MiB; NVL72 NVLink 5, one direction
    ("mi325x", "cdna3", 262128, 6000, 1307, 448),       # usable derived: 256 GiB - 16 MiB, as rocm-smi on MI300X
    ("mi355x", "cdna4", 294896, 8000, 2500, 537.6),     # rocm-smi: 309220868096 B
])
def test_newer_gpu_presets(name, family, usable_mib, bandwidth_gbs, tflops_16bit, interconnect_gbs):
    gpu = get_gpu(name)
    assert gpu.family == family and gpu.usable_bytes == usable_mib * 2**20 < gpu.marketed_bytes
    assert gpu.bandwidth_bytes_per_s == bandwidth_gbs * 1e9 and gpu.flops_16bit == tflops_16bit * 1e12
    assert gpu.flops_fp8 == pytest.approx(2 * gpu.flops_16bit, rel=1e-3)     # dense FP8 is twice dense 16-bit
    assert gpu.interconnect_bytes_per_s == interconnect_gbs * 1e9 and gpu.hourly_usd > 0
    assert gpu.peak_flops(parse_dtype("mxfp4")) == gpu.flops_16bit          # no FP4 peak in the catalog
    assert get_gpu("b300").ops_int8 < get_gpu("b300").flops_16bit            # Blackwell Ultra cut INT8


def test_cpu_needs_the_users_numbers():
    with pytest.raises(ValueError, match="memory_gib, bandwidth_gbs, tflops"):
        get_gpu("cpu")
    cpu = get_gpu("cpu", memory_gib=64, bandwidth_gbs=40, tflops=1.0, hourly_usd=0.1)
    assert cpu.usable_bytes == 64 * GIB and cpu.bandwidth_bytes_per_s == 40e9 and cpu.flops_16bit == 1e12
    with pytest.raises(ValueError, match="bandwidth_gbs must be positive"):
        get_gpu("cpu", memory_gib=64, bandwidth_gbs=-1, tflops=1.0)


def test_dtype_names_and_aliases():
    assert parse_dtype("bfloat16").name == "bf16" and parse_dtype("float32").bytes_per_element == 4
    assert parse_dtype("FP8").bytes_per_element == 1
    assert parse_dtype("int4-g128").bits_per_element == pytest.approx(4 + 20 / 128)
    with pytest.raises(ValueError, match="unknown dtype 'int3'"):
        parse_dtype("int3")
    with pytest.raises(ValueError, match="kv_dtype 'int4-g128' is not a KV cache format"):
        parse_kv_dtype("int4-g128")


def _write(tmp_path, config: dict, name: str = "config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


LLAMA_8B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "attention_bias": False, "mlp_bias": False, "_name_or_path": "meta-llama/Llama-3.1-8B",
}
OPT_13B_CONFIG = {  # as published: no num_key_value_heads (MHA), ffn_dim, tied embeddings by default
    "model_type": "opt", "hidden_size": 5120, "ffn_dim": 20480, "num_attention_heads": 40, "num_hidden_layers": 40,
    "vocab_size": 50272, "max_position_embeddings": 2048, "enable_bias": True, "do_layer_norm_before": True,
    "word_embed_proj_dim": 5120, "activation_function": "relu",
}
MIXTRAL_CONFIG = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
    "num_experts_per_tok": 2, "max_position_embeddings": 32768, "rope_theta": 1e6, "tie_word_embeddings": False,
    "sliding_window": None,
}
QWEN_CONFIG = {
    "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
    "rope_theta": 1e6, "tie_word_embeddings": False, "sliding_window": 131072, "use_sliding_window": False,
    "max_window_layers": 28, "rms_norm_eps": 1e-6,
}


def test_config_json_matches_the_catalog_entry(tmp_path):
    for config, name in ((LLAMA_8B_CONFIG, "llama-3.1-8b"), (MIXTRAL_CONFIG, "mixtral-8x7b"),
                         (QWEN_CONFIG, "qwen2.5-7b"), (OPT_13B_CONFIG, "opt-13b")):
        parsed = load_hf_config(_write(tmp_path, config))
        catalog = get_model(name)
        assert weights(parsed, "bf16").param_count == weights(catalog, "bf16").param_count, name
        assert kv_bytes_per_token(parsed, "bf16") == kv_bytes_per_token(catalog, "bf16"), name
    assert load_hf_config(_write(tmp_path, LLAMA_8B_CONFIG)).name == "llama-3.1-8b"


def test_opt_without_kv_heads_is_multi_head_and_ungated(tmp_path):
    arch = resolve_model(str(_write(tmp_path, OPT_13B_CONFIG)))
    assert arch.num_kv_heads == arch.num_heads == 40 and not arch.mlp_gated and arch.tie_embeddings
    assert kv_bytes_per_token(arch, "fp16") == 819_200


def test_config_directory_and_mla_and_sliding_window_keys(tmp_path):
    (tmp_path / "ds").mkdir()
    _write(tmp_path / "ds", {"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
                             "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_hidden_layers": 27,
                             "num_key_value_heads": 16, "vocab_size": 102400, "kv_lora_rank": 512,
                             "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                             "n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2,
                             "first_k_dense_replace": 1, "max_position_embeddings": 163840,
                             "tie_word_embeddings": False})
    arch = load_hf_config(tmp_path / "ds")
    assert arch.uses_mla and kv_bytes_per_token(arch, "bf16") == 27 * (512 + 64) * 2
    assert weights(arch, "bf16").param_count == weights(get_model("deepseek-v2-lite"), "bf16").param_count
    gemma_like = architecture_from_hf_config({**LLAMA_8B_CONFIG, "sliding_window": 4096,
                                              "layer_types": ["sliding_attention", "full_attention"] * 16})
    assert gemma_like.sliding_window == 4096 and gemma_like.num_sliding_window_layers == 16


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"hidden_size": 4096}), "missing num_layers"),
    (json.dumps({**LLAMA_8B_CONFIG, "num_hidden_layers": -2}), "num_hidden_layers must be a positive integer"),
    (json.dumps({**LLAMA_8B_CONFIG, "num_key_value_heads": 5}), "multiple of num_kv_heads"),
])
def test_malformed_config_json_names_the_problem(tmp_path, content, message):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_hf_config(path)


def test_missing_config_path():
    with pytest.raises(ValueError, match="does not exist"):
        resolve_model("/nonexistent/config.json")

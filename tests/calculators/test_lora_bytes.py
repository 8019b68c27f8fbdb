"""LoRA adapters' bytes and the slots that come out of the KV room (`servecap calc fit --max-loras`)."""

from __future__ import annotations

import pytest

from calculators.fit import fit
from engine_core.gpus import get_gpu
from calculators.lora import adapter_bytes, slot_bytes
from engine_core.models import get_model


def test_an_adapter_holds_rank_by_in_plus_out_on_every_target_of_every_layer():
    arch = get_model("llama-3.1-8b")   # 32 layers, 4096 wide, 8 KV heads of 128, MLP 14336
    per_layer = 64 * ((4096 + 4096) + 2 * (4096 + 1024) + (4096 + 4096) + 3 * (4096 + 14336))
    assert adapter_bytes(arch, 64) == 32 * per_layer * 2
    assert adapter_bytes(arch, 64, targets=("q_proj", "v_proj")) == 32 * 64 * (8192 + 5120) * 2
    assert adapter_bytes(arch, 8, "fp32") == 2 * adapter_bytes(arch, 8)
    with pytest.raises(ValueError, match="LoRA target"):
        adapter_bytes(arch, 8, targets=("lm_head",))


def test_the_slots_come_out_of_the_kv_room_and_split_with_tensor_parallelism():
    arch, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    plain = fit(arch, gpu)
    lora = fit(arch, gpu, max_loras=8, max_lora_rank=64)
    assert lora.lora_bytes == 8 * adapter_bytes(arch, 64) and plain.lora_bytes == 0
    assert plain.kv_cache_bytes - lora.kv_cache_bytes == lora.lora_bytes
    assert slot_bytes(arch, 8, 64, "fp8") == slot_bytes(arch, 8, 64, "bf16")   # quantized weights: bf16 adapters
    assert slot_bytes(arch, 8, 64, tp=2) == slot_bytes(arch, 8, 64) // 2
    with pytest.raises(ValueError, match="max_loras must be a positive integer"):
        slot_bytes(arch, 0, 16)

"""LoRA slots as the scheduler sees them: vLLM's admission rule, LRU residency, and the time passed over."""

from __future__ import annotations

import pytest

from engine_core.scheduling.block_manager import BlockManager
from engine_core.scheduling.lora_slots import LoraSlots
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.strategies import make_scheduler
from engine_core.scheduling.strategies.continuous import ContinuousLimits


def _seq(rid: str, lora: str | None, now: float = 0.0) -> Sequence:
    return Sequence(rid, [1, 2, 3, 4], SamplingParams(max_tokens=4), arrival_time=now, lora=lora)


def test_admission_allows_a_running_adapter_or_a_free_slot_and_base_always():
    slots = LoraSlots(2)
    running = [_seq("1", "a"), _seq("2", "b"), _seq("3", None)]
    assert slots.admits("a", running) and slots.admits(None, running)
    assert not slots.admits("c", running)
    assert slots.admits("c", running[:1])


def test_residency_is_least_recently_used_and_counts_loads():
    slots = LoraSlots(2)
    first = slots.activate(["a", None, "b", "a"])
    assert first.loaded == ("a", "b") and sorted(first.slot_of.values()) == [0, 1]
    assert slots.activate(["a"]).loaded == ()          # resident: no load, a is now most recent
    third = slots.activate(["c"])                        # evicts b, used longest ago
    assert third.loaded == ("c",) and third.slot_of["c"] == first.slot_of["b"]
    assert slots.resident == ("a", "c") and slots.num_loads == 3
    fourth = slots.activate(["b", "c"])                  # a is not needed: its slot goes to b
    assert fourth.slot_of["b"] == first.slot_of["a"] and fourth.loaded == ("b",)
    with pytest.raises(ValueError, match="needs 3 adapters but there are 2 slots"):
        slots.activate(["a", "b", "c"])


def test_the_scheduler_passes_over_a_request_without_a_slot_keeps_its_place_and_times_the_wait():
    scheduler = make_scheduler(ContinuousLimits(max_num_seqs=8, max_num_batched_tokens=64), BlockManager(64, 4))
    scheduler.lora_slots = LoraSlots(1)
    for seq in (_seq("a1", "a"), _seq("b1", "b"), _seq("base", None), _seq("a2", "a"), _seq("b2", "b")):
        scheduler.add(seq)
    batch = scheduler.schedule(now=1.0)
    assert [s.request_id for s in batch.seqs] == ["a1", "base", "a2"]     # b waits; those behind it run
    assert [s.request_id for s in scheduler.waiting] == ["b1", "b2"]       # in their order, at the front
    for seq in list(scheduler.running):
        if seq.lora == "a":
            scheduler.finish(seq)
    batch = scheduler.schedule(now=3.5)
    waited = {s.request_id: s.lora_wait_s for s in batch.seqs}
    assert {"b1", "b2"} <= set(waited) and not scheduler.waiting
    assert waited["b1"] == waited["b2"] == pytest.approx(2.5)
    assert all(s.lora_blocked_since is None for s in batch.seqs)

"""LoRA adapter slots, as the scheduler sees them: names and counts, no tensors.

    slots = LoraSlots(max_loras)
    slots.admits(lora, running)          may a sequence of adapter `lora` join `running` (vLLM's rule)
    slots.activate(adapters) -> Activation   which slot holds each adapter this step; which were loaded

At most `max_loras` distinct adapters run at once (vLLM's `--max-loras`: the GPU holds that many
adapter slots). A waiting request whose adapter is not among the running ones, when they already fill
every slot, is passed over; requests behind it may still be admitted (vLLM's scheduler does the same),
and it keeps its place at the front. Base-model requests (no adapter) never wait for a slot.

Residency is least-recently-used: an adapter stays in its slot after its last sequence leaves, so the
next request for it finds it loaded; a step that needs an adapter not resident loads it into a free
slot, or the slot of the adapter used longest ago that this step does not need. The model runner copies
the weights (`reference_server.engine.lora`); the simulator charges the load's time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from contract.checks import positive_int


@dataclass(frozen=True)
class Activation:
    slot_of: dict[str, int]   # adapter -> its slot this step
    loaded: tuple[str, ...]   # adapters copied into a slot for this step (cold)


class LoraSlots:
    def __init__(self, max_loras: int) -> None:
        positive_int("max_loras", max_loras)
        self.max_loras = max_loras
        self._resident: OrderedDict[str, int] = OrderedDict()   # adapter -> slot, least recently used first
        self.num_loads = 0

    def admits(self, lora: str | None, running: Iterable) -> bool:
        """True unless `lora` is new to `running` (sequences with a `.lora`) and they fill every slot."""
        if lora is None:
            return True
        active = {seq.lora for seq in running if seq.lora is not None}
        return lora in active or len(active) < self.max_loras

    def activate(self, adapters: Iterable[str | None]) -> Activation:
        """Slots for this step's adapters (None: base rows), loading the ones not resident."""
        needed = list(dict.fromkeys(a for a in adapters if a is not None))
        if len(needed) > self.max_loras:
            raise ValueError(f"a step needs {len(needed)} adapters but there are {self.max_loras} slots")
        loaded = []
        for name in needed:
            if name in self._resident:
                self._resident.move_to_end(name)
                continue
            used = set(self._resident.values())
            free = next((slot for slot in range(self.max_loras) if slot not in used), None)
            if free is None:
                victim = next(resident for resident in self._resident if resident not in needed)
                free = self._resident.pop(victim)
            self._resident[name] = free
            loaded.append(name)
        self.num_loads += len(loaded)
        return Activation({name: self._resident[name] for name in needed}, tuple(loaded))

    @property
    def resident(self) -> tuple[str, ...]:
        """The adapters in a slot, least recently used first."""
        return tuple(self._resident)

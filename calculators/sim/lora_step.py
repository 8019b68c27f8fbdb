"""What LoRA adapters add to a step's time, and the slots requests wait for, for a step model.

    extra_s = per_adapter_s x distinct adapters in the step           (each adapter's products: its calls,
            + per_lora_token_s x tokens of sequences with an adapter    and its weights read once a step)
            + load_s x adapters copied into a slot for the step         (a cold adapter, from host memory)

The slots are the engine's own (`engine_core.scheduling.lora_slots`): the simulator hands its
scheduler the same `LoraSlots`, so a request waits for a slot, and a step loads its cold adapters, as the
engine's would. Fit the three costs on an engine's step record (`fit_lora_step`): the loads' time is
measured apart (`lora_load_s`), the other two by non-negative least squares, beside the base step model's
own columns so that neither takes the other's cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize

from contract.checks import non_negative_number, positive_int
from engine_core.scheduling.batch_shape import BatchShape


@dataclass(frozen=True)
class LoraServing:
    max_loras: int
    per_adapter_s: float = 0.0
    per_lora_token_s: float = 0.0
    load_s: float = 0.0
    adapters: tuple[str, ...] = ()   # the names the engine serves as adapters (others are the base model)

    def __post_init__(self) -> None:
        positive_int("max_loras", self.max_loras)
        object.__setattr__(self, "adapters", tuple(str(a) for a in self.adapters))
        for name in ("per_adapter_s", "per_lora_token_s", "load_s"):
            non_negative_number(name, getattr(self, name))

    def extra_s(self, shape: BatchShape, loaded: int) -> float:
        return (self.per_adapter_s * shape.lora_adapters + self.per_lora_token_s * shape.lora_tokens
                + self.load_s * loaded)


@dataclass(frozen=True)
class LoraStepFit:
    serving: LoraServing
    lora_s: np.ndarray   # [S] each step's LoRA time as fitted (loads included): take it off before the base fit


def fit_lora_step(max_loras: int, batch: Sequence[float], prefill_tokens: Sequence[float],
                  context_tokens: Sequence[float], step_s: Sequence[float], adapters: Sequence[float],
                  lora_tokens: Sequence[float], loads: Sequence[float], load_s: Sequence[float]) -> LoraStepFit:
    """The three LoRA costs from measured steps ([S] each, the step record's columns)."""
    columns = [np.asarray(v, dtype=float) for v in (batch, prefill_tokens, context_tokens, step_s, adapters,
                                                    lora_tokens, loads, load_s)]
    if len({len(c) for c in columns}) != 1 or len(columns[0]) < 3:
        raise ValueError("the LoRA fit needs at least 3 steps, every column as long")
    batch, prefill, context, step, adapters, tokens, loads, load_s = columns
    per_load = float(load_s.sum() / loads.sum()) if loads.sum() > 0 else 0.0
    own = step - load_s
    design = np.column_stack([np.ones_like(batch), batch, prefill, context, adapters, tokens])
    coef, _ = optimize.nnls(design, own)
    serving = LoraServing(max_loras, per_adapter_s=float(coef[4]), per_lora_token_s=float(coef[5]), load_s=per_load)
    return LoraStepFit(serving, coef[4] * adapters + coef[5] * tokens + load_s)

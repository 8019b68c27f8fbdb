"""A LoRA run's calibration: what its adapters cost a step, taken off before the base step model's fit,
and the mix of models its requests asked for (`calibrate_lora`, called by `reports.predict.calibration`).

`sources` gains a line saying what was fitted, or why it was not: a run whose records name no model
keeps the adapters' time in its step model, and one with too few recorded steps gets slots without costs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from calculators.sim.lora_step import fit_lora_step
from calculators.sim.simulate import SimServer
from contract.model_mix import BASE, ModelMix, mix_of
from reports.predict.evidence import LevelSample


def calibrate_lora(server: SimServer, stepped: list[LevelSample], samples: list[LevelSample], sources: dict,
                   min_steps: int) -> tuple[SimServer, list[LevelSample], ModelMix | None]:
    """A server with LoRA slots: the adapters' step costs fitted on the steps (`fit_lora_step`) and taken off
    their durations, so the base step model is fitted on what is left; and the mix of models the requests
    sent measured (names the engine does not serve as adapters are the base model). Unchanged without LoRA."""
    if server.lora is None:
        return server, stepped, None
    names = [s.models for s in samples if s.models is not None]
    mix = None
    if names:   # measured, not run.json's --model-mix: docs/results.md (2026-12-05) has the two compared
        counts = pd.Series(np.concatenate(names)).value_counts()
        adapters = set(server.lora.adapters)
        weights: dict[str, int] = {}
        for name, count in counts.items():
            key = name if name in adapters else BASE
            weights[key] = weights.get(key, 0) + int(count)
        mix = mix_of(weights)
        sources["model_mix"] = (f"the models the measured requests asked for: {len(weights)} "
                                f"({', '.join(list(weights)[:3])}{', ...' if len(weights) > 3 else ''})")
    if mix is None:   # nothing says which request ran with which adapter: keep their time in the step model
        sources["lora"] = ("the records name no model (a run without --model-mix): the adapters' time stays in the "
                           "step model and their slots are not simulated")
        return replace(server, lora=None), stepped, None
    rows = [s.steps for s in stepped if s.steps is not None and s.steps.lora is not None]
    if sum(len(r.batch) for r in rows) < min_steps:
        sources["lora"] = (f"fewer than {min_steps} recorded steps with adapters: the slots are simulated, their "
                           "step costs are not")
        return server, stepped, mix
    cat = lambda name: np.concatenate([getattr(r, name) for r in rows])   # noqa: E731
    lora = np.concatenate([r.lora for r in rows])
    fit = fit_lora_step(server.lora.max_loras, cat("batch"), cat("prefill_tokens"), cat("context_tokens"),
                        cat("duration_s"), lora[:, 0], lora[:, 1], lora[:, 2], lora[:, 3])
    serving = replace(fit.serving, adapters=server.lora.adapters)
    sources["lora"] = (f"engine_steps.csv's LoRA columns: {serving.per_adapter_s * 1e3:.3g} ms per adapter in a "
                       f"step, {serving.per_lora_token_s * 1e6:.3g} us per adapter token, "
                       f"{serving.load_s * 1e3:.3g} ms per cold load ({server.lora.max_loras} slots)")
    adjusted = []
    for s in stepped:
        if s.steps is None or s.steps.lora is None:
            adjusted.append(s)
            continue
        own = s.steps.lora
        lora_s = serving.per_adapter_s * own[:, 0] + serving.per_lora_token_s * own[:, 1] + own[:, 3]
        adjusted.append(replace(s, steps=replace(s.steps, duration_s=np.maximum(s.steps.duration_s - lora_s,
                                                                                 1e-6))))
    return replace(server, lora=serving), adjusted, mix

"""Fit step-time models to measured engine steps.

Three fits, from the simplest to the one the simulator uses:
  ``fit_step_time``:      step_s = base_s + per_seq_s x batch            (ordinary least squares,
                          scipy.stats.linregress)
  ``fit_step_model``:     step_s = base_s + per_seq_s x batch + per_prefill_token_s x prefill tokens
                                   + per_context_token_s x context tokens (non-negative least squares,
                          scipy.optimize.nnls), the ``StepTimeModel`` the simulator runs on
  ``calibrate_roofline``: the roofline's bandwidth and compute efficiencies and a fixed overhead
                          (least squares on log relative error, ``calculators.calibrate_profile``;
                          ``calibrate_profile`` there fits every efficiency and cost, per TP degree)
Inputs are plain sequences (one entry per engine step); the caller measures or reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, stats

from calculators.architecture import ModelArchitecture
from calculators.calibrate_profile import MeasuredStep, fit_efficiencies
from calculators.efficiency import Efficiencies
from calculators.gpus import GpuSpec
from calculators.sim.step_model import StepTimeModel

# where calibrate_roofline starts: the roofline's defaults before the fit on published points
PREVIOUS_DEFAULTS = Efficiencies(weight_bandwidth=0.8, kv_bandwidth=0.8, prefill_compute=0.5, decode_compute=0.5)


@dataclass(frozen=True)
class StepTimeFit:
    """step_s = base_s + per_seq_s x batch, with the fit's r^2 over ``samples`` steps."""

    base_s: float
    per_seq_s: float
    r_squared: float
    samples: int

    def predict(self, batch: float) -> float:
        return self.base_s + self.per_seq_s * batch

    def as_step_model(self) -> StepTimeModel:
        return StepTimeModel(base_s=max(self.base_s, 0.0), per_seq_s=max(self.per_seq_s, 0.0))


def _arrays(field_values: dict[str, Sequence[float]]) -> dict[str, np.ndarray]:
    arrays = {name: np.asarray(values, dtype=float) for name, values in field_values.items()}
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"measurements must have equal lengths, got {lengths}")
    for name, a in arrays.items():
        if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"{name} must be a flat sequence of finite non-negative numbers")
    return arrays


def fit_step_time(batch_sizes: Sequence[float], step_seconds: Sequence[float]) -> StepTimeFit:
    """Least squares line through (batch, step time); needs two distinct batch sizes."""
    a = _arrays({"batch_sizes": batch_sizes, "step_seconds": step_seconds})
    if len(np.unique(a["batch_sizes"])) < 2:
        raise ValueError("batch_sizes must hold at least two distinct values to fit a line")
    line = stats.linregress(a["batch_sizes"], a["step_seconds"])
    return StepTimeFit(float(line.intercept), float(line.slope), float(line.rvalue ** 2), len(a["batch_sizes"]))


def fit_step_model(batch_sizes: Sequence[float], step_seconds: Sequence[float],
                   prefill_tokens: Sequence[float] | None = None,
                   context_tokens: Sequence[float] | None = None, *, jitter_points: int = 0) -> StepTimeModel:
    """Non-negative least squares for the simulator's ``StepTimeModel``; omitted columns fit as zero.

    ``prefill_tokens``: prompt tokens processed in each step; ``context_tokens``: sum of the
    batch's context lengths in each step (attention reads). ``jitter_points`` > 0 keeps that many
    evenly spaced quantiles of measured / modelled step time as the model's ``jitter``.
    """
    columns = {"batch_sizes": batch_sizes, "step_seconds": step_seconds}
    if prefill_tokens is not None:
        columns["prefill_tokens"] = prefill_tokens
    if context_tokens is not None:
        columns["context_tokens"] = context_tokens
    a = _arrays(columns)
    if len(a["step_seconds"]) < 3:
        raise ValueError("step_seconds needs at least 3 measured steps")
    n = len(a["step_seconds"])
    design = np.column_stack([
        np.ones(n), a["batch_sizes"],
        a.get("prefill_tokens", np.zeros(n)), a.get("context_tokens", np.zeros(n)),
    ])
    coef, _ = optimize.nnls(design, a["step_seconds"])
    jitter: tuple[float, ...] = ()
    if jitter_points > 0:
        modelled = design @ coef
        ratios = a["step_seconds"][modelled > 0] / modelled[modelled > 0]
        ratios = ratios[ratios > 0]
        if len(ratios):
            jitter = tuple(float(r) for r in np.quantile(ratios, np.linspace(0, 1, min(jitter_points, len(ratios)))))
    return StepTimeModel(base_s=float(coef[0]), per_seq_s=float(coef[1]), per_prefill_token_s=float(coef[2]),
                         per_context_token_s=float(coef[3]), jitter=jitter)


@dataclass(frozen=True)
class RooflineCalibration:
    bandwidth_efficiency: float
    compute_efficiency: float
    overhead_s: float
    rms_relative_error: float
    samples: int


def calibrate_roofline(arch: ModelArchitecture, gpu: GpuSpec, batch_sizes: Sequence[int], contexts: Sequence[int],
                       step_seconds: Sequence[float], *, dtype: str = "bf16", tp: int = 1) -> RooflineCalibration:
    """One bandwidth efficiency (weights and KV), one compute efficiency and a fixed per-step overhead that
    make the roofline match measured decode steps at one TP degree (``calibrate_profile.fit_efficiencies``
    with those three free; for every parameter, per TP degree, use ``calibrate_profile.calibrate_profile``)."""
    a = _arrays({"batch_sizes": batch_sizes, "contexts": contexts, "step_seconds": step_seconds})
    if len(a["step_seconds"]) < 3 or np.any(a["step_seconds"] <= 0):
        raise ValueError("step_seconds needs at least 3 positive measured steps")
    steps = [MeasuredStep(step_s=float(s), batch=int(b), context=float(c), tp=tp)
             for b, c, s in zip(a["batch_sizes"], a["contexts"], a["step_seconds"])]
    fit = fit_efficiencies(arch, gpu, steps, start=PREVIOUS_DEFAULTS, dtype=dtype, tie_kv=True,
                           free=("weight_bandwidth", "decode_compute", "decode_overhead_s"))
    eff = fit.efficiencies
    return RooflineCalibration(eff.weight_bandwidth, eff.decode_compute, eff.decode_overhead_s,
                               fit.rms_relative_error, fit.samples)

"""Fit the simulator's inputs to a measured run: step-time models, and the front end's delays.

Fits, from the simplest to the ones the simulator uses:
  ``fit_step_time``:      step_s = base_s + per_seq_s x batch            (ordinary least squares,
                          scipy.stats.linregress)
  ``fit_step_model``:     step_s = base_s + per_seq_s x batch + per_prefill_token_s x prefill tokens
                                   + per_context_token_s x context tokens (non-negative least squares,
                          scipy.optimize.nnls), the ``StepTimeModel`` the simulator runs on
  ``fit_front_end``:      per-request front-end delays, client minus engine times (``calculators.sim.front_end``)
  ``calibrate_roofline``: the roofline's bandwidth and compute efficiencies and a fixed overhead
                          (least squares on log relative error, ``calculators.roofline_fit.profile``;
                          ``calibrate_profile`` there fits every efficiency and cost, per TP degree)
Inputs are plain sequences (one entry per engine step or request); the caller measures or reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from scipy import optimize, stats

from engine_core.architecture import ModelArchitecture
from calculators.roofline_fit.profile import MeasuredStep, fit_efficiencies
from calculators.efficiency import Efficiencies
from engine_core.gpus import GpuSpec
from calculators.sim.front_end import FrontEnd
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


MAX_JITTER = 1 << 16          # residual factors a model keeps (the simulator's stream is that long)
SPIKE_RATIO = (0.5, 2.0)      # robust refit: steps this far off the first fit do not shape the line


def fit_step_model(batch_sizes: Sequence[float], step_seconds: Sequence[float],
                   prefill_tokens: Sequence[float] | None = None,
                   context_tokens: Sequence[float] | None = None, *, jitter_points: int = 0,
                   jitter_block: int = 0, robust: bool = False, batch_table: bool = False) -> StepTimeModel:
    """Non-negative least squares for the simulator's ``StepTimeModel``; omitted columns fit as zero.

    ``prefill_tokens``: prompt tokens processed in each step; ``context_tokens``: sum of the
    batch's context lengths in each step (attention reads). The residuals are factors
    measured / modelled step time:
      ``jitter_points`` > 0 keeps that many evenly spaced quantiles of them as the model's ``jitter``;
      ``jitter_block`` > 0 keeps them in the order measured (at most MAX_JITTER, as evenly spaced
      runs) for the simulator's block bootstrap with runs of that length.
    ``robust``: refit without the steps more than SPIKE_RATIO off the first fit (a preempted core's
    10x step would bend the line); the spikes stay in the residuals, so the simulated mean keeps them.
    ``batch_table``: also measure the cost of each batch size (``_batch_table``) and the prompt
    tokens' on top of it, as medians: the residuals are then spread around a typical step.
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
    measured = a["step_seconds"]
    coef, _ = optimize.nnls(design, measured)
    if robust:
        ratio = measured / np.maximum(design @ coef, 1e-12)
        inliers = (ratio > SPIKE_RATIO[0]) & (ratio < SPIKE_RATIO[1])
        if inliers.sum() >= max(3, n // 2):
            coef, _ = optimize.nnls(design[inliers], measured[inliers])
    table: tuple[float, ...] = ()
    if batch_table:
        table, coef[2] = _batch_table(a["batch_sizes"], measured, design[:, 2], design[:, 3], coef)
    model = StepTimeModel(base_s=float(coef[0]), per_seq_s=float(coef[1]), per_prefill_token_s=float(coef[2]),
                          per_context_token_s=float(coef[3]), batch_table=table)
    ratios = step_residuals(model, a["batch_sizes"], measured, design[:, 2], design[:, 3])
    jitter: tuple[float, ...] = ()
    if jitter_block > 0:
        jitter = residual_runs(ratios, jitter_block)
    elif jitter_points > 0:
        ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
        if len(ratios):
            jitter = tuple(float(r) for r in np.quantile(ratios, np.linspace(0, 1, min(jitter_points, len(ratios)))))
    return replace(model, jitter=jitter, jitter_block=max(jitter_block, 1))


MIN_TABLE_STEPS = 20   # decode steps of one batch size needed to measure its cost


def _batch_table(batch: np.ndarray, measured: np.ndarray, prefill: np.ndarray, context: np.ndarray,
                 coef: np.ndarray) -> tuple[tuple[float, ...], float]:
    """(cost of batch sizes 1..largest measured, per prompt token), as medians:
        batch b (decode-only steps, context term taken off): their median; sizes between measured
        ones interpolated, sizes below the smallest continued down with the line's per_seq_s;
        per prompt token: median of (step - batch cost - context term) / prompt tokens over the
        steps with at least 8 prompt tokens (the line's value when there are none)."""
    own = measured - coef[3] * context
    decode = prefill == 0
    sizes, medians = [], []
    for b in np.unique(batch[decode]).astype(int):
        values = own[decode & (batch == b)]
        if len(values) >= MIN_TABLE_STEPS and b >= 1:
            sizes.append(b)
            medians.append(float(np.median(values)))
    if not sizes:
        return (), float(coef[2])
    grid = np.arange(1, sizes[-1] + 1)
    table = np.interp(grid, sizes, medians)
    below = grid < sizes[0]
    table[below] = medians[0] - coef[1] * (sizes[0] - grid[below])
    table = np.maximum(table, 0.1 * medians[0])
    per_prefill = float(coef[2])
    prompt = prefill >= 8
    if prompt.any():
        cost = np.where(batch[prompt] <= len(table), table[np.minimum(batch[prompt], len(table)).astype(int) - 1],
                        table[-1] + coef[1] * (batch[prompt] - len(table)))
        per_prefill = max(float(np.median((own[prompt] - cost) / prefill[prompt])), 0.0)
    return tuple(float(v) for v in table), per_prefill


def step_residuals(model: StepTimeModel, batch_sizes: Sequence[float], step_seconds: Sequence[float],
                   prefill_tokens: Sequence[float], context_tokens: Sequence[float]) -> np.ndarray:
    """Factors measured / modelled step time, [S] (nan where the model gives no time)."""
    modelled = model.steps_s(np.asarray(batch_sizes), prefill_tokens, context_tokens)
    return np.asarray(step_seconds, dtype=float) / np.where(modelled > 0, modelled, np.nan)


def residual_runs(ratios: np.ndarray, block: int) -> tuple[float, ...]:
    """The usable factors in the order measured, at most MAX_JITTER of them as evenly spaced runs of
    `block` (what a model's ``jitter`` keeps for the simulator's block bootstrap)."""
    ordered = ratios[np.isfinite(ratios) & (ratios > 0)]
    return tuple(_evenly_spaced_runs(ordered, MAX_JITTER, block).astype(float).tolist())


def _evenly_spaced_runs(values: np.ndarray, keep: int, run: int) -> np.ndarray:
    """At most `keep` of `values`, as runs of `run` consecutive ones spread evenly over the whole."""
    if len(values) <= keep:
        return values
    runs = keep // run
    starts = np.linspace(0, len(values) - run, runs).astype(np.int64)
    return values[(starts[:, None] + np.arange(run)).ravel()]


def fit_front_end(client_send: Sequence[float], client_ttft: Sequence[float], client_e2e: Sequence[float],
                  engine_arrival: Sequence[float], engine_first_token: Sequence[float],
                  engine_finish: Sequence[float], *, think_s: float = 0.0) -> FrontEnd:
    """Per-request front-end delays from client records joined with the engine's (unix s, one clock):
        in_s = engine arrival - client send;  first_out_s = client send + ttft - engine first token;
        last_out_s = client send + e2e - engine finish
    (each floored at 0: two processes' reads of one clock can cross by a few microseconds)."""
    a = {name: np.asarray(values, dtype=float) for name, values in (
        ("client_send", client_send), ("client_ttft", client_ttft), ("client_e2e", client_e2e),
        ("engine_arrival", engine_arrival), ("engine_first_token", engine_first_token),
        ("engine_finish", engine_finish))}
    if len({len(v) for v in a.values()}) != 1 or not len(a["client_send"]):
        raise ValueError("front-end fit needs the same number (> 0) of client and engine times")
    if not all(np.all(np.isfinite(v)) for v in a.values()):
        raise ValueError("front-end fit needs finite times (join finished requests only)")
    in_s = a["engine_arrival"] - a["client_send"]
    first_out = a["client_send"] + a["client_ttft"] - a["engine_first_token"]
    last_out = a["client_send"] + a["client_e2e"] - a["engine_finish"]
    return FrontEnd(tuple(np.maximum(in_s, 0.0)), tuple(np.maximum(first_out, 0.0)),
                    tuple(np.maximum(last_out, 0.0)), think_s=max(float(think_s), 0.0))


def closed_loop_think_s(users: int, duration_s: float, completed: int, mean_e2e_s: float) -> float:
    """A closed loop's mean gap between a user's last byte and its next send (the load generator's own
    time), from Little's law over a window of `duration_s` in which `completed` requests both began
    and ended: each user loses about one cycle to the window's edges, so
        cycle = users x duration / (completed + users);   think = cycle - mean e2e   (floored at 0)."""
    if users <= 0 or duration_s <= 0 or completed <= 0:
        raise ValueError("think time needs users, duration and completed requests > 0")
    return max(users * duration_s / (completed + users) - mean_e2e_s, 0.0)


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

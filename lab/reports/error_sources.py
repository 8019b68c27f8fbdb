"""Where a leave-one-level-out error comes from: the same held-out prediction with one input made exact.

For each held-out level (the validation's: calibrated on its strategy's other levels):
    loo             the validation's prediction
    own_steps       the step model and its residuals fitted on the held-out level's own steps:
                    what is left is not the step time's (what removing it saves is machine drift
                    between levels plus the step model's carrying over from other batch sizes)
    machine_speed   the calibration's step model scaled by the held-out level's machine speed
                    over the calibration levels' (their step-weighted mean), both from one
                    two-way fit over all the strategy's steps (reports.diagnostics.machine_speed.level_speeds:
                    log step time = shape effect + level effect): the machine's drift between
                    levels alone, one number per level, the step model's shape left as fitted.
                    (Stop 21's version compared the held-out level with the others only on the
                    shapes both ran, which mixed drift with where the shapes occur, and raised
                    continuous TPOT p50's error from 3.6% to 12.9%.) The direct measure of
                    drift is a level measured twice (`drift`)
    canary_speed    every level's steps at the run's usual machine speed as the canary read it
                    (loadgen.observe.canary: fixed work timed on the engine's cores, nothing the
                    level measured), and the held-out level predicted at its own reading: what the
                    machine's drift between levels explains when it is measured from outside.
                    A run in rounds already averages the machine's drift out, so this variant can
                    move the errors little (figures in docs/results.md)
    canary_windows  the same per window (a level in rounds has one per round, each at its own
                    speed): every calibration step divided by its own window's reading, and the
                    held-out level simulated with its windows' readings in turn over its measure
                    window (reports.predict.calibration.predict's speed schedule)
    own_front_end   the held-out level's own front-end delays: what removing it saves is the
                    front-end model's error
    noise_floor     no model error at all: the median |one run / median - 1| over the
                    prediction's own replications, i.e. how far one measured run of this length
                    wanders from its expectation (step-time noise, arrivals, the front end's spread)
Each is a relative error per metric and quantile; `drift(measured, rerun)` compares a level with
the same level measured again later (the machine's own drift, independent of any model).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from calculators.sim.front_end import FrontEndByLoad

from reports.predict.calibration import arrival_cv2, calibrate, predict, server_config
from reports.predict.evidence import LevelSample, StepRows, at_usual_speed
from reports.diagnostics.machine_speed import level_speeds
from reports.predict.validation import KEYS, levels_below_knee
from contract.level_result import Distribution
from contract.run_json import RunInfo

VARIANTS = ("loo", "machine_speed", "canary_speed", "canary_windows", "own_steps", "own_front_end", "noise_floor")


def relative_errors(predicted, held: LevelSample) -> dict:
    """predicted / measured - 1 for each judged metric and quantile (KEYS); None where either is missing."""
    out = {}
    for key in KEYS:
        metric, q = key.split(".")
        value, measured = predicted.value(metric, q), held.measured[metric][q]
        out[key] = value / measured - 1 if value is not None and measured else None
    return out


def _noise_floor(predicted) -> dict:
    out = {}
    for key in KEYS:
        metric, q = key.split(".")
        center = predicted.value(metric, q)
        values = [run.metrics[metric][q] for run in predicted.runs if run.metrics[metric][q] is not None]
        out[key] = float(np.median([abs(v / center - 1) for v in values])) if center and values else None
    return out


def level_error_sources(run: RunInfo, group: list[LevelSample], held: LevelSample, *, replications: int = 8,
                        speeds: dict[str, float] | None = None) -> dict:
    """{variant: {key: relative error}} for one held-out level of one strategy's `group`;
    speeds: every level's machine speed (`level_speeds`), computed once per group."""
    server = server_config(run, held.strategy if held.strategy != "url" else "continuous")
    cv2 = arrival_cv2(run)
    others = [s for s in group if s is not held]
    loo = calibrate(others, server, cv2)

    def run_with(calibration) -> object:
        return predict(calibration, held.kind, held.load, held.warmup_s, held.duration_s, replications=replications)

    base = run_with(loo)
    out = {"loo": relative_errors(base, held), "noise_floor": _noise_floor(base)}
    if held.steps is not None:   # without a step record one level's TPOT cannot fix a step line
        own = calibrate([held], server, cv2)   # the held-out level's own steps (its front end, lengths unused)
        out["own_steps"] = relative_errors(run_with(replace(loo, step_model=own.step_model, residuals=own.residuals)), held)
    speed = _relative(speeds if speeds is not None else _speeds(group), held, others)
    out["speed"] = speed
    if speed is not None:
        out["machine_speed"] = relative_errors(run_with(replace(loo, step_model=loo.step_model.scaled(speed))), held)
    with_steps = [s for s in others if s.steps is not None]
    if held.machine_speed is not None and with_steps and all(s.machine_speed is not None for s in with_steps):
        usual = calibrate([at_usual_speed(s) for s in others], server, cv2)
        out["canary_speed"] = relative_errors(predict(usual, held.kind, held.load, held.warmup_s, held.duration_s,
                                              replications=replications, machine_speed=held.machine_speed), held)
        if held.window_speeds:
            by_window = calibrate([at_usual_speed(s, by_window=True) for s in others], server, cv2)
            out["canary_windows"] = relative_errors(predict(by_window, held.kind, held.load, held.warmup_s, held.duration_s,
                                                    replications=replications, machine_speed=held.window_speeds), held)
    if loo.front_end is not None and held.front_end is not None:
        exact = FrontEndByLoad((held.load,), (held.front_end,), (held.output_tokens_per_s or 1.0,))
        out["own_front_end"] = relative_errors(run_with(replace(loo, front_end=exact)), held)
    return out


def _speeds(group: list[LevelSample]) -> dict[str, float]:
    return level_speeds({s.level: _frame(s.steps) for s in group})


def _relative(speeds: dict[str, float], held: LevelSample, others: list[LevelSample]) -> float | None:
    """The held-out level's speed over the calibration levels' step-weighted mean (None if unknown)."""
    known = [(speeds[s.level], len(s.steps.duration_s)) for s in others if s.level in speeds and s.steps is not None]
    if held.level not in speeds or not known:
        return None
    values, weights = zip(*known)
    return speeds[held.level] / float(np.exp(np.average(np.log(values), weights=weights)))


def _frame(*rows: StepRows | None) -> pd.DataFrame | None:
    """StepRows (effective step durations) as the DataFrame reports.diagnostics.machine_speed reads."""
    rows = [r for r in rows if r is not None]
    if not rows:
        return None
    return pd.DataFrame({name: np.concatenate([getattr(r, name) for r in rows])
                         for name in ("batch", "prefill_tokens", "context_tokens")}
                        | {"step_s": np.concatenate([r.duration_s for r in rows])})


def error_sources(run: RunInfo, samples: dict[str, list[LevelSample]], *, replications: int = 8) -> dict:
    """{strategy: {"levels": {level: {variant: {key: err}}}, "median_abs": {variant: {key: x}}}}, the
    medians over the same levels as the validation's (`levels_below_knee`)."""
    out = {}
    for strategy, group in samples.items():
        if len(group) < 3:
            continue
        speeds = _speeds(group)
        levels = {held.level: level_error_sources(run, group, held, replications=replications, speeds=speeds)
                  for held in group}
        eligible = levels_below_knee(group)
        medians = {}
        for variant in VARIANTS:
            medians[variant] = {}
            for key in KEYS:
                values = [abs(levels[name][variant][key]) for name in eligible
                          if variant in levels[name] and levels[name][variant][key] is not None]
                medians[variant][key] = float(np.median(values)) if values else None
        out[strategy] = {"levels": levels, "median_abs": medians, "levels_in_median": eligible}
    return out


def drift(measured: dict[str, Distribution], rerun: dict[str, Distribution]) -> dict:
    """{key: rerun / measured - 1} for one level measured twice (each a summary level's `metrics`)."""
    out = {}
    for key in KEYS:
        metric, q = key.split(".")
        a, b = measured[metric].at(q), rerun[metric].at(q)
        out[key] = b / a - 1 if a and b is not None else None
    return out

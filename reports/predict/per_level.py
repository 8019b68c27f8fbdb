"""Predicted vs measured per level: the calculators' numbers next to what the run measured.

Typed summary levels in (contract.level_result.LevelResult), each returned with its `predicted`
(a LevelPrediction). The server configuration comes from run.json's `server` section as the sweep
writes it (model, dtype, block_size, kv_blocks, and each strategy's live engine
description, with that strategy's own limits, under `engines`): see
`contract.run_json.Server.engine_config`. Each comparison is a `Comparison`
(predicted, measured, relative_error = predicted / measured - 1, unit);
what cannot be predicted or was not measured is listed under `unavailable`.

Step time, for the decode-step comparison and the simulator:
- the run's own calibration when it has one (reports.predict.calibration: the engine's step record,
  the front end's delays, the measured lengths). The latency comparisons are then the
  validation's leave-one-level-out predictions (the level left out of its own calibration)
  where the strategy has enough levels, else a simulation calibrated on all of them
  (in-sample); either carries the spread over replications as `interval`;
- else a known GPU (run.json host, or `server.gpu`): the roofline (calculators.roofline,
  calculators.sim.step_model.step_model_from_roofline) - a prediction from datasheet numbers;
- otherwise (a CPU run): step_s = base + per_seq x batch fitted by least squares
  (calculators.sim.calibrate.fit_step_time) to the per-level mean step time and batch
  size the server reported - the simulator then predicts each level's TTFT/TPOT
  from the engine's measured cost per step and its batching policy alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from calculators.sim.calibrate import fit_step_time
from engine_core.gpus import catalog_gpu_for, get_gpu
from calculators.kv import kv_block_bytes
from calculators.sim.simulate import SimServer, SimWorkload, simulate
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline
from engine_core.scheduling.strategies import get_strategy  # the pure registry
from reports.predict.calibration import Calibration, predict, strategy_limits
from reports.predict.evidence import LevelSample
from reports.predict.validation import predicted_quantiles
from reports.predict.served_model import kv_comparisons, kv_dtype_for, served_architecture
from contract.distributions import LengthDistribution
from contract.level_result import Comparison, LevelPrediction, LevelResult
from contract.summary import PredictedQuantile
from contract.run_json import RunInfo

SIM_REQUESTS_PER_STREAM = 40   # simulated requests per concurrent stream (or per req/s), at least 400
SIM_MAX_REQUESTS = 4000


def _pair(predicted: float | None, measured: float | None, unit: str, interval=None,
          simulated: bool = False) -> Comparison:
    rel = predicted / measured - 1.0 if predicted is not None and measured else None
    return Comparison(predicted=predicted, measured=measured, relative_error=rel, unit=unit,
                      interval=tuple(interval) if interval is not None else None, simulated=simulated)


def _step_model(run: RunInfo, arch, levels: Sequence[LevelResult]) -> tuple[StepTimeModel | None, str]:
    gpu_name = run.server.gpu or next((c for c in map(catalog_gpu_for, run.host.gpu_names()) if c), None)
    if gpu_name:
        dtype = str(run.server.dtype or "bf16")
        return step_model_from_roofline(arch, get_gpu(gpu_name), dtype=dtype), f"roofline on {gpu_name}"
    points = [(lvl.server["batch_size_mean"], lvl.server["step_time_mean_s"]) for lvl in levels
              if lvl.server.get("batch_size_mean") and lvl.server.get("step_time_mean_s")]
    if len(points) < 3:
        return None, "no catalog GPU and fewer than 3 levels with step-time and batch-size histograms"
    try:
        fit = fit_step_time([p[0] for p in points], [p[1] for p in points])
    except ValueError as exc:
        return None, f"cannot fit step time over levels: {exc}"
    if fit.base_s <= 0:
        return None, "the step-time fit over levels has no positive base time"
    model = StepTimeModel(base_s=fit.base_s, per_seq_s=max(fit.per_seq_s, 0.0))
    return model, f"step time fitted to this run's levels (base {fit.base_s * 1e3:.2f} ms + {model.per_seq_s * 1e3:.3f} ms/seq)"


def _simulator_config(config: dict) -> SimServer:
    blocks = config.get("num_kv_blocks") or config.get("kv_blocks")
    return SimServer(limits=strategy_limits(config), num_kv_blocks=int(blocks) if blocks else None,
                        block_size=int(config.get("block_size") or 16))


def _simulated(level: LevelResult, config: dict, model: StepTimeModel) -> dict:
    kind, load = level.offered.kind, level.offered.value
    requests = int(min(SIM_MAX_REQUESTS, max(400, SIM_REQUESTS_PER_STREAM * load)))
    workload = SimWorkload(
        prompt_tokens=LengthDistribution.fixed(max(1, round(level.prompt_tokens_mean or 1))),
        output_tokens=LengthDistribution.fixed(max(1, round(level.output_tokens_mean or 1))),
        reasoning_tokens=(LengthDistribution.fixed(round(level.reasoning_tokens_mean))
                          if round(level.reasoning_tokens_mean or 0) else None),
        requests=requests, concurrency=int(load) if kind == "concurrency" else None,
        rate_rps=float(load) if kind == "rate_rps" else None)
    return simulate(_simulator_config(config), workload, model).metrics


def _running_capacity(config: dict, level: LevelResult) -> tuple[int | None, str]:
    """Sequences the strategy can run at once at this level's mean request length and offered load:
    its `max_running`, and no more than the KV cache holds of such requests (when its size is known)."""
    strategy, block_size = config.get("strategy"), int(config.get("block_size") or 16)
    try:
        spec = get_strategy(strategy)
    except ValueError:
        return None, f"unknown strategy {strategy!r}"
    names = spec.limits.field_names()
    if names and all(config.get(name) is None for name in names):
        return None, f"run.json server config lacks the {strategy} limits ({', '.join(sorted(names))})"
    cap = strategy_limits(config).max_running
    blocks = config.get("num_kv_blocks") or config.get("kv_blocks") or level.server.get("kv_blocks_total")
    tokens = (level.prompt_tokens_mean or 0) + (level.output_tokens_mean or 0)
    if blocks and tokens:
        cap = min(cap, int(blocks) // math.ceil(tokens / block_size))
    offered = level.load if level.offered is not None and level.offered.kind == "concurrency" else None
    return (min(int(cap), int(offered)) if offered else int(cap)), ""


CALIBRATED_REPLICATIONS = 4   # in-sample runs, for strategies too few levels to leave one out


def predict_level(run: RunInfo, level: LevelResult, arch, model: StepTimeModel | None, model_source: str,
                  model_config: str | None = None, calibrated: tuple[Calibration, LevelSample] | None = None,
                  replications: int = CALIBRATED_REPLICATIONS, held_out: dict | None = None) -> LevelPrediction:
    """summary.json's `predicted` for one level (the model, its comparisons, what was unavailable).
    `held_out`: this level's leave-one-level-out prediction (validation's `predictions[level]`)."""
    config = run.server.engine_config(level.strategy)
    dtype, block_size = str(config.get("dtype") or "bf16"), int(config.get("block_size") or 16)
    measured = level.server   # free-form: the gauges the server exported
    comparisons, unavailable = {}, []
    kv_dtype, kv_dtype_source = kv_dtype_for(config, model_config)
    if kv_dtype is None:
        unavailable.append(f"KV cache size: {kv_dtype_source}")
    else:
        block_bytes = kv_block_bytes(arch, kv_dtype, block_size)
        comparisons["kv_block_bytes"] = _pair(float(block_bytes), measured.get("kv_block_bytes")
                                              or config.get("kv_block_bytes"), "bytes")
        for quantity, (predicted, engine_own, unit) in kv_comparisons(arch, config, kv_dtype).items():
            comparisons[quantity] = _pair(predicted, engine_own, unit)
    capacity, why = _running_capacity(config, level)
    if capacity is None:
        unavailable.append(f"running sequences: {why}")
    else:
        comparisons["running_sequences_peak"] = _pair(float(capacity), measured.get("requests_running_max"), "sequences")
    if calibrated is not None:
        calibration, sample = calibrated
        model, model_source = calibration.step_model, (
            "latencies: leave-one-level-out (validation)" if held_out else "latencies: in-sample") + \
            "; this run's calibration: " + "; ".join(f"{k}: {v}" for k, v in calibration.sources.items())
        unavailable += list(calibration.unavailable)
    if model is None:
        unavailable.append(f"step time and simulator: {model_source}")
    else:
        batch = max(1, round(measured.get("batch_size_mean") or 1))
        context = int((level.prompt_tokens_mean or 0) + (level.output_tokens_mean or 0) / 2)
        noise = float(sum(model.jitter) / len(model.jitter)) if model.jitter else 1.0
        step = model.step_s(batch, context_tokens=batch * context) * noise
        comparisons["step_s"] = _pair(step, measured.get("step_time_mean_s"), "s")
        if held_out:
            _add_simulated(comparisons, held_out, level)
        elif calibrated is not None:
            _add_calibrated(comparisons, unavailable, calibrated, level, replications)
        elif level.offered and config.get("strategy") and level.prompt_tokens_mean:
            try:
                sim = _simulated(level, config, model)
            except ValueError as exc:
                unavailable.append(f"simulator: {exc}")
            else:
                for metric in _latency_metrics(level):
                    for pct in ("p50", "p99"):
                        comparisons[f"{metric} {pct}"] = _pair(sim[metric][pct], level.metrics[metric].at(pct), "s")
    return LevelPrediction(model=arch.name, dtype=dtype, block_size=block_size, step_model=model_source,
                           kv_dtype=kv_dtype, kv_dtype_source=kv_dtype_source, comparisons=comparisons,
                           unavailable=tuple(unavailable))


def _add_calibrated(comparisons: dict, unavailable: list, calibrated: tuple[Calibration, LevelSample],
                    level: LevelResult, replications: int) -> None:
    calibration, sample = calibrated
    try:
        sim = predict(calibration, sample.kind, sample.load, sample.warmup_s, sample.duration_s,
                      replications=replications)
    except (ValueError, RuntimeError) as exc:
        unavailable.append(f"simulator: {exc}")
        return
    _add_simulated(comparisons, predicted_quantiles(sim.metrics), level)


def _latency_metrics(level: LevelResult) -> tuple[str, ...]:
    """The latencies a level's prediction is compared on: the first answer token's too where it reasoned."""
    return ("ttft_s", "tpot_s", "e2e_s") + (("ttfa_s",) if level.reasoning_tokens_mean else ())


def _add_simulated(comparisons: dict, metrics: dict[str, dict[str, PredictedQuantile]], level: LevelResult) -> None:
    """`metrics`: the simulator's {metric: {q: PredictedQuantile}} (reports.predict.validation.predicted_quantiles)."""
    for metric in _latency_metrics(level):
        for pct in ("p50", "p95", "p99"):
            predicted = metrics[metric][pct]
            comparisons[f"{metric} {pct}"] = _pair(predicted.value, level.metrics[metric].at(pct), "s",
                                                   predicted.interval, simulated=True)


def calibrated_by_level(calibrations: dict[str, Calibration],
                        samples: dict[str, list[LevelSample]]) -> dict[str, tuple[Calibration, LevelSample]]:
    """{level id: (its strategy's calibration, the level as measured)} for the strategies with an engine
    step record; the others' levels are predicted by the run's one step model (`_step_model`)."""
    return {sample.level: (calibrations[strategy], sample) for strategy, group in samples.items()
            if strategy in calibrations and any(s.steps is not None for s in group) for sample in group}


def add_predictions(run: RunInfo, levels: Sequence[LevelResult], model_config: str | None = None,
                    calibrations: dict[str, Calibration] | None = None,
                    samples: dict[str, list[LevelSample]] | None = None, *,
                    replications: int = CALIBRATED_REPLICATIONS, held_out: dict | None = None) -> list[LevelResult]:
    """The levels with their `predicted` (one step model for the whole run, or, per level of a
    strategy with an engine step record, `calibrations[strategy]`: its calibration on all its levels, the
    one the validation fitted (`reports.predict.validation.Validation.calibrations`), with the level as
    `samples` measured it; latencies from `held_out[level id]` (the validation's predictions), else
    simulated `replications` times).
    `model_config` (--model-config, else the one the sweep recorded) names the served model's architecture."""
    calibrated, held_out = calibrated_by_level(calibrations or {}, samples or {}), held_out or {}
    model_config = model_config or run.server.model_config
    arch, arch_source = served_architecture(run, model_config)
    if arch is None:
        return [replace(level, predicted=LevelPrediction(unavailable=(arch_source,))) for level in levels]
    try:
        model, source = _step_model(run, arch, levels)
    except ValueError as exc:  # e.g. a GPU name the catalog rejects: predictions degrade, the report stands
        model, source = None, str(exc)
    out = []
    for level in levels:
        try:
            predicted = replace(predict_level(run, level, arch, model, source, model_config,
                                              calibrated.get(level.level), replications, held_out.get(level.level)),
                                model_source=arch_source)
        except ValueError as exc:
            predicted = LevelPrediction(model=arch.name, unavailable=(str(exc),))
        out.append(replace(level, predicted=predicted))
    return out

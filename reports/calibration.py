"""A run's levels as the simulator's calibration sees them, the calibration, and a prediction from it.

    level_samples(data, levels)    -> {strategy: [LevelSample]}   one per summary level with a load
    calibrate(samples, server)     -> Calibration                  from any subset of one strategy's levels
    predict(calibration, target)   -> Replicated                   one load level, simulated R times

Sources, best first (``Calibration.sources`` says which were used, ``unavailable`` what was not):
- step time and its noise: the engine's step record (engine_steps.csv): each step's effective
  duration (to the next step's start when the engine went straight on, so the loop's own work
  between steps counts) against its batch, prefill tokens and context, fitted robustly on every
  calibration level, and each level's residuals kept in order for the simulator's block
  bootstrap: a prediction draws those of the levels around its own output tokens/s (the noise is
  not one spread: at low load a slow step is several times a short one, at high load a fraction
  of a long one; pooled, the quiet levels' tails would land on the busy ones); else the per-level means of the
  /metrics step-time and batch-size histograms (no noise); else the client's median inter-token
  gap against the running sequences the strategy allows (no noise);
- front-end delays: the client's records joined with the engine's request record by response id,
  per level (the front end slows with the load it carries), with the closed loop's think time
  from Little's law; else none (the engine's clock is taken for the client's);
- workload: the (prompt, output) lengths the calibration levels measured, and the run's arrival
  process (run.json's load plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from calculators.calibrate import (closed_loop_think_s, fit_front_end, fit_step_model, fit_step_time, residual_runs,
                                   step_residuals)
from calculators.sim.front_end import FrontEnd, FrontEndByLoad
from calculators.sim.replicate import Replicated, simulate_replicated
from calculators.sim.simulate import ServerConfig, Workload
from calculators.sim.step_model import StepTimeModel
from reference_server.scheduling.strategies import get_strategy, limits_from_flags  # the pure registry
from reports.canary_speed import machine_speed
from reports.run_data import RunData
from servecap.contract.level_windows import inside
from servecap.contract.run_json import RunInfo

JITTER_BLOCK = 64          # residuals drawn in runs of this many steps: about one request's decode
MIN_STEPS = 50             # fewer recorded steps than this: fit from the fallbacks instead
MAX_BUSY_GAP_S = 0.25      # between two steps of a busy engine (a slow one is noise: kept; longer is a level's end)
QUANTILES = ("p50", "p95", "p99")
METRICS = ("ttft_s", "tpot_s", "e2e_s")


@dataclass(frozen=True)
class StepRows:
    """One level's engine steps, in time order: [S] each."""

    batch: np.ndarray
    prefill_tokens: np.ndarray
    context_tokens: np.ndarray
    duration_s: np.ndarray


@dataclass(frozen=True)
class LevelSample:
    """What one measured level gives a calibration, and what it measured."""

    level: str
    strategy: str
    kind: str                       # "concurrency" | "rate_rps"
    load: float
    warmup_s: float
    duration_s: float
    lengths: tuple[tuple[int, int], ...]
    measured: dict                  # {metric: {p50, p95, p99}}
    output_tokens_per_s: float | None
    steps: StepRows | None = None
    front_end: FrontEnd | None = None
    server_means: tuple[float, float] | None = None   # (batch size mean, step time mean) from /metrics
    itl_p50_s: float | None = None
    machine_speed: float | None = None   # the canary's: how much longer than the run's usual the engine's
                                         # cores took for the same work during the level (None: no canary);
                                         # `steps` stay as timed (reports.error_sources tries them rescaled)

    @property
    def requests(self) -> int:
        return len(self.lengths)


@dataclass(frozen=True)
class Calibration:
    strategy: str
    server: ServerConfig
    step_model: StepTimeModel
    lengths: tuple[tuple[int, int], ...]
    arrival_cv2: float
    front_end: FrontEndByLoad | None
    levels: tuple[str, ...]                          # the levels it was fitted on
    sources: dict = field(default_factory=dict)      # what each input came from
    unavailable: tuple[str, ...] = ()
    counts: tuple[tuple[float, int], ...] = ()       # (load, measured requests per second of window)
    residuals: tuple[tuple[float, tuple[float, ...]], ...] = ()   # (level's output tokens/s, its residual runs)

    def step_model_at(self, tokens_per_s: float | None) -> StepTimeModel:
        """The step model with the residuals of the calibration levels around `tokens_per_s` (the two
        that bracket it in log throughput, pooled; past either end the nearest one); all of them
        pooled when there is no throughput or only one level's."""
        if tokens_per_s is None or not tokens_per_s > 0 or len(self.residuals) < 2:
            return self.step_model
        x = np.log([rate for rate, _ in self.residuals])
        target = math.log(tokens_per_s)
        above = int(np.searchsorted(x, target))
        picked = [above - 1, above] if 0 < above < len(x) else [min(above, len(x) - 1)]
        if 0 < above < len(x) and x[above] == target:
            picked = [above]
        jitter = tuple(f for i in picked for f in self.residuals[i][1])
        return replace(self.step_model, jitter=jitter) if jitter else self.step_model

    def describe(self) -> dict:
        m = self.step_model
        out = {"levels": list(self.levels), "sources": dict(self.sources), "unavailable": list(self.unavailable),
               "step_model": {"base_ms": m.base_s * 1e3, "per_seq_ms": m.per_seq_s * 1e3,
                              "per_prefill_token_us": m.per_prefill_token_s * 1e6,
                              "per_context_token_us": m.per_context_token_s * 1e6,
                              "residuals": len(m.jitter), "residual_block": m.jitter_block}}
        if m.jitter:
            factors = np.asarray(m.jitter)
            out["step_model"]["residual_mean"] = float(factors.mean())
            out["step_model"]["residual_p99"] = float(np.percentile(factors, 99))
        return out


# -- the server each strategy ran -----------------------------------------------------------------
def strategy_limits(config: dict):
    """The strategy's limits (the registry's Limits) from the merged config's flat fields; a field
    the config lacks takes the strategy's default."""
    spec = get_strategy(config["strategy"])
    return limits_from_flags(spec.name, {k: config[k] for k in spec.limits.field_names() if config.get(k) is not None})


def server_config(run: RunInfo, strategy: str) -> ServerConfig:
    """The simulator's ServerConfig for what `strategy` ran with (run.json's engine description)."""
    config = run.server.engine_config(strategy)
    blocks = config.get("num_kv_blocks") or config.get("kv_blocks")
    return ServerConfig(limits=strategy_limits(config), num_kv_blocks=int(blocks) if blocks else None,
                        block_size=int(config.get("block_size") or 16))


def arrival_cv2(run: RunInfo) -> float:
    """The open-loop gaps' squared coefficient of variation from run.json's `load_plan.arrival`."""
    arrival = str(run.load_plan.arrival or "poisson")
    if arrival.startswith("gamma:"):
        try:
            return float(arrival.split(":", 1)[1]) ** 2
        except ValueError:
            return 1.0
    return 1e-6 if arrival == "constant" else 1.0


# -- reading the levels ---------------------------------------------------------------------------
def level_samples(data: RunData, levels: list[dict]) -> dict[str, list[LevelSample]]:
    """Each strategy's levels (those with an offered load and ok requests), ordered by load."""
    records = data.records
    windows = data.level_windows()
    ok = records[data.measured_ok()]
    by_level = dict(tuple(ok.groupby("level", sort=False, observed=True)))
    steps = _effective_steps(data.engine_steps)
    cores = _engine_cores(data)
    joined = _join_engine_requests(ok, data.engine_requests)
    plan = data.run.load_plan
    out: dict[str, list[LevelSample]] = {}
    for lvl in levels:
        frame = by_level.get(lvl["level"])
        if not lvl["offered"] or frame is None or lvl["strategy"] is None and data.run.target.kind != "url":
            continue
        (kind, load), = lvl["offered"].items()
        its_windows = windows.get(lvl["level"], [])
        warmup = float(plan.warmup_s) if plan.warmup_s is not None else 0.0
        duration = float(plan.duration_s) if plan.duration_s is not None else float(lvl["duration_s"] or 0.0)
        if duration <= 0:
            continue
        pairs = frame[["prompt_tokens", "output_tokens"]].dropna()
        pairs = pairs[(pairs["prompt_tokens"] > 0) & (pairs["output_tokens"] > 0)].astype(int)
        source = lvl["strategy"] or "url"
        server = lvl["server"]
        means = ((server["batch_size_mean"], server["step_time_mean_s"])
                 if server.get("batch_size_mean") and server.get("step_time_mean_s") else None)
        speed = machine_speed(data.canary, its_windows, cores, source)
        sample = LevelSample(
            level=lvl["level"], strategy=source, kind=kind, load=float(load), warmup_s=warmup, duration_s=duration,
            lengths=tuple(map(tuple, pairs.to_numpy().tolist())),
            measured={m: {q: lvl["metrics"][m][q] for q in QUANTILES} for m in METRICS},
            output_tokens_per_s=lvl["output_tokens_per_s"],
            steps=_level_steps(steps, source, its_windows), machine_speed=speed,
            front_end=_level_front_end(joined.get(lvl["level"]), kind, load, duration, lvl, max(len(its_windows), 1)),
            server_means=means, itl_p50_s=lvl["metrics"]["itl_s"]["p50"])
        if sample.lengths:
            out.setdefault(source, []).append(sample)
    for samples in out.values():
        samples.sort(key=lambda s: s.load)
    return out


def _engine_cores(data: RunData) -> list[int]:
    """The cores the engine ran on (run.json's pinning), else every core the canary timed."""
    pinning = data.run.cpu_pinning
    cores = (pinning.engine_cpus or pinning.server_cpus) if pinning is not None else None
    if cores:
        return list(cores)
    return sorted({int(c) for c in data.canary["core"]}) if data.canary is not None else []


def at_usual_speed(sample: LevelSample) -> LevelSample:
    """The level with its steps as they would have taken at the run's usual machine speed (the canary's)."""
    if sample.steps is None or sample.machine_speed is None:
        return sample
    return replace(sample, steps=replace(sample.steps, duration_s=sample.steps.duration_s / sample.machine_speed))


def _effective_steps(steps: pd.DataFrame | None) -> pd.DataFrame | None:
    """Each step's duration as the simulator's clock sees it: to the next step's start when the
    engine went straight on; its own time plus the median gap between busy steps otherwise."""
    if steps is None or steps.empty:
        return None
    parts = []
    for _, frame in steps.groupby("source", sort=False):
        frame = frame.sort_values("seq")
        start = frame["t_start"].to_numpy(float)
        own = frame["step_s"].to_numpy(float)
        idle = frame["idle_after"].astype(str).str.lower().isin(("true", "1")).to_numpy()
        to_next = np.append(np.diff(start), np.nan)
        # an engine still busy goes straight on; a gap this long is a level's end (its last requests aborted)
        busy = ~idle & np.isfinite(to_next) & (to_next >= own) & (to_next - own < MAX_BUSY_GAP_S)
        gap = float(np.median(to_next[busy] - own[busy])) if busy.any() else 0.0
        duration = np.where(busy, to_next, own + gap)
        parts.append(pd.DataFrame({"source": frame["source"].to_numpy(), "t_start": start,
                                   "batch": frame["batch"].to_numpy(float),
                                   "prefill_tokens": frame["prefill_tokens"].to_numpy(float),
                                   "context_tokens": frame["context_tokens"].to_numpy(float),
                                   "duration_s": duration}))
    return pd.concat(parts, ignore_index=True)


def _level_steps(steps: pd.DataFrame | None, source: str, windows: list[tuple[float, float]]) -> StepRows | None:
    """The level's engine steps: its server's, inside its windows (one per round)."""
    if steps is None:
        return None
    rows = steps[(steps["source"].astype(str) == source) & inside(steps["t_start"].to_numpy(dtype=float), windows)]
    if rows.empty:
        return None
    return StepRows(rows["batch"].to_numpy(), rows["prefill_tokens"].to_numpy(), rows["context_tokens"].to_numpy(),
                    rows["duration_s"].to_numpy())


def _join_engine_requests(ok: pd.DataFrame, engine: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    if engine is None or "response_id" not in ok.columns:
        return {}
    columns = ["response_id", "t_arrival", "t_first_token", "t_finish"]
    merged = ok[["level", "response_id", "t_start", "ttft_s", "e2e_s"]].merge(
        engine[columns].drop_duplicates("response_id"), on="response_id", how="inner")
    merged = merged.dropna(subset=["t_start", "ttft_s", "e2e_s", "t_arrival", "t_first_token", "t_finish"])
    return dict(tuple(merged.groupby("level", sort=False, observed=True)))


def _level_front_end(joined: pd.DataFrame | None, kind: str, load: float, duration: float, lvl: dict,
                     rounds: int = 1) -> FrontEnd | None:
    """rounds: the windows the level was measured in; each user loses about one cycle to each one's edges."""
    if joined is None or joined.empty:
        return None
    think = 0.0
    if kind == "concurrency" and lvl["ok"]:
        think = closed_loop_think_s(int(load) * rounds, duration / rounds, int(lvl["ok"]),
                                    float(lvl["metrics"]["e2e_s"]["mean"]))
    return fit_front_end(joined["t_start"], joined["ttft_s"], joined["e2e_s"], joined["t_arrival"],
                         joined["t_first_token"], joined["t_finish"], think_s=think)


# -- calibrating ----------------------------------------------------------------------------------
def calibrate(samples: list[LevelSample], server: ServerConfig, cv2: float = 1.0) -> Calibration:
    """One strategy's calibration from `samples` (any subset of its levels); ValueError if nothing fits."""
    if not samples:
        raise ValueError("no levels to calibrate on")
    sources, unavailable = {}, []
    model = _fit_steps(samples, server, sources, unavailable)
    residuals = _level_residuals(samples, model)
    if residuals:
        sources["step_noise"] = (f"each level's residuals ({len(residuals)} levels); a prediction draws those of "
                                 "the levels around its output tokens/s")
    fronts = [s for s in samples if s.front_end is not None]
    front = None
    if len(fronts) == len(samples):
        front = FrontEndByLoad(tuple(s.load for s in fronts), tuple(s.front_end for s in fronts),
                               tuple(s.output_tokens_per_s or 0.0 for s in fronts))
        sources["front_end"] = ("client records joined with engine_requests.csv per level; means "
                                + ("as a queue over output tokens/s" if front.curve else "interpolated in log(load)"))
    else:
        unavailable.append("front-end delays: no engine request record to join the client's records with "
                           "(predicted on the engine's clock)")
    lengths = tuple(pair for s in samples for pair in s.lengths)
    sources["workload"] = f"{len(lengths)} measured (prompt, output) lengths"
    counts = tuple((s.load, s.requests / s.duration_s) for s in samples)
    return Calibration(samples[0].strategy, server, model, lengths, cv2, front, tuple(s.level for s in samples),
                       sources, tuple(unavailable), counts, residuals)


def _level_residuals(samples: list[LevelSample], model: StepTimeModel) -> tuple:
    """(output tokens/s, residual runs) per level with recorded steps and a throughput, by throughput;
    empty when the model has no residuals (no step record) or fewer than two such levels."""
    if not model.jitter:
        return ()
    out = []
    for s in samples:
        if s.steps is None or not s.output_tokens_per_s:
            continue
        ratios = step_residuals(model, s.steps.batch, s.steps.duration_s, s.steps.prefill_tokens,
                                s.steps.context_tokens)
        runs = residual_runs(ratios, model.jitter_block)
        if runs:
            out.append((float(s.output_tokens_per_s), runs))
    return tuple(sorted(out)) if len(out) >= 2 else ()


def _fit_steps(samples: list[LevelSample], server: ServerConfig, sources: dict, unavailable: list) -> StepTimeModel:
    with_steps = [s.steps for s in samples if s.steps is not None]
    if sum(len(rows.batch) for rows in with_steps) >= MIN_STEPS:
        cat = {name: np.concatenate([getattr(rows, name) for rows in with_steps])
               for name in ("batch", "prefill_tokens", "context_tokens", "duration_s")}
        model = fit_step_model(cat["batch"], cat["duration_s"], cat["prefill_tokens"], cat["context_tokens"],
                               jitter_block=JITTER_BLOCK, robust=True, batch_table=True)
        sources["step_time"] = f"engine_steps.csv: {len(cat['batch'])} steps, robust fit, residuals in runs of {JITTER_BLOCK}"
        return model
    unavailable.append("step-time noise: no engine step record (the step time is a mean, without its spread)")
    points = [s.server_means for s in samples if s.server_means]
    if len({round(p[0], 3) for p in points}) >= 2:
        fit = fit_step_time([p[0] for p in points], [p[1] for p in points])
        sources["step_time"] = "per-level means of the /metrics step-time and batch-size histograms"
    else:
        cap = server.limits.max_running
        points = [(min(s.load, cap) if s.kind == "concurrency" else 1.0, s.itl_p50_s) for s in samples if s.itl_p50_s]
        if len({p[0] for p in points}) < 2:
            raise ValueError("cannot fit a step time: no engine step record, no /metrics step histograms, "
                             "and fewer than two closed-loop levels with distinct batch sizes")
        fit = fit_step_time([p[0] for p in points], [p[1] for p in points])
        sources["step_time"] = "client inter-token gaps (p50) against the strategy's running-sequence cap"
        unavailable.append("engine step and /metrics histograms: step time inferred from the client's gaps")
    return StepTimeModel(base_s=max(fit.base_s, 1e-6), per_seq_s=max(fit.per_seq_s, 0.0))


def calibrated_levels(run: RunInfo, samples: dict[str, list[LevelSample]]) -> dict[str, tuple[Calibration, LevelSample]]:
    """Each level with an engine step record: (its strategy's calibration on all its levels, the level)."""
    out = {}
    for strategy, group in samples.items():
        if not any(s.steps is not None for s in group):
            continue   # predicted.py's own step models cover runs without the engine's record
        try:
            calibration = calibrate(group, server_config(run, strategy), arrival_cv2(run))
        except ValueError:
            continue
        out.update({s.level: (calibration, s) for s in group})
    return out


# -- predicting -----------------------------------------------------------------------------------
def predict(calibration: Calibration, kind: str, load: float, warmup_s: float, duration_s: float, *,
            replications: int = 8, seed: int = 0, requests: int | None = None,
            machine_speed: float | None = None) -> Replicated:
    """One level of `load` users (kind "concurrency") or requests/s ("rate_rps"), measured as the sweep
    measures: requests sent in [warmup_s, warmup_s + duration_s) that finished by its end; or, given
    `requests`, that many per run, the first 10% and a closed loop's last `load` left out (a machine
    far faster than the calibration's would need millions of requests to fill the same window).
    `machine_speed`: the step model scaled by it (a machine that many times slower than the one the
    calibration's steps were timed on; reports.error_sources' canary variant); None: as calibrated."""
    window = {} if requests else {"warmup_s": warmup_s, "duration_s": duration_s}
    workload = Workload(lengths=calibration.lengths, **window,
                        requests=requests or _requests_guess(calibration, kind, load, warmup_s + duration_s),
                        concurrency=int(load) if kind == "concurrency" else None,
                        rate_rps=float(load) if kind == "rate_rps" else None,
                        arrival_cv2=calibration.arrival_cv2, seed=seed)
    front = calibration.front_end
    if machine_speed is not None:
        calibration = replace(calibration, step_model=calibration.step_model.scaled(machine_speed))
    tokens_per_s = None
    if calibration.residuals or (front is not None and front.curve is not None):
        # the step noise and the front end's delays follow the output rate: first find it, with one run
        first = simulate_replicated(calibration.server, workload, calibration.step_model,
                                    front.at(load) if front is not None else None, replications=1)
        tokens_per_s = first.output_tokens_per_s
    delays = None if front is None else front.at(load, tokens_per_s) if front.curve is not None else front.at(load)
    return simulate_replicated(calibration.server, workload, calibration.step_model_at(tokens_per_s), delays,
                               replications=replications)


def _requests_guess(calibration: Calibration, kind: str, load: float, horizon_s: float) -> int:
    """Requests to draw: the measured rate at the nearest calibration load, scaled up with the load,
    over the whole run, with room to spare (unused ones cost only their lengths)."""
    if kind == "rate_rps":
        return int(load * horizon_s * 1.5) + 100
    nearest_load, rate = min(calibration.counts, key=lambda c: abs(math.log(c[0] / load)))
    return int(rate * max(load / nearest_load, 1.0) * horizon_s * 2) + int(load) + 100

"""A run's levels as the simulator's calibration sees them: what each measured, and the engine's
and the front end's evidence from it (`reports.predict.calibration` fits on these).

    level_samples(data, levels) -> {strategy: [LevelSample]}   one per summary level (LevelResult) with a load

Per level: its (prompt, output, reasoning) lengths and measured percentiles; the engine's steps inside its
windows (engine_steps.csv), each step's effective duration (to the next step's start when the
engine went straight on, so the loop's own work between steps counts) and the steps since the
engine last waited (`calculators.sim.warm_up`); its front-end delays
(the client's records joined with engine_requests.csv by response id, else split by the engine's
/metrics latency means: `reports.predict.external_calibration`); the /metrics running gauge and step
histogram means; the canary's machine speed. An external --url target's levels are keyed "url".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from calculators.sim.calibrate import closed_loop_think_s, fit_front_end
from calculators.sim.front_end import FrontEnd
from calculators.sim.workload import length_rows
from calculators.sim.warm_up import steps_since_idle
from reports.diagnostics.canary_speed import machine_speed
from reports.predict.external_calibration import (client_step_noise, decode_step_mean_s, front_end_from_means,
                                         step_in_progress_wait_s)
from reports.run_data import RunData
from contract.level_result import LevelResult
from contract.level_windows import inside

SLOW_BIN_S = 0.25          # the machine's slow speed: one factor per this much wall time of a window
MAX_BUSY_GAP_S = 0.25      # between two steps of a busy engine (a slow one is noise: kept; longer is a level's end)
QUANTILES = ("p50", "p95", "p99")
METRICS = ("ttft_s", "tpot_s", "e2e_s", "ttfa_s")   # ttfa_s: the first answer token (after any reasoning)
KEYS = tuple(f"{metric}.{q}" for metric in METRICS[:3] for q in ("p50", "p99"))   # what the validation judges
REASONING_KEYS = ("ttfa_s.p50", "ttfa_s.p99")   # judged too where a level reasoned (else they are TTFT's again)

LORA_COLUMNS = ("lora_adapters", "lora_tokens", "lora_loads", "lora_load_s")   # the step record's, StepRows.lora


@dataclass(frozen=True)
class StepRows:
    """One level's engine steps, in time order: [S] each."""

    batch: np.ndarray
    prefill_tokens: np.ndarray
    context_tokens: np.ndarray
    duration_s: np.ndarray
    window: np.ndarray | None = None     # [S] which of the level's windows (rounds, in time order) it ran in
    t_start: np.ndarray | None = None    # [S] unix s each began (the engine's clock)
    since_idle: np.ndarray | None = None  # [S] steps since the engine last waited (0: the first after a wait)
    lora: np.ndarray | None = None       # [S, 4] LoRA: adapters, their tokens, loads, load seconds (None: none ran)


@dataclass(frozen=True)
class LevelSample:
    """What one measured level gives a calibration, and what it measured."""

    level: str
    strategy: str
    kind: str                       # "concurrency" | "rate_rps"
    load: float                     # users; open loop: the requests/s its schedule sent in the measure
                                    # windows, not the nominal rate. A seeded Poisson schedule's realization
                                    # sent 7-12% fewer at 8-21 req/s (every level replays the same seeds, so
                                    # all were short together); where half the requests find the server idle
                                    # the TTFT p50 follows that (none, median error 23-25% at the nominal
                                    # rates, 13-17% at the rates sent, on two sweeps)
    warmup_s: float
    duration_s: float
    lengths: np.ndarray             # [n, 3] int64: each ok request's (prompt, output, reasoning) tokens (pairs are
                                    # taken too: no reasoning)
    measured: dict[str, dict[str, float | None]]   # {metric: {p50, p95, p99}}, from the level's Distributions
    output_tokens_per_s: float | None
    steps: StepRows | None = None
    front_end: FrontEnd | None = None
    server_means: tuple[float, float] | None = None   # (batch size mean, step time mean) from /metrics
    running_mean: float | None = None    # the /metrics running-requests gauge's mean
    engine_means: dict | None = None     # /metrics latency means {"queue_s", "prefill_s", "decode_s"} (those exported)
    prompt_tokens_per_s: float | None = None
    tpot_factors: np.ndarray = ()          # [F] float64; without a step record: the step noise the client saw, its
                                           # fast part (reports.predict.external_calibration.client_step_noise)
    tpot_paths: tuple[tuple[float, ...], ...] = ()   # and its slow part: one path per window, a factor per
                                                     # SLOW_BIN_S of the wall clock
    decode_step_s: float | None = None   # the client's decode time over its decode steps, s (the mean
                                         # tpot_factors are taken around; decode_step_mean_s)
    window_speeds: tuple[float, ...] = ()   # the canary's machine speed in each of its windows, in time
                                            # order (() when any is unknown)
    e2e_mean_s: float | None = None      # the client's mean E2E (Little's law: streams in flight, `streams`)
    models: np.ndarray | None = None     # [n] object: the model of each request sent in the measure window
                                         # (--model-mix runs; `_sent_models`), else None
    machine_speed: float | None = None   # the canary's: how much longer than the run's usual the engine's
                                         # cores took for the same work during the level (None: no canary);
                                         # `steps` stay as timed (lab.reports.error_sources tries them rescaled)

    def __post_init__(self) -> None:
        # arrays, not tuples of Python numbers: a 1,000,000-record run's levels hold a million of each, and
        # every calibration (one per held-out level) concatenates them
        object.__setattr__(self, "lengths", length_rows(self.lengths))
        object.__setattr__(self, "tpot_factors", np.asarray(self.tpot_factors, dtype=np.float64))

    @property
    def streams(self) -> float:
        """The requests in flight a new request meets at the front end, itself included: a closed
        loop's users (the others are its users less one); an open loop's 1 + rate x mean E2E (the
        mean in flight, Little's law, is what a Poisson arrival finds). The front end's delays follow
        this, not the load's label: requests/s and users are different units of load."""
        if self.kind == "concurrency" or not self.e2e_mean_s:
            return self.load
        return 1.0 + self.load * self.e2e_mean_s

    @property
    def requests(self) -> int:
        return len(self.lengths)

    @property
    def reasons(self) -> bool:
        """Did any of its requests reason before answering?"""
        return bool(len(self.lengths) and self.lengths[:, 2].any())

    @property
    def prompt_mean(self) -> float | None:
        return float(np.mean(self.lengths[:, 0])) if len(self.lengths) else None


def level_samples(data: RunData, levels: Sequence[LevelResult]) -> dict[str, list[LevelSample]]:
    """Each strategy's levels (those with an offered load and ok requests), ordered by load: each summary
    level (reports.summary's LevelResult) with what the calibration needs beside it from the run directory."""
    records = data.records
    windows = data.level_windows()
    ok = records[data.measured_ok()]
    by_level = dict(tuple(ok.groupby("level", sort=False, observed=True)))
    models_sent = _sent_models(records)
    steps = _effective_steps(data.engine_steps)
    cores = _engine_cores(data)
    joined = _join_engine_requests(ok, data.engine_requests)
    plan = data.run.load_plan
    out: dict[str, list[LevelSample]] = {}
    for lvl in levels:
        frame = by_level.get(lvl.level)
        if not lvl.offered or frame is None or lvl.strategy is None and data.run.target.kind != "url":
            continue
        kind, load = lvl.offered.kind, lvl.offered.value
        its_windows = sorted(windows.get(lvl.level, []))
        warmup = float(plan.warmup_s) if plan.warmup_s is not None else 0.0
        duration = float(plan.duration_s) if plan.duration_s is not None else float(lvl.duration_s or 0.0)
        if duration <= 0:
            continue
        sent = sum(lvl.statuses.values())   # its measure-phase records, in flight at the end included
        if kind == "rate_rps" and sent > 0:
            load = sent / duration   # the rate its schedule realized (see LevelSample.load)
        pairs = frame[["prompt_tokens", "output_tokens"]].assign(
            reasoning_tokens=frame["reasoning_tokens"].fillna(0) if "reasoning_tokens" in frame else 0).dropna()
        pairs = pairs[(pairs["prompt_tokens"] > 0) & (pairs["output_tokens"] > 0)
                      & (pairs["reasoning_tokens"] <= pairs["output_tokens"])].astype(int)
        # an external --url target's records say "unknown" (run.json's word for a strategy nobody told us)
        source = "url" if data.run.target.kind == "url" else lvl.strategy
        server = lvl.server   # free-form: the gauges the server exported
        means = ((server["batch_size_mean"], server["step_time_mean_s"])
                 if server.get("batch_size_mean") and server.get("step_time_mean_s") else None)
        speed = machine_speed(data.canary, its_windows, cores, source)
        per_window = [machine_speed(data.canary, [span], cores, source) for span in its_windows]
        level_steps = _level_steps(steps, source, its_windows)
        engine_means = {name: histogram.mean for name, histogram in lvl.server_latency.items()
                        if name in ("queue_s", "prefill_s", "decode_s") and histogram.mean is not None}
        decode_step = decode_step_mean_s(frame["tpot_s"], frame["output_tokens"])
        paths, factors = ((), ()) if level_steps is not None else _client_noise(frame)
        step_wait = step_in_progress_wait_s(decode_step, server.get("requests_running_mean"), kind, float(load))
        sample = LevelSample(
            level=lvl.level, strategy=source, kind=kind, load=float(load), warmup_s=warmup, duration_s=duration,
            lengths=pairs.to_numpy(dtype=np.int64),
            measured={m: {q: lvl.metrics[m].at(q) for q in QUANTILES} for m in METRICS},
            output_tokens_per_s=lvl.output_tokens_per_s, e2e_mean_s=lvl.metrics["e2e_s"].mean,
            steps=level_steps, machine_speed=speed,
            window_speeds=tuple(per_window) if per_window and None not in per_window else (),
            tpot_factors=factors, tpot_paths=paths,
            decode_step_s=decode_step,
            front_end=_level_front_end(joined.get(lvl.level), frame, engine_means, kind, load, duration, lvl,
                                       max(len(its_windows), 1), step_wait),
            server_means=means, running_mean=server.get("requests_running_mean"), engine_means=engine_means or None,
            prompt_tokens_per_s=lvl.prompt_tokens_per_s,
            models=models_sent.get(lvl.level))
        if len(sample.lengths):
            out.setdefault(source, []).append(sample)
    for samples in out.values():
        samples.sort(key=lambda s: s.load)
    return out


def _sent_models(records: pd.DataFrame) -> dict[str, np.ndarray]:
    """{level: the model each request sent in its measure window asked for} in a --model-mix run. Every
    request sent, not only those that finished: a rare adapter's requests wait longest for a slot, so
    more of them are still in flight at the window's end, and the finished ones alone under-count them."""
    if "model" not in records.columns or records["model"].isna().all():
        return {}
    sent = records[records["phase"] == "measure"]
    return {str(level): group["model"].astype(object).fillna("").to_numpy(dtype=object)
            for level, group in sent.groupby("level", sort=False, observed=True)}


def _engine_cores(data: RunData) -> list[int]:
    """The cores the engine ran on (run.json's pinning), else every core the canary timed."""
    pinning = data.run.cpu_pinning
    cores = (pinning.engine_cpus or pinning.server_cpus) if pinning is not None else None
    if cores:
        return list(cores)
    return sorted({int(c) for c in data.canary["core"]}) if data.canary is not None else []


def at_usual_speed(sample: LevelSample, by_window: bool = False) -> LevelSample:
    """The level with its steps as they would have taken at the run's usual machine speed (the canary's):
    each divided by the level's speed, or with `by_window` by its own window's (where known)."""
    if sample.steps is None or sample.machine_speed is None:
        return sample
    speed: float | np.ndarray = sample.machine_speed
    if by_window and sample.window_speeds and sample.steps.window is not None:
        speed = np.asarray(sample.window_speeds)[sample.steps.window]
    return replace(sample, steps=replace(sample.steps, duration_s=sample.steps.duration_s / speed))


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
        since_idle = steps_since_idle(idle)   # over the server's whole record: a level's first step knows its past
        to_next = np.append(np.diff(start), np.nan)
        # an engine still busy goes straight on; a gap this long is a level's end (its last requests aborted)
        busy = ~idle & np.isfinite(to_next) & (to_next >= own) & (to_next - own < MAX_BUSY_GAP_S)
        gap = float(np.median(to_next[busy] - own[busy])) if busy.any() else 0.0
        duration = np.where(busy, to_next, own + gap)
        parts.append(pd.DataFrame({"source": frame["source"].to_numpy(), "t_start": start,
                                   "batch": frame["batch"].to_numpy(float),
                                   # a verification's proposals are priced as prompt tokens
                                   # (calculators.sim.speculative_step): one regressor for both
                                   "prefill_tokens": (frame["prefill_tokens"] + frame["proposal_tokens"].fillna(0)).to_numpy(float),
                                   "context_tokens": frame["context_tokens"].to_numpy(float),
                                   "duration_s": duration, "since_idle": since_idle,
                                   **{name: frame[name].fillna(0).to_numpy(float) for name in LORA_COLUMNS}}))
    return pd.concat(parts, ignore_index=True)


def _level_steps(steps: pd.DataFrame | None, source: str, windows: list[tuple[float, float]]) -> StepRows | None:
    """The level's engine steps: its server's, inside its windows (one per round)."""
    if steps is None:
        return None
    rows = steps[(steps["source"].astype(str) == source) & inside(steps["t_start"].to_numpy(dtype=float), windows)]
    if rows.empty:
        return None
    starts = rows["t_start"].to_numpy(dtype=float)
    window = np.searchsorted([start for start, _ in windows], starts, side="right") - 1   # windows: sorted
    lora = rows[list(LORA_COLUMNS)].to_numpy(float)
    return StepRows(rows["batch"].to_numpy(), rows["prefill_tokens"].to_numpy(), rows["context_tokens"].to_numpy(),
                    rows["duration_s"].to_numpy(), np.clip(window, 0, len(windows) - 1), starts,
                    rows["since_idle"].to_numpy(), lora if lora[:, 0].any() else None)


def _client_noise(frame: pd.DataFrame) -> tuple[tuple, np.ndarray]:
    """A level's step noise from its client records alone (no step record): slow paths per round, fast factors."""
    window = frame["round"].fillna(0).to_numpy() if "round" in frame.columns else None
    return client_step_noise(frame["tpot_s"], frame["output_tokens"], frame["t_start"] + frame["ttft_s"], window,
                             SLOW_BIN_S)


def _join_engine_requests(ok: pd.DataFrame, engine: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """The level's ok records joined with the engine's request record, for the front end's delays. A reply
    that called a tool is left out: its client's first token is the call's name, many engine tokens after
    the engine's first (`contract.agent_session.CALL_NAME_TOKENS`), so its `first_out` would be decode time."""
    if engine is None or "response_id" not in ok.columns:
        return {}
    if "tool_calls" in ok.columns:
        ok = ok[~(ok["tool_calls"] > 0)]
    columns = ["response_id", "t_arrival", "t_first_token", "t_finish"]
    merged = ok[["level", "response_id", "t_start", "ttft_s", "e2e_s"]].merge(
        engine[columns].drop_duplicates("response_id"), on="response_id", how="inner")
    merged = merged.dropna(subset=["t_start", "ttft_s", "e2e_s", "t_arrival", "t_first_token", "t_finish"])
    return dict(tuple(merged.groupby("level", sort=False, observed=True)))


def _level_front_end(joined: pd.DataFrame | None, frame: pd.DataFrame, engine_means: dict, kind: str, load: float,
                     duration: float, lvl: LevelResult, rounds: int = 1, step_wait_s: float = 0.0) -> FrontEnd | None:
    """Per request from the engine's request record (`joined`), else from the engine's /metrics means
    (`reports.predict.external_calibration`, less `step_wait_s`: the wait for the step in progress, which the
    engine's request record times and its means do not), else None. rounds: the windows the level was
    measured in; each user loses about one cycle to each one's edges."""
    think = 0.0
    if kind == "concurrency" and lvl.ok:
        think = closed_loop_think_s(int(load) * rounds, duration / rounds, int(lvl.ok),
                                    float(lvl.metrics["e2e_s"].mean))
    if joined is None or joined.empty:
        return front_end_from_means(frame["ttft_s"].to_numpy(float), frame["e2e_s"].to_numpy(float),
                                    engine_means, think, step_wait_s)
    return fit_front_end(joined["t_start"], joined["ttft_s"], joined["e2e_s"], joined["t_arrival"],
                         joined["t_first_token"], joined["t_finish"], think_s=think)

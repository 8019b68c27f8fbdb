"""The simulator's calibration from a run's levels, and a prediction from it.

    calibrate(samples, server)     -> Calibration                  from any subset of one strategy's levels
    predict(calibration, target)   -> Replicated                   one load level, simulated R times

(the samples: `reports.predict.evidence`). Sources, best first (``Calibration.sources`` says which were
used, ``unavailable`` what was not):
- step time and its noise: the engine's step record: each step's effective duration against its
  batch, prefill tokens and context, fitted robustly on every calibration level, and each level's
  residuals split into the machine's slow speed (per 0.25 s of each window, `calculators.sim.step_noise`)
  and the fast rest kept in order for the simulator's block bootstrap: a prediction replays the slow
  paths and draws the fast runs of the levels around its own output tokens/s (the noise is not one
  spread: at low load a slow step is several times a short one, at high load a fraction of a long
  one; pooled, the quiet levels' tails would land on the busy ones), the slow paths scaled to every
  level's mean, and the engine's warm-up (its first steps after a wait, `calculators.sim.warm_up`) fitted
  on every level's fast residuals and taken out of them; else the per-level means of the /metrics
  step-time and batch-size histograms; else the client's decode time per step against the running sequences, with
  the engine's /metrics prefill means where it exports them; without a step record the noise is each request's
  TPOT over its level's mean, split into the machine's slow speed and the fast rest as the step record's is
  (`reports.predict.external_calibration`);
- front-end delays: per level (the front end slows with the load it carries), as the level
  samples give them, with the closed loop's think time from Little's law; else none (the
  engine's clock is taken for the client's);
- workload: the (prompt, output) lengths the calibration levels measured, and the run's arrival
  process (run.json's load plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from calculators.sim.calibrate import fit_step_model, fit_step_time, residual_runs, step_residuals
from calculators.sim.lora_step import LoraServing
from contract.model_mix import ModelMix
from calculators.sim.front_end import FrontEndByLoad
from calculators.sim.front_end_curves import QUEUE
from calculators.sim.replicate import Replicated, simulate_replicated
from calculators.sim.simulate import SimServer, SimWorkload
from calculators.sim.step_model import StepTimeModel
from calculators.sim.step_noise import split_slow
from calculators.sim.warm_up import MIN_WAITS, fit_warm_up, without_warm_up
from engine_core.scheduling.strategies import get_strategy, limits_from_flags  # the pure registry
from reports.predict.external_calibration import fit_steps_from_levels, running_while_stepping
from reports.predict.evidence import SLOW_BIN_S, LevelSample
from reports.predict.lora_calibration import calibrate_lora
from contract.arrivals import parse_arrival
from contract.run_json import RunInfo

JITTER_BLOCK = 64          # residuals drawn in runs of this many steps: about one request's decode
MIN_STEPS = 50             # fewer recorded steps than this: fit from the fallbacks instead


@dataclass(frozen=True)
class Calibration:
    strategy: str
    server: SimServer
    step_model: StepTimeModel
    lengths: np.ndarray                              # [n, 2] int64: (prompt, output) tokens, its levels' pairs
    arrival_cv2: float
    front_end: FrontEndByLoad | None
    levels: tuple[str, ...]                          # the levels it was fitted on
    sources: dict = field(default_factory=dict)      # what each input came from
    unavailable: tuple[str, ...] = ()
    counts: tuple[tuple[float, int], ...] = ()       # (load, measured requests per second of window)
    # (level's output tokens/s, its fast residual runs, its slow paths: one per window)
    residuals: tuple[tuple[float, tuple[float, ...], tuple[tuple[float, ...], ...]], ...] = ()
    open_front_end: FrontEndByLoad | None = None     # the calibration stage's open-loop levels' (`calibrate`)
    front_end_open_loop: bool = False                # front_end was measured under open arrivals (bursts in it)
    model_mix: ModelMix | None = None                # a LoRA run's measured mix of models (`calibrate_lora`)

    @cached_property
    def slow_factors(self) -> np.ndarray:
        """Every calibration level's slow-path factors, one per SLOW_BIN_S of its windows, end to end."""
        return np.array([f for _, _, paths in self.residuals for path in paths for f in path], dtype=float)

    def step_model_at(self, tokens_per_s: float | None) -> StepTimeModel:
        """The step model with the residuals of the calibration levels around `tokens_per_s` (the two
        that bracket it in log throughput, pooled; past either end the nearest one); all of them
        pooled when there is no throughput or only one level's. Their slow paths are scaled to the
        mean factor of every calibration level's paths (each bin is equal wall time)."""
        if not self.residuals:
            return self.step_model
        picked = list(range(len(self.residuals)))
        if tokens_per_s is not None and tokens_per_s > 0 and len(self.residuals) > 1:
            x = np.log([rate for rate, _, _ in self.residuals])
            target = math.log(tokens_per_s)
            above = int(np.searchsorted(x, target))
            picked = [above - 1, above] if 0 < above < len(x) else [min(above, len(x) - 1)]
            if 0 < above < len(x) and x[above] == target:
                picked = [above]
        jitter = sum((self.residuals[i][1] for i in picked), ())   # the picked levels' runs, end to end
        paths = tuple(path for i in picked for path in self.residuals[i][2])
        if not jitter:
            return self.step_model
        if paths:
            # the machine's mean speed from every calibration level, its swings from the neighbours: a
            # level's own mean is mostly the drift it happened to meet (level speeds did not repeat
            # between two sweeps), and one neighbour's drift would land whole on the prediction
            scale = self.slow_factors.mean() / np.mean([f for path in paths for f in path])
            paths = tuple(tuple(f * scale for f in path) for path in paths)
        return replace(self.step_model, jitter=jitter, slow_paths=paths, slow_bin_s=SLOW_BIN_S if paths else 0.0)

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
        if m.warm_up:
            out["step_model"]["warm_up"] = list(m.warm_up)
        lora = self.server.lora
        if lora is not None:
            out["lora"] = {"max_loras": lora.max_loras, "per_adapter_ms": lora.per_adapter_s * 1e3,
                           "per_lora_token_us": lora.per_lora_token_s * 1e6, "load_ms": lora.load_s * 1e3,
                           "mix": None if self.model_mix is None else len(self.model_mix.names)}
        if self.slow_factors.size:   # the machine's slow speed per bin, over its mean: how far it swung
            slow = self.slow_factors / self.slow_factors.mean()
            out["step_model"]["slow"] = {"bin_s": SLOW_BIN_S, "paths": sum(len(p) for _, _, p in self.residuals),
                                         "p1": float(np.percentile(slow, 1)), "p99": float(np.percentile(slow, 99))}
        return out


# -- the server each strategy ran -----------------------------------------------------------------
def strategy_limits(config: dict):
    """The strategy's limits (the registry's Limits) from the merged config's flat fields; a field
    the config lacks takes the strategy's default."""
    spec = get_strategy(config["strategy"])
    return limits_from_flags(spec.name, {k: config[k] for k in spec.limits.field_names() if config.get(k) is not None})


def server_config(run: RunInfo, strategy: str) -> SimServer:
    """The simulator's SimServer for what `strategy` ran with (run.json's engine description)."""
    config = run.server.engine_config(strategy)
    blocks = config.get("num_kv_blocks") or config.get("kv_blocks")
    lora = config.get("lora")   # the engine served LoRA adapters: their slots (the costs come from the steps)
    serving = LoraServing(int(lora["max_loras"]), adapters=tuple(lora.get("adapters") or ())) \
        if isinstance(lora, dict) and lora.get("max_loras") else None
    return SimServer(limits=strategy_limits(config), num_kv_blocks=int(blocks) if blocks else None,
                        block_size=int(config.get("block_size") or 16), lora=serving)


def strategy_server(run: RunInfo, strategy: str) -> SimServer:
    """`server_config` for a level sample's strategy key: an external --url target's levels ("url", a
    server whose batching nobody told us) are simulated as continuous batching."""
    return server_config(run, "continuous" if strategy == "url" else strategy)


def arrival_cv2(run: RunInfo) -> float:
    """The open-loop gaps' squared coefficient of variation (`ArrivalProcess.cv2`) of run.json's
    `load_plan.arrival`; 1.0, the simulator's default, for a closed loop or a trace (which have no
    gaps to draw) and for an arrival it cannot read."""
    try:
        process = parse_arrival(str(run.load_plan.arrival or "poisson"), 1.0)   # any rate: cv² does not depend on it
    except ValueError:
        return 1.0
    return process.cv2 if process.open_loop else 1.0


# -- calibrating ----------------------------------------------------------------------------------
def calibrate(samples: list[LevelSample], server: SimServer, cv2: float = 1.0,
              stage: list[LevelSample] | tuple = ()) -> Calibration:
    """One strategy's calibration from `samples` (any subset of its levels); ValueError if nothing fits.
    `stage`: the calibration stage's levels (`reports.predict.stage`): their steps join the step
    model's fit and noise, and an open-loop one gives the front end under open arrivals
    (`Calibration.open_front_end`); the workload, the front end's load curve and the counts stay
    `samples`'."""
    if not samples:
        raise ValueError("no levels to calibrate on")
    sources, unavailable = {}, []
    stepped = [*samples, *stage]
    server, stepped, model_mix = calibrate_lora(server, stepped, samples, sources, MIN_STEPS)
    samples, stage = stepped[:len(samples)], stepped[len(samples):]
    model = _fit_steps(stepped, server, sources, unavailable)
    residuals, warm_up = _level_residuals(stepped, model)
    if residuals:
        slow = any(paths for _, _, paths in residuals)
        sources["step_noise"] = (f"each level's residuals ({len(residuals)} levels"
                                 + (f"; split into the machine's slow speed per {SLOW_BIN_S} s and the fast rest"
                                    if slow else "")
                                 + "); a prediction draws those of the levels around its output tokens/s"
                                 + (", the slow paths at every level's mean" if slow else ""))
        if warm_up:
            sources["warm_up"] = (f"the first {len(warm_up)} steps after the engine waited, fitted on the fast "
                                  f"residuals of every level: {warm_up[0]:.2f}x the first, {warm_up[1]:.2f}x "
                                  f"the second, {warm_up[-1]:.2f}x the last")
        elif any(s.steps is not None and s.steps.since_idle is not None for s in samples):
            unavailable.append(f"the engine's warm-up after a wait: fewer than {MIN_WAITS} waits in the "
                               "calibration levels' steps (predicted without it)")
        model = replace(model, warm_up=warm_up)
    fronts = [s for s in samples if s.front_end is not None]
    front = None
    if len(fronts) == len(samples):
        front = FrontEndByLoad(tuple(s.streams for s in fronts), tuple(s.front_end for s in fronts),
                               tuple(s.output_tokens_per_s or 0.0 for s in fronts))
        split = ("client records joined with engine_requests.csv per level" if all(s.steps is not None for s in samples)
                 else "client records less the engine's /metrics queue, prefill and decode means per level")
        sources["front_end"] = (split + "; means "
                                + (f"as a {front.shape} (the better of two shapes, each level left out in turn)"
                                   if front.shape else "interpolated in log(load)"))
    else:
        unavailable.append("front-end delays: no engine request record to join the client's records with "
                           "(predicted on the engine's clock)")
    opened = [s for s in stage if s.kind == "rate_rps" and s.front_end is not None]
    open_front = None
    if front is not None and opened and all(s.kind == "concurrency" for s in samples):
        open_front = FrontEndByLoad(tuple(s.streams for s in opened), tuple(s.front_end for s in opened),
                                    tuple(s.output_tokens_per_s or 0.0 for s in opened))
        sources["open_front_end"] = (f"the calibration stage's open-loop level{'s' if len(opened) > 1 else ''} "
                                     f"({', '.join(s.level for s in opened)}): an open loop's delays are its, "
                                     "moved along the closed loop's curve to the streams asked")
    if stage:
        sources["stage"] = f"the calibration stage's levels: {', '.join(s.level for s in stage)} (their steps too)"
    lengths = np.concatenate([s.lengths for s in samples])
    sources["workload"] = f"{len(lengths)} measured (prompt, output) lengths"
    counts = tuple((s.load, s.requests / s.duration_s) for s in samples)
    return Calibration(samples[0].strategy, server, model, lengths, cv2, front, tuple(s.level for s in samples),
                       sources, tuple(unavailable), counts, residuals, open_front,
                       front_end_open_loop=any(s.kind == "rate_rps" for s in fronts), model_mix=model_mix)


def _level_residuals(samples: list[LevelSample], model: StepTimeModel) -> tuple[tuple, tuple[float, ...]]:
    """((output tokens/s, fast residual runs, slow paths) per level with recorded steps (or the client's
    TPOT factors: no slow paths) and a throughput, by throughput; the engine's warm-up after a wait,
    fitted on every level's fast residuals and divided out of them). Empty when the model has no
    residuals."""
    if not model.jitter:
        return (), ()
    levels = []   # (tokens/s, fast factors [S], steps since a wait [S] or None, slow paths)
    for s in samples:
        if not s.output_tokens_per_s:
            continue
        paths: tuple = ()
        if s.steps is not None and s.steps.t_start is not None:
            modelled = model.steps_s(s.steps.batch, s.steps.prefill_tokens, s.steps.context_tokens)
            paths, ratios = split_slow(s.steps.duration_s, modelled, s.steps.t_start, s.steps.window, SLOW_BIN_S)
        elif s.steps is not None:
            ratios = step_residuals(model, s.steps.batch, s.steps.duration_s, s.steps.prefill_tokens,
                                    s.steps.context_tokens)
        elif len(s.tpot_factors):
            ratios, paths = s.tpot_factors, s.tpot_paths
        else:
            continue
        levels.append((float(s.output_tokens_per_s), ratios, None if s.steps is None else s.steps.since_idle, paths))
    timed = [(ratios, since) for _, ratios, since, _ in levels if since is not None]
    curve = fit_warm_up(np.concatenate([r for r, _ in timed]), np.concatenate([k for _, k in timed])) if timed else ()
    out = []
    for rate, ratios, since, paths in levels:
        runs = residual_runs(ratios if since is None else without_warm_up(ratios, since, curve), model.jitter_block)
        if runs:
            out.append((rate, runs, paths))
    return tuple(sorted(out, key=lambda entry: entry[0])), curve


def _fit_steps(samples: list[LevelSample], server: SimServer, sources: dict, unavailable: list) -> StepTimeModel:
    with_steps = [s.steps for s in samples if s.steps is not None]
    if sum(len(rows.batch) for rows in with_steps) >= MIN_STEPS:
        cat = {name: np.concatenate([getattr(rows, name) for rows in with_steps])
               for name in ("batch", "prefill_tokens", "context_tokens", "duration_s")}
        model = fit_step_model(cat["batch"], cat["duration_s"], cat["prefill_tokens"], cat["context_tokens"],
                               jitter_block=JITTER_BLOCK, robust=True, batch_table=True)
        sources["step_time"] = f"engine_steps.csv: {len(cat['batch'])} steps, robust fit, residuals in runs of {JITTER_BLOCK}"
        return model
    points = [s.server_means for s in samples if s.server_means]
    if len({round(p[0], 3) for p in points}) >= 2:
        fit = fit_step_time([p[0] for p in points], [p[1] for p in points])
        sources["step_time"] = "per-level means of the /metrics step-time and batch-size histograms"
        model = StepTimeModel(base_s=max(fit.base_s, 1e-6), per_seq_s=max(fit.per_seq_s, 0.0))
    else:
        cap = server.limits.max_running
        model, prefill_rows = fit_steps_from_levels([
            {"batch": running_while_stepping(s.running_mean, s.kind, s.load, cap), "tpot_s": s.decode_step_s or s.measured["tpot_s"]["p50"],
             "prompt_tokens_per_s": s.prompt_tokens_per_s, "prompt_mean": s.prompt_mean,
             "prefill_s": (s.engine_means or {}).get("prefill_s")} for s in samples])
        sources["step_time"] = ("client decode time per decode step against the running sequences per level"
                                + (", with the engine's /metrics prefill means" if prefill_rows else ""))
        unavailable.append("engine step and /metrics step histograms: step time inferred from the client's TPOT"
                           + ("" if prefill_rows else " (no prefill means: prompts cost nothing)"))
    factors = np.concatenate([np.asarray(s.tpot_factors, dtype=float) for s in samples])
    if not factors.size:
        unavailable.append("step-time noise: no engine step record (the step time is a mean, without its spread)")
        return model
    unavailable.append("step-time noise: no engine step record; each request's TPOT over its level's mean stands "
                       "in for it (its rounds' slow speed per bin of first tokens, and the rest in runs of its "
                       "decode steps; single steps are not seen from the client)")
    return replace(model, jitter=residual_runs(factors, JITTER_BLOCK), jitter_block=JITTER_BLOCK)


# -- predicting -----------------------------------------------------------------------------------
def predict(calibration: Calibration, kind: str, load: float, warmup_s: float, duration_s: float, *,
            replications: int = 8, seed: int = 0, requests: int | None = None,
            machine_speed: float | tuple[float, ...] | None = None,
            arrival_times: tuple[float, ...] = ()) -> Replicated:
    """One level of `load` users (kind "concurrency") or requests/s ("rate_rps"), measured as the sweep
    measures: requests sent in [warmup_s, warmup_s + duration_s) that finished by its end; or, given
    `requests`, that many per run, the first 10% and a closed loop's last `load` left out (a machine
    far faster than the calibration's would need millions of requests to fill the same window).
    `machine_speed`: the step model scaled by it (a machine that many times slower than the one the
    calibration's steps were timed on; lab.reports.error_sources' canary variants); a tuple: one such
    factor per equal part of the measure window, in order (a level measured in rounds, each at its
    own speed; the warm-up at the first); None: as calibrated. `arrival_times`: an open loop's send
    times (s from the level's start) replayed instead of drawn (a measured level's own arrivals)."""
    window = {} if requests else {"warmup_s": warmup_s, "duration_s": duration_s}
    replayed = bool(arrival_times) and kind == "rate_rps"
    workload = SimWorkload(lengths=calibration.lengths, **window,
                        requests=requests or _requests_guess(calibration, kind, load, warmup_s + duration_s),
                        concurrency=int(load) if kind == "concurrency" else None,
                        rate_rps=float(load) if kind == "rate_rps" and not replayed else None,
                        arrival_times=tuple(arrival_times) if replayed else (),
                        arrival_cv2=calibration.arrival_cv2, seed=seed, model_mix=calibration.model_mix)
    front = calibration.front_end
    speeds: tuple[tuple[float, float], ...] = ()
    if isinstance(machine_speed, tuple):
        part = duration_s / len(machine_speed)
        speeds = tuple((0.0 if k == 0 else warmup_s + k * part, float(f)) for k, f in enumerate(machine_speed))
    elif machine_speed is not None:
        calibration = replace(calibration, step_model=calibration.step_model.scaled(machine_speed))
    tokens_per_s, streams, window = None, load, 0.0
    if front is not None and kind == "rate_rps":
        # the front end's load is the streams a request meets (LevelSample.streams): an open loop's
        # come from Little's law on a first run on the engine's clock, plus the delays they meet
        first = simulate_replicated(calibration.server, workload, calibration.step_model, None, replications=1,
                                    speeds=speeds)
        tokens_per_s = first.output_tokens_per_s
        engine_streams = load * first.runs[0].engine_metrics["e2e_s"]["mean"]
        delays = front.at(max(engine_streams, front.loads[0]), tokens_per_s).mean_s
        window = engine_streams / load + delays["in_s"] + delays["last_out_s"]   # the mean E2E: each send's
        streams = max(1.0 + load * window, front.loads[0])   # what an arrival meets (LevelSample.streams)
    elif calibration.residuals or (front is not None and front.shape == QUEUE):
        # the step noise (and a queue-shaped front end) follow the output rate: first find it, with one run
        first = simulate_replicated(calibration.server, workload, calibration.step_model,
                                    front.at(load) if front is not None else None, replications=1, speeds=speeds)
        tokens_per_s = first.output_tokens_per_s
    if calibration.front_end_open_loop:
        window = 0.0   # its delays were measured under open arrivals: their bursts are in them already
    delays = None if front is None else front.at(streams, tokens_per_s, burst_window_s=window)
    if front is not None and kind == "rate_rps" and calibration.open_front_end is not None:
        # measured under open arrivals: the open level's own delays (their bursts in them), moved along
        # the closed loop's curve from that level's streams to these
        opened = calibration.open_front_end
        k = opened.nearest(streams)
        delays = front.along(opened.front_ends[k], (opened.loads[k], opened.tokens_per_s[k] or None),
                             (streams, tokens_per_s))
    return simulate_replicated(calibration.server, workload, calibration.step_model_at(tokens_per_s), delays,
                               replications=replications, speeds=speeds)


def _requests_guess(calibration: Calibration, kind: str, load: float, horizon_s: float) -> int:
    """Requests to draw: the measured rate at the nearest calibration load, scaled up with the load,
    over the whole run, with room to spare (unused ones cost only their lengths)."""
    if kind == "rate_rps":
        return int(load * horizon_s * 1.5) + 100
    nearest_load, rate = min(calibration.counts, key=lambda c: abs(math.log(c[0] / load)))
    return int(rate * max(load / nearest_load, 1.0) * horizon_s * 2) + int(load) + 100

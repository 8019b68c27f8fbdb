"""`servecap predict`: a measured run's calibration -> predicted latency curves and the most load
an SLO allows, without running any load. Pure over a loaded `RunData` (the CLI reads and writes).

    predict_run(data, plan) -> {"calibration": {...}, "strategy", "arrival", "workload", "slo",
                                "extrapolation": note | None,
                                "distance": {prompt_tokens, output_tokens, arrivals, factor}  (coverage.py)
                                "loads": [{"offered", "metrics": {ttft_s: {p50: {value, interval}, ...}},
                                           "request_rate_rps", "output_tokens_per_s", "mean_batch_size",
                                           "distance": {load_factor, factor, interval_widened_by},
                                           "meets_slo", "why_not"}],
                                "max_load_under_slo": {"offered", "basis"} | None}

The calibration is `reports.predict.calibration.calibrate` on every level of the strategy. Lengths are
the run's measured (prompt, output, reasoning) rows unless --prompt-tokens / --output-tokens /
--reasoning-tokens give others (loadgen's syntax, sampled with the seed). Reasoning tokens are part of
the output, as a reasoning model's server counts them (each capped at its request's output tokens):
the answer's first token (ttfa_s, with its SLO) waits for them, decoded like any other token. The answer says how far the what-if lies from what was
calibrated (`reports.predict.coverage`), and each interval is widened for that distance. With `gpu`, the step model is extrapolated to that
catalog GPU (`calculators.sim.gpu_extrapolation`): the answer then says it is an extrapolation.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import numpy as np

from calculators.sim.calibrate import calibrate_roofline
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.sim.gpu_extrapolation import extrapolate_to_gpu
from calculators.sim.simulate import EmptyWindow
from calculators.sim.speculative_step import SpeculativeStep, draft_step_model
from calculators.sim.step_model import StepTimeModel
from calculators.speculative_crossover import crossover
from engine_core.scheduling.speculative import check_share, per_position_acceptance
from contract.arrivals import parse_arrival
from contract.distributions import parse_length_distribution
from contract.model_mix import parse_model_mix
from reports.predict.calibration import Calibration, arrival_cv2, calibrate, predict, strategy_server
from reports.predict.coverage import calibrated, distance, load_factor, widened, widening
from reports.predict.evidence import level_samples
from reports.predict.stage import stage_samples
from reports.cost import catalog_gpu_for
from reports.run_data import RunData
from reports.summary import build_levels
from contract.slo import LATENCY_COLUMNS, SLO, judge_p99s

SAMPLED_LENGTHS = 4096   # (prompt, output) pairs drawn when the lengths are given as distributions
EXTRAPOLATED_REQUESTS = 2000   # per run on another GPU: measured by count (its window would hold millions)


@dataclass(frozen=True)
class SpeculativeAsk:
    """A what-if with speculative decoding: `method` (ngram | draft), k proposals, the acceptance (one rate,
    or one per position as vLLM reports them), and for `draft` the draft model: a catalog name
    (`model`, timed by its roofline on --gpu) or its own calibration run's step model (`draft_steps`);
    `proposal_share`: the share of decodes that propose (prompt lookup finds no match in the others)."""

    method: str
    num_tokens: int
    acceptance: tuple[float, ...]
    model: str | None = None
    draft_steps: StepTimeModel | None = None
    proposal_share: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in ("draft", "ngram"):
            raise ValueError(f"--speculative-method must be draft or ngram, got {self.method!r}")
        if self.method == "ngram" and (self.model or self.draft_steps is not None):
            raise ValueError("--speculative-model and --speculative-draft-calibration are for --speculative-method draft")
        if self.model and self.draft_steps is not None:
            raise ValueError("give the draft's step time one way: --speculative-model (its roofline on --gpu) or "
                             "--speculative-draft-calibration (a run of it), not both")
        object.__setattr__(self, "acceptance", per_position_acceptance(self.acceptance, self.num_tokens))
        check_share(self.proposal_share)

    def step(self, gpu: str | None, dtype: str) -> SpeculativeStep:
        """The simulator's SpeculativeStep: the draft's passes from its calibration, or on a GPU its roofline."""
        draft = None
        if self.method == "draft":
            if gpu and self.model:
                draft = draft_step_model(get_model(self.model), get_gpu(gpu), dtype=dtype)
            elif self.draft_steps is not None and not gpu:
                draft = self.draft_steps
            elif self.draft_steps is not None:
                raise ValueError("--speculative-draft-calibration times the draft on the machine it ran on, not on "
                                 "--gpu: give --speculative-model (its roofline there) instead")
            else:
                raise ValueError("--speculative-method draft needs the draft's step time: --speculative-draft-calibration "
                                 "RUN_DIR (a run of the draft model), or --speculative-model with --gpu")
        return SpeculativeStep(self.num_tokens, self.acceptance, draft, self.proposal_share)


@dataclass(frozen=True)
class PredictPlan:
    """What to predict. Exactly one of `concurrency` (closed loop) and `rates` (open loop, `arrival`)."""

    strategy: str | None = None
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    arrival: str = "poisson"
    prompt_tokens: str | None = None
    output_tokens: str | None = None
    reasoning_tokens: str | None = None   # of each output, the reasoning before the answer
    slo: SLO = field(default_factory=SLO)
    gpu: str | None = None
    replications: int = 8
    warmup_s: float | None = None      # default: the run's own windows
    duration_s: float | None = None
    seed: int = 0
    speculative: SpeculativeAsk | None = None
    max_loras: int | None = None       # what-if: another count of LoRA slots (a LoRA calibration run's costs)
    model_mix: str | None = None       # what-if: another mix of adapters (contract.model_mix's syntax)

    def __post_init__(self) -> None:
        if self.max_loras is not None and (isinstance(self.max_loras, bool) or not isinstance(self.max_loras, int)
                                           or self.max_loras < 1):
            raise ValueError(f"--max-loras must be a positive integer, got {self.max_loras!r}")
        if self.model_mix is not None:
            parse_model_mix(self.model_mix)   # ValueError names the bad part
        if bool(self.concurrency) == bool(self.rates):
            raise ValueError("give exactly one of --concurrency and --rates")
        if any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in self.concurrency):
            raise ValueError("--concurrency values must be positive integers")
        if any(not r > 0 for r in self.rates):
            raise ValueError("--rates values must be positive")
        if self.rates and self.arrival == "closed":
            raise ValueError("--arrival closed is --concurrency; --rates needs poisson, constant or gamma:CV")
        if isinstance(self.replications, bool) or not isinstance(self.replications, int) or self.replications < 1:
            raise ValueError("--replications must be a positive integer")


def _lora_what_if(plan: PredictPlan, calibration: Calibration) -> Calibration:
    """--max-loras / --model-mix: the same adapters' step costs (the calibration run's) with other slots or
    another mix of requests; ValueError when the run served no adapters (nothing priced them)."""
    if plan.max_loras is None and plan.model_mix is None:
        return calibration
    lora = calibration.server.lora
    if lora is None:
        raise ValueError("--max-loras and --model-mix need a calibration run whose server served LoRA adapters "
                         "(`servecap sweep --server-args \"--enable-lora ...\" --model-mix ...`): its steps price them")
    if plan.max_loras is not None:
        lora = replace(lora, max_loras=plan.max_loras)
    mix = parse_model_mix(plan.model_mix) if plan.model_mix is not None else calibration.model_mix
    return replace(calibration, server=replace(calibration.server, lora=lora), model_mix=mix)


def predict_run(data: RunData, plan: PredictPlan) -> dict:
    levels = build_levels(data, data.run.slo)
    samples = level_samples(data, levels)
    strategy = _strategy(plan.strategy, samples)
    group = samples[strategy]
    server = strategy_server(data.run, strategy)
    cv2 = 1.0 if plan.concurrency else parse_arrival(plan.arrival, plan.rates[0]).cv2   # 1.0: unused, closed loop
    stage = stage_samples(data.run_dir, strategy)
    calibration = calibrate(group, server, cv2, stage)
    calibration = replace(calibration, lengths=_lengths(plan, calibration.lengths))
    calibration = _lora_what_if(plan, calibration)
    extrapolation = None
    if plan.gpu and calibration.server.lora is not None:
        raise ValueError("--gpu extrapolates a plain engine's steps through the roofline; a run that served LoRA "
                         "adapters has CPU-measured adapter costs that would not move with it")
    if plan.gpu:
        calibration, extrapolation = _on_gpu(data, calibration, group, plan.gpu)
    warmup = plan.warmup_s if plan.warmup_s is not None else group[0].warmup_s
    duration = plan.duration_s if plan.duration_s is not None else group[0].duration_s
    kind = "concurrency" if plan.concurrency else "rate_rps"
    coverage = calibrated([*group, *stage], arrival_cv2(data.run))   # a closed-loop run's: 1.0, the stage's Poisson
    away = distance(coverage, calibration.lengths, kind, cv2)
    speculating = None
    _refuse_speculating_calibration(data, strategy)
    if plan.speculative is not None:
        step = plan.speculative.step(plan.gpu, str(data.run.server.dtype or "bf16"))
        speculating = replace(calibration, server=replace(calibration.server, speculative=step))
    rows, outside = [], []
    for load in plan.concurrency or plan.rates:
        count = max(EXTRAPOLATED_REQUESTS, 50 * int(load)) if extrapolation else None
        try:
            result = predict(calibration, kind, float(load), warmup, duration, replications=plan.replications,
                             seed=plan.seed, requests=count)
        except EmptyWindow:   # every request outlasts the window: past what it measures; the others still answer
            outside.append(load)
            continue
        side = None
        if speculating is not None:
            try:
                side = predict(speculating, kind, float(load), warmup, duration, replications=plan.replications,
                               seed=plan.seed, requests=count)
            except EmptyWindow:
                outside.append(load)
        # the predicted p99s (each the median over replications of a simulated run's) to the SLO's limits;
        # the simulator fails no request
        check = judge_p99s(plan.slo, {m: result.value(m, "p99") for m in LATENCY_COLUMNS}, error_rate=0.0)
        beyond = load_factor(coverage, result.output_tokens_per_s)
        share = widening(away["factor"] * beyond)
        rows.append({"offered": {kind: load}, "metrics": widened(result.metrics, share),
                     "request_rate_rps": result.request_rate_rps,
                     "output_tokens_per_s": result.output_tokens_per_s, "mean_batch_size": result.mean_batch_size,
                     "distance": {"load_factor": beyond, "factor": away["factor"] * beyond, "interval_widened_by": share},
                     "meets_slo": check.meets if plan.slo.is_set else None, "why_not": check.reason or None,
                     **({} if speculating is None else {"speculative": None if side is None else {
                         "metrics": widened(side.metrics, share), "output_tokens_per_s": side.output_tokens_per_s,
                         "request_rate_rps": side.request_rate_rps, "mean_batch_size": side.mean_batch_size}})})
    if not rows:
        raise ValueError("no simulated request falls in the measure window at any load asked (too short a window "
                         "or too slow a step)")
    return {"calibration": {"run_dir": str(data.run_dir), **calibration.describe()}, "strategy": strategy,
            "arrival": "closed" if plan.concurrency else plan.arrival,
            "workload": {"lengths": len(calibration.lengths), "prompt_tokens": plan.prompt_tokens or "measured",
                         "output_tokens": plan.output_tokens or "measured",
                         "reasoning_tokens": plan.reasoning_tokens or "measured",
                         "prompt_tokens_mean": float(np.mean(calibration.lengths[:, 0])),
                         "output_tokens_mean": float(np.mean(calibration.lengths[:, 1])),
                         "reasoning_tokens_mean": float(np.mean(calibration.lengths[:, 2]))},
            "window": ({"requests_per_run": "max(2000, 50 x load)", "left_out": "first 10%, closed loop's last"}
                       if extrapolation else {"warmup_s": warmup, "duration_s": duration}),
            "replications": plan.replications,
            "slo": plan.slo.as_dict(), "extrapolation": extrapolation, "distance": away, "loads": rows,
            "outside_window": sorted(set(outside)),   # loads (with or without speculation) no request finished in
            "max_load_under_slo": _max_load(rows, kind, outside) if plan.slo.is_set else None,
            "speculative": None if speculating is None else _speculative_answer(plan, speculating, rows, kind)}


def _speculative_answer(plan: PredictPlan, speculating: Calibration, rows: list[dict], kind: str) -> dict:
    """What was asked, and the crossover of the predicted curves with and without (TPOT p50, tokens/s)."""
    step = speculating.server.speculative

    def tpot(metrics):
        return metrics["tpot_s"]["p50"]["value"]

    sides = [row["speculative"] or {} for row in rows]   # {}: that level's speculative side was outside the window
    found = crossover("concurrency" if kind == "concurrency" else "rate", [row["offered"][kind] for row in rows],
                      [tpot(row["metrics"]) for row in rows], [tpot(side["metrics"]) if side else None for side in sides],
                      [row["output_tokens_per_s"] for row in rows],
                      [side.get("output_tokens_per_s") for side in sides])
    ask = plan.speculative
    return {"method": ask.method, "num_speculative_tokens": ask.num_tokens, "acceptance_per_position": list(ask.acceptance),
            "proposal_share": ask.proposal_share,
            "expected_tokens_per_step": step.expected_tokens,
            "draft": None if step.draft is None else ("roofline of " + ask.model if plan.gpu and ask.model
                                                      else "the draft run's calibration"),
            "tpot_level": found.tpot_level, "throughput_level": found.throughput_level,
            "statement": found.statement() + " (predicted)"}


def calibrated_draft(data: RunData) -> StepTimeModel:
    """The step model calibrated on a run of the draft model alone (its only strategy), for `SpeculativeAsk`."""
    samples = level_samples(data, build_levels(data, data.run.slo))
    strategy = _strategy(None, samples)
    _refuse_speculating_calibration(data, strategy)
    return calibrate(samples[strategy], strategy_server(data.run, strategy), 1.0, ()).step_model


def _refuse_speculating_calibration(data: RunData, strategy: str) -> None:
    """A run whose server speculated cannot calibrate the plain engine: the draft's passes and the proposals
    would sit inside its fitted step costs."""
    engines = (data.run_json.get("server") or {}).get("engines") or {}
    engine = engines.get(strategy) if isinstance(engines, dict) else None
    if isinstance(engine, dict) and engine.get("speculative"):
        raise ValueError(f"{data.run_dir.name}: its server speculated ({engine['speculative'].get('method')}); "
                         "calibrate on a run without speculative decoding")


def _strategy(asked: str | None, samples: dict) -> str:
    if not samples:
        raise ValueError("the calibration run has no level with an offered load and ok requests")
    if asked is None:
        if len(samples) > 1:
            raise ValueError(f"the run holds several strategies ({', '.join(samples)}); choose one with --strategy")
        return next(iter(samples))
    if asked not in samples:
        raise ValueError(f"--strategy {asked!r}: the run has levels of {', '.join(samples)} only")
    return asked


def _lengths(plan: PredictPlan, measured: np.ndarray) -> np.ndarray:
    """The measured rows [n, 3] (prompt, output, reasoning), with any side redrawn from the plan's
    distribution when it gives one; a measured reasoning count stays within a redrawn output."""
    if plan.prompt_tokens is None and plan.output_tokens is None and plan.reasoning_tokens is None:
        return measured
    rng = random.Random(plan.seed)
    prompt = parse_length_distribution(plan.prompt_tokens, "--prompt-tokens") if plan.prompt_tokens else None
    output = parse_length_distribution(plan.output_tokens, "--output-tokens") if plan.output_tokens else None
    reasoning = parse_length_distribution(plan.reasoning_tokens, "--reasoning-tokens") if plan.reasoning_tokens else None
    rows = []
    for _ in range(SAMPLED_LENGTHS):
        base = measured[rng.randrange(len(measured))]
        out = output.sample(rng) if output else int(base[1])
        rows.append((prompt.sample(rng) if prompt else base[0], out,
                     min(reasoning.sample(rng) if reasoning else int(base[2]), out)))
    return np.array(rows, dtype=np.int64)


def _on_gpu(data: RunData, calibration: Calibration, group: list, gpu_name: str) -> tuple[Calibration, str]:
    """The calibration with the step model extrapolated to `gpu_name`; (it, the note that says so)."""
    if not data.run.server.model:
        raise ValueError("--gpu needs the run's model (run.json server.model) to compute a roofline")
    arch, target = get_model(str(data.run.server.model)), get_gpu(gpu_name)
    ran_on = data.run.server.gpu or next((c for c in map(catalog_gpu_for, data.run.host.gpu_names()) if c), None)
    measured = None
    decode = [s.steps for s in group if s.steps is not None]
    if ran_on and decode:
        batch = np.concatenate([rows.batch for rows in decode])
        keep = np.concatenate([rows.prefill_tokens for rows in decode]) == 0
        context = np.concatenate([rows.context_tokens for rows in decode])[keep] / np.maximum(batch[keep], 1)
        steps = np.concatenate([rows.duration_s for rows in decode])[keep]
        if keep.sum() >= 3:
            measured = calibrate_roofline(arch, get_gpu(ran_on), batch[keep].astype(int), context.astype(int), steps,
                                          dtype=str(data.run.server.dtype or "bf16"))
    extrapolated = extrapolate_to_gpu(arch, target, dtype=str(data.run.server.dtype or "bf16"), measured=measured,
                                      measured_on=ran_on)
    server = replace(calibration.server, num_kv_blocks=None)
    return replace(calibration, step_model=extrapolated.step_model, front_end=None, server=server), \
        extrapolated.note + "; the KV cache is taken to hold the strategy's running limit of the longest requests"


def _max_load(rows: list[dict], kind: str, outside: list = ()) -> dict | None:
    """The highest load that meets the SLO with every lower load meeting it too (a load outside the window
    meets nothing)."""
    best = None
    first_outside = min(outside, default=float("inf"))
    for row in sorted(rows, key=lambda r: r["offered"][kind]):
        if not row["meets_slo"] or row["offered"][kind] > first_outside:
            break
        best = row
    if best is None:
        return None
    return {"offered": best["offered"], "output_tokens_per_s": best["output_tokens_per_s"],
            "request_rate_rps": best["request_rate_rps"],
            "basis": "predicted p99 within every SLO at this load and every lower one asked"}

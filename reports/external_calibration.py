"""What a calibration takes from a server that keeps no step record (vLLM, SGLang, TGI, any --url):
the client's own timings and the engine's /metrics latency means, per level.

Step time, fitted jointly on every calibration level (non-negative least squares on relative
error, scipy.optimize.nnls):
    decode:   client TPOT p50          = base + per_seq x b + per_prefill x prompt tokens per step
    prefill:  engine prefill_s mean    = base + per_seq x b + per_prefill x prompt tokens mean
where b is the running sequences while the engine steps (the /metrics running gauge's mean, at least
one; else the closed loop's users, capped by the strategy), and a decode step carries the prompt
tokens arriving in it (prompt tokens/s x step time). The prefill rows, where the engine exports
them (vLLM: request_prefill_time_seconds), separate the prompt's cost from the batch's; without
them the prompt is free and the decode rows alone fix the line.

Step noise, per level: each request's TPOT over its decode steps' mean (total decode time / total
decode steps), repeated over its decode steps, in the order the requests came (`tpot_factors`):
the simulator's block bootstrap then gives a simulated request about one measured request's
slowness. The client cannot see single steps (vLLM's stream coalesces the tokens produced while
its front end was busy: a chunk's gap spans several steps), only each request's mean; where many
requests share a batch, what made one request's TPOT differ from another's (a prompt prefilled
during its decode) the simulator also draws, so there the spread is counted twice.

Front end: the engine's means split the client's latency per request:
    in_s_i     = client TTFT_i - engine (queue + prefill) mean     the request's way in, and out to
                                                                    its first token (all counted in)
    last_out_s = client mean (E2E - TTFT) - engine decode mean     the same for every request
(floored at 0), so the client's TTFT spread beyond the engine's mean is the front end's; engines
that time a request from their HTTP front end (vLLM's TTFT) still split at the engine core here.
Pure: the caller reads the run.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from calculators.sim.front_end import FrontEnd
from calculators.sim.step_model import StepTimeModel


def running_while_stepping(running_mean: float | None, kind: str, load: float, cap: int) -> float:
    """The batch a level's steps ran: the running gauge's mean (at least one sequence, since the
    gauge's idle scrapes read 0), else a closed loop's users capped by the strategy, else one."""
    if running_mean is not None and running_mean > 0:
        return max(float(running_mean), 1.0)
    return float(min(load, cap)) if kind == "concurrency" else 1.0


def fit_steps_from_levels(levels: list[dict]) -> tuple[StepTimeModel, bool]:
    """levels: {"batch", "tpot_s", "prompt_tokens_per_s", "prompt_mean", "prefill_s"} (prefill_s
    None where the engine does not export it) -> (the model, whether prefill rows shaped it).
    ValueError without two levels of distinct batch sizes and a TPOT."""
    rows, measured = [], []
    decode = [lvl for lvl in levels if lvl.get("tpot_s") and lvl["tpot_s"] > 0]
    if len({round(lvl["batch"], 3) for lvl in decode}) < 2:
        raise ValueError("cannot fit a step time: no engine step record, no /metrics step histograms, "
                         "and fewer than two levels with a TPOT at distinct batch sizes")
    with_prefill = [lvl for lvl in levels if lvl.get("prefill_s") and lvl["prefill_s"] > 0 and lvl.get("prompt_mean")]
    for lvl in decode:
        per_step = (lvl.get("prompt_tokens_per_s") or 0.0) * lvl["tpot_s"] if with_prefill else 0.0
        rows.append((1.0, lvl["batch"], per_step))
        measured.append(lvl["tpot_s"])
    for lvl in with_prefill:
        rows.append((1.0, lvl["batch"], float(lvl["prompt_mean"])))
        measured.append(lvl["prefill_s"])
    design, target = np.asarray(rows), np.asarray(measured)
    coef, _ = optimize.nnls(design / target[:, None], np.ones(len(target)))   # relative error: each row counts alike
    return StepTimeModel(base_s=max(float(coef[0]), 1e-6), per_seq_s=float(coef[1]),
                         per_prefill_token_s=float(coef[2])), bool(with_prefill)


def tpot_factors(tpot_s: np.ndarray, output_tokens: np.ndarray) -> np.ndarray:
    """[R] requests' TPOT (s) and output tokens -> [sum(outputs - 1)] factors of mean 1 over the
    decode steps (requests without a TPOT or a second token give none)."""
    tpot, out = np.asarray(tpot_s, dtype=float), np.asarray(output_tokens, dtype=float)
    keep = np.isfinite(tpot) & (tpot > 0) & np.isfinite(out) & (out >= 2)
    if not keep.any():
        return np.empty(0)
    tpot, steps = tpot[keep], (out[keep] - 1).astype(np.int64)
    mean = float(np.sum(tpot * steps) / np.sum(steps))
    return np.repeat(tpot / mean, steps)


def front_end_from_means(ttft_s: np.ndarray, e2e_s: np.ndarray, engine: dict, think_s: float = 0.0) -> FrontEnd | None:
    """The level's front-end delays from its client records ([R] TTFT and E2E, s) and the engine's
    means {"queue_s", "prefill_s", "decode_s"} (queue may be missing: 0); None without prefill and
    decode means or records."""
    prefill, decode = engine.get("prefill_s"), engine.get("decode_s")
    ttft, e2e = np.asarray(ttft_s, dtype=float), np.asarray(e2e_s, dtype=float)
    keep = np.isfinite(ttft) & np.isfinite(e2e)
    if prefill is None or decode is None or not keep.any():
        return None
    ttft, e2e = ttft[keep], e2e[keep]
    first = float(engine.get("queue_s") or 0.0) + float(prefill)
    in_s = np.maximum(ttft - first, 0.0)
    last_out = max(float(np.mean(e2e - ttft)) - float(decode), 0.0)
    return FrontEnd(tuple(in_s), (0.0,) * len(in_s), (last_out,) * len(in_s), think_s=think_s)

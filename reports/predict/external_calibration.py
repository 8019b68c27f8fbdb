"""What a calibration takes from a server that keeps no step record (vLLM, SGLang, TGI, any --url):
the client's own timings and the engine's /metrics latency means, per level.

Step time, fitted jointly on every calibration level (non-negative least squares on relative
error, scipy.optimize.nnls):
    decode:   client decode step mean  = base + per_seq x b + per_prefill x prompt tokens per step
    prefill:  engine prefill_s mean    = base + per_seq x b + per_prefill x prompt tokens mean
then each level's decode step mean less its prompt tokens' cost is the cost of its batch, made
non-decreasing in b and interpolated between levels (`batch_cost_table`: the model's batch_table;
the line's per_seq continues it past the largest batch). vLLM's CPU build is not linear in b here,
nor the same shape twice: its decode step mean rose 3.3 -> 3.6 ms from c=1 to c=8, then to 5.6 at
c=32 on one sweep, and 3.2 -> 4.9 ms by c=8 (then 5.8 at c=32) on the next; the line missed both
(TPOT p50 median error 12.7% on the second), the table neither (7.0%, 5.1% on the first).
Here b is the running sequences while the engine steps (the /metrics running gauge's mean, at least
one; else the closed loop's users, capped by the strategy), and a decode step carries the prompt
tokens arriving in it (prompt tokens/s x step time). The decode step mean is the client's decode
time over its decode steps, sum(E2E - TTFT) / sum(outputs - 1) (`decode_step_mean_s`): the mean
the noise factors below are taken around, so the simulator's steps (line x factor) average what
the client measured; a p50 there would put every step of a right-skewed level low. The prefill
rows, where the engine exports them (vLLM: request_prefill_time_seconds), separate the prompt's
cost from the batch's; without them the prompt is free and the decode rows alone fix the line.

Step noise, per level (`client_step_noise`): each request's TPOT over the level's decode step mean,
split by time scale as an engine's step record is (`calculators.sim.step_noise`): binned by the
request's first token in each window (round), the requests' decode time over what the mean gives
them is the machine's slow speed on the wall clock, which the simulator replays whole; each
request's factor over its bin's, repeated over its decode steps in the order the requests came,
is the fast rest, drawn by the block bootstrap. On vLLM's CPU build one level's rounds ran at mean
TPOTs up to 1.6x apart (c=4: 2.99-4.69 ms), so a level's TPOTs are a mixture of rounds; drawn
unsplit, in runs of 64 steps that a batch shares, the slow and fast rounds averaged out (the
simulated TPOT p50 came out at the level's mean, the measured at 0.88-0.93 of it at c = 4-16). The
client cannot see single steps (vLLM's stream coalesces the tokens produced while its front end
was busy: a chunk's gap spans several steps), only each request's mean; where many requests share
a batch, what made one request's TPOT differ from another's (a prompt prefilled during its decode)
the simulator also draws, so there the spread is counted twice.

Front end: the engine's means split the client's latency per request:
    in_s_i     = client TTFT_i - engine (queue + prefill) mean     the request's way in, and out to
                 - the wait for the step in progress                its first token (all counted in)
    last_out_s = client mean (E2E - TTFT) - engine decode mean     the same for every request
(floored at 0), so the client's TTFT spread beyond the engine's mean is the front end's; engines
that time a request from their HTTP front end (vLLM's TTFT) still split at the engine core here.
An engine's queue time starts when its loop takes the request in, between two steps, so the wait
for the step in progress when it arrived is in neither mean; the simulator times that wait itself
(a request arriving mid-step waits for the step's end), so in_s leaves it out
(`step_in_progress_wait_s`: half a decode step, when another request keeps the engine busy; on
vLLM's CPU build 1.2-1.9 ms of a 13-20 ms TTFT at c = 2-8, which counted twice put the TTFT
12-23% high).
Pure: the caller reads the run.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from calculators.sim.front_end import FrontEnd
from calculators.sim.step_model import StepTimeModel
from calculators.sim.step_noise import split_slow

MIN_REQUESTS_PER_BIN = 4   # a slow-speed bin with fewer first tokens than this carries the bin before it


def running_while_stepping(running_mean: float | None, kind: str, load: float, cap: int) -> float:
    """The batch a level's steps ran: the running gauge's mean (at least one sequence, since the
    gauge's idle scrapes read 0), else a closed loop's users capped by the strategy, else one."""
    if running_mean is not None and running_mean > 0:
        return max(float(running_mean), 1.0)
    return float(min(load, cap)) if kind == "concurrency" else 1.0


def step_in_progress_wait_s(step_s: float | None, running_mean: float | None, kind: str, load: float) -> float:
    """The mean wait of a request that reaches the engine for the step in progress: half a step
    (`step_s`, the level's decode step mean) times the chance another request keeps it busy then.
    That chance, from the running gauge's mean r: a closed loop's c users each run r / c of the time,
    the other c - 1 independently: 1 - (1 - r / c)^(c - 1) (one user: never); an open loop's Poisson
    arrivals see the time average, the busy share, min(r, 1). 0 without a step or a gauge."""
    if not step_s or step_s <= 0 or running_mean is None or running_mean <= 0:
        return 0.0
    if kind == "concurrency":
        users = max(float(load), 1.0)
        busy = 1.0 - (1.0 - min(running_mean / users, 1.0)) ** (users - 1.0)
    else:
        busy = min(float(running_mean), 1.0)
    return 0.5 * float(step_s) * busy


def decode_step_mean_s(tpot_s: np.ndarray, output_tokens: np.ndarray) -> float | None:
    """[R] requests' TPOT (s) and output tokens -> their decode time over their decode steps, s
    (None without a request that has a TPOT and a second token)."""
    _, tpot, steps = _decoding(tpot_s, output_tokens)
    return _step_mean(tpot, steps) if len(tpot) else None


def _decoding(tpot_s: np.ndarray, output_tokens: np.ndarray,
              also: np.ndarray | bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The requests with a TPOT and a second token (and `also`, a [R] mask): ([R] which, [K] TPOT s,
    [K] decode steps)."""
    tpot, out = np.asarray(tpot_s, dtype=float), np.asarray(output_tokens, dtype=float)
    keep = np.isfinite(tpot) & (tpot > 0) & np.isfinite(out) & (out >= 2) & also
    return keep, tpot[keep], (out[keep] - 1).astype(np.int64)


def _step_mean(tpot: np.ndarray, steps: np.ndarray) -> float:
    return float(np.sum(tpot * steps) / np.sum(steps))


def fit_steps_from_levels(levels: list[dict]) -> tuple[StepTimeModel, bool]:
    """levels: {"batch", "tpot_s" (the decode step mean), "prompt_tokens_per_s", "prompt_mean", "prefill_s"} (prefill_s
    None where the engine does not export it) -> (the model, whether prefill rows shaped it).
    ValueError without two levels of distinct batch sizes and a TPOT."""
    rows, measured = [], []
    decode = [point for point in levels if point.get("tpot_s") and point["tpot_s"] > 0]
    if len({round(point["batch"], 3) for point in decode}) < 2:
        raise ValueError("cannot fit a step time: no engine step record, no /metrics step histograms, "
                         "and fewer than two levels with a TPOT at distinct batch sizes")
    with_prefill = [point for point in levels
                    if point.get("prefill_s") and point["prefill_s"] > 0 and point.get("prompt_mean")]
    for point in decode:
        per_step = (point.get("prompt_tokens_per_s") or 0.0) * point["tpot_s"] if with_prefill else 0.0
        rows.append((1.0, point["batch"], per_step))
        measured.append(point["tpot_s"])
    for point in with_prefill:
        rows.append((1.0, point["batch"], float(point["prompt_mean"])))
        measured.append(point["prefill_s"])
    design, target = np.asarray(rows), np.asarray(measured)
    coef, _ = optimize.nnls(design / target[:, None], np.ones(len(target)))   # relative error: each row counts alike
    n = len(decode)
    table = batch_cost_table(design[:n, 1], np.maximum(target[:n] - coef[2] * design[:n, 2], 0.1 * target[:n]))
    return StepTimeModel(base_s=max(float(coef[0]), 1e-6), per_seq_s=float(coef[1]),
                         per_prefill_token_s=float(coef[2]), batch_table=table), bool(with_prefill)


def batch_cost_table(batch: np.ndarray, cost_s: np.ndarray) -> tuple[float, ...]:
    """[L] levels' mean batch and decode step cost without its prompt tokens (s) -> the cost of batch
    sizes 1 .. ceil(largest batch): the costs made non-decreasing in the batch (scipy's isotonic
    regression: a step never gets cheaper for carrying more sequences, and a level's drift would
    otherwise bend the table), interpolated between levels, flat outside them."""
    order = np.argsort(batch)
    batch, cost = np.asarray(batch, dtype=float)[order], np.asarray(cost_s, dtype=float)[order]
    cost = optimize.isotonic_regression(cost).x
    grid = np.arange(1, int(np.ceil(batch[-1])) + 1)
    return tuple(float(v) for v in np.interp(grid, batch, cost))


def client_step_noise(tpot_s: np.ndarray, output_tokens: np.ndarray, first_token_t: np.ndarray,
                      window: np.ndarray | None, bin_s: float) -> tuple[tuple[tuple[float, ...], ...], np.ndarray]:
    """[R] requests' TPOT (s), output tokens, first-token times (s, the client's clock) and windows
    (rounds; None: one) -> (one slow path per window: the requests' decode time over the level's
    mean, per `bin_s` of their first tokens' time; [sum(outputs - 1)] fast factors, each request's
    TPOT over the level's mean and its bin's slow factor, repeated over its decode steps)."""
    first = np.asarray(first_token_t, dtype=float)
    keep, tpot, steps = _decoding(tpot_s, output_tokens, np.isfinite(first))
    if not keep.any():
        return (), np.empty(0)
    paths, fast = split_slow(tpot * steps, _step_mean(tpot, steps) * steps, first[keep],
                             None if window is None else np.asarray(window)[keep], bin_s,
                             min_steps=MIN_REQUESTS_PER_BIN)
    return paths, np.repeat(fast, steps)


def front_end_from_means(ttft_s: np.ndarray, e2e_s: np.ndarray, engine: dict, think_s: float = 0.0,
                         step_wait_s: float = 0.0) -> FrontEnd | None:
    """The level's front-end delays from its client records ([R] TTFT and E2E, s) and the engine's
    means {"queue_s", "prefill_s", "decode_s"} (queue may be missing: 0), less the wait for the step
    in progress that the simulator adds itself (`step_in_progress_wait_s`); None without prefill and
    decode means or records."""
    prefill, decode = engine.get("prefill_s"), engine.get("decode_s")
    ttft, e2e = np.asarray(ttft_s, dtype=float), np.asarray(e2e_s, dtype=float)
    keep = np.isfinite(ttft) & np.isfinite(e2e)
    if prefill is None or decode is None or not keep.any():
        return None
    ttft, e2e = ttft[keep], e2e[keep]
    first = float(engine.get("queue_s") or 0.0) + float(prefill) + float(step_wait_s)
    in_s = np.maximum(ttft - first, 0.0)
    last_out = max(float(np.mean(e2e - ttft)) - float(decode), 0.0)
    return FrontEnd(tuple(in_s), (0.0,) * len(in_s), (last_out,) * len(in_s), think_s=think_s)

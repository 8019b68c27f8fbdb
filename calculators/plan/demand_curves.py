"""A demand from a rate curve: Poisson arrivals of a time-varying rate, drawn lengths, users with shared prefixes.

    t, rate = diurnal_with_bursts(peak_rps=20, trough_rps=4, duration_s=86400, bursts_per_day=6,
                                  burst_multiplier=3, burst_duration_s=300, seed=1)
    demand = rate_curve_arrivals(t, rate, prompt=..., output=..., seed=1, sessions=500, turns_prefix_tokens=1024)

A rate curve is points (t_s, rate_rps); the rate between two points is linear, and after the last
point it holds the last rate (so one point and a duration is a constant rate). Linear, not piecewise
constant: a curve is a sampled demand (the diurnal generator samples a sinusoid), and linear
interpolation follows it between samples without putting a step at each one; a step is two points
close together, as the generator's burst edges are. Arrivals are a Poisson process of that rate by
thinning (Lewis-Shedler): on each linear piece, candidates of the piece's peak rate, each kept with
probability rate(t) / peak (at least half are kept on a linear piece). Pieces are cut so that each
expects a bounded number of candidates and are drawn in chunks, so a day of a million requests
takes a fraction of a second and bounded memory. Times start at the curve's first point; `speedup`
divides them (the same requests, sooner), and `duration_s` keeps the requests sent before it, in
the sped-up time. The pieces depend on the curve alone, so a shorter duration gives the first
requests of a longer one with the same seed.

Lengths come from `contract.distributions.LengthDistribution`. Arrivals, prompt lengths, output
lengths and sessions draw from separate seeded streams, so adding sessions or changing a length
distribution leaves the send times as they were.

Sessions (multi-turn traffic, `sessions > 0`): each request belongs to one of `sessions` users, drawn
uniformly by default or Zipf-like with `session_skew` s > 0 (user k's share is proportional to
1 / (k + 1)^s). Each user has a shared prefix (its system prompt and history) of `turns_prefix_tokens`
tokens, rounded up to whole blocks, on top of the request's drawn prompt length: the user's blocks,
whose ids no other user has, then the request's own tokens. `session` is the key consistent_hash
routes on (-1: none).

Pure: numpy, no I/O; a bad curve raises ValueError with one line naming the problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from calculators.plan.demand import SESSION_BLOCK_TOKENS, Demand, check_finite, check_positive, check_whole
from contract.distributions import LengthDistribution

_PIECE_CANDIDATES = 4096     # a rate-curve piece is cut until it expects at most this many candidates
_CHUNK_CANDIDATES = 1 << 21  # candidates drawn at once


def rate_curve_arrivals(t_s: Sequence[float], rate_rps: Sequence[float], *, prompt: LengthDistribution,
                        output: LengthDistribution, seed: int, duration_s: float | None = None, speedup: float = 1.0,
                        sessions: int = 0, turns_prefix_tokens: int = 0,
                        prefix_block_tokens: int = SESSION_BLOCK_TOKENS, session_skew: float = 0.0,
                        source: str = "") -> Demand:
    """Poisson arrivals of the rate curve's time-varying rate (module doc), with drawn lengths and, when
    `sessions` > 0, users with shared prefixes. `duration_s` (sped-up time) defaults to the curve's span;
    past the last point the last rate holds. Rows in the errors count from 1."""
    times, rates = _check_curve(t_s, rate_rps)
    check_positive("speedup", speedup)
    check_whole("sessions", sessions, 0)
    if turns_prefix_tokens and not sessions:
        raise ValueError("a turns prefix needs sessions > 0 (whose users would share it?)")
    if duration_s is None:
        if len(times) == 1:
            raise ValueError("rate curve: one row is a constant rate: give a duration")
        duration_s = (times[-1] - times[0]) / speedup
    check_positive("duration_s", duration_s)
    arrivals_seed, prompt_seed, output_seed, session_seed = np.random.SeedSequence(seed).spawn(4)
    curve_time = _thinned_arrivals(times - times[0], rates, duration_s * speedup, arrivals_seed)
    n = len(curve_time)
    demand = Demand(curve_time / speedup, prompt.sample_array(np.random.default_rng(prompt_seed), n),
                    output.sample_array(np.random.default_rng(output_seed), n), np.full(n, -1, dtype=np.int64), None,
                    prefix_block_tokens, "", float(duration_s))
    details = [source or f"rate curve of {len(times)} points", f"prompt {_spec(prompt)}", f"output {_spec(output)}",
               f"seed {seed}"]
    if speedup != 1:
        details.append(f"speedup {speedup:g}")
    if sessions:
        demand = with_sessions(demand, sessions, turns_prefix_tokens, seed=session_seed,
                               block_tokens=prefix_block_tokens, skew=session_skew)
        details.append(demand.source)
    return replace(demand, source=", ".join(details))


def with_sessions(demand: Demand, sessions: int, prefix_tokens: int, *, seed, block_tokens: int = SESSION_BLOCK_TOKENS,
                  skew: float = 0.0) -> Demand:
    """`demand` with each request given to one of `sessions` users (uniform, or Zipf-like with `skew` > 0)
    and, when `prefix_tokens` > 0, the user's shared prefix of ceil(prefix_tokens / block_tokens) blocks
    on top of its prompt (module doc). `source` gains a description of the sessions."""
    check_whole("sessions", sessions, 1)
    check_whole("turns prefix tokens", prefix_tokens, 0)
    check_whole("prefix block tokens", block_tokens, 1)
    if isinstance(skew, bool) or not isinstance(skew, (int, float, np.integer, np.floating)) \
            or not math.isfinite(skew) or skew < 0:
        raise ValueError(f"session skew must be >= 0, got {skew!r}")
    if prefix_tokens and demand.prefix is not None:
        raise ValueError("demand already has prefixes (a trace's hash ids): no session prefix on top")
    rng = np.random.default_rng(seed)
    n = len(demand)
    if skew == 0:
        keys = rng.integers(0, sessions, size=n, dtype=np.int64)
    else:
        weights = np.arange(1, sessions + 1, dtype=np.float64) ** -float(skew)
        keys = np.minimum(np.searchsorted(np.cumsum(weights / weights.sum()), rng.random(n), side="right"),
                          sessions - 1).astype(np.int64)
    spread = "uniform" if skew == 0 else f"Zipf-like, skew {skew:g}"
    description = f"{sessions} sessions ({spread})"
    if demand.source:
        description = f"{demand.source}, {description}"
    if not prefix_tokens:
        return replace(demand, session=keys, source=description)
    blocks = -(-prefix_tokens // block_tokens)
    own = {int(k): tuple(range(int(k) * blocks, (int(k) + 1) * blocks)) for k in np.unique(keys)}
    prefix = tuple(map(own.__getitem__, keys.tolist()))
    description += f", a {blocks * block_tokens}-token prefix each ({blocks} blocks of {block_tokens})"
    return replace(demand, prompt=demand.prompt + blocks * block_tokens, session=keys, prefix=prefix,
                   prefix_block_tokens=block_tokens, source=description)


def diurnal_with_bursts(*, peak_rps: float, trough_rps: float, period_s: float = 86400, duration_s: float,
                        bursts_per_day: float, burst_multiplier: float, burst_duration_s: float, seed: int,
                        peak_at_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A rate curve (t_s [m], rate_rps [m]) for users without a trace, to feed `rate_curve_arrivals`.

    The base is a sinusoidal day: `trough_rps` at `peak_at_s` - period / 2 and `peak_rps` at `peak_at_s`
    (default period / 2: a day that starts at its trough, midnight, and peaks at noon), sampled every
    period / 1440 (a minute of a day). Bursts come as a Poisson process of `bursts_per_day` per period
    (the period is the day), seeded, each starting uniformly in [0, duration_s) and lasting
    `burst_duration_s`, with edges that ramp over min(1 s, burst / 10); during a burst the rate is
    `burst_multiplier` times the base (overlapping bursts do not compound)."""
    for name, value in (("peak_rps", peak_rps), ("trough_rps", trough_rps), ("bursts_per_day", bursts_per_day)):
        check_finite(name, value, "diurnal")
        if value < 0:
            raise ValueError(f"diurnal: {name} must be >= 0, got {value!r}")
    if peak_rps <= 0 or trough_rps > peak_rps:
        raise ValueError(f"diurnal: need peak_rps > 0 and trough_rps <= peak_rps, got {peak_rps!r} and {trough_rps!r}")
    for name, value in (("period_s", period_s), ("duration_s", duration_s), ("burst_multiplier", burst_multiplier),
                        ("burst_duration_s", burst_duration_s)):
        check_positive(name, value, "diurnal")
    peak_at = period_s / 2 if peak_at_s is None else check_finite("peak_at_s", peak_at_s, "diurnal")
    rng = np.random.default_rng(seed)
    count = rng.poisson(bursts_per_day * duration_s / period_s)
    starts = np.sort(rng.uniform(0.0, duration_s, count))
    ends = starts + burst_duration_s
    ramp = min(1.0, burst_duration_s / 10)
    step = period_s / 1440
    grid = np.arange(0.0, duration_s, step)
    edges = np.concatenate([starts, starts + ramp, ends - ramp, ends])
    t = np.unique(np.concatenate([grid, edges[edges < duration_s], [duration_s]]))
    rate = trough_rps + (peak_rps - trough_rps) * (1 + np.cos(2 * np.pi * (t - peak_at) / period_s)) / 2
    lift = np.zeros_like(t)
    for start, end in zip(starts.tolist(), ends.tolist()):
        lo, hi = np.searchsorted(t, [start, end], side="left")
        if hi < len(t) and t[hi] == end:
            hi += 1
        inside = t[lo:hi]
        lift[lo:hi] = np.maximum(lift[lo:hi], np.clip(np.minimum(inside - start, end - inside) / ramp, 0.0, 1.0))
    return t, rate * (1 + (burst_multiplier - 1) * lift)


def _check_curve(t_s, rate_rps) -> tuple[np.ndarray, np.ndarray]:
    try:
        times = np.asarray(t_s, dtype=np.float64)
        rates = np.asarray(rate_rps, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("rate curve: times and rates must be numbers") from None
    if times.ndim != 1 or rates.ndim != 1:
        raise ValueError("rate curve: times and rates must be lists of numbers")
    if len(times) == 0:
        raise ValueError("rate curve: no rows")
    if len(times) != len(rates):
        raise ValueError(f"rate curve: {len(times)} times but {len(rates)} rates")
    for name, values in (("time", times), ("rate", rates)):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise ValueError(f"rate curve: {name} at row {bad[0] + 1} is not a finite number ({values[bad[0]]!r})")
    back = np.flatnonzero(np.diff(times) <= 0)
    if back.size:
        k = int(back[0]) + 1
        if times[k] < times[k - 1]:
            raise ValueError(f"rate curve: time goes backwards at row {k + 1} ({times[k]:g} after {times[k - 1]:g})")
        raise ValueError(f"rate curve: time repeats at row {k + 1} ({times[k]:g}); times must be strictly increasing")
    negative = np.flatnonzero(rates < 0)
    if negative.size:
        raise ValueError(f"rate curve: negative rate at row {negative[0] + 1} ({rates[negative[0]]:g} rps)")
    if not np.any(rates > 0):
        raise ValueError("rate curve: every rate is 0, so no request would be sent")
    return times, rates


def _thinned_arrivals(times: np.ndarray, rates: np.ndarray, horizon: float,
                      seed: np.random.SeedSequence) -> np.ndarray:
    """Sorted arrival times in [0, horizon) of a Poisson process whose rate is linear between (times, rates)
    (times[0] = 0) and holds the last rate after the last point: Lewis-Shedler thinning on pieces.

    The pieces and their candidate counts depend on the curve alone (past its last point, pieces of a
    fixed width), and candidates are drawn in time order, so a shorter horizon gives the first requests
    of a longer one: the same seed, cut sooner."""
    knots, values = times, rates
    if horizon > times[-1]:   # the last rate holds: pieces of a width that does not depend on the horizon
        width = _PIECE_CANDIDATES / rates[-1] if rates[-1] > 0 else horizon - times[-1]
        extra = times[-1] + width * np.arange(1, math.ceil((horizon - times[-1]) / width) + 1)   # to >= horizon
        knots, values = np.append(times, extra), np.append(rates, np.full(len(extra), rates[-1]))
    start, end = knots[:-1], knots[1:]
    rate0, rate1 = values[:-1], values[1:]
    # cut each piece into equal parts that expect at most _PIECE_CANDIDATES candidates (linear stays linear)
    parts = np.maximum(1, np.ceil(np.maximum(rate0, rate1) * (end - start) / _PIECE_CANDIDATES)).astype(np.int64)
    piece = np.repeat(np.arange(len(start)), parts)
    index = np.arange(len(piece)) - np.repeat(np.cumsum(parts) - parts, parts)
    width = (end - start)[piece] / parts[piece]
    lo = start[piece] + index * width
    slope = ((rate1 - rate0) / (end - start))[piece]
    r_lo = rate0[piece] + slope * (lo - start[piece])
    top = np.maximum(r_lo, r_lo + slope * width)   # the part's peak rate: its candidates' rate
    count_rng, place_rng = (np.random.default_rng(s) for s in seed.spawn(2))
    counts = count_rng.poisson(top * width)
    cumulative = np.cumsum(counts)
    out = []
    first = 0
    while first < len(counts) and lo[first] < horizon:   # chunks of whole parts, in time order
        done = int(cumulative[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(cumulative, done + _CHUNK_CANDIDATES, side="right")))
        which = np.repeat(np.arange(first, last), counts[first:last])
        draws = place_rng.random((len(which), 2))   # a candidate's place and its coin, pair by pair
        offset = draws[:, 0] * width[which]
        kept = draws[:, 1] * top[which] < r_lo[which] + slope[which] * offset
        out.append(np.sort(lo[which][kept] + offset[kept]))
        first = last
    arrivals = np.concatenate(out) if out else np.empty(0)
    return arrivals[arrivals < horizon]


def _spec(dist: LengthDistribution) -> str:
    return dist.spec or (f"{dist.kind} of {len(dist.values)} lengths" if dist.kind == "file" else
                         f"{dist.kind}:{':'.join(f'{p:g}' for p in dist.params)}")

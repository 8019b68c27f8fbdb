"""The plan's demand: when each request is sent, its lengths, its session and its prompt's shared blocks.

    demand = from_rows(offsets, inputs, outputs, hash_ids, speedup=10, source="mooncake trace T")
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

Prefixes. `Demand.prefix[i]` lists the ids of request i's leading blocks of `prefix_block_tokens`
tokens each: two requests that share leading ids share that prefix. The prompt is its listed blocks
in order, cut at `prompt[i]` tokens (the last listed block may be partial), then tokens of its own
(unique to the request) up to `prompt[i]`: the request's own blocks are implicit, as Mooncake rows
with fewer ids than tokens and the trace replay (`TracePrompts`) treat them. Listing them would cost
prompt / block ids per request (60 million ids for a day of a million 1000-token prompts) and
say nothing more. Mooncake rows' `hash_ids` are such ids, of 512 tokens.

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
from dataclasses import dataclass, replace

import numpy as np

from contract.distributions import LengthDistribution

TRACE_BLOCK_TOKENS = 512     # Mooncake's hash ids name 512-token blocks
SESSION_BLOCK_TOKENS = 16    # the simulated engine's KV block: a session prefix's blocks
_PIECE_CANDIDATES = 4096     # a rate-curve piece is cut until it expects at most this many candidates
_CHUNK_CANDIDATES = 1 << 21  # candidates drawn at once


@dataclass(frozen=True)
class Demand:
    """Requests in send order. Arrays are read-only views; `prefix` is per request (module doc)."""

    t_s: np.ndarray        # [n] float64 send times, sorted (s since the demand's start)
    prompt: np.ndarray     # [n] int64 prompt tokens (>= 1)
    output: np.ndarray     # [n] int64 output tokens (>= 1)
    session: np.ndarray    # [n] int64 session / user key, -1 = none
    prefix: tuple[tuple[int, ...], ...] | None   # per request, its prompt's leading block ids, or None
    prefix_block_tokens: int = TRACE_BLOCK_TOKENS
    source: str = ""       # how it was made, for the report
    duration_s: float | None = None   # the time it covers (a curve's length, a cut); None: the last send
    after: np.ndarray | None = None    # [n] int64 chained sessions: the earlier request this one waits on, -1 none
    delay_s: np.ndarray | None = None  # [n] float64: its wait after that request's answer (module doc)

    def __post_init__(self) -> None:
        arrays = {}
        for name, dtype in (("t_s", np.float64), ("prompt", np.int64), ("output", np.int64), ("session", np.int64)):
            value = np.asarray(getattr(self, name))
            if value.ndim != 1:
                raise ValueError(f"demand: {name} must be one-dimensional, got shape {value.shape}")
            if (dtype is np.int64 and value.size and not np.issubdtype(value.dtype, np.integer)
                    and (not np.all(np.isfinite(value)) or np.any(value != np.rint(value)))):
                raise ValueError(f"demand: {name} must hold whole numbers")
            view = value.astype(dtype, copy=False).view()
            view.setflags(write=False)
            arrays[name] = view
            object.__setattr__(self, name, view)
        n = len(arrays["t_s"])
        for name, value in arrays.items():
            if len(value) != n:
                raise ValueError(f"demand: {name} has {len(value)} entries, t_s has {n}")
        t = arrays["t_s"]
        if n:
            if not np.all(np.isfinite(t)) or t[0] < 0:
                raise ValueError("demand: send times must be finite and >= 0")
            back = np.flatnonzero(np.diff(t) < 0)
            if back.size:
                k = int(back[0]) + 1
                raise ValueError(f"demand: send times go backwards at request {k} ({t[k]:g} after {t[k - 1]:g})")
            for name in ("prompt", "output"):
                if arrays[name].min() < 1:
                    raise ValueError(f"demand: every {name} length must be >= 1, got {int(arrays[name].min())}")
            if arrays["session"].min() < -1:
                raise ValueError("demand: session keys must be >= 0, or -1 for none")
        if self.prefix is not None:
            if not isinstance(self.prefix, tuple):
                object.__setattr__(self, "prefix", tuple(tuple(ids) for ids in self.prefix))
            if len(self.prefix) != n:
                raise ValueError(f"demand: prefix has {len(self.prefix)} entries, t_s has {n}")
        _whole("demand: prefix_block_tokens", self.prefix_block_tokens, 1)
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and self.duration_s >= 0):
            raise ValueError(f"demand: duration_s must be >= 0, got {self.duration_s!r}")
        if (self.after is None) != (self.delay_s is None):
            raise ValueError("demand: after and delay_s come together (a chained turn and its wait)")
        if self.after is not None:
            after = np.asarray(self.after, dtype=np.int64)
            delay = np.asarray(self.delay_s, dtype=np.float64)
            if len(after) != n or len(delay) != n:
                raise ValueError(f"demand: after and delay_s need {n} entries each")
            if n and (np.any(after >= np.arange(n)) or after.min() < -1):
                raise ValueError("demand: a chained request waits on an earlier one (after < its index), or -1")
            if np.any(~np.isfinite(delay[after >= 0])) or np.any(delay[after >= 0] < 0):
                raise ValueError("demand: a chained turn's delay_s must be seconds >= 0")
            for name, value in (("after", after), ("delay_s", delay)):
                value.setflags(write=False)
                object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def chained(self) -> bool:
        """Some request is a session's later turn, sent only after the turn before it ends."""
        return self.after is not None and bool(np.any(self.after >= 0))

    def _unchained(self, what: str) -> None:
        if self.chained:
            raise ValueError(f"a demand of chained sessions cannot be {what}: a turn's send waits on the turn "
                             "before it, which the part may not hold")

    @property
    def span_s(self) -> float:
        """The time the demand covers: its duration, or its last send time if that is later (0 if empty)."""
        last = float(self.t_s[-1]) if len(self.t_s) else 0.0
        return last if self.duration_s is None else max(float(self.duration_s), last)

    def select(self, indices: np.ndarray, t_s: np.ndarray | None = None) -> Demand:
        """The requests at `indices` (rising), at their own times, over the same span (a share of it); with
        `t_s` (rising), sent at those times instead (requests a proxy passed on later, in that order)."""
        self._unchained("split")
        idx = np.asarray(indices, dtype=np.int64)
        return replace(self, t_s=self.t_s[idx] if t_s is None else t_s, prompt=self.prompt[idx], output=self.output[idx],
                       session=self.session[idx],
                       prefix=None if self.prefix is None else tuple(self.prefix[i] for i in idx),
                       duration_s=self.span_s)

    def window(self, start: float, end: float) -> Demand:
        """The requests sent in [start, end), at their own times (not shifted)."""
        self._unchained("cut into windows")
        lo, hi = np.searchsorted(self.t_s, [start, end], side="left")
        return replace(self, t_s=self.t_s[lo:hi], prompt=self.prompt[lo:hi], output=self.output[lo:hi],
                       session=self.session[lo:hi], prefix=None if self.prefix is None else self.prefix[lo:hi],
                       duration_s=max(0.0, min(float(end), self.span_s)))


def from_rows(offsets_s, prompt, output, hash_ids=None, *, speedup: float = 1.0, duration_s: float | None = None,
              source: str = "", session=None, prefix_block_tokens: int = TRACE_BLOCK_TOKENS, delay_s=None) -> Demand:
    """A trace's rows as demand. Offsets (s) are divided by `speedup`; `duration_s` keeps the rows sent
    before it (in the sped-up time). `hash_ids` (per row, a sequence of block ids; Mooncake's) become
    `prefix`, None when no row has any. `session` (per row: an int key, or a string such as BurstGPT's
    Session ID, with ""/None/-1 for none) becomes the session key; strings are numbered in order of
    first appearance. Rows are sorted by time (stable).

    `delay_s` (per row: None, or for a session's later turn its wait after the previous turn's answer,
    AIPerf's mooncake `delay`, loadgen.workload.traces) chains each such row to its session's row before it
    (in file order): it is sent at its own offset or `delay_s` after that answer, whichever is later (both
    over `speedup`), as the trace replay sends it. Its send time in the demand is the later of its offset and
    its predecessor's (the soonest it can go), so a chain's rows stay in order."""
    _positive("speedup", speedup)
    if duration_s is not None:
        _positive("duration_s", duration_s)
    t = np.asarray(offsets_s, dtype=np.float64) / float(speedup)
    n = len(t)
    for name, values in (("prompt", prompt), ("output", output)):
        if len(values) != n:
            raise ValueError(f"demand: {name} has {len(values)} entries, offsets_s has {n}")
    keys_all = np.full(n, -1, dtype=np.int64)
    if session is not None:
        if len(session) != n:
            raise ValueError(f"demand: session has {len(session)} entries, offsets_s has {n}")
        keys_all = _session_keys(session)
    after_row = None
    if delay_s is not None and any(d is not None for d in delay_s):
        if len(delay_s) != n:
            raise ValueError(f"demand: delay_s has {len(delay_s)} entries, offsets_s has {n}")
        after_row, delays, last = np.full(n, -1, dtype=np.int64), np.zeros(n), {}
        for r in range(n):
            key = int(keys_all[r])
            if delay_s[r] is not None:
                if key < 0 or key not in last:
                    raise ValueError(f"demand: row {r + 1} waits on its session's previous turn, and has none")
                after_row[r], delays[r] = last[key], float(delay_s[r]) / float(speedup)
                t[r] = max(t[r], t[last[key]])
            if key >= 0:
                last[key] = r
    order = np.argsort(t, kind="stable")
    if duration_s is not None:
        order = order[t[order] < duration_s]
    prompt_a, output_a = np.asarray(prompt)[order], np.asarray(output)[order]
    prefix = None
    if hash_ids is not None:
        if len(hash_ids) != n:
            raise ValueError(f"demand: hash_ids has {len(hash_ids)} entries, offsets_s has {n}")
        if any(len(ids) for ids in hash_ids):
            prefix = tuple(tuple(hash_ids[i]) for i in order.tolist())
    chain = {}
    if after_row is not None:
        position = np.full(n, -1, dtype=np.int64)
        position[order] = np.arange(len(order))
        before = after_row[order]
        chain = {"after": np.where(before >= 0, position[np.maximum(before, 0)], -1),
                 "delay_s": delays[order]}
    details = [source] if source else []
    if speedup != 1:
        details.append(f"speedup {speedup:g}")
    if duration_s is not None:
        details.append(f"first {duration_s:g} s")
    return Demand(t[order], prompt_a, output_a, keys_all[order], prefix, prefix_block_tokens, ", ".join(details),
                  duration_s, **chain)


def rate_curve_arrivals(t_s: Sequence[float], rate_rps: Sequence[float], *, prompt: LengthDistribution,
                        output: LengthDistribution, seed: int, duration_s: float | None = None, speedup: float = 1.0,
                        sessions: int = 0, turns_prefix_tokens: int = 0,
                        prefix_block_tokens: int = SESSION_BLOCK_TOKENS, session_skew: float = 0.0,
                        source: str = "") -> Demand:
    """Poisson arrivals of the rate curve's time-varying rate (module doc), with drawn lengths and, when
    `sessions` > 0, users with shared prefixes. `duration_s` (sped-up time) defaults to the curve's span;
    past the last point the last rate holds. Rows in the errors count from 1."""
    times, rates = _check_curve(t_s, rate_rps)
    _positive("speedup", speedup)
    _whole("sessions", sessions, 0)
    if turns_prefix_tokens and not sessions:
        raise ValueError("a turns prefix needs sessions > 0 (whose users would share it?)")
    if duration_s is None:
        if len(times) == 1:
            raise ValueError("rate curve: one row is a constant rate: give a duration")
        duration_s = (times[-1] - times[0]) / speedup
    _positive("duration_s", duration_s)
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
    _whole("sessions", sessions, 1)
    _whole("turns prefix tokens", prefix_tokens, 0)
    _whole("prefix block tokens", block_tokens, 1)
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
        _finite(name, value, "diurnal")
        if value < 0:
            raise ValueError(f"diurnal: {name} must be >= 0, got {value!r}")
    if peak_rps <= 0 or trough_rps > peak_rps:
        raise ValueError(f"diurnal: need peak_rps > 0 and trough_rps <= peak_rps, got {peak_rps!r} and {trough_rps!r}")
    for name, value in (("period_s", period_s), ("duration_s", duration_s), ("burst_multiplier", burst_multiplier),
                        ("burst_duration_s", burst_duration_s)):
        _positive(name, value, "diurnal")
    peak_at = period_s / 2 if peak_at_s is None else _finite("peak_at_s", peak_at_s, "diurnal")
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


def _session_keys(session) -> np.ndarray:
    values = np.asarray(session)
    if np.issubdtype(values.dtype, np.integer):
        return values.astype(np.int64)
    numbers: dict[str, int] = {}
    keys = np.full(len(values), -1, dtype=np.int64)
    for i, value in enumerate(session):
        if value is None or value == "" or (isinstance(value, (int, np.integer)) and value == -1):
            continue
        keys[i] = numbers.setdefault(str(value), len(numbers))
    return keys


def _spec(dist: LengthDistribution) -> str:
    return dist.spec or (f"{dist.kind} of {len(dist.values)} lengths" if dist.kind == "file" else
                         f"{dist.kind}:{':'.join(f'{p:g}' for p in dist.params)}")


def _whole(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def _finite(name: str, value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
    return float(value)


def _positive(name: str, value, where: str = "demand") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: {name} must be a number > 0, got {value!r}")
    return float(value)

"""Quick per-level figures the sweep needs while it runs: progress, the SLO check, stability.

Stability is judged at the machine's usual speed when the engine's step record is there
(reports.diagnostics.machine_speed): a level whose throughput varied only because the machine did
is steady as a server, and says so (`machine_drift`) rather than "not stable". An open
loop's throughput follows its arrivals (a Poisson window at 2 rps holds 10 +- 3 requests):
there the judge is whether the server kept up, the tokens it served in each window over
the tokens that arrived in it (`served_spread`).

Steering only (progress bar, --auto's ramp and bisection, flagging an unstable level);
the report computes the published numbers. Whether a level meets the SLO is the
contract's one judge (contract.slo.judge) over the level's measure-phase requests, the set the
report's verdict judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reports.diagnostics.machine_speed import busy_share_over, speed_index, speed_index_over
from contract.level_windows import inside, level_windows, total_s
from contract.records import Record
from contract.slo import SLO, Judgement, SloSample, judge, percentile

STABILITY_WINDOWS = 3


@dataclass(frozen=True)
class LevelStats:
    """Measure-phase figures of one level.

    Attributes:
        requests: finished measure-phase records (any status but `incomplete`).
        errors: those whose status is not ok (a hedge's cancelled copy is neither: contract.hedging).
        incomplete: still in flight when the level stopped (neither ok nor an error).
        p99_ttft_s, p99_tpot_s, p99_e2e_s, p99_ttfa_s: over ok records (None when there are no values), as
            the report's tables show them.
        output_tokens_per_s: ok output tokens over the measure span.
        request_rate_rps: ok requests over the measure span (a rate sweep's probes set its rates by it).
        window_throughputs: output tokens/s in STABILITY_WINDOWS equal slices of the span, each token
            counted when it arrived, from any record of the level (`_token_times`); a level measured
            in rounds (sweep --rounds): one per round, over that round's window, and with more rounds
            than STABILITY_WINDOWS one per group of consecutive rounds (`_grouped`).
        speed_index: per window, how much longer than usual the engine's steps took for the same
            work (reports.diagnostics.machine_speed; None without the engine's step record).
        busy_share: per window, the share of it the engine spent in steps (None without the record).
        window_request_rates: requests/s per window, each ok request counted over its lifetime (a
            share of it in every window it overlapped), for `spread_at_constant_speed`.
        fixed_share: mean TTFT / mean E2E of the ok requests: the share of a request's time that
            does not grow with its reply's length (None without TTFTs).
        spans: the level's measured windows [(start, end), ...] (contract.level_windows).
        rounds: the rounds the level was measured in (contract.level_windows).
        window_offered: an open loop's output tokens/s that arrived per window (each request's tokens
            at its send; None for a closed loop), for `served_spread`.
        slo_sample: the measure-phase requests as the SLO's judge reads them (`check`).
    """

    requests: int
    errors: int
    incomplete: int
    p99_ttft_s: float | None
    p99_tpot_s: float | None
    p99_e2e_s: float | None
    output_tokens_per_s: float | None
    window_throughputs: tuple[float, ...]
    speed_index: tuple[float, ...] | None = None
    rounds: int = 1
    busy_share: tuple[float, ...] | None = None
    spans: tuple[tuple[float, float], ...] = ()
    window_request_rates: tuple[float, ...] | None = None
    fixed_share: float | None = None
    window_offered: tuple[float, ...] | None = None
    request_rate_rps: float | None = None
    p99_ttfa_s: float | None = None
    slo_sample: SloSample = field(default_factory=lambda: SloSample(ok=0))

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.requests if self.requests else None

    @property
    def spread(self) -> float | None:
        """(max - min) / mean of the window throughputs: 0 = perfectly steady."""
        return _spread(self.window_throughputs)

    @property
    def spread_at_constant_speed(self) -> float | None:
        """The same spread with each window's throughput scaled back to the machine's usual speed; the
        raw spread without a speed index. Only the engine's busy share b of a window stretches with
        its speed s, so the window would have lasted b / s + (1 - b) of itself at the usual speed:
        throughput / (b / s + 1 - b). (Scaling the whole window, throughput x s, over-corrected a level
        whose engine idled half the time: `make demo`'s static/c=1 read 10% where it was 2%.)

        What is judged is the server's pace, not its tokens/s alone: a window whose requests drew
        longer replies streams more tokens/s and finishes fewer requests/s at the same pace. With a
        request's time a + b x length, tokens/s ~ n / (a + b n) and requests/s ~ 1 / (a + b n), and
        tokens^(1 - f) x requests^f is flat in n at f = a / (a + b n): the fixed share, here mean TTFT /
        mean E2E. (`make demo`'s static/c=1, half of each request before its first token: +19%
        tokens/s in a third whose replies were 19% longer, its pace within 2%.) The smaller of the
        pace's spread and the tokens/s's is judged: a real slowdown lowers both rates, so shows in
        both, while f read from the client also counts a request's wait behind others as fixed."""
        tokens = self._at_usual_speed(self.window_throughputs)
        rates = self._at_usual_speed(self.window_request_rates) if self.window_request_rates else None
        f = self.fixed_share
        if rates is None or f is None or len(rates) != len(tokens) or min(tokens) <= 0 or min(rates) <= 0:
            return _spread(tokens)
        tokens, rates = np.asarray(tokens), np.asarray(rates)
        log_pace = (1 - f) * np.log(tokens / tokens.mean()) + f * np.log(rates / rates.mean())
        # the client cannot tell a request's fixed cost from its wait behind others (none/c=16: TTFT is
        # nine tenths queue, so f reads 0.9 where the server's fixed share is 0.1): where the pace finds
        # more spread than the tokens/s alone, the tokens/s reading stands
        return min(_spread(np.exp(log_pace)), _spread(tokens))

    @property
    def served_spread(self) -> float | None:
        """Open loop: (max - min) / mean over the windows of tokens served / tokens that arrived. A server
        that keeps up serves what arrives, however many arrived (~1 in every window, less the edges: a
        request sent near a window's end streams into the next); one that stalled or slowed for a while
        serves less of it then and catches up after (a saturated one serves a steady share below 1: it
        is steady, and its SLO check says the rest). None for a closed loop, or a window that nothing
        arrived in."""
        offered = self.window_offered
        if offered is None or len(offered) != len(self.window_throughputs) or min(offered, default=0.0) <= 0:
            return None
        return _spread(np.asarray(self.window_throughputs) / np.asarray(offered))

    @property
    def judged_spread(self) -> float | None:
        """What `is_stable` holds to the tolerance: an open loop's `served_spread`, else
        `spread_at_constant_speed`."""
        if self.window_offered is not None:
            return self.served_spread
        return self.spread_at_constant_speed

    def _at_usual_speed(self, values) -> list[float]:
        """Each window's rate scaled to the machine's usual speed (unscaled without a speed index)."""
        if self.speed_index is None or len(self.speed_index) != len(values):
            return list(values)
        busy = self.busy_share if self.busy_share is not None else (1.0,) * len(self.speed_index)
        return [t / (b / s + 1.0 - b) for t, s, b in zip(values, self.speed_index, busy)]

    @property
    def machine_speed_spread(self) -> float | None:
        """(max - min) / mean of the speed index: how much the machine's own speed varied."""
        return None if self.speed_index is None else _spread(self.speed_index)

    def is_stable(self, tolerance: float) -> bool:
        """The server was steady: its throughput at constant machine speed (an open loop: its share of
        what arrived) varied within `tolerance`."""
        spread = self.judged_spread
        return spread is not None and spread <= tolerance

    def machine_drift(self, tolerance: float) -> bool:
        """Steady as a server, but the raw throughput varied beyond `tolerance` because the machine did
        (only with a speed index: without one a level steady at its pace drew lengths, not speeds; never
        for an open loop, whose raw throughput follows its arrivals)."""
        return (self.speed_index is not None and self.window_offered is None and self.is_stable(tolerance)
                and self.spread is not None
                and self.spread > tolerance)

    def p99(self, column: str) -> float | None:
        """The p99 of a latency column (`ttft_s`, `tpot_s`, `e2e_s`, `ttfa_s`) over the ok records, as the
        report's tables show it (the judge's p99 also counts unfinished requests: `check`)."""
        return {"ttft_s": self.p99_ttft_s, "tpot_s": self.p99_tpot_s, "e2e_s": self.p99_e2e_s,
                "ttfa_s": self.p99_ttfa_s}[column]

    def check(self, slo: SLO) -> Judgement:
        return judge(slo, self.slo_sample)


def _spread(values) -> float | None:
    values = np.asarray(values, dtype=float)
    if len(values) < 2 or values.mean() <= 0:
        return None
    return float((values.max() - values.min()) / values.mean())


def _grouped(values, durations: list[float]) -> tuple[float, ...] | None:
    """Per-round values as STABILITY_WINDOWS groups of consecutive rounds (as equal as they divide),
    each the duration-weighted mean of its rounds: a group's rate over its total time. With at most
    STABILITY_WINDOWS rounds, the rounds as they are. The judge's spread is a range, which widens
    with every window added and every second taken off a window: ten rounds of 2 s flagged every
    closed-loop level of two sweeps (a range of ten short windows) that three windows called steady."""
    if values is None or len(values) <= STABILITY_WINDOWS:
        return None if values is None else tuple(values)
    groups = np.array_split(np.arange(len(values)), STABILITY_WINDOWS)
    values, durations = np.asarray(values, dtype=float), np.asarray(durations, dtype=float)
    return tuple(float(np.average(values[g], weights=durations[g])) if durations[g].sum() > 0 else float(values[g].mean())
                 for g in groups)


def _request_rates(ok: list[Record], spans: list[tuple[float, float]]) -> tuple[float, ...] | None:
    """Requests/s per window, each request spread evenly over its lifetime [t_start, t_start + e2e]
    (as tokens are counted when they arrived: a window at c=1 does not swing by whole requests)."""
    if not ok or not spans:
        return None
    start = np.array([r.t_start for r in ok])
    end = start + np.maximum(np.array([r.e2e_s for r in ok], dtype=float), 1e-9)
    rates = []
    for lo, hi in spans:
        if hi <= lo:
            return None
        overlap = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)
        rates.append(float((overlap / (end - start)).sum() / (hi - lo)))
    return tuple(rates)


def _offered_rates(records: list[Record], spans: list[tuple[float, float]]) -> tuple[float, ...] | None:
    """Open loop (records with a scheduled send): output tokens/s that arrived per window, each request's
    tokens (what it streamed, else what it asked for) at its send; None for a closed loop."""
    sent = [r for r in records if r.t_sched is not None]
    if not sent or not spans:
        return None
    start = np.array([r.t_start for r in sent])
    tokens = np.array([float(r.output_tokens or r.output_tokens_asked or 0) for r in sent])
    return tuple(float(tokens[(start >= lo) & (start < hi)].sum() / (hi - lo)) if hi > lo else 0.0
                 for lo, hi in spans)


def _fixed_share(ok: list[Record]) -> float | None:
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2e = [r.e2e_s for r in ok if r.ttft_s is not None]
    if not ttft or sum(e2e) <= 0:
        return None
    return float(min(max(sum(ttft) / sum(e2e), 0.0), 1.0))


def _token_times(records: list[Record]) -> tuple[np.ndarray, np.ndarray]:
    """When each output token arrived, for the stability windows: a streamed request's chunks at
    t_start + TTFT + the running sum of its gaps (its tokens shared among them; one each when the
    count is unknown), else all its tokens at its end. Every record of the level counts, whatever
    its phase or status: the window measures what the server produced in it, including the
    warm-up requests still streaming when it opens and those cut off when it closes. Counting
    tokens when they arrived, not when their request ended, keeps a short level's windows from
    swinging by whole requests (at c=1 a window holds only a few)."""
    times, weights = [], []
    for r in records:
        if r.ttft_s is not None:
            chunks = r.t_start + r.ttft_s + np.concatenate(([0.0], np.cumsum(r.itl_s or [])))
            times.append(chunks)
            weights.append(np.full(len(chunks), (r.output_tokens or len(chunks)) / len(chunks)))
        elif r.e2e_s is not None and r.status == "ok":
            times.append(np.array([r.t_start + r.e2e_s]))
            weights.append(np.array([float(r.output_tokens or 0)]))
    if not times:
        return np.empty(0), np.empty(0)
    return np.concatenate(times), np.concatenate(weights)


def level_stats(records: list[Record], level: str, steps=None) -> LevelStats:
    """`steps`: the engine_steps.csv rows of this level's server (a DataFrame), for the speed index."""
    # a hedge's cancelled copy is neither a request of its own nor an error: its pair is the kept copy's
    mine = [r for r in records if r.level == level and r.phase == "measure" and r.status != "cancelled"]
    finished = [r for r in mine if r.status != "incomplete"]
    ok = [r for r in finished if r.status == "ok"]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    tpot = [value for value in (r.tpot_s for r in ok) if value is not None]
    throughput, request_rate, windows, speed, busy, rates, offered = None, None, (), None, None, None, None
    timed = [r for r in ok if r.e2e_s is not None]
    # request rates count the level's ok requests of any phase, as the token windows count its tokens
    lived = [r for r in records if r.level == level and r.status == "ok" and r.e2e_s is not None]
    spans = level_windows([r.t_start for r in mine],
                          [r.t_start + r.e2e_s if r.e2e_s is not None and r.status == "ok" else r.t_start for r in mine],
                          [r.round for r in mine])
    measured_s = total_s(spans)
    if measured_s > 0:
        tokens = np.array([r.output_tokens or 0 for r in ok if r.e2e_s is not None], dtype=float)
        throughput = float(tokens.sum() / measured_s)
        request_rate = len(tokens) / measured_s
        times, weights = _token_times([r for r in records if r.level == level])
        if len(spans) > 1:     # in rounds: each round is a window, or a group of them
            windows = tuple(float(weights[inside(times, [(start, end)])].sum() / (end - start)) if end > start else 0.0
                            for start, end in spans)
            speed, busy = speed_index_over(steps, spans), busy_share_over(steps, spans)
            rates = _request_rates(lived, spans)
            offered = _offered_rates([r for r in records if r.level == level], spans)
            durations = [end - start for start, end in spans]
            windows, speed, busy, rates, offered = (_grouped(values, durations)
                                                    for values in (windows, speed, busy, rates, offered))
        else:
            (start, end), = spans
            counts, edges = np.histogram(times, bins=STABILITY_WINDOWS, range=(start, end), weights=weights)
            windows = tuple(float(x) for x in counts / np.diff(edges))
            speed = speed_index(steps, start, end, STABILITY_WINDOWS)
            busy = busy_share_over(steps, list(zip(edges[:-1], edges[1:])))
            rates = _request_rates(lived, list(zip(edges[:-1], edges[1:])))
            offered = _offered_rates([r for r in records if r.level == level], list(zip(edges[:-1], edges[1:])))
    return LevelStats(len(finished), len(finished) - len(ok), len(mine) - len(finished),
                      percentile(ttft, 99), percentile(tpot, 99), percentile(e2e, 99), throughput, windows, speed,
                      rounds=max(len(spans), 1),
                      busy_share=busy, spans=tuple(spans), window_request_rates=rates, fixed_share=_fixed_share(timed),
                      window_offered=offered, request_rate_rps=request_rate,
                      p99_ttfa_s=percentile([r.ttfa_s for r in ok if r.ttfa_s is not None], 99),
                      slo_sample=SloSample.from_records(mine))

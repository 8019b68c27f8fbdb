"""The SLO, and the one rule that says whether a set of requests meets it: `judge`.

Every command that asks "does this meet the SLO" asks `judge`: `servecap sweep --auto` of each level
it tries, the report's verdict (and a classic model's report) of each level, `servecap tune` of each
configuration's levels, and `servecap plan` and `servecap fleet` of each window; `servecap predict`,
whose p99s are predicted rather than a set's own, puts them to the same limits (`judge_p99s`). So the sweep can never announce
a knee the report then contradicts, and a plan's window is judged as a measured level is. Pure: no I/O.

The rule (docs/report.md, "The SLO rule"):
- at most ERROR_RATE_LIMIT of the answered requests failed: failed / (ok + failed) <= 1%;
- every set limit holds at p99 (a p99 equal to its limit holds): numpy's default (linear)
  percentile, the one the report's tables show, over the ok requests' values, with each unfinished
  request as one more value at +inf in every latency column (TPOT and TTFA too). Unfinished: never
  answered, neither ok nor failed: a sweep record still in flight when Locust's stop timeout ran
  out (status `incomplete`), a simulated request no replica finished. So the p99 is +inf when the
  unfinished requests reach into the top 1%, and a set that lost requests cannot pass by dropping
  them;
- a set limit with nothing to judge (no ok request with that value and no unfinished one) fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from contract.records import Record

# SLO field -> latency column of a record (and of the report's records frame)
SLO_METRICS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s", "ttfa_ms": "ttfa_s"}
LATENCY_COLUMNS = tuple(SLO_METRICS.values())
ERROR_RATE_LIMIT = 0.01  # a level failing more than 1% of its answered requests is not sustainable
PERCENTILE = 99.0        # the SLO's limits hold at p99
CUT_AT_SWITCH = "excluded"   # a compare run's record cut off at a slice switch (Record.switch): not in any set


@dataclass(frozen=True)
class SLO:
    """Per-request latency limits in milliseconds, judged at p99; None means no limit on that metric.

    run.json's `slo` section (only the set limits are written).
    """

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    ttfa_ms: float | None = None   # time to the first answer token (after a reasoning model's reasoning)

    def __post_init__(self) -> None:
        for name in SLO_METRICS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                          and value > 0):
                flag = f"--slo-{name.removesuffix('_ms')}-ms"
                raise ValueError(f"{name} must be a positive number of milliseconds ({flag}), got {value!r}")

    @property
    def is_set(self) -> bool:
        return any(getattr(self, name) is not None for name in SLO_METRICS)

    def limits_s(self) -> dict[str, float]:
        """{latency column: limit in seconds} for the SLOs that are set."""
        return {column: getattr(self, name) / 1000.0
                for name, column in SLO_METRICS.items() if getattr(self, name) is not None}

    def only(self, column: str) -> "SLO":
        """This SLO with just the limit on one latency column (`ttft_s`, `tpot_s`, `e2e_s` or `ttfa_s`)."""
        return SLO(**{name: getattr(self, name) for name, col in SLO_METRICS.items() if col == column})

    def with_overrides(self, **limits_ms: float | None) -> "SLO":
        """This SLO with the given limits (those not None) replacing the stored ones."""
        return replace(self, **{name: value for name, value in limits_ms.items() if value is not None})

    def as_dict(self) -> dict[str, float | None]:
        """Every limit, set or not (summary.json's verdict)."""
        return asdict(self)

    def to_dict(self) -> dict[str, float]:
        """run.json's `slo`: the set limits only."""
        return {name: value for name, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "slo") -> "SLO":
        """run.json's `slo`, tolerantly: anything unusable becomes no SLO, with a sentence in `problems`."""
        if not isinstance(data, dict):
            _note(problems, f"{where} is not an object; no SLO read from it")
            return cls()
        try:
            return cls(**{name: data.get(name) for name in SLO_METRICS})
        except ValueError as exc:
            _note(problems, f"{where} ignored: {exc}")
            return cls()


def _note(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def percentile(values, q: float, unfinished: int = 0) -> float | None:
    """numpy's default (linear) q-th percentile of `values` (seconds; NaN dropped) with `unfinished`
    more values at +inf: None with no value at all; +inf when an unfinished one is a neighbour the
    interpolation weighs (numpy on +inf itself can give NaN, as 0 x inf); else exactly numpy's
    figure over the whole set, which the unfinished ones shift only by their count."""
    finite = np.asarray(values, dtype=float)
    finite = finite[~np.isnan(finite)]
    n = len(finite) + unfinished
    if n == 0:
        return None
    if unfinished == 0:
        return float(np.percentile(finite, q))
    # where numpy's linear rule lands among n sorted values: past the last finite one (with any
    # weight on the next) means it reads an unfinished one
    position = float(np.percentile(np.arange(n, dtype=float), q))
    if position > len(finite) - 1:
        return math.inf
    # not read: any stand-in at or above the largest finite value leaves numpy's figure as it is
    return float(np.percentile(np.concatenate((finite, np.full(unfinished, finite.max()))), q))


@dataclass(frozen=True)
class SloSample:
    """One set of requests as the judge reads it (a load level's measure phase, a plan's window).

    Attributes:
        ok: requests answered ok.
        failed: requests that ended in an error (any status but ok and `incomplete`; a request lost
            with a killed replica).
        unfinished: requests never answered (see the module docstring): neither ok nor failed.
        values: {latency column: [V] seconds} over the ok requests that have that figure (NaN and
            None dropped: TPOT of a one-token reply, TTFT of a reply that did not stream).
    """

    ok: int
    failed: int = 0
    unfinished: int = 0
    values: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("ok", "failed", "unfinished"):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
                raise ValueError(f"SloSample.{name} must be a count >= 0, got {count!r}")
            object.__setattr__(self, name, int(count))
        unknown = set(self.values) - set(LATENCY_COLUMNS)
        if unknown:
            raise ValueError(f"SloSample.values: unknown latency column(s) {sorted(unknown)}; "
                             f"use {', '.join(LATENCY_COLUMNS)}")
        clean = {}
        for column, values in self.values.items():
            array = np.asarray(values, dtype=float).ravel()
            array = array[~np.isnan(array)]
            if len(array) > self.ok:
                raise ValueError(f"SloSample.values[{column!r}]: {len(array)} values from {self.ok} ok requests")
            clean[column] = array
        object.__setattr__(self, "values", clean)

    @classmethod
    def from_arrays(cls, *, ok, unfinished=None, **columns) -> "SloSample":
        """Per request [N]: `ok` (bool: answered ok), `unfinished` (bool: never answered; None: none
        was), every other request failed; `columns`: latency column -> [N] seconds, NaN where a request
        has no value (only the ok requests' are read)."""
        ok = np.asarray(ok, dtype=bool)
        unfinished = np.zeros(len(ok), dtype=bool) if unfinished is None else np.asarray(unfinished, dtype=bool)
        if unfinished.shape != ok.shape or (ok & unfinished).any():
            raise ValueError("SloSample.from_arrays: `ok` and `unfinished` must be [N] and never both true")
        values = {}
        for column, array in columns.items():
            array = np.asarray(array, dtype=float)
            if array.shape != ok.shape:
                raise ValueError(f"SloSample.from_arrays: {column} has {array.shape}, the requests {ok.shape}")
            values[column] = array[ok]
        return cls(ok=int(ok.sum()), failed=int((~ok & ~unfinished).sum()), unfinished=int(unfinished.sum()),
                   values=values)

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> "SloSample":
        """Records of one set, as the caller picks them (e.g. a level's measure-phase records): status
        ok is ok, `incomplete` unfinished, any other failed; TPOT is `Record.tpot_s`. A compare run's
        records cut off at a slice switch (`switch: "excluded"`) are left out: the load generator
        stopped them, not the server (reports.paired leaves them out of every statistic too); so are a hedge's
        cancelled copies (`--hedge-after`: the pair is judged by its kept copy, as reports.summary does)."""
        records = [r for r in records if r.switch != CUT_AT_SWITCH and r.status != "cancelled"]
        status = [r.status for r in records]
        return cls.from_arrays(
            ok=[s == "ok" for s in status], unfinished=[s == "incomplete" for s in status],
            ttft_s=[r.ttft_s for r in records], tpot_s=[r.tpot_s for r in records],
            e2e_s=[r.e2e_s for r in records], ttfa_s=[r.ttfa_s for r in records])

    @property
    def requests(self) -> int:
        return self.ok + self.failed + self.unfinished

    @property
    def error_rate(self) -> float | None:
        """failed / (ok + failed); None when no request was answered either way."""
        answered = self.ok + self.failed
        return self.failed / answered if answered else None

    def percentile(self, column: str, q: float = PERCENTILE) -> float | None:
        """The q-th percentile of one latency column, unfinished requests at +inf (`percentile`)."""
        return percentile(self.values.get(column, ()), q, self.unfinished)


@dataclass(frozen=True)
class Judgement:
    """Whether a set of requests meets the SLO, why not, and the figures it was judged on.

    Attributes:
        meets: the rule (module docstring) holds.
        reason: why not, e.g. "error rate 2.0% > 1%", "ttft_s p99 812.0 ms > 500.0 ms",
            "no ttft_s values"; "" when it meets it.
        broken_by: "error_rate" or the latency column that broke it; None when it meets it.
        p99_s: every latency column's p99 in seconds (+inf: unfinished requests in its top 1%;
            None: no value), set limit or not.
        error_rate: failed / (ok + failed); None when no request was answered.
        excess: the worst set p99 over its limit (p99 / limit; +inf for an unbounded or missing
            one; 0.0 with no limit set): how far a miss is, for a search ranking its misses.
    """

    meets: bool
    reason: str = ""
    broken_by: str | None = None
    p99_s: Mapping[str, float | None] = field(default_factory=dict)
    error_rate: float | None = None
    excess: float = 0.0


def judge(slo: SLO, sample: SloSample) -> Judgement:
    """The rule (module docstring) over one set of requests."""
    p99_s = {column: sample.percentile(column) for column in LATENCY_COLUMNS}
    unbounded = f"{sample.unfinished} of {sample.requests} requests never finished"
    return _judged(slo, p99_s, sample.error_rate, unbounded)


def judge_p99s(slo: SLO, p99_s: Mapping[str, float | None], error_rate: float | None = None) -> Judgement:
    """The same limits over p99s that are not a set's own (`servecap predict`'s: the median over
    simulated replications of each one's p99): `judge` is this over a sample's p99s and error rate."""
    return _judged(slo, {column: p99_s.get(column) for column in LATENCY_COLUMNS}, error_rate,
                   "unfinished requests")


def _judged(slo: SLO, p99_s: dict[str, float | None], error_rate: float | None, unbounded: str) -> Judgement:
    limits = slo.limits_s()
    excess = max([math.inf if p99_s[c] is None else p99_s[c] / limit for c, limit in limits.items()] or [0.0])

    def verdict(reason: str = "", broken_by: str | None = None) -> Judgement:
        return Judgement(not reason, reason, broken_by, p99_s, error_rate, excess)

    if error_rate is not None and error_rate > ERROR_RATE_LIMIT:
        return verdict(f"error rate {error_rate:.1%} > {ERROR_RATE_LIMIT:.0%}", "error_rate")
    for column, limit in limits.items():
        p99 = p99_s[column]
        if p99 is None:
            return verdict(f"no {column} values", column)
        if math.isinf(p99):
            return verdict(f"{column} p99 unbounded > {limit * 1000:.1f} ms: {unbounded}", column)
        if p99 > limit:
            return verdict(f"{column} p99 {p99 * 1000:.1f} ms > {limit * 1000:.1f} ms", column)
    return verdict()



def add_slo_arguments(parser: Any, *, title: str = "SLO (p99, milliseconds)") -> None:
    """The SLO options, once for every command that judges one."""
    group = parser.add_argument_group(title)
    group.add_argument("--slo-ttft-ms", type=float, help="p99 time to first token")
    group.add_argument("--slo-tpot-ms", type=float, help="p99 time per output token after the first")
    group.add_argument("--slo-e2e-ms", type=float, help="p99 end-to-end latency")
    group.add_argument("--slo-ttfa-ms", type=float, help="p99 time to the first answer token (after a reasoning "
                                                         "model's reasoning)")


def slo_from_args(args: Any) -> SLO:
    """The SLO a parser with `add_slo_arguments` read (ValueError names a bad limit)."""
    return SLO(**{name: getattr(args, f"slo_{name}", None) for name in SLO_METRICS})

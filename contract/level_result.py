"""One load level's result, typed: an object of summary.json's `levels` (contract/summary.py holds the rest).

`reports/summary.py` builds a `LevelResult` from the run directory; `to_dict` writes the keys the
file has always had, in its order (None as null where the key was always written); `from_dict`
reads a file back tolerantly: a key an older file lacks keeps its default, one this version does
not know stays in `extra` and is written back. Every reader takes these objects and reads
attributes. Free-form by nature, and so mappings: the server's gauges (`server`: the names its
/metrics exported), each device's means (`device`), the host's steal per core (`host_steal`).

    LevelResult      counts, rates, token means, goodput, `metrics` {name: Distribution}, and its sections:
    Distribution     one latency's count, mean, percentiles and their 95% intervals (reports.stats.summarize)
    Offered          the offered load its id names: {"concurrency": 8} or {"rate_rps": 2.0}
    LoadgenHealth    the load generator's lateness, CPU, loop lag, warnings (`LagLimited`: where the lag
                     was wider than a percentile's own interval)
    TurnStats, ModelStats, SlotWaits    multi-turn and multi-model (LoRA) runs
    SessionStats                        agentic sessions (--session)
    HedgeStats                          hedged requests (--hedge-after)
    ServerHistogram  the server's own latency histogram over the level's windows
    ClientVsServer   the client's latency beside the server's (`ClientServerPair`, `TtftSplit`)
    LevelPrediction  what the calculators and the simulator predicted for it (`Comparison` per quantity)

Pure: plain floats, no numpy or pandas.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from contract.sections import FrozenSection, keep_null, note, null_as

STATS = ("mean", "p50", "p90", "p95", "p99")   # a Distribution's statistics, by name
CI_PERCENTILES = ("p50", "p95", "p99")          # those with a 95% interval
Interval = tuple[float | None, float | None]      # [lo, hi]; hi is null for a histogram's +Inf bucket


@dataclass(frozen=True, kw_only=True)
class Distribution(FrozenSection):
    """count, mean, p50 ... p99 and the 95% intervals of p50/p95/p99 of one latency's raw values (in
    seconds); every figure None when count is 0. `ci_method`: "bootstrap(R)", "order-statistic",
    "degenerate", or None (reports.stats says which when)."""

    count: int = keep_null(0)
    mean: float | None = keep_null()
    p50: float | None = keep_null()
    p90: float | None = keep_null()
    p95: float | None = keep_null()
    p99: float | None = keep_null()
    p50_ci95: Interval | None = keep_null()
    p95_ci95: Interval | None = keep_null()
    p99_ci95: Interval | None = keep_null()
    ci_method: str | None = keep_null()

    def at(self, stat: str) -> float | None:
        """One of STATS by name (a gate threshold's `ttft_s.p99`, a figure's percentile)."""
        if stat not in STATS:
            raise KeyError(f"no statistic {stat!r}; known: {', '.join(STATS)}")
        return getattr(self, stat)

    def ci95(self, stat: str) -> Interval | None:
        """The 95% interval of p50, p95 or p99; None for the others and when unknown."""
        return getattr(self, f"{stat}_ci95") if stat in CI_PERCENTILES else None


EMPTY = Distribution()


@dataclass(frozen=True)
class Offered:
    """The offered load a level id names: `kind` "concurrency" (users, an int) or "rate_rps" (requests/s)."""

    kind: str
    value: float

    def to_dict(self) -> dict[str, float]:
        return {self.kind: self.value}

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "offered") -> Offered | None:
        """{kind: value}; None for {} (an id without a load) or anything else (with a sentence in `problems`)."""
        if isinstance(data, dict) and len(data) == 1:
            (kind, value), = data.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return cls(str(kind), value)
        if data not in ({}, None):
            note(problems, f"{where} is not one {{kind: load}}; left out")
        return None


@dataclass(frozen=True, kw_only=True)
class LagLimited(FrozenSection):
    """A percentile the load generator's event-loop lag could move by more than its own 95% interval."""

    metric: str | None = None   # "ttft_s", "itl_s", "e2e_s"
    q: str | None = None        # "p50", "p95", "p99"
    lag_ms: float | None = None
    ci_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class LoadgenHealth(FrozenSection):
    """Send lateness of open-loop records (ms), workers, and requests.meta.json's CPU, loop lag and
    warnings; a key is written only where it was measured (no lateness in a closed loop, no CPU
    without requests.meta.json)."""

    workers: int = keep_null(0)
    lateness_p50_ms: float | None = None
    lateness_p99_ms: float | None = None
    lateness_max_ms: float | None = None
    late: bool | None = None                  # p99 lateness over contract.loadgen_meta's limit
    cpu_max_pct: float | None = None
    limited_by_loadgen: bool | None = None
    loop_lag_p50_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    loop_lag_max_ms: float | None = None
    warnings: tuple[str, ...] | None = None
    lag_limited: tuple[LagLimited, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PercentilePair(FrozenSection):
    p50: float | None = keep_null()
    p99: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class TurnStats(FrozenSection):
    """One turn of a multi-turn level (later turns carry longer histories)."""

    requests: int = keep_null(0)
    prompt_tokens_mean: float | None = keep_null()
    ttft_s: PercentilePair = field(default_factory=PercentilePair)
    tpot_s: PercentilePair = field(default_factory=PercentilePair)
    e2e_s: PercentilePair = field(default_factory=PercentilePair)
    cached_share: float | None = keep_null()   # of the turn's prompt tokens, the server's prefix-cache hits (its
                                               # usage's cached_tokens; None where the server gives none)


@dataclass(frozen=True, kw_only=True)
class SessionStats(FrozenSection):
    """A --session level's sessions, whole (reports.sessions): the ones begun in the measure window."""

    sessions: int = keep_null(0)           # begun in the window (their first request is a measure record)
    completed: int = keep_null(0)          # every request ok, the last one answered
    failed: int = keep_null(0)             # a request failed part-way (the session ended there)
    cut: int = keep_null(0)                # still running when the level ended
    completion_s: PercentilePair = field(default_factory=PercentilePair)   # first send to last byte
    tool_wait_share: float | None = keep_null()   # of the completed sessions' time, waiting on tools/sub-agents
    requests_mean: float | None = keep_null()     # requests per completed session, sub-agents' included
    tool_calls_mean: float | None = keep_null()   # tool calls per completed session
    uncalled_rounds: int = keep_null(0)    # tool rounds the server answered without a call


@dataclass(frozen=True, kw_only=True)
class HedgeStats(FrozenSection):
    """A --hedge-after level's hedging (reports.hedging)."""

    requests: int = keep_null(0)               # the users' requests (copies not counted)
    hedged: int = keep_null(0)                 # of them, sent again after the delay
    hedged_share: float | None = keep_null()
    copies_kept: int = keep_null(0)            # pairs the copy won
    cancelled: int = keep_null(0)              # losing copies closed (primaries and copies)
    extra_requests: float | None = keep_null()  # copies sent per user request: the load the policy adds


@dataclass(frozen=True, kw_only=True)
class ModelSlotWait(FrozenSection):
    waited_share: float | None = keep_null()
    mean_s: float | None = keep_null()
    p99_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class ModelStats(FrozenSection):
    """One model of a --model-mix level (reports.by_model)."""

    requests: int = keep_null(0)
    ttft_s: PercentilePair = field(default_factory=PercentilePair)
    tpot_s: PercentilePair = field(default_factory=PercentilePair)
    e2e_s: PercentilePair = field(default_factory=PercentilePair)
    slot_wait: ModelSlotWait | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class SlotWaits(FrozenSection):
    """A level's waits for a LoRA adapter slot (reports.by_model.slot_waits)."""

    requests: int = keep_null(0)
    waited_share: float | None = keep_null()
    wait_p50_s: float | None = keep_null()   # of the requests that waited
    wait_p99_s: float | None = keep_null()
    wait_mean_s: float | None = keep_null()  # over all
    ttft_p50_waited_s: float | None = keep_null()
    ttft_p50_not_waited_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class ServerHistogram(FrozenSection):
    """One of the server's latency histograms over the level's windows (reports.server_metrics.latency):
    a percentile is only known to lie in its bucket."""

    count: int = keep_null(0)
    mean: float | None = keep_null()
    source: str | None = keep_null()   # the engine's metric name
    p50: float | None = keep_null()
    p50_bucket: Interval | None = keep_null()
    p90: float | None = keep_null()
    p90_bucket: Interval | None = keep_null()
    p99: float | None = keep_null()
    p99_bucket: Interval | None = keep_null()

    def at(self, stat: str) -> float | None:
        """mean, p50, p90 or p99 by name."""
        if stat not in ("mean", "p50", "p90", "p99"):
            raise KeyError(f"no statistic {stat!r} in a server histogram")
        return getattr(self, stat)

    def bucket(self, stat: str) -> Interval | None:
        return getattr(self, f"{stat}_bucket") if stat in ("p50", "p90", "p99") else None


PAIRED_STATS = ("p50", "p99", "mean")


@dataclass(frozen=True, kw_only=True)
class ClientServerPair(FrozenSection):
    """The client's and the server's value of one latency; overhead = client - server, written only where
    both are known (its share of the client's, None when the client's is not positive)."""

    client_p50: float | None = None
    server_p50: float | None = None
    server_p50_bucket: Interval | None = None
    overhead_p50: float | None = None
    overhead_share_p50: float | None = None
    client_p99: float | None = None
    server_p99: float | None = None
    server_p99_bucket: Interval | None = None
    overhead_p99: float | None = None
    overhead_share_p99: float | None = None
    client_mean: float | None = None
    server_mean: float | None = None
    overhead_mean: float | None = None
    overhead_share_mean: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for stat in PAIRED_STATS:
            out[f"client_{stat}"] = getattr(self, f"client_{stat}")
            out[f"server_{stat}"] = getattr(self, f"server_{stat}")
            if stat != "mean":
                bucket = getattr(self, f"server_{stat}_bucket")
                out[f"server_{stat}_bucket"] = list(bucket) if bucket is not None else None
            if getattr(self, f"overhead_{stat}") is not None:
                out[f"overhead_{stat}"] = getattr(self, f"overhead_{stat}")
                out[f"overhead_share_{stat}"] = getattr(self, f"overhead_share_{stat}")
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class TtftSplit(FrozenSection):
    """The client's mean TTFT = overhead + front end + queue + prefill (means add up; front_end_s None
    where the server exports no queue or prefill histogram)."""

    client_s: float | None = keep_null()
    overhead_s: float | None = keep_null()
    queue_s: float | None = keep_null()
    prefill_s: float | None = keep_null()
    front_end_s: float | None = keep_null()


@dataclass(frozen=True, kw_only=True)
class ClientVsServer(FrozenSection):
    """reports.server_metrics.overhead's pairs: TTFT and E2E where the server exports them."""

    ttft_s: ClientServerPair | None = None
    e2e_s: ClientServerPair | None = None
    ttft_split_mean: TtftSplit | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Comparison(FrozenSection):
    """Predicted against measured: relative_error = predicted / measured - 1. A simulated latency
    (`simulated`) carries its spread over the simulator's replications (`interval`)."""

    predicted: float | None = None
    measured: float | None = None
    relative_error: float | None = None
    unit: str | None = None
    interval: Interval | None = None
    simulated: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = {"predicted": self.predicted, "measured": self.measured, "relative_error": self.relative_error,
               "unit": self.unit}
        if self.simulated:
            out["interval"] = list(self.interval) if self.interval is not None else None
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "") -> Comparison:
        read = super().from_dict(data, problems, where)
        return replace(read, simulated=isinstance(data, dict) and "interval" in data)


@dataclass(frozen=True, kw_only=True)
class LevelPrediction(FrozenSection):
    """A level's `predicted` (reports.predict.per_level): the served model, the step model used and each
    compared quantity; or, where nothing could be predicted (`comparisons` None), the model when known
    and why not."""

    model: str | None = None
    dtype: str | None = None
    block_size: int | None = None
    step_model: str | None = None
    kv_dtype: str | None = None
    kv_dtype_source: str | None = None
    comparisons: dict[str, Comparison] | None = None
    unavailable: tuple[str, ...] = ()
    model_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.comparisons is None:
            out: dict[str, Any] = {"model": self.model} if self.model is not None else {}
            out["unavailable"] = list(self.unavailable)
        else:
            out = {"model": self.model, "dtype": self.dtype, "block_size": self.block_size,
                   "step_model": self.step_model, "kv_dtype": self.kv_dtype, "kv_dtype_source": self.kv_dtype_source,
                   "comparisons": {name: pair.to_dict() for name, pair in self.comparisons.items()},
                   "unavailable": list(self.unavailable)}
            if self.model_source is not None:
                out["model_source"] = self.model_source
        out.update(self.extra)
        return out


@dataclass(frozen=True, kw_only=True)
class LevelResult(FrozenSection):
    """One level of a sweep: its measure-phase records summed up (reports.summary builds it).

    `requests` are the finished ones (ok + errors); `incomplete` were still in flight when the level
    stopped. `windows`: when it was measured, one per round (`window`: the first start and the last
    end); `duration_s` their total. Rates are per second of that duration; token means over the ok
    requests. `metrics`: ttft_s, tpot_s, itl_s, e2e_s, ttfa_s, queue_s, e2e_with_queue_s (a file from
    before a metric existed lacks it).
    """

    level: str
    strategy: str | None = keep_null()
    offered: Offered | None = null_as(dict)
    requests: int = keep_null(0)
    ok: int = keep_null(0)
    errors: int = keep_null(0)
    incomplete: int = keep_null(0)
    error_rate: float | None = keep_null()
    statuses: dict[str, int] = field(default_factory=dict)
    window: tuple[float, float] | None = keep_null()
    windows: tuple[tuple[float, float], ...] = ()
    duration_s: float | None = keep_null()
    request_rate_rps: float | None = keep_null()
    output_tokens_per_s: float | None = keep_null()
    prompt_tokens_per_s: float | None = keep_null()
    output_tokens: int = keep_null(0)
    prompt_tokens_mean: float | None = keep_null()
    output_tokens_mean: float | None = keep_null()
    reasoning_tokens_mean: float | None = keep_null()
    goodput_rps: float | None = keep_null()
    slo_attainment: float | None = keep_null()
    metrics: dict[str, Distribution] = field(default_factory=dict)
    loadgen: LoadgenHealth = field(default_factory=LoadgenHealth)
    by_turn: dict[str, TurnStats] | None = keep_null()
    sessions: SessionStats | None = keep_null()
    hedging: HedgeStats | None = keep_null()
    by_model: dict[str, ModelStats] | None = keep_null()
    lora_slot_waits: SlotWaits | None = keep_null()
    server: dict[str, Any] = field(default_factory=dict)              # free-form: the gauges the server exported
    server_latency: dict[str, ServerHistogram] = field(default_factory=dict)
    device: dict[str, dict[str, float]] = field(default_factory=dict)  # free-form: {sample group: its means}
    host_steal: dict[str, float] = field(default_factory=dict)        # {core: the share the VM's host took}
    client_vs_server: ClientVsServer | None = None
    energy_per_output_token_j: float | None = keep_null()
    predicted: LevelPrediction | None = None

    def metric(self, name: str) -> Distribution:
        """`metrics[name]`, or an empty Distribution where the level (an older file's) has none."""
        return self.metrics.get(name) or EMPTY

    @property
    def load(self) -> float | None:
        """The offered load's number (users or requests/s); None for an id without one."""
        return self.offered.value if self.offered is not None else None

    @property
    def spans(self) -> tuple[tuple[float, float], ...]:
        """Its windows; a file from before rounds has only `window`."""
        return self.windows or ((self.window,) if self.window else ())

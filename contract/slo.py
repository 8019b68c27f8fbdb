"""The SLO and the one rule that says whether a load level meets it.

`servecap sweep --auto` (while it searches for the knee) and the report's verdict (after
the run) both judge a level with `check_level`, so the sweep can never announce a knee
the report then contradicts. Pure: no I/O.

The rule: a level meets the SLO when at most ERROR_RATE_LIMIT of its finished requests
failed and every set p99 (numpy's default linear percentile over the level's `ok`
measure-phase records) is within its limit. A set limit with no values to judge fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

# SLO field -> latency column of a record (and of the report's records frame)
SLO_METRICS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s", "ttfa_ms": "ttfa_s"}
ERROR_RATE_LIMIT = 0.01  # a level failing more than 1% of its finished requests is not sustainable


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


@dataclass(frozen=True)
class LevelCheck:
    """Whether one level meets the SLO, and why not (e.g. "error rate 2.0% > 1%")."""

    meets: bool
    reason: str = ""


def error_rate_ok(error_rate: float | None) -> bool:
    """At most ERROR_RATE_LIMIT of the finished requests failed (None: no finished request, no errors)."""
    return error_rate is None or error_rate <= ERROR_RATE_LIMIT


def check_level(slo: SLO, error_rate: float | None, p99_s: Mapping[str, float | None]) -> LevelCheck:
    """The rule (module docstring). `error_rate`: failed / finished requests (`incomplete` ones, still in
    flight when the level stopped, are neither); `p99_s`: {latency column: p99 in seconds or None}."""
    if not error_rate_ok(error_rate):
        return LevelCheck(False, f"error rate {error_rate:.1%} > {ERROR_RATE_LIMIT:.0%}")
    for column, limit in slo.limits_s().items():
        p99 = p99_s.get(column)
        if p99 is None:
            return LevelCheck(False, f"no {column} values")
        if p99 > limit:
            return LevelCheck(False, f"{column} p99 {p99 * 1000:.1f} ms > {limit * 1000:.1f} ms")
    return LevelCheck(True)


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


def judge_records(slo: SLO, records) -> LevelCheck:
    """The rule over a set of measured `contract.records.Record`s (a level's, an arm's)."""
    import numpy as np

    finished = [r for r in records if r.status != "incomplete"]
    ok = [r for r in finished if r.status == "ok"]
    error_rate = (len(finished) - len(ok)) / len(finished) if finished else None
    p99 = {}
    for column in SLO_METRICS.values():
        values = [v for v in (getattr(r, column) for r in ok) if v is not None]
        p99[column] = float(np.percentile(values, 99)) if values else None
    return check_level(slo, error_rate, p99)

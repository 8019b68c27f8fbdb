"""Latency SLOs and goodput (DistServe's definition). Pure: no I/O.

DistServe (Zhong et al., OSDI 2024): a request counts toward goodput only if
it meets *every* SLO; goodput is the rate of such requests. A request that
did not finish ok never counts. TPOT is undefined below 2 output tokens, so
such a request cannot violate the TPOT SLO.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

# SLO field -> latency column in the records frame
SLO_METRICS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s"}


@dataclass(frozen=True)
class SLO:
    """Per-request latency limits in milliseconds; None means no limit on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def __post_init__(self) -> None:
        for name in SLO_METRICS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{name} must be a positive number of milliseconds, got {value!r}")

    @property
    def is_set(self) -> bool:
        return any(getattr(self, name) is not None for name in SLO_METRICS)

    def limits_s(self) -> dict[str, float]:
        """{latency column: limit in seconds} for the SLOs that are set."""
        return {column: getattr(self, name) / 1000.0
                for name, column in SLO_METRICS.items() if getattr(self, name) is not None}

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_run(cls, run: dict, **overrides: float | None) -> SLO:
        """run.json's `slo` object, with command-line values (not None) taking precedence."""
        stored = run.get("slo") if isinstance(run.get("slo"), dict) else {}
        merged = {name: stored.get(name) for name in SLO_METRICS}
        merged.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**merged)


def meets_slo(records: pd.DataFrame, slo: SLO) -> pd.Series:
    """Boolean per record: status ok and every set SLO met (NaN TPOT counts as met)."""
    good = records["status"] == "ok"
    for column, limit in slo.limits_s().items():
        values = records[column]
        within = values <= limit
        if column == "tpot_s":
            within |= values.isna()
        good &= within
    return good


def goodput_rps(records: pd.DataFrame, slo: SLO, duration_s: float | None) -> float | None:
    """Requests meeting every SLO per second over the level's measurement window."""
    if not slo.is_set or not duration_s:
        return None
    return float(meets_slo(records, slo).sum()) / duration_s

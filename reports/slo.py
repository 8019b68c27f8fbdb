"""Goodput (DistServe's definition): requests that meet every latency SLO. Pure: no I/O.

The SLO itself, and the rule that judges a whole level at p99, are the contract's
(contract.slo); this is the per-request rule goodput counts by.

DistServe (Zhong et al., OSDI 2024): a request counts toward goodput only if
it meets *every* SLO; goodput is the rate of such requests. A request that
did not finish ok never counts. TPOT is undefined below 2 output tokens, so
such a request cannot violate the TPOT SLO.
"""

from __future__ import annotations

import pandas as pd

from contract.slo import SLO


def request_meets_slo(records: pd.DataFrame, slo: SLO) -> pd.Series:
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
    return float(request_meets_slo(records, slo).sum()) / duration_s

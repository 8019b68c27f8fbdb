"""Batching strategies side by side: one row per offered load, one column per (quantity, strategy)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from contract.level_result import LevelResult
from contract.summary import Summary

# column title -> how to read it from one summary level (None when the level lacks it)
QUANTITIES: dict[str, Callable[[LevelResult], float | None]] = {
    "output tok/s": lambda lvl: lvl.output_tokens_per_s,
    "req/s": lambda lvl: lvl.request_rate_rps,
    "goodput req/s": lambda lvl: lvl.goodput_rps,
    "TTFT p99 (ms)": lambda lvl: _ms(lvl.metrics["ttft_s"].p99),
    "TPOT p99 (ms)": lambda lvl: _ms(lvl.metrics["tpot_s"].p99),
    "E2E p99 (ms)": lambda lvl: _ms(lvl.metrics["e2e_s"].p99),
    "errors": lambda lvl: lvl.errors,
}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def strategy_table(summary: Summary) -> pd.DataFrame:
    """Numbers, not strings: index (offered kind, offered value), columns (quantity, strategy).

    Levels without an offered load or strategy in their id are left out (they have no row to go in).
    """
    rows = []
    for lvl in summary.levels:
        if not lvl.offered or not lvl.strategy:
            continue
        for quantity, read in QUANTITIES.items():
            rows.append({"offered": lvl.offered.kind, "load": lvl.offered.value, "quantity": quantity,
                         "strategy": lvl.strategy, "value": read(lvl)})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    strategies = list(dict.fromkeys(frame["strategy"]))
    table = frame.pivot_table(index=["offered", "load"], columns=["quantity", "strategy"], values="value",
                              aggfunc="first", dropna=False)
    columns = pd.MultiIndex.from_product([list(QUANTITIES), strategies], names=["quantity", "strategy"])
    return table.reindex(columns=columns)

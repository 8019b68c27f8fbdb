"""The per-token stats at the end of a test, where Locust puts its own request stats.

- console (not with --json or --json-file, as Locust): after Locust's tables, the same two tables for
  TTFT/TPOT/ITL/E2E, titled "Token latency (ms)";
- `--csv PREFIX`: `PREFIX_tokens.csv`, Locust's requests-CSV columns, one row per entry;
- `--json-file NAME`: `NAME.tokens.json`, Locust's stats JSON shape.
Written on Locust's `quit` event (after its own summary); workers write nothing.
"""

from __future__ import annotations

import csv
import json
import logging
from types import SimpleNamespace

from locust import stats as locust_stats

from loadgen.scenario.token_stats import TokenStats

console = logging.getLogger("locust.stats_logger")


def _without_total(lines: list) -> list:
    """Locust's tables end with its "Aggregated" row; over TTFT and ITL together it means nothing."""
    return lines[:-1]


def tokens_csv(tokens: TokenStats, handle) -> None:
    """Locust's requests CSV (columns and percentiles as --csv writes them) over the token entries."""
    rows: list = []
    writer = locust_stats.StatsCSV(tokens.as_environment(), locust_stats.PERCENTILES_TO_REPORT)
    writer.requests_csv(SimpleNamespace(writerow=lambda columns: rows.append(list(columns))))
    csv.writer(handle).writerows(_without_total(rows))


def summary_lines(tokens: TokenStats) -> list[str]:
    """Locust's two console tables (counts and means, percentiles) over the token entries."""
    return ["Token latency (ms): TTFT, TPOT and E2E once per ok request, ITL once per gap",
            *_without_total(locust_stats.get_stats_summary(tokens.stats, current=False)), "",
            *_without_total(locust_stats.get_percentile_stats_summary(tokens.stats)), ""]


def write_summary(tokens: TokenStats, options) -> None:
    if options is None or not tokens.entries():
        return
    json_file = getattr(options, "json_file", None)
    if not getattr(options, "json", False) and not json_file:   # where Locust prints its own tables
        for line in summary_lines(tokens):
            console.info(line)
    prefix = getattr(options, "csv_prefix", None)
    if prefix:
        with open(f"{prefix}_tokens.csv", "w", newline="") as handle:
            tokens_csv(tokens, handle)
    if json_file:
        with open(f"{json_file}.tokens.json", "w") as handle:
            json.dump([entry.serialize() for entry in tokens.entries()], handle, indent=4)

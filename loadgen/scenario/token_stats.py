"""Per-token latencies (TTFT, TPOT, ITL, E2E) in a Locust `RequestStats` of their own.

Locust's request events count requests: the header's RPS, the failures and "Aggregated"
must see each real request once (`locust_report.py` fires one event per request). The
per-token metrics live here instead, in Locust's own stats class (same rounding, same
percentiles, same CSV columns), keyed (api, metric): one TTFT, TPOT and E2E value per ok
request, one ITL value per gap. Shown by the web UI's "Token latency" tab
(`token_tab.py`), written next to `--csv`/`--json-file` output and printed after Locust's
own summary.

Distributed: each worker ships its entries inside Locust's own worker report (key
`servecap_tokens`, then resets them, as Locust does for its stats); the master merges.
A test start from the web UI clears them, "Reset stats" resets them.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import gevent
from locust import stats as locust_stats
from locust.stats import RequestStats, StatsEntry

from contract.records import tpot_s

METRICS = ("TTFT", "TTFA", "TPOT", "ITL", "E2E")   # TTFA: a reasoning stream's first answer token
REPORT_KEY = "servecap_tokens"
CHART_PERCENTILES = (0.5, 0.95)
HISTORY_LIMIT = 720            # chart points kept (one per HISTORY_STATS_INTERVAL_SEC: an hour at 5 s)
PAUSE_EVERY = 32               # entries logged between pauses while a long stream is counted


class TokenStats:
    """One process's per-token stats; `history` (local/master) feeds the charts."""

    def __init__(self) -> None:
        self.stats = RequestStats(use_response_times_cache=True)
        self.history: list[dict] = []   # {"t": unix s, "METRIC": {"p50": ms, "p95": ms}} per chart point

    # -- logging (the process that sent the request) --------------------------------------
    def log(self, api: str, outcome, label: str = "", pause=None) -> None:
        """An ok request's TTFT, TTFA (when it reasoned first: else it is TTFT), TPOT, every ITL gap and its
        E2E (ms), `pause()` every PAUSE_EVERY entries."""
        values: list[tuple[str, float]] = []
        if outcome.ttft_s is not None:
            values.append(("TTFT", outcome.ttft_s))
            if getattr(outcome, "reasoning_tokens", None) and getattr(outcome, "ttfa_s", None) is not None:
                values.append(("TTFA", outcome.ttfa_s))
            tpot = tpot_s(outcome.e2e_s, outcome.ttft_s, outcome.output_tokens)
            if tpot is not None:
                values.append(("TPOT", tpot))
        values.extend(("ITL", gap) for gap in outcome.itl_s)
        values.append(("E2E", outcome.e2e_s or 0.0))
        for number, (metric, seconds) in enumerate(values, start=1):
            self.stats.log_request(api, f"{label}{metric}", seconds * 1000.0, 0)
            if pause is not None and number % PAUSE_EVERY == 0:
                pause()

    # -- lifecycle ---------------------------------------------------------------------
    def clear(self) -> None:
        self.stats.clear_all()
        self.history.clear()

    def reset(self) -> None:
        self.stats.reset_all()
        self.history.clear()

    # -- distributed ---------------------------------------------------------------------
    def serialize_and_reset(self) -> list[dict]:
        return self.stats.serialize_stats()   # get_stripped_report: each entry resets as it is read

    def merge(self, entries: list[dict]) -> None:
        for data in entries:
            entry = StatsEntry.unserialize(data, self.stats)
            key = (entry.name, entry.method)
            if key not in self.stats.entries:
                self.stats.entries[key] = StatsEntry(self.stats, entry.name, entry.method,
                                                     use_response_times_cache=True)
            self.stats.entries[key].extend(entry)

    # -- views ---------------------------------------------------------------------------
    def entries(self) -> list[StatsEntry]:
        """Sorted by the order of METRICS within each api/label, so TTFT comes first."""
        def order(entry: StatsEntry):
            metric = entry.name.rsplit(" ", 1)[-1]
            return (entry.method or "", entry.name[: -len(metric)], METRICS.index(metric) if metric in METRICS else 9)
        return sorted((e for e in self.stats.entries.values() if e.num_requests), key=order)

    def rows(self) -> list[dict]:
        """One row per entry for the web UI's table: counts, mean and percentiles in ms."""
        rows = []
        for entry in self.entries():
            row = {"type": entry.method, "metric": entry.name, "count": entry.num_requests,
                   "avg": round(entry.avg_response_time, 1),
                   "min": round(entry.min_response_time or 0, 1), "max": round(entry.max_response_time, 1)}
            for percent in (0.5, 0.9, 0.95, 0.99):
                row[f"p{round(percent * 100)}"] = entry.get_response_time_percentile(percent)
            rows.append(row)
        return rows

    def series(self) -> list[str]:
        """Chart keys ("<api> <metric>") in table order."""
        return [f"{entry.method} {entry.name}" for entry in self.entries()]

    def sample_history(self, now: float | None = None) -> None:
        """One chart point: each entry's percentiles over the last ~10 s (Locust's "current")."""
        point: dict = {"t": now if now is not None else time.time()}
        for entry, key in zip(self.entries(), self.series()):
            point[key] = {
                f"p{round(p * 100)}": entry.get_current_response_time_percentile(p) for p in CHART_PERCENTILES}
        self.history.append(point)
        del self.history[:-HISTORY_LIMIT]

    def as_environment(self) -> SimpleNamespace:
        """What Locust's StatsCSV reads (`.stats`, `.runner`), so the CSV has Locust's own columns."""
        return SimpleNamespace(stats=self.stats, runner=None)


def install_token_stats(environment, role: str) -> TokenStats:
    """Create the process's TokenStats and wire it into Locust's events (see the module docstring)."""
    tokens = TokenStats()
    events = environment.events
    events.reset_stats.add_listener(tokens.reset)

    @events.test_start.add_listener
    def _clear(**_) -> None:
        tokens.clear()

    if role == "worker":
        @events.report_to_master.add_listener
        def _ship(client_id, data, **_) -> None:
            data[REPORT_KEY] = tokens.serialize_and_reset()
    else:
        if role == "master":
            @events.worker_report.add_listener
            def _merge(client_id, data, **_) -> None:
                tokens.merge(data.get(REPORT_KEY, []))

        def _sample_forever() -> None:
            while True:
                gevent.sleep(locust_stats.HISTORY_STATS_INTERVAL_SEC)
                runner = environment.runner
                if runner is not None and runner.state not in ("ready", "stopped"):
                    tokens.sample_history()
        gevent.spawn(_sample_forever)
    return tokens

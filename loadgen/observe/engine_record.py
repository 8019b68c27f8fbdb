"""Poll the engine's step and request records into `engine_steps.csv` and `engine_requests.csv`.

Every `interval_s` each stream GETs `<base>/v1/engine/steps?after=SEQ` (and `/requests`) until it
has caught up, and appends the rows with the server's key in front (`source`: the strategy, or
"url"); once more when stopped, so the last requests of the last level are kept. A server
without the route (404: vLLM, TGI, an older reference server) turns the stream off with a
sentence in `unavailable`; other failures are retried next tick. Rows the server's ring dropped
before they were read are counted in `dropped`. Shapes: `contract.engine_record`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import requests

from loadgen.observe.periodic_csv import PeriodicCsv
from contract.engine_record import (
    MAX_ROWS_PER_POLL, REQUEST_COLUMNS, REQUESTS_FILE, REQUESTS_ROUTE, STEP_COLUMNS, STEPS_FILE, STEPS_ROUTE,
)

log = logging.getLogger(__name__)


class RecordStream:
    """One route into one CSV."""

    def __init__(self, url: str, path: Path, columns: tuple[str, ...], interval_s: float, source: str) -> None:
        self.session, self.url, self.source = requests.Session(), url, source   # a session per thread
        self.after = 0
        self.dropped = self.failures = 0
        self.unavailable: str | None = None
        self._csv = PeriodicCsv(path, columns, interval_s, self._tick, f"servecap-poll-{path.stem}",
                                tick_on_stop=True)

    def start(self) -> None:
        self._csv.start()

    def stop(self) -> None:
        self._csv.stop()
        self.session.close()

    @property
    def rows_written(self) -> int:
        return self._csv.rows_written

    def _tick(self) -> list[list]:
        rows: list[list] = []
        while self.unavailable is None:
            try:
                response = self.session.get(self.url, params={"after": self.after, "limit": MAX_ROWS_PER_POLL},
                                            timeout=5)
                if response.status_code == 404:
                    self.unavailable = f"GET {self.url} answered 404: this server keeps no engine record"
                    break
                response.raise_for_status()
                body = response.json()
                batch, self.dropped = body["rows"], self.dropped + int(body.get("dropped") or 0)
            except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
                self.failures += 1
                if self.failures == 1:
                    log.warning("polling %s failed (%s); retrying every tick", self.url, exc)
                break
            rows += [[self.source, *row] for row in batch]
            if batch:
                self.after = int(batch[-1][0])
            if len(batch) < MAX_ROWS_PER_POLL:
                break
        return rows


class EngineRecordPoller:
    """Both streams of one server; `describe()` says what they got."""

    def __init__(self, base_url: str, out_dir: Path, interval_s: float, source: str) -> None:
        base = base_url.rstrip("/")
        self.steps = RecordStream(base + STEPS_ROUTE, Path(out_dir) / STEPS_FILE, STEP_COLUMNS, interval_s, source)
        self.requests = RecordStream(base + REQUESTS_ROUTE, Path(out_dir) / REQUESTS_FILE, REQUEST_COLUMNS,
                                     interval_s, source)

    def start(self) -> "EngineRecordPoller":
        self.steps.start()
        self.requests.start()
        return self

    def stop(self) -> None:
        self.steps.stop()
        self.requests.stop()

    def describe(self) -> dict:
        """run.json's observer counters: rows written and dropped per stream, or why there are none."""
        unavailable = self.steps.unavailable or self.requests.unavailable
        return {"engine_steps": self.steps.rows_written, "engine_requests": self.requests.rows_written,
                "engine_rows_dropped": self.steps.dropped + self.requests.dropped,
                "engine_record_unavailable": unavailable}

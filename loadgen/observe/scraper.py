"""Prometheus scraper writing `server_metrics.csv` (t, name, labels, value).

Every `interval_s` it GETs the server's `/metrics`, parses the text format with
prometheus_client's parser and appends a row per sample that servecap reads (the families of
contract.server_metrics' mapping, for whichever engine it is) and whose value changed
since the last scrape, plus one `SCRAPE_MARKER` row per scrape: the file's format and how a
reader rebuilds every series are described there. `name` is the sample name (histograms give
`_bucket`/`_sum`/`_count` rows), `labels` is `k="v",...` sorted by key ("" when none). A failed
scrape is logged (once per kind of failure) and retried next tick.

    scraper = start_scraper("http://127.0.0.1:8000/metrics", "runs/x/server_metrics.csv", 1.0)
    ...
    scraper.stop()
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from loadgen.observe.periodic_csv import PeriodicCsv
from contract.server_metrics import SCRAPE_MARKER, kept_sample_names

log = logging.getLogger(__name__)

METRIC_COLUMNS = ("t", "name", "labels", "value")


def format_labels(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{labels[key]}"' for key in sorted(labels))


def parse_metrics(text: str, t: float, keep: frozenset[str] | None = None) -> list[tuple]:
    """Rows (t, name, labels, value) of one scrape, only the sample names in `keep` (None: all);
    NaN values are skipped."""
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if keep is not None and sample.name not in keep:
                continue
            if isinstance(sample.value, float) and math.isnan(sample.value):
                continue
            rows.append((t, sample.name, format_labels(sample.labels), sample.value))
    return rows


class ChangedOnly:
    """Passes a sample's row on only when its value differs from the one last passed on."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], float] = {}

    def __call__(self, rows: list[tuple]) -> list[tuple]:
        changed = []
        for row in rows:
            key = (row[1], row[2])
            if self._last.get(key) != row[3]:
                self._last[key] = row[3]
                changed.append(row)
        return changed


class Scraper:
    """`keep_all`: write every family /metrics exposes, not only the mapping's (still changed values only)."""

    def __init__(self, url: str, out_csv: str | Path, interval_s: float = 1.0, *, keep_all: bool = False) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"metrics url must be http(s)://..., got {url!r}")
        self.url, self.path, self.interval_s = url, Path(out_csv), interval_s
        self._csv = PeriodicCsv(self.path, METRIC_COLUMNS, interval_s, self._tick, "servecap-scraper")
        self.scrapes = self.failures = 0
        self._errors_seen: set[str] = set()
        self._session = requests.Session()
        self._keep = None if keep_all else kept_sample_names()
        self._changed = ChangedOnly()

    def start(self) -> "Scraper":
        self._csv.start()
        return self

    def scrape_once(self) -> list[tuple]:
        """The kept samples of one scrape (all of them, changed or not)."""
        t = time.time()
        response = self._session.get(self.url, timeout=max(self.interval_s, 1.0))
        response.raise_for_status()
        return parse_metrics(response.text, t, self._keep)

    def _tick(self) -> list[tuple]:
        """One scrape's changed rows and its marker; a failure is logged once per kind and yields no rows."""
        try:
            rows = self.scrape_once()
        except (requests.RequestException, ValueError) as exc:
            self.failures += 1
            kind = type(exc).__name__
            if kind not in self._errors_seen:
                self._errors_seen.add(kind)
                log.warning("scraping %s failed (%s: %s); retrying every %.1f s",
                            self.url, kind, str(exc)[:200], self.interval_s)
            return []
        self.scrapes += 1
        t = rows[0][0] if rows else time.time()
        return [*self._changed(rows), (t, SCRAPE_MARKER, "", len(rows))]

    def stop(self) -> None:
        self._csv.stop()
        self._session.close()


def start_scraper(url: str, out_csv: str | Path, interval_s: float = 1.0, *, keep_all: bool = False) -> Scraper:
    """Start scraping `url` into `out_csv`; call `.stop()` to end."""
    return Scraper(url, out_csv, interval_s, keep_all=keep_all).start()

"""Prometheus scraper writing `server_metrics.csv` (t, name, labels, value).

Every `interval_s` it GETs the server's `/metrics`, parses the text format with
prometheus_client's parser and appends one row per sample: `name` is the sample name
(histograms give `_bucket`/`_sum`/`_count` rows), `labels` is `k="v",...` sorted by key
("" when none). A failed scrape is logged (once per kind of failure) and retried next tick.

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

log = logging.getLogger(__name__)

METRIC_COLUMNS = ("t", "name", "labels", "value")


def format_labels(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{labels[key]}"' for key in sorted(labels))


def parse_metrics(text: str, t: float) -> list[tuple]:
    """Rows (t, name, labels, value) of one scrape; NaN values are skipped."""
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if isinstance(sample.value, float) and math.isnan(sample.value):
                continue
            rows.append((t, sample.name, format_labels(sample.labels), sample.value))
    return rows


class Scraper:
    def __init__(self, url: str, out_csv: str | Path, interval_s: float = 1.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"metrics url must be http(s)://..., got {url!r}")
        self.url, self.path, self.interval_s = url, Path(out_csv), interval_s
        self._csv = PeriodicCsv(self.path, METRIC_COLUMNS, interval_s, self._tick, "servecap-scraper")
        self.scrapes = self.failures = 0
        self._errors_seen: set[str] = set()
        self._session = requests.Session()

    def start(self) -> "Scraper":
        self._csv.start()
        return self

    def scrape_once(self) -> list[tuple]:
        t = time.time()
        response = self._session.get(self.url, timeout=max(self.interval_s, 1.0))
        response.raise_for_status()
        return parse_metrics(response.text, t)

    def _tick(self) -> list[tuple]:
        """One scrape's rows; a failure is logged once per kind and yields no rows."""
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
        return rows

    def stop(self) -> None:
        self._csv.stop()
        self._session.close()


def start_scraper(url: str, out_csv: str | Path, interval_s: float = 1.0) -> Scraper:
    """Start scraping `url` into `out_csv`; call `.stop()` to end."""
    return Scraper(url, out_csv, interval_s).start()

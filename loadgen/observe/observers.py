"""The sweep's observers of one server: the device sampler (NVML, else host) and the /metrics scraper.

Both append to the run directory's samples.csv and server_metrics.csv, so a sweep over
several strategies (one server each) yields one timeline per file.
"""

from __future__ import annotations

from pathlib import Path

from loadgen.observe.samplers import Sampler, start_sampler
from loadgen.observe.scraper import Scraper, start_scraper


class Observers:
    """Start with `start()` (returns what run.json should say about them), end with `stop()`."""

    def __init__(self, out_dir: Path, interval_s: float, server_pid: int | None, metrics_url: str) -> None:
        self.out_dir = out_dir
        self.interval_s = interval_s
        self.server_pid = server_pid
        self.metrics_url = metrics_url
        self.sampler: Sampler | None = None
        self.scraper: Scraper | None = None

    def start(self) -> dict:
        self.sampler = start_sampler(self.out_dir / "samples.csv", self.interval_s, self.server_pid)
        self.scraper = start_scraper(self.metrics_url, self.out_dir / "server_metrics.csv", self.interval_s)
        described = {"sampler": self.sampler.kind, "interval_s": self.interval_s, "metrics_url": self.metrics_url}
        if self.sampler.note:
            described["sampler_note"] = self.sampler.note
        return described

    def stop(self) -> dict:
        """Stop both; returns their counters for run.json."""
        counters = {}
        if self.scraper is not None:
            self.scraper.stop()
            counters.update(scrapes=self.scraper.scrapes, scrape_failures=self.scraper.failures)
        if self.sampler is not None:
            self.sampler.stop()
            counters.update(sample_rows=self.sampler.rows_written)
        return counters

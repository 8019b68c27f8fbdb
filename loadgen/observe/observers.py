"""The sweep's observers of one server: the device sampler (NVML, else host), the /metrics scraper,
the poller of the engine's step record and the canary (each core's own speed, loadgen.observe.canary).

They append to the run directory's samples.csv, server_metrics.csv, engine_steps.csv,
engine_requests.csv and canary.csv, so a sweep over several strategies (one server each) yields one timeline
per file (the engine files and the canary name the server in their `source` column).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loadgen.observe.canary import Canary, start_canary
from loadgen.observe.engine_record import EngineRecordPoller
from loadgen.observe.samplers import Sampler, start_sampler
from loadgen.observe.scraper import Scraper, start_scraper
from contract.run_json import ObserverInfo


class Observers:
    """Start with `start()`, end with `stop()`; each returns what run.json says about them."""

    def __init__(self, out_dir: Path, interval_s: float, server_pid: int | None, base_url: str,
                 source: str = "url", canary: bool = False, server: bool = True) -> None:
        """`base_url`: the server (its /metrics and /v1/engine/steps); `source`: its key in the engine files;
        `canary`: also start the canary process (each core's own speed: `sweep --diagnostics`); `server`:
        False leaves the server's /metrics and step record unread (a router in front of several replicas:
        its answers would mix them, and each poll it forwards moves a round robin along)."""
        self.out_dir = out_dir
        self.interval_s = interval_s
        self.server_pid = server_pid
        self.base_url = base_url.rstrip("/")
        self.metrics_url = self.base_url + "/metrics"
        self.source = source
        self.sampler: Sampler | None = None
        self.scraper: Scraper | None = None
        self.engine_record: EngineRecordPoller | None = None
        self.with_canary = canary
        self.canary: Canary | None = None
        self.observe_server = server
        self.described = ObserverInfo(interval_s=interval_s, metrics_url=self.metrics_url if server else None)

    def start(self) -> ObserverInfo:
        self.sampler = start_sampler(self.out_dir / "samples.csv", self.interval_s, self.server_pid)
        if self.observe_server:
            self.scraper = start_scraper(self.metrics_url, self.out_dir / "server_metrics.csv", self.interval_s)
            self.engine_record = EngineRecordPoller(self.base_url, self.out_dir, self.interval_s, self.source).start()
        self.canary = start_canary(self.out_dir, self.source) if self.with_canary else None
        self.described = replace(self.described, sampler=self.sampler.kind, sampler_note=self.sampler.note or None)
        return self.described

    def stop(self) -> ObserverInfo:
        """Stop both; the description now carries their counters."""
        counters = {}
        if self.canary is not None:
            counters.update(canary_rows=self.canary.stop())
        if self.engine_record is not None:
            self.engine_record.stop()
            counters.update(self.engine_record.describe())
        if self.scraper is not None:
            self.scraper.stop()
            counters.update(scrapes=self.scraper.scrapes, scrape_failures=self.scraper.failures)
        if self.sampler is not None:
            self.sampler.stop()
            counters.update(sample_rows=self.sampler.rows_written)
        self.described = replace(self.described, **counters)
        return self.described

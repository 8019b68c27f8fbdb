"""Is the load generator itself the bottleneck? CPU, send lateness, in-flight cap hits, loop lag.

Each Locust process keeps one `GeneratorHealth`. A greenlet samples this process's CPU
every second (psutil) and warns once above CPU_LIMIT_PCT (timings taken then include the
generator's own queueing). Open-loop sends record their lateness (t_start - t_sched);
a p99 above LATENESS_P99_LIMIT_S flags the level as limited by the load generator. The
event-loop lag (loop_lag.LoopLagProbe) is recorded, not judged here: it is the timings' error
bar, and only the report knows the confidence interval of each percentile it could move
(reports.summary.lag_limited). The limits and the meta file the summary goes to are the
contract's (contract.loadgen_meta), so the report judges by the same ones.
"""

from __future__ import annotations

import logging

import gevent
import numpy as np
import psutil

from loadgen.scenario.gc_pauses import GcPauses
from loadgen.scenario.loop_lag import LoopLagProbe
from contract.loadgen_meta import CPU_LIMIT_PCT, LATENESS_P99_LIMIT_S

log = logging.getLogger(__name__)


class GeneratorHealth:
    def __init__(self, worker: str, interval_s: float = 1.0) -> None:
        self.worker = worker
        self.interval_s = interval_s
        self.cpu_samples: list[float] = []
        self.lateness_s: list[float] = []
        self.inflight_cap_hits = 0
        self.requests_sent = 0
        self.cpu_warned = False
        self.loop_lag = LoopLagProbe()
        self.gc_pauses = GcPauses()
        self._process = psutil.Process()
        self._greenlet: gevent.Greenlet | None = None

    def start(self, measure_from: float = 0.0) -> None:
        """measure_from: perf_counter s where the warm-up ends (loop lag counts from there)."""
        self._process.cpu_percent(None)  # prime: the next call measures from here
        self._greenlet = gevent.spawn(self._sample_forever)
        self.loop_lag.measure_from = measure_from
        self.loop_lag.start()
        self.gc_pauses.start()

    def stop(self) -> None:
        self.loop_lag.stop()
        self.gc_pauses.stop()
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _sample_forever(self) -> None:
        while True:
            gevent.sleep(self.interval_s)
            pct = self._process.cpu_percent(None)
            self.cpu_samples.append(pct)
            if pct > CPU_LIMIT_PCT and not self.cpu_warned:
                self.cpu_warned = True
                log.warning("load generator %s CPU at %.0f%% (> %.0f%%): its timings include its own "
                            "queueing; add workers (--processes) or lower the load", self.worker, pct, CPU_LIMIT_PCT)

    def note_lateness(self, seconds: float) -> None:
        self.lateness_s.append(seconds)

    def summary(self) -> dict:
        late = np.asarray(self.lateness_s) if self.lateness_s else None
        cpu = np.asarray(self.cpu_samples) if self.cpu_samples else None
        lateness_p99 = float(np.percentile(late, 99)) if late is not None else None
        cpu_max = float(cpu.max()) if cpu is not None else None
        lag = self.loop_lag.summary()
        warnings = []
        if cpu_max is not None and cpu_max > CPU_LIMIT_PCT:
            warnings.append(f"load generator CPU reached {cpu_max:.0f}% (> {CPU_LIMIT_PCT:.0f}%)")
        if lateness_p99 is not None and lateness_p99 > LATENESS_P99_LIMIT_S:
            warnings.append(f"send lateness p99 {lateness_p99 * 1e3:.2f} ms > {LATENESS_P99_LIMIT_S * 1e3:g} ms: "
                            "limited by the load generator")
        if self.inflight_cap_hits:
            warnings.append(f"in-flight cap hit {self.inflight_cap_hits} times: arrivals were delayed")
        return {
            "worker": self.worker,
            "requests_sent": self.requests_sent,
            "cpu_max_pct": cpu_max,
            "cpu_mean_pct": float(cpu.mean()) if cpu is not None else None,
            "cpu_over_90": bool(cpu_max is not None and cpu_max > CPU_LIMIT_PCT),  # key name kept: file format
            "lateness_p50_s": float(np.percentile(late, 50)) if late is not None else None,
            "lateness_p99_s": lateness_p99,
            "lateness_max_s": float(late.max()) if late is not None else None,
            "inflight_cap_hits": self.inflight_cap_hits,
            **lag,
            **self.gc_pauses.summary(),
            "limited_by_loadgen": bool(warnings),
            "warnings": warnings,
        }


def merge_summaries(summaries: list[dict]) -> dict:
    """One level's meta from every process's summary."""
    return {
        "processes": {s["worker"]: s for s in summaries},
        **{key: max((s[key] for s in summaries if s.get(key) is not None), default=None)   # the worst process
           for key in ("loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s")},
        "limited_by_loadgen": any(s["limited_by_loadgen"] for s in summaries),
        "warnings": [f"{s['worker']}: {w}" for s in summaries for w in s["warnings"]],
    }

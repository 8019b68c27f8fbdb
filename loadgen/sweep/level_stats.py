"""Quick per-level figures the sweep needs while it runs: progress, SLO checks, stability.

The authoritative numbers come later from `servecap report`; these are only for
steering the sweep (progress bar, --auto's ramp and bisection, extending an
unstable level). Inputs are record dicts in the DESIGN.md format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

STABILITY_WINDOWS = 3


@dataclass(frozen=True)
class LevelStats:
    """Measure-phase figures of one level.

    Attributes:
        requests: measure-phase records (any status).
        errors: those whose status is not ok.
        p99_ttft_s, p99_tpot_s, p99_e2e_s: over ok records (None when there are none).
        output_tokens_per_s: ok output tokens over the measure span.
        window_throughputs: output tokens/s in STABILITY_WINDOWS equal slices of the span.
    """

    requests: int
    errors: int
    p99_ttft_s: float | None
    p99_tpot_s: float | None
    p99_e2e_s: float | None
    output_tokens_per_s: float | None
    window_throughputs: tuple[float, ...]

    @property
    def spread(self) -> float | None:
        """(max - min) / mean of the window throughputs: 0 = perfectly steady."""
        values = np.asarray(self.window_throughputs)
        if len(values) < 2 or values.mean() <= 0:
            return None
        return float((values.max() - values.min()) / values.mean())

    def is_stable(self, tolerance: float) -> bool:
        return self.spread is not None and self.spread <= tolerance

    def meets(self, slo) -> bool:
        """No errors and every set p99 SLO met."""
        if self.errors or self.requests == 0:
            return False
        checks = ((slo.ttft_ms, self.p99_ttft_s), (slo.tpot_ms, self.p99_tpot_s), (slo.e2e_ms, self.p99_e2e_s))
        return all(limit is None or (value is not None and value * 1000 <= limit) for limit, value in checks)


def _p99(values: list[float]) -> float | None:
    return float(np.percentile(values, 99)) if values else None


def level_stats(records: list[dict], level: str) -> LevelStats:
    mine = [r for r in records if r.get("level") == level and r.get("phase") == "measure"]
    ok = [r for r in mine if r.get("status") == "ok"]
    ttft = [r["ttft_s"] for r in ok if r.get("ttft_s") is not None]
    e2e = [r["e2e_s"] for r in ok if r.get("e2e_s") is not None]
    tpot = [(r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1) for r in ok
            if r.get("ttft_s") is not None and (r.get("output_tokens") or 0) >= 2]
    throughput, windows = None, ()
    if mine:
        start = min(r["t_start"] for r in mine)
        ends = [r["t_start"] + r["e2e_s"] for r in ok if r.get("e2e_s") is not None]
        end = max(ends, default=start)
        if end > start:
            tokens = np.array([r.get("output_tokens") or 0 for r in ok], dtype=float)
            finished = np.array(ends)
            throughput = float(tokens.sum() / (end - start))
            counts, edges = np.histogram(finished, bins=STABILITY_WINDOWS, range=(start, end), weights=tokens)
            windows = tuple(float(x) for x in counts / np.diff(edges))
    return LevelStats(len(mine), len(mine) - len(ok), _p99(ttft), _p99(tpot), _p99(e2e), throughput, windows)

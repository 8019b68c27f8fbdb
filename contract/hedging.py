"""`--hedge-after`: hedged requests, as teams build them client-side (Dean and Barroso, "The Tail at Scale").

A request that has shown nothing after the delay is sent again (to `--hedge-host`, else the same host: behind
a router, whichever replica its policy picks); the first copy to show its first token (a stream) or its whole
answer (no stream) is kept, and the other is cancelled: its connection is closed, which a server takes as the
client leaving (vLLM and the reference server abort the request and free its KV).

    200ms | 0.5 | 2s     a fixed delay
    p95                  this process's running 95th percentile of the time to first token (to the whole
                         answer without a stream) over its last WINDOW answered requests; no hedging until
                         MIN_SAMPLES are known

Both copies are recorded: the kept one with its latency from the first copy's send (what the user waited),
`hedge` "primary" or "copy"; the other with status "cancelled". Every request sent is then in the records
once: sent = answered + failed + cancelled.

Pure: the rule and its running percentile; no gevent.
"""

from __future__ import annotations

import math
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contract.options import add_options, option, parse_duration

WINDOW = 1000
MIN_SAMPLES = 20
_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")


@dataclass
class HedgeRule:
    delay_s: float | None = None          # a fixed delay
    percentile: float | None = None       # else the running percentile of what the client waits for
    seen: deque = field(default_factory=lambda: deque(maxlen=WINDOW), repr=False)

    def __post_init__(self) -> None:
        if (self.delay_s is None) == (self.percentile is None):
            raise ValueError("--hedge-after: give a delay or a percentile")

    def note(self, waited_s: float | None) -> None:
        """An answered request's time to its first token (or whole answer): feeds the running percentile."""
        if waited_s is not None and math.isfinite(waited_s) and waited_s >= 0:
            self.seen.append(waited_s)

    def delay(self) -> float | None:
        """The delay to hedge after now; None: do not hedge (a percentile not yet known)."""
        if self.delay_s is not None:
            return self.delay_s
        if len(self.seen) < MIN_SAMPLES:
            return None
        return float(np.percentile(np.fromiter(self.seen, float), self.percentile))

    @property
    def spec(self) -> str:
        return f"p{self.percentile:g}" if self.percentile is not None else f"{self.delay_s:g}s"


def parse_hedge(text: str | None) -> HedgeRule | None:
    """'' / None: no hedging; '200ms', '0.5', '2s': a delay; 'p95': a running percentile. ValueError names the flag."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    if text.startswith("-"):
        raise ValueError(f"--hedge-after must not be negative, got {text!r}")
    match = _PERCENTILE.match(text)
    if match:
        value = float(match.group(1))
        if not 0 < value < 100:
            raise ValueError(f"--hedge-after: a percentile is p1 ... p99.9, got {text!r}")
        return HedgeRule(percentile=value)
    try:
        seconds = parse_duration(text, "--hedge-after")
    except ValueError:
        raise ValueError(f"--hedge-after: {text!r} is neither a delay (200ms, 0.5, 2s) nor a percentile (p95)") from None
    return HedgeRule(delay_s=seconds)


@dataclass(frozen=True)
class HedgeOptions:
    """The hedging flags, declared once: the locustfiles take both, the measuring commands --hedge-after."""

    hedge_after: str | None = option(None, metavar="DELAY|pN",
                                     help="hedge: a request that shows nothing after this delay (200ms, 0.5, 2s) or "
                                          "running percentile of the time to first token (p95) is sent again; the "
                                          "first to show is kept, the other cancelled (status 'cancelled'; "
                                          "contract/hedging.py)")
    hedge_host: str | None = option(None, metavar="URL",
                                    help="where a hedged request's copy goes (default: the test's host; behind a "
                                         "router its policy picks the replica)")


def add_hedge_arguments(parser: Any, *, title: str | None = None, only: tuple[str, ...] | None = None) -> None:
    add_options(parser, HedgeOptions, title=title, only=only)

"""The scenario-independent flags of a locustfile (records, seed, arrivals, timeouts, labels): one validated config.

`add_common_arguments(parser)` registers them on Locust's parser (they then show in the
web UI too); `RunSettings.from_options(namespace)` validates them. Pure: no locust or
gevent import, so unit tests use it directly. The parse helpers turn web-UI strings
into numbers with errors that name the flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from contract.arrivals import ArrivalProcess, parse_arrival
from contract.hedging import add_hedge_arguments, parse_hedge
from contract.load import add_load_arguments
from contract.options import parse_duration, parse_float, parse_int
from loadgen.workload.slice_plan import SlicePlan


@dataclass(frozen=True)
class RunSettings:
    seed: int = 0
    records: str | None = None       # requests.jsonl path; None = no records
    arrival: ArrivalProcess = field(default_factory=lambda: ArrivalProcess("closed"))
    max_inflight: int = 1000         # open loop: in-flight bound per process (hits are reported)
    request_timeout_s: float = 600.0
    level: str | None = None         # record `level`; None = "c=<users>" or "rps=<rate>"
    warmup_s: float = 0.0            # records that start within this many seconds are phase "warmup"
    round: int | None = None         # record `round`: which of its level's rounds this run is (sweep --rounds)
    slice_plan: SlicePlan | None = None   # compare runs: alternate the load between two arms in slices
    worker_cpus: tuple[int, ...] = ()     # --worker-cpus: worker i runs on core worker_cpus[i % len]
    hedge_after: str | None = None        # --hedge-after (contract.hedging): a delay or a running percentile
    hedge_host: str | None = None         # --hedge-host: where a hedge's copy goes (None: the test's host)

    def __post_init__(self) -> None:
        if self.max_inflight < 1:
            raise ValueError(f"--max-inflight must be >= 1, got {self.max_inflight}")
        if not (math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0):
            raise ValueError(f"--request-timeout must be > 0, got {self.request_timeout_s}")
        if not (math.isfinite(self.warmup_s) and self.warmup_s >= 0):
            raise ValueError(f"--warmup must be >= 0, got {self.warmup_s}")
        parse_hedge(self.hedge_after)   # names the flag
        if self.hedge_host and not self.hedge_after:
            raise ValueError("--hedge-host is where a hedged request's copy goes: it needs --hedge-after")
        if self.hedge_host and not str(self.hedge_host).startswith(("http://", "https://")):
            raise ValueError(f"--hedge-host must be a URL (http://HOST:PORT), got {self.hedge_host!r}")
        if self.hedge_after and self.slice_plan is not None:
            raise ValueError("--hedge-after hedges a test's own requests: not in a compare run")

    @classmethod
    def from_options(cls, options: Any) -> "RunSettings":
        """From Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        get = lambda name, default=None: getattr(options, name, default)  # noqa: E731
        rate = parse_rate(get("rates"))
        return cls(
            seed=parse_int(get("seed", 0), "--seed"),
            records=str(get("records")) if get("records") else None,
            arrival=parse_arrival(str(get("arrival", "poisson")) if rate else "closed", rate),
            max_inflight=parse_int(get("max_inflight", 1000), "--max-inflight"),
            request_timeout_s=parse_float(get("request_timeout", 600.0), "--request-timeout"),
            level=str(get("level")) if get("level") else None,
            warmup_s=parse_duration(get("warmup_s", 0.0) or 0.0, "--warmup"),
            round=parse_round(get("round")),
            slice_plan=SlicePlan.read(get("slice_plan")) if get("slice_plan") else None,
            worker_cpus=parse_cores(get("worker_cpus", "") or ""),
            hedge_after=str(get("hedge_after")) if get("hedge_after") else None,
            hedge_host=str(get("hedge_host")) if get("hedge_host") else None,
        )


def parse_rate(value: Any) -> float | None:
    """--rates for one Locust test: one positive requests/s (None: closed loop, Locust's users)."""
    if value in (None, ""):
        return None
    items = [item for item in str(value).split(",") if item.strip()]
    if len(items) != 1:
        raise ValueError(f"--rates: a locust test runs one open-loop rate, got {value!r} (the sweep runs a "
                         "level per rate)")
    rate = parse_float(items[0], "--rates")
    if not rate > 0:
        raise ValueError(f"--rates must be positive requests/s, got {value!r}")
    return rate


def parse_round(value: Any) -> int | None:
    """--round: a round number >= 0, or None when not given (-1, empty or absent)."""
    if value in (None, ""):
        return None
    number = parse_int(value, "--round")
    return number if number >= 0 else None


def parse_cores(value: str) -> tuple[int, ...]:
    """'0,2,3' -> (0, 2, 3); ValueError naming --worker-cpus."""
    try:
        cores = tuple(int(item) for item in str(value).split(",") if item.strip())
    except ValueError:
        raise ValueError(f"--worker-cpus: {value!r} is not a comma list of core numbers") from None
    if any(core < 0 for core in cores):
        raise ValueError(f"--worker-cpus: core numbers are >= 0, got {value!r}")
    return cores


def parse_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def add_common_arguments(parser: Any) -> None:
    """Flags every locustfile shares (records, the model name, arrivals, timeouts, labels); the workload's
    own (lengths, --seed) are contract.workload's."""
    group = parser  # no argument groups: only the parser's own add_argument knows the web-UI flags
    group.add_argument("--records", default="", help="append one JSON line per finished request to this file")
    group.add_argument("--model", default="", help="the model name in requests (default: chat: the first of GET "
                                                   "/v1/models; classify: tabular-mlp; embed: servecap-embed)")
    add_load_arguments(parser, only=("rates", "arrival", "warmup"), title=None)
    group.add_argument("--max-inflight", default=1000, type=int,
                       help="open loop: most requests in flight per process; hits are counted and reported")
    group.add_argument("--request-timeout", default=600.0, type=float, help="seconds before a request is a timeout")
    group.add_argument("--level", default="", help="level id written in records (default c=<users> or rps=<rate>)")
    group.add_argument("--round", default=-1, type=int,
                       help="record `round` written in records: which of its level's rounds this is (sweep --rounds)")
    group.add_argument("--worker-cpus", default="",
                       help="with --processes or --worker: worker i pins itself to core i of this comma list")
    add_hedge_arguments(parser)
    group.add_argument("--slice-plan", default="",
                       help="compare runs (written by `servecap compare`): alternate the load between two arms "
                            "in the slices of this JSON plan, then quit")

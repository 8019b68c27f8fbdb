"""How much load, and for how long: the one load group every measuring command takes.

`add_load_arguments(parser)` declares the options once (`servecap sweep`, `compare`, `tune`,
`predict`, `calc simulate` and the locustfiles add this same group, or the part of it that applies);
`LoadSpec.from_args` validates them. A load is one of:

    --concurrency 1,4,16     closed loop: that many users, each sending its next request when its
                             last one ends (a level per value)
    --rates 2,4,8            open loop: requests/s per level, arrivals by --arrival
    --auto                   the most users that meet the SLO: ramp 1, 2, 4, ... then bisect
    --rate-sweep N           N open-loop levels from the synchronous rate (one user) up to saturation
                             (as many users as the search may use), evenly spaced: GuideLLM's sweep
    (a workload's --trace)   the trace's own times, replayed once

Each level warms up for --warmup, then is measured for --duration (in --rounds rounds of
duration / rounds each, the levels in a serpentine order). Durations take seconds or a unit
(10, 500ms, 30s, 2m, 1h). Pure: no I/O.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from contract.arrivals import ArrivalProcess, parse_arrival
from contract.options import add_options, option, options_from_args, parse_duration, parse_int, parse_number_list

DEFAULT_WARMUP = "5s"
DEFAULT_DURATION = "20s"
ROUND_WARMUP_S = 2.0          # default warm-up of a later round: the server is warm, only the level's queue refills
AUTO_MAX_CONCURRENCY = 256    # where --auto and --rate-sweep stop looking for saturation
PROFILES = ("concurrency", "rates", "auto", "rate_sweep")
LOAD_OPTIONS = ("concurrency", "rates", "arrival", "auto", "rate-sweep", "warmup", "duration", "rounds",
                "round-warmup")   # in the order --help lists them


def _levels(kind):
    def parse(text: str, flag: str) -> tuple:
        return parse_number_list(text, flag, kind)
    return parse


@dataclass(frozen=True)
class LoadSpec:
    """One load plan, validated (every error names its option); its fields are the load's options
    (contract.options). `max_concurrency`: where --auto and --rate-sweep stop ramping (no option)."""

    concurrency: tuple[int, ...] = option((), parse=_levels(int), text="",
                                          help="closed loop: users per level, e.g. 1,2,4,8,16")
    rates: tuple[float, ...] = option((), parse=_levels(float), text="",
                                      help="open loop: requests/s per level, e.g. 1,2,4,8 (arrivals by --arrival)")
    arrival: str = option("poisson", help="open-loop arrivals: poisson (default) | constant | gamma:CV")
    auto: bool = option(False, kind="switch",
                        help="find the knee: ramp users until a p99 SLO breaks, then bisect")
    rate_sweep: int | None = option(None, parse=parse_int, metavar="N",
                                    help="N open-loop levels from the synchronous rate (one user) to saturation, "
                                         "evenly spaced (GuideLLM's sweep)")
    warmup_s: float = option(parse_duration(DEFAULT_WARMUP, "--warmup"), flag="--warmup", text=DEFAULT_WARMUP,
                             parse=parse_duration, help=f"warm-up per level (10, 30s, 2m; default {DEFAULT_WARMUP})")
    duration_s: float = option(parse_duration(DEFAULT_DURATION, "--duration"), flag="--duration",
                               text=DEFAULT_DURATION, parse=parse_duration,
                               help=f"measurement window per level (default {DEFAULT_DURATION})")
    rounds: int = option(1, parse=parse_int,
                         help="measure each level in this many rounds of --duration/K each, the levels in a "
                              "serpentine order (1,2,4 then 4,2,1 ...), so every level averages over the machine's "
                              "drift; round k draws its requests with --seed + k")
    round_warmup_s: float | None = option(None, flag="--round-warmup", parse=parse_duration,
                                          help="warm-up of each round after the first (default: the shorter of "
                                               "--warmup and 2s)")
    max_concurrency: int = AUTO_MAX_CONCURRENCY

    def __post_init__(self) -> None:
        given = [name for name in PROFILES if getattr(self, name)]
        if len(given) > 1:
            raise ValueError("choose one load: " + " or ".join(_flag(name) for name in given))
        self.arrival_process(1.0)   # names --arrival when it is not one
        if any(c < 1 or c != int(c) for c in self.concurrency):
            raise ValueError(f"--concurrency takes whole numbers >= 1, got {self.concurrency}")
        if any(not (math.isfinite(r) and r > 0) for r in self.rates):
            raise ValueError(f"--rates takes positive requests/s, got {self.rates}")
        if self.rate_sweep is not None and self.rate_sweep < 2:
            raise ValueError(f"--rate-sweep needs at least 2 levels (the synchronous rate and saturation), "
                             f"got {self.rate_sweep}")
        if not self.duration_s > 0:
            raise ValueError("--duration must be positive")
        if self.rounds < 1:
            raise ValueError(f"--rounds must be >= 1, got {self.rounds}")
        if self.rounds > 1 and (self.auto or self.rate_sweep):
            raise ValueError("--rounds measures a fixed plan's levels in turns: it does not combine with "
                             + ("--auto" if self.auto else "--rate-sweep") + " (its next level depends on the last)")
        if self.round_warmup_s is not None and self.round_warmup_s < 0:
            raise ValueError("--round-warmup must be >= 0")
        if self.max_concurrency < 1:
            raise ValueError(f"the search's largest concurrency must be >= 1, got {self.max_concurrency}")

    @property
    def kind(self) -> str | None:
        """"closed", "open", "auto", "rate_sweep", or None (no levels given: a trace's, or the caller's)."""
        if self.concurrency:
            return "closed"
        if self.rates:
            return "open"
        if self.auto:
            return "auto"
        if self.rate_sweep:
            return "rate_sweep"
        return None

    @property
    def open_loop(self) -> bool:
        return bool(self.rates) or bool(self.rate_sweep)

    @property
    def levels(self) -> tuple[float, ...]:
        """The fixed levels: users or requests/s (() for a search)."""
        return self.concurrency or self.rates

    def arrival_process(self, rate_rps: float | None) -> ArrivalProcess:
        process = parse_arrival(self.arrival, rate_rps)
        if not process.open_loop:
            raise ValueError("--arrival takes poisson, constant or gamma:CV (open loop); a closed loop is "
                             "--concurrency")
        return process

    def round_window(self, round_index: int, warmup_s: float | None = None,
                     duration_s: float | None = None) -> tuple[float, float]:
        """(warm-up, measured) seconds of one round of a level: the first round warms up as a level
        without rounds does, later ones for round_warmup_s; each measures duration_s / rounds.
        warmup_s, duration_s: the level's own when they are not the plan's (a trace's replay)."""
        warmup = self.warmup_s if warmup_s is None else warmup_s
        duration = self.duration_s if duration_s is None else duration_s
        if self.rounds == 1:
            return warmup, duration
        later = self.round_warmup_s if self.round_warmup_s is not None else min(warmup, ROUND_WARMUP_S)
        return (warmup if round_index == 0 else later), duration / self.rounds

    @classmethod
    def from_args(cls, args: Any) -> "LoadSpec":
        """From a parser that took `add_load_arguments` (the options it left out keep their defaults)."""
        return cls(**options_from_args(cls, args))

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": list(self.concurrency), "rates": list(self.rates), "auto": self.auto,
                "rate_sweep": self.rate_sweep, "arrival": self.arrival, "warmup_s": self.warmup_s,
                "duration_s": self.duration_s, "rounds": self.rounds, "round_warmup_s": self.round_warmup_s}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_load_arguments(parser: Any, *, only: tuple[str, ...] = LOAD_OPTIONS, title: str | None = "load") -> None:
    """The load options, once for every command; `only` names the part a command takes (e.g. a
    compare run takes one level and no search; a locustfile takes --rates, --arrival, --warmup)."""
    add_options(parser, LoadSpec, title=title, only=only)

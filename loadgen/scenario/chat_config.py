"""Options of `loadgen/chat.py`: the Locust flags and the validated config they make.

`add_chat_arguments(parser)` registers the flags on Locust's parser (they then show in
the web UI too); `ChatConfig.from_options(namespace)` validates them into one frozen
config. Pure: no locust or gevent import, so unit tests use it directly.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from loadgen.workload.arrivals import ArrivalProcess, parse_arrival
from loadgen.workload.distributions import LengthDistribution, parse_length_distribution

APIS = ("chat", "completions")


@dataclass(frozen=True)
class ChatConfig:
    model: str = ""                  # "" = ask GET /v1/models at test start and take the first
    api: str = "chat"                # "chat" -> /v1/chat/completions, "completions" -> /v1/completions
    prompt_tokens: LengthDistribution = field(default_factory=lambda: parse_length_distribution("128"))
    output_tokens: LengthDistribution = field(
        default_factory=lambda: parse_length_distribution("128", "--output-tokens"))
    shared_prefix_tokens: int = 0    # common system prompt on top of the sampled prompt length
    ignore_eos: bool = True          # send `ignore_eos: true` so outputs have the asked length
    stream: bool = True
    api_key: str | None = None
    seed: int = 0
    records: str | None = None       # requests.jsonl path; None = no records
    arrival: ArrivalProcess = field(default_factory=lambda: ArrivalProcess("closed"))
    max_inflight: int = 1000         # open loop: in-flight bound per process (hits are reported)
    request_timeout_s: float = 600.0
    level: str | None = None         # record `level`; None = "c=<users>" or "rps=<rate>"
    warmup_s: float = 0.0            # records that start within this many seconds are phase "warmup"

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"api must be one of {APIS}, got {self.api!r}")
        if self.shared_prefix_tokens < 0:
            raise ValueError(f"shared_prefix_tokens must be >= 0, got {self.shared_prefix_tokens}")
        if self.max_inflight < 1:
            raise ValueError(f"max_inflight must be >= 1, got {self.max_inflight}")
        if not (math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0):
            raise ValueError(f"request_timeout_s must be > 0, got {self.request_timeout_s}")
        if not (math.isfinite(self.warmup_s) and self.warmup_s >= 0):
            raise ValueError(f"warmup_s must be >= 0, got {self.warmup_s}")

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    @classmethod
    def from_options(cls, options: Any) -> "ChatConfig":
        """Build from Locust's parsed options (web-UI values may arrive as strings)."""
        get = lambda name, default=None: getattr(options, name, default)  # noqa: E731
        rate = parse_float(get("rate", 0.0), "--rate")
        return cls(
            model=str(get("model", "") or ""),
            api=str(get("api", "chat")),
            prompt_tokens=parse_length_distribution(str(get("prompt_tokens", "128")), "--prompt-tokens"),
            output_tokens=parse_length_distribution(str(get("output_tokens", "128")), "--output-tokens"),
            shared_prefix_tokens=parse_int(get("shared_prefix_tokens", 0), "--shared-prefix-tokens"),
            ignore_eos=parse_bool(get("ignore_eos", True)),
            stream=parse_bool(get("stream", True)),
            api_key=str(get("api_key")) if get("api_key") else None,
            seed=parse_int(get("seed", 0), "--seed"),
            records=str(get("records")) if get("records") else None,
            arrival=parse_arrival(str(get("arrival", "closed")), rate if rate > 0 else None),
            max_inflight=parse_int(get("max_inflight", 1000), "--max-inflight"),
            request_timeout_s=parse_float(get("request_timeout", 600.0), "--request-timeout"),
            level=str(get("level")) if get("level") else None,
            warmup_s=parse_float(get("warmup", 0.0), "--warmup"),
        )


def parse_float(value: Any, option: str) -> float:
    """A flag value as a float (web-UI values arrive as strings); ValueError names the flag."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option}: {value!r} is not a number") from None


def parse_int(value: Any, option: str) -> int:
    """A flag value as a whole number; ValueError names the flag."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option}: {value!r} is not a whole number") from None
    if number != int(number):
        raise ValueError(f"{option}: {value!r} is not a whole number")
    return int(number)


def parse_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def add_common_arguments(parser: Any) -> None:
    """Flags shared by chat.py and classify.py (records, seed, arrivals, timeouts, labels)."""
    group = parser  # no argument groups: only the parser's own add_argument knows the web-UI flags
    group.add_argument("--records", default="", help="append one JSON line per finished request to this file")
    group.add_argument("--seed", default=0, type=int, help="seed for lengths, prompts and arrival times")
    group.add_argument("--arrival", default="closed",
                       help="closed (Locust users) | poisson | constant | gamma:CV (open loop at --rate)")
    group.add_argument("--rate", default=0.0, type=float, help="open-loop request rate (requests/s, whole test)")
    group.add_argument("--max-inflight", default=1000, type=int,
                       help="open loop: most requests in flight per process; hits are counted and reported")
    group.add_argument("--request-timeout", default=600.0, type=float, help="seconds before a request is a timeout")
    group.add_argument("--level", default="", help="level id written in records (default c=<users> or rps=<rate>)")
    group.add_argument("--warmup", default=0.0, type=float,
                       help="records of requests started in the first S seconds get phase 'warmup'")


def add_chat_arguments(parser: Any) -> None:
    """Register chat.py's flags on Locust's parser (`events.init_command_line_parser`)."""
    group = parser
    group.add_argument("--model", default="", help="model name sent in requests (default: first of GET /v1/models)")
    group.add_argument("--api", default="chat", choices=list(APIS), help="chat -> /v1/chat/completions, completions -> /v1/completions")
    group.add_argument("--prompt-tokens", default="128",
                       help="prompt length: N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH")
    group.add_argument("--output-tokens", default="128", help="max_tokens per request, same forms as --prompt-tokens")
    group.add_argument("--shared-prefix-tokens", default=0, type=int,
                       help="a common system prompt of this many tokens on every request (prefix caching)")
    group.add_argument("--ignore-eos", default=True, action=argparse.BooleanOptionalAction,
                       help="send ignore_eos so every output has the asked length")
    group.add_argument("--stream", default=True, action=argparse.BooleanOptionalAction,
                       help="stream Server-Sent Events (needed for TTFT and ITL)")
    group.add_argument("--api-key", default="", is_secret=True, help="sent as 'Authorization: Bearer KEY'")
    add_common_arguments(parser)

"""Options of `loadgen/chat.py`: its own Locust flags and the validated config they make.

`add_chat_arguments(parser)` registers the flags on Locust's parser (they then show in
the web UI too), with the common ones of `run_settings`; `ChatConfig.from_options(namespace)`
validates the chat-only ones into one frozen config. Pure: no locust or gevent import,
so unit tests use it directly.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from contract.model_mix import ModelMix, parse_model_mix
from loadgen.scenario.run_settings import add_common_arguments, parse_bool, parse_float, parse_int
from loadgen.workload.conversations import parse_turns
from loadgen.workload.datasets import DEFAULT_CHARS_PER_TOKEN, SAMPLINGS
from contract.distributions import LengthDistribution, parse_length_distribution
from loadgen.workload.traces import MOONCAKE_BLOCK_TOKENS

APIS = ("chat", "completions")
# Help shared with `servecap sweep`'s flags of the same names
DATASET_HELP = ("prompts from a local file: ShareGPT JSON, OpenAI chat JSONL ({\"messages\"}) or prompt JSONL "
                "({\"prompt\", \"output_tokens\"}); replaces --prompt-tokens")
SAMPLING_HELP = "draw dataset entries with replacement, or each once per pass (seeded either way)"
TURNS_HELP = ("turns per conversation, each sending the whole history with the server's answers (closed loop); "
              "'all': each dataset conversation's own turns")
CHARS_HELP = "dataset lengths are estimated as UTF-8 bytes / this (4: BPE tokenizers; 1: the reference server's)"
TRACE_HELP = ("replay a trace open loop at its times and lengths: Azure CSV (TIMESTAMP, ContextTokens, "
              "GeneratedTokens), BurstGPT CSV (Timestamp, Request tokens, Response tokens; failed requests, "
              "with 0 response tokens, left out) or Mooncake JSONL (timestamp ms, input_length, output_length, "
              "hash_ids)")
REASONING_HELP = ("a reasoning model's budget per request, of its output tokens (same forms as --prompt-tokens): "
                  "sent as `reasoning_tokens`, which the reference server streams as reasoning before the answer "
                  "(capped at the request's max_tokens); a dataset's replies that carry reasoning give their own")
DEFAULT_OUTPUT_TOKENS = "128"


@dataclass(frozen=True)
class ChatConfig:
    """The chat-only flags; the records, seed and arrival flags are `RunSettings`."""

    model: str = ""                  # "" = ask GET /v1/models at test start and take the first
    api: str = "chat"                # "chat" -> /v1/chat/completions, "completions" -> /v1/completions
    prompt_tokens: LengthDistribution = field(default_factory=lambda: parse_length_distribution("128"))
    output_tokens: LengthDistribution = field(
        default_factory=lambda: parse_length_distribution("128", "--output-tokens"))
    shared_prefix_tokens: int = 0    # common system prompt on top of the sampled prompt length
    ignore_eos: bool = True          # send `ignore_eos: true` so outputs have the asked length
    stream: bool = True
    api_key: str | None = None
    dataset: str | None = None       # --dataset PATH: prompts (and output lengths) from a local file
    dataset_sampling: str = "with-replacement"
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN   # dataset lengths are estimated, no tokenizer
    output_tokens_given: bool = True  # False: --output-tokens left at its default, so a dataset's own lengths win
    turns: int | None = 1            # turns per conversation; None ("all"): each dataset conversation's own
    think_time_s: float = 0.0        # multi-turn: pause between an answer and the next turn
    trace: str | None = None         # --trace PATH: replay a trace's send times and lengths (open loop)
    trace_speedup: float = 1.0       # trace offsets are divided by this
    trace_block_tokens: int = MOONCAKE_BLOCK_TOKENS   # tokens per Mooncake hash id
    model_mix: ModelMix | None = None   # --model-mix: each request's model drawn from this (LoRA adapters, base)
    reasoning_tokens: LengthDistribution | None = None   # --reasoning-tokens: each request's reasoning budget

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ValueError(f"--api must be one of {APIS}, got {self.api!r}")
        if self.dataset_sampling not in SAMPLINGS:
            raise ValueError(f"--dataset-sampling must be one of {', '.join(SAMPLINGS)}, got {self.dataset_sampling!r}")
        if not self.chars_per_token > 0:
            raise ValueError(f"--chars-per-token must be > 0, got {self.chars_per_token}")
        if self.turns is None and self.dataset is None:
            raise ValueError("--turns all takes each dataset conversation's turns: it needs --dataset")
        if not (math.isfinite(self.think_time_s) and self.think_time_s >= 0):
            raise ValueError(f"--think-time must be >= 0, got {self.think_time_s}")
        if self.shared_prefix_tokens < 0:
            raise ValueError(f"--shared-prefix-tokens must be >= 0, got {self.shared_prefix_tokens}")
        if not (math.isfinite(self.trace_speedup) and self.trace_speedup > 0):
            raise ValueError(f"--trace-speedup must be > 0, got {self.trace_speedup}")
        if self.reasoning_tokens is not None and self.api != "chat":
            raise ValueError("--reasoning-tokens is for --api chat: a completion has no reasoning to stream apart")
        if self.trace and (self.dataset or self.multi_turn):
            raise ValueError("--trace gives each request's lengths and time: it does not combine with --dataset or --turns")

    @property
    def multi_turn(self) -> bool:
        return self.turns != 1

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    @classmethod
    def from_options(cls, options: Any) -> "ChatConfig":
        """Build from Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        get = lambda name, default=None: getattr(options, name, default)  # noqa: E731
        output_spec = str(get("output_tokens", "") or "")
        return cls(
            model=str(get("model", "") or ""),
            api=str(get("api", "chat")),
            prompt_tokens=parse_length_distribution(str(get("prompt_tokens", "128")), "--prompt-tokens"),
            output_tokens=parse_length_distribution(output_spec or DEFAULT_OUTPUT_TOKENS, "--output-tokens"),
            output_tokens_given=bool(output_spec),
            dataset=str(get("dataset")) if get("dataset") else None,
            dataset_sampling=str(get("dataset_sampling", "with-replacement")),
            chars_per_token=parse_float(get("chars_per_token", DEFAULT_CHARS_PER_TOKEN), "--chars-per-token"),
            turns=parse_turns(get("turns", 1)),
            think_time_s=parse_float(get("think_time", 0.0), "--think-time"),
            trace=str(get("trace")) if get("trace") else None,
            trace_speedup=parse_float(get("trace_speedup", 1.0), "--trace-speedup"),
            trace_block_tokens=parse_int(get("trace_block_tokens", MOONCAKE_BLOCK_TOKENS), "--trace-block-tokens"),
            shared_prefix_tokens=parse_int(get("shared_prefix_tokens", 0), "--shared-prefix-tokens"),
            ignore_eos=parse_bool(get("ignore_eos", True)),
            stream=parse_bool(get("stream", True)),
            api_key=str(get("api_key")) if get("api_key") else None,
            model_mix=parse_model_mix(str(get("model_mix"))) if get("model_mix") else None,
            reasoning_tokens=(parse_length_distribution(str(get("reasoning_tokens")), "--reasoning-tokens")
                              if get("reasoning_tokens") else None),
        )


def add_chat_arguments(parser: Any) -> None:
    """Register chat.py's flags on Locust's parser (`events.init_command_line_parser`)."""
    group = parser
    group.add_argument("--model", default="", help="model name sent in requests (default: first of GET /v1/models)")
    group.add_argument("--model-mix", default="",
                       help="each request's model drawn from a mix: NAME:WEIGHT,... ('base' = the server's base "
                            "model), or zipf:N[:EXPONENT] over lora-1 ... lora-N (`servecap serve --random-loras N`)")
    group.add_argument("--api", default="chat", choices=list(APIS), help="chat -> /v1/chat/completions, completions -> /v1/completions")
    group.add_argument("--prompt-tokens", default="128",
                       help="prompt length: N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH")
    group.add_argument("--output-tokens", default="",
                       help=f"max_tokens per request, same forms as --prompt-tokens (default {DEFAULT_OUTPUT_TOKENS}; "
                            "with --dataset: the data's own lengths)")
    group.add_argument("--reasoning-tokens", default="", help=REASONING_HELP)
    group.add_argument("--dataset", default="", help=DATASET_HELP)
    group.add_argument("--dataset-sampling", default="with-replacement", choices=list(SAMPLINGS), help=SAMPLING_HELP)
    group.add_argument("--turns", default="1", help=TURNS_HELP)
    group.add_argument("--think-time", default=0.0, type=float,
                       help="multi-turn: seconds between an answer and the next turn")
    group.add_argument("--trace", default="", help=TRACE_HELP)
    group.add_argument("--trace-speedup", default=1.0, type=float, help="divide the trace's times by this")
    group.add_argument("--trace-block-tokens", default=MOONCAKE_BLOCK_TOKENS, type=int,
                       help="tokens per Mooncake hash id (shared ids = shared prompt prefixes)")
    group.add_argument("--chars-per-token", default=DEFAULT_CHARS_PER_TOKEN, type=float, help=CHARS_HELP)
    group.add_argument("--shared-prefix-tokens", default=0, type=int,
                       help="a common system prompt of this many tokens on every request (prefix caching)")
    group.add_argument("--ignore-eos", default=True, action=argparse.BooleanOptionalAction,
                       help="send ignore_eos so every output has the asked length")
    group.add_argument("--stream", default=True, action=argparse.BooleanOptionalAction,
                       help="stream Server-Sent Events (needed for TTFT and ITL)")
    group.add_argument("--api-key", default="", is_secret=True, help="sent as 'Authorization: Bearer KEY'")
    add_common_arguments(parser)

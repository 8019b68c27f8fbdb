"""Options of `loadgen/chat.py`: the workload (contract.workload, declared once for every command), the
model name and key, and the common flags of `run_settings`; the validated config they make.

`add_chat_arguments(parser)` registers the flags on Locust's parser (they then show in the web UI too);
`ChatConfig.from_options(namespace)` validates them into one frozen config. Pure: no locust or gevent
import, so unit tests use it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contract.distributions import LengthDistribution
from contract.model_mix import ModelMix
from contract.workload import WorkloadSpec, add_workload_arguments
from loadgen.scenario.run_settings import add_common_arguments


@dataclass(frozen=True)
class ChatConfig:
    """The chat scenario's options: the workload, the model name and the API key (the records, seed and
    arrival flags are `RunSettings`)."""

    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    model: str = ""                  # "" = ask GET /v1/models at test start and take the first
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.workload.scenario != "chat":
            raise ValueError(f"loadgen/chat.py sends chat requests: --scenario {self.workload.scenario} runs with "
                             f"loadgen/{self.workload.scenario}.py")

    # the workload's parts, as the scenario reads them
    api = property(lambda self: self.workload.api)
    stream = property(lambda self: self.workload.stream)
    ignore_eos = property(lambda self: self.workload.ignore_eos)
    dataset = property(lambda self: self.workload.dataset)
    dataset_sampling = property(lambda self: self.workload.dataset_sampling)
    chars_per_token = property(lambda self: self.workload.chars_per_token)
    turns = property(lambda self: self.workload.turns)
    think_time_s = property(lambda self: self.workload.think_time_s)
    trace = property(lambda self: self.workload.trace)
    trace_speedup = property(lambda self: self.workload.trace_speedup)
    trace_block_tokens = property(lambda self: self.workload.trace_block_tokens)
    shared_prefix_tokens = property(lambda self: self.workload.shared_prefix_tokens)
    multi_turn = property(lambda self: self.workload.multi_turn)
    session = property(lambda self: self.workload.session_spec)
    session_header = property(lambda self: self.workload.session_header_name)

    @property
    def prompt_tokens(self) -> LengthDistribution:
        return self.workload.prompt_lengths

    @property
    def output_tokens(self) -> LengthDistribution:
        return self.workload.output_lengths

    @property
    def output_tokens_given(self) -> bool:
        """--output-tokens was given: it wins over a dataset's or a trace's own lengths."""
        return self.workload.output_tokens is not None

    @property
    def reasoning_tokens(self) -> LengthDistribution | None:
        return self.workload.reasoning_lengths

    @property
    def model_mix(self) -> ModelMix | None:
        return self.workload.mix

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    @classmethod
    def from_options(cls, options: Any) -> "ChatConfig":
        """Build from Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        return cls(workload=WorkloadSpec.from_args(options), model=str(getattr(options, "model", "") or ""),
                   api_key=str(getattr(options, "api_key", "")) or None)


def add_chat_arguments(parser: Any) -> None:
    """Register chat.py's flags on Locust's parser (`events.init_command_line_parser`)."""
    add_workload_arguments(parser, title=None)
    parser.add_argument("--api-key", default="", is_secret=True, help="sent as 'Authorization: Bearer KEY'")
    add_common_arguments(parser)

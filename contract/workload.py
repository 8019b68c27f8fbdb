"""What each request is made of: the one workload every command takes, and its options.

`add_workload_arguments(parser)` declares the options once; `servecap sweep`, `compare`, `tune`,
`fleet`, `plan`, `predict`, `calc simulate`, `quality` and the locustfiles themselves
(`locust -f loadgen/chat.py`) all add this same group, so `--prompt-tokens uniform:32:128` means
one thing everywhere. `WorkloadSpec.from_args` validates them into one frozen spec; run.json's
`workload` section is that spec (`to_dict` / `from_dict`), and `locust_argv()` hands it to the
load generator, which parses it back with the same declarations.

Scenarios: `chat` (OpenAI chat completions, or `--api completions`), `classify` (KServe V2
inference of a classic model: `--rows` per request over `--protocol rest|grpc`) and `embed` (OpenAI
embeddings: `--rows` inputs per request, each of `--prompt-tokens` tokens).

Lengths use contract.distributions' syntax. Without `--output-tokens`, a chat request asks for
DEFAULT_OUTPUT_TOKENS, or, with `--dataset` or `--trace`, the data's own lengths.

Pure: no I/O here; the files (`--dataset`, `--trace`) are read and checked by whoever loads them.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property
from typing import Any

from contract.agent_session import SessionSpec, parse_session
from contract.distributions import LengthDistribution, parse_length_distribution
from contract.model_mix import ModelMix, parse_model_mix
from contract.options import add_options, option, option_fields, options_from_args, parse_duration, parse_float, parse_int

SCENARIOS = ("chat", "classify", "embed")
CLASSIC_SCENARIOS = ("classify", "embed")
APIS = ("chat", "completions")
PROTOCOLS = ("rest", "grpc")
SAMPLINGS = ("with-replacement", "without-replacement")
DEFAULT_PROMPT_TOKENS = "uniform:32:128"
DEFAULT_OUTPUT_TOKENS = "uniform:16:64"
DEFAULT_CHARS_PER_TOKEN = 4.0     # BPE tokenizers; the reference server's byte tokenizer is 1
MOONCAKE_BLOCK_TOKENS = 512       # tokens per Mooncake hash id (its traces' block size)
CHAT_ONLY = ("dataset", "trace", "turns", "model_mix", "reasoning_tokens", "shared_prefix_tokens", "session")

DATASET_HELP = ("prompts from a local file: ShareGPT JSON, OpenAI chat JSONL ({\"messages\"}) or prompt JSONL "
                "({\"prompt\", \"output_tokens\"}); replaces --prompt-tokens, and its replies' lengths replace "
                "--output-tokens unless that is given")
TRACE_HELP = ("replay a trace open loop at its times and lengths: Azure CSV (TIMESTAMP, ContextTokens, "
              "GeneratedTokens), BurstGPT CSV (Timestamp, Request tokens, Response tokens; failed requests, "
              "with 0 response tokens, left out) or Mooncake JSONL (timestamp ms, input_length, output_length, "
              "hash_ids: shared ids give shared prompt prefixes; AIPerf's session_id and delay ms: a session's "
              "later turn waits on its previous answer, then the delay)")
REASONING_HELP = ("a reasoning model's budget per request, of its output tokens (same forms as --prompt-tokens): "
                  "sent as `reasoning_tokens`, which the reference server streams as reasoning before the answer "
                  "(capped at the request's max_tokens); a dataset's replies that carry reasoning give their own")
SESSION_HEADER = "x-session-id"   # the first header vllm-router's consistent_hash and sticky_least_loaded read
NO_SESSION_HEADER = "none"
SESSION_HEADER_HELP = ("the HTTP header that carries each request's session (a --turns conversation, a --session "
                       "agent, a trace's session_id or user): vllm-router's consistent_hash and "
                       "sticky_least_loaded keep a session on one replica by it (default x-session-id, the first "
                       "header they read); 'none' sends none")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")   # RFC 9110's token
LENGTH_FORMS = "N | uniform:LO:HI | normal:MEAN:SD | lognormal:MEAN:SIGMA | file:PATH"
SESSION_HELP = ("agentic sessions (closed loop, chat): turns:N,tools:LO-HI,tool-latency:S|uniform:LO:HI|"
                "exponential:MEAN|lognormal:MEAN:SIGMA,tool-result:LENGTH,fanout:LO-HI,schemas:N; each turn sends "
                "the whole history with tools offered, asks tool calls, waits the tools' latency and sends their "
                "results back (contract.agent_session)")


def parse_turns(value: str | int | None) -> int | None:
    """`--turns`: a whole number >= 1, or "all" (None: every turn of each dataset conversation)."""
    if value is None or str(value).strip().lower() == "all":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--turns: {value!r} is neither a whole number nor 'all'") from None
    if not math.isfinite(number) or number != int(number) or number < 1:
        raise ValueError(f"--turns must be a whole number >= 1 or 'all', got {value!r}")
    return int(number)


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload, validated (every error names its option); its fields are the workload's options
    (contract.options: one schema for the command line, config files and run.json).

    Lengths use the length forms (contract.distributions): `prompt_lengths`, `output_lengths`,
    `reasoning_lengths` and `row_counts` are them parsed. Without --output-tokens a chat request asks
    for DEFAULT_OUTPUT_TOKENS, or, with a dataset or a trace, the data's own lengths (`own_lengths`).
    """

    scenario: str = option("chat", choices=SCENARIOS,
                           help="chat (default): OpenAI chat completions; classify: KServe V2 inference of a "
                                "classic model (--rows per request, --protocol); embed: OpenAI /v1/embeddings "
                                "(--rows inputs per request, each of --prompt-tokens tokens)")
    api: str = option("chat", choices=APIS, help="chat: /v1/chat/completions (default); completions: /v1/completions")
    prompt_tokens: str = option(DEFAULT_PROMPT_TOKENS, help=f"prompt length (embed: tokens per input): "
                                                            f"{LENGTH_FORMS} (default {DEFAULT_PROMPT_TOKENS})")
    output_tokens: str | None = option(None, help=f"max_tokens per request, same forms (default "
                                                  f"{DEFAULT_OUTPUT_TOKENS}; with --dataset or --trace: the data's "
                                                  "own lengths)")
    reasoning_tokens: str | None = option(None, metavar="SPEC", help=REASONING_HELP)
    dataset: str | None = option(None, metavar="PATH", help=DATASET_HELP)
    dataset_sampling: str = option("with-replacement", choices=SAMPLINGS,
                                   help="draw dataset entries with replacement, or each once per pass (seeded "
                                        "either way)")
    chars_per_token: float = option(DEFAULT_CHARS_PER_TOKEN, parse=parse_float,
                                    help="dataset lengths are estimated as UTF-8 bytes / this (4: BPE "
                                         "tokenizers; 1: the reference server's)")
    turns: int | None = option(1, parse=lambda text, flag: parse_turns(text),
                               help="turns per conversation, each sending the whole history with the server's "
                                    "answers (closed loop); 'all': each dataset conversation's own turns")
    think_time_s: float = option(0.0, flag="--think-time", text="0", parse=parse_duration,
                                 help="multi-turn: the pause between an answer and the next turn (10, 500ms, 2s)")
    session: str | None = option(None, metavar="SPEC", help=SESSION_HELP)
    shared_prefix_tokens: int = option(0, parse=parse_int,
                                       help="a common system prompt of this many tokens on every request "
                                            "(prefix caching)")
    model_mix: str | None = option(None, help="each request's model: NAME:WEIGHT,... ('base' = the served model) "
                                              "or zipf:N[:EXPONENT] over lora-1 ... lora-N (`servecap serve "
                                              "--enable-lora --random-loras N`)")
    trace: str | None = option(None, metavar="PATH", help=TRACE_HELP)
    trace_speedup: float = option(1.0, flag="--speedup", aliases=("--trace-speedup",), parse=parse_float,
                                  help="divide a trace's (or a demand's) times by this")
    trace_block_tokens: int = option(MOONCAKE_BLOCK_TOKENS, parse=parse_int,
                                     help="tokens per Mooncake hash id (shared ids = shared prompt prefixes)")
    rows: str = option("1", help="classify: rows per request; embed: inputs per request (N | uniform:LO:HI | ...)")
    protocol: str = option("rest", choices=PROTOCOLS,
                           help="classify: KServe V2 over REST (JSON) or gRPC (raw tensor bytes)")
    session_header: str = option(SESSION_HEADER, metavar="NAME", help=SESSION_HEADER_HELP)
    stream: bool = option(True, kind="negatable", help="stream Server-Sent Events (TTFT and ITL need it; default on)")
    ignore_eos: bool = option(True, kind="negatable",
                              help="send ignore_eos so every output has the asked length (default on)")
    seed: int = option(0, parse=parse_int, help="lengths, prompts and arrival times are drawn from it")

    def __post_init__(self) -> None:
        _choice("--scenario", self.scenario, SCENARIOS)
        _choice("--api", self.api, APIS)
        _choice("--protocol", self.protocol, PROTOCOLS)
        _choice("--dataset-sampling", self.dataset_sampling, SAMPLINGS)
        self.prompt_lengths, self.output_lengths, self.reasoning_lengths, self.row_counts   # each names its option
        if self.model_mix:
            self.mix
        self.session_spec
        parse_turns(self.turns)
        if not (isinstance(self.chars_per_token, (int, float)) and self.chars_per_token > 0):
            raise ValueError(f"--chars-per-token must be > 0, got {self.chars_per_token!r}")
        if not (math.isfinite(self.think_time_s) and self.think_time_s >= 0):
            raise ValueError(f"--think-time must be >= 0, got {self.think_time_s!r}")
        if not (math.isfinite(self.trace_speedup) and self.trace_speedup > 0):
            raise ValueError(f"--speedup must be > 0, got {self.trace_speedup!r}")
        if not (isinstance(self.trace_block_tokens, int) and self.trace_block_tokens >= 1):
            raise ValueError(f"--trace-block-tokens must be a whole number >= 1, got {self.trace_block_tokens!r}")
        if not (isinstance(self.shared_prefix_tokens, int) and self.shared_prefix_tokens >= 0):
            raise ValueError(f"--shared-prefix-tokens must be a whole number >= 0, got {self.shared_prefix_tokens!r}")
        if not (isinstance(self.session_header, str) and _HEADER_NAME.fullmatch(self.session_header)):
            raise ValueError(f"--session-header must be an HTTP header name (letters, digits, '-' and the like) "
                             f"or 'none', got {self.session_header!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"--seed must be a whole number >= 0, got {self.seed!r}")
        self._check_combinations()

    def _check_combinations(self) -> None:
        if self.scenario in CLASSIC_SCENARIOS:
            given = [_flag(name) for name in CHAT_ONLY if getattr(self, name) not in (None, 0, 1)]
            if self.api != "chat":
                given.append("--api")
            if self.output_tokens is not None:
                given.append("--output-tokens")
            if given:
                raise ValueError(f"{', '.join(given)} describe chat requests: not with --scenario {self.scenario}")
            if self.scenario == "embed" and self.protocol != "rest":
                raise ValueError("--protocol grpc is KServe V2's: an embed workload speaks OpenAI's REST API")
            return
        if self.rows != "1" or self.protocol != "rest":
            raise ValueError("--rows and --protocol describe classic-model requests: they need --scenario "
                             "classify or embed")
        if self.trace and (self.dataset or self.turns != 1):
            raise ValueError("--trace gives each request's lengths and time: it does not combine with --dataset "
                             "or --turns")
        if self.turns is None and not self.dataset:
            raise ValueError("--turns all takes each dataset conversation's turns: it needs --dataset")
        if self.session and (self.trace or self.dataset or self.turns != 1):
            raise ValueError("--session builds each turn itself: it does not combine with --trace, --dataset or "
                             "--turns (its own turns:N)")
        if self.session and self.api != "chat":
            raise ValueError("--session sends tools and tool results: it needs --api chat")
        if self.think_time_s and self.turns == 1 and not self.session:
            raise ValueError("--think-time is the pause between turns: it needs --turns N (N > 1), --turns all "
                             "or --session")
        if self.reasoning_tokens is not None and self.api != "chat":
            raise ValueError("--reasoning-tokens is for --api chat: a completion has no reasoning to stream apart")

    # -- what the options mean ---------------------------------------------------------------
    @property
    def classic(self) -> bool:
        return self.scenario in CLASSIC_SCENARIOS

    @property
    def session_header_name(self) -> str | None:
        """The header a request's session goes in; None: none is sent."""
        return None if self.session_header.lower() == NO_SESSION_HEADER else self.session_header

    @property
    def multi_turn(self) -> bool:
        return self.turns != 1

    @property
    def agentic(self) -> bool:
        return self.session is not None

    @cached_property
    def session_spec(self) -> SessionSpec | None:
        return parse_session(self.session)

    @property
    def own_lengths(self) -> bool:
        """The data gives each request's output length (a dataset or a trace, no --output-tokens)."""
        return self.output_tokens is None and bool(self.dataset or self.trace)

    @cached_property
    def prompt_lengths(self) -> LengthDistribution:
        return parse_length_distribution(self.prompt_tokens, "--prompt-tokens")

    @cached_property
    def output_lengths(self) -> LengthDistribution:
        """--output-tokens, else DEFAULT_OUTPUT_TOKENS (where the data has none of its own)."""
        return parse_length_distribution(self.output_tokens or DEFAULT_OUTPUT_TOKENS, "--output-tokens")

    @cached_property
    def reasoning_lengths(self) -> LengthDistribution | None:
        if self.reasoning_tokens is None:
            return None
        return parse_length_distribution(self.reasoning_tokens, "--reasoning-tokens")

    @cached_property
    def row_counts(self) -> LengthDistribution:
        return parse_length_distribution(self.rows, "--rows")

    @cached_property
    def mix(self) -> ModelMix | None:
        return parse_model_mix(self.model_mix) if self.model_mix else None

    def describe(self) -> str:
        """A few words for consoles and reports."""
        if self.scenario == "classify":
            return f"classify: {self.rows} rows per request over {self.protocol}"
        if self.scenario == "embed":
            return f"embed: {self.rows} inputs of {self.prompt_tokens} tokens"
        source = (f"dataset {self.dataset}" if self.dataset else f"trace {self.trace}" if self.trace
                  else f"prompts {self.prompt_tokens}")
        output = "the data's output lengths" if self.own_lengths else f"outputs {self.output_lengths.spec}"
        turns = "" if self.turns == 1 else f", {'all' if self.turns is None else self.turns} turns"
        session = f", sessions {self.session}" if self.session else ""
        return f"{self.api}: {source}, {output}{turns}{session}"

    # -- run.json and the load generator -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """run.json's `workload`: every field (the data's own lengths: output_tokens null)."""
        data = asdict(self)
        data["turns"] = "all" if self.turns is None else self.turns
        return data

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "workload") -> "WorkloadSpec":
        """run.json's `workload`, tolerantly: unknown keys are left out; a value this version refuses
        leaves the field at its default with a sentence in `problems`. Files from before the scenario
        had its own key said it as `api` ("classify", "embed")."""
        if not isinstance(data, dict):
            _note(problems, f"{where} is not an object; left out")
            return cls()
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        if values.get("api") in CLASSIC_SCENARIOS:
            values["scenario"], values["api"] = values["api"], "chat"
        if "turns" in values:
            try:
                values["turns"] = parse_turns(values["turns"])
            except ValueError as exc:
                _note(problems, f"{where}.turns ignored: {exc}")
                del values["turns"]
        values = {key: value for key, value in values.items() if value is not None or key in _NULLABLE}
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            _note(problems, f"{where}: {exc}; read field by field")
        spec = cls()
        for key, value in values.items():
            try:
                spec = replace(spec, **{key: value})
            except (TypeError, ValueError) as exc:
                _note(problems, f"{where}.{key} ignored: {exc}")
        return spec

    def locust_argv(self) -> list[str]:
        """This workload as the locustfiles' options (the same declarations parse it back): the options
        that differ from their defaults."""
        from contract.config_file import config_argv

        parser = argparse.ArgumentParser(add_help=False)
        add_workload_arguments(parser)
        default = WorkloadSpec().settings()
        return config_argv(parser, {key: value for key, value in self.settings().items() if value != default[key]})

    def settings(self) -> dict[str, Any]:
        """{long option name: value} of every workload option (turns "all" for every turn)."""
        values = self.to_dict()
        return {flag[2:]: values[f.name] for f, _, flag in option_fields(WorkloadSpec)}

    @classmethod
    def from_args(cls, args: Any, **given: Any) -> "WorkloadSpec":
        """From a parser that took `add_workload_arguments` (ValueError names the option); values may arrive
        as text (a command line, Locust's web UI). `given`: fields set by the caller (a scenario's own)."""
        return cls(**options_from_args(cls, args, **given))


_NULLABLE = ("output_tokens", "reasoning_tokens", "dataset", "model_mix", "trace", "turns", "session")


def _flag(name: str) -> str:
    return next(flag for f, _, flag in option_fields(WorkloadSpec) if f.name == name)


def _choice(option: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{option} must be one of {', '.join(choices)}, got {value!r}")


def _note(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def add_workload_arguments(parser: Any, *, title: str | None = "workload", only: tuple[str, ...] | None = None,
                           description: str | None = None) -> None:
    """The workload options, once for every command (and for Locust's own parser, which takes no
    argument groups: pass title=None); `only` names the part a command takes (e.g. `servecap calc`:
    the lengths)."""
    add_options(parser, WorkloadSpec, title=title, only=only, description=description)

"""What a sweep runs: target, strategies, load plan, workload, windows. One frozen dataclass, validated.

Durations accept seconds or a unit: `10`, `30s`, `2m`, `1h`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property

from engine_core.hf_config import load_hf_config
from engine_core.scheduling.strategies import STRATEGIES  # the pure registry: no torch
from loadgen.workload.datasets import DEFAULT_CHARS_PER_TOKEN, SAMPLINGS, load_dataset
from servecap.sweep.loadgen_priority import PRIORITY_MODES
from loadgen.workload.traces import Trace, load_trace
from contract.slo import SLO
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
TRACE_TAIL_S = 5.0   # a trace level's -t beyond the replay: its last answers (Locust quits when they are in)
SCENARIOS = ("chat", "classify", "embed")
CLASSIC_SCENARIOS = ("classify", "embed")
DEFAULT_CLASSIC_MODEL = {"classify": "tabular-mlp", "embed": "servecap-embed"}
PROTOCOLS = ("rest", "grpc")
CLASSIFIER_TARGET = "classifier"   # a classify or embed sweep's one server: its level ids' prefix (classifier/c=8)
ROUND_WARMUP_S = 2.0  # default warm-up of a later round: the server is warm, only the level's own queue refills


def parse_duration(text: str | float, option: str) -> float:
    """'10' | '30s' | '2m' -> seconds; ValueError naming `option` otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text))
        if not match:
            raise ValueError(f"{option}: {text!r} is not a duration (e.g. 10, 30s, 2m)")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds < 0:
        raise ValueError(f"{option} must not be negative, got {text!r}")
    return seconds


def parse_number_list(text: str, option: str, kind=float) -> tuple:
    """'1,2,4' -> (1, 2, 4); every item positive."""
    items = [item.strip() for item in str(text).split(",") if item.strip()]
    if not items:
        raise ValueError(f"{option} needs at least one value, e.g. 1,2,4")
    values = []
    for item in items:
        try:
            value = kind(item)
        except ValueError:
            raise ValueError(f"{option}: {item!r} is not a {'whole ' if kind is int else ''}number") from None
        if value <= 0:
            raise ValueError(f"{option}: values must be positive, got {item}")
        values.append(value)
    return tuple(values)


@dataclass(frozen=True)
class SweepConfig:
    """One sweep.

    Attributes:
        out_dir: the run directory to create (runs/NAME).
        url: an external OpenAI-compatible server to observe; None = start the reference server.
        model: reference-server preset (ignored with `url`, except as the model name sent).
        strategies: batching strategies to run the same plan against, in turn (reference server only).
        server_args: extra `servecap serve` flags, as one shell-quoted string.
        concurrency: closed-loop levels (Locust users); mutually exclusive with `rates`.
        rates: open-loop arrival rates (requests/s) with `arrival`.
        auto: find the knee instead of a fixed plan (ramp, then bisect).
        arrival: poisson | constant | gamma:CV for open loop.
        warmup_s, duration_s: per level, records before warm-up end get phase "warmup".
        rounds: measure each level in this many rounds of duration_s / rounds each, the levels in a
            serpentine order (contract.level_windows); round_warmup_s: the warm-up of every
            round after the first (the server is warm by then; None: min(warmup_s, 2 s)).
        prompt_tokens, output_tokens: length distributions in loadgen/chat.py's syntax; with a dataset or a
            trace, output_tokens None means the data's own lengths (given, it replaces them).
        dataset: a local dataset file (loadgen.workload.datasets), validated here; replaces prompt_tokens.
        dataset_sampling: with-replacement | without-replacement.
        chars_per_token: dataset lengths are estimated as UTF-8 bytes / this.
        turns: turns per conversation (None: each dataset conversation's own); closed loop only.
        think_time_s: multi-turn: the pause between an answer and the next turn.
        trace: a trace to replay (loadgen.workload.traces) as the load plan: one level per strategy, "trace".
        trace_speedup: the trace's times are divided by this.
        trace_block_tokens: tokens per Mooncake hash id in the replayed prompts (None: 512, Mooncake's).
        seed: workload and arrival seed (the same for every level and strategy).
        slo: p99 objectives used by --auto and written into run.json for the report.
        sample_interval_s: sampler and /metrics scrape interval.
        stability_tolerance: a level whose sub-window throughputs differ more than this is extended once, then flagged.
        startup_timeout_s: how long to wait for a server's GET /ready.
        auto_max_concurrency: where --auto stops ramping.
        pin_cpus: Locust, the server's front end and its engine on their own cores (see servecap.sweep.cpu_pinning).
        model_config: an HF config.json (or its directory) of the served model, for the report's predictions.
        loadgen_processes: Locust processes per level (Locust's --processes: a master and this many workers,
            each with its share of the users or of the arrival schedule; the master writes the records once).
        loadgen_external_workers: Locust workers from other machines that join each level's master
            (`locust -f loadgen/chat.py --worker --master-host THIS_HOST --master-port PORT`), beside the
            `loadgen_processes` local ones; the master waits for them all (loadgen_worker_wait_s).
        loadgen_master_bind, loadgen_master_port: where each level's master listens for workers
            (127.0.0.1 by default: a worker on another machine needs an address it can reach).
        scenario: "chat" (OpenAI chat completions), "classify" (KServe V2 inference of a classic model:
            the reference server's classifier, or any V2 server at `url`) or "embed" (OpenAI embeddings:
            the reference server's embedding model, or any OpenAI-compatible server at `url`).
        rows: classify: rows per request; embed: inputs per request (each of prompt_tokens tokens); in
            the length forms (1, uniform:1:64, ...).
        protocol: classify: KServe V2 over "rest" (JSON) or "grpc"; the reference server then also
            serves gRPC (--grpc-port 0).
        classic_model: classify, embed: the served model's name (None: the reference server's,
            DEFAULT_CLASSIC_MODEL).
        grpc_target: classify over gRPC with `url`: the server's gRPC HOST:PORT (None: url's host, 8001).
        server_args_matrix: classify: (label, extra `servecap serve` flags) per server configuration to run
            the same plan against, in turn (e.g. batching off, then on); () = one server, "classifier".
    """

    out_dir: str
    url: str | None = None
    model: str = "tiny"
    strategies: tuple[str, ...] = ("continuous",)
    server_args: str = ""
    concurrency: tuple[int, ...] = ()
    rates: tuple[float, ...] = ()
    auto: bool = False
    arrival: str = "poisson"
    warmup_s: float = 5.0
    duration_s: float = 20.0
    rounds: int = 1
    round_warmup_s: float | None = None
    prompt_tokens: str = "uniform:32:128"
    output_tokens: str | None = "uniform:16:64"
    dataset: str | None = None
    dataset_sampling: str = "with-replacement"
    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    turns: int | None = 1
    think_time_s: float = 0.0
    model_mix: str | None = None   # loadgen's --model-mix: each request's model drawn from it (LoRA adapters)
    reasoning_tokens: str | None = None   # loadgen's --reasoning-tokens: each request's reasoning budget
    trace: str | None = None
    trace_speedup: float = 1.0
    trace_block_tokens: int | None = None   # tokens per Mooncake hash id (None: Locust's default, Mooncake's 512)
    scenario: str = "chat"
    rows: str = "1"
    protocol: str = "rest"
    classic_model: str | None = None
    grpc_target: str | None = None
    server_args_matrix: tuple[tuple[str, str], ...] = ()
    observe_server: bool = True   # False: leave the target's /metrics and step record unread (a router's fleet)
    seed: int = 0
    slo: SLO = field(default_factory=SLO)
    sample_interval_s: float = 0.5
    stability_tolerance: float = 0.10
    startup_timeout_s: float = 180.0
    auto_max_concurrency: int = 256
    pin_cpus: bool = True
    model_config: str | None = None
    loadgen_processes: int = 1
    loadgen_external_workers: int = 0
    loadgen_master_bind: str = "127.0.0.1"
    loadgen_master_port: int = 5557
    loadgen_worker_wait_s: float = 60.0
    loadgen_priority: str = "realtime"   # realtime | nice | normal, where allowed; see servecap.sweep.loadgen_priority
    diagnostics: bool = False   # the instruments for a machine whose speed drifts (see `servecap sweep --help`)

    def __post_init__(self) -> None:
        if not self.out_dir:
            raise ValueError("--out is required (e.g. runs/cmp)")
        if self.loadgen_priority not in PRIORITY_MODES:
            raise ValueError(f"--loadgen-priority must be one of {', '.join(PRIORITY_MODES)}, "
                             f"not {self.loadgen_priority!r}")
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown or not self.strategies:
            raise ValueError(f"--strategies: unknown {', '.join(unknown) or '(empty)'}; choose from {', '.join(STRATEGIES)}")
        if len(set(self.strategies)) != len(self.strategies):
            raise ValueError("--strategies lists a strategy twice")
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"--url must start with http:// or https://, got {self.url!r}")
            if self.strategies != ("continuous",) and len(self.strategies) > 1:
                raise ValueError("--strategies needs the reference server; with --url the sweep only observes")
        plans = sum(bool(x) for x in (self.concurrency, self.rates, self.auto, self.trace))
        if plans != 1:
            raise ValueError("choose exactly one load plan: --concurrency, --rates, --auto or --trace")
        if self.trace is not None:
            if not self.trace_speedup > 0:
                raise ValueError("--trace-speedup must be > 0")
            if self.dataset or self.turns != 1:
                raise ValueError("--trace gives each request's lengths and time: it does not combine with "
                                 "--dataset or --turns")
            self.replayed_trace   # a bad file fails before any server starts, naming the line
        if self.auto and not self.slo.is_set:
            raise ValueError("--auto needs at least one SLO (--slo-ttft-ms, --slo-tpot-ms, --slo-e2e-ms or --slo-ttfa-ms)")
        if self.duration_s <= 0:
            raise ValueError("--duration must be positive")
        if self.rounds < 1:
            raise ValueError(f"--rounds must be >= 1, got {self.rounds}")
        if self.rounds > 1 and (self.auto or self.trace is not None):
            raise ValueError("--rounds measures a fixed plan's levels in turns: it does not combine with "
                             + ("--auto (its next level depends on the last)" if self.auto else
                                "--trace (a trace replays once, on its own timeline)"))
        if self.round_warmup_s is not None and self.round_warmup_s < 0:
            raise ValueError("--round-warmup must be >= 0")
        if not 0 < self.stability_tolerance < 1:
            raise ValueError("--stability-tolerance must be a fraction in (0, 1)")
        if self.loadgen_processes < 1:
            raise ValueError(f"--loadgen-processes must be >= 1, got {self.loadgen_processes}")
        if self.loadgen_external_workers < 0:
            raise ValueError(f"--loadgen-external-workers must be >= 0, got {self.loadgen_external_workers}")
        if not 0 < self.loadgen_master_port < 65536:
            raise ValueError(f"--loadgen-master-port must be a TCP port (1-65535), got {self.loadgen_master_port}")
        if not self.loadgen_worker_wait_s > 0:
            raise ValueError("--loadgen-worker-wait must be positive")
        if self.sample_interval_s <= 0:
            raise ValueError("--sample-interval must be positive")
        if self.output_tokens is None and self.dataset is None and self.trace is None:
            raise ValueError("--output-tokens is needed without --dataset or --trace")
        if self.dataset is not None:
            load_dataset(self.dataset)   # a bad file fails before any server starts, naming the line
        if self.dataset_sampling not in SAMPLINGS:
            raise ValueError(f"--dataset-sampling must be one of {', '.join(SAMPLINGS)}")
        if not self.chars_per_token > 0:
            raise ValueError("--chars-per-token must be > 0")
        if self.turns != 1 and self.open_loop:
            raise ValueError("--turns: multi-turn conversations run closed loop (--concurrency or --auto)")
        if self.turns is None and self.dataset is None:
            raise ValueError("--turns all takes each dataset conversation's turns: it needs --dataset")
        if self.model_mix:
            from contract.model_mix import parse_model_mix

            parse_model_mix(self.model_mix)   # ValueError names the bad part
        if self.think_time_s and self.turns == 1:
            raise ValueError("--think-time is the pause between turns: it needs --turns")
        try:
            shlex.split(self.server_args)
        except ValueError as exc:
            raise ValueError(f"--server-args is not valid shell quoting: {exc}") from None
        self._check_scenario()
        if self.model_config is not None:
            try:
                load_hf_config(self.model_config)
            except ValueError as exc:
                raise ValueError(f"--model-config: {exc}") from None

    def _check_scenario(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"--scenario must be one of {', '.join(SCENARIOS)}, got {self.scenario!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.scenario == "chat":
            if self.protocol != "rest" or self.rows != "1" or self.grpc_target or self.server_args_matrix \
                    or self.classic_model:
                raise ValueError("--rows, --protocol, --grpc-target, --classic-model and --server-args-matrix describe "
                                 "classic-model runs: they need --scenario classify or embed")
            if self.reasoning_tokens is not None:
                from contract.distributions import parse_length_distribution

                parse_length_distribution(self.reasoning_tokens, "--reasoning-tokens")   # names the bad form
            return
        from contract.distributions import parse_length_distribution

        parse_length_distribution(self.rows, "--rows")   # ValueError names the bad form
        chat_only = [flag for flag, given in (("--dataset", self.dataset), ("--trace", self.trace),
                                              ("--turns", self.turns != 1), ("--model-mix", self.model_mix),
                                              ("--reasoning-tokens", self.reasoning_tokens))
                     if given]
        if chat_only:
            raise ValueError(f"{', '.join(chat_only)} describe chat requests: not with --scenario {self.scenario}")
        if self.strategies != ("continuous",):
            raise ValueError("--strategies picks an LLM batching strategy; a classic model's sweep sets its batching "
                             "with --server-args (--classifier-max-batch-size, --classifier-max-queue-delay-us, "
                             "--classifier-instances, --classifier-batching; --embedding-* alike)")
        if self.grpc_target is not None and (self.url is None or self.protocol != "grpc"):
            raise ValueError("--grpc-target names an external server's gRPC port: it needs --url and --protocol grpc")
        if self.server_args_matrix and self.url is not None:
            raise ValueError("--server-args-matrix starts a reference server per configuration: not with --url")
        if self.scenario == "embed" and self.protocol != "rest":
            raise ValueError("--protocol grpc is KServe V2's: an embed sweep speaks OpenAI's REST API")
        if self.scenario == "classify" and self.classic_model is not None and "/" in self.classic_model:
            raise ValueError(f"--classic-model must be a KServe name without '/', got {self.classic_model!r}")

    @property
    def targets(self) -> tuple[str, ...]:
        """What the sweep starts a reference server for, in turn: each strategy, or the classifier once."""
        if self.scenario not in CLASSIC_SCENARIOS:
            return self.strategies
        return tuple(label for label, _ in self.server_args_matrix) or (CLASSIFIER_TARGET,)

    @property
    def model_name(self) -> str | None:
        """The classic model's served name: the one given, else the reference server's."""
        return self.classic_model or DEFAULT_CLASSIC_MODEL.get(self.scenario)

    def target_args(self, target: str) -> str:
        """The `servecap serve` flags of one target: --server-args, then its --server-args-matrix entry's."""
        extra = dict(self.server_args_matrix).get(target, "")
        return f"{self.server_args} {extra}".strip()

    @property
    def open_loop(self) -> bool:
        return bool(self.rates) or self.trace is not None

    @cached_property
    def replayed_trace(self) -> Trace | None:
        return load_trace(self.trace) if self.trace is not None else None

    @property
    def loads(self) -> tuple[float, ...]:
        """The fixed plan's loads: users, requests/s, or a trace's mean rate (its one level)."""
        if self.replayed_trace is not None:
            trace = self.replayed_trace
            return (len(trace.rows) / max(trace.span_s / self.trace_speedup, 1e-9),)
        return self.concurrency or self.rates

    def window(self) -> tuple[float, float]:
        """(warm-up, measured) seconds per level; a trace's level lasts the replay, plus time for its last answers."""
        if self.replayed_trace is None:
            return self.warmup_s, self.duration_s
        replay_s = self.replayed_trace.span_s / self.trace_speedup
        warmup = min(self.warmup_s, replay_s)
        return warmup, replay_s - warmup + TRACE_TAIL_S

    def round_window(self, round_index: int) -> tuple[float, float]:
        """(warm-up, measured) seconds of one round of a level: the first round warms up as a level
        without rounds does, later ones for round_warmup_s; each measures duration_s / rounds."""
        warmup, duration = self.window()
        if self.rounds == 1:
            return warmup, duration
        later = self.round_warmup_s if self.round_warmup_s is not None else min(warmup, ROUND_WARMUP_S)
        return (warmup if round_index == 0 else later), duration / self.rounds

    def level_id(self, strategy: str | None, load: float) -> str:
        """`continuous/c=8`, `none/rps=2.0` or `continuous/trace` (strategy prefix omitted for an external --url)."""
        if self.trace is not None:
            load_id = "trace"
        else:
            load_id = f"rps={float(load)}" if self.rates else f"c={int(load)}"
        return f"{strategy}/{load_id}" if strategy else load_id


def parse_server_args_matrix(text: str) -> tuple[tuple[str, str], ...]:
    """'off:--classifier-batching off|on:--classifier-batching on' -> (("off", "--classifier-batching off"),
    ("on", "--classifier-batching on")): each entry LABEL:FLAGS (FLAGS may be empty), labels distinct."""
    entries = []
    for part in str(text).split("|"):
        label, sep, flags = part.partition(":")
        label = label.strip()
        if not sep or not label or "/" in label or " " in label:
            raise ValueError(f"--server-args-matrix: {part.strip()!r} is not LABEL:FLAGS (a label without '/' or "
                             f"spaces, e.g. off:--classifier-batching off)")
        try:
            shlex.split(flags)
        except ValueError as exc:
            raise ValueError(f"--server-args-matrix: {label}'s flags are not valid shell quoting: {exc}") from None
        entries.append((label, flags.strip()))
    labels = [label for label, _ in entries]
    if len(set(labels)) != len(labels):
        raise ValueError("--server-args-matrix names a label twice")
    return tuple(entries)

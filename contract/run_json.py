"""run.json: what was run, as typed sections (DESIGN.md, "The run directory").

The sweep builds a `RunInfo` and rewrites the file from it after every step; the report
and the gate read it back with `RunInfo.from_dict`, which takes files from before any
field existed (absent keys keep their defaults, unknown keys stay in `extra`, a section
of the wrong shape is left out with a sentence in `problems`). `to_dict()` writes the
keys the file has always had.

    {"name", "status", "started_at", "ended_at", "target": {...}, "server": {...},
     "load_plan": {...}, "levels": [{...}], "workload": {...}, "slo": {...}, "seeds": {...},
     "host": {...}, "versions": {package: version}, "git_commit", "observers": {key: {...}},
     "notes": [str], "cpu_pinning": {...}, "auto": {strategy: {...}} (--auto only),
     "compare": {...} (servecap compare only: arms, slice plan, looks),
     "command": "servecap sweep", "config": {option: value} (what `--config run.json` replays)}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.sections import Section, keep_null
from contract.slo import SLO
from contract.workload import WorkloadSpec


@dataclass(kw_only=True)
class Target(Section):
    kind: str | None = None   # "reference_server" | "command" | "url" | "compare" | "fleet"
    url: str | None = None    # the external OpenAI-compatible server (kind "url")
    command: list[str] | None = None   # kind "command": the engine's command as started ({port} filled in)


# Engine settings every strategy's server shares; run.json's `server` carries the first engine's.
SHARED_ENGINE_FIELDS = ("dtype", "device", "block_size", "max_model_len", "kv_block_bytes", "kv_cache_bytes")


@dataclass(kw_only=True)
class Server(Section):
    """What served the load. Each strategy keeps its own engine description (with its own
    `strategy_limits`) under `engines`; the shared engine settings sit beside them."""

    model: str | None = None
    strategy: str | None = None                    # hand-written one-strategy runs; the sweep writes `strategies`
    strategies: list[str] | None = None
    args: str | None = None                        # extra `servecap serve` flags, as given
    commands: dict[str, list[str]] | None = None   # strategy -> the server's arguments
    engines: dict[str, dict] | None = None         # strategy -> GET /v1/engine of its server, kept whole
    dtype: str | None = None
    device: str | None = None
    block_size: int | None = None
    max_model_len: int | None = None
    kv_block_bytes: int | None = None
    kv_cache_bytes: int | None = None
    kv_blocks: int | None = None                   # the engine's num_kv_blocks
    gpu: str | None = None                         # hand-set catalog GPU id to predict with
    serving_engine: str | None = None              # an external target's engine ("vllm", ...), told by its /metrics names
    model_root: str | None = None                  # what the external engine loaded (vLLM's /v1/models `root`)
    kv_cache_dtype: str | None = None              # as the engine says it ("auto": the model's dtype)
    kv_cache_memory_bytes: int | None = None       # KV memory the engine states (vLLM cache_config_info)
    kv_capacity_tokens: int | None = None          # tokens its KV cache holds, where it says
    model_config: str | None = None                # --model-config: the HF config.json the predictions use
    served_model: str | None = None                # the model name requests carried
    ready_s: dict[str, float] | None = None        # strategy -> seconds from the server's spawn to ready (cold start)

    def record_ready(self, strategy: str, seconds: float) -> None:
        self.ready_s = {**(self.ready_s or {}), strategy: round(float(seconds), 3)}

    def record_command(self, strategy: str, args: list[str]) -> None:
        self.commands = {**(self.commands or {}), strategy: list(args)}

    def record_engine(self, strategy: str, description: dict) -> None:
        """One strategy's live engine description; shared settings not yet known are taken from it."""
        self.engines = {**(self.engines or {}), strategy: description}
        for name in SHARED_ENGINE_FIELDS:
            if getattr(self, name) is None:
                setattr(self, name, description.get(name))
        if self.kv_blocks is None:
            self.kv_blocks = description.get("num_kv_blocks")

    def engine(self, strategy: str | None) -> dict:
        """The engine description recorded for `strategy` ({} when none was)."""
        return (self.engines or {}).get(strategy) or {}

    def limits(self, strategy: str | None) -> dict:
        """That strategy's own batching limits (its engine's `strategy_limits`)."""
        limits = self.engine(strategy).get("strategy_limits")
        return dict(limits) if isinstance(limits, dict) else {}

    def engine_config(self, strategy: str | None) -> dict:
        """Everything one strategy ran with, as one mapping: the shared settings, its engine's description
        and its own limits on top. Files from before per-strategy limits had every strategy's limits
        flattened into `server` (the last one winning); those keys are read from `extra` beneath."""
        shared = {key: value for key, value in self.to_dict().items() if key not in ("engines", "commands")}
        return {**shared, **self.engine(strategy), **self.limits(strategy), "strategy": strategy or self.strategy}


@dataclass(kw_only=True)
class LoadPlan(Section):
    kind: str | None = None              # "closed" | "open" | "auto" | "trace"
    concurrency: list[int] | None = None
    rates: list[float] | None = None
    arrival: str | None = None           # "closed", or poisson | constant | gamma:CV
    warmup_s: float | None = None
    duration_s: float | None = None
    rounds: int | None = None            # sweep --rounds K (>1): each level measured in K rounds of duration_s / K
    round_warmup_s: float | None = None  # the warm-up of each round after the first
    levels: list[str] | None = None      # hand-written plans may list level ids here
    trace: str | None = None             # kind "trace": the replayed trace file (absolute path)
    trace_speedup: float | None = None   # its times were divided by this


@dataclass(kw_only=True)
class LevelEntry(Section):
    """One planned level; the result fields are written once it has run (exit_code set)."""

    level: str | None = None
    strategy: str | None = keep_null()   # None against an external --url
    load: float | None = None            # users (closed loop) or requests/s (open loop)
    status: str | None = None            # pending | running | ok | failed | interrupted | not run
    exit_code: int | None = None
    requests: int | None = None          # finished measure-phase requests (not `incomplete`)
    errors: int | None = None
    rounds: int | None = None            # sweep --rounds: the rounds of this level measured so far
    throughput_spread: float | None = None      # (max - min) / mean of output tokens/s over the window's thirds
                                                # (over its rounds, when measured in rounds)
    spread_at_constant_speed: float | None = None   # the same, each third scaled to the machine's usual speed
    machine_speed_spread: float | None = None   # how much the engine's step time for the same work varied
    served_spread: float | None = None          # open loop: the same over tokens served / tokens that arrived
    stable: bool | None = None                  # spread_at_constant_speed (open loop: served_spread) within the
                                                # sweep's tolerance
    machine_drift: bool | None = None           # stable, but the raw spread was beyond it: the machine varied
    loop_lag_p50_s: float | None = None  # the load generator's event-loop lag (requests.meta.json), worst process
    loop_lag_p99_s: float | None = None
    loop_lag_max_s: float | None = None
    limited_by_loadgen: bool | None = None

    RESULT_FIELDS = ("exit_code", "requests", "errors", "throughput_spread", "stable")   # written even when null

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.exit_code is not None:  # a level that ran writes its whole result, nulls too
            out.update({name: getattr(self, name) for name in self.RESULT_FIELDS})
        return out

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "") -> "LevelEntry":
        if isinstance(data, str):  # hand-written plans: a bare level id
            return cls(level=data)
        return super().from_dict(data, problems, where)


@dataclass(kw_only=True)
class Seeds(Section):
    workload: int | None = None


@dataclass(kw_only=True)
class Host(Section):
    hostname: str | None = None
    cpu_model: str | None = None
    cores: int | None = keep_null()
    os: str | None = None
    python: str | None = None
    gpus: list | None = None             # NVML device names (hand-written files: objects with `name`)
    driver: str | None = keep_null()

    def gpu_names(self) -> list[str]:
        names = [gpu.get("name") if isinstance(gpu, dict) else gpu for gpu in self.gpus or []]
        return [name for name in names if isinstance(name, str)]


@dataclass(kw_only=True)
class ObserverInfo(Section):
    """The sampler and the /metrics scraper of one server; the counters are filled when they stop."""

    sampler: str | None = None           # "nvml" | "host"
    interval_s: float | None = None
    metrics_url: str | None = None
    sampler_note: str | None = None      # why the sampler fell back (e.g. no NVML)
    scrapes: int | None = None
    scrape_failures: int | None = None
    sample_rows: int | None = None
    engine_steps: int | None = None      # rows polled into engine_steps.csv / engine_requests.csv
    engine_requests: int | None = None
    engine_rows_dropped: int | None = None   # rows the server's ring dropped before they were polled
    engine_record_unavailable: str | None = None   # why the server has no engine record (e.g. not ours)
    canary_rows: int | None = None       # rows in canary.csv when this server's canary stopped (the file's total)


@dataclass(kw_only=True)
class CpuPinning(Section):
    loadgen_cpus: list[int] | None = keep_null()
    server_cpus: list[int] | None = keep_null()
    engine_cpus: list[int] | None = keep_null()
    loadgen_nice: int | None = None      # Locust's niceness where the sweep set one (--loadgen-priority nice)
    loadgen_priority: str | None = None  # what Locust ran at: "SCHED_FIFO 1", "nice -10"; null: normal


@dataclass(kw_only=True)
class AutoResult(Section):
    max_concurrency_meeting_slo: int | None = keep_null()
    first_failing_concurrency: int | None = keep_null()


@dataclass(kw_only=True)
class ArmInfo(Section):
    """One arm of a compare run (`servecap compare`): what served it and how it was started."""

    kind: str | None = None              # "reference_server" | "command" | "url"
    url: str | None = None               # where the load went
    model: str | None = None             # the model name sent in requests
    args: list[str] | None = None        # reference server: its `servecap serve` flags
    command: list[str] | None = None     # command arm: the command as started ({port} filled in)
    pid: int | None = None               # the serving process (its tree's CPU time is measured per slice)
    engine: dict | None = None           # GET /v1/engine of a reference server, kept whole
    serving_engine: str | None = None    # "servecap" | "vllm" | ..., told by its /metrics names (None: unknown)

    def label(self) -> str:
        """What served the arm, in a few words (tables and headings)."""
        if self.kind == "reference_server":
            return " ".join(["reference server", *(self.args or [])])
        if self.kind == "command":
            return " ".join(self.command or []) or "command"
        if self.serving_engine and self.url:
            return f"{self.serving_engine} at {self.url}"
        return self.url or self.kind or "?"


@dataclass(kw_only=True)
class Look(Section):
    """One look at the pairs so far (the sequential analysis adds pairs while a gated metric is UNKNOWN)."""

    pairs: int | None = None
    alpha: float | None = None           # the alpha this look spent (reports.paired.sequential.look_alpha)
    undecided: list[str] | None = None   # gated metrics still UNKNOWN after it


@dataclass(kw_only=True)
class CompareInfo(Section):
    """The plan and the course of a compare run; the records carry `arm` and `slice`."""

    arms: dict[str, ArmInfo] = field(default_factory=dict)   # "a", "b"
    concurrency: int | None = None       # closed loop: Locust users
    rate_rps: float | None = None        # open loop: requests/s, with `arrival`
    arrival: str | None = None
    slice_s: float | None = None         # the length of every measured slice
    warmup_s: float | None = None        # each arm's warm-up slice
    at_switch: str | None = None         # "drain" | "exclude": what happens to requests in flight at a switch
    schedule: str | None = None          # "interleaved" | "duet" (a pair's slices at the same time)
    pilot_pairs: int | None = None
    planned_pairs: int | None = None     # from the power analysis
    max_pairs: int | None = None         # what --max-duration affords (the sequential looks' horizon)
    min_effect: float | None = None
    alpha: float | None = None
    thresholds: dict[str, float] | None = None   # gated metric -> threshold (a fraction)
    power: dict | None = None            # the pilot's power analysis (reports.paired.power.PowerPlan)
    looks: list[Look] = field(default_factory=list)


@dataclass(kw_only=True)
class RunInfo(Section):
    name: str | None = None
    status: str | None = None            # running | complete | interrupted | failed
    started_at: float | None = None      # unix s
    ended_at: float | None = keep_null()
    target: Target = field(default_factory=Target)
    server: Server = field(default_factory=Server)
    load_plan: LoadPlan = field(default_factory=LoadPlan)
    levels: list[LevelEntry] = field(default_factory=list)   # in plan order
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    slo: SLO = field(default_factory=SLO)
    seeds: Seeds = field(default_factory=Seeds)
    host: Host = field(default_factory=Host)
    versions: dict[str, str] = field(default_factory=dict)   # package -> version
    git_commit: str | None = keep_null()
    observers: dict[str, ObserverInfo] = field(default_factory=dict)  # strategy (or "url") -> observers
    notes: list[str] = field(default_factory=list)
    cpu_pinning: CpuPinning | None = None
    auto: dict[str, AutoResult] | None = None                 # strategy (or "url") -> the knee --auto found
    compare: CompareInfo | None = None                        # a `servecap compare` run
    command: str | None = None                                # the command that ran it ("servecap sweep")
    config: dict[str, Any] | None = None                      # every option it ran with: `--config run.json` repeats it

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "run.json") -> "RunInfo":
        info = super().from_dict(data, problems, where)
        legacy = data.get("workload") if isinstance(data, dict) else None
        if isinstance(legacy, dict) and legacy.get("classic_model") and info.server.served_model is None:
            info.server.served_model = legacy["classic_model"]   # files from before it was the server's
        return info

    def level(self, level: str) -> LevelEntry | None:
        return next((entry for entry in self.levels if entry.level == level), None)

    def planned_levels(self) -> list[str]:
        """Level ids the file says were planned: `levels`, else a hand-written `load_plan.levels`."""
        ids = [entry.level for entry in self.levels] if self.levels else list(self.load_plan.levels or [])
        return [level for level in ids if isinstance(level, str)]


def write_run_json(path: str | os.PathLike, info: RunInfo) -> None:
    """Atomically (temp file + rename): a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(info.to_dict(), indent=2, default=str) + "\n")
    os.replace(tmp, path)


def read_run_json(path: str | os.PathLike, problems: list[str] | None = None) -> RunInfo:
    """The file at `path`; ValueError when it is not JSON (a file that is JSON reads tolerantly)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable run.json ({exc})") from None
    return RunInfo.from_dict(data, problems, "run.json")

"""One experiment: what serves the load, what is sent, how much of it, and the SLO it is judged by.

Every measuring command builds one: `servecap sweep` (one target or one per strategy, any load),
`servecap compare` (two targets together, in interleaved slices), `servecap tune` (one per
configuration of a search), `servecap demo` (a preset sweep), `servecap fleet` (a router's fleet,
its demand replayed). `Experiment` checks that its parts go together before anything starts; the
runner (servecap.experiment.runner) runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from contract.load import LoadSpec
from contract.slo import SLO
from contract.workload import WorkloadSpec
from loadgen.workload.datasets import load_dataset
from loadgen.workload.traces import Trace, load_trace
from servecap.experiment.profiles import FixedLevels, KneeSearch, RateSweep, TraceReplay
from servecap.experiment.run_options import RunOptions
from servecap.experiment.targets import TargetSpec

TRACE_TAIL_S = 5.0   # a trace level's -t beyond the replay: its last answers (Locust quits when they are in)
TRACE_TURN_TAIL_S = 60.0   # a chained turn's answer under load: its session's next turn waits on it (the replay
                           # quits when every session is done, so the bound costs nothing when they finish)


@dataclass(frozen=True)
class Experiment:
    """Attributes:
        out_dir: the run directory to create.
        targets: measured in turn (each its own server, observers and levels), or together by a
            compare run's profile; their keys are distinct.
        workload, load, slo: contract.workload, contract.load, contract.slo.
        options: how the runner measures (servecap.experiment.run_options).
    """

    out_dir: str
    targets: tuple[TargetSpec, ...]
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    load: LoadSpec = field(default_factory=LoadSpec)
    slo: SLO = field(default_factory=SLO)
    options: RunOptions = field(default_factory=RunOptions)

    def __post_init__(self) -> None:
        if not self.out_dir:
            raise ValueError("--out is required (e.g. runs/cmp)")
        if not self.targets:
            raise ValueError("an experiment needs a target")
        keys = [target.key for target in self.targets]
        if len(set(keys)) != len(keys):
            raise ValueError(f"two targets share the name {next(k for k in keys if keys.count(k) > 1)!r}")
        workload, load = self.workload, self.load
        if workload.trace:
            if load.kind is not None:
                raise ValueError("--trace replays the trace's own times: it does not combine with --concurrency, "
                                 "--rates, --auto or --rate-sweep")
            if load.rounds > 1:
                raise ValueError("--rounds measures a fixed plan's levels in turns: it does not combine with "
                                 "--trace (a trace replays once, on its own timeline)")
            self.replayed_trace   # a bad file fails before any server starts, naming the line
        if workload.multi_turn and (load.open_loop or workload.trace):
            raise ValueError("--turns: multi-turn conversations run closed loop (--concurrency or --auto)")
        if workload.agentic and load.open_loop:
            raise ValueError("--session: agentic sessions run closed loop (--concurrency or --auto: the sessions "
                             "at once)")
        if load.auto and not self.slo.is_set:
            raise ValueError("--auto needs at least one SLO (--slo-ttft-ms, --slo-tpot-ms, --slo-e2e-ms or "
                             "--slo-ttfa-ms)")
        if workload.dataset:
            load_dataset(workload.dataset)   # a bad file fails before any server starts, naming the line
        if workload.classic and any(t.kind == "reference" and t.strategy not in (None, "continuous")
                                    for t in self.targets):
            raise ValueError("--strategies picks an LLM batching strategy; a classic model's run sets its batching "
                             "with --server-args (--classifier-max-batch-size, --classifier-max-queue-delay-us, "
                             "--classifier-instances, --classifier-batching; --embedding-* alike)")

    @property
    def open_loop(self) -> bool:
        return self.load.open_loop or bool(self.workload.trace)

    @cached_property
    def replayed_trace(self) -> Trace | None:
        return load_trace(self.workload.trace) if self.workload.trace else None

    def trace_window(self) -> tuple[float, float]:
        """(warm-up, measured) seconds of a trace's level: the replay, plus time for its last answers. A trace
        of chained sessions runs until its longest chain's delays have passed, with a minute for each of its
        turns' answers (TRACE_TURN_TAIL_S: a session's turn waits on the answer before it, which a loaded fleet
        can take seconds to give; the replay quits as soon as every session is done)."""
        trace, speedup = self.replayed_trace, self.workload.trace_speedup
        replay_s, tail_s = trace.span_s / speedup, TRACE_TAIL_S
        if trace.chained:
            for rows in trace.sessions:
                t = trace.rows[rows[0]].offset_s
                for k in rows[1:]:
                    row = trace.rows[k]
                    t = max(row.offset_s, t + (row.delay_s or 0.0))
                replay_s = max(replay_s, t / speedup)
                tail_s = max(tail_s, TRACE_TURN_TAIL_S * len(rows))
        warmup = min(self.load.warmup_s, replay_s)
        return warmup, replay_s - warmup + tail_s

    def profile(self):
        """The load profile the load options name (servecap.experiment.profiles)."""
        load = self.load
        if self.replayed_trace is not None:
            trace = self.replayed_trace
            mean_rps = len(trace.rows) / max(trace.span_s / self.workload.trace_speedup, 1e-9)
            return TraceReplay(mean_rps, self.trace_window())
        if load.auto:
            return KneeSearch(self.slo, load.max_concurrency)
        if load.rate_sweep:
            return RateSweep(load.rate_sweep, load.max_concurrency)
        if not load.levels:
            raise ValueError("choose a load: --concurrency, --rates, --auto, --rate-sweep or a --trace")
        return FixedLevels(load.levels, open_loop=bool(load.rates), rounds=load.rounds)

    @staticmethod
    def level_id(key: str | None, load: float, open_loop: bool, trace: bool = False) -> str:
        """`continuous/c=8`, `none/rps=2.0` or `continuous/trace` (no prefix for a target without a key)."""
        load_id = "trace" if trace else (f"rps={float(load)}" if open_loop else f"c={int(load)}")
        return f"{key}/{load_id}" if key else load_id

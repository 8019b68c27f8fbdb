"""What a compare run does: two arms, the load, the workload, the statistics. One frozen dataclass, validated."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from loadgen.workload.slice_plan import AT_SWITCH, SCHEDULES

ARM_KINDS = ("args", "cmd", "url")


@dataclass(frozen=True)
class ArmSpec:
    """One arm, exactly one of: reference-server flags (`args`), any server command with {port} (`cmd`),
    or an endpoint already running (`url`)."""

    name: str
    args: str | None = None
    cmd: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        given = [kind for kind in ARM_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            options = " / ".join(f"--{self.name}-{kind}" for kind in ARM_KINDS)
            raise ValueError(f"arm {self.name.upper()}: give exactly one of {options}"
                             + (f" (got {', '.join('--' + self.name + '-' + k for k in given)})" if given else ""))
        try:
            if self.args is not None:
                shlex.split(self.args)
            if self.cmd is not None and not shlex.split(self.cmd):
                raise ValueError("empty command")
        except ValueError as exc:
            raise ValueError(f"--{self.name}-{self.kind}: {exc}") from None
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"--{self.name}-url must start with http:// or https://, got {self.url!r}")

    @property
    def kind(self) -> str:
        return next(kind for kind in ARM_KINDS if getattr(self, kind) is not None)


@dataclass(frozen=True)
class CompareConfig:
    """One compare run.

    Attributes:
        out_dir: the run directory to create.
        a, b: the arms.
        model: the reference-server preset for `args` arms (and the model name when an arm lists none).
        ready_path: polled on `cmd` arms (and checked once on `url` arms) until it answers 200.
        concurrency: closed loop (Locust users); or `rate` requests/s with `arrival`.
        prompt_tokens, output_tokens, seed: the workload (loadgen/chat.py syntax); pairs' seeds derive from `seed`.
        min_effect: the change the power analysis sizes the run for (0.10 = 10%).
        max_duration_s: keep adding pairs while a gated metric is UNKNOWN, until this much wall time
            (None: run the planned pairs and judge once).
        max_regression: gated metric -> threshold (servecap gate's syntax); defaults when None.
        no_defaults: gate only what max_regression names.
        alpha: the false-alarm rate over all looks together.
        pilot_pairs: pairs run to measure the noise before planning.
        warmup_s: each arm's warm-up slice (records phase "warmup").
        slice_s: slice length; None = from the warm-up (>= 5 x median E2E, >= 2 s).
        at_switch: "drain" or "exclude" (see loadgen.workload.slice_plan.SlicePlan).
        schedule: "interleaved" (a pair's slices one after the other, in a random order) or
            "duet" (at the same time, `concurrency` users per arm); see loadgen.workload.slice_plan.
        max_pairs: hard bound on pairs (load tests stay bounded).
        pin_cpus: Locust on core 0, both arms' servers on the same other cores (servecap.experiment.cpu_pinning).
        startup_timeout_s: how long an arm may take to become ready.
    """

    out_dir: str
    a: ArmSpec
    b: ArmSpec
    model: str = "tiny"
    ready_path: str = "/ready"
    concurrency: int | None = None
    rate: float | None = None
    arrival: str = "poisson"
    prompt_tokens: str = "uniform:32:128"
    output_tokens: str = "uniform:16:64"
    seed: int = 0
    min_effect: float = 0.10
    max_duration_s: float | None = None
    max_regression: dict[str, float] | None = None
    no_defaults: bool = False
    alpha: float = 0.05
    pilot_pairs: int = 4
    warmup_s: float = 3.0
    slice_s: float | None = None
    at_switch: str = "drain"
    schedule: str = "interleaved"
    max_pairs: int = 400
    pin_cpus: bool = True
    startup_timeout_s: float = 180.0
    sample_interval_s: float = 0.5

    def __post_init__(self) -> None:
        if not self.out_dir:
            raise ValueError("--out is required (e.g. runs/cmp)")
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("give exactly one load: --concurrency N (closed loop) or --rate R (open loop)")
        if self.concurrency is not None and self.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.rate is not None and not self.rate > 0:
            raise ValueError(f"--rate must be positive, got {self.rate}")
        if not 0 < self.min_effect < 1:
            raise ValueError(f"--min-effect must be a fraction in (0, 1) such as 10%, got {self.min_effect!r}")
        if self.max_duration_s is not None and not self.max_duration_s > 0:
            raise ValueError("--max-duration must be positive")
        if not 0 < self.alpha < 0.5:
            raise ValueError(f"--alpha must be in (0, 0.5), got {self.alpha}")
        if self.pilot_pairs < 2:
            raise ValueError(f"--pilot-pairs must be at least 2 (a spread needs two), got {self.pilot_pairs}")
        if self.slice_s is not None and not self.slice_s > 0:
            raise ValueError("--slice must be positive")
        if not self.warmup_s > 0:
            raise ValueError("--warmup must be positive")
        if self.at_switch not in AT_SWITCH:
            raise ValueError(f"--at-switch must be one of {', '.join(AT_SWITCH)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.max_pairs < self.pilot_pairs:
            raise ValueError("--max-pairs must be at least --pilot-pairs")
        if not self.ready_path.startswith("/"):
            raise ValueError(f"--ready-path must start with '/', got {self.ready_path!r}")

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def load_id(self) -> str:
        """The level id the records carry after their arm: `c=4` or `rps=2.0`."""
        return f"rps={float(self.rate)}" if self.open_loop else f"c={self.concurrency}"

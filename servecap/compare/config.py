"""What a compare run adds to an experiment: its two arms, and how their slices are paired and judged.

The arms share the experiment's target options (`--model`, `--server-args`, `--emulate`,
`--server-cmd`, ...); each arm then adds its own: more flags (`--a-args`: `servecap serve` flags on
a reference server, more words of the command on a `--server-cmd`), a command of its own
(`--a-cmd`), or an endpoint already running (`--a-url`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from loadgen.workload.slice_plan import AT_SWITCH, SCHEDULES
from reports.gate.thresholds import add_threshold_arguments
from servecap.experiment.targets import TargetSpec

ARM_KINDS = ("args", "cmd", "url")
ARMS = ("a", "b")


@dataclass(frozen=True)
class ArmSpec:
    """One arm, exactly one of: more flags on the shared target (`args`), a command of its own with {port}
    (`cmd`), or an endpoint already running (`url`)."""

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

    @property
    def kind(self) -> str:
        return next(kind for kind in ARM_KINDS if getattr(self, kind) is not None)

    def target(self, base: TargetSpec) -> TargetSpec:
        """This arm's target: its own command or endpoint, or the shared target with its flags."""
        try:
            if self.kind == "cmd":
                return TargetSpec("command", self.name, command=self.cmd, ready_path=base.ready_path,
                                  served_model=base.served_model)
            if self.kind == "url":
                return TargetSpec("url", self.name, url=self.url, ready_path=base.ready_path,
                                  served_model=base.served_model)
            flags = shlex.split(self.args)
            if base.kind == "reference" and any(f == "--model" or f.startswith("--model=") for f in flags):
                raise ValueError("the model comes from --model")
            return TargetSpec(base.kind, self.name, model=base.model, server_args=base.server_args,
                              command=base.command, ready_path=base.ready_path,
                              served_model=base.served_model).with_args(self.args)
        except ValueError as exc:
            raise ValueError(f"--{self.name}-{self.kind}: {exc}") from None


@dataclass(frozen=True)
class PairedOptions:
    """How a compare run's slices are laid out, how many pairs it runs and how it judges them.

    Attributes:
        min_effect: the change the power analysis sizes the run for (0.10 = 10%).
        max_duration_s: keep adding pairs while a gated metric is UNKNOWN, until this much wall time
            (None: run the planned pairs and judge once).
        max_regression: gated metric -> threshold (servecap gate's syntax); defaults when None.
        no_defaults: gate only what max_regression names.
        alpha: the false-alarm rate over all looks together.
        pilot_pairs: pairs run to measure the noise before planning.
        slice_s: slice length; None = from the warm-up (>= 5 x median E2E, >= 2 s).
        at_switch: "drain" or "exclude" (see loadgen.workload.slice_plan.SlicePlan).
        schedule: "interleaved" (a pair's slices one after the other, in a random order) or "duet" (at
            the same time, the users split between the arms); see loadgen.workload.slice_plan.
        max_pairs: hard bound on pairs (load tests stay bounded).
    """

    min_effect: float = 0.10
    max_duration_s: float | None = None
    max_regression: dict[str, float] | None = None
    no_defaults: bool = False
    alpha: float = 0.05
    pilot_pairs: int = 4
    slice_s: float | None = None
    at_switch: str = "drain"
    schedule: str = "interleaved"
    max_pairs: int = 400

    def __post_init__(self) -> None:
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
        if self.at_switch not in AT_SWITCH:
            raise ValueError(f"--at-switch must be one of {', '.join(AT_SWITCH)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.max_pairs < self.pilot_pairs:
            raise ValueError("--max-pairs must be at least --pilot-pairs")


def add_paired_arguments(parser: Any) -> None:
    for arm in ARMS:
        group = parser.add_argument_group(f"arm {arm.upper()} (exactly one)")
        for kind, text in (("args", 'more flags on the shared target, e.g. "--max-num-seqs 8" ("" = as it is)'),
                           ("cmd", "a server command of its own with {port}"), ("url", "an endpoint already running")):
            group.add_argument(f"--{arm}-{kind}", help=text)
    stats = parser.add_argument_group("statistics")
    add_threshold_arguments(stats, example="tpot_s.p50=5%%,cpu_s_per_token=10%%")
    stats.add_argument("--min-effect", default="10%", help="the change the power analysis sizes the run for")
    stats.add_argument("--max-duration", help="keep adding pairs while undecided, up to this wall time (30s, 5m)")
    stats.add_argument("--alpha", type=float, default=0.05, help="false-alarm rate over all looks (default 0.05)")
    stats.add_argument("--pilot-pairs", type=int, default=4, help="pairs that measure the noise first")
    stats.add_argument("--max-pairs", type=int, default=400, help="hard bound on pairs")
    slices = parser.add_argument_group("slices (each arm's warm-up slice: --warmup)")
    slices.add_argument("--slice", help="slice length (default from the warm-up: >= 5 x median E2E, >= 2 s)")
    slices.add_argument("--schedule", choices=SCHEDULES, default="interleaved",
                        help="interleaved: a pair's two slices one after the other, in a random order; duet: at the "
                             "same time, --concurrency users per arm, so even fast drift hits both arms alike "
                             "(each arm's absolute figures then include the other's load)")
    slices.add_argument("--at-switch", choices=AT_SWITCH, default="drain",
                        help="requests in flight at a switch: finish first (drain) or are cut off (exclude)")

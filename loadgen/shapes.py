"""Locust load shapes (step, ramp, spike), chosen with `--shape` when this file is a second locustfile.

    locust -f loadgen/chat.py,loadgen/shapes.py --headless --shape step:1,4,8:30 --records r.jsonl

`--shape` specs are in `shape_plans.py`; `--shape-spawn-rate` sets users/s (default: reach
each stage within a second). The test ends when the plan does. Records carry the user
count of the moment as their level (`c=1`, `c=4`, ...) in a local run.

To fix a shape in code instead, subclass one of the abstract shapes in your locustfile:

    class MySteps(StepShape):
        levels = (1, 2, 4)
        hold_s = 20

Only one concrete shape may be loaded, so use either that or this file's `ShapeFromOptions`.
"""

from __future__ import annotations

import sys

from locust import LoadTestShape, events

from loadgen.workload.shape_plans import ShapePlan, parse_shape


class PlannedShape(LoadTestShape):
    """Follows a `ShapePlan` from the moment the test starts."""

    abstract = True
    plan: ShapePlan | None = None

    def make_plan(self) -> ShapePlan:
        raise NotImplementedError

    def tick(self):
        if self.plan is None:
            self.plan = self.make_plan()
        return self.plan.at(self.get_run_time())


class StepShape(PlannedShape):
    abstract = True
    levels: tuple[int, ...] = (1,)
    hold_s: float = 30.0

    def make_plan(self) -> ShapePlan:
        return parse_shape(f"step:{','.join(map(str, self.levels))}:{self.hold_s}")


class RampShape(PlannedShape):
    abstract = True
    users_from: int = 1
    users_to: int = 16
    duration_s: float = 60.0

    def make_plan(self) -> ShapePlan:
        return parse_shape(f"ramp:{self.users_from}:{self.users_to}:{self.duration_s}")


class SpikeShape(PlannedShape):
    abstract = True
    base: int = 2
    peak: int = 16
    base_s: float = 30.0
    spike_s: float = 10.0

    def make_plan(self) -> ShapePlan:
        return parse_shape(f"spike:{self.base}:{self.peak}:{self.base_s}:{self.spike_s}")


class ShapeFromOptions(PlannedShape):
    """The shape named by `--shape` (required when this file is loaded)."""

    def make_plan(self) -> ShapePlan:
        options = self.runner.environment.parsed_options
        return parse_shape(options.shape, float(options.shape_spawn_rate or 0))


@events.init_command_line_parser.add_listener
def _add_arguments(parser, **_) -> None:
    parser.add_argument("--shape", default="", help="step:U1,U2,..:HOLD_S | ramp:FROM:TO:S | spike:BASE:PEAK:BASE_S:SPIKE_S")
    parser.add_argument("--shape-spawn-rate", default=0.0, type=float, help="users/s between stages (default: within 1 s)")


@events.init.add_listener
def _check(environment, **_) -> None:
    options = environment.parsed_options
    if options is None or getattr(options, "worker", False):
        return
    try:
        if not options.shape:
            raise ValueError("--shape: loadgen/shapes.py is loaded but no --shape was given")
        parse_shape(options.shape, float(options.shape_spawn_rate or 0))
        if getattr(options, "rates", None):
            raise ValueError("--shape drives closed-loop users: it does not combine with --rates (an open loop)")
    except ValueError as exc:
        print(f"locust: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None

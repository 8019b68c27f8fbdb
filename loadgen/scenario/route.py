"""What a request is before it is sent (`Prepared`), who prepares it (`Scenario`), and where it goes
with what its record says beyond the timing (`Route`). Shared by the load run and the slice driver."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from loadgen.client.http_stream import ConnectionPool


@dataclass(frozen=True)
class Prepared:
    request: bytes
    prompt_tokens_asked: int | None
    output_tokens_asked: int | None
    conversation_id: str | None = None   # multi-turn: the record's conversation_id and turn (1-based)
    turn: int | None = None
    model: str | None = None             # --model-mix: the model this request asked for (the record's `model`)
    session: "SessionStep | None" = None  # --session: where in its session the request is


@dataclass(frozen=True)
class SessionStep:
    """A session request's place (the record's step, agent, tool_wait_s and session_end)."""

    step: int
    agent: str = "main"
    tool_wait_s: float | None = None
    session_end: bool | None = None


class Scenario(Protocol):
    api: str
    stream: bool
    path: str          # the request's URL path: Locust's stats entry is named by it

    def prepare(self, rng: random.Random) -> Prepared: ...


@dataclass(frozen=True)
class Route:
    """Where one request goes and what its record says beyond the timing.

    The default route is the test's `--host` with the scenario as built. A compare run's
    slices route each request to its arm (`loadgen.scenario.slice_driver`): `arm` and
    `slice` go into the record, `phase` is the slice's, and `switch()` is asked when the
    record is written ("drained" when the request outlived its slice, "excluded" when the
    switch cut it off).
    """

    pool: ConnectionPool
    scenario: Scenario
    arm: str | None = None
    slice: int | None = None
    phase: str | None = None                      # None: by --warmup
    switch: Callable[[], str | None] | None = None


class Sender(Protocol):
    """What the slice driver needs of the load run (`LoadRun`): its default route, its settings and
    Locust handles (to stop the test), and sending one prepared request now (closed loop) or at its
    slot (open loop)."""

    route: Route | None
    settings: object      # loadgen.scenario.run_settings.RunSettings
    environment: object   # locust.env.Environment
    runner: object        # locust.runners.Runner

    def send(self, index: int, prepared: Prepared, *, t_sched: float, route: Route | None = None,
             t_ready: float | None = None): ...

    def send_at(self, t_sched: float, index: int, prepared: Prepared, inflight, route: Route): ...

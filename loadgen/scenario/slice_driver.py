"""Inside the Locust process: run a compare run's slice plan, one group of slices at a time.

A group is one slice when the schedule is interleaved, and a pair's two slices (one per
arm) when it is a duet (loadgen.workload.slice_plan.SlicePlan.groups). For each group in
order: each slice's arm gets the load for `duration_s` (closed loop: the Locust users send
request after request, in a duet each user always to the same arm, half the users to
each; open loop: the slice's own seeded arrival schedule), then the switch: no new
request is sent; requests still in flight either finish ("drain": the next group waits
for them, up to `drain_timeout_s`, and their records say switch "drained") or are cut
off ("exclude", or a drain that timed out: status "incomplete", switch "excluded"). Then
one line per slice goes to the slices log and the next group starts. After the last
group the runner quits.

Request k of a slice is drawn from `random.Random(f"{slice.seed}/{k}")`, and both slices
of a pair share the seed, so A and B are sent the same sequence. Multi-turn chats (`--turns`):
each user runs whole conversations, conversation k of a slice drawn from
`random.Random(f"{slice.seed}/c{k}")`, its turns sent to the slice's arm while the slice lasts; a
conversation never crosses a switch (its history holds one arm's answers, its prefix one arm's
cache), so at a switch a conversation's remaining turns are not sent, and both arms of a pair see
the same conversations cut alike. The server CPU time (its process tree) is read at the slice's
start and after its drain.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field

import gevent
import gevent.event
import gevent.pool

from loadgen.client.exchange import Exchange
from loadgen.client.http_stream import ConnectionPool
from loadgen.client.request_bytes import Target
from loadgen.client.sse import answer_text
from loadgen.scenario.route import Route, Sender
from loadgen.scenario.session_loop import run_session
from loadgen.observe.process_cpu import tree_cpu_seconds
from contract.arrivals import iter_offsets
from loadgen.workload.slice_plan import ARMS, Slice, SlicePlan
from contract.records import json_line

log = logging.getLogger(__name__)


@dataclass
class ActiveSlice:
    """The slice being run: its requests' counter, who is in flight, and whether it has switched."""

    slice: Slice
    t_start: float                 # unix s
    inflight: set = field(default_factory=set)
    sent: int = 0
    switched: bool = False         # the switch came: new requests go elsewhere, these are draining
    cutting: bool = False          # the switch is cutting the rest off
    drained: int = 0
    excluded: int = 0
    conversations: int = 0         # multi-turn: conversations begun in this slice
    done: gevent.event.Event = field(default_factory=gevent.event.Event)

    def take_index(self) -> int:
        self.sent += 1
        return self.sent - 1

    def take_conversation(self) -> int:
        self.conversations += 1
        return self.conversations - 1

    def switch_state(self) -> str | None:
        """What the record of a request of this slice, written now, says about the switch."""
        if self.cutting:
            self.excluded += 1
            return "excluded"
        if self.switched:
            self.drained += 1
            return "drained"
        return None


class SliceDriver:
    def __init__(self, run: Sender, plan: SlicePlan) -> None:
        self.run = run
        self.plan = plan
        base = run.route.scenario
        if not hasattr(base, "with_target"):
            raise ValueError("--slice-plan needs a scenario that can be sent to two servers (loadgen/chat.py)")
        self.arms = {arm: (ConnectionPool(Target.from_url(r.url)), base.with_target(Target.from_url(r.url), r.model))
                     for arm, r in plan.arms.items()}
        self.active: dict[str, ActiveSlice] = {}   # arm -> its running slice (two in a duet)
        self.user_arms: dict = {}                  # duet: user greenlet -> its arm, handed out in turn
        self.gate = gevent.event.Event()        # set while a slice takes new requests
        self.ended = gevent.event.Event()       # set when the last slice is done
        self.finished = False

    def start(self) -> None:
        gevent.spawn(self._drive)

    # -- the users ----------------------------------------------------------------------
    def user_step(self) -> None:
        """Closed loop: one request to the current slice's arm (waits through a switch)."""
        self.gate.wait()
        if self.finished:
            return   # the plan is done: returning lets Locust stop the user at once (it is quitting)
        if self.run.settings.arrival.open_loop:
            self.ended.wait()   # open loop: the driver sends; users idle until the plan is done
            return
        active = self._user_slice()
        if active is None or active.switched:
            return
        if getattr(self.arms[active.slice.arm][1], "agentic", False):
            self._run_session(active)
            return
        if getattr(self.arms[active.slice.arm][1], "multi_turn", False):
            self._converse(active)
            return
        t_ready = time.perf_counter()   # after the gate: a switch's wait is the plan's, not a queue
        index = active.take_index()
        self._send(active, index, t_sched=None, t_ready=t_ready)

    def _converse(self, active: ActiveSlice) -> None:
        """Closed loop, multi-turn: one conversation of this slice (module docstring), turn after turn,
        until it ends, a turn fails, or the slice switches."""
        _, scenario = self.arms[active.slice.arm]
        number = active.take_conversation()
        conversation = scenario.conversation(random.Random(f"{active.slice.seed}/c{number}"),
                                             f"s{active.slice.index}/c{number}")
        t_ready = time.perf_counter()
        for turn in range(conversation.turns):
            if active.switched or self.finished:
                return
            exchange = Exchange()
            outcome = self._send(active, active.take_index(), t_sched=None, t_ready=t_ready,
                                 prepared=conversation.prepare(turn), exchange=exchange)
            if outcome is None or outcome.status != "ok":
                return
            conversation.answered(answer_text(exchange.lines, bytes(exchange.body), stream=scenario.stream))
            if turn + 1 < conversation.turns and conversation.think_time_s:
                gevent.sleep(conversation.think_time_s)
            t_ready = time.perf_counter()

    def _run_session(self, active: ActiveSlice) -> None:
        """Closed loop, --session: one agentic session of this slice, drawn and cut at a switch as a
        conversation is (module docstring)."""
        _, scenario = self.arms[active.slice.arm]
        number = active.take_conversation()
        requests = scenario.agent_session(random.Random(f"{active.slice.seed}/s{number}"),
                                          f"s{active.slice.index}/s{number}")
        run_session(requests, lambda prepared, exchange, t_ready: self._send(
                        active, active.take_index(), t_sched=None, t_ready=t_ready, prepared=prepared,
                        exchange=exchange),
                    stopped=lambda: active.switched or self.finished, think_time_s=scenario.config.think_time_s,
                    server=active.slice.arm)

    def _user_slice(self) -> ActiveSlice | None:
        """The slice this user sends to: the only one running, or in a duet its own arm's."""
        if self.plan.schedule != "duet":
            return next(iter(self.active.values()), None)
        me = gevent.getcurrent()
        arm = self.user_arms.get(me)
        if arm is None:
            arm = self.user_arms[me] = ARMS[len(self.user_arms) % len(ARMS)]
        return self.active.get(arm)

    def _route(self, active: ActiveSlice):
        pool, scenario = self.arms[active.slice.arm]
        return Route(pool, scenario, arm=active.slice.arm, slice=active.slice.index, phase=active.slice.phase,
                          switch=active.switch_state)

    def _send(self, active: ActiveSlice, index: int, t_sched: float | None, t_ready: float | None = None,
              prepared=None, exchange: Exchange | None = None):
        prepared = prepared if prepared is not None else self._prepare(active, index)
        me = gevent.getcurrent()
        active.inflight.add(me)
        try:
            return self.run.send(index, prepared, t_sched=t_sched, route=self._route(active), t_ready=t_ready,
                                 exchange=exchange)
        finally:
            active.inflight.discard(me)
            if active.switched and not active.inflight:
                active.done.set()

    def _prepare(self, active: ActiveSlice, index: int):
        _, scenario = self.arms[active.slice.arm]
        return scenario.prepare(random.Random(f"{active.slice.seed}/{index}"))

    # -- the driver ---------------------------------------------------------------------
    def _drive(self) -> None:
        try:
            for group in self.plan.groups():
                self._run_group(group)
        except gevent.GreenletExit:
            raise
        except Exception:   # a crash here must end the test, not hang it
            log.exception("the slice driver failed")
            self.run.environment.process_exit_code = 1
        self.finished = True
        self.gate.set()   # release the users waiting for a slice, so they stop now
        self.ended.set()
        self.run.runner.quit()

    def _run_group(self, group: tuple[Slice, ...]) -> None:
        """Run the group's slices at once (one, or a duet's two): load, switch, drain or cut, log."""
        cpu_start = {s.arm: self._cpu(s.arm) for s in group}
        t_start = time.time()
        self.active = {s.arm: ActiveSlice(s, t_start) for s in group}
        self.gate.set()
        if self.run.settings.arrival.open_loop:
            gevent.joinall([gevent.spawn(self._open_loop, active) for active in self.active.values()])
        else:
            gevent.sleep(max(s.duration_s for s in group))
        t_end = time.time()
        self.gate.clear()
        for active in self.active.values():
            active.switched = True
        deadline = time.monotonic() + self.plan.drain_timeout_s
        for active in self.active.values():
            if active.inflight and self.plan.at_switch == "drain":
                active.done.wait(max(0.0, deadline - time.monotonic()))
        for active in self.active.values():
            if active.inflight:            # excluded by choice, or a drain that timed out
                active.cutting = True
                gevent.killall(list(active.inflight), block=True)
        t_drained = time.time()
        for arm, active in self.active.items():
            cpu_end = self._cpu(arm)
            cpu_s = None if cpu_start[arm] is None or cpu_end is None else cpu_end - cpu_start[arm]
            self._log(active, t_end, t_drained, cpu_s)

    def _cpu(self, arm: str) -> float | None:
        pids = self.plan.arms[arm].pids
        return tree_cpu_seconds(pids) if pids else None

    def _open_loop(self, active: ActiveSlice) -> None:
        """The slice's own seeded arrival schedule, for `duration_s` (one greenlet per request)."""
        settings = self.run.settings
        pool = gevent.pool.Pool(settings.max_inflight)
        t0 = time.perf_counter() + 0.01
        for index, offset in enumerate(iter_offsets(settings.arrival, active.slice.seed)):
            if offset >= active.slice.duration_s:
                break
            t_sched = t0 + offset
            gevent.sleep(max(0.0, t_sched - 0.002 - time.perf_counter()))
            active.take_index()
            greenlet = self.run.send_at(t_sched, index, self._prepare(active, index), pool, self._route(active))
            if greenlet is not None:
                active.inflight.add(greenlet)
                greenlet.link(lambda g, a=active: self._left(a, g))
        gevent.sleep(max(0.0, t0 + active.slice.duration_s - time.perf_counter()))

    @staticmethod
    def _left(active: ActiveSlice, greenlet) -> None:
        active.inflight.discard(greenlet)
        if active.switched and not active.inflight:
            active.done.set()

    def _log(self, active: ActiveSlice, t_end: float, t_drained: float, cpu_s: float | None) -> None:
        if not self.plan.slices_log:
            return
        s = active.slice
        line = {"slice": s.index, "pair": s.pair, "arm": s.arm, "phase": s.phase, "seed": s.seed,
                "duration_s": s.duration_s, "t_start": active.t_start, "t_end": t_end, "t_drained": t_drained,
                "sent": active.sent, "drained": active.drained, "excluded": active.excluded, "cpu_s": cpu_s}
        with open(self.plan.slices_log, "ab") as handle:
            handle.write(json_line(line))

"""Chained sessions in the plan's fleet loop (calculators.plan.fleet), and the stepping they share with hedging.

A session's later turn (`Demand.after`, `Demand.delay_s`: a trace's rows with AIPerf's `delay`) is sent when
the turn before it has ended on the client's clock and its delay is up, or at its own time if that is later:
the trace replay's rule (loadgen.scenario.load_run `_replay_sessions`). A request that joins several (an
agent's turn after its sub-agents, `Demand.joins`) goes when the last of them has ended, and sub-agents that
all follow one request go together at its end. A turn that failed (lost with a
killed replica, or answered an error after the router's last attempt) lets the next one go at its failure,
as the replay's does: each row is its own recorded prompt. A turn that never ends (it waits at a router
that never gets a replica) holds the rest of its session back; they stay unsent and count as unfinished.

So the loop must see each such end at its moment. The replicas that hold a turn with a turn to follow (and
those holding an open hedge race, calculators.plan.fleet_hedging) run one step at a time, earliest clock
first, and never past the loop's next event: a turn's end pushes its next turn's send, which may come
before that event, and a replica must not have run a step past a request that would have joined it.
A mixin of `_Fleet`, whose state (demand, sims, events, races) it reads and changes. Pure.
"""

from __future__ import annotations

import math


class FleetSessions:
    """`_Fleet`'s chained turns and stepping: `_init_sessions`, `_opens`, `_watch`, `_unwatch`, `_turn_over`,
    `_catch_up`, `_drain`, `_settle`."""

    def _init_sessions(self) -> None:
        self.next_turn: dict[int, list[int]] = self.demand.followers()   # request -> the turns waiting on it
        self.waiting_on: dict[int, int] = self.demand.waits()   # unsent turn -> the requests it still waits on
        self.ready_at: dict[int, float] = {}  # a join's turn -> the latest end among those it waited on so far
        self.watched: dict[int, int] = {}     # member in flight whose request has a turn to follow -> replica

    def _opens(self, i: int) -> bool:
        """Request i is sent at its own time (not a later turn, which its previous turn's end sends)."""
        return self.demand.after is None or self.demand.after[i] < 0

    def _watch(self, j: int, i: int, rid: int) -> None:
        if i in self.next_turn:
            self.watched[j] = rid

    def _unwatch(self, j: int) -> None:
        self.watched.pop(j, None)

    def _turn_over(self, i: int, t: float) -> None:
        """Request i ended at t on the client's clock (answered or failed): each turn waiting on it, once
        nothing else holds it back, is sent at its own time or its delay after the last end, whichever is later."""
        for k in self.next_turn.pop(i, ()):
            ready = max(self.ready_at.pop(k, t), t)
            self.waiting_on[k] -= 1
            if self.waiting_on[k]:
                self.ready_at[k] = ready
                continue
            del self.waiting_on[k]
            self._push(max(float(self.demand.t_s[k]), ready + float(self.demand.delay_s[k])), self.FOLLOW, k)

    def _catch_up(self, t: float) -> None:
        """Every event up to t, and the stepped replicas run to t (whose turns' ends may push more before t)."""
        while True:
            self._events_until(t)
            self._settle(t)
            if not (self.events and self.events[0][0] <= t):
                return

    def _drain(self) -> None:
        """Run until nothing is left to send: retries, hedges, arrivals and the turns still to follow."""
        while self.watched or any(event[1] in self.CLIENT for event in self.events):
            self._settle(self.events[0][0] if self.events else math.inf)
            if not self.events:
                return   # a turn that cannot end: its session stops there
            self._next_event()

    def _stepped(self) -> set[int]:
        """Replicas whose every step the loop must see as it ends: open races' and chained turns'."""
        rids = set(self.watched.values())
        if self.races is not None:
            rids |= self.races.replicas()
        return rids

    def _settle(self, t: float) -> None:
        """Run the stepped replicas to t, one step at a time and earliest clock first, never past the loop's
        next event (a turn's end may push one sooner); decide each hedge race as soon as its first token is
        sure (calculators.plan.hedge_races)."""
        if self.races is None and not self.watched:
            return
        while True:
            self._decide_races()
            bound = min(t, self.events[0][0]) if self.events else t
            behind = [rid for rid in self._stepped() if rid in self.sims and self.sims[rid].now < bound
                      and (math.isfinite(bound) or self.sims[rid].scheduler.has_unfinished())]
            if not behind:
                return
            self._advance(min(behind, key=lambda r: self.sims[r].now), bound, one_step=True)

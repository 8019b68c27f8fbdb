"""The autoscaler's side of the plan's fleet loop (calculators.plan.fleet): replicas asked for, removed
(a replica still starting first, else the ready one holding the fewest requests, drained), killed by a
fault (its requests lost, or sent again with `retry_lost`), stopped and billed. A mixin of `_Fleet`, whose state (lives, sims, routable, starting, draining, in_flight, the event
queue) it reads and changes. Pure."""

from __future__ import annotations

import numpy as np

from calculators.plan.fleet_config import Fault
from calculators.plan.fleet_run import Decision, ReplicaLife


class FleetScaling:
    """`_Fleet`'s replica lifecycle: `_start_replica`, `_tick`, `_remove_one`, `_fault`, `_stop`, `_drop`."""

    def _start_replica(self, t: float) -> None:
        life = ReplicaLife(id=len(self.lives), requested_s=t, ready_s=t + self.config.cold_start_s)
        self.lives.append(life)
        self.starting.append(life.id)
        self._push(life.ready_s, self.READY, life.id)

    def _tick(self, t: float) -> None:
        for rid in list(self.routable):
            self._advance(rid, t)
        metric = self.autoscaler.config.metric
        per_replica = [self._metric(rid, metric, t) for rid in self.routable]
        current = len(self.routable) + len(self.starting)
        wanted = self.autoscaler.decide(t, current, per_replica, pending=len(self.pending))
        self.decisions.append(Decision(t, wanted, len(self.routable), tuple(per_replica)))
        for _ in range(wanted - current):
            self._start_replica(t)
        for _ in range(current - wanted):
            self._remove_one(t)

    def _metric(self, rid: int, metric: str, t: float) -> float:
        """The metric as the replica's /metrics shows it at t: as its last step that ended by then left it
        (calculators.plan.replica), what a real autoscaler scrapes; not the router's own count, which
        also holds requests still on their way in or in a step not yet done."""
        gauges = self.sims[rid].gauges(t)
        if metric == "in_flight":
            return float(gauges.running + gauges.waiting)
        if metric == "waiting":
            return float(gauges.waiting)
        return gauges.kv_usage

    def _remove_one(self, t: float) -> None:
        """Scale down by one: a replica still starting first (newest), else the ready one holding the fewest."""
        if self.starting:
            rid = self.starting.pop()
            self.lives[rid].stopped_s = t
            self.lives[rid].drain_s = t
            return
        rid = min(reversed(self.routable), key=lambda r: self.in_flight[r])
        self.routable.remove(rid)
        self.router.removed(rid)
        self.lives[rid].drain_s = t
        if self.in_flight[rid] == 0:
            self._stop(rid, t)
        else:
            self.draining.add(rid)

    def _stop(self, rid: int, t: float) -> None:
        self.draining.discard(rid)
        self.lives[rid].stopped_s = max(t, self.lives[rid].drain_s or t)
        self._drop(rid)

    def _drop(self, rid: int) -> None:
        sim = self.sims.pop(rid, None)
        if sim is not None:
            life = self.lives[rid]
            life.prefix_hit_tokens = sim.block_manager.prefix_cache_hit_tokens
            life.prefix_query_tokens = sim.block_manager.prefix_cache_query_tokens

    def _fault(self, t: float, fault: Fault) -> None:
        live = [rid for rid in self.routable]
        if not live:
            return
        for rid in live:
            self._advance(rid, t)
        rid = fault.replica if fault.replica in live else max(live, key=lambda r: (self.in_flight[r], -r))
        lost, races = [], self.races
        held = self.sims[rid].unfinished()
        engine = set(held)
        held += [j for j, r in self.holder.items() if r == rid and j not in engine]   # still in its front end
        for j in held:
            self.holder.pop(j, None)
            self._unwatch(j)
            if races is not None and races.racing(j):
                self._apply(races.drop(j))   # the other copy goes on alone
            else:
                lost.append(j if races is None else races.request_of(j))
        self.routable.remove(rid)
        self.router.removed(rid)
        life = self.lives[rid]
        life.killed, life.drain_s, life.stopped_s = True, t, t
        self._drop(rid)
        self.in_flight[rid] = 0
        self.first[lost] = np.nan
        if self.config.retry_lost:
            self.retried[lost] = True
        else:
            self.lost[lost] = True
            for i in lost:   # the client has its error now: its session's next turn may go
                self._turn_over(i, t)
        if self.autoscaler is None:   # a fixed fleet's Deployment replaces the pod
            self._start_replica(t)
        if self.config.retry_lost:
            for i in lost:   # the client sends it again: the router's first attempt of it
                self._route(i, t=t)

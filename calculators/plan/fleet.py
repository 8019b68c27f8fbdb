"""A fleet over a demand trace: simulated replicas behind a router, scaled by an autoscaler, with faults.

    run = run_fleet(demand, FleetConfig(replica=..., router="round_robin", initial_replicas=4, ...))

Time moves from event to event: each request's send time, each autoscaler decision, each replica's
becoming ready, each fault. Before a decision, the replicas it reads are advanced to that moment
(`ReplicaSim.advance`), so the router and the autoscaler see what a real one would see then:
- the router counts, per replica, the requests it sent that have not finished (vLLM's router keeps
  such counts itself), and a policy that needs no state advances only the replica it chose;
- the autoscaler reads its metric on every ready replica at its interval.
A request sent while no replica is ready waits at the router (a scale-from-zero activation) and goes
out when the first replica is ready. A replica the autoscaler removes takes no new requests and
finishes what it has (a drained pod); it is billed until then. A fault kills a replica, and a fixed
fleet's Deployment starts its replacement, which is ready a cold start later. The requests it held
fail (they never finish, and count against their window's error rate: `FleetRun.lost`), as they
do behind vLLM's router: it retries a request that found no worker, but not a response already
streaming, and a replica streams its response's head at once. With `retry_lost` (a client that retries) they are
sent again at that moment instead, keeping their first send time.

With a replica's measured front end (`ReplicaSpec.front_end`, calculators.sim.front_end) each request
reaches the engine its draw's `in_s` after the router sent it, and its client sees the first token
`first_out_s` and the last `last_out_s` after the engine made them (the draw at the streams its
replica's front end holds, itself included); without one the client is on the engine's clock.

With `fallback` a proxy in front of the router sends requests on to a fallback tier by its rule
(calculators.plan.fallback_rule); the run says when each left (`FleetRun.left_s`).

A request whose prompt and max_tokens exceed the replica's context (`ReplicaSpec.max_model_len`) is answered
400 by the replica it was routed to, before its engine sees it, as vLLM's server and the reference server
answer it: an error the client has at once (`FleetRun.errored`), never retried.

A demand of chained sessions (`Demand.after`: a trace's turns that wait on the answer before them) sends
each later turn when the turn before it ends, as the trace replay does (calculators.plan.fleet_sessions).

With `hedge_after` (contract.hedging's rule) a request with no first token that long after its send is
sent again through the router; the first copy to show is kept, the other aborted (calculators.plan.hedge_races;
while a race is open its replicas run one step at a time, earliest first, so its winner is the true first).

Replicas are billed from the moment they are asked for (a GPU is held through the cold start) until
they stop. Pure: no I/O; the caller reads traces and writes results.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from contract.hedging import HedgeRule, parse_hedge
from contract.prompt_text import trace_tail_text
from contract.model_mix import BASE
from calculators.plan.autoscaler import Autoscaler
from calculators.plan.cache_aware_router import LEAD_CHARS
from calculators.plan.demand import Demand
from calculators.plan.fallback_rule import Gate
from calculators.plan.fleet_config import Fault, FleetConfig, ReplicaSpec
from calculators.plan.fleet_run import Decision, FleetRun, ReplicaLife
from calculators.plan.fleet_hedging import FleetHedging
from calculators.plan.fleet_sessions import FleetSessions
from calculators.plan.fleet_scaling import FleetScaling
from calculators.plan.hedge_races import HedgeRaces
from calculators.plan.prompt_tokens import prompt_tokens
from calculators.plan.replica import ReplicaSim
from calculators.plan.resilience import CONTEXT_TOO_LONG, RouterAttempts
from calculators.plan.router import ReplicaView, make_router
from calculators.plan.disaggregated import run_disaggregated

__all__ = ["Fault", "FleetConfig", "ReplicaSpec", "run_fleet"]   # what a fleet is (fleet_config), and its run


class _Fleet(FleetScaling, FleetHedging, FleetSessions):
    def __init__(self, demand: Demand, config: FleetConfig, on_progress=None) -> None:
        self.demand, self.config = demand, config
        self.on_progress = on_progress
        spec = config.replica
        self.spec = spec
        options = dict(config.router_options)
        if config.router == "cache_aware":   # the trace replay writes one character per token
            options.setdefault("block_chars", demand.prefix_block_tokens)
        self.router = make_router(config.router, seed=config.seed, **options)
        self.stateless = not self.router.reads_load
        self.autoscaler = None if config.autoscaler is None else Autoscaler(config.autoscaler)
        n = len(demand)
        mix = config.model_mix   # drawn once per request index, on a stream of its own
        self.lora = None if mix is None else [None if name == BASE else name for name in
                                              mix.draw_many(np.random.default_rng([config.seed, 3]), n)]
        self.send = demand.t_s.astype(float)
        self.first = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        self.served_by = np.full(n, -1, dtype=np.int64)
        self.retried = np.zeros(n, dtype=bool)
        self.lost = np.zeros(n, dtype=bool)
        self.lives: list[ReplicaLife] = []
        self.sims: dict[int, ReplicaSim] = {}     # id -> replica that exists and has started (ready)
        self.routable: list[int] = []             # ready replicas taking requests, in start order
        self.starting: list[int] = []             # asked for, not yet ready
        self.draining: set[int] = set()
        self.in_flight: dict[int, int] = {}
        self.holder: dict[int, int] = {}          # request -> replica holding it
        self.events: list[tuple[float, int, int, object]] = []   # (t, kind order, seq, payload)
        self.pending: deque[tuple[int, int]] = deque()   # (request, its attempt) waiting for a ready replica
        self.decisions: list[Decision] = []
        self._seq = 0
        self.attempts = RouterAttempts(n, config.resilience, config.replica_errors or (), config.seed)
        self.hedge: HedgeRule | None = parse_hedge(config.hedge_after)   # a fresh running percentile per run
        self.races = HedgeRaces(n) if self.hedge is not None else None
        self.gate = None if config.fallback is None else Gate(config.fallback, n)
        self.left_by_errors = np.zeros(n, dtype=bool)
        self.front = spec.front_end
        self.front_rng = np.random.default_rng([config.seed, 5])
        self.front_at: dict[int, object] = {}               # streams -> the front end's delays there
        self.out_delay: dict[int, tuple[float, float]] = {}   # member -> (first_out_s, last_out_s) drawn
        self._init_sessions()

    # -- events -----------------------------------------------------------------------------------
    # at one moment, in this order: a fault, then the autoscaler's decision, then a replica becoming ready
    # (the controller asks for a replica after it reads, so one asked for a cold start before this tick
    # is ready just after it, as a real one is), then the router's sends, then a session's next turn
    FAULT, TICK, READY, RETRY, HEDGE, ARRIVE, FOLLOW = 0, 1, 2, 3, 4, 5, 6
    CLIENT = (RETRY, HEDGE, ARRIVE, FOLLOW)   # what is still to be sent or to reach an engine

    def _push(self, t: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, kind, self._seq, payload))

    def _ready(self, t: float, rid: int) -> None:
        if rid not in self.starting:
            return   # cancelled while starting
        self.starting.remove(rid)
        self.sims[rid] = ReplicaSim(self.spec.server, self.spec.step_model, num_kv_blocks=self.spec.num_kv_blocks,
                                    seed=self.config.seed * 1000 + rid, ready_at=t,
                                    shared_prefixes=self.demand.prefix is not None)
        self.routable.append(rid)
        self.in_flight[rid] = 0
        self.attempts.add_replica(rid)
        while self.pending:
            i, attempt = self.pending.popleft()
            self._route(i, attempt, t=t)

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> FleetRun:
        demand = self.demand
        for _ in range(self.config.initial_replicas):
            life = ReplicaLife(id=len(self.lives), requested_s=0.0, ready_s=0.0)
            self.lives.append(life)
            self.starting.append(life.id)
            self._ready(0.0, life.id)
        horizon = float(demand.t_s[-1]) if len(demand) else 0.0
        if self.autoscaler is not None:
            interval = self.autoscaler.config.interval_s
            for k in range(1, int(horizon // interval) + 1):
                self._push(k * interval, self.TICK, None)
        for fault in self.config.faults:
            self._push(fault.t_s, self.FAULT, fault)
        every = max(len(demand) // 20, 1)
        for i in range(len(demand)):
            if self._opens(i):   # a session's later turn is sent by the end of the turn before it
                t = float(self.send[i])
                self._catch_up(t)
                self._send(i, t)
            if self.on_progress is not None and (i + 1) % every == 0:
                self.on_progress(i + 1, len(demand))
        self._events_until(max([horizon, *(fault.t_s for fault in self.config.faults)]))
        self._finish_all()
        return FleetRun(self.send, self.first, self.end, demand.output.astype(np.int64), self.served_by,
                        self.retried, self.lives, self.decisions, max(horizon, self._last_end()), self.lost,
                        errored=self.attempts.errored, router=self.attempts.summary(),
                        **({} if self.races is None else self.races.run_fields(self.hedge.spec)),
                        **({} if self.gate is None else {"left_s": self.gate.left_s, "left_by_errors": self.left_by_errors}))

    def _send(self, i: int, t: float) -> None:
        """The client sends request i at t: through the fallback proxy's gate if there is one, then the router;
        its hedge's moment is set."""
        if self.gate is not None and not self._through_gate(i, t):
            return
        self._route(i, t=t)
        delay = None if self.hedge is None else self.hedge.delay()
        if delay is not None:
            self._push(t + delay, self.HEDGE, i)

    def _events_until(self, t: float) -> None:
        while self.events and self.events[0][0] <= t:
            self._settle(self.events[0][0])
            self._next_event()

    def _next_event(self) -> None:
        when, kind, _, payload = heapq.heappop(self.events)
        if kind == self.READY:
            self._ready(when, payload)
        elif kind == self.FAULT:
            self._fault(when, payload)
        elif kind == self.RETRY:
            self._route(*payload, t=when)
        elif kind == self.HEDGE:
            self._hedge(payload, when)
        elif kind == self.ARRIVE:
            self._arrive(*payload, t=when)
        elif kind == self.FOLLOW:
            self.send[payload] = when
            self._send(payload, when)
        else:
            self._tick(when)

    def _advance(self, rid: int, t: float, one_step: bool = False) -> None:
        sim = self.sims[rid]
        sim.advance(t, one_step=one_step)
        races = self.races
        if sim.first_tokens:
            for j, when in sim.first_tokens:
                when += self._out(j)[0]   # the client's clock
                if races is not None and races.racing(j):
                    races.shown(j, when)
                else:
                    self.first[j if races is None else races.request_of(j)] = when
            sim.first_tokens.clear()
        if sim.ended:
            for j, when in sim.ended:
                self._left(rid, j, when)
                when += self._out(j)[1]
                if races is not None and races.racing(j):
                    races.ended(j, when)
                else:
                    self._answered(j if races is None else races.request_of(j), rid, when)
            sim.ended.clear()

    def _left(self, rid: int, j: int, t: float) -> None:
        """Request (or copy) j leaves replica rid at t: finished, or aborted as a hedge's loser."""
        self.holder.pop(j, None)
        self._unwatch(j)
        self.in_flight[rid] -= 1
        self.router.finished(rid, self._prefix(j if self.races is None else self.races.request_of(j)))
        if rid in self.draining and self.in_flight[rid] == 0:
            self._stop(rid, t)

    def _answered(self, i: int, rid: int, t: float) -> None:
        self.end[i] = t
        self.served_by[i] = rid
        self.lives[rid].served += 1
        if self.hedge is not None:   # the client's running percentile hears of each answered request
            self.hedge.note(self.first[i] - self.send[i])
        self._turn_over(i, t)

    def _prefix(self, i: int) -> tuple[int, ...]:
        return self.demand.prefix[i] if self.demand.prefix is not None else ()

    def _route(self, i: int, attempt: int = 0, *, t: float) -> None:
        """One attempt of request i at t: to a replica whose circuit lets it through, by the policy; an
        attempt a replica fails (an error burst), or that finds every circuit open, is retried or answered
        as the router's resilience rule says (`calculators.plan.resilience`)."""
        if not self.routable:   # no worker at all: it waits at the router (a scale-from-zero activation)
            self.pending.append((i, attempt))
            return
        routable = self.attempts.routable(self.routable, t)
        if not routable:
            self._failed(i, attempt, self.attempts.no_worker(i), t)
            return
        rid = self._choose(i, routable, t)
        status = self.attempts.attempt(i, rid, t)
        if status is None and self._too_long(i):
            status = CONTEXT_TOO_LONG   # the replica's front end refuses it before its engine sees it
        if status is not None:
            self._failed(i, attempt, status, t)
            return
        self._submit(i, i, rid, t)

    def _too_long(self, i: int) -> bool:
        """Request i's prompt and max_tokens exceed the replica's context (vLLM's and the reference server's 400)."""
        limit = self.config.replica.max_model_len
        return limit is not None and int(self.demand.prompt[i]) + int(self.demand.output[i]) > limit

    def _choose(self, i: int, routable: list[int], t: float) -> int:
        """The replica the router's policy picks for request i among `routable`, as each looks at t."""
        if not self.stateless:
            for rid in routable:
                self._advance(rid, t)
        views = [ReplicaView(rid, self.in_flight[rid]) for rid in routable]
        session = int(self.demand.session[i])
        blocks = -(-int(self.demand.prompt[i]) // self.demand.prefix_block_tokens)
        key = None if session < 0 else session
        if self.router.reads_text and self.demand.prefix is not None:
            return self.router.choose(t, key, self._prefix(i), views, blocks, lead=self._lead(i))
        return self.router.choose(t, key, self._prefix(i), views, blocks)

    def _lead(self, i: int) -> str:
        """Request i's own text's first characters, as the trace replay writes them after its blocks
        (contract.prompt_text; one character a token): what a text-reading router tells requests apart by."""
        own = int(self.demand.prompt[i]) - len(self._prefix(i)) * self.demand.prefix_block_tokens
        if own <= 0:
            return ""
        # one character more than the lead: the text's last character may be padded, never an inner one
        return trace_tail_text(self.config.seed, i, min(own, LEAD_CHARS + 1))[:LEAD_CHARS]

    def _submit(self, j: int, i: int, rid: int, t: float) -> None:
        """The router sends request i to replica rid at t, as member j (i itself, or a hedge's copy); its engine
        has it after the front end's `in_s` (now, without a front end)."""
        self.in_flight[rid] += 1
        self.holder[j] = rid
        self._watch(j, i, rid)
        if self.front is not None:
            fe = self.front_at.get(self.in_flight[rid])
            if fe is None:
                fe = self.front_at[self.in_flight[rid]] = self.front.at(float(self.in_flight[rid]))
            k = int(self.front_rng.integers(len(fe.in_s)))
            self.out_delay[j] = (fe.first_out_s[k], fe.last_out_s[k])
            if fe.in_s[k] > 0:
                self._push(t + fe.in_s[k], self.ARRIVE, (j, i, rid))
                return
        self._arrive(j, i, rid, t=t)

    def _arrive(self, j: int, i: int, rid: int, *, t: float) -> None:
        if self.holder.get(j) != rid:
            return   # lost with its replica, or a hedge's loser, before its engine had it
        self._advance(rid, t)
        self.sims[rid].submit(j, prompt_tokens(self.demand, i), int(self.demand.output[i]), t,
                              lora=None if self.lora is None else self.lora[i])

    def _out(self, j: int) -> tuple[float, float]:
        """Member j's (first_out_s, last_out_s): from its engine's token to its client."""
        return self.out_delay.get(j, (0.0, 0.0))

    def _failed(self, i: int, attempt: int, status: int, t: float) -> None:
        retry_at = self.attempts.failed(i, attempt, status, t)
        if retry_at is not None:
            self._push(retry_at, self.RETRY, (i, attempt + 1))
        elif self.gate is not None and self.gate.takes(status):   # the proxy passes it on to the fallback
            self.attempts.passed_on(i)
            self.gate.leave(i, t)
            self.left_by_errors[i] = True
        else:   # the client has its error
            self._turn_over(i, t)

    def _through_gate(self, i: int, t: float) -> bool:
        """Whether request i, arriving at t, goes to this pool (else it leaves for the fallback at once): the
        proxy counts the requests it holds open to the pool, as each replica stands at t."""
        if self.gate.rule.depth is None:   # errors alone: nothing to count at the door
            return True
        for rid in self.routable:
            self._advance(rid, t)
        if self.gate.full(t, self.end, self.lost, self.attempts.errored):
            self.gate.leave(i, t)
            return False
        self.gate.admit(i)
        return True

    def _finish_all(self) -> None:
        """No more sends at their own times: run every replica (and what still waits at the router, and the
        sessions' turns still to follow) to the end."""
        while True:
            self._drain()
            if not (self.pending or self.starting):
                break
            if not self.events:
                if self.autoscaler is None or not self.pending:
                    break   # nothing will ever serve them: they stay unfinished
                last_tick = self.decisions[-1].t_s if self.decisions else 0.0
                # it keeps deciding while requests wait
                self._push(last_tick + self.autoscaler.config.interval_s, self.TICK, None)
            self._settle(self.events[0][0])
            self._next_event()
        self._settle(math.inf)
        for rid in [rid for rid in self.sims if self.in_flight.get(rid)]:
            self._advance(rid, math.inf)
        end = self._last_end()
        for rid in list(self.sims):
            if self.lives[rid].stopped_s is None:
                self.lives[rid].stopped_s = max(end, self.lives[rid].ready_s)
            self._drop(rid)
        for rid in self.starting:
            self.lives[rid].stopped_s = end

    def _last_end(self) -> float:
        ends = self.end[np.isfinite(self.end)]
        return float(ends.max()) if len(ends) else 0.0


def run_fleet(demand: Demand, config: FleetConfig,
              on_progress: Callable[[int, int], None] | None = None) -> FleetRun:
    """Simulate `demand` through the fleet `config` describes (module docstring); `on_progress(routed,
    total)` hears of every twentieth of the requests routed."""
    if config.disaggregated is not None:
        return run_disaggregated(demand, config)
    return _Fleet(demand, config, on_progress).run()

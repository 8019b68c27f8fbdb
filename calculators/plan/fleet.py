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

Replicas are billed from the moment they are asked for (a GPU is held through the cold start) until
they stop. Pure: no I/O; the caller reads traces and writes results.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from contract.model_mix import BASE, ModelMix
from calculators.plan.autoscaler import Autoscaler, AutoscalerConfig
from calculators.plan.demand import Demand
from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.replica import ReplicaSim
from calculators.plan.resilience import ReplicaErrors, RouterAttempts, RouterResilience
from calculators.plan.router import ReplicaView, make_router
from calculators.plan.disaggregated import check_disaggregated, run_disaggregated
from calculators.plan.topology import KvLink, Topology
from calculators.sim.step_model import StepTimeModel
from calculators.sim.workload import SimServer

PREFIX_TOKEN_BASE = 1 << 40   # prefix block tokens live above every request index (unique-prompt tokens)


@dataclass(frozen=True)
class ReplicaSpec:
    """What one replica is: its engine's limits and KV cache, its step-time model, and what it costs."""

    server: SimServer
    step_model: StepTimeModel
    num_kv_blocks: int
    gpus: int = 1                      # GPUs a replica holds (its TP degree)
    hourly_usd_per_gpu: float | None = None
    describe: str = ""


@dataclass(frozen=True)
class Fault:
    """Lose a replica at `t_s`: `replica` (its id) or, when None, the one holding the most requests."""

    t_s: float
    replica: int | None = None


@dataclass(frozen=True)
class FleetConfig:
    replica: ReplicaSpec
    router: str = "round_robin"
    initial_replicas: int = 1
    cold_start_s: float = 60.0
    autoscaler: AutoscalerConfig | None = None   # None: a fixed fleet of initial_replicas
    faults: tuple[Fault, ...] = ()
    retry_lost: bool = False                     # a killed replica's requests are sent again (else they fail)
    seed: int = 0
    router_options: dict = field(default_factory=dict)
    model_mix: ModelMix | None = None            # each request's LoRA adapter (the replica's server.lora prices it)
    disaggregated: Topology | None = None        # fixed prefill and decode pools behind a PD router (`PpDd`)
    kv: KvLink | None = None                     # with `disaggregated`: the prompt's KV from prefill to decode
    pd_hop_s: float = 0.0                        # with `disaggregated`: the router's two exchanges between them
    resilience: RouterResilience = field(default_factory=RouterResilience)   # the router's retries and breakers
    replica_errors: tuple[ReplicaErrors, ...] = ()   # error bursts given to replicas on purpose

    def __post_init__(self) -> None:
        if self.disaggregated is not None:
            check_disaggregated(self)
        if isinstance(self.initial_replicas, bool) or not isinstance(self.initial_replicas, int) \
                or self.initial_replicas < 0:
            raise ValueError(f"initial replicas must be an integer >= 0, got {self.initial_replicas!r}")
        if self.autoscaler is None and self.initial_replicas < 1:
            raise ValueError("a fixed fleet needs at least one replica")
        if self.model_mix is not None and self.replica.server.lora is None:
            raise ValueError("a model mix needs replicas that serve LoRA adapters (their slots and step costs: a "
                             "calibration run that served them)")
        if not (isinstance(self.cold_start_s, (int, float)) and math.isfinite(self.cold_start_s)
                and self.cold_start_s >= 0):
            raise ValueError(f"cold start must be seconds >= 0, got {self.cold_start_s!r}")


class _Fleet:
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
        self.decisions: list[tuple[float, int, int]] = []
        self._seq = 0
        self.attempts = RouterAttempts(n, config.resilience, config.replica_errors or (), config.seed)

    # -- events -----------------------------------------------------------------------------------
    READY, FAULT, TICK, RETRY = 0, 1, 2, 3

    def _push(self, t: float, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self.events, (t, kind, self._seq, payload))

    def _start_replica(self, t: float) -> None:
        life = ReplicaLife(id=len(self.lives), requested_s=t, ready_s=t + self.config.cold_start_s)
        self.lives.append(life)
        self.starting.append(life.id)
        self._push(life.ready_s, self.READY, life.id)

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
            t = float(self.send[i])
            self._events_until(t)
            self._route(i, t=t)
            if self.on_progress is not None and (i + 1) % every == 0:
                self.on_progress(i + 1, len(demand))
        self._events_until(max([horizon, *(fault.t_s for fault in self.config.faults)]))
        while any(event[1] == self.RETRY for event in self.events):   # the router's retries still to come
            self._next_event()
        self._finish_all()
        return FleetRun(self.send, self.first, self.end, demand.output.astype(np.int64), self.served_by,
                        self.retried, self.lives, self.decisions, max(horizon, self._last_end()), self.lost,
                        errored=self.attempts.errored, router=self.attempts.summary())

    def _events_until(self, t: float) -> None:
        while self.events and self.events[0][0] <= t:
            self._next_event()

    def _next_event(self) -> None:
        when, kind, _, payload = heapq.heappop(self.events)
        if kind == self.READY:
            self._ready(when, payload)
        elif kind == self.FAULT:
            self._fault(when, payload)
        elif kind == self.RETRY:
            self._route(*payload, t=when)
        else:
            self._tick(when)

    def _advance(self, rid: int, t: float) -> None:
        sim = self.sims[rid]
        sim.advance(t)
        if sim.first_tokens:
            for i, when in sim.first_tokens:
                self.first[i] = when
            sim.first_tokens.clear()
        if sim.ended:
            life = self.lives[rid]
            for i, when in sim.ended:
                self.end[i] = when
                self.served_by[i] = rid
                self.holder.pop(i, None)
                self.in_flight[rid] -= 1
                life.served += 1
                self.router.finished(rid, self._prefix(i))
            last = sim.ended[-1][1]
            sim.ended.clear()
            if rid in self.draining and self.in_flight[rid] == 0:
                self._stop(rid, last)

    def _prefix(self, i: int) -> tuple[int, ...]:
        return self.demand.prefix[i] if self.demand.prefix is not None else ()

    def _prompt_tokens(self, i: int) -> list[int]:
        """Request i's prompt: its prefix blocks' shared tokens, then tokens of its own (distinct per request)."""
        prompt = int(self.demand.prompt[i])
        prefix = self._prefix(i)
        if not prefix:
            return [i] * prompt
        size = self.demand.prefix_block_tokens
        tokens: list[int] = []
        for block in prefix:
            tokens.extend([PREFIX_TOKEN_BASE + block] * size)
            if len(tokens) >= prompt:
                return tokens[:prompt]
        return tokens + [i] * (prompt - len(tokens))

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
        if not self.stateless:
            for rid in routable:
                self._advance(rid, t)
        views = [ReplicaView(rid, self.in_flight[rid]) for rid in routable]
        session = int(self.demand.session[i])
        blocks = -(-int(self.demand.prompt[i]) // self.demand.prefix_block_tokens)
        rid = self.router.choose(t, None if session < 0 else session, self._prefix(i), views, blocks)
        status = self.attempts.attempt(i, rid, t)
        if status is not None:
            self._failed(i, attempt, status, t)
            return
        self._advance(rid, t)
        self.sims[rid].submit(i, self._prompt_tokens(i), int(self.demand.output[i]), t,
                              lora=None if self.lora is None else self.lora[i])
        self.in_flight[rid] += 1
        self.holder[i] = rid

    def _failed(self, i: int, attempt: int, status: int, t: float) -> None:
        retry_at = self.attempts.failed(i, attempt, status, t)
        if retry_at is not None:
            self._push(retry_at, self.RETRY, (i, attempt + 1))

    def _tick(self, t: float) -> None:
        for rid in list(self.routable):
            self._advance(rid, t)
        metric = self.autoscaler.config.metric
        per_replica = [self._metric(rid, metric) for rid in self.routable]
        current = len(self.routable) + len(self.starting)
        wanted = self.autoscaler.decide(t, current, per_replica, pending=len(self.pending))
        self.decisions.append((t, wanted, len(self.routable)))
        for _ in range(wanted - current):
            self._start_replica(t)
        for _ in range(current - wanted):
            self._remove_one(t)

    def _metric(self, rid: int, metric: str) -> float:
        sim = self.sims[rid]
        if metric == "in_flight":
            return float(self.in_flight[rid])
        if metric == "waiting":
            return float(sim.waiting)
        return sim.kv_usage

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
        lost = self.sims[rid].unfinished()
        self.routable.remove(rid)
        self.router.removed(rid)
        life = self.lives[rid]
        life.killed, life.drain_s, life.stopped_s = True, t, t
        self._drop(rid)
        self.in_flight[rid] = 0
        for i in lost:
            self.holder.pop(i, None)
            self.first[i] = np.nan
        if self.config.retry_lost:
            self.retried[lost] = True
        else:
            self.lost[lost] = True
        if self.autoscaler is None:   # a fixed fleet's Deployment replaces the pod
            self._start_replica(t)
        if self.config.retry_lost:
            for i in lost:   # the client sends it again: the router's first attempt of it
                self._route(i, t=t)

    def _finish_all(self) -> None:
        """No more sends: run every replica (and what still waits at the router) to the end."""
        while self.pending or self.starting:
            if not self.events:
                if self.autoscaler is None or not self.pending:
                    break   # nothing will ever serve them: they stay unfinished
                last_tick = self.decisions[-1][0] if self.decisions else 0.0
                # it keeps deciding while requests wait
                self._push(last_tick + self.autoscaler.config.interval_s, self.TICK, None)
            self._next_event()
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

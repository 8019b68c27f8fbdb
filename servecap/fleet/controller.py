"""The fleet's controller: the plan's autoscaler rule and fault plan, acted out on real replicas.

    clock = FleetClock()
    pool = ReplicaPool(launch, log_dir, clock=clock.now)
    controller = FleetController(pool, router, clock, autoscaler=AutoscalerConfig(...), faults=(Fault(300),),
                                 cold_start_s=20, horizon_s=600)
    controller.start()          # a thread; it waits for `arm(t0)`: the replay's start on the monotonic clock
    ...
    controller.stop()

Every `interval_s` after the replay starts it reads each ready replica's /metrics (`replica_metrics`)
and asks `calculators.plan.autoscaler.Autoscaler` (the rule the plan simulates, stabilisation windows
and rate limits included) for a count. Up: new replicas start and join the router once ready. Down:
a replica still starting goes first (the newest), else the ready one holding the fewest requests;
it leaves the router, then drains (SIGTERM: it finishes what it holds). A fault kills its replica
(SIGKILL; the one named, else the one holding the most) and takes it out of the router; a fixed
fleet then starts a replacement, as a Deployment would, unless its router cannot take one while it runs
(vLLM's router in its PD mode: the worker stays lost). The same choices as the plan's fleet loop
(`calculators.plan.fleet`), so the two can be compared decision by decision.

Every action goes into `events` (t, what, replica, detail) and every decision into `decisions`
(calculators.plan.fleet_run.Decision: t, wanted, ready and the metric read on each ready replica), on the
fleet's clock: seconds since the replay's start.
"""

from __future__ import annotations

import threading
import time

import httpx

from calculators.plan.autoscaler import Autoscaler, AutoscalerConfig
from calculators.plan.fleet import Fault
from calculators.plan.fleet_run import Decision
from servecap.fleet.replica_metrics import replica_load
from servecap.fleet.replicas import Replica, ReplicaPool
from servecap.fleet.router import VllmRouter


class FleetClock:
    """The fleet's seconds: since the replay's start once `rebase`d to it; until then, since it was made (the
    initial replicas start before the replay, so their times end up negative)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def rebase(self, t0_monotonic: float) -> float:
        """Count from `t0_monotonic` on; returns how far the origin moved."""
        shift, self.t0 = t0_monotonic - self.t0, t0_monotonic
        return shift


class FleetController:
    def __init__(self, pool: ReplicaPool, router: VllmRouter, clock: FleetClock, *,
                 autoscaler: AutoscalerConfig | None, faults: tuple[Fault, ...], cold_start_s: float,
                 horizon_s: float, log=None, replica_faults: tuple = (), timed: tuple = (),
                 replace_killed: bool = True) -> None:
        """`timed`: (t_s, what, action) to do at t_s on the fleet's clock besides the faults and the
        autoscaler's ticks (a canary's next weight), each recorded as an event `what`. `replace_killed`
        False: a killed replica stays lost (a router that cannot add one while it runs: the PD mode's)."""
        self.pool, self.router, self.clock = pool, router, clock
        self.autoscaler = None if autoscaler is None else Autoscaler(autoscaler)
        self.interval_s = autoscaler.interval_s if autoscaler else None
        self.metric = autoscaler.metric if autoscaler else "in_flight"
        self.faults = sorted(faults, key=lambda f: f.t_s)
        self.replica_faults = tuple(replica_faults)   # (replica id, contract.faults.Fault), at= on the fleet's clock
        self.timed = tuple(timed)
        self.replace_killed = replace_killed
        self.injected: dict[int, float] = {}          # replica id -> attempts it answered with a set fault, last read
        self.cold_start_s, self.horizon_s = cold_start_s, horizon_s
        self.log = log or (lambda text: None)
        self.events: list[tuple[float, str, str, str]] = []
        self.decisions: list[Decision] = []
        self.http = httpx.Client(timeout=5)
        self._armed = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="fleet-controller", daemon=True)
        self.errors: list[str] = []
        self.prefix: dict[int, tuple[float, float]] = {}   # replica id -> (hit, looked-up) prompt tokens, last read

    # -- the clock: seconds since the replay's start ------------------------------------------------
    def now(self) -> float:
        return self.clock.now()

    def arm(self, t0_monotonic: float) -> None:
        """The replay began at `t0_monotonic`: what happened before it (the initial replicas' starts) moves
        onto the new clock, at negative times. Armed again (the exact start, once known: ReplayClock), what
        was timed on the first clock moves by the correction."""
        shift = self.clock.rebase(t0_monotonic)
        for replica in self.pool.replicas:
            replica.requested_s -= shift
            for name in ("ready_s", "drain_s", "stopped_s"):
                if getattr(replica, name) is not None:
                    setattr(replica, name, getattr(replica, name) - shift)
        self.events = [(round(t - shift, 3), *rest) for t, *rest in self.events]
        self._armed.set()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._armed.set()
        self.thread.join(timeout=30)
        self.http.close()

    def event(self, what: str, replica: Replica | None = None, detail: str = "") -> None:
        self.events.append((round(self.now(), 3), what, replica.name if replica else "", detail))

    # -- replicas ----------------------------------------------------------------------------------
    def start_replica(self, wait: bool = False) -> Replica:
        def joined(replica: Replica) -> None:
            self.router.add(replica.url)
            self.event("ready", replica, replica.url)

        replica = self.pool.start(self.cold_start_s, on_ready=joined, wait=wait)
        self.event("requested", replica)
        return replica

    def _remove_one(self, loads: dict[int, float]) -> None:
        starting = self.pool.starting()
        if starting:
            replica = starting[-1]
        else:
            ready = self.pool.ready()
            if not ready:
                return
            replica = min(reversed(ready), key=lambda r: loads.get(r.id, 0.0))
            self.router.remove(replica.url)
            self._loads([replica], "in_flight")   # its prefix counters, before it goes
        self.pool.drain(replica)
        self.event("drain", replica)

    def _loads(self, replicas: list[Replica], metric: str) -> dict[int, float]:
        loads = {}
        for replica in replicas:
            try:
                load = replica_load(self.http.get(replica.url + "/metrics").text)
            except (httpx.HTTPError, ValueError) as exc:
                self.errors.append(f"{self.now():.1f}s {replica.name}: /metrics: {exc}")
                continue
            loads[replica.id] = load[metric]
            self.prefix[replica.id] = (load["prefix_hits"], load["prefix_queries"])
            self.injected[replica.id] = load["injected_errors"]
        return loads

    def prefix_hit_rate(self) -> float | None:
        """Prompt tokens found in a replica's prefix cache over those looked up, fleet-wide, as last read
        (call `read_all` at the end; a killed replica counts as of its last read)."""
        queried = sum(q for _, q in self.prefix.values())
        return sum(h for h, _ in self.prefix.values()) / queried if queried else None

    def read_all(self) -> None:
        self._loads([r for r in self.pool.replicas if r.url and not r.killed and r.stopped_s is None], "in_flight")

    # -- the loop ----------------------------------------------------------------------------------
    def _run(self) -> None:
        self._armed.wait()
        pending: list[tuple[float, int, object]] = [(f.t_s, 0, f) for f in self.faults]
        pending += [(fault.at_s, 2, (rid, fault)) for rid, fault in self.replica_faults]
        pending += [(t, 3, (what, action)) for t, what, action in self.timed]
        if self.autoscaler is not None:
            k = 1
            while k * self.interval_s <= self.horizon_s:
                pending.append((k * self.interval_s, 1, None))
                k += 1
        pending.sort(key=lambda e: (e[0], e[1]))
        for when, kind, payload in pending:
            while not self._stop.is_set() and self.now() < when:
                self._stop.wait(min(0.2, max(0.0, when - self.now())))
            if self._stop.is_set():
                return
            try:
                if kind == 0:
                    self._fault(payload)
                elif kind == 1:
                    self._tick(when)
                elif kind == 2:
                    self._set_fault(payload)
                else:
                    what, action = payload
                    action()
                    self.event(what)
                    self.log(f"t={self.now():.0f}s: {what}")
            except Exception as exc:   # a failed action is recorded; the run goes on
                self.errors.append(f"{self.now():.1f}s: {type(exc).__name__}: {exc}")

    def _set_fault(self, given: tuple) -> None:
        """A --replica-fault's time has come: the replica is given it (POST /admin/faults, from now)."""
        rid, fault = given
        named = [r for r in self.pool.replicas if r.id == rid and r.url and not r.killed]
        if not named:
            raise ValueError(f"--replica-fault: no replica r{rid} is up at t={self.now():.0f}s")
        answer = self.http.post(named[0].url + "/admin/faults", json=fault.spec(at=False))
        answer.raise_for_status()
        self.event("fault", named[0], fault.spec(at=False))
        self.log(f"t={self.now():.0f}s: {named[0].name} given {fault.spec(at=False)}")

    def _tick(self, when: float) -> None:
        ready = self.pool.ready()
        loads = self._loads(ready, self.metric)
        current = len(ready) + len(self.pool.starting())
        readings = tuple(loads[r.id] for r in ready if r.id in loads)
        wanted = self.autoscaler.decide(when, current, readings, pending=0)
        self.decisions.append(Decision(when, wanted, len(ready), readings))
        if wanted != current:
            self.log(f"t={when:.0f}s: {current} -> {wanted} replicas ({self.metric} "
                     f"{sum(loads.values()):.1f} over {len(ready)} ready)")
        for _ in range(wanted - current):
            self.start_replica()
        in_flight = loads if self.metric == "in_flight" else self._loads(ready, "in_flight")
        for _ in range(current - wanted):
            self._remove_one(in_flight)

    def _fault(self, fault: Fault) -> None:
        ready = self.pool.ready()
        if not ready:
            return
        named = [r for r in ready if r.id == fault.replica]
        if named:
            victim = named[0]
            self._loads([victim], "in_flight")   # its prefix counters, as near its end as can be
        else:
            loads = self._loads(ready, "in_flight")
            victim = max(ready, key=lambda r: (loads.get(r.id, 0.0), -r.id))
        self.router.remove(victim.url)
        self.pool.kill(victim)
        self.event("killed", victim)
        self.log(f"t={self.now():.0f}s: killed {victim.name}")
        if self.autoscaler is None and self.replace_killed:   # a fixed fleet's Deployment replaces the pod
            self.start_replica()
        elif self.autoscaler is None:
            self.event("not replaced", victim, "the router adds no worker while it runs")

"""One fleet run: the router, the replicas, the controller and the replay, in order, and what they left.

    out = run_fleet(FleetSpec(...), console)

1. vLLM's router starts with no workers; the initial replicas start, and join it once ready.
2. The controller's thread starts; it acts once the replay has begun (`ReplayClock`).
3. The runner replays the demand as a trace through the router (one url target, the workload's
   other options kept): Locust sends each request at its time, open loop; the run directory is a
   sweep's (requests.jsonl, run.json, the samplers), and its records name the replica that
   answered (`x-servecap-replica`).
4. The controller stops, the replicas stop, and the fleet's own files are written beside the sweep's:
   fleet_timeline.csv (every action), fleet.json (the replicas' lives, the decisions, and the run
   judged per SLO window as the plan judges its windows, `calculators.plan.outcome`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import numpy as np

from calculators.plan.autoscaler import AutoscalerConfig
from calculators.plan.demand import Demand
from calculators.plan.fleet import Fault
from calculators.plan.fleet_run import ReplicaLife
from calculators.plan.outcome import PlanSlo, outcome
from calculators.plan.resilience import RouterResilience
from calculators.plan.topology import Topology
from contract.hedging import parse_hedge
from contract.records import RECORDS_FILE, read_records
from servecap.fleet.replay_records import measured_sessions, records_as_run, replayed_rows, request_accounting
from servecap.fleet.controller import FleetClock, FleetController
from servecap.fleet.demand_file import write_demand
from servecap.fleet.replica_metrics import replica_load
from servecap.fleet.canary import CanaryFleet, canary_section, start_canary, version_names
from servecap.fleet.fallback import FallbackFleet, fallback_section, start_fallback, tier_names
from servecap.fleet.shadow import ShadowFleet, drain_and_read, shadow_section, start_shadow
from servecap.fleet.replicas import ReplicaPool
from servecap.fleet.second_pool import lives_after
from servecap.fleet.router import VllmRouter
from contract.workload import WorkloadSpec
from servecap.experiment.run_options import RunOptions
from contract.fleet_policies import FLEET_FILE   # fleet.json's name: its owner's, as the fleet CLI reads it
from servecap.experiment.runner import Runner
from servecap.experiment.spec import Experiment
from servecap.experiment.targets import TargetSpec

DEMAND_FILE = "demand.jsonl"
TIMELINE_FILE = "fleet_timeline.csv"


@dataclass(frozen=True)
class FleetSpec:
    """What to run: the demand, the replicas (a launch spec per name), the router, scaling and faults;
    `workload`: the options each replayed request keeps beyond the demand's times and lengths (a model
    mix, a reasoning budget, streaming); `options`: how the runner measures."""

    demand: Demand
    launch: object                      # name -> a launch spec (servecap.launch)
    describe_replica: str
    model: str | None
    router: str
    initial_replicas: int
    cold_start_s: float
    autoscaler: AutoscalerConfig | None
    faults: tuple[Fault, ...]
    slo: PlanSlo
    window_s: float
    out: Path
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    options: RunOptions = field(default_factory=lambda: RunOptions(pin_cpus=False, observe_server=False))
    disaggregated: Topology | None = None   # fixed pools: replicas r0..r{P-1} prefill, the rest decode
    resilience: RouterResilience = field(default_factory=RouterResilience)   # the router's retries and breakers
    replica_faults: tuple = ()              # (replica id, contract.faults.Fault), at= on the fleet's clock
    canary: CanaryFleet | None = None       # a second version's pool behind nginx's weighted split
    shadow: ShadowFleet | None = None       # a shadow pool that nginx mirrors a share of the requests to
    fallback: FallbackFleet | None = None   # a fallback pool, nginx's backup upstream behind the primary's router


REARM_S = 0.005   # an arming this far off the replay's exact start is corrected


class ReplayClock:
    """When the replay began: the fleet's t = 0, on which the controller's decisions and faults are timed.

    Two signals, the first to come arms the controller:
    - a request arriving at a ready replica (its /metrics shows one running or waiting, polled every
      50 ms): the replay began then, less the first request's time in the demand;
    - the first record the load generator writes: its scheduled send time minus its request's time in
      the demand (Locust sends row i at its time). Exact: `t0_unix` keeps it, and the records are
      placed on the fleet's clock by it.
    A replica sets its gauges after a step ends, so the first signal comes a whole step late (a long
    prompt's prefill: a third of a second), and the first record only when its request has finished. So
    when the record comes and the arming was more than REARM_S off it, the controller is armed again on
    the exact time (its clock, events and replicas' times move with it; a fault or decision in the
    seconds before would already have been acted on the first clock): `rearmed_by_s` is that correction,
    `arm_error_s` what is left of the error (0 once re-armed).
    """

    def __init__(self, records: Path, demand: Demand, pool, on_start) -> None:
        self.records, self.demand, self.pool, self.on_start = records, demand, pool, on_start
        self.t0_unix: float | None = None
        self.armed_unix: float | None = None
        self.rearmed_by_s: float | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="replay-clock", daemon=True)
        self.http = httpx.Client(timeout=2)

    @property
    def arm_error_s(self) -> float | None:
        return None if self.t0_unix is None or self.armed_unix is None else self.armed_unix - self.t0_unix

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.http.close()

    def _arm(self, t0_unix: float) -> None:
        self.armed_unix = t0_unix
        self.on_start(time.monotonic() - (time.time() - t0_unix))

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            first = self._first_record()
            if first is not None:
                index = int(str(first["request_id"]).rsplit("#", 1)[1])
                self.t0_unix = float(first["t_sched"]) - float(self.demand.t_s[index])
                if self.armed_unix is not None and abs(self.armed_unix - self.t0_unix) > REARM_S:
                    self.rearmed_by_s = self.armed_unix - self.t0_unix
                    self._arm(self.t0_unix)
                elif self.armed_unix is None:
                    self._arm(self.t0_unix)
                return
            if self.armed_unix is None and self._arrived():
                self._arm(time.time() - float(self.demand.t_s[0]))

    def _arrived(self) -> bool:
        for replica in self.pool.ready():
            try:
                if replica_load(self.http.get(replica.url + "/metrics").text)["in_flight"] > 0:
                    return True
            except (httpx.HTTPError, ValueError):
                continue
        return False

    def _first_record(self) -> dict | None:
        try:
            with self.records.open("rb") as file:
                line = file.readline()
        except OSError:
            return None
        if not line.endswith(b"\n"):
            return None
        record = json.loads(line)
        return record if record.get("t_sched") is not None and record.get("request_id") else None


def run_fleet(plan: FleetSpec, console) -> Path:
    out = plan.out
    out.mkdir(parents=True, exist_ok=True)
    demand_path = write_demand(plan.demand, out / DEMAND_FILE)
    horizon = float(plan.demand.t_s[-1])
    log = lambda text: console.print(f"[dim]fleet: {text}[/dim]")   # noqa: E731
    if plan.disaggregated is not None:
        return _run_disaggregated(plan, console, demand_path, horizon, log)
    with contextlib.ExitStack() as stack:
        router = stack.enter_context(VllmRouter(plan.router, log_path=out / "router.log",
                                                flags=plan.resilience.router_flags()))
        log(f"vllm-router --policy {plan.router} at {router.url}")
        fleet_clock = FleetClock()
        pool = ReplicaPool(plan.launch, out / "replicas", clock=fleet_clock.now)
        canary_pool = shadow_pool = shadow_rows = fallback_pool = None

        def second_pool(spec, prefix: str) -> ReplicaPool:
            """A second pool's replicas (named PREFIX0, ...), closed by the stack."""
            second = ReplicaPool(spec.launch, out / "replicas", clock=fleet_clock.now, prefix=prefix)
            stack.callback(second.close)
            return second

        behind = dict(policy=plan.router, router_flags=plan.resilience.router_flags(), cold_start_s=plan.cold_start_s,
                      out=out, log=log)
        if plan.canary is not None:
            canary_pool = second_pool(plan.canary, "c")
            entry, timed = start_canary(plan.canary, stack, canary_pool, router.url, **behind)
        elif plan.shadow is not None:
            shadow_pool = second_pool(plan.shadow, "s")
            entry, timed = start_shadow(plan.shadow, stack, shadow_pool, router.url, **behind), ()
        elif plan.fallback is not None:
            fallback_pool = second_pool(plan.fallback, "f")
            entry, timed = start_fallback(plan.fallback, stack, fallback_pool, router.url, **behind), ()
        else:
            entry, timed = router.url, ()
        controller = FleetController(pool, router, fleet_clock, autoscaler=plan.autoscaler, faults=plan.faults,
                                     cold_start_s=plan.cold_start_s, horizon_s=horizon, log=log,
                                     replica_faults=plan.replica_faults, timed=timed)
        controller.start()
        stack.callback(pool.close)
        stack.callback(controller.stop)
        first = [controller.start_replica() for _ in range(plan.initial_replicas)]
        for thread in pool.threads:
            thread.join()
        failed = [r.error for r in first if r.error]
        if failed:
            raise ValueError(f"a replica did not start: {failed[0]}")
        log(f"{len(first)} replica(s) ready: {plan.describe_replica}")
        clock = ReplayClock(out / RECORDS_FILE, plan.demand, pool, controller.arm)
        clock.start()
        Runner(_replay(plan, entry, demand_path), console, command="servecap fleet").run()
        clock.stop()
        controller.read_all()
        if shadow_pool is not None:   # its engines' own records, once the copies still running are done
            log("waiting for the shadow's replicas to finish their copies")
            shadow_rows = drain_and_read(shadow_pool)
    if clock.t0_unix is None:
        raise ValueError("no request was recorded: the replay did not run (see locust.log)")
    _write_outputs(plan, controller, pool, clock, horizon, canary_pool,
                   None if shadow_pool is None else (shadow_pool, shadow_rows), fallback_pool)
    return out


def _run_disaggregated(plan: FleetSpec, console, demand_path: Path, horizon: float, log) -> Path:
    """Fixed prefill and decode pools: every worker started and ready, then the router in its PD mode with
    them, then the replay; nothing scales. The controller acts out the faults (`--kill T:ID`): the worker
    leaves the router and is killed, and is not replaced (the PD router adds no worker while it runs)."""
    topology, out = plan.disaggregated, plan.out
    clock = FleetClock()
    pool = ReplicaPool(plan.launch, out / "replicas", clock=clock.now)
    replay = controller = None
    try:
        workers = [pool.start(plan.cold_start_s) for _ in range(topology.workers)]
        for thread in pool.threads:
            thread.join()
        failed = [r.error for r in workers if r.error]
        if failed:
            raise ValueError(f"a worker did not start: {failed[0]}")
        urls = tuple(r.url for r in workers)
        with VllmRouter(plan.router, log_path=out / "router.log", flags=plan.resilience.router_flags(),
                        pd=(urls[:topology.prefill], urls[topology.prefill:])) as router:
            log(f"vllm-router --vllm-pd-disaggregation at {router.url}: {topology.prefill} prefill, "
                f"{topology.decode} decode worker(s), {plan.describe_replica}")
            controller = FleetController(pool, router, clock, autoscaler=None, faults=plan.faults,
                                         cold_start_s=plan.cold_start_s, horizon_s=horizon, log=log,
                                         replace_killed=False)
            controller.start()
            try:
                replay = ReplayClock(out / RECORDS_FILE, plan.demand, pool, controller.arm)
                replay.start()
                Runner(_replay(plan, router.url, demand_path), console, command="servecap fleet").run()
                replay.stop()
                controller.read_all()
            finally:
                controller.stop()
    finally:
        pool.close()
    if replay is None or replay.t0_unix is None:
        raise ValueError("no request was recorded: the replay did not run (see locust.log)")
    _write_outputs(plan, controller, pool, replay, horizon)
    return out


def _replay(plan: FleetSpec, router_url: str, demand_path: Path) -> Experiment:
    """The demand as a trace through the router: one url target, no warm-up (the plan counts every request)."""
    from contract.load import LoadSpec

    # --session's agents are in the demand's chains now (their turns, waits and think time): the replay sends them
    workload = replace(plan.workload, trace=str(demand_path), trace_speedup=1.0, output_tokens=None, session=None,
                       think_time_s=0.0, prompt_tokens=WorkloadSpec().prompt_tokens,
                       trace_block_tokens=plan.demand.prefix_block_tokens or WorkloadSpec().trace_block_tokens)
    # the router's own /metrics would mix the replicas and move its round robin: observe_server off
    return Experiment(out_dir=str(plan.out), targets=(TargetSpec("url", None, url=router_url,
                                                                 served_model=plan.model),),
                      workload=workload, load=LoadSpec(warmup_s=0.0),
                      slo=plan.slo.slo,
                      options=replace(plan.options, observe_server=False))


# -- what the run left: servecap.fleet.replay_records --------------------------------------------
def _lives(pool: ReplicaPool) -> list[ReplicaLife]:
    """Replicas that were up before the replay count from 0, as the plan's initial ones do."""
    lives = []
    for r in pool.replicas:
        if r.ready_s is None:
            continue
        lives.append(ReplicaLife(id=r.id, requested_s=max(r.requested_s, 0.0), ready_s=max(r.ready_s, 0.0),
                                 drain_s=r.drain_s, stopped_s=r.stopped_s, killed=r.killed))
    return lives


def _write_outputs(plan: FleetSpec, controller: FleetController | None, pool: ReplicaPool, replay: ReplayClock,
                   horizon: float, canary_pool: ReplicaPool | None = None,
                   shadow: tuple[ReplicaPool, dict] | None = None, fallback_pool: ReplicaPool | None = None) -> None:
    """`controller` None: fixed pools, nothing decided or acted on. With `canary_pool` (`fallback_pool`),
    every record's replica is `VERSION/NAME` (`TIER/NAME`, nginx's header) and the second pool's replicas
    number after the primary's."""
    out, t0_unix = plan.out, replay.t0_unix
    events = [] if controller is None else controller.events
    decisions = [] if controller is None else controller.decisions
    with (out / TIMELINE_FILE).open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["t_s", "event", "replica", "detail"])
        writer.writerows(events)
        writer.writerows((d.t_s, "decision", "", f"wanted={d.wanted} ready={d.ready} readings={' '.join(f'{v:g}' for v in d.readings)}")
                         for d in decisions)
    records = read_records(out / RECORDS_FILE)
    names, lives = {r.name: r.id for r in pool.replicas}, _lives(pool)
    if canary_pool is not None:
        names, lives = version_names(pool, canary_pool, lives, _lives(canary_pool))
    elif fallback_pool is not None:
        names, lives = tier_names(pool, fallback_pool), lives_after(pool, lives, _lives(fallback_pool))
    hedge = parse_hedge(plan.options.hedge_after)
    run = records_as_run(records, t0_unix, lives, decisions, horizon, names, None if hedge is None else hedge.spec)
    for life in run.lives:
        life.served = int((run.replica == life.id).sum())
    judged = outcome(run, plan.slo, window_s=plan.window_s)
    fleet = {
        "router": plan.router, "replica": plan.describe_replica, "cold_start_s": plan.cold_start_s,
        "initial_replicas": plan.initial_replicas,
        "autoscaler": None if plan.autoscaler is None else plan.autoscaler.__dict__,
        "faults": [{"t_s": f.t_s, "replica": f.replica} for f in plan.faults],
        "replica_faults": [{"replica": rid, "spec": fault.spec()} for rid, fault in plan.replica_faults],
        "router_resilience": plan.resilience.__dict__,
        "injected_errors": {} if controller is None else {f"r{rid}": n for rid, n in sorted(controller.injected.items())},
        "demand": {"source": plan.demand.source, "requests": len(plan.demand), "span_s": float(plan.demand.span_s),
                   "file": DEMAND_FILE},
        "t0_unix": t0_unix, "controller_armed_late_s": replay.arm_error_s,
        "controller_rearmed_by_s": replay.rearmed_by_s,
        "replicas": [{"id": r.id, "name": r.name, "requested_s": r.requested_s, "ready_s": r.ready_s,
                      "drain_s": r.drain_s, "stopped_s": r.stopped_s, "killed": r.killed, "url": r.url,
                      "error": r.error, "served": int((run.replica == r.id).sum())} for r in pool.replicas],
        "disaggregated": None if plan.disaggregated is None else {
            "topology": str(plan.disaggregated), "prefill_workers": plan.disaggregated.prefill,
            "decode_workers": plan.disaggregated.decode},
        "decisions": [d.as_json() for d in decisions],
        "events": [{"t_s": t, "event": e, "replica": n, "detail": d} for t, e, n, d in events],
        "prefix_hit_rate": None if controller is None else controller.prefix_hit_rate(),
        "unattributed": int(sum(1 for r in records if r["status"] == "ok" and not r.get("replica"))),
        "controller_errors": [] if controller is None else controller.errors,
        "accounting": request_accounting(records, len(plan.demand)),
        "hedging": run.hedging,
        "shadow": None if shadow is None else shadow_section(plan.shadow, shadow[1], t0_unix, shadow[0],
                                                             len(pool.replicas), plan.slo, plan.window_s,
                                                             len(plan.demand), horizon),
        "outcome": judged.to_dict(),
        "sessions": measured_sessions(records, t0_unix, horizon) if plan.demand.chained else None,
        "fallback": None if fallback_pool is None else fallback_section(plan.fallback, replayed_rows(records), run,
                                                                        fallback_pool, len(pool.replicas), plan.slo,
                                                                        plan.window_s),
        "canary": None if canary_pool is None else canary_section(plan.canary, replayed_rows(records), run, canary_pool,
                                                                  len(pool.replicas), plan.slo, plan.window_s),
    }
    (out / FLEET_FILE).write_text(json.dumps(fleet, indent=1, default=_plain) + "\n")


def _plain(value):
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return float(value) if hasattr(value, "__float__") else str(value)

"""A plan of fixed prefill and decode pools (`FleetConfig.disaggregated`): what it does not model, refused, and
its run over the demand as a `FleetRun`, which the plan judges per window as any other.

The pools are `calculators.plan.pools.run_pools`: round robin in each, every worker ready and billed
from 0, each request answered by its decode worker (as a real fleet's records name the worker that
answered: a prefill worker answers the router only). A fault kills the worker it names (`--kill T:ID`,
IDs 0..P-1 the prefill workers, P..P+D-1 the decode workers): what depends on it fails (`FleetRun.lost`),
and it is not replaced, as behind vLLM's router, whose PD mode adds no worker while it runs.
"""

from __future__ import annotations

import numpy as np

from calculators.plan.demand import Demand
from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.pools import run_pools


def check_disaggregated(config) -> None:
    """What a disaggregated plan does not model yet is refused, not approximated."""
    topology = config.disaggregated
    if not topology.disaggregated:
        raise ValueError(f"{topology} is not disaggregated: a plan of N replicas is --replicas N")
    if config.kv is None:
        raise ValueError("a disaggregated plan needs its KV link (the prompt's KV bytes a token, the link's bytes/s)")
    refused = [what for what, given in (("an autoscaler", config.autoscaler is not None),
                                        ("--retry-lost", config.retry_lost),
                                        ("a model mix", config.model_mix is not None),
                                        (f"the {config.router} router", config.router != "round_robin"))
               if given]
    if refused:
        raise ValueError(f"a disaggregated plan is fixed pools behind a round-robin PD router: {', '.join(refused)} "
                         "not modelled with it")
    kills(topology, config.faults)


def kills(topology, faults) -> dict[int, float]:
    """worker id -> when it is killed, from `faults` on `topology`'s pools; a fault must name its worker (which
    pool loses one is the question), once."""
    out = {}
    for fault in faults:
        if fault.replica is None or not 0 <= fault.replica < topology.workers:
            raise ValueError(f"--kill {fault.t_s:g}{'' if fault.replica is None else f':{fault.replica}'}: with "
                             f"--topology {topology} name the worker, T:ID, ID 0 to {topology.prefill - 1} a "
                             f"prefill worker, {topology.prefill} to {topology.workers - 1} a decode worker")
        if fault.replica in out:
            raise ValueError(f"--kill: worker {fault.replica} is killed twice (a killed worker is not replaced)")
        out[fault.replica] = fault.t_s
    return out


def check_demand(demand: Demand) -> None:
    """A demand these pools can be planned for: one without shared prefixes (not modelled here yet)."""
    if demand.prefix is not None:
        raise ValueError("a disaggregated plan does not model shared prefixes (sessions, a trace's hash ids) yet: "
                         "give a demand without them")


def run_disaggregated(demand: Demand, config) -> FleetRun:
    """Fixed prefill and decode pools over the demand (`calculators.plan.topology.run_pools`): every worker
    ready and billed from 0; a request is answered by its decode worker."""
    check_demand(demand)
    topology, spec = config.disaggregated, config.replica
    killed = kills(topology, config.faults)
    pools = run_pools(spec.server, spec.step_model, topology, demand.t_s.astype(float), demand.prompt, demand.output,
                      kv=config.kv, hop_s=config.pd_hop_s, seed=config.seed, kills=killed)
    n = len(demand)
    lives = [ReplicaLife(id=k, requested_s=0.0, ready_s=0.0) for k in range(topology.workers)]
    for life in lives:   # answered, as a real fleet's records count it (a prefill worker answers the router only)
        life.served = int((pools.worker == life.id).sum())
        if life.id in killed:
            life.killed, life.drain_s, life.stopped_s = True, killed[life.id], killed[life.id]
    horizon = float(demand.t_s[-1]) if n else 0.0
    last = np.fmax(pools.end, pools.failed_s)
    return FleetRun(demand.t_s.astype(float), pools.first_token, pools.end, demand.output.copy(), pools.worker,
                    np.zeros(n, dtype=bool), lives, [],
                    max(horizon, float(np.nanmax(last)) if n and np.isfinite(last).any() else 0.0),
                    lost=np.isfinite(pools.failed_s))

"""The fleet's canary: a second version's pool behind a router of its own, nginx splitting between the two
routers by the schedule's weights, and each version judged on the requests nginx sent it.

    entry, timed = start_canary(canary, stack, pool, primary_url, router=..., flags=..., out=..., log=log)
    ... the replay sends to `entry`; the controller does `timed` (the later weights) at their times ...
    names, lives = version_names(pool, canary_pool, lives, canary_lives)
    section = canary_section(canary, rows, run, canary_pool, offset, slo, window_s)   # fleet.json `canary`
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calculators.plan.canary import CanarySchedule
from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.outcome import PlanSlo, outcome
from servecap.fleet.replicas import ReplicaPool
from servecap.fleet.second_pool import lives_after, start_second_pool
from servecap.fleet.split_proxy import SplitProxy

VERSIONS = ("primary", "canary")
COST_FIELDS = ("usd", "usd_per_day", "usd_per_million_tokens", "replica_hours", "gpu_hours")   # the pools', not a share's


@dataclass(frozen=True)
class CanaryFleet:
    """The canary's pool: its replicas (launch specs by name, c0, c1, ...), how many, its weights over time."""

    launch: object
    describe: str
    replicas: int
    schedule: CanarySchedule


def start_canary(canary: CanaryFleet, stack: contextlib.ExitStack, pool: ReplicaPool, primary_url: str, *,
                 policy: str, router_flags: list[str], cold_start_s: float, out: Path, log):
    """The canary's router and replicas (all ready), then nginx splitting between the two routers at the
    schedule's first weight: (the URL the replay sends to, the later weights as the controller's timed
    actions). Each is closed by `stack`."""
    router, replicas = start_second_pool("canary", canary.replicas, stack, pool, policy=policy,
                                         router_flags=router_flags, cold_start_s=cold_start_s, out=out)
    steps = canary.schedule.steps
    proxy = stack.enter_context(SplitProxy(primary_url, router.url, weight=steps[0][1], workdir=out / "proxy"))
    log(f"nginx split_clients at {proxy.url}: {canary.schedule.describe()} to {len(replicas)} canary replica(s) "
        f"({canary.describe}) behind vllm-router at {router.url}")
    timed = tuple((t, f"canary weight {w:g}", functools.partial(proxy.set_weight, w)) for t, w in steps[1:])
    return proxy.url, timed


def version_names(pool: ReplicaPool, canary_pool: ReplicaPool, lives: list[ReplicaLife],
                  canary_lives: list[ReplicaLife]) -> tuple[dict[str, int], list[ReplicaLife]]:
    """Every record's replica is `VERSION/NAME` behind nginx: those names to replica ids (the canary's
    numbered after the primary's), and both pools' lives so numbered."""
    offset = len(pool.replicas)
    names = {**{f"primary/{r.name}": r.id for r in pool.replicas},
             **{f"canary/{r.name}": offset + r.id for r in canary_pool.replicas}}
    return names, lives_after(pool, lives, canary_lives)


def canary_section(canary: CanaryFleet, rows: list[dict], run: FleetRun, canary_pool: ReplicaPool, offset: int,
                   slo: PlanSlo, window_s: float) -> dict:
    """fleet.json's `canary`: each version judged on the requests nginx sent it (`rows`, the run's records in
    its order: the version before the `/` in each one's replica; a record without one, which no proxy
    answered, is counted as unattributed)."""
    versions = np.array([str(r.get("replica") or "").partition("/")[0] for r in rows])
    section = {"schedule": [{"t_s": t, "weight": w} for t, w in canary.schedule.steps],
               "describe": canary.schedule.describe(), "replica": canary.describe,
               "replicas": [{"id": offset + r.id, "name": r.name, "ready_s": r.ready_s, "url": r.url,
                             "served": int((run.replica == offset + r.id).sum())} for r in canary_pool.replicas],
               "unattributed": int(np.isin(versions, VERSIONS, invert=True).sum())}
    for version in VERSIONS:
        idx = np.flatnonzero(versions == version)
        part = outcome(run.take(idx), slo, window_s=window_s).to_dict()
        section[version] = {k: v for k, v in part.items() if k not in COST_FIELDS}
        section[version]["share"] = len(idx) / max(1, len(versions))
    return section

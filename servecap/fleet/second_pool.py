"""A second pool (a canary's, a shadow's) as the fleet starts it: a vllm-router of its own, then its replicas,
each added to that router once ready, all ready before nginx is put in front (servecap.fleet.canary,
servecap.fleet.shadow)."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from calculators.plan.fleet_run import ReplicaLife

from servecap.fleet.replicas import ReplicaPool
from servecap.fleet.router import VllmRouter


def start_second_pool(kind: str, replicas: int, stack: contextlib.ExitStack, pool: ReplicaPool, *, policy: str,
                      router_flags: list[str], cold_start_s: float, out: Path) -> tuple[VllmRouter, list]:
    """(`kind`'s router, its `replicas` started and ready); the router is closed by `stack`. ValueError naming
    the first replica that did not start."""
    router = stack.enter_context(VllmRouter(policy, log_path=out / f"{kind}_router.log", flags=router_flags))
    started = [pool.start(cold_start_s, on_ready=lambda r: router.add(r.url)) for _ in range(replicas)]
    for thread in pool.threads:
        thread.join()
    failed = [r.error for r in started if r.error]
    if failed:
        raise ValueError(f"a {kind} replica did not start: {failed[0]}")
    return router, started


def lives_after(pool: ReplicaPool, lives: list[ReplicaLife], second_lives: list[ReplicaLife]) -> list[ReplicaLife]:
    """The primary's lives, then the second pool's numbered after the primary's replicas (its records' ids)."""
    offset = len(pool.replicas)
    return lives + [replace(life, id=offset + life.id) for life in second_lives]

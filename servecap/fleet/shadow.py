"""The fleet's shadow: a second pool behind a router of its own, nginx mirroring a share of the requests to it
(servecap.fleet.mirror_proxy), and the shadow judged on what its engines did with the copies.

    entry = start_shadow(shadow, stack, pool, production_url, policy=..., router_flags=..., out=..., log=log)
    ... the replay sends to `entry`; production answers every request ...
    rows = drain_and_read(pool)                                   # each shadow engine's finished requests
    section = shadow_section(shadow, rows, t0_unix, pool, offset, slo, window_s, sent)   # fleet.json `shadow`

No client reads the shadow's answers, so its latency is its engines' own record of each copy
(contract.engine_record: the engine took it, made its first token, finished it), on the fleet's clock:
TTFT from the engine's arrival, as the plan's shadow counts it (calculators.plan.shadow: the copy sent
at its request's send time, on the engine's clock). A copy nginx could not deliver, or one still running
when the shadow is read, is not in them: `mirrored` says how many the engines finished, beside the
production requests sent.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.outcome import PlanSlo, outcome
from contract.engine_record import MAX_ROWS_PER_POLL, REQUESTS_ROUTE
from servecap.fleet.canary import COST_FIELDS
from servecap.fleet.mirror_proxy import MirrorProxy
from servecap.fleet.replica_metrics import replica_load
from servecap.fleet.replicas import ReplicaPool
from servecap.fleet.second_pool import start_second_pool

DRAIN_TIMEOUT_S = 300.0   # the shadow may lag production: how long to wait for its engines to empty
BEFORE_S = 1.0            # a copy's engine arrival is after the replay's first send, less this much clock slack


@dataclass(frozen=True)
class ShadowFleet:
    """The shadow's pool: its replicas (launch specs by name, s0, s1, ...), how many, the share mirrored."""

    launch: object
    describe: str
    replicas: int
    fraction: float


def start_shadow(shadow: ShadowFleet, stack: contextlib.ExitStack, pool: ReplicaPool, production_url: str, *,
                 policy: str, router_flags: list[str], cold_start_s: float, out: Path, log) -> str:
    """The shadow's router and replicas (all ready), then nginx in front of production's router mirroring
    `fraction` of the requests to the shadow's: the URL the replay sends to. Each is closed by `stack`."""
    router, replicas = start_second_pool("shadow", shadow.replicas, stack, pool, policy=policy,
                                         router_flags=router_flags, cold_start_s=cold_start_s, out=out)
    proxy = stack.enter_context(MirrorProxy(production_url, router.url, fraction=shadow.fraction,
                                            workdir=out / "proxy"))
    log(f"nginx mirror at {proxy.url}: {shadow.fraction:.0%} of requests copied to {len(replicas)} shadow replica(s) "
        f"({shadow.describe}) behind vllm-router at {router.url}")
    return proxy.url


def drain_and_read(pool: ReplicaPool, timeout_s: float = DRAIN_TIMEOUT_S) -> dict[int, list[dict]]:
    """Wait until every shadow replica holds no request (or `timeout_s`), then each one's finished requests
    (replica id -> its engine's request records, oldest first)."""
    live = [r for r in pool.replicas if r.url and not r.killed]
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=5) as http:
        while time.monotonic() < deadline:
            loads = [replica_load(http.get(r.url + "/metrics").text)["in_flight"] for r in live]
            if not any(loads):
                break
            time.sleep(0.5)
        return {r.id: _engine_requests(http, r.url) for r in live}


def _engine_requests(http: httpx.Client, url: str) -> list[dict]:
    rows, after = [], 0
    while True:
        page = http.get(url + REQUESTS_ROUTE, params={"after": after, "limit": MAX_ROWS_PER_POLL}).json()
        rows += [dict(zip(page["columns"], row)) for row in page["rows"]]
        if not page["rows"]:
            return rows
        after = page["next"]


def engine_run(rows: dict[int, list[dict]], t0_unix: float, lives: list[ReplicaLife], horizon_s: float) -> FleetRun:
    """The shadow's copies as a run on the fleet's clock, from its engines' records, in arrival order; a
    record from before the replay began (a server's own warm-up at its start) is not a copy."""
    flat = sorted(((rid, row) for rid, part in rows.items() for row in part if row["t_arrival"] >= t0_unix - BEFORE_S),
                  key=lambda x: x[1]["t_arrival"])
    send = np.array([row["t_arrival"] - t0_unix for _, row in flat], dtype=float)
    first = np.array([row["t_first_token"] - t0_unix for _, row in flat], dtype=float)
    end = np.array([row["t_finish"] - t0_unix for _, row in flat], dtype=float)
    return FleetRun(send, first, end, np.array([row["output_tokens"] for _, row in flat], dtype=np.int64),
                    np.array([rid for rid, _ in flat], dtype=np.int64), np.zeros(len(flat), dtype=bool), lives, [],
                    max(horizon_s, float(end.max()) if len(end) else horizon_s), lost=np.zeros(len(flat), dtype=bool))


def shadow_section(shadow: ShadowFleet, rows: dict[int, list[dict]], t0_unix: float, pool: ReplicaPool, offset: int,
                   slo: PlanSlo, window_s: float, sent: int, horizon_s: float) -> dict:
    """fleet.json's `shadow`: the copies its engines finished (against the production requests sent), their
    latency per window and over the run from the engines' records, and each shadow replica's share."""
    lives = [ReplicaLife(id=offset + r.id, requested_s=max(r.requested_s, 0.0), ready_s=max(r.ready_s or 0.0, 0.0),
                         stopped_s=r.stopped_s) for r in pool.replicas]
    run = engine_run({offset + rid: part for rid, part in rows.items()}, t0_unix, lives, horizon_s)
    judged = {k: v for k, v in outcome(run, slo, window_s=window_s).to_dict().items() if k not in COST_FIELDS}
    return {"fraction": shadow.fraction, "replica": shadow.describe, "production_requests": sent,
            "mirrored": len(run.send_s), "mirrored_share": len(run.send_s) / sent if sent else None,
            "latency_from": "the shadow engines' own request records (arrival, first token, finish)",
            "replicas": [{"id": offset + r.id, "name": r.name, "url": r.url,
                          "finished": int((run.replica == offset + r.id).sum())} for r in pool.replicas], **judged}

"""The fleet's fallback tier: a second pool behind a router of its own, and nginx in front of both routers
with the primary's as its upstream and the fallback's as that upstream's `backup`, each answer counted by
the tier that gave it.

    entry = start_fallback(fallback, stack, pool, primary_url, policy=..., router_flags=..., out=..., log=log)
    ... the replay sends to `entry` ...
    section = fallback_section(fallback, rows, run, fallback_pool, offset, slo, window_s)   # fleet.json `fallback`

The config is the rule calculators.plan.fallback models: the primary's server with `max_conns=N` (depth:N;
nginx runs one worker, so the count is the whole proxy's), `max_fails=0` on both servers (a failure never
marks the primary down for later requests), and with `errors` `proxy_next_upstream error timeout http_429
http_500 http_502 http_503 http_504 non_idempotent` (else `off`). The request body is buffered so that
nginx can send it again. Every answer names its tier before the replica in `X-Servecap-Replica`:
`primary/r0`, `fallback/f0`, or `fallback_after_error/f0` when nginx tried the primary first.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calculators.plan.fallback import FALLBACK_STATUSES, TIERS, FallbackRule
from calculators.plan.fleet_run import FleetRun
from calculators.plan.outcome import PlanSlo, outcome
from servecap.fleet.canary import COST_FIELDS
from servecap.fleet.replicas import ReplicaPool
from servecap.fleet.second_pool import start_second_pool
from servecap.fleet.split_proxy import STREAMING, NginxProxy, nginx_config

AFTER_ERROR = "fallback_after_error"   # the tier name of a fallback answer nginx got after the primary's error
PREFIXES = ("primary", "fallback", AFTER_ERROR)


@dataclass(frozen=True)
class FallbackFleet:
    """The fallback's pool: its replicas (launch specs by name, f0, f1, ...), how many, when it is taken."""

    launch: object
    describe: str
    replicas: int
    rule: FallbackRule


def _host_port(url: str) -> str:
    return url.split("://", 1)[1].rstrip("/")


def config_text(port: int, primary_url: str, fallback_url: str, rule: FallbackRule, workdir: Path) -> str:
    primary, fallback = _host_port(primary_url), _host_port(fallback_url)
    limit = f" max_conns={rule.depth}" if rule.depth is not None else ""
    next_upstream = ("error timeout " + " ".join(f"http_{s}" for s in FALLBACK_STATUSES) + " non_idempotent"
                     if rule.on_errors else "off")
    http_body = f"""    upstream servecap_tiers {{
        server {primary}{limit} max_fails=0;
        server {fallback} backup max_fails=0;
        keepalive 64;
    }}
    map $upstream_addr $servecap_tier {{
        "~, {fallback.replace('.', '[.]')}$" {AFTER_ERROR};
        "~^{fallback.replace('.', '[.]')}$" fallback;
        default primary;
    }}"""
    server_body = f"""        location / {{
            proxy_pass http://servecap_tiers;
{STREAMING}
            proxy_next_upstream {next_upstream};
            proxy_next_upstream_tries 2;
            proxy_hide_header X-Servecap-Replica;
            add_header X-Servecap-Replica "$servecap_tier/$upstream_http_x_servecap_replica" always;
        }}"""
    return nginx_config(port, workdir, http_body, server_body)


def start_fallback(fallback: FallbackFleet, stack: contextlib.ExitStack, pool: ReplicaPool, primary_url: str, *,
                   policy: str, router_flags: list[str], cold_start_s: float, out: Path, log) -> str:
    """The fallback's router and replicas (all ready), then nginx in front of both routers: the URL the replay
    sends to. Each is closed by `stack`."""
    router, replicas = start_second_pool("fallback", fallback.replicas, stack, pool, policy=policy,
                                         router_flags=router_flags, cold_start_s=cold_start_s, out=out)
    proxy = stack.enter_context(NginxProxy(
        lambda port, where: config_text(port, primary_url, router.url, fallback.rule, where),
        workdir=out / "proxy", needs="a fallback tier"))
    log(f"nginx at {proxy.url}: the fallback's {len(replicas)} replica(s) ({fallback.describe}) behind vllm-router "
        f"at {router.url} take a request when {fallback.rule.describe()}")
    return proxy.url


def tier_names(pool: ReplicaPool, fallback_pool: ReplicaPool) -> dict[str, int]:
    """Every record's replica is `TIER/NAME` behind nginx: those names to replica ids (the fallback's numbered
    after the primary's)."""
    offset = len(pool.replicas)
    return {**{f"primary/{r.name}": r.id for r in pool.replicas},
            **{f"{tier}/{r.name}": offset + r.id for r in fallback_pool.replicas for tier in PREFIXES[1:]}}


def fallback_section(fallback: FallbackFleet, rows: list[dict], run: FleetRun, fallback_pool: ReplicaPool,
                     offset: int, slo: PlanSlo, window_s: float) -> dict:
    """fleet.json's `fallback`: each tier judged on the requests it answered (`rows`, the run's records in its
    order: the tier before the `/` in each one's replica; a record without one, which no proxy answered, is
    counted as unattributed)."""
    prefixes = np.array([str(r.get("replica") or "").partition("/")[0] for r in rows])
    tiers = np.where(prefixes == AFTER_ERROR, "fallback", prefixes)
    section = {"rule": fallback.rule.spec(), "describe": fallback.rule.describe(), "replica": fallback.describe,
               "replicas": [{"id": offset + r.id, "name": r.name, "ready_s": r.ready_s, "url": r.url,
                             "served": int((run.replica == offset + r.id).sum())} for r in fallback_pool.replicas],
               "left_errors": int((prefixes == AFTER_ERROR).sum()),
               "left_full": int((prefixes == "fallback").sum()),
               "unattributed": int(np.isin(tiers, TIERS, invert=True).sum()), "tiers": {}}
    for tier in TIERS:
        idx = np.flatnonzero(tiers == tier)
        part = outcome(run.take(idx), slo, window_s=window_s).to_dict()
        section["tiers"][tier] = {k: v for k, v in part.items() if k not in COST_FIELDS}
        section["tiers"][tier]["share"] = len(idx) / max(1, len(tiers))
    return section

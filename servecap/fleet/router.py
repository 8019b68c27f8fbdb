"""vLLM's router (`vllm-router`, Rust) in front of the fleet, and how the fleet tells it of replicas.

    with VllmRouter("cache_aware", log_path=out / "router.log") as router:
        router.add("http://127.0.0.1:41234")      # a replica that is ready
        router.remove("http://127.0.0.1:41234")   # scaled down or lost: no new requests go to it

The router starts with no workers and learns of each replica through its worker API (`POST
/add_worker?url=`, `POST /remove_worker?url=`): the calls its Kubernetes service discovery makes when
a pod of the selected Service becomes ready or goes away, so a replica joins when it is ready and
leaves when it is scaled down or dies, as a Service's endpoints would. The router's own health
checks, retries and circuit breaker stay on, with their defaults; its Prometheus listener gets a
free port (its default, 29000, would clash between two routers).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess, free_port

ROUTER = Path(sys.executable).with_name("vllm-router")   # the dev extra installs it beside python
POLICIES = ("round_robin", "random", "power_of_two", "consistent_hash", "cache_aware", "sticky_least_loaded")
METRICS_PORT = "{metrics_port}"


@dataclass(frozen=True)
class RouterSpec(CommandSpec):
    """The router's argv; `{metrics_port}` gets a free port of its own at each start attempt."""

    def command(self, port: int) -> list[str]:
        return [arg.replace(METRICS_PORT, str(free_port())) for arg in super().command(port)]


def router_argv(policy: str, worker_urls: tuple[str, ...] = (), *, request_timeout_s: float = 600.0,
                log_level: str = "warning", flags: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    if not ROUTER.exists():
        raise ValueError(f"{ROUTER} is missing: install the dev extra (pip install -c constraints.txt -e '.[dev]')")
    argv = [str(ROUTER), "--host", "127.0.0.1", "--port", "{port}", "--policy", policy,
            "--prometheus-port", METRICS_PORT, "--request-timeout-secs", str(int(request_timeout_s)),
            "--log-level", log_level]
    if worker_urls:
        argv += ["--worker-urls", *worker_urls]
    return tuple(argv) + tuple(flags)


def pd_router_argv(prefill_urls: tuple[str, ...], decode_urls: tuple[str, ...], policy: str = "round_robin", *,
                   request_timeout_s: float = 600.0, log_level: str = "warning",
                   flags: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The router in its disaggregated mode (`--vllm-pd-disaggregation`): each request's prefill on one of
    `prefill_urls` (a one-token copy), then its decode on one of `decode_urls`; `policy` in both pools."""
    if not prefill_urls or not decode_urls:
        raise ValueError("a PD router needs at least one prefill and one decode worker")
    if policy not in POLICIES:
        raise ValueError(f"router policy {policy!r}: vllm-router's are {', '.join(POLICIES)}")
    argv = [*router_argv(policy, request_timeout_s=request_timeout_s, log_level=log_level, flags=flags),
            "--vllm-pd-disaggregation"]
    for url in prefill_urls:
        argv += ["--prefill", url]
    for url in decode_urls:
        argv += ["--decode", url]
    return tuple(argv)


class VllmRouter:
    """A running router with no workers until `add`; a context manager (stops it on exit). With `pd`
    (prefill URLs, decode URLs) the router runs in its disaggregated mode with those workers from the start:
    that mode removes a worker while it runs but adds none (`add` says so)."""

    def __init__(self, policy: str, *, log_path: Path | None = None, startup_timeout_s: float = 60.0,
                 flags: tuple[str, ...] | list[str] = (),
                 pd: tuple[tuple[str, ...], tuple[str, ...]] | None = None) -> None:
        """`flags`: more of vllm-router's own (its retries and circuit breakers: RouterResilience.router_flags)."""
        if policy not in POLICIES:
            raise ValueError(f"router policy {policy!r}: vllm-router's are {', '.join(POLICIES)}")
        self.policy, self.pd = policy, pd
        argv = router_argv(policy, flags=flags) if pd is None else pd_router_argv(*pd, policy, flags=flags)
        self.process = ServerProcess(RouterSpec(argv, ready_path="/health"), log_path=log_path,
                                     startup_timeout_s=startup_timeout_s)
        self.http = httpx.Client(timeout=120)

    @property
    def url(self) -> str:
        return self.process.base_url

    def __enter__(self) -> VllmRouter:
        self.process.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()
        self.process.__exit__(*exc)

    def add(self, worker_url: str) -> None:
        """The router checks the worker's health, then routes to it (it answers once it does)."""
        if self.pd is not None:
            raise RuntimeError(f"vllm-router's PD mode adds no worker while it runs ({worker_url}): its /add_worker "
                               "answers 400 'PD router requires specific add_prefill_server or add_decode_server "
                               "methods', which its HTTP API does not offer")
        answer = self.http.post(self.url + "/add_worker", params={"url": worker_url})
        if answer.status_code >= 300:
            raise RuntimeError(f"vllm-router would not add {worker_url}: HTTP {answer.status_code} {answer.text[:200]}")

    def remove(self, worker_url: str) -> None:
        self.http.post(self.url + "/remove_worker", params={"url": worker_url})

    def workers(self) -> list[str]:
        return list(self.http.get(self.url + "/list_workers").json().get("urls", []))

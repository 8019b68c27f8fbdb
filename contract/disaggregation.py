"""The options of disaggregated prefill and decode, declared once for every command that takes them: a worker's
KV link (`servecap serve --emulate --role decode`; the simulator, the plan and the fleet that size or run such
workers), the hop a simulation adds between the pools, and which topology is meant."""

from __future__ import annotations

from typing import Any


def add_kv_link_arguments(group: Any) -> None:
    """--kv-transfer-gbs and --kv-transfer-latency-us (default None: the GPU's interconnect; no fixed time)."""
    group.add_argument("--kv-transfer-gbs", type=float, default=None, metavar="GB/S",
                       help="the link a decode worker receives KV over (default: the GPU's interconnect)")
    group.add_argument("--kv-transfer-latency-us", type=float, default=None, metavar="US",
                       help="a fixed time added to every KV transfer (default 0)")


def add_pd_hop_argument(group: Any) -> None:
    group.add_argument("--pd-hop-ms", type=float, default=0.0, metavar="MS",
                       help="what the router and its two exchanges add between a prefill worker's answer and the "
                            "decode worker's queue (default 0: a GPU what-if leaves front ends out)")


def add_topology_argument(group: Any, help: str, metavar: str = "PpDd") -> None:
    """--topology: `agg:N` (N aggregated replicas) or `PpDd` (P prefill and D decode workers); `help` says which
    the command takes (calc simulate: a list of either; plan and fleet: one PpDd)."""
    group.add_argument("--topology", default=None, metavar=metavar, help=help)

"""The flags `servecap plan` and `servecap fleet` share: the demand, the autoscaler and faults, the SLO."""

from __future__ import annotations

import argparse

from calculators.plan.autoscaler import AUTOSCALE_METRICS


def add_demand_flags(p: argparse.ArgumentParser) -> None:
    demand = p.add_argument_group("demand (choose one)")
    demand.add_argument("--trace", help="Azure CSV, Mooncake JSONL or BurstGPT CSV (as `servecap sweep --trace`)")
    demand.add_argument("--rate-curve", metavar="CSV", help="rows of t_s,rate_rps (a header line is allowed)")
    demand.add_argument("--diurnal", metavar="PEAK:TROUGH", help="a synthetic day: peak and trough requests/s")
    demand.add_argument("--speedup", type=float, default=1.0, help="divide the demand's times by this")
    demand.add_argument("--duration", type=float, help="seconds to plan, after --speedup (default: all of the "
                                                       "trace or curve; the synthetic day: --period)")
    demand.add_argument("--prompt-tokens", default="512", help="rate curve / diurnal: N | uniform:LO:HI | ...")
    demand.add_argument("--output-tokens", default="128", help="same forms as --prompt-tokens")
    demand.add_argument("--sessions", type=int, default=0, help="rate curve / diurnal: users whose requests "
                                                                "share a prefix (multi-turn); 0: none")
    demand.add_argument("--session-prefix-tokens", type=int, default=0, help="tokens of each user's shared prefix")
    demand.add_argument("--period", type=float, default=86400.0, help="diurnal: seconds per day")
    demand.add_argument("--bursts-per-day", type=float, default=4.0)
    demand.add_argument("--burst-multiplier", type=float, default=2.0)
    demand.add_argument("--burst-duration", type=float, default=600.0, help="seconds per burst")


def add_scaling_flags(p: argparse.ArgumentParser, router_help: str) -> None:
    fleet = p.add_argument_group("router and autoscaler")
    fleet.add_argument("--router", default="round_robin", help=router_help)
    fleet.add_argument("--replicas", type=int, help="a fixed fleet of N (or the autoscaler's starting count)")
    fleet.add_argument("--min-replicas", type=int, help="autoscale between --min-replicas and --max-replicas")
    fleet.add_argument("--max-replicas", type=int)
    fleet.add_argument("--metric", default="in_flight", help=f"autoscaler metric: {', '.join(AUTOSCALE_METRICS)}")
    fleet.add_argument("--target", type=float, help="the metric's target per replica")
    fleet.add_argument("--interval-s", type=float, default=15.0, help="seconds between autoscaler decisions")
    fleet.add_argument("--up-window-s", type=float, default=0.0, help="scale-up stabilisation window")
    fleet.add_argument("--down-window-s", type=float, default=300.0, help="scale-down stabilisation window")
    fleet.add_argument("--kill", action="append", default=[], metavar="T[:ID]",
                       help="lose a replica at T seconds (ID, else the busiest); repeatable")


def add_slo_flags(p: argparse.ArgumentParser) -> None:
    slo = p.add_argument_group("SLO (p99, milliseconds) and windows")
    slo.add_argument("--slo-ttft-ms", type=float)
    slo.add_argument("--slo-tpot-ms", type=float)
    slo.add_argument("--slo-e2e-ms", type=float)
    slo.add_argument("--attainment", type=float, default=0.99, help="share of windows that must meet the SLO")
    slo.add_argument("--window-s", type=float, default=300.0, help="SLO window (default 5 minutes)")

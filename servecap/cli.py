"""`servecap` command: one front door, each subcommand owned by its package.

Subcommands are imported lazily so that `servecap calc ...` never imports torch and
`servecap sweep` never imports gevent.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> (module with `main(argv) -> int`, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "sample": ("loadgen.observe.sample_cli", "sample GPU (NVML) or host and scrape /metrics into a run directory"),
    "serve": ("reference_server.cli", "run the reference serving process"),
    "bench": ("reference_server.engine_bench.run", "benchmark the engine in-process, per batching strategy"),
    "calc": ("calculators.cli.commands", "capacity calculators: kv, weights, fit, roofline, queue, fleet, cost, simulate"),
    "demo": ("servecap.demo", "start the reference server, send real requests, print what happened"),
    "gate": ("reports.gate.cli", "compare two runs and fail on a significant regression (CI gate)"),
    "sweep": ("servecap.sweep.cli", "drive a server through load levels with Locust and samplers, then report"),
    "report": ("reports.cli", "turn a run directory into summary.json, report.html/.md and figures"),
    "compare": ("servecap.compare.cli", "A/B: two servers under load interleaved in slices, a paired verdict (CI gate)"),
    "predict": ("reports.predict.cli", "predicted latency curves and max load under an SLO from a run's calibration"),
    "plan": ("servecap.plan.cli", "a fleet over a day of traffic, simulated: replicas, SLO attainment, cost, N+1"),
    "tune": ("servecap.tune.cli", "the batching configuration with the most throughput under a p99 SLO (guided search)"),
    "quality": ("servecap.quality.cli", "a configuration's outputs against a reference's: agreement, KL, perplexity"),
    "fleet": ("servecap.fleet.cli", "the plan run for real: emulated replicas behind vLLM's router, autoscaled, faults"),
}


def _usage() -> str:
    lines = ["usage: servecap <command> [options]", "", "commands:"]
    width = max(len(name) for name in SUBCOMMANDS)
    for name, (_, help_text) in SUBCOMMANDS.items():
        lines.append(f"  {name.ljust(width)}  {help_text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"servecap: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())

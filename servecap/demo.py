"""`make demo`: sweep the four batching strategies on the reference server's `tiny` preset, then report.

Runs in about 3.5 minutes on a 2-core CPU (12 levels of 3 s warm-up + 10 s measured) and prints
the report's path. What it shows:
how much throughput and latency each batching strategy buys at 1, 8 and 16
concurrent streams, with the same seeded workload for every strategy.
"""

from __future__ import annotations

import time

from servecap.sweep import cli as sweep_cli

DEMO_ARGS = [
    "--model", "tiny", "--strategies", "none,static,dynamic,continuous",
    "--concurrency", "1,8,16", "--warmup", "3s", "--duration", "10s",
    "--prompt-tokens", "uniform:32:128", "--output-tokens", "uniform:16:64",
    "--slo-ttft-ms", "500", "--slo-tpot-ms", "50",
]


def main(argv: list[str]) -> int:
    out = argv[0] if argv else f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}"
    return sweep_cli.main(["--out", out, *DEMO_ARGS])

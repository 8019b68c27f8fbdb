"""``servecap calc simulate --topology agg:2,1p1d --crossover 200,2000,8000/200,2000``: when disaggregation pays.

For every prompt and output length, each topology's most sustained rate at the SLO is searched
(`calculators.plan.crossover`), each level simulated as ``--topology`` simulates it (the same window,
arrivals, KV link and hop) and judged by `contract.slo.judge`. The answer per cell: each topology's
req/s a GPU, the winner, its gain over the runner-up and the gain's range, and whether the search
settles it; then which topology wins where.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

from calculators.cli.output import print_json, print_rows
from contract.distributions import LengthDistribution
from contract.slo import SLO


def check_crossover_flags(args):
    """--crossover's own refusals, before anything is simulated; its load (no levels: the search sets them)."""
    from contract.load import LoadSpec

    load = LoadSpec.from_args(args)
    if not args.topology:
        raise ValueError("--crossover compares deployments: give --topology, e.g. agg:2,1p1d")
    if load.kind is not None:
        raise ValueError("--crossover searches each topology's most sustained rate itself: leave out --rates and "
                         "--concurrency")
    if not 0 < args.crossover_precision < 1:
        raise ValueError(f"--crossover-precision must be between 0 and 1, got {args.crossover_precision}")
    from calculators.plan.crossover import parse_cells

    parse_cells(args.crossover)
    return load


def crossover_command(args, server, workload, model, kv, slo: SLO) -> None:
    from calculators.plan.crossover import crossover, parse_cells
    from calculators.plan.topology import Topology, judge_window, requests_for_rate, simulate_topology

    if not slo.is_set:
        raise ValueError("--crossover judges each level by the SLO: give --slo-ttft-ms, --slo-tpot-ms or --slo-e2e-ms")
    topologies = [Topology.parse(text) for text in args.topology.split(",") if text.strip()]
    if not topologies:
        raise ValueError("--topology: name at least one, e.g. agg:2,1p1d")
    by_name = {str(t): t for t in topologies}
    hop_s = args.pd_hop_ms / 1e3

    def meets(name: str, prompt: int, output: int, rate: float) -> bool:
        level = replace(workload, prompt_tokens=LengthDistribution.fixed(prompt),
                        output_tokens=LengthDistribution.fixed(output), rate_rps=rate, concurrency=None,
                        requests=requests_for_rate(rate, workload, args.requests))
        _, trace = simulate_topology(server, level, model, by_name[name], kv=kv, hop_s=hop_s)
        return bool(judge_window(slo, trace, level)[0])

    def progress(cell) -> None:
        print(f"crossover: {cell.prompt_tokens}/{cell.output_tokens} tokens judged", file=sys.stderr, flush=True)

    cells = crossover(meets, [(str(t), t.workers * args.tp) for t in topologies], parse_cells(args.crossover),
                      precision=args.crossover_precision, on_cell=progress)
    if args.json:
        return print_json({"strategy": args.strategy, "slo": slo.to_dict(), "precision": args.crossover_precision,
                           "pd_hop_ms": args.pd_hop_ms, "cells": [cell.to_dict() for cell in cells],
                           "answer": crossover_answer(cells)})
    rows = []
    for cell in cells:
        row = {"prompt_tokens": cell.prompt_tokens, "output_tokens": cell.output_tokens}
        for s in cell.sustained:
            row[f"{s.topology}_rps_per_gpu"] = s.per_gpu
        row["winner"] = cell.winner or "none meets it"
        row["gain"] = _gain(cell)
        rows.append(row)
    print_rows(f"When disaggregation pays ({args.strategy} batching; round robin in each pool; each rate searched to "
               f"{args.crossover_precision:.0%})", rows, list(rows[0]))
    print(crossover_answer(cells))


def _gain(cell) -> str:
    if cell.gain is None:
        return "-"
    if math.isinf(cell.gain):
        return f"the only one (over {cell.runner_up})"
    low, high = cell.gain_range
    sure = "settled" if cell.settled else "a tie at this precision"
    return f"{cell.gain:+.0%} over {cell.runner_up} ({low:+.0%}..{high:+.0%}, {sure})"


def crossover_answer(cells) -> str:
    """Which topology wins where, in one line: settled wins by topology, then the ties and the cells none met."""
    wins: dict[str, list[str]] = {}
    ties, none = [], []
    for cell in cells:
        where = f"{cell.prompt_tokens}/{cell.output_tokens}"
        if cell.winner is None:
            none.append(where)
        elif cell.settled:
            gain = "" if cell.gain is None or math.isinf(cell.gain) else f" {cell.gain:+.0%}"
            wins.setdefault(cell.winner, []).append(where + gain)
        else:
            ties.append(where)
    parts = [f"{name} wins at {', '.join(places)}" for name, places in wins.items()]
    if ties:
        parts.append(f"too close to call at {', '.join(ties)}")
    if none:
        parts.append(f"no topology meets the SLO at {', '.join(none)}")
    return "; ".join(parts) + " (prompt/output tokens, gain in req/s a GPU)."

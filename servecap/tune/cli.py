"""`servecap tune`: the batching configuration with the most throughput under a p99 SLO, after Triton
Model Analyzer: a guided search over server flags, each configuration measured by a one-level sweep.

    servecap tune --scenario classify --out runs/tune --concurrency 1,4,16 --slo-e2e-ms 20 \\
        --max-queue-delay-us 0,500,1000,2000 --preferred-batch-sizes "none|8,16|16,32" --instances 1,2
    servecap tune --scenario chat --out runs/tune-llm --concurrency 4,16 --slo-ttft-ms 2000 --slo-tpot-ms 200 \\
        --max-num-seqs 4,8,16 --max-num-batched-tokens 256,512,1024

Each configuration runs the load levels (like perf_analyzer's concurrency sweep) and counts with its
best level that meets the SLO. It measures at most a third of the grid (--budget), starting from the
first value of every axis
(give each axis's values from the least batching up), and reports how many it measured, the best
configuration that meets the SLO and the Pareto front of throughput against p99. --exhaustive
measures the whole grid instead.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from contract.records import refuse_existing_run
from contract.slo import SLO
from servecap.launch.process import ServerStartError
from servecap.sweep.config import SweepConfig, parse_duration, parse_number_list
from servecap.sweep.runner import reference_server_spec
from servecap.tune.measure import measure_config
from servecap.tune.space import Axis, Measurement, describe, exhaustive, grid, guided_search, pareto_front, server_args

# searched in this order: the delay decides how much a batch can fill, the sizes what it aims for
CLASSIFY_AXES = {"max_queue_delay_us": "--classifier-max-queue-delay-us",
                 "preferred_batch_sizes": "--classifier-preferred-batch-sizes",
                 "max_batch_size": "--classifier-max-batch-size", "instances": "--classifier-instances"}
CHAT_AXES = {"max_num_seqs": "--max-num-seqs", "max_num_batched_tokens": "--max-num-batched-tokens"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(2, f"servecap tune: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servecap tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="run directory to create; each configuration's sweep goes under configs/")
    p.add_argument("--scenario", choices=("classify", "chat"), default="classify")
    p.add_argument("--model", default="tiny", help="reference-server preset (default tiny)")
    p.add_argument("--strategy", default="continuous", help="chat: the batching strategy whose limits are tuned")
    p.add_argument("--server-args", default="", help="`servecap serve` flags every configuration shares")
    load = p.add_argument_group("the load levels each configuration is measured at (its throughput: the best "
                                "level's that meets the SLO)")
    load.add_argument("--concurrency", help="closed loop: concurrent users per level, e.g. 1,2,4,8,16")
    load.add_argument("--rates", help="open loop: requests/s per level (Poisson), e.g. 100,200,400")
    load.add_argument("--warmup", default="2s")
    load.add_argument("--duration", default="8s")
    work = p.add_argument_group("workload")
    work.add_argument("--rows", default="1", help="classify: rows per request")
    work.add_argument("--protocol", choices=("rest", "grpc"), default="rest", help="classify: KServe V2 over REST or gRPC")
    work.add_argument("--prompt-tokens", default="uniform:32:128", help="chat: prompt lengths")
    work.add_argument("--output-tokens", default="uniform:16:64", help="chat: output lengths")
    work.add_argument("--seed", type=int, default=0)
    space = p.add_argument_group("the search space (values from the least batching up)")
    space.add_argument("--max-batch-size", help="classify: e.g. 16,32,64")
    space.add_argument("--preferred-batch-sizes", help='classify: sets separated by |, e.g. "none|8,16|16,32"')
    space.add_argument("--max-queue-delay-us", help="classify: e.g. 0,500,1000,2000")
    space.add_argument("--instances", help="classify: model instances, e.g. 1,2")
    space.add_argument("--max-num-seqs", help="chat: e.g. 4,8,16,32")
    space.add_argument("--max-num-batched-tokens", help="chat: e.g. 256,512,1024")
    space.add_argument("--axis", action="append", default=[], metavar="FLAG=V1|V2|...",
                       help='any other `servecap serve` flag, named without its dashes, e.g. "stream-interval=1|4" '
                            "(repeatable)")
    slo = p.add_argument_group("the SLO (p99, milliseconds; at least one)")
    slo.add_argument("--slo-e2e-ms", type=float)
    slo.add_argument("--slo-ttft-ms", type=float)
    slo.add_argument("--slo-tpot-ms", type=float)
    p.add_argument("--budget", type=int, help="most configurations to measure (default: a third of the grid)")
    p.add_argument("--exhaustive", action="store_true", help="measure every configuration of the grid")
    return p


def axes_from_args(args: argparse.Namespace) -> list[Axis]:
    named = CLASSIFY_AXES if args.scenario == "classify" else CHAT_AXES
    other = CHAT_AXES if args.scenario == "classify" else CLASSIFY_AXES
    for name in other:
        if getattr(args, name) is not None:
            raise ValueError(f"--{name.replace('_', '-')} is a {'chat' if args.scenario == 'classify' else 'classify'} "
                             f"axis: not with --scenario {args.scenario}")
    axes = []
    for name, flag in named.items():
        text = getattr(args, name)
        if text is not None:
            values = text.split("|") if name == "preferred_batch_sizes" else text.split(",")
            axes.append(Axis(flag, tuple(v.strip() for v in values if v.strip())))
    for text in args.axis:
        flag, sep, values = text.partition("=")
        if not sep:
            raise ValueError(f"--axis {text!r} is not FLAG=V1|V2|...")
        axes.append(Axis("--" + flag.strip().lstrip("-"), tuple(v.strip() for v in values.split("|") if v.strip())))
    if not axes:
        raise ValueError("give at least one axis to search (e.g. --max-queue-delay-us 0,500,1000 or --max-num-seqs 4,8,16)")
    if len({axis.flag for axis in axes}) != len(axes):
        raise ValueError("an axis is given twice")
    return axes


def base_config(args: argparse.Namespace, out: Path, slo: SLO) -> SweepConfig:
    if (args.concurrency is None) == (args.rates is None):
        raise ValueError("choose the load levels: --concurrency N,... or --rates R,...")
    chat = args.scenario == "chat"
    return SweepConfig(
        out_dir=str(out / "configs" / "check"), model=args.model, strategies=(args.strategy,) if chat else ("continuous",),
        server_args=args.server_args,
        concurrency=parse_number_list(args.concurrency, "--concurrency", int) if args.concurrency else (),
        rates=parse_number_list(args.rates, "--rates") if args.rates else (), warmup_s=parse_duration(args.warmup, "--warmup"),
        duration_s=parse_duration(args.duration, "--duration"), prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens, seed=args.seed, slo=slo, scenario=args.scenario,
        rows=args.rows if not chat else "1", protocol=args.protocol if not chat else "rest")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True)
    out = Path(args.out)
    try:
        slo = SLO(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms)
        if not slo.is_set:
            raise ValueError("give an SLO: --slo-e2e-ms (classify), or --slo-ttft-ms / --slo-tpot-ms / --slo-e2e-ms")
        axes = axes_from_args(args)
        base = base_config(args, out, slo)
        points = grid(axes)
        for point in points:   # every configuration's flags parse before anything starts
            shlex.split(server_args(axes, point))
            reference_server_spec(replace(base, server_args=f"{base.server_args} {server_args(axes, point)}".strip()))
        budget = len(points) if args.exhaustive else (args.budget or max(1, math.ceil(len(points) / 3)))
        if budget < 1:
            raise ValueError(f"--budget must be >= 1, got {budget}")
        refuse_existing_run(out)
    except ValueError as exc:
        print(f"servecap tune: error: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    order: list[tuple[int, ...]] = []

    def measure(point: tuple[int, ...]) -> Measurement:
        index = len(order)
        order.append(point)
        console.print(f"[bold]configuration {index + 1} (of at most {budget}): {describe(axes, point)}[/]")
        run_dir = out / "configs" / f"{index:02d}"
        try:
            found = measure_config(base, server_args(axes, point), run_dir, slo, console)
        except (ServerStartError, OSError, ValueError) as exc:
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]   # the server's log holds the rest
            found = Measurement(None, "", {}, False, run_dir=str(run_dir), reason=f"did not run: {first_line}")
        console.print(f"  -> {_line(found)}")
        return found

    result = exhaustive(axes, measure) if args.exhaustive else guided_search(axes, measure, budget)
    latency = "e2e_ms" if args.scenario == "classify" else next(
        name for name in ("ttft_ms", "tpot_ms", "e2e_ms") if slo.as_dict()[name] is not None)
    front = pareto_front(result.measured, latency)
    best = result.best if result.best is not None and result.measured[result.best].meets else None
    document = {
        "scenario": args.scenario, "slo": slo.to_dict(), "grid_size": len(points), "measured": result.count,
        "mode": "exhaustive" if args.exhaustive else "guided", "budget": budget,
        "axes": [{"flag": axis.flag, "values": list(axis.values)} for axis in axes],
        "configurations": [{"order": k, "point": list(p), "config": describe(axes, p), "server_args": server_args(axes, p),
                            **_measurement(result.measured[p])} for k, p in enumerate(order)],
        "best": None if best is None else {"config": describe(axes, best), "server_args": server_args(axes, best),
                                           **_measurement(result.measured[best])},
        "pareto_front": [describe(axes, p) for p in front],
    }
    (out / "tune.json").write_text(json.dumps(document, indent=1))
    (out / "tune.md").write_text(_markdown(document))
    console.print(f"measured {result.count} of {len(points)} configurations")
    if best is None:
        console.print("no configuration met the SLO", markup=False)
    else:
        console.print(f"best meeting the SLO: {describe(axes, best)}: {_line(result.measured[best])}", markup=False)
    console.print("Pareto front (throughput against p99 " + latency.removesuffix("_ms") + "): "
                  + "; ".join(f"{describe(axes, p)} ({_line(result.measured[p])})" for p in front), markup=False)
    print(out / "tune.md")
    return 0


def _measurement(m: Measurement) -> dict:
    return {"throughput": m.throughput, "unit": m.unit, "p99_ms": m.p99_ms, "meets_slo": m.meets, "errors": m.errors,
            "level": m.level, "run_dir": m.run_dir, "reason": m.reason}


def _line(m: Measurement) -> str:
    if m.throughput is None:
        return m.reason or "no result"
    p99 = ", ".join(f"p99 {k.removesuffix('_ms')} {v:.1f} ms" for k, v in m.p99_ms.items() if v is not None)
    at = f" at {m.level}" if m.level else ""
    return f"{m.throughput:.1f} {m.unit}{at}, {p99}" + ("" if m.meets else f" (misses: {m.reason})")


def _markdown(doc: dict) -> str:
    lines = [f"# servecap tune ({doc['scenario']})", "",
             f"Measured {doc['measured']} of {doc['grid_size']} configurations ({doc['mode']}); SLO (p99): "
             + ", ".join(f"{k} {v:g}" for k, v in doc["slo"].items()) + ".", ""]
    best = doc["best"]
    lines += [f"Best meeting the SLO: **{best['config']}** (`{best['server_args']}`): {best['throughput']:.1f} "
              f"{best['unit']}." if best else "No configuration met the SLO.", "",
              "Pareto front: " + "; ".join(doc["pareto_front"]) + ".", "",
              "| order | configuration | throughput | at level | p99 (ms) | meets SLO |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in doc["configurations"]:
        p99 = ", ".join(f"{k.removesuffix('_ms')} {v:.1f}" for k, v in c["p99_ms"].items() if v is not None)
        tput = f"{c['throughput']:.1f} {c['unit']}" if c["throughput"] is not None else (c["reason"] or "")
        lines.append(f"| {c['order'] + 1} | {c['config']} | {tput} | {c['level'] or ''} | {p99} | "
                     f"{'yes' if c['meets_slo'] else 'no'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

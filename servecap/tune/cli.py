"""`servecap tune`: the server configuration with the most throughput under a p99 SLO, after Triton
Model Analyzer: a guided search over the target's own flags, each configuration measured by the runner.

    servecap tune --scenario classify --out runs/tune --concurrency 1,4,16 --slo-e2e-ms 20 \\
        --classifier-max-queue-delay-us 0,500,1000,2000 --classifier-preferred-batch-sizes "none|8,16|16,32" \\
        --classifier-instances 1,2
    servecap tune --out runs/tune-llm --concurrency 4,16 --slo-ttft-ms 2000 --slo-tpot-ms 200 \\
        --max-num-seqs 4,8,16 --max-num-batched-tokens 256,512,1024
    servecap tune --server-cmd "vllm serve ./ckpt --port {port}" --concurrency 8 --slo-ttft-ms 500 \\
        --max-num-seqs 4,8,16 --max-num-batched-tokens 256,512

Every option tune does not know itself is an axis: a flag of the target with its values, comma
separated (or | separated, when a value holds commas), each value a configuration's setting of it
("none": the flag left out); `--axis FLAG=V1|V2` says the same. A reference target's axes are
`servecap serve` flags, checked by its parser before anything starts; a --server-cmd target's are
added to its command (vLLM's --max-num-seqs, ...). The workload, the load levels (like
perf_analyzer's concurrency sweep) and the SLO are the sweep's options; each configuration counts
with its best level that meets the SLO. tune measures at most a third of the grid (--budget), starting
from the first value of every axis (give each axis's values from the least batching up), and reports
how many it measured, the best configuration that meets the SLO and the Pareto front of throughput
against p99. --exhaustive measures the whole grid instead.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from rich.console import Console

from contract.load import LoadSpec, add_load_arguments
from contract.options import CommandParser, add_output_arguments, out_dir
from contract.config_file import add_config_option, parse_command_line
from contract.records import refuse_existing_run
from contract.slo import SLO_METRICS, add_slo_arguments, slo_from_args
from contract.workload import WorkloadSpec, add_workload_arguments
from servecap.experiment.run_options import RunOptions, add_run_arguments
from servecap.experiment.spec import Experiment
from servecap.experiment.targets import add_target_arguments, strategies_from_args, target_from_args
from servecap.launch.process import ServerStartError
from servecap.tune.measure import measure_config
from servecap.tune.space import Axis, Measurement, describe, exhaustive, grid, guided_search, pareto_front, server_args


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="servecap tune", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_option(p)
    add_output_arguments(p, report=False)
    add_target_arguments(p)
    add_workload_arguments(p)
    add_load_arguments(p, only=("concurrency", "rates", "arrival", "warmup", "duration"),
                       title="the load levels each configuration is measured at (its throughput: the best level's "
                             "that meets the SLO)")
    add_slo_arguments(p, title="the SLO (p99, milliseconds; at least one)")
    add_run_arguments(p)
    search = p.add_argument_group("the search (any other --FLAG V1,V2,... is an axis of the target's flags)")
    search.add_argument("--axis", action="append", default=[], metavar="FLAG=V1|V2|...",
                        help='an axis named in full, e.g. "stream-interval=1|4" (repeatable)')
    search.add_argument("--budget", type=int, help="most configurations to measure (default: a third of the grid)")
    search.add_argument("--exhaustive", action="store_true", help="measure every configuration of the grid")
    return p


def axes_from_args(texts: list[str], rest: list[str]) -> list[Axis]:
    """--axis FLAG=V1|V2 and the unknown `--FLAG VALUES` pairs, in the order given."""
    axes = []
    for text in texts:
        flag, sep, values = text.partition("=")
        if not sep:
            raise ValueError(f"--axis {text!r} is not FLAG=V1|V2|...")
        axes.append(Axis("--" + flag.strip().lstrip("-"), _values(values, "|")))
    index = 0
    while index < len(rest):
        flag = rest[index]
        if not flag.startswith("--") or index + 1 >= len(rest) or rest[index + 1].startswith("--"):
            raise ValueError(f"{flag!r}: an axis is a target flag with its values, e.g. --max-num-seqs 4,8,16")
        name, _, inline = flag.partition("=")
        axes.append(Axis(name, _values(rest[index + 1], "|" if "|" in rest[index + 1] else ",")))
        index += 2
    if not axes:
        raise ValueError("give at least one axis to search (e.g. --max-num-seqs 4,8,16, or "
                         "--classifier-max-queue-delay-us 0,500,1000 with --scenario classify)")
    if len({axis.flag for axis in axes}) != len(axes):
        raise ValueError("an axis is given twice")
    return axes


def _values(text: str, separator: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(separator) if v.strip())


def base_experiment(args: argparse.Namespace, out: Path) -> Experiment:
    load = LoadSpec.from_args(args)
    if not load.levels:
        raise ValueError("choose the load levels: --concurrency N,... or --rates R,...")
    slo = slo_from_args(args)
    if not slo.is_set:
        raise ValueError("give an SLO: --slo-e2e-ms (classify), or --slo-ttft-ms / --slo-tpot-ms / --slo-e2e-ms")
    workload = WorkloadSpec.from_args(args)
    strategies = strategies_from_args(args)
    if len(strategies) != 1:
        raise ValueError("--strategies: tune searches one strategy's flags; give one")
    target = target_from_args(args, key=None if workload.classic else strategies[0],
                              strategy=None if workload.classic else strategies[0])
    if target.external:
        target = target_from_args(args)
    return Experiment(out_dir=str(out / "configs" / "check"), targets=(target,), workload=workload, load=load,
                      slo=slo, options=RunOptions.from_args(args))


def main(argv: list[str]) -> int:
    parser = build_parser()
    console = Console(stderr=True)
    try:
        args, rest = parser.parse_known_args(_with_config(parser, argv))
        out = Path(out_dir(args, "tune"))
        axes = axes_from_args(args.axis, rest)
        base = base_experiment(args, out)
        points = grid(axes)
        target = base.targets[0]
        for point in points:   # every configuration's flags are checked before anything starts
            extra = server_args(axes, point)
            try:
                configured = target.with_args(extra)
                if target.kind == "reference":
                    configured.reference_spec(base.workload)
            except ValueError as exc:
                raise ValueError(f"configuration {describe(axes, point)}: "
                                 f"{str(exc).removeprefix('--server-args: ')}") from None
        budget = len(points) if args.exhaustive else (args.budget or max(1, math.ceil(len(points) / 3)))
        if budget < 1:
            raise ValueError(f"--budget must be >= 1, got {budget}")
        refuse_existing_run(out)
    except ValueError as exc:
        print(f"servecap tune: error: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    console.print("axes: " + "; ".join(f"{axis.flag} {' | '.join(axis.values)}" for axis in axes))
    order: list[tuple[int, ...]] = []

    def measure(point: tuple[int, ...]) -> Measurement:
        index = len(order)
        order.append(point)
        console.print(f"[bold]configuration {index + 1} (of at most {budget}): {describe(axes, point)}[/]")
        run_dir = out / "configs" / f"{index:02d}"
        try:
            found = measure_config(base, server_args(axes, point), run_dir, console)
        except (ServerStartError, OSError, ValueError) as exc:
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]   # the server's log holds the rest
            found = Measurement(None, "", {}, False, run_dir=str(run_dir), reason=f"did not run: {first_line}")
        console.print(f"  -> {_line(found)}")
        return found

    result = exhaustive(axes, measure) if args.exhaustive else guided_search(axes, measure, budget)
    slo = base.slo
    latency = "e2e_ms" if base.workload.classic else next(name for name in SLO_METRICS if slo.as_dict()[name] is not None)
    front = pareto_front(result.measured, latency)
    best = result.best if result.best is not None and result.measured[result.best].meets else None
    document = {
        "scenario": base.workload.scenario, "target": target.describe(), "slo": slo.to_dict(),
        "grid_size": len(points), "measured": result.count,
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


def _with_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """argv with a --config file's options in front (tune parses known options and keeps the rest as axes)."""
    from contract.config_file import _config_path, config_argv, read_config

    argv = list(argv)
    path = _config_path(parser, argv)
    if path is None:
        return argv
    try:
        return config_argv(parser, read_config(path)) + argv
    except ValueError as exc:
        raise ValueError(f"--config {path}: {exc}") from None


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

"""`servecap predict --calibration RUN_DIR ...`: predicted latency curves and the max load under an SLO,
from a measured run's own calibration, without running any load.

    servecap predict --calibration runs/cmp --strategy continuous --concurrency 1,2,4,8,16,32 --slo-ttft-ms 50
    servecap predict --calibration runs/cmp --strategy continuous --rates 10,20,40 --arrival poisson
    servecap predict --calibration runs/cmp --concurrency 8 --prompt-tokens uniform:256:1024 --gpu h100-sxm
    servecap predict --calibration runs/cmp --concurrency 1,4,8 --output-tokens 320 --reasoning-tokens 256 --slo-ttfa-ms 2000

Prints a table and writes the whole answer as JSON (--out, default RUN_DIR/predict.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from calculators.sim.speculative_step import ProposalShareOption
from contract.load import LoadSpec, add_load_arguments
from contract.options import CommandParser, add_options, add_output_arguments, options_from_args
from contract.slo import add_slo_arguments, slo_from_args
from contract.workload import WorkloadSpec, add_workload_arguments
from engine_core.gpus import GpuOptions
from engine_core.options import SPECULATIVE, EngineOptions
from reports.predict.coverage import describe_distance
from reports.predict.options import CalibrationOptions
from reports.predict.prediction import PredictPlan, SpeculativeAsk, calibrated_draft, predict_run
from reports.run_data import RunDirError, load_run


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="servecap predict", description=__doc__.split("\n\n")[0],
                           formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    add_options(parser, CalibrationOptions, title="calibration", only=("calibration", "replications"))
    add_options(parser, EngineOptions, title="engine (what-ifs of the calibrated one)",
                only=("strategy", "max-loras"))
    add_options(parser, GpuOptions, only=("gpu",), title="GPU (a what-if: an extrapolation through the roofline)")
    add_load_arguments(parser, only=("concurrency", "rates", "arrival", "warmup", "duration"),
                       title="load (choose --concurrency or --rates; --warmup, --duration default: the run's)")
    add_workload_arguments(parser, title="workload (default: the lengths and the mix the run measured)",
                           only=("prompt-tokens", "output-tokens", "reasoning-tokens", "model-mix", "seed"))
    parser.set_defaults(prompt_tokens=None, warmup_s=None, duration_s=None)   # None: the run's own
    add_slo_arguments(parser)
    add_options(parser, EngineOptions, title="speculative decoding (answered with and without, side by side, and "
                                             "the crossover)", only=SPECULATIVE)
    add_options(parser, CalibrationOptions, only=("speculative-draft-calibration",))
    add_options(parser, ProposalShareOption)
    add_output_arguments(parser, out="where to write the JSON (default RUN_DIR/predict.json)", metavar="FILE",
                         report=False, json="print the JSON instead of the table")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True, soft_wrap=True)
    try:
        if not args.calibration:
            raise ValueError("give --calibration RUN_DIR (a run measured with the engine's step record)")
        engine, load = EngineOptions.from_args(args), LoadSpec.from_args(args)
        workload = WorkloadSpec.from_args(args)
        replications = CalibrationOptions(**options_from_args(CalibrationOptions, args)).replications
        plan = PredictPlan(
            strategy=engine.strategy, concurrency=load.concurrency, rates=load.rates,
            arrival=load.arrival, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
            reasoning_tokens=args.reasoning_tokens, slo=slo_from_args(args),
            gpu=GpuOptions.from_args(args).gpu, replications=8 if replications is None else replications,
            warmup_s=None if args.warmup_s is None else load.warmup_s,
            duration_s=None if args.duration_s is None else load.duration_s, seed=workload.seed,
            speculative=_speculative(args, engine), max_loras=engine.max_loras, model_mix=args.model_mix)
        data = load_run(args.calibration)
        with console.status("simulating"):
            answer = predict_run(data, plan)
    except (RunDirError, ValueError) as exc:
        console.print(f"servecap predict: error: {exc}")
        return 2
    out = Path(args.out) if args.out else Path(args.calibration) / "predict.json"
    out.write_text(json.dumps(answer, indent=1, default=float))
    if args.json:
        print(json.dumps(answer, indent=1, default=float))
    else:
        _print(Console(), answer)
    console.print(f"written to {out}")
    return 0


def _speculative(args, engine: EngineOptions) -> SpeculativeAsk | None:
    """The --speculative-* options; ValueError naming the one missing or wrong."""
    if not engine.speculating() and not args.speculative_draft_calibration:
        return None
    engine.check_speculation()
    draft = None
    if args.speculative_draft_calibration:
        draft = calibrated_draft(load_run(args.speculative_draft_calibration))
    share = options_from_args(ProposalShareOption, args).get("speculative_proposal_share", 1.0)
    return SpeculativeAsk(engine.speculative_method, engine.num_speculative_tokens, engine.speculative_acceptance,
                          engine.speculative_model, draft, share)


def _ms(entry: dict) -> str:
    if entry["value"] is None:
        return ""
    lo, hi = entry["interval"]
    return f"{entry['value'] * 1e3:.3g} ({lo * 1e3:.3g}-{hi * 1e3:.3g})"


def _print(console: Console, answer: dict) -> None:
    if answer["extrapolation"]:
        console.print(f"[bold yellow]{answer['extrapolation']}[/]")
    for note in answer["calibration"]["unavailable"]:
        console.print(f"[yellow]not available:[/] {note}")
    away = answer["distance"]
    if away["factor"] > 1 or any(row["distance"]["load_factor"] > 1 for row in answer["loads"]):
        console.print(f"[yellow]outside the calibration:[/] {describe_distance(away)}; each interval is widened "
                      "for it (+/- interval_widened_by of the value, in the JSON)")
    table = Table(title=f"predicted {answer['strategy']}, {answer['arrival']} (ms: median of "
                        f"{answer['replications']} runs, their 95% spread)")
    for column in ("offered", "metric", "p50", "p95", "p99", "out tok/s", "SLO"):
        table.add_column(column)
    reasons = answer["workload"]["reasoning_tokens_mean"] > 0   # TTFA: the answer after the reasoning
    for row in answer["loads"]:
        (kind, load), = row["offered"].items()
        offered = f"c={load}" if kind == "concurrency" else f"{load:g} req/s"
        slo = "" if row["meets_slo"] is None else ("meets" if row["meets_slo"] else f"misses: {row['why_not']}")
        metrics = ("ttft_s", "tpot_s", "e2e_s", *(("ttfa_s",) if reasons else ()))
        for i, metric in enumerate(metrics):
            m = row["metrics"][metric]
            table.add_row(offered if i == 0 else "", metric.removesuffix("_s").upper(), _ms(m["p50"]), _ms(m["p95"]),
                          _ms(m["p99"]), f"{row['output_tokens_per_s']:.0f}" if i == 0 else "", slo if i == 0 else "",
                          end_section=i == len(metrics) - 1)
    console.print(table)
    if answer["outside_window"]:
        console.print(f"[yellow]not predicted:[/] {', '.join(f'{load:g}' for load in answer['outside_window'])}: no "
                      "simulated request finished inside the measure window (past what it measures; a longer "
                      "--duration reaches further)")
    if answer.get("speculative"):
        _print_speculative(console, answer)
    best = answer["max_load_under_slo"]
    if any(v is not None for v in answer["slo"].values()):
        if best:
            (kind, load), = best["offered"].items()
            console.print(f"max load under the SLO: [bold]{'c=' if kind == 'concurrency' else ''}{load}"
                          f"{' req/s' if kind != 'concurrency' else ''}[/] ({best['output_tokens_per_s']:.0f} output tok/s)")
        else:
            console.print("max load under the SLO: [bold red]none of the loads asked[/]")


def _print_speculative(console: Console, answer: dict) -> None:
    spec = answer["speculative"]
    table = Table(title=f"with speculative decoding ({spec['method']}, k={spec['num_speculative_tokens']}, "
                        f"{spec['expected_tokens_per_step']:.2f} tokens per verification) beside without (ms)")
    for column in ("offered", "TPOT p50", "with: TPOT p50", "TTFT p50", "with: TTFT p50", "out tok/s", "with: out tok/s"):
        table.add_column(column)
    for row in answer["loads"]:
        (kind, load), = row["offered"].items()
        side = row["speculative"]
        if side is None:   # outside the window with speculation
            side = {"metrics": {m: {"p50": {"value": None}} for m in ("tpot_s", "ttft_s")}, "output_tokens_per_s": None}
        table.add_row(f"c={load}" if kind == "concurrency" else f"{load:g} req/s",
                      _ms(row["metrics"]["tpot_s"]["p50"]), _ms(side["metrics"]["tpot_s"]["p50"]),
                      _ms(row["metrics"]["ttft_s"]["p50"]), _ms(side["metrics"]["ttft_s"]["p50"]),
                      f"{row['output_tokens_per_s']:.0f}",
                      "" if side["output_tokens_per_s"] is None else f"{side['output_tokens_per_s']:.0f}")
    console.print(table)
    console.print(spec["statement"])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

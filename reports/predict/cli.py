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

from reports.predict.coverage import describe_distance
from reports.predict.prediction import PredictPlan, SpeculativeAsk, calibrated_draft, predict_run
from reports.run_data import RunDirError, load_run
from contract.slo import SLO
from engine_core.scheduling.speculative import parse_acceptance


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servecap predict", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--calibration", required=True, metavar="RUN_DIR",
                        help="a run directory measured with the engine's step record (servecap sweep)")
    parser.add_argument("--strategy", help="which of the run's strategies (needed when it has several)")
    load = parser.add_argument_group("load (choose one)")
    load.add_argument("--concurrency", help="closed-loop users, e.g. 1,2,4,8")
    load.add_argument("--rates", help="open-loop requests/s, e.g. 5,10,20")
    load.add_argument("--arrival", default="poisson", help="open-loop arrivals: poisson | constant | gamma:CV")
    workload = parser.add_argument_group("workload (default: the lengths the run measured)")
    workload.add_argument("--prompt-tokens", help="N | uniform:LO:HI | normal:M:SD | lognormal:M:S | file:PATH")
    workload.add_argument("--output-tokens", help="same forms as --prompt-tokens")
    workload.add_argument("--reasoning-tokens", help="of each output, the tokens a reasoning model spends before its "
                                                     "answer (same forms; capped at the output)")
    slo = parser.add_argument_group("SLOs (p99, milliseconds)")
    slo.add_argument("--slo-ttft-ms", type=float)
    slo.add_argument("--slo-tpot-ms", type=float)
    slo.add_argument("--slo-e2e-ms", type=float)
    slo.add_argument("--slo-ttfa-ms", type=float, help="the first answer token (after a reasoning model's reasoning)")
    parser.add_argument("--gpu", help="what-if on a catalog GPU (e.g. h100-sxm): an extrapolation through the roofline")
    spec = parser.add_argument_group("speculative decoding (answered with and without, side by side, and the crossover)")
    spec.add_argument("--speculative-method", choices=("draft", "ngram"))
    spec.add_argument("--num-speculative-tokens", type=int, metavar="K", help="proposals verified per step")
    spec.add_argument("--speculative-acceptance", metavar="A[,A...]",
                      help="one rate, or one per position as vLLM reports them (its spec-decode counters)")
    spec.add_argument("--speculative-model", help="draft: a catalog model, timed by its roofline on --gpu")
    spec.add_argument("--speculative-draft-calibration", metavar="RUN_DIR",
                      help="draft: a run of the draft model, whose calibrated steps time its passes")
    spec.add_argument("--speculative-proposal-share", type=float, default=1.0, metavar="S",
                      help="the share of decodes that propose (default 1; prompt lookup's is what a server counted: "
                           "the report's spec_drafts_per_decode)")
    lora = parser.add_argument_group("LoRA adapters (a calibration run that served them: its adapters' step costs)")
    lora.add_argument("--max-loras", type=int, help="what-if: this many adapter slots")
    lora.add_argument("--model-mix", help="what-if: this mix of requests (NAME:WEIGHT,... or zipf:N[:EXPONENT])")
    parser.add_argument("--replications", type=int, default=8, help="simulated runs per load (default 8)")
    parser.add_argument("--warmup", type=float, help="seconds of warm-up per load (default: the run's)")
    parser.add_argument("--duration", type=float, help="seconds measured per load (default: the run's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="where to write the JSON (default RUN_DIR/predict.json)")
    parser.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True, soft_wrap=True)
    try:
        plan = PredictPlan(
            strategy=args.strategy,
            concurrency=_numbers(args.concurrency, "--concurrency", int),
            rates=_numbers(args.rates, "--rates", float),
            arrival=args.arrival, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
            reasoning_tokens=args.reasoning_tokens,
            slo=SLO(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2e_ms, args.slo_ttfa_ms), gpu=args.gpu,
            replications=args.replications, warmup_s=args.warmup, duration_s=args.duration, seed=args.seed,
            speculative=_speculative(args), max_loras=args.max_loras, model_mix=args.model_mix)
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


def _speculative(args) -> SpeculativeAsk | None:
    """The --speculative-* flags; ValueError naming the one missing or wrong."""
    given = (args.speculative_method, args.num_speculative_tokens, args.speculative_acceptance)
    if all(v is None for v in given) and not (args.speculative_model or args.speculative_draft_calibration):
        return None
    if any(v is None for v in given):
        raise ValueError("speculative decoding needs --speculative-method, --num-speculative-tokens and "
                         "--speculative-acceptance together")
    rates = parse_acceptance(args.speculative_acceptance)
    draft = None
    if args.speculative_draft_calibration:
        draft = calibrated_draft(load_run(args.speculative_draft_calibration))
    return SpeculativeAsk(args.speculative_method, args.num_speculative_tokens, rates, args.speculative_model, draft,
                          args.speculative_proposal_share)


def _numbers(text: str | None, option: str, kind) -> tuple:
    if not text:
        return ()
    try:
        return tuple(kind(item) for item in text.split(",") if item.strip())
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not a comma list of {'whole ' if kind is int else ''}numbers") from None


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

"""`servecap compare`: two arms under load interleaved in slices, a paired verdict.

    servecap compare --out runs/cmp --concurrency 4 --a-args "" --b-args "--max-num-seqs 8"
    servecap compare --out runs/pr --concurrency 4 --max-duration 5m \\
        --a-cmd "base/.venv/bin/python -m reference_server --port {port}" \\
        --b-cmd "pr/.venv/bin/python -m reference_server --port {port}"
    servecap compare --out runs/canary --rate 4 --arrival poisson --a-url http://127.0.0.1:8000 --b-url http://127.0.0.1:8001

Exit codes: 0 no regression, 1 regression, 2 unusable input, 3 undecided when the pairs or the time ran out.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from servecap.compare.config import ArmSpec, CompareConfig
from servecap.compare.driver import Compare
from servecap.sweep.config import parse_duration
from reports.gate.thresholds import parse_limit, parse_max_regression
from reports.paired.decision import EXIT_UNUSABLE
from servecap.launch.process import ServerStartError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_UNUSABLE, f"servecap compare: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servecap compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="run directory to create, e.g. runs/cmp")
    for arm in ("a", "b"):
        group = p.add_argument_group(f"arm {arm.upper()} (exactly one)")
        group.add_argument(f"--{arm}-args", help='reference-server flags, e.g. "--max-num-seqs 8" ("" = defaults)')
        group.add_argument(f"--{arm}-cmd", help="any server command serving an OpenAI-compatible API on {port}")
        group.add_argument(f"--{arm}-url", help="an endpoint already running")
    p.add_argument("--model", default="tiny", help="reference-server preset for --a-args/--b-args (default tiny)")
    p.add_argument("--ready-path", default="/ready", help="polled on --a-cmd/--b-cmd arms until 200 (default /ready)")
    load = p.add_argument_group("load (choose one)")
    load.add_argument("--concurrency", type=int, help="closed loop: this many Locust users")
    load.add_argument("--rate", type=float, help="open loop: requests/s, with --arrival")
    load.add_argument("--arrival", default="poisson", help="open-loop arrivals: poisson | constant | gamma:CV")
    work = p.add_argument_group("workload")
    work.add_argument("--prompt-tokens", default="uniform:32:128", help="N | uniform:LO:HI | normal:M:SD | ...")
    work.add_argument("--output-tokens", default="uniform:16:64", help="same forms as --prompt-tokens")
    work.add_argument("--seed", type=int, default=0, help="the workload, slice order and request sequences")
    stats = p.add_argument_group("statistics")
    stats.add_argument("--max-regression", default="",
                       help="gated metric=threshold, comma list (servecap gate syntax), e.g. tpot_s.p50=5%%,"
                            "cpu_s_per_token=10%%; default p50 of ttft_s, tpot_s, itl_s, e2e_s and "
                            "output_tokens_per_s at 5%%")
    stats.add_argument("--no-defaults", action="store_true", help="gate only what --max-regression names")
    stats.add_argument("--min-effect", default="10%", help="the change the power analysis sizes the run for")
    stats.add_argument("--max-duration", help="keep adding pairs while undecided, up to this wall time (30s, 5m)")
    stats.add_argument("--alpha", type=float, default=0.05, help="false-alarm rate over all looks (default 0.05)")
    stats.add_argument("--pilot-pairs", type=int, default=4, help="pairs that measure the noise first")
    stats.add_argument("--max-pairs", type=int, default=400, help="hard bound on pairs")
    slices = p.add_argument_group("slices")
    slices.add_argument("--warmup", default="3s", help="each arm's warm-up slice")
    slices.add_argument("--slice", help="slice length (default from the warm-up: >= 5 x median E2E, >= 2 s)")
    slices.add_argument("--schedule", choices=("interleaved", "duet"), default="interleaved",
                        help="interleaved: a pair's two slices one after the other, in a random order; duet: at the "
                             "same time, --concurrency users per arm, so even fast drift hits both arms alike "
                             "(each arm's absolute figures then include the other's load)")
    slices.add_argument("--at-switch", choices=("drain", "exclude"), default="drain",
                        help="requests in flight at a switch: finish first (drain) or are cut off (exclude)")
    p.add_argument("--no-pin-cpus", action="store_true",
                   help="let the OS place Locust and the servers (default: Locust on core 0, both arms on the others)")
    return p


def config_from_args(args: argparse.Namespace) -> CompareConfig:
    gated = {t.key: t.limit for t in parse_max_regression(args.max_regression)}
    if any(t.level for t in parse_max_regression(args.max_regression)):
        raise ValueError("--max-regression: a compare run has one load level; drop the LEVEL@ prefix")
    return CompareConfig(
        out_dir=args.out,
        a=ArmSpec("a", args.a_args, args.a_cmd, args.a_url), b=ArmSpec("b", args.b_args, args.b_cmd, args.b_url),
        model=args.model, ready_path=args.ready_path, concurrency=args.concurrency, rate=args.rate,
        arrival=args.arrival, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens, seed=args.seed,
        min_effect=parse_limit(args.min_effect),
        max_duration_s=parse_duration(args.max_duration, "--max-duration") if args.max_duration else None,
        max_regression=gated or None, no_defaults=args.no_defaults, alpha=args.alpha, pilot_pairs=args.pilot_pairs,
        warmup_s=parse_duration(args.warmup, "--warmup"),
        slice_s=parse_duration(args.slice, "--slice") if args.slice else None,
        at_switch=args.at_switch, schedule=args.schedule, max_pairs=args.max_pairs, pin_cpus=not args.no_pin_cpus)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        outcome = Compare(config_from_args(args), console).run()
    except (ValueError, ServerStartError, RuntimeError) as exc:
        print(f"servecap compare: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    print(outcome.markdown, end="")
    return outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

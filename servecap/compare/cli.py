"""`servecap compare`: two arms under load interleaved in slices, a paired verdict.

    servecap compare --out runs/cmp --concurrency 4 --a-args "" --b-args "--max-num-seqs 8"
    servecap compare --out runs/h100 --emulate h100-sxm --model llama-3.1-8b --concurrency 16 \\
        --a-args "" --b-args "--max-num-seqs 64" --dataset sharegpt.json --turns 3
    servecap compare --out runs/vllm --server-cmd "vllm serve ./ckpt --port {port}" --concurrency 4 \\
        --a-args "" --b-args "--max-num-batched-tokens 512"
    servecap compare --out runs/pr --concurrency 4 --max-duration 5m \\
        --a-cmd "base/.venv/bin/python -m reference_server --port {port}" \\
        --b-cmd "pr/.venv/bin/python -m reference_server --port {port}"
    servecap compare --out runs/canary --rates 4 --a-url http://127.0.0.1:8000 --b-url http://127.0.0.1:8001

The arms share the target and workload options (any workload: lengths, a dataset, multi-turn chats,
reasoning budgets, a model mix); each arm adds its own flags, command or endpoint. With an SLO
(--slo-*), each arm is also judged against it.

Exit codes: 0 no regression, 1 regression, 2 unusable input, 3 undecided when the pairs or the time ran out.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from rich.console import Console

from contract.load import LoadSpec, add_load_arguments
from contract.options import CommandParser, add_output_arguments, out_dir, parse_duration
from contract.config_file import add_config_option, parse_command_line, settings_of
from contract.slo import add_slo_arguments, slo_from_args
from contract.workload import WorkloadSpec, add_workload_arguments
from reports.gate.thresholds import parse_limit, parse_max_regression
from reports.paired.decision import EXIT_UNUSABLE
from servecap.compare.config import ARMS, ArmSpec, PairedOptions, add_paired_arguments
from servecap.compare.driver import PairedSlices
from servecap.experiment.run_options import RunOptions, add_run_arguments
from servecap.experiment.spec import Experiment
from servecap.experiment.targets import add_target_arguments, target_from_args
from servecap.launch.process import ServerStartError


class _Parser(CommandParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_UNUSABLE, f"servecap compare: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servecap compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_option(p)
    add_output_arguments(p, report=False)
    add_target_arguments(p, title="target (what both arms share)", strategies=False)
    add_paired_arguments(p)
    add_workload_arguments(p)
    add_load_arguments(p, only=("concurrency", "rates", "arrival", "warmup"), title="load (one level)")
    add_slo_arguments(p)
    add_run_arguments(p)
    return p


def _shared_target(args):
    """The target both arms start from. --ready-path goes with arms that are commands or endpoints of their
    own (--a-cmd, --b-url): the shared target is then the reference server's only in name."""
    own = all(getattr(args, f"{arm}_cmd") or getattr(args, f"{arm}_url") for arm in ARMS)
    url, ready_path = args.url, args.ready_path
    args.url = None
    if own:
        args.ready_path = None
    try:
        base = target_from_args(args)
    finally:
        args.url, args.ready_path = url, ready_path
    return replace(base, ready_path=ready_path) if own else base


def paired_from_args(args: argparse.Namespace) -> PairedOptions:
    given = parse_max_regression(args.max_regression)
    if any(t.level for t in given):
        raise ValueError("--max-regression: a compare run has one load level; drop the LEVEL@ prefix")
    return PairedOptions(
        min_effect=parse_limit(args.min_effect),
        max_duration_s=parse_duration(args.max_duration, "--max-duration") if args.max_duration else None,
        max_regression={t.key: t.limit for t in given} or None, no_defaults=args.no_defaults, alpha=args.alpha,
        pilot_pairs=args.pilot_pairs, slice_s=parse_duration(args.slice, "--slice") if args.slice else None,
        at_switch=args.at_switch, schedule=args.schedule, max_pairs=args.max_pairs)


def experiment_from_args(args: argparse.Namespace) -> Experiment:
    if args.url:
        raise ValueError("--url names one endpoint; the arms of a compare run are --a-url and --b-url")
    base = _shared_target(args)
    arms = [ArmSpec(arm, getattr(args, f"{arm}_args"), getattr(args, f"{arm}_cmd"), getattr(args, f"{arm}_url"))
            for arm in ARMS]
    load = LoadSpec.from_args(args)
    if len(load.levels) != 1:
        raise ValueError("give exactly one load: --concurrency N (closed loop) or --rates R (open loop)")
    if getattr(args, "hedge_after", None):
        raise ValueError("--hedge-after hedges a test's own requests: a compare run alternates two arms, so hedge "
                         "in a sweep of each")
    return Experiment(out_dir=out_dir(args, "compare"), targets=tuple(arm.target(base) for arm in arms),
                      workload=WorkloadSpec.from_args(args), load=load, slo=slo_from_args(args),
                      options=RunOptions.from_args(args))


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parse_command_line(parser, argv)
    console = Console(stderr=True)
    from servecap.experiment.runner import Runner

    try:
        experiment = experiment_from_args(args)
        profile = PairedSlices(experiment, paired_from_args(args), console)
        runner = Runner(experiment, console, command="servecap compare", observe=False,
                        config=settings_of(parser, args) | {"out": experiment.out_dir})
        runner.run_together(profile)
    except (ValueError, ServerStartError, RuntimeError) as exc:
        print(f"servecap compare: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    outcome = profile.finish(runner.status)
    print(outcome.markdown, end="")
    return outcome.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

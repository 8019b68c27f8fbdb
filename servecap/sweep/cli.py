"""`servecap sweep`: load levels against one target (or the reference server per strategy), then the report.

    servecap sweep --strategies none,static,dynamic,continuous --concurrency 1,4,8 --out runs/cmp
    servecap sweep --url http://127.0.0.1:8000 --rates 1,2,4 --arrival poisson --out runs/vllm
    servecap sweep --server-cmd "vllm serve ./ckpt --port {port}" --concurrency 1,8 --out runs/vllm-own
    servecap sweep --url http://127.0.0.1:8000 --trace mooncake.jsonl --speedup 2 --out runs/replay
    servecap sweep --auto --slo-tpot-ms 50 --strategies continuous --out runs/knee
    servecap sweep --rate-sweep 6 --out runs/guidellm-style
    servecap sweep --scenario classify --rows uniform:1:8 --concurrency 1,4,16 --out runs/mlp
    servecap sweep --scenario embed --rows uniform:1:8 --prompt-tokens uniform:16:256 --concurrency 1,8 --out runs/emb
    servecap sweep --config sweep.yaml --out runs/again

A sweep is an experiment (servecap.experiment) with one target per strategy (or per
--server-args-matrix entry, or one --url / --server-cmd), any load profile, and the report at the end.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from contract.load import LoadSpec, add_load_arguments
from contract.options import CommandParser, add_output_arguments, out_dir
from contract.config_file import add_config_option, parse_command_line, settings_of
from contract.slo import add_slo_arguments, slo_from_args
from contract.workload import WorkloadSpec, add_workload_arguments
from servecap.experiment.run_options import RunOptions, add_run_arguments
from servecap.experiment.spec import Experiment
from servecap.experiment.targets import TargetSpec, add_target_arguments, strategies_from_args, target_from_args
from servecap.launch.process import ServerStartError
from servecap.sweep.calibrate_stage import check_calibrate, run_stage
from servecap.sweep.matrix import parse_server_args_matrix

CLASSIFIER_TARGET = "classifier"   # a classify or embed sweep's one server: its level ids' prefix (classifier/c=8)


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="servecap sweep", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_option(p)
    add_output_arguments(p)
    add_target_arguments(p)
    p.add_argument("--server-args-matrix", metavar="LABEL:FLAGS|...",
                   help="one reference server per entry, each with --server-args plus its FLAGS, e.g. \"off:"
                        "--classifier-batching off|on:\" (batching off, then on); the report compares them")
    add_workload_arguments(p)
    add_load_arguments(p)
    add_slo_arguments(p)
    add_run_arguments(p)
    p.add_argument("--calibrate", action="store_true",
                   help="after a --concurrency sweep, the calibration stage `servecap predict` needs for what-ifs: "
                        "one open-loop level per strategy and one level of 4x longer prompts (RUN/calibrate/; "
                        "servecap.sweep.calibrate_stage)")
    return p


def targets_from_args(args: argparse.Namespace, workload: WorkloadSpec) -> tuple[TargetSpec, ...]:
    """One target per strategy (or per matrix entry, or the classic model's one server), or the one
    external target."""
    base = target_from_args(args)
    strategies = strategies_from_args(args)
    matrix = parse_server_args_matrix(args.server_args_matrix) if args.server_args_matrix else ()
    if base.external:
        if strategies != ("continuous",):
            raise ValueError("--strategies needs the reference server; an external target is measured as it is")
        if matrix:
            raise ValueError("--server-args-matrix starts a reference server per configuration: not with --url or "
                             "--server-cmd")
        return (base,)
    if matrix:
        return tuple(TargetSpec("reference", label, model=base.model, server_args=base.server_args,
                                served_model=base.served_model).with_args(flags) for label, flags in matrix)
    if workload.classic:
        if strategies != ("continuous",):
            raise ValueError("--strategies picks an LLM batching strategy; a classic model's sweep sets its batching "
                             "with --server-args (--classifier-max-batch-size, --classifier-max-queue-delay-us, "
                             "--classifier-instances, --classifier-batching; --embedding-* alike)")
        return (TargetSpec("reference", CLASSIFIER_TARGET, model=base.model, server_args=base.server_args,
                           served_model=base.served_model),)
    return tuple(TargetSpec("reference", strategy, model=base.model, strategy=strategy, server_args=base.server_args,
                            served_model=base.served_model) for strategy in strategies)


def experiment_from_args(args: argparse.Namespace) -> Experiment:
    workload = WorkloadSpec.from_args(args)
    return Experiment(out_dir=out_dir(args, "sweep"), targets=targets_from_args(args, workload), workload=workload,
                      load=LoadSpec.from_args(args), slo=slo_from_args(args), options=RunOptions.from_args(args))


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parse_command_line(parser, argv)
    console = Console(stderr=True)
    from servecap.experiment.runner import Runner

    try:
        experiment = experiment_from_args(args)
        if args.calibrate:
            check_calibrate(experiment)
        from reports.report import ReportOptions

        # built before the sweep: a bad value fails before any load
        report_options = ReportOptions(slo=experiment.slo, model_config=experiment.options.model_config,
                                       diagnostics=experiment.options.diagnostics)
        runner = Runner(experiment, console, command="servecap sweep",
                        config=settings_of(parser, args) | {"out": experiment.out_dir})
        out = runner.run()
        if args.calibrate and runner.status == "complete":
            run_stage(experiment, out, console)
    except (ValueError, ServerStartError) as exc:
        print(f"servecap sweep: error: {exc}", file=sys.stderr)  # plain: never wrapped mid-message
        return 2
    if args.no_report:   # else the report's own warnings say the same, grouped, after its answer
        for line in runner.grouped_warnings():
            console.print(line, markup=False, highlight=False)
        console.print(f"run directory: {out}")
        code = 0
    else:
        from reports import cli as report_cli

        code = report_cli.report(out, report_options)   # in this process: reports pulls in no torch
    failed = runner.failed_levels
    if failed:   # what was recorded is kept and reported, but the sweep did not run as asked
        named = ", ".join(f"{level} (exit {exit_code})" for level, exit_code in failed)
        print(f"servecap sweep: error: the load generator failed on {named}; see {out}/locust.log", file=sys.stderr)
        return code or 1
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""`servecap report RUN_DIR`: write summary.json, report.html, report.md and the figures into RUN_DIR.

`servecap report RUN_A RUN_B --out DIR` draws both runs' curves on shared axes into DIR (a config
change, two engines); a compare directory (`servecap compare`) gets that view of its two arms.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from reports import answer
from reports.notices import notices, one_line
from reports.report import ReportOptions, ReportResult, write_report
from contract.options import CommandParser, add_options, add_output_arguments
from engine_core.gpus import GpuOptions
from contract.slo import add_slo_arguments, slo_from_args
from reports.run_data import RunDirError
from reports.side_by_side import is_compare_dir, side_by_side


CONSOLE_NOTICES = 3   # the console's warnings, one line each; the report has them all


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="servecap report", description=__doc__)
    parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run directory (run.json, requests.jsonl, samples.csv, server_metrics.csv); two or "
                             "more: their curves on shared axes, into --out; a compare directory: its arms A and B")
    add_output_arguments(parser, out="the directory for the side-by-side report of two or more runs", report=False)
    add_slo_arguments(parser, title="SLO (p99, milliseconds; default: the run's own)")
    add_options(parser, GpuOptions, title="cost verdict (--gpu: when run.json names none)", only=("gpu", "gpu-hourly"),
                typed=True)
    parser.add_argument("--no-figures", action="store_true", help="tables only (no PNGs)")
    parser.add_argument("--diagnostics", action="store_true",
                        help="also show the instruments for a host whose speed drifts (a run from `servecap sweep "
                             "--diagnostics`): the host's steal time per level, levels where the machine drifted")
    parser.add_argument("--model-config", metavar="PATH",
                        help="the served model's HF config.json (or its directory): predict KV bytes per token and "
                             "the KV block count for it (default: the one the sweep recorded)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        options = ReportOptions(slo=slo_from_args(args), gpu_hourly=args.gpu_hourly, gpu=args.gpu,
                                figures=not args.no_figures, model_config=args.model_config,
                                diagnostics=args.diagnostics)
    except ValueError as exc:
        return _error(Console(stderr=True, soft_wrap=True), exc)
    if len(args.run_dirs) > 1 or is_compare_dir(args.run_dirs[0]):
        out = args.out or (args.run_dirs[0] if len(args.run_dirs) == 1 else None)
        if out is None:
            return _error(Console(stderr=True, soft_wrap=True),
                          ValueError("two runs need --out DIR: the side-by-side report goes there"))
        return _run(lambda progress: side_by_side(args.run_dirs, out, options, progress=progress))
    if args.out:
        return _error(Console(stderr=True, soft_wrap=True),
                      ValueError("--out is for two or more runs; one run's report goes into its own directory"))
    return report(args.run_dirs[0], options)


def report(run_dir: str | Path, options: ReportOptions) -> int:
    """Write the report into `run_dir` and say what it found; 0, or 2 for a run directory it cannot read
    (also what `servecap sweep` calls, in its own process, when its run is done)."""
    return _run(lambda progress: write_report(run_dir, options, progress=progress))


def _run(make: Callable[[Callable[[str], None]], ReportResult]) -> int:
    """Make a report under a status line, then print its answer, its warnings (each kind on one line, at
    most CONSOLE_NOTICES of them) and its path."""
    console = Console(stderr=True, soft_wrap=True)
    try:
        started = time.perf_counter()
        with console.status("reading the run directory") as status:
            result = make(lambda msg: status.update(msg))
    except (RunDirError, ValueError) as exc:
        return _error(console, exc)
    elapsed = time.perf_counter() - started
    summary = result.summary
    if isinstance(summary, dict):   # a classic model's report (reports.classic): its answer, then where it is
        classic = summary
        console.print(classic["answer"][0].replace("**", ""), markup=False, highlight=False)
        console.print(f"{len(classic['levels'])} level(s), {len(result.figures)} figure(s) in {elapsed:.1f} s")
        print(result.html_path)
        return 0
    console.print(answer.sentences(summary)[0].replace("**", ""), markup=False, highlight=False)
    point, cost = summary.verdict.operating_point, summary.verdict.cost
    if point:
        line = f"operating point {point.level} ({point.basis}): {point.output_tokens_per_s:.1f} output tok/s"
        if cost.get("usd_per_1m_output_tokens") is not None:
            line += f", ${cost['usd_per_1m_output_tokens']:.3f} per 1M output tokens"
        console.print(line)
    found = notices(summary)
    for notice in found[:CONSOLE_NOTICES]:
        console.print(one_line(notice), markup=False, highlight=False)
    more = f"; {len(found) - CONSOLE_NOTICES} more warning(s) and what each means in the report" \
        if len(found) > CONSOLE_NOTICES else ("; what each warning means is in the report" if found else "")
    console.print(f"{len(summary.levels)} level(s), {len(result.figures)} figure(s) in {elapsed:.1f} s{more}")
    print(result.html_path)
    return 0


def _error(console: Console, exc: Exception) -> int:
    console.print(f"servecap report: error: {exc}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

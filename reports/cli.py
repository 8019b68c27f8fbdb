"""`servecap report RUN_DIR`: write summary.json, report.html, report.md and the figures into RUN_DIR."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from reports.report import ReportOptions, write_report
from reports.run_data import RunDirError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servecap report", description=__doc__)
    parser.add_argument("run_dir", help="a run directory (run.json, requests.jsonl, samples.csv, server_metrics.csv)")
    parser.add_argument("--slo-ttft-ms", type=float, help="p99 time-to-first-token SLO in ms")
    parser.add_argument("--slo-tpot-ms", type=float, help="p99 time-per-output-token SLO in ms")
    parser.add_argument("--slo-e2e-ms", type=float, help="p99 end-to-end latency SLO in ms")
    parser.add_argument("--gpu-hourly", type=float, help="USD per GPU-hour for the cost verdict")
    parser.add_argument("--gpu", help="GPU catalog id to price with when run.json names none (e.g. h100-sxm)")
    parser.add_argument("--no-figures", action="store_true", help="tables only (no PNGs)")
    parser.add_argument("--model-config", metavar="PATH",
                        help="the served model's HF config.json (or its directory): predict KV bytes per token and "
                             "the KV block count for it (default: the one the sweep recorded)")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        options = ReportOptions(slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms,
                                slo_e2e_ms=args.slo_e2e_ms, gpu_hourly=args.gpu_hourly, gpu=args.gpu,
                                figures=not args.no_figures, model_config=args.model_config)
    except ValueError as exc:
        return _error(Console(stderr=True, soft_wrap=True), exc)
    return report(args.run_dir, options)


def report(run_dir: str | Path, options: ReportOptions) -> int:
    """Write the report into `run_dir` and say what it found; 0, or 2 for a run directory it cannot read
    (also what `servecap sweep` calls, in its own process, when its run is done)."""
    console = Console(stderr=True, soft_wrap=True)
    try:
        started = time.perf_counter()
        with console.status("reading the run directory") as status:
            result = write_report(run_dir, options, progress=lambda msg: status.update(msg))
    except (RunDirError, ValueError) as exc:
        return _error(console, exc)
    elapsed = time.perf_counter() - started
    summary = result.summary
    for note in summary["missing"]:
        console.print(f"[yellow]missing:[/] {note}")
    point, cost = summary["verdict"]["operating_point"], summary["verdict"]["cost"]
    if point:
        line = f"operating point {point['level']} ({point['basis']}): {point['output_tokens_per_s']:.1f} output tok/s"
        if cost.get("usd_per_1m_output_tokens") is not None:
            line += f", ${cost['usd_per_1m_output_tokens']:.3f} per 1M output tokens"
        console.print(line)
    console.print(f"{len(summary['levels'])} level(s), {len(result.figures)} figure(s) in {elapsed:.1f} s")
    print(result.html_path)
    return 0


def _error(console: Console, exc: Exception) -> int:
    console.print(f"servecap report: error: {exc}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

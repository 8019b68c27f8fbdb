"""`servecap gate COMPARE_DIR` (paired) or `servecap gate --baseline A --current B` (two runs).

A compare directory (from `servecap compare`) is judged pair by pair (reports.paired):
exit 0 no regression, 1 regression, 2 unusable input, 3 undecided. This is the verdict
to trust on a machine whose speed drifts.

Two runs: exit 0 pass, 1 regression, 2 unusable input, 3 undecided. A and B are run
directories or summary.json files; the two runs ran at different times, so machine drift
between them is not cancelled. Each run is allowed an offset as large as the drift its
machine's sustained speed showed inside it (its time blocks' medians, a burst capped, or the
shift between its halves, net of a median's own noise): a change beyond its threshold that is
significant within the runs but not beyond that drift is undecided, and the output names the
paired `servecap compare` to run instead. A tail (p90 and up) of two runs is at most
undecided and does not set the exit code; with replicate baselines (`--baseline` repeated) it
is judged as the medians are. Thresholds: defaults (10% on p50 and
p99 of every latency metric, 10% on output tokens/s), then `--config gate.toml`, then
`--max-regression`. The Markdown table is printed, written to `--markdown-out` (default:
gate.md beside the current run) and appended to $GITHUB_STEP_SUMMARY when that is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path

from contract.options import CommandParser, add_output_arguments
from reports.gate.decision import run_gate
from reports.gate.inputs import GateInputError, incompatibilities, load_side
from reports.gate.render import to_json, to_markdown
from reports.gate.thresholds import (add_threshold_arguments, default_thresholds, from_toml, merge,
                                     parse_max_regression, parse_ratio)
from reports.report import ReportOptions, build_summary

EXIT_PASS, EXIT_REGRESSION, EXIT_UNUSABLE, EXIT_UNDECIDED = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="servecap gate", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)   # a bad flag: EXIT_UNUSABLE (2)
    parser.add_argument("compare_dir", nargs="?", help="a compare run directory (servecap compare --out DIR)")
    parser.add_argument("--baseline", action="append",
                        help="baseline run directory or summary.json; repeat it with replicate runs of the same "
                             "setup and the gate also allows for the run-to-run noise they show")
    parser.add_argument("--current", help="current run directory or summary.json")
    add_threshold_arguments(parser)
    parser.add_argument("--ratio", action="append", default=[],
                        help="within-run ratio check METRIC@NUM_LEVEL:DEN_LEVEL=LIMIT "
                             "(e.g. output_tokens_per_s@continuous/c=8:none/c=8=10%%); repeatable")
    parser.add_argument("--config", help="gate.toml with [max_regression] and [[ratio]] (default: ./gate.toml if present)")
    parser.add_argument("--force", action="store_true", help="compare even when model, workload or hardware differ")
    add_output_arguments(parser, out=None, report=False, json="print JSON instead of the Markdown table")
    parser.add_argument("--markdown-out", help="where to write the Markdown table (default: gate.md beside the current run)")
    return parser


def _thresholds(args):
    config_path = Path(args.config) if args.config else Path("gate.toml")
    toml_thresholds, toml_ratios = [], []
    if args.config or config_path.exists():
        try:
            toml_thresholds, toml_ratios = from_toml(tomllib.loads(config_path.read_text()))
        except OSError as exc:
            raise GateInputError(f"cannot read {config_path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise GateInputError(f"{config_path} is not valid TOML: {exc}") from None
    defaults = [] if args.no_defaults else default_thresholds()
    thresholds = merge(defaults, toml_thresholds, parse_max_regression(args.max_regression))
    ratios = toml_ratios + [parse_ratio(text) for text in args.ratio]
    if not thresholds and not ratios:
        raise GateInputError("nothing to check: --no-defaults without --max-regression, --ratio or gate.toml")
    return thresholds, ratios


def _markdown_path(args) -> Path:
    if args.markdown_out:
        return Path(args.markdown_out)
    current = Path(args.current)
    return (current if current.is_dir() else current.parent) / "gate.md"


DRIFT_NOTE = ("two-run comparison: the runs ran at different times, so the machine's speed drift between them "
              "is allowed for only as far as each run's own time blocks show it (a whole run held at one "
              "slower speed is not seen); for a verdict that holds under drift, run `servecap compare` and "
              "gate its directory")


def _paired(args) -> int:
    """`servecap gate COMPARE_DIR`: the paired verdict (the same analysis `servecap compare` printed)."""
    from reports.paired.analysis import analyse
    from reports.paired.decision import EXIT_UNUSABLE as PAIRED_UNUSABLE
    from reports.paired.render import to_json as paired_json, to_markdown as paired_markdown

    if args.baseline or args.current or args.ratio:
        print("servecap gate: error: give a compare directory or --baseline/--current, not both "
              "(--ratio is for two runs)", file=sys.stderr)
        return PAIRED_UNUSABLE
    try:
        thresholds = parse_max_regression(args.max_regression) if args.max_regression else []
        if any(t.level for t in thresholds):
            raise ValueError("--max-regression: a compare run has one load level; drop the LEVEL@ prefix")
        gated = {t.key: t.limit for t in thresholds} or None
        analysis = analyse(args.compare_dir, max_regression=gated, replace_defaults=args.no_defaults)
    except ValueError as exc:
        print(f"servecap gate: error: {exc}", file=sys.stderr)
        return PAIRED_UNUSABLE
    arms = analysis.run.run.compare.arms
    labels = [arms[name].label() if name in arms else name for name in ("a", "b")]
    markdown = paired_markdown(analysis.verdict, *labels, analysis.notes, schedule=analysis.run.run.compare.schedule)
    out = Path(args.markdown_out) if args.markdown_out else Path(args.compare_dir) / "gate.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as summary_file:
            summary_file.write(markdown)
    print(json.dumps(paired_json(analysis.verdict, *labels), indent=2) if args.json else markdown)
    return analysis.verdict.exit_code


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.compare_dir:
        return _paired(args)
    if not args.baseline or not args.current:
        print("servecap gate: error: give a compare directory, or both --baseline and --current", file=sys.stderr)
        return EXIT_UNUSABLE
    summarize = lambda data: build_summary(data, ReportOptions(figures=False))  # noqa: E731
    try:
        thresholds, ratios = _thresholds(args)
        baselines = [load_side(path, summarize) for path in args.baseline]
        baseline = baselines[0]
        current = load_side(args.current, summarize)
        problems = [problem for side in baselines for problem in incompatibilities(side, current)]
        if problems and not args.force:
            raise GateInputError("the runs are not comparable (use --force to compare anyway):\n  "
                                 + "\n  ".join(problems))
        if not set(baseline.levels) & set(current.levels) and not ratios:
            raise GateInputError("the runs share no load level: nothing to compare "
                                 f"(baseline {sorted(baseline.levels)}, current {sorted(current.levels)})")
        result = run_gate(baseline, current, thresholds, ratios, baselines)
    except ValueError as exc:  # GateInputError and bad thresholds alike
        print(f"servecap gate: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    if problems:
        result.notes.append("compared despite differences (--force): " + "; ".join(problems))
    result.notes.append(DRIFT_NOTE)
    baseline_label = " + ".join(args.baseline)
    markdown = to_markdown(result, baseline_label, args.current)
    out = _markdown_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as summary_file:
            summary_file.write(markdown)
    print(json.dumps(to_json(result, baseline_label, args.current), indent=2) if args.json else markdown)
    if result.failed:
        return EXIT_REGRESSION
    return EXIT_UNDECIDED if result.undecided else EXIT_PASS


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Validate `servecap calc simulate` against published end-to-end serving curves the roofline was not fitted on.

    .venv/bin/python -m lab.calculators.serving_curves                       # every curve, engine as published
    .venv/bin/python -m lab.calculators.serving_curves --engine-rule vllm    # every curve sized and timed as vLLM
    .venv/bin/python -m lab.calculators.serving_curves --summary-only --source SOURCE --model M --gpu G
    .venv/bin/python -m lab.calculators.serving_curves --jobs 2 --json      # two processes, one JSON object

Data: calculators/roofline_fit/published_serving_curves.csv (one published number a row: TTFT, ITL or
output throughput of a named model, GPU, dtype, TP degree, engine and fixed input/output lengths at one
closed-loop concurrency or open-loop request rate), sources in serving_curve_sources.json. None of its
sources is a source of the roofline fit (roofline_fit/published_points.csv).

Each curve (same configuration and lengths) is simulated once over its load levels, in process, exactly as
`servecap calc simulate --json --model M --gpu G --dtype D --tp N [--engine E] --prompt-tokens IN
--output-tokens OUT --concurrency ...` (or `--rates ...`) runs: the CLI's own parser and command, so every
other setting is calc simulate's default (continuous batching, the engine's sizing on that GPU, the fitted
efficiency profile, its request count and seed). --engine-rule picks E: `published` (the row's engine where calc
simulate knows it, else vLLM's rule), `vllm`, `tensorrt-llm`, or `none` (no --engine flag).

Compared like with like: a published mean against the simulated mean, a median or pN against the simulated
pN; ITL against the simulator's per-request TPOT ((e2e - TTFT) / (output tokens - 1), the quantity
GenAI-Perf's and vLLM's benchmark average); output throughput (aggregate, tokens/s) against the simulated
output tokens/s of the measure window. Error = predicted / published - 1.

Prints a line per load level (published, predicted, error per metric), then the median |error| per metric
overall, per source, per configuration and per input/output lengths against the targets (TARGETS: ITL and
throughput 15%, TTFT 30%), the points furthest off, any curve the simulator refused or crashed on, and the
wall time. --jobs N simulates N curves at once in separate processes.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from importlib import resources

from calculators.cli.args import build_parser
from calculators.cli.commands import cmd_simulate

METRICS = ("ttft_ms", "itl_ms", "output_tok_s")
TARGETS = {"ttft_ms": 0.30, "itl_ms": 0.15, "output_tok_s": 0.15}
LABELS = {"ttft_ms": "TTFT", "itl_ms": "ITL", "output_tok_s": "throughput"}
SIM_ENGINES = ("tensorrt-llm", "vllm", "sglang", "lmdeploy", "gpt-fast")   # calc simulate --engine choices
ENGINE_RULES = ("published", "vllm", "tensorrt-llm", "none")
# published statistic -> the simulator's summary key (SimResult.metrics[...] has count, mean, p50, p90, p95, p99)
STATISTICS = {"mean": "mean", "median": "p50", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}
COLUMNS = ("id", "source", "engine", "engine_version", "model", "gpu", "dtype", "tp", "input_tokens", "output_tokens",
           "load_kind", "load", "metric", "statistic", "value", "unit", "note")
CURVE_KEY = ("source", "engine", "engine_version", "model", "gpu", "dtype", "tp", "input_tokens", "output_tokens",
             "load_kind")


@dataclass(frozen=True)
class Row:
    id: str
    source: str
    engine: str
    engine_version: str
    model: str
    gpu: str
    dtype: str
    tp: int
    input_tokens: int
    output_tokens: int
    load_kind: str
    load: float
    metric: str
    statistic: str
    value: float
    unit: str
    note: str

    def curve(self) -> tuple:
        return tuple(getattr(self, k) for k in CURVE_KEY)


def load_rows(text: str | None = None) -> list[Row]:
    """The CSV's rows; ValueError names the line of a malformed one."""
    if text is None:
        text = resources.files("calculators").joinpath("roofline_fit/published_serving_curves.csv").read_text()
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise ValueError(f"published_serving_curves.csv: columns must be {', '.join(COLUMNS)}")
    rows = []
    for line, raw in enumerate(reader, start=2):
        try:
            row = Row(**{**raw, "tp": int(raw["tp"]), "input_tokens": int(raw["input_tokens"]),
                         "output_tokens": int(raw["output_tokens"]), "load": float(raw["load"]),
                         "value": float(raw["value"])})
        except (TypeError, ValueError) as error:
            raise ValueError(f"published_serving_curves.csv line {line}: {error}") from None
        problems = []
        if row.metric not in METRICS:
            problems.append(f"metric {row.metric!r}")
        elif row.statistic not in (("aggregate",) if row.metric == "output_tok_s" else STATISTICS):
            problems.append(f"statistic {row.statistic!r} for {row.metric}")
        elif row.unit != ("tok/s" if row.metric == "output_tok_s" else "ms"):
            problems.append(f"unit {row.unit!r} for {row.metric}")
        if row.load_kind not in ("concurrency", "rate_rps"):
            problems.append(f"load_kind {row.load_kind!r}")
        if not (row.load > 0 and row.value > 0):
            problems.append("load and value must be positive")
        if row.load_kind == "concurrency" and row.load != int(row.load):
            problems.append("a concurrency must be a whole number")
        if problems:
            raise ValueError(f"published_serving_curves.csv line {line}: {'; '.join(problems)}")
        rows.append(row)
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError("published_serving_curves.csv: ids must be unique")
    return rows


def load_curve_sources() -> dict[str, dict]:
    raw = json.loads(resources.files("calculators").joinpath("roofline_fit/serving_curve_sources.json").read_text())
    return {key: value for key, value in raw.items() if not key.startswith("_")}


def simulator_engine(published: str, rule: str) -> str | None:
    """The --engine flag a curve is simulated with (None: none given)."""
    if rule == "none":
        return None
    if rule == "published":
        return published if published in SIM_ENGINES else "vllm"
    return rule


def _level(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def simulate_argv(curve: dict, levels: list[float], engine: str | None) -> list[str]:
    """`servecap calc simulate` arguments for one curve: the configuration only, everything else default."""
    argv = ["simulate", "--json", "--model", curve["model"], "--gpu", curve["gpu"], "--dtype", curve["dtype"],
            "--tp", str(curve["tp"]), "--prompt-tokens", str(curve["input_tokens"]),
            "--output-tokens", str(curve["output_tokens"]),
            "--concurrency" if curve["load_kind"] == "concurrency" else "--rates", ",".join(map(_level, levels))]
    return argv + (["--engine", engine] if engine else [])


def run_simulate(argv: list[str]) -> dict:
    """calc simulate in process: the CLI's parser (its defaults) and command, its --json output parsed."""
    args = build_parser().parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cmd_simulate(args)
    return json.loads(out.getvalue())


def predicted(point: dict, metric: str, statistic: str) -> float | None:
    """One of calc simulate's --json levels: its figure for a published row's metric."""
    if metric == "output_tok_s":
        return point["output_tokens_per_s"]
    figures = point["metrics"]["ttft_s" if metric == "ttft_ms" else "tpot_s"]
    value = figures.get(STATISTICS[statistic])
    return None if value is None else value * 1e3


@dataclass
class Outcome:
    row: Row
    engine: str | None
    predicted: float | None = None
    error: float | None = None
    failure: str | None = None


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    curves: int = 0
    wall_s: float = 0.0


def _simulate_curve(argv: list[str]) -> tuple[dict | None, dict | None]:
    """(calc simulate's JSON, None), or (None, the failure): a refusal (ValueError) or a crash, never skipped."""
    try:
        return run_simulate(argv), None
    except Exception as error:  # noqa: BLE001 - a crash is reported, not skipped
        kind = "refused" if isinstance(error, ValueError) else "crashed"
        return None, {"kind": kind, "argv": "servecap calc " + " ".join(argv),
                      "error": f"{type(error).__name__}: {error}",
                      "traceback": None if kind == "refused" else traceback.format_exc()}


def validate(rows: list[Row], rule: str = "published", jobs: int = 1, progress=None) -> Report:
    """Simulate each curve once over its load levels (`jobs` processes) and compare every row."""
    report = Report()
    start = time.perf_counter()
    curves: dict[tuple, list[Row]] = {}
    for row in rows:
        curves.setdefault(row.curve(), []).append(row)
    tasks = []
    for key, members in curves.items():
        curve = dict(zip(CURVE_KEY, key))
        engine = simulator_engine(curve["engine"], rule)
        tasks.append((members, engine, simulate_argv(curve, sorted({r.load for r in members}), engine)))
    if jobs > 1:   # the processes run curves, each curve's levels in its own process
        tasks = [(members, engine, argv + ["--jobs", "1"]) for members, engine, argv in tasks]
        from concurrent.futures import ProcessPoolExecutor
        pool = ProcessPoolExecutor(max_workers=jobs)
        results = pool.map(_simulate_curve, [argv for _, _, argv in tasks])
    else:
        pool, results = None, map(_simulate_curve, [argv for _, _, argv in tasks])
    try:
        for (members, engine, _), (result, failure) in zip(tasks, results):
            report.curves += 1
            if progress:
                progress(report.curves, len(tasks))
            if failure is not None:
                report.failures.append(failure)
                report.outcomes += [Outcome(r, engine, failure=failure["kind"]) for r in members]
                continue
            by_level = {}
            for point in result["levels"]:   # calc simulate's JSON
                offered = point["offered"]
                by_level[float(offered.get("concurrency") or offered.get("rate_rps"))] = point
            for row in members:
                value = predicted(by_level[row.load], row.metric, row.statistic)
                report.outcomes.append(Outcome(row, engine, value, None if value is None else value / row.value - 1))
    finally:
        if pool is not None:
            pool.shutdown()
    report.wall_s = time.perf_counter() - start
    return report


def _median_abs(outcomes: list[Outcome]) -> tuple[float | None, int]:
    errors = [abs(o.error) for o in outcomes if o.error is not None]
    return (statistics.median(errors) if errors else None, len(errors))


def medians(outcomes: list[Outcome]) -> dict[str, dict]:
    out = {}
    for metric in METRICS:
        median, n = _median_abs([o for o in outcomes if o.row.metric == metric])
        median_signed = [o.error for o in outcomes if o.row.metric == metric and o.error is not None]
        out[metric] = {"median_abs_error": median, "points": n, "target": TARGETS[metric],
                       "median_error": statistics.median(median_signed) if median_signed else None,
                       "met": None if median is None else median <= TARGETS[metric]}
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def _abs_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _config(row: Row) -> str:
    return f"{row.model} {row.gpu} {row.dtype} tp{row.tp}"


def print_points(report: Report) -> None:
    print("Per load level: published / predicted (error = predicted / published - 1); "
          "TTFT and ITL in ms (mean unless marked), throughput in output tokens/s")
    ordered: dict[tuple, list[Outcome]] = {}
    for o in report.outcomes:
        ordered.setdefault((o.row.curve(), o.row.load), []).append(o)
    last_curve = None
    for (curve, load), members in ordered.items():
        row = members[0].row
        if curve != last_curve:
            engine = members[0].engine or "(none)"
            print(f"\n{row.source}: {_config(row)}, {row.engine} {row.engine_version}, "
                  f"{row.input_tokens} in / {row.output_tokens} out; simulated with --engine {engine}")
            print(f"  {row.load_kind:>11} | {'TTFT pub':>9} {'pred':>9} {'err':>6} | {'ITL pub':>8} {'pred':>8} "
                  f"{'err':>6} | {'tok/s pub':>9} {'pred':>9} {'err':>6}")
            last_curve = curve
        cells = {m: [o for o in members if o.row.metric == m] for m in METRICS}
        # repeated runs at one level (published twice) print one line each
        for k in range(max(len(v) for v in cells.values())):
            parts = []
            for m in METRICS:
                o = cells[m][k] if k < len(cells[m]) else None
                if o is None:
                    parts.append(f"{'':>9} {'':>9} {'':>6}" if m != "itl_ms" else f"{'':>8} {'':>8} {'':>6}")
                    continue
                pub = _num(o.row.value) + ("" if o.row.statistic in ("mean", "aggregate") else f"({o.row.statistic})")
                pred = o.failure or _num(o.predicted)
                width = 8 if m == "itl_ms" else 9
                parts.append(f"{pub:>{width}} {pred:>{width}} {_pct(o.error):>6}")
            print(f"  {_level(load):>11} | " + " | ".join(parts))


def summary_rows(report: Report, by) -> list[dict]:
    groups: dict[str, list[Outcome]] = {}
    for o in report.outcomes:
        groups.setdefault(by(o.row), []).append(o)
    rows = []
    for name, members in groups.items():
        meds = medians(members)
        rows.append({"group": name, **{m: meds[m] for m in METRICS}})
    return rows


def print_summary_table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    width = max([len(r["group"]) for r in rows] + [5])
    print(f"  {'group':<{width}} | " + " | ".join(f"{LABELS[m] + ' |err| (n)':>22}" for m in METRICS))
    for r in rows:
        cells = [f"{_abs_pct(r[m]['median_abs_error']):>8} ({r[m]['points']:>4}) {_pct(r[m]['median_error']):>6}"
                 for m in METRICS]
        print(f"  {r['group']:<{width}} | " + " | ".join(f"{c:>22}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine-rule", choices=ENGINE_RULES, default="published",
                        help="which --engine calc simulate gets: the published engine (default), one for all, or none")
    parser.add_argument("--source", action="append", help="only this source id (repeatable)")
    parser.add_argument("--model", action="append", help="only this model (repeatable)")
    parser.add_argument("--gpu", action="append", help="only this GPU (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="simulate this many curves at once (processes; default 1)")
    parser.add_argument("--summary-only", action="store_true", help="leave out the per-level table")
    parser.add_argument("--worst", type=int, default=15, help="list this many points furthest off (default 15)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    rows = load_rows()
    sources = load_curve_sources()
    unknown = sorted({r.source for r in rows} - set(sources))
    if unknown:
        raise SystemExit(f"published_serving_curves.csv: sources missing from serving_curve_sources.json: {unknown}")
    rows = [r for r in rows if (not args.source or r.source in args.source)
            and (not args.model or r.model in args.model) and (not args.gpu or r.gpu in args.gpu)]
    if not rows:
        raise SystemExit("no published point matches those filters")
    progress = None if args.json else (lambda done, total: print(f"  simulated {done}/{total} curves", end="\r",
                                                                 file=sys.stderr, flush=True))
    report = validate(rows, args.engine_rule, max(1, args.jobs), progress)
    overall = medians(report.outcomes)
    by_source = summary_rows(report, lambda r: r.source)
    by_config = summary_rows(report, lambda r: f"{r.source}: {_config(r)}")
    by_lengths = summary_rows(report, lambda r: f"{r.input_tokens}/{r.output_tokens}")
    worst = sorted((o for o in report.outcomes if o.error is not None), key=lambda o: -abs(o.error))[:args.worst]
    total_s = time.perf_counter() - started
    if args.json:
        print(json.dumps({
            "engine_rule": args.engine_rule, "points": len(rows), "curves": report.curves,
            "statistics_compared": {**{k: f"simulated {v}" for k, v in STATISTICS.items()},
                                    "aggregate": "simulated output_tokens_per_s"},
            "overall": overall, "by_source": by_source, "by_configuration": by_config, "by_lengths": by_lengths,
            "failures": report.failures,
            "points_detail": [{"id": o.row.id, "metric": o.row.metric, "statistic": o.row.statistic,
                               "published": o.row.value, "predicted": o.predicted, "error": o.error,
                               "engine": o.engine, "failure": o.failure} for o in report.outcomes],
            "simulate_wall_s": report.wall_s, "total_wall_s": total_s}, indent=1))
        return 0 if all(v["met"] for v in overall.values()) and not report.failures else 1
    print(" " * 40, end="\r", file=sys.stderr)
    if not args.summary_only:
        print_points(report)
    print(f"\nStatistics compared: published mean vs simulated mean; median/p50 vs simulated p50; pN vs simulated pN; "
          f"ITL vs simulated per-request TPOT; aggregate output tok/s vs simulated output tokens/s. "
          f"Engine rule: {args.engine_rule}.")
    print_summary_table("Median |error| (points) and median signed error, per source", by_source)
    print_summary_table("Per configuration", by_config)
    print_summary_table("Per input/output lengths", by_lengths)
    print(f"\nPoints furthest off (of {sum(o.error is not None for o in report.outcomes)}):")
    for o in worst:
        r = o.row
        print(f"  {r.id}: {_config(r)} {r.input_tokens}/{r.output_tokens} {r.load_kind} {_level(r.load)} "
              f"{LABELS[r.metric]} ({r.statistic}) published {_num(r.value)} predicted {_num(o.predicted)} "
              f"error {_pct(o.error)}")
    if report.failures:
        print(f"\nCurves the simulator refused or crashed on ({len(report.failures)}):")
        for f in report.failures:
            print(f"  {f['kind']}: {f['argv']}\n    {f['error']}")
            if f["traceback"]:
                print("    " + f["traceback"].replace("\n", "\n    "))
    print(f"\nOverall, {len(rows)} published points in {report.curves} curves "
          f"({len({r.source for r in rows})} source(s)):")
    for metric in METRICS:
        o = overall[metric]
        met = "-" if o["met"] is None else ("met" if o["met"] else "NOT met")
        print(f"  {LABELS[metric]:>10}: median |error| {_abs_pct(o['median_abs_error'])} over {o['points']} points "
              f"(median signed {_pct(o['median_error'])}); target <= {o['target']:.0%}: {met}")
    print(f"wall time: {total_s:.1f} s ({report.wall_s:.1f} s simulating {report.curves} curves, "
          f"{max(1, args.jobs)} process(es))")
    return 0 if all(v["met"] for v in overall.values()) and not report.failures else 1


if __name__ == "__main__":
    raise SystemExit(main())

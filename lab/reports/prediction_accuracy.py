"""Leave-one-level-out accuracy of the calibrated simulator on measured runs, and where its error comes from.

    python -m lab.reports.prediction_accuracy runs/t13-continuous [runs/t13-static ...]
        [--rerun runs/t13-continuous-rerun ...] [--sources] [--replications 8] [--json]

Per strategy and metric: the median |predicted / measured - 1| over the levels below the knee: at most
80% of the strategy's top output tokens/s, at a lower load than the top's (summary.json's `validation`,
reports.predict.validation.levels_below_knee; issue 13's targets: 10% at p50, 15% at p99). --sources adds the decomposition of lab.reports.error_sources (the error with the machine's speed
at the held-out level, or the step model, or the front end taken from the held-out level itself, and
one run's noise floor); the "widest gap" column is the widest load ratio between the two levels a
held-out level in the median lay between (summary.json's validation, reports.predict.validation.widest_gap);
--rerun gives a run
that measured one level again, for the machine's drift between two measurements of the same level.
A run measured in rounds also gets its "rounds floor" row: the median |error| a model that knew each
level's expectation exactly would still show, from the spread of the level's own rounds
(lab.reports.round_spread); a leave-one-level-out error well above it is not the held-out level's noise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.reports.error_sources import VARIANTS, drift, error_sources
from lab.reports.round_spread import level_round_spreads, rounds_floor
from reports.predict.evidence import level_samples
from reports.run_data import load_run
from reports.summary import build_levels
from reports.predict.validation import KEYS, validate
from contract.level_result import Distribution

TARGETS = {"p50": 0.10, "p99": 0.15}


def _pct(value) -> str:
    return "   -  " if value is None else f"{value:6.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (each with the engine's step record)")
    parser.add_argument("--rerun", nargs="*", default=[], help="runs that measured one of the levels again")
    parser.add_argument("--sources", action="store_true", help="decompose the error (3 more predictions a level)")
    parser.add_argument("--replications", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out: dict = {"targets": TARGETS, "strategies": {}}
    measured_levels: dict[str, dict[str, Distribution]] = {}
    for run_dir in args.runs:
        data = load_run(run_dir)
        levels = build_levels(data, data.run.slo)
        measured_levels.update({lvl.level: lvl.metrics for lvl in levels})
        samples = level_samples(data, levels)
        validation = validate(data.run, samples, replications=args.replications).summary
        ok = data.records[data.measured_ok()]
        spreads = {level: level_round_spreads(frame, KEYS)
                   for level, frame in ok.groupby("level", sort=False, observed=True)}
        sources = error_sources(data.run, samples, replications=args.replications) if args.sources else {}
        for strategy, entry in validation.by_strategy.items():
            # its levels by the samples': an external server's are named without a strategy ("c=4")
            names = {sample.level for sample in samples.get(strategy, [])}
            # two runs of one strategy (repeats) keep both rows: named by their run directory
            key = strategy if len(args.runs) == 1 else f"{strategy}@{Path(run_dir).name}"
            out["strategies"][key] = {
                "run": str(run_dir), "median_abs_error": dict(entry.median_abs_error),
                "levels_in_median": list(entry.levels_in_median),
                "levels": {name: {k: v.relative_error for k, v in pairs.items()}
                           for name, pairs in validation.levels.items() if name in names},
                "rounds_floor": rounds_floor([spreads.get(name) for name in entry.levels_in_median], KEYS),
                "widest_gap": entry.widest_gap,
                "sources": sources.get(strategy, {}).get("median_abs"),
                "machine_speed": {name: level_sources.get("speed") for name, level_sources in
                                  (sources.get(strategy, {}).get("levels") or {}).items()},
                "source_levels": sources.get(strategy, {}).get("levels")}
    for run_dir in args.rerun:
        data = load_run(run_dir)
        for lvl in build_levels(data, data.run.slo):
            if lvl.level in measured_levels:
                out.setdefault("drift", {})[lvl.level] = drift(measured_levels[lvl.level], lvl.metrics)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        _print(out)
    return 0


def _print(out: dict) -> None:
    print("leave-one-level-out median |predicted / measured - 1| "
          "(levels below the knee: <= 80% of the top tok/s, at a lower load)")
    print(f"{'strategy':>11} {'levels':>6}  " + " ".join(f"{k:>12}" for k in KEYS) + "  widest gap")
    print(f"{'target':>11} {'':>6}  " + " ".join(f"{TARGETS[k.split('.')[1]]:>12.0%}" for k in KEYS))
    for strategy, entry in out["strategies"].items():
        gap = "" if entry["widest_gap"] is None else f"{entry['widest_gap']:.1f}x"
        print(f"{strategy:>11} {len(entry['levels_in_median']):>6}  "
              + " ".join(f"{_pct(entry['median_abs_error'][k]):>12}" for k in KEYS) + f"  {gap:>10}")
        if entry["rounds_floor"]:
            print(f"{'rounds floor':>18}  " + " ".join(f"{_pct(entry['rounds_floor'][k]):>12}" for k in KEYS))
    for strategy, entry in out["strategies"].items():
        if entry["sources"]:
            print(f"\n{strategy}: error by source (median |error| over the same levels)")
            for variant in VARIANTS:
                print(f"  {variant:>14}  " + " ".join(f"{_pct(entry['sources'][variant][k]):>12}" for k in KEYS))
            speeds = ", ".join(f"{name.split('/')[-1]} {'-' if v is None else f'{v:.2f}'}"
                               for name, v in entry["machine_speed"].items())
            print(f"  machine speed at each held-out level / the others' (same batch shapes): {speeds}")
    for level, errors in (out.get("drift") or {}).items():
        print(f"\ndrift, {level} measured again: " + " ".join(f"{k} {_pct(errors[k])}" for k in KEYS))


if __name__ == "__main__":
    sys.exit(main())

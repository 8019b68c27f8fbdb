"""Does the canary (loadgen.observe.canary) track the engine's own speed? Per measured window of a run.

    python -m lab.reports.canary_tracking runs/x [runs/y ...] [--json]

For every window a level was measured in (one per round), two speeds relative to the run's usual:
- the engine's: the two-way fit of reports.diagnostics.machine_speed.level_speeds with each window as its own
  "level" (its steps against the same shapes in every other window);
- the canary's, per core and unit: its median time for the fixed unit inside the window over its
  median over the whole run (reports.diagnostics.canary_speed), in CPU time and in wall time; each core's steal
  share (the time the hypervisor took: 1 / (1 - share) stretches wall time); and CPU time with steal.

Prints, per canary series, the correlation of log speeds across windows (Pearson r, with its p
value, scipy.stats), the least-squares slope, and how much of the engine's spread is left once each
window is divided by the canary's speed: sd(log engine) against sd(log engine - slope x log canary).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pandas as pd
from scipy import stats

from reports.diagnostics.canary_speed import window_speeds
from reports.diagnostics.machine_speed import level_speeds
from reports.run_data import load_run


def blocks(run_dir: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(engine speed per window, canary speed per window x series) for one run."""
    data = load_run(run_dir)
    if data.engine_steps is None or data.canary is None:
        raise SystemExit(f"{run_dir}: needs engine_steps.csv and canary.csv")
    windows = {f"{level}#{k}": span for level, spans in data.level_windows().items()
               for k, span in enumerate(spans)}
    steps = data.engine_steps
    t = steps["t_start"].to_numpy(dtype=float)
    by_window = {name: steps[(t >= a) & (t < b)] for name, (a, b) in windows.items()}
    engine = pd.Series(level_speeds(by_window), name="engine")
    canary = pd.DataFrame({name: window_speeds(data.canary, [span]) for name, span in windows.items()}).T
    canary = canary.apply(lambda col: col.map(lambda v: v[0] if isinstance(v, tuple) else np.nan))
    return engine, canary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = {}
    for run_dir in args.runs:
        engine, canary = blocks(run_dir)
        rows = {}
        logs = {}
        for series in canary.columns:
            values = canary[series].astype(float)
            if series.endswith(" steal"):
                logs[series] = -np.log1p(-values.clip(upper=0.95))     # time stretched by 1 / (1 - steal)
            else:
                logs[series] = np.log(values)
        for series in [c for c in canary.columns if c.endswith(" cpu")]:
            steal = f"{series.split()[0]} steal"
            if steal in logs:
                logs[f"{series} + steal"] = logs[series] + logs[steal]
        for series, log_speed in logs.items():
            joined = pd.concat([np.log(engine), log_speed], axis=1).dropna()
            if len(joined) < 3:
                continue
            y, x = joined.iloc[:, 0].to_numpy(), joined.iloc[:, 1].to_numpy()
            r, p = stats.pearsonr(x, y)
            slope = float(np.polyfit(x, y, 1)[0])
            rows[series] = {"windows": len(joined), "r": float(r), "p": float(p), "slope": slope,
                            "sd_engine": float(np.std(y)), "sd_left": float(np.std(y - slope * x)),
                            "sd_left_slope1": float(np.std(y - x)), "sd_canary": float(np.std(x))}
        out[run_dir] = rows
        if not args.json:
            print(f"{run_dir}: {len(engine)} windows, engine speed {engine.min():.2f}-{engine.max():.2f}")
            print(f"  {'series':28} {'n':>3} {'r':>6} {'p':>7} {'slope':>6} {'sd eng':>7} {'left':>6} "
                  f"{'left@1':>6} {'sd can':>6}")
            for series, row in rows.items():
                print(f"  {series:28} {row['windows']:3d} {row['r']:6.2f} {row['p']:7.3f} {row['slope']:6.2f} "
                      f"{row['sd_engine']:7.3f} {row['sd_left']:6.3f} {row['sd_left_slope1']:6.3f} "
                      f"{row['sd_canary']:6.3f}")
    if args.json:
        json.dump(out, sys.stdout, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

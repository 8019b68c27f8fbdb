"""Is the front end a queue at core 0? A FIFO replay of each level on the engine's own events, against the curves.

    python -m lab.reports.front_end_replay runs/r6-continuous-dynamic [more runs ...]

For each strategy with an engine step and request record, per level: the measured mean front-end delay
(in + first_out + last_out, over the level's measured requests), and three predictions of it:
  fifo in-sample   lab.reports.core_queue's FIFO server, its five works fitted on every level at once
  fifo held out    the same, fitted without the level, replayed on the level's own engine events (an
                   upper bound on what the FIFO could do inside the simulator, which would have to
                   simulate those events)
  curves held out  the validation's model (calculators.sim.front_end.FrontEndByLoad on the other levels:
                   the queue over tokens/s or the power over the load), at the level's measured load and
                   output tokens/s
and the median |error| of each over the levels the validation's medians count (below the knee).
Every job of the run feeds the core, warm-up requests and every level's steps included.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from lab.reports.core_queue import core_jobs, fit_work, replay
from calculators.sim.front_end import FrontEndByLoad
from reports.predict.evidence import level_samples
from reports.run_data import load_run
from reports.summary import build_levels
from reports.predict.validation import levels_below_knee

COLUMNS = ("fifo in-sample", "fifo held out", "curves held out")


def _strategy_jobs(data, strategy: str):
    """(jobs, measured [3, n], level name per request [n], measured mask [n]) for one strategy's server,
    or None without its engine records."""
    steps, engine = data.engine_steps, data.engine_requests
    if steps is None or engine is None:
        return None
    steps = steps[steps["source"].astype(str) == strategy]
    mine = data.records[(data.records["strategy"] == strategy) & (data.records["status"] == "ok")]
    joined = mine[["level", "phase", "response_id", "t_start", "ttft_s", "e2e_s"]].merge(
        engine[["response_id", "t_arrival", "t_first_token", "t_finish"]].drop_duplicates("response_id"),
        on="response_id", how="inner").dropna()
    if steps.empty or joined.empty:
        return None
    send, first, finish = (joined[c].to_numpy(float) for c in ("t_start", "t_first_token", "t_finish"))
    jobs = core_jobs(send, first, finish, (steps["t_start"] + steps["step_s"]).to_numpy(float),
                     steps["batch"].to_numpy(float))
    measured = np.vstack([joined["t_arrival"].to_numpy(float) - send,
                          send + joined["ttft_s"].to_numpy(float) - first,
                          send + joined["e2e_s"].to_numpy(float) - finish])
    return jobs, measured, joined["level"].to_numpy(str), (joined["phase"] == "measure").to_numpy()


def _curves_held_out(group, k: int) -> float | None:
    """The mean total delay FrontEndByLoad on the other levels gives level k (None without front ends)."""
    others = [s for i, s in enumerate(group) if i != k and s.front_end is not None]
    if not others or group[k].front_end is None:
        return None
    by_load = FrontEndByLoad(tuple(s.streams for s in others), tuple(s.front_end for s in others),
                             tuple(s.output_tokens_per_s or 0.0 for s in others))
    means = by_load.at(group[k].streams, group[k].output_tokens_per_s).mean_s
    return means["in_s"] + means["first_out_s"] + means["last_out_s"]


def _mean_total(delays: np.ndarray, mask: np.ndarray) -> float:
    """Mean over the masked requests of in + first_out + last_out (delays: [3, n])."""
    return float(delays[:, mask].sum(axis=0).mean())


def strategy_table(data, strategy: str, group, progress=print) -> dict | None:
    """{"work": fitted on every level (ms), "levels": {level: {"measured", column: value}}, "median": {column: x}}."""
    built = _strategy_jobs(data, strategy)
    if built is None:
        return None
    jobs, measured, level_of, in_window = built
    names = [s.level for s in group]
    masks = [(level_of == name) & in_window for name in names]
    keep = [i for i, m in enumerate(masks) if m.any()]
    everywhere = fit_work(jobs, measured, [masks[i] for i in keep])
    in_sample = replay(jobs, everywhere)
    rows = {}
    for i in keep:
        progress(f"  {names[i]}: fitting without it")
        held = replay(jobs, fit_work(jobs, measured, [masks[j] for j in keep if j != i]))
        rows[names[i]] = {"measured": _mean_total(measured, masks[i]), COLUMNS[0]: _mean_total(in_sample, masks[i]),
                          COLUMNS[1]: _mean_total(held, masks[i]), COLUMNS[2]: _curves_held_out(group, i)}
    counted = [name for name in levels_below_knee(group) if name in rows]
    median = {c: float(np.median([abs(rows[n][c] / rows[n]["measured"] - 1) for n in counted]))
              if counted and all(rows[n][c] is not None for n in counted) else None for c in COLUMNS}
    return {"work_ms": {k: 1e3 * v for k, v in vars(everywhere).items()}, "levels": rows, "counted": counted,
            "median": median}


def _print(strategy: str, table: dict) -> None:
    work = ", ".join(f"{k} {v:.3f}" for k, v in table["work_ms"].items())
    print(f"\n{strategy}: core work fitted on every level (ms): {work}")
    print(f"{'level':18s} {'measured ms':>11s}  " + "  ".join(f"{c:>22s}" for c in COLUMNS))
    for name, row in table["levels"].items():
        cells = []
        for c in COLUMNS:
            v = row[c]
            cells.append(f"{'-':>22s}" if v is None else f"{1e3 * v:10.2f} ({v / row['measured'] - 1:+6.0%})    ")
        mark = "*" if name in table["counted"] else " "
        print(f"{name:17s}{mark} {1e3 * row['measured']:11.2f}  " + "  ".join(cells))
    print(f"{'median |error| *':30s} " + "  ".join(f"{'-':>22s}" if v is None else f"{v:21.1%} "
                                                  for v in table["median"].values()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories with the engine's step and request records")
    args = parser.parse_args(argv)
    found = False
    for run_dir in args.runs:
        data = load_run(run_dir)
        samples = level_samples(data, build_levels(data, data.run.slo))
        for strategy, group in samples.items():
            print(f"{run_dir} {strategy}: replaying {len(group)} levels", file=sys.stderr)
            try:
                table = strategy_table(data, strategy, group, progress=lambda line: print(line, file=sys.stderr))
            except ValueError as exc:   # a level without positive mean delays: nothing to fit
                print(f"{run_dir} {strategy}: cannot fit the core's work: {exc}; skipped", file=sys.stderr)
                continue
            if table is None:
                print(f"{run_dir} {strategy}: no engine step and request record; skipped", file=sys.stderr)
                continue
            found = True
            print(f"\n== {run_dir}", end="")
            _print(strategy, table)
    if not found:
        print("no run had the engine's step and request records: nothing to replay", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Agentic sessions, measured then predicted leave-one-level-out (issue 57's targets).

    python -m lab.servecap.session_predict --out runs/session-predict [--run RUN_DIR]
        [--session SPEC] [--concurrency 1,2,4,8] [--duration 20s] [--warmup 5s] [--model tiny]

Without --run it first measures: `servecap sweep --model M --session SPEC --concurrency ...` against the
reference server (real sessions: tool calls asked on the wire, the tools' waits, results sent back). Then,
for each level, the simulator is calibrated on the other levels (the step record and the front end, as
`servecap predict` calibrates: reports.predict.calibration) and runs that level's sessions
(calculators.sim.sessions: the same spec, the engine's scheduler and block manager). Compared per level:
the main agent's TTFT p50 and p99 per turn, the session completion p50, and each turn's prefix-cache
share (the server's own count, from its usage) beside the predicted one. The medians over levels and turns
are printed with the targets.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from calculators.sim.sessions import simulate_sessions
from calculators.sim.simulate import SimWorkload
from contract.distributions import parse_length_distribution
from contract.workload import WorkloadSpec
from reports.predict.calibration import calibrate, strategy_server
from reports.predict.evidence import level_samples
from reports.run_data import load_run
from reports.sessions import answers_read_back
from reports.summary import build_levels

SPEC = "turns:3,tools:1-2,tool-latency:lognormal:0.1:0.5,tool-result:uniform:16:48,fanout:0-2,schemas:1"
TARGETS = {"ttft_p50": 0.15, "ttft_p99": 0.25, "completion_p50": 0.10, "cache_points": 5.0}


def _measure(out: Path, args) -> Path:
    run = out / "run"
    cmd = [sys.executable, "-m", "servecap", "sweep", "--model", args.model, "--concurrency", args.concurrency,
           "--session", args.session, "--prompt-tokens", args.prompt_tokens, "--output-tokens", args.output_tokens,
           "--duration", args.duration, "--warmup", args.warmup, "--out", str(run), "--no-report"]
    print(" ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return run


def _err(predicted, measured):
    if predicted is None or measured in (None, 0):
        return None
    return predicted / measured - 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--run", help="a measured session sweep to predict (else one is measured first)")
    parser.add_argument("--session", default=SPEC)
    parser.add_argument("--concurrency", default="1,2,4,8")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--prompt-tokens", default="uniform:16:48")
    parser.add_argument("--output-tokens", default="uniform:8:24")
    parser.add_argument("--answers-cached", choices=("measured", "yes", "no"), default="measured",
                        help="whether the served model's answers read back as the ids it generated, so a returning "
                             "request finds them cached: by default read from the calibration levels' own counts "
                             "(reports.sessions.answers_read_back); the reference server's seeded random weights "
                             "send text its byte tokenizer does not read back (a 64-token answer is 68 bytes)")
    parser.add_argument("--duration", default="20s")
    parser.add_argument("--warmup", default="5s")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(args.run) if args.run else _measure(out, args)
    data = load_run(run_dir)
    levels = build_levels(data, data.run.slo)
    workload = WorkloadSpec.from_dict(json.loads((run_dir / "run.json").read_text())["workload"])
    spec = workload.session_spec
    if spec is None:
        raise SystemExit(f"{run_dir} is not a --session run")
    samples_by_strategy = level_samples(data, levels)
    rows = []
    for strategy, samples in samples_by_strategy.items():
        server = strategy_server(data.run, strategy)
        for k, sample in enumerate(samples):
            level = next(lvl for lvl in levels if lvl.level == sample.level)
            calibration = calibrate([s for j, s in enumerate(samples) if j != k], server)
            others = data.records[data.records["level"].astype(object).isin(
                [s.level for j, s in enumerate(samples) if j != k])]
            answers_cached = (args.answers_cached == "yes" if args.answers_cached != "measured"
                              else answers_read_back(others) is not False)
            c = int(sample.load)
            sim_workload = SimWorkload(prompt_tokens=workload.prompt_lengths,
                                       output_tokens=workload.output_lengths, concurrency=c,
                                       requests=4000 + 400 * c, warmup_s=sample.warmup_s,
                                       duration_s=sample.duration_s, seed=k)
            front = calibration.front_end
            first = simulate_sessions(calibration.server, sim_workload, calibration.step_model,
                                      spec, None if front is None else front.at(c), workload.think_time_s,
                                      answers_cached=answers_cached)
            tps = first.result.output_tokens_per_s
            predicted = simulate_sessions(calibration.server, replace(sim_workload, seed=k + 100),
                                          calibration.step_model_at(tps), spec,
                                          None if front is None else front.at(c, tps), workload.think_time_s,
                                          answers_cached=answers_cached)
            measured_sessions = level.sessions
            row = {"level": sample.level, "answers_cached": answers_cached, "sessions": {
                "measured_completed": measured_sessions.completed if measured_sessions else None,
                "predicted_completed": predicted.sessions_completed,
                "completion_p50": [predicted.completion_p50_s,
                                   measured_sessions.completion_s.p50 if measured_sessions else None]},
                   "turns": {}}
            for turn, t in (level.by_turn or {}).items():
                p = predicted.by_turn.get(int(turn))
                if p is None:
                    continue
                row["turns"][turn] = {
                    "ttft_p50": [p.ttft_p50_s, t.ttft_s.p50], "ttft_p99": [p.ttft_p99_s, t.ttft_s.p99],
                    "cache_share": [p.cached_share, t.cached_share],
                    "prompt_tokens_mean": [p.prompt_tokens_mean, t.prompt_tokens_mean]}
            rows.append(row)
    summary = _summary(rows)
    result = {"run": str(run_dir), "session": workload.session, "targets": TARGETS, "levels": rows,
              "median": summary}
    (out / "session_predict.json").write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        _print(rows, summary)
    return 0


def _summary(rows: list[dict]) -> dict:
    ttft50 = [abs(_err(*v["ttft_p50"])) for r in rows for v in r["turns"].values() if _err(*v["ttft_p50"]) is not None]
    ttft99 = [abs(_err(*v["ttft_p99"])) for r in rows for v in r["turns"].values() if _err(*v["ttft_p99"]) is not None]
    completion = [abs(_err(*r["sessions"]["completion_p50"])) for r in rows
                  if _err(*r["sessions"]["completion_p50"]) is not None]
    points = [abs(v["cache_share"][0] - v["cache_share"][1]) * 100 for r in rows for v in r["turns"].values()
              if None not in v["cache_share"]]
    med = (lambda xs: float(np.median(xs)) if xs else None)
    return {"ttft_p50": med(ttft50), "ttft_p99": med(ttft99), "completion_p50": med(completion),
            "cache_points": med(points), "cache_points_max": max(points) if points else None}


def _print(rows: list[dict], summary: dict) -> None:
    def pct(x):
        return "-" if x is None else f"{x:+.1%}"
    for r in rows:
        c = r["sessions"]["completion_p50"]
        print(f"{r['level']}: sessions completed {r['sessions']['measured_completed']} measured, "
              f"{r['sessions']['predicted_completed']} predicted; completion p50 {c[0]} vs {c[1]} s ({pct(_err(*c))})")
        for turn, v in r["turns"].items():
            print(f"  turn {turn}: TTFT p50 {pct(_err(*v['ttft_p50']))}, p99 {pct(_err(*v['ttft_p99']))}; "
                  f"prompt {v['prompt_tokens_mean'][0]:.0f} vs {v['prompt_tokens_mean'][1]:.0f}; cache share "
                  f"{v['cache_share'][0]:.1%} vs {v['cache_share'][1] if v['cache_share'][1] is None else format(v['cache_share'][1], '.1%')}")
    print("median |error|:", {k: (None if v is None else round(v, 4)) for k, v in summary.items()},
          "targets:", TARGETS)


if __name__ == "__main__":
    raise SystemExit(main())

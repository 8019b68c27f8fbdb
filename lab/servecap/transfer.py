"""Predictions that transfer (issue 37): calibrate closed loop on one workload, predict others, measure them.

    python -m lab.servecap.transfer run --out DIR [--strategies continuous,dynamic] [--repeats 2]
    python -m lab.servecap.transfer run --out DIR --url http://127.0.0.1:8000    # an external server
    python -m lab.servecap.transfer run --out DIR --vllm    # vLLM's CPU build (.venv-vllm), the tiny checkpoint
    python -m lab.servecap.transfer analyze DIR [--replications 4] [--json]

`run` measures, in this order:
    DIR/cal            the calibration: closed loop at CAL_CONCURRENCY on the sweep's default lengths
                       (what a user calibrates with: `servecap sweep --concurrency ...`)
    DIR/<what-if>_<k>  each what-if, the set repeated --repeats times in turn (k = 1, 2, ...):
        longer   3x the prompts and 2x the outputs, Poisson arrivals
        poisson  the calibration's lengths, Poisson arrivals
        gamma4   the calibration's lengths, gamma arrivals with cv^2 4 (`--arrival gamma:2`)
    each at three rates: RATE_FRACTIONS of the calibration's highest requests/s, scaled by the
    calibration's mean tokens per request over the what-if's (below saturation).

`analyze` calibrates each strategy on every level of DIR/cal and predicts every what-if level as
`servecap predict` does (the what-if's length distributions, its arrival cv^2, the rate its
schedule sent): `predicted` from the sweep's levels alone, `staged` with its calibration stage too
(`servecap sweep --calibrate`, DIR/cal/calibrate/). Then the decomposition: the same prediction with one input taken from the
what-if level's own measurement, one at a time:
    own_steps       the step model and its noise fitted on the level's own engine steps
    own_front_end   the level's own front-end delays (client minus engine, per request)
    own_lengths     the level's measured (prompt, output) pairs instead of the distributions drawn
    own_arrivals    the level's own send times replayed instead of a drawn schedule
What an input's variant removes from the error is that input's share. Every repeat's levels are
held out (the medians pool them). The noise floor is the same what-if level measured twice: the
median |run 1 / run 2 - 1|. Figures go to docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from contract.calibration_stage import STAGE_DIR

CAL_CONCURRENCY = "1,2,4,8,16"
CAL_PROMPT, CAL_OUTPUT = "uniform:32:128", "uniform:16:64"      # the sweep's defaults
WHAT_IFS = {
    "longer": {"prompt": "uniform:96:384", "output": "uniform:32:128", "arrival": "poisson"},
    "poisson": {"prompt": CAL_PROMPT, "output": CAL_OUTPUT, "arrival": "poisson"},
    "gamma4": {"prompt": CAL_PROMPT, "output": CAL_OUTPUT, "arrival": "gamma:2"},
}
RATE_FRACTIONS = (0.25, 0.45, 0.65)
WINDOW = ("--warmup", "3s", "--duration", "15s")
KEYS = tuple(f"{m}.{q}" for m in ("ttft_s", "tpot_s", "e2e_s") for q in ("p50", "p99"))   # = evidence.KEYS
VARIANTS = ("predicted", "staged", "own_steps", "own_front_end", "own_lengths", "own_arrivals")


def _mean_tokens(spec: dict) -> float:
    from contract.distributions import parse_length_distribution

    return sum(parse_length_distribution(spec[side], side).mean for side in ("prompt", "output"))


# -- measuring ----------------------------------------------------------------------------------------
def _sweep(out: Path, target: list[str], extra: list[str]) -> None:
    argv = [sys.executable, "-m", "servecap", "sweep", "--out", str(out), *target, *WINDOW, "--seed", "1", *extra]
    print("$", " ".join(argv[1:]), flush=True)
    subprocess.run(argv, check=True)


def _rates(cal: Path, strategy: str, spec: dict) -> list[float]:
    from reports.run_data import load_run
    from reports.summary import build_levels

    data = load_run(cal)
    top = max(lvl.request_rate_rps for lvl in build_levels(data, data.run.slo)
              if lvl.strategy in (strategy, None, "unknown") and lvl.request_rate_rps)
    scale = _mean_tokens({"prompt": CAL_PROMPT, "output": CAL_OUTPUT}) / _mean_tokens(spec)
    return [round(top * scale * f, 2) for f in RATE_FRACTIONS]


def run_vllm(args: argparse.Namespace) -> None:
    """`run` against vLLM's CPU build on the tiny random Llama (lab.servecap.vllm_vs_reference's server),
    one server for the whole set: its calibration and what-ifs meet the same process."""
    import tempfile

    from lab.servecap.vllm_vs_reference import REPO, build_checkpoint, vllm_spec
    from servecap.launch.process import ServerProcess

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    python = REPO / ".venv-vllm" / "bin" / "python"
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = build_checkpoint(python, Path(tmp) / "tiny")
        with ServerProcess(vllm_spec(python, checkpoint), log_path=out / "vllm.log", startup_timeout_s=600,
                           env=env) as server:
            run(argparse.Namespace(**{**vars(args), "url": server.base_url, "vllm": False}))


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    strategies = args.strategies.split(",")
    targets = ({"url": ["--url", args.url]} if args.url else
               {s: ["--model", args.model, "--strategies", s, *(["--server-args", args.server_args] if args.server_args else [])]
                for s in strategies})
    first = ["--url", args.url] if args.url else ["--model", args.model, "--strategies", args.strategies,
                                                   *(["--server-args", args.server_args] if args.server_args else [])]
    cal_flags = ["--concurrency", CAL_CONCURRENCY, "--prompt-tokens", CAL_PROMPT, "--output-tokens", CAL_OUTPUT]
    if not (out / "cal" / "run.json").exists():
        _sweep(out / "cal", first, [*cal_flags, "--calibrate"])
    elif not (out / "cal" / STAGE_DIR).exists():   # a calibration measured before the stage existed
        from rich.console import Console

        from servecap.sweep.calibrate_stage import run_stage
        from servecap.sweep.cli import _parser, config_from_args

        config = config_from_args(_parser().parse_args(["--out", str(out / "cal"), *first, *WINDOW, "--seed", "1",
                                                        *cal_flags]))
        run_stage(config, out / "cal", Console(stderr=True))
    for k in range(1, args.repeats + 1):
        for name, spec in WHAT_IFS.items():
            for key, target in targets.items():
                where = out / f"{name}_{k}" / key
                if (where / "run.json").exists():
                    continue
                rates = _rates(out / "cal", key, spec)
                _sweep(where, target, ["--rates", ",".join(map(str, rates)), "--arrival", spec["arrival"],
                                       "--prompt-tokens", spec["prompt"], "--output-tokens", spec["output"]])


# -- analysing ----------------------------------------------------------------------------------------
def _samples(run_dir: Path):
    from reports.predict.evidence import level_samples
    from reports.run_data import load_run
    from reports.summary import build_levels

    data = load_run(run_dir)
    return data, level_samples(data, build_levels(data, data.run.slo))


def _send_offsets(data, level: str) -> tuple[float, ...]:
    """A level's send times, s from its first send (every phase: the warm-up's load is load too)."""
    sends = np.sort(data.records.loc[data.records["level"] == level, "t_start"].to_numpy(dtype=float))
    return tuple(sends - sends[0]) if len(sends) else ()


def _variants(calibration, held, data, spec: dict, server, replications: int, staged=None) -> dict:
    from calculators.sim.front_end import FrontEndByLoad
    from lab.reports.error_sources import relative_errors
    from reports.predict.calibration import calibrate, predict
    from reports.predict.prediction import PredictPlan, _lengths

    plan = PredictPlan(rates=(held.load,), arrival=spec["arrival"], prompt_tokens=spec["prompt"],
                       output_tokens=spec["output"])
    whatif = replace(calibration, lengths=_lengths(plan, calibration.lengths))
    kwargs = {"replications": replications}
    window = (held.warmup_s, held.duration_s)
    out = {"predicted": predict(whatif, "rate_rps", held.load, *window, **kwargs)}
    if staged is not None:
        out["staged"] = predict(replace(staged, lengths=whatif.lengths), "rate_rps", held.load, *window, **kwargs)
    try:   # one level of an external server (no step record) cannot fit a step model on its own
        own = calibrate([held], server, calibration.arrival_cv2)
    except ValueError:
        own = None
    if own is not None:
        out["own_steps"] = predict(replace(whatif, step_model=own.step_model, residuals=own.residuals),
                                   "rate_rps", held.load, *window, **kwargs)
    if held.front_end is not None:
        single = FrontEndByLoad((held.load,), (held.front_end,), (held.output_tokens_per_s or 0.0,))
        out["own_front_end"] = predict(replace(whatif, front_end=single), "rate_rps", held.load, *window, **kwargs)
    out["own_lengths"] = predict(replace(whatif, lengths=held.lengths), "rate_rps", held.load, *window, **kwargs)
    out["own_arrivals"] = predict(whatif, "rate_rps", held.load, *window, arrival_times=_send_offsets(data, held.level),
                                  **kwargs)
    return {name: relative_errors(result, held) for name, result in out.items()}


def _median_abs(rows: list[dict], key: str) -> float | None:
    values = [abs(r[key]) for r in rows if r.get(key) is not None]
    return float(np.median(values)) if values else None


def analyze(args: argparse.Namespace) -> dict:
    from contract.arrivals import parse_arrival
    from reports.predict.calibration import calibrate, strategy_server
    from reports.predict.stage import stage_samples

    root = Path(args.dir)
    cal_data, cal_samples = _samples(root / "cal")
    answer: dict = {"dir": str(root), "strategies": {}}
    for strategy, group in cal_samples.items():
        if args.strategy and strategy != args.strategy:
            continue
        server = strategy_server(cal_data.run, strategy)
        per_whatif: dict = {}
        for name, spec in WHAT_IFS.items():
            cv2 = parse_arrival(spec["arrival"], 1.0).cv2
            calibration = calibrate(group, server, cv2)
            stage = stage_samples(root / "cal", strategy)
            staged = calibrate(group, server, cv2, stage) if stage else None
            runs = sorted(root.glob(f"{name}_*/{strategy}"))
            measured = []
            for run_dir in runs:
                data, samples = _samples(run_dir)
                measured.append((data, samples.get(strategy, [])))
            rows = []
            for k, (data, held_levels) in enumerate(measured, start=1):   # every repeat's levels are held out
                for i, held in enumerate(held_levels):
                    print(f"{strategy} {name}_{k} {held.level}", file=sys.stderr, flush=True)
                    row = {"level": held.level, "repeat": k, "rate_rps": held.load,
                           "variants": _variants(calibration, held, data, spec, server, args.replications, staged)}
                    if k == 1 and len(measured) > 1 and i < len(measured[1][1]):
                        again = measured[1][1][i]
                        row["rerun"] = {key: (held.measured[key.split(".")[0]][key.split(".")[1]]
                                              / again.measured[key.split(".")[0]][key.split(".")[1]] - 1)
                                        for key in KEYS}
                    rows.append(row)
            per_whatif[name] = {
                "levels": rows,
                "median_abs_error": {v: {k: _median_abs([r["variants"].get(v, {}) for r in rows], k) for k in KEYS}
                                     for v in VARIANTS},
                "noise_floor": {k: _median_abs([r["rerun"] for r in rows if "rerun" in r], k) for k in KEYS},
            }
        answer["strategies"][strategy] = per_whatif
    return answer


def _print(answer: dict) -> None:
    for strategy, per_whatif in answer["strategies"].items():
        for name, entry in per_whatif.items():
            print(f"\n{strategy} / {name}: median |error| ({len(entry['levels'])} levels)")
            print(f"{'':16}" + "".join(f"{k:>14}" for k in KEYS))
            for variant, errors in {**entry["median_abs_error"], "noise_floor": entry["noise_floor"]}.items():
                cells = "".join(f"{'-' if errors.get(k) is None else f'{errors[k]:.1%}':>14}" for k in KEYS)
                print(f"{variant:16}{cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="measure the calibration and the what-ifs")
    r.add_argument("--out", required=True)
    r.add_argument("--strategies", default="continuous,dynamic")
    r.add_argument("--model", default="tiny")
    r.add_argument("--server-args", default="")
    r.add_argument("--url", help="an external server instead of the reference server")
    r.add_argument("--vllm", action="store_true", help="start vLLM's CPU build (.venv-vllm) and measure it")
    r.add_argument("--repeats", type=int, default=2)
    a = sub.add_parser("analyze", help="predict the what-ifs from the calibration and decompose the error")
    a.add_argument("dir")
    a.add_argument("--replications", type=int, default=4)
    a.add_argument("--strategy", help="only this strategy (default: every one the calibration ran)")
    a.add_argument("--json", action="store_true")
    a.add_argument("--json-out", help="where to write the answer (default DIR/transfer.json)")
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        run_vllm(args) if args.vllm else run(args)
        return 0
    answer = analyze(args)
    Path(args.json_out or Path(args.dir) / "transfer.json").write_text(json.dumps(answer, indent=1, default=float))
    if args.json:
        print(json.dumps(answer, indent=1, default=float))
    else:
        _print(answer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

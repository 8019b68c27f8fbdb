"""Speculative decoding's crossover, measured and predicted (issue 38's targets).

    python -m lab.servecap.speculative_crossover run --setup emulated --out DIR
    python -m lab.servecap.speculative_crossover run --setup emulated-tp2 --out DIR
    python -m lab.servecap.speculative_crossover run --setup cpu --out DIR
    python -m lab.servecap.speculative_crossover analyze DIR [--json]

`run` sweeps the reference server's continuous strategy at CONCURRENCY, once per arm, one after the
other (no report; each arm is its own run directory):
    emulated   an emulated h100-sxm serving llama-3.1-70b in fp8 (max_model_len 4096):
               plain, and draft (llama-3.2-1b, k = 4, emulated acceptance 0.7)
    emulated-tp2  the same on two of them (--tp 2): room in the KV cache for every user, so the
               batch reaches the sizes where a verification's extra tokens turn the step compute bound
    cpu        small on this CPU: plain, draft (the tiny preset as the draft, k = 4, exact), ngram
               (k = 4, exact), and tiny alone (the draft's own calibration)
`analyze` reads each speculating arm beside the plain one as a side-by-side report does
(`reports.speculation.measured_crossover`) and puts the simulator's crossover beside it:
    emulated   `servecap calc simulate` on the same model, GPU, limits and lengths (the step model the
               emulated replica waits by), with the arm's speculative flags
    cpu        `servecap predict --calibration plain` with the arm's method, an acceptance that gives
               the mean accepted length the arm's server counted, for ngram the share of decodes
               that proposed as its server counted them (--speculative-proposal-share), and for
               draft the tiny run's calibration (--speculative-draft-calibration)
A crossover past the last level counts as the level after it. Within one level: the two crossovers'
positions in CONCURRENCY differ by at most one. The emulated setup also compares TPOT p50 at c=1.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import brentq

from calculators.speculative_crossover import crossover
from contract.level_result import LevelResult

CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)
K = 4
LENGTHS = {"emulated": ("uniform:256:768", "uniform:64:192"), "emulated-tp2": ("uniform:256:768", "uniform:64:192"),
           "cpu": ("uniform:32:128", "uniform:16:64")}
WINDOWS = {"emulated": ("5s", "25s"), "emulated-tp2": ("5s", "25s"), "cpu": ("8s", "40s")}
TP = {"emulated": 1, "emulated-tp2": 2}
EMULATED = {"gpu": "h100-sxm", "model": "llama-3.1-70b", "dtype": "fp8", "max_model_len": 4096,
            "draft": "llama-3.2-1b", "acceptance": 0.7}
SPEC = f"--num-speculative-tokens {K}"
EMULATED_ARMS = {
    "plain": [],
    "draft": [f"--speculative-method draft --speculative-model {EMULATED['draft']} {SPEC} "
              f"--speculative-acceptance {EMULATED['acceptance']}"],
}
ARMS = {
    "emulated": EMULATED_ARMS,
    "emulated-tp2": EMULATED_ARMS,
    "cpu": {
        "plain": [],
        "draft": [f"--speculative-method draft --speculative-model tiny {SPEC}"],
        "ngram": [f"--speculative-method ngram {SPEC}"],
        "tiny": [],
    },
}


def _sweep_args(setup: str, arm: str, out: Path) -> list[str]:
    prompt, output = LENGTHS[setup]
    warmup, duration = WINDOWS[setup]
    extra = " ".join(ARMS[setup][arm])
    if setup in TP:
        target = ["--emulate", EMULATED["gpu"], "--model", EMULATED["model"]]
        extra = (f"--dtype {EMULATED['dtype']} --max-model-len {EMULATED['max_model_len']} --tp {TP[setup]} "
                 f"{extra}").strip()
    else:
        target = ["--model", "tiny" if arm == "tiny" else "small"]
    return [sys.executable, "-m", "servecap", "sweep", "--out", str(out / arm), *target, "--strategies", "continuous",
            "--concurrency", ",".join(map(str, CONCURRENCY)), "--warmup", warmup, "--duration", duration,
            "--prompt-tokens", prompt, "--output-tokens", output, "--no-report",
            *(["--server-args", extra] if extra else [])]


def run(setup: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for arm in ARMS[setup]:
        args = _sweep_args(setup, arm, out)
        print("$", shlex.join(args[1:]), flush=True)
        subprocess.run(args, check=True)
    (out / "setup.json").write_text(json.dumps({"setup": setup, "concurrency": CONCURRENCY, "k": K,
                                                "lengths": LENGTHS[setup], "window": WINDOWS[setup],
                                                "arms": ARMS[setup], "emulated": EMULATED}, indent=1))


def _levels(run_dir: Path, label: str) -> list[LevelResult]:
    from reports.report import ReportOptions
    from reports.side_by_side import run_side

    side, _ = run_side(run_dir, label, ReportOptions())
    return side.levels


def _acceptance_for(mean_accepted_length: float) -> float:
    """The one rate a whose a + a^2 + ... + a^K is the measured accepted proposals per verification."""
    target = mean_accepted_length - 1.0
    if target <= 0:
        return 0.0
    if target >= K:
        return 1.0
    return float(brentq(lambda a: sum(a ** i for i in range(1, K + 1)) - target, 0.0, 1.0))


def _position(level, levels) -> int:
    return len(levels) if level is None else list(levels).index(level)


def _simulated(setup: str, arm: str) -> dict:
    """calc simulate with and without the arm's speculation, on the emulated replica's own step model."""
    prompt, output = LENGTHS[setup]
    args = [sys.executable, "-m", "servecap", "calc", "simulate", "--model", EMULATED["model"], "--gpu",
            EMULATED["gpu"], "--dtype", EMULATED["dtype"], "--max-model-len", str(EMULATED["max_model_len"]),
            "--tp", str(TP[setup]),
            "--concurrency", ",".join(map(str, CONCURRENCY)), "--prompt-tokens", prompt,
            "--output-tokens", output, "--requests", "800", "--json",
            *shlex.split(" ".join(ARMS["emulated"][arm]))]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    spec = answer["speculative"]
    return {"tpot_level": spec["crossover"]["tpot_level"], "throughput_level": spec["crossover"]["throughput_level"],
            "statement": spec["statement"],
            "tpot_p50_s": {"plain": [point["metrics"]["tpot_s"]["p50"] for point in answer["levels"]],
                           "speculative": [point["metrics"]["tpot_s"]["p50"] for point in spec["levels"]]},
            "tokens_per_s": {"plain": [point["output_tokens_per_s"] for point in answer["levels"]],
                             "speculative": [point["output_tokens_per_s"] for point in spec["levels"]]}}


def _predicted(out: Path, arm: str, acceptance: float, share: float) -> dict:
    """servecap predict from the plain run's calibration, with the arm's speculation, one level at a time:
    a level where no simulated request finishes inside the run's window is predicted as None (nothing to
    compare; `crossover` skips it)."""
    rows = []
    for c in CONCURRENCY:
        target = out / f"predict_{arm}_c{c}.json"
        args = [sys.executable, "-m", "servecap", "predict", "--calibration", str(out / "plain"), "--concurrency",
                str(c), "--speculative-method", arm, "--num-speculative-tokens", str(K),
                "--speculative-acceptance", f"{acceptance:.4f}", "--speculative-proposal-share", f"{share:.4f}",
                "--replications", "4", "--out", str(target)]
        if arm == "draft":
            args += ["--speculative-draft-calibration", str(out / "tiny")]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            if "no simulated request falls in the measure window" not in done.stderr:
                raise SystemExit(done.stderr)
            rows.append(None)
            continue
        rows.append(json.loads(target.read_text())["loads"][0])

    def tpot(metrics):
        return metrics["tpot_s"]["p50"]["value"]

    plain_tpot = [row and tpot(row["metrics"]) for row in rows]
    sides = [row and row["speculative"] for row in rows]   # None: outside the window with speculation
    spec_tpot = [side and tpot(side["metrics"]) for side in sides]
    plain_tokens = [row and row["output_tokens_per_s"] for row in rows]
    spec_tokens = [side and side["output_tokens_per_s"] for side in sides]
    found = crossover("concurrency", CONCURRENCY, plain_tpot, spec_tpot, plain_tokens, spec_tokens)
    return {"tpot_level": found.tpot_level, "throughput_level": found.throughput_level,
            "statement": found.statement() + " (predicted)", "acceptance": acceptance, "proposal_share": share,
            "levels_outside_the_window": [c for c, row in zip(CONCURRENCY, rows) if row is None],
            "tpot_p50_s": {"plain": plain_tpot, "speculative": spec_tpot},
            "tokens_per_s": {"plain": plain_tokens, "speculative": spec_tokens}}


def analyze(out: Path) -> dict:
    from reports.speculation import measured_crossover

    setup = json.loads((out / "setup.json").read_text())
    plain = _levels(out / "plain", "plain")
    result = {"setup": setup["setup"], "concurrency": list(CONCURRENCY), "arms": {}}
    for arm in (name for name in setup["arms"] if name not in ("plain", "tiny")):
        levels = _levels(out / arm, arm)
        measured = measured_crossover(plain + levels)
        by_c = {lvl.load: lvl for lvl in levels}   # concurrency levels
        base_c = {lvl.load: lvl for lvl in plain}
        lengths = [by_c[c].server.get("spec_mean_accepted_length") for c in CONCURRENCY if c in by_c]
        lengths = [x for x in lengths if x is not None]
        mean_length = float(np.mean(lengths)) if lengths else 1.0
        if setup["setup"] in TP:
            model = _simulated(setup["setup"], arm)
        else:
            shares = [by_c[c].server.get("spec_drafts_per_decode") for c in CONCURRENCY if c in by_c]
            shares = [x for x in shares if x is not None]
            share = float(np.mean(shares)) if arm == "ngram" and shares else 1.0   # a draft proposes at every decode
            model = _predicted(out, arm, _acceptance_for(mean_length), share)
        gap = abs(_position(measured.tpot_level, CONCURRENCY) - _position(model["tpot_level"], CONCURRENCY))
        entry = {
            "measured": {"tpot_level": measured.tpot_level, "throughput_level": measured.throughput_level,
                         "statement": measured.statement},
            "modelled": model,
            "mean_accepted_length": mean_length,
            "acceptance_rate": [by_c[c].server.get("spec_acceptance_rate") for c in CONCURRENCY if c in by_c],
            "measured_tpot_p50_s": {"plain": [base_c[c].metrics["tpot_s"].p50 for c in CONCURRENCY],
                                    "speculative": [by_c[c].metrics["tpot_s"].p50 for c in CONCURRENCY]},
            "measured_tokens_per_s": {"plain": [base_c[c].output_tokens_per_s for c in CONCURRENCY],
                                      "speculative": [by_c[c].output_tokens_per_s for c in CONCURRENCY]},
            "tpot_crossover_levels_apart": gap, "within_one_level": gap <= 1,
        }
        if setup["setup"] in TP:
            measured_c1 = by_c[1].metrics["tpot_s"].p50
            modelled_c1 = model["tpot_p50_s"]["speculative"][0]
            entry["tpot_c1"] = {"measured_s": measured_c1, "simulated_s": modelled_c1,
                                "error": measured_c1 / modelled_c1 - 1}
        result["arms"][arm] = entry
    (out / "analysis.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.servecap.speculative_crossover", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--setup", choices=tuple(ARMS), required=True)
    r.add_argument("--out", required=True, type=Path)
    a = sub.add_parser("analyze")
    a.add_argument("dir", type=Path)
    a.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.setup, args.out)
        return 0
    result = analyze(args.dir)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for arm, entry in result["arms"].items():
        print(f"{arm}: measured: {entry['measured']['statement']}")
        print(f"{' ' * len(arm)}  modelled: {entry['modelled']['statement']}")
        print(f"{' ' * len(arm)}  TPOT crossovers {entry['tpot_crossover_levels_apart']} level(s) apart; "
              f"mean accepted length {entry['mean_accepted_length']:.2f}")
        if "tpot_c1" in entry:
            c1 = entry["tpot_c1"]
            print(f"{' ' * len(arm)}  TPOT p50 at c=1: measured {c1['measured_s'] * 1e3:.2f} ms, simulated "
                  f"{c1['simulated_s'] * 1e3:.2f} ms ({c1['error']:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

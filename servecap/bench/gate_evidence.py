"""Evidence that the regression gate is quiet and sharp on this machine.

    python -m servecap.bench.gate_evidence --pairs 10 --out runs/gate-evidence

1. Runs `pairs + replicates` short identical sweeps (A/A) of the reference server and gates
   run i + replicates against the `replicates` runs before it (`--baseline` repeated, so the
   gate sees the run-to-run noise): every pass is a correct silence, every fail a false alarm.
   `--replicates 1` is the plain one-baseline gate.
2. `--regressed` times: runs one more baseline, then a sweep with `--inject-step-delay-ms`
   sized to raise the p50 TPOT of the `replicates` latest baselines by `--slowdown` (default
   20%), and gates it against them: every fail is a detection, every pass a miss.
Prints both counts and the measured TPOT change, and writes evidence.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

SERVECAP = [sys.executable, "-m", "servecap"]


def sweep(out: Path, args: argparse.Namespace, inject_ms: float = 0.0) -> Path:
    server_args = f"--inject-step-delay-ms {inject_ms}"
    command = [*SERVECAP, "sweep", "--out", str(out), "--model", args.model, "--strategies", args.strategy,
               "--concurrency", args.concurrency, "--warmup", args.warmup, "--duration", args.duration,
               "--prompt-tokens", args.prompt_tokens, "--output-tokens", args.output_tokens,
               "--server-args", server_args, "--no-report"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def gate(baselines: list[Path], current: Path) -> dict:
    flags = [arg for base in baselines for arg in ("--baseline", str(base))]
    result = subprocess.run([*SERVECAP, "gate", *flags, "--current", str(current), "--json",
                             "--markdown-out", str(current / f"gate-vs-{baselines[0].name}.md")],
                            capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise RuntimeError(f"gate failed to run: {result.stderr}")
    report = json.loads(result.stdout)
    return {"baseline": "+".join(b.name for b in baselines), "current": current.name, "failed": report["failed"],
            "regressions": [f"{r['level']} {r['metric']} {r['ratio'] - 1:+.1%}" for r in report["rows"]
                            if r["verdict"] == "REGRESSION"],
            "tpot_p50_change": next((r["ratio"] - 1 for r in report["rows"] if r["metric"] == "tpot_s.p50"), None)}


def p50_tpot_s(run_dir: Path) -> float:
    subprocess.run([*SERVECAP, "report", str(run_dir), "--no-figures"], check=True, capture_output=True)
    levels = json.loads((run_dir / "summary.json").read_text())["levels"]
    return max(level["metrics"]["tpot_s"]["p50"] for level in levels)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servecap.bench.gate_evidence", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=f"runs/gate-evidence-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--pairs", type=int, default=10, help="A/A comparisons (runs = pairs + replicates)")
    parser.add_argument("--replicates", type=int, default=3, help="baseline runs per comparison")
    parser.add_argument("--regressed", type=int, default=5, help="runs with the injected slowdown")
    parser.add_argument("--slowdown", type=float, default=0.20, help="p50 TPOT increase to inject (0.20 = 20%%)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--strategy", default="continuous")
    parser.add_argument("--concurrency", default="4")
    parser.add_argument("--warmup", default="2s")
    parser.add_argument("--duration", default="8s")
    parser.add_argument("--prompt-tokens", default="uniform:32:96")
    parser.add_argument("--output-tokens", default="uniform:16:48")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    runs = []
    k = args.replicates
    for i in range(args.pairs + k):
        console.print(f"A/A run {i + 1}/{args.pairs + k}")
        runs.append(sweep(out / f"a{i:02d}", args))
    aa = [gate(runs[i:i + k], runs[i + k]) for i in range(args.pairs)]

    # Each regressed run follows a fresh baseline and is gated against the k baselines just
    # before it, with the delay sized from their p50 TPOT: the machine's speed drifts over
    # minutes (same-config runs here ranged 1.8-3.1 ms), so far-away baselines would test the drift.
    regressed, injected = [], []
    for j in range(args.regressed):
        console.print(f"baseline + regressed run {j + 1}/{args.regressed}")
        runs.append(sweep(out / f"a{len(runs):02d}", args))
        base_tpot = statistics.median(p50_tpot_s(run) for run in runs[-k:])
        inject_ms = args.slowdown * base_tpot * 1000.0
        injected.append(inject_ms)
        console.print(f"  baseline p50 TPOT {base_tpot * 1000:.2f} ms -> injecting {inject_ms:.2f} ms per engine step")
        slow = sweep(out / f"b{j:02d}", args, inject_ms)
        regressed.append({**gate(runs[-k:], slow), "inject_step_delay_ms": inject_ms})

    false_alarms = sum(result["failed"] for result in aa)
    detections = sum(result["failed"] for result in regressed)
    changes = [r["tpot_p50_change"] for r in regressed if r["tpot_p50_change"] is not None]
    evidence = {"config": vars(args), "inject_step_delay_ms": injected,
                "aa_pairs": len(aa), "false_alarms": false_alarms, "regressed_pairs": len(regressed),
                "detections": detections, "aa": aa, "regressed": regressed}
    (out / "evidence.json").write_text(json.dumps(evidence, indent=2) + "\n")
    print(f"A/A: {len(aa) - false_alarms}/{len(aa)} passed ({false_alarms} false alarm(s))")
    for result in aa:
        if result["failed"]:
            print(f"  false alarm {result['baseline']} -> {result['current']}: {', '.join(result['regressions'])}")
    print(f"injected +{args.slowdown:.0%} p50 TPOT ({', '.join(f'{ms:.2f}' for ms in injected)} ms/step): "
          f"{detections}/{len(regressed)} failed; "
          f"measured p50 TPOT change {', '.join(f'{c:+.1%}' for c in changes)}")
    print(f"evidence: {out / 'evidence.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

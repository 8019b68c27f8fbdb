"""Evidence that the regression gate is quiet and sharp on this machine.

    python -m lab.servecap.gate_evidence --paired --out runs/gate-evidence-paired
    python -m lab.servecap.gate_evidence --pairs 10 --out runs/gate-evidence      # the two-run gate

--paired (the design to trust): `servecap compare` runs, each bounded by --max-duration
(default 2m), at --concurrency 4 on the tiny preset:
1. --aa comparisons with the same configuration in both arms: a verdict other than SAME
   on a reported metric (p50 TPOT, TTFT, E2E) is a miss of the quiet target (WORSE/BETTER
   a false alarm, UNKNOWN undecided);
2. for each SLOWDOWN:COUNT in --slowdowns (default 0.1:10,0.2:5), a pilot (one more A/A
   compare, always interleaved: each arm alone) measures p50 TPOT, then COUNT comparisons
   give arm B a busy-wait step delay of SLOWDOWN x that TPOT, in CPU time (extra compute,
   the same fault whether or not the core is shared): every WORSE on p50 TPOT is a detection.
`--schedule duet` runs the comparisons as duets (both arms at once; see servecap compare).
Prints the false-alarm and detection rates, the time per comparison and the spread of the
per-pair ratios, and writes evidence.json. `--command-prefix` prefixes each comparison
(e.g. `flock -x LOCK` on a machine shared with other jobs).

Without --paired, the two-run gate:

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
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from contract.summary import Summary

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
    if result.returncode not in (0, 1, 3):   # 3: undecided, within the runs' own drift
        raise RuntimeError(f"gate failed to run: {result.stderr}")
    report = json.loads(result.stdout)
    return {"baseline": "+".join(b.name for b in baselines), "current": current.name, "failed": report["failed"],
            "undecided": result.returncode == 3,
            "regressions": [f"{r['level']} {r['metric']} {r['ratio'] - 1:+.1%}" for r in report["rows"]
                            if r["verdict"] == "REGRESSION"],
            "tpot_p50_change": next((r["ratio"] - 1 for r in report["rows"] if r["metric"] == "tpot_s.p50"), None)}


def p50_tpot_s(run_dir: Path) -> float:
    subprocess.run([*SERVECAP, "report", str(run_dir), "--no-figures"], check=True, capture_output=True)
    summary = Summary.from_dict(json.loads((run_dir / "summary.json").read_text()))
    return max(level.metrics["tpot_s"].p50 for level in summary.levels)


REPORTED = ("tpot_s.p50", "ttft_s.p50", "e2e_s.p50")


def compare(out: Path, args: argparse.Namespace, inject_ms: float = 0.0, schedule: str | None = None) -> dict:
    """One `servecap compare` (arm B with `inject_ms` of CPU per step); its verdicts on the reported metrics."""
    b_args = f"--inject-step-delay-ms {inject_ms:.4f}" if inject_ms else ""
    command = [*shlex.split(args.command_prefix), *SERVECAP, "compare", "--out", str(out), "--model", args.model,
               "--concurrency", args.concurrency, "--a-args", args.server_args,
               "--b-args", f"{args.server_args} {b_args}".strip(), "--max-duration", args.max_duration,
               "--prompt-tokens", args.prompt_tokens, "--output-tokens", args.output_tokens,
               "--seed", str(args.seed + len(list(out.parent.glob("*")))), "--schedule", schedule or args.schedule]
    if args.max_regression:
        command += ["--max-regression", args.max_regression]
    if args.slice:
        command += ["--slice", args.slice]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode not in (0, 1, 3):
        raise RuntimeError(f"compare failed (exit {done.returncode}): {done.stderr[-2000:]}")
    result = json.loads((out / "compare.json").read_text())
    metrics = {m["metric"]: m for m in result["metrics"]}
    return {"run": out.name, "exit_code": done.returncode, "elapsed_s": elapsed, "pairs": result["pairs"],
            "inject_step_delay_ms": inject_ms,
            "verdicts": {key: metrics[key]["verdict"] for key in REPORTED if key in metrics},
            "changes": {key: metrics[key]["ratio"] - 1 for key in REPORTED if key in metrics},
            "log_sd": {key: metrics[key]["log_sd"] for key in REPORTED if key in metrics}}


def arm_a_p50_tpot_s(out: Path) -> float:
    """Median over slices of arm A's p50 TPOT in a compare run (the pilot that sizes the delay)."""
    from reports.paired.analysis import analyse

    table = analyse(out).table
    return float(table.loc[table["arm"] == "a", "tpot_s.p50"].median())


def paired_main(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    aa = []
    for i in range(args.aa):
        console.print(f"A/A comparison {i + 1}/{args.aa}")
        aa.append(compare(out / f"aa{i:02d}", args))
        console.print(f"  {aa[-1]['verdicts']} in {aa[-1]['elapsed_s']:.0f} s, {aa[-1]['pairs']} pairs")
    regressed = {}
    for slowdown, count in args.slowdowns:
        # sized from an interleaved pilot: B's injected CPU per step is `slowdown` x the TPOT of an arm
        # running alone (in a duet each arm runs beside the other, at about half speed on a shared core)
        pilot = compare(out / f"pilot-{slowdown:.0%}", args, schedule="interleaved")
        tpot = arm_a_p50_tpot_s(out / f"pilot-{slowdown:.0%}")
        inject_ms = slowdown * tpot * 1000.0
        console.print(f"+{slowdown:.0%}: pilot p50 TPOT {tpot * 1000:.3f} ms -> {inject_ms:.3f} ms per step")
        runs = []
        for j in range(count):
            runs.append(compare(out / f"b{slowdown:.0%}-{j:02d}", args, inject_ms))
            console.print(f"  {runs[-1]['verdicts']} in {runs[-1]['elapsed_s']:.0f} s, "
                          f"TPOT change {runs[-1]['changes'].get('tpot_s.p50', float('nan')):+.1%}")
        regressed[f"{slowdown:.0%}"] = {"pilot": pilot, "pilot_p50_tpot_s": tpot, "inject_step_delay_ms": inject_ms,
                                         "runs": runs}
    not_same = [(r["run"], k, v) for r in aa for k, v in r["verdicts"].items() if v != "SAME"]
    alarms = [x for x in not_same if x[2] in ("WORSE", "BETTER")]
    evidence = {"config": vars(args), "aa": aa, "regressed": regressed,
                "aa_verdicts": len(aa) * len(REPORTED), "aa_not_same": len(not_same), "aa_false_alarms": len(alarms)}
    (out / "evidence.json").write_text(json.dumps(evidence, indent=2, default=str) + "\n")
    print(f"A/A: {len(aa)} comparisons, {len(aa) * len(REPORTED)} verdicts on {', '.join(REPORTED)}: "
          f"{len(not_same)} not SAME ({len(alarms)} false alarms WORSE/BETTER, {len(not_same) - len(alarms)} UNKNOWN)")
    for run, key, verdict in not_same:
        print(f"  {run} {key}: {verdict}")
    for name, group in regressed.items():
        caught = sum(r["verdicts"].get("tpot_s.p50") == "WORSE" for r in group["runs"])
        changes = ", ".join(f"{r['changes'].get('tpot_s.p50', float('nan')):+.1%}" for r in group["runs"])
        print(f"+{name} ({group['inject_step_delay_ms']:.3f} ms/step): {caught}/{len(group['runs'])} WORSE on "
              f"p50 TPOT; measured changes {changes}")
    every = aa + [r for g in regressed.values() for r in [g["pilot"], *g["runs"]]]
    times = sorted(r["elapsed_s"] for r in every)
    sds = sorted(r["log_sd"]["tpot_s.p50"] for r in every if r["log_sd"].get("tpot_s.p50") is not None)
    print(f"time per comparison: median {statistics.median(times):.0f} s (range {times[0]:.0f}-{times[-1]:.0f} s); "
          f"per-pair SD of log(B/A) p50 TPOT: median {statistics.median(sds):.1%} (range {sds[0]:.1%}-{sds[-1]:.1%})")
    print(f"evidence: {out / 'evidence.json'}")
    return 0


def _slowdowns(text: str) -> list[tuple[float, int]]:
    """'0.1:10,0.2:5' -> [(0.1, 10), (0.2, 5)]."""
    try:
        return [(float(s), int(n)) for s, n in (item.split(":") for item in text.split(",") if item.strip())]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SLOWDOWN:COUNT,... like 0.1:10,0.2:5, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.servecap.gate_evidence", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paired", action="store_true", help="evidence for servecap compare (see above)")
    parser.add_argument("--aa", type=int, default=10, help="--paired: A/A comparisons")
    parser.add_argument("--slowdowns", type=_slowdowns, default=[(0.10, 10), (0.20, 5)],
                        help="--paired: SLOWDOWN:COUNT,... injected p50 TPOT slowdowns (default 0.1:10,0.2:5)")
    parser.add_argument("--max-duration", default="2m", help="--paired: each comparison's bound")
    parser.add_argument("--max-regression", default="", help="--paired: passed to servecap compare")
    parser.add_argument("--slice", default="", help="--paired: passed to servecap compare (default: its own rule)")
    parser.add_argument("--schedule", choices=("interleaved", "duet"), default="interleaved",
                        help="--paired: servecap compare --schedule (the pilots that size the delay are interleaved)")
    parser.add_argument("--server-args", default="", help="--paired: reference-server flags for both arms")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command-prefix", default="", help="--paired: prefix for each comparison's command")
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
    if args.paired:
        return paired_main(args, console)
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
    undecided = sum(result["undecided"] for result in aa)
    print(f"A/A: {len(aa) - false_alarms - undecided}/{len(aa)} passed, {undecided} undecided (exit 3), "
          f"{false_alarms} false alarm(s)")
    for result in aa:
        if result["failed"]:
            print(f"  false alarm {result['baseline']} -> {result['current']}: {', '.join(result['regressions'])}")
    print(f"injected +{args.slowdown:.0%} p50 TPOT ({', '.join(f'{ms:.2f}' for ms in injected)} ms/step): "
          f"{detections}/{len(regressed)} failed, {sum(r['undecided'] for r in regressed)} undecided; "
          f"measured p50 TPOT change {', '.join(f'{c:+.1%}' for c in changes)}")
    print(f"evidence: {out / 'evidence.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

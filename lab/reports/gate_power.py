"""How often the two-run gate (`servecap gate --baseline A --current B`) false-alarms and detects, on real sweeps.

    python -m lab.reports.gate_power run --out runs/gate-power --pairs 10 --slowdown 0.25
    python -m lab.reports.gate_power gate runs/gate-power          # judge the sweeps again with this checkout's gate

`run` makes 2 x pairs + 1 short sweeps of the reference server, in this order:
A0 B0 A1 B1 ... A(n-1) B(n-1) An. Each A is the plain server; each B the same server with
`--inject-step-delay-ms` (a busy-wait of CPU time per engine step, the same fault whether or not the
core is shared) sized to raise p50 TPOT by --slowdown at the level of the longest steps, so that no
level sees less than that (a step delay adds the same time to every level's TPOT, so levels of
shorter steps see more). Each level's TPOT is the fastest p50 the A runs so far measured: the busy-wait
is CPU time, so it is sized against the engine's step when it had its core to itself; a run beside
other work stretches the step and the delay alike (--inject-ms fixes the delay instead). Each sweep
also records what else the machine ran meanwhile: the cores busy with work that was not the sweep's
(/proc/stat's busy time less the CPU time of the sweep and its children). Then it gates:
- A/A pairs (Ai, Ai+1): two runs of the same build a minute apart; exit 1 is a false alarm;
- regressed pairs (Ai, Bi): exit 1 is a detection; exit 0 a miss, exit 3 undecided;
- scaled pairs (Ai, Ai+1 with its decode scaled by 1 + slowdown): the cheap form, the same A/A pair
  with each record's inter-token gaps and decode time (e2e - ttft) multiplied, so TPOT and ITL move
  by exactly that factor and the machine's drift between the runs is the real one.
Prints the exit-code counts, the rows that decided, and each regressed pair's measured p50 TPOT
change per level; writes power.json. `gate` re-judges an existing --out (e.g. after changing the
decision) without sweeping again.

    python -m lab.reports.gate_power synthetic --out /tmp/gate-synthetic --pairs 40

`synthetic` writes pairs of synthetic runs (two closed-loop levels of 400 requests, the record format)
on a machine whose log speed is an AR(1) process: rho 0.8 per 20 requests, stationary SD 10%, a fresh
draw for every run. It gates --pairs A/A pairs and as many with every gap --slowdown slower, and
prints the exit-code counts: the drifting machine on which the drift allowance was first measured.

Lab only: not part of the package, never run by a sweep or a report.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

SERVECAP = [sys.executable, "-m", "servecap"]


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sweep(out: Path, args: argparse.Namespace, inject_ms: float = 0.0) -> dict:
    """One sweep; what else the machine ran meanwhile: the cores busy with work that was not the
    sweep's (its server, Locust and observers are its children, reaped before it returns)."""
    server_args = f"--inject-step-delay-ms {inject_ms:.4f}" if inject_ms else ""
    command = [*SERVECAP, "sweep", "--out", str(out), "--model", args.model, "--strategies", args.strategy,
               "--concurrency", args.concurrency, "--warmup", args.warmup, "--duration", args.duration,
               "--server-args", server_args, "--no-report"]
    busy, own, started = _busy_cpu_s(), _children_cpu_s(), time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    others = (_busy_cpu_s() - busy) - (_children_cpu_s() - own)
    return {"run": out.name, "inject_step_delay_ms": inject_ms, "wall_s": round(wall, 1),
            "others_cores": round(max(0.0, others) / wall, 2)}


def p50_tpot_by_level(run_dir: Path) -> dict[str, float]:
    """Each level's p50 TPOT (ok, measured requests), as the gate and the report read them."""
    from reports.run_data import load_run   # the checkout's reader: TPOT = (e2e - ttft) / (tokens - 1)

    data = load_run(run_dir)
    ok = data.records[data.measured_ok()]
    return {level: float(group["tpot_s"].median()) for level, group in ok.groupby("level", sort=False)}


def scaled_copy(run_dir: Path, out: Path, factor: float) -> Path:
    """`run_dir` with every record's decode slowed by `factor`: inter-token gaps x factor and
    e2e = ttft + factor x (e2e - ttft), so TPOT and ITL are exactly `factor` x; TTFT unchanged."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(run_dir, out, ignore=shutil.ignore_patterns("gate-*.md", "summary.json"))
    with open(run_dir / "requests.jsonl") as src, open(out / "requests.jsonl", "w") as dst:
        for line in src:
            record = json.loads(line)
            if record.get("e2e_s") is not None and record.get("ttft_s") is not None:
                record["e2e_s"] = record["ttft_s"] + factor * (record["e2e_s"] - record["ttft_s"])
            if record.get("itl_s"):
                record["itl_s"] = [gap * factor for gap in record["itl_s"]]
            dst.write(json.dumps(record) + "\n")
    return out


def gate(baseline: Path, current: Path, markdown: Path) -> dict:
    """`servecap gate --baseline BASELINE --current CURRENT --json`, in this process (no interpreter start
    per pair): its exit code, the rows that decided, and each level's p50 TPOT change."""
    from reports.gate.cli import main as gate_cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = gate_cli(["--baseline", str(baseline), "--current", str(current), "--json",
                         "--markdown-out", str(markdown)])
    if code not in (0, 1, 3):
        raise RuntimeError(f"gate failed to run (exit {code}): {err.getvalue()[-2000:]}")
    report = json.loads(out.getvalue())
    rows = {f"{row['level']} {row['metric']}": row for row in report["rows"]}
    return {"baseline": baseline.name, "current": current.name, "exit": code,
            "decided": {key: f"{row['verdict']} {row['ratio'] - 1:+.1%}" for key, row in rows.items()
                        if row["verdict"] not in ("pass", "beyond threshold, not significant")},
            "tpot_p50": {key.split()[0]: row["ratio"] - 1 for key, row in rows.items()
                         if key.endswith(" tpot_s.p50")}}


def run_main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = {"config": vars(args), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "sweeps": []}
    a_tpots: list[dict[str, float]] = []
    for i in range(args.pairs + 1):
        print(f"A{i} ({i + 1}/{args.pairs + 1})", file=sys.stderr, flush=True)
        plan["sweeps"].append(sweep(out / f"a{i:02d}", args))
        a_tpots.append(p50_tpot_by_level(out / f"a{i:02d}"))
        if i == args.pairs:
            break
        if args.inject_ms:
            inject_ms = args.inject_ms
        else:
            # each level's fastest p50 TPOT so far (the step on a core of its own), then the level of the
            # longest steps: the smallest relative change of any level
            fastest = {level: min(t[level] for t in a_tpots if level in t) for level in a_tpots[0]}
            inject_ms = args.slowdown * max(fastest.values()) * 1000.0
        print(f"B{i}: injecting {inject_ms:.3f} ms per step", file=sys.stderr, flush=True)
        plan["sweeps"].append(sweep(out / f"b{i:02d}", args, inject_ms))
        (out / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    plan["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (out / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    gate_main(out)


def _summary(name: str, results: list[dict]) -> str:
    exits = Counter(result["exit"] for result in results)
    counts = ", ".join(f"exit {code}: {exits.get(code, 0)}" for code in (0, 1, 3))
    return f"{name}: {len(results)} pairs, {counts}"


def gate_main(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    slowdown = plan["config"]["slowdown"]
    a = sorted(out.glob("a[0-9][0-9]"))
    b = sorted(out.glob("b[0-9][0-9]"))
    judged = out / "judged"
    judged.mkdir(exist_ok=True)
    aa = [gate(a[i], a[i + 1], judged / f"aa{i:02d}.md") for i in range(len(a) - 1)]
    regressed = [gate(a[i], b[i], judged / f"ab{i:02d}.md") for i in range(len(b))]
    scaled = []
    for i in range(len(a) - 1):
        copy = scaled_copy(a[i + 1], judged / f"s{i + 1:02d}", 1 + slowdown)
        scaled.append(gate(a[i], copy, judged / f"as{i:02d}.md"))
    measured = {}
    for i, bi in enumerate(b):
        base, slow = p50_tpot_by_level(a[i]), p50_tpot_by_level(bi)
        measured[bi.name] = {level: slow[level] / base[level] - 1 for level in base if level in slow}
    evidence = {"plan": plan, "aa": aa, "regressed": regressed, "scaled": scaled, "measured_tpot_p50": measured}
    (out / "power.json").write_text(json.dumps(evidence, indent=2) + "\n")
    others = {entry["run"]: entry["others_cores"] for entry in plan.get("sweeps", [])}
    for name, results in (("A/A", aa), (f"+{slowdown:.0%} injected", regressed), (f"+{slowdown:.0%} scaled", scaled)):
        print(_summary(name, results))
        for result in results:
            decided = "; ".join(f"{key} {verdict}" for key, verdict in result["decided"].items()) or "-"
            beside = "/".join(f"{others.get('a' + run[1:] if run.startswith('s') else run, float('nan')):.2f}"
                              for run in (result["baseline"], result["current"]))
            print(f"  {result['baseline']} -> {result['current']} (others' cores {beside}): exit {result['exit']}: "
                  f"{decided}")
    print("measured p50 TPOT change of each injected run against the A before it:")
    for name, changes in measured.items():
        print(f"  {name}: " + ", ".join(f"{level} {change:+.1%}" for level, change in changes.items()))
    print(f"evidence: {out / 'power.json'}")


def synthetic_run(run_dir: Path, seed: int, slowdown: float = 0.0, n: int = 400, rho: float = 0.8,
                  sd: float = 0.10, every: int = 20) -> Path:
    """Two closed-loop levels of `n` requests (lognormal TTFT and gaps) on a machine whose log speed
    moves as AR(1): each `every` requests it is rho x what it was plus fresh noise, stationary SD `sd`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({
        "server": {"model": "tiny", "dtype": "float32", "device": "cpu", "strategies": ["continuous"]},
        "workload": {"prompt_tokens": "64", "output_tokens": "16"}, "host": {"cpu_model": "synthetic", "gpus": []}}))
    speed = rng.normal(0.0, sd)
    t = 1_700_000_000.0
    with open(run_dir / "requests.jsonl", "w") as out:
        for level, concurrency in (("continuous/c=1", 1), ("continuous/c=4", 4)):
            for i in range(n):
                if i % every == 0:
                    speed = rho * speed + rng.normal(0.0, sd * (1 - rho ** 2) ** 0.5)
                slow = float(np.exp(speed))
                ttft = slow * 0.02 * rng.lognormal(0, 0.2)
                gaps = [slow * 0.005 * (1 + slowdown) * concurrency ** 0.5 * g for g in rng.lognormal(0, 0.2, 15)]
                e2e = ttft + sum(gaps)
                out.write(json.dumps({
                    "level": level, "phase": "measure", "t_sched": None, "t_start": t, "ttft_s": ttft,
                    "e2e_s": e2e, "itl_s": gaps, "prompt_tokens": 64, "output_tokens": 16, "status": "ok",
                    "error": None, "worker": "w0", "response_id": f"r{level}{i}"}) + "\n")
                t += e2e / concurrency
    return run_dir


def synthetic_main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    results = {"A/A": [], f"+{args.slowdown:.0%}": []}
    for i in range(args.pairs):
        base = synthetic_run(out / f"p{i:02d}-a", seed=1000 + 3 * i)
        same = synthetic_run(out / f"p{i:02d}-a2", seed=1001 + 3 * i)
        slow = synthetic_run(out / f"p{i:02d}-b", seed=1002 + 3 * i, slowdown=args.slowdown)
        results["A/A"].append(gate(base, same, out / f"p{i:02d}-aa.md"))
        results[f"+{args.slowdown:.0%}"].append(gate(base, slow, out / f"p{i:02d}-ab.md"))
    (out / "synthetic.json").write_text(json.dumps(results, indent=2) + "\n")
    for name, group in results.items():
        print(_summary(name, group))
        for result in group:
            if result["exit"] == 1 or name != "A/A":
                decided = "; ".join(f"{key} {verdict}" for key, verdict in result["decided"].items()) or "-"
                print(f"  {result['baseline']} -> {result['current']}: exit {result['exit']}: {decided}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.reports.gate_power", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="sweep A0 B0 A1 ... An, then gate them")
    run.add_argument("--out", required=True)
    run.add_argument("--pairs", type=int, default=10, help="A/A pairs and as many regressed pairs")
    run.add_argument("--slowdown", type=float, default=0.25, help="p50 TPOT increase to inject (0.25 = 25%%)")
    run.add_argument("--inject-ms", type=float, default=0.0,
                     help="inject this many ms per step instead of sizing it from the A runs so far")
    run.add_argument("--model", default="tiny")
    run.add_argument("--strategy", default="continuous")
    run.add_argument("--concurrency", default="1,4,8")
    run.add_argument("--warmup", default="3s")
    run.add_argument("--duration", default="10s")
    judge = commands.add_parser("gate", help="gate the sweeps of an earlier run again")
    judge.add_argument("out")
    synthetic = commands.add_parser("synthetic", help="A/A and regressed pairs of synthetic runs on a drifting machine")
    synthetic.add_argument("--out", required=True)
    synthetic.add_argument("--pairs", type=int, default=40)
    synthetic.add_argument("--slowdown", type=float, default=0.25)
    args = parser.parse_args(argv)
    if args.command == "run":
        run_main(args)
    elif args.command == "gate":
        gate_main(Path(args.out))
    else:
        synthetic_main(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

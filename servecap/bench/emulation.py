"""An emulated GPU replica under load: does each step last what its model says, and what does it cost the host?

    python -m servecap.bench.emulation [--gpu h100-sxm] [--model llama-3.1-8b] [--concurrency 1,8,32,64,128]
        [--prompt-tokens 512] [--output-tokens 128] [--duration 10s] [--out runs/bench-emulation]

Starts one `servecap serve --emulate GPU --model M` replica, then measures each concurrency with the real
`servecap sweep --url` (streaming, closed loop), one sweep a level. Per level it prints:
- the realised step time over the modelled one for the step's own batch shape, read from the engine's
  step record (the step's own clock, not the client's): median and p90 of realised / modelled - 1;
- the replica's CPU over the level (engine process and front end together), in cores;
- the simulator's prediction for the same level (`calc simulate` with the same GPU sizing) beside the
  sweep's TTFT, TPOT and E2E p50 and p99.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

from calculators.gpu_engine import gpu_engine
from calculators.gpus import get_gpu
from calculators.models import get_model
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

METRICS = ("ttft_s", "tpot_s", "e2e_s")


def _tree_cpu_s(pid: int) -> float:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(p.cpu_times().user + p.cpu_times().system for p in procs)


def _sweep(url: str, out: Path, concurrency: int, args) -> None:
    command = [sys.executable, "-m", "servecap", "sweep", "--url", url, "--model", args.model, "--out", str(out),
               "--concurrency", str(concurrency), "--warmup", args.warmup, "--duration", args.duration,
               "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.output_tokens),
               "--no-report", "--no-pin-cpus"]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)


def _step_fidelity(out: Path, step_model) -> dict:
    from reports.run_data import load_run

    steps = pd.read_csv(out / "engine_steps.csv")
    (spans,) = load_run(out).level_windows().values()   # the measure window(s) of the one level
    inside = np.zeros(len(steps), dtype=bool)
    for start, end in spans:
        inside |= (steps["t_start"] >= start).to_numpy() & (steps["t_start"] <= end).to_numpy()
    steps = steps[inside]
    modelled = step_model.steps_s(steps["batch"].to_numpy(), steps["prefill_tokens"].to_numpy(),
                                  steps["context_tokens"].to_numpy())
    ratio = steps["step_s"].to_numpy() / modelled - 1.0
    return {"steps": int(len(ratio)), "median": float(np.median(ratio)), "p90": float(np.percentile(ratio, 90)),
            "mean_batch": float(steps["batch"].mean())}


def _measured(out: Path) -> dict:
    from reports.report import ReportOptions, build_summary
    from reports.run_data import load_run

    summary = build_summary(load_run(out), ReportOptions(figures=False))
    (level,) = summary["levels"]
    return {m: {q: level["metrics"][m][q] for q in ("p50", "p99")} for m in METRICS}


def _simulated(args, concurrency: int) -> dict:
    command = [sys.executable, "-m", "servecap", "calc", "simulate", "--model", args.model, "--gpu", args.gpu,
               "--dtype", args.dtype, "--concurrency", str(concurrency), "--prompt-tokens", str(args.prompt_tokens),
               "--output-tokens", str(args.output_tokens), "--requests", str(max(400, 8 * concurrency)), "--json"]
    level = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)["levels"][0]
    return {m: {q: level["metrics"][m][q] for q in ("p50", "p99")} for m in METRICS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--concurrency", default="1,8,32,64,128")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--warmup", default="3s")
    p.add_argument("--duration", default="10s")
    p.add_argument("--out", default=f"runs/bench-emulation-{time.strftime('%Y%m%d-%H%M%S')}")
    args = p.parse_args(argv)
    out = Path(args.out)
    step_model = gpu_engine(get_model(args.model), get_gpu(args.gpu), dtype=args.dtype).step_model
    spec = ReferenceServerSpec.from_flags(["--emulate", args.gpu, "--model", args.model, "--dtype", args.dtype,
                                           "--no-classifier"])
    print(f"{'c':>5} {'steps':>6} {'batch':>6} {'step median':>12} {'step p90':>9} {'cores':>6}  "
          + "  ".join(f"{m.removesuffix('_s')} {q} meas/sim" for m in METRICS for q in ("p50", "p99")))
    with ServerProcess(spec) as server:
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            level_dir = out / f"c{concurrency}"
            cpu0, wall0 = _tree_cpu_s(server.pid), time.perf_counter()
            _sweep(server.base_url, level_dir, concurrency, args)
            cores = (_tree_cpu_s(server.pid) - cpu0) / (time.perf_counter() - wall0)
            steps = _step_fidelity(level_dir, step_model)
            measured, simulated = _measured(level_dir), _simulated(args, concurrency)
            pairs = "  ".join(f"{measured[m][q] * 1e3:7.1f}/{simulated[m][q] * 1e3:7.1f} ({measured[m][q] / simulated[m][q] - 1:+.0%})"
                              for m in METRICS for q in ("p50", "p99"))
            print(f"{concurrency:>5} {steps['steps']:>6} {steps['mean_batch']:>6.1f} {steps['median']:>+12.2%} "
                  f"{steps['p90']:>+9.2%} {cores:>6.2f}  {pairs}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

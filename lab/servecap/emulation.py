"""An emulated GPU replica under load: does each step last what its model says, and what does it cost the host?

    python -m lab.servecap.emulation [--gpu h100-sxm] [--model llama-3.1-8b] [--concurrency 1,8,32,64,128]
        [--rates R1,R2,...] [--prompt-tokens 512] [--output-tokens 128] [--duration 10s] [--stream-interval N] [--out runs/bench-emulation]

Starts one `servecap serve --emulate GPU --model M` replica, then measures each concurrency with the real
`servecap sweep --url` (streaming, closed loop), one sweep a level, then each `--rates` level (open loop,
Poisson arrivals) the same way. Per level it prints:
- the realised step time over the modelled one for the step's own batch shape, read from the engine's
  step record (the step's own clock, not the client's): median and p90 of realised / modelled - 1;
- the replica's CPU over the level (engine process and front end together), in cores;
- the simulator's prediction for the same level (`calc simulate` with the same GPU sizing) beside the
  sweep's TTFT, TPOT and E2E p50 and p99;
- the same simulation given the front end this replica was measured with (each request's delays between
  the client and the engine, joined from the run's records, as `servecap predict` takes them): `calc
  simulate` has no front end for a GPU, while the emulated replica serves through this host's HTTP stack,
  so this pair isolates the engine core (scheduler, KV, step times) from the front end;
- for an open-loop level, that simulation again on the level's own send times (replayed, measured over the
  same window), so that the arrival draw is out of the comparison too: a p99 over a minute's requests is
  close to its slowest one, and a Poisson draw of the same rate bunches them differently.
Last, the median |error| over the levels per metric and quantile, and over all cells at each quantile.
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

from calculators.engine_profiles import engine_defaults
from calculators.gpu_engine import gpu_engine
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

METRICS = ("ttft_s", "tpot_s", "e2e_s")


def _tree_cpu_s(pid: int) -> float:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(p.cpu_times().user + p.cpu_times().system for p in procs)


def _sweep(url: str, out: Path, level: tuple[str, str], args) -> None:
    command = [sys.executable, "-m", "servecap", "sweep", "--url", url, "--model", args.model, "--out", str(out),
               f"--{level[0]}", level[1], "--warmup", args.warmup, "--duration", args.duration,
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
    (level,) = summary.levels
    return {m: {q: level.metrics[m].at(q) for q in ("p50", "p99")} for m in METRICS}


def _requests(level: tuple[str, str]) -> int:
    """Simulated requests for a level: 8 rounds of a closed loop, 60 s of an open one, at least 400."""
    return max(400, 8 * int(level[1])) if level[0] == "concurrency" else max(400, int(60 * float(level[1])))


def _simulated(args, level: tuple[str, str]) -> dict:
    command = [sys.executable, "-m", "servecap", "calc", "simulate", "--model", args.model, "--gpu", args.gpu,
               "--dtype", args.dtype, f"--{level[0]}", level[1], "--prompt-tokens", str(args.prompt_tokens),
               "--output-tokens", str(args.output_tokens), "--requests", str(_requests(level)), "--json"]
    simulated = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)["levels"][0]
    return {m: {q: simulated["metrics"][m][q] for q in ("p50", "p99")} for m in METRICS}   # calc simulate's JSON


def _measured_send_offsets(out: Path) -> tuple[float, ...]:
    """The level's scheduled send times (warm-up included), in s from its first."""
    from contract.records import RECORDS_FILE, read_records

    times = sorted(r["t_sched"] for r in read_records(out / RECORDS_FILE) if r.get("t_sched") is not None)
    return tuple(t - times[0] for t in times)


def _simulated_with_front_end(args, level: tuple[str, str], out: Path, replay: bool = False) -> dict:
    """The simulator, sized as calc simulate sizes it, with the front end measured in this level's run;
    `replay` (an open-loop level): on the level's own send times, measured over its own window (the same
    requests' warm-up and duration), instead of a Poisson draw of its rate."""
    from calculators.sim.simulate import SimServer, SimWorkload, simulate
    from contract.distributions import LengthDistribution
    from reports.predict.evidence import level_samples
    from reports.report import ReportOptions
    from reports.summary import build_levels
    from reports.run_data import load_run

    data = load_run(out)
    levels = build_levels(data, ReportOptions(figures=False).slo_for(data.run))
    (samples,) = level_samples(data, levels).values()
    (sample,) = samples
    sizing = gpu_engine(get_model(args.model), get_gpu(args.gpu), dtype=args.dtype)
    limits = engine_defaults(sizing.engine, get_gpu(args.gpu)).limit_flags()
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks,
                                     block_size=sizing.block_size, **limits)
    if replay:
        from contract.options import parse_duration

        arrivals = {"arrival_times": _measured_send_offsets(out), "warmup_s": parse_duration(args.warmup, "--warmup"),
                    "duration_s": parse_duration(args.duration, "--duration")}
    elif level[0] == "concurrency":
        arrivals = {"concurrency": int(level[1])}
    else:
        arrivals = {"rate_rps": float(level[1])}
    workload = SimWorkload(prompt_tokens=LengthDistribution.uniform(args.prompt_tokens, args.prompt_tokens),
                        output_tokens=LengthDistribution.uniform(args.output_tokens, args.output_tokens),
                        requests=_requests(level), seed=0, **arrivals)
    simulated = simulate(server, workload, sizing.step_model, sample.front_end)
    return {m: {q: simulated.metrics[m][q] for q in ("p50", "p99")} for m in METRICS}


def _pairs(measured: dict, simulated: dict) -> str:
    return "  ".join(f"{measured[m][q] * 1e3:7.1f}/{simulated[m][q] * 1e3:7.1f} ({measured[m][q] / simulated[m][q] - 1:+.0%})"
                     for m in METRICS for q in ("p50", "p99"))


def _medians(label: str, pairs: list[tuple[dict, dict]]) -> None:
    errors = {(m, q): [abs(meas[m][q] / sim[m][q] - 1) for meas, sim in pairs] for m in METRICS for q in ("p50", "p99")}
    cells = "  ".join(f"{m.removesuffix('_s')} {q} {np.median(e):.1%}" for (m, q), e in errors.items())
    pooled = "  ".join(f"all {q} {np.median([x for (_, qq), e in errors.items() if qq == q for x in e]):.1%}"
                       for q in ("p50", "p99"))
    print(f"median |measured / {label} - 1| over the levels: {cells};  {pooled}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--concurrency", default="1,8,32,64,128")
    p.add_argument("--rates", default="", help="open-loop levels (requests/s) measured after the closed-loop ones")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--warmup", default="3s")
    p.add_argument("--duration", default="10s")
    p.add_argument("--stream-interval", default="1", help="the replica's tokens per streamed chunk after the first")
    p.add_argument("--out", default=f"runs/bench-emulation-{time.strftime('%Y%m%d-%H%M%S')}")
    args = p.parse_args(argv)
    out = Path(args.out)
    step_model = gpu_engine(get_model(args.model), get_gpu(args.gpu), dtype=args.dtype).step_model
    plain: list[tuple[dict, dict]] = []
    fronted: list[tuple[dict, dict]] = []
    replays: list[tuple[dict, dict]] = []
    spec = ReferenceServerSpec.from_flags(["--emulate", args.gpu, "--model", args.model, "--dtype", args.dtype,
                                           "--no-classifier", "--stream-interval", args.stream_interval])
    print(f"{'c':>5} {'steps':>6} {'batch':>6} {'step median':>12} {'step p90':>9} {'cores':>6}  "
          + "  ".join(f"{m.removesuffix('_s')} {q} meas/sim" for m in METRICS for q in ("p50", "p99")))
    with ServerProcess(spec) as server:
        levels = [("concurrency", c) for c in filter(None, args.concurrency.split(","))]
        levels += [("rates", r) for r in filter(None, args.rates.split(","))]
        for level in levels:
            level_dir = out / f"{level[0][0]}{level[1]}"
            cpu0, wall0 = _tree_cpu_s(server.pid), time.perf_counter()
            _sweep(server.base_url, level_dir, level, args)
            cores = (_tree_cpu_s(server.pid) - cpu0) / (time.perf_counter() - wall0)
            steps = _step_fidelity(level_dir, step_model)
            measured, simulated = _measured(level_dir), _simulated(args, level)
            with_front_end = _simulated_with_front_end(args, level, level_dir)
            plain.append((measured, simulated))
            fronted.append((measured, with_front_end))
            name = level[1] if level[0] == "concurrency" else f"{level[1]}/s"
            print(f"{name:>5} {steps['steps']:>6} {steps['mean_batch']:>6.1f} {steps['median']:>+12.2%} "
                  f"{steps['p90']:>+9.2%} {cores:>6.2f}  {_pairs(measured, simulated)}", flush=True)
            print(f"{'':>5} {'':>6} {'':>6} {'':>12} {'':>9} {'':>6}  {_pairs(measured, with_front_end)}"
                  "  (simulator + the measured front end)", flush=True)
            if level[0] == "rates":   # the same, on this level's own send times: the arrival draw taken out
                replayed = _simulated_with_front_end(args, level, level_dir, replay=True)
                replays.append((measured, replayed))
                print(f"{'':>5} {'':>6} {'':>6} {'':>12} {'':>9} {'':>6}  {_pairs(measured, replayed)}"
                      "  (simulator + front end, replaying the level's send times)", flush=True)
    _medians("calc simulate", plain)
    _medians("simulator with the measured front end", fronted)
    if replays:
        _medians("simulator with the front end on the measured send times (open-loop levels)", replays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

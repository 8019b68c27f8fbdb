"""The GPU checks in one run (issue 17): the engine bench on the device, the NVML sampler, a short sweep.

    scripts/gpu_check.sh                                   # a GPU machine: its own venv and torch, then this
    python -m lab.servecap.gpu_check --device cpu --quick  # the same steps on a CPU (the test suite runs it)
    python -m lab.servecap.gpu_check --dry-run             # print the steps' commands, run nothing

Steps, each a subprocess of this interpreter (one that fails says why in the log; the rest still run):
1. environment: torch and its CUDA build, the device, its catalog datasheet bandwidth;
2. the engine bench on the device (bf16 on a GPU) with the `small` preset: tokens/s per strategy and
   the decode pass's achieved memory bandwidth against the datasheet figure (gpt-fast's measure);
3. the bare forward passes of `llama-3.1-8b` (random weights): big enough that a decode step is
   bound by reading the weights, so its GB/s say how close the eager engine gets to the memory;
   the NVML sampler (`servecap sample`) runs for 30 s beside it, so the GPU it reads is busy;
4. a short sweep, static vs continuous at concurrency 16, with `--device cuda`.
Every step's timeout is cut to what is left of `--budget-s` (default 540 s: a 10-minute lease,
less the venv). Writes `gpu_check.json` (the figures), `gpu_check.log` (every step's output),
the sampler's `nvml_samples.csv` and the sweep's `sweep_report.md` under `--out`.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from contract.summary import Summary

SAMPLER_S = 30.0
SWEEP_MODULES = ("fastapi", "uvicorn", "pydantic", "locust", "prometheus_client", "httpx")   # the server and Locust
@dataclass
class Step:
    """One check: `argv` run with this interpreter's `python -m`, its JSON (if any) read by `read`."""

    name: str
    argv: list[str]
    timeout_s: float
    needs: tuple[str, ...] = ()          # modules the step imports (a missing one skips it, said so)
    background: bool = False             # starts, then runs beside the next step
    result: dict = field(default_factory=dict)
    started: float = 0.0


def plan(args: argparse.Namespace) -> list[Step]:
    """The steps for `--device` (cuda: the real checks; cpu: the same steps, small and short)."""
    py = [sys.executable]
    gpu = args.device.startswith("cuda")
    dtype = "bfloat16" if gpu else "float32"
    work = Path(args.work)
    bench = [*py, "-m", "reference_server.engine_bench", "--device", args.device, "--dtype", dtype, "--json"]
    if args.quick:
        bench += ["--model", "tiny", "--num-requests", "6", "--prompt-tokens", "uniform:4:20", "--output-tokens",
                  "uniform:2:10", "--max-batch", "3", "--forward-iters", "1", "--num-threads", "1"]
        big = [*bench, "--forward-only"]
        sampler_s, sweep_levels, sweep_window = 3.0, "2", ["--warmup", "1s", "--duration", "3s"]
        sweep_model = "tiny"
    else:
        bench += ["--model", "small", "--strategies", "none,static,continuous", "--none-requests", "8"]
        big = [*py, "-m", "reference_server.engine_bench", "--device", args.device, "--dtype", dtype, "--json",
               "--model", "llama-3.1-8b", "--forward-only", "--forward-iters", "10"]
        sampler_s, sweep_levels, sweep_window = SAMPLER_S, "16", ["--warmup", "5s", "--duration", "15s"]
        sweep_model = "small"
    server_args = f"--device {args.device} --dtype {dtype}"
    return [
        Step("environment", [*py, "-m", "lab.servecap.gpu_check", "--environment"], 120, needs=("torch",)),
        Step("bench", bench, 240, needs=("torch", "rich", "numpy")),
        Step("sampler", [*py, "-m", "servecap", "sample", "--out", str(work / "sampler"), "--interval", "1",
                         "--duration", str(sampler_s)], sampler_s + 60, needs=("psutil",), background=True),
        Step("bench_big", big, 360, needs=("torch", "rich", "numpy")),
        Step("sweep", [*py, "-m", "servecap", "sweep", "--out", str(work / "sweep"), "--model", sweep_model,
                       "--strategies", "static,continuous", "--concurrency", sweep_levels, *sweep_window,
                       "--server-args", server_args], 300, needs=SWEEP_MODULES),
    ]


def missing_modules(step: Step) -> list[str]:
    return [name for name in step.needs if importlib.util.find_spec(name) is None]


def run_steps(steps: list[Step], log, budget_s: float) -> None:
    """Run each step under what is left of the budget; background steps are joined after the next one."""
    deadline = time.monotonic() + budget_s
    pending: list[tuple[Step, subprocess.Popen, float]] = []
    for step in steps:
        missing = missing_modules(step)
        left = deadline - time.monotonic()
        if missing or left < 5:
            why = f"missing {', '.join(missing)} (carry them as wheels: scripts/gpu_check.sh)" if missing \
                else "no time left in the budget"
            step.result = {"status": "skipped", "why": why}
            _log(log, step.name, f"skipped: {why}")
            continue
        _log(log, step.name, shlex.join(step.argv))
        step.started = time.monotonic()
        proc = subprocess.Popen(step.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if step.background:
            pending.append((step, proc, time.monotonic() + min(step.timeout_s, left)))
            continue
        _finish(step, proc, min(step.timeout_s, left), log)
        for waiting, waiting_proc, until in pending:
            _finish(waiting, waiting_proc, max(1.0, until - time.monotonic()), log)
        pending = []
    for waiting, waiting_proc, until in pending:
        _finish(waiting, waiting_proc, max(1.0, until - time.monotonic()), log)


def _finish(step: Step, proc: subprocess.Popen, timeout_s: float, log) -> None:
    """Wait for `step` (killed past `timeout_s`), log its output, keep its JSON stdout if it printed one."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        status = "ok" if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        status = f"timed out after {timeout_s:.0f} s"
    _log(log, step.name, f"{stdout}\n{stderr}")
    step.result = {"status": status, "seconds": round(time.monotonic() - step.started, 1)}
    if status == "ok" and stdout.lstrip().startswith("{"):
        try:
            step.result["json"] = json.loads(stdout)
        except json.JSONDecodeError:
            step.result["status"] = "ok, but its JSON did not parse"


def _log(log, name: str, text: str) -> None:
    log.write(f"\n===== {name} =====\n{text.rstrip()}\n")
    log.flush()


def environment() -> dict:
    """torch, its CUDA build, and the first CUDA device with its catalog datasheet bandwidth."""
    import torch

    from engine_core.gpus import catalog_gpu_for, get_gpu

    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        gpu = catalog_gpu_for(name)
        info.update(device_name=name, catalog_gpu=gpu, capability=list(torch.cuda.get_device_capability(0)),
                    memory_gib=torch.cuda.get_device_properties(0).total_memory / 2**30,
                    datasheet_gb_s=get_gpu(gpu).bandwidth_bytes_per_s / 1e9 if gpu else None)
    return info


# -- reading each step's figures -----------------------------------------------------------
def bench_figures(result: dict | None) -> dict:
    """tokens/s per strategy, the forward passes' GB/s and their share of the datasheet."""
    if not result:
        return {}
    fwd = result["forward_only"]
    batch = result["workload"]["max_batch"]
    return {
        "preset": result["preset"], "dtype": result["dtype"],
        "tokens_per_s": {name: s["output_tokens_per_s"] for name, s in result["strategies"].items()},
        "forward_tokens_per_s_b1": fwd["tokens_per_s_b1"], f"forward_tokens_per_s_b{batch}": fwd[f"tokens_per_s_b{batch}"],
        "achieved_gb_s_b1": fwd["achieved_gb_s_b1"], f"achieved_gb_s_b{batch}": fwd[f"achieved_gb_s_b{batch}"],
        "datasheet": result.get("datasheet"),
        "share_of_datasheet_b1": fwd.get("share_of_datasheet_b1"),
    }


def sampler_figures(samples_csv: Path) -> dict:
    """Rows per source and the NVML readings' means (util, power, SM clock) and peak memory."""
    if not samples_csv.exists():
        return {"rows": 0}
    with samples_csv.open() as f:
        rows = list(csv.DictReader(f))
    nvml = [r for r in rows if r["source"] == "nvml"]

    def mean(column: str) -> float | None:
        values = [float(r[column]) for r in nvml if r[column]]
        return sum(values) / len(values) if values else None

    return {"rows": len(rows), "nvml_rows": len(nvml), "sources": sorted({r["source"] for r in rows}),
            "util_pct_mean": mean("util_pct"), "power_w_mean": mean("power_w"), "sm_clock_mhz_mean": mean("sm_clock_mhz"),
            "mem_used_gib_max": max((float(r["mem_used_bytes"]) for r in nvml if r["mem_used_bytes"]), default=0) / 2**30}


def sweep_figures(run_dir: Path) -> dict:
    """Output tokens/s per level and continuous / static at each concurrency."""
    summary = run_dir / "summary.json"
    if not summary.exists():
        return {}
    rates = {level.level: level.output_tokens_per_s
             for level in Summary.from_dict(json.loads(summary.read_text())).levels}
    ratios = {}
    for level, rate in rates.items():
        strategy, _, offered = level.partition("/")
        static = rates.get(f"static/{offered}")
        if strategy == "continuous" and static:
            ratios[offered] = rate / static
    return {"output_tokens_per_s": rates, "continuous_over_static": ratios}


def summarize(steps: dict[str, Step], work: Path, device: str) -> dict:
    summary = {
        "steps": {name: {k: v for k, v in step.result.items() if k != "json"} for name, step in steps.items()},
        "environment": steps["environment"].result.get("json"),
        "bench": bench_figures(steps["bench"].result.get("json")),
        "bench_big": bench_figures(steps["bench_big"].result.get("json")),
        "sampler": sampler_figures(work / "sampler" / "samples.csv"),
        "sweep": sweep_figures(work / "sweep"),
    }
    summary["problems"] = problems(summary, device)
    return summary


def problems(summary: dict, device: str) -> list[str]:
    """What the run failed to show: a step that did not finish, and on a GPU, a sampler that fell
    back to the host or a CUDA device torch does not see."""
    found = [f"{name}: {step['status']}" + (f" ({step['why']})" if "why" in step else "")
             for name, step in summary["steps"].items() if step.get("status") != "ok"]
    if device.startswith("cuda"):
        env = summary["environment"] or {}
        if not env.get("cuda_available"):
            found.append(f"torch {env.get('torch')} sees no CUDA device")
        if summary["sampler"].get("nvml_rows", 0) == 0:
            found.append("the sampler read no NVML rows (it fell back to the host: see gpu_check.log)")
    return found


def print_summary(summary: dict) -> None:
    env = summary["environment"] or {}
    print(f"\ntorch {env.get('torch')} (CUDA build {env.get('cuda_build')}), device {env.get('device_name', 'cpu')}, "
          f"catalog {env.get('catalog_gpu')}, datasheet {env.get('datasheet_gb_s')} GB/s")
    for key in ("bench", "bench_big"):
        b = summary[key]
        if b:
            share = b.get("share_of_datasheet_b1")
            print(f"{key}: {b['preset']} {b['dtype']}: forward b1 {b['forward_tokens_per_s_b1']:.1f} tok/s, "
                  f"{b['achieved_gb_s_b1']:.1f} GB/s at batch 1" + (f" ({share:.1%} of datasheet)" if share else "")
                  + "".join(f"; {name} {rate:.1f} tok/s" for name, rate in b["tokens_per_s"].items()))
    s = summary["sampler"]
    print(f"sampler: {s.get('nvml_rows', 0)} NVML rows of {s['rows']} ({', '.join(s.get('sources', [])) or 'none'}); "
          f"util {s.get('util_pct_mean')} %, power {s.get('power_w_mean')} W, peak memory "
          f"{s.get('mem_used_gib_max', 0):.1f} GiB")
    print(f"sweep: {summary['sweep'].get('output_tokens_per_s')}; continuous / static "
          f"{summary['sweep'].get('continuous_over_static')}")
    for name, step in summary["steps"].items():
        print(f"  {name}: {step.get('status')}" + (f" ({step['why']})" if "why" in step else "")
              + (f" in {step['seconds']} s" if "seconds" in step else ""))
    print("problems: " + ("; ".join(summary["problems"]) or "none"))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m lab.servecap.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (the same steps, for a test)")
    p.add_argument("--quick", action="store_true", help="tiny model, short windows (what the CPU test runs)")
    p.add_argument("--out", default="gpu_check_out", help="where the figures and the log go")
    p.add_argument("--work", default=None, help="run directories of the sampler and the sweep (default OUT/work)")
    p.add_argument("--budget-s", type=float, default=540.0, help="total seconds for all steps (default 540)")
    p.add_argument("--dry-run", action="store_true", help="print each step's command and exit")
    p.add_argument("--environment", action="store_true", help="print step 1's JSON (torch, CUDA, device) and exit")
    args = p.parse_args(argv)
    args.work = args.work or str(Path(args.out) / "work")
    if args.budget_s <= 0:
        p.error("--budget-s must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.environment:
        print(json.dumps(environment()))
        return 0
    steps = plan(args)
    if args.dry_run:
        for step in steps:
            missing = missing_modules(step)
            print(f"{step.name} (timeout {step.timeout_s:.0f} s{', beside the next step' if step.background else ''}"
                  f"{', missing ' + ', '.join(missing) if missing else ''}): {shlex.join(step.argv)}")
        return 0
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with (out / "gpu_check.log").open("w") as log:
        run_steps(steps, log, args.budget_s)
    summary = summarize({step.name: step for step in steps}, work, args.device)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2))
    for source, target in ((work / "sampler" / "samples.csv", "nvml_samples.csv"), (work / "sweep" / "report.md", "sweep_report.md")):
        if source.exists():
            shutil.copyfile(source, out / target)
    print_summary(summary)
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The calibrated simulator against vLLM's CPU build: a sweep in rounds, then its leave-one-level-out table.

    python -m lab.servecap.vllm_accuracy [--concurrency 1,2,4,8,16,32] [--duration 20s] [--rounds 4]
        [--out runs/vllm-accuracy] [--sources]

Builds the tiny random Llama (lab/servecap/tiny_llama.py, with .venv-vllm's transformers) unless
--checkpoint names one, starts vLLM on it with its engine on the last core (`taskset`, and its one
OpenMP thread bound there: VLLM_CPU_OMP_THREADS_BIND), moves vLLM's API server (the front end) to
the first core once it answers, as `servecap sweep` places the reference server's, and runs
`servecap sweep --url` there too (Locust beside the front end), then prints
`lab.reports.prediction_accuracy` on the run: vLLM keeps no step record, so the calibration is
the one `reports.predict.external_calibration` describes (the client's TPOT and vLLM's /metrics means).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from lab.servecap.vllm_vs_reference import OFFLINE, build_checkpoint, vllm_spec
from servecap.launch.process import ServerProcess

REPO = Path(__file__).resolve().parents[2]
MAX_NUM_SEQS = "32"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.servecap.vllm_accuracy", description=__doc__.split("\n")[0])
    parser.add_argument("--vllm-python", type=Path, default=REPO / ".venv-vllm" / "bin" / "python")
    parser.add_argument("--checkpoint", type=Path, help="an HF Llama checkpoint dir (default: build the tiny one)")
    parser.add_argument("--concurrency", default="1,2,4,8,16,32")
    parser.add_argument("--warmup", default="5s")
    parser.add_argument("--duration", default="20s")
    parser.add_argument("--rounds", default="4")
    parser.add_argument("--out", type=Path, help="keep the run directory here (default: a temp dir)")
    parser.add_argument("--sources", action="store_true", help="add the error decomposition")
    args = parser.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    if not args.vllm_python.exists():
        print(f"vllm_accuracy: error: {args.vllm_python} is missing (`make test-engines` creates .venv-vllm)",
              file=sys.stderr)
        return 2
    if len(cores) < 2:
        print("vllm_accuracy: error: needs two cores (vLLM's engine on one, its front end and Locust on another)",
              file=sys.stderr)
        return 2
    front, engine = cores[0], cores[-1]
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        checkpoint = args.checkpoint or build_checkpoint(args.vllm_python, out / "tiny-llama")
        env = {**OFFLINE, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": str(engine)}
        spec = vllm_spec(args.vllm_python, checkpoint, MAX_NUM_SEQS, prefix=("taskset", "-c", str(engine)))
        with ServerProcess(spec, log_path=out / "vllm.log",
                           startup_timeout_s=600, env=env) as server:
            # the API server process (every thread), not its engine-core child, to the front end's core
            subprocess.run(["taskset", "-a", "-cp", str(front), str(server.pid)], check=True, stdout=subprocess.DEVNULL)
            run = out / "run"
            sweep = subprocess.run(
                ["taskset", "-c", str(front), sys.executable, "-m", "servecap", "sweep", "--url", server.base_url,
                 "--out", str(run), "--concurrency", args.concurrency, "--warmup", args.warmup,
                 "--duration", args.duration, "--rounds", args.rounds, "--model-config", str(checkpoint / "config.json"),
                 "--seed", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if sweep.returncode != 0:
                print(f"vllm_accuracy: the sweep failed (exit {sweep.returncode}):\n{sweep.stderr[-3000:]}", file=sys.stderr)
                return 1
        print(f"vLLM's CPU build, engine on core {engine}, its front end and Locust on core {front}; "
              f"c={args.concurrency}, {args.duration} in {args.rounds} rounds after {args.warmup}; run: {run}")
        from lab.reports.prediction_accuracy import main as accuracy   # the servecap venv's reports
        return accuracy([str(run)] + (["--sources"] if args.sources else []))


if __name__ == "__main__":
    raise SystemExit(main())

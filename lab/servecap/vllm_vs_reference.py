"""The reference engine against vLLM's CPU build: one checkpoint, one workload, output tokens/s as a ratio.

    python -m lab.servecap.vllm_vs_reference [--concurrency 8] [--duration 20s] [--out runs/vllm-vs-ref]

Builds the tiny random Llama (lab/servecap/tiny_llama.py, with .venv-vllm's transformers) unless
--checkpoint names one, then, one server at a time (they never share the CPU), starts it, runs
`servecap sweep --url` against it with the same closed-loop workload (continuous batching in both:
the reference server's `continuous` strategy, vLLM's own scheduler; both float32, at most 8
sequences) and stops it. Prints each engine's output tokens/s, TTFT and TPOT p50, and
reference / vLLM. Neither server nor Locust is pinned. Threads: the reference engine runs one
torch thread (`--num-threads 1`, as `servecap sweep` starts it on a small machine: more OpenMP
threads than free cores stall each other, 7x slower measured on 2 cores); vLLM binds its OpenMP
threads as it decides (`VLLM_CPU_OMP_THREADS_BIND=auto`) unless --vllm-omp-bind says (e.g. `1`:
one thread on core 1, the reference engine's share).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from contract.level_result import LevelResult
from contract.summary import Summary
from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
MAX_NUM_SEQS = "8"


def build_checkpoint(vllm_python: Path, out: Path) -> Path:
    subprocess.run([str(vllm_python), str(REPO / "lab" / "servecap" / "tiny_llama.py"), str(out)], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, **OFFLINE})
    return out


def vllm_spec(vllm_python: Path, checkpoint: Path, max_num_seqs: str = MAX_NUM_SEQS,
              prefix: tuple[str, ...] = ()) -> CommandSpec:
    """vLLM's OpenAI server on the checkpoint; `prefix`: what runs it (e.g. `taskset -c 1`)."""
    return CommandSpec((*prefix, str(vllm_python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
                        "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", "{port}", "--dtype", "float32",
                        "--max-model-len", "1024", "--enforce-eager", "--max-num-seqs", max_num_seqs),
                       ready_path="/v1/models")


def reference_spec(checkpoint: Path) -> ReferenceServerSpec:
    return ReferenceServerSpec.from_flags(["--model", str(checkpoint), "--dtype", "float32", "--served-model-name",
                                           "tiny", "--strategy", "continuous", "--max-num-seqs", MAX_NUM_SEQS,
                                           "--num-threads", "1"])


def vllm_env(args: argparse.Namespace) -> dict:
    env = {**OFFLINE, "VLLM_CPU_KVCACHE_SPACE": "1"}
    if args.vllm_omp_bind:
        env["VLLM_CPU_OMP_THREADS_BIND"] = args.vllm_omp_bind
    return env


def measure(name: str, spec, env: dict, out: Path, args: argparse.Namespace) -> LevelResult:
    """Start the server, sweep it at one level, stop it; that level of its summary.json."""
    with ServerProcess(spec, log_path=out / f"{name}.log", startup_timeout_s=600, env=env) as server:
        run = out / name
        subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", server.base_url, "--out", str(run),
                        "--concurrency", str(args.concurrency), "--warmup", args.warmup, "--duration", args.duration,
                        "--prompt-tokens", args.prompt_tokens, "--output-tokens", args.output_tokens,
                        "--seed", "0", "--no-pin-cpus"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Summary.from_dict(json.loads((run / "summary.json").read_text())).levels[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.servecap.vllm_vs_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--vllm-python", type=Path, default=REPO / ".venv-vllm" / "bin" / "python")
    parser.add_argument("--checkpoint", type=Path, help="an HF Llama checkpoint dir (default: build the tiny one)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--warmup", default="5s")
    parser.add_argument("--duration", default="20s")
    parser.add_argument("--prompt-tokens", default="uniform:32:128")
    parser.add_argument("--output-tokens", default="64")
    parser.add_argument("--out", type=Path, help="keep the two run directories here (default: a temp dir)")
    parser.add_argument("--vllm-omp-bind", help="VLLM_CPU_OMP_THREADS_BIND for vLLM (default: vLLM's auto)")
    args = parser.parse_args(argv)
    if not args.vllm_python.exists():
        print(f"vllm_vs_reference: error: {args.vllm_python} is missing (`make test-engines` creates .venv-vllm)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        checkpoint = args.checkpoint or build_checkpoint(args.vllm_python, out / "tiny-llama")
        results = {"reference": measure("reference", reference_spec(checkpoint), {}, out, args),
                   "vllm": measure("vllm", vllm_spec(args.vllm_python, checkpoint), vllm_env(args), out, args)}
    print(f"c={args.concurrency}, prompts {args.prompt_tokens}, outputs {args.output_tokens} tokens, "
          f"{args.duration} measured after {args.warmup}; {os.cpu_count()} cores; vLLM OpenMP binding "
          f"{args.vllm_omp_bind or 'auto'}, reference engine 1 torch thread")
    for name, level in results.items():
        m = level.metrics
        print(f"  {name:9s} {level.output_tokens_per_s:8.1f} output tok/s   TTFT p50 {m['ttft_s'].p50 * 1e3:6.1f} ms"
              f"   TPOT p50 {m['tpot_s'].p50 * 1e3:6.2f} ms   {level.requests} requests")
    ratio = results["reference"].output_tokens_per_s / results["vllm"].output_tokens_per_s
    print(f"reference / vLLM output tokens/s: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

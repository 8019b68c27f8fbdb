"""The MoE what-if against published latency (issue 55's TTFT / TPOT check): GPUStack's performance lab, vLLM.

    .venv/bin/python -m lab.calculators.moe_latency [--only ID,...] [--csv OUT]

Each row of lab/calculators/moe_latency_points.csv is one `vllm bench serve` result published in
gpustack/gpustack's docs/performance-lab/<model>/h100.md (the commit is in the row's `source`): `--dataset-name
random` with fixed input and output lengths, `--num-prompts N` and no request rate (every request sent at
once, vLLM bench's default rate of inf), against `vllm serve` with the flags the row names (the "baseline"
runs: vLLM's defaults; one "optimized" configuration whose only flag, `--max-num-batched-tokens 16384`, the
simulator takes). The pages' runs that add `--async-scheduling` are left out (not modelled); so are their
ShareGPT runs (the dataset's lengths are not in the tree).

The prediction is `servecap calc simulate --model M --gpu G --dtype D --tp N --engine vllm --engine-version
0.11 [--max-model-len L] [--max-num-batched-tokens T]` with every request arriving at t = 0 (vLLM 0.10.2's
rows are sized as 0.11: the same scheduling defaults), and vLLM bench's own figures from the simulated
requests: duration from the start to the last answer, output tokens over it, TTFT, and TPOT per request as
(latency - TTFT) / (output tokens - 1). The rows' answers stop at the model's end of text (no --ignore-eos):
each request here generates the row's mean (total generated / requests), and its prompt the row's mean input.
The engine's defaults and the catalog come from their sources (calculators.engine_profiles,
calculators.gpu_engine), not fitted to these rows.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calculators.gpu_engine import gpu_engine
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from contract.distributions import LengthDistribution
from engine_core.gpus import get_gpu
from engine_core.models import get_model

POINTS = Path(__file__).with_name("moe_latency_points.csv")
METRICS = ("duration_s", "out_tok_s", "ttft_mean_ms", "ttft_median_ms", "ttft_p99_ms", "tpot_mean_ms",
           "tpot_median_ms", "tpot_p99_ms")


@dataclass(frozen=True)
class Point:
    id: str
    model: str
    gpu: str
    dtype: str
    tp: int
    max_model_len: int | None
    max_num_batched_tokens: int | None
    requests: int
    input_tokens: int     # over all requests
    output_tokens: int    # generated, over all requests
    measured: dict        # METRICS

    @property
    def prompt(self) -> int:
        return round(self.input_tokens / self.requests)

    @property
    def output(self) -> int:
        return max(1, round(self.output_tokens / self.requests))


def read_points(path: Path = POINTS) -> list[Point]:
    def number(text: str) -> int | None:
        return int(text) if text else None

    points = []
    with path.open() as f:
        for r in csv.DictReader(f):
            measured = {name: float(r[name]) for name in METRICS if name in r}
            measured["out_tok_s"] = float(r["output_tokens"]) / float(r["duration_s"])
            points.append(Point(r["id"], r["model"], r["gpu"], r["dtype"], int(r["tp"]), number(r["max_model_len"]),
                                number(r["max_num_batched_tokens"]), int(r["requests"]), int(r["input_tokens"]),
                                int(r["output_tokens"]), measured))
    return points


def predict(point: Point) -> dict:
    """vLLM bench's figures (METRICS) of the point's offline run, simulated."""
    sizing = gpu_engine(get_model(point.model), get_gpu(point.gpu), dtype=point.dtype, tp=point.tp, engine="vllm",
                        engine_version="0.11", max_model_len=point.max_model_len,
                        max_num_batched_tokens=point.max_num_batched_tokens)
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks, block_size=sizing.block_size,
                                  **sizing.limit_flags())
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(point.prompt),
                           output_tokens=LengthDistribution.fixed(point.output),
                           arrival_times=(0.0,) * point.requests)
    trace = simulate_trace(server, workload, sizing.step_model)
    ttft = (trace.first_token - trace.arrival) * 1e3
    latency = (trace.end - trace.arrival) * 1e3
    many = trace.output > 1
    tpot = (latency[many] - ttft[many]) / (trace.output[many] - 1)
    duration = float(np.nanmax(trace.end))
    out = {"duration_s": duration, "out_tok_s": float(trace.output.sum()) / duration}
    for name, values in (("ttft", ttft), ("tpot", tpot)):
        out[f"{name}_mean_ms"] = float(np.mean(values))
        out[f"{name}_median_ms"] = float(np.median(values))
        out[f"{name}_p99_ms"] = float(np.percentile(values, 99))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.calculators.moe_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma list of point ids")
    parser.add_argument("--csv", type=Path, help="write every point's prediction and error here")
    args = parser.parse_args(argv)
    points = read_points()
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if p.id in wanted]
    errors: dict[str, list[float]] = {name: [] for name in METRICS}
    rows, start = [], time.perf_counter()
    for number, point in enumerate(points, 1):
        predicted = predict(point)
        row = {"id": point.id, "prompt": point.prompt, "output": point.output}
        for name in METRICS:
            error = predicted[name] / point.measured[name] - 1
            errors[name].append(error)
            row[f"{name}_measured"] = round(point.measured[name], 2)
            row[f"{name}_predicted"] = round(predicted[name], 2)
            row[f"{name}_error"] = round(error, 4)
        rows.append(row)
        print(f"[{number}/{len(points)}] {point.id:22s} {point.prompt}/{point.output} x{point.requests}: "
              + ", ".join(f"{name} {predicted[name]:.4g}/{point.measured[name]:.4g} ({row[f'{name}_error']:+.0%})"
                          for name in ("out_tok_s", "ttft_mean_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_median_ms")),
              flush=True)
    print(f"{len(points)} points (predicted / measured), {time.perf_counter() - start:.1f} s:")
    for name, values in errors.items():
        if values:
            print(f"  {name:15s} median |error| {statistics.median(map(abs, values)):6.1%}, median signed "
                  f"{statistics.median(values):+6.1%}, worst {max(values, key=abs):+.1%}")
    if args.csv and rows:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

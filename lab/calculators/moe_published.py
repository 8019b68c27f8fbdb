"""The MoE what-if against published offline throughput (issue 55's check): TensorRT-LLM's perf overview.

    .venv/bin/python -m lab.calculators.moe_published [--group hopper|blackwell|all] [--engine tensorrt-llm]
        [--only ID,...] [--csv OUT]

Each row of lab/calculators/moe_published_points.csv is one cell of the tables in TensorRT-LLM's
docs/source/developer-guide/perf-overview.md (NVIDIA/TensorRT-LLM at 03e27c7d5ff0c6e89f8328838c0a8e64f1b34f9d,
"Output Throughput per GPU" of `trtllm-bench throughput`, every request queued at once, fixed lengths, the
request counts of its "Preparing a Dataset" table). Its layout is the column's: "DEP N" is tp 1, dp N,
expert parallel (`--tp N --ep N` with `enable_attention_dp: true`), "TP1" one GPU; the KV format is the
options file's (fp8 for DeepSeek-R1 and gpt-oss on Blackwell, auto elsewhere: a catalog model's bf16).

The prediction is the one `servecap calc simulate --model M --gpu G --dtype D --dp N --expert-parallel
--engine tensorrt-llm` runs (calculators.gpu_engine: the engine's sizing and step model; its defaults, not
fitted here), with every request arriving at t = 0 and the benchmark's own figure: all output tokens over
the time from the first arrival to the last answer, per GPU.

`--limits bench` (the default) gives the engine the batching limits trtllm-bench sets itself when its options
leave them out, as a user reproducing the table would pass them (`--max-num-seqs`, `--max-num-batched-tokens`,
`--chunked-prefill on`): tensorrt_llm/bench/build/tuning.py (NVIDIA/TensorRT-LLM at a7e572f),
`calc_engine_setting` and `finetune_setting`: the requests the KV memory holds at ISL + OSL by its own estimate
(2 x layers x max(tp, KV heads) x head size x KV bytes a token; the memory of tp GPUs less the weights, x 0.90),
at most 4096, rounded up (to 32 under 256, 128 under 1024, else 256; at least 64); tokens a step that batch x
(1 + ISL / OSL), at most 32768, rounded up (to 256 under 4096, at least 2048; 512 under 8192; else 1024);
chunked prefill on (benchmark/throughput.py at 5685103: --enable_chunked_context defaults to True). With
attention DP each rank is an executor with these limits. `--limits engine`: the engine's own defaults
(calculators.engine_profiles), as `calc simulate` sizes it without those flags.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calculators.gpu_engine import gpu_engine
from calculators.moe_layout import MoeLayout
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from contract.distributions import LengthDistribution
from calculators.weights import param_counts
from engine_core.dtypes import parse_dtype, parse_kv_dtype
from engine_core.gpus import GIB, get_gpu
from engine_core.models import get_model

POINTS = Path(__file__).with_name("moe_published_points.csv")
HOPPER = ("h100-sxm", "h200")


@dataclass(frozen=True)
class Point:
    id: str
    model: str
    gpu: str
    dtype: str
    kv_dtype: str | None
    tp: int
    dp: int
    expert_parallel: bool
    input_tokens: int
    output_tokens: int
    requests: int
    measured: float   # output tokens/s per GPU
    column: str


def read_points(path: Path = POINTS) -> list[Point]:
    with path.open() as f:
        return [Point(r["id"], r["model"], r["gpu"], r["dtype"], r["kv_dtype"] or None, int(r["tp"]), int(r["dp"]),
                      r["expert_parallel"] == "1", int(r["input_tokens"]), int(r["output_tokens"]),
                      int(r["requests"]), float(r["out_tok_s_per_gpu"]), r["column"]) for r in csv.DictReader(f)]


def _round_up(value: float, step: int) -> int:
    return step * math.ceil(value / step)


def bench_limits(point: Point) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench picks for the point (module docstring)."""
    arch, gpu = get_model(point.model), get_gpu(point.gpu)
    gpus = MoeLayout(point.dp, point.expert_parallel).gpus(point.tp)
    kv_bytes = parse_kv_dtype(point.kv_dtype or "bf16").bytes_per_element
    head = arch.head_dim
    per_token = 2 * arch.num_layers * max(gpus, arch.num_kv_heads) * head * kv_bytes / GIB
    available = gpu.usable_bytes / GIB * gpus - param_counts(arch).total * parse_dtype(point.dtype).bytes_per_element / GIB
    requests = available * 0.90 / (per_token * (point.input_tokens + point.output_tokens))
    batch = min(requests, 4096)
    tokens = min(batch * (1 + point.input_tokens / point.output_tokens), 32768)
    batch = max(64, _round_up(batch, 32)) if batch < 256 else _round_up(batch, 128 if batch < 1024 else 256)
    tokens = (max(2048, _round_up(tokens, 256)) if tokens < 4096 else _round_up(tokens, 512 if tokens < 8192
                                                                                else 1024))
    return batch, tokens


def predict(point: Point, engine: str, limits_from: str = "bench") -> tuple[float, float, float]:
    """(output tokens/s per GPU, mean batch, TPOT p50 s) of the offline run, simulated."""
    layout = MoeLayout(point.dp, point.expert_parallel)
    given = {}
    if limits_from == "bench":
        seqs, tokens = bench_limits(point)
        given = {"max_num_seqs": seqs, "max_num_batched_tokens": tokens}
    sizing = gpu_engine(get_model(point.model), get_gpu(point.gpu), dtype=point.dtype, tp=point.tp, engine=engine,
                        kv_dtype=point.kv_dtype, max_model_len=point.input_tokens + point.output_tokens,
                        layout=layout, **given)
    limits = sizing.limit_flags()
    if limits_from == "bench":
        limits["chunked_prefill"] = True
    server = SimServer.from_flags("continuous", num_kv_blocks=sizing.num_kv_blocks, block_size=sizing.block_size,
                                  **limits)
    workload = SimWorkload(prompt_tokens=LengthDistribution.fixed(point.input_tokens),
                           output_tokens=LengthDistribution.fixed(point.output_tokens),
                           arrival_times=(0.0,) * point.requests)
    trace = simulate_trace(server, workload, sizing.step_model)
    span = float(np.nanmax(trace.end) - np.min(trace.arrival))
    decode = (trace.end - trace.first_token) / np.maximum(trace.output - 1, 1)
    steps = max(trace.steps, 1)
    return (float(trace.output.sum()) / span / layout.gpus(point.tp), trace.sequences_in_steps / steps,
            float(np.nanmedian(decode)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.calculators.moe_published", description=__doc__.split("\n")[0])
    parser.add_argument("--group", choices=("hopper", "blackwell", "all"), default="all")
    parser.add_argument("--engine", default="tensorrt-llm")
    parser.add_argument("--limits", choices=("bench", "engine"), default="bench",
                        help="trtllm-bench's own batching limits (default) or the engine's defaults")
    parser.add_argument("--only", default="", help="comma list of point ids")
    parser.add_argument("--csv", type=Path, help="write every point's prediction here")
    args = parser.parse_args(argv)
    points = read_points()
    if args.group != "all":
        points = [p for p in points if (p.gpu in HOPPER) == (args.group == "hopper")]
    if args.only:
        wanted = set(args.only.split(","))
        points = [p for p in points if p.id in wanted]
    rows, errors = [], {"hopper": [], "blackwell": []}
    start = time.perf_counter()
    for number, point in enumerate(points, 1):
        predicted, batch, tpot = predict(point, args.engine, args.limits)
        error = predicted / point.measured - 1
        errors["hopper" if point.gpu in HOPPER else "blackwell"].append(error)
        rows.append({"id": point.id, "column": point.column, "isl": point.input_tokens, "osl": point.output_tokens,
                     "measured": point.measured, "predicted": round(predicted, 1), "error": round(error, 4),
                     "mean_batch": round(batch, 1), "tpot_p50_ms": round(tpot * 1e3, 2)})
        print(f"[{number}/{len(points)}] {point.id:24s} {point.column:18s} measured {point.measured:8.0f} "
              f"predicted {predicted:8.0f} ({error:+.1%}), mean batch {batch:7.1f}, TPOT p50 {tpot * 1e3:6.2f} ms",
              flush=True)
    for group, values in errors.items():
        if values:
            signed = statistics.median(values)
            print(f"{group}: {len(values)} points, median |error| {statistics.median(map(abs, values)):.1%}, "
                  f"median signed {signed:+.1%}, worst {max(values, key=abs):+.1%}")
    every = errors["hopper"] + errors["blackwell"]
    if every:
        print(f"all: {len(every)} points, median |error| {statistics.median(map(abs, every)):.1%} "
              f"({time.perf_counter() - start:.1f} s, engine {args.engine}, limits {args.limits})")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

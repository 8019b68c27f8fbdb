"""Quantized weights on the engine in-process: decode tokens/s at batch 1 and 32, float32 against int8.

    python -m lab.reference_server.quantization [--preset small] [--batches 1,32] [--repeats 5] [--threads 2]

For each batch size, that many greedy requests (48-token prompts) are added and prefilled; then
--steps decode steps are timed, every sequence decoding (tokens/s = batch x steps / seconds). The
configurations (float32, int8 weight-only, int8-dynamic) each have their own engine and take turns,
round by round. Prints per batch and configuration the median tokens/s with its range over the
rounds, the ratio to float32 within each round (median and range), and the weight bytes each
engine reports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams

CONFIGS = {"float32": None, "int8": "int8", "int8-dynamic": "int8-dynamic"}
PROMPT_TOKENS = 48


def decode_rate(engine: Engine, batch: int, steps: int, tag: str) -> float:
    """Tokens/s of `steps` decode steps with `batch` sequences running (prefill done first, not timed)."""
    params = SamplingParams(max_tokens=steps + 2, temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request(f"{tag}-{i}", [(7 * i + j) % 250 + 3 for j in range(PROMPT_TOKENS)], params)
    started: set[str] = set()
    while len(started) < batch:   # every prompt prefilled: each has its first token
        started.update(out.request_id for out in engine.step())
    start = time.perf_counter()
    for _ in range(steps):
        engine.step()
    seconds = time.perf_counter() - start
    for i in range(batch):
        engine.abort_request(f"{tag}-{i}")
    return batch * steps / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    engines = {name: Engine(EngineConfig.from_flags(
        model=args.preset, strategy="continuous", max_num_seqs=max(batches), num_threads=args.threads,
        kv_blocks=max(batches) * ((PROMPT_TOKENS + args.steps + 2) // 16 + 2), quantization=method))
        for name, method in CONFIGS.items()}
    for engine in engines.values():
        engine.warmup()
    rates = {b: {name: [] for name in engines} for b in batches}
    for round_index in range(args.repeats):
        for b in batches:
            for name, engine in engines.items():
                rates[b][name].append(decode_rate(engine, b, args.steps, f"r{round_index}"))
    result = {"preset": args.preset, "threads": args.threads, "steps": args.steps, "repeats": args.repeats,
              "weight_bytes": {name: e.describe()["weight_bytes"] for name, e in engines.items()}, "batches": {}}
    for b in batches:
        base = rates[b]["float32"]
        result["batches"][b] = {name: {
            "median_tokens_per_s": statistics.median(values), "range_tokens_per_s": [min(values), max(values)],
            "ratio_to_float32_median": statistics.median(v / f for v, f in zip(values, base)),
            "ratio_to_float32_range": [min(v / f for v, f in zip(values, base)), max(v / f for v, f in zip(values, base))]}
            for name, values in rates[b].items()}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for name, size in result["weight_bytes"].items():
        print(f"{name:13} weights {size / 2**20:8.1f} MiB")
    for b, by_name in result["batches"].items():
        print(f"\nbatch {b} ({args.repeats} rounds, interleaved, {args.threads} threads)")
        for name, e in by_name.items():
            lo, hi = e["range_tokens_per_s"]
            rlo, rhi = e["ratio_to_float32_range"]
            print(f"  {name:13} {e['median_tokens_per_s']:8.0f} tok/s ({lo:.0f}-{hi:.0f})   "
                  f"x{e['ratio_to_float32_median']:.2f} of float32 ({rlo:.2f}-{rhi:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

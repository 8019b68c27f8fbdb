"""LoRA adapters on the engine in-process: a decode step's time by batch size and distinct adapters in it,
and the step model's prediction of the held-out shape (8 adapters in a batch of 32) from the others.

    python -m lab.reference_server.lora [--preset small] [--batches 8,16,32] [--adapters 0,1,2,4,8]
                                          [--rounds 5] [--steps 12] [--threads 2] [--json]

One engine serves --max-loras adapters (seeded, rank --rank). For each (batch b, adapters a) shape, b greedy
requests (48-token prompts) are prefilled, the rows split evenly over a adapters (a = 0: the base model),
every adapter resident before timing; then --steps decode steps are timed. Shapes take turns in a seeded
order, round by round. Per shape: the median step time over the rounds, and within each round its ratio
to the base step at the same batch (median, range).

The prediction is `calculators.sim.lora_step`'s: extra = per_adapter_s x a + per_lora_token_s x b, fitted by
`fit_lora_step` on every shape's steps but the held-out one, then added to the held-out batch's base step
(measured in the same rounds): predicted / measured for the held-out step and for its ratio to base.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import numpy as np

from calculators.sim.lora_step import fit_lora_step
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams

PROMPT_TOKENS = 48


def step_times(engine: Engine, batch: int, adapters: int, steps: int, tag: str) -> list[float]:
    """Seconds of each of `steps` decode steps with `batch` sequences over `adapters` adapters (0: base)."""
    params = SamplingParams(max_tokens=steps + 3, temperature=0.0, ignore_eos=True)
    for i in range(batch):
        engine.add_request(f"{tag}-{i}", [(7 * i + j) % 250 + 3 for j in range(PROMPT_TOKENS)], params,
                           lora=f"lora-{i % adapters + 1}" if adapters else None)
    started: set[str] = set()
    while len(started) < batch:   # every prompt prefilled (and its adapter loaded): each has its first token
        started.update(out.request_id for out in engine.step())
    engine.step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        engine.step()
        times.append(time.perf_counter() - start)
    for i in range(batch):
        engine.abort_request(f"{tag}-{i}")
    engine.stats()   # drop the records
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batches", default="8,16,32")
    parser.add_argument("--adapters", default="0,1,2,4,8")
    parser.add_argument("--held-out", default="32:8", help="BATCH:ADAPTERS predicted from the others")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    counts = [int(a) for a in args.adapters.split(",")]
    held = tuple(int(v) for v in args.held_out.split(":"))
    shapes = [(b, a) for b in batches for a in counts if a <= b]
    if held not in shapes or (held[0], 0) not in shapes:
        parser.error(f"--held-out {args.held_out}: that shape and its batch's base are not both measured")
    most = max(counts)
    engine = Engine(EngineConfig.from_flags(
        model=args.preset, strategy="continuous", max_num_seqs=max(batches), num_threads=args.threads,
        kv_blocks=max(batches) * ((PROMPT_TOKENS + args.steps + 3) // 16 + 2), enable_lora=True,
        lora_modules=tuple((f"lora-{k}", f"random:{args.rank}") for k in range(1, most + 1)),
        max_loras=most, max_lora_rank=args.rank))
    engine.warmup()
    rng = random.Random(args.seed)
    times: dict[tuple[int, int], list[list[float]]] = {shape: [] for shape in shapes}
    for r in range(args.rounds):
        order = shapes[:]
        rng.shuffle(order)
        for b, a in order:
            times[(b, a)].append(step_times(engine, b, a, args.steps, f"r{r}-b{b}-a{a}"))
    median = {shape: statistics.median(t for run in runs for t in run) for shape, runs in times.items()}
    ratios = {shape: [statistics.median(times[shape][r]) / statistics.median(times[(shape[0], 0)][r])
                      for r in range(args.rounds)] for shape in shapes}
    fitted = [s for s in shapes if s != held]
    cols = {"batch": [], "step": [], "adapters": [], "tokens": []}
    for b, a in fitted:
        for run in times[(b, a)]:
            for t in run:
                cols["batch"].append(b)
                cols["step"].append(t)
                cols["adapters"].append(a)
                cols["tokens"].append(b if a else 0)
    n = len(cols["step"])
    fit = fit_lora_step(most, cols["batch"], np.zeros(n), np.zeros(n), cols["step"], cols["adapters"],
                        cols["tokens"], np.zeros(n), np.zeros(n))
    b, a = held
    extra = fit.serving.per_adapter_s * a + fit.serving.per_lora_token_s * b
    predicted = median[(b, 0)] + extra
    result = {
        "preset": args.preset, "rank": args.rank, "rounds": args.rounds, "steps": args.steps,
        "shapes": [{"batch": s[0], "adapters": s[1], "step_ms_median": median[s] * 1e3,
                    "ratio_to_base_median": statistics.median(ratios[s]),
                    "ratio_to_base_range": [min(ratios[s]), max(ratios[s])]} for s in shapes],
        "fit": {"per_adapter_ms": fit.serving.per_adapter_s * 1e3, "per_lora_token_us": fit.serving.per_lora_token_s * 1e6},
        "held_out": {"batch": b, "adapters": a, "measured_ms": median[held] * 1e3, "predicted_ms": predicted * 1e3,
                     "error": predicted / median[held] - 1,
                     "measured_ratio": statistics.median(ratios[held]),
                     "predicted_ratio": predicted / median[(b, 0)]},
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for row in result["shapes"]:
        low, high = row["ratio_to_base_range"]
        print(f"batch {row['batch']:3d} adapters {row['adapters']}: {row['step_ms_median']:8.2f} ms/step, "
              f"x{row['ratio_to_base_median']:.3f} base ({low:.3f}-{high:.3f})")
    h = result["held_out"]
    print(f"fit (held out {b}:{a}): {result['fit']['per_adapter_ms']:.3f} ms per adapter, "
          f"{result['fit']['per_lora_token_us']:.2f} us per adapter token")
    print(f"held out batch {b}, {a} adapters: measured {h['measured_ms']:.2f} ms (x{h['measured_ratio']:.3f} base), "
          f"predicted {h['predicted_ms']:.2f} ms (x{h['predicted_ratio']:.3f}): error {h['error']:+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

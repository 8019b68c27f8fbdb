"""Speculative decoding on the engine in-process: the acceptance prompt lookup reaches here, and what it buys.

    python -m lab.reference_server.speculative [--preset tiny] [--k 2,4] [--repeats 3] [--requests 16]

Two workloads of greedy requests run to completion, all added at once (batch up to --max-num-seqs):
    repetitive  prompts that repeat a phrase (where prompt lookup finds matches)
    random      prompts of random token ids (the load generator's default kind)
Each configuration (no speculation, then ngram with each k) runs on its own engine, interleaved
round by round. Prints per configuration and workload: output tokens/s (median and range over the
rounds), engine steps, the acceptance rate (accepted / proposed) and the mean tokens per
verification step (1 + accepted per draft). Greedy outputs are checked equal to the plain run's.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams

PHRASES = ("the cat sat on the mat. ", "abc abc abc ", "1 2 3 4 ", "to be or not to be, ")


def workload(kind: str, n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    if kind == "repetitive":
        return [list((PHRASES[i % len(PHRASES)] * 6).encode())[: rng.randint(48, 96)] for i in range(n)]
    return [[rng.randrange(1, 250) for _ in range(rng.randint(48, 96))] for _ in range(n)]


def run(engine: Engine, prompts: list[list[int]], max_tokens: int) -> tuple[float, int, dict[str, list[int]]]:
    """(seconds, steps, outputs) for all prompts added at once and run to completion."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    outputs: dict[str, list[int]] = {}
    steps_before = engine.stats().total_steps
    start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        engine.add_request(f"r{i}", prompt, params)
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs.setdefault(out.request_id, []).extend(out.new_token_ids)
    return time.perf_counter() - start, engine.stats().total_steps - steps_before, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--k", default="2,4", help="proposals per step to try, comma list")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.k.split(",") if k.strip()]
    configs = {"off": {}, **{f"ngram k={k}": {"speculative_method": "ngram", "num_speculative_tokens": k} for k in ks}}
    engines = {name: Engine(EngineConfig.from_flags(model=args.preset, strategy="continuous",
                                                    max_num_seqs=args.max_num_seqs, num_threads=args.threads,
                                                    **flags)) for name, flags in configs.items()}
    for engine in engines.values():
        engine.warmup()
    results: dict = {}
    for round_index in range(args.repeats):
        for kind in ("repetitive", "random"):
            prompts = workload(kind, args.requests, round_index)
            reference = None
            for name, engine in engines.items():
                before = engine.stats()
                seconds, steps, outputs = run(engine, prompts, args.max_tokens)
                after = engine.stats()
                if reference is None:
                    reference = outputs
                elif outputs != reference:
                    raise SystemExit(f"{name} on {kind}: greedy outputs differ from the plain run's")
                entry = results.setdefault(kind, {}).setdefault(name, {"tokens_per_s": [], "steps": [],
                                                                       "drafts": 0, "proposed": 0, "accepted": 0})
                entry["tokens_per_s"].append(sum(map(len, outputs.values())) / seconds)
                entry["steps"].append(steps)
                entry["drafts"] += after.spec_drafts - before.spec_drafts
                entry["proposed"] += after.spec_draft_tokens - before.spec_draft_tokens
                entry["accepted"] += after.spec_accepted_tokens - before.spec_accepted_tokens
    for kind, by_name in results.items():
        for name, entry in by_name.items():
            rates = entry["tokens_per_s"]
            entry.update(median_tokens_per_s=statistics.median(rates), range_tokens_per_s=[min(rates), max(rates)],
                         acceptance=entry["accepted"] / entry["proposed"] if entry["proposed"] else None,
                         tokens_per_draft=1 + entry["accepted"] / entry["drafts"] if entry["drafts"] else None)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    for kind, by_name in results.items():
        print(f"\n{kind} ({args.requests} requests x {args.max_tokens} tokens, {args.repeats} rounds, interleaved)")
        for name, e in by_name.items():
            acceptance = "-" if e["acceptance"] is None else f"{e['acceptance']:.0%}"
            per_draft = "-" if e["tokens_per_draft"] is None else f"{e['tokens_per_draft']:.2f}"
            lo, hi = e["range_tokens_per_s"]
            print(f"  {name:10} {e['median_tokens_per_s']:8.0f} tok/s ({lo:.0f}-{hi:.0f})  steps {statistics.median(e['steps']):6.0f}"
                  f"  acceptance {acceptance:>5}  tokens per verification {per_draft}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

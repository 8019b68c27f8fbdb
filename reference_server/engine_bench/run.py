"""In-process engine benchmark: each batching strategy on one seeded mixed-length workload.

    python -m reference_server.engine_bench --json            # small preset, cpu, all four strategies
    servecap bench --model tiny --num-requests 8 --json

Per strategy: output tokens/s, mean batch size (sequences per step), the share of engine
step time spent inside the model's forward pass, and how long the steps that carry decodes
took (each is an inter-token gap for every sequence decoding in it). Beside them, the
forward pass alone: decoding at batch 1 and at the batch limit at the workload's mean
context (uniform, and mixed contexts of the same mean), and prefilling whole prompts: the
ceiling of the batching gain on this machine, which continuous batching is measured against.

Memory bandwidth, as gpt-fast reports it: the bytes a decode step must read at least (every
weight the step uses once, plus each sequence's cached K/V) times forward passes per second,
beside the GPU catalog's datasheet figure on a GPU (`--gpu`, else found from the device name).

`bound` turns those into the best any scheduler could do on this workload here: every
prompt prefilled at the forward pass's prefill rate, every other token decoded at the
batch limit's rate, nothing else (no tail, no partial batches). A strategy's `share_of_ideal`
is its throughput against that; `ideal_gain_vs_*` are the ratios no strategy can pass.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress

from contract.distributions import LengthDistribution
from contract.options import CommandParser, add_options, add_output_arguments
from contract.workload import WorkloadSpec, add_workload_arguments
from engine_core.gpus import GpuOptions, catalog_gpu_for, get_gpu, gpu_names
from engine_core.options import EngineOptions
from engine_core.scheduling.strategies.flags import add_limit_arguments
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.strategies import STRATEGIES
from engine_core.scheduling.strategies.base import ScheduledBatch
from engine_core.scheduling.strategies.continuous import ContinuousLimits
from reference_server.engine_bench.tables import print_spread, print_table
from reference_server.engine_bench.repeats import spread_over_repeats
from engine_core.scheduling.sequence import Sequence

STDERR = Console(stderr=True)
BLOCK_SIZE = 16


@dataclass(frozen=True)
class Workload:
    prompts: list[list[int]]
    output_lens: list[int]

    @property
    def mean_context(self) -> int:
        """Mean tokens in the cache during decode: prompt + half the output, averaged."""
        n = len(self.prompts)
        return round(sum(len(p) + o / 2 for p, o in zip(self.prompts, self.output_lens)) / n)


def make_workload(num_requests: int, prompt_lengths: LengthDistribution, output_lengths: LengthDistribution,
                  seed: int) -> Workload:
    """Seeded: prompt and output lengths drawn from their distributions (the workload's forms), prompt bytes
    uniform over 0..255."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(256) for _ in range(prompt_lengths.sample(rng))] for _ in range(num_requests)]
    return Workload(prompts, [output_lengths.sample(rng) for _ in range(num_requests)])


def engine_config(args: argparse.Namespace, strategy: str, kv_blocks: int) -> EngineConfig:
    """The same batch limit for every strategy, so only the batching policy differs."""
    return EngineConfig.from_flags(
        model=args.model, device=args.device, dtype=args.dtype, strategy=strategy, seed=args.seed,
        block_size=BLOCK_SIZE, kv_blocks=kv_blocks, max_num_seqs=args.max_batch,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_prefill_tokens_with_decodes=args.max_prefill_tokens_with_decodes,
        batch_size=args.max_batch, batch_timeout_ms=0.0, max_batch_size=args.max_batch, max_queue_delay_us=0,
        num_threads=args.num_threads,
    )


def kv_blocks_for(workload: Workload, args: argparse.Namespace) -> int:
    """Room for the `max_batch` longest requests at once: no strategy is starved of cache. With fewer
    requests than `max_batch`, the rest of the batch counts as the longest (the bare forward passes run
    `max_batch` sequences whatever the workload's size)."""
    longest = sorted((len(p) + o for p, o in zip(workload.prompts, workload.output_lens)), reverse=True)
    batch = longest[: args.max_batch] + longest[:1] * max(args.max_batch - len(longest), 0)
    return sum(-(-n // BLOCK_SIZE) for n in batch) + args.max_batch


def run_strategy(engine: Engine, workload: Workload, progress: Progress, label: str) -> dict:
    """Submit the whole workload at once, step to the end; throughput and where the time went.

    Steps that compute only decode tokens are also timed apart ("decode_*"), because prompt
    prefill is compute-bound on a CPU and dilutes the batching gain that decode shows.
    `decode_step_ms`: the steps that carried at least one decode (a sequence's second or
    later token), which is what a streaming client sees between its tokens.
    """
    task = progress.add_task(label, total=sum(workload.output_lens))
    for i, (prompt, out_len) in enumerate(zip(workload.prompts, workload.output_lens)):
        engine.add_request(f"bench-{i}", prompt, SamplingParams(max_tokens=out_len, temperature=0.0,
                                                                ignore_eos=True))
    step_s = forward_s = decode_s = 0.0
    steps = seqs_in_steps = produced = decode_tokens = decode_steps = 0
    decode_step_s: list[float] = []
    start = time.perf_counter()
    while engine.has_unfinished_requests():
        outputs = engine.step()
        new_tokens = sum(len(o.new_token_ids) for o in outputs)
        stats = engine.stats()
        if stats.total_steps > steps:
            steps = stats.total_steps
            step_s += stats.last_step_s
            forward_s += stats.last_forward_s
            seqs_in_steps += stats.last_batch_size
            if stats.last_num_tokens == stats.last_batch_size:      # decode-only step
                decode_s += stats.last_step_s
                decode_tokens += new_tokens
                decode_steps += 1
            if any(o.num_output_tokens > 1 for o in outputs):
                decode_step_s.append(stats.last_step_s)
        produced += new_tokens
        progress.update(task, completed=produced)
    wall_s = time.perf_counter() - start
    assert engine.stats().kv_blocks_used == 0, "KV blocks leaked"
    return {"output_tokens_per_s": produced / wall_s, "mean_batch_size": seqs_in_steps / max(steps, 1),
            "forward_share": forward_s / step_s if step_s else 0.0, "output_tokens": produced,
            "num_requests": len(workload.prompts), "wall_s": wall_s, "steps": steps,
            "prefill_share": 1.0 - decode_s / step_s if step_s else 0.0,
            "decode_tokens_per_s": decode_tokens / decode_s if decode_s else 0.0,
            "decode_mean_batch_size": decode_tokens / decode_steps if decode_steps else 0.0,
            "decode_step_ms": percentiles_ms(decode_step_s),
            "preemptions": engine.stats().total_preemptions}


def percentiles_ms(seconds: list[float]) -> dict:
    """{p50, p99, max} in milliseconds (numpy's default interpolation), {} when empty."""
    if not seconds:
        return {}
    p50, p99 = np.percentile(seconds, [50, 99])
    return {"p50": p50 * 1e3, "p99": p99 * 1e3, "max": max(seconds) * 1e3, "count": len(seconds)}


def timed_forward(engine: Engine, prompts: list[list[int]], cached: list[int], iters: int) -> float:
    """Seconds per bare forward pass computing, for each prompt, its tokens after the first `cached`."""
    bm, runner = engine.block_manager, engine.runner
    seqs = []
    for i, (prompt, done) in enumerate(zip(prompts, cached)):
        seq = Sequence(f"fwd-{i}", prompt, SamplingParams(max_tokens=1), arrival_time=0.0)
        bm.allocate(seq)
        seq.num_computed_tokens = done
        seqs.append(seq)
    batch = ScheduledBatch(seqs=seqs, num_new_tokens=[len(p) - done for p, done in zip(prompts, cached)])
    try:
        runner.forward(batch)                 # warm up
        start = time.perf_counter()
        for _ in range(iters):
            runner.forward(batch)
        return (time.perf_counter() - start) / iters
    finally:
        for seq in seqs:
            bm.deallocate(seq)


def forward_only(engine: Engine, contexts: list[int], iters: int) -> float:
    """Decode tokens/s of the bare forward pass: one sequence per context, decoding its next token."""
    prompts = [[(i + j) % 256 for j in range(context + 1)] for i, context in enumerate(contexts)]
    return len(contexts) / timed_forward(engine, prompts, contexts, iters)


def prefill_only(engine: Engine, prompt_len: int, max_tokens: int, max_prompts: int, iters: int) -> float:
    """Prefill tokens/s of the bare forward pass: fresh prompts of `prompt_len` filling one step's
    token budget (at most `max_prompts` of them)."""
    count = max(1, min(max_tokens // prompt_len, max_prompts))
    prompts = [[(i * 7 + j) % 256 for j in range(prompt_len)] for i in range(count)]
    return count * prompt_len / timed_forward(engine, prompts, [0] * count, iters)


def decode_step_bytes(engine: Engine, batch: int, context: int) -> int:
    """Least bytes one decode step reads: the weights once (a step reads `batch` rows of an untied
    embedding table, not all of it) plus `batch` x `context` cached tokens' K and V."""
    model = engine.runner.model
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    if not engine.arch.tie_embeddings:
        weights -= model.embed_tokens.weight.numel() * model.embed_tokens.weight.element_size()
    return weights + batch * context * engine.kv_block_bytes // engine.config.block_size


def datasheet(device: str, gpu: str | None) -> dict | None:
    """The catalog GPU (`gpu`, else matched from the CUDA device's name) and its memory bandwidth."""
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    catalog_id = gpu or catalog_gpu_for(name)
    if catalog_id is None:
        return {"device_name": name, "gpu": None, "bandwidth_gb_s": None}
    return {"device_name": name, "gpu": catalog_id, "bandwidth_gb_s": get_gpu(catalog_id).bandwidth_bytes_per_s / 1e9}


def bandwidth(forward: dict, engine: Engine, max_batch: int, sheet: dict | None) -> dict:
    """Achieved GB/s of the bare decode passes at batch 1 and `max_batch`, and their share of the datasheet."""
    context = forward["context"]
    achieved = {
        "b1": decode_step_bytes(engine, 1, context) * forward["tokens_per_s_b1"] / 1e9,
        f"b{max_batch}": decode_step_bytes(engine, max_batch, context) * forward[f"tokens_per_s_b{max_batch}"]
        / max_batch / 1e9,
    }
    out = {"decode_step_bytes_b1": decode_step_bytes(engine, 1, context),
           **{f"achieved_gb_s_{key}": value for key, value in achieved.items()}}
    if sheet and sheet["bandwidth_gb_s"]:
        out.update({f"share_of_datasheet_{key}": value / sheet["bandwidth_gb_s"] for key, value in achieved.items()})
    return out


def mixed_contexts(mean: int, count: int) -> list[int]:
    """`count` contexts spread evenly from mean/4 to 7*mean/4 (same mean): a continuous batch."""
    if count == 1:
        return [mean]
    lo, hi = max(1, mean // 4), 2 * mean - max(1, mean // 4)
    return [round(lo + (hi - lo) * i / (count - 1)) for i in range(count)]


def ideal_bound(workload: Workload, forward: dict, max_batch: int) -> dict:
    """The fastest this workload can run here: prompts at the prefill rate, the other output
    tokens at the batch limit's decode rate (mixed contexts), nothing else."""
    prompt_tokens = sum(len(p) for p in workload.prompts)
    output_tokens = sum(workload.output_lens)
    decode_tokens = output_tokens - len(workload.prompts)      # each prompt's step samples its first token
    ideal_s = prompt_tokens / forward["prefill_tokens_per_s"] + decode_tokens / forward[f"tokens_per_s_b{max_batch}_mixed"]
    return {"ideal_tokens_per_s": output_tokens / ideal_s, "prefill_share_of_ideal":
            prompt_tokens / forward["prefill_tokens_per_s"] / ideal_s}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = CommandParser(prog="servecap bench", description=__doc__.split("\n\n")[0])
    add_options(p, EngineOptions, title="engine", only=("model", "device", "dtype", "num-threads", "seed"), typed=True)
    p.set_defaults(model="small", device="cpu", dtype="float32")   # bench's engine: the small preset on a CPU
    add_options(p, GpuOptions, title="datasheet (default: matched from the CUDA device name)", only=("gpu",))
    p.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated (default: all)")
    p.add_argument("--num-requests", type=int, default=64, help="requests in the workload (default 64)")
    add_workload_arguments(p, title="workload (seeded by --seed)", only=("prompt-tokens", "output-tokens"))
    p.add_argument("--none-requests", type=int, default=16,
                   help="`none` runs only the first N requests (one at a time it is slow and its rate does "
                        "not depend on N); 0 = all (default 16)")
    p.add_argument("--max-batch", type=int, default=32, help="batch limit of every strategy (default 32)")
    add_limit_arguments(p.add_argument_group("continuous batching's limits"),
                        ("max-num-batched-tokens", "max-prefill-tokens-with-decodes"))
    p.add_argument("--forward-iters", type=int, default=5, help="timed forward passes per measurement (default 5)")
    p.add_argument("--forward-only", action="store_true",
                   help="only the bare forward passes and bandwidth, no strategy runs (a big model's weights "
                        "are drawn once instead of once per strategy)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run the whole bench this many times, the strategies in turn and in reverse turn (ABBA), "
                        "each repeat with its own forward passes and bound; prints each figure's spread")
    add_output_arguments(p, out=None, report=False, json="print one JSON object on stdout")
    args = p.parse_args(argv)
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = [s for s in args.strategies if s not in STRATEGIES]
    if unknown:
        p.error(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)}")
    if args.num_requests < 1 or args.max_batch < 1 or args.forward_iters < 1 or args.none_requests < 0 or args.repeats < 1:
        p.error("--num-requests, --max-batch, --forward-iters and --repeats must be positive, --none-requests >= 0")
    if args.gpu is not None and args.gpu.strip().lower() not in gpu_names():
        p.error(f"--gpu: unknown gpu {args.gpu!r}; known gpus: {', '.join(gpu_names())}")
    try:
        args.workload = WorkloadSpec.from_args(args)
    except ValueError as exc:
        p.error(str(exc))
    defaults = ContinuousLimits()   # the limits left out: continuous batching's defaults
    for name in ("max_num_batched_tokens", "max_prefill_tokens_with_decodes"):
        if not hasattr(args, name):
            setattr(args, name, getattr(defaults, name))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    threads_before = torch.get_num_threads()
    try:
        return _bench(args)
    finally:
        torch.set_num_threads(threads_before)   # --num-threads must not leak into an embedding process


def _bench(args: argparse.Namespace) -> int:
    workload = make_workload(args.num_requests, args.workload.prompt_lengths, args.workload.output_lengths,
                             args.seed)
    kv_blocks = kv_blocks_for(workload, args)
    try:
        engine = Engine(engine_config(args, "continuous", kv_blocks))
    except ValueError as exc:
        print(f"servecap bench: {exc}", file=sys.stderr)
        return 2
    context = min(workload.mean_context, engine.max_model_len - 1)
    result = {"preset": args.model, "device": args.device, "dtype": engine.config.dtype,
              "threads": torch.get_num_threads(), "workload": {
                  "num_requests": args.num_requests, "prompt_tokens": args.workload.prompt_lengths.spec,
                  "output_tokens": args.workload.output_lengths.spec, "seed": args.seed, "max_batch": args.max_batch,
                  "mean_context": context}}
    passes = []
    for repeat in range(args.repeats):
        order = args.strategies if repeat % 2 == 0 else list(reversed(args.strategies))   # ABBA: a drift falls alike
        if args.repeats > 1:
            STDERR.print(f"repeat {repeat + 1}/{args.repeats}: {', '.join(order)}")
        passes.append(_one_pass(args, workload, kv_blocks, context, order, engine))
        engine = None   # the first pass uses the engine built above; each later one builds its own
    result.update(passes[0])   # the fixed shape: forward_only, datasheet, bound, strategies
    if args.repeats > 1:
        result["repeats"] = passes
        result["spread"] = spread_over_repeats(passes)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
        if args.repeats > 1:
            print_spread(result["spread"])
    return 0


def _one_pass(args: argparse.Namespace, workload: Workload, kv_blocks: int, context: int, order: list[str],
              engine: Engine | None = None) -> dict:
    """The bare forward passes (on `engine`, the continuous engine already built, else a new one), the ideal
    bound, then each strategy in `order`, one after another."""
    engine = engine or Engine(engine_config(args, "continuous", kv_blocks))
    engine.warmup()
    result = {"forward_only": {}, "strategies": {}, "order": list(order)}
    with STDERR.status(f"forward pass alone at batch 1 and {args.max_batch}, context {context}"):
        b1 = forward_only(engine, [context], args.forward_iters * 4)
        bmax = forward_only(engine, [context] * args.max_batch, args.forward_iters)
        bmax_mixed = forward_only(engine, mixed_contexts(context, args.max_batch), args.forward_iters)
        mean_prompt = round(sum(map(len, workload.prompts)) / len(workload.prompts))
        prefill = prefill_only(engine, mean_prompt, args.max_num_batched_tokens, args.max_batch, args.forward_iters)
    result["forward_only"] = {"tokens_per_s_b1": b1, f"tokens_per_s_b{args.max_batch}": bmax,
                              f"tokens_per_s_b{args.max_batch}_mixed": bmax_mixed,
                              "gain": bmax / b1, "gain_mixed": bmax_mixed / b1, "context": context,
                              "prefill_tokens_per_s": prefill, "prefill_prompt_len": mean_prompt}
    result["datasheet"] = datasheet(args.device, args.gpu)
    result["forward_only"].update(bandwidth(result["forward_only"], engine, args.max_batch, result["datasheet"]))
    result["bound"] = ideal_bound(workload, result["forward_only"], args.max_batch)
    del engine
    with Progress(console=STDERR, transient=False) as progress:
        for strategy in [] if args.forward_only else order:
            engine = Engine(engine_config(args, strategy, kv_blocks))
            engine.warmup()
            subset = workload
            if strategy == "none" and 0 < args.none_requests < args.num_requests:
                subset = Workload(workload.prompts[: args.none_requests], workload.output_lens[: args.none_requests])
            result["strategies"][strategy] = run_strategy(engine, subset, progress, strategy)
            del engine
    strategies = result["strategies"]
    bound = result["bound"]
    for name, stats in strategies.items():
        stats["share_of_ideal"] = stats["output_tokens_per_s"] / bound["ideal_tokens_per_s"]
        bound[f"ideal_gain_vs_{name}"] = bound["ideal_tokens_per_s"] / stats["output_tokens_per_s"]
    if "none" in strategies:
        none = strategies["none"]
        bound["ideal_share_of_ceiling"] = bound["ideal_gain_vs_none"] / result["forward_only"]["gain_mixed"]
        for stats in strategies.values():
            stats["gain_vs_none"] = stats["output_tokens_per_s"] / none["output_tokens_per_s"]
            stats["share_of_ceiling"] = stats["gain_vs_none"] / result["forward_only"]["gain_mixed"]
            if none["decode_tokens_per_s"]:
                stats["decode_gain_vs_none"] = stats["decode_tokens_per_s"] / none["decode_tokens_per_s"]
    result["strategies"] = {name: strategies[name] for name in args.strategies if name in strategies}
    return result


if __name__ == "__main__":
    raise SystemExit(main())

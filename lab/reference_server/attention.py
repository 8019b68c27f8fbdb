"""Decode attention candidates, measured by the model's whole forward pass (the engine's choice comes from here).

    python -m lab.reference_server.attention --preset small --threads 1 --json

For each candidate and batch size (1..64), the forward pass of one decode step: tokens/s
with every sequence at the same context ("uniform") and with contexts spread evenly from
an eighth to 1 7/8 of it, same mean ("mixed": what a continuous batch holds). Block tables
are scattered over the cache, as a running engine's are. Prefill chunks are not timed
(every candidate plans them as the engine does); the candidates:

- padded-matmul: the engine before issue 17: one padded rectangle of every decode, gathered
  by slot, batched matmuls, an additive mask, softmax.
- sdpa-rectangle: that rectangle through `scaled_dot_product_attention`.
- sdpa-buckets: the engine's plan (`engine.attention`): length buckets cut by a per-call cost.
- sdpa-per-length: one SDPA call per distinct context (no padding at all).
- nested-jagged: one SDPA call over nested (jagged) key/value tensors, no padding.
- varlen-segments: every real key gathered once, scores and softmax per segment by index_add.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from reference_server.engine.attention import AttentionPlanner, StepAttention
from reference_server.engine.config import EngineConfig
from reference_server.engine.model_runner import ModelRunner
from reference_server.engine.engine import resolve_model
from reference_server.engine.sampler import Sampler
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.sequence import Sequence
from engine_core.scheduling.strategies.base import ScheduledBatch

STDERR = Console(stderr=True)
BLOCK_SIZE = 16


# -- the candidates that are not the engine's plan -------------------------------------------
@dataclass
class FlatDecodes(StepAttention):
    """Decodes only: every real key once, `[N]` slots, sequence `i` owning keys offsets[i]:offsets[i+1]."""

    keys: torch.Tensor = None          # [N] cache slots
    offsets: torch.Tensor = None       # [b + 1]
    owner: torch.Tensor = None         # [N] row of each key's sequence
    contexts: torch.Tensor = None      # [b]
    mode: str = ""

    def attend(self, q: torch.Tensor, kv_layer: torch.Tensor) -> torch.Tensor:
        return {"padded-matmul": padded_matmul, "nested-jagged": nested_jagged,
                "varlen-segments": varlen_segments}[self.mode](q, kv_layer, self)


class FlatPlanner:
    """Plans a decode-only step for one of the non-SDPA-bucket candidates."""

    def __init__(self, mode: str, block_size: int, device: torch.device) -> None:
        self.mode, self.block_size, self.device = mode, block_size, device

    def plan(self, block_tables, starts, counts, num_decodes) -> StepAttention:
        if num_decodes != len(counts):
            raise ValueError(f"{self.mode} plans decode-only steps")
        bs = self.block_size
        contexts = [start + 1 for start in starts]
        keys = [table[p // bs] * bs + p % bs for table, n in zip(block_tables, contexts) for p in range(n)]
        slot_mapping = [table[s // bs] * bs + s % bs for table, s in zip(block_tables, starts)]
        to = dict(dtype=torch.long, device=self.device)
        context_t = torch.tensor(contexts, **to)
        return FlatDecodes(torch.tensor(slot_mapping, **to), [], keys=torch.tensor(keys, **to),
                           offsets=torch.cat([torch.zeros(1, **to), context_t.cumsum(0)]),
                           owner=torch.repeat_interleave(torch.arange(len(contexts), **to), context_t),
                           contexts=context_t, mode=self.mode)


def _kv_heads(q: torch.Tensor, kv_layer: torch.Tensor) -> tuple[int, int, int, int]:
    batch, num_heads, head_dim = q.shape
    num_kv_heads = kv_layer.shape[1]
    return batch, num_heads, num_kv_heads, num_heads // num_kv_heads


def padded_matmul(q: torch.Tensor, kv_layer: torch.Tensor, plan: FlatDecodes) -> torch.Tensor:
    """[b, H, d] -> [b, H * d] over one rectangle [K, b, L, d] (L = longest context)."""
    batch, num_heads, num_kv, groups = _kv_heads(q, kv_layer)
    head_dim = q.shape[2]
    key_len = int(plan.contexts.max())
    position = torch.arange(key_len, device=q.device)
    slots = plan.keys[(plan.offsets[:-1].unsqueeze(1) + position).clamp(max=len(plan.keys) - 1)]   # [b, L]
    bias = torch.zeros(batch, key_len, device=q.device, dtype=q.dtype).masked_fill_(
        position >= plan.contexts.unsqueeze(1), float("-inf"))
    qg = q.view(batch, num_kv, groups, head_dim).transpose(0, 1) * head_dim ** -0.5           # [K, b, G, d]
    k, v = kv_layer.index_select(2, slots.flatten()).view(2, num_kv, batch, key_len, head_dim).unbind(0)
    scores = torch.matmul(qg, k.transpose(-1, -2)) + bias.view(1, batch, 1, key_len)          # [K, b, G, L]
    out = torch.matmul(torch.softmax(scores.float(), dim=-1).to(q.dtype), v)                  # [K, b, G, d]
    return out.transpose(0, 1).reshape(batch, num_heads * head_dim)


def nested_jagged(q: torch.Tensor, kv_layer: torch.Tensor, plan: FlatDecodes) -> torch.Tensor:
    """Keys as jagged `[b, K, j, d]`, queries as `[b, K, G, d]` (G "query positions" per sequence)."""
    batch, num_heads, num_kv, groups = _kv_heads(q, kv_layer)
    head_dim = q.shape[2]
    k, v = kv_layer.index_select(2, plan.keys).transpose(1, 2).contiguous().unbind(0)       # [N, K, d] each
    kj = torch.nested.nested_tensor_from_jagged(k, plan.offsets).transpose(1, 2)
    vj = torch.nested.nested_tensor_from_jagged(v, plan.offsets).transpose(1, 2)
    q_offsets = torch.arange(batch + 1, device=q.device) * groups
    qj = torch.nested.nested_tensor_from_jagged(
        q.view(batch, num_kv, groups, head_dim).transpose(1, 2).reshape(batch * groups, num_kv, head_dim),
        q_offsets).transpose(1, 2)
    out = F.scaled_dot_product_attention(qj, kj, vj).transpose(1, 2).values()                 # [b * G, K, d]
    return out.view(batch, groups, num_kv, head_dim).transpose(1, 2).reshape(batch, num_heads * head_dim)


def varlen_segments(q: torch.Tensor, kv_layer: torch.Tensor, plan: FlatDecodes) -> torch.Tensor:
    """Scores of every real key against its own sequence's queries, softmax per segment."""
    batch, num_heads, num_kv, groups = _kv_heads(q, kv_layer)
    head_dim = q.shape[2]
    k, v = kv_layer.index_select(2, plan.keys).unbind(0)                                      # [K, N, d]
    qk = q.view(batch, num_kv, groups, head_dim).transpose(0, 1) * head_dim ** -0.5           # [K, b, G, d]
    scores = torch.einsum("kngd,knd->kng", qk.index_select(1, plan.owner), k)                 # [K, N, G]
    owner = plan.owner.view(1, -1, 1).expand_as(scores)
    peak = torch.full((num_kv, batch, groups), float("-inf"), dtype=q.dtype, device=q.device)
    peak = peak.scatter_reduce(1, owner, scores, reduce="amax")
    weights = (scores - peak.gather(1, owner)).exp()                                           # [K, N, G]
    total = torch.zeros_like(peak).index_add_(1, plan.owner, weights)
    out = torch.zeros(num_kv, batch, groups, head_dim, dtype=q.dtype, device=q.device)
    out.index_add_(1, plan.owner, weights.unsqueeze(-1) * v.unsqueeze(2))                    # [K, b, G, d]
    out = out / total.unsqueeze(-1)
    return out.transpose(0, 1).reshape(batch, num_heads * head_dim)


def candidates(runner: ModelRunner, overheads: list[float] = ()) -> dict[str, object]:
    """name -> planner: the engine's own planner under several bucketing settings, the others."""
    engine = runner.attention_planner

    def planner(overhead: float, workspace: bool = True) -> AttentionPlanner:
        return AttentionPlanner(engine.block_size, engine.device, engine.dtype, overhead,
                                engine.kv_token_elements if workspace else 0)

    found = {
        "padded-matmul": FlatPlanner("padded-matmul", engine.block_size, engine.device),
        "sdpa-rectangle": planner(float("inf")),
        "sdpa-buckets": planner(engine.overhead_tokens),
        "sdpa-buckets-fresh": planner(engine.overhead_tokens, workspace=False),
        "sdpa-per-length": planner(0.0),
        "nested-jagged": FlatPlanner("nested-jagged", engine.block_size, engine.device),
        "varlen-segments": FlatPlanner("varlen-segments", engine.block_size, engine.device),
    }
    found.update({f"sdpa-buckets@{o:g}": planner(o) for o in overheads})
    return found


# -- measuring ------------------------------------------------------------------------------
def contexts_for(mode: str, batch: int, mean: int) -> list[int]:
    """uniform: all `mean`; mixed: evenly from mean/8 to 15*mean/8 (same mean), shuffled (seeded)."""
    if mode == "uniform" or batch == 1:
        return [mean] * batch
    lo, hi = mean // 8, 2 * mean - mean // 8
    contexts = [round(lo + (hi - lo) * i / (batch - 1)) for i in range(batch)]
    random.Random(batch).shuffle(contexts)
    return contexts


def decode_batch(contexts: list[int], num_blocks: int, seed: int) -> ScheduledBatch:
    """Sequences decoding their last token over `contexts` cached ones, blocks scattered."""
    free = list(range(num_blocks))
    random.Random(seed).shuffle(free)
    seqs = []
    for i, context in enumerate(contexts):
        seq = Sequence(f"fwd-{i}", [(i + j) % 256 for j in range(context + 1)], SamplingParams(max_tokens=1),
                       arrival_time=0.0)
        seq.block_table = [free.pop() for _ in range(-(-(context + 1) // BLOCK_SIZE))]
        seq.num_computed_tokens = context
        seqs.append(seq)
    return ScheduledBatch(seqs=seqs, num_new_tokens=[1] * len(seqs))


def forward_s(runner: ModelRunner, planner, batch: ScheduledBatch) -> float:
    """Seconds of one forward pass of `batch` with `planner` planning its attention."""
    engine_planner, runner.attention_planner = runner.attention_planner, planner
    try:
        start = time.perf_counter()
        runner.forward(batch)
        return time.perf_counter() - start
    finally:
        runner.attention_planner = engine_planner


def build_runner(args: argparse.Namespace, max_batch: int) -> ModelRunner:
    config = EngineConfig(model=args.preset, device=args.device, dtype=args.dtype, block_size=BLOCK_SIZE,
                          num_threads=args.threads)
    arch, state_dict = resolve_model(args.preset)
    max_len = 2 * args.context + 2
    num_blocks = max_batch * -(-max_len // BLOCK_SIZE) + 8
    return ModelRunner(arch, config, num_blocks=num_blocks, max_model_len=max(max_len, 64),
                       sampler=Sampler(0, 257), state_dict=state_dict)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m lab.reference_server.attention", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="small")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--batches", default="1,2,4,8,16,32,64", help="comma-separated batch sizes")
    p.add_argument("--context", type=int, default=256, help="mean context of the decoding sequences (default 256)")
    p.add_argument("--candidates", default="", help="comma-separated subset (default: all)")
    p.add_argument("--overheads", default="", help="also time sdpa-buckets at these per-call costs (key tokens)")
    p.add_argument("--iters", type=int, default=3, help="timed rounds per point, after a warm-up round (default 3)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b.strip()]
        args.overheads = [float(o) for o in args.overheads.split(",") if o.strip()]
    except ValueError:
        p.error("--batches and --overheads take comma-separated numbers")
    if not args.batches or min(args.batches) < 1 or args.context < 8 or args.iters < 1:
        p.error("--batches must be positive, --context >= 8, --iters >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    threads_before = torch.get_num_threads()
    try:
        runner = build_runner(args, max(args.batches))
    except ValueError as exc:
        print(f"attention bench: {exc}", file=sys.stderr)
        return 2
    try:
        result = measure(runner, args)
    finally:
        torch.set_num_threads(threads_before)   # --threads must not leak into an embedding process
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


def measure(runner: ModelRunner, args: argparse.Namespace) -> dict:
    """Round-robin over the candidates at each point (a warm-up round, then `iters` timed ones),
    keeping each one's best: a shared machine only ever adds time, and adds it to all alike."""
    planners = candidates(runner, args.overheads)
    chosen = [c.strip() for c in args.candidates.split(",") if c.strip()] or list(planners)
    unknown = [c for c in chosen if c not in planners]
    if unknown:
        raise SystemExit(f"attention bench: unknown candidate {unknown[0]!r}; choose from {', '.join(planners)}")
    result = {"preset": args.preset, "device": args.device, "dtype": runner.config.dtype,
              "threads": torch.get_num_threads(), "context": args.context,
              "bucket_overhead_tokens": runner.attention_planner.overhead_tokens, "batches": args.batches,
              "iters": args.iters, "tokens_per_s": {name: {"uniform": [], "mixed": []} for name in chosen}}
    with STDERR.status("") as status, warnings.catch_warnings():
        warnings.simplefilter("ignore")   # nested tensors are a prototype and say so on every call
        for mode in ("uniform", "mixed"):
            for batch_size in args.batches:
                status.update(f"{mode} contexts, batch {batch_size}")
                batch = decode_batch(contexts_for(mode, batch_size, args.context), runner.num_blocks, batch_size)
                best = {name: float("inf") for name in chosen}
                for round_ in range(args.iters + 1):
                    for name in list(best):
                        try:
                            seconds = forward_s(runner, planners[name], batch)
                        except RuntimeError as exc:   # e.g. no SDPA backend for this nested layout
                            STDERR.print(f"{name}, {mode} contexts, batch {batch_size}: {exc}")
                            del best[name]
                            continue
                        if round_:
                            best[name] = min(best[name], seconds)
                for name in chosen:
                    seconds = best.get(name)
                    result["tokens_per_s"][name][mode].append(None if seconds is None else batch_size / seconds)
    return result


def print_table(result: dict) -> None:
    console = Console()
    console.print(f"{result['preset']} on {result['device']} ({result['dtype']}, {result['threads']} threads), "
                  f"decode forward pass, mean context {result['context']}: tokens/s (x vs padded-matmul); "
                  f"buckets cut at {result['bucket_overhead_tokens']:.0f} key tokens per call")
    for mode in ("uniform", "mixed"):
        table = Table(f"{mode} contexts", *[f"b{b}" for b in result["batches"]], title=f"tokens/s, {mode} contexts")
        base = result["tokens_per_s"].get("padded-matmul", {}).get(mode)
        for name, modes in result["tokens_per_s"].items():
            table.add_row(name, *["-" if v is None else f"{v:.1f}" for v in modes[mode]])
            if base and name != "padded-matmul":
                table.add_row("", *["" if v is None or not ref else f"x{v / ref:.2f}" for v, ref in zip(modes[mode], base)],
                              style="dim")
        console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())

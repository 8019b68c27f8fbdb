"""Train the byte-level model on the standard library's source and write it as a local checkpoint.

    python -m reference_server.training.train --out models/stdlib-bytes [--minutes 10] [--seed 0]

The architecture is the reference model's (Llama-style: RMSNorm, rotary, GQA, SwiGLU), 4 layers of 256,
byte vocabulary (264 ids), so `servecap serve --model models/stdlib-bytes` serves it with every engine
feature (quantization, LoRA, speculation with `--speculative-model tiny`-sized drafts, quality). Random
weights put a near-uniform distribution on every token, where agreement and acceptance measure rounding;
a trained model's outputs have structure to keep or lose.

Training is seeded: the data order (random windows of --context bytes), the initial weights and the
optimizer (AdamW, linear warm-up then cosine decay). It runs dense causal attention over each window
through the model's own modules (`dense_logits`), the same weights the engine then serves from its
paged cache. The checkpoint directory holds config.json, model.safetensors and training.json (the
corpus, the steps, the loss curve, the held-out bits per byte, the wall time). Progress goes to stderr.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from contract.options import CommandParser, add_options, add_output_arguments
from engine_core.architecture import ModelArchitecture
from engine_core.options import EngineOptions
from reference_server.engine.checkpoint import save_checkpoint
from reference_server.engine.model import Transformer, init_random_weights, rotate_half
from reference_server.engine.tokenizer import ByteTokenizer
from reference_server.training.corpus import stdlib_corpus

ARCH = ModelArchitecture(name="stdlib-bytes", num_layers=4, hidden_size=256, num_heads=4, num_kv_heads=2,
                         head_dim=64, intermediate_size=768, vocab_size=264, tie_embeddings=False,
                         max_position_embeddings=2048, rope_theta=10000.0, norm_eps=1e-5)


def dense_logits(model: Transformer, ids: torch.Tensor) -> torch.Tensor:
    """ids [B, T] -> logits [B, T, vocab]: causal attention over each row, no KV cache (for training)."""
    batch, length = ids.shape
    x = model.embed_tokens(ids)
    cos = model.rope_cos[:length].to(x.dtype)[None, :, None, :]   # [1, T, 1, d]
    sin = model.rope_sin[:length].to(x.dtype)[None, :, None, :]
    for layer in model.layers:
        attn = layer.self_attn
        h = layer.input_layernorm(x)
        q, k, v = attn.qkv_proj(h).split([attn.q_size, attn.kv_size, attn.kv_size], dim=-1)
        q = q.view(batch, length, attn.num_heads, attn.head_dim)
        k = k.view(batch, length, attn.num_kv_heads, attn.head_dim)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        v = v.view(batch, length, attn.num_kv_heads, attn.head_dim)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             is_causal=True, enable_gqa=True)      # [B, H, T, d]
        x = x + attn.o_proj(out.transpose(1, 2).reshape(batch, length, -1))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.compute_logits(model.norm(x))


def _windows(data: torch.Tensor, batch: int, context: int, generator: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=generator)
    return torch.stack([data[s:s + context + 1] for s in starts.tolist()])


@torch.no_grad()
def bits_per_byte(model: Transformer, data: torch.Tensor, context: int, windows: int = 64) -> float:
    """Mean next-byte loss in bits over evenly spaced held-out windows."""
    step = max((len(data) - context - 1) // windows, 1)
    losses = []
    for start in range(0, len(data) - context - 1, step)[:windows]:
        chunk = data[start:start + context + 1].unsqueeze(0)
        logits = dense_logits(model, chunk[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1)).item())
    return sum(losses) / len(losses) / math.log(2)


def train(out: Path, *, minutes: float, max_steps: int | None, batch: int, context: int, lr: float, seed: int,
          threads: int, log=print, arch: ModelArchitecture = ARCH, corpus_root: str | None = None) -> dict:
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    corpus = stdlib_corpus(root=corpus_root)
    train_data = torch.tensor(list(corpus.train), dtype=torch.long)
    held_data = torch.tensor(list(corpus.held_out), dtype=torch.long)
    model = Transformer(arch, arch.max_position_embeddings)
    init_random_weights(model, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    generator = torch.Generator().manual_seed(seed)
    budget_s, warmup = minutes * 60.0, 50
    planned = max_steps or 10 ** 9
    curve, start, step = [], time.perf_counter(), 0
    while step < planned and (max_steps is not None or time.perf_counter() - start < budget_s):
        progress = step / planned if max_steps else (time.perf_counter() - start) / budget_s
        scale = min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        for group in optimizer.param_groups:
            group["lr"] = lr * max(scale, 0.02)
        chunk = _windows(train_data, batch, context, generator)
        logits = dense_logits(model, chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % 25 == 0 or step == 1:
            curve.append([step, round(time.perf_counter() - start, 1), round(loss.item() / math.log(2), 4)])
            log(f"step {step}: {curve[-1][2]:.3f} bits/byte, {curve[-1][1]:.0f} s")
    seconds = time.perf_counter() - start
    model.eval()
    held = bits_per_byte(model, held_data, context)
    save_checkpoint(out, arch, model.state_dict())
    report = {"corpus": {"root": corpus.root, "files": corpus.files, "held_out_files": corpus.held_out_files,
                         "train_bytes": len(corpus.train), "held_out_bytes": len(corpus.held_out),
                         "python": sys.version.split()[0]},
              "steps": step, "seconds": round(seconds, 1), "batch": batch, "context": context, "lr": lr,
              "seed": seed, "threads": threads, "loss_curve_bits_per_byte": curve,
              "held_out_bits_per_byte": held, "held_out_perplexity": 2 ** held,
              "tokenizer": {"kind": "byte", "vocab_size": ByteTokenizer().vocab_size}}
    (out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m reference_server.training.train", description=__doc__.splitlines()[0])
    add_output_arguments(parser, out="checkpoint directory to write", required=True, report=False)
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock training budget (default 10)")
    parser.add_argument("--steps", type=int, help="a fixed number of optimizer steps instead of --minutes")
    parser.add_argument("--batch", type=int, default=16, help="sequences per optimizer step (default 16)")
    parser.add_argument("--context", type=int, default=256, help="bytes per training sequence (default 256)")
    parser.add_argument("--lr", type=float, default=3e-3, help="AdamW's learning rate (default 3e-3)")
    add_options(parser, EngineOptions, title="the model's engine (its weights' initialisation and batches: --seed)",
                only=("seed", "num-threads"), typed=True)
    parser.set_defaults(num_threads=2)
    args = parser.parse_args(argv)
    for name in ("minutes", "batch", "context", "lr", "num_threads"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.context >= ARCH.max_position_embeddings:
        parser.error(f"--context must be below the model's {ARCH.max_position_embeddings} positions, "
                     f"got {args.context}")
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    report = train(Path(args.out), minutes=args.minutes, max_steps=args.steps, batch=args.batch,
                   context=args.context, lr=args.lr, seed=args.seed, threads=args.num_threads,
                   log=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"{args.out}: {report['steps']} steps in {report['seconds']:.0f} s, held-out "
          f"{report['held_out_bits_per_byte']:.3f} bits/byte (perplexity {report['held_out_perplexity']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

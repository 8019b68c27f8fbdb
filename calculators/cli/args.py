"""Argument parser of ``servecap calc``: one subcommand per calculator, flags as in issue 5."""

from __future__ import annotations

import argparse

from calculators.efficiency import ENGINES
from engine_core.scheduling.strategies import DEFAULT_STRATEGY, strategy_names  # the pure registry
from engine_core.scheduling.strategies.flags import add_limit_arguments


def _lengths(text: str) -> tuple[int, int]:
    """'128' or '64-256' -> (low, high)."""
    try:
        low, _, high = text.partition("-")
        values = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LOW-HIGH tokens, got {text!r}") from None
    return values


def _numbers(kind):
    def parse(text: str) -> list:
        try:
            return [kind(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}") from None
    return parse


def _model(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--model", required=required, help="catalog name (see `servecap calc models`) or a config.json path")


def _gpu(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--gpu", required=required, help="catalog name (see `servecap calc gpus`)")
    p.add_argument("--gpu-memory-gib", type=float, help="override (required for --gpu cpu)")
    p.add_argument("--gpu-bandwidth-gbs", type=float, help="override memory bandwidth, GB/s (required for cpu)")
    p.add_argument("--gpu-tflops", type=float, help="override every compute peak, TFLOP/s (required for cpu)")
    p.add_argument("--gpu-hourly", type=float, help="override the assumed price per GPU-hour, USD")
    p.add_argument("--gpu-interconnect-gbs", type=float, help="override GPU-to-GPU bandwidth, one direction, GB/s")


def _efficiency(p: argparse.ArgumentParser) -> None:
    p.add_argument("--efficiency-profile", metavar="FILE",
                   help="efficiencies from `servecap calc calibrate --roofline` (default: fitted on published points)")
    p.add_argument("--engine", choices=ENGINES, help="apply this engine's fitted factors (default: none)")


def _speculative(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speculative decoding (calculators.speculative): TPOT and tokens/s with and "
                             "without, per batch, and the crossover")
    g.add_argument("--speculative-method", choices=("draft", "ngram"))
    g.add_argument("--num-speculative-tokens", type=int, help="k: proposals verified per step")
    g.add_argument("--speculative-acceptance", help="acceptance rate, or one per position: 0.7 or 0.8,0.7,0.6,0.5")
    g.add_argument("--speculative-model", help="--speculative-method draft: the draft model (catalog name or config.json)")


def _dtypes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default="bf16", help="fp32|bf16|fp16|fp8|int8|int4-g128 (float32/bfloat16/float16 too)")
    p.add_argument("--kv-dtype", help="KV cache format; default the weights' (bf16 for quantized weights)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servecap calc", description="capacity calculators (pure functions)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="CALCULATOR")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        return p

    p = command("kv", "KV-cache bytes per token and per request")
    _model(p), _dtypes(p)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=0)
    p.add_argument("--output-tokens", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)

    p = command("weights", "weight bytes and parameter count")
    _model(p)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--keep-embeddings-16bit", action="store_true", help="embeddings and output head stay 16-bit")

    p = command("fit", "vLLM memory budget: KV cache, blocks, max concurrency")
    _model(p), _gpu(p), _dtypes(p)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--activation-gib", type=float)
    p.add_argument("--non-torch-gib", type=float)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--prompt-tokens", type=int)
    p.add_argument("--output-tokens", type=int)
    p.add_argument("--max-num-seqs", type=int,
                   help="default: vLLM's for this GPU (1024 on 70 GiB or more, A100 aside; else 256)")
    p.add_argument("--max-num-batched-tokens", type=int,
                   help="default: vLLM's for this GPU (8192 on 70 GiB or more, A100 aside; else 2048)")
    p.add_argument("--keep-embeddings-16bit", action="store_true")
    p.add_argument("--max-loras", type=int, default=0,
                   help="LoRA slots the engine reserves (vLLM's --max-loras; 0: no LoRA), taken out of the KV room")
    p.add_argument("--max-lora-rank", type=int, default=16, help="each slot's rank (vLLM's --max-lora-rank)")
    _efficiency(p)

    p = command("roofline", "decode step time, tokens/s and bound; prefill time")
    _model(p), _gpu(p), _dtypes(p)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--prompt-tokens", type=int, default=0)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--bandwidth-efficiency", type=float, help="override the profile's memory-bandwidth efficiency")
    p.add_argument("--compute-efficiency", type=float, help="override the profile's compute efficiencies")
    p.add_argument("--overhead-ms", type=float, help="override the profile's fixed costs per step and prefill")
    _efficiency(p)
    _speculative(p)

    p = command("queue", "queueing models: mmc, md1, mg1, ggc, batch")
    p.add_argument("--queue", required=True, choices=("mmc", "md1", "mg1", "ggc", "batch"))
    p.add_argument("--arrival-rate", type=float, required=True, help="requests/s")
    p.add_argument("--service-rate", type=float, help="requests/s one server completes (not for batch)")
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--service-cv2", type=float, default=1.0)
    p.add_argument("--arrival-cv2", type=float, default=1.0)
    p.add_argument("--batch-base-ms", type=float, help="batch: fixed time per batch")
    p.add_argument("--batch-per-item-ms", type=float, help="batch: added time per request in the batch")
    p.add_argument("--max-batch-size", type=int, help="batch: largest batch")

    p = command("fleet", "replicas for a request rate under a p99 SLO")
    p.add_argument("--rate", type=float, required=True, help="requests/s to serve")
    p.add_argument("--slo-p99-ms", type=float, required=True)
    p.add_argument("--replica-capacity", type=float, help="measured requests/s of one saturated replica")
    p.add_argument("--replica-slots", type=int, default=1, help="requests one replica runs at once")
    _model(p, required=False), _gpu(p, required=False)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=256)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--service-cv2", type=float, default=1.0)
    p.add_argument("--arrival-cv2", type=float, default=1.0)
    _efficiency(p)

    p = command("cost", "USD per million tokens (and requests), measured or predicted throughput")
    p.add_argument("--gpu-hourly", type=float, help="USD per GPU-hour (default: the --gpu catalog price)")
    p.add_argument("--gpu", help="take the hourly price from the GPU catalog")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--tokens-per-s", type=float, help="peak output tokens/s of those GPUs (or give --model)")
    p.add_argument("--model", help="predict tokens/s of a full replica of this model on --gpu instead")
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=256)
    p.add_argument("--max-num-seqs", type=int, default=256)
    _efficiency(p)
    p.add_argument("--slo-tokens-per-s", type=float, help="tokens/s at the SLO operating point")
    p.add_argument("--requests-per-s", type=float)

    p = command("simulate", "discrete-event simulation of a batching strategy over load levels")
    p.add_argument("--strategy", default=DEFAULT_STRATEGY, choices=strategy_names())
    level = p.add_mutually_exclusive_group(required=True)
    level.add_argument("--concurrency", type=_numbers(int), help="closed-loop levels, e.g. 1,4,8")
    level.add_argument("--rates", type=_numbers(float), help="open-loop request rates, e.g. 1,2,4")
    p.add_argument("--arrival-cv2", type=float, default=1.0)
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--prompt-tokens", type=_lengths, default=(128, 128), help="N or LOW-HIGH (uniform)")
    p.add_argument("--output-tokens", type=_lengths, default=(128, 128), help="N or LOW-HIGH (uniform)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step-base-ms", type=float, help="measured step model: fixed ms per step")
    p.add_argument("--step-per-seq-ms", type=float, default=0.0)
    p.add_argument("--step-per-prefill-token-ms", type=float, default=0.0)
    p.add_argument("--step-per-context-token-ms", type=float, default=0.0)
    _model(p, required=False), _gpu(p, required=False)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--tp", type=int, default=1)
    add_limit_arguments(p.add_argument_group("batching limits", "as `servecap serve` takes them"))
    p.add_argument("--kv-blocks", type=int, help="default with --model and --gpu: what the engine would size there")
    p.add_argument("--block-size", type=int, help="default 16; with --model and --gpu: the engine's")
    p.add_argument("--max-model-len", type=int, help="with --model and --gpu: the engine's longest request "
                   "(default the model's; a shorter one leaves room for the KV cache of a large model)")
    _efficiency(p)
    _speculative(p)
    p.add_argument("--speculative-proposal-share", type=float, default=1.0, metavar="S",
                   help="the share of decodes that propose (default 1; prompt lookup's is what a server counted: "
                        "the report's spec_drafts_per_decode)")

    p = command("calibrate", "fit step time = a + b x batch (+ prefill tokens), or --roofline efficiencies")
    p.add_argument("--steps", required=True,
                   help="CSV: batch_size, step_s[, prefill_tokens]; with --roofline also [context_tokens, tp]")
    p.add_argument("--roofline", action="store_true",
                   help="fit the roofline's efficiencies and costs per TP degree; write them with --out")
    p.add_argument("--out", metavar="FILE", help="--roofline: write the efficiency profile here (JSON)")
    _model(p, required=False), _gpu(p, required=False)
    p.add_argument("--dtype", default="bf16")
    p.add_argument("--kv-dtype")
    p.add_argument("--tp", type=int, default=1, help="TP degree of rows without a tp column")
    p.add_argument("--engine", choices=ENGINES, help="start from this engine's fitted factors")

    command("gpus", "list the GPU catalog")
    command("models", "list the model catalog")
    return parser

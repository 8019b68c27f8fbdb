"""The engine's options, declared once for every command that takes them.

`servecap serve` runs an engine with them, `servecap bench` benchmarks one, `servecap calc` (kv,
weights, fit, roofline, simulate, ...) sizes and times one on a catalog GPU, `servecap predict` and
`servecap plan` ask what-ifs of a calibrated one, `servecap quality` builds two. Each adds the part
it takes: `add_options(parser, EngineOptions, only=("model", "dtype", "tp"))` (contract.options), so
`--tp`, `--dtype` or `--speculative-acceptance` has one name, one syntax and one meaning everywhere.

A value left out is None: "the engine's default", which each command fills in where it knows it
(the reference server's float32 but an emulated GPU's bf16; 16-token KV blocks but an emulated
engine's own; vLLM's batching limits for a catalog GPU). The batching limits themselves are each
strategy's (engine_core.scheduling.strategies.flags). Pure: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.options import option, options_from_args, parse_float, parse_int
from engine_core.scheduling.speculative import parse_acceptance
from engine_core.scheduling.strategies import DEFAULT_STRATEGY, STRATEGIES

SPECULATIVE_METHODS = ("draft", "ngram")
SPECULATIVE = ("speculative-method", "num-speculative-tokens", "speculative-model", "speculative-acceptance")


def _acceptance(value: Any, flag: str) -> tuple[float, ...]:
    return tuple(map(float, value)) if isinstance(value, (tuple, list)) else parse_acceptance(value, flag)


@dataclass(frozen=True)
class EngineOptions:
    """The engine's options as given (None: the engine's default); the configs that run or model an
    engine (reference_server's EngineConfig, the calculators' arguments) validate them."""

    model: str | None = option(None, help="the model: a preset (tiny, small) or a checkpoint directory to serve; a "
                                          "catalog model (`servecap calc models`) or a Hugging Face config.json to "
                                          "size, time or emulate (default: serve and quality tiny, bench small)")
    device: str | None = option(None, help="cpu | cuda | cuda:N (default cpu)")
    dtype: str | None = option(None, help="the weights' dtype: float32 | bfloat16 | float16 (fp32, bf16, fp16); on a "
                                          "catalog GPU (the calculators, plan, an emulated GPU) also fp8 | int8 | "
                                          "int4-g128 (default: a real engine's float32, a catalog GPU's bf16)")
    kv_dtype: str | None = option(None, help="the KV cache's format (vLLM's --kv-cache-dtype; default the weights', "
                                             "bf16 for quantized weights)")
    tp: int | None = option(None, parse=parse_int,
                            help="tensor-parallel GPUs per replica (default 1; `servecap serve`: an emulated GPU's)")
    dp: int | None = option(None, parse=parse_int,
                            help="data-parallel attention ranks in one replica of an MoE model, each with its own "
                                 "sequences, KV cache and batching limits, the routed experts spread over all "
                                 "tp x dp GPUs (vLLM's --data-parallel-size, TensorRT-LLM's enable_attention_dp; "
                                 "calculators.moe_layout; default 1)")
    expert_parallel: bool = option(False, kind="switch",
                                   help="whole routed experts on each of the tp x dp GPUs, exchanged by all-to-all, "
                                        "instead of every expert cut tp x dp ways (vLLM's --enable-expert-parallel, "
                                        "TensorRT-LLM's --ep; its DEP N is --dp N --expert-parallel)")
    strategy: str | None = option(None, help="the batching strategy: " + "; ".join(
        f"{spec.name}: {spec.summary}" for spec in STRATEGIES.values()) + f" (default {DEFAULT_STRATEGY}; predict and "
        "plan: which of the calibration run's, needed when it has several)")
    seed: int = option(0, parse=parse_int, help="the engine's seed: its weights and default sampling (default 0; "
                                                "bench: its workload too)")
    num_threads: int | None = option(None, parse=parse_int, help="torch CPU threads (default: `servecap serve` all its cores but one, "
                                                "left to the front end, or one per --engine-cpus core; elsewhere "
                                                "torch's; training 2)")
    block_size: int | None = option(None, parse=parse_int,
                                    help="tokens per KV block (default 16; an emulated GPU, and calc simulate with "
                                         "--model and --gpu: its engine's)")
    kv_blocks: int | None = option(None, parse=parse_int,
                                   help="the KV cache's block count (default: what the memory holds; calc simulate "
                                        "with --model and --gpu: what the engine would size there)")
    max_model_len: int | None = option(None, parse=parse_int,
                                       help="the longest prompt + output a request may have (default the model's; a "
                                            "shorter one leaves a large model room for its KV cache)")
    gpu_memory_utilization: float | None = option(None, parse=parse_float,
                                                  help="the share of GPU memory the engine takes (vLLM's; default "
                                                       "0.9; `servecap serve`: an emulated GPU's)")
    max_loras: int | None = option(None, parse=parse_int,
                                   help="LoRA adapters resident at once (vLLM's --max-loras; serve: default 1; calc "
                                        "fit: slots taken out of the KV room, default 0: none; predict and plan: a "
                                        "what-if)")
    max_lora_rank: int = option(16, parse=parse_int, help="the largest adapter rank (vLLM's; default 16)")
    speculative_method: str | None = option(None, choices=SPECULATIVE_METHODS,
                                            help="speculative decoding: ngram, prompt lookup as vLLM's (the "
                                                 "continuation of the latest earlier match), or draft, a smaller "
                                                 "model proposes (--speculative-model)")
    num_speculative_tokens: int | None = option(None, parse=parse_int, metavar="K",
                                                help="proposals verified per step")
    speculative_model: str | None = option(None, metavar="MODEL",
                                           help="the draft model, sharing the tokenizer: a preset or checkpoint to "
                                                "serve; a catalog model to emulate or time (by its roofline on --gpu)")
    speculative_acceptance: tuple[float, ...] | None = option(
        None, parse=_acceptance, metavar="A[,A...]",
        help="acceptance: one rate, or one per position as vLLM reports them (0.7 or 0.8,0.7,0.6,0.5); an emulated "
             "server keeps proposals by seeded draws at these rates")

    @classmethod
    def from_args(cls, args: Any, only: tuple[str, ...] | None = None) -> "EngineOptions":
        """From a parser that took (a part of) these options; ValueError names the flag."""
        return cls(**options_from_args(cls, args, only))

    def speculating(self) -> bool:
        """Any --speculative-* given."""
        return any(getattr(self, name) is not None for name in
                   ("speculative_method", "num_speculative_tokens", "speculative_model", "speculative_acceptance"))

    def check_speculation(self) -> None:
        """What a simulated or predicted speculation needs (the calculators and predict): the method, k and
        the acceptance together, a draft model only for a draft; ValueError naming the flags."""
        if any(getattr(self, name) is None for name in
               ("speculative_method", "num_speculative_tokens", "speculative_acceptance")):
            raise ValueError("speculative decoding needs --speculative-method, --num-speculative-tokens and "
                             "--speculative-acceptance together")
        if self.speculative_method == "ngram" and self.speculative_model is not None:
            raise ValueError("--speculative-model is for --speculative-method draft (ngram needs no draft model)")

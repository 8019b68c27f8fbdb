"""A GPU serving engine as it would size itself on a catalog GPU: its limits, its KV blocks, its step time.

    gpu_engine(arch, gpu, dtype="bf16", tp=1, gpu_memory_utilization=None, engine="vllm") -> GpuEngine

One rule for every place a GPU is named (`servecap serve --emulate`, the sweep's emulated replicas):
- the engine's default batching limits (ENGINE_DEFAULTS): max sequences, max batched tokens a step,
  chunked prefill, its KV block size;
- the KV blocks left after weights, activations and the non-torch reserve, by the engine's own
  budget rule (`calculators.fit` for vLLM's; TensorRT-LLM gives the KV cache a fraction of the memory
  that is free once the weights are loaded);
- the step time of a batch shape (prefill tokens, sequences, context tokens) from the roofline under
  the efficiency profile fitted on published measurements, with the engine's fitted factors
  (`calculators.sim.step_model.step_model_from_roofline`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from engine_core.dtypes import default_kv_dtype, parse_dtype
from calculators.fit import Fit, fit
from engine_core.gpus import GIB, GpuSpec
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline

LARGE_GPU_BYTES = 70 * GIB   # vLLM gives GPUs of this much memory or more (A100s excepted) larger batch limits


@dataclass(frozen=True)
class EngineDefaults:
    """An engine's defaults as its OpenAI-compatible server starts with them."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    gpu_memory_utilization: float
    kv_of_free_memory: bool       # the KV budget is a share of the memory free after the weights (TensorRT-LLM)

    def limit_flags(self) -> dict:
        """The limits as the reference server's strategy flags take them: a GPU engine fills each step's
        token budget with prefill while sequences decode (chunked prefill), hence no separate cap."""
        return {"max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
                "max_prefill_tokens_with_decodes": 0}


def engine_defaults(engine: str, gpu: GpuSpec) -> EngineDefaults:
    """vLLM's `EngineArgs.get_batch_defaults` for its API server (8192 tokens and 1024 sequences on a GPU of
    70 GiB or more that is not an A100, else 2048 and 256; block 16; 0.9 of the memory); TensorRT-LLM's
    `trtllm-serve` (max_batch_size 2048, max_num_tokens 8192, 32 tokens a block, 0.9 of the free memory).
    Another engine of the efficiency profile (sglang, lmdeploy, gpt-fast) is sized as vLLM is."""
    if engine in OTHER_ENGINES:
        engine = "vllm"
    if engine == "vllm":
        large = gpu.usable_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.name
        return EngineDefaults(max_num_seqs=1024 if large else 256, max_num_batched_tokens=8192 if large else 2048,
                              block_size=16, gpu_memory_utilization=0.9, kv_of_free_memory=False)
    if engine == "tensorrt-llm":
        return EngineDefaults(max_num_seqs=2048, max_num_batched_tokens=8192, block_size=32,
                              gpu_memory_utilization=0.9, kv_of_free_memory=True)
    raise ValueError(f"engine must be one of {', '.join(SIZED_ENGINES)}, got {engine!r}")


SIZED_ENGINES = ("vllm", "tensorrt-llm")
OTHER_ENGINES = ("sglang", "lmdeploy", "gpt-fast")   # the profile's other engines: vLLM's sizing


@dataclass(frozen=True)
class GpuEngine:
    """What an engine on `gpu` runs with. `fit` is the memory budget behind `num_kv_blocks`."""

    engine: str
    gpu: str
    model: str
    dtype: str
    kv_dtype: str
    tp: int
    block_size: int
    num_kv_blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    step_model: StepTimeModel
    fit: Fit

    def describe(self) -> str:
        """'emulated h100-sxm, llama-3.1-8b bf16 (vllm sizing)' and the TP degree when above 1."""
        tp = f", tp {self.tp}" if self.tp > 1 else ""
        return f"emulated {self.gpu}{tp}, {self.model} {self.dtype} ({self.engine} sizing)"


def gpu_engine(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
               gpu_memory_utilization: float | None = None, engine: str = "vllm",
               max_model_len: int | None = None, max_num_seqs: int | None = None,
               max_num_batched_tokens: int | None = None) -> GpuEngine:
    """The engine's sizing on `gpu`; a limit given here replaces the engine's default. ValueError when the
    model does not fit (the budget's reason) or a value is out of range."""
    defaults = engine_defaults(engine, gpu)
    seqs = defaults.max_num_seqs if max_num_seqs is None else max_num_seqs
    tokens = defaults.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    utilization = defaults.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    dt = parse_dtype(dtype)
    budget = fit(arch, gpu, dtype=dt.name, kv_dtype=default_kv_dtype(dt), gpus=tp, tp=tp,
                 gpu_memory_utilization=utilization, block_size=defaults.block_size,
                 max_model_len=max_model_len, max_num_batched_tokens=tokens, max_num_seqs=seqs)
    if defaults.kv_of_free_memory and budget.num_blocks:
        free = budget.usable_bytes - budget.weight_bytes - budget.activation_bytes - budget.non_torch_bytes
        blocks = int(free * utilization) // budget.kv_block_bytes
    else:
        blocks = budget.num_blocks
    if not budget.fits or blocks < 1:
        raise ValueError(budget.reason)
    step = step_model_from_roofline(arch, gpu, dtype=dt.name, tp=tp, engine=engine)
    return GpuEngine(engine=engine, gpu=gpu.name, model=arch.name, dtype=dt.name, kv_dtype=budget.kv_dtype, tp=tp,
                     block_size=defaults.block_size, num_kv_blocks=blocks, max_model_len=budget.max_model_len,
                     max_num_seqs=seqs, max_num_batched_tokens=tokens, step_model=step, fit=budget)

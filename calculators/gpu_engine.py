"""A GPU serving engine as it would size itself on a catalog GPU: its limits, its KV blocks, its step time.

    gpu_engine(arch, gpu, dtype="bf16", tp=1, gpu_memory_utilization=None, engine="vllm") -> GpuEngine

One rule for every place a GPU is named (`servecap serve --emulate`, the sweep's emulated replicas):
- the engine's defaults at its version (`calculators.engine_profiles`, each cited): max sequences, max
  batched tokens a step, chunked prefill or whole prompts, its capacity policy, its KV dtype and block size;
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
from engine_core.dtypes import parse_dtype
from calculators.engine_profiles import EngineDefaults, engine_defaults
from calculators.fit import Fit, fit
from calculators.moe_layout import PLAIN, MoeLayout
from engine_core.gpus import GpuSpec
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline

@dataclass(frozen=True)
class GpuEngine:
    """What an engine on `gpu` runs with. `fit` is the memory budget behind `num_kv_blocks`."""

    engine: str
    gpu: str
    model: str
    dtype: str
    kv_dtype: str
    tp: int
    dp: int                   # data-parallel attention ranks (an MoE layout; 1: none)
    expert_parallel: bool
    block_size: int
    num_kv_blocks: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    step_model: StepTimeModel
    fit: Fit
    defaults: EngineDefaults

    def describe(self) -> str:
        """'emulated h100-sxm, llama-3.1-8b bf16 (vllm sizing)' and the TP degree when above 1 (the dp ranks
        and expert parallelism when laid out so)."""
        tp = f", tp {self.tp}" if self.tp > 1 else ""
        tp += f", dp {self.dp}" if self.dp > 1 else ""
        tp += ", expert parallel" if self.expert_parallel else ""
        return f"emulated {self.gpu}{tp}, {self.model} {self.dtype} ({self.engine} sizing)"

    def limit_flags(self) -> dict:
        """The replica's limits as the strategy flags take them: the engine's defaults, with the sequences and
        step tokens this sizing holds (a limit given to `gpu_engine`, dp ranks' worth)."""
        return {**self.defaults.limit_flags(), "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens}


def gpu_engine(arch: ModelArchitecture, gpu: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
               gpu_memory_utilization: float | None = None, engine: str = "vllm", engine_version: str | None = None,
               kv_dtype: str | None = None, checkpoint_kv_dtype: str | None = None,
               max_model_len: int | None = None, max_num_seqs: int | None = None,
               max_num_batched_tokens: int | None = None, layout: MoeLayout = PLAIN) -> GpuEngine:
    """The engine's sizing on `gpu`; a limit given here replaces the engine's default, and `kv_dtype` its
    "auto" KV format (`checkpoint_kv_dtype`: the format the checkpoint declares, which that rule may
    follow; calculators.engine_profiles). ValueError when the model does not fit (the budget's reason)
    or a value is out of range. With an MoE ``layout`` (calculators.moe_layout) each of its dp ranks is an engine
    core with these limits and its own KV cache: the replica's are dp times one rank's."""
    layout.check(arch, tp)
    defaults = engine_defaults(engine, gpu, engine_version)
    seqs = defaults.max_num_seqs if max_num_seqs is None else max_num_seqs
    tokens = defaults.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    utilization = defaults.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    dt = parse_dtype(dtype)
    kv_dtype = kv_dtype or defaults.kv_dtype(dt, checkpoint_kv_dtype)   # given: the engine's --kv-cache-dtype
    budget = fit(arch, gpu, dtype=dt.name, kv_dtype=kv_dtype, gpus=layout.gpus(tp), tp=tp,
                 gpu_memory_utilization=utilization, block_size=defaults.block_size,
                 max_model_len=max_model_len, max_num_batched_tokens=tokens, max_num_seqs=seqs, dp=layout.dp)
    if defaults.kv_of_free_memory and budget.num_blocks:
        free = budget.usable_bytes - budget.weight_bytes - budget.activation_bytes - budget.non_torch_bytes
        blocks = int(free * utilization) // budget.kv_block_bytes
    else:
        blocks = budget.num_blocks
    if not budget.fits or blocks < 1:
        raise ValueError(budget.reason)
    ranks = layout.dp
    step = step_model_from_roofline(arch, gpu, dtype=dt.name, kv_dtype=kv_dtype, tp=tp, engine=engine,
                                    layout=layout, max_batch=seqs * ranks)
    return GpuEngine(engine=engine, gpu=gpu.name, model=arch.name, dtype=dt.name, kv_dtype=budget.kv_dtype, tp=tp,
                     dp=ranks, expert_parallel=layout.expert_parallel, block_size=defaults.block_size,
                     num_kv_blocks=blocks * ranks, max_model_len=budget.max_model_len,
                     max_num_seqs=seqs * ranks, max_num_batched_tokens=tokens * ranks, step_model=step, fit=budget,
                     defaults=defaults)

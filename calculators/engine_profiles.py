"""The serving defaults that shape time to first token, per engine and version, each with its source.

A GPU what-if sizes and schedules a replica as its engine would start with no flags: how many
sequences and tokens a step may hold, whether a prompt may be split across steps, which KV dtype,
how much memory goes to the KV cache and whether admission reserves room for a request's whole
output. Every value here is read from the engine's own source at the commit named beside it, never
fitted to the serving curves the simulator is validated on (lab/calculators/serving_curves.py).

    vLLM 0.11 (`vllm serve`, V1; vllm/engine/arg_utils.py @ 99d7eb5d, its "removed in v0.12" notices):
        max_num_seqs 1024 and max_num_batched_tokens 8192 on a GPU of 70 GiB or more that is not an
        A100, else 256 and 2048 (`EngineArgs._set_default_args`, usage context OPENAI_API_SERVER);
        chunked prefill always on (`self.enable_chunked_prefill = True`); kv_cache_dtype "auto" = the
        model's dtype (an fp8 checkpoint keeps a bf16 cache); gpu_memory_utilization 0.9 of the total;
        scheduler policy "fcfs" (vllm/config/scheduler.py @ 01230b40); block size 16; a sequence that
        needs a block the cache cannot give preempts the newest (recompute).
    vLLM main (2026; vllm/config/cache.py @ 002f10e0, vllm/utils/torch_utils.py @ 0024350b):
        the same limits; gpu_memory_utilization 0.92 (`Field(default=0.92, gt=0, le=1)`); "auto" KV
        reads the checkpoint's kv_cache_quant_algo since PR #30785 (Dec 2025), so a ModelOpt FP8
        checkpoint that declares an FP8 cache gets fp8_e4m3.
    TensorRT-LLM 1.x (`trtllm-serve`, PyTorch backend; tensorrt_llm/commands/serve.py @ 00209af1,
        tensorrt_llm/llmapi/llm_args.py): max_batch_size 2048, max_num_tokens 8192 on every GPU;
        enable_chunked_prefill False; KvCacheConfig.dtype "auto" keeps the checkpoint's
        kv_cache_quant_algo (hf_quant_config.json), so an FP8 checkpoint caches in fp8;
        free_gpu_memory_fraction 0.9 of the memory free after the weights; capacity scheduler
        GUARANTEED_NO_EVICT; tokens_per_block 32.

Which KV format a checkpoint declares is the checkpoint's, not the engine's: a catalog model declares
none, so its "auto" cache is the model's dtype under every profile (`--kv-dtype fp8` is the engine's
`--kv-cache-dtype fp8`, honoured by all; `gpu_engine(checkpoint_kv_dtype="fp8")` is a checkpoint that
declares it, which vLLM 0.11 ignores and the others follow). SGLang, lmdeploy and gpt-fast are sized as vLLM 0.11: their
own defaults (SGLang's chunked_prefill_size and mem_fraction_static from the GPU's memory) are not
modelled yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.dtypes import DType, parse_dtype, parse_kv_dtype
from engine_core.gpus import GIB, GpuSpec
from engine_core.scheduling.strategies.continuous import GUARANTEED_NO_EVICT, MAX_UTILIZATION

LARGE_GPU_BYTES = 70 * GIB   # vLLM gives GPUs of this much memory or more (A100s excepted) larger batch limits
SIZED_ENGINES = ("vllm", "tensorrt-llm")
OTHER_ENGINES = ("sglang", "lmdeploy", "gpt-fast")   # the efficiency profile's other engines: vLLM 0.11's sizing


@dataclass(frozen=True)
class EngineDefaults:
    """An engine's defaults as its OpenAI-compatible server starts with them on one GPU."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    gpu_memory_utilization: float
    kv_of_free_memory: bool       # the KV budget is a share of the memory free after the weights (TensorRT-LLM)
    chunked_prefill: bool = True
    capacity_policy: str = MAX_UTILIZATION
    kv_follows_checkpoint: bool = False   # "auto" KV: the format the checkpoint declares (else the model's dtype)

    def limit_flags(self) -> dict:
        """The limits as the reference server's strategy flags take them: a GPU engine fills each step's
        token budget with prefill while sequences decode, hence no separate cap on prompt tokens."""
        return {"max_num_seqs": self.max_num_seqs, "max_num_batched_tokens": self.max_num_batched_tokens,
                "max_prefill_tokens_with_decodes": 0, "chunked_prefill": self.chunked_prefill,
                "capacity_policy": self.capacity_policy}

    def kv_dtype(self, dtype: str | DType, declared: str | None = None) -> str:
        """The KV cache's format under the engine's "auto" rule, for weights in `dtype` and a checkpoint
        that declares a KV format (`declared`, e.g. ModelOpt's kv_cache_quant_algo "FP8" -> "fp8"; None:
        it declares none, as a catalog model does)."""
        if self.kv_follows_checkpoint and declared is not None:
            return parse_kv_dtype(declared).name
        dt = dtype if isinstance(dtype, DType) else parse_dtype(dtype)
        return dt.name if dt.is_float else "bf16"


@dataclass(frozen=True)
class EngineProfile:
    """One engine at one version: `defaults_on(gpu)` gives its defaults there (module docstring: sources)."""

    engine: str
    version: str
    gpu_memory_utilization: float
    chunked_prefill: bool
    capacity_policy: str
    kv_follows_checkpoint: bool

    def defaults_on(self, gpu: GpuSpec) -> EngineDefaults:
        if self.engine == "vllm":
            large = gpu.usable_bytes >= LARGE_GPU_BYTES and "a100" not in gpu.name
            return EngineDefaults(max_num_seqs=1024 if large else 256,
                                  max_num_batched_tokens=8192 if large else 2048, block_size=16,
                                  gpu_memory_utilization=self.gpu_memory_utilization, kv_of_free_memory=False,
                                  chunked_prefill=self.chunked_prefill, capacity_policy=self.capacity_policy,
                                  kv_follows_checkpoint=self.kv_follows_checkpoint)
        return EngineDefaults(max_num_seqs=2048, max_num_batched_tokens=8192, block_size=32,
                              gpu_memory_utilization=self.gpu_memory_utilization, kv_of_free_memory=True,
                              chunked_prefill=self.chunked_prefill, capacity_policy=self.capacity_policy,
                              kv_follows_checkpoint=self.kv_follows_checkpoint)


PROFILES = {
    ("vllm", "0.11"): EngineProfile("vllm", "0.11", 0.9, True, MAX_UTILIZATION, kv_follows_checkpoint=False),
    ("vllm", "main"): EngineProfile("vllm", "main", 0.92, True, MAX_UTILIZATION, kv_follows_checkpoint=True),
    ("tensorrt-llm", "1.x"): EngineProfile("tensorrt-llm", "1.x", 0.9, False, GUARANTEED_NO_EVICT,
                                           kv_follows_checkpoint=True),
}
DEFAULT_VERSIONS = {"vllm": "0.11", "tensorrt-llm": "1.x"}


def engine_versions(engine: str) -> tuple[str, ...]:
    return tuple(version for (name, version) in PROFILES if name == engine)


def engine_profile(engine: str, version: str | None = None) -> EngineProfile:
    """`engine` at `version` (default: DEFAULT_VERSIONS); the other engines of the efficiency profile are
    sized as vLLM 0.11. ValueError names an unknown engine or version."""
    if engine in OTHER_ENGINES:
        if version is not None:
            raise ValueError(f"--engine-version: {engine} has no profile of its own (it is sized as vLLM 0.11)")
        engine, version = "vllm", "0.11"
    if engine not in SIZED_ENGINES:
        raise ValueError(f"engine must be one of {', '.join(SIZED_ENGINES + OTHER_ENGINES)}, got {engine!r}")
    version = DEFAULT_VERSIONS[engine] if version is None else version
    if (engine, version) not in PROFILES:
        raise ValueError(f"--engine-version {version!r}: {engine} has {', '.join(engine_versions(engine))}")
    return PROFILES[(engine, version)]


def engine_defaults(engine: str, gpu: GpuSpec, version: str | None = None) -> EngineDefaults:
    """The defaults `engine` (at `version`) starts with on `gpu`."""
    return engine_profile(engine, version).defaults_on(gpu)

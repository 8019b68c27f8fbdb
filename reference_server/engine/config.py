"""Engine configuration: one frozen dataclass, validated on construction.

Runtime-derived values (the KV block count that a memory budget buys, the resolved
architecture) live in the engine, not here: this object is only what the user asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from contract.checks import non_negative_int, positive_int
from engine_core.scheduling.strategies import limits_from_flags, resolve  # pure: no torch
from engine_core.scheduling.strategies.limits import Limits, check_non_negative_number

DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "f32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16",
}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def normalize_dtype(name: str) -> str:
    """Canonical dtype name for `name` (aliases fp32/bf16/fp16 accepted); ValueError names the choices."""
    key = str(name).strip().lower()
    if key not in DTYPE_ALIASES:
        raise ValueError(f"dtype must be one of float32, bfloat16, float16 (or fp32/bf16/fp16), got {name!r}")
    return DTYPE_ALIASES[key]


SPECULATIVE_METHODS = ("draft", "ngram")
QUANTIZATIONS = ("int8", "int8-dynamic")   # reference_server.engine.quantization


@dataclass(frozen=True)
class EngineConfig:
    """What to serve and how to batch it.

    The batching strategy's own limits are one object, `limits` (that strategy's `Limits`
    dataclass from `engine_core.scheduling.strategies`); `from_flags` builds the whole
    config from flat keywords, as the CLI has them.

    Attributes:
        model: preset from `engine_core.models` (tiny, small, llama-3.1-8b, ...) or a local
            checkpoint directory (HF-style config.json + *.safetensors; never a hub id).
        device: "cpu", "cuda" or "cuda:N".
        dtype: float32 | bfloat16 | float16 (fp32/bf16/fp16 accepted, stored canonical).
        strategy: batching strategy name, one of `engine_core.scheduling.strategies.STRATEGIES`
            (default: the strategy of `limits`, else "continuous").
        limits: that strategy's limits (default: its defaults), e.g. `StaticLimits(batch_size=4)`.
        seed: seeds the random weights and the sampling of requests without their own seed.
        block_size: tokens per KV-cache block.
        kv_blocks: explicit KV block count; else `kv_memory_bytes` decides; else a default (room
            for `limits.max_running` sequences of 512 tokens, at least one of `max_model_len`).
        kv_memory_bytes: KV-cache memory budget in bytes (floor-divided into whole blocks).
        max_model_len: longest prompt + output; default the architecture's max_position_embeddings.
        inject_step_delay_ms: fault injection: every engine step that runs work busy-waits this
            long first, like extra compute. (A sleep lets the core idle, and the step after an idle
            core can run slower than the sleep's length accounts for: docs/results.md.)
        num_threads: torch CPU threads; None leaves torch's default (the server fills it in first:
            reference_server.runtime.engine_threads).
        emulate: a catalog GPU id (`servecap calc gpus`): no forward pass, each step waits the time that GPU
            would take for its batch, and the KV cache is what the engine would size on it
            (`calculators.gpu_engine`); `dtype` is then the GPU's (bf16, fp16, fp8, int8, int4).
        emulate_engine: whose sizing and defaults the emulation takes (vllm | tensorrt-llm).
        tp: tensor-parallel GPUs of the emulated replica.
        dp, expert_parallel: an emulated MoE replica's data-parallel attention ranks and whether its experts are
            whole on each GPU (calculators.moe_layout); the limits are then the replica's, dp ranks' worth.
        gpu_memory_utilization: the emulated engine's memory share (None: the engine's default).
        step_jitter_cv: emulation: a seeded per-step variation with this coefficient of variation.
        stream_interval: tokens per stream chunk after the first (vLLM's --stream-interval;
            `reference_server.runtime.stream_interval`).
        speculative_method: speculative decoding on the continuous strategy: "ngram" (prompt lookup)
            or "draft" (`speculative_model` proposes); `num_speculative_tokens` proposals a step.
        speculative_model: the draft: a preset or checkpoint sharing the target's tokenizer (emulated:
            a catalog model, whose passes the step model times).
        speculative_acceptance: emulated acceptance: one rate, or one per position as vLLM reports them
            (`scheduling.speculative.per_position_acceptance`); seeded draws decide how many proposals
            are kept instead of the target's agreement. An emulated GPU speculates only this way.
        quantization: int8 weights with a scale per output channel (`reference_server.engine.quantization`):
            "int8" weight-only, "int8-dynamic" with int8 activations too (float32 on a CPU).
        enable_lora: serve LoRA adapters on the base model (vLLM's --enable-lora), continuous strategy.
        lora_modules: (name, source) pairs: source "random", "random:RANK" (seeded pairs) or a PEFT
            directory (`reference_server.engine.lora`). A request names its adapter as its `model`.
        max_loras: adapters resident at once (slots); the others wait for one (`scheduling.lora_slots`).
        max_lora_rank: the largest rank a slot holds; an adapter above it is refused.
        role: disaggregated prefill and decode (`reference_server.engine.disaggregation`): "prefill" answers
            vLLM's router's one-token prefill calls with the KV's blocks, "decode" takes a prompt's KV from a
            prefill worker instead of computing it, "both" (default) does either. Emulated GPUs only.
        kv_transfer_gbs: the link a decode worker receives KV over, GB/s (None: the emulated GPU's interconnect).
        kv_transfer_latency_s: a fixed time added to every transfer.
        kv_hold_timeout_s: a prefill worker keeps a sent prompt's blocks until the decode worker has read
            them, or this long (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT, default 480 s in vllm/envs.py).
    """

    model: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"
    strategy: str | None = None
    limits: Limits | None = None
    seed: int = 0
    block_size: int = 16
    kv_blocks: int | None = None
    kv_memory_bytes: int | None = None
    max_model_len: int | None = None
    inject_step_delay_ms: float = 0.0
    num_threads: int | None = None
    emulate: str | None = None
    emulate_engine: str = "vllm"
    tp: int = 1
    dp: int = 1
    expert_parallel: bool = False
    gpu_memory_utilization: float | None = None
    step_jitter_cv: float = 0.0
    stream_interval: int = 1
    speculative_method: str | None = None
    num_speculative_tokens: int = 0
    prompt_lookup_max: int = 4
    prompt_lookup_min: int = 1
    speculative_model: str | None = None
    speculative_acceptance: tuple[float, ...] | None = None
    quantization: str | None = None
    enable_lora: bool = False
    lora_modules: tuple[tuple[str, str], ...] = ()
    max_loras: int = 1
    max_lora_rank: int = 16
    role: str = "both"
    kv_transfer_gbs: float | None = None
    kv_transfer_latency_s: float = 0.0
    kv_hold_timeout_s: float = 480.0

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"model must be a preset name or a checkpoint directory, got {self.model!r}")
        device = str(self.device).strip().lower()
        if not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        object.__setattr__(self, "device", device)
        if self.emulate is None:
            object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
            if (self.tp != 1 or self.dp != 1 or self.expert_parallel or self.gpu_memory_utilization is not None
                    or self.step_jitter_cv):
                raise ValueError("tp, dp, expert_parallel, gpu_memory_utilization and step_jitter_cv describe an "
                                 "emulated GPU: give emulate too")
        else:
            self._check_emulation()
        strategy, limits = resolve(self.strategy, self.limits)
        object.__setattr__(self, "strategy", strategy)
        object.__setattr__(self, "limits", limits)
        non_negative_int("seed", self.seed)
        positive_int("block_size", self.block_size)
        positive_int("stream_interval", self.stream_interval)
        for name in ("kv_blocks", "kv_memory_bytes", "max_model_len", "num_threads"):
            positive_int(name, getattr(self, name), allow_none=True)
        check_non_negative_number("inject_step_delay_ms", self.inject_step_delay_ms)
        self._check_speculation()
        self._check_quantization()
        self._check_lora()

    def _check_lora(self) -> None:
        positive_int("max_loras", self.max_loras)
        positive_int("max_lora_rank", self.max_lora_rank)
        if not self.enable_lora:
            if self.lora_modules:
                raise ValueError("lora_modules needs enable_lora")
            return
        if self.strategy != "continuous":
            raise ValueError(f"LoRA adapters are served with the continuous strategy, not {self.strategy!r}")
        if self.emulate is not None:
            raise ValueError("enable_lora: an emulated GPU runs no weights for an adapter to change")
        object.__setattr__(self, "lora_modules", tuple((str(n), str(s)) for n, s in self.lora_modules))
        names = [name for name, _ in self.lora_modules]
        for name in names:
            if not name.strip() or "=" in name:
                raise ValueError(f"lora_modules: adapter name {name!r} must be non-empty, without '='")
        duplicate = next((name for name in names if names.count(name) > 1), None)
        if duplicate is not None:
            raise ValueError(f"lora_modules: adapter name {duplicate!r} is given twice")

    def _check_disaggregation(self, strategy: str) -> None:
        from reference_server.engine.disaggregation import ROLES

        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.kv_transfer_gbs is not None and not (isinstance(self.kv_transfer_gbs, (int, float))
                                                     and self.kv_transfer_gbs > 0):
            raise ValueError(f"kv_transfer_gbs must be a positive number, got {self.kv_transfer_gbs!r}")
        check_non_negative_number("kv_transfer_latency_s", self.kv_transfer_latency_s)
        check_non_negative_number("kv_hold_timeout_s", self.kv_hold_timeout_s)
        if self.emulate is None and (self.role != "both" or self.kv_transfer_gbs is not None
                                     or self.kv_transfer_latency_s):
            raise ValueError("role, kv_transfer_gbs and kv_transfer_latency_s describe an emulated worker's KV "
                             "transfer: give emulate too (the real engine has no KV to send)")
        if self.role != "both" and strategy != "continuous":
            raise ValueError(f"a {self.role} worker batches continuously, not with {strategy!r}")

    def _check_quantization(self) -> None:
        if self.quantization is None:
            return
        if self.quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {self.quantization!r}")
        if self.emulate is not None:
            raise ValueError("quantization quantizes the real engine's weights; an emulated GPU takes its weights' "
                             "format from dtype (fp8, int8, int4)")
        if self.quantization == "int8-dynamic" and (self.dtype != "float32" or self.device != "cpu"):
            raise ValueError(f"quantization int8-dynamic runs in float32 on a CPU (torch's dynamic quantization), "
                             f"not {self.dtype} on {self.device}")

    def _check_speculation(self) -> None:
        """Speculative decoding: `ngram` (prompt lookup) or `draft`, on the continuous strategy; exact on the
        real engine, or with emulated acceptance (the only way on an emulated GPU)."""
        from engine_core.scheduling.speculative import per_position_acceptance

        if self.speculative_method is None:
            given = [name for name in ("num_speculative_tokens", "speculative_model", "speculative_acceptance")
                     if getattr(self, name)]
            if given:
                raise ValueError(f"{given[0]} needs speculative_method")
            return
        if self.speculative_method not in SPECULATIVE_METHODS:
            raise ValueError(f"speculative_method must be one of {', '.join(SPECULATIVE_METHODS)}, "
                             f"got {self.speculative_method!r}")
        positive_int("num_speculative_tokens", self.num_speculative_tokens)
        positive_int("prompt_lookup_max", self.prompt_lookup_max)
        positive_int("prompt_lookup_min", self.prompt_lookup_min)
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(f"prompt_lookup_min ({self.prompt_lookup_min}) exceeds prompt_lookup_max "
                             f"({self.prompt_lookup_max})")
        if self.speculative_method == "draft" and not self.speculative_model:
            raise ValueError("speculative_method draft needs speculative_model (the draft model)")
        if self.speculative_method == "ngram" and self.speculative_model:
            raise ValueError("speculative_model is for speculative_method draft (ngram needs no draft model)")
        if self.speculative_acceptance is not None:
            object.__setattr__(self, "speculative_acceptance", per_position_acceptance(
                self.speculative_acceptance, self.num_speculative_tokens))
        if self.strategy != "continuous":
            raise ValueError(f"speculative decoding runs with the continuous strategy, not {self.strategy!r}")
        if self.emulate is not None and self.speculative_acceptance is None:
            raise ValueError("an emulated GPU speculates with emulated acceptance only: give speculative_acceptance "
                             "(no model runs to agree with the proposals)")

    @property
    def speculation_mode(self) -> str | None:
        """exact (the target verifies every proposal), emulated-acceptance, or None (no speculation)."""
        if self.speculative_method is None:
            return None
        return "exact" if self.speculative_acceptance is None else "emulated-acceptance"

    def _check_emulation(self) -> None:
        from engine_core.dtypes import parse_dtype
        from calculators.engine_profiles import SIZED_ENGINES
        from engine_core.gpus import get_gpu

        get_gpu(self.emulate)   # ValueError names the catalog
        object.__setattr__(self, "dtype", parse_dtype(self.dtype).name)
        if self.emulate_engine not in SIZED_ENGINES:
            raise ValueError(f"emulate_engine must be one of {', '.join(SIZED_ENGINES)}, got {self.emulate_engine!r}")
        if self.device != "cpu":
            raise ValueError(f"device {self.device!r}: an emulated GPU runs no forward pass on any device")
        for name in ("kv_blocks", "kv_memory_bytes"):
            if getattr(self, name) is not None:
                raise ValueError(f"{name}: an emulated GPU sizes its KV cache as its engine would on that GPU")
        positive_int("tp", self.tp)
        positive_int("dp", self.dp)
        if self.dp != 1 or self.expert_parallel:
            from calculators.moe_layout import MoeLayout
            from engine_core.models import resolve_model

            MoeLayout(self.dp, self.expert_parallel).check(resolve_model(self.model), self.tp)
        if (self.dp != 1 or self.expert_parallel) and (self.speculative_method is not None or self.role != "both"):
            raise ValueError("dp and expert_parallel: an MoE layout is emulated for an aggregated replica without "
                             "speculative decoding")
        if self.gpu_memory_utilization is not None and not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")
        check_non_negative_number("step_jitter_cv", self.step_jitter_cv)

    @property
    def emulated(self) -> bool:
        return self.emulate is not None

    @classmethod
    def from_flags(cls, *, strategy: str | None = None, **flags) -> EngineConfig:
        """Engine fields and any registered strategy's limit fields as flat keywords, e.g.
        `from_flags(model="tiny", strategy="static", batch_size=4, max_num_seqs=8)` (the limits
        of other strategies are validated, then ignored: see `limits_from_flags`)."""
        own = {f.name for f in fields(cls)} - {"strategy", "limits"}
        strategy_name, _ = resolve(strategy, None)
        limits = limits_from_flags(strategy_name, {k: v for k, v in flags.items() if k not in own})
        return cls(strategy=strategy_name, limits=limits, **{k: v for k, v in flags.items() if k in own})

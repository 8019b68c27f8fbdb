"""Engine configuration: one frozen dataclass, validated on construction.

Runtime-derived values (the KV block count that a memory budget buys, the resolved
architecture) live in the engine, not here: this object is only what the user asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def _positive_int(field_name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{field_name} must be a positive integer, got {value!r}")


def _non_negative_number(field_name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{field_name} must be a non-negative number, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    """What to serve and how to batch it.

    Attributes:
        model: preset from `calculators.models` (tiny, small, llama-3.1-8b, ...) or a local
            checkpoint directory (HF-style config.json + *.safetensors; never a hub id).
        device: "cpu", "cuda" or "cuda:N".
        dtype: float32 | bfloat16 | float16 (fp32/bf16/fp16 accepted, stored canonical).
        strategy: batching strategy name, one of `reference_server.scheduling.strategies.STRATEGIES`.
        seed: seeds the random weights and the sampling of requests without their own seed.
        block_size: tokens per KV-cache block.
        kv_blocks: explicit KV block count; else `kv_memory_bytes` decides; else a default
            (room for `max_num_seqs` sequences of 512 tokens, at least one of `max_model_len`).
        kv_memory_bytes: KV-cache memory budget in bytes (floor-divided into whole blocks).
        max_model_len: longest prompt + output; default the architecture's max_position_embeddings.
        max_num_seqs: continuous: most sequences running at once.
        max_num_batched_tokens: continuous: token budget per step (chunked prefill).
        batch_size, batch_timeout_ms: static: launch at batch_size queued or when the oldest
            has waited batch_timeout_ms.
        max_batch_size, preferred_batch_sizes, max_queue_delay_us: dynamic (Triton semantics).
        inject_step_delay_ms: fault injection: every engine step that runs work busy-waits this
            long first, like extra compute. (A sleep lets the core idle, and on this VM the step
            after it ran slower: 0.49 ms of sleep raised p50 TPOT by 1.4 ms, not 0.5.)
        num_threads: torch CPU threads; None leaves torch's default.
    """

    model: str = "tiny"
    device: str = "cpu"
    dtype: str = "float32"
    strategy: str = "continuous"
    seed: int = 0
    block_size: int = 16
    kv_blocks: int | None = None
    kv_memory_bytes: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 2048
    batch_size: int = 8
    batch_timeout_ms: float = 50.0
    max_batch_size: int = 8
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 1000
    inject_step_delay_ms: float = 0.0
    num_threads: int | None = None

    def __post_init__(self) -> None:
        from reference_server.scheduling.strategies import STRATEGIES  # no torch there

        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError(f"model must be a preset name or a checkpoint directory, got {self.model!r}")
        device = str(self.device).strip().lower()
        if not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {self.device!r}")
        object.__setattr__(self, "device", device)
        object.__setattr__(self, "dtype", normalize_dtype(self.dtype))
        strategy = str(self.strategy).strip().lower()
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        object.__setattr__(self, "strategy", strategy)
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("block_size", "max_num_seqs", "max_num_batched_tokens", "batch_size", "max_batch_size"):
            _positive_int(name, getattr(self, name))
        for name in ("kv_blocks", "kv_memory_bytes", "max_model_len", "num_threads"):
            _positive_int(name, getattr(self, name), allow_none=True)
        for name in ("batch_timeout_ms", "inject_step_delay_ms"):
            _non_negative_number(name, getattr(self, name))
        if isinstance(self.max_queue_delay_us, bool) or not isinstance(self.max_queue_delay_us, int) \
                or self.max_queue_delay_us < 0:
            raise ValueError(f"max_queue_delay_us must be a non-negative integer, got {self.max_queue_delay_us!r}")
        sizes = tuple(self.preferred_batch_sizes)
        for size in sizes:
            _positive_int("preferred_batch_sizes", size)
            if size > self.max_batch_size:
                raise ValueError(
                    f"preferred_batch_sizes entry {size} exceeds max_batch_size ({self.max_batch_size})"
                )
        object.__setattr__(self, "preferred_batch_sizes", tuple(sorted(set(sizes))))

    @property
    def max_queue_delay_s(self) -> float:
        return self.max_queue_delay_us / 1e6

    @property
    def batch_timeout_s(self) -> float:
        return self.batch_timeout_ms / 1e3

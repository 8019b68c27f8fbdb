"""The embedding model's settings (`--embedding-*`): torch-free, like the classifier's."""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.classifier.batching_settings import check_batching


@dataclass(frozen=True)
class EmbeddingConfig:
    """A seeded byte-level text encoder and its Triton-style dynamic batcher (counted in inputs).

    Attributes:
        enabled: serve it at POST /v1/embeddings at all.
        name: the `model` a request names.
        dim: the embedding's width.
        layers, heads: the encoder's transformer layers and attention heads.
        max_input_tokens: the longest input (bytes); a longer one gets 400.
        seed: weight-initialisation seed.
        max_batch_size: most inputs per forward pass; a request may carry at most this many.
        preferred_batch_sizes, max_queue_delay_us, dynamic_batching, instances, max_waiting: as the classifier's.
    """

    enabled: bool = True
    name: str = "servecap-embed"
    dim: int = 128
    layers: int = 2
    heads: int = 4
    max_input_tokens: int = 512
    seed: int = 0
    max_batch_size: int = 32
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 2000
    dynamic_batching: bool = True
    instances: int = 1
    max_waiting: int | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError(f"embedding name must be non-empty, got {self.name!r}")
        for field_name in ("dim", "layers", "heads", "max_input_tokens"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"embedding {field_name} must be a positive integer, got {value!r}")
        if self.dim % self.heads:
            raise ValueError(f"embedding dim {self.dim} must be a multiple of its heads {self.heads}")
        object.__setattr__(self, "preferred_batch_sizes", check_batching(self, "embedding"))

    @property
    def max_queue_delay_s(self) -> float:
        return self.max_queue_delay_us / 1e6

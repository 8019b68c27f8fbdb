"""The classifier's settings (`--classifier-*`): torch-free, so the serving process that reads them
imports torch only when it serves the classifier (`model.TabularClassifier`)."""

from __future__ import annotations

from dataclasses import dataclass

from reference_server.classifier.batching_settings import check_batching


@dataclass(frozen=True)
class ClassifierConfig:
    """The classifier and its Triton-style dynamic batcher.

    Attributes:
        enabled: serve it at /v2/models/{name} at all.
        name: the model name in the KServe routes.
        num_features: F, the width of one input row.
        num_classes: C, the number of output probabilities per row.
        hidden_size: H, the MLP's hidden width.
        seed: weight-initialisation seed.
        max_batch_size: most rows per forward pass; a request may carry at most this many rows.
        preferred_batch_sizes: batch sizes (rows) launched as soon as reachable.
        max_queue_delay_us: longest a request waits for its batch to fill.
        max_waiting: requests queued for a batch before 429; None = no limit.
        dynamic_batching: False runs each request alone (Triton's model without `dynamic_batching`).
        instances: model instances serving the queue in parallel (Triton's instance_group count).
    """

    enabled: bool = True
    name: str = "tabular-mlp"
    num_features: int = 16
    num_classes: int = 4
    hidden_size: int = 64
    seed: int = 0
    max_batch_size: int = 32
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 2000
    max_waiting: int | None = None
    dynamic_batching: bool = True
    instances: int = 1

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"classifier name must be non-empty without '/', got {self.name!r}")
        for field_name in ("num_features", "num_classes", "hidden_size"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"classifier {field_name} must be a positive integer, got {value!r}")
        if self.num_classes < 2:
            raise ValueError(f"classifier num_classes must be at least 2, got {self.num_classes!r}")
        object.__setattr__(self, "preferred_batch_sizes", check_batching(self, "classifier"))

    @property
    def max_queue_delay_s(self) -> float:
        return self.max_queue_delay_us / 1e6

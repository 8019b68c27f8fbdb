"""The Triton-style batcher's settings, declared and checked once for every classic model that has them
(the classifier, the embedding model): torch-free.

`servecap serve` adds `BatcherOptions` once per model with its prefix (`--classifier-max-batch-size`,
`--embedding-max-batch-size`, ...: contract.options), and each model's config takes `config_fields()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.options import option, options_from_args, parse_int


def parse_batch_sizes(value: Any, flag: str) -> tuple[int, ...]:
    """'8,16' -> (8, 16); '' -> (); ValueError naming the flag."""
    if isinstance(value, (tuple, list)):
        return tuple(int(size) for size in value)
    try:
        return tuple(int(part) for part in str(value).split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated integers like 4,8, got {value!r}") from None


@dataclass(frozen=True)
class BatcherOptions:
    """A classic model's dynamic batcher as its options (Triton's `dynamic_batching` and `instance_group`);
    the items it batches are the classifier's rows or the embedding model's inputs."""

    max_batch_size: int = option(32, parse=parse_int,
                                 help="most items (rows, inputs) per forward pass; a request carries at most this "
                                      "many (default 32)")
    preferred_batch_sizes: tuple[int, ...] = option((), parse=parse_batch_sizes, text="",
                                                    help="batch sizes launched as soon as reachable, e.g. 8,16")
    max_queue_delay_us: int = option(2000, parse=parse_int,
                                     help="longest a request waits for its batch to fill, µs (default 2000)")
    max_waiting: int | None = option(None, parse=parse_int, help="queued requests before 429 (default: no limit)")
    batching: str = option("on", choices=("on", "off"),
                           help="off: every request runs alone (Triton's model without a dynamic batcher)")
    instances: int = option(1, parse=parse_int,
                            help="model instances serving the queue in parallel (Triton's instance_group count)")

    @classmethod
    def from_args(cls, args: Any, prefix: str) -> "BatcherOptions":
        return cls(**options_from_args(cls, args, prefix=prefix))

    def config_fields(self) -> dict[str, Any]:
        """The fields of a classic model's config (ClassifierConfig, EmbeddingConfig) these set."""
        return {"max_batch_size": self.max_batch_size, "preferred_batch_sizes": self.preferred_batch_sizes,
                "max_queue_delay_us": self.max_queue_delay_us, "max_waiting": self.max_waiting,
                "dynamic_batching": self.batching == "on", "instances": self.instances}


def check_batching(config, kind: str) -> tuple[int, ...]:
    """ValueError naming `kind`'s bad setting; returns its preferred batch sizes, sorted and distinct.
    `config` has max_batch_size, instances, preferred_batch_sizes, max_queue_delay_us and max_waiting."""
    for field_name in ("max_batch_size", "instances"):
        value = getattr(config, field_name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{kind} {field_name} must be a positive integer, got {value!r}")
    sizes = tuple(config.preferred_batch_sizes)
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= config.max_batch_size:
            raise ValueError(f"{kind} preferred_batch_sizes must be in [1, max_batch_size={config.max_batch_size}], "
                             f"got {size!r}")
    if config.max_queue_delay_us < 0:
        raise ValueError(f"{kind} max_queue_delay_us must be >= 0, got {config.max_queue_delay_us!r}")
    if config.max_waiting is not None and config.max_waiting < 0:
        raise ValueError(f"{kind} max_waiting must be >= 0, got {config.max_waiting!r}")
    return tuple(sorted(set(sizes)))

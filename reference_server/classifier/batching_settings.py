"""The Triton-style batcher's settings, checked once for every classic model that has them (the
classifier, the embedding model): torch-free."""

from __future__ import annotations


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

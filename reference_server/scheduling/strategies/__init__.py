"""Batching strategies by name. A fifth strategy is one new file plus one line here."""

from __future__ import annotations

from reference_server.scheduling.strategies.base import ScheduledBatch, Scheduler
from reference_server.scheduling.strategies.continuous import ContinuousBatchScheduler
from reference_server.scheduling.strategies.dynamic import DynamicBatchScheduler, dynamic_batch_size
from reference_server.scheduling.strategies.none import NoBatchingScheduler
from reference_server.scheduling.strategies.static import StaticBatchScheduler

STRATEGIES: dict[str, type[Scheduler]] = {
    "none": NoBatchingScheduler,
    "static": StaticBatchScheduler,
    "dynamic": DynamicBatchScheduler,
    "continuous": ContinuousBatchScheduler,
}


def make_scheduler(config, block_manager) -> Scheduler:
    """The scheduler class registered under `config.strategy`."""
    return STRATEGIES[config.strategy](config, block_manager)


__all__ = ["STRATEGIES", "ScheduledBatch", "Scheduler", "dynamic_batch_size", "make_scheduler"]

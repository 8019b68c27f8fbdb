"""A batch-service queue: the dynamic-batching server (Triton's dynamic batcher, zero queue delay).

The server takes everything waiting (up to ``max_batch_size``) whenever it becomes free and
serves the batch in T(k) = base_s + per_item_s x k. Under load every batch gathers the arrivals
of the previous one, so the steady batch size k solves k = lambda x T(k):
    k = max(1, lambda base_s / (1 - lambda per_item_s))
    stable   iff lambda < K / T(K)  (K = max_batch_size): the largest batch must clear its arrivals
    rho_b    = min(1, lambda T(k) / k): chance an arrival finds the server busy
    latency  = T(k) + rho_b x T(k) / 2          (residual of the running batch, then its own batch)
    p99      = T(k) + T(k) x (1 - 0.01 / rho_b) when rho_b > 0.01 (residual uniform on [0, T])
A fixed-point approximation in the spirit of bulk-service queues (Bailey 1954; Neuts 1967);
it ignores backlog beyond one batch, so it is optimistic within ~10% of the stability limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from calculators.queueing import littles_law


@dataclass(frozen=True)
class BatchQueueResult:
    """``--json`` keys are these field names. Times in seconds."""

    model: str
    arrival_rate: float
    base_s: float
    per_item_s: float
    max_batch_size: int
    max_stable_rate: float
    mean_batch_size: float
    batch_time_s: float
    utilization: float
    mean_response_s: float
    response_p99_s: float
    mean_in_system: float


def batch_queue(arrival_rate: float, base_s: float, per_item_s: float, max_batch_size: int) -> BatchQueueResult:
    """Steady state of the greedy batch server described in the module docstring."""
    if not isinstance(arrival_rate, (int, float)) or not arrival_rate > 0:
        raise ValueError(f"arrival_rate must be positive, got {arrival_rate!r}")
    if not isinstance(base_s, (int, float)) or base_s < 0:
        raise ValueError(f"base_s must be >= 0, got {base_s!r}")
    if not isinstance(per_item_s, (int, float)) or per_item_s < 0 or base_s + per_item_s <= 0:
        raise ValueError(f"per_item_s must be >= 0 and base_s + per_item_s > 0, got {per_item_s!r}")
    if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size <= 0:
        raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
    max_rate = max_batch_size / (base_s + per_item_s * max_batch_size)
    if arrival_rate >= max_rate:
        raise ValueError(f"unstable batch queue: arrival_rate {arrival_rate:g} must be below "
                         f"max_batch_size / T(max_batch_size) = {max_rate:g}")
    if arrival_rate * per_item_s >= 1:
        raise ValueError(f"unstable batch queue: arrival_rate x per_item_s = {arrival_rate * per_item_s:g} >= 1")
    k = min(float(max_batch_size), max(1.0, arrival_rate * base_s / (1 - arrival_rate * per_item_s)))
    batch_time = base_s + per_item_s * k
    busy = min(1.0, arrival_rate * batch_time / k)
    mean = batch_time + busy * batch_time / 2
    p99 = batch_time + (batch_time * (1 - 0.01 / busy) if busy > 0.01 else 0.0)
    return BatchQueueResult(
        model="batch", arrival_rate=arrival_rate, base_s=base_s, per_item_s=per_item_s,
        max_batch_size=max_batch_size, max_stable_rate=max_rate, mean_batch_size=k, batch_time_s=batch_time,
        utilization=busy, mean_response_s=mean, response_p99_s=p99,
        mean_in_system=littles_law(arrival_rate=arrival_rate, mean_time_s=mean),
    )

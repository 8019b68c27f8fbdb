"""Decode length buckets: the cut is the cheapest partition; the plan covers the step's rows once."""

from __future__ import annotations

import itertools

import pytest
import torch

from reference_server.engine.attention import AttentionPlanner, bucket_bounds, overhead_tokens_for


def cost(contexts, bounds, overhead):
    return sum((hi - lo) * contexts[hi - 1] + overhead for lo, hi in bounds)


def every_cut(n):
    """All partitions of range(n) into consecutive runs, as (start, stop) lists."""
    for mask in itertools.product((False, True), repeat=n - 1):
        cuts = [0] + [i + 1 for i, cut in enumerate(mask) if cut] + [n]
        yield list(zip(cuts, cuts[1:]))


@pytest.mark.parametrize("contexts", [[5], [3, 3, 3], [1, 2, 50, 51, 52], [10, 11, 12, 200, 210, 400],
                                      [4, 40, 41, 42, 90, 91, 300]])
@pytest.mark.parametrize("overhead", [0.0, 16.0, 64.0, 1000.0])
def test_bucket_cut_is_the_cheapest_partition(contexts, overhead):
    bounds = bucket_bounds(contexts, overhead)
    assert bounds[0][0] == 0 and bounds[-1][1] == len(contexts)
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))                 # consecutive, no gaps
    best = min(cost(contexts, cut, overhead) for cut in every_cut(len(contexts)))
    assert cost(contexts, bounds, overhead) == pytest.approx(best)


def test_bucket_extremes():
    assert bucket_bounds([], 10.0) == []
    assert bucket_bounds([7, 7, 7, 7], 0.0) == [(0, 4)]                           # equal lengths: no reason to cut
    assert bucket_bounds([1, 2, 3], 0.0) == [(0, 1), (1, 2), (2, 3)]              # free calls: one per length
    assert bucket_bounds([1, 2, 300], float("inf")) == [(0, 3)]                   # one rectangle


def test_overhead_is_bytes_per_key_token():
    # small: 4 KV heads x 64 dims x 4 bytes, K and V: 2 KiB per token and layer
    assert overhead_tokens_for(4, 64, 4) == 16.0
    assert overhead_tokens_for(2, 16, 4) == 128.0


def test_plan_masks_only_unequal_buckets_and_causal_prefixes():
    planner = AttentionPlanner(4, torch.device("cpu"), torch.float32, overhead_tokens=0.0, kv_token_elements=8)
    tables = [[0, 1], [2, 3], [4, 5], [6, 7, 8]]
    # decodes at contexts 5, 5, 8 (starts 4, 4, 7), then a 3-token chunk after 6 cached tokens
    plan = planner.plan(tables, [4, 4, 7, 6], [1, 1, 1, 3], num_decodes=3)
    assert [(c.start, c.stop, c.decode) for c in plan.calls] == [(0, 2, True), (2, 3, True), (3, 6, False)]
    equal, single, chunk = plan.calls
    assert equal.mask is None and single.mask is None                             # no padding, no mask
    assert equal.key_slots.tolist() == [0, 1, 2, 3, 4, 8, 9, 10, 11, 12]
    assert chunk.key_len == 9 and chunk.mask.shape == (3, 9)
    assert chunk.mask.sum(dim=1).tolist() == [7, 8, 9]                            # query i sees keys 0..6+i
    assert plan.slot_mapping.tolist() == [4, 12, 23, 30, 31, 32]                  # the new tokens' slots
    assert plan.workspace.numel() >= 10 * 8                                       # the largest call: 2 x 5 keys
    one_rectangle = AttentionPlanner(4, torch.device("cpu"), torch.float32, float("inf")).plan(
        tables[:3], [4, 4, 7], [1, 1, 1], num_decodes=3)
    (rectangle,) = one_rectangle.calls
    assert rectangle.key_len == 8 and rectangle.mask.shape == (1, 3, 1, 8)
    assert torch.isinf(rectangle.mask[0, :2, 0, 5:]).all() and (rectangle.mask[0, 2] == 0).all()

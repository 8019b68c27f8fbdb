"""The router's policies on small hand-checked cases: what each picks, and what it remembers."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from calculators.plan.router import ROUTER_POLICIES, ReplicaView, make_router


def views(*loads: int, start: int = 0) -> list[ReplicaView]:
    return [ReplicaView(start + i, load) for i, load in enumerate(loads)]


def test_policies_and_bad_input():
    assert set(ROUTER_POLICIES) == {"round_robin", "random", "power_of_two", "least_load", "consistent_hash",
                                    "cache_aware", "sticky_least_loaded"}
    for policy in ROUTER_POLICIES:
        router = make_router(policy, seed=3)
        assert router.policy == policy
        assert router.choose(0.0, 7, (1, 2), views(0, 0, 0)) in (0, 1, 2)
        router.finished(0, (1, 2))
        router.removed(0)
    with pytest.raises(ValueError, match="unknown router policy 'least_loaded'.*round_robin.*cache_aware"):
        make_router("least_loaded")
    with pytest.raises(ValueError, match="unknown option 'cache_threshold'.*none"):
        make_router("round_robin", cache_threshold=0.5)
    with pytest.raises(ValueError, match="cache_threshold must be in \\[0, 1\\], got 1.5"):
        make_router("cache_aware", cache_threshold=1.5)
    with pytest.raises(ValueError, match="balance_abs_threshold must be a finite number"):
        make_router("cache_aware", balance_abs_threshold="64")
    with pytest.raises(ValueError, match="virtual_nodes must be an integer"):
        make_router("consistent_hash", virtual_nodes=1.5)
    with pytest.raises(ValueError, match="unkeyed must be 'one', 'random' or 'prefix'"):
        make_router("consistent_hash", unkeyed="first")
    with pytest.raises(ValueError) as caught:
        make_router("cache_aware", eviction_interval_s=0)
    assert "\n" not in str(caught.value) and "eviction_interval_s must be > 0 seconds" in str(caught.value)


def test_reads_load_says_which_policies_read_in_flight():
    reads = {policy for policy in ROUTER_POLICIES if make_router(policy).reads_load}
    assert reads == {"power_of_two", "least_load", "cache_aware"}


def test_round_robin_cycles_in_order_and_skips_removed_replicas():
    router = make_router("round_robin")
    fleet = views(0, 0, 0)
    assert [router.choose(t, None, (), fleet) for t in range(6)] == [0, 1, 2, 0, 1, 2]
    router.removed(1)
    fleet = [fleet[0], fleet[2]]   # the counter is at 6: 6 % 2 = 0
    assert [router.choose(t, None, (), fleet) for t in range(4)] == [0, 2, 0, 2]
    fleet = fleet + [ReplicaView(5, 0)]   # a new replica joins at the end: counter 10 % 3 = 1
    assert [router.choose(t, None, (), fleet) for t in range(3)] == [2, 5, 0]


def test_random_is_seeded_uniform_and_stays_in_the_fleet():
    fleet = views(0, 0, 0, 0, start=10)
    router_a, router_b = make_router("random", seed=5), make_router("random", seed=5)
    a = [router_a.choose(t, None, (), fleet) for t in range(4000)]
    assert a == [router_b.choose(t, None, (), fleet) for t in range(4000)]
    counts = Counter(a)
    assert set(counts) == {10, 11, 12, 13} and all(900 < c < 1100 for c in counts.values())   # 1000 +- 4.5 sd
    assert a != [make_router("random", seed=6).choose(t, None, (), fleet) for t in range(4000)]


def test_power_of_two_picks_the_less_loaded_of_two():
    router = make_router("power_of_two", seed=1)
    assert {router.choose(t, None, (), views(5, 0)) for t in range(50)} == {1}
    assert {router.choose(t, None, (), views(0, 5)) for t in range(50)} == {0}
    assert router.choose(0, None, (), views(9)) == 0
    # three replicas loaded 10, 5, 0: every pair loses its busier one, so 0 never wins, 2 wins the two
    # pairs it is in (2/3 of draws) and 1 the pair (0, 1) (1/3)
    counts = Counter(router.choose(t, None, (), views(10, 5, 0)) for t in range(3000))
    assert counts[0] == 0 and 1850 < counts[2] < 2150 and 850 < counts[1] < 1150
    # equal loads: the first drawn wins, so draws spread over all
    assert set(Counter(router.choose(t, None, (), views(3, 3, 3)) for t in range(300))) == {0, 1, 2}


def test_least_load_takes_the_fewest_in_flight_first_of_equals():
    router = make_router("least_load")
    assert router.choose(0, None, (), views(4, 2, 7, 2)) == 1
    assert router.choose(0, None, (), views(0, 0, 0, start=3)) == 3


def test_consistent_hash_one_key_one_replica_and_removal_moves_only_its_keys():
    router = make_router("consistent_hash", seed=2)
    fleet = views(0, 0, 0, 0)
    keys = range(20000)
    before = {key: router.choose(0, key, (), fleet) for key in keys}
    assert all(router.choose(1, key, (9,), fleet) == before[key] for key in range(0, 20000, 97))   # sticky
    share = Counter(before.values())
    assert set(share) == {0, 1, 2, 3} and all(0.18 < n / len(keys) < 0.32 for n in share.values())  # 160 vnodes
    router.removed(2)
    after = {key: router.choose(2, key, (), [v for v in fleet if v.index != 2]) for key in keys}
    moved = [key for key in keys if after[key] != before[key]]
    assert {before[key] for key in moved} == {2}            # only the removed replica's keys move
    assert len(moved) == share[2] and 0.18 < len(moved) / len(keys) < 0.32   # about 1/N
    assert Counter(after[key] for key in moved).keys() == {0, 1, 3}   # spread over the rest
    # a replica joining takes about 1/(N+1) of the keys, from every other replica
    joined = [v for v in fleet if v.index != 2] + [ReplicaView(7, 0)]
    again = {key: router.choose(3, key, (), joined) for key in keys}
    taken = [key for key in keys if again[key] != after[key]]
    assert all(again[key] == 7 for key in taken) and 0.15 < len(taken) / len(keys) < 0.35


def test_consistent_hash_without_a_key():
    fleet = views(0, 0, 0)
    one = make_router("consistent_hash", seed=4)   # vllm-router 0.1.17: every keyless request to one worker
    assert len({one.choose(t, None, (t,), fleet) for t in range(50)}) == 1
    assert {make_router("consistent_hash", seed=s).choose(0, None, (), fleet) for s in range(20)} == {0, 1, 2}
    spread = make_router("consistent_hash", seed=4, unkeyed="random")
    assert len(Counter(spread.choose(t, None, (1, 2), fleet) for t in range(300))) == 3   # distinct texts
    by_prefix = make_router("consistent_hash", seed=4, unkeyed="prefix")
    assert len({by_prefix.choose(t, None, (1, 2), fleet) for t in range(50)}) == 1   # equal texts together


def test_cache_aware_sends_a_repeated_prefix_back_to_the_replica_that_has_it():
    router = make_router("cache_aware", eviction_interval_s=1e9)
    fleet = views(0, 0, 0)
    assert router.choose(0, None, (1, 2, 3, 4), fleet) == 0                    # no match: least loaded, first
    assert router.choose(1, None, (7, 8, 9, 10), views(1, 0, 0)) == 1          # no match: least loaded
    # replica 0 now the busiest, still balanced (|3 - 0| <= 64): the prefix wins
    assert router.choose(2, None, (1, 2, 3, 4), views(3, 1, 0)) == 0
    assert router.choose(3, None, (7, 8, 9, 10, 11, 12), views(3, 1, 0)) == 1  # 4 of 6 blocks > 0.3
    assert router.choose(4, None, (1, 2, 5, 6, 7, 8), views(3, 1, 0)) == 0     # 2 of 6 = 0.33 > 0.3
    assert router.choose(5, None, (1, 9, 9, 9, 9, 9), views(3, 1, 0)) == 2     # 1 of 6 = 0.17: least loaded
    assert router.choose(6, None, (1, 2, 3), views(3, 1, 0), blocks=20) == 2   # 3 of 20 own blocks: least loaded
    assert router.decisions == {"load_balance": 0, "cache_hit": 3, "low_match": 4, "stale": 0}


def test_cache_aware_falls_back_to_the_least_loaded_past_both_thresholds():
    router = make_router("cache_aware", eviction_interval_s=1e9)
    prefix = tuple(range(8))
    assert router.choose(0, None, prefix, views(0, 0, 0)) == 0
    # 0 holds the prefix. Imbalanced only when max - min > 64 AND max > 1.5 * min:
    assert router.choose(1, None, prefix, views(65, 1, 2)) == 0      # 64 apart: not past the absolute one
    assert router.choose(2, None, prefix, views(100, 70, 80)) == 0   # 30 apart: balanced
    assert router.choose(3, None, prefix, views(200, 140, 135)) == 0  # 65 apart but 200 < 1.5 * 135
    assert router.choose(4, None, prefix, views(66, 1, 1)) == 1      # 65 apart, 66 > 1.5: least loaded
    assert router.decisions["load_balance"] == 1
    # that request was still learnt for 1: both now hold the prefix; the first marked (0) is taken
    assert router.choose(5, None, prefix, views(0, 0, 0)) == 0
    router.removed(0)
    assert router.choose(6, None, prefix, views(5, 0, start=1)) == 1   # 1's copy is found
    assert router.tree_blocks(0) == 0 and router.tree_blocks(1) == 8


def test_cache_aware_sends_a_prompt_where_the_first_with_its_leading_text_went():
    # vllm-router's tree walks characters: past the shared prefix, a prompt's own text walks into the leaf
    # of an earlier prompt that began with the same letters and takes that leaf's replica (tree.rs)
    router = make_router("cache_aware", eviction_interval_s=1e9)
    prefix, blocks = (1, 2, 3, 4), 5                 # four shared blocks and one of its own: 0.8 > 0.3
    assert router.choose(0, None, prefix, views(0, 0), blocks, lead="ab") == 0          # new: least loaded
    assert router.choose(1, None, prefix, views(66, 1), blocks, lead="cd") == 1         # the load check
    assert router.choose(2, None, prefix, views(0, 0), blocks, lead="cx") == 1          # "c" went to 1
    assert router.choose(3, None, prefix, views(0, 0), blocks, lead="zz") == 0          # no lead: the node's
    assert router.choose(4, None, prefix, views(0, 0), blocks, lead="abba") == 0        # first replica
    assert router.choose(5, None, prefix, views(66, 1), blocks, lead="cxy") == 1        # (the load check)
    assert router.choose(6, None, prefix, views(0, 66), blocks, lead="ab") == 0         # and back
    assert router.choose(7, None, prefix, views(66, 1), blocks, lead="abq") == 1        # load check: "abq"
    assert router.choose(8, None, prefix, views(0, 0), blocks, lead="abqr") == 1        # is 1's, "ab" 0's
    assert router.choose(9, None, prefix, views(0, 0), blocks, lead="abz") == 0
    assert router.decisions == {"load_balance": 4, "cache_hit": 5, "low_match": 1, "stale": 0}
    router.removed(1)                                # a lead whose replica left: the next that sent it, else
    assert router.choose(10, None, prefix, views(0, start=0), blocks, lead="cd") == 0   # the node's rule


def test_cache_aware_tree_splits_shares_and_evicts_least_recently_used():
    # a budget of 10 blocks per replica (block_chars 1, max_tree_size 10), checked every 60 s
    router = make_router("cache_aware", max_tree_size=10, block_chars=1, eviction_interval_s=60)
    one = views(0)
    router.choose(0, None, (1, 2, 3, 4), one)
    router.choose(1, None, (1, 2, 5, 6), one)          # splits (1, 2, 3, 4) at 2: 6 blocks marked
    assert router.tree_blocks(0) == 6
    router.choose(2, None, (7, 8, 9), one, blocks=5)   # 3 blocks and 2 of its own: 11
    router.choose(3, None, (1, 2, 5, 6), one)          # touches (1, 2) and (5, 6) again
    assert router.tree_blocks(0) == 11
    router.choose(61, None, (), one)                   # eviction at 60 s: the oldest leaf (3, 4) goes
    assert router.tree_blocks(0) == 9
    walked = router.match((1, 2, 3, 4))
    assert walked[0] == 2                              # only (1, 2) is left of that prefix
    assert router.match((1, 2, 5, 6))[0] == 4 and router.match((7, 8, 9))[0] == 3


def test_cache_aware_eviction_takes_own_blocks_and_nodes_oldest_first():
    router = make_router("cache_aware", max_tree_size=4, block_chars=1, eviction_interval_s=10)
    one = views(0)
    router.choose(0, None, (1, 2), one, blocks=5)      # 2 blocks + 3 of its own at t=0
    router.choose(1, None, (3, 4), one)                # 2 blocks at t=1
    router.choose(2, None, (5, 6), one)                # 2 blocks at t=2: 9 in all
    router.choose(10, None, (), one)
    # 9 blocks, 5 over: oldest first, and of equal times the request's own blocks (its leaf) before its
    # path: the 3 own blocks of t=0, then (1, 2): 9 - 3 - 2 = 4
    assert router.tree_blocks(0) == 4
    assert router.match((1, 2))[0] == 0 and router.match((3, 4))[0] == 2 and router.match((5, 6))[0] == 2


def test_sticky_least_loaded_keeps_sessions_and_balances_new_ones():
    router = make_router("sticky_least_loaded", seed=1, session_ttl_s=100, sweep_interval_s=10)
    fleet = views(50, 0, 0)   # in-flight counts are not its load
    first = [router.choose(0, key, (), fleet) for key in range(3)]
    assert sorted(first) == [0, 1, 2]                                  # one new session each
    assert [router.choose(5, key, (), fleet) for key in range(3)] == first   # sticky
    assert all(router.active_sessions(i) == 1 for i in range(3))
    router.removed(first[0])                                           # session 0's replica goes
    rest = [v for v in fleet if v.index != first[0]]
    moved = router.choose(6, 0, (), rest)
    assert moved in {v.index for v in rest} and router.active_sessions(moved) == 2
    assert router.choose(104, 9, (), rest) != moved                   # 1 session vs 2: the other one
    # a sweep at 104 (none expired: 99 s idle at most); the next at 114 expires sessions idle 100 s:
    # 1 and 2 (last at 5) and 0 (last at 6), not 9
    router.choose(114, 10, (), rest)
    assert sum(router.active_sessions(v.index) for v in rest) == 2    # only 9 and 10 are left


def test_sticky_least_loaded_sends_every_keyless_request_to_one_tied_replica():
    # vllm-router 0.1.17 hashes no text for a chat request: every keyless one breaks the tie alike
    fleet = views(0, 0, 0)
    router = make_router("sticky_least_loaded", seed=3)
    assert len({router.choose(t, None, (t,), fleet) for t in range(40)}) == 1
    assert all(router.active_sessions(i) == 0 for i in range(3))   # not recorded
    assert {make_router("sticky_least_loaded", seed=s).choose(0, None, (), fleet) for s in range(20)} == {0, 1, 2}
    keyed = make_router("sticky_least_loaded", seed=3)
    keyed.choose(0, 1, (), fleet)
    assert keyed.choose(1, None, (), fleet) != keyed.choose(0, 1, (), fleet)   # among the fewest-session ones


def test_removed_replica_is_never_chosen_again():
    for policy in ROUTER_POLICIES:
        router = make_router(policy, seed=9)
        fleet = views(0, 1, 2, 3)
        for t in range(40):
            router.choose(t, t % 5, (t % 3, 1), fleet)
        router.removed(2)
        rest = [v for v in fleet if v.index != 2]
        assert all(router.choose(40 + t, t % 5, (t % 3, 1), rest) != 2 for t in range(100)), policy


def test_per_call_time():
    """Each policy within its budget per call over 32 replicas (generous bounds: a loaded machine
    is slower; the report prints the figures)."""
    fleet = views(*[i % 7 for i in range(32)])
    prefixes = [tuple(range(s * 1000, s * 1000 + 16)) + tuple(range(10 ** 6 + 8 * k, 10 ** 6 + 8 * k + 8))
                for k, s in enumerate([k % 200 for k in range(4000)])]
    budget = {"cache_aware": 200e-6}
    for policy in ROUTER_POLICIES:
        router = make_router(policy, seed=1, **({"eviction_interval_s": 5.0} if policy == "cache_aware" else {}))
        start = time.perf_counter()
        for k, prefix in enumerate(prefixes):
            router.choose(k * 0.01, k % 300, prefix, fleet, blocks=40)
        per_call = (time.perf_counter() - start) / len(prefixes)
        assert per_call < budget.get(policy, 50e-6), (policy, per_call)

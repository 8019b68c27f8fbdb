"""The request router in front of the fleet: vLLM's router (`vllm-router`, PyPI 0.1.17) policies, simulated.

    router = make_router("cache_aware", seed=1)
    index = router.choose(t, key, prefix, [ReplicaView(0, 3), ReplicaView(2, 1)])
    index = router.choose(t, key, prefix, views, blocks=12)   # the prompt's length in blocks (cache_aware)
    router.finished(index, prefix)    # a request it sent ended
    router.removed(index)             # a replica left the fleet

Each policy is modelled on what vllm-router's own policy sees when it picks a worker (its source,
github.com/vllm-project/router, `src/policies/*.rs`, and the 0.1.17 wheel's `router_args.py`, which
holds the CLI's defaults), so that `servecap plan` and `servecap fleet` (the real router) route alike:
- a worker's load is the router's own count of the requests it sent there that have not finished
  (`Worker::load()`, raised when a request goes out and lowered when it ends): here
  `ReplicaView.in_flight`, which the fleet loop keeps;
- the request's session key is what vllm-router reads from the `x-session-id` header (then
  `x-user-id`, `x-tenant-id`, ..., then the body's `user`/`session_id`): here `key`;
- the request's text, which `cache_aware` matches against what each worker was sent, is here the
  prompt's blocks (`prefix`: shared leading block ids, as a Mooncake trace's `hash_ids`), so a match
  counts whole blocks where vllm-router counts characters.

Policies (`ROUTER_POLICIES`; every name but `least_load` is a vllm-router `--policy` value):
- `round_robin`, `random`, `power_of_two`, `consistent_hash`, `cache_aware`,
  `sticky_least_loaded`: see each class;
- `least_load`: the least in-flight replica. vllm-router 0.1.17 has no such `--policy` (its
  choices are random, round_robin, cache_aware, kv_aware, power_of_two, consistent_hash and
  sticky_least_loaded); the rule is the shortest-queue fallback inside its `cache_aware`
  (`select_worker_min_load`), offered alone as the load-only bound. `servecap fleet` cannot run it
  behind the real router.
Not modelled: `kv_aware` (it routes on KV-cache events that vLLM workers publish over ZMQ, which the
reference server does not), health checks, retries and circuit breakers (the fleet loop removes a
lost replica and re-sends its requests), and `power_of_two`'s optional polled loads.

Replicas are named by `ReplicaView.index`, stable for a run; `replicas` lists the routable ones in
the fleet's order (the order they became ready), which plays vllm-router's worker-list order where a
rule takes "the first" (ties in a least-load pick, the fallback worker).

Randomness is one `random.Random(seed)` per router. Pure: no I/O, standard library only.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import OrderedDict

from calculators.plan.cache_aware_router import CacheAwareRouter
from calculators.plan.router_base import M64, ReplicaView, Router, RouterBase, first_least_loaded, mix64

__all__ = ["ROUTER_POLICIES", "ReplicaView", "Router", "make_router"]

ROUTER_POLICIES: tuple[str, ...] = ("round_robin", "random", "power_of_two", "least_load", "consistent_hash",
                                    "cache_aware", "sticky_least_loaded")

class RoundRobinRouter(RouterBase):
    """`round_robin` (vllm-router `RoundRobinPolicy`): a counter that grows by one per request, taken
    modulo the number of healthy workers, indexes the healthy list. A replica that leaves is skipped
    because it is no longer in the list; the cycle's phase shifts when the list's length changes, as
    vllm-router's does, since the counter is global rather than per worker."""

    policy = "round_robin"

    def __init__(self) -> None:
        self._counter = 0

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        view = replicas[self._counter % len(replicas)]
        self._counter += 1
        return view.index


class RandomRouter(RouterBase):
    """`random` (vllm-router `RandomPolicy`): a healthy worker drawn uniformly for each request."""

    policy = "random"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        return replicas[int(self._rng.random() * len(replicas))].index


class PowerOfTwoRouter(RouterBase):
    """`power_of_two` (vllm-router `src/policies/power_of_two.rs`): two distinct healthy workers drawn
    uniformly, and the request goes to the one with fewer in-flight requests, the first drawn on a tie
    (`load1 <= load2`). A lone worker takes everything. vllm-router adds to the in-flight count a load
    it polls from each worker's load endpoint when a worker serves one; the reference server serves
    none, so the count alone decides, as here."""

    policy = "power_of_two"
    reads_load = True

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        n = len(replicas)
        if n == 1:
            return replicas[0].index
        draw = self._rng.random
        i = int(draw() * n)
        j = int(draw() * (n - 1))   # a second, distinct: what vllm-router's redraw-until-different yields
        if j >= i:
            j += 1
        first, second = replicas[i], replicas[j]
        return first.index if first.in_flight <= second.in_flight else second.index


class LeastLoadRouter(RouterBase):
    """`least_load` (not a vllm-router `--policy`): the replica with the fewest in-flight requests, the
    first in the fleet's order on a tie. It is the shortest-queue rule vllm-router's `cache_aware` uses
    when the load is imbalanced (`select_worker_min_load`), alone: the load-only bound the other
    policies are judged against."""

    policy = "least_load"
    reads_load = True

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        return first_least_loaded(replicas)


UNKEYED_POINT = 0x9E3779B97F4A7C15   # where every keyless request hashes under unkeyed="one" (any constant)


class ConsistentHashRouter(RouterBase):
    """`consistent_hash` (vllm-router `src/policies/consistent_hash.rs`, `hash_key.rs`).

    A hash ring holds `virtual_nodes` points per worker (vllm-router: 160, hashing "url:i"); a request
    goes to the worker owning the first point at or after its key's hash, wrapping at the end. The
    ring is rebuilt whenever the worker list changes, so removing a worker moves only the keys that
    landed on its points (about 1/N of them) and adding one takes about 1/(N+1) from the rest.

    The key is the session: vllm-router takes the first of the headers `x-session-id`, `x-user-id`,
    `x-tenant-id`, `x-correlation-id`, `x-request-id`, `x-trace-id`, then the body's
    `session_params.session_id`, `user`, `session_id`, `user_id` (the load generator sends a session's
    key as `x-session-id`, contract.workload's --session-header). A request with none is hashed by its
    text where the router hands the policy the text (`hash_key.rs`: the text itself up to 100
    characters, else a hash of it). vllm-router 0.1.17, the version this project pins, does not for a
    chat request: every keyless request got the one key and went to one worker (two workers, 6
    sessions of 2 turns with distinct texts, all 12 to one worker in 4 of 4 runs;
    `lab/servecap/router_session_key.py`), while the same requests with the header spread by session.
    `unkeyed` picks how a request without a key is placed here:
    - "one" (default): every keyless request at one ring point, as 0.1.17 places them;
    - "random": a ring point drawn for it, as a distinct text's hash is (a router that hashes texts);
    - "prefix": the ring point of its prefix blocks, for a demand whose keyless requests with equal
      block lists are equal texts.
    Ring points and key hashes are salted with the seed: which replica a key lands on is arbitrary in
    the real router too (it hashes worker URLs), and seeded replications should vary it."""

    policy = "consistent_hash"

    def __init__(self, seed: int, virtual_nodes: int = 160, unkeyed: str = "one") -> None:
        self._salt = mix64(seed & M64)
        self._rng = random.Random(seed)
        self.virtual_nodes = virtual_nodes
        self.unkeyed = unkeyed
        self._members: tuple[int, ...] = ()
        self._points: list[int] = []
        self._owners: list[int] = []

    def _rebuild(self, members: tuple[int, ...]) -> None:
        ring = []
        for index in members:
            base = mix64(self._salt ^ mix64(index & M64))
            ring.extend((mix64(base ^ vnode), index) for vnode in range(self.virtual_nodes))
        ring.sort()
        self._points = [point for point, _ in ring]
        self._owners = [index for _, index in ring]
        self._members = members

    def point_of(self, key: int | None, prefix: tuple[int, ...]) -> int:
        """Where a request lands on the ring (64-bit)."""
        if key is not None:
            return mix64(self._salt ^ (key & M64))
        if self.unkeyed == "one":
            return mix64(self._salt ^ UNKEYED_POINT)
        if self.unkeyed == "prefix":
            return mix64(self._salt ^ (hash(prefix) & M64))
        return self._rng.getrandbits(64)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        members = tuple([view.index for view in replicas])
        if members != self._members:
            self._rebuild(members)
        at = bisect.bisect_left(self._points, self.point_of(key, prefix))
        return self._owners[at if at < len(self._owners) else 0]

    def removed(self, index: int) -> None:
        """Nothing to do now: the next request sees a different worker list and rebuilds the ring."""


class StickyLeastLoadedRouter(RouterBase):
    """`sticky_least_loaded` (vllm-router `src/policies/sticky_least_loaded.rs`).

    A session (the key, read as `consistent_hash` reads it) stays on the replica it was first sent to
    while that replica is routable. A new session goes to the replica holding the fewest active
    sessions, ties broken by a rendezvous hash of (session, replica), and counts there as active until
    it expires: `session_ttl_s` after its last request (vllm-router: 2 hours, or
    `VLLM_ROUTER_SLL_SESSION_EXPIRATION_IN_S`), checked at most every `sweep_interval_s` (60 s).
    A session whose replica left is assigned anew. A request without a key goes to a replica with the
    fewest active sessions and is not recorded; vllm-router breaks that tie by hashing the request's
    text, and 0.1.17 hands the policy no text for a chat request, so every keyless request takes the
    same tied replica (two workers, 6 sessions of 2 turns without the header: all 12 to one worker in 2
    of 2 runs; `lab/servecap/router_session_key.py --policy sticky_least_loaded`), here the tied
    replica a fixed rendezvous weight picks.
    Load here is sessions, not in-flight requests: the policy never reads ReplicaView.in_flight."""

    policy = "sticky_least_loaded"

    def __init__(self, seed: int, session_ttl_s: float = 7200.0, sweep_interval_s: float = 60.0) -> None:
        self._salt = mix64(seed & M64)
        self.session_ttl_s = session_ttl_s
        self.sweep_interval_s = sweep_interval_s
        self._sessions: OrderedDict[int, list] = OrderedDict()   # key -> [replica, last access], oldest first
        self._active: dict[int, int] = {}
        self._last_sweep = 0.0

    def _sweep(self, t: float) -> None:
        self._last_sweep = t
        sessions = self._sessions
        while sessions:
            key, (rid, last) = next(iter(sessions.items()))
            if t - last < self.session_ttl_s:
                break
            del sessions[key]
            self._drop(rid)

    def _drop(self, rid: int) -> None:
        count = self._active.get(rid, 0) - 1
        if count > 0:
            self._active[rid] = count
        else:
            self._active.pop(rid, None)

    def active_sessions(self, index: int) -> int:
        return self._active.get(index, 0)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        if t - self._last_sweep >= self.sweep_interval_s:
            self._sweep(t)
        if key is not None:
            entry = self._sessions.get(key)
            if entry is not None:
                rid = entry[0]
                for view in replicas:
                    if view.index == rid:
                        entry[1] = t
                        self._sessions.move_to_end(key)
                        return rid
                del self._sessions[key]   # its replica is gone: assign anew
                self._drop(rid)
        active = self._active
        fewest = min(active.get(view.index, 0) for view in replicas)
        tied = [view.index for view in replicas if active.get(view.index, 0) == fewest]
        weight = mix64(self._salt ^ (UNKEYED_POINT if key is None else key & M64))
        rid = max(tied, key=lambda index: mix64(weight ^ mix64(index & M64)))
        if key is None:
            return rid
        self._sessions[key] = [rid, t]
        active[rid] = active.get(rid, 0) + 1
        return rid

    def removed(self, index: int) -> None:
        """Its sessions are reassigned on their next request (vllm-router finds the stale mapping then);
        its count goes now, as no candidate will read it again."""
        self._active.pop(index, None)


_OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "round_robin": {},
    "random": {},
    "power_of_two": {},
    "least_load": {},
    "consistent_hash": {"virtual_nodes": (int,), "unkeyed": (str,)},
    "cache_aware": {"cache_threshold": (int, float), "balance_abs_threshold": (int, float),
                    "balance_rel_threshold": (int, float), "eviction_interval_s": (int, float),
                    "max_tree_size": (int,), "block_chars": (int,)},
    "sticky_least_loaded": {"session_ttl_s": (int, float), "sweep_interval_s": (int, float)},
}


_RANGES: dict[str, tuple] = {   # option -> (whether a value is good, what a good one is)
    "virtual_nodes": (lambda v: v >= 1, ">= 1"),
    "unkeyed": (lambda v: v in ("one", "random", "prefix"), "'one', 'random' or 'prefix'"),
    "cache_threshold": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "balance_abs_threshold": (lambda v: v >= 0, ">= 0"),
    "balance_rel_threshold": (lambda v: v >= 1, ">= 1"),
    "eviction_interval_s": (lambda v: v > 0, "> 0 seconds"),
    "max_tree_size": (lambda v: v >= 1, ">= 1 character"),
    "block_chars": (lambda v: v >= 1, ">= 1"),
    "session_ttl_s": (lambda v: v > 0, "> 0 seconds"),
    "sweep_interval_s": (lambda v: v > 0, "> 0 seconds"),
}


def _check_options(policy: str, options: dict) -> None:
    allowed = _OPTIONS[policy]
    for name, value in options.items():
        if name not in allowed:
            choices = ", ".join(allowed) if allowed else "none"
            raise ValueError(f"router {policy}: unknown option {name!r} (its options: {choices})")
        kinds = allowed[name]
        if isinstance(value, bool) or not isinstance(value, kinds) \
                or (isinstance(value, float) and not math.isfinite(value)):
            kind = "a string" if kinds == (str,) else "an integer" if kinds == (int,) else "a finite number"
            raise ValueError(f"router {policy}: {name} must be {kind}, got {value!r}")
        good, text = _RANGES[name]
        if not good(value):
            raise ValueError(f"router {policy}: {name} must be {text}, got {value!r}")


def make_router(policy: str, *, seed: int = 0, **options) -> Router:
    """A router of `policy` (one of ROUTER_POLICIES); `options` are the policy's own (its class says
    which). ValueError naming the choices for an unknown policy, or naming the option for a bad one."""
    if policy not in ROUTER_POLICIES:
        raise ValueError(f"unknown router policy {policy!r} (choices: {', '.join(ROUTER_POLICIES)})")
    _check_options(policy, options)
    if policy == "round_robin":
        return RoundRobinRouter()
    if policy == "random":
        return RandomRouter(seed)
    if policy == "power_of_two":
        return PowerOfTwoRouter(seed)
    if policy == "least_load":
        return LeastLoadRouter()
    if policy == "consistent_hash":
        return ConsistentHashRouter(seed, **options)
    if policy == "cache_aware":
        return CacheAwareRouter(**options)
    return StickyLeastLoadedRouter(seed, **options)

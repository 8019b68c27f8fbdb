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
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Protocol

ROUTER_POLICIES: tuple[str, ...] = ("round_robin", "random", "power_of_two", "least_load", "consistent_hash",
                                    "cache_aware", "sticky_least_loaded")

_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class ReplicaView:
    """What the router knows of one routable replica at decision time."""

    index: int       # the replica's stable id (never reused in a run)
    in_flight: int   # requests the router sent it that have not finished


class Router(Protocol):
    policy: str
    reads_load: bool   # whether `choose` reads ReplicaView.in_flight (the loop must bring it up to date)

    def choose(self, t: float, key: int | None, prefix: tuple[int, ...], replicas: Sequence[ReplicaView],
               blocks: int = 0) -> int: ...

    def finished(self, index: int, prefix: tuple[int, ...]) -> None: ...

    def removed(self, index: int) -> None: ...


def _mix64(x: int) -> int:
    """SplitMix64's finaliser: a 64-bit integer hash, the same on every run (Python's str hash is salted)."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _first_least_loaded(replicas: Sequence[ReplicaView]) -> int:
    """vllm-router's `min_by_key(load)`: the least in-flight replica, the first of equals in the list."""
    best = replicas[0]
    low = best.in_flight
    for view in replicas:
        if view.in_flight < low:
            best, low = view, view.in_flight
    return best.index


class _Base:
    policy = ""
    reads_load = False

    def finished(self, index: int, prefix: tuple[int, ...]) -> None:
        """vllm-router's `on_request_complete` changes no policy state (the load count is the loop's)."""

    def removed(self, index: int) -> None:
        """A replica gone: a stateless policy has nothing of it to forget."""


class RoundRobinRouter(_Base):
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


class RandomRouter(_Base):
    """`random` (vllm-router `RandomPolicy`): a healthy worker drawn uniformly for each request."""

    policy = "random"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        return replicas[int(self._rng.random() * len(replicas))].index


class PowerOfTwoRouter(_Base):
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


class LeastLoadRouter(_Base):
    """`least_load` (not a vllm-router `--policy`): the replica with the fewest in-flight requests, the
    first in the fleet's order on a tie. It is the shortest-queue rule vllm-router's `cache_aware` uses
    when the load is imbalanced (`select_worker_min_load`), alone: the load-only bound the other
    policies are judged against."""

    policy = "least_load"
    reads_load = True

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        return _first_least_loaded(replicas)


class ConsistentHashRouter(_Base):
    """`consistent_hash` (vllm-router `src/policies/consistent_hash.rs`, `hash_key.rs`).

    A hash ring holds `virtual_nodes` points per worker (vllm-router: 160, hashing "url:i"); a request
    goes to the worker owning the first point at or after its key's hash, wrapping at the end. The
    ring is rebuilt whenever the worker list changes, so removing a worker moves only the keys that
    landed on its points (about 1/N of them) and adding one takes about 1/(N+1) from the rest.

    The key is the session: vllm-router takes the first of the headers `x-session-id`, `x-user-id`,
    `x-tenant-id`, `x-correlation-id`, `x-request-id`, `x-trace-id`, then the body's
    `session_params.session_id`, `user`, `session_id`, `user_id`. A request with none is hashed by
    its text (the text itself up to 100 characters, else a hash of it): requests whose texts differ
    land on independent points of the ring, identical ones together. `unkeyed` picks how a request
    without a key is placed here:
    - "random" (default): a ring point drawn for it, as a distinct text's hash is;
    - "prefix": the ring point of its prefix blocks, for a demand whose keyless requests with equal
      block lists are equal texts.
    Ring points and key hashes are salted with the seed: which replica a key lands on is arbitrary in
    the real router too (it hashes worker URLs), and seeded replications should vary it."""

    policy = "consistent_hash"

    def __init__(self, seed: int, virtual_nodes: int = 160, unkeyed: str = "random") -> None:
        self._salt = _mix64(seed & _M64)
        self._rng = random.Random(seed)
        self.virtual_nodes = virtual_nodes
        self.unkeyed = unkeyed
        self._members: tuple[int, ...] = ()
        self._points: list[int] = []
        self._owners: list[int] = []

    def _rebuild(self, members: tuple[int, ...]) -> None:
        ring = []
        for index in members:
            base = _mix64(self._salt ^ _mix64(index & _M64))
            ring.extend((_mix64(base ^ vnode), index) for vnode in range(self.virtual_nodes))
        ring.sort()
        self._points = [point for point, _ in ring]
        self._owners = [index for _, index in ring]
        self._members = members

    def point_of(self, key: int | None, prefix: tuple[int, ...]) -> int:
        """Where a request lands on the ring (64-bit)."""
        if key is not None:
            return _mix64(self._salt ^ (key & _M64))
        if self.unkeyed == "prefix":
            return _mix64(self._salt ^ (hash(prefix) & _M64))
        return self._rng.getrandbits(64)

    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        members = tuple([view.index for view in replicas])
        if members != self._members:
            self._rebuild(members)
        at = bisect.bisect_left(self._points, self.point_of(key, prefix))
        return self._owners[at if at < len(self._owners) else 0]

    def removed(self, index: int) -> None:
        """Nothing to do now: the next request sees a different worker list and rebuilds the ring."""


class _Node:
    """A radix-tree node: the block ids on the edge from its parent, its children by first block, and
    the replicas that were sent a request through it, each with its last access (time, then depth)."""

    __slots__ = ("children", "end", "id", "key", "owners", "parent")

    def __init__(self, id: int, parent: _Node | None, key: tuple, end: int) -> None:
        self.id = id
        self.parent = parent
        self.key = key            # block ids on the edge (compressed, as a radix tree's)
        self.end = end            # blocks from the root to this node's last block
        self.children: dict = {}
        self.owners: dict[int, float] = {}   # replica -> last access time, in the order they came


class CacheAwareRouter(_Base):
    """`cache_aware` (vllm-router `src/policies/cache_aware.rs` and its approximate tree, `src/tree.rs`).

    Rule, per request:
    1. Imbalance: with the in-flight counts' max and min over the workers, the load is imbalanced when
       max - min > `balance_abs_threshold` and max > min * `balance_rel_threshold`. Then the request
       goes to the least in-flight worker (the first of equals) and its text is still inserted into
       the tree under that worker, so a later balanced request can find it there.
    2. Otherwise, the tree: one radix tree, shared by all workers, of the texts sent so far, each node
       marked with the workers that were sent a text through it. The request's text is walked down it
       as far as it matches any worker's; the match rate is the matched length over the request's
       length. Above `cache_threshold` the request goes to a worker marked at the deepest node
       reached (the longest match); at or below, to the least in-flight worker. Either way its text
       is then inserted under the chosen worker. A worker marked there that is no longer routable is
       dropped from the tree and the request goes to the first worker.
    3. Eviction: every `eviction_interval_s` a worker's marks beyond `max_tree_size` characters are
       dropped, least recently used leaves first, and a node no worker marks leaves the tree.
    A worker removed from the fleet is dropped from the tree (`remove_worker`). The session key is not
    read: this `cache_aware` routes on the text alone (one revision of vllm-router's source also keeps
    a session map beside the tree; the 0.1.17 build carries none of that code's decision labels).

    The rule follows vllm-router's published `cache_aware.rs` and `tree.rs`; the 0.1.17 wheel ships
    the policy compiled, so only its CLI defaults could be read from it (`router_args.py`), and they
    are the defaults here: cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5,
    eviction_interval_secs 120, max_tree_size 2**25 characters per worker. (The Rust
    `CacheAwareConfig::default()`, 0.5 / 32 / 1.1 / 30 s / 10,000, is the library's without the CLI.)

    In blocks rather than characters: the text is the prompt's block ids (`prefix`), matched whole
    blocks at a time, and the match rate is matched blocks over `blocks`, the prompt's length in
    blocks, including its own blocks past the shared prefix (0: `len(prefix)`), as vllm-router divides
    by the whole text's characters. A request's own blocks are inserted too, as a leaf no other
    request matches, so they fill the worker's budget as its unique text does in vllm-router; they are
    kept as a count per worker rather than as nodes. The budget in blocks is `max_tree_size /
    block_chars`, with `block_chars` the characters a block's text has (the trace replay writes one
    character per token: 512 for a Mooncake block).

    Approximations, each to keep a call cheap:
    - the worker taken at the deepest node is the first still marked there (the one that first sent a
      text through it); vllm-router takes the node's cached or first-iterated tenant;
    - last access is exact LRU over whole paths (an insert touches every node on its path; a match
      touches nothing); vllm-router stamps the leaf on insert and one match in eight, which orders
      its eviction only approximately.
    `decisions` counts the outcomes: "load_balance" (imbalanced), "cache_hit" (match above the
    threshold), "low_match" (least in-flight), "stale" (the marked worker was gone)."""

    policy = "cache_aware"
    reads_load = True

    def __init__(self, cache_threshold: float = 0.3, balance_abs_threshold: int = 64,
                 balance_rel_threshold: float = 1.5, eviction_interval_s: float = 120.0,
                 max_tree_size: int = 2 ** 25, block_chars: int = 512) -> None:
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.eviction_interval_s = eviction_interval_s
        self.max_tree_size = max_tree_size
        self.block_chars = block_chars
        self.budget_blocks = max_tree_size / block_chars
        self._root = _Node(0, None, (), 0)
        self._nodes: dict[int, _Node] = {}                 # id -> node in the tree (the heaps hold ids:
        self._next_id = 1                                  # tuples of numbers, which the GC leaves alone)
        self._size: dict[int, int] = {}                    # replica -> blocks marked (nodes + own blocks)
        self._heap: dict[int, list] = {}                   # replica -> lazy LRU heap of (t, -end, node id)
        self._live: dict[int, int] = {}                    # replica -> nodes it marks (to bound its heap)
        self._tails: dict[int, tuple[array, array, list]] = {}   # replica -> own-block counts (t, blocks, [head])
        self._next_eviction = eviction_interval_s
        self.decisions = {"load_balance": 0, "cache_hit": 0, "low_match": 0, "stale": 0}

    # -- the tree ---------------------------------------------------------------------------------
    def match(self, prefix: tuple[int, ...]) -> tuple[int, _Node, list[_Node], int]:
        """Walk `prefix` down the tree: (blocks matched, deepest node reached, the nodes matched whole,
        blocks matched inside the deepest node when it was matched only in part, else 0)."""
        node = self._root
        path: list[_Node] = []
        depth = i = 0
        n = len(prefix)
        while i < n:
            child = node.children.get(prefix[i])
            if child is None:
                break
            key = child.key
            size = len(key)
            if prefix[i:i + size] == key:
                path.append(child)
                node = child
                depth += size
                i += size
                continue
            common, most = 1, min(size, n - i)
            while common < most and key[common] == prefix[i + common]:
                common += 1
            return depth + common, child, path, common
        return depth, node, path, 0

    def _mark(self, node: _Node, rid: int, t: float) -> None:
        owners = node.owners
        if rid not in owners:
            self._size[rid] = self._size.get(rid, 0) + len(node.key)
            self._live[rid] = self._live.get(rid, 0) + 1
        owners[rid] = t
        heap = self._heap.setdefault(rid, [])
        heappush(heap, (t, -node.end, node.id))
        if len(heap) > 64 and len(heap) > 4 * self._live[rid]:
            self._compact(rid)

    def _compact(self, rid: int) -> None:
        kept = list({entry for entry in self._heap[rid] if self._stamp(entry[2], rid) == entry[0]})
        heapify(kept)
        self._heap[rid] = kept

    def _stamp(self, node_id: int, rid: int) -> float | None:
        """Replica rid's last access of the node (None: it does not mark it, or the node is gone)."""
        node = self._nodes.get(node_id)
        return None if node is None else node.owners.get(rid)

    def _new_node(self, parent: _Node, key: tuple, end: int) -> _Node:
        node = _Node(self._next_id, parent, key, end)
        self._nodes[node.id] = node
        self._next_id += 1
        return node

    def insert(self, prefix: tuple[int, ...], rid: int, t: float, blocks: int = 0,
               walked: tuple[int, _Node, list[_Node], int] | None = None) -> None:
        """Mark `prefix`'s path for replica `rid` at time t, splitting and growing the tree as needed;
        `blocks` past len(prefix) are the request's own (a leaf of its own, kept as a count)."""
        depth, node, path, partial = walked if walked is not None else self.match(prefix)
        if partial:   # the walk stopped inside `node`'s edge: split it where the match ends
            head = self._new_node(node.parent, node.key[:partial], node.end - len(node.key) + partial)
            head.owners = dict(node.owners)
            node.parent.children[node.key[0]] = head
            node.key = node.key[partial:]
            node.parent = head
            head.children[node.key[0]] = node
            for owner, stamp in head.owners.items():   # its owners mark both halves, as before the split
                self._live[owner] += 1
                heappush(self._heap[owner], (stamp, -head.end, head.id))
            path.append(head)
            node = head
        if depth < len(prefix):   # the rest is new: one leaf
            leaf = self._new_node(node, tuple(prefix[depth:]), len(prefix))
            node.children[leaf.key[0]] = leaf
            path.append(leaf)
        for visited in path:
            self._mark(visited, rid, t)
        self._root.owners[rid] = t
        own = blocks - len(prefix)
        if own > 0:
            times, counts, _ = self._tails.setdefault(rid, (array("d"), array("q"), [0]))
            times.append(t)
            counts.append(own)
            self._size[rid] = self._size.get(rid, 0) + own

    def _unmark(self, node: _Node, rid: int) -> None:
        del node.owners[rid]
        self._size[rid] -= len(node.key)
        self._live[rid] -= 1
        if not node.owners and node.parent is not None:
            parent = node.parent
            if parent.children.get(node.key[0]) is node:
                del parent.children[node.key[0]]
            del self._nodes[node.id]

    def remove_replica(self, rid: int) -> None:
        """vllm-router's `remove_tenant`: every mark of the replica goes, and nodes left unmarked."""
        for _, _, node_id in sorted(set(self._heap.pop(rid, [])), key=lambda e: e[1]):   # deepest first
            node = self._nodes.get(node_id)
            if node is not None and rid in node.owners:
                self._unmark(node, rid)
        self._root.owners.pop(rid, None)
        for table in (self._size, self._live, self._tails):
            table.pop(rid, None)

    def evict(self) -> None:
        """vllm-router's `evict_tenant_by_size`: each replica over its budget loses its least recently
        used leaves (a node's path is touched with it, so the oldest mark is always a leaf) until it
        fits; its own-block counts go oldest first, interleaved with the nodes by time."""
        for rid in list(self._size):
            if self._size[rid] <= self.budget_blocks:
                continue
            heap = self._heap.get(rid, [])
            times, counts, head = self._tails.get(rid, (array("d"), array("q"), [0]))
            while self._size[rid] > self.budget_blocks:
                while heap and self._stamp(heap[0][2], rid) != heap[0][0]:
                    heappop(heap)   # stale: the node was touched again since, or left
                tail_t = times[head[0]] if head[0] < len(times) else math.inf
                if heap and heap[0][0] < tail_t:
                    self._unmark(self._nodes[heappop(heap)[2]], rid)
                elif tail_t < math.inf:
                    self._size[rid] -= counts[head[0]]
                    head[0] += 1
                else:
                    break
            if head[0] and head[0] * 2 >= len(times):
                del times[:head[0]]
                del counts[:head[0]]
                head[0] = 0

    # -- the policy -------------------------------------------------------------------------------
    def choose(self, t, key, prefix, replicas, blocks=0) -> int:
        if type(prefix) is not tuple:
            prefix = tuple(prefix)
        while t >= self._next_eviction:
            self.evict()
            self._next_eviction += self.eviction_interval_s
        low = high = replicas[0].in_flight
        for view in replicas:
            load = view.in_flight
            if load < low:
                low = load
            elif load > high:
                high = load
        if high - low > self.balance_abs_threshold and high > low * self.balance_rel_threshold:
            self.decisions["load_balance"] += 1
            rid = _first_least_loaded(replicas)
            self.insert(prefix, rid, t, blocks)
            return rid
        walked = self.match(prefix)
        depth, node = walked[0], walked[1]
        length = max(blocks, len(prefix))
        if length and depth / length > self.cache_threshold:
            rid = next(iter(node.owners))
            for view in replicas:
                if view.index == rid:
                    self.decisions["cache_hit"] += 1
                    self.insert(prefix, rid, t, blocks, walked)
                    return rid
            self.decisions["stale"] += 1   # marked by a replica no longer routable: forget it, take the first
            self.remove_replica(rid)
            return replicas[0].index
        self.decisions["low_match"] += 1
        rid = _first_least_loaded(replicas)
        self.insert(prefix, rid, t, blocks, walked)
        return rid

    def removed(self, index: int) -> None:
        self.remove_replica(index)

    def tree_blocks(self, index: int) -> int:
        """Blocks the tree marks for replica `index` (its own blocks included)."""
        return self._size.get(index, 0)


class StickyLeastLoadedRouter(_Base):
    """`sticky_least_loaded` (vllm-router `src/policies/sticky_least_loaded.rs`).

    A session (the key, read as `consistent_hash` reads it) stays on the replica it was first sent to
    while that replica is routable. A new session goes to the replica holding the fewest active
    sessions, ties broken by a rendezvous hash of (session, replica), and counts there as active until
    it expires: `session_ttl_s` after its last request (vllm-router: 2 hours, or
    `VLLM_ROUTER_SLL_SESSION_EXPIRATION_IN_S`), checked at most every `sweep_interval_s` (60 s).
    A session whose replica left is assigned anew. A request without a key goes to a replica with the
    fewest active sessions and is not recorded; vllm-router breaks that tie by hashing the request's
    text, so distinct texts spread over the tied replicas, here a seeded draw among them.
    Load here is sessions, not in-flight requests: the policy never reads ReplicaView.in_flight."""

    policy = "sticky_least_loaded"

    def __init__(self, seed: int, session_ttl_s: float = 7200.0, sweep_interval_s: float = 60.0) -> None:
        self._salt = _mix64(seed & _M64)
        self._rng = random.Random(seed)
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
        if key is None:
            return tied[int(self._rng.random() * len(tied))] if len(tied) > 1 else tied[0]
        weight = _mix64(self._salt ^ (key & _M64))
        rid = max(tied, key=lambda index: _mix64(weight ^ _mix64(index & _M64)))
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
    "unkeyed": (lambda v: v in ("random", "prefix"), "'random' or 'prefix'"),
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

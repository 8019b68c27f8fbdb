"""vllm-router's `cache_aware` policy, simulated: a block tree of what each replica was sent, with the
0.1.17 defaults (`calculators.plan.router` has the module-level account of what is modelled)."""

from __future__ import annotations

import math
from array import array
from heapq import heapify, heappop, heappush

from calculators.plan.router_base import RouterBase, first_least_loaded

LEAD_CHARS = 4   # a prompt's own text's first characters that the tree tells apart (see CacheAwareRouter)


class _Node:
    """A radix-tree node: the block ids on the edge from its parent, its children by first block, and
    the replicas that were sent a request through it, each with its last access (time, then depth)."""

    __slots__ = ("children", "end", "id", "key", "leads", "owners", "parent")

    def __init__(self, id: int, parent: _Node | None, key: tuple, end: int) -> None:
        self.id = id
        self.parent = parent
        self.key = key            # block ids on the edge (compressed, as a radix tree's)
        self.end = end            # blocks from the root to this node's last block
        self.children: dict = {}
        self.owners: dict[int, float] = {}   # replica -> last access time, in the order they came
        self.leads: dict[str, list] | None = None   # texts after this node's end: lead -> [first replica, replicas]


class CacheAwareRouter(RouterBase):
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

    The worker taken at the deepest node: vllm-router's tree (`src/tree.rs`, `prefix_match_with_counts`)
    walks the text character by character, and where it stops inside a node's edge (a partial match) it
    still takes that node; the worker is the node's cached `last_tenant`, set by the text that created the
    node and copied when a node is split. A request's own text starts where its shared prefix ends, so
    its first characters walk into the leaf of an earlier request whose own text began with the same
    letters, and it goes where that request went. Here each node that ends a prefix keeps the first
    `LEAD_CHARS` characters of the own texts sent past it (`lead`: the text the trace replay writes,
    contract.prompt_text), each with the worker that first sent it: the request goes to the worker of its
    longest matching lead, else to the node's first worker (the text that made the node). Requests
    sent elsewhere by the load check mark the leads they create, so a user's later requests follow.

    Approximations, each to keep a call cheap:
    - a worker no longer routable at a lead gives way to the next one that sent that lead, then to the
      node's rule (vllm-router iterates the node's tenants in its hash map's order); leads are not
      evicted (vllm-router's 2**25-character budget per worker is rarely reached);
    - last access is exact LRU over whole paths (an insert touches every node on its path; a match
      touches nothing); vllm-router stamps the leaf on insert and one match in eight, which orders
      its eviction only approximately.
    `decisions` counts the outcomes: "load_balance" (imbalanced), "cache_hit" (match above the
    threshold), "low_match" (least in-flight), "stale" (the marked worker was gone)."""

    policy = "cache_aware"
    reads_load = True
    reads_text = True

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
               walked: tuple[int, _Node, list[_Node], int] | None = None, lead: str = "") -> None:
        """Mark `prefix`'s path for replica `rid` at time t, splitting and growing the tree as needed;
        `blocks` past len(prefix) are the request's own (a leaf of its own, kept as a count), and `lead`
        its own text's first characters, kept at the node where the prefix ends."""
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
            node = leaf
        if lead and prefix:
            if node.leads is None:
                node.leads = {}
            for k in range(1, len(lead) + 1):   # [the first replica sent it, every replica sent it]
                node.leads.setdefault(lead[:k], [rid, {}])[1][rid] = None
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
    def _lead_owner(self, node: _Node, lead: str, routable: set[int]) -> int | None:
        """The worker of the longest of node's leads that `lead` starts with (None: no lead matches, or
        none of its workers is routable)."""
        leads = node.leads
        if not leads:
            return None
        for k in range(len(lead), 0, -1):
            entry = leads.get(lead[:k])
            if entry is not None:
                first, sent = entry
                if first in routable:
                    return first
                return next((rid for rid in sent if rid in routable), None)
        return None

    def choose(self, t, key, prefix, replicas, blocks=0, lead="") -> int:
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
            rid = first_least_loaded(replicas)
            self.insert(prefix, rid, t, blocks, lead=lead)
            return rid
        walked = self.match(prefix)
        depth, node = walked[0], walked[1]
        length = max(blocks, len(prefix))
        if length and depth / length > self.cache_threshold:
            routable = {view.index for view in replicas}
            rid = None
            if lead and depth == len(prefix) and not walked[3] and node.end == depth:
                rid = self._lead_owner(node, lead, routable)
            if rid is None:
                rid = next(iter(node.owners))
            if rid in routable:
                self.decisions["cache_hit"] += 1
                self.insert(prefix, rid, t, blocks, walked, lead)
                return rid
            self.decisions["stale"] += 1   # marked by a replica no longer routable: forget it, take the first
            self.remove_replica(rid)
            return replicas[0].index
        self.decisions["low_match"] += 1
        rid = first_least_loaded(replicas)
        self.insert(prefix, rid, t, blocks, walked, lead)
        return rid

    def removed(self, index: int) -> None:
        self.remove_replica(index)

    def tree_blocks(self, index: int) -> int:
        """Blocks the tree marks for replica `index` (its own blocks included)."""
        return self._size.get(index, 0)

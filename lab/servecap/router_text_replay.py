"""Which rule picks vllm-router's `cache_aware` worker for a prompt it has seen the prefix of: a replay of a
real fleet's own routing through a character tree.

    python -m lab.servecap.router_text_replay FLEET_DIR [--seed 5]

FLEET_DIR is a `servecap fleet --router cache_aware` run (demand.jsonl, requests.jsonl, fleet.json). Every
answered request's text is rebuilt as the trace replay wrote it (contract.prompt_text, the demand's seed)
and, in send order, matched against a character radix tree with vllm-router's `src/tree.rs` rule: the walk
stops at the first mismatch, a partial match into a node's edge still takes that node, and the worker is
the node's `last_tenant` (set by the text that created the node, copied on a split); then the text is
inserted under the worker the router actually picked. For each request after its user's first it counts
whether that rule names the picked worker, beside the block tree's rule (the worker that first served the
user's prefix), over the whole run and per 60-s window. A replica the fleet took out of the router (a kill,
a scale-down's drain: fleet.json's events) leaves every node at that moment, as `remove_tenant` does; a node
whose last worker left falls back to the first in its hash map's order, which cannot be known from outside:
such a request is counted as undetermined, and the worker it went to is taken as the node's new cached one
(the router caches what it iterated). Requests the router's load check sent elsewhere are not told apart,
so windows with bursts agree less.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from loadgen.workload.traces import TracePrompts, TraceRow


class _Node:
    __slots__ = ("children", "last", "tenants", "text")

    def __init__(self, text: str, tenants, last) -> None:
        self.text, self.children, self.tenants, self.last = text, {}, set(tenants), last


def _shared(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def insert(root: _Node, text: str, tenant: str) -> None:
    prev = root
    while text:
        child = prev.children.get(text[0])
        if child is None:
            prev.children[text[0]] = _Node(text, {tenant}, tenant)
            return
        n = _shared(text, child.text)
        if n < len(child.text):   # split: the new node keeps the old one's tenants and last tenant
            mid = _Node(child.text[:n], child.tenants, child.last)
            child.text = child.text[n:]
            mid.children[child.text[0]] = child
            prev.children[text[0]] = child = mid
        child.tenants.add(tenant)
        prev, text = child, text[n:]
    prev.tenants.add(tenant)


def remove(root: _Node, tenant: str) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        node.tenants.discard(tenant)
        stack.extend(node.children.values())


def match(root: _Node, text: str) -> tuple[_Node, str | None]:
    """The node the walk stops at and its worker (None: its cached worker left; the router iterates)."""
    prev = root
    while text:
        child = prev.children.get(text[0])
        if child is None:
            break
        n = _shared(text, child.text)
        prev = child
        if n < len(child.text):
            break
        text = text[n:]
    return prev, (prev.last if prev.last in prev.tenants else None)


def replay(fleet_dir: Path, seed: int) -> dict:
    demand = [json.loads(line) for line in (fleet_dir / "demand.jsonl").open()]
    records = [json.loads(line) for line in (fleet_dir / "requests.jsonl").open()]
    fleet = json.loads((fleet_dir / "fleet.json").read_text())
    t0 = fleet["t0_unix"]
    removals = sorted((e["t_s"], e["replica"]) for e in fleet["events"] if e["event"] in ("killed", "drain"))
    prompts = TracePrompts(seed, 16)
    sent = sorted((r["t_sched"], int(str(r["request_id"]).rsplit("#", 1)[1]), r["replica"])
                  for r in records if r.get("replica"))
    root, first = _Node("", (), None), {}
    per_window = collections.defaultdict(lambda: [0, 0, 0, 0])
    for t_sched, i, replica in sent:
        while removals and removals[0][0] <= t_sched - t0:
            remove(root, removals.pop(0)[1])
        row = demand[i]
        text = prompts.text(i, TraceRow(0.0, row["input_length"], row["output_length"], tuple(row["hash_ids"])))
        user = row["hash_ids"][0]
        if user in first:
            window = per_window[int((t_sched - t0) // 60) * 60]
            node, worker = match(root, text)
            if worker is None and node is not root:
                window[3] += 1
                node.last = replica
            else:
                window[0] += worker == replica
                window[1] += first[user] == replica
                window[2] += 1
        else:
            first[user] = replica
        insert(root, text, replica)
    total = [sum(w[k] for w in per_window.values()) for k in range(4)]
    return {"returning": total[2], "undetermined": total[3], "char_tree_rule": total[0] / total[2],
            "first_replica_rule": total[1] / total[2],
            "windows": {t: {"char_tree_rule": w[0] / w[2] if w[2] else None,
                            "first_replica_rule": w[1] / w[2] if w[2] else None, "requests": w[2],
                            "undetermined": w[3]} for t, w in sorted(per_window.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fleet_dir", type=Path)
    parser.add_argument("--seed", type=int, default=5, help="the demand's seed (servecap fleet --seed)")
    args = parser.parse_args()
    answer = replay(args.fleet_dir, args.seed)
    print(f"{answer['returning']} returning requests ({answer['undetermined']} more undetermined): the character "
          f"tree's worker is the router's pick in {answer['char_tree_rule']:.1%}, the user's first replica in "
          f"{answer['first_replica_rule']:.1%}")
    for t, w in answer["windows"].items():
        if w["requests"]:
            print(f"  t={t:>4}s  n={w['requests']:>4} (+{w['undetermined']} undetermined)  char tree "
                  f"{w['char_tree_rule']:6.1%}  first replica {w['first_replica_rule']:6.1%}")


if __name__ == "__main__":
    main()

"""A plan's demand as a Mooncake JSONL trace, the form the load generator replays at its times.

One row per request: `timestamp` (ms), `input_length`, `output_length`, and `hash_ids`: the shared
prefix's block ids (of `demand.prefix_block_tokens` tokens each; the replay writes the same text for
the same id, so requests that share ids share a prompt prefix, as the plan's replicas see them).
Replayed with `--trace-block-tokens demand.prefix_block_tokens`, the prompts have the plan's lengths
and prefixes. A chained session's rows carry its `session_id`, and each later turn its `delay` (ms) after
the answer before it beside its `timestamp` (the soonest it may go): AIPerf's session form, which the
replay sends as the plan does (calculators.plan.fleet_sessions). Sub-agents sent at once after one request
(a fan-out) carry a `parallel` group number, and the row after them waits on them all (the join): the
replay's reading of servecap's `parallel` (loadgen.workload.traces). Any other row with a session key (a
--sessions user's) carries it as `user`: the replay sends both as its session header, which a
consistent_hash router keys on as the plan's does.
"""

from __future__ import annotations

import json
from pathlib import Path

from calculators.plan.demand import Demand


def write_demand(demand: Demand, path: Path) -> Path:
    followers = demand.followers()
    chained = set(followers) | {k for turns in followers.values() for k in turns}   # a session's every row
    group, groups = {}, {}   # sub-agents that follow one request: a `parallel` group, numbered in their session
    for parent, turns in followers.items():
        together = [k for k in turns if demand.after[k] == parent]
        if len(together) > 1:
            key = int(demand.session[parent])
            groups[key] = groups.get(key, -1) + 1
            group.update(dict.fromkeys(together, groups[key]))
    with path.open("w") as out:
        for i in range(len(demand)):
            row = {"timestamp": round(float(demand.t_s[i]) * 1000, 3), "input_length": int(demand.prompt[i]),
                   "output_length": int(demand.output[i])}
            if demand.prefix is not None and demand.prefix[i]:
                row["hash_ids"] = [int(h) for h in demand.prefix[i]]
            if i in chained:   # a session's turn: the replay sends a later one its delay after the answer
                row["session_id"] = str(int(demand.session[i]))
                if demand.after[i] >= 0:
                    row["delay"] = round(float(demand.delay_s[i]) * 1000, 3)
                if i in group:   # sent at once with the rest of its group; the row after waits on them all
                    row["parallel"] = group[i]
            elif demand.session[i] >= 0:   # a user's request: keyed for the router, waiting on nothing
                row["user"] = str(int(demand.session[i]))
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    return path

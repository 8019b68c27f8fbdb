"""A plan's demand as a Mooncake JSONL trace, the form the load generator replays at its times.

One row per request: `timestamp` (ms), `input_length`, `output_length`, and `hash_ids`: the shared
prefix's block ids (of `demand.prefix_block_tokens` tokens each; the replay writes the same text for
the same id, so requests that share ids share a prompt prefix, as the plan's replicas see them).
Replayed with `--trace-block-tokens demand.prefix_block_tokens`, the prompts have the plan's lengths
and prefixes.
"""

from __future__ import annotations

import json
from pathlib import Path

from calculators.plan.demand import Demand


def write_demand(demand: Demand, path: Path) -> Path:
    with path.open("w") as out:
        for i in range(len(demand)):
            row = {"timestamp": round(float(demand.t_s[i]) * 1000, 3), "input_length": int(demand.prompt[i]),
                   "output_length": int(demand.output[i])}
            if demand.prefix is not None and demand.prefix[i]:
                row["hash_ids"] = [int(h) for h in demand.prefix[i]]
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    return path

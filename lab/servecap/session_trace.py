"""A trace of agentic sessions in AIPerf's Mooncake form, for the plan against the fleet (issue 57).

    python -m lab.servecap.session_trace --out lab/results/plan_vs_fleet/sessions.jsonl [--sessions 60 ...]

Sessions start as a Poisson process. Each has its own system prompt and tool schemas (`--system-blocks`
blocks of 512 tokens, ids no other session has) and `--turns` turns; each later turn comes a drawn tool
wait (`--delay-ms LO:HI`, uniform) after the answer before it, with one more 512-token block of history
(the answer and the tool's result) listed after the blocks the turn before it listed, then its own new
text (`--own-tokens LO:HI`). So a turn's prompt shares every listed block of the one before: a replica that
served the session's last turn and still holds it in its KV cache prefills only the new block and text.
Output lengths are uniform in `--output-tokens LO:HI`. Seeded; writes one JSON row per turn.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BLOCK = 512   # Mooncake's hash ids name 512-token blocks (calculators.plan.demand.TRACE_BLOCK_TOKENS)


def _span(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition(":")
    return int(lo), int(hi or lo)


def session_rows(args) -> list[dict]:
    rng = np.random.default_rng(args.seed)
    starts = np.cumsum(rng.exponential(1.0 / args.start_rate, args.sessions))
    starts -= starts[0]
    rows, next_id = [], 0
    for s, start in enumerate(starts):
        blocks = list(range(next_id, next_id + args.system_blocks))
        next_id += args.system_blocks
        for turn in range(args.turns):
            if turn:
                blocks.append(next_id)   # the last answer and its tool result, now history
                next_id += 1
            own = int(rng.integers(args.own[0], args.own[1] + 1))
            row = {"session_id": f"s{s}", "input_length": len(blocks) * BLOCK + own,
                   "output_length": int(rng.integers(args.output[0], args.output[1] + 1)), "hash_ids": list(blocks)}
            if turn:
                row["delay"] = round(float(rng.uniform(*args.delay)), 1)
            else:
                row["timestamp"] = round(float(start) * 1000, 1)
            rows.append(row)
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--sessions", type=int, default=60)
    p.add_argument("--start-rate", type=float, default=0.3, help="sessions started per second (Poisson)")
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--system-blocks", type=int, default=4)
    p.add_argument("--delay-ms", type=_span, default=(1000, 4000), dest="delay")
    p.add_argument("--own-tokens", type=_span, default=(64, 256), dest="own")
    p.add_argument("--output-tokens", type=_span, default=(32, 96), dest="output")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(argv)
    rows = session_rows(args)
    Path(args.out).write_text("".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows))
    longest = max(row["input_length"] + row["output_length"] for row in rows)
    print(f"{args.sessions} sessions, {len(rows)} turns; longest prompt + output {longest} tokens; written {args.out}")


if __name__ == "__main__":
    main()

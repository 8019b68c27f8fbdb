"""Where vllm-router's `consistent_hash` sends a chat request with and without a session key: a black-box
probe of the installed wheel (0.1.17 ships the policy compiled; its source revision cannot be read from it).

    python -m lab.servecap.router_session_key [--sessions 6] [--turns 2] [--runs 2] [--policy consistent_hash]

Two emulated replicas (`servecap serve --emulate l4 --model llama-3.1-8b`, named r0 and r1) behind
`vllm-router --policy POLICY` at its defaults; then `--sessions` sessions of `--turns` turns, sent turn by
turn (every session's first turn, then every second turn, ...), one request at a time, each turn a text of
its own (nothing shared). Each session's requests are sent twice: with the load generator's session header
(`x-session-id: s<k>`, contract.workload's --session-header) and with none. A policy that keys on the header
keeps each session on one replica and spreads the sessions; one that hashes the text spreads every request
independently; one that gets neither puts them all on one replica. `--runs` repeats it with fresh replicas
(fresh ports: the ring's points move with the workers' URLs). Prints each request's replica (the answer's
`x-servecap-replica`) and, per run and mode, the sessions kept on one replica and the replicas used.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import string
import sys

import httpx

from servecap.fleet.router import VllmRouter
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

FLAGS = ["--emulate", "l4", "--model", "llama-3.1-8b", "--max-model-len", "4096", "--engine-mode", "thread",
         "--no-classifier"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.servecap.router_session_key",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--turns", type=int, default=2)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--policy", default="consistent_hash")
    p.add_argument("--chars", type=int, default=400)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    rng = random.Random(11)
    for run in range(1, args.runs + 1):
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(ServerProcess(ReferenceServerSpec.from_flags([*FLAGS, "--replica-name",
                                                                                         f"r{k}"])))
                       for k in range(2)]
            router = stack.enter_context(VllmRouter(args.policy))
            for server in servers:
                router.add(server.base_url)
            with httpx.Client(timeout=120) as http:
                for mode in ("header", "none"):
                    landed: dict[int, list[str]] = {s: [] for s in range(args.sessions)}
                    for turn in range(args.turns):
                        for s in range(args.sessions):
                            text = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(args.chars))
                            headers = {"x-session-id": f"s{s}"} if mode == "header" else {}
                            answer = http.post(router.url + "/v1/chat/completions", headers=headers,
                                               json={"model": "llama-3.1-8b", "max_tokens": 4,
                                                     "messages": [{"role": "user", "content": text}]})
                            answer.raise_for_status()
                            landed[s].append(answer.headers.get("x-servecap-replica", "?"))
                    kept = sum(len(set(replicas)) == 1 for replicas in landed.values())
                    used = sorted({r for replicas in landed.values() for r in replicas})
                    print(f"run {run} {args.policy} {mode:>6}: "
                          + " ".join(f"s{s}={','.join(r)}" for s, r in landed.items())
                          + f"; sessions on one replica {kept}/{args.sessions}; replicas used {used}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

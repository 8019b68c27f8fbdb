"""Where vllm-router's `cache_aware` sends a request whose text matches nothing: a black-box probe of the
installed wheel (0.1.17 ships the policy compiled, so its source revision cannot be read from it).

    python -m lab.servecap.router_low_match [--requests 8] [--chars 3000]

Two emulated replicas (`servecap serve --emulate l4 --model llama-3.1-8b`, named r0 and r1, r0 added to
the router first) behind `vllm-router --policy cache_aware` at its defaults; then `--requests` chat
requests, one at a time (each answered before the next is sent), each a text of `--chars` characters that
shares nothing with the others. With every load at 0 when each is sent, the two published rules differ:
- least load (vllm-router's current `cache_aware.rs`: `low_match_min_load`): every tie goes to the first
  healthy worker, so every request lands on r0;
- smallest tree (SGLang's router and its file's own header: "route to the worker with smallest tree
  size"): each request goes to the worker whose tree holds the fewest characters, so of each pair (2k, 2k+1)
  one lands on each worker (the trees are equal before the pair's first, a tie either way).
Prints each request's replica (the answer's `x-servecap-replica`) and which rule the sequence fits.
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
    p = argparse.ArgumentParser(prog="python -m lab.servecap.router_low_match", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--chars", type=int, default=3000)
    p.add_argument("--replicas", type=int, default=2, help="emulated replicas, r0 first (added in that order)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    rng = random.Random(7)
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(ServerProcess(ReferenceServerSpec.from_flags([*FLAGS, "--replica-name", name])))
                   for name in (f"r{k}" for k in range(args.replicas))]
        router = stack.enter_context(VllmRouter("cache_aware"))
        for server in servers:
            router.add(server.base_url)
        print("replicas: " + ", ".join(f"r{k} {server.base_url}" for k, server in enumerate(servers)))
        print(f"the router's worker list: {router.workers()}")
        landed = []
        with httpx.Client(timeout=120) as http:
            for k in range(args.requests):
                text = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(args.chars))
                answer = http.post(router.url + "/v1/chat/completions",
                                   json={"model": "llama-3.1-8b", "max_tokens": 4,
                                         "messages": [{"role": "user", "content": text}]})
                answer.raise_for_status()
                landed.append(answer.headers.get("x-servecap-replica", "?"))
                print(f"request {k}: {landed[-1]}")
    paired = all(landed[k] != landed[k + 1] for k in range(0, len(landed) - 1, 2))
    rule = ("least load (ties to the first worker)" if len(set(landed)) == 1 else
            "smallest tree (each pair split)" if paired else "neither rule alone")
    print(f"replicas: {' '.join(landed)}; fits: {rule}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

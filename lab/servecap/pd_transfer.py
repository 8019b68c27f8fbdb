"""KV transfer time at an emulated decode worker against the prompt's KV bytes over the link (issue 55).

    python -m lab.servecap.pd_transfer [--gpu h100-sxm] [--model llama-3.1-8b] [--link-gbs 10]
        [--prompts 200,500,1000,2000,4000] [--repeats 4]

Starts an emulated prefill worker and decode worker (`servecap serve --emulate GPU --role ...`, the decode
one with `--kv-transfer-gbs`), sends each prompt length `--repeats` times through the PD contract by hand
(the prefill call, then the decode call with its params; one request at a time, so nothing else waits
in the engine), and reads the decode worker's engine record: the wait from the request's blocks' allocation,
when the transfer starts, to its first step (`kv_transfer_s`; `--wait hand-over` counts from the serving
process's hand-over instead, the pipe hop to the engine process included), against (prompt tokens - 1) x KV bytes per token / link. Prints one row per
request and the median and worst |measured / expected - 1|.
"""

from __future__ import annotations

import argparse
import statistics

import httpx

from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--link-gbs", type=float, default=10.0)
    p.add_argument("--prompts", default="200,500,1000,2000,4000")
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--wait", choices=("engine", "hand-over"), default="engine",
                   help="engine: from the blocks' allocation to the first step (the record's kv_transfer_s, what "
                        "the transfer is); hand-over: from the serving process's hand-over (the pipe hop too)")
    p.add_argument("--engine-mode", choices=("process", "thread"), default="process",
                   help="the workers' engine in its own process (the default, a pipe hop before the engine has a "
                        "request) or on a thread")
    args = p.parse_args(argv)
    base = ["--emulate", args.gpu, "--model", args.model, "--no-classifier", "--max-model-len", "8192",
            "--engine-mode", args.engine_mode]
    errors = []
    with ServerProcess(ReferenceServerSpec.from_flags([*base, "--role", "prefill"]), startup_timeout_s=120) as pre, \
            ServerProcess(ReferenceServerSpec.from_flags([*base, "--role", "decode", "--kv-transfer-gbs",
                                                          str(args.link_gbs)]), startup_timeout_s=120) as dec:
        engine = httpx.get(dec.base_url + "/v1/engine", timeout=10).json()
        per_token = engine["kv_block_bytes"] / engine["block_size"]
        print(f"{'prompt':>7} {'KV MB':>8} {'expected ms':>12} {'measured ms':>12} {'error':>8}")
        for length in (int(x) for x in args.prompts.split(",")):
            for k in range(args.repeats):
                body = {"model": args.model, "prompt": f"{k} " + "x" * (length - 3), "max_tokens": 1}
                sent = httpx.post(pre.base_url + "/v1/completions", timeout=60,
                                  json={**body, "kv_transfer_params": {"do_remote_decode": True}}).json()
                got = httpx.post(dec.base_url + "/v1/completions", timeout=60,
                                 json={**body, "max_tokens": 2, "kv_transfer_params": sent["kv_transfer_params"]})
                got.raise_for_status()
                table = httpx.get(dec.base_url + "/v1/engine/requests", timeout=10).json()
                row = dict(zip(table["columns"], table["rows"][-1]))
                prompt_tokens = got.json()["usage"]["prompt_tokens"]
                expected = (prompt_tokens - 1) * per_token / (args.link_gbs * 1e9)
                measured = row["kv_transfer_s"] if args.wait == "engine" else row["t_scheduled"] - row["t_arrival"]
                errors.append(measured / expected - 1)
                print(f"{prompt_tokens:>7} {(prompt_tokens - 1) * per_token / 1e6:>8.1f} {expected * 1e3:>12.2f} "
                      f"{measured * 1e3:>12.2f} {errors[-1]:>+8.1%}")
    worst = max(errors, key=abs)
    print(f"median |measured / expected - 1| {statistics.median(abs(e) for e in errors):.1%}, worst {worst:+.1%} "
          f"over {len(errors)} requests (link {args.link_gbs:g} GB/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What hedging buys behind a router with one slow replica, and what it costs (issue 56).

    python -m lab.loadgen.hedging [--model llama-3.1-8b --emulate h100-sxm] [--slow 4] [--users 4]
        [--duration 15] [--hedge 40ms] [--repeats 3]

Two emulated replicas (`servecap serve --emulate`: no forward pass, so the two cores hold both) behind
`vllm-router --policy round_robin`; replica A is given `--fault slow:factor=F` (every engine step F times as
long), B none. The real `locust` runs a closed loop of `--users` through the router, without and with
`--hedge-after` (the copy also goes through the router, which sends it to whichever replica is next),
alternated `--repeats` times. Prints per run TTFT p50 / p99 of what the users waited, the share of requests
hedged and the copies' extra requests, and the medians of each arm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from servecap.fleet.router import VllmRouter
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

REPO = Path(__file__).resolve().parents[2]


def _locust(host: str, records: Path, users: int, duration: int, hedge: str | None) -> None:
    cmd = [str(Path(sys.executable).with_name("locust")), "-f", str(REPO / "loadgen" / "chat.py"), "--headless",
           "--only-summary", "--host", host, "-u", str(users), "-r", str(users), "-t", f"{duration}s",
           "--prompt-tokens", "256", "--output-tokens", "16", "--warmup", "3s", "--records", str(records)]
    if hedge:
        cmd += ["--hedge-after", hedge]
    subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO, timeout=duration + 120)


def _figures(records: Path) -> dict:
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    measured = [r for r in rows if r["phase"] == "measure"]
    kept = [r for r in measured if r["status"] == "ok"]
    ttft = np.array([r["ttft_s"] for r in kept])
    copies = sum(1 for r in measured if r["hedge"] == "copy")
    pairs = sum(1 for r in measured if r["hedge"] == "primary")
    users_requests = len([r for r in measured if r["hedge"] != "copy"])
    return {"requests": users_requests, "ttft_p50_ms": float(np.percentile(ttft, 50) * 1e3),
            "ttft_p99_ms": float(np.percentile(ttft, 99) * 1e3), "hedged_share": pairs / max(users_requests, 1),
            "extra_requests": copies / max(users_requests, 1),
            "copies_kept": sum(1 for r in kept if r["hedge"] == "copy"),
            "statuses": dict(sorted({s: sum(1 for r in measured if r["status"] == s)
                                     for s in {r["status"] for r in measured}}.items()))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="llama-3.1-8b")
    p.add_argument("--emulate", default="h100-sxm")
    p.add_argument("--slow", type=float, default=4.0)
    p.add_argument("--users", type=int, default=4)
    p.add_argument("--duration", type=int, default=15)
    p.add_argument("--hedge", default="40ms")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    base = ["--emulate", args.emulate, "--model", args.model, "--no-classifier", "--max-model-len", "4096"]
    out: dict = {"runs": []}
    with tempfile.TemporaryDirectory() as tmp, \
            ServerProcess(ReferenceServerSpec.from_flags([*base, "--fault", f"slow:factor={args.slow:g}"]),
                          startup_timeout_s=120) as slow, \
            ServerProcess(ReferenceServerSpec.from_flags(base), startup_timeout_s=120) as fast, \
            VllmRouter("round_robin", log_path=Path(tmp) / "router.log") as router:
        router.add(slow.base_url)
        router.add(fast.base_url)
        for k in range(args.repeats):
            for hedge in (None, args.hedge):
                records = Path(tmp) / f"r{k}-{hedge or 'none'}.jsonl"
                _locust(router.url, records, args.users, args.duration, hedge)
                figures = {"repeat": k, "hedge": hedge, **_figures(records)}
                out["runs"].append(figures)
                print(json.dumps(figures), file=sys.stderr)
    for hedge in (None, args.hedge):
        arm = [r for r in out["runs"] if r["hedge"] == hedge]
        out[hedge or "none"] = {key: statistics.median(r[key] for r in arm)
                                for key in ("ttft_p50_ms", "ttft_p99_ms", "hedged_share", "extra_requests")}
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1) if not args.json else json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

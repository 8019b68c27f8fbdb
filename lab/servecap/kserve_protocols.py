"""KServe V2 over REST (JSON) against gRPC (raw tensor bytes), at 1 and 64 rows per request, in one run.

One reference server serves both protocols (its classifier: max batch 64, batching on with no queue
delay, so each request runs as it comes). Locust runs each arm in turn at the same concurrency, the
four arms interleaved in every round, ROUNDS rounds; each arm's figures are its median over rounds,
with the range, and the ratio REST/gRPC is taken within each round.

    python -m lab.servecap.kserve_protocols --out lab/results/kserve_protocols/DATE
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from contract.records import read_records
from loadgen.locust_command import CLASSIFY_LOCUSTFILE, locust_executable
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

ARMS = [(rows, protocol) for rows in (1, 64) for protocol in ("rest", "grpc")]


def run_arm(server: ServerProcess, rows: int, protocol: str, users: int, seconds: int, records: Path,
            level: str) -> dict:
    command = [*locust_executable(), "-f", str(CLASSIFY_LOCUSTFILE), "--headless", "--only-summary",
               "--host", server.base_url, "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
               "--exit-code-on-error", "0", "--protocol", protocol, "--grpc-target", server.grpc_target,
               "--rows", str(rows), "--records", str(records), "--level", level, "--warmup", "2"]
    subprocess.run(command, check=True, capture_output=True, timeout=seconds + 60)
    ok = [r for r in read_records(records) if r["level"] == level and r["phase"] == "measure" and r["status"] == "ok"]
    e2e = np.array([r["e2e_s"] for r in ok])
    span = max(r["t_start"] + r["e2e_s"] for r in ok) - min(r["t_start"] for r in ok)
    return {"requests": len(ok), "req_per_s": len(ok) / span, "p50_ms": float(np.percentile(e2e, 50)) * 1e3,
            "p99_ms": float(np.percentile(e2e, 99)) * 1e3}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=8)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = ReferenceServerSpec.from_flags(["--model", "tiny", "--grpc-port", "0", "--classifier-max-batch-size", "64",
                                           "--classifier-max-queue-delay-us", "0"])
    results: dict[str, list[dict]] = {f"{p}/rows={r}": [] for r, p in ARMS}
    with ServerProcess(spec, log_path=out / "server.log") as server:
        for round_index in range(args.rounds):
            arms = ARMS if round_index % 2 == 0 else ARMS[::-1]   # serpentine: drift falls on both sides
            for rows, protocol in arms:
                arm = f"{protocol}/rows={rows}"
                figures = run_arm(server, rows, protocol, args.users, args.seconds, out / "requests.jsonl",
                                  f"{arm}/round={round_index}")
                results[arm].append(figures)
                print(f"round {round_index} {arm}: {figures['req_per_s']:.0f} req/s, p50 {figures['p50_ms']:.2f} ms, "
                      f"p99 {figures['p99_ms']:.2f} ms", flush=True)
    summary = {}
    for rows in (1, 64):
        rest, grpc = results[f"rest/rows={rows}"], results[f"grpc/rows={rows}"]
        for name, runs in (("rest", rest), ("grpc", grpc)):
            summary[f"{name}/rows={rows}"] = {key: {"median": statistics.median(r[key] for r in runs),
                                                    "min": min(r[key] for r in runs), "max": max(r[key] for r in runs)}
                                              for key in ("req_per_s", "p50_ms", "p99_ms")}
        ratios = [g["req_per_s"] / r["req_per_s"] for r, g in zip(rest, grpc)]
        summary[f"grpc_over_rest_throughput/rows={rows}"] = {"median": statistics.median(ratios),
                                                             "min": min(ratios), "max": max(ratios)}
    (out / "summary.json").write_text(json.dumps({"rounds": results, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

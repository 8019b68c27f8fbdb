"""A synthetic run directory in the DESIGN.md format, for the report benchmark and demos.

Latency grows with offered load like a server that saturates at `knee`
concurrent streams: TPOT ~ base x max(1, c / knee), TTFT adds queueing past the
knee. One JSON line per request, exactly the schema loadgen writes; samples.csv
holds host and one fake GPU with power; server_metrics.csv holds the servecap
gauges and the batch-size and step-time histograms' _sum/_count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from contract.records import RECORDS_FILE, Record
from contract.run_json import Host, LevelEntry, RunInfo, Server, write_run_json

SECOND_PER_LEVEL_GAP = 2.0


def _level_records(rng, level: str, c: int, n: int, t0: float, knee: int, strategy_speed: float):
    out_tokens = rng.integers(8, 25, n)
    load = max(1.0, c / knee)
    tpot = 0.004 * load / strategy_speed * rng.lognormal(0, 0.15, n)
    ttft = (0.02 + 0.01 * max(0.0, c - knee)) * rng.lognormal(0, 0.3, n)
    e2e = ttft + tpot * (out_tokens - 1)
    duration = n * float(e2e.mean()) / c
    t_start = np.sort(t0 + rng.uniform(0, duration, n))
    status = np.where(rng.random(n) < 0.002, "http_503", "ok")
    warm = np.arange(n) < max(1, n // 50)
    ids = rng.integers(0, 2**63, n)
    lines = []
    for i in range(n):
        ok = status[i] == "ok"
        gaps = tpot[i] * rng.gamma(8.0, 1 / 8.0, out_tokens[i] - 1) if ok else []
        worker = f"worker{i % 4}@bench:{4000 + i % 4}"
        lines.append(Record(  # full-precision floats and loadgen's extra fields, as loadgen writes them
            level=level, phase="warmup" if warm[i] else "measure",
            t_start=float(t_start[i]), ttft_s=float(ttft[i]) if ok else None,
            e2e_s=float(e2e[i]), itl_s=[float(g) for g in gaps],
            prompt_tokens=64, output_tokens=int(out_tokens[i]) if ok else 0,
            status=str(status[i]), error=None if ok else "server overloaded",
            worker=worker, response_id=f"chatcmpl-{ids[i]:032x}",
            request_id=f"{worker}#{i}", api="chat", prompt_tokens_asked=64,
            output_tokens_asked=int(out_tokens[i]), usage_from="server",
        ).to_json_line().decode().rstrip("\n"))
    return lines, t0, t0 + duration + float(e2e.max())


def write_synthetic_run(run_dir: str | Path, records: int = 20_000,
                        strategies: tuple[str, ...] = ("none", "continuous"),
                        concurrencies: tuple[int, ...] = (1, 2, 4, 8, 16, 32), seed: int = 0) -> Path:
    """Write run.json, requests.jsonl, samples.csv, server_metrics.csv; return the directory."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    levels = [(s, c) for s in strategies for c in concurrencies]
    per_level = [records // len(levels) + (i < records % len(levels)) for i in range(len(levels))]
    t = 1_700_000_000.0
    windows, samples, metrics = [], [], []
    with open(run_dir / RECORDS_FILE, "w") as f:
        for (strategy, c), count in zip(levels, per_level):
            level = f"{strategy}/c={c}"
            speed = 1.0 if strategy == "none" else 3.0
            knee = 1 if strategy == "none" else 8
            lines, start, end = _level_records(rng, level, c, max(count, 1), t, knee, speed)
            f.write("\n".join(lines) + "\n")
            windows.append((level, start, end, min(c, knee if strategy == "continuous" else 1)))
            t = end + SECOND_PER_LEVEL_GAP
    batch_sum = batch_count = step_sum = 0.0
    for level, start, end, batch in windows:
        for ts in np.arange(start, end, 0.5):
            samples.append((ts, "host", "", 50 + 40 * batch / 8, 2e9, 16e9, None, None, None))
            samples.append((ts, "nvml", "0", 30 + 60 * batch / 8, 20e9 + 1e9 * batch, 80e9, 150 + 40 * batch, 1980, 60))
        for ts in np.arange(start, end, 1.0):
            steps = 100.0
            batch_sum, batch_count, step_sum = batch_sum + steps * batch, batch_count + steps, step_sum + steps * 0.01
            metrics += [(ts, "servecap_requests_running", "", batch), (ts, "servecap_requests_waiting", "", 0),
                        (ts, "servecap_kv_blocks_used", "", 4 * batch), (ts, "servecap_kv_blocks_total", "", 512),
                        (ts, "servecap_batch_size_sum", "", batch_sum), (ts, "servecap_batch_size_count", "", batch_count),
                        (ts, "servecap_engine_step_seconds_sum", "", step_sum),
                        (ts, "servecap_engine_step_seconds_count", "", batch_count)]
    pd.DataFrame(samples, columns=["t", "source", "device", "util_pct", "mem_used_bytes", "mem_total_bytes",
                                   "power_w", "sm_clock_mhz", "temp_c"]).to_csv(run_dir / "samples.csv", index=False)
    pd.DataFrame(metrics, columns=["t", "name", "labels", "value"]).to_csv(run_dir / "server_metrics.csv", index=False)
    engines = {strategy: {"strategy": strategy, "strategy_limits": {"max_num_seqs": 32} if strategy == "continuous"
                          else {}} for strategy in strategies}
    run = RunInfo(name=run_dir.name, extra={"synthetic": True},
                  server=Server(model="tiny", strategies=list(strategies), engines=engines, dtype="float32",
                                block_size=16, kv_blocks=512),
                  host=Host(gpus=["NVIDIA H100 80GB HBM3"]),
                  levels=[LevelEntry(level=level) for level, *_ in windows])
    write_run_json(run_dir / "run.json", run)
    return run_dir

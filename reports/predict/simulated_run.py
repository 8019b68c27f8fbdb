"""A run directory made by the simulator: a "measurement" whose true model is known.

`write_simulated_run(run_dir, model, front_end, strategy=..., concurrencies=...)` simulates each
closed-loop level (or, given `rates`, each open-loop level of Poisson arrivals) with `model` (a
StepTimeModel, its jitter included) and the front-end delays, then writes what a sweep of the reference server would have: run.json, requests.jsonl (the
client's view), engine_steps.csv and engine_requests.csv (the engine's). Levels follow each other
in time. The leave-one-level-out validation on such a run must find (almost) no error (tests),
and a notebook without a measured run can calibrate on one (`sample_run`: a model and delays
like the tiny preset's on a 2-core CPU, labelled as simulated).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from calculators.sim.front_end import FrontEnd
from calculators.sim.simulate import SimServer, SimWorkload, simulate_trace
from calculators.sim.step_model import StepTimeModel
from contract.engine_record import REQUEST_COLUMNS, REQUESTS_FILE, STEP_COLUMNS, STEPS_FILE
from contract.records import RECORDS_FILE, Record

T0 = 1_700_000_000.0
LEVEL_GAP_S = 5.0


def write_simulated_run(run_dir: Path, model: StepTimeModel, front_end: FrontEnd | None, *,
                        strategy: str = "continuous", limits: dict | None = None,
                        concurrencies: tuple[int, ...] = (1, 2, 4, 8, 16), warmup_s: float = 2.0,
                        duration_s: float = 30.0, lengths: tuple[tuple[int, ...], ...] = (), seed: int = 0,
                        rates: tuple[float, ...] = ()) -> Path:
    """`lengths`: (prompt, output) pairs, or (prompt, output, reasoning) triples: a reasoning model, whose
    records carry the reasoning and answer tokens and the first answer token's time as the load generator's do."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    limits = limits or {}
    server = SimServer.from_flags(strategy, **limits)
    lengths = lengths or tuple(zip(np.random.default_rng(seed).integers(16, 64, 500).tolist(),
                                   np.random.default_rng(seed + 1).integers(8, 32, 500).tolist()))
    reasoning_run = any(len(row) == 3 for row in lengths)
    records, steps, engine_requests = [], [], []
    t0 = T0
    loads = [("rps", r) for r in rates] or [("c", c) for c in concurrencies]
    for k, (kind, value) in enumerate(loads):
        level = f"{strategy}/{kind}={value}"
        c = int(value) if kind == "c" else 0
        offered = {"concurrency": c} if kind == "c" else {"rate_rps": float(value)}
        workload = SimWorkload(lengths=lengths, requests=int(50 * value) + 2000, warmup_s=warmup_s,
                            duration_s=duration_s, seed=seed + (c if kind == "c" else 1000 + k), **offered)
        log: list[tuple[float, float, object]] = []
        trace = simulate_trace(server, workload, model, front_end, on_step=lambda s, d, shape: log.append((s, d, shape)))
        restarts = [j for j in range(1, len(log)) if log[j][0] < log[j - 1][0]]
        log = log[restarts[-1]:] if restarts else log   # a window that needed more requests ran again from 0
        _append_steps(steps, log, t0, strategy)
        horizon = warmup_s + duration_s
        for i in range(len(trace.prompt)):
            if not trace.client_send[i] and i >= c or trace.client_send[i] >= horizon:   # not sent before the window closed
                continue
            done = np.isfinite(trace.end[i]) and trace.end[i] + trace.last_out[i] <= horizon
            ttft, e2e = float(trace.client_ttft()[i]), float(trace.client_e2e()[i])
            out, reasoning = int(trace.output[i]), int(trace.reasoning[i])
            ttfa = float(trace.client_ttfa()[i])
            reasons = dict(reasoning_tokens=reasoning, answer_tokens=out - reasoning) if reasoning_run and done else {}
            rid = f"sim-{c}-{i}"
            records.append(Record(
                level=level, phase="warmup" if trace.client_send[i] < warmup_s else "measure",
                t_start=t0 + float(trace.client_send[i]), ttft_s=ttft if done else None, e2e_s=e2e if done else None,
                itl_s=[(e2e - ttft) / (out - 1)] * (out - 1) if done and out > 1 else [],
                ttfa_s=ttfa if done and np.isfinite(ttfa) else None, **reasons,
                prompt_tokens=int(trace.prompt[i]), output_tokens=out if done else None,
                status="ok" if done else "incomplete", worker="sim", response_id=rid).to_json_line())
            if done:
                engine_requests.append([strategy, len(engine_requests) + 1, rid, int(trace.prompt[i]), out,
                                        t0 + trace.arrival[i], t0 + trace.arrival[i], t0 + trace.first_token[i],
                                        t0 + trace.end[i], 0, 0, "length", "", 0.0])
        t0 += horizon + LEVEL_GAP_S
    (run_dir / RECORDS_FILE).write_bytes(b"".join(records))
    _write_csv(run_dir / STEPS_FILE, STEP_COLUMNS, steps)
    _write_csv(run_dir / REQUESTS_FILE, REQUEST_COLUMNS, engine_requests)
    engine = {"strategy": strategy, "strategy_limits": server.limits.describe(), "block_size": 16,
              "model": "tiny", "dtype": "float32"}
    run = {"name": run_dir.name, "status": "complete", "target": {"kind": "reference_server"},
           "notes": ["simulated: the servecap simulator played the server (reports.predict.simulated_run)"],
           "server": {"model": "tiny", "strategies": [strategy], "engines": {strategy: engine}, "block_size": 16},
           "load_plan": ({"kind": "open", "rates": list(rates), "arrival": "poisson"} if rates else
                         {"kind": "closed", "concurrency": list(concurrencies), "arrival": "closed"})
                        | {"warmup_s": warmup_s, "duration_s": duration_s},
           "levels": [{"level": f"{strategy}/{kind}={value}", "strategy": strategy, "load": value, "status": "ok"}
                      for kind, value in loads]}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def sample_run(run_dir: Path, *, concurrencies: tuple[int, ...] = (1, 2, 4, 8), duration_s: float = 6.0) -> Path:
    """A small simulated run of continuous batching, with step costs of the order of the tiny preset's on a CPU."""
    rng = np.random.default_rng(13)
    model = StepTimeModel(base_s=0.00095, per_seq_s=0.00009, per_prefill_token_s=1.1e-5, per_context_token_s=1.5e-7,
                          batch_table=(0.00095, 0.00108, 0.00125, 0.00133), jitter=tuple(rng.lognormal(0, 0.12, 4000)),
                          jitter_block=16)
    front = FrontEnd(tuple(rng.gamma(3, 0.0005, 500)), tuple(rng.gamma(3, 0.0004, 500)),
                     tuple(rng.gamma(3, 0.0003, 500)), think_s=0.0005)
    return write_simulated_run(run_dir, model, front, limits={"max_num_seqs": 32}, concurrencies=concurrencies,
                               duration_s=duration_s)


def _append_steps(rows: list, log: list, t0: float, source: str) -> None:
    for j, (start, duration, shape) in enumerate(log):
        following = log[j + 1][0] if j + 1 < len(log) else None
        idle_after = following is None or following > start + duration
        rows.append([source, len(rows) + 1, t0 + start, duration, shape.sequences, shape.prefill_tokens,
                     shape.decode_seqs, shape.context_tokens, 0, 0, 0, 0, idle_after, shape.proposal_tokens, 0,
                     shape.lora_adapters, shape.lora_tokens, 0, 0.0])


def _write_csv(path: Path, columns: tuple[str, ...], rows: list) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows(rows)

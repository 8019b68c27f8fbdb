"""Synthetic compare run directories (the files `servecap compare` writes) with a known effect."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from contract.records import RecordWriter
from contract.run_json import ArmInfo, CompareInfo, Look, RunInfo, Target, write_run_json


def write_compare_dir(path: Path, *, pairs: int = 20, effect: float = 0.0, noise: float = 0.03, seed: int = 0,
                      requests_per_slice: int = 30, thresholds: dict | None = None, cpu_effect: float = 0.0,
                      reasoning: int = 0) -> Path:
    """B's TPOT (and so E2E) is `effect` higher than A's, slice by slice, under shared slow drift. With
    `reasoning`, each stream's first `reasoning` tokens reason: its answer starts that many TPOTs after TTFT."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    t, slice_index = 1.8e9, 0
    with RecordWriter(path / "requests.jsonl") as records, open(path / "slices.jsonl", "w") as log:
        for pair in range(pairs):
            drift = np.exp(0.02 * pair + rng.normal(0, noise))   # the machine gets slower over the run
            order = ("a", "b") if rng.random() < 0.5 else ("b", "a")
            for arm in order:
                factor = drift * (1 + effect if arm == "b" else 1.0) * np.exp(rng.normal(0, noise))
                start, tokens = t, 0
                for k in range(requests_per_slice):
                    out = 32
                    tpot = 0.002 * factor * rng.lognormal(0, 0.05)
                    ttft = 0.010 * factor * rng.lognormal(0, 0.05)
                    records.write({"level": f"{arm}/c=4", "phase": "measure", "t_start": t, "ttft_s": ttft,
                                   "e2e_s": ttft + tpot * (out - 1), "itl_s": [tpot] * (out - 1),
                                   "prompt_tokens": 64, "output_tokens": out, "status": "ok", "arm": arm,
                                   "slice": slice_index, "ttfa_s": ttft + tpot * reasoning,
                                   **({"reasoning_tokens": reasoning, "answer_tokens": out - reasoning}
                                      if reasoning else {})})
                    t += 0.05
                    tokens += out
                cpu = tokens * 1e-4 * factor * (1 + cpu_effect if arm == "b" else 1.0)
                log.write(json.dumps({"slice": slice_index, "pair": pair, "arm": arm, "phase": "measure",
                                      "t_start": start, "t_end": t, "t_drained": t + 0.1, "sent": requests_per_slice,
                                      "drained": 0, "excluded": 0, "cpu_s": cpu}) + "\n")
                slice_index += 1
                t += 0.2
    info = RunInfo(name=path.name, status="complete", target=Target(kind="compare"),
                   compare=CompareInfo(arms={"a": ArmInfo(kind="url", url="http://127.0.0.1:1"),
                                             "b": ArmInfo(kind="url", url="http://127.0.0.1:2")},
                                       concurrency=4, slice_s=2.0, alpha=0.05,
                                       thresholds=thresholds or {"tpot_s.p50": 0.05, "e2e_s.p50": 0.05,
                                                                 "ttft_s.p50": 0.05},
                                       looks=[Look(pairs=pairs, alpha=0.05)]))
    write_run_json(path / "run.json", info)
    return path

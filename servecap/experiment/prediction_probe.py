"""A classify sweep's quality check: the same seeded rows through each server configuration it ran.

After a configuration's levels, PROBE_ROWS seeded rows go to its V2 model as one-row requests,
PROBE_CONCURRENCY at a time, so its batcher forms batches as it does under load (with batching off,
each runs alone). Their probabilities go to RUN/predictions-LABEL.npy; the report compares the
configurations row by row (`reports.classic.predictions`): labels identical or not, and by how much
the probabilities differ.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import requests

from contract.classic_run import PREDICTIONS_PREFIX

PROBE_ROWS = 256
PROBE_CONCURRENCY = 16
PROBE_SEED_OFFSET = 7919   # the probe's rows are drawn apart from the load's


def probe_rows(features: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + PROBE_SEED_OFFSET).normal(size=(PROBE_ROWS, features)).astype(np.float32)


def probe_predictions(url: str, model: str, seed: int, out_dir: Path, label: str) -> Path:
    """Send the probe through `url`'s `model`, write its probabilities [PROBE_ROWS, C] and return the file."""
    meta = requests.get(f"{url}/v2/models/{model}", timeout=30).json()
    rows = probe_rows(int(meta["inputs"][0]["shape"][-1]), seed)

    def one(row: np.ndarray) -> list[float]:
        body = {"inputs": [{"name": meta["inputs"][0]["name"], "shape": [1, row.size], "datatype": "FP32",
                            "data": row.tolist()}], "outputs": [{"name": "probabilities"}]}
        response = requests.post(f"{url}/v2/models/{model}/infer", json=body, timeout=60)
        response.raise_for_status()
        return response.json()["outputs"][0]["data"]

    with ThreadPoolExecutor(PROBE_CONCURRENCY) as pool:
        probs = np.asarray(list(pool.map(one, rows)), dtype=np.float32)
    path = Path(out_dir) / f"{PREDICTIONS_PREFIX}{label}.npy"
    np.save(path, probs)
    return path

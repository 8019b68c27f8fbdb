"""Predicted vs measured for one level: the calculators' numbers next to what the run measured.

Reads the server configuration from run.json's `server` object (the keys of
`servecap serve`'s EngineConfig: model, dtype, block_size, kv_blocks, max_num_seqs)
and, for step time, a GPU from run.json's host or `server.gpu`. Each comparison
is {"predicted", "measured", "relative_error" = predicted / measured - 1, "unit"};
a quantity that cannot be predicted or was not measured is left out and the
reason listed under `unavailable`.
"""

from __future__ import annotations

import math

from calculators.gpus import get_gpu
from calculators.kv import kv_block_bytes
from calculators.models import get_model
from calculators.roofline import roofline
from reports.cost import catalog_gpu_for, run_gpus


def _pair(predicted: float | None, measured: float | None, unit: str) -> dict:
    rel = None
    if predicted is not None and measured:
        rel = predicted / measured - 1.0
    return {"predicted": predicted, "measured": measured, "relative_error": rel, "unit": unit}


def _gpu_spec(run: dict, server: dict):
    name = server.get("gpu") or next((c for c in map(catalog_gpu_for, run_gpus(run)) if c), None)
    return get_gpu(name) if name else None


def _running_capacity(server: dict, level: dict, measured: dict, block_size: int) -> tuple[int | None, str]:
    strategy = level.get("strategy") or server.get("strategy")
    caps = {"none": 1, "static": server.get("batch_size"), "dynamic": server.get("max_batch_size")}
    if strategy in caps:
        cap = caps[strategy]
    elif strategy == "continuous":
        blocks_total = server.get("kv_blocks") or measured.get("kv_blocks_total")
        tokens = (level.get("prompt_tokens_mean") or 0) + (level.get("output_tokens_mean") or 0)
        if not blocks_total or not tokens:
            return None, "no KV block count (run.json server.kv_blocks or the servecap_kv_blocks_total gauge)"
        cap = int(blocks_total) // math.ceil(tokens / block_size)
        if server.get("max_num_seqs"):
            cap = min(cap, int(server["max_num_seqs"]))
    else:
        return None, f"unknown strategy {strategy!r}"
    if cap is None:
        return None, f"run.json server config lacks the {strategy} batch size"
    offered = level["offered"].get("concurrency")
    return (min(int(cap), int(offered)) if offered else int(cap)), ""


def predict_level(run: dict, level: dict) -> dict:
    """{"model", "comparisons": {quantity: pair}, "unavailable": [reasons]} for summary.json's `predicted`."""
    server = run.get("server") if isinstance(run.get("server"), dict) else {}
    if not server.get("model"):
        return {"unavailable": ["run.json has no server.model: nothing to predict from"]}
    try:
        arch = get_model(str(server["model"]))
    except ValueError as exc:
        return {"unavailable": [str(exc)]}
    dtype = str(server.get("dtype") or "bf16")
    kv_dtype = str(server.get("kv_dtype") or dtype)
    block_size = int(server.get("block_size") or 16)
    measured = level["server"]
    comparisons, unavailable = {}, []

    # KV bytes of one paged block (all layers, K and V) vs the server's own gauge
    predicted_block = kv_block_bytes(arch, kv_dtype, block_size)
    comparisons["kv_block_bytes"] = _pair(float(predicted_block), measured.get("kv_block_bytes"), "bytes")

    # running sequences: the strategy's batch cap, the KV cache at this level's mean request
    # length and max_num_seqs (continuous), and the offered concurrency, whichever binds first
    capacity, why = _running_capacity(server, level, measured, block_size)
    if capacity is not None:
        comparisons["running_sequences_peak"] = _pair(float(capacity), measured.get("requests_running_max"),
                                                      "sequences")
    else:
        unavailable.append(f"running sequences: {why}")

    # decode step time: roofline at the measured mean batch and context
    gpu = _gpu_spec(run, server)
    batch = measured.get("batch_size_mean")
    if gpu is None:
        unavailable.append("decode step time: no catalog GPU for this run (CPU run, or give server.gpu)")
    elif batch is None:
        unavailable.append("decode step time: no servecap_batch_size histogram in server_metrics.csv")
    else:
        context = int((level.get("prompt_tokens_mean") or 0) + (level.get("output_tokens_mean") or 0) / 2)
        step = roofline(arch, gpu, dtype=dtype, batch=max(1, round(batch)), context=context)
        comparisons["decode_step_s"] = _pair(step.decode_step_s, measured.get("step_time_mean_s"), "s")
    return {"model": arch.name, "dtype": dtype, "block_size": block_size,
            "comparisons": comparisons, "unavailable": unavailable}

"""Latency per model in a multi-model run (`--model-mix`: LoRA adapters beside the base), and what cold
adapters cost: the queue time a request spent passed over because its adapter had no free slot.

    by_model(ok, engine_requests) -> {model (the busiest first): ModelStats} | None
    slot_waits(ok, engine_requests) -> SlotWaits | None       (contract.level_result)

A level's ok measure records carry the model they asked for (`model`); the engine's request record
(engine_requests.csv) carries each request's slot wait (`lora_wait_s`) and joins by response id. None
when the run drew no models (or, for the waits, the server kept no request record).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from contract.level_result import ModelSlotWait, ModelStats, PercentilePair, SlotWaits


def _p(values: np.ndarray, q: float) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if len(values) else None


def _waits(ok: pd.DataFrame, engine_requests: pd.DataFrame | None) -> pd.Series | None:
    """Each ok record's slot wait (s), by the record's index; None without the engine's request record."""
    if engine_requests is None or "lora_wait_s" not in engine_requests or ok["response_id"].isna().all():
        return None
    wait = engine_requests.drop_duplicates("response_id").set_index("response_id")["lora_wait_s"]
    return ok["response_id"].map(pd.to_numeric(wait, errors="coerce"))


def slot_waits(ok: pd.DataFrame, engine_requests: pd.DataFrame | None) -> SlotWaits | None:
    if "model" not in ok or ok["model"].isna().all():
        return None
    waits = _waits(ok, engine_requests)
    if waits is None or waits.isna().all():
        return None
    known = waits.dropna()
    waited = known > 0
    ttft = ok.loc[known.index, "ttft_s"].to_numpy(dtype=float)
    of_waited = known[waited].to_numpy(dtype=float)
    return SlotWaits(requests=int(len(known)), waited_share=float(waited.mean()),
                     wait_p50_s=_p(of_waited, 50), wait_p99_s=_p(of_waited, 99),   # of the requests that waited
                     wait_mean_s=float(known.mean()),
                     ttft_p50_waited_s=_p(ttft[waited.to_numpy()], 50),
                     ttft_p50_not_waited_s=_p(ttft[~waited.to_numpy()], 50))


def by_model(ok: pd.DataFrame, engine_requests: pd.DataFrame | None) -> dict[str, ModelStats] | None:
    if "model" not in ok or ok["model"].isna().all():
        return None
    waits = _waits(ok, engine_requests)
    out = {}
    models = ok["model"].astype(object).fillna("")
    for model in models.value_counts(sort=True).index:   # the busiest first
        group = ok[models == model]
        pairs = {}
        for metric in ("ttft_s", "tpot_s", "e2e_s"):
            values = group[metric].to_numpy(dtype=float)
            pairs[metric] = PercentilePair(p50=_p(values, 50), p99=_p(values, 99))
        slot_wait = None
        if waits is not None:
            mine = waits.loc[group.index].dropna().to_numpy(dtype=float)
            if len(mine):
                slot_wait = ModelSlotWait(waited_share=float((mine > 0).mean()), mean_s=float(mine.mean()),
                                          p99_s=_p(mine, 99))
        out[str(model)] = ModelStats(requests=int(len(group)), slot_wait=slot_wait, **pairs)
    return out

"""Price the operating point: dollars per 1M tokens from an hourly GPU price.

The price comes from `--gpu-hourly` or, failing that, from the calculators'
GPU catalog for the GPU named by `--gpu` or found in run.json's host section.
"""

from __future__ import annotations

from calculators.cost import usd_per_million_tokens
from engine_core.gpus import catalog_gpu_for, get_gpu
from contract.run_json import RunInfo
from contract.summary import OperatingPoint

def resolve_price(run: RunInfo, gpu_hourly: float | None, gpu: str | None) -> dict:
    """{"hourly_usd", "num_gpus", "source"} or {"unavailable": why}."""
    names = run.host.gpu_names()
    num_gpus = max(len(names), 1)
    if gpu_hourly is not None:
        return {"hourly_usd": gpu_hourly, "num_gpus": num_gpus, "source": "--gpu-hourly (per GPU)"}
    catalog_id = gpu or next((c for c in map(catalog_gpu_for, names) if c), None)
    if catalog_id is None:
        why = "no GPU in run.json" if not names else f"GPU {names[0]!r} is not in the catalog"
        return {"unavailable": f"{why}; give --gpu-hourly or --gpu NAME"}
    spec = get_gpu(catalog_id)
    if spec.hourly_usd is None:
        return {"unavailable": f"catalog GPU {catalog_id!r} has no price; give --gpu-hourly"}
    return {"hourly_usd": spec.hourly_usd, "num_gpus": num_gpus, "source": f"catalog price of {catalog_id}"}


def cost_per_million(point: OperatingPoint, price: dict) -> dict:
    """USD per 1M output tokens (and per 1M prompt+output tokens) at the point's throughput.

    usd_per_1m = 1e6 x hourly_usd x num_gpus / (3600 x tokens_per_s)  (calculators.cost).
    """
    if "unavailable" in price:
        return dict(price)
    out = dict(price)
    for key, rate in (("usd_per_1m_output_tokens", point.output_tokens_per_s),
                      ("usd_per_1m_total_tokens", point.total_tokens_per_s)):
        out[key] = usd_per_million_tokens(price["hourly_usd"], price["num_gpus"], rate) if rate else None
    out["level"] = point.level
    return out

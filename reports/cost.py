"""Price the operating point: dollars per 1M tokens from an hourly GPU price.

The price comes from `--gpu-hourly` or, failing that, from the calculators'
GPU catalog for the GPU named by `--gpu` or found in run.json's host section.
"""

from __future__ import annotations

from calculators.cost import usd_per_million_tokens
from calculators.gpus import get_gpu
from servecap.contract.run_json import RunInfo

# NVML device-name fragments -> GPU catalog id, most specific first
_NVML_NAMES = (
    (("h200",), "h200"), (("h100", "pcie"), "h100-pcie"), (("h100",), "h100-sxm"),
    (("a100", "80"), "a100-80gb"), (("a100",), "a100-40gb"), (("b200",), "b200"),
    (("a10g",), "a10g"), (("l4",), "l4"), (("t4",), "t4"), (("mi300x",), "mi300x"),
)


def catalog_gpu_for(device_name: str) -> str | None:
    """Catalog id for an NVML device name (`NVIDIA H100 80GB HBM3` -> `h100-sxm`), None if unknown."""
    words = device_name.lower().replace("-", " ").replace("_", " ").split()

    def has(fragment: str) -> bool:  # a whole word, or a number prefixing one ("80" in "80gb")
        return any(w == fragment or (fragment.isdigit() and w.startswith(fragment)) for w in words)

    for fragments, catalog_id in _NVML_NAMES:
        if all(has(f) for f in fragments):
            return catalog_id
    return None


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


def cost_per_million(point: dict, price: dict) -> dict:
    """USD per 1M output tokens (and per 1M prompt+output tokens) at the point's throughput.

    usd_per_1m = 1e6 x hourly_usd x num_gpus / (3600 x tokens_per_s)  (calculators.cost).
    """
    if "unavailable" in price:
        return dict(price)
    out = dict(price)
    for key, rate in (("usd_per_1m_output_tokens", point["output_tokens_per_s"]),
                      ("usd_per_1m_total_tokens", point["total_tokens_per_s"])):
        out[key] = usd_per_million_tokens(price["hourly_usd"], price["num_gpus"], rate) if rate else None
    out["level"] = point["level"]
    return out

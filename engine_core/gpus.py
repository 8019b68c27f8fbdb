"""GPU catalog: memory, bandwidth, peak compute, interconnect and an assumed hourly price per accelerator.

Figures come from vendor datasheets (dense peaks, no 2:4 sparsity) and live in
``catalog/gpus.json``; ``usable_bytes`` is the total the driver reports, which is
what vLLM multiplies by ``--gpu-memory-utilization``. ``interconnect_bytes_per_s`` is
GPU-to-GPU bandwidth in one direction (NVLink, or PCIe where a card has no NVLink), what
the tensor-parallel all-reduce term of ``calculators.roofline`` divides by; the JSON's
``_interconnect_sources`` names the datasheet of each. Hourly prices are assumptions
(typical on-demand cloud prices), meant to be overridden.
The ``cpu`` entry has no numbers: the caller supplies them as overrides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

from contract.options import option, options_from_args, parse_float
from engine_core.dtypes import DType

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator.

    Attributes:
        name: catalog id (``h100-sxm``).
        marketed_bytes: the datasheet capacity (GB are binary for HBM parts).
        usable_bytes: total memory the driver reports.
        bandwidth_bytes_per_s: peak memory bandwidth.
        flops_fp32, flops_16bit, flops_fp8, ops_int8, flops_fp4: dense peaks per second; None = no hardware
            support (or, for flops_fp4, none in the catalog).
        hourly_usd: assumed price per GPU-hour, None when unknown.
        family: architecture generation whose kernels reach similar efficiencies (``hopper``), None if unknown.
        interconnect: ``nvlink``, ``pcie`` or ``infinity-fabric``; None for a lone device.
        interconnect_bytes_per_s: GPU-to-GPU bandwidth, one direction; None when unknown.
    """

    name: str
    marketed_bytes: int
    usable_bytes: int
    bandwidth_bytes_per_s: float
    flops_fp32: float
    flops_16bit: float
    flops_fp8: float | None = None
    ops_int8: float | None = None
    flops_fp4: float | None = None
    hourly_usd: float | None = None
    description: str = ""
    family: str | None = None
    interconnect: str | None = None
    interconnect_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        for field_name in ("marketed_bytes", "usable_bytes", "bandwidth_bytes_per_s", "flops_fp32", "flops_16bit"):
            value = getattr(self, field_name)
            if value is None or not value > 0:
                raise ValueError(f"gpu {self.name!r}: {field_name} must be positive, got {value!r}")
        for field_name in ("flops_fp8", "ops_int8", "flops_fp4"):
            value = getattr(self, field_name)
            if value is not None and not value > 0:
                raise ValueError(f"gpu {self.name!r}: {field_name} must be positive or None, got {value!r}")
        if self.interconnect_bytes_per_s is not None and not self.interconnect_bytes_per_s > 0:
            raise ValueError(f"gpu {self.name!r}: interconnect_bytes_per_s must be positive or None, "
                             f"got {self.interconnect_bytes_per_s!r}")
        if self.hourly_usd is not None and self.hourly_usd < 0:
            raise ValueError(f"gpu {self.name!r}: hourly_usd must be >= 0, got {self.hourly_usd!r}")

    def peak_flops(self, dtype: DType) -> float:
        """Dense peak for matmuls whose weights are stored in ``dtype``.

        fp8/int8 use their own tensor-core peak where the hardware has one, else
        fall back to 16-bit (weights are upcast, as Marlin-style kernels do);
        4-bit group quantization is weight-only, so it computes in 16 bits. NVFP4 checkpoints quantize the
        activations too (NVIDIA's NVFP4 format, ModelOpt's W4A4): Blackwell's FP4 tensor cores where the
        GPU has them; MXFP4 (gpt-oss: the experts' weights) computes in 16 bits, as a weight-only format.
        """
        if dtype.name == "fp32":
            return self.flops_fp32
        if dtype.name == "fp8" and self.flops_fp8:
            return self.flops_fp8
        if dtype.name == "int8" and self.ops_int8:
            return self.ops_int8
        if dtype.name == "nvfp4" and self.flops_fp4:
            return self.flops_fp4
        return self.flops_16bit


def _from_json(name: str, raw: dict) -> dict:
    def scaled(key: str, factor: float) -> float | None:
        value = raw.get(key)
        return None if value is None else value * factor

    return {
        "name": name,
        "marketed_bytes": None if raw["marketed_gb"] is None else int(raw["marketed_gb"] * GIB),
        "usable_bytes": None if raw["usable_mib"] is None else int(raw["usable_mib"] * MIB),
        "bandwidth_bytes_per_s": scaled("bandwidth_gbs", 1e9),
        "flops_fp32": scaled("tflops_fp32", 1e12),
        "flops_16bit": scaled("tflops_16bit", 1e12),
        "flops_fp8": scaled("tflops_fp8", 1e12),
        "ops_int8": scaled("tops_int8", 1e12),
        "flops_fp4": scaled("tflops_fp4", 1e12),
        "hourly_usd": raw.get("hourly_usd"),
        "description": raw.get("description", ""),
        "family": raw.get("family"),
        "interconnect": raw.get("interconnect"),
        "interconnect_bytes_per_s": scaled("interconnect_gbs", 1e9),
    }


@lru_cache(maxsize=1)
def _catalog() -> dict[str, dict]:
    raw = json.loads(resources.files("engine_core").joinpath("catalog/gpus.json").read_text())
    return {name: _from_json(name, fields) for name, fields in raw.items() if not name.startswith("_")}


def gpu_names() -> list[str]:
    return list(_catalog())


def get_gpu(
    name: str,
    *,
    memory_gib: float | None = None,
    bandwidth_gbs: float | None = None,
    tflops: float | None = None,
    hourly_usd: float | None = None,
    interconnect_gbs: float | None = None,
) -> GpuSpec:
    """The catalog GPU ``name`` (case-insensitive), with optional overrides.

    ``memory_gib`` sets usable (and marketed) memory, ``bandwidth_gbs`` the memory
    bandwidth in GB/s, ``tflops`` every compute peak, ``hourly_usd`` the price,
    ``interconnect_gbs`` the GPU-to-GPU bandwidth (one direction, GB/s).
    ``cpu`` needs memory, bandwidth and tflops. ValueError names the missing field.
    """
    if not isinstance(name, str):
        raise ValueError(f"gpu must be a catalog name, got {name!r}")
    key = name.strip().lower()
    if key not in _catalog():
        raise ValueError(f"unknown gpu {name!r}; known gpus: {', '.join(gpu_names())}")
    fields = dict(_catalog()[key])
    overrides = {"memory_gib": memory_gib, "bandwidth_gbs": bandwidth_gbs, "tflops": tflops, "hourly_usd": hourly_usd,
                 "interconnect_gbs": interconnect_gbs}
    for flag, value in overrides.items():
        if value is not None and not value > 0 and not (flag == "hourly_usd" and value == 0):
            raise ValueError(f"{flag} must be positive, got {value!r}")
    if memory_gib is not None:
        fields["usable_bytes"] = fields["marketed_bytes"] = int(memory_gib * GIB)
    if bandwidth_gbs is not None:
        fields["bandwidth_bytes_per_s"] = bandwidth_gbs * 1e9
    if tflops is not None:
        fields.update(flops_fp32=tflops * 1e12, flops_16bit=tflops * 1e12, flops_fp8=None, ops_int8=None)
    if hourly_usd is not None:
        fields["hourly_usd"] = hourly_usd
    if interconnect_gbs is not None:
        fields["interconnect_bytes_per_s"] = interconnect_gbs * 1e9
    missing = [flag for flag, key_ in (("memory_gib", "usable_bytes"), ("bandwidth_gbs", "bandwidth_bytes_per_s"),
                                       ("tflops", "flops_16bit")) if fields[key_] is None]
    if missing:
        raise ValueError(f"gpu {key!r} has no catalog numbers; give {', '.join(missing)}")
    return GpuSpec(**fields)


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


def with_price(gpu: GpuSpec, hourly_usd: float) -> GpuSpec:
    """``gpu`` at another hourly price."""
    return replace(gpu, hourly_usd=hourly_usd)


@dataclass(frozen=True)
class GpuOptions:
    """The GPU options, once for every command that names a catalog GPU (the calculators, predict, plan,
    bench, the report's cost): --gpu and the overrides of its catalog numbers (contract.options)."""

    gpu: str | None = option(None, help="a catalog GPU (`servecap calc gpus`), e.g. h100-sxm")
    gpu_memory_gib: float | None = option(None, parse=parse_float, help="override its memory, GiB (--gpu cpu needs it)")
    gpu_bandwidth_gbs: float | None = option(None, parse=parse_float,
                                             help="override its memory bandwidth, GB/s (--gpu cpu needs it)")
    gpu_tflops: float | None = option(None, parse=parse_float,
                                      help="override every compute peak, TFLOP/s (--gpu cpu needs it)")
    gpu_hourly: float | None = option(None, parse=parse_float,
                                      help="USD per GPU-hour (default: the catalog's assumed price)")
    gpu_interconnect_gbs: float | None = option(None, parse=parse_float,
                                                help="override the GPU-to-GPU bandwidth, one direction, GB/s")

    @classmethod
    def from_args(cls, args) -> "GpuOptions":
        return cls(**options_from_args(cls, args))

    def spec(self) -> GpuSpec:
        """The catalog GPU with the overrides given; ValueError names a bad one."""
        if self.gpu is None:
            raise ValueError("give --gpu (a catalog GPU: `servecap calc gpus`)")
        return get_gpu(self.gpu, memory_gib=self.gpu_memory_gib, bandwidth_gbs=self.gpu_bandwidth_gbs,
                       tflops=self.gpu_tflops, hourly_usd=self.gpu_hourly, interconnect_gbs=self.gpu_interconnect_gbs)

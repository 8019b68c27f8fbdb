"""What several ``servecap calc`` commands read from their flags: the GPU with overrides, the efficiency profile."""

from __future__ import annotations

from pathlib import Path

from calculators.efficiency_profile import EfficiencyProfile, parse_profile_text
from engine_core.gpus import GpuSpec, get_gpu


def gpu_from_args(args) -> GpuSpec:
    return get_gpu(args.gpu, memory_gib=args.gpu_memory_gib, bandwidth_gbs=args.gpu_bandwidth_gbs,
                   tflops=args.gpu_tflops, hourly_usd=args.gpu_hourly, interconnect_gbs=args.gpu_interconnect_gbs)


def profile_from_args(args) -> EfficiencyProfile | None:
    """The --efficiency-profile file, parsed; None means the fitted default."""
    path = getattr(args, "efficiency_profile", None)
    if path is None:
        return None
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"efficiency profile {path!r} cannot be read: {error}") from None
    return parse_profile_text(text, origin=f"efficiency profile {path!r}")

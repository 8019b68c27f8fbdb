"""What several ``servecap calc`` commands read from their options: the GPU with overrides, the efficiency
profile, the lengths as one number each, the load's levels and arrivals."""

from __future__ import annotations

from contract.distributions import LengthDistribution, parse_length_distribution
from contract.load import LoadSpec
from contract.workload import WorkloadSpec
from calculators.efficiency_profile import EfficiencyOptions, EfficiencyProfile
from engine_core.gpus import GpuOptions, GpuSpec

CALC_DEFAULTS = {"dtype": "bf16", "tp": 1, "dp": 1}   # the engine options a calculator fills in when left out


def gpu_from_args(args) -> GpuSpec:
    return GpuOptions.from_args(args).spec()


def profile_from_args(args) -> EfficiencyProfile | None:
    """The --efficiency-profile file, parsed; None means the fitted default."""
    return EfficiencyOptions.from_args(args).profile()


def mean_tokens(spec: str | None, flag: str) -> int | None:
    """A length option as one number: its distribution's mean, rounded (N: N exactly); None when left out."""
    return None if spec is None else round(parse_length_distribution(spec, flag).mean)


def lengths(args) -> tuple[LengthDistribution, LengthDistribution]:
    """(prompt, output) lengths: the options given, else the workload's defaults."""
    workload = WorkloadSpec.from_args(args)
    return workload.prompt_lengths, workload.output_lengths


def mean_lengths(args) -> tuple[int, int]:
    """(prompt, output) tokens as one number each: the means of `lengths`, rounded."""
    prompt, output = lengths(args)
    return round(prompt.mean), round(output.mean)


def load_from_args(args) -> LoadSpec:
    """`calc simulate`'s load: closed-loop --concurrency or open-loop --rates at --arrival."""
    load = LoadSpec.from_args(args)
    if load.kind is None:
        raise ValueError("give the load: --concurrency N,... (closed loop) or --rates R,... (open loop)")
    return load

"""What-if on a catalog GPU: the simulator's step model for a GPU the run did not use. An extrapolation.

    extrapolate_to_gpu(arch, target, dtype=..., measured=RooflineCalibration | None) -> GpuExtrapolation

The step time comes from the roofline (``calculators.sim.step_model.step_model_from_roofline``)
on the target's datasheet, at the efficiencies the run itself reached when it ran on a catalog
GPU (``calculators.sim.calibrate.calibrate_roofline`` on its decode steps), else at the efficiency
profile fitted on published measurements (issue 15). Either way it is a different machine:
batching rules and the workload carry over, this machine's step noise and front-end delays do
not, and the note says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine_core.architecture import ModelArchitecture
from calculators.sim.calibrate import RooflineCalibration
from calculators.efficiency_profile import efficiencies_for
from engine_core.gpus import GpuSpec
from calculators.sim.step_model import StepTimeModel, step_model_from_roofline


@dataclass(frozen=True)
class GpuExtrapolation:
    gpu: str
    step_model: StepTimeModel
    bandwidth_efficiency: float
    compute_efficiency: float
    overhead_s: float
    note: str


def extrapolate_to_gpu(arch: ModelArchitecture, target: GpuSpec, *, dtype: str = "bf16", tp: int = 1,
                       measured: RooflineCalibration | None = None, measured_on: str | None = None) -> GpuExtrapolation:
    """`measured`: the efficiencies the run reached on `measured_on` (a catalog GPU), or None."""
    fitted = efficiencies_for(target, dtype, tp)
    if measured is not None:
        eff = fitted.overridden(bandwidth=measured.bandwidth_efficiency, compute=measured.compute_efficiency,
                                overhead_s=measured.overhead_s)
        basis = (f"efficiencies calibrated from this run on {measured_on} (bandwidth {eff.weight_bandwidth:.0%}, "
                 f"compute {eff.decode_compute:.0%}, {eff.decode_overhead_s * 1e3:.2f} ms per step, "
                 f"{measured.rms_relative_error:.0%} rms fit error)")
    else:
        eff = fitted
        basis = (f"the efficiency profile fitted on published measurements ({eff.source}; bandwidth "
                 f"{eff.weight_bandwidth:.0%}, decode compute {eff.decode_compute:.0%}): the run's device is not "
                 "a catalog GPU, so none could be calibrated from it")
    model = step_model_from_roofline(arch, target, dtype=dtype, tp=tp, efficiency=eff)
    note = (f"EXTRAPOLATION to {target.name}, a GPU this run did not use: step times from the roofline with "
            f"{basis}; the batching limits and the measured workload carry over, this machine's step noise and "
            f"front-end delays do not (the step time is a mean and the client's clock is the engine's)")
    return GpuExtrapolation(target.name, model, eff.weight_bandwidth, eff.decode_compute, eff.decode_overhead_s, note)

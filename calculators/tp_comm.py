"""Tensor-parallel communication: the all-reduces a Megatron-style layer does per forward pass.

Each transformer layer sharded over tp GPUs all-reduces its activations twice (after the attention
output projection and after the MLP down projection). One all-reduce of M bytes over a ring of tp GPUs:
    t = latency + 2 (tp - 1) / tp x M / (interconnect bandwidth x link efficiency)
    M = tokens x hidden x 2 bytes          (activations travel in 16 bits, also for fp8 weights)
so a forward pass over ``tokens`` costs 2 x layers x t, and nothing at tp = 1. The bandwidth is one
direction of the GPU's NVLink (or PCIe where it has none), ``GpuSpec.interconnect_bytes_per_s``; the
latency and efficiency come from the efficiency profile (fitted on published TP measurements).
"""

from __future__ import annotations

from engine_core.architecture import ModelArchitecture
from calculators.efficiency import Efficiencies
from engine_core.gpus import GpuSpec

ACTIVATION_BYTES = 2
ALLREDUCES_PER_LAYER = 2


def allreduce_s(message_bytes: float, tp: int, gpu: GpuSpec, eff: Efficiencies) -> float:
    """One ring all-reduce of ``message_bytes`` over ``tp`` GPUs (module docstring)."""
    if tp == 1:
        return 0.0
    if not gpu.interconnect_bytes_per_s:
        raise ValueError(f"gpu {gpu.name!r} has no interconnect bandwidth: tp > 1 needs one "
                         "(--gpu-interconnect-gbs)")
    ring = 2 * (tp - 1) / tp * message_bytes / (gpu.interconnect_bytes_per_s * eff.link_efficiency)
    return eff.allreduce_latency_s + ring


def tp_comm_s(arch: ModelArchitecture, gpu: GpuSpec, tp: int, tokens: int, eff: Efficiencies) -> float:
    """All-reduce time of one forward pass over ``tokens`` tokens; 0 at tp = 1 or when ``eff`` was
    measured at this TP degree (its communication is already inside the other terms)."""
    if tp == 1 or eff.tp_comm_measured:
        return 0.0
    message = tokens * arch.hidden_size * ACTIVATION_BYTES
    return ALLREDUCES_PER_LAYER * arch.num_layers * allreduce_s(message, tp, gpu, eff)

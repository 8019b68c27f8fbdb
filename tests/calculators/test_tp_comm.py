"""The tensor-parallel all-reduce term: zero at TP 1, growing with TP, tokens and a slower interconnect."""

from __future__ import annotations

import pytest

from calculators.efficiency import Efficiencies
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.tp_comm import allreduce_s, tp_comm_s

LLAMA_70B = get_model("llama-2-70b")
EFF = Efficiencies(0.7, 0.8, 0.5, 0.5, allreduce_latency_s=20e-6, link_efficiency=0.8)


def test_no_communication_at_tp_1_and_two_all_reduces_per_layer_above():
    h100 = get_gpu("h100-sxm")
    assert tp_comm_s(LLAMA_70B, h100, 1, 4096, EFF) == 0.0
    message = 1 * 8192 * 2
    assert tp_comm_s(LLAMA_70B, h100, 2, 1, EFF) == pytest.approx(
        2 * 80 * (20e-6 + 2 * 1 / 2 * message / (450e9 * 0.8)))


def test_communication_grows_with_tp_and_with_the_tokens_of_the_pass():
    h100 = get_gpu("h100-sxm")
    by_tp = [tp_comm_s(LLAMA_70B, h100, tp, 2048, EFF) for tp in (1, 2, 4, 8)]
    assert by_tp[0] == 0 < by_tp[1] < by_tp[2] < by_tp[3]
    assert tp_comm_s(LLAMA_70B, h100, 4, 1, EFF) < tp_comm_s(LLAMA_70B, h100, 4, 2048, EFF)


def test_pcie_cards_pay_more_for_large_messages_than_nvlink_ones():
    nvlink, pcie = get_gpu("h100-sxm"), get_gpu("h100-pcie")
    assert nvlink.interconnect == "nvlink" and pcie.interconnect == "pcie"
    assert allreduce_s(32e6, 4, pcie, EFF) > 5 * allreduce_s(32e6, 4, nvlink, EFF)
    assert get_gpu("l40s").interconnect_bytes_per_s == 32e9


def test_measured_efficiencies_already_hold_their_communication():
    measured = Efficiencies(0.7, 0.8, 0.5, 0.5, allreduce_latency_s=20e-6, tp_comm_measured=True)
    assert tp_comm_s(LLAMA_70B, get_gpu("h100-sxm"), 8, 2048, measured) == 0.0


def test_a_device_without_an_interconnect_cannot_run_tensor_parallel():
    cpu = get_gpu("cpu", memory_gib=64, bandwidth_gbs=40, tflops=1)
    assert tp_comm_s(LLAMA_70B, cpu, 1, 10, EFF) == 0.0
    with pytest.raises(ValueError, match="no interconnect bandwidth.*--gpu-interconnect-gbs"):
        tp_comm_s(LLAMA_70B, cpu, 2, 10, EFF)
    assert tp_comm_s(LLAMA_70B, get_gpu("cpu", memory_gib=64, bandwidth_gbs=40, tflops=1, interconnect_gbs=10),
                     2, 10, EFF) > 0

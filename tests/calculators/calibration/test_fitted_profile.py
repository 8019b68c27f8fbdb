"""The fitted default profile: efficiencies in (0, 1], bands on every entry, the ideal roofline a lower
bound on every published point, and the fit reproducible from the dataset (targets: leave-one-source-out)."""

from __future__ import annotations

import pytest

from calculators.roofline_fit.dataset import load_points
from calculators.roofline_fit.fit_profile import FINAL, fit
from calculators.roofline_fit.point_model import predicted_s
from calculators.roofline_fit.validation import TARGET, validate
from calculators.efficiency import IDEAL
from calculators.efficiency_profile import default_profile
from engine_core.gpus import get_gpu, gpu_names

POINTS = load_points()
PROFILE = default_profile()


def test_every_fitted_efficiency_lies_in_0_1_and_every_entry_carries_its_bands():
    assert len(PROFILE.entries) >= 20
    for entry in PROFILE.entries:
        e = entry.efficiencies
        for value in (e.weight_bandwidth, e.kv_bandwidth, e.prefill_compute, e.decode_compute, e.link_efficiency):
            assert 0 < value <= 1
        assert e.decode_overhead_s >= 0 and e.per_sequence_s >= 0 and e.prefill_overhead_s >= 0
        for band in (e.decode_band, e.tp_decode_band, e.prefill_band, e.short_prefill_band):
            assert band is not None and band.points >= 8 and 0 < band.median <= band.relative < 1.5
    assert 0 < PROFILE.allreduce_latency_s["nvlink"] < 1e-3 and 0 < PROFILE.allreduce_latency_s["pcie"] < 1e-3
    assert all(0 <= v <= 1 for v in PROFILE.engine_gqa_kv_amplification.values())


def test_every_catalog_gpu_resolves_to_fitted_values_for_every_dtype_class():
    for name in gpu_names():
        gpu = get_gpu(name, memory_gib=1, bandwidth_gbs=1, tflops=1) if name == "cpu" else get_gpu(name)
        for dtype in ("bf16", "fp8", "int8", "int4-g128"):
            eff = PROFILE.resolve(gpu, dtype, 1)
            assert eff.decode_band is not None and eff.source
    hopper = PROFILE.resolve(get_gpu("h100-sxm"), "fp8", 1)
    assert "hopper fp8" in hopper.source and "hopper fp8" in hopper.decode_band.scope


def test_the_ideal_roofline_is_a_lower_bound_on_every_published_point():
    above = [p.id for p in POINTS if predicted_s(p, IDEAL) > p.measured_s]
    assert above == []
    # and the fitted prediction is not: it moves toward the measurements
    assert sum(predicted_s(p, IDEAL) / p.measured_s for p in POINTS) < sum(
        predicted_s(p, PROFILE.resolve(get_gpu(p.gpu), p.dtype, p.tp, p.engine)) / p.measured_s for p in POINTS)


@pytest.mark.e2e
def test_refitting_the_dataset_reproduces_the_committed_profile():
    refit = fit([p for p in POINTS if p.complete], FINAL)
    for entry in PROFILE.entries:
        if entry.family in (None, "ampere", "hopper", "ada"):
            mine = refit.model.efficiencies(refit.x, entry.family, entry.dtype_class, None)
            theirs = entry.efficiencies
            assert mine.weight_bandwidth == pytest.approx(theirs.weight_bandwidth, abs=2e-3)
            assert mine.prefill_compute == pytest.approx(theirs.prefill_compute, abs=2e-3)
            assert mine.per_sequence_s == pytest.approx(theirs.per_sequence_s, rel=0.02)


@pytest.mark.slow
@pytest.mark.e2e
def test_leave_one_source_out_meets_the_targets():
    """About 30 s: each complete source is held out and predicted by a fit on the others."""
    targets = validate(POINTS).targets()
    assert targets["decode"]["points"] >= 60 and targets["prefill_1k_plus"]["points"] >= 20
    assert targets["decode"]["median_abs_error"] <= TARGET
    assert targets["prefill_1k_plus"]["median_abs_error"] <= TARGET

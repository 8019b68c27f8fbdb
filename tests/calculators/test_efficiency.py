"""Efficiency profiles: resolution to the most specific entry, the file format, overrides and bands."""

from __future__ import annotations

import json

import pytest

from calculators.efficiency import Efficiencies, ErrorBand, dtype_class
from calculators.efficiency_profile import EfficiencyProfile, ProfileEntry, default_profile, efficiencies_for, \
    parse_profile_text
from engine_core.gpus import get_gpu

BAND = ErrorBand(relative=0.2, median=0.1, points=12, sources=3, scope="hopper fp8")


def _eff(weight: float, **kw) -> Efficiencies:
    return Efficiencies(weight, 0.8, 0.5, 0.5, **kw)


PROFILE = EfficiencyProfile(
    name="test", allreduce_latency_s={"nvlink": 25e-6, "pcie": 8e-6}, link_efficiency=0.7,
    engine_gqa_kv_amplification={"tensorrt-llm": 0.4},
    entries=(ProfileEntry(_eff(0.6)), ProfileEntry(_eff(0.65), family="hopper"),
             ProfileEntry(_eff(0.7, decode_band=BAND), family="hopper", dtype_class="fp8"),
             ProfileEntry(_eff(0.75, tp_comm_measured=True), gpu="h200", dtype_class="fp8", tp=2)))


def test_the_most_specific_matching_entry_wins_and_gets_its_gpus_all_reduce_latency():
    h100, h200, a100, pcie = (get_gpu(n) for n in ("h100-sxm", "h200", "a100-80gb", "h100-pcie"))
    assert PROFILE.resolve(a100, "bf16").weight_bandwidth == 0.6
    assert PROFILE.resolve(h100, "bf16").weight_bandwidth == 0.65
    fp8 = PROFILE.resolve(h100, "fp8", tp=4)
    assert fp8.weight_bandwidth == 0.7 and fp8.decode_band == BAND
    assert fp8.allreduce_latency_s == 25e-6 and fp8.link_efficiency == 0.7
    assert PROFILE.resolve(pcie, "fp8").allreduce_latency_s == 8e-6
    measured = PROFILE.resolve(h200, "fp8", tp=2)
    assert measured.weight_bandwidth == 0.75 and measured.allreduce_latency_s == 0.0   # measured: comm inside
    assert PROFILE.resolve(h200, "fp8", tp=4).weight_bandwidth == 0.7
    assert PROFILE.resolve(h100, "fp8", engine="tensorrt-llm").gqa_kv_amplification == 0.4
    assert PROFILE.resolve(h100, "fp8", engine="vllm").gqa_kv_amplification == 0.0
    with pytest.raises(ValueError, match="unknown engine 'triton'"):
        PROFILE.resolve(h100, "fp8", engine="triton")


def test_a_profile_without_a_match_names_what_it_covers():
    only_h200 = EfficiencyProfile("mine", (ProfileEntry(_eff(0.7), gpu="h200", dtype_class="fp8", tp=2),))
    with pytest.raises(ValueError, match="nothing for h100-sxm fp8 tp=2 .*covers: h200 fp8 tp=2"):
        only_h200.resolve(get_gpu("h100-sxm"), "fp8", 2)


def test_profiles_round_trip_through_their_file_format_and_bad_files_are_named():
    text = json.dumps(PROFILE.to_dict())
    back = parse_profile_text(text, origin="p.json")
    assert back == PROFILE
    with pytest.raises(ValueError, match="p.json is not valid JSON"):
        parse_profile_text("{", origin="p.json")
    with pytest.raises(ValueError, match="not a servecap efficiency profile"):
        parse_profile_text(json.dumps({"entries": []}), origin="p.json")
    broken = PROFILE.to_dict()
    broken["entries"][0]["efficiencies"]["weight_bandwidth"] = 1.5
    with pytest.raises(ValueError, match="entry 0 is invalid: weight_bandwidth must be in \\(0, 1\\]"):
        EfficiencyProfile.from_dict(broken, origin="p.json")


def test_user_overrides_replace_fitted_values_and_drop_the_bands_they_no_longer_describe():
    h100 = get_gpu("h100-sxm")
    fitted = efficiencies_for(h100, "fp8")
    assert fitted.decode_band is not None and fitted == default_profile().resolve(h100, "fp8")
    mine = efficiencies_for(h100, "fp8", bandwidth=0.9, overhead_s=0.001)
    assert mine.weight_bandwidth == mine.kv_bandwidth == 0.9 and mine.decode_overhead_s == 0.001
    assert mine.per_sequence_s == 0 and mine.decode_band is None and "overridden" in mine.source
    with pytest.raises(ValueError, match="compute_efficiency must be in"):
        efficiencies_for(h100, "fp8", compute=0)


def test_dtype_classes_and_band_text():
    assert [dtype_class(d) for d in ("bf16", "fp16", "fp8", "int8", "int4-g128")] == \
        ["16bit", "16bit", "fp8", "int8", "int4"]
    assert BAND.describe() == "±20%, from 12 published points on hopper fp8"
    low, high = BAND.bounds(0.024)
    assert low == pytest.approx(0.02) and high == pytest.approx(0.0288)

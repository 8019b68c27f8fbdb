"""A user's own measured steps -> an efficiency profile per TP degree, written, read back, used."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from calculators.roofline_fit.profile import MeasuredStep, calibrate_profile, fit_efficiencies, predict_step
from calculators.cli.commands import main
from calculators.efficiency import Efficiencies
from calculators.efficiency_profile import default_profile, parse_profile_text
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from calculators.roofline import roofline

LLAMA, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
TRUTH = {1: Efficiencies(0.72, 0.86, 0.55, 0.6, decode_overhead_s=4e-4, per_sequence_s=2e-5, prefill_overhead_s=4e-3),
         2: Efficiencies(0.6, 0.8, 0.5, 0.55, decode_overhead_s=9e-4, per_sequence_s=3e-5, prefill_overhead_s=6e-3)}


def _steps(tp: int) -> list[MeasuredStep]:
    """Decode steps over batch and context, and prefills over prompt length, as an engine would log them."""
    shapes = [dict(batch=b, context=c) for b in (1, 8, 64, 256) for c in (64, 2048)]
    shapes += [dict(prefill_tokens=p) for p in (128, 1024, 8192)]
    steps = []
    for shape in shapes:
        seconds = predict_step(LLAMA, H100, "bf16", None, MeasuredStep(1.0, tp=tp, **shape),
                               replace(TRUTH[tp], tp_comm_measured=True))
        steps.append(MeasuredStep(seconds, tp=tp, **shape))
    return steps


def test_the_fit_reproduces_the_measured_steps_and_recovers_what_they_determine():
    tp_fit = fit_efficiencies(LLAMA, H100, _steps(1), start=default_profile().resolve(H100, "bf16", 1))
    assert tp_fit.rms_relative_error < 1e-4 and tp_fit.samples == 11
    e = tp_fit.efficiencies
    assert e.kv_bandwidth == pytest.approx(0.86, rel=0.02)
    assert e.prefill_compute == pytest.approx(0.55, rel=0.02)
    assert e.per_sequence_s == pytest.approx(2e-5, rel=0.1)
    # one model size: the weight read and the fixed overhead are both a constant per step, only their sum is pinned
    weights_s = 16.06e9 / 3.35e12
    assert weights_s / e.weight_bandwidth + e.decode_overhead_s == pytest.approx(weights_s / 0.72 + 4e-4, rel=1e-3)


def test_measured_steps_reject_impossible_rows():
    with pytest.raises(ValueError, match="step_s must be a positive number"):
        MeasuredStep(-1.0, batch=1)
    with pytest.raises(ValueError, match="needs batch_size > 0 .* or prefill_tokens > 0"):
        MeasuredStep(0.01)
    with pytest.raises(ValueError, match="fit one TP degree at a time"):
        fit_efficiencies(LLAMA, H100, _steps(1)[:2] + _steps(2)[:2], start=TRUTH[1])
    with pytest.raises(ValueError, match="at least 3 measured steps"):
        calibrate_profile(LLAMA, H100, _steps(1)[:2])


def test_a_profile_written_by_calc_calibrate_roofline_and_read_back_reproduces_its_fit(tmp_path, capsys):
    csv = tmp_path / "steps.csv"
    rows = ["tp,batch_size,context_tokens,prefill_tokens,step_s"]
    for tp in (1, 2):
        rows += [f"{s.tp},{s.batch},{s.context},{s.prefill_tokens},{s.step_s!r}" for s in _steps(tp)]
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "profile.json"
    assert main(["calibrate", "--roofline", "--steps", str(csv), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    profile = parse_profile_text(out.read_text(), origin=str(out))
    assert [f["tp"] for f in report["fits"]] == [1, 2]
    for tp, fitted in zip((1, 2), report["fits"]):
        eff = profile.resolve(H100, "bf16", tp)
        assert eff.tp_comm_measured and eff.decode_band.basis == "measured steps"
        assert eff.weight_bandwidth == pytest.approx(fitted["weight_bandwidth"])
        for step in _steps(tp):   # read back, it predicts what was measured
            assert predict_step(LLAMA, H100, "bf16", None, step, eff) == pytest.approx(step.step_s, rel=1e-3)
    # the other calc commands take it: a TP-2 decode step at a measured shape
    assert main(["roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "2", "--batch", "64",
                 "--context", "2048", "--efficiency-profile", str(out), "--json"]) == 0
    roof = json.loads(capsys.readouterr().out)
    measured = next(s for s in _steps(2) if s.batch == 64 and s.context == 2048)
    assert roof["decode_step_s"] == pytest.approx(measured.step_s, rel=1e-3)
    assert "measured steps" in roof["decode_step"] and roof["tp_comm_s"] == 0
    # a TP degree it was not measured at is refused, by name
    assert main(["roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "4",
                 "--efficiency-profile", str(out)]) == 2
    assert "nothing for h100-sxm 16bit tp=4" in capsys.readouterr().err


def test_calibrate_roofline_names_bad_input(tmp_path, capsys):
    csv = tmp_path / "steps.csv"
    csv.write_text("batch_size,step_s\n0,0.01\n1,0.01\n2,0.01\n")
    assert main(["calibrate", "--roofline", "--steps", str(csv), "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]) == 2
    assert "row 2: a measured step needs batch_size > 0" in capsys.readouterr().err
    assert main(["calibrate", "--roofline", "--steps", str(csv)]) == 2
    assert "--roofline needs --model and --gpu" in capsys.readouterr().err
    assert main(["roofline", "--model", "tiny", "--gpu", "h100-sxm", "--efficiency-profile",
                 str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert "cannot be read" in err and len(err.strip().splitlines()) == 1


def test_roofline_with_measured_efficiencies_drops_the_communication_term():
    eff = Efficiencies(0.7, 0.8, 0.5, 0.5, allreduce_latency_s=3e-5, tp_comm_measured=True)
    assert roofline(get_model("llama-3.1-70b"), H100, tp=4, efficiency=eff).tp_comm_s == 0

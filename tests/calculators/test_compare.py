"""calculators.compare: one model across GPUs and precisions (the capacity notebook's comparison table)."""

import pytest

from calculators.compare import compare_deployments
from calculators.cost import usd_per_million_tokens
from calculators.fit import fit
from calculators.fleet import fleet, replica_from_roofline
from engine_core.gpus import get_gpu
from engine_core.models import get_model

LLAMA_70B = get_model("llama-3.1-70b")
H100, H200 = get_gpu("h100-sxm"), get_gpu("h200")
PLAN = dict(rate_rps=20.0, slo_p99_s=30.0, prompt_tokens=1000, output_tokens=250, max_num_seqs=64, service_cv2=0.0)


@pytest.fixture(scope="module")
def rows():
    return compare_deployments(LLAMA_70B, [H100, H200], ["bf16", "fp8", "int4-g128"], **PLAN)


def test_every_pair_gets_a_row_gpus_outer(rows):
    assert [(r.gpu, r.dtype) for r in rows] == [(g, d) for g in ("h100-sxm", "h200")
                                                for d in ("bf16", "fp8", "int4-g128")]


def test_smallest_tp_that_fits(rows):
    by_key = {(r.gpu, r.dtype): r for r in rows}
    # 70B in BF16 is ~131 GiB of weights: not on one 80 GB H100, nor with room for KV on one H200
    assert not fit(LLAMA_70B, H100, dtype="bf16", max_model_len=8192).fits
    assert by_key["h100-sxm", "bf16"].tp == 2
    assert by_key["h100-sxm", "fp8"].tp == 1
    assert by_key["h200", "fp8"].tp == 1
    assert by_key["h100-sxm", "fp8"].weights_gib_per_gpu == pytest.approx(
        by_key["h100-sxm", "bf16"].weights_gib_per_gpu, rel=0.01)  # half the bytes on half the GPUs


def test_fleet_and_cost_match_the_calculators(rows):
    row = next(r for r in rows if (r.gpu, r.dtype) == ("h200", "fp8"))
    rep = replica_from_roofline(LLAMA_70B, H200, dtype="fp8", tp=1, prompt_tokens=1000, output_tokens=250,
                                max_num_seqs=64, max_model_len=8192)
    plan = fleet(20.0, 30.0, rep, service_cv2=0.0)
    assert (row.replicas, row.gpus, row.max_concurrency) == (plan.replicas, plan.gpus, rep.slots)
    assert row.response_p99_s == pytest.approx(plan.response_p99_s) and row.response_p99_s <= 30.0
    assert row.usd_per_hour == pytest.approx(3.79 * plan.gpus)
    assert row.usd_per_million_output_tokens == pytest.approx(usd_per_million_tokens(3.79, plan.gpus, 20.0 * 250))


def test_unreachable_slo_keeps_the_row_and_says_why():
    row, = compare_deployments(LLAMA_70B, [H200], ["fp8"], **{**PLAN, "slo_p99_s": 0.5})
    assert row.fits and row.replicas is None and row.usd_per_million_output_tokens is None
    assert "unreachable" in row.reason


def test_no_fit_at_any_tp_is_a_row_with_the_reason():
    row, = compare_deployments(get_model("llama-3.1-405b"), [get_gpu("l4")], ["bf16"], **PLAN, tp_choices=(1, 2))
    assert (row.fits, row.tp, row.replicas) == (False, None, None)
    assert row.reason.startswith("tp=2: does not fit")


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown dtype"):
        compare_deployments(LLAMA_70B, [H100], ["bf17"], **PLAN)
    with pytest.raises(ValueError, match="hourly_usd"):
        compare_deployments(LLAMA_70B, [get_gpu("cpu", memory_gib=512, bandwidth_gbs=300, tflops=5)], ["bf16"], **PLAN)
    with pytest.raises(ValueError, match="at least one"):
        compare_deployments(LLAMA_70B, [], ["bf16"], **PLAN)

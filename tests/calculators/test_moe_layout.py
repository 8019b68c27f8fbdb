"""An MoE replica with data-parallel attention and expert parallelism: what one GPU holds, reads, computes and
sends (calculators.moe_layout), the engine it sizes, and `servecap calc` taking --dp and --expert-parallel."""

from __future__ import annotations

import pytest

from calculators.efficiency import Efficiencies
from calculators.fit import fit
from calculators.gpu_engine import gpu_engine
from calculators.kv import kv_bytes_for_tokens
from calculators.moe_layout import MoeLayout
from calculators.sim.step_model import step_model_from_roofline
from calculators.step_cost import decode_cost
from calculators.tp_comm import tp_comm_s
from calculators.weights import weights
from engine_core.dtypes import parse_dtype, parse_kv_dtype
from engine_core.gpus import get_gpu
from engine_core.models import get_model

QWEN_235B = get_model("qwen3-235b-a22b")
H200 = get_gpu("h200")
EFF = Efficiencies(0.6, 0.8, 0.55, 0.55, allreduce_latency_s=20e-6, link_efficiency=0.8)
FP8, BF16 = parse_dtype("fp8"), parse_kv_dtype("bf16")
DEP4 = MoeLayout(dp=4, expert_parallel=True)


def test_a_gpu_holds_its_share_of_the_routed_experts_and_a_whole_copy_of_the_rest():
    w = weights(QWEN_235B, "fp8")
    one = w.bytes_per_gpu(1)
    assert w.bytes_per_gpu(1, 4) == one - w.routed_expert_bytes + w.routed_expert_bytes // 4
    assert w.bytes_per_gpu(2, 4) == (one - w.routed_expert_bytes - w.small_bytes) // 2 + w.routed_expert_bytes // 8 \
        + w.small_bytes
    # Qwen3-235B in fp8 on 4 GPUs: about 64.7 GB each (the experts' 227 GB in quarters beside 8 GB of the rest)
    assert w.bytes_per_gpu(1, 4) / 1e9 == pytest.approx(64.7, abs=0.2)


def test_fit_counts_a_replica_of_tp_x_dp_gpus_whose_ranks_each_hold_requests():
    one_rank = fit(QWEN_235B, H200, dtype="fp8", gpus=8, tp=1, dp=4, max_model_len=4096)
    assert (one_rank.dp, one_rank.replicas) == (4, 2)
    assert one_rank.weight_bytes == weights(QWEN_235B, "fp8").bytes_per_gpu(1, 4)
    per_request = kv_bytes_for_tokens(QWEN_235B, 4096, "bf16", 16, 1)
    assert one_rank.max_concurrency == pytest.approx(4 * one_rank.kv_cache_bytes / per_request, rel=1e-3)
    with pytest.raises(ValueError, match=r"whole multiple of tp \(1\) x dp \(4\)"):
        fit(QWEN_235B, H200, dtype="fp8", gpus=6, tp=1, dp=4)


def test_a_dep_step_reads_one_ranks_kv_and_a_quarter_of_the_experts_the_batch_touches():
    batch, context = 512, 1500
    dep = decode_cost(QWEN_235B, H200, FP8, BF16, batch=batch, context=context, tp=1, eff=EFF, layout=DEP4)
    w = weights(QWEN_235B, FP8)
    touched = 1 - (1 - 8 / 128) ** batch
    rest = w.linear_bytes - w.routed_expert_bytes + w.lm_head_bytes
    assert dep.weight_bytes == int(rest + w.routed_expert_bytes * touched / 4 + w.small_bytes)
    assert dep.kv_bytes == int(batch / 4 * kv_bytes_for_tokens(QWEN_235B, context, BF16, 1, 1))
    # the same rank alone on one GPU (its 128 sequences, every expert local) reads the same KV
    alone = decode_cost(QWEN_235B, H200, FP8, BF16, batch=batch // 4, context=context, tp=1, eff=EFF)
    assert alone.kv_bytes == dep.kv_bytes and alone.comm_s == 0


def test_expert_parallel_sends_each_gpus_tokens_to_their_experts_and_back_every_moe_layer():
    tokens = 4096
    sent = tokens / 4 * 8 * QWEN_235B.hidden_size * 2 * 3 / 4
    one_way = EFF.allreduce_latency_s + sent / (H200.interconnect_bytes_per_s * EFF.link_efficiency)
    assert DEP4.comm_s(QWEN_235B, H200, 1, tokens, EFF) == pytest.approx(94 * 2 * one_way)
    # sharded experts at dp 1: Megatron's two all-reduces a layer, as tensor parallelism alone
    assert MoeLayout().comm_s(QWEN_235B, H200, 4, tokens, EFF) == pytest.approx(tp_comm_s(QWEN_235B, H200, 4, tokens, EFF))
    measured = Efficiencies(0.6, 0.8, 0.55, 0.55, tp_comm_measured=True)
    assert DEP4.comm_s(QWEN_235B, H200, 1, tokens, measured) == 0.0


def test_mla_decodes_in_its_latent_space():
    deepseek = get_model("deepseek-v3")
    empty = decode_cost(deepseek, H200, FP8, FP8, batch=1, context=0, tp=1, eff=EFF)
    long = decode_cost(deepseek, H200, FP8, FP8, batch=1, context=1000, tp=1, eff=EFF)
    # a query head scores 512 + 64 latent dims and sums 512 value dims per context token, in each of 61 layers
    assert long.flops - empty.flops == pytest.approx(2 * 61 * 128 * (512 + 64 + 512) * 1000)


def test_layouts_that_cannot_run_are_refused_by_name():
    with pytest.raises(ValueError, match="llama-3.1-8b is dense"):
        MoeLayout(dp=2).check(get_model("llama-3.1-8b"), 1)
    with pytest.raises(ValueError, match="whole number of qwen3-235b-a22b's 128 experts"):
        MoeLayout(dp=3, expert_parallel=True).check(QWEN_235B, 1)
    with pytest.raises(ValueError, match="dp must be"):
        MoeLayout(dp=0)


def test_an_moe_step_grows_fastest_while_its_first_sequences_reach_new_experts():
    model = step_model_from_roofline(get_model("qwen3-30b-a3b"), get_gpu("h100-sxm"), dtype="fp8", max_batch=256)
    table = model.batch_table
    assert len(table) == 256 and all(b > a for a, b in zip(table, table[1:]))
    assert table[1] - table[0] > 5 * (table[-1] - table[-2])
    assert model.batch_s(300) == pytest.approx(table[-1] + 44 * (table[-1] - table[-2]))
    assert step_model_from_roofline(get_model("llama-3.1-8b"), get_gpu("h100-sxm")).batch_table == ()


def test_the_engine_of_a_dep_replica_has_each_ranks_limits_and_cache():
    rank = gpu_engine(QWEN_235B, H200, dtype="fp8", engine="tensorrt-llm", max_model_len=4096,
                      layout=MoeLayout(dp=4))
    dep = gpu_engine(QWEN_235B, H200, dtype="fp8", engine="tensorrt-llm", max_model_len=4096, layout=DEP4)
    assert (dep.max_num_seqs, dep.max_num_batched_tokens) == (4 * 2048, 4 * 8192)
    budget = dep.fit   # TensorRT-LLM's rule on each GPU: 0.9 of the memory free once the weights are loaded
    free = budget.usable_bytes - budget.weight_bytes - budget.activation_bytes - budget.non_torch_bytes
    assert dep.num_kv_blocks == 4 * (int(free * 0.9) // budget.kv_block_bytes) == rank.num_kv_blocks
    assert "dp 4, expert parallel" in dep.describe()
    assert len(dep.step_model.batch_table) == 4 * 2048


def test_calc_takes_the_layout_from_its_flags(calc, calc_json):
    out = calc_json("fit", "--model", "qwen3-235b-a22b", "--gpu", "h200", "--dtype", "fp8", "--dp", "4",
                    "--gpus", "8", "--max-model-len", "4096")
    assert (out["dp"], out["replicas"]) == (4, 2)
    assert out["weight_bytes"] == weights(QWEN_235B, "fp8").bytes_per_gpu(1, 4)
    roof = calc_json("roofline", "--model", "qwen3-235b-a22b", "--gpu", "h200", "--dtype", "fp8", "--dp", "4",
                     "--expert-parallel", "--batch", "512", "--context", "1500")
    assert (roof["dp"], roof["expert_parallel"]) == (4, True)
    assert roof["tp_comm_s"] == pytest.approx(DEP4.comm_s(QWEN_235B, H200, 1, 512, _profile_eff()))
    sim = calc_json("simulate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dtype", "fp8", "--dp", "2",
                    "--expert-parallel", "--prompt-tokens", "256", "--output-tokens", "32", "--concurrency", "64",
                    "--requests", "200")
    assert len(sim["step_model"]["batch_table"]) == 2 * 1024 and sim["levels"][0]["output_tokens_per_s"] > 0
    code, _, err = calc("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--dp", "2")
    assert code == 2 and "llama-3.1-8b is dense" in err and len(err.strip().splitlines()) == 1


def _profile_eff() -> Efficiencies:
    from calculators.efficiency_profile import efficiencies_for
    return efficiencies_for(H200, "fp8", 4)


def test_the_simulators_context_token_costs_an_mla_queries_arithmetic_where_that_outlasts_its_read():
    h100, bf16 = get_gpu("h100-sxm"), parse_dtype("bf16")
    # one GPU, a bf16 latent: 17 MFLOP a token at the 16-bit peak outlast its 70,272 bytes
    deepseek = step_model_from_roofline(get_model("deepseek-v3"), h100, dtype="bf16", efficiency=EFF)
    flops = 2 * 61 * 128 * (512 + 64 + 512)
    assert deepseek.per_context_token_s == pytest.approx(flops / (h100.peak_flops(bf16) * EFF.decode_compute))
    assert flops / (h100.peak_flops(bf16) * EFF.decode_compute) > 70_272 / (h100.bandwidth_bytes_per_s * 0.8)
    # at tp 8 each GPU does an eighth of the arithmetic but reads the whole latent: the read decides
    wide = step_model_from_roofline(get_model("deepseek-v3"), h100, dtype="bf16", tp=8, efficiency=EFF)
    assert wide.per_context_token_s == pytest.approx(70_272 / (h100.bandwidth_bytes_per_s * EFF.kv_bandwidth))
    llama = step_model_from_roofline(get_model("llama-3.1-8b"), h100, dtype="bf16", efficiency=EFF)
    assert llama.per_context_token_s == pytest.approx(131_072 / (h100.bandwidth_bytes_per_s * EFF.kv_bandwidth))

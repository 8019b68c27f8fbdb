"""The model over the paged cache equals a plain dense transformer; checkpoints round-trip."""

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from engine_core.models import get_model
from engine_core.scheduling.block_manager import BlockManager
from reference_server.engine.checkpoint import load_checkpoint, read_architecture, save_checkpoint
from reference_server.engine.attention import bucket_bounds
from reference_server.engine.config import EngineConfig
from reference_server.engine.model import Transformer, rotate_half, unsupported_features
from reference_server.engine.model_runner import ModelRunner
from reference_server.engine.sampler import Sampler
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.strategies.base import ScheduledBatch
from engine_core.scheduling.sequence import Sequence

pytestmark = pytest.mark.usefixtures("one_torch_thread")


ARCH = get_model("tiny")


def make_runner(num_blocks=32, state_dict=None, seed=0, arch=ARCH):
    config = EngineConfig(model="tiny", block_size=4, seed=seed)
    return ModelRunner(arch, config, num_blocks=num_blocks, max_model_len=256, sampler=Sampler(0, 257),
                       state_dict=state_dict)


def dense_logits(model: Transformer, ids: list[int]) -> torch.Tensor:
    """Reference: the same weights, no cache, causal SDPA with K/V repeated for GQA. [N, V]"""
    arch = model.arch
    x = model.embed_tokens(torch.tensor(ids))
    pos = torch.arange(len(ids))
    cos, sin = model.rope_cos[pos].unsqueeze(1), model.rope_sin[pos].unsqueeze(1)
    q_size, kv_size = arch.num_heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    for layer in model.layers:
        h = layer.input_layernorm(x)
        q, k, v = layer.self_attn.qkv_proj(h).split([q_size, kv_size, kv_size], dim=-1)
        q = q.view(len(ids), arch.num_heads, arch.head_dim)
        k = k.view(len(ids), arch.num_kv_heads, arch.head_dim)
        v = v.view(len(ids), arch.num_kv_heads, arch.head_dim)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = arch.num_heads // arch.num_kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                             is_causal=True).transpose(0, 1).reshape(len(ids), -1)
        x = x + layer.self_attn.o_proj(att)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.compute_logits(model.norm(x))


def paged_last_logits(runner, bm, ids, chunks):
    """Run `ids` through the paged runner in the given prefill chunk sizes; logits of the last token."""
    seq = Sequence("s", ids, SamplingParams(max_tokens=1), arrival_time=0.0)
    bm.allocate(seq)
    logits = None
    for n in chunks:
        logits, sampled = runner.forward(ScheduledBatch([seq], [n]))
        seq.num_computed_tokens += n
    assert sampled == [seq]
    bm.deallocate(seq)
    return logits[0]


@torch.inference_mode()
def test_paged_prefill_matches_dense_reference():
    runner, bm = make_runner(), BlockManager(32, 4)
    ids = [5, 17, 200, 3, 99, 42, 7, 7, 8, 1, 250]
    expected = dense_logits(runner.model, ids)[-1]
    got = paged_last_logits(runner, bm, ids, [len(ids)])
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@torch.inference_mode()
def test_chunked_prefill_and_decode_match_dense_reference():
    runner, bm = make_runner(), BlockManager(32, 4)
    ids = list(range(30, 53))
    expected = dense_logits(runner.model, ids)[-1]
    for chunks in ([5, 5, 13], [22, 1], [1] * 23):
        torch.testing.assert_close(paged_last_logits(runner, bm, ids, chunks), expected, rtol=1e-4, atol=1e-5)


@torch.inference_mode()
def test_scattered_blocks_and_mixed_batch_match_dense_reference():
    """Decodes and prefill chunks of several sequences in one step, blocks not contiguous."""
    runner, bm = make_runner(), BlockManager(32, 4)
    filler = Sequence("filler", [1] * 9, SamplingParams(), arrival_time=0.0)
    bm.allocate(filler)                        # take blocks 0..2 so the others start elsewhere
    prompts = {"a": [3] * 7 + [9], "b": list(range(100, 119)), "c": [42, 43]}
    seqs = {rid: Sequence(rid, ids, SamplingParams(), arrival_time=0.0) for rid, ids in prompts.items()}
    for seq in seqs.values():
        bm.allocate(seq)
    bm.deallocate(filler)
    # step 1: a and c prefilled fully, b's first 10 tokens
    batch = ScheduledBatch([seqs["a"], seqs["b"], seqs["c"]], [8, 10, 2])
    logits, sampled = runner.forward(batch)
    assert [s.request_id for s in sampled] == ["a", "c"]
    for seq, n in zip(batch.seqs, batch.num_new_tokens):
        seq.num_computed_tokens += n
    # step 2: a and c decode one more token each, b finishes its prompt
    for rid, token in (("a", 11), ("c", 12)):
        seqs[rid].token_ids.append(token)
        bm.may_append(seqs[rid], 1)
    batch = ScheduledBatch([seqs["b"], seqs["a"], seqs["c"]], [9, 1, 1])
    logits, sampled = runner.forward(batch)
    for row, seq in enumerate(sampled):
        expected = dense_logits(runner.model, seq.token_ids)[-1]
        torch.testing.assert_close(logits[row], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("overhead_tokens", "buckets"), [(0.0, 5), (4.0, 3), (float("inf"), 1)])
@torch.inference_mode()
def test_decodes_in_length_buckets_or_one_rectangle_match_dense_reference(overhead_tokens, buckets):
    """Decodes of five lengths beside a prefill chunk: each its own SDPA call (0), three buckets,
    two of them padded and masked (4: contexts 3,4 | 9,12 | 17), or one padded rectangle (inf)."""
    assert len(bucket_bounds([3, 4, 9, 12, 17], overhead_tokens)) == buckets
    runner, bm = make_runner(num_blocks=64), BlockManager(64, 4)
    runner.attention_planner.overhead_tokens = overhead_tokens
    prompts = {f"d{n}": [(7 * n + j) % 250 for j in range(n)] for n in (3, 9, 4, 17, 12)}
    prompts["p"] = list(range(60, 80))
    seqs = {rid: Sequence(rid, ids, SamplingParams(), arrival_time=0.0) for rid, ids in prompts.items()}
    for rid, seq in seqs.items():
        bm.allocate(seq)
        if rid != "p":   # prefill all but the last token, so the step decodes it
            runner.forward(ScheduledBatch([seq], [seq.num_tokens - 1]))
            seq.num_computed_tokens = seq.num_tokens - 1
    order = ["d9", "p", "d3", "d17", "d4", "d12"]            # batch order: decodes and a prefill mixed
    batch = ScheduledBatch([seqs[r] for r in order], [1, 7, 1, 1, 1, 1])
    logits, sampled = runner.forward(batch)
    assert [s.request_id for s in sampled] == ["d9", "d3", "d17", "d4", "d12"]   # p is mid-prompt
    for row, seq in enumerate(sampled):
        torch.testing.assert_close(logits[row], dense_logits(runner.model, seq.token_ids)[-1], rtol=1e-4, atol=1e-5)


def test_kv_cache_is_one_tensor_of_the_predicted_size():
    runner = make_runner(num_blocks=10)
    a = ARCH
    assert runner.kv_cache_bytes == runner.kv_cache.nbytes
    assert runner.kv_cache_bytes == 2 * a.num_layers * a.num_kv_heads * a.head_dim * 4 * 4 * 10


def test_random_weights_are_seeded():
    one, same, other = make_runner(seed=1), make_runner(seed=1), make_runner(seed=2)
    w1 = one.model.layers[0].mlp.down_proj.weight
    assert torch.equal(w1, same.model.layers[0].mlp.down_proj.weight)
    assert not torch.equal(w1, other.model.layers[0].mlp.down_proj.weight)


@torch.inference_mode()
def test_checkpoint_round_trip_gives_same_logits(tmp_path):
    original = make_runner(seed=3)
    save_checkpoint(tmp_path, ARCH, original.model.state_dict())
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_hidden_layers"] == ARCH.num_layers and config["num_key_value_heads"] == 2
    arch, state = load_checkpoint(tmp_path)
    assert arch.num_heads == ARCH.num_heads and arch.head_dim == ARCH.head_dim
    assert "model.layers.0.self_attn.q_proj.weight" not in state      # fused back on load
    loaded = make_runner(state_dict=state, seed=99, arch=arch)         # seed ignored: weights from disk
    ids = [10, 20, 30, 40, 50, 60]
    torch.testing.assert_close(dense_logits(loaded.model, ids), dense_logits(original.model, ids),
                               rtol=0, atol=0)


def test_checkpoint_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="cannot read checkpoint config"):
        read_architecture(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        read_architecture(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({
        "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 32,
        "vocab_size": 300}))
    with pytest.raises(ValueError, match="no \\*.safetensors"):
        load_checkpoint(tmp_path)


def test_unsupported_architectures_are_named():
    assert unsupported_features(ARCH) == []
    moe = replace(ARCH, num_experts=8, num_active_experts=2)
    assert unsupported_features(moe) == ["MoE experts"]
    with pytest.raises(ValueError, match="MoE experts"):
        Transformer(moe, max_model_len=16)

"""Multi-LoRA in the engine: base requests untouched, adapters exact against merged weights, rows of
different adapters in one pass, slots and cold loads, PEFT directories, and bad adapters refused."""

from __future__ import annotations

import pytest
import torch

from engine_core.models import get_model
from engine_runs import GREEDY, run
from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine
from reference_server.engine.lora import LoraLinear, save_peft_adapter
from engine_core.scheduling.sampling import SamplingParams

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TEXTS = ["hello world", "the quick brown fox", "a", "lorem ipsum dolor sit amet"]


def _engine(**flags) -> Engine:
    return Engine(EngineConfig.from_flags(model="tiny", max_num_seqs=8, max_model_len=128, **flags))


def _requests(engine: Engine, loras: list[str | None], max_tokens: int = 10) -> dict:
    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, **GREEDY)
    return {f"r{i}": (engine.tokenizer.encode(TEXTS[i % len(TEXTS)], add_bos=True), params, lora)
            for i, lora in enumerate(loras)}


def _run(engine: Engine, requests: dict) -> dict[str, list[int]]:
    for rid, (ids, params, lora) in requests.items():
        engine.add_request(rid, ids, params, lora=lora)
    return run(engine, {})


def test_base_requests_are_identical_with_lora_enabled_even_batched_with_adapter_rows():
    plain = _engine()
    base_only = _requests(plain, [None] * 4)
    expected = _run(plain, base_only)
    lora = _engine(enable_lora=True, lora_modules=(("a", "random"), ("b", "random:4")), max_loras=2)
    mixed = {**base_only, **{f"x{i}": (ids, params, name) for i, ((ids, params, _), name)
                             in enumerate(zip(base_only.values(), ["a", "b", "a", "b"]))}}
    got = _run(lora, mixed)
    assert {rid: got[rid] for rid in base_only} == expected
    assert all(got[f"x{i}"] != expected[f"r{i}"] for i in range(4))   # the adapter rows did change


def test_an_adapter_batched_with_others_gives_its_own_output_alone():
    together = _engine(enable_lora=True, lora_modules=(("a", "random"), ("b", "random:8")), max_loras=2)
    alone = _engine(enable_lora=True, lora_modules=(("a", "random"), ("b", "random:8")), max_loras=2)
    both = _run(together, _requests(together, ["a", "b", "a", None]))
    only_b = _run(alone, {"r1": _requests(alone, ["a", "b"])["r1"]})
    assert both["r1"] == only_b["r1"]


def test_an_adapter_equals_its_weights_merged_into_the_base_model():
    """W + (A B)^T in every wrapped layer, on a plain engine, gives the adapter's greedy tokens."""
    lora = _engine(enable_lora=True, lora_modules=(("a", "random"),), max_loras=1)
    requests = _requests(lora, ["a", "a"], max_tokens=16)
    with_adapter = _run(lora, requests)
    merged = _engine()
    with torch.no_grad():
        for wrapped_layer, layer in zip(lora.runner.lora.layers, merged.runner.model.layers):
            for target, wrapped in wrapped_layer.items():
                parent = layer.self_attn if hasattr(layer.self_attn, target) else layer.mlp
                getattr(parent, target).weight += (wrapped.lora_a[0] @ wrapped.lora_b[0]).T
    assert _run(merged, {rid: (ids, params, None) for rid, (ids, params, _) in requests.items()}) == with_adapter


def test_more_adapters_than_slots_all_finish_loading_cold_ones_and_recording_the_waits():
    engine = _engine(enable_lora=True, lora_modules=tuple((f"l{i}", "random:2") for i in range(3)), max_loras=1)
    engine.warmup()
    for rid, (ids, params, lora) in _requests(engine, ["l0", "l1", "l2", "l0", None]).items():
        engine.add_request(rid, ids, params, lora=lora)
    steps, requests = [], []
    while engine.has_unfinished_requests():
        engine.step()
        records = engine.stats().records
        steps += records.steps
        requests += records.requests
    assert sorted(r.output_tokens for r in requests) == [10] * 5
    by_id = {r.response_id: r for r in requests}
    assert by_id["r0"].lora == "l0" and by_id["r4"].lora == ""
    assert by_id["r1"].lora_wait_s > 0 and by_id["r2"].lora_wait_s > by_id["r1"].lora_wait_s
    assert by_id["r0"].lora_wait_s == 0 and by_id["r4"].lora_wait_s == 0
    assert max(step.lora_adapters for step in steps) == 1
    assert sum(step.lora_loads for step in steps) == 3   # l0 stays resident for r3
    assert all(step.lora_load_s > 0 for step in steps if step.lora_loads)


def test_a_peft_directory_serves_and_its_description_says_so(tmp_path):
    arch = get_model("tiny")
    path = save_peft_adapter(tmp_path / "sql", arch, rank=4, seed=1)
    engine = _engine(enable_lora=True, lora_modules=(("sql", str(path)), ("r", "random")), max_loras=2)
    described = engine.describe()["lora"]
    assert described["adapters"]["sql"]["rank"] == 4 and described["adapters"]["sql"]["source"] == str(path)
    assert described["max_loras"] == 2 and described["slot_bytes"] > 0
    base = _run(_engine(), _requests(engine, [None]))
    assert _run(engine, _requests(engine, ["sql"]))["r0"] != base["r0"]


@pytest.mark.parametrize("modules, flags, message", [
    ((("big", "random:32"),), {}, "adapter 'big' has rank 32, above max_lora_rank 16"),
    ((("gone", "/nonexistent/adapter"),), {}, "adapter 'gone': /nonexistent/adapter is not a directory"),
    ((("z", "random:0"),), {}, "random:RANK needs a positive rank"),
    ((("a", "random"), ("a", "random")), {}, "adapter name 'a' is given twice"),
    ((("a", "random"),), {"strategy": "static"}, "continuous strategy"),
])
def test_bad_adapters_are_refused_naming_them(modules, flags, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        _engine(enable_lora=True, lora_modules=modules, **flags)


def test_a_peft_adapter_of_a_higher_rank_or_the_wrong_shape_is_refused(tmp_path):
    arch = get_model("tiny")
    big = save_peft_adapter(tmp_path / "big", arch, rank=32, seed=0)
    with pytest.raises(ValueError, match="adapter 'big' has rank 32, above max_lora_rank 16"):
        _engine(enable_lora=True, lora_modules=(("big", str(big)),))
    other = save_peft_adapter(tmp_path / "small", get_model("small"), rank=4, seed=0)
    with pytest.raises(ValueError, match="adapter 'other': layer 0 q_proj has lora_A"):
        _engine(enable_lora=True, lora_modules=(("other", str(other)),))


def test_the_prefix_cache_keeps_each_adapters_blocks_apart():
    """The same prompt under an adapter and under the base model shares no KV blocks (the adapter changes K
    and V): the base request's output is the plain engine's, and its blocks are not a hit."""
    lora = _engine(enable_lora=True, lora_modules=(("a", "random"),), max_loras=1, block_size=4)
    plain = _engine(block_size=4)
    prompt = lora.tokenizer.encode("the same shared prompt text", add_bos=True)
    params = SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY)
    expected = _run(plain, {"base": (prompt, params, None)})["base"]
    _run(lora, {"first": (prompt, params, "a")})
    hits = lora.block_manager.prefix_cache_hit_tokens
    assert _run(lora, {"base": (prompt, params, None)})["base"] == expected
    assert lora.block_manager.prefix_cache_hit_tokens == hits            # no block of the adapter's was reused
    _run(lora, {"again": (prompt, params, "a")})
    assert lora.block_manager.prefix_cache_hit_tokens > hits             # the adapter's own blocks are


def test_random_adapters_differ_by_name_even_with_a_long_shared_prefix():
    arch = get_model("tiny")
    from reference_server.engine.lora import random_adapter

    one, two = (random_adapter(name, 4, arch, 0, torch.float32) for name in ("tenant-0001", "tenant-0002"))
    assert not torch.equal(one.weights[0]["o_proj"][0], two.weights[0]["o_proj"][0])


def test_a_request_for_an_unknown_adapter_is_rejected():
    from reference_server.engine.outputs import RequestRejected

    engine = _engine(enable_lora=True, lora_modules=(("a", "random"),))
    with pytest.raises(RequestRejected, match="LoRA adapter 'nope' is not served here"):
        engine.add_request("x", [1, 2], SamplingParams(max_tokens=2), lora="nope")
    with pytest.raises(RequestRejected, match="without --enable-lora"):
        _engine().add_request("x", [1, 2], SamplingParams(max_tokens=2), lora="a")


def test_every_linear_layer_of_every_decoder_layer_is_wrapped():
    engine = _engine(enable_lora=True, lora_modules=(("a", "random"),), quantization="int8")
    wrapped = [m for m in engine.runner.model.modules() if isinstance(m, LoraLinear)]
    assert len(wrapped) == 4 * get_model("tiny").num_layers
    assert type(wrapped[0].base).__name__ == "Int8Linear"   # over quantized weights too


@pytest.mark.parametrize("argv, words", [
    (["--enable-lora", "--lora-modules", "big=random:32"], "adapter 'big' has rank 32, above max_lora_rank 16"),
    (["--enable-lora", "--lora-modules", "gone=/nonexistent/adapter"], "/nonexistent/adapter is not a directory"),
    (["--enable-lora", "--lora-modules", "justaname"], "expected NAME=SOURCE"),
    (["--lora-modules", "a=random"], "need --enable-lora"),
    (["--enable-lora", "--random-loras", "4", "--strategy", "static"], "continuous strategy"),
    (["--enable-lora", "--random-loras", "2", "--max-loras", "0"], "max_loras"),
    (["--enable-lora", "--random-loras", "2", "--emulate", "h100-sxm", "--model", "llama-3.1-8b"],
     "emulated GPU runs no weights"),
    (["--enable-lora", "--lora-modules", "tiny=random"], "adapter name 'tiny' is the base model's"),
])
def test_bad_lora_flags_exit_2_before_the_server_starts(argv, words, capsys):
    from reference_server.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_random_loras_name_n_adapters_beside_the_given_ones():
    from reference_server.cli import build_parser, configs_from_args

    args = build_parser().parse_args(["--enable-lora", "--lora-modules", "sql=random:4", "--random-loras", "3",
                                      "--max-loras", "2"])
    engine, _, _ = configs_from_args(args)
    assert engine.lora_modules == (("sql", "random:4"), ("lora-1", "random"), ("lora-2", "random"),
                                   ("lora-3", "random"))
    assert engine.max_loras == 2 and engine.enable_lora

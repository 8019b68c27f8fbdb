"""The engine end to end on the `tiny` preset: batching never changes greedy results."""

import time

import pytest
import torch
from engine_runs import GREEDY, MAX_TOKENS, PROMPTS, make_engine, run

from reference_server.engine.config import EngineConfig
from reference_server.engine.engine import Engine, RequestRejected
from engine_core.scheduling.postprocess import StopRule
from engine_core.scheduling.sampling import SamplingParams
from engine_core.scheduling.strategies import STRATEGIES
from engine_core.scheduling.strategies.static import StaticLimits

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def workload(engine, ignore_eos=True):
    return {rid: (engine.tokenizer.encode(text), SamplingParams(max_tokens=MAX_TOKENS[rid],
                                                                ignore_eos=ignore_eos, **GREEDY))
            for rid, text in PROMPTS.items()}


@pytest.fixture(scope="module")
def alone() -> dict[str, list[int]]:
    """Each request run by itself on a fresh engine (the ground truth)."""
    results = {}
    for rid, req in workload(make_engine()).items():
        results.update(run(make_engine(strategy="none"), {rid: req}))
    return results


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_greedy_outputs_identical_across_strategies_and_to_running_alone(strategy, alone):
    engine = make_engine(strategy=strategy)
    out = run(engine, workload(engine))
    assert out == alone
    assert all(len(out[rid]) == MAX_TOKENS[rid] for rid in out)


def test_greedy_with_eos_allowed_matches_across_strategies():
    results = {}
    for strategy in STRATEGIES:
        engine = make_engine(strategy=strategy)
        results[strategy] = run(engine, workload(engine, ignore_eos=False))
    assert all(r == results["none"] for r in results.values())


def test_preemption_under_tiny_block_budget_completes_with_same_output():
    # short prompts admitted together, then each grows to 8 + 40 tokens = 12 blocks: 20 blocks hold one
    engine = make_engine(strategy="continuous", kv_blocks=20, max_num_seqs=4)
    params = SamplingParams(max_tokens=40, ignore_eos=True, **GREEDY)
    requests = {f"p{i}": ([10 * i + j for j in range(8)], params) for i in range(4)}
    out = run(engine, requests)
    assert engine.stats().total_preemptions > 0
    for rid, req in requests.items():
        assert out[rid] == run(make_engine(strategy="none", kv_blocks=20), {rid: req})[rid]


def test_prefix_cache_hits_on_a_shared_prompt(alone):
    engine = make_engine(strategy="continuous")
    ids, params = workload(engine)["a"]
    first = run(engine, {"a": (ids, params)})
    before = engine.stats().total_prefix_cache_hit_tokens
    engine.add_request("a2", ids, params)
    outs = []
    while engine.has_unfinished_requests():
        outs += engine.step()
    hit = outs[0].num_cached_prompt_tokens
    assert hit == (len(ids) - 1) // 4 * 4           # every full block but the one holding the last token
    assert engine.stats().total_prefix_cache_hit_tokens - before == hit
    assert engine.stats().total_prefix_cache_queries >= 2 * len(ids)
    assert [t for o in outs for t in o.new_token_ids] == first["a"] == alone["a"]
    assert engine.stats().kv_blocks_used == 0


def test_seeded_sampling_does_not_depend_on_the_batch():
    params = SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9, seed=1234, ignore_eos=True)
    ids = make_engine().tokenizer.encode("sampling test")
    solo = run(make_engine(), {"s": (ids, params)})
    crowd = {f"o{i}": (ids[: i + 2], SamplingParams(max_tokens=5, temperature=1.0, ignore_eos=True))
             for i in range(3)}
    batched = run(make_engine(), {**crowd, "s": (ids, params)})
    assert batched["s"] == solo["s"]
    other_seed = run(make_engine(), {"s": (ids, SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9,
                                                               seed=99, ignore_eos=True))})
    assert other_seed["s"] != solo["s"]


def test_tiny_top_p_is_greedy():
    engine = make_engine()
    ids = engine.tokenizer.encode("nucleus")
    sampled = run(engine, {"s": (ids, SamplingParams(max_tokens=8, top_p=1e-6, seed=5, ignore_eos=True))})
    greedy = run(make_engine(), {"s": (ids, SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY))})
    assert sampled == greedy


def test_stop_token_ends_with_stop_and_min_tokens_suppresses_it(alone):
    engine = make_engine()
    ids, _ = workload(engine)["a"]
    stop_at = alone["a"][4]
    first = alone["a"].index(stop_at)
    out = run(engine, {"s": (ids, SamplingParams(max_tokens=20, stop_token_ids=(stop_at,), **GREEDY))})
    assert out["s"] == alone["a"][: first + 1]
    # with min_tokens past that point, the stop id cannot be produced before min_tokens
    engine.add_request("m", ids, SamplingParams(max_tokens=20, min_tokens=first + 2,
                                               stop_token_ids=(stop_at,), **GREEDY))
    produced = []
    while engine.has_unfinished_requests():
        produced += [t for o in engine.step() for t in o.new_token_ids]
    assert stop_at not in produced[: first + 2]


def test_eos_finishes_with_stop_unless_ignored(alone):
    """Make a token the model does produce play EOS: the request ends there, unless ignore_eos."""
    ids, _ = workload(make_engine())["a"]
    fake_eos = alone["a"][3]
    first = alone["a"].index(fake_eos)
    outputs = {}
    for ignore in (False, True):
        engine = make_engine()
        engine.tokenizer.eos_id = engine.sampler.eos_id = fake_eos
        engine.stop_rule = StopRule(eos_id=fake_eos, max_model_len=engine.max_model_len)
        engine.add_request("a", ids, SamplingParams(max_tokens=20, ignore_eos=ignore, **GREEDY))
        outputs[ignore] = [o for _ in range(100) for o in engine.step()]
    assert [o.new_token_ids[0] for o in outputs[False]] == alone["a"][: first + 1]
    assert outputs[False][-1].finished and outputs[False][-1].finish_reason == "stop"
    assert [o.new_token_ids[0] for o in outputs[True]] == alone["a"]
    assert outputs[True][-1].finish_reason == "length"


@pytest.mark.parametrize("prompt, params, match", [
    ([], SamplingParams(), "prompt is empty"),
    ([300], SamplingParams(), "token ids must be integers"),
    ([1] * 60, SamplingParams(max_tokens=10), "exceeds the maximum context length 64"),
    ([1] * 30, SamplingParams(max_tokens=20), "needs 13 KV blocks but the whole cache holds 8"),
])
def test_requests_that_can_never_fit_are_rejected_clearly(prompt, params, match):
    engine = make_engine(max_model_len=64, kv_blocks=8)
    with pytest.raises(RequestRejected, match=match):
        engine.add_request("r", prompt, params)
    assert not engine.has_unfinished_requests()
    assert issubclass(RequestRejected, ValueError)


def test_duplicate_request_id_rejected():
    engine = make_engine()
    engine.add_request("r", [1, 2], SamplingParams())
    with pytest.raises(RequestRejected, match="already in use"):
        engine.add_request("r", [1, 2], SamplingParams())
    engine.abort_request("r")


def test_abort_frees_blocks_at_once_and_ignores_unknown_ids():
    engine = make_engine(strategy="continuous")
    engine.add_request("r", list(range(40)), SamplingParams(max_tokens=50, ignore_eos=True))
    engine.add_request("w", list(range(10)), SamplingParams(max_tokens=5))
    engine.step()
    assert engine.stats().kv_blocks_used > 0
    engine.abort_request("r")
    engine.abort_request("w")
    engine.abort_request("never-seen")
    assert engine.stats().kv_blocks_used == 0 and not engine.has_unfinished_requests()
    engine.add_request("r", [1, 2], SamplingParams(max_tokens=1))   # the id is free again
    run(engine, {})


def test_static_wait_comes_from_the_injected_clock():
    now = [100.0]
    engine = Engine(EngineConfig(model="tiny", limits=StaticLimits(batch_size=2, batch_timeout_ms=50.0)),
                    clock=lambda: now[0])
    assert engine.seconds_until_schedulable() is None
    engine.add_request("a", [1, 2, 3], SamplingParams(max_tokens=1))
    assert engine.seconds_until_schedulable() == pytest.approx(0.05)
    assert engine.step() == []
    now[0] += 0.05
    assert engine.seconds_until_schedulable() == 0.0
    assert [o.request_id for o in engine.step()] == ["a"]


def test_step_delay_injection_slows_every_step_by_that_much_cpu_time():
    engine = make_engine(inject_step_delay_ms=30.0)
    engine.add_request("a", [1, 2, 3], SamplingParams(max_tokens=2, ignore_eos=True))
    start, cpu_start = time.perf_counter(), time.thread_time()
    run(engine, {})
    assert time.perf_counter() - start >= 2 * 0.030
    assert time.thread_time() - cpu_start >= 2 * 0.030    # compute, not sleep: the thread was busy
    assert engine.stats().last_step_s >= 0.030


def test_warmup_then_stats_and_describe():
    engine = make_engine(kv_blocks=20)
    engine.warmup()
    stats = engine.stats()
    assert stats.kv_blocks_used == 0 and stats.kv_blocks_total == 20 and stats.total_steps == 0
    assert stats.total_prefix_cache_queries == 0 and stats.total_prefix_cache_hit_tokens == 0
    info = engine.describe()
    arch = engine.arch
    assert info["kv_cache_bytes"] == engine.runner.kv_cache.nbytes == \
        2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * 4 * 4 * 20
    assert info["num_kv_blocks"] == 20 and info["strategy"] == "continuous" and info["dtype"] == "float32"
    assert info["strategy_limits"] == {"max_num_seqs": 4, "max_num_batched_tokens": 24,
                                       "max_prefill_tokens_with_decodes": 256, "chunked_prefill": True,
                                       "capacity_policy": "max-utilization"}
    assert info["architecture"]["num_layers"] == 2


def test_kv_memory_budget_buys_whole_blocks():
    engine = make_engine(kv_memory_bytes=10_000)
    assert engine.num_kv_blocks == 10_000 // engine.kv_block_bytes
    with pytest.raises(ValueError, match="kv_memory_bytes"):
        make_engine(kv_memory_bytes=10)


def test_bfloat16_engine_runs():
    engine = make_engine(dtype="bf16")
    assert engine.runner.kv_cache.dtype == torch.bfloat16 and engine.config.dtype == "bfloat16"
    out = run(engine, {"a": ([1, 2, 3], SamplingParams(max_tokens=4, ignore_eos=True, **GREEDY))})
    assert len(out["a"]) == 4


def test_engine_loads_a_checkpoint_directory(tmp_path):
    from reference_server.engine.checkpoint import save_checkpoint

    ref = make_engine(seed=7)
    save_checkpoint(tmp_path, ref.arch, ref.runner.model.state_dict())
    loaded = make_engine(model=str(tmp_path), seed=0)
    req = {"a": ([5, 6, 7, 8, 9], SamplingParams(max_tokens=8, ignore_eos=True, **GREEDY))}
    assert run(loaded, req) == run(ref, req)


@pytest.mark.parametrize("field, value", [
    ("model", ""), ("device", "tpu"), ("dtype", "int8"), ("strategy", "magic"), ("seed", -1),
    ("block_size", 0), ("kv_blocks", 0), ("kv_memory_bytes", -5), ("max_model_len", 0),
    ("max_num_seqs", 0), ("max_num_batched_tokens", 0), ("batch_size", 0), ("batch_timeout_ms", -1.0),
    ("max_batch_size", 0), ("preferred_batch_sizes", (0,)), ("max_queue_delay_us", -1),
    ("inject_step_delay_ms", -1.0), ("num_threads", 0),
])
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        EngineConfig.from_flags(**{field: value})


def test_config_cross_field_checks_and_aliases():
    with pytest.raises(ValueError, match="preferred_batch_sizes entry 16 exceeds max_batch_size"):
        EngineConfig.from_flags(max_batch_size=8, preferred_batch_sizes=(4, 16))
    cfg = EngineConfig.from_flags(dtype="FP16", strategy="Dynamic", preferred_batch_sizes=(4, 2, 4))
    assert (cfg.dtype, cfg.strategy, cfg.limits.preferred_batch_sizes) == ("float16", "dynamic", (2, 4))
    with pytest.raises(ValueError, match="model: unknown model"):
        Engine(EngineConfig(model="no-such-model"))
    with pytest.raises(ValueError, match="max_model_len 4096 exceeds"):
        Engine(EngineConfig(model="tiny", max_model_len=4096))


@pytest.mark.parametrize("field, value", [
    ("max_tokens", 0), ("temperature", -0.1), ("temperature", float("nan")), ("top_p", 0.0), ("top_p", 1.5),
    ("seed", -1), ("min_tokens", -1), ("stop_token_ids", (-3,)), ("ignore_eos", "yes"),
])
def test_bad_sampling_params_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        SamplingParams(**{field: value})
    with pytest.raises(ValueError, match="min_tokens"):
        SamplingParams(max_tokens=2, min_tokens=3)


def test_finished_outputs_carry_the_request_phases_on_the_engine_clock():
    """A clock that advances one second per reading: arrival, schedule, each token are distinct instants."""
    ticks = iter(range(100, 10_000))
    engine = Engine(EngineConfig(model="tiny", strategy="none"), clock=lambda: float(next(ticks)))
    engine.add_request("a", [1, 2, 3], SamplingParams(max_tokens=3, ignore_eos=True))
    engine.add_request("b", [4, 5], SamplingParams(max_tokens=2, ignore_eos=True))   # waits for "a" (strategy none)
    finished = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            assert (out.timings is None) != out.finished
            if out.finished:
                finished[out.request_id] = out.timings
    a, b = finished["a"], finished["b"]
    assert a.prefill_s > 0 and a.decode_s > 0 and a.inference_s == a.prefill_s + a.decode_s
    assert b.queue_s > a.inference_s   # b was scheduled only after a had finished
    assert min(value for t in (a, b) for value in (t.queue_s, t.prefill_s, t.decode_s)) >= 0

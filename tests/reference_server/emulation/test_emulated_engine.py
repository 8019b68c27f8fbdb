"""An emulated GPU (`servecap serve --emulate`): the real engine core sized as vLLM would size it on that
GPU, each step waiting the step model's time for its batch, and no weights anywhere."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from calculators.engine_profiles import engine_defaults
from calculators.gpu_engine import gpu_engine
from calculators.moe_layout import MoeLayout
from engine_core.gpus import get_gpu
from engine_core.models import get_model
from reference_server.engine.config import EngineConfig
from reference_server.engine.emulated_runner import EmulatedRunner, EmulatedTokens
from reference_server.engine.engine import Engine
from reference_server.engine.tokenizer import ByteTokenizer, IncrementalDecoder
from engine_core.scheduling.batch_shape import BatchShape
from engine_core.scheduling.sampling import SamplingParams


def _emulated(gpu="h100-sxm", model="llama-3.1-8b", dtype="bf16", **flags) -> Engine:
    limits = {**engine_defaults("vllm", get_gpu(gpu)).limit_flags(), **flags}
    return Engine(EngineConfig.from_flags(model=model, emulate=gpu, dtype=dtype, strategy="continuous", **limits))


@pytest.mark.slow   # a CLI subprocess
def test_the_kv_blocks_are_calc_fits_for_the_same_flags():
    out = subprocess.run([sys.executable, "-m", "servecap", "calc", "fit", "--model", "llama-3.1-8b", "--gpu",
                          "h100-sxm", "--dtype", "bf16", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    fitted = json.loads(out.stdout)
    engine = _emulated()
    assert engine.num_kv_blocks == fitted["num_blocks"] > 20_000
    assert engine.max_model_len == fitted["max_model_len"] == 131_072
    assert engine.block_manager.num_blocks == engine.num_kv_blocks


def test_an_engine_that_cannot_fit_the_model_says_why():
    with pytest.raises(ValueError, match="does not fit: weights"):
        _emulated(gpu="l4", model="llama-3.1-70b")


def test_it_says_it_is_emulated_wherever_it_describes_itself():
    described = _emulated().describe()
    assert described["device"] == "emulated h100-sxm, llama-3.1-8b bf16 (vllm sizing)"
    assert described["emulation"]["emulated"] is True and described["emulation"]["gpu"] == "h100-sxm"
    assert described["strategy_limits"]["max_num_seqs"] == 1024   # vLLM's on an 80 GB H100
    assert described["kv_cache_bytes"] == described["num_kv_blocks"] * described["kv_block_bytes"]


class FakeClock:
    """The runner's clock and sleep: time passes only when it sleeps."""

    def __init__(self):
        self.now = 100.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_a_steps_wait_follows_its_batch_shape_and_counts_from_the_steps_start():
    model = gpu_engine(get_model("llama-3.1-8b"), get_gpu("h100-sxm")).step_model
    fake = FakeClock()
    runner = EmulatedRunner(model, EmulatedTokens(0, ByteTokenizer().text_ids()), sleep=fake.sleep, clock=fake.clock)
    decode = BatchShape(sequences=8, prefill_tokens=0, decode_seqs=8, context_tokens=8 * 600)
    prefill = BatchShape(sequences=8, prefill_tokens=4096, decode_seqs=4, context_tokens=8 * 600 + 4096)
    assert runner.modelled_s(prefill) > 2 * runner.modelled_s(decode) > 0   # a prefill-heavy step is longer
    started = fake.now - 0.001                  # the engine spent 1 ms scheduling before it ran the batch
    runner.run(_Batch([]), decode, started)
    assert fake.now - started == pytest.approx(model.step_s(8, 0, 8 * 600))
    assert runner.last_forward_s == pytest.approx(model.step_s(8, 0, 8 * 600) - 0.001)


class _Batch:
    def __init__(self, seqs):
        self.seqs, self.num_new_tokens = seqs, [1] * len(seqs)


def test_step_jitter_is_seeded_with_mean_one():
    model = gpu_engine(get_model("llama-3.1-8b"), get_gpu("h100-sxm")).step_model
    shape = BatchShape(4, 0, 4, 4000)
    draws = [EmulatedRunner(model, EmulatedTokens(0, ByteTokenizer().text_ids()), seed=3, jitter_cv=0.1) for _ in range(2)]
    first = [draws[0].modelled_s(shape) for _ in range(2000)]
    assert first == [draws[1].modelled_s(shape) for _ in range(2000)]
    ratio = np.array(first) / model.step_s(4, 0, 4000)
    assert ratio.mean() == pytest.approx(1.0, abs=0.01) and ratio.std() == pytest.approx(0.1, abs=0.01)


def test_it_serves_requests_to_their_length_and_records_each_step_by_the_model():
    engine = _emulated()
    for i in range(4):
        engine.add_request(f"r{i}", [i + 1] * 512, SamplingParams(max_tokens=8, temperature=0.0))
    outputs = []
    while engine.has_unfinished_requests():
        outputs += engine.step()
    finished = {o.request_id: o for o in outputs if o.finished}
    assert set(finished) == {"r0", "r1", "r2", "r3"}
    assert all(o.num_output_tokens == 8 and o.finish_reason == "length" for o in finished.values())
    steps = engine.stats().records.steps
    assert steps[0].prefill_tokens == 2048 and all(s.prefill_tokens == 0 for s in steps[1:])
    model = engine.gpu.step_model
    modelled = [model.step_s(s.batch, s.prefill_tokens, s.context_tokens) for s in steps]
    # a deadline, less what the engine's own work after it was learnt to take: never much shorter
    assert sum(s.step_s for s in steps) >= 0.9 * sum(modelled)
    assert steps[0].step_s == max(s.step_s for s in steps)    # the prefill step is the longest


def test_every_token_it_writes_is_text_at_once_so_a_stream_shows_its_first_token_on_time():
    """Drawn among all 263 byte and special ids, about one first token in five was a multi-byte
    character's lead byte or a special id: the stream's first visible text came a step or more late."""
    engine = _emulated()
    for i in range(64):
        engine.add_request(f"r{i}", [i + 1] * 16, SamplingParams(max_tokens=6, temperature=1.0))
    tokens: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            tokens.setdefault(out.request_id, []).extend(out.new_token_ids)
    assert len(tokens) == 64 and all(len(ids) == 6 for ids in tokens.values())
    drawn = sorted({t for ids in tokens.values() for t in ids})
    assert set(drawn) <= set(ByteTokenizer().text_ids()) and len(drawn) > 60   # spread over the printable set
    for ids in tokens.values():
        decoder = IncrementalDecoder()
        assert all(len(decoder.feed([t])) == 1 for t in ids)   # each token one character, none held back
    assert engine.sampler.ids == ByteTokenizer().text_ids()   # the byte tokenizer's eos is special: none left out


def test_an_emulated_model_with_no_token_to_write_is_refused():
    with pytest.raises(ValueError, match="at least one token id"):
        EmulatedTokens(0, [])


def test_the_hand_off_between_back_to_back_steps_lies_inside_the_next_step():
    """While work waits, the emulated GPU runs from the previous step's end: time the loop spends between
    steps (publishing outputs, reading commands) does not lengthen the steps, and they abut in the record."""
    engine = _emulated()
    for i in range(2):
        engine.add_request(f"r{i}", [i + 1] * 64, SamplingParams(max_tokens=12, temperature=0.0))
    hand_off_s = 0.002
    while engine.has_unfinished_requests():
        engine.step()
        time.sleep(hand_off_s)
    steps = engine.stats().records.steps
    model = engine.gpu.step_model
    modelled = np.array([model.step_s(s.batch, s.prefill_tokens, s.context_tokens) for s in steps])
    realised = np.array([s.step_s for s in steps])
    assert np.median(realised / modelled - 1) == pytest.approx(0.0, abs=0.05)   # not +2 ms on ~7 ms steps
    gaps = np.array([b.t_start - (a.t_start + a.step_s) for a, b in zip(steps, steps[1:])])
    assert np.abs(gaps).max() < 1e-3


def test_a_step_after_an_idle_loop_counts_from_its_own_start():
    engine = _emulated()
    engine.add_request("r0", [1] * 64, SamplingParams(max_tokens=1, temperature=0.0))
    engine.step()
    assert not engine.has_unfinished_requests()
    time.sleep(0.02)
    engine.add_request("r1", [2] * 64, SamplingParams(max_tokens=1, temperature=0.0))
    engine.step()
    first, second = engine.stats().records.steps
    assert second.t_start - (first.t_start + first.step_s) >= 0.02
    assert second.step_s < 0.02


def test_flags_it_cannot_honour_are_named():
    from reference_server.cli import build_parser, configs_from_args

    def configs(*flags):
        return configs_from_args(build_parser().parse_args(["--emulate", "h100-sxm", "--model", "llama-3.1-8b",
                                                            *flags]))

    for flag, value in (("--kv-blocks", "100"), ("--device", "cuda"), ("--kv-memory-gib", "1")):
        with pytest.raises(ValueError, match=f"^{flag} cannot be honoured with --emulate"):
            configs(flag, value)
    with pytest.raises(ValueError, match="--block-size 32: vllm uses 16-token blocks"):
        configs("--block-size", "32")
    with pytest.raises(ValueError, match="unknown GPU|not in the catalog|gpu"):
        configs_from_args(build_parser().parse_args(["--emulate", "h1000", "--model", "llama-3.1-8b"]))
    with pytest.raises(ValueError, match="--tp describes an emulated GPU"):
        configs_from_args(build_parser().parse_args(["--tp", "2"]))
    engine, _, _ = configs("--max-num-seqs", "64")
    assert engine.limits.max_num_seqs == 64 and engine.limits.max_num_batched_tokens == 8192
    assert engine.dtype == "bf16" and engine.block_size == 16
    with pytest.raises(ValueError, match="--dp describes an emulated GPU"):
        configs_from_args(build_parser().parse_args(["--dp", "2"]))
    with pytest.raises(ValueError, match="llama-3.1-8b is dense"):
        Engine(configs("--dp", "2")[0])


def test_an_moe_replica_laid_out_dep_has_each_ranks_limits_and_kv_cache():
    from reference_server.cli import build_parser, configs_from_args

    flags = ["--emulate", "h100-sxm", "--model", "qwen3-30b-a3b", "--dtype", "fp8"]
    config, _, _ = configs_from_args(build_parser().parse_args([*flags, "--dp", "2", "--expert-parallel",
                                                                "--max-num-seqs", "64"]))
    assert (config.dp, config.expert_parallel) == (2, True)
    assert (config.limits.max_num_seqs, config.limits.max_num_batched_tokens) == (128, 2 * 8192)   # a rank's, twice
    engine = Engine(config)
    sizing = gpu_engine(get_model("qwen3-30b-a3b"), get_gpu("h100-sxm"), dtype="fp8", max_num_seqs=64,
                        layout=MoeLayout(2, True))
    assert engine.num_kv_blocks == sizing.num_kv_blocks == 2 * (sizing.num_kv_blocks // 2)
    assert engine.gpu.step_model == sizing.step_model and len(engine.gpu.step_model.batch_table) == 128
    emulation = engine.emulation()
    assert (emulation["dp"], emulation["expert_parallel"]) == (2, True)
    assert emulation["description"] == "emulated h100-sxm, dp 2, expert parallel, qwen3-30b-a3b fp8 (vllm sizing)"
    with pytest.raises(ValueError, match="an MoE layout is emulated for an aggregated replica"):
        configs_from_args(build_parser().parse_args([*flags, "--dp", "2", "--role", "prefill"]))


@pytest.mark.slow   # a real server subprocess, the official client
def test_a_70b_replica_serves_streams_with_no_weights_and_names_its_emulation_everywhere():
    """Llama-3.1-70B's bf16 weights are 140 GB, six times this machine's memory: serving it at all
    shows that no weights were allocated, and the engine process stays small."""
    import openai
    import psutil
    import requests

    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    spec = ReferenceServerSpec.from_flags(["--emulate", "h200", "--model", "llama-3.1-70b", "--tp", "2",
                                           "--no-classifier", "--stream-interval", "4"])
    with ServerProcess(spec) as server:
        said = "device=emulated h200, tp 2, llama-3.1-70b bf16 (vllm sizing)"
        assert said in server.output()                                          # the ready line
        engine = requests.get(server.base_url + "/v1/engine", timeout=10).json()
        assert engine["device"] == "emulated h200, tp 2, llama-3.1-70b bf16 (vllm sizing)"
        assert engine["emulation"]["tp"] == 2 and engine["num_kv_blocks"] > 10_000
        metrics = requests.get(server.base_url + "/metrics", timeout=10).text
        assert 'device="emulated h200, tp 2, llama-3.1-70b bf16 (vllm sizing)"' in metrics   # engine_info
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="none")
        stream = client.chat.completions.create(model="llama-3.1-70b", stream=True, max_tokens=12,
                                                messages=[{"role": "user", "content": "hello"}],
                                                stream_options={"include_usage": True})
        chunks = list(stream)
        assert chunks[-1].usage.completion_tokens == 12
        # --stream-interval 4: the first token alone, then 4 at a time; the same text as unstreamed
        assert engine["stream_interval"] == 4
        content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert 2 <= len(content) <= 4
        for_seed = dict(model="llama-3.1-70b", max_tokens=12, seed=5, messages=[{"role": "user", "content": "hi"}])
        streamed = "".join(c.choices[0].delta.content or "" for c in
                           client.chat.completions.create(stream=True, **for_seed) if c.choices)
        assert streamed == client.chat.completions.create(**for_seed).choices[0].message.content
        tree = psutil.Process(server.pid).children(recursive=True) + [psutil.Process(server.pid)]
        assert max(p.memory_info().rss for p in tree) < 2 << 30   # no 70 GB shard anywhere


def test_a_speculating_step_lasts_its_verification_and_the_drafts_passes():
    from calculators.sim.speculative_step import SpeculativeStep
    from calculators.sim.step_model import step_model_from_roofline

    target = gpu_engine(get_model("llama-3.1-70b"), get_gpu("h100-sxm"), dtype="fp8", max_model_len=4096).step_model
    draft = step_model_from_roofline(get_model("llama-3.2-1b"), get_gpu("h100-sxm"), dtype="fp8")
    plain = BatchShape(8, 0, 8, 8 * 600)
    verify = BatchShape(8, 0, 8, 8 * 600 + 8 * 4, proposal_tokens=32, proposing_seqs=8)
    ngram = SpeculativeStep(4, (0.7,))
    with_draft = SpeculativeStep(4, (0.7,), draft)
    assert ngram.extra_s(target, plain) == 0 and ngram.extra_s(target, verify) == pytest.approx(
        32 * target.per_prefill_token_s)
    assert with_draft.extra_s(target, verify) == pytest.approx(
        32 * target.per_prefill_token_s + draft.step_s(8, 0, verify.context_tokens)
        + 3 * draft.step_s(8, 0, verify.context_tokens))
    runner = EmulatedRunner(target, EmulatedTokens(0, ByteTokenizer().text_ids()), speculative=with_draft)
    assert runner.modelled_s(verify) == pytest.approx(target.step_s(8, 0, verify.context_tokens)
                                                      + with_draft.extra_s(target, verify))


def test_an_emulated_gpu_speculates_with_emulated_acceptance_and_says_so():
    engine = _emulated(model="llama-3.1-70b", speculative_method="draft", num_speculative_tokens=4,
                       speculative_model="llama-3.2-1b", speculative_acceptance=(0.7,), dtype="fp8",
                       max_model_len=4096)
    for i in range(8):
        engine.add_request(f"r{i}", [i + 1] * 64, SamplingParams(max_tokens=40, temperature=0.0))
    produced: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            produced.setdefault(out.request_id, []).extend(out.new_token_ids)
    assert all(len(tokens) == 40 for tokens in produced.values())
    stats = engine.stats()
    assert stats.spec_drafts > 0 and stats.total_steps < 40   # kept proposals saved steps
    rates = [n / stats.spec_drafts for n in stats.spec_accepted_per_position]
    assert rates == sorted(rates, reverse=True) and rates[0] == pytest.approx(0.7, abs=0.12)
    steps = stats.records.steps
    assert sum(s.accepted_tokens for s in steps) == stats.spec_accepted_tokens
    assert sum(s.proposal_tokens for s in steps) == stats.spec_draft_tokens
    speculative = engine.describe()["speculative"]
    assert speculative["mode"] == "emulated-acceptance" and "step model" in speculative["acceptance"]
    with pytest.raises(ValueError, match="emulated acceptance only"):
        _emulated(speculative_method="ngram", num_speculative_tokens=2)

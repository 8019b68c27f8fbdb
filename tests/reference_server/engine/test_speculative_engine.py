"""Speculative decoding in the engine: greedy outputs token for token with every method, the draft's own
KV cache, rejection sampling for sampled requests, emulated acceptance, and flags that cannot run."""

import pytest
from engine_runs import GREEDY, MAX_TOKENS, PROMPTS, make_engine, run

from reference_server.engine.config import EngineConfig
from engine_core.scheduling.sampling import SamplingParams

pytestmark = pytest.mark.usefixtures("one_torch_thread")


LOOPING = {   # prompts that repeat themselves: prompt lookup finds matches, and tiny's greedy output loops
    "r1": "abcabcabcabcabc",
    "r2": "the cat the cat the cat the cat",
    "r3": "x",
    "r4": "1 2 3 4 1 2 3 4 1 2 3",
}


@pytest.mark.parametrize("k", [1, 4])
def test_speculative_decoding_gives_greedy_outputs_token_for_token_and_frees_every_block(k):
    def requests(engine, ignore_eos):
        return {rid: (engine.tokenizer.encode(text), SamplingParams(max_tokens=40, ignore_eos=ignore_eos, **GREEDY))
                for rid, text in LOOPING.items()}

    for ignore_eos in (True, False):
        plain = make_engine(strategy="continuous")
        spec = make_engine(strategy="continuous", speculative_method="ngram", num_speculative_tokens=k)
        assert run(spec, requests(spec, ignore_eos)) == run(plain, requests(plain, ignore_eos))
        stats = spec.stats()
        assert stats.spec_drafts > 0 and stats.spec_draft_tokens >= stats.spec_drafts
        assert 0 < stats.spec_accepted_tokens <= stats.spec_draft_tokens   # tiny's loops are predictable
        assert sum(stats.spec_accepted_per_position) == stats.spec_accepted_tokens
        assert list(stats.spec_accepted_per_position) == sorted(stats.spec_accepted_per_position, reverse=True)
        assert stats.total_steps < plain.stats().total_steps   # accepted proposals save steps


def test_speculative_decoding_under_preemption_stays_exact():
    spec = make_engine(strategy="continuous", speculative_method="ngram", num_speculative_tokens=3, kv_blocks=20)
    plain = make_engine(strategy="continuous", kv_blocks=20)
    params = SamplingParams(max_tokens=40, ignore_eos=True, **GREEDY)
    requests = {f"p{i}": ([10 * i + j % 3 for j in range(8)], params) for i in range(4)}
    assert run(spec, requests) == run(plain, requests)
    assert spec.stats().total_preemptions > 0


def _draft_requests(engine):
    return {rid: (engine.tokenizer.encode(text), SamplingParams(max_tokens=MAX_TOKENS[rid] + 10, **GREEDY))
            for rid, text in PROMPTS.items()}


def test_a_draft_model_gives_greedy_outputs_token_for_token_and_frees_every_block(tmp_path):
    from reference_server.engine.checkpoint import save_checkpoint

    other = make_engine(seed=7)   # a different model with tiny's tokenizer: it disagrees often
    save_checkpoint(tmp_path, other.arch, other.runner.model.state_dict())
    plain = make_engine(strategy="continuous")
    expected = run(plain, _draft_requests(plain))
    spec = make_engine(strategy="continuous", speculative_method="draft", num_speculative_tokens=3,
                       speculative_model=str(tmp_path))
    assert run(spec, _draft_requests(spec)) == expected
    stats = spec.stats()
    assert stats.spec_draft_tokens > stats.spec_drafts > 0
    assert stats.spec_accepted_tokens < stats.spec_draft_tokens
    assert spec.block_manager.num_used_blocks == 0 and not spec.draft._seen


@pytest.mark.parametrize("kv_blocks", [None, 32])   # 32: the cache runs out, sequences are preempted and recomputed
def test_a_draft_that_is_the_target_is_always_right_so_its_own_cache_follows_every_kept_token(kv_blocks):
    """The draft keeps its own KV cache of what each sequence kept; any slot it got wrong would make a
    draft identical to the target (same preset, same seed) propose something the target rejects."""
    plain = make_engine(strategy="continuous", kv_blocks=kv_blocks)
    expected = run(plain, _draft_requests(plain))
    spec = make_engine(strategy="continuous", speculative_method="draft", num_speculative_tokens=4,
                       speculative_model="tiny", kv_blocks=kv_blocks)
    assert run(spec, _draft_requests(spec)) == expected
    stats = spec.stats()
    assert stats.spec_draft_tokens > 0 and stats.spec_accepted_tokens == stats.spec_draft_tokens
    assert (stats.total_preemptions > 0) == (kv_blocks is not None)


@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_sampled_requests_speculate_by_rejection_sampling_and_finish_at_max_tokens(method):
    extra = {"speculative_model": "tiny"} if method == "draft" else {}
    spec = make_engine(strategy="continuous", speculative_method=method, num_speculative_tokens=3, **extra)
    out = run(spec, {"s": ([1, 2, 1, 2, 1, 2, 1, 2], SamplingParams(max_tokens=30, ignore_eos=True,
                                                                    temperature=0.7, seed=3))})
    assert len(out["s"]) == 30
    assert spec.stats().spec_drafts > 0


def test_emulated_acceptance_keeps_proposals_at_the_given_rates_and_says_so():
    spec = make_engine(strategy="continuous", speculative_method="draft", num_speculative_tokens=3,
                       speculative_model="tiny", speculative_acceptance=(0.9, 0.5, 0.2), max_num_seqs=8)
    params = SamplingParams(max_tokens=60, ignore_eos=True, **GREEDY)
    run(spec, {f"r{i}": ([i + 5] * 6, params) for i in range(8)})
    stats = spec.stats()
    per_position = [n / stats.spec_drafts for n in stats.spec_accepted_per_position]
    assert stats.spec_drafts > 100   # the identical draft would keep all: the draws decide instead
    assert per_position == pytest.approx([0.9, 0.5, 0.2], abs=0.08)
    described = spec.describe()["speculative"]
    assert described["mode"] == "emulated-acceptance" and described["acceptance_per_position"] == [0.9, 0.5, 0.2]
    assert make_engine(strategy="continuous", speculative_method="ngram",
                       num_speculative_tokens=2).describe()["speculative"]["mode"] == "exact"


@pytest.mark.parametrize("flags, says", [
    (dict(strategy="dynamic", speculative_method="ngram", num_speculative_tokens=2), "continuous strategy"),
    (dict(strategy="continuous", speculative_method="ngram"), "num_speculative_tokens"),
    (dict(strategy="continuous", speculative_method="eagle", num_speculative_tokens=2), "must be one of draft, ngram"),
    (dict(strategy="continuous", num_speculative_tokens=2), "needs speculative_method"),
    (dict(strategy="continuous", speculative_method="draft", num_speculative_tokens=2), "needs speculative_model"),
    (dict(strategy="continuous", speculative_method="ngram", num_speculative_tokens=2, speculative_model="tiny"),
     "is for speculative_method draft"),
    (dict(strategy="continuous", speculative_method="ngram", num_speculative_tokens=2,
          speculative_acceptance=(0.5, 0.7)), "cannot rise"),
    (dict(strategy="continuous", speculative_method="ngram", num_speculative_tokens=2,
          speculative_acceptance=(0.5, 0.4, 0.3)), "one per position"),
    (dict(strategy="continuous", speculative_acceptance=(0.5,)), "needs speculative_method")])
def test_speculation_that_cannot_run_is_refused_naming_the_field(flags, says):
    with pytest.raises(ValueError, match=says):
        EngineConfig.from_flags(model="tiny", **flags)

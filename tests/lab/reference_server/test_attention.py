"""The attention micro-benchmark: every candidate computes the same attention as the engine's
plan (else its speed means nothing), and its JSON has a figure per candidate, mode and batch."""

import contextlib
import io
import json

import pytest
import torch

from lab.reference_server import attention as bench

TINY = ["--preset", "tiny", "--batches", "1,5", "--context", "40", "--iters", "1", "--threads", "1"]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@torch.inference_mode()
def test_every_candidate_matches_the_engines_plan_on_mixed_contexts():
    args = bench.parse_args(TINY)
    runner = bench.build_runner(args, 5)
    torch.manual_seed(0)
    runner.kv_cache.normal_()                 # cached keys/values that differ, so that attention matters
    batch = bench.decode_batch(bench.contexts_for("mixed", 5, 40), runner.num_blocks, seed=5)
    planners = bench.candidates(runner, overheads=[4.0])
    expected, _ = runner.forward(batch)
    for name, planner in planners.items():
        runner.attention_planner, engine_planner = planner, runner.attention_planner
        try:
            logits, _ = runner.forward(batch)
        finally:
            runner.attention_planner = engine_planner
        torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")


def test_mixed_contexts_keep_the_mean_and_spread():
    mixed = bench.contexts_for("mixed", 8, 64)
    assert sum(mixed) / 8 == pytest.approx(64, rel=0.02) and min(mixed) == 8 and max(mixed) == 120
    assert bench.contexts_for("uniform", 8, 64) == [64] * 8


def test_json_has_a_figure_per_candidate_mode_and_batch():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench.main([*TINY, "--candidates", "padded-matmul,sdpa-buckets", "--json"]) == 0
    result = json.loads(buffer.getvalue())
    assert set(result["tokens_per_s"]) == {"padded-matmul", "sdpa-buckets"}
    for modes in result["tokens_per_s"].values():
        assert all(len(modes[m]) == 2 and all(v > 0 for v in modes[m]) for m in ("uniform", "mixed"))


@pytest.mark.parametrize("argv, message", [(["--batches", "0"], "--batches must be positive"),
                                           (["--overheads", "x"], "comma-separated numbers")])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err

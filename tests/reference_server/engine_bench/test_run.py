"""The engine bench (`servecap bench`): its JSON shape (fixed by issue 2) and that its figures are consistent."""

import contextlib
import io
import json

import pytest

from contract.distributions import LengthDistribution

from calculators.kv import kv_bytes_for_tokens
from engine_core.models import get_model
from calculators.weights import weights
from reference_server.engine_bench import run as bench
from engine_core.scheduling.strategies import STRATEGIES

TINY = ["--model", "tiny", "--num-requests", "6", "--prompt-tokens", "uniform:4:20", "--output-tokens", "uniform:2:10",
        "--max-batch", "3", "--forward-iters", "1", "--num-threads", "1", "--json"]


@pytest.fixture(scope="module")
def result():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench.main(TINY) == 0
    return json.loads(buffer.getvalue())


def test_json_has_the_fixed_shape(result):
    assert result["preset"] == "tiny" and result["device"] == "cpu"
    assert set(result["forward_only"]) >= {"tokens_per_s_b1", "tokens_per_s_b3"}
    assert set(result["strategies"]) == set(STRATEGIES)
    for stats in result["strategies"].values():
        assert {"output_tokens_per_s", "mean_batch_size", "forward_share"} <= set(stats)


def test_every_strategy_produced_the_whole_workload(result):
    workload = bench.make_workload(6, LengthDistribution.uniform(4, 20), LengthDistribution.uniform(2, 10), seed=0)
    expected = sum(workload.output_lens)
    for name, stats in result["strategies"].items():
        assert stats["output_tokens"] == expected, name
        assert stats["output_tokens_per_s"] > 0
        assert 0 < stats["forward_share"] <= 1


def test_mean_batch_size_reflects_the_strategy(result):
    s = result["strategies"]
    assert s["none"]["mean_batch_size"] == 1.0
    assert 1.0 < s["static"]["mean_batch_size"] <= 3
    assert s["continuous"]["mean_batch_size"] >= s["static"]["mean_batch_size"]
    assert s["continuous"]["steps"] < s["none"]["steps"]
    assert s["none"]["gain_vs_none"] == 1.0


def test_decode_step_bytes_are_the_calculators_weights_read_plus_the_kv_cache():
    """What the bench divides by time is what calculators.weights and calculators.kv count:
    every weight once except an untied embedding table (a step reads only its batch's rows)."""
    engine = bench.Engine(bench.engine_config(bench.parse_args(TINY), "continuous", 16))
    arch, w = get_model("tiny"), weights(get_model("tiny"), "fp32")
    read_once = w.weight_bytes - w.embedding_bytes + w.lm_head_bytes
    per_token = kv_bytes_for_tokens(arch, 100, "fp32", block_size=1) // 100
    assert not arch.tie_embeddings
    assert bench.decode_step_bytes(engine, 1, 50) == read_once + 50 * per_token
    assert bench.decode_step_bytes(engine, 3, 50) - bench.decode_step_bytes(engine, 1, 50) == 2 * 50 * per_token


def test_bandwidth_is_step_bytes_times_steps_per_second(result):
    fwd = result["forward_only"]
    assert fwd["decode_step_bytes_b1"] > 0
    assert fwd["achieved_gb_s_b1"] == pytest.approx(fwd["decode_step_bytes_b1"] * fwd["tokens_per_s_b1"] / 1e9)
    assert fwd["achieved_gb_s_b3"] > 0
    assert result["datasheet"] is None and "share_of_datasheet_b1" not in fwd      # a CPU has no datasheet figure


def test_share_of_the_datasheet_when_the_gpu_is_known():
    fwd = {"context": 10, "tokens_per_s_b1": 100.0, "tokens_per_s_b2": 150.0}
    engine = bench.Engine(bench.engine_config(bench.parse_args(TINY), "continuous", 16))
    sheet = {"device_name": "NVIDIA H100 80GB HBM3", "gpu": "h100-sxm", "bandwidth_gb_s": 3350.0}
    out = bench.bandwidth(fwd, engine, 2, sheet)
    assert out["share_of_datasheet_b1"] == pytest.approx(out["achieved_gb_s_b1"] / 3350.0)
    assert out["achieved_gb_s_b2"] == pytest.approx(bench.decode_step_bytes(engine, 2, 10) * 75.0 / 1e9)


def test_forward_only_runs_no_strategy():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench.main([*TINY, "--forward-only"]) == 0
    result = json.loads(buffer.getvalue())
    assert result["strategies"] == {} and result["forward_only"]["tokens_per_s_b1"] > 0


def test_workload_is_seeded_and_in_range():
    prompt, output = LengthDistribution.uniform(64, 256), LengthDistribution.uniform(16, 256)
    a = bench.make_workload(20, prompt, output, seed=3)
    assert a == bench.make_workload(20, prompt, output, seed=3)
    assert a != bench.make_workload(20, prompt, output, seed=4)
    assert all(64 <= len(p) <= 256 for p in a.prompts) and all(16 <= o <= 256 for o in a.output_lens)


@pytest.mark.parametrize("argv, message", [
    (["--strategies", "none,bogus"], "unknown strategy 'bogus'"),
    (["--prompt-tokens", "9-20"], "--prompt-tokens"),
    (["--output-tokens", "uniform:5:2"], "--output-tokens"),
    (["--gpu", "no-such-gpu"], "unknown gpu 'no-such-gpu'"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_unknown_preset_is_a_clear_error(capsys):
    assert bench.main(["--model", "no-such-model", "--json"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


def test_repeats_run_the_strategies_in_turn_and_reverse_and_give_each_figures_spread():
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench.main([*TINY, "--strategies", "static,continuous", "--repeats", "2"]) == 0
    result = json.loads(buffer.getvalue())
    assert [p["order"] for p in result["repeats"]] == [["static", "continuous"], ["continuous", "static"]]
    assert result["strategies"] == result["repeats"][0]["strategies"]          # the fixed shape: the first repeat
    ratio = result["spread"]["continuous/static"]
    expected = [p["strategies"]["continuous"]["output_tokens_per_s"] / p["strategies"]["static"]["output_tokens_per_s"]
                for p in result["repeats"]]
    assert ratio["values"] == pytest.approx(expected) and ratio["min"] <= ratio["median"] <= ratio["max"]
    assert len(result["spread"]["ideal_gain_vs_static"]["values"]) == 2


def test_fewer_requests_than_the_batch_still_get_room_for_the_forward_passes_full_batch():
    # the bare forward passes run --max-batch sequences whatever the workload's size
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert bench.main(["--model", "tiny", "--num-requests", "2", "--max-batch", "8", "--forward-iters", "1",
                           "--num-threads", "1", "--forward-only", "--json"]) == 0   # the workload's default lengths
    assert json.loads(buffer.getvalue())["forward_only"]["tokens_per_s_b8"] > 0

"""The engine bench: its JSON shape (fixed by issue 2) and that its figures are consistent."""

import contextlib
import io
import json

import pytest

from reference_server import bench
from reference_server.schedulers import STRATEGIES

TINY = ["--preset", "tiny", "--num-requests", "6", "--prompt-len", "4,20", "--output-len", "2,10",
        "--max-batch", "3", "--forward-iters", "1", "--threads", "1", "--json"]


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
    workload = bench.make_workload(6, (4, 20), (2, 10), seed=0)
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


def test_workload_is_seeded_and_in_range():
    a = bench.make_workload(20, (64, 256), (16, 256), seed=3)
    assert a == bench.make_workload(20, (64, 256), (16, 256), seed=3)
    assert a != bench.make_workload(20, (64, 256), (16, 256), seed=4)
    assert all(64 <= len(p) <= 256 for p in a.prompts) and all(16 <= o <= 256 for o in a.output_lens)


@pytest.mark.parametrize("argv, message", [
    (["--strategies", "none,bogus"], "unknown strategy 'bogus'"),
    (["--prompt-len", "9"], "expected LO,HI"),
    (["--output-len", "5,2"], "expected 0 < LO <= HI"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_unknown_preset_is_a_clear_error(capsys):
    assert bench.main(["--preset", "no-such-model", "--json"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err

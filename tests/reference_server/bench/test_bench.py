"""The engine bench: its JSON shape (fixed by issue 2) and that its figures are consistent;
the drift bench runs and names bad arguments."""

import contextlib
import io
import json
import subprocess
import sys

import pytest

from reference_server.bench import drift
from reference_server.bench import engine as bench
from reference_server.scheduling.strategies import STRATEGIES

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


@pytest.mark.slow
def test_drift_bench_times_blocks_in_one_process_and_in_fresh_ones():
    result = subprocess.run([sys.executable, "-m", "reference_server.bench.drift", "--blocks", "2", "--processes", "1",
                             "--block-s", "0.3", "--json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)
    assert len(figures["one_process_ms"]) == 2 and len(figures["fresh_processes_ms"]) == 1
    assert all(0 < ms < 1000 for ms in figures["one_process_ms"] + figures["fresh_processes_ms"])


def test_drift_bench_names_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        drift.main(["--blocks", "0"])
    assert exit_info.value.code == 2 and "--blocks and --processes must be >= 1" in capsys.readouterr().err

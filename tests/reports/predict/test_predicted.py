"""reports.predict.per_level reads each strategy's own limits from run.json (and the flattened ones of older files)."""

from contract.level_result import Distribution, LevelResult, Offered
from engine_core.models import get_model
from reports.predict.per_level import predict_level
from contract.run_json import RunInfo


def _level(strategy: str) -> LevelResult:
    metric = Distribution(count=100, p50=0.01, p99=0.02)
    return LevelResult(level=f"{strategy}/c=16", strategy=strategy, offered=Offered("concurrency", 16),
                       prompt_tokens_mean=32.0, output_tokens_mean=16.0, server={"requests_running_max": 4.0},
                       metrics={"ttft_s": metric, "tpot_s": metric, "e2e_s": metric})


def _running(run: RunInfo, strategy: str) -> float:
    predicted = predict_level(run, _level(strategy), get_model("tiny"), None, "no step model here")
    return predicted.comparisons["running_sequences_peak"].predicted


def test_each_strategy_is_predicted_with_its_own_limits():
    engine = {"model": "tiny", "dtype": "float32", "block_size": 16, "num_kv_blocks": 64}
    run = RunInfo.from_dict({"server": {"model": "tiny", "engines": {
        "static": {**engine, "strategy": "static", "strategy_limits": {"batch_size": 4}},
        "dynamic": {**engine, "strategy": "dynamic", "strategy_limits": {"max_batch_size": 8}},
        "continuous": {**engine, "strategy": "continuous", "strategy_limits": {"max_num_seqs": 2}}}}})
    assert (_running(run, "static"), _running(run, "dynamic"), _running(run, "continuous")) == (4, 8, 2)


def test_a_run_json_with_flattened_limits_still_predicts():
    run = RunInfo.from_dict({"server": {"model": "tiny", "block_size": 16, "kv_blocks": 64,
                                        "batch_size": 4, "max_batch_size": 8, "max_num_seqs": 32}})
    assert (_running(run, "static"), _running(run, "dynamic")) == (4, 8)
    assert _running(run, "continuous") == 16  # 64 blocks // ceil(48 tokens / 16) = 21, under max_num_seqs 32

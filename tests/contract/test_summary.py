"""contract.summary and contract.level_result: summary.json read into typed objects and written back.

The real report's summary round-trips in tests/reports/test_summary_json.py; here, hand-written files:
an old one missing the newer keys, damaged ones, and the shapes a key's presence carries.
"""

import json
import math

import pytest

from contract.level_result import Comparison, Distribution, LevelPrediction, LevelResult, Offered
from contract.slo import SLO
from contract.summary import Summary, jsonable

# A level as summary.json held it before rounds, TTFA, reasoning, the canary, the loop lag and predictions.
OLD_LEVEL = {
    "level": "continuous/c=4", "strategy": "continuous", "offered": {"concurrency": 4}, "requests": 120, "ok": 118,
    "errors": 2, "error_rate": 2 / 120, "statuses": {"ok": 118, "http_503": 2}, "window": [100.0, 130.0],
    "duration_s": 30.0, "request_rate_rps": 118 / 30, "output_tokens_per_s": 400.0, "prompt_tokens_per_s": 800.0,
    "output_tokens": 12000, "prompt_tokens_mean": 200.0, "output_tokens_mean": 100.0, "goodput_rps": None,
    "slo_attainment": None,
    "metrics": {"ttft_s": {"count": 118, "mean": 0.05, "p50": 0.04, "p90": 0.08, "p95": 0.09, "p99": 0.12,
                           "p50_ci95": [0.038, 0.043], "p95_ci95": [0.085, 0.1], "p99_ci95": [0.1, 0.13],
                           "ci_method": "bootstrap(999)"}},
    "loadgen": {"workers": 1, "cpu_max_pct": 12.0, "limited_by_loadgen": False, "warnings": []},
    "server": {"engine": "servecap", "batch_size_mean": 3.5}, "device": {"host": {"util_pct": 90.0, "samples": 60}},
}
OLD_SUMMARY = {"run": {"server": {"model": "tiny"}}, "levels": [OLD_LEVEL],
               "verdict": {"slo": {"ttft_ms": 100, "tpot_ms": None, "e2e_ms": None}, "max_sustainable": [],
                           "knee": {"continuous": None}, "operating_point": None,
                           "cost": {"unavailable": "no GPU in run.json"}, "cost_by_strategy": {}},
               "missing": ["samples.csv is missing"], "loadgen_warnings": [], "metrics": ["ttft_s"]}


def test_an_old_summary_reads_with_defaults_for_what_it_lacks():
    problems = []
    summary = Summary.from_dict(json.loads(json.dumps(OLD_SUMMARY)), problems)
    assert problems == []
    [level] = summary.levels
    assert level.offered == Offered("concurrency", 4) and level.load == 4
    assert level.windows == () and level.spans == ((100.0, 130.0),)   # before rounds: its one window
    assert level.metrics["ttft_s"].p99 == 0.12 and level.metrics["ttft_s"].ci95("p99") == (0.1, 0.13)
    assert level.metric("ttfa_s") == Distribution() and level.metric("ttfa_s").count == 0   # before TTFA
    assert level.reasoning_tokens_mean is None and level.incomplete == 0 and level.host_steal == {}
    assert level.loadgen.lag_limited == () and level.loadgen.lateness_p99_ms is None
    assert level.client_vs_server is None and level.predicted is None
    assert summary.validation is None and summary.diagnostics is None and summary.quality is None
    assert summary.verdict.slo == SLO(ttft_ms=100) and summary.verdict.knee == {"continuous": None}
    written = summary.to_dict()
    # written back in the file's order, the newer keys with their empty values
    assert list(written) == ["run", "levels", "verdict", "missing", "loadgen_warnings", "unstable_levels",
                             "machine_drift_levels", "metrics", "quality"]
    assert written["verdict"]["slo"] == {"ttft_ms": 100, "tpot_ms": None, "e2e_ms": None, "ttfa_ms": None}
    level_out = written["levels"][0]
    assert level_out["windows"] == [] and level_out["reasoning_tokens_mean"] is None and level_out["host_steal"] == {}
    assert level_out["loadgen"] == {**OLD_LEVEL["loadgen"], "lag_limited": []}
    assert level_out["metrics"] == OLD_LEVEL["metrics"]
    assert "predicted" not in level_out and "client_vs_server" not in level_out
    assert Summary.from_dict(written).to_dict() == written   # and from then on it round-trips


def test_unknown_keys_are_kept_and_damaged_parts_are_left_out_with_a_sentence():
    document = json.loads(json.dumps(OLD_SUMMARY))
    document["from_the_future"] = {"x": 1}
    document["levels"][0]["also_new"] = [1, 2]
    document["levels"].append({"no": "level id"})
    document["levels"].append({"level": "c=8", "metrics": [], "offered": {"concurrency": 8, "rate_rps": 1.0}})
    problems = []
    summary = Summary.from_dict(document, problems)
    assert [lvl.level for lvl in summary.levels] == ["continuous/c=4", "c=8"]
    assert summary.levels[1].metrics == {} and summary.levels[1].offered is None
    assert any("without a level id" in p for p in problems) and any("metrics is not an object" in p for p in problems)
    assert any("offered is not one" in p for p in problems)
    written = summary.to_dict()
    assert written["from_the_future"] == {"x": 1} and written["levels"][0]["also_new"] == [1, 2]


def test_a_keys_presence_is_part_of_the_shape():
    # a simulated latency carries its replications' spread, even when it is unknown; a calculated one none
    simulated = {"predicted": 0.1, "measured": 0.2, "relative_error": -0.5, "unit": "s", "interval": None}
    calculated = {"predicted": 4.0, "measured": 4.0, "relative_error": 0.0, "unit": "sequences"}
    assert Comparison.from_dict(simulated).to_dict() == simulated
    assert Comparison.from_dict(calculated).to_dict() == calculated
    # a level nothing could be predicted for says why (and the model, when it was known), nothing else
    for shape in ({"unavailable": ["no model"]}, {"model": "tiny", "unavailable": ["bad GPU"]}):
        assert LevelPrediction.from_dict(shape).to_dict() == shape
    full = {"model": "tiny", "dtype": "float32", "block_size": 16, "step_model": "fitted", "kv_dtype": None,
            "kv_dtype_source": "unknown", "comparisons": {"step_s": calculated}, "unavailable": [], "model_source": "x"}
    assert LevelPrediction.from_dict(full).to_dict() == full
    # the client-server overhead is written where both sides are known; its share may be null (client 0)
    pair = {"client_p50": 0.0, "server_p50": 0.01, "server_p50_bucket": [0.0, None], "overhead_p50": -0.01,
            "overhead_share_p50": None, "client_p99": 0.2, "server_p99": None, "server_p99_bucket": None,
            "client_mean": None, "server_mean": 0.05}
    level = LevelResult.from_dict({"level": "c=1", "client_vs_server": {"ttft_s": pair, "warnings": ["w"]}})
    assert level.client_vs_server.ttft_s.server_p50_bucket == (0.0, None)
    assert level.to_dict()["client_vs_server"] == {"ttft_s": pair, "warnings": ["w"]}


def test_the_file_is_strict_json():
    assert jsonable({1: [math.nan, math.inf, (1, 2.5)], "x": None}) == {"1": [None, None, [1, 2.5]], "x": None}
    level = LevelResult(level="c=1", request_rate_rps=math.nan, server={"batch_size_mean": math.inf})
    written = Summary(levels=(level,)).to_dict()
    assert written["levels"][0]["request_rate_rps"] is None
    assert written["levels"][0]["server"] == {"batch_size_mean": None}
    json.dumps(written, allow_nan=False)


def test_a_summary_is_frozen():
    summary = Summary.from_dict(OLD_SUMMARY)
    with pytest.raises(AttributeError):
        summary.levels[0].ok = 3

"""Leave-one-level-out on runs the simulator made with a known model: (almost) no error.

The "measurement" is the simulator itself with a known step model (a batch table, prompt and
context costs, bursty noise) and front-end delays that grow with the load; the validation must
recover both from the run's files alone and predict each held-out level within sampling noise.
Also: summary.json's `validation` shape, and a run without the engine's record falling back.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from calculators.sim.front_end import FrontEnd
from calculators.sim.step_model import StepTimeModel
from contract.summary import ValidationSummary
from reports.report import ReportOptions, build_summary, write_report
from reports.run_data import load_run
from reports.predict.evidence import level_samples
from reports.summary import build_levels
from reports.predict.validation import KEYS, METHOD, levels_below_knee, validate
from reports.predict.simulated_run import write_simulated_run

NOISE = tuple(np.random.default_rng(0).lognormal(0.0, 0.1, 4000))
MODEL = StepTimeModel(base_s=0.001, per_seq_s=0.00008, per_prefill_token_s=1e-5, per_context_token_s=1e-7,
                      batch_table=(0.0010, 0.00115, 0.00125, 0.00133), jitter=NOISE, jitter_block=16)
FRONT = FrontEnd(tuple(np.random.default_rng(1).gamma(4, 0.0004, 500)),
                 tuple(np.random.default_rng(2).gamma(4, 0.0003, 500)),
                 tuple(np.random.default_rng(3).gamma(4, 0.0002, 500)), think_s=0.0003)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """Five levels of 40 s: enough requests that one run's p99 is within a few percent of its model's."""
    return write_simulated_run(tmp_path_factory.mktemp("sim") / "run", MODEL, FRONT,
                               limits={"max_num_seqs": 32}, concurrencies=(1, 2, 4, 8, 16), duration_s=40.0)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Three short levels: the shapes and the fallbacks, quickly."""
    return write_simulated_run(tmp_path_factory.mktemp("small") / "run", MODEL, FRONT,
                               limits={"max_num_seqs": 32}, concurrencies=(1, 2, 4), duration_s=4.0)


@pytest.mark.slow   # ~40 s of simulation: not a process, but not the fast suite's either
@pytest.mark.e2e
def test_leave_one_level_out_on_a_known_model_finds_almost_no_error(simulated):
    summary = build_summary(load_run(simulated), ReportOptions(figures=False, replications=6))
    validation = summary.validation
    errors = validation.median_abs_error
    for key in KEYS:
        assert errors[key] < (0.03 if key.endswith("p50") else 0.06), (key, errors[key])
    calibration = validation.by_strategy["continuous"].calibration
    assert calibration["step_model"]["per_prefill_token_us"] == pytest.approx(10.0, rel=0.1)
    assert not calibration["unavailable"]


def test_a_run_without_the_engine_record_falls_back_and_says_so(small, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("run.json", "requests.jsonl"):
        (bare / name).write_bytes((small / name).read_bytes())
    summary = build_summary(load_run(bare), ReportOptions(figures=False, replications=2))
    validation = summary.validation
    notes = " ".join(validation.by_strategy["continuous"].calibration["unavailable"])
    assert "front-end delays" in notes and "step-time noise" in notes
    assert set(validation.median_abs_error) == set(KEYS)   # still predicted, from the client's gaps


def test_a_report_calibrates_each_strategy_on_all_its_levels_once(small, monkeypatch):
    """The validation's calibration on every level is the one the per-level predictions use, not a second fit."""
    import reports.predict.calibration as calibration_module
    import reports.predict.validation as validation_module
    fitted = []

    def counting(real):
        return lambda group, *args, **kwargs: fitted.append(len(group)) or real(group, *args, **kwargs)

    monkeypatch.setattr(validation_module, "calibrate", counting(validation_module.calibrate))
    monkeypatch.setattr(calibration_module, "calibrate", counting(calibration_module.calibrate))
    summary = build_summary(load_run(small), ReportOptions(figures=False, replications=2))
    assert sorted(fitted) == [2, 2, 2, 3]   # each of the three levels held out, then all three once
    for level in summary.levels:
        assert level.predicted.step_model.startswith("latencies: leave-one-level-out (validation); "
                                                     "this run's calibration: ")


def test_the_report_draws_the_validation_and_collapses_the_long_table(small):
    """One report of the small run: summary.json's `validation` shape, its figures and its section."""
    result = write_report(small, ReportOptions(replications=2))
    validation = json.loads(result.summary_path.read_text())["validation"]
    assert validation["method"] == METHOD and validation["replications"] == 2
    assert set(validation["median_abs_error"]) == set(KEYS)
    assert set(validation["levels"]) == {f"continuous/c={c}" for c in (1, 2, 4)}
    for level, pairs in validation["levels"].items():
        assert set(pairs) == set(KEYS)
        for key, pair in pairs.items():
            assert set(pair) == {"predicted", "measured", "relative_error"}
            assert pair["relative_error"] == pytest.approx(pair["predicted"] / pair["measured"] - 1)
            metric, q = key.split(".")
            low, high = validation["predictions"][level][metric][q]["interval"]
            assert low <= pair["predicted"] <= high
    strategy = validation["by_strategy"]["continuous"]
    assert strategy["levels_in_median"] and set(strategy["levels_in_median"]) <= set(validation["levels"])
    names = {fig.name for fig in result.figures}
    assert {"validation_ttft_s.png", "validation_tpot_s.png", "validation_e2e_s.png"} <= names
    html = result.html_path.read_text()
    assert "Predictions validated on levels they did not see" in html
    assert "<details><summary>Per-level predictions" in html and "<details><summary>Every predicted quantity" in html


def test_error_sources_on_a_known_model_have_a_noise_floor_and_take_each_input_from_the_held_out_level(small):
    """The decomposition's variants on a run whose model is known: every variant predicts each level;
    with the held-out level's own step model and front end the error can only be the noise floor's."""
    from reports.predict.evidence import level_samples
    from lab.reports.error_sources import VARIANTS, error_sources
    from reports.summary import build_levels

    data = load_run(small)
    samples = level_samples(data, build_levels(data, data.run.slo))
    sources = error_sources(data.run, samples, replications=3)["continuous"]
    assert set(sources["levels"]) == {f"continuous/c={c}" for c in (1, 2, 4)}
    medians = sources["median_abs"]
    assert set(medians) == set(VARIANTS) and all(set(medians[v]) == set(KEYS) for v in VARIANTS)
    floor = medians["noise_floor"]
    assert all(0 < floor[key] < 0.2 for key in KEYS), floor   # a 4 s level wanders, but not by 20%
    for key in KEYS:   # the known model: taking inputs from the held-out level cannot leave much more
        assert medians["own_steps"][key] < 0.2 and medians["own_front_end"][key] < 0.2, key
    # one simulated machine throughout: the held-out levels ran at the calibration levels' speed
    speeds = [entry["speed"] for entry in sources["levels"].values()]
    assert all(s is not None and abs(s - 1) < 0.1 for s in speeds), speeds


def test_the_canary_variant_predicts_a_level_at_the_speed_the_canary_read_during_it(small, tmp_path):
    """One simulated machine throughout, but a canary that read c=2 as 25% slower: the canary variants
    (per level, per window) predict c=2 that much slower than it ran (its TPOT about +25%), while the plain prediction does not."""
    import shutil

    import pandas as pd

    from reports.predict.evidence import level_samples
    from lab.reports.error_sources import error_sources
    from reports.summary import build_levels

    run = tmp_path / "run"
    shutil.copytree(small, run)
    data = load_run(run)
    windows = data.level_windows()
    slow = windows["continuous/c=2"]
    start, end = data.records["t_start"].min(), data.records["t_end"].max()
    rows = []
    for t in np.arange(start, end, 0.25):
        factor = 1.25 if any(a <= t < b for a, b in slow) else 1.0
        rows += [(t, "continuous", 1, unit, 0.0005 * factor, 0.0005 * factor) for unit in ("python", "numpy")]
    pd.DataFrame(rows, columns=["t", "source", "core", "unit", "cpu_s", "wall_s"]).to_csv(run / "canary.csv", index=False)
    data = load_run(run)
    samples = level_samples(data, build_levels(data, data.run.slo))
    speeds = {s.level: s.machine_speed for s in samples["continuous"]}
    assert speeds == pytest.approx({"continuous/c=1": 1.0, "continuous/c=2": 1.25, "continuous/c=4": 1.0})
    levels = error_sources(data.run, samples, replications=3)["continuous"]["levels"]
    held = levels["continuous/c=2"]
    assert held["canary_speed"]["tpot_s.p50"] == pytest.approx(0.25, abs=0.08)
    assert held["canary_windows"]["tpot_s.p50"] == pytest.approx(0.25, abs=0.08)   # one window: the same speed
    assert abs(held["loo"]["tpot_s.p50"]) < 0.1


def _level(users: int, tokens_per_s: float, kind: str = "concurrency"):
    return SimpleNamespace(level=f"none/c={users}", kind=kind, load=float(users), output_tokens_per_s=tokens_per_s)


def test_the_medians_are_over_levels_below_the_knee_not_a_level_whose_throughput_fell_past_it():
    # the top at c=4, and a level past it whose throughput fell (a saturated closed loop's)
    group = [_level(1, 600.0), _level(2, 950.0), _level(4, 1000.0), _level(8, 990.0), _level(32, 750.0)]

    assert levels_below_knee(group) == ["none/c=1"]
    assert levels_below_knee([_level(1, 820.0), _level(2, 1000.0)]) == []
    # a rate level beside concurrency ones is judged by its throughput alone
    assert levels_below_knee([*group, _level(64, 500.0, kind="rate_rps")]) == ["none/c=1", "none/c=64"]


def test_a_level_too_long_for_the_budget_is_simulated_for_a_bounded_count_of_requests():
    from reports.predict.validation import MIN_REPLICATIONS, REQUEST_BUDGET, replications_for, requests_per_run
    assert requests_per_run(2500) is None and replications_for(2500, 8) == 4       # the window, 4 runs
    assert requests_per_run(83_000) == REQUEST_BUDGET // MIN_REPLICATIONS           # not 3 x 83,000
    assert replications_for(83_000, 8) == MIN_REPLICATIONS


def test_the_widest_gap_is_the_span_a_held_out_level_lay_across_and_a_sparse_grid_is_not_a_finding():
    from reports.predict.section import median_error_table, sparse_grid_sentence
    from reports.predict.validation import widest_gap
    doubling = [_level(c, 100.0 * c) for c in (1, 2, 4, 8, 16, 32)]
    dense = [_level(c, 100.0 * c) for c in (1, 2, 3, 4, 6, 8, 12)]
    # c=1 has no level below it; c=4 lies between c=2 and c=8
    assert widest_gap(doubling, ["none/c=1", "none/c=2", "none/c=4"]) == 4.0
    assert widest_gap(dense, ["none/c=1", "none/c=2", "none/c=3", "none/c=4", "none/c=6"]) == 3.0   # c=2: 1 to 3
    assert widest_gap(doubling, ["none/c=1"]) is None
    errors = {key: 4.78 for key in KEYS}
    document = {"median_abs_error": errors, "by_strategy": {
        "continuous": {"median_abs_error": errors, "levels_in_median": ["a"], "widest_gap": 16.0, "sparse_grid": True},
        "static": {"median_abs_error": errors, "levels_in_median": ["b", "c"], "widest_gap": 3.0,
                   "sparse_grid": False}}}
    validation = ValidationSummary.from_dict(document)
    said = sparse_grid_sentence(validation)
    assert said.startswith("Too sparse to validate: continuous (16x).") and "static" not in said
    table = median_error_table(validation)
    assert list(table["strategy"]) == ["static"]     # no pooled row: it would pool the sparse strategy's errors
    document["by_strategy"]["continuous"]["sparse_grid"] = False
    validation = ValidationSummary.from_dict(document)
    assert sparse_grid_sentence(validation) is None
    assert list(median_error_table(validation)["strategy"]) == ["continuous", "static", "all"]


def test_an_open_loop_level_is_predicted_at_the_rate_its_schedule_sent_not_the_nominal_one(tmp_path):
    rates = (40.0, 60.0, 80.0)
    run = write_simulated_run(tmp_path / "open", MODEL, FRONT, limits={"max_num_seqs": 32}, rates=rates,
                              duration_s=3.0)
    data = load_run(run)
    sent = data.records[data.records["phase"] == "measure"].groupby("level", observed=True).size()
    samples = level_samples(data, build_levels(data, data.run.slo))
    group = samples["continuous"]
    assert [s.kind for s in group] == ["rate_rps"] * 3
    for sample, nominal in zip(group, rates):
        assert sample.load == pytest.approx(sent[sample.level] / 3.0)   # a Poisson count: near, not at, the rate
        assert sample.load != nominal and abs(sample.load / nominal - 1) < 0.3
    validation = validate(data.run, samples, replications=2).summary
    assert set(validation.levels) == {s.level for s in group}


def test_a_reasoning_models_first_answer_token_is_validated_too(tmp_path):
    """A run whose requests reasoned (32 of 40 output tokens): the validation judges ttfa_s beside the others,
    and on the simulator's own run finds it within sampling noise where a level lies between two others."""
    rng = np.random.default_rng(4)
    lengths = tuple((int(p), 40, 32) for p in rng.integers(16, 48, 300))
    run = write_simulated_run(tmp_path / "run", MODEL, FRONT, limits={"max_num_seqs": 32}, concurrencies=(1, 2, 4, 8),
                              duration_s=6.0, lengths=lengths)
    summary = build_summary(load_run(run), ReportOptions(figures=False, replications=3))
    validation = summary.validation
    assert validation.keys == (*KEYS, "ttfa_s.p50", "ttfa_s.p99")
    for level, pairs in validation.levels.items():
        assert pairs["ttfa_s.p50"].measured > pairs["ttft_s.p50"].measured + 31 * 0.001   # 31 decodes of >= 1 ms
    for level in ("continuous/c=2", "continuous/c=4"):
        assert abs(validation.levels[level]["ttfa_s.p50"].relative_error) < 0.03, validation.levels[level]
    assert validation.median_abs_error["ttfa_s.p50"] < 0.03
    level = summary.levels[0]
    assert level.reasoning_tokens_mean == 32
    assert "ttfa_s p50" in level.predicted.comparisons

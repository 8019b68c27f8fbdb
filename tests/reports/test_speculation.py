"""The crossover a side-by-side report states: the speculating curve against the plain one, by offered load."""

from contract.level_result import Distribution, LevelResult, Offered
from reports.speculation import measured_crossover


def _level(strategy, c, tpot, tokens, accept=None):
    return LevelResult(strategy=strategy, level=f"{strategy}/c={c}", offered=Offered("concurrency", c),
                       metrics={"tpot_s": Distribution(count=100, p50=tpot)}, output_tokens_per_s=tokens,
                       server={"spec_acceptance_rate": accept})


def test_the_crossover_joins_the_curves_on_their_load_and_names_the_first_level_no_better():
    levels = [_level("A: continuous", c, tpot, tokens) for c, tpot, tokens in
              ((1, 0.030, 30), (4, 0.031, 120), (16, 0.035, 400), (64, 0.045, 900))]
    levels += [_level("B: continuous", c, tpot, tokens, accept=0.6) for c, tpot, tokens in
               ((64, 0.050, 850), (1, 0.012, 80), (4, 0.016, 230), (16, 0.036, 420))]   # any order
    found = measured_crossover(levels)
    assert (found.speculating, found.plain, found.axis) == ("B: continuous", "A: continuous", "concurrency")
    assert found.levels == (1, 4, 16, 64)
    assert (found.tpot_level, found.throughput_level) == (16, 64)
    assert found.statement == ("B: continuous (speculating) against A: continuous: speculation stops lowering TPOT "
                                  "at concurrency 16; it stops raising tokens/s at concurrency 64 (measured)")


def test_no_pair_no_crossover():
    plain = [_level("A", 1, 0.03, 30), _level("B", 1, 0.03, 30)]
    assert measured_crossover(plain) is None
    assert measured_crossover([_level("A", 1, 0.03, 30, accept=0.5)]) is None
    assert measured_crossover([_level("A", 1, 0.03, 30), _level("B", 2, 0.01, 30, accept=0.5)]) is None   # no shared load


def test_a_speculating_runs_setup_says_so():
    from reports.answer import setup_detail

    run = {"server": {"model": "small", "engines": {"continuous": {"speculative": {
        "method": "draft", "speculative_model": "tiny", "num_speculative_tokens": 4, "mode": "exact"}}}},
           "host": {"cpu_model": "Xeon", "cores": 2}}
    assert setup_detail(run) == "small on Xeon, 2 cores, no GPU, speculating (draft of tiny, k=4, exact acceptance)"
    run["server"]["engines"]["continuous"]["speculative"] = None
    assert setup_detail(run) == "small on Xeon, 2 cores, no GPU"

"""reports.page.strategy_table: strategies side by side per offered load (the notebook's strategy comparison)."""

import math

from dataclasses import replace

from contract.level_result import Distribution, LevelResult, Offered
from contract.summary import Summary
from reports.page.strategy_table import QUANTITIES, strategy_table


def _level(strategy, c, tok_s, e2e_p99, errors=0):
    return LevelResult(level=f"{strategy}/c={c}" if strategy else f"c={c}", strategy=strategy,
                       offered=Offered("concurrency", c), output_tokens_per_s=tok_s, request_rate_rps=tok_s / 10,
                       goodput_rps=None, errors=errors,
                       metrics={"ttft_s": Distribution(p99=None), "tpot_s": Distribution(count=10, p99=0.01),
                                "e2e_s": Distribution(count=10, p99=e2e_p99)})


def _summary(*levels):
    return Summary(levels=levels)


def test_one_row_per_load_one_column_per_quantity_and_strategy():
    summary = _summary(_level("none", 1, 100.0, 0.2), _level("none", 4, 300.0, 0.5, errors=2),
                       _level("continuous", 1, 110.0, 0.21), _level("continuous", 4, 900.0, 0.3))
    table = strategy_table(summary)
    assert list(table.index) == [("concurrency", 1), ("concurrency", 4)]
    assert list(table.columns.get_level_values("quantity").unique()) == list(QUANTITIES)
    assert list(table.columns.get_level_values("strategy").unique()) == ["none", "continuous"]
    assert table.loc[("concurrency", 4), ("output tok/s", "continuous")] == 900.0
    assert table.loc[("concurrency", 4), ("E2E p99 (ms)", "none")] == 500.0
    assert table.loc[("concurrency", 4), ("errors", "none")] == 2
    assert math.isnan(table.loc[("concurrency", 1), ("TTFT p99 (ms)", "none")])  # unknown stays unknown


def test_a_strategy_missing_a_load_leaves_a_gap():
    table = strategy_table(_summary(_level("none", 1, 100.0, 0.2), _level("continuous", 4, 900.0, 0.3)))
    assert math.isnan(table.loc[("concurrency", 4), ("output tok/s", "none")])
    assert table.loc[("concurrency", 1), ("output tok/s", "none")] == 100.0


def test_levels_without_strategy_or_load_are_left_out():
    odd = _level(None, 2, 50.0, 0.1)
    unparsed = replace(_level("none", 2, 50.0, 0.1), offered=None)
    assert strategy_table(_summary(odd, unparsed)).empty

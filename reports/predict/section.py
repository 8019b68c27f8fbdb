"""The report's validation section: how well the simulator predicts levels it was not calibrated on.

    section(summary, figures) -> (heading, blocks)     for reports.page.render (self-contained)

Blocks: what was done (a sentence), the median |error| per strategy and metric over the strategies
whose grid can be validated, a sentence naming those whose held-out levels lay between neighbours
WIDE_GAP or more apart in load (too sparse to validate: their errors are not findings, and are only in
the per-level table), what was not available, the predicted-vs-measured figures, and the per-level
table, collapsed.
"""

from __future__ import annotations

import pandas as pd

from reports.page.blocks import Block, Details
from reports.figures.common import FigureFile
from reports.predict.validation import LONG_LEVEL_REQUESTS, MEDIAN_LOAD_FRACTION, WIDE_GAP, keys_of
from contract.summary import Summary, ValidationSummary

HEADING = "Predictions validated on levels they did not see"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.0%}"


def median_error_table(validation: ValidationSummary) -> pd.DataFrame:
    """Median |relative error| per strategy (and over all) for p50 and p99 of TTFT, TPOT, E2E (and the first
    answer token's where a level reasoned), over the strategies whose grid is dense enough to validate (the
    pooled row only when none is too sparse)."""
    entries, keys = validation.by_strategy, keys_of(validation)
    rows = [{"strategy": strategy, "levels in median": len(entry.levels_in_median),
             **{key: _pct(entry.median_abs_error[key]) for key in keys}}
            for strategy, entry in entries.items() if not entry.sparse_grid]
    if len(rows) > 1 and len(rows) == len(entries):
        rows.append({"strategy": "all", "levels in median": sum(r["levels in median"] for r in rows),
                     **{key: _pct(validation.median_abs_error[key]) for key in keys}})
    return pd.DataFrame(rows)


def levels_table(validation: ValidationSummary) -> pd.DataFrame:
    """Every held-out level: predicted (its 95% spread) vs measured, ms, and the relative error."""
    rows = []
    for level, pairs in validation.levels.items():
        row = {"level": level}
        for key in keys_of(validation):
            metric, q = key.split(".")
            pair = pairs[key]
            found = validation.predictions.get(level, {}).get(metric, {}).get(q)
            spread = found.interval if found is not None else None
            predicted = "" if pair.predicted is None else f"{pair.predicted * 1e3:.1f}"
            if spread:
                predicted += f" [{spread[0] * 1e3:.1f}, {spread[1] * 1e3:.1f}]"
            measured = "" if pair.measured is None else f"{pair.measured * 1e3:.1f}"
            row[f"{key} ms predicted / measured"] = f"{predicted} / {measured}"
            row[f"{key} error"] = _signed(pair.relative_error)
        rows.append(row)
    return pd.DataFrame(rows)


def sparse_grid_sentence(validation: ValidationSummary) -> str | None:
    """The strategies too sparse to validate: a held-out level lay between neighbours WIDE_GAP or more apart."""
    sparse = {strategy: entry.widest_gap for strategy, entry in validation.by_strategy.items() if entry.sparse_grid}
    if not sparse:
        return None
    spans = ", ".join(f"{strategy} ({gap:.0f}x)" for strategy, gap in sparse.items())
    return (f"Too sparse to validate: {spans}. Held out, a level of this grid is predicted across a gap of "
            f"{WIDE_GAP:.0f}x or more in load between its neighbours, where the front end or the engine can "
            f"saturate, so its error measures the grid as much as the model and is not stated here as a finding "
            f"(the per-level table below still has it). To validate, measure levels about 1.5x apart, e.g. "
            f"--concurrency 1,2,3,4,6,8,12,16 (at most 3x between a level's neighbours).")


def section(summary: Summary, figures: list[FigureFile]) -> tuple[str, list[Block]] | None:
    validation = summary.validation or ValidationSummary()
    if not validation.levels and not validation.unavailable:
        return None
    blocks: list[Block] = [
        f"Each level was predicted by the simulator calibrated on its strategy's other levels only "
        f"(up to {validation.replications} simulated runs as long as the measured window; a level of more "
        f"than {LONG_LEVEL_REQUESTS:,} requests, runs of that many). The medians of "
        f"|predicted / measured - 1| are over the levels below the knee: at most {MEDIAN_LOAD_FRACTION:.0%} of their "
        f"strategy's highest output tokens/s, at a lower load than the level that reached it."]
    table = median_error_table(validation)
    if not table.empty:
        blocks.append(table)
    sparse = sparse_grid_sentence(validation)
    if sparse:
        blocks.append(sparse)
    notes = list(validation.unavailable)
    for strategy, entry in validation.by_strategy.items():
        notes += [f"{strategy}: {text}" for text in (entry.calibration or {}).get("unavailable", [])]
    if notes:
        blocks.append("\n".join(f"- {note}" for note in notes))
    blocks += figures
    if validation.levels:
        blocks.append(Details("Per-level predictions (leave-one-level-out)", [levels_table(validation)]))
    return HEADING, blocks

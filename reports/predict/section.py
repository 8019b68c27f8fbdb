"""The report's validation section: how well the simulator predicts levels it was not calibrated on.

    section(summary, figures) -> (heading, blocks)     for reports.page.render (self-contained)

Blocks: what was done (a sentence), the median |error| per strategy and metric (and, for a run in
rounds, each strategy's rounds floor: reports.bench.round_spread), a sentence where a held-out level lay
between neighbours WIDE_GAP or more apart in load, one naming the open-loop levels predicted at a rate
their schedule sent SENT_RATE_OFF or more off the nominal one, what was not available, the predicted-vs-measured
figures, and the per-level table, collapsed.
"""

from __future__ import annotations

import pandas as pd

from reports.page.blocks import Block, Details
from reports.figures.common import FigureFile
from reports.level_ids import parse_level_id
from reports.predict.validation import KEYS, LONG_LEVEL_REQUESTS, MEDIAN_LOAD_FRACTION

SENT_RATE_OFF = 0.02   # an open-loop level sent this far off its nominal rate gets named with the rate it was predicted at
WIDE_GAP = 4.0   # a held-out level between neighbours this far apart in load (a doubling grid's) gets the grid's sentence

HEADING = "Predictions validated on levels they did not see"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.0%}"


def median_error_table(validation: dict) -> pd.DataFrame:
    """Median |relative error| per strategy (and over all) for p50 and p99 of TTFT, TPOT, E2E."""
    rows, floors = [], []
    for strategy, entry in validation.get("by_strategy", {}).items():
        rows.append({"strategy": strategy, "levels in median": len(entry["levels_in_median"]),
                     **{key: _pct(entry["median_abs_error"][key]) for key in KEYS}})
        if entry.get("rounds_floor"):
            floors.append({"strategy": f"{strategy}: rounds floor", "levels in median": "",
                           **{key: _pct(entry["rounds_floor"][key]) for key in KEYS}})
    if len(rows) > 1:
        rows.append({"strategy": "all", "levels in median": sum(r["levels in median"] for r in rows),
                     **{key: _pct(validation["median_abs_error"][key]) for key in KEYS}})
    return pd.DataFrame(rows + floors)


def levels_table(validation: dict) -> pd.DataFrame:
    """Every held-out level: predicted (its 95% spread) vs measured, ms, and the relative error."""
    rows = []
    predictions = validation.get("predictions", {})
    for level, pairs in validation.get("levels", {}).items():
        row = {"level": level}
        for key in KEYS:
            metric, q = key.split(".")
            pair = pairs[key]
            spread = predictions.get(level, {}).get(metric, {}).get(q, {}).get("interval")
            predicted = "" if pair["predicted"] is None else f"{pair['predicted'] * 1e3:.1f}"
            if spread:
                predicted += f" [{spread[0] * 1e3:.1f}, {spread[1] * 1e3:.1f}]"
            measured = "" if pair["measured"] is None else f"{pair['measured'] * 1e3:.1f}"
            row[f"{key} ms predicted / measured"] = f"{predicted} / {measured}"
            row[f"{key} error"] = _signed(pair["relative_error"])
        rows.append(row)
    return pd.DataFrame(rows)


def wide_gap_sentence(validation: dict) -> str | None:
    """Where a held-out level lay between levels WIDE_GAP or more apart: the error there measures the grid too."""
    wide = {strategy: entry["widest_gap"] for strategy, entry in validation.get("by_strategy", {}).items()
            if (entry.get("widest_gap") or 0.0) >= WIDE_GAP}
    if not wide:
        return None
    spans = ", ".join(f"{strategy} {gap:.1f}x" for strategy, gap in wide.items())
    return (f"Held out, a level was predicted across the gap between its neighbours, here up to {spans} in load. "
            f"Where the front end or the engine saturates inside such a gap, the error there is the grid's as much "
            f"as the model's: a denser grid, levels about 1.5x apart (c = 1,2,3,4,6,8,12,16,24,32: at most 3x between a "
            f"level's neighbours), narrows it.")


def sent_rate_sentence(validation: dict) -> str | None:
    """Open-loop levels whose schedule sent more than SENT_RATE_OFF off their nominal rate: the rate each
    was predicted at (its name keeps the nominal one)."""
    off = []
    for entry in validation.get("by_strategy", {}).values():
        for level, sent in (entry.get("sent_rates_rps") or {}).items():
            nominal = parse_level_id(level).offered.get("rate_rps")
            if nominal and abs(sent / nominal - 1) > SENT_RATE_OFF:
                off.append(f"{level} at {sent:.2f} req/s")
    if not off:
        return None
    return ("An open-loop level was predicted at the rate its seeded schedule sent in the measured windows, not "
            "its nominal rate (a Poisson schedule sends more or fewer by chance, and every level replays the same "
            "seeds): " + ", ".join(off) + ".")


def section(summary: dict, figures: list[FigureFile]) -> tuple[str, list[Block]] | None:
    validation = summary.get("validation") or {}
    if not validation.get("levels") and not validation.get("unavailable"):
        return None
    blocks: list[Block] = [
        f"Each level was predicted by the simulator calibrated on its strategy's other levels only "
        f"(up to {validation.get('replications')} simulated runs as long as the measured window; a level of more "
        f"than {LONG_LEVEL_REQUESTS:,} requests, runs of that many). The medians of "
        f"|predicted / measured - 1| are over the levels below the knee: at most {MEDIAN_LOAD_FRACTION:.0%} of their "
        f"strategy's highest output tokens/s, at a lower load than the level that reached it."
        + (" A \"rounds floor\" row is the median error that a model knowing each level's expectation exactly "
           "would still show, from how far the level's percentiles move when its rounds are resampled whole: "
           "an error well above it is the model's, not the measurement's."
           if any(e.get("rounds_floor") for e in validation.get("by_strategy", {}).values()) else "")]
    table = median_error_table(validation)
    if not table.empty:
        blocks.append(table)
    for text in (wide_gap_sentence(validation), sent_rate_sentence(validation)):
        if text:
            blocks.append(text)
    notes = list(validation.get("unavailable", []))
    for strategy, entry in validation.get("by_strategy", {}).items():
        notes += [f"{strategy}: {text}" for text in entry.get("calibration", {}).get("unavailable", [])]
    if notes:
        blocks.append("\n".join(f"- {note}" for note in notes))
    blocks += figures
    if validation.get("levels"):
        blocks.append(Details("Per-level predictions (leave-one-level-out)", [levels_table(validation)]))
    return HEADING, blocks

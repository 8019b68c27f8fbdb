"""How fast the machine itself ran in each sub-window of a level, from the engine's own step record.

A level's throughput can vary between the thirds of its window for two reasons that mean
different things: the server had not settled (queues filling, batches forming: the batch
shapes change), or the machine ran at a different speed (the same batch shapes took longer:
a host neighbour, a frequency step). This 2-core VM does the second with nothing else running:
the engine's decode loop alone, timed over 1 s blocks, ranged 1.20-2.09 ms
(`python -m lab.reference_server.drift --blocks 25 --block-s 1`).

    speed_index(steps, start, end, windows) -> (s_1, ..., s_w) | None     (w equal sub-windows)
    speed_index_over(steps, spans) -> (s_1, ..., s_w) | None              (any spans: a level's rounds)
    busy_share_over(steps, spans) -> (b_1, ..., b_w) | None               the engine's busy share of each

s_k = sum of step_s in window k / sum of the reference time of the same steps, where a step's
reference time is the median step_s, over the whole level, of steps of its shape (batch size,
prefill tokens in buckets of 32, context tokens in buckets of 256). s_k = 1.2: the machine took
20% longer than usual for the same work in window k. Weighting by time (a ratio of sums, not a
median of ratios) makes s_k the factor by which window k's engine time was stretched, so
throughput_k x s_k is the throughput at the level's usual speed. On `make demo` (a quiet VM)
the raw spreads between thirds of 6-44% came down to 0-9% once corrected so.

Pure: a DataFrame of engine_steps.csv rows (contract.engine_record) in, numbers out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PREFILL_BUCKET = 32
CONTEXT_BUCKET = 256
MIN_STEPS_PER_WINDOW = 20   # fewer: no index (a window with a handful of steps says little)


SHAPE = ["batch", "prefill_bucket", "context_bucket"]   # the columns _shaped adds: a step's kind of work


def _shaped(steps: pd.DataFrame) -> pd.DataFrame:
    """engine_steps rows as (step_s, the SHAPE columns): prefill and context in their buckets."""
    return pd.DataFrame({"step_s": steps["step_s"].to_numpy(dtype=float), "batch": steps["batch"].to_numpy(),
                         "prefill_bucket": steps["prefill_tokens"].to_numpy() // PREFILL_BUCKET,
                         "context_bucket": steps["context_tokens"].to_numpy() // CONTEXT_BUCKET})


def speed_index(steps: pd.DataFrame | None, start: float, end: float, windows: int) -> tuple[float, ...] | None:
    """Per window of [start, end), the machine's time per unit of work relative to the level's usual;
    None without enough steps (no engine record, an external server, a tiny level)."""
    if not end > start:
        return None
    edges = np.linspace(start, end, windows + 1)
    return speed_index_over(steps, list(zip(edges[:-1], edges[1:])))


def speed_index_over(steps: pd.DataFrame | None, spans: list[tuple[float, float]]) -> tuple[float, ...] | None:
    """The same per span [start, end) of `spans` (disjoint), the level's usual being over all of them."""
    if steps is None or steps.empty or not spans:
        return None
    t_all = steps["t_start"].to_numpy(dtype=float)
    which = np.full(len(t_all), -1)
    for k, (start, end) in enumerate(spans):
        which[(t_all >= start) & (t_all < end)] = k
    rows = steps[which >= 0]
    if rows.empty:
        return None
    inside = _shaped(rows)
    inside["window"] = which[which >= 0]
    inside["reference_s"] = inside.groupby(SHAPE)["step_s"].transform("median")
    grouped = inside.groupby("window")
    counts = grouped.size().reindex(range(len(spans)), fill_value=0)
    if (counts < MIN_STEPS_PER_WINDOW).any():
        return None
    sums = grouped[["step_s", "reference_s"]].sum()
    if (sums["reference_s"] <= 0).any():
        return None
    return tuple(float(x) for x in sums["step_s"] / sums["reference_s"])


def busy_share_over(steps: pd.DataFrame | None, spans: list[tuple[float, float]]) -> tuple[float, ...] | None:
    """Per span [start, end), the share of it the engine spent in steps (their step_s over the span's
    length, at most 1): only that share of a window stretches when the engine's machine slows, the
    rest (the client, the front end, a static batch waiting to fill) does not. None without steps."""
    if steps is None or steps.empty or not spans:
        return None
    t = steps["t_start"].to_numpy(dtype=float)
    step_s = steps["step_s"].to_numpy(dtype=float)
    shares = []
    for start, end in spans:
        if not end > start:
            return None
        shares.append(min(1.0, float(step_s[(t >= start) & (t < end)].sum()) / (end - start)))
    return tuple(shares)


def level_speeds(steps_by_level: dict[str, pd.DataFrame | None], min_steps: int = MIN_STEPS_PER_WINDOW,
                 iterations: int = 100) -> dict[str, float]:
    """Each level's machine speed on one scale: a two-way fit over all the levels' steps,
        log step_s = shape effect + level effect        (least squares, by alternating means)
    so a level is compared with every other through the shapes they share, directly or along a
    chain (c=1 with c=2, c=2 with c=4, ...), not only on the shapes it shares with all of them.
    Returns {level: exp(level effect)}, normalized so the step-weighted mean of the logs is 0:
    1.1 = that level's steps took 10% longer than the run's usual for the same work. Levels with
    fewer than `min_steps` steps, or whose shapes no other level ran, are left out."""
    frames = {level: _shaped(frame) for level, frame in steps_by_level.items()
              if frame is not None and len(frame) >= min_steps}
    frames = {level: frame[frame["step_s"] > 0] for level, frame in frames.items()}
    if len(frames) < 2:
        return {}
    names = list(frames)
    joined = pd.concat([frame.assign(level=i) for i, frame in enumerate(frames.values())], ignore_index=True)
    shape = joined.groupby(SHAPE, sort=False).ngroup().to_numpy()
    level = joined["level"].to_numpy()
    # a level none of whose shapes another level ran has no common scale: leave it out
    shared = pd.Series(level).groupby(shape).transform("nunique").to_numpy() > 1
    linked = np.bincount(level[shared], minlength=len(names)) > 0
    keep = linked[level]
    shape, level, y = shape[keep], level[keep], np.log(joined["step_s"].to_numpy(dtype=float)[keep])
    counts = np.bincount(level, minlength=len(names)).astype(float)
    shape_counts = np.bincount(shape).astype(float)
    effect = np.zeros(len(names))
    for _ in range(iterations):
        work = np.bincount(shape, y - effect[level]) / np.maximum(shape_counts, 1)
        effect = np.bincount(level, y - work[shape], minlength=len(names)) / np.maximum(counts, 1)
        effect -= np.average(effect, weights=np.maximum(counts, 1e-12))
    return {names[i]: float(np.exp(effect[i])) for i in range(len(names)) if linked[i]}

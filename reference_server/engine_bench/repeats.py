"""The engine bench's repeats (`--repeats R`): each figure's spread over the passes.

Each pass is one run of the whole bench (`run._one_pass`: forward passes, the ideal bound, the
strategies in turn); R of them, the strategies in turn and in reverse turn, so a drifting machine
falls on every strategy alike. Pure: dicts in, dicts out (tables.print_spread prints it).
"""

from __future__ import annotations

import numpy as np


def spread_over_repeats(passes: list[dict]) -> dict:
    """Per figure, its value in each repeat and their median, min and max: every strategy's tok/s and
    share of the ideal bound, the bound's gain over each strategy, and each pair's ratio."""
    def summary(values: list[float]) -> dict:
        return {"values": values, "median": float(np.median(values)), "min": min(values), "max": max(values)}

    names = list(passes[0]["strategies"])
    out = {}
    for name in names:
        out[f"{name}.output_tokens_per_s"] = summary([p["strategies"][name]["output_tokens_per_s"] for p in passes])
        out[f"{name}.share_of_ideal"] = summary([p["strategies"][name]["share_of_ideal"] for p in passes])
        out[f"ideal_gain_vs_{name}"] = summary([p["bound"][f"ideal_gain_vs_{name}"] for p in passes])
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out[f"{b}/{a}"] = summary([p["strategies"][b]["output_tokens_per_s"] / p["strategies"][a]["output_tokens_per_s"]
                                       for p in passes])
    return out

"""What a plan of chained sessions means for their users: how long a whole session took, and how many were
open at once.

A session is the chain of requests one opening request starts (`Demand.after`): it opens when that request is
sent and closes when its last request ends. Completion is measured over the sessions whose every request
finished (a lost or unfinished one has no end; they are counted apart). Sessions open at once are counted
on the client's clock, from each opening send to its close (an unfinished one stays open to the run's
horizon): the peak is what a deployment must hold at one time, the mean its load over the run.
"""

from __future__ import annotations

import numpy as np

from calculators.plan.demand import Demand
from calculators.plan.fleet_run import FleetRun


def session_summary(demand: Demand, run: FleetRun) -> dict | None:
    """plan.json's `sessions` (None when no request waits on another)."""
    followers = demand.followers()
    if not followers:
        return None
    openers = [int(i) for i in np.flatnonzero(demand.after < 0)]
    opened, closed = [], []
    for first in openers:
        last = first
        while last in followers:
            last = followers[last]
        if first == last:
            continue   # a request waiting on nothing and waited on by nothing: not a session
        opened.append(float(run.send_s[first]))
        closed.append(float(run.end_s[last]))
    opened_a, closed_a = np.asarray(opened), np.asarray(closed)
    done = np.isfinite(closed_a)
    took = closed_a[done] - opened_a[done]
    open_until = np.where(done, closed_a, run.horizon_s)
    times = np.concatenate([opened_a, open_until])
    steps = np.concatenate([np.ones(len(opened_a)), -np.ones(len(open_until))])
    order = np.lexsort((steps, times))   # at one instant a close before an open
    level = np.cumsum(steps[order])
    span = float(open_until.max() - opened_a.min()) if len(opened_a) else 0.0
    mean_open = float((open_until - opened_a).sum() / span) if span > 0 else 0.0
    quantiles = {f"p{q}": float(np.percentile(took, q)) if len(took) else None for q in (50, 90, 99)}
    return {"sessions": len(opened_a), "completed": int(done.sum()), "completion_s": quantiles,
            "peak_open": int(level.max()) if len(level) else 0, "mean_open": mean_open}

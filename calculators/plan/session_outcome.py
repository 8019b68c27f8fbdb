"""What a plan of chained sessions means for their users: how long a whole session took, and how many were
open at once.

A session is the chain of requests one opening request starts (`Demand.after`, with any sub-agents it fans
out to and the turns that join them): it opens when that request is sent and closes when its last request
(the latest in the demand) ends. Completion is measured over the sessions whose last request
answered (one whose last request failed or never finished has no end; they are counted apart). Sessions open
at once are counted on the client's clock, from each opening send to its close (one without an end stays
open to the run's horizon: an upper bound): the peak is what a deployment must hold at one time, the mean its
load over the run.
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
    opened, closed = [], []
    for first in np.flatnonzero(demand.after < 0).tolist():
        if first not in followers:
            continue   # a request waiting on nothing and waited on by nothing: not a session
        last, todo, seen = first, [first], {first}
        while todo:
            for k in followers.get(todo.pop(), ()):
                if k not in seen:   # a join is reached from each sub-agent it waits on
                    seen.add(k)
                    last = max(last, k)
                    todo.append(k)
        opened.append(float(run.send_s[first]))
        closed.append(float(run.end_s[last]))
    return summarize_sessions(np.asarray(opened), np.asarray(closed), run.horizon_s)


def summarize_sessions(opened: np.ndarray, closed: np.ndarray, horizon_s: float) -> dict:
    """The module doc's figures from each session's opening send and its close (NaN: it never closed), on one
    clock: the plan's sessions and a fleet's measured ones are summarized alike."""
    done = np.isfinite(closed)
    took = closed[done] - opened[done]
    open_until = np.where(done, closed, max(horizon_s, float(np.nanmax(closed, initial=0.0))))
    times = np.concatenate([opened, open_until])
    steps = np.concatenate([np.ones(len(opened)), -np.ones(len(open_until))])
    order = np.lexsort((steps, times))   # at one instant a close before an open
    level = np.cumsum(steps[order])
    span = float(open_until.max() - opened.min()) if len(opened) else 0.0
    mean_open = float((open_until - opened).sum() / span) if span > 0 else 0.0
    quantiles = {f"p{q}": float(np.percentile(took, q)) if len(took) else None for q in (50, 90, 99)}
    return {"sessions": len(opened), "completed": int(done.sum()), "completion_s": quantiles,
            "peak_open": int(level.max()) if len(level) else 0, "mean_open": mean_open}

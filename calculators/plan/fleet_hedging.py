"""Hedging's side of the plan's fleet loop (calculators.plan.fleet): a request's copy sent when its delay is
up and no first token has shown, each race decided once its first token is sure (its replicas are run one
step at a time, earliest clock first, by `_settle`, calculators.plan.fleet_sessions), and a race's end
applied (calculators.plan.hedge_races). A mixin of `_Fleet`,
whose state (sims, holder, first, races, routable) it reads and changes. Pure."""

from __future__ import annotations

import math

import numpy as np


class FleetHedging:
    """`_Fleet`'s hedged requests: `_hedge`, `_decide_races`, `_apply`."""

    def _hedge(self, i: int, t: float) -> None:
        """Request i's hedge delay is up at t: a copy goes out unless its first token has shown."""
        rid = self.holder.get(i)
        if rid is None or rid not in self.sims or not self.routable:
            return   # answered, waiting at the router, or nowhere to send a copy
        self._advance(rid, t)
        if self.first[i] <= t or np.isfinite(self.end[i]) or i not in self.holder:
            return
        copy_rid = self._choose(i, self.attempts.routable(self.routable, t), t)
        j = self.races.open(i, rid, copy_rid, shown_s=self.first[i])
        self.first[i] = np.nan
        self._submit(j, i, copy_rid, t)

    def _decide_races(self) -> None:
        """Apply every race whose first token is sure now (calculators.plan.hedge_races); the replicas holding
        open races are stepped by `_settle` (calculators.plan.fleet_sessions)."""
        races = self.races
        if races is None or not races.open_races:
            return
        for verdict in races.decide(lambda j, rid: (self.sims[rid].now if rid in self.sims else math.inf)
                                    + self._out(j)[0]):
            self._apply(verdict)

    def _apply(self, v) -> None:
        """A race's end (hedge_races.Verdict): the winner's first token (and end) are the request's; the
        loser, if still on its replica, is aborted there now."""
        self.first[v.request] = v.first_token_s
        if not v.loser_ended and self.holder.get(v.loser) == v.loser_replica:   # in the engine, or on its way
            self.sims[v.loser_replica].abort(v.loser)
            self._left(v.loser_replica, v.loser, self.sims[v.loser_replica].now)
        if v.winner_end_s is not None:
            self._answered(v.request, v.winner_replica, v.winner_end_s)

"""Hedged requests in the plan's fleet (`--hedge-after`, contract.hedging's rule, as the load generator
acts it out): the bookkeeping of each race between a request and its copy.

    races = HedgeRaces(n)                        # the demand's n requests; a copy's id is n, n + 1, ...
    j = races.open(i, primary_replica, copy_replica, shown_s=...)   # the copy of request i is sent
    races.shown(j, t); races.ended(j, t, replica)                   # what the replicas report of a member
    for verdict in races.decide(clock): ...      # races whose first token is known for sure: winner, loser

A race is decided at its first first token `t` (on the client's clock), and only once every member that
has not shown can no longer show before `t` (its replica's clock has run that far): the caller steps the racing
replicas one step at a time, earliest clock first (`ReplicaSim.advance(..., one_step=True)`), so a
first token is never taken for the first before the other replica has run that far. The loser is
cancelled then, at its replica's step boundary, as an engine aborts a request whose client left. Ties
go to the request's own (primary) copy, as the load generator's race does.

Pure: request indices and times; the fleet loop owns the replicas.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Race:
    request: int
    members: dict[int, int]                               # member id (the request, or its copy) -> replica
    shown: dict[int, float] = field(default_factory=dict)
    ended: dict[int, float] = field(default_factory=dict)

    @property
    def copy(self) -> int:
        return next(j for j in self.members if j != self.request)


@dataclass(frozen=True)
class Verdict:
    request: int
    first_token_s: float
    winner: int                 # member id that showed first (the request itself, or its copy)
    winner_replica: int
    loser: int
    loser_replica: int
    winner_end_s: float | None  # the winner already finished (a one-token answer)
    loser_ended: bool           # the loser already finished: nothing left to cancel


class HedgeRaces:
    def __init__(self, n: int) -> None:
        self.n = n
        self.copy_of: list[int] = []                 # copy id - n -> its request
        self.open_races: dict[int, Race] = {}        # member id -> its race (both members point to one)
        self.hedged = np.zeros(n, dtype=bool)        # a copy was sent
        self.copy_kept = np.zeros(n, dtype=bool)     # the copy showed first

    def request_of(self, j: int) -> int:
        return j if j < self.n else self.copy_of[j - self.n]

    def racing(self, j: int) -> bool:
        return j in self.open_races

    def replicas(self) -> set[int]:
        """Replicas that hold a member of an undecided race."""
        return {rid for race in self.open_races.values() for rid in race.members.values()}

    def open(self, i: int, primary_replica: int, copy_replica: int, shown_s: float | None = None) -> int:
        """The copy of request i is sent to `copy_replica`; `shown_s`: the primary's first token, already
        reported by a step that ends after the hedge's moment (the client has not seen it yet). Its id."""
        j = self.n + len(self.copy_of)
        self.copy_of.append(i)
        race = Race(i, {i: primary_replica, j: copy_replica})
        if shown_s is not None and math.isfinite(shown_s):
            race.shown[i] = float(shown_s)
        self.open_races[i] = self.open_races[j] = race
        self.hedged[i] = True
        return j

    def shown(self, j: int, t: float) -> None:
        self.open_races[j].shown.setdefault(j, t)

    def ended(self, j: int, t: float) -> None:
        self.open_races[j].ended[j] = t

    def decide(self, earliest: Callable[[int, int], float]) -> list[Verdict]:
        """The races decided now: `earliest(member, replica)` is the soonest that member could still show its
        first token to the client (its replica's clock, +inf once it is gone, plus its front end's way out)."""
        verdicts = []
        for race in {id(r): r for r in self.open_races.values()}.values():
            if not race.shown:
                continue
            first = min(race.shown.values())
            if any(j not in race.shown and earliest(j, rid) < first for j, rid in race.members.items()):
                continue   # that member could still show first
            winner = race.request if race.shown.get(race.request) == first else race.copy
            loser = race.copy if winner == race.request else race.request
            verdicts.append(Verdict(race.request, first, winner, race.members[winner], loser, race.members[loser],
                                    race.ended.get(winner), loser in race.ended))
            self.copy_kept[race.request] = winner != race.request
            for j in race.members:
                del self.open_races[j]
        return verdicts

    def drop(self, j: int) -> Verdict:
        """Member j was lost with its replica (a fault): the race ends, and the other member, wherever it
        has got to, is the request's answer (`first_token_s` NaN: it has not shown yet)."""
        race = self.open_races[j]
        survivor = race.copy if j == race.request else race.request
        for member in race.members:
            del self.open_races[member]
        self.copy_kept[race.request] = survivor != race.request
        return Verdict(race.request, race.shown.get(survivor, math.nan), survivor, race.members[survivor], j,
                       race.members[j], race.ended.get(survivor), True)

    def run_fields(self, rule: str) -> dict:
        """The run's hedging fields (calculators.plan.fleet_run.FleetRun): per request, and the summary."""
        return {"hedged": self.hedged, "copy_kept": self.copy_kept,
                "hedging": hedging_summary(rule, self.hedged, self.copy_kept)}


def hedging_summary(rule: str, hedged: np.ndarray, copy_kept: np.ndarray) -> dict:
    """The hedging section both plan.json and fleet.json carry: per request whether a copy was sent and
    whether the copy was kept. Extra requests is copies over requests: the load the policy adds."""
    requests, copies, kept = len(hedged), int(hedged.sum()), int(copy_kept.sum())
    return {"after": rule, "requests": requests, "hedged": copies,
            "hedged_share": copies / requests if requests else None, "copies_kept": kept,
            "copies_kept_share": kept / copies if copies else None,
            "extra_requests": copies / requests if requests else None}

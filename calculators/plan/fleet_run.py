"""What a fleet run leaves: each replica's life and, per request, when it was sent, answered and by whom.

Written by the plan's fleet loop (`calculators.plan.fleet`) and, from a real fleet's records, by
`servecap fleet`; read by `calculators.plan.outcome`, which judges either the same way. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from calculators.plan.hedge_races import hedging_summary


class Decision(NamedTuple):
    """One autoscaler decision: at t_s, the count it wanted, the replicas ready, and the metric it read on
    each ready one (the plan's simulated replicas or a real fleet's /metrics), the inputs beside the answer
    so a plan's decision and a fleet's can be told apart by what each saw."""

    t_s: float
    wanted: int
    ready: int
    readings: tuple[float, ...] = ()

    def as_json(self) -> dict:
        return {"t_s": self.t_s, "wanted": self.wanted, "ready": self.ready,
                "readings": [float(f"{value:.6g}") for value in self.readings]}   # a day's ticks stay small


@dataclass
class ReplicaLife:
    """One replica's span: asked for, ready, told to stop (drain), stopped; killed by a fault or not."""

    id: int
    requested_s: float
    ready_s: float
    drain_s: float | None = None
    stopped_s: float | None = None
    killed: bool = False
    served: int = 0
    prefix_hit_tokens: int = 0      # prompt tokens its prefix cache held, of
    prefix_query_tokens: int = 0    # the prompt tokens it looked up


@dataclass
class FleetRun:
    """Per request (arrays over the demand's order) and the fleet's timeline."""

    send_s: np.ndarray
    first_token_s: np.ndarray
    end_s: np.ndarray
    output: np.ndarray
    replica: np.ndarray            # the replica that finished it (-1: not finished)
    retried: np.ndarray            # bool: sent again after its replica was killed
    lives: list[ReplicaLife]
    decisions: list[Decision]      # each autoscaler decision, in order
    horizon_s: float
    lost: np.ndarray | None = None  # bool: failed, never to finish: lost with a killed replica (a real fleet: an error)
    first_answer_s: np.ndarray | None = None   # first answer token after any reasoning (None: nothing reasons,
                                               # it is the first token)
    errored: np.ndarray | None = None   # bool: answered an error after the router's last attempt (an error burst)
    router: dict | None = None          # the router's attempts, retries, errors, sends and breaker openings
    hedged: np.ndarray | None = None     # bool: a hedge's copy was sent (None: no hedging)
    copy_kept: np.ndarray | None = None  # bool: the copy showed first and answered
    hedging: dict | None = None          # what the policy sent, over the whole run (hedge_races.hedging_summary)
    left_s: np.ndarray | None = None     # when it left for a fallback tier (NaN: stayed; None: no fallback)
    left_by_errors: np.ndarray | None = None   # bool: it left after the primary answered it an error

    @property
    def ttft_s(self) -> np.ndarray:
        return self.first_token_s - self.send_s

    @property
    def ttfa_s(self) -> np.ndarray:
        return (self.first_token_s if self.first_answer_s is None else self.first_answer_s) - self.send_s

    @property
    def e2e_s(self) -> np.ndarray:
        return self.end_s - self.send_s

    @property
    def tpot_s(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.output > 1, (self.end_s - self.first_token_s) / (self.output - 1), np.nan)

    def take(self, indices: np.ndarray) -> FleetRun:
        """The requests at `indices` (a share of the demand, in order), with every replica's life."""
        idx = np.asarray(indices, dtype=np.int64)

        def part(value):
            return None if value is None else value[idx]
        return FleetRun(self.send_s[idx], self.first_token_s[idx], self.end_s[idx], self.output[idx], self.replica[idx],
                        self.retried[idx], self.lives, self.decisions, self.horizon_s, lost=part(self.lost),
                        first_answer_s=part(self.first_answer_s), errored=part(self.errored), router=self.router,
                        hedged=part(self.hedged), copy_kept=part(self.copy_kept), left_s=part(self.left_s),
                        left_by_errors=part(self.left_by_errors),
                        hedging=None if self.hedged is None else hedging_summary(self.hedging["after"], self.hedged[idx],
                                                                                 self.copy_kept[idx]))

    def prefix_hit_rate(self) -> float | None:
        """Prompt tokens found in a replica's prefix cache, over those looked up, fleet-wide."""
        queried = sum(life.prefix_query_tokens for life in self.lives)
        return sum(life.prefix_hit_tokens for life in self.lives) / queried if queried else None

    def replica_seconds(self) -> float:
        return sum(((life.stopped_s if life.stopped_s is not None else self.horizon_s) - life.requested_s)
                   for life in self.lives)

    def ready_over_time(self, times: np.ndarray) -> np.ndarray:
        """Replicas ready (taking requests) at each of `times`."""
        out = np.zeros(len(times), dtype=np.int64)
        for life in self.lives:
            end = life.drain_s if life.drain_s is not None else (life.stopped_s if life.stopped_s is not None
                                                                 else math.inf)
            out += (times >= life.ready_s) & (times < end)
        return out

"""What every router policy shares: the replica as the router sees it, the policy's interface, a stable
64-bit hash, and vllm-router's least-loaded pick (`calculators.plan.router` has the policies)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

M64 = (1 << 64) - 1


@dataclass(frozen=True)
class ReplicaView:
    """What the router knows of one routable replica at decision time."""

    index: int       # the replica's stable id (never reused in a run)
    in_flight: int   # requests the router sent it that have not finished


class Router(Protocol):
    policy: str
    reads_load: bool   # whether `choose` reads ReplicaView.in_flight (the loop must bring it up to date)
    reads_text: bool   # whether `choose` takes `lead=`, the request's own text's first characters

    def choose(self, t: float, key: int | None, prefix: tuple[int, ...], replicas: Sequence[ReplicaView],
               blocks: int = 0) -> int: ...

    def finished(self, index: int, prefix: tuple[int, ...]) -> None: ...

    def removed(self, index: int) -> None: ...


def mix64(x: int) -> int:
    """SplitMix64's finaliser: a 64-bit integer hash, the same on every run (Python's str hash is salted)."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def first_least_loaded(replicas: Sequence[ReplicaView]) -> int:
    """vllm-router's `min_by_key(load)`: the least in-flight replica, the first of equals in the list."""
    best = replicas[0]
    low = best.in_flight
    for view in replicas:
        if view.in_flight < low:
            best, low = view, view.in_flight
    return best.index


class RouterBase:
    policy = ""
    reads_load = False
    reads_text = False

    def finished(self, index: int, prefix: tuple[int, ...]) -> None:
        """vllm-router's `on_request_complete` changes no policy state (the load count is the loop's)."""

    def removed(self, index: int) -> None:
        """A replica gone: a stateless policy has nothing of it to forget."""

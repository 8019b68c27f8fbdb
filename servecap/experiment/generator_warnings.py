"""A level's load-generator warnings over its rounds, one line per kind of warning.

A level measured in rounds (sweep --rounds R) collects each round's warnings in requests.meta.json
(contract.loadgen_meta.merge_rounds); printed as they came, four sweeps of 4 rounds on this
2-core VM (36 levels) printed 137 event-loop lag lines, up to four a level, that drowned the rest.
The console says each kind once per level, after its last round: the worst reading and how many
rounds had it. The meta file keeps every round's text for the report.

    "local@vm:7110: event-loop lag p99 3.10 ms > 1 ms: ..."   (round 1, one Locust process)
    "local@vm:7234: event-loop lag p99 17.60 ms > 1 ms: ..."  (round 3, another)
    -> "local@vm: event-loop lag p99 17.60 ms > 1 ms: ... (in 2 of 4 rounds)"
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _split(text: str) -> tuple[str, str]:
    """("worker", "what it said") from "worker: what it said" (merge_summaries' prefix), the worker
    without its process id: "local@vm:7166" -> "local@vm" (each round is a Locust process of its own)."""
    worker, _, said = text.partition(": ")
    if not said:
        return "", text
    name, _, pid = worker.rpartition(":")
    return (name if name and pid.isdigit() else worker), said


def _kind(text: str) -> tuple[str, str]:
    """(worker, the warning with its numbers masked): one round's lag warning and another's are one
    kind; two workers' (worker1@vm, worker2@vm) are two."""
    worker, said = _split(text)
    return worker, _NUMBER.sub("#", said)


def _readings(text: str) -> tuple[float, ...]:
    """Its numbers in order; the worst of one kind is the largest (the limit and the p99's 99 are the
    same in every text of a kind, so the measured value decides)."""
    return tuple(float(number) for number in _NUMBER.findall(_split(text)[1]))


def level_warnings(texts: list[str], rounds: int) -> list[str]:
    """One line per kind, in the order the kinds first came: the worst text of that kind, and, for a
    level measured in more than one round, in how many of its `rounds` it came."""
    by_kind: dict[tuple[str, str], list[str]] = {}
    for text in texts:
        by_kind.setdefault(_kind(text), []).append(text)
    lines = []
    for (worker, _), same in by_kind.items():
        worst = max(same, key=_readings)
        if rounds <= 1:
            lines.append(worst)
            continue
        said = f"{_split(worst)[1]} (in {min(len(same), rounds)} of {rounds} rounds)"
        lines.append(f"{worker}: {said}" if worker else said)   # the worker without one round's process id
    return lines

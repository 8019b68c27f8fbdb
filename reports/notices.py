"""The report's warnings, grouped: each kind said once, with what it means and the command that fixes it.

    notices(summary) -> [Notice]     pure: the typed summary in (report.html/.md and the console)

Kinds, in this order: levels whose throughput was not stable (run.json's `stable: false`, the
sweep's flag), a load generator that sent late, ran out of CPU, or whose timing error (its event-loop
lag) was wider than a percentile's own confidence interval (requests.meta.json, run.json's notes,
summary levels' `loadgen.lag_limited`), levels where much of the client's latency lay outside the
server's clock (`client_vs_server` warnings), and parts of the run directory that are missing or
damaged (`missing`). With `--diagnostics` (summary.json's `diagnostics`), also the instruments for a
host whose speed drifts: the share of a core the VM's host took (summary levels' `host_steal`, from
canary.csv) and, as a note, levels steady as a server while the machine's own speed drifted
(run.json's `machine_drift`).

    one_line(notice) -> str          the console's form: the title and its levels on one line
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reports.diagnostics.canary_speed import stolen_cores, stolen_text
from reports.summary import LATENESS_LIMIT_MS
from contract.level_result import LevelResult
from contract.run_json import RunInfo
from contract.summary import DriftLevel, Summary, UnstableLevel

LONGER_DURATION_S = 30   # the window the fix suggests at least (three sub-windows of 10 s)


@dataclass(frozen=True)
class Notice:
    title: str                       # what happened, in a few words
    meaning: str                     # what it means for the numbers
    fix: str | None                  # the command (or change) that fixes it, if there is one
    items: list[str] = field(default_factory=list)   # the levels or files it concerns
    severity: str = "warning"        # "warning": the numbers are rougher than they look; "note": context


def unstable_levels(run: RunInfo) -> list[UnstableLevel]:
    """The levels the sweep flagged (throughput spread over its tolerance, at constant machine speed when
    the engine's step record gave one; an open loop's: of what it served over what arrived)."""
    return [UnstableLevel(level=entry.level, spread=_first(entry.served_spread, entry.spread_at_constant_speed,
                                                           entry.throughput_spread))
            for entry in run.levels if isinstance(entry.level, str) and entry.stable is False]


def machine_drift_levels(run: RunInfo) -> list[DriftLevel]:
    """The levels that were steady as a server while the machine's own speed varied
    (reports.diagnostics.machine_speed)."""
    return [DriftLevel(level=entry.level, spread=entry.throughput_spread, machine=entry.machine_speed_spread,
                       at_constant_speed=entry.spread_at_constant_speed)
            for entry in run.levels if isinstance(entry.level, str) and entry.machine_drift]


def _first(*values):
    return next((v for v in values if v is not None), None)


def _unstable(summary: Summary) -> Notice | None:
    levels = summary.unstable_levels
    if not levels:
        return None
    duration = (summary.run.get("load_plan") or {}).get("duration_s")   # run.json as read
    longer = max(LONGER_DURATION_S, 3 * duration) if duration else LONGER_DURATION_S
    now = f" (this run measured {duration:g} s per level)" if duration else ""
    steal = {lvl.level: _steal_text(lvl) for lvl in summary.levels} if summary.diagnostics else {}
    return Notice(
        "throughput not stable",
        "These levels' output tokens/s (an open loop's: the tokens it served over those that arrived) "
        "differed by more than 10% between the thirds (or rounds) of their measure window: the server had "
        "not settled or fell behind (queues still filling, batches still forming), something else "
        "on the machine took its CPU for a while, or the window "
        "holds too few requests, so their rates and percentiles are rougher than the others'.",
        f"measure longer: rerun with `servecap sweep ... --duration {longer:g}s`{now}",
        [_unstable_item(row, steal.get(row.level)) for row in levels])


def _unstable_item(row: UnstableLevel, steal_text: str | None) -> str:
    parts = [f"spread {row.spread:.0%}"] if isinstance(row.spread, (int, float)) else []
    parts += [steal_text] if steal_text else []
    return f"{row.level} ({'; '.join(parts)})" if parts else row.level


def _stolen(level: LevelResult) -> dict[str, float]:
    return stolen_cores(level.host_steal)


def _steal_text(level: LevelResult) -> str | None:
    text = stolen_text(level.host_steal)
    return f"the host took {text}" if text else None


def _host_steal(summary: Summary) -> Notice | None:
    if not summary.diagnostics:   # a --diagnostics instrument
        return None
    items = [f"{lvl.level}: {_steal_text(lvl)}" for lvl in summary.levels if _stolen(lvl)]
    if not items:
        return None
    return Notice(
        "the machine's host took CPU",
        "During these levels the VM's host ran something else on its cores (steal time, read from "
        "/proc/stat by the run's canary into canary.csv): every step and every request on that core "
        "waited for it, so their latencies and rates are the host's as much as the server's. A core "
        "the load generator shares delays the client's clock too.",
        "rerun on a quiet host (a dedicated machine or instance); `python -m lab.reference_server.drift`, from a "
        "servecap checkout, measures the machine alone",
        items)


def _machine_drift(summary: Summary) -> Notice | None:
    if not summary.diagnostics:   # a --diagnostics instrument
        return None
    levels = summary.machine_drift_levels
    if not levels:
        return None
    return Notice(
        "the machine's speed drifted",
        "At these levels the raw throughput differed by more than 10% between the thirds of the window, "
        "but the engine's own step record shows why: the same batch shapes took longer in one third than "
        "another. Scaled to the machine's usual speed, the server's throughput was steady. The levels' "
        "percentiles include that drift of the machine (on a shared VM, its host); they are not a server "
        "that had not settled. `python -m lab.reference_server.drift`, from a servecap checkout, measures the "
        "machine alone.",
        None,
        [f"{row.level} (machine {row.machine:.0%}, throughput {row.spread:.0%} raw, "
         f"{row.at_constant_speed:.0%} at constant speed)" for row in levels
         if all(isinstance(value, (int, float)) for value in (row.machine, row.spread, row.at_constant_speed))],
        severity="note")


def _loadgen(summary: Summary) -> Notice | None:
    items = list(summary.loadgen_warnings)
    late = [lvl.level for lvl in summary.levels if lvl.loadgen.late]
    if late:
        items.append(f"sent late (p99 lateness > {LATENESS_LIMIT_MS:g} ms) at: {', '.join(late)}")
    limited = [lvl for lvl in summary.levels if lvl.loadgen.limited_by_loadgen]
    if limited:
        lags = [f"{lvl.level} ({lvl.loadgen.loop_lag_p99_ms:.2f} ms)" for lvl in limited
                if lvl.loadgen.loop_lag_p99_ms is not None]
        items.append(f"the load generator, not the server, was a limit at: {', '.join(lvl.level for lvl in limited)}"
                     + (f"; its event-loop lag p99 bounds its timing error there: {', '.join(lags)}" if lags else ""))
    timing = [f"{lvl.level} (" + ", ".join(
                  f"{row.metric.removesuffix('_s').upper()} {row.q}: lag {row.lag_ms:.2f} ms, CI {row.ci_ms:.2f} ms"
                  for row in lvl.loadgen.lag_limited) + ")"
              for lvl in summary.levels if lvl.loadgen.lag_limited]
    if timing:
        items.append("its timing error (event-loop lag) was wider than the percentile's 95% confidence interval "
                     "at: " + "; ".join(timing))
    if not items:
        return None
    return Notice(
        "load generator limits",
        "The load generator sent requests late or ran short of CPU: those levels measure the generator "
        "as much as the server.",
        "give Locust more CPU: more processes and cores (`servecap sweep ... --loadgen-processes N`), "
        "distributed Locust (`locust -f loadgen/chat.py --master` with `--worker`s), or a lower load; "
        "details in requests.meta.json and the report's load-generator health table",
        items)


def _client_server(summary: Summary) -> Notice | None:
    items = [f"{lvl.level}: {w}" for lvl in summary.levels
             for w in (lvl.client_vs_server.warnings if lvl.client_vs_server else ())]
    if not items:
        return None
    return Notice(
        "time outside the server's own clock",
        "At these levels a large share of the client's latency was spent outside the server's histograms "
        "(the client, the network, the server's front end): the server's own numbers look better than what "
        "users saw.",
        "see the 'Client versus server' table; give the load generator and the server's front end cores of "
        "their own (the sweep pins them by default)",
        items)


def _missing(summary: Summary) -> Notice | None:
    items = list(summary.missing)
    if not items:
        return None
    return Notice("missing or damaged data",
                  "Parts of the run directory are absent or damaged; the report uses what is there.",
                  None, items)


def notices(summary: Summary) -> list[Notice]:
    found = (_unstable(summary), _host_steal(summary), _loadgen(summary), _client_server(summary),
             _missing(summary), _machine_drift(summary))
    return [n for n in found if n is not None]


LEVEL_ID = re.compile(r"(?<![\w/])(?:[\w.-]+/)?(?:c|rps)=\d+(?:\.\d+)?")


def one_line(notice: Notice) -> str:
    """The console's form: 'warning: throughput not stable: none/c=16, static/c=8'; the levels it names,
    each once (its readings are in the report), or its items where it names no level."""
    levels = list(dict.fromkeys(LEVEL_ID.findall(" ".join(notice.items))))
    return f"{notice.severity}: {notice.title}: {', '.join(levels) if levels else '; '.join(notice.items)}"

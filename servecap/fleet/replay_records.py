"""What a fleet's replay left, read in the plan's terms: its requests one record each in send order, the run
they make (`records_as_run`, a FleetRun the plan's judge and outcome read), every request of the demand
accounted for by its status, and its chained sessions summarized as the plan summarizes its own."""

from __future__ import annotations

import numpy as np

from calculators.plan.fleet_run import FleetRun, ReplicaLife
from calculators.plan.hedge_races import hedging_summary
from calculators.plan.session_outcome import summarize_sessions

def replayed_rows(records: list[dict]) -> list[dict]:
    """The replay's requests, one record each (a hedge's losing copy left out), in send order."""
    return sorted((r for r in records if r.get("t_sched") is not None and r.get("status") != "cancelled"),
                  key=lambda r: r["t_sched"])


def measured_sessions(records: list[dict], t0_unix: float, horizon_s: float) -> dict:
    """fleet.json's `sessions`, as plan.json's (calculators.plan.session_outcome): each replayed session opens
    at its first turn's send and closes when its last turn answered (never, if that turn failed)."""
    turns: dict[str, list[dict]] = {}
    for r in replayed_rows(records):
        if r.get("conversation_id") is not None and r.get("turn") is not None:
            turns.setdefault(r["conversation_id"], []).append(r)
    chains = [sorted(rows, key=lambda r: r["turn"]) for rows in turns.values() if len(rows) > 1]
    opened = np.array([rows[0]["t_sched"] - t0_unix for rows in chains], dtype=float)
    closed = np.array([rows[-1]["t_start"] + rows[-1]["e2e_s"] - t0_unix if rows[-1]["status"] == "ok" else np.nan
                       for rows in chains], dtype=float)
    return summarize_sessions(opened, closed, horizon_s)


def records_as_run(records: list[dict], t0_unix: float, lives: list[ReplicaLife], decisions, horizon_s: float,
                   names: dict[str, int], hedge_rule: str | None = None) -> FleetRun:
    """The measured run in the plan's terms: per request (in send order) its send, first token, first
    answer token and end on the fleet's clock (NaN: it failed or never finished), whether it failed
    (`lost`: any status but ok and `incomplete`), and the replica that answered. A hedge's copy that lost
    (status "cancelled", `--hedge-after`) is left out: its request is the kept copy's record, whose `hedge`
    says whether a copy was sent and which one answered (`hedge_rule`: the rule's spec, for the summary)."""
    rows = replayed_rows(records)
    send = np.array([r["t_sched"] - t0_unix for r in rows], dtype=float)
    ok = np.array([r["status"] == "ok" for r in rows])
    start = np.array([r["t_start"] - t0_unix for r in rows], dtype=float)
    ttft = np.array([np.nan if r.get("ttft_s") is None else r["ttft_s"] for r in rows], dtype=float)
    ttfa = np.array([np.nan if r.get("ttfa_s") is None else r["ttfa_s"] for r in rows], dtype=float)
    e2e = np.array([np.nan if r.get("e2e_s") is None else r["e2e_s"] for r in rows], dtype=float)
    failed = np.array([r["status"] not in ("ok", "incomplete") for r in rows], dtype=bool)
    first = np.where(ok, start + ttft, np.nan)
    end = np.where(ok, start + e2e, np.nan)
    output = np.array([r.get("output_tokens") or 0 for r in rows], dtype=np.int64)
    replica = np.array([names.get(r.get("replica") or "", -1) if r["status"] == "ok" else -1 for r in rows],
                       dtype=np.int64)
    hedging = {}
    if hedge_rule is not None:
        hedged = np.array([r.get("hedge") is not None for r in rows], dtype=bool)
        copy_kept = np.array([r.get("hedge") == "copy" for r in rows], dtype=bool)
        hedging = {"hedged": hedged, "copy_kept": copy_kept,
                   "hedging": hedging_summary(hedge_rule, hedged, copy_kept)}
    return FleetRun(send, first, end, output, replica, np.zeros(len(rows), dtype=bool), lives, list(decisions),
                    max(horizon_s, float(np.nanmax(end)) if ok.any() else horizon_s), lost=failed,
                    first_answer_s=np.where(ok, start + ttfa, np.nan), **hedging)


def request_accounting(records: list[dict], sent: int) -> dict:
    """Every request of the demand, counted once: by its record's status (a hedge's losing copy, "cancelled",
    is a second attempt of a request already counted, so it is listed apart), and `missing`, the demand's
    requests no record accounts for (0 unless the replay lost some)."""
    by_status: dict[str, int] = {}
    cancelled = 0
    for record in records:
        if record.get("status") == "cancelled":
            cancelled += 1
        else:
            by_status[record.get("status") or "unknown"] = by_status.get(record.get("status") or "unknown", 0) + 1
    counted = sum(by_status.values())
    return {"sent": sent, "by_status": dict(sorted(by_status.items())), "cancelled_copies": cancelled,
            "missing": sent - counted}

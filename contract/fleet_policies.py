"""fleet.json's name, and the traffic policies a fleet run acted out as its report shows them: one row per
policy and part (a canary's two versions, a fallback's two tiers, a shadow's production and copies,
hedging over every request, and the run's accounting), each request counted once.

    rows = policy_rows(json.loads((run_dir / FLEET_FILE).read_text()))   # reports.policies
    summary.json "policies": [PolicyRow, ...]                              # contract.summary

`servecap fleet` writes fleet.json (servecap.fleet.run); the report reads these rows from it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract.sections import FrozenSection, keep_null

FLEET_FILE = "fleet.json"


@dataclass(frozen=True, kw_only=True)
class PolicyRow(FrozenSection):
    """One part of one policy: the requests it took, their share, its SLO attainment and latency, its pool's
    replicas, and what else counts (the requests that left for a fallback, the copies a hedge sent)."""

    policy: str = keep_null("")        # canary, shadow, fallback, hedging, accounting
    part: str = keep_null("")          # primary / canary, production / shadow copies, primary / fallback, ...
    requests: int = keep_null(0)
    share: float | None = keep_null()  # of the run's requests (a hedge: the copies over the requests)
    attainment: float | None = keep_null()
    ttft_p50_s: float | None = keep_null()
    ttft_p99_s: float | None = keep_null()
    e2e_p99_s: float | None = keep_null()
    replicas: int | None = keep_null()
    note: str = keep_null("")


def _part(policy: str, part: str, judged: dict, **more: Any) -> PolicyRow:
    return PolicyRow(policy=policy, part=part, requests=int(judged.get("requests") or 0), share=judged.get("share"),
                     attainment=judged.get("attainment"), ttft_p50_s=judged.get("ttft_p50_s"),
                     ttft_p99_s=judged.get("ttft_p99_s"), e2e_p99_s=judged.get("e2e_p99_s"), **more)


def policy_rows(fleet: dict) -> tuple[PolicyRow, ...]:
    """The rows of a fleet.json (an object as `servecap fleet` writes it); () for a run with no policy."""
    rows: list[PolicyRow] = []
    primaries = len(fleet.get("replicas") or [])
    canary = fleet.get("canary")
    if canary:
        rows += [_part("canary", "primary", canary["primary"], replicas=primaries),
                 _part("canary", "canary", canary["canary"], replicas=len(canary.get("replicas") or []),
                       note=f"weights: {canary.get('describe', '')}")]
    fallback = fleet.get("fallback")
    if fallback:
        tiers = fallback["tiers"]
        rows += [_part("fallback", "primary", tiers["primary"], replicas=primaries),
                 _part("fallback", "fallback", tiers["fallback"], replicas=len(fallback.get("replicas") or []),
                       note=f"{fallback['left_full']} when the primary was full ({fallback['rule']}), "
                            f"{fallback['left_errors']} after its error")]
    shadow = fleet.get("shadow")
    if shadow:
        whole = fleet.get("outcome") or {}
        rows += [_part("shadow", "production", {**whole, "share": 1.0}, replicas=primaries),
                 PolicyRow(policy="shadow", part="shadow copies", requests=int(shadow.get("mirrored") or 0),
                           share=shadow.get("mirrored_share"), attainment=shadow.get("attainment"),
                           ttft_p50_s=shadow.get("ttft_p50_s"), ttft_p99_s=shadow.get("ttft_p99_s"),
                           e2e_p99_s=shadow.get("e2e_p99_s"), replicas=len(shadow.get("replicas") or []),
                           note="answers never returned; on its engines' clock")]
    hedging = fleet.get("hedging")
    if hedging:
        whole = fleet.get("outcome") or {}
        rows.append(_part("hedging", f"after {hedging['after']}", {**whole, "share": hedging.get("extra_requests")},
                          replicas=primaries, note=f"{hedging['hedged']} hedged (share: the extra requests), "
                                                   f"{hedging['copies_kept']} answered by the copy"))
    if rows:
        rows.append(_accounting(fleet.get("accounting") or {}))
    return tuple(rows)


def _accounting(counts: dict) -> PolicyRow:
    """Every request sent, once: by status, the hedge copies cancelled, and any not accounted for."""
    statuses = ", ".join(f"{n} {status}" for status, n in (counts.get("by_status") or {}).items())
    extra = [f"{counts['cancelled_copies']} hedge copies cancelled"] if counts.get("cancelled_copies") else []
    extra += [f"{counts['missing']} NOT ACCOUNTED FOR"] if counts.get("missing") else []
    return PolicyRow(policy="accounting", part="sent", requests=int(counts.get("sent") or 0),
                     note="; ".join([statuses, *extra]))

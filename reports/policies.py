"""A fleet run's traffic policies, for its report: the rows contract.fleet_policies makes of the fleet.json
`servecap fleet` left beside the replay's records (None in any other run directory, or one whose fleet.json
cannot be read: the report says so in `missing`)."""

from __future__ import annotations

import json
from pathlib import Path

from contract.fleet_policies import FLEET_FILE, PolicyRow, policy_rows


def read_policies(run_dir: Path) -> tuple[tuple[PolicyRow, ...] | None, str | None]:
    """(the rows, or None without a fleet.json or a policy; a sentence when the file is there but unreadable)."""
    path = Path(run_dir) / FLEET_FILE
    if not path.exists():
        return None, None
    try:
        rows = policy_rows(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"{FLEET_FILE}: unreadable ({type(exc).__name__}: {exc}); no traffic-policy section"
    return rows or None, None

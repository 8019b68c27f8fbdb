"""`servecap fleet` as the tests run it: the real command in a subprocess, emulated replicas, and what it left.

    fleet, result = run_fleet(out, "--emulate", "l4", "--model", "llama-3.1-8b", ..., "--rate-curve", str(curve))
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from loadgen_helpers import _env


def run_fleet(out: Path, *flags: str, timeout_s: float = 280) -> tuple[dict, subprocess.CompletedProcess]:
    """Run `servecap fleet FLAGS --out OUT --no-report`; fail with its output's tail unless it exits 0;
    (fleet.json, the finished process)."""
    result = subprocess.run([sys.executable, "-m", "servecap", "fleet", *flags, "--out", str(out), "--no-report"],
                            capture_output=True, text=True, timeout=timeout_s, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return json.loads((out / "fleet.json").read_text()), result

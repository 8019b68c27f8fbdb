"""How to start the real `locust` command on this package's locustfiles, for whoever drives it
(the sweep, compare, the load generator's own benchmarks)."""

from __future__ import annotations

import sys
from pathlib import Path

CHAT_LOCUSTFILE = Path(__file__).resolve().parent / "chat.py"
CLASSIFY_LOCUSTFILE = Path(__file__).resolve().parent / "classify.py"
EMBED_LOCUSTFILE = Path(__file__).resolve().parent / "embed.py"


def locust_executable() -> list[str]:
    """The `locust` script beside this interpreter, else `python -m locust` (a venv that sees
    locust through another environment's site-packages has no script of its own)."""
    script = Path(sys.executable).with_name("locust")
    return [str(script)] if script.exists() else [sys.executable, "-m", "locust"]

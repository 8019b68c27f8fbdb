"""Find run directories under a runs folder (the notebooks open the newest one by default).

A run directory is a direct child folder holding `requests.jsonl` (../shared/DESIGN.md);
its age is the time that file was last written, since records are appended as requests finish.
"""

from __future__ import annotations

from pathlib import Path

from contract.records import RECORDS_FILE


def list_runs(runs_dir: str | Path) -> list[Path]:
    """Run directories directly under `runs_dir`, newest first; [] when the folder does not exist."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    runs = [child for child in runs_dir.iterdir() if (child / RECORDS_FILE).is_file()]
    return sorted(runs, key=lambda run: ((run / RECORDS_FILE).stat().st_mtime, run.name), reverse=True)


def newest_run(runs_dir: str | Path) -> Path | None:
    """The most recently written run directory under `runs_dir`, or None when there is none."""
    runs = list_runs(runs_dir)
    return runs[0] if runs else None

"""run.json: what was run, kept current while the sweep runs so a killed sweep still describes itself.

Written atomically (temp file + rename) after every change: a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from loadgen.observe.run_metadata import git_commit, host_info, versions
from loadgen.sweep.config import SweepConfig


class RunJson:
    """The run.json of one run directory; `levels` holds one object per planned level, in plan order."""

    def __init__(self, out_dir: Path, config: SweepConfig) -> None:
        self.path = out_dir / "run.json"
        self.data = {
            "name": out_dir.name,
            "status": "running",
            "started_at": time.time(),
            "ended_at": None,
            "target": {"kind": "url", "url": config.url} if config.url else {"kind": "reference_server"},
            "server": {"model": config.model, "strategies": list(config.strategies), "args": config.server_args},
            "load_plan": {
                "kind": "auto" if config.auto else ("open" if config.open_loop else "closed"),
                "concurrency": list(config.concurrency), "rates": list(config.rates),
                "arrival": config.arrival if config.open_loop else "closed",
                "warmup_s": config.warmup_s, "duration_s": config.duration_s,
            },
            "levels": [],
            "workload": {"api": "chat", "stream": True, "ignore_eos": True,
                         "prompt_tokens": config.prompt_tokens, "output_tokens": config.output_tokens},
            "slo": {k: v for k, v in asdict(config.slo).items() if v is not None},
            "seeds": {"workload": config.seed},
            "host": host_info(),
            "versions": versions(),
            "git_commit": git_commit(),
            "observers": {},
            "notes": [],
        }

    def plan_level(self, level: str, strategy: str | None, load: float) -> dict:
        entry = {"level": level, "strategy": strategy, "load": load, "status": "pending"}
        self.data["levels"].append(entry)
        self.write()
        return entry

    def level_entry(self, level: str) -> dict | None:
        return next((entry for entry in self.data["levels"] if entry["level"] == level), None)

    def note(self, text: str) -> None:
        self.data["notes"].append(text)
        self.write()

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.data["ended_at"] = time.time()
        for entry in self.data["levels"]:
            if entry["status"] in ("pending", "running"):
                entry["status"] = "not run" if entry["status"] == "pending" else "interrupted"
        self.write()

    def write(self) -> None:
        tmp = self.path.with_name(f"run.json.tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.data, indent=2, default=str) + "\n")
        os.replace(tmp, self.path)

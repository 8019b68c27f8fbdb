"""The calibration stage's levels for one strategy (`servecap sweep --calibrate`: RUN_DIR/calibrate/*/).

    stage_samples(run_dir, strategy) -> [LevelSample, ...]   (empty when the run has no stage)

Each stage directory is a run of its own; its levels of `strategy` (or an external target's, "url")
are read as the sweep's are (`reports.predict.evidence.level_samples`).
"""

from __future__ import annotations

from pathlib import Path

from contract.calibration_stage import STAGE_DIR
from reports.predict.evidence import LevelSample, level_samples
from reports.run_data import load_run
from reports.summary import build_levels


def stage_samples(run_dir: str | Path, strategy: str) -> list[LevelSample]:
    out: list[LevelSample] = []
    for stage in sorted((Path(run_dir) / STAGE_DIR).glob("*/run.json")):
        data = load_run(stage.parent)
        out.extend(level_samples(data, build_levels(data, data.run.slo)).get(strategy, []))
    return out

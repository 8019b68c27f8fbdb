"""Two runs on the same axes: `servecap report RUN_A RUN_B --out DIR`, and a compare directory's two arms.

Each run's levels join one summary with their strategy prefixed by the run's label
("A: continuous", "B: continuous"), so every figure, the answer and its table treat a run's
strategy as one more curve: the answer's ratios become the ratios between the runs. A compare
directory (`servecap compare`, one load level per arm, level ids `a/c=8`) is its arms relabelled
"A"/"B". The SLO is the first run's (run.json), with the limits given on the command line first;
each run is priced with its own GPU.

    side_by_side(run_dirs, out_dir, options) -> ReportResult      summary.json, report.md/.html, *.png in out_dir
    is_compare_dir(run_dir) -> bool
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from reports import answer
from reports.page.blocks import Block
from reports.cost import cost_per_million, resolve_price
from reports.figures import latency as figures_latency
from reports.figures.common import FigureFile
from reports.notices import machine_drift_levels, unstable_levels
from reports.quality.carry import configuration_statement, quality_sentence, read_quality
from reports.page.render import answer_sections, levels_section, to_html, to_markdown
from reports.report import ReportOptions, ReportResult, write_summary
from reports.run_data import RunData, load_run
from reports.speculation import measured_crossover
from reports.summary import LATENCY_METRICS, build_levels, loadgen_warnings, slo_samples
from reports.verdict import build_verdict
from contract.level_result import LevelResult
from contract.slo import SLO, SloSample
from contract.summary import DriftLevel, OperatingPoint, Summary, UnstableLevel

LABELS = "ABCDEFGH"


@dataclass(frozen=True)
class Side:
    """One curve family: a run (or a compare run's arm) under its label."""

    label: str                  # "A", "B"
    name: str                   # what it is: the run directory, or what served the arm
    setup: str                  # answer.setup_detail of its run.json: "tiny on ..."
    levels: list[LevelResult]   # summary levels, strategy and level id already prefixed
    price: dict                 # reports.cost.resolve_price
    notes: list[str]            # missing data and load-generator warnings, prefixed
    unstable: list[UnstableLevel]   # reports.notices.unstable_levels, prefixed
    drift: list[DriftLevel]     # reports.notices.machine_drift_levels, prefixed
    engine: dict | None = None  # the run's /v1/engine description (run.json), the first engine's
    quality: dict | None = None # its quality.json (`servecap quality`), when it has one
    samples: dict[str, SloSample] = field(default_factory=dict)   # {prefixed level id: its requests, judged}


def is_compare_dir(run_dir: str | Path) -> bool:
    path = Path(run_dir) / "run.json"
    try:
        return bool(json.loads(path.read_text()).get("compare"))
    except (OSError, ValueError, AttributeError):
        return False


def _prefixed(level: LevelResult, label: str, strategy: str | None) -> LevelResult:
    return replace(level, strategy=f"{label}: {strategy}" if strategy else label, level=f"{label}: {level.level}")


def _samples(samples: dict[str, SloSample], label: str, levels: list[LevelResult]) -> dict[str, SloSample]:
    """The SLO samples (reports.summary.slo_samples) of `levels`, a run's or one arm's, under their
    prefixed level ids."""
    return {f"{label}: {lvl.level}": samples[lvl.level] for lvl in levels}


def _notes(data: RunData, levels: list[LevelResult], label: str) -> list[str]:
    return [f"{label}: {note}" for note in [*data.missing, *loadgen_warnings(data.run, levels)]]


def run_side(run_dir: str | Path, label: str, options: ReportOptions, slo: SLO | None = None) -> tuple[Side, SLO]:
    data = load_run(run_dir)
    slo = slo or options.slo_for(data.run)
    levels = build_levels(data, slo)
    unstable = [replace(row, level=f"{label}: {row.level}") for row in unstable_levels(data.run)]
    drift = [replace(row, level=f"{label}: {row.level}") for row in machine_drift_levels(data.run)]
    quality, unreadable = read_quality(data.run_dir)
    notes = _notes(data, levels, label) + ([f"{label}: {unreadable}"] if unreadable else [])
    return Side(label, data.run_dir.name, answer.setup_detail(data.run_json),
                [_prefixed(lvl, label, lvl.strategy) for lvl in levels],
                resolve_price(data.run, options.gpu_hourly, options.gpu), notes,
                unstable, drift, _first_engine(data.run_json), quality,
                _samples(slo_samples(data), label, levels)), slo


def _first_engine(run_json: dict) -> dict | None:
    engines = (run_json.get("server") or {}).get("engines") or {}
    return next((engine for engine in engines.values() if isinstance(engine, dict)), None)


def _configurations(sides: list[Side]) -> list[str]:
    """Each later side that is another serving configuration of the first (quantized differently, or with its
    quality measured) against it: KV room, tokens/s at the highest shared load, greedy agreement."""
    base = sides[0]
    out = []
    for side in sides[1:]:
        if not side.quality and (side.engine or {}).get("quantization") == (base.engine or {}).get("quantization"):
            continue
        statement = configuration_statement(side.label, base.label, (base.engine, base.levels),
                                            (side.engine, side.levels, side.quality))
        if statement:
            out.append(statement)
    return out


def arm_sides(run_dir: str | Path, options: ReportOptions) -> tuple[list[Side], SLO]:
    """A compare directory's arms "a" and "b" as sides A and B (its levels' strategy is the arm)."""
    data = load_run(run_dir)
    slo = options.slo_for(data.run)
    levels = build_levels(data, slo)
    price = resolve_price(data.run, options.gpu_hourly, options.gpu)
    notes = [*data.missing, *loadgen_warnings(data.run, levels)]   # one run: said once, on the first side
    samples = slo_samples(data)
    sides = []
    for arm, info in sorted(data.run.compare.arms.items()):
        label = arm.upper()
        mine = [lvl for lvl in levels if lvl.strategy == arm]
        sides.append(Side(label, info.label(), answer.setup_detail(data.run_json),
                          [_prefixed(lvl, label, None) for lvl in mine], price,
                          notes if not sides else [], [], [], samples=_samples(samples, label, mine)))
    return sides, slo


def combined_summary(sides: list[Side], slo: SLO) -> Summary:
    """One summary over every side's levels (the contract's side-by-side shape; `run` names the sides)."""
    prices = {side.label: side.price for side in sides}
    levels = [lvl for side in sides for lvl in side.levels]

    def cost(point: OperatingPoint) -> dict:
        return cost_per_million(point, prices[point.level.split(":", 1)[0]])

    samples = {level: sample for side in sides for level, sample in side.samples.items()}
    verdict = build_verdict(levels, slo, cost, samples)
    return Summary(run={"side_by_side": [{"label": s.label, "name": s.name, "setup": s.setup} for s in sides]},
                   levels=tuple(levels), verdict=verdict, metrics=LATENCY_METRICS,
                   speculation_crossover=measured_crossover(levels),
                   configurations=tuple(_configurations(sides)) if len(sides) > 1 else (),
                   quality={side.label: side.quality for side in sides if side.quality},
                   missing=tuple(note for side in sides for note in side.notes), loadgen_warnings=(),
                   unstable_levels=tuple(row for side in sides for row in side.unstable),
                   machine_drift_levels=tuple(row for side in sides for row in side.drift))


def side_by_side(run_dirs: list[str | Path], out_dir: str | Path, options: ReportOptions | None = None,
                 progress: Callable[[str], None] | None = None) -> ReportResult:
    options = options or ReportOptions()
    step = progress or (lambda _msg: None)
    if len(run_dirs) == 1 and is_compare_dir(run_dirs[0]):
        sides, slo = arm_sides(run_dirs[0], options)
        title = f"servecap report: {Path(run_dirs[0]).name}, arm A vs arm B"
    else:
        if not 2 <= len(run_dirs) <= len(LABELS):
            raise ValueError(f"side by side needs 2 to {len(LABELS)} run directories, got {len(run_dirs)}")
        sides, slo = [], None
        for label, run_dir in zip(LABELS, run_dirs):
            step(f"reading {run_dir}")
            side, slo = run_side(run_dir, label, options, slo)
            sides.append(side)
        title = "servecap report: " + " vs ".join(side.name for side in sides)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / "summary.json"
    summary = write_summary(combined_summary(sides, slo), summary_path)
    figures: list[FigureFile] = []
    if options.figures:
        step("drawing figures")
        figures = _figures(summary, out_dir)
    parts = sections(summary, figures)
    markdown_path, html_path = out_dir / "report.md", out_dir / "report.html"
    markdown_path.write_text(to_markdown(title, parts))
    html_path.write_text(to_html(title, parts, out_dir))
    return ReportResult(summary, summary_path, markdown_path, html_path, figures)


def _figures(summary: Summary, out_dir: Path) -> list[FigureFile]:
    levels, slo = summary.levels, summary.verdict.slo
    made = [figures_latency.throughput_vs_latency(levels, summary.verdict.knee, out_dir)]
    made += [figures_latency.latency_vs_load(levels, metric, slo, out_dir) for metric in LATENCY_METRICS]
    made.append(figures_latency.goodput_vs_load(levels, slo, out_dir))
    return [fig for fig in made if fig is not None]


def sections(summary: Summary, figures: list[FigureFile]) -> list[tuple[str, list[Block]]]:
    sides = summary.run["side_by_side"]   # the side-by-side run section: [{"label", "name", "setup"}]
    preface = ["Runs compared: " + "; ".join(
        f"**{s['label']}** = `{s['name']}`" + (f" ({s['setup']})" if s["setup"] else "") for s in sides) + "."]
    if summary.speculation_crossover:
        preface.append("Speculative decoding: " + summary.speculation_crossover.statement + ".")
    preface += [statement + "." for statement in summary.configurations]
    preface += [f"{label}: {quality_sentence(quality)}." for label, quality in (summary.quality or {}).items()]
    out = answer_sections(summary, figures, preface)
    out.append(("Figures", [fig for fig in figures if fig.name != "throughput_vs_latency.png"]))
    out.append(levels_section(summary))
    return out

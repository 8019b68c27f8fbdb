"""`write_report(run_dir)`: RunData -> summary.json, *.png, report.md, report.html in the run directory."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine_core.hf_config import load_hf_config
from reports.figures import latency as figures_latency
from reports.figures import resources as figures_resources
from reports.figures import validation as figures_validation
from reports.cost import cost_per_million, resolve_price
from reports.figures.common import FigureFile
from reports.predict.evidence import level_samples
from reports.notices import machine_drift_levels, unstable_levels
from reports.policies import read_policies
from reports.predict.per_level import CALIBRATED_REPLICATIONS, add_predictions
from reports.page.render import sections, to_html, to_markdown
from reports.run_data import RunData, load_run
from reports.summary import LATENCY_METRICS, build_levels, loadgen_warnings, slo_samples
from reports.predict.validation import REPLICATIONS, keys_of, validate
from reports.quality.carry import read_quality
from reports.verdict import build_verdict
from contract.run_json import RunInfo
from contract.slo import SLO
from contract.summary import Summary, ValidationSummary, jsonable


@dataclass(frozen=True)
class ReportOptions:
    """What the user asked of the report.

    Attributes:
        slo: the SLO to judge by; each limit it sets takes precedence over run.json's `slo` (the limits it
            leaves unset fall back to run.json's, then to none).
        gpu_hourly: USD per GPU-hour for the cost verdict; None uses the catalog price.
        gpu: GPU catalog id to price with when run.json names no (known) GPU.
        figures: write the PNGs (and embed them); False for table-only reports.
        model_config: the served model's HF config.json (or its directory) for the predictions;
            None uses the one run.json recorded (`servecap sweep --model-config`).
        replications: simulator runs per level in the leave-one-level-out validation.
        diagnostics: also show the instruments for a host whose speed drifts (`sweep --diagnostics`).
    """

    slo: SLO = field(default_factory=SLO)
    gpu_hourly: float | None = None
    gpu: str | None = None
    figures: bool = True
    model_config: str | None = None
    replications: int = REPLICATIONS
    diagnostics: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.replications, bool) or not isinstance(self.replications, int) or self.replications < 1:
            raise ValueError(f"replications must be a positive integer, got {self.replications!r}")
        if self.gpu_hourly is not None and not (self.gpu_hourly >= 0 and math.isfinite(self.gpu_hourly)):
            raise ValueError(f"gpu_hourly must be a non-negative number of USD, got {self.gpu_hourly!r}")
        if self.model_config is not None:
            try:
                load_hf_config(self.model_config)
            except ValueError as exc:
                raise ValueError(f"--model-config: {exc}") from None

    def slo_for(self, run: RunInfo) -> SLO:
        """run.json's SLO, with the limits given here (not None) taking precedence."""
        return run.slo.with_overrides(**self.slo.to_dict())


@dataclass(frozen=True)
class ReportResult:
    """What a report wrote. `summary`: the typed summary as summary.json holds it (a classic model's
    report, reports.classic, keeps its own dict)."""

    summary: Summary | dict
    summary_path: Path
    markdown_path: Path
    html_path: Path
    figures: list[FigureFile] = field(default_factory=list)


def build_summary(data: RunData, options: ReportOptions,
                  progress: Callable[[str], None] | None = None) -> Summary:
    """summary.json, typed (contract.summary): run, levels, validation, verdict, plus `missing` and warnings."""
    slo = options.slo_for(data.run)
    levels = build_levels(data, slo, progress=progress)
    samples = level_samples(data, levels)
    validation = validate(data.run, samples, replications=options.replications,
                          progress=(lambda lvl: progress(f"validating {lvl}")) if progress else None)
    levels = add_predictions(data.run, levels, options.model_config, validation.calibrations, samples,
                             replications=min(options.replications, CALIBRATED_REPLICATIONS),
                             held_out=validation.summary.predictions)
    price = resolve_price(data.run, options.gpu_hourly, options.gpu)
    verdict = build_verdict(levels, slo, cost=lambda point: cost_per_million(point, price),
                            samples=slo_samples(data))
    quality, unreadable = read_quality(data.run_dir)
    policies, fleet_unreadable = read_policies(data.run_dir)
    return Summary(run=data.run_json, levels=tuple(levels), validation=validation.summary, verdict=verdict,
                   missing=(*data.missing, *(line for line in (unreadable, fleet_unreadable) if line)),
                   loadgen_warnings=tuple(loadgen_warnings(data.run, levels)),
                   unstable_levels=tuple(unstable_levels(data.run)),
                   machine_drift_levels=tuple(machine_drift_levels(data.run)) if options.diagnostics else (),
                   diagnostics=options.diagnostics, metrics=LATENCY_METRICS, quality=quality, policies=policies)


def make_figures(data: RunData, summary: Summary, out_dir: Path) -> list[FigureFile]:
    levels, slo = summary.levels, summary.verdict.slo
    made = [figures_latency.latency_vs_load(levels, metric, slo, out_dir) for metric in LATENCY_METRICS]
    made += [
        figures_latency.throughput_vs_latency(levels, summary.verdict.knee, out_dir),
        figures_latency.goodput_vs_load(levels, slo, out_dir),
        figures_resources.batch_and_kv_vs_load(levels, out_dir),
        figures_resources.resources_timeseries(data, levels, out_dir),
        figures_latency.latency_cdfs(data, levels, out_dir),
    ]
    return [fig for fig in made if fig is not None]


def make_validation_figures(summary: Summary, out_dir: Path) -> list[FigureFile]:
    """Predicted vs measured per metric, from summary.json's `validation`."""
    validation = summary.validation or ValidationSummary()
    metrics = dict.fromkeys(key.split(".")[0] for key in keys_of(validation))
    made = [figures_validation.predicted_vs_measured(summary.levels, validation, metric, out_dir)
            for metric in metrics]
    return [fig for fig in made if fig is not None]


def write_summary(summary: Summary, path: Path) -> Summary:
    """summary.json from `summary.to_dict()` (strict JSON: NaN as null); returns the summary as the file now
    holds it (read back with `Summary.from_dict`), which the pages and figures are drawn from."""
    document = summary.to_dict()
    path.write_text(json.dumps(document, indent=1, allow_nan=False))
    return Summary.from_dict(document)


def write_report(run_dir: str | Path, options: ReportOptions | None = None,
                 progress: Callable[[str], None] | None = None) -> ReportResult:
    """Read `run_dir`, write summary.json, figures, report.md and report.html into it."""
    options = options or ReportOptions()
    step = progress or (lambda _msg: None)
    step("reading the run directory")
    data = load_run(run_dir)
    if data.run.workload.classic:
        return write_classic_report(data, options, step)
    out_dir = data.run_dir
    summary_path = out_dir / "summary.json"
    summary = write_summary(build_summary(data, options, progress=lambda lvl: step(f"level {lvl}")), summary_path)
    figures: list[FigureFile] = []
    validation_figures: list[FigureFile] = []
    if options.figures:
        step("drawing figures")
        figures = make_figures(data, summary, out_dir)
        validation_figures = make_validation_figures(summary, out_dir)
    step("writing report.md and report.html")
    title = f"servecap report: {out_dir.name}"
    parts = sections(summary, figures, validation_figures)
    markdown_path, html_path = out_dir / "report.md", out_dir / "report.html"
    markdown_path.write_text(to_markdown(title, parts))
    html_path.write_text(to_html(title, parts, out_dir))
    return ReportResult(summary, summary_path, markdown_path, html_path, figures + validation_figures)


def write_classic_report(data: RunData, options: ReportOptions, step: Callable[[str], None]) -> ReportResult:
    """A classic model's sweep (KServe V2 inference, embeddings): reports.classic's page, the SLO on p99 E2E."""
    from reports.classic import page
    from reports.classic.predictions import compare, read_predictions
    from reports.classic.summary import best_level, classic_levels

    step("summarising the levels")
    limit_ms = options.slo_for(data.run).e2e_ms
    levels = classic_levels(data, SLO(e2e_ms=limit_ms))
    targets = list(dict.fromkeys(str(level).split("/")[0] for level in (lv["level"] for lv in levels)))
    quality = compare(read_predictions(data.run_dir, targets))
    best = best_level(levels)
    summary = jsonable({"scenario": data.run.workload.scenario, "run": data.run_json, "slo_e2e_ms": limit_ms,
                        "answer": page.answer(levels, limit_ms),
                        "best_level": best["level"] if best else None, "levels": levels, "predictions": quality,
                        "missing": data.missing})
    out_dir = data.run_dir
    summary_path = out_dir / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=1, allow_nan=False))
    figure = page.draw_figure(levels, out_dir) if options.figures else None
    step("writing report.md and report.html")
    title = f"servecap report: {out_dir.name}"
    parts = page.sections(levels, limit_ms, figure, data.missing, quality)
    markdown_path, html_path = out_dir / "report.md", out_dir / "report.html"
    markdown_path.write_text(to_markdown(title, parts))
    html_path.write_text(to_html(title, parts, out_dir))
    return ReportResult(summary, summary_path, markdown_path, html_path, [figure] if figure else [])

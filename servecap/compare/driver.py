"""`servecap compare`'s load profile: both arms up, load interleaved in slices, pairs until decided.

    both arms started by the runner (servecap.experiment.runner.Runner.run_together)
                                               -> run.json: compare.arms
    warm-up: one slice per arm                 -> median E2E -> slice length (>= 5 x E2E, >= 2 s)
    pilot: --pilot-pairs pairs                 -> per-pair spread -> power analysis:
                                                  "about 24 pairs (2.1 min) to detect 10% at 90% power"
    pairs up to the planned number             -> look 1: every metric judged (reports.paired)
    while a gated metric is UNKNOWN and --max-duration allows: another batch of pairs, another look
                                                  (each look tests at its group-sequential boundary)
    compare.json, compare.md, compare_ratios.png, the table on stdout and in $GITHUB_STEP_SUMMARY

Each batch of slices is one run of the real `locust --slice-plan PLAN` through the runner's one
Locust builder, with the experiment's whole workload (lengths, a dataset, multi-turn chats,
reasoning, a model mix): the slices themselves are timed inside Locust
(loadgen.scenario.slice_driver). The pilot's pairs count in the verdict: they are pairs like any
other (the plan only sized the run). With an SLO, each arm's measured requests are judged by the
contract's one rule (contract.slo) beside the paired verdict.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contract.records import RECORDS_FILE, read_records
from contract.run_json import CompareInfo, Look, Target
from loadgen.workload.slice_plan import ArmRoute, Slice, SlicePlan, pair_slices, slice_length, warmup_slices
from reports.paired.analysis import SLICES_FILE, CompareAnalysis, analyse, read_slice_log
from reports.paired.decision import EXIT_UNUSABLE, thresholds_for
from reports.paired.figure import ratios_figure
from reports.paired.power import PowerPlan, plan as power_plan
from reports.paired.render import to_json, to_markdown
from reports.paired.sequential import look_alpha
from reports.paired.slices import pair_arrays
from reports.paired.stats import log_ratios
from servecap.compare.config import PairedOptions
from servecap.experiment.locust import LocustInvocation
from servecap.experiment.spec import Experiment

LOCUST_MARGIN_S = 60.0     # Locust's -t beyond the planned slices (the plan, not -t, ends the run)
BATCH_FRACTION = 0.25      # after the planned pairs, add pairs in batches of this fraction of the plan
MIN_BATCH = 4


@dataclass
class CompareOutcome:
    out_dir: Path
    exit_code: int
    analysis: CompareAnalysis | None
    markdown: str


class PairedSlices:
    """The drive function of `Runner.run_together` for a compare run (module docstring)."""

    def __init__(self, experiment: Experiment, paired: PairedOptions, console) -> None:
        load = experiment.load
        if len(load.levels) != 1:
            raise ValueError("a compare run measures one load: give one --concurrency N or one --rates R")
        if experiment.workload.trace:
            raise ValueError("--trace replays its own timeline once; a compare run alternates the arms in slices of "
                             "its own: give the trace's lengths as a --dataset, or sweep each arm with --trace")
        if experiment.options.loadgen_processes > 1 or experiment.options.loadgen_external_workers:
            raise ValueError("a compare run's slices run in one Locust process: not with --loadgen-processes or "
                             "--loadgen-external-workers")
        self.experiment, self.paired, self.console = experiment, paired, console
        self.out = Path(experiment.out_dir)
        self.records = self.out / RECORDS_FILE
        self.gated = thresholds_for(paired.max_regression, replace_defaults=paired.no_defaults)
        self.started = time.monotonic()
        self.next_slice = self.next_pair = self.batches = 0
        self.runner = None
        self.live: dict = {}
        self.status = "complete"

    @property
    def load_id(self) -> str:
        """The level id the records carry after their arm: `c=4` or `rps=2.0`."""
        load = self.experiment.load
        return f"rps={float(load.rates[0])}" if load.rates else f"c={load.concurrency[0]}"

    @property
    def compare(self) -> CompareInfo:
        return self.runner.run_json.info.compare

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- the run ------------------------------------------------------------------------
    def __call__(self, runner, live: dict) -> None:
        self.runner, self.live = runner, live
        experiment, paired, load = self.experiment, self.paired, self.experiment.load
        info = runner.run_json.info
        info.target = Target(kind="compare")
        info.compare = CompareInfo(
            arms={name: arm.info for name, arm in live.items()},
            concurrency=load.concurrency[0] if load.concurrency else None,
            rate_rps=load.rates[0] if load.rates else None, arrival=load.arrival if load.rates else "closed",
            warmup_s=load.warmup_s, at_switch=paired.at_switch, schedule=paired.schedule,
            pilot_pairs=paired.pilot_pairs, min_effect=paired.min_effect, alpha=paired.alpha,
            thresholds=dict(self.gated))
        runner.run_json.write()
        try:
            self._run_pairs()
        except (KeyboardInterrupt, Exception) as exc:
            from servecap.experiment.runner import RunInterrupted

            if isinstance(exc, (KeyboardInterrupt, RunInterrupted)):
                self.status = "interrupted"
            raise

    def _run_pairs(self) -> None:
        paired, load = self.paired, self.experiment.load
        warm = self._batch(warmup_slices(self._take_slices(2), load.warmup_s, self.experiment.workload.seed))
        self.compare.slice_s = slice_s = paired.slice_s or slice_length(warm)
        self.runner.run_json.write()
        together = " (duet: both at once)" if paired.schedule == "duet" else ""
        self.console.print(f"warm-up: {load.warmup_s:g} s per arm{together}, median E2E "
                           f"{'-' if warm is None else f'{warm * 1000:.0f} ms'} -> slices of {slice_s:.1f} s")
        t0 = time.monotonic()
        self._pairs(paired.pilot_pairs)
        seconds_per_pair = (time.monotonic() - t0) / paired.pilot_pairs
        plan = self._plan(seconds_per_pair)
        target = self.compare.planned_pairs
        while True:
            if self.next_pair < target:
                self._pairs(target - self.next_pair)
            verdict = self._look()
            if not verdict.undecided:
                return
            batch = max(MIN_BATCH, math.ceil(BATCH_FRACTION * plan.pairs))
            batch = min(batch, self.compare.max_pairs - self.next_pair)
            remaining = (paired.max_duration_s or 0) - self._elapsed()
            if paired.max_duration_s is None or batch <= 0 or remaining < batch * seconds_per_pair:
                if paired.max_duration_s is not None:
                    self.console.print(f"[yellow]time is up ({self._elapsed():.0f} s of --max-duration "
                                       f"{paired.max_duration_s:.0f} s): still undecided on "
                                       f"{', '.join(verdict.undecided)}[/]")
                return
            target = self.next_pair + batch

    def _plan(self, seconds_per_pair: float) -> PowerPlan:
        """Power analysis on the pilot pairs; sets planned_pairs and max_pairs (the sequential looks' horizon)."""
        paired = self.paired
        analysis = analyse(self.out, max_regression=self.gated, replace_defaults=True, alpha=paired.alpha)
        pilot = {key: log_ratios(*pair_arrays(analysis.table, key)[1:]) for key in self.gated}
        plan = power_plan(pilot, min_effect=paired.min_effect, seconds_per_pair=seconds_per_pair,
                          alpha=paired.alpha, min_pairs=paired.pilot_pairs)
        self.compare.power = {"metric": plan.metric, "sigma": plan.sigma, "sigma_planned": plan.sigma_planned,
                              "pairs": plan.pairs, "seconds": plan.seconds, "seconds_per_pair": seconds_per_pair,
                              "power": plan.power}
        affordable = paired.max_pairs
        if paired.max_duration_s is not None:
            left = paired.max_duration_s - self._elapsed()
            affordable = min(affordable, self.next_pair + max(0, int(left // seconds_per_pair)))
        planned = max(self.next_pair, min(plan.pairs, affordable))
        self.compare.planned_pairs = planned
        self.compare.max_pairs = max(planned, affordable if paired.max_duration_s is not None else planned)
        self.runner.run_json.write()
        self.console.print(f"power: about {plan.pairs} pairs ({plan.seconds / 60:.1f} min) to detect a "
                           f"{paired.min_effect:.0%} change at {plan.power:.0%} power (noisiest gated metric "
                           f"{plan.metric}: per-pair SD {plan.sigma:.1%}, planned with {plan.sigma_planned:.1%})")
        if plan.pairs > affordable:
            self.console.print(f"[yellow]--max-duration {paired.max_duration_s:.0f} s is too short for that: "
                               f"{affordable} pairs fit; a {paired.min_effect:.0%} change may go undetected "
                               f"(give about {self._elapsed() + plan.seconds:.0f} s)[/]"
                               if paired.max_duration_s is not None else
                               f"[yellow]--max-pairs {paired.max_pairs} is below that: a {paired.min_effect:.0%} "
                               "change may go undetected[/]")
        return plan

    def _look(self):
        looks = [look.pairs for look in self.compare.looks if look.pairs] + [self.next_pair]
        alpha = look_alpha(self.paired.alpha, looks, self.compare.max_pairs)
        verdict = analyse(self.out, max_regression=self.gated, replace_defaults=True, alpha=alpha).verdict
        self.compare.looks.append(Look(pairs=self.next_pair, alpha=alpha, undecided=verdict.undecided))
        self.runner.run_json.write()
        rows = ", ".join(f"{r.metric} {r.verdict} ({(r.ratio - 1) * 100:+.1f}%)" for r in verdict.gated_results()
                         if r.ratio is not None)
        self.console.print(f"look {len(self.compare.looks)} at {self.next_pair} pairs (alpha {alpha:.3g}): {rows}")
        return verdict

    # -- slices -------------------------------------------------------------------------
    def _take_slices(self, count: int) -> int:
        first, self.next_slice = self.next_slice, self.next_slice + count
        return first

    def _pairs(self, count: int) -> None:
        slices = pair_slices(self.next_pair, count, self._take_slices(2 * count), self.compare.slice_s,
                             self.experiment.workload.seed)
        self.next_pair += count
        self._batch(slices)

    def _batch(self, slices: list[Slice]) -> float | None:
        """Run `slices` in one Locust process; returns the batch's median E2E of ok records (s)."""
        experiment, paired, load = self.experiment, self.paired, self.experiment.load
        self.batches += 1
        plan = SlicePlan(arms={name: ArmRoute(arm.url, arm.model, (arm.pid,) if arm.pid else ())
                               for name, arm in self.live.items()},
                         slices=tuple(slices), at_switch=paired.at_switch, schedule=paired.schedule,
                         slices_log=str(self.out / SLICES_FILE))
        plan_path = self.out / f"plan-{self.batches}.json"
        plan_path.write_text(plan.to_json())
        planned_s = sum(s.duration_s for s in slices)
        users = 1 if load.rates else load.concurrency[0] * (2 if paired.schedule == "duet" else 1)
        first = self.live["a"]
        cpus = self.runner.cpus
        invocation = LocustInvocation(
            workload=experiment.workload, host=first.url, records=self.records, level=self.load_id, users=users,
            run_time_s=math.ceil(planned_s * 1.5 + LOCUST_MARGIN_S), model=first.model,
            rate_rps=load.rates[0] if load.rates else None, arrival=load.arrival, slice_plan=plan_path,
            stop_timeout_s=5, options=experiment.options, prefix=tuple(cpus.prefix(cpus.loadgen)))
        code, records = self.runner.invoke(invocation)
        done = {s["slice"] for s in read_slice_log(self.out / SLICES_FILE)}
        missing = [s.index for s in slices if s.index not in done]
        if code != 0 or missing:
            raise RuntimeError(f"locust exited {code} with slice(s) {missing or 'none'} unfinished; "
                               f"see {self.out / 'locust.log'}")
        e2e = [r.e2e_s for r in records if r.status == "ok" and r.e2e_s is not None]
        return float(np.median(e2e)) if e2e else None

    # -- the end ------------------------------------------------------------------------
    def finish(self, status: str) -> CompareOutcome:
        try:
            analysis = analyse(self.out)
        except ValueError as exc:
            self.console.print(f"[red]nothing to judge: {exc}[/]")
            return CompareOutcome(self.out, EXIT_UNUSABLE, None, "")
        notes = list(analysis.notes) + self._slo_notes()
        if status != "complete":
            notes.append(f"the run was {status} after {self.next_pair} pairs: judged on what it recorded")
        markdown, figure = write_outputs(analysis, self._label("a"), self._label("b"), notes, self.out,
                                         elapsed_s=self._elapsed())
        exit_code = analysis.verdict.exit_code if status == "complete" else EXIT_UNUSABLE
        self.console.print(f"compare: {analysis.verdict.summary} ({self._elapsed():.0f} s, "
                           f"{self.next_pair} pairs); {self.out / 'compare.md'}, {self.out / figure.name}")
        return CompareOutcome(self.out, exit_code, analysis, markdown)

    def _slo_notes(self) -> list[str]:
        """Each arm's measured requests against the SLO, by the contract's one rule."""
        slo = self.experiment.slo
        if not slo.is_set:
            return []
        from contract.records import Record
        from contract.slo import SloSample, judge

        rows = [Record.from_dict(row) for row in read_records(self.records)]
        notes = []
        for arm in sorted(self.live):
            measured = [r for r in rows if r.arm == arm and r.phase == "measure"]
            verdict = judge(slo, SloSample.from_records(measured))   # cut off at a switch: in no set
            notes.append(f"arm {arm.upper()} {'meets' if verdict.meets else 'misses'} the SLO over its measured "
                         f"slices" + ("" if verdict.meets else f" ({verdict.reason})"))
        return notes

    def _label(self, name: str) -> str:
        arms = self.runner.run_json.info.compare.arms if self.runner and self.runner.run_json.info.compare else {}
        return arms[name].label() if name in arms else name


def write_outputs(analysis: CompareAnalysis, a_label: str, b_label: str, notes: list[str], out: Path,
                  elapsed_s: float | None = None):
    """compare.json, compare.md, compare_ratios.png; the Markdown also goes to $GITHUB_STEP_SUMMARY."""
    import json

    verdict = analysis.verdict
    info = analysis.run.run.compare
    extra = {"pairs": max((r.pairs for r in verdict.results), default=0), "slice_s": info.slice_s,
             "schedule": info.schedule or "interleaved",
             "looks": [look.to_dict() for look in info.looks], "power": info.power, "elapsed_s": elapsed_s,
             "notes": notes}
    markdown = to_markdown(verdict, a_label, b_label, notes, schedule=info.schedule)
    (out / "compare.md").write_text(markdown)
    (out / "compare.json").write_text(json.dumps(to_json(verdict, a_label, b_label, extra), indent=2) + "\n")
    figure = ratios_figure(analysis.table, verdict, analysis.pair_times(), out)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as handle:
            handle.write(markdown)
    return markdown, figure

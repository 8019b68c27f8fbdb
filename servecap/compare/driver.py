"""`servecap compare`: both arms up, load interleaved in slices, pairs until the verdict is decided.

    start A and B (servecap.compare.arms)       -> run.json: compare.arms
    warm-up: one slice per arm                 -> median E2E -> slice length (>= 5 x E2E, >= 2 s)
    pilot: --pilot-pairs pairs                 -> per-pair spread -> power analysis:
                                                  "about 24 pairs (2.1 min) to detect 10% at 90% power"
    pairs up to the planned number             -> look 1: every metric judged (reports.paired)
    while a gated metric is UNKNOWN and --max-duration allows: another batch of pairs, another look
                                                  (each look tests at its group-sequential boundary)
    compare.json, compare.md, compare_ratios.png, the table on stdout and in $GITHUB_STEP_SUMMARY

Each batch of slices is one run of the real `locust -f loadgen/chat.py --slice-plan PLAN`
(the slices themselves are timed inside Locust: loadgen.scenario.slice_driver). The pilot's
pairs count in the verdict: they are pairs like any other (the plan only sized the run).
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rich.console import Console

from servecap.compare.arms import Arms
from servecap.compare.config import CompareConfig
from loadgen.observe.run_metadata import git_commit, host_info, versions
from servecap.sweep.cpu_pinning import plan_cpus
from loadgen.locust_command import CHAT_LOCUSTFILE, locust_executable
from servecap.sweep.locust_level import run_level
from loadgen.workload.slice_plan import ArmRoute, Slice, SlicePlan, pair_slices, slice_length, warmup_slices
from reports.paired.analysis import SLICES_FILE, CompareAnalysis, analyse, read_slice_log
from reports.paired.decision import EXIT_UNUSABLE, thresholds_for
from reports.paired.figure import ratios_figure
from reports.paired.power import PowerPlan, plan as power_plan
from reports.paired.render import to_json, to_markdown
from reports.paired.slices import pair_arrays
from reports.paired.sequential import look_alpha
from reports.paired.stats import log_ratios
from contract.records import RECORDS_FILE, refuse_existing_run
from contract.run_json import CompareInfo, CpuPinning, Look, RunInfo, Seeds, Target, Workload, write_run_json

LOCUST_MARGIN_S = 60.0     # Locust's -t beyond the planned slices (the plan, not -t, ends the run)
BATCH_FRACTION = 0.25      # after the planned pairs, add pairs in batches of this fraction of the plan
MIN_BATCH = 4


class CompareInterrupted(Exception):
    """SIGTERM or Ctrl-C: stop, judge what was recorded."""


def _raise_interrupted(signum, frame):
    raise CompareInterrupted(f"signal {signum}")


@dataclass
class CompareOutcome:
    out_dir: Path
    exit_code: int
    analysis: CompareAnalysis | None
    markdown: str


class Compare:
    def __init__(self, config: CompareConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console(stderr=True)
        self.out = Path(config.out_dir)
        self.records = self.out / RECORDS_FILE
        self.gated = thresholds_for(config.max_regression, replace_defaults=config.no_defaults)
        both_external = config.a.kind == "url" and config.b.kind == "url"
        self.cpus = plan_cpus(config.pin_cpus, external_server=both_external)
        self.arms_to_start = Arms(config, self.cpus, self.out)   # refuses a bad arm before anything runs
        self.started = time.monotonic()
        self.next_slice = 0
        self.next_pair = 0
        self.batches = 0
        self.info = RunInfo(
            name=self.out.name, status="running", started_at=time.time(),
            target=Target(kind="compare"),
            workload=Workload(api="chat", stream=True, ignore_eos=True, prompt_tokens=config.prompt_tokens,
                              output_tokens=config.output_tokens),
            seeds=Seeds(workload=config.seed), host=host_info(), versions=versions(), git_commit=git_commit(),
            cpu_pinning=CpuPinning.from_dict(self.cpus.describe()),
            compare=CompareInfo(concurrency=config.concurrency, rate_rps=config.rate,
                                arrival=config.arrival if config.open_loop else "closed", warmup_s=config.warmup_s,
                                at_switch=config.at_switch, schedule=config.schedule,
                                pilot_pairs=config.pilot_pairs,
                                min_effect=config.min_effect, alpha=config.alpha, thresholds=dict(self.gated)))

    @property
    def compare(self) -> CompareInfo:
        return self.info.compare

    def _write(self) -> None:
        write_run_json(self.out / "run.json", self.info)

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    # -- the whole run ------------------------------------------------------------------
    def run(self) -> CompareOutcome:
        refuse_existing_run(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._write()
        previous = signal.signal(signal.SIGTERM, _raise_interrupted)
        status = "failed"
        try:
            with self.arms_to_start as arms:
                self.arms = arms.live
                self.compare.arms = {name: live.info for name, live in arms.live.items()}
                self._write()
                for name, live in arms.live.items():
                    where = "" if live.info.kind == "url" else f" at {live.url}"   # a url arm's label is its url
                    self.console.print(f"arm {name.upper()}: {live.info.label()}{where} (model {live.model})")
                self._run_pairs()
            status = "complete"
        except (CompareInterrupted, KeyboardInterrupt):
            status = "interrupted"
            self.console.print("[yellow]compare interrupted: judging what was recorded[/]")
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.info.status, self.info.ended_at = status, time.time()
            self._write()
        return self._finish(status)

    def _run_pairs(self) -> None:
        config = self.config
        warm = self._batch(warmup_slices(self._take_slices(2), config.warmup_s, config.seed))
        self.compare.slice_s = slice_s = config.slice_s or slice_length(warm)
        self._write()
        together = " (duet: both at once)" if config.schedule == "duet" else ""
        self.console.print(f"warm-up: {config.warmup_s:g} s per arm{together}, median E2E "
                           f"{'-' if warm is None else f'{warm * 1000:.0f} ms'} -> slices of {slice_s:.1f} s")
        t0 = time.monotonic()
        self._pairs(config.pilot_pairs)
        seconds_per_pair = (time.monotonic() - t0) / config.pilot_pairs
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
            remaining = (config.max_duration_s or 0) - self._elapsed()
            if config.max_duration_s is None or batch <= 0 or remaining < batch * seconds_per_pair:
                if config.max_duration_s is not None:
                    self.console.print(f"[yellow]time is up ({self._elapsed():.0f} s of --max-duration "
                                       f"{config.max_duration_s:.0f} s): still undecided on "
                                       f"{', '.join(verdict.undecided)}[/]")
                return
            target = self.next_pair + batch

    def _plan(self, seconds_per_pair: float) -> PowerPlan:
        """Power analysis on the pilot pairs; sets planned_pairs and max_pairs (the sequential looks' horizon)."""
        config = self.config
        analysis = analyse(self.out, max_regression=self.gated, replace_defaults=True, alpha=config.alpha)
        pilot = {key: log_ratios(*pair_arrays(analysis.table, key)[1:]) for key in self.gated}
        plan = power_plan(pilot, min_effect=config.min_effect, seconds_per_pair=seconds_per_pair,
                          alpha=config.alpha, min_pairs=config.pilot_pairs)
        self.compare.power = {"metric": plan.metric, "sigma": plan.sigma, "sigma_planned": plan.sigma_planned,
                              "pairs": plan.pairs, "seconds": plan.seconds, "seconds_per_pair": seconds_per_pair,
                              "power": plan.power}
        affordable = config.max_pairs
        if config.max_duration_s is not None:
            left = config.max_duration_s - self._elapsed()
            affordable = min(affordable, self.next_pair + max(0, int(left // seconds_per_pair)))
        planned = max(self.next_pair, min(plan.pairs, affordable))
        self.compare.planned_pairs = planned
        self.compare.max_pairs = max(planned, affordable if config.max_duration_s is not None else planned)
        self._write()
        self.console.print(f"power: about {plan.pairs} pairs ({plan.seconds / 60:.1f} min) to detect a "
                           f"{config.min_effect:.0%} change at {plan.power:.0%} power (noisiest gated metric "
                           f"{plan.metric}: per-pair SD {plan.sigma:.1%}, planned with {plan.sigma_planned:.1%})")
        if plan.pairs > affordable:
            self.console.print(f"[yellow]--max-duration {config.max_duration_s:.0f} s is too short for that: "
                               f"{affordable} pairs fit; a {config.min_effect:.0%} change may go undetected "
                               f"(give about {self._elapsed() + plan.seconds:.0f} s)[/]"
                               if config.max_duration_s is not None else
                               f"[yellow]--max-pairs {config.max_pairs} is below that: a {config.min_effect:.0%} "
                               "change may go undetected[/]")
        return plan

    def _look(self):
        looks = [look.pairs for look in self.compare.looks if look.pairs] + [self.next_pair]
        alpha = look_alpha(self.config.alpha, looks, self.compare.max_pairs)
        verdict = analyse(self.out, max_regression=self.gated, replace_defaults=True, alpha=alpha).verdict
        self.compare.looks.append(Look(pairs=self.next_pair, alpha=alpha, undecided=verdict.undecided))
        self._write()
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
                             self.config.seed)
        self.next_pair += count
        self._batch(slices)

    def _batch(self, slices: list[Slice]) -> float | None:
        """Run `slices` in one Locust process; returns the batch's median E2E of ok records (s)."""
        config = self.config
        self.batches += 1
        plan = SlicePlan(arms={name: ArmRoute(live.url, live.model, (live.pid,) if live.pid else ())
                               for name, live in self.arms.items()},
                         slices=tuple(slices), at_switch=config.at_switch, schedule=config.schedule,
                         slices_log=str(self.out / SLICES_FILE))
        plan_path = self.out / f"plan-{self.batches}.json"
        plan_path.write_text(plan.to_json())
        planned_s = sum(s.duration_s for s in slices)
        command = self._locust_command(plan_path, planned_s)
        code, records = run_level(command, self.records, self.out / "locust.log",
                                  planned_s * 2 + LOCUST_MARGIN_S * 2, lambda records: None)
        done = {s["slice"] for s in read_slice_log(self.out / SLICES_FILE)}
        missing = [s.index for s in slices if s.index not in done]
        if code != 0 or missing:
            raise RuntimeError(f"locust exited {code} with slice(s) {missing or 'none'} unfinished; "
                               f"see {self.out / 'locust.log'}")
        e2e = [r.e2e_s for r in records if r.status == "ok" and r.e2e_s is not None]
        return float(np.median(e2e)) if e2e else None

    def _locust_command(self, plan_path: Path, planned_s: float) -> list[str]:
        config = self.config
        users = 1 if config.open_loop else config.concurrency * (2 if config.schedule == "duet" else 1)
        run_time = math.ceil(planned_s * 1.5 + LOCUST_MARGIN_S)
        command = [*self.cpus.prefix(self.cpus.loadgen), *locust_executable(),
                   "-f", str(CHAT_LOCUSTFILE), "--headless", "--only-summary",
                   "--host", self.arms["a"].url, "-u", str(users), "-r", str(users), "-t", f"{run_time}s",
                   "--stop-timeout", "5", "--exit-code-on-error", "0", "--records", str(self.records),
                   "--level", config.load_id, "--slice-plan", str(plan_path), "--model", self.arms["a"].model,
                   "--prompt-tokens", config.prompt_tokens, "--output-tokens", config.output_tokens,
                   "--seed", str(config.seed)]
        if config.open_loop:
            command += ["--arrival", config.arrival, "--rate", str(config.rate)]
        return command

    # -- the end ------------------------------------------------------------------------
    def _finish(self, status: str) -> CompareOutcome:
        try:
            analysis = analyse(self.out)
        except ValueError as exc:
            self.console.print(f"[red]nothing to judge: {exc}[/]")
            return CompareOutcome(self.out, EXIT_UNUSABLE, None, "")
        notes = list(analysis.notes)
        if status != "complete":
            notes.append(f"the run was {status} after {self.next_pair} pairs: judged on what it recorded")
        markdown, figure = write_outputs(analysis, self._label("a"), self._label("b"), notes, self.out,
                                         elapsed_s=self._elapsed())
        exit_code = analysis.verdict.exit_code if status == "complete" else EXIT_UNUSABLE
        self.console.print(f"compare: {analysis.verdict.summary} ({self._elapsed():.0f} s, "
                           f"{self.next_pair} pairs); {self.out / 'compare.md'}, {self.out / figure.name}")
        return CompareOutcome(self.out, exit_code, analysis, markdown)

    def _label(self, name: str) -> str:
        return self.compare.arms[name].label() if name in self.compare.arms else name


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

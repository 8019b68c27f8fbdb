"""`servecap sweep --calibrate`: the calibration stage, after a closed-loop sweep's own levels.

A closed-loop sweep on one workload cannot tell `servecap predict` two things a what-if needs:
    open-<strategy>/   one open-loop level per strategy: Poisson arrivals at OPEN_SHARE of the highest
                       requests/s the sweep measured for it, the sweep's lengths. A closed loop's users
                       wait for their answers, so its front end never meets a burst of arrivals; an
                       open loop's does, and its delays (their tail most) are longer at the same
                       streams in flight.
    long/              one closed-loop level at the sweep's middle concurrency with LONG_PROMPT x the
                       prompts and LONG_OUTPUT x the outputs: the prefill's cost at lengths the
                       sweep never sent (a longer prompt is not only more of the same tokens: its
                       attention reads grow with it).
Each is a run directory of its own under RUN/calibrate/ (the sweep's report stays the sweep's);
`servecap predict --calibration RUN` calibrates on them beside the sweep's levels
(`reports.predict.stage`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from contract.calibration_stage import STAGE_DIR
from contract.distributions import parse_length_distribution

OPEN_SHARE = 0.5
LONG_PROMPT, LONG_OUTPUT = 4, 2


def check_calibrate(experiment) -> None:
    """ValueError naming why `--calibrate` cannot follow this sweep's plan."""
    if experiment.workload.scenario != "chat":
        raise ValueError("--calibrate fits the LLM step model: it needs --scenario chat")
    if not experiment.load.concurrency:
        raise ValueError("--calibrate follows a closed-loop sweep: give --concurrency (its open-loop stage "
                         "is what --rates would measure)")
    if experiment.workload.dataset or experiment.workload.trace:
        raise ValueError("--calibrate scales the sweep's --prompt-tokens and --output-tokens: it cannot follow "
                         "a --dataset or --trace")


def scaled_lengths(spec: str, factor: int) -> str:
    """A length spec (loadgen's forms) with every length `factor` times longer; ValueError for a file."""
    dist = parse_length_distribution(spec, "length")
    p = dist.params
    if dist.kind == "fixed":
        return str(int(p[0]) * factor)
    if dist.kind == "uniform":
        return f"uniform:{int(p[0]) * factor}:{int(p[1]) * factor}"
    if dist.kind == "normal":
        return f"normal:{p[0] * factor:g}:{p[1] * factor:g}"
    if dist.kind == "lognormal":
        return f"lognormal:{p[0] * factor:g}:{p[1]:g}"
    raise ValueError(f"--calibrate cannot scale the lengths of {spec!r} (a file's)")


def stage_experiments(experiment, top_rates: dict[str, float]) -> list[tuple[str, object]]:
    """(directory name, Experiment) of each stage run; `top_rates`: the highest requests/s the sweep
    measured per target key (strategy, or "url")."""
    out = Path(experiment.out_dir) / STAGE_DIR
    load, workload = experiment.load, experiment.workload
    runs = []
    for key, rate in top_rates.items():
        if rate > 0:
            targets = tuple(t for t in experiment.targets if (t.key or "url") == key) or experiment.targets
            runs.append((f"open-{key}", replace(experiment, out_dir=str(out / f"open-{key}"), targets=targets,
                                                load=replace(load, concurrency=(), rates=(round(OPEN_SHARE * rate, 2),),
                                                             arrival="poisson"))))
    levels = sorted(load.concurrency)
    longer = replace(workload, prompt_tokens=scaled_lengths(workload.prompt_tokens, LONG_PROMPT),
                     output_tokens=scaled_lengths(workload.output_lengths.spec, LONG_OUTPUT))
    runs.append(("long", replace(experiment, out_dir=str(out / "long"), workload=longer,
                                 load=replace(load, concurrency=(levels[len(levels) // 2],)))))
    return runs


def top_rates(run_dir: Path) -> dict[str, float]:
    """The highest measured requests/s of each target key in a finished sweep."""
    from reports.run_data import load_run
    from reports.summary import build_levels

    data = load_run(run_dir)
    best: dict[str, float] = {}
    for level in build_levels(data, data.run.slo):
        key = "url" if data.run.target.kind == "url" else level.strategy
        if key and level.request_rate_rps:
            best[key] = max(best.get(key, 0.0), float(level.request_rate_rps))
    return best


def run_stage(experiment, run_dir: Path, console: Console) -> list[Path]:
    """Run the stage's sweeps after the sweep in `run_dir`; their run directories."""
    from servecap.experiment.runner import Runner

    done = []
    for name, stage in stage_experiments(experiment, top_rates(run_dir)):
        console.print(f"calibration stage: {name}")
        done.append(Runner(stage, console, command="servecap sweep --calibrate").run())
    return done

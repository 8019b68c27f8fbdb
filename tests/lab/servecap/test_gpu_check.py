"""The GPU check (issue 17): its steps on cuda, the figures it reads back, what it calls a problem,
and the whole script on this CPU (no GPU here: the cuda path itself has not run in this suite)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.servecap import gpu_check

REPO = Path(__file__).resolve().parents[3]


def steps_for(*argv):
    return {step.name: step for step in gpu_check.plan(gpu_check.parse_args(["--out", "/tmp/x", *argv]))}


def test_on_cuda_the_bench_sampler_and_sweep_run_on_the_gpu_in_bf16():
    steps = steps_for("--device", "cuda")
    assert list(steps) == ["environment", "bench", "sampler", "bench_big", "sweep"]
    for name in ("bench", "bench_big"):
        argv = steps[name].argv
        assert argv[argv.index("--device") + 1] == "cuda" and argv[argv.index("--dtype") + 1] == "bfloat16"
    assert steps["bench"].argv[steps["bench"].argv.index("--model") + 1] == "small"
    assert "--forward-only" in steps["bench_big"].argv
    sampler = steps["sampler"].argv
    assert sampler[sampler.index("--duration") + 1] == "30.0" and steps["sampler"].background
    sweep = steps["sweep"].argv
    assert sweep[sweep.index("--server-args") + 1] == "--device cuda --dtype bfloat16"
    assert sweep[sweep.index("--concurrency") + 1] == "16"


def test_dry_run_prints_every_step_and_runs_nothing(tmp_path, capsys):
    assert gpu_check.main(["--dry-run", "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[0] for line in lines] == ["environment", "bench", "sampler", "bench_big", "sweep"]
    assert not (tmp_path / "out").exists()


def test_a_step_whose_module_is_missing_is_skipped_and_named(tmp_path):
    step = gpu_check.Step("needs_nothing_real", [sys.executable, "-c", "pass"], 10, needs=("no_such_module_xyz",))
    with (tmp_path / "log").open("w") as log:
        gpu_check.run_steps([step], log, budget_s=30)
    assert step.result == {"status": "skipped", "why": "missing no_such_module_xyz (carry them as wheels: "
                                                        "scripts/gpu_check.sh)"}
    assert "skipped" in (tmp_path / "log").read_text()


def test_sweep_figures_pair_continuous_with_static_at_each_concurrency(tmp_path):
    levels = [{"level": "static/c=16", "output_tokens_per_s": 100.0},
              {"level": "continuous/c=16", "output_tokens_per_s": 250.0},
              {"level": "continuous/c=32", "output_tokens_per_s": 300.0}]          # no static at 32
    (tmp_path / "summary.json").write_text(json.dumps({"levels": levels}))
    figures = gpu_check.sweep_figures(tmp_path)
    assert figures["continuous_over_static"] == {"c=16": 2.5}
    assert gpu_check.sweep_figures(tmp_path / "absent") == {}


def test_sampler_figures_average_the_nvml_rows_only(tmp_path):
    csv = tmp_path / "samples.csv"
    csv.write_text("source,util_pct,power_w,sm_clock_mhz,mem_used_bytes\n"
                   "nvml,50,300,1800,1073741824\nnvml,70,500,1900,2147483648\nhost,99,,,\n")
    figures = gpu_check.sampler_figures(csv)
    assert figures["rows"] == 3 and figures["nvml_rows"] == 2 and figures["sources"] == ["host", "nvml"]
    assert figures["util_pct_mean"] == 60 and figures["power_w_mean"] == 400 and figures["mem_used_gib_max"] == 2


def test_on_cuda_a_host_only_sampler_and_an_unseen_device_are_problems():
    summary = {"steps": {"bench": {"status": "ok"}, "sweep": {"status": "skipped", "why": "missing locust"}},
               "environment": {"torch": "2.13.0+cpu", "cuda_available": False}, "sampler": {"nvml_rows": 0}}
    found = gpu_check.problems(summary, "cuda")
    assert found == ["sweep: skipped (missing locust)", "torch 2.13.0+cpu sees no CUDA device",
                     "the sampler read no NVML rows (it fell back to the host: see gpu_check.log)"]
    assert gpu_check.problems(summary, "cpu") == ["sweep: skipped (missing locust)"]


def test_bad_budget_is_named(capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.parse_args(["--budget-s", "0"])
    assert exit_info.value.code == 2 and "--budget-s must be positive" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.e2e
def test_the_script_runs_every_step_on_this_cpu(tmp_path):
    """scripts/gpu_check.sh with this interpreter as is, --device cpu --quick: every step finishes."""
    env = {**os.environ, "GPU_CHECK_PYTHON": sys.executable, "OUT": str(tmp_path / "out")}
    done = subprocess.run([str(REPO / "scripts" / "gpu_check.sh"), "--device", "cpu", "--quick"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert summary["problems"] == []
    assert all(step["status"] == "ok" for step in summary["steps"].values())
    assert summary["bench"]["tokens_per_s"]["continuous"] > 0 and summary["bench"]["achieved_gb_s_b1"] > 0
    assert summary["bench_big"]["tokens_per_s"] == {}                                 # forward passes only
    assert summary["sampler"]["rows"] >= 2
    assert set(summary["sweep"]["continuous_over_static"]) == {"c=2"}
    assert (tmp_path / "out" / "sweep_report.md").exists() and "problems: none" in done.stdout

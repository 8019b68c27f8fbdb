"""`servecap sweep --calibrate`: the stage's plan, its bad input, and a real stage that `servecap predict` reads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from servecap.sweep.calibrate_stage import check_calibrate, scaled_lengths, stage_experiments
from servecap.sweep.cli import main
from loadgen_helpers import _env, scripted_server
from sweep_helpers import experiment as _config


def test_the_stage_is_an_open_loop_level_per_strategy_and_a_long_level_at_the_middle_concurrency():
    config = _config("--concurrency", "1,2,4,8", "--strategies", "continuous,dynamic", "--prompt-tokens", "uniform:32:128",
                     "--output-tokens", "48")
    runs = dict(stage_experiments(config, {"continuous": 100.0, "dynamic": 61.0}))
    assert set(runs) == {"open-continuous", "open-dynamic", "long"}
    opened = runs["open-dynamic"]
    assert [t.key for t in opened.targets] == ["dynamic"]
    assert (opened.load.rates, opened.load.concurrency, opened.load.arrival) == ((30.5,), (), "poisson")
    assert opened.out_dir == "runs/x/calibrate/open-dynamic"
    long = runs["long"]
    assert (long.load.concurrency, long.workload.prompt_tokens, long.workload.output_tokens) == (
        (4,), "uniform:128:512", "96")
    assert [t.key for t in long.targets] == ["continuous", "dynamic"]


def test_every_length_form_but_a_file_scales():
    assert scaled_lengths("100", 4) == "400"
    assert scaled_lengths("normal:256:64", 2) == "normal:512:128"
    assert scaled_lengths("lognormal:200:0.5", 4) == "lognormal:800:0.5"


@pytest.mark.parametrize("args, says", [(["--rates", "2"], "give --concurrency"),
                                        (["--concurrency", "2", "--trace", "t.jsonl"], "--trace")])
def test_a_stage_that_cannot_follow_the_plan_is_refused_with_one_line(args, says, capsys):
    with pytest.raises(ValueError, match=says):
        check_calibrate(_config(*args))
    assert main(["--out", "runs/never", "--calibrate", "--rates", "2"]) == 2
    err = capsys.readouterr().err
    assert "--calibrate follows a closed-loop sweep" in err and "Traceback" not in err


@pytest.mark.slow
@pytest.mark.e2e
def test_a_real_stage_lands_beside_the_sweep_and_predict_calibrates_on_it(tmp_path):
    out = tmp_path / "run"
    with scripted_server(tmp_path, "--ttft", "0.004", "--itl", "0.002") as (url, _):
        result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", url, "--out", str(out),
                                 "--concurrency", "1,2,4", "--warmup", "1s", "--duration", "3s", "--output-tokens", "8",
                                 "--prompt-tokens", "16", "--calibrate", "--no-report", "--no-pin-cpus"],
                                capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert "calibration stage: open-url" in result.stderr and "calibration stage: long" in result.stderr
    opened = json.loads((out / "calibrate" / "open-url" / "run.json").read_text())
    long = json.loads((out / "calibrate" / "long" / "run.json").read_text())
    assert opened["load_plan"]["arrival"] == "poisson" and len(opened["load_plan"]["rates"]) == 1
    assert long["load_plan"]["concurrency"] == [2] and long["workload"]["prompt_tokens"] == "64"
    answer = subprocess.run([sys.executable, "-m", "servecap", "predict", "--calibration", str(out), "--rates", "20",
                             "--replications", "2", "--json"], capture_output=True, text=True, timeout=300, env=_env())
    assert answer.returncode == 0, answer.stderr[-3000:]
    predicted = json.loads(answer.stdout)
    assert "rps=" in predicted["calibration"]["sources"]["stage"] and "c=2" in predicted["calibration"]["sources"]["stage"]
    assert predicted["distance"]["arrivals"]["factor"] == 1.0   # the stage calibrated an open loop (Poisson)
    def longest(run_dir):   # as the server counted them (a scripted server adds its template's tokens)
        return max(json.loads(line).get("prompt_tokens") or 0 for line in (run_dir / "requests.jsonl").open())

    assert longest(out / "calibrate" / "long") > longest(out)
    assert predicted["distance"]["prompt_tokens"]["calibrated"]["max"] == longest(out / "calibrate" / "long")

"""`servecap predict`: curves and the max load under an SLO from a run's calibration, in-process on a
simulated run; a what-if on a catalog GPU says it is one; bad input exits 2 with one line."""

from __future__ import annotations

import json

import pytest

from reports.predict import cli as predict_cli
from reports.predict.simulated_run import sample_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return sample_run(tmp_path_factory.mktemp("predict") / "run", concurrencies=(1, 2, 4), duration_s=3.0)


def test_predict_prints_and_writes_curves_and_the_max_load_under_the_slo(run_dir, tmp_path, capsys):
    out = tmp_path / "predict.json"
    code = predict_cli.main(["--calibration", str(run_dir), "--concurrency", "1,2,6", "--slo-ttft-ms", "1000",
                             "--slo-tpot-ms", "1000", "--replications", "2", "--out", str(out)])
    assert code == 0
    answer = json.loads(out.read_text())
    assert answer["strategy"] == "continuous" and answer["arrival"] == "closed" and answer["extrapolation"] is None
    assert [row["offered"] for row in answer["loads"]] == [{"concurrency": 1}, {"concurrency": 2}, {"concurrency": 6}]
    for row in answer["loads"]:
        for metric in ("ttft_s", "tpot_s", "e2e_s"):
            p50, p99 = row["metrics"][metric]["p50"], row["metrics"][metric]["p99"]
            assert 0 < p50["value"] <= p99["value"] and p99["interval"][0] <= p99["value"] <= p99["interval"][1]
        assert row["meets_slo"] is True
    e2e = [row["metrics"]["e2e_s"]["p50"]["value"] for row in answer["loads"]]
    assert e2e == sorted(e2e)   # more users, longer requests
    assert answer["max_load_under_slo"]["offered"] == {"concurrency": 6}
    printed = capsys.readouterr().out
    assert "max load under the SLO: c=6" in printed and "TTFT" in printed


def test_a_tight_slo_leaves_no_load_and_open_loop_and_other_lengths_work(run_dir, tmp_path):
    out = tmp_path / "open.json"
    assert predict_cli.main(["--calibration", str(run_dir), "--rates", "20,40", "--arrival", "gamma:2",
                             "--prompt-tokens", "uniform:100:200", "--slo-ttft-ms", "0.01", "--replications", "2",
                             "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["arrival"] == "gamma:2" and answer["max_load_under_slo"] is None
    assert 100 <= answer["workload"]["prompt_tokens_mean"] <= 200
    assert all(row["meets_slo"] is False and "ttft_s p99" in row["why_not"] for row in answer["loads"])


def test_a_reasoning_what_if_predicts_the_first_answer_token_after_the_reasoning_and_judges_its_slo(
        run_dir, tmp_path, capsys):
    """The run measured no reasoning; asked for 256 reasoning tokens of 320, the answer's first token waits
    for 256 decodes, E2E is the same 320 tokens' either way, and --slo-ttfa-ms judges the answer."""
    runs = {}
    for name, extra in (("plain", []), ("reasoning", ["--reasoning-tokens", "256", "--slo-ttfa-ms", "1"])):
        out = tmp_path / f"{name}.json"
        assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "1,4", "--output-tokens", "320",
                                 "--replications", "2", "--out", str(out), *extra]) == 0
        runs[name] = json.loads(out.read_text())
    plain, reasoning = runs["plain"], runs["reasoning"]
    assert reasoning["workload"]["reasoning_tokens_mean"] == 256 and plain["workload"]["reasoning_tokens_mean"] == 0
    for p_row, r_row in zip(plain["loads"], reasoning["loads"]):
        p, r = p_row["metrics"], r_row["metrics"]
        assert p["ttfa_s"]["p50"]["value"] == p["ttft_s"]["p50"]["value"]
        # 256 of the 319 decode steps before the answer: about 256/319 of the decode time after the first token
        decode = r["e2e_s"]["p50"]["value"] - r["ttft_s"]["p50"]["value"]
        assert r["ttfa_s"]["p50"]["value"] - r["ttft_s"]["p50"]["value"] == pytest.approx(decode * 256 / 319, rel=0.1)
        assert r["e2e_s"]["p50"]["value"] == pytest.approx(p["e2e_s"]["p50"]["value"], rel=0.05)
        assert r_row["meets_slo"] is False and "ttfa_s p99" in r_row["why_not"]
    assert "TTFA" in capsys.readouterr().out


def test_a_gpu_what_if_is_labelled_an_extrapolation(run_dir, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "4", "--gpu", "h100-sxm",
                             "--replications", "1", "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["extrapolation"].startswith("EXTRAPOLATION to h100-sxm")
    assert "fitted on published measurements" in answer["extrapolation"]   # a CPU run: nothing to calibrate on
    assert "EXTRAPOLATION" in capsys.readouterr().out


def test_speculation_is_predicted_beside_the_plain_curve_with_its_crossover(run_dir, tmp_path, capsys):
    out = tmp_path / "spec.json"
    assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "1,4", "--replications", "2",
                             "--speculative-method", "draft", "--num-speculative-tokens", "3",
                             "--speculative-acceptance", "0.8", "--speculative-draft-calibration", str(run_dir),
                             "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    spec = answer["speculative"]
    assert spec["acceptance_per_position"] == pytest.approx([0.8, 0.64, 0.512])
    assert spec["draft"] == "the draft run's calibration" and spec["statement"].endswith("(predicted)")
    for row in answer["loads"]:   # a draft as slow as the target: 3 extra passes a step cost more than they save
        assert row["speculative"]["metrics"]["tpot_s"]["p50"]["value"] > row["metrics"]["tpot_s"]["p50"]["value"]
    assert spec["tpot_level"] == 1
    assert "speculation stops lowering TPOT at concurrency 1" in capsys.readouterr().out.replace("\n", "")
    assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "1", "--replications", "2",
                             "--speculative-method", "ngram", "--num-speculative-tokens", "3",
                             "--speculative-acceptance", "0.8", "--out", str(out)]) == 0
    ngram = json.loads(out.read_text())
    assert ngram["speculative"]["draft"] is None
    assert ngram["loads"][0]["speculative"]["metrics"]["tpot_s"]["p50"]["value"] < \
        ngram["loads"][0]["metrics"]["tpot_s"]["p50"]["value"]   # no draft to pay for: it pays at one user


@pytest.mark.parametrize("args, message", [
    (["--concurrency", "1", "--speculative-method", "draft", "--num-speculative-tokens", "3",
      "--speculative-acceptance", "0.7"], "needs the draft's step time"),
    (["--concurrency", "1", "--speculative-method", "ngram", "--num-speculative-tokens", "3"],
     "--speculative-acceptance together"),
    (["--concurrency", "1", "--speculative-method", "ngram", "--num-speculative-tokens", "3",
      "--speculative-acceptance", "0.3,0.5,0.1"], "cannot rise"),
    (["--concurrency", "1", "--speculative-method", "draft", "--num-speculative-tokens", "3",
      "--speculative-acceptance", "0.7", "--speculative-draft-calibration", "{run}", "--gpu", "h100-sxm"],
     "give --speculative-model (its roofline there) instead"),
    (["--concurrency", "1", "--speculative-method", "draft", "--num-speculative-tokens", "3",
      "--speculative-acceptance", "0.7", "--speculative-draft-calibration", "{run}", "--speculative-model", "tiny"],
     "not both"),
    (["--concurrency", "1", "--rates", "2"], "choose one load: --concurrency or --rates"),
    (["--concurrency", "two"], "--concurrency: 'two' is not a whole number"),
    (["--concurrency", "1", "--strategy", "static"], "the run has levels of continuous only"),
    (["--concurrency", "1", "--gpu", "tpu-v9"], "unknown gpu"),
    (["--rates", "1", "--arrival", "closed"], "a closed loop is --concurrency"),
    (["--concurrency", "1", "--reasoning-tokens", "lots"], "--reasoning-tokens"),
    (["--concurrency", "1", "--slo-ttfa-ms", "-5"], "ttfa_ms must be a positive number"),
])
def test_bad_input_is_one_line_and_exit_2(run_dir, args, message, capsys):
    assert predict_cli.main(["--calibration", str(run_dir), *(a.replace("{run}", str(run_dir)) for a in args)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_run_that_speculated_does_not_calibrate_the_plain_engine(run_dir, tmp_path, capsys):
    import shutil

    copy = tmp_path / "speculated"
    shutil.copytree(run_dir, copy)
    run = json.loads((copy / "run.json").read_text())
    run.setdefault("server", {}).setdefault("engines", {})["continuous"] = {"speculative": {"method": "ngram"}}
    (copy / "run.json").write_text(json.dumps(run))
    assert predict_cli.main(["--calibration", str(copy), "--concurrency", "1", "--replications", "1",
                             "--out", str(tmp_path / "p.json")]) == 2
    assert "its server speculated (ngram); calibrate on a run without speculative decoding" in capsys.readouterr().err


def test_a_load_no_request_finishes_in_the_window_is_said_and_the_others_still_answer(run_dir, tmp_path, capsys):
    out = tmp_path / "outside.json"
    assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "1,64", "--warmup", "0", "--duration",
                             "0.05", "--slo-e2e-ms", "1000", "--replications", "1", "--out", str(out)]) == 0
    answer = json.loads(out.read_text())
    assert answer["outside_window"] == [64] and [row["offered"] for row in answer["loads"]] == [{"concurrency": 1}]
    assert answer["max_load_under_slo"]["offered"] == {"concurrency": 1}
    assert "not predicted: 64: no simulated request finished" in capsys.readouterr().out.replace("\n", " ")
    assert predict_cli.main(["--calibration", str(run_dir), "--concurrency", "64", "--warmup", "0", "--duration",
                             "0.05", "--replications", "1", "--out", str(out)]) == 2
    assert "at any load asked" in capsys.readouterr().err

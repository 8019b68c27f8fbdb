"""`servecap calc` as users run it: real subprocesses, JSON keys, tables, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from calculators.cli.commands import main

SERVECAP = Path(sys.executable).with_name("servecap")


def run_servecap(*args: str) -> subprocess.CompletedProcess:
    """The installed console script in a real subprocess."""
    return subprocess.run([str(SERVECAP), "calc", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_console_script_prints_json_and_exits_2_on_bad_input(tmp_path):
    done = run_servecap("kv", "--model", "llama-3.1-8b", "--dtype", "bf16", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["kv_bytes_per_token"] == 131_072
    bad = run_servecap("fit", "--model", "llama-3.1-8b", "--gpu", "h100", "--json")
    assert bad.returncode == 2 and "unknown gpu 'h100'" in bad.stderr and "Traceback" not in bad.stderr
    broken = tmp_path / "config.json"
    broken.write_text("{\"hidden_size\": 4096,")
    malformed = run_servecap("kv", "--model", str(broken))
    assert malformed.returncode == 2 and "is not valid JSON" in malformed.stderr
    assert "Traceback" not in malformed.stderr


def test_kv_json_for_llama_8b(calc_json):
    out = calc_json("kv", "--model", "llama-3.1-8b", "--dtype", "bf16", "--prompt-tokens", "1000",
                    "--output-tokens", "24")
    assert out["kv_bytes_per_token"] == 131_072
    assert out["kv_bytes_per_request"] == 64 * 16 * 131_072
    assert calc_json("kv", "--model", "llama-3.1-8b", "--dtype", "bf16", "--kv-dtype", "fp8")["kv_bytes_per_token"] \
        == 65_536


def test_weights_fit_roofline_queue_cost_json_keys(calc_json):
    weights = calc_json("weights", "--model", "llama-3.1-8b", "--dtype", "bf16")
    assert weights["param_count"] == 8_030_261_248 and weights["weight_bytes"] == 16_060_522_496
    fit = calc_json("fit", "--model", "llama-3.1-8b", "--gpu", "H100-SXM", "--dtype", "bf16",
                    "--gpu-memory-utilization", "0.9", "--block-size", "16", "--max-model-len", "8192")
    assert {"kv_cache_bytes", "num_blocks", "kv_tokens", "max_concurrency", "fits"} <= set(fit)
    assert fit["fits"] and fit["kv_tokens"] == 16 * fit["num_blocks"]
    roof = calc_json("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--dtype", "bf16", "--batch", "32",
                     "--context", "2048", "--prompt-tokens", "1000")
    assert {"decode_step_s", "decode_tokens_per_s", "bound", "prefill_s", "decode_step_band", "tp_comm_s"} <= set(roof)
    assert roof["bound"] == "memory" and roof["prefill_s"] > 0
    assert roof["decode_step_band"]["points"] >= 8 and roof["prefill_band"]["relative"] > 0
    queue = calc_json("queue", "--queue", "mmc", "--arrival-rate", "8", "--service-rate", "1", "--servers", "10")
    assert queue["p_wait"] == pytest.approx(0.409180, rel=1e-5)
    assert {"mean_wait_s", "wait_p99_s"} <= set(queue)
    cost = calc_json("cost", "--gpu-hourly", "2", "--gpus", "1", "--tokens-per-s", "1000")
    assert cost["usd_per_million_tokens"] == pytest.approx(0.5555556, rel=1e-6)


def test_gpu_predictions_carry_their_published_point_band(calc, calc_json):
    code, out, _ = calc("roofline", "--model", "llama-3.1-70b", "--gpu", "h200", "--dtype", "fp8", "--tp", "2",
                        "--batch", "32", "--context", "2048", "--prompt-tokens", "2000")
    assert code == 0 and "published points on hopper fp8" in out and "ms (±" in out
    fleet = calc_json("fleet", "--rate", "20", "--slo-p99-ms", "30000", "--model", "llama-3.1-70b", "--gpu", "h200",
                      "--dtype", "fp8", "--prompt-tokens", "1000", "--output-tokens", "250", "--max-num-seqs", "64",
                      "--service-cv2", "0")
    low, high = fleet["replicas_range"]
    assert low <= fleet["replicas"] <= high and "published points" in fleet["error_band"]
    assert fleet["replicas_range_note"] is None
    # an SLO the slow end of the band cannot meet on an idle replica: that end is null and says why,
    # never the search's cap (it once printed [2, 100000])
    tight = calc_json("fleet", "--rate", "20", "--slo-p99-ms", "20000", "--model", "llama-3.1-70b", "--gpu", "h200",
                      "--dtype", "fp8", "--prompt-tokens", "1000", "--output-tokens", "250", "--max-num-seqs", "64",
                      "--service-cv2", "0")
    low, high = tight["replicas_range"]
    assert low <= tight["replicas"] and high is None
    assert tight["replicas_range_note"].startswith("at the slow end of the band: slo_p99 20000 ms is unreachable")
    cost = calc_json("cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "2")
    cheap, dear = cost["usd_per_million_tokens_range"]
    assert cheap < cost["usd_per_million_tokens"] < dear and cost["error_band"]
    fit = calc_json("fit", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "1000",
                    "--output-tokens", "200", "--max-model-len", "8192")
    tpot = fit["predicted"]["tpot_s"]
    assert tpot["low"] < tpot["value"] < tpot["high"] and "published points" in tpot["band"]
    # vLLM's own limit on an H100 (80 GB, not an A100) is 1024 sequences: the KV room (375) binds
    assert fit["predicted"]["concurrency"] == min(1024, fit["max_concurrency_at_mean"]) == 375
    explicit = calc_json("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--bandwidth-efficiency", "0.9")
    assert explicit["decode_step_band"] is None and explicit["bandwidth_efficiency"] == 0.9
    code, _, err = calc("cost", "--gpu", "h100-sxm", "--gpus", "1")
    assert code == 2 and "give either --tokens-per-s" in err


def test_fleet_simulate_and_catalog_listings(calc_json):
    fleet = calc_json("fleet", "--rate", "100", "--slo-p99-ms", "2000", "--replica-capacity", "10",
                      "--replica-slots", "4", "--gpu-hourly", "2")
    assert fleet["replicas"] >= 10 and fleet["response_p99_s"] <= 2.0 and fleet["usd_per_hour"] == 2 * fleet["gpus"]
    sim = calc_json("simulate", "--jobs", "1", "--strategy", "continuous", "--concurrency", "1,4", "--requests",
                    "300", "--step-base-ms", "10", "--step-per-seq-ms", "1", "--output-tokens", "32", "--prompt-tokens", "16")
    assert [level["offered"] for level in sim["levels"]] == [{"concurrency": 1}, {"concurrency": 4}]
    assert sim["levels"][1]["metrics"]["tpot_s"]["p50"] == pytest.approx(0.014)
    gpus = {g["name"]: g for g in calc_json("gpus")["gpus"]}
    assert gpus["h100-sxm"]["interconnect"] == "nvlink" and gpus["l40s"]["interconnect_gbs"] == 32
    assert "mixtral-8x7b" in [m["name"] for m in calc_json("models")["models"]]


def test_tables_without_json_and_config_json_models(tmp_path, calc, calc_json):
    code, out, _ = calc("kv", "--model", "opt-13b", "--dtype", "fp16")
    assert code == 0 and "819,200" in out and "kv_bytes_per_token" in out
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "opt", "hidden_size": 5120, "ffn_dim": 20480,
                                  "num_attention_heads": 40, "num_hidden_layers": 40, "vocab_size": 50272,
                                  "max_position_embeddings": 2048}))
    assert calc_json("kv", "--model", str(config), "--dtype", "fp16")["kv_bytes_per_token"] == 819_200
    code, out, err = calc("fit", "--model", "llama-3.1-70b", "--gpu", "l4")
    assert code == 0 and "does not fit" in err


@pytest.mark.parametrize("args, message", [
    (["fit", "--model", "llama-3.1-8b", "--gpu", "h100", "--json"], "unknown gpu 'h100'"),
    (["kv", "--model", "gpt-9", "--json"], "unknown model 'gpt-9'"),
    (["fit", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "1.5"],
     "gpu_memory_utilization must be in (0, 1]"),
    (["kv", "--model", "llama-3.1-8b", "--prompt-tokens", "-3"], "--prompt-tokens: length must be a whole number >= 1"),
    (["queue", "--queue", "mmc", "--arrival-rate", "5", "--service-rate", "1"], "unstable queue"),
    (["cost", "--gpus", "1", "--tokens-per-s", "100"], "give --gpu-hourly"),
    (["roofline", "--model", "tiny", "--gpu", "cpu"], "give memory_gib, bandwidth_gbs, tflops"),
    (["kv", "--model", "llama-3.1-8b", "--dtype", "int3"], "unknown dtype 'int3'"),
    (["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", "--engine-version", "0.99",
      "--concurrency", "1"], "--engine-version '0.99': vllm has 0.11, main"),
])
def test_bad_input_exits_2_with_one_clear_line(calc, args, message):
    code, _, err = calc(*args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_argparse_errors_also_exit_2(calc):
    code, _, err = calc("queue", "--queue", "mm9", "--arrival-rate", "1")
    assert code == 2 and "invalid choice" in err


def test_calibrate_reads_a_steps_csv(tmp_path, calc, calc_json):
    steps = tmp_path / "steps.csv"
    steps.write_text("batch_size,step_s,prefill_tokens\n" + "".join(
        f"{b},{0.002 + 0.0005 * b + 1e-5 * p},{p}\n" for b, p in [(1, 0), (2, 0), (4, 100), (8, 0), (16, 50), (3, 0)]))
    out = calc_json("calibrate", "--steps", str(steps))
    assert out["step_model"]["base_s"] == pytest.approx(0.002, rel=1e-6)
    assert out["step_model"]["per_prefill_token_s"] == pytest.approx(1e-5, rel=1e-6)
    (tmp_path / "bad.csv").write_text("batch,seconds\n1,0.1\n")
    code, _, err = calc("calibrate", "--steps", str(tmp_path / "bad.csv"))
    assert code == 2 and "lacks column(s) batch_size, step_s" in err
    code, _, err = calc("calibrate", "--steps", str(tmp_path / "missing.csv"))
    assert code == 2 and "cannot be read" in err


def test_lengths_take_the_workloads_forms_and_a_calculator_needing_one_number_takes_the_mean(calc_json):
    fixed = calc_json("kv", "--model", "llama-3.1-8b", "--prompt-tokens", "1000", "--output-tokens", "200")
    drawn = calc_json("kv", "--model", "llama-3.1-8b", "--prompt-tokens", "uniform:900:1100",
                      "--output-tokens", "normal:200:20")
    assert (drawn["prompt_tokens"], drawn["output_tokens"]) == (1000, 200)
    assert drawn["kv_bytes_per_request"] == fixed["kv_bytes_per_request"]
    bare = calc_json("kv", "--model", "llama-3.1-8b")   # no lengths: bytes per token only
    assert bare["prompt_tokens"] == bare["output_tokens"] == bare["kv_bytes_per_request"] == 0
    assert calc_json("fit", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")["max_concurrency_at_mean"] is None
    sized = calc_json("fit", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "uniform:900:1100",
                      "--output-tokens", "200")
    assert sized["max_concurrency_at_mean"] > 0 and sized["predicted"]["prompt_tokens"] == 1000


def test_simulate_takes_the_loads_levels_and_arrivals(calc, calc_json):
    def ttft_p99(arrival: str) -> float:
        answer = calc_json("simulate", "--rates", "40", "--arrival", arrival, "--step-base-ms", "10",
                           "--step-per-seq-ms", "1", "--requests", "400", "--prompt-tokens", "uniform:16:32",
                           "--output-tokens", "8")
        return answer["levels"][0]["metrics"]["ttft_s"]["p99"]

    assert ttft_p99("constant") < ttft_p99("poisson") < ttft_p99("gamma:3")   # burstier gaps queue longer
    code, _, err = calc("simulate", "--step-base-ms", "10")
    assert code == 2 and "give the load: --concurrency" in err
    code, _, err = calc("simulate", "--step-base-ms", "10", "--concurrency", "1", "--rates", "2")
    assert code == 2 and "choose one load: --concurrency or --rates" in err


@pytest.mark.slow
def test_simulate_levels_in_processes_give_the_same_answer(calc, calc_json):
    args = ("simulate", "--concurrency", "1,4,16", "--requests", "200", "--step-base-ms", "10", "--step-per-seq-ms",
            "1", "--prompt-tokens", "uniform:16:64", "--output-tokens", "uniform:4:32")
    one, pooled = calc_json(*args, "--jobs", "1"), calc_json(*args, "--jobs", "3")
    assert pooled == one and [level["offered"]["concurrency"] for level in pooled["levels"]] == [1, 4, 16]
    code, _, err = calc(*args, "--jobs", "0")
    assert code == 2 and "--jobs: must be a whole number >= 1" in err


def test_simulate_sessions_from_the_command_line(calc, calc_json):
    args = ("simulate", "--session", "turns:3,tools:1,tool-latency:0.05,tool-result:24,schemas:1", "--concurrency",
            "2", "--step-base-ms", "5", "--prompt-tokens", "16", "--output-tokens", "32", "--duration", "10s",
            "--jobs", "1")
    read_back, recomputed = calc_json(*args), calc_json(*args, "--answers-read-back", "no")
    turns = read_back["levels"][0]["by_turn"]
    assert sorted(turns) == ["1", "2", "3"] and read_back["session"].startswith("turns:3")
    assert turns["3"]["prompt_tokens_mean"] > turns["1"]["prompt_tokens_mean"]
    # a model whose answers read back finds them cached; one whose text does not, only what it was sent
    for turn in ("2", "3"):
        assert recomputed["levels"][0]["by_turn"][turn]["cached_share"] < turns[turn]["cached_share"]
    assert read_back["levels"][0]["sessions_completed"] > 0
    code, _, err = calc("simulate", "--session", "turns:2", "--rates", "2", "--step-base-ms", "5")
    assert code == 2 and "--session: sessions run closed loop" in err
    code, _, err = calc("simulate", "--session", "turns:2,fanout:2,tools:0", "--concurrency", "2", "--step-base-ms", "5")
    assert code == 2 and "fanout runs in a turn's first tool round" in err

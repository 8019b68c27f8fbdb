"""vLLM's CPU build as a first-class target: a sweep and report against it, and the reference server
on the same checkpoint giving vLLM's greedy tokens."""

from __future__ import annotations

import json
import random

import httpx
import pandas as pd
import pytest

from contract.server_metrics import SCRAPE_MARKER, kept_sample_names
from vllm_env import servecap

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def vllm_run(vllm_server, checkpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "vllm"
    result = servecap("sweep", "--url", vllm_server.base_url, "--concurrency", "1,2,4", "--warmup", "2s",
                      "--duration", "8s", "--prompt-tokens", "uniform:32:128", "--output-tokens", "32",
                      "--model-config", str(checkpoint), "--out", str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return out


def test_the_server_section_is_filled_from_vllms_metrics(vllm_run):
    summary = json.loads((vllm_run / "summary.json").read_text())
    assert [lvl["level"] for lvl in summary["levels"]] == ["c=1", "c=2", "c=4"]
    for level in summary["levels"]:
        server = level["server"]
        assert server["engine"] == "vllm" and server["scrapes"] > 0
        assert 0 < server["requests_running_mean"] <= level["offered"]["concurrency"]
        assert 0 < server["kv_usage_mean"] < 1 and server["tokens_per_step_mean"] >= 1
        assert server["preemptions"] == 0 and server["generation_tokens_per_s"] > 0
        assert {"ttft_s", "queue_s", "prefill_s", "decode_s", "inference_s", "e2e_s"} <= set(level["server_latency"])
    by_level = {lvl["level"]: lvl["server"] for lvl in summary["levels"]}
    assert by_level["c=4"]["requests_running_mean"] > by_level["c=1"]["requests_running_mean"]


def test_the_validation_predicts_vllms_levels_from_its_tpot_and_its_own_latency_means(vllm_run):
    """No step record: the step line comes from the client's TPOT and vLLM's prefill means, the front
    end from the client's TTFT beyond vLLM's queue + prefill means (reports.predict.external_calibration)."""
    validation = json.loads((vllm_run / "summary.json").read_text())["validation"]
    assert set(validation["levels"]) == {"c=1", "c=2", "c=4"}, validation["unavailable"]
    calibration = validation["by_strategy"]["url"]["calibration"]
    assert "prefill means" in calibration["sources"]["step_time"]
    assert "/metrics queue, prefill and decode means" in calibration["sources"]["front_end"]
    step = calibration["step_model"]
    assert step["base_ms"] > 0 and step["per_prefill_token_us"] > 0
    for level, errors in validation["levels"].items():
        for key, pair in errors.items():
            assert pair["predicted"] > 0 and pair["measured"] > 0, (level, key)


def test_for_every_level_the_servers_ttft_is_at_most_the_clients(vllm_run):
    summary = json.loads((vllm_run / "summary.json").read_text())
    for level in summary["levels"]:
        client, server = level["metrics"]["ttft_s"], level["server_latency"]["ttft_s"]
        # the server's mean is exact (_sum / _count); its p50 is only known to lie in its histogram bucket
        # (reports.server_metrics.latency), so the bucket is what can be held against the client's exact p50;
        # a value interpolated inside the bucket can land above it by up to the bucket's width
        assert server["mean"] <= client["mean"], level["level"]
        assert server["p50_bucket"][0] <= client["p50"], level["level"]
        # the server's window opens once the warm-up requests are done: (nearly) the measured requests only
        assert 0.7 * client["count"] <= server["count"] <= client["count"] + level["offered"]["concurrency"]
        split = level["client_vs_server"]["ttft_split_mean"]
        assert split["overhead_s"] + split["front_end_s"] + split["queue_s"] + split["prefill_s"] \
            == pytest.approx(split["client_s"])
    assert "Client versus server" in (vllm_run / "report.md").read_text()


def test_the_predicted_block_count_equals_vllms_own(vllm_run):
    summary = json.loads((vllm_run / "summary.json").read_text())
    for level in summary["levels"]:
        predicted = level["predicted"]
        blocks = predicted["comparisons"]["kv_blocks_total"]
        assert blocks["predicted"] == blocks["measured"] == 8192   # 1 GiB / (128 tokens x 1024 bytes)
        assert predicted["comparisons"]["kv_bytes_per_token"]["predicted"] == 1024 and predicted["kv_dtype"] == "float32"


def test_run_json_describes_vllm_as_it_describes_itself(vllm_run, checkpoint):
    server = json.loads((vllm_run / "run.json").read_text())["server"]
    assert (server["serving_engine"], server["model"], server["strategy"], server["dtype"]) \
        == ("vllm", "tiny", "unknown", "unknown")
    assert (server["block_size"], server["kv_blocks"], server["max_model_len"]) == (128, 8192, 1024)
    assert server["kv_cache_dtype"] == "auto" and server["kv_cache_memory_bytes"] == 2**30
    assert "strategies" not in server and server["model_root"] == str(checkpoint)


def test_server_metrics_csv_keeps_only_changed_values_of_the_mapped_families(vllm_run):
    scraped = pd.read_csv(vllm_run / "server_metrics.csv", keep_default_na=False)
    assert set(scraped.name) - {SCRAPE_MARKER} <= kept_sample_names()
    assert any(name.startswith("vllm:") for name in scraped.name)
    series = scraped[scraped.name != SCRAPE_MARKER].groupby(["name", "labels"])["value"]
    assert (series.diff().dropna() != 0).all()
    span_s = scraped.t.max() - scraped.t.min()
    print(f"server_metrics.csv against vLLM: {len(scraped)} rows in {span_s:.0f} s ({len(scraped) / span_s:.1f} rows/s,"
          f" {(scraped.name == SCRAPE_MARKER).sum()} scrapes)")


def test_greedy_outputs_for_token_id_prompts_match_vllms(vllm_server, reference_server):
    """vLLM says its tokens as ids through logprobs + return_tokens_as_token_ids; the reference server
    through return_token_ids. Prompts of random ids up to 300 tokens, 48 greedy tokens each."""
    rng = random.Random(0)
    with httpx.Client(timeout=120) as http:
        for _ in range(12):
            prompt = [rng.randrange(0, 421) for _ in range(rng.randint(1, 300))]
            body = {"model": "tiny", "prompt": prompt, "max_tokens": 48, "temperature": 0, "ignore_eos": True}
            vllm = http.post(vllm_server.base_url + "/v1/completions",
                             json={**body, "logprobs": 1, "return_tokens_as_token_ids": True}).json()
            vllm_ids = [int(token.removeprefix("token_id:")) for token in vllm["choices"][0]["logprobs"]["tokens"]]
            ours = http.post(reference_server.base_url + "/v1/completions",
                             json={**body, "return_token_ids": True}).json()["choices"][0]
            assert ours["prompt_token_ids"] == prompt
            assert ours["token_ids"] == vllm_ids, f"prompt of {len(prompt)} tokens"


def test_compare_vllm_against_the_reference_server_on_one_checkpoint(vllm_server, reference_server, tmp_path):
    """`servecap compare --a-url VLLM --b-url REFERENCE`: both arms take the same slices of the same
    workload, each described by its own /metrics names; the verdict itself is whatever the two engines
    do on this machine, so only its shape is checked (exit 0, 1 or 3: a decision or undecided, never unusable)."""
    out = tmp_path / "compare"
    done = servecap("compare", "--out", str(out), "--a-url", vllm_server.base_url, "--b-url", reference_server.base_url,
                    "--ready-path", "/v1/models", "--concurrency", "2", "--warmup", "2s", "--slice", "2s",
                    "--pilot-pairs", "3", "--max-pairs", "4", "--prompt-tokens", "uniform:16:64",
                    "--output-tokens", "16", "--no-pin-cpus", timeout=300)
    assert done.returncode in (0, 1, 3), done.stdout[-2000:] + done.stderr[-3000:]
    print(done.stdout)   # the paired table: `make test-engines` shows it (-rP)
    arms = json.loads((out / "run.json").read_text())["compare"]["arms"]
    assert (arms["a"]["serving_engine"], arms["b"]["serving_engine"]) == ("vllm", "servecap")
    assert arms["a"]["model"] == arms["b"]["model"] == "tiny" and arms["b"]["engine"]["strategy"] == "continuous"
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if r["phase"] == "measure" and r["status"] == "ok"]
    assert {r["arm"] for r in measured} == {"a", "b"} and all(r["output_tokens"] == 16 for r in measured)
    result = json.loads((out / "compare.json").read_text())
    ratio = next(m for m in result["metrics"] if m["metric"] == "output_tokens_per_s")["ratio"]
    assert ratio > 0
    assert "vllm at " + vllm_server.base_url in (out / "compare.md").read_text()

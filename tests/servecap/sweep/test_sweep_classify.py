"""`servecap sweep --scenario classify`: KServe V2 load over REST or gRPC, one server per
--server-args-matrix entry, and the classic report (queue/compute split, batches, predictions)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from loadgen_helpers import _env
from servecap.experiment.run_json import workload_for
from servecap.sweep.matrix import parse_server_args_matrix
from sweep_helpers import command as level_command, experiment


def args(*flags: str):
    return experiment("--concurrency", "2", *flags)


def test_a_classify_sweep_runs_the_classify_locustfile_with_its_flags(tmp_path):
    config = args("--scenario", "classify", "--rows", "uniform:1:8", "--protocol", "grpc",
                  "--server-args-matrix", "off:--classifier-batching off|on:")
    off, on = config.targets
    assert (off.key, on.key) == ("off", "on") and off.server_args == "--classifier-batching off"
    command = level_command(config, "off/c=2", 2, 1, 2, records=tmp_path / "r.jsonl", model="tabular-mlp",
                            grpc_target="127.0.0.1:9")
    assert command[command.index("-f") + 1].endswith("loadgen/classify.py")
    assert command[command.index("--rows") + 1] == "uniform:1:8" and command[command.index("--scenario") + 1] == "classify"
    assert command[command.index("--protocol") + 1] == "grpc" and command[command.index("--grpc-target") + 1] == "127.0.0.1:9"
    assert "--prompt-tokens" not in command and "--output-tokens" not in command
    assert command[command.index("--model") + 1] == "tabular-mlp"
    workload = workload_for(config)
    assert (workload.scenario, workload.rows, workload.protocol) == ("classify", "uniform:1:8", "grpc")
    # over gRPC the server also serves it, on a port its ready line names
    assert "--grpc-port" in off.reference_spec(config.workload).serve_args()
    assert "--classifier-batching" in off.reference_spec(config.workload).serve_args()


def test_a_plain_classify_sweep_has_one_server_named_classifier():
    config = args("--scenario", "classify")
    assert [t.key for t in config.targets] == ["classifier"]
    assert config.level_id("classifier", 2, open_loop=False) == "classifier/c=2"


@pytest.mark.parametrize("flags, words", [
    (["--rows", "4"], "need --scenario classify"),
    (["--scenario", "classify", "--output-tokens", "4"], "--output-tokens describe chat requests"),
    (["--scenario", "classify", "--rows", "uniform:4"], "--rows"),
    (["--scenario", "classify", "--strategies", "static"], "--strategies picks an LLM batching strategy"),
    (["--scenario", "classify", "--turns", "2"], "--turns describe chat requests"),
    (["--scenario", "classify", "--grpc-target", "h:1"], "--grpc-target names an external server's gRPC port"),
    (["--scenario", "classify", "--server-args-matrix", "off"], "is not LABEL:FLAGS"),
    (["--scenario", "classify", "--server-args-matrix", "a:|a:--x"], "names a label twice"),
])
def test_bad_classify_flags_are_refused_with_one_line(flags, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        args(*flags)


def test_the_matrix_parses_labels_and_flags():
    assert parse_server_args_matrix("off:--classifier-batching off|on:") == (
        ("off", "--classifier-batching off"), ("on", ""))


@pytest.mark.slow
@pytest.mark.e2e
def test_batching_off_and_on_over_grpc_in_one_command(tmp_path):
    """The serving guides' validation exercise: the same load with batching off, then on; the report gives
    throughput, queue time, tail latency, memory and the predictions compared."""
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--scenario", "classify",
                             "--protocol", "grpc", "--rows", "uniform:1:4", "--concurrency", "4",
                             "--server-args-matrix", "off:--classifier-batching off|on:", "--warmup", "2s",
                             "--duration", "4s", "--slo-e2e-ms", "1000", "--no-pin-cpus"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records = [r for r in read_records(out / "requests.jsonl") if r["phase"] == "measure"]
    assert {r["level"] for r in records} == {"off/c=4", "on/c=4"} and len(records) > 100
    assert all(r["status"] == "ok" and r["protocol"] == "grpc" and r["api"] == "classify" for r in records)
    assert all(1 <= r["prompt_tokens"] <= 4 and r["response_id"].startswith("req-") for r in records)
    summary = json.loads((out / "summary.json").read_text())
    levels = {lv["level"]: lv for lv in summary["levels"]}
    off, on = levels["off/c=4"]["server"], levels["on/c=4"]["server"]
    assert off["batch_rows"] == pytest.approx(levels["off/c=4"]["rows_per_request"], rel=0.1)   # each request alone
    for split in (off, on):
        # the server's parts add up to its request time, and that to less than the client's
        assert 0 < split["queue_s"] + split["compute_s"] <= split["server_request_s"] < split["client_e2e_s"]
    [compared] = summary["predictions"]
    assert (compared["reference"], compared["label"], compared["rows"]) == ("off", "on", 256)
    assert compared["labels_equal"] == 256 and compared["max_abs_diff"] < 1e-6
    report = (out / "report.md").read_text()
    assert "## Client versus server" in report and "on against off: the same label on 256 of 256" in report
    assert summary["best_level"] in levels and (out / "classify_throughput_vs_latency.png").exists()
    assert levels[summary["best_level"]]["meets_slo"] is True   # judged by the contract's rule


def test_an_embed_sweep_runs_the_embed_locustfile():
    config = args("--scenario", "embed", "--rows", "uniform:1:4", "--prompt-tokens", "64")
    command = level_command(config, "classifier/c=2", 2, 1, 2, model="servecap-embed")
    assert command[command.index("-f") + 1].endswith("loadgen/embed.py")
    assert command[command.index("--rows") + 1] == "uniform:1:4" and command[command.index("--prompt-tokens") + 1] == "64"
    assert command[command.index("--model") + 1] == "servecap-embed"
    assert workload_for(config).scenario == "embed"
    with pytest.raises(ValueError, match="an embed workload speaks OpenAI's REST API"):
        args("--scenario", "embed", "--protocol", "grpc")


@pytest.mark.slow
@pytest.mark.e2e
def test_an_embed_sweep_reports_tokens_per_second_and_the_servers_split(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(out), "--scenario", "embed",
                             "--rows", "uniform:1:4", "--prompt-tokens", "uniform:16:64", "--concurrency", "2,4",
                             "--warmup", "2s", "--duration", "4s", "--no-pin-cpus"],
                            capture_output=True, text=True, timeout=300, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records = [r for r in read_records(out / "requests.jsonl") if r["phase"] == "measure"]
    assert records and all(r["status"] == "ok" and r["api"] == "embed" and r["usage_from"] == "server" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "embed" and [lv["unit"] for lv in summary["levels"]] == ["tokens", "tokens"]
    for level in summary["levels"]:
        assert level["rows_per_s"] > level["req_per_s"] > 0 and level["server"]["batch_rows"] >= 1
    assert "tokens/s" in (out / "report.md").read_text()

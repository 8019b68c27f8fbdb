"""run.json's typed sections: what the sweep writes reads back unchanged; older and hand-written files still load."""

import json
import os

import pytest

from contract.run_json import (CpuPinning, Host, LevelEntry, ObserverInfo, RunInfo, Server, Target,
                                        read_run_json, write_run_json)
from contract.slo import SLO

STATIC = {"strategy": "static", "dtype": "float32", "device": "cpu", "block_size": 16, "num_kv_blocks": 64,
          "max_model_len": 256, "kv_block_bytes": 512, "kv_cache_bytes": 32768,
          "strategy_limits": {"batch_size": 4, "batch_timeout_ms": 20}}
CONTINUOUS = {**STATIC, "strategy": "continuous", "strategy_limits": {"max_num_seqs": 8, "max_num_batched_tokens": 512}}


def _sweep_run() -> RunInfo:
    run = RunInfo(name="cmp", status="running", started_at=1.0, target=Target(kind="reference_server"),
                  server=Server(model="tiny", strategies=["static", "continuous"], args=""),
                  slo=SLO(tpot_ms=200), host=Host(hostname="h", cores=2, gpus=[]), versions={"numpy": "2"},
                  cpu_pinning=CpuPinning(loadgen_cpus=[0], server_cpus=[0]))
    for strategy, engine in (("static", STATIC), ("continuous", CONTINUOUS)):
        run.server.record_command(strategy, ["--strategy", strategy])
        run.server.record_engine(strategy, engine)
        run.levels.append(LevelEntry(level=f"{strategy}/c=1", strategy=strategy, load=1, status="pending"))
        run.observers[strategy] = ObserverInfo(sampler="host", interval_s=0.5, metrics_url="u")
    return run


def test_what_the_sweep_writes_reads_back_unchanged(tmp_path):
    run = _sweep_run()
    entry = run.level("static/c=1")
    entry.status, entry.exit_code, entry.requests, entry.errors, entry.stable = "ok", 0, 10, 0, False
    path = tmp_path / "run.json"
    write_run_json(path, run)
    data = json.loads(path.read_text())
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    problems = []
    again = read_run_json(path, problems)
    assert problems == [] and again == run and again.to_dict() == data
    # the keys the file has always had, nulls included where it always wrote them
    assert data["ended_at"] is None and data["git_commit"] is None and data["host"]["driver"] is None
    assert data["slo"] == {"tpot_ms": 200} and data["cpu_pinning"]["engine_cpus"] is None
    assert data["levels"][0] == {"level": "static/c=1", "strategy": "static", "load": 1, "status": "ok",
                                 "exit_code": 0, "requests": 10, "errors": 0, "throughput_spread": None,
                                 "stable": False}
    assert data["levels"][1] == {"level": "continuous/c=1", "strategy": "continuous", "load": 1, "status": "pending"}
    assert "auto" not in data and "url" not in data["target"]


def test_each_strategy_keeps_its_own_limits():
    server = _sweep_run().server
    written = server.to_dict()
    assert "batch_size" not in written and "max_num_seqs" not in written   # not flattened into `server`
    assert written["engines"]["static"]["strategy_limits"] == {"batch_size": 4, "batch_timeout_ms": 20}
    assert (written["dtype"], written["kv_blocks"], written["block_size"]) == ("float32", 64, 16)
    static, continuous = server.engine_config("static"), server.engine_config("continuous")
    assert static["batch_size"] == 4 and "max_num_seqs" not in static and static["strategy"] == "static"
    assert continuous["max_num_seqs"] == 8 and "batch_size" not in continuous
    assert server.limits("none") == {} and server.engine("none") == {}


def test_a_file_from_before_per_strategy_limits_still_loads():
    old = {"name": "old", "status": "complete",
           "server": {"model": "tiny", "strategies": ["static", "continuous"], "engines": {"static": STATIC},
                      "dtype": "float32", "kv_blocks": 64, "batch_size": 4, "batch_timeout_ms": 20, "max_num_seqs": 8},
           "loadgen": {"warnings": ["c=1: late"]}, "levels": [{"level": "static/c=1", "status": "ok", "exit_code": 0}]}
    problems = []
    run = RunInfo.from_dict(old, problems)
    assert problems == []
    assert run.server.extra == {"batch_size": 4, "batch_timeout_ms": 20, "max_num_seqs": 8}
    assert run.extra == {"loadgen": {"warnings": ["c=1: late"]}}   # unknown keys are kept, and written back
    assert run.to_dict()["loadgen"] == old["loadgen"] and run.to_dict()["server"]["max_num_seqs"] == 8
    # the strategy's own engine description wins over the flattened keys; without one they are all there is
    assert run.server.engine_config("continuous")["max_num_seqs"] == 8
    assert run.server.engine_config("static")["batch_size"] == 4
    assert run.levels[0].exit_code == 0 and run.levels[0].requests is None


def test_hand_written_files_load():
    run = RunInfo.from_dict({"server": {"model": "tiny", "strategy": "continuous", "kv_blocks": 512},
                             "host": {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}, "NVIDIA L4", 3]},
                             "levels": ["c=1", {"level": "c=2"}], "load_plan": {"levels": ["c=9"]}})
    assert run.server.engine_config(None)["strategy"] == "continuous"
    assert run.host.gpu_names() == ["NVIDIA H100 80GB HBM3", "NVIDIA L4"]
    assert run.planned_levels() == ["c=1", "c=2"]
    assert RunInfo.from_dict({"load_plan": {"levels": ["c=9"]}}).planned_levels() == ["c=9"]
    assert RunInfo.from_dict({}) == RunInfo() and RunInfo().planned_levels() == []


def test_sections_of_the_wrong_shape_are_left_out_and_named():
    problems = []
    run = RunInfo.from_dict({"server": ["tiny"], "levels": {"c=1": {}}, "notes": "x", "slo": {"ttft_ms": 0},
                             "observers": {"url": 5}}, problems, "run.json")
    assert run.server == Server() and run.levels == [] and run.notes == [] and run.slo == SLO()
    assert run.observers == {"url": ObserverInfo()}
    assert problems == ["run.json.server is not an object; left out", "run.json.levels is not a list; left out",
                        "run.json.notes is not a list; left out",
                        "run.json.slo ignored: ttft_ms must be a positive number of milliseconds (--slo-ttft-ms), got 0",
                        "run.json.observers.url is not an object; left out"]


def test_unreadable_file_is_a_clear_error(tmp_path):
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable run.json"):
        read_run_json(tmp_path / "run.json")

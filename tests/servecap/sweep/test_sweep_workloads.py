"""`servecap sweep` with workloads users bring: the dataset flags reach Locust and run.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.records import read_records
from servecap.experiment.run_json import workload_for
from loadgen_helpers import _env, read_truth, scripted_server
from sweep_helpers import command as _command, experiment, flag as _flag


def _config(*args):
    return experiment("--concurrency", "2", *args)


def _dataset(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"question {i}"},
                                                     {"role": "assistant", "content": "y" * (8 * (i + 1))}]}) + "\n"
                            for i in range(4)))
    return path


def _sweep_against_a_scripted_server(tmp_path, out, *args, timeout=180):
    """`servecap sweep --url <scripted server> --out OUT ARGS --no-pin-cpus`, which must succeed; the server's truth file."""
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", url, "--out", str(out), *args,
                                 "--no-pin-cpus"], capture_output=True, text=True, timeout=timeout, env=_env())
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return truth_path


def test_dataset_flags_reach_locust_and_run_json(tmp_path):
    path = _dataset(tmp_path)
    config = _config("--dataset", str(path), "--dataset-sampling", "without-replacement", "--chars-per-token", "1")
    command = _command(config, "c=2", 2, 1, 2)
    assert _flag(command, "--dataset") == str(path.resolve())
    assert _flag(command, "--dataset-sampling") == "without-replacement" and _flag(command, "--chars-per-token") == "1.0"
    assert "--output-tokens" not in command                    # the data's own lengths
    workload = workload_for(config)
    assert workload.dataset == str(path.resolve()) and workload.dataset_sampling == "without-replacement"
    assert workload.own_lengths and workload.output_tokens is None
    given = _config("--dataset", str(path), "--output-tokens", "5")
    assert _flag(_command(given, "c=2", 2, 1, 2), "--output-tokens") == "5"
    plain = _config()
    # the default lengths are the locustfile's own defaults (one declaration): nothing to hand over
    assert "--output-tokens" not in _command(plain, "c=2", 2, 1, 2) and workload_for(plain).dataset is None
    assert workload_for(plain).output_lengths.spec == "uniform:16:64"


def test_a_bad_dataset_fails_before_anything_starts(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "ok"}\n{"prompt": "no end"\n')
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2: not valid JSON"):
        _config("--dataset", str(path))


@pytest.mark.slow
@pytest.mark.e2e
def test_sweep_with_a_dataset_against_a_url(tmp_path):
    dataset = _dataset(tmp_path)
    out = tmp_path / "run"
    truth_path = _sweep_against_a_scripted_server(tmp_path, out, "--concurrency", "2", "--warmup", "0.5s",
                                                  "--duration", "2s", "--dataset", str(dataset), "--chars-per-token", "1")
    truth = read_truth(truth_path)
    ok = [r for r in read_records(out / "requests.jsonl") if r["status"] == "ok"]
    assert ok and {truth[r["response_id"]]["max_tokens"] for r in ok} <= {8, 16, 24, 32}
    run = json.loads((out / "run.json").read_text())
    assert run["workload"]["dataset"] == str(dataset.resolve())
    [level] = run["levels"]
    assert 0 <= level["loop_lag_p50_s"] <= level["loop_lag_p99_s"] <= level["loop_lag_max_s"]
    assert isinstance(level["limited_by_loadgen"], bool)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["loadgen"]["loop_lag_p99_ms"] == pytest.approx(level["loop_lag_p99_s"] * 1e3)
    assert (out / "summary.json").exists()


def test_multi_turn_flags_reach_locust_and_run_json(tmp_path):
    path = _dataset(tmp_path)
    config = _config("--dataset", str(path), "--turns", "all", "--think-time", "500ms")
    command = _command(config, "c=2", 2, 1, 2)
    assert _flag(command, "--turns") == "all" and _flag(command, "--think-time") == "0.5"
    workload = workload_for(config)
    assert workload.turns is None and workload.to_dict()["turns"] == "all" and workload.think_time_s == 0.5
    assert _flag(_command(_config("--turns", "3"), "c=2", 2, 1, 2), "--turns") == "3"
    assert "--turns" not in _command(_config(), "c=2", 2, 1, 2)
    assert workload_for(_config()).turns == 1 and workload_for(_config()).think_time_s == 0.0
    with pytest.raises(ValueError, match="run closed loop"):
        experiment("--rates", "1", "--turns", "2")
    for args, message in ((["--think-time", "1"], "needs --turns"), (["--turns", "all"], "needs --dataset"),
                          (["--turns", "0"], "--turns must be")):
        with pytest.raises(ValueError, match=message):
            _config(*args)


def _trace(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps({"timestamp": 250 * i, "input_length": 16, "output_length": 4,
                                        "hash_ids": [0, i]}) + "\n" for i in range(9)))
    return path


def test_a_trace_is_its_own_load_plan(tmp_path):
    path = _trace(tmp_path)
    config = experiment("--trace", str(path), "--trace-speedup", "2", "--warmup", "0.5s")
    [level] = config.profile().planned()
    assert level.load == pytest.approx(9 / 1.0) and level.trace
    assert config.level_id("continuous", level.load, True, trace=True) == "continuous/trace"
    warmup, duration = level.window    # 2 s of trace at 2x: 1 s, plus the tail for its last answers
    assert warmup == 0.5 and duration == pytest.approx(0.5 + 5.0)
    command = _command(config, "trace", 9, warmup, duration)
    assert _flag(command, "--trace") == str(path.resolve()) and _flag(command, "--speedup") == "2.0"
    assert "--arrival" not in command and "--rates" not in command and _flag(command, "-u") == "1"
    assert "--output-tokens" not in command   # each row's own output length, not the sweep's default
    given = experiment("--trace", str(path), "--output-tokens", "8")
    assert _flag(_command(given, "trace", 9, 0, 1), "--output-tokens") == "8"
    for args, message in ((["--concurrency", "2"], "does not combine with --concurrency"),
                          (["--turns", "2"], "does not combine"), (["--trace-speedup", "0"], "--speedup must be > 0")):
        with pytest.raises(ValueError, match=message):
            experiment("--trace", str(path), *args)
    (tmp_path / "bad.jsonl").write_text('{"timestamp": 0}\n')
    with pytest.raises(ValueError, match="bad.jsonl: line 1"):
        experiment("--trace", str(tmp_path / "bad.jsonl"))


@pytest.mark.slow
@pytest.mark.e2e
def test_sweep_replays_a_trace_against_a_url(tmp_path):
    out = tmp_path / "run"
    _sweep_against_a_scripted_server(tmp_path, out, "--trace", str(_trace(tmp_path)), "--trace-speedup", "4",
                                     "--warmup", "0")
    rows = read_records(out / "requests.jsonl")
    assert len(rows) == 9 and {r["level"] for r in rows} == {"trace"} and all(r["status"] == "ok" for r in rows)
    assert {r["output_tokens_asked"] for r in rows} == {4}   # the trace's output_length
    run = json.loads((out / "run.json").read_text())
    assert run["load_plan"]["kind"] == "trace" and run["load_plan"]["trace_speedup"] == 4.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["level"] == "trace" and summary["levels"][0]["requests"] == 9


def test_loadgen_processes_reach_locust_with_their_share(tmp_path):
    closed = _config("--loadgen-processes", "2")
    command = _command(closed, "c=2", 8, 1, 2, worker_cpus=(0, 1))
    assert _flag(command, "--processes") == "2" and _flag(command, "-u") == "8" and _flag(command, "--worker-cpus") == "0,1"
    opened = experiment("--rates", "4", "--loadgen-processes", "3")
    command = _command(opened, "rps=4.0", 4, 1, 2, worker_cpus=(0,))
    assert _flag(command, "-u") == "3" and "--worker-cpus" not in command   # one driver each; one core: shared
    assert _flag(command, "--rates") == "4.0" and _flag(command, "--arrival") == "poisson"
    assert "--processes" not in _command(_config(), "c=2", 2, 1, 2)
    with pytest.raises(ValueError, match="--loadgen-processes must be >= 1"):
        _config("--loadgen-processes", "0")


def test_external_workers_get_a_master_of_their_own_and_the_local_ones_join_it(tmp_path):
    from pathlib import Path

    from servecap.experiment.locust import level_invocation
    from servecap.experiment.profiles import Level

    def worker_commands(config, prefix=()):
        return level_invocation(config, Level(2, window=(1, 2)), "c=2", "http://x:1", Path("r"),
                                prefix=tuple(prefix)).worker_argv()

    config = _config("--loadgen-processes", "2", "--loadgen-external-workers", "3", "--loadgen-master-bind",
                     "0.0.0.0", "--loadgen-master-port", "6001", "--loadgen-worker-wait", "20s")
    master = _command(config, "c=2", 8, 1, 2, worker_cpus=(0, 1))
    assert "--master" in master and "--processes" not in master and "--worker-cpus" not in master
    assert (_flag(master, "--expect-workers"), _flag(master, "--master-bind-host"), _flag(master, "--master-bind-port"),
            _flag(master, "--expect-workers-max-wait")) == ("5", "0.0.0.0", "6001", "20")
    [local] = worker_commands(config, ["nice"])
    assert local[0] == "nice" and "--worker" in local and _flag(local, "--processes") == "2"
    assert (_flag(local, "--master-host"), _flag(local, "--master-port")) == ("127.0.0.1", "6001")
    assert worker_commands(_config()) == []
    with pytest.raises(ValueError, match="--loadgen-external-workers must be >= 0"):
        _config("--loadgen-external-workers", "-1")
    with pytest.raises(ValueError, match="--loadgen-master-port"):
        _config("--loadgen-master-port", "70000")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_worker_from_elsewhere_joins_each_level_and_its_records_are_merged_once(tmp_path):
    # the "other machine" is a loop on loopback that starts a worker again whenever a level's master ends it
    import socket

    from loadgen.locust_command import CHAT_LOCUSTFILE

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "run"
    loop = (f"for i in 1 2 3 4 5 6; do {sys.executable} -m locust -f {CHAT_LOCUSTFILE} --worker "
            f"--master-host 127.0.0.1 --master-port {port}; sleep 0.5; done")
    with scripted_server(tmp_path, "--ttft", "0.005", "--itl", "0.001") as (url, truth_path):
        elsewhere = subprocess.Popen(["bash", "-c", loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=_env())
        try:
            result = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--url", url, "--out", str(out),
                                     "--concurrency", "2,4", "--warmup", "0.5s", "--duration", "2s",
                                     "--loadgen-external-workers", "1", "--loadgen-master-port", str(port),
                                     "--loadgen-worker-wait", "30s", "--no-pin-cpus", "--no-report"],
                                    capture_output=True, text=True, timeout=240, env=_env())
        finally:
            elsewhere.kill()
            elsewhere.wait()
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records = read_records(out / "requests.jsonl")
    truth = read_truth(truth_path)
    for level in ("c=2", "c=4"):
        mine = [r for r in records if r["level"] == level and r["status"] == "ok"]
        # two workers shared the users: the local one and the one from "elsewhere", each in its own process
        assert len({r["worker"] for r in mine}) == 2, {r["worker"] for r in mine}
        assert all(r["response_id"] in truth for r in mine)
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids))   # written once, by the master


def test_rounds_split_the_window_and_reach_locust_and_run_json(tmp_path):
    config = _config("--concurrency", "1,4", "--warmup", "5s", "--duration", "20s", "--rounds", "4")
    load = config.load
    assert load.round_window(0) == (5.0, 5.0) and load.round_window(3) == (2.0, 5.0)
    assert _config("--rounds", "2", "--round-warmup", "0").load.round_window(1) == (0.0, 10.0)
    command = _command(config, "c=4", 4, round=2)
    assert _flag(command, "--round") == "2" and _flag(command, "--warmup") == "2.0"
    # each round draws its own requests and arrival gaps; the first keeps the run's seed
    assert _flag(command, "--seed") == str(config.workload.seed + 2)
    first = _command(config, "c=4", 4, round=0)
    assert _flag(first, "--seed") is None   # the run's own seed: the locustfile's default, 0
    assert "--round" not in _command(_config(), "c=2", 2, 1, 2)
    with pytest.raises(ValueError, match="--rounds must be >= 1"):
        _config("--rounds", "0")
    with pytest.raises(ValueError, match="does not combine with --auto"):
        experiment("--auto", "--slo-ttft-ms", "100", "--rounds", "2")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_sweep_in_rounds_measures_each_level_in_each_round_and_reports_over_its_windows(tmp_path):
    out = tmp_path / "run"
    _sweep_against_a_scripted_server(tmp_path, out, "--concurrency", "1,2", "--warmup", "0.5s", "--duration", "3s",
                                     "--rounds", "3", "--round-warmup", "0.3s", timeout=240)
    records = [r for r in read_records(out / "requests.jsonl") if r["phase"] == "measure"]
    by_level = {}
    for r in records:
        by_level.setdefault(r["level"], []).append(r)
    assert set(by_level) == {"c=1", "c=2"}
    starts = {}
    for level, mine in by_level.items():
        assert {r["round"] for r in mine} == {0, 1, 2}
        starts[level] = [min(r["t_start"] for r in mine if r["round"] == k) for k in range(3)]
    # serpentine: c=1, c=2 | c=2, c=1 | c=1, c=2
    assert starts["c=1"][0] < starts["c=2"][0] < starts["c=2"][1] < starts["c=1"][1] < starts["c=1"][2] < starts["c=2"][2]
    run = json.loads((out / "run.json").read_text())
    assert run["load_plan"]["rounds"] == 3 and {lvl["rounds"] for lvl in run["levels"]} == {3}
    summary = {lvl["level"]: lvl for lvl in json.loads((out / "summary.json").read_text())["levels"]}
    for level, entry in summary.items():
        assert len(entry["windows"]) == 3
        assert entry["duration_s"] == pytest.approx(sum(end - start for start, end in entry["windows"]))
        assert entry["duration_s"] < 0.6 * (entry["window"][1] - entry["window"][0])   # the other level's time is not its
    meta = json.loads((out / "requests.meta.json").read_text())["levels"]
    assert {level: m["rounds"] for level, m in meta.items()} == {"c=1": 3, "c=2": 3}


def test_session_and_hedge_flags_reach_locust_and_run_json():
    config = _config("--session", "turns:3,tools:1", "--think-time", "1s", "--hedge-after", "p95")
    command = _command(config, "c=2", 2, 1, 2)
    assert _flag(command, "--session") == "turns:3,tools:1" and _flag(command, "--think-time") == "1.0"
    assert _flag(command, "--hedge-after") == "p95" and "--hedge-after" not in _command(_config(), "c=2", 2, 1, 2)
    assert workload_for(config).session == "turns:3,tools:1"
    for args, message in ((["--rates", "1", "--session", "turns:2"], "run closed loop"),
                          (["--concurrency", "2", "--hedge-after", "-1"], "must not be negative"),
                          (["--concurrency", "2", "--session", "turns:2,tools:2-1"], "runs backwards")):
        with pytest.raises(ValueError, match=message):
            experiment(*args)

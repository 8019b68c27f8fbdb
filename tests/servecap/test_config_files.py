"""`--config FILE` on every measuring command: a YAML, TOML or JSON file and the same options as flags give
the same settings; flags override the file; a run's run.json replays as a config; bad files are one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.config_file import parse_command_line, settings_of
from loadgen_helpers import _env, scripted_server
from servecap.compare.cli import build_parser as compare_parser
from servecap.fleet.cli import _parser as fleet_parser
from servecap.plan.cli import _parser as plan_parser
from servecap.sweep.cli import build_parser as sweep_parser
from servecap.tune.cli import build_parser as tune_parser

# each command's options as a config file holds them (lists and switches too) and as flags
CASES = {
    "sweep": (sweep_parser, {"out": "runs/x", "strategies": "none,continuous", "concurrency": [1, 4],
                             "prompt_tokens": "uniform:16:64", "turns": 2, "think-time": "500ms",
                             "slo-ttft-ms": 500, "no-pin-cpus": True, "stream": False, "rounds": 2},
              ["--out", "runs/x", "--strategies", "none,continuous", "--concurrency", "1,4",
               "--prompt-tokens", "uniform:16:64", "--turns", "2", "--think-time", "500ms", "--slo-ttft-ms", "500",
               "--no-pin-cpus", "--no-stream", "--rounds", "2"]),
    "compare": (compare_parser, {"out": "runs/ab", "concurrency": 4, "a-args": "", "b-args": "--max-num-seqs 8",
                                 "emulate": "h100-sxm", "model": "llama-3.1-8b", "dataset": "chats.jsonl",
                                 "turns": "all", "max-regression": "tpot_s.p50=5%"},
                ["--out", "runs/ab", "--concurrency", "4", "--a-args", "", "--b-args", "--max-num-seqs 8",
                 "--emulate", "h100-sxm", "--model", "llama-3.1-8b", "--dataset", "chats.jsonl", "--turns", "all",
                 "--max-regression", "tpot_s.p50=5%"]),
    "tune": (tune_parser, {"out": "runs/t", "server-cmd": "vllm serve ./ckpt --port {port}", "concurrency": [8],
                           "slo-ttft-ms": 500, "axis": ["max-num-seqs=4|8"], "exhaustive": True},
             ["--out", "runs/t", "--server-cmd", "vllm serve ./ckpt --port {port}", "--concurrency", "8",
              "--slo-ttft-ms", "500", "--axis", "max-num-seqs=4|8", "--exhaustive"]),
    "plan": (plan_parser, {"diurnal": "40:5", "gpu": "h100-sxm", "model": "llama-3.1-8b", "cold-start-s": 120,
                           "min-replicas": 1, "max-replicas": 16, "target": 64, "slo-ttft-ms": 1000,
                           "kill": ["60", "120:2"]},
             ["--diurnal", "40:5", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--cold-start-s", "120",
              "--min-replicas", "1", "--max-replicas", "16", "--target", "64", "--slo-ttft-ms", "1000",
              "--kill", "60", "--kill", "120:2"]),
    "fleet": (fleet_parser, {"emulate": "l4", "model": "llama-3.1-8b", "rate-curve": "day.csv", "replicas": 2,
                             "slo-e2e-ms": 20000, "model-mix": "zipf:4"},
              ["--emulate", "l4", "--model", "llama-3.1-8b", "--rate-curve", "day.csv", "--replicas", "2",
               "--slo-e2e-ms", "20000", "--model-mix", "zipf:4"]),
}


def _write(path, config: dict) -> None:
    if path.suffix == ".yaml":
        import yaml

        path.write_text(yaml.safe_dump(config))
    elif path.suffix == ".toml":
        path.write_text("".join(f"{json.dumps(key)} = {_toml(value)}\n" for key, value in config.items()))
    else:
        path.write_text(json.dumps(config))


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


@pytest.mark.parametrize("command", sorted(CASES))
@pytest.mark.parametrize("suffix", [".yaml", ".toml", ".json"])
def test_a_file_and_the_same_flags_give_the_same_settings(tmp_path, command, suffix):
    make_parser, config, flags = CASES[command]
    path = tmp_path / f"config{suffix}"
    _write(path, config)
    parser = make_parser()
    from_file = settings_of(parser, parse_command_line(parser, ["--config", str(path)]))
    from_flags = settings_of(parser, parse_command_line(parser, flags))
    assert from_file == from_flags
    # and the settings replay: fed back as a config they parse to themselves
    again = tmp_path / "again.json"
    again.write_text(json.dumps(from_flags))
    assert settings_of(parser, parse_command_line(parser, ["--config", str(again)])) == from_flags


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "sweep.yaml"
    _write(path, {"out": "runs/x", "concurrency": "1,2", "warmup": "3s", "seed": 4})
    parser = sweep_parser()
    args = parse_command_line(parser, ["--config", str(path), "--warmup", "1s", "--out", "runs/y"])
    settings = settings_of(parser, args)
    assert (settings["warmup"], settings["out"], settings["concurrency"], settings["seed"]) == ("1s", "runs/y", "1,2", "4")


@pytest.mark.parametrize("content, says", [
    ("concurency: 4\n", "unknown option concurency"),
    ("concurrency: [1, 2]\nno-pin-cpus: sometimes\n", "no-pin-cpus: --no-pin-cpus is a switch"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("concurrency: [1, 2\n", "not valid YAML"),
])
def test_a_bad_file_is_one_line_and_exit_2(tmp_path, capsys, content, says):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(SystemExit) as stop:
        parse_command_line(sweep_parser(), ["--config", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and says in err[-1] and str(path) in err[-1] and "Traceback" not in "\n".join(err)


@pytest.mark.slow
def test_a_runs_run_json_replays_as_its_config(tmp_path):
    """A sweep from flags, the same sweep from a YAML file, and a third from the first's run.json: their
    run.json settings are the same but for --out."""
    flags = ["--concurrency", "2", "--warmup", "0s", "--duration", "1s", "--prompt-tokens", "uniform:8:16",
             "--output-tokens", "4", "--seed", "3", "--no-pin-cpus", "--no-report", "--sample-interval", "0.25"]
    with scripted_server(tmp_path, "--ttft", "0.002", "--itl", "0.001") as (url, _):
        def sweep(out, *args):
            done = subprocess.run([sys.executable, "-m", "servecap", "sweep", "--out", str(tmp_path / out), *args],
                                  capture_output=True, text=True, timeout=120, env=_env())
            assert done.returncode == 0, done.stderr[-3000:]
            return json.loads((tmp_path / out / "run.json").read_text())

        by_flags = sweep("flags", "--url", url, *flags)
        _write(tmp_path / "sweep.yaml", {"url": url, "concurrency": [2], "warmup": "0s", "duration": "1s",
                                         "prompt-tokens": "uniform:8:16", "output-tokens": 4, "seed": 3,
                                         "no-pin-cpus": True, "no-report": True, "sample-interval": 0.25})
        by_file = sweep("file", "--config", str(tmp_path / "sweep.yaml"))
        replayed = sweep("replayed", "--config", str(tmp_path / "flags" / "run.json"))
    settings = [{k: v for k, v in run["config"].items() if k != "out"} for run in (by_flags, by_file, replayed)]
    assert settings[0] == settings[2]   # the replay is exact, text for text
    assert {k: str(v) for k, v in settings[0].items()} == {k: str(v) for k, v in settings[1].items()}
    assert [run["config"]["out"] for run in (by_flags, by_file, replayed)] == [
        str(tmp_path / name) for name in ("flags", "file", "replayed")]
    assert by_flags["command"] == replayed["command"] == "servecap sweep"
    assert by_flags["workload"] == replayed["workload"] and by_flags["load_plan"] == replayed["load_plan"]

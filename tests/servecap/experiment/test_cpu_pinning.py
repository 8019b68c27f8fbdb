"""Where the sweep puts Locust, the server's front end and its engine process, how the plan
fills the server's launch spec around what --server-args set, and the server flags that carry
the engine's cores."""

from __future__ import annotations

import pytest

from servecap.experiment import cpu_pinning
from servecap.experiment.runner import Runner
from servecap.sweep.cli import build_parser as sweep_parser, experiment_from_args
from reference_server.cli import build_parser, configs_from_args
from servecap.launch.spec import ReferenceServerSpec
from reference_server.runtime.engine_threads import engine_threads


def plan(monkeypatch, cores: int, **kwargs) -> cpu_pinning.CpuPlan:
    monkeypatch.setattr(cpu_pinning.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(cpu_pinning.shutil, "which", lambda name: "/usr/bin/taskset")
    return cpu_pinning.plan_cpus(enabled=True, external_server=False, **kwargs)


def test_two_cores_give_the_engine_process_a_core_of_its_own(monkeypatch):
    cpus = plan(monkeypatch, 2)
    assert (cpus.loadgen, cpus.server, cpus.engine) == ((0,), (0,), (1,))
    assert cpus.prefix(cpus.server) == ["taskset", "-c", "0"]
    assert cpus.describe() == {"loadgen_cpus": [0], "server_cpus": [0], "engine_cpus": [1]}


def test_many_cores_separate_loadgen_front_end_and_engine(monkeypatch):
    cpus = plan(monkeypatch, 16)
    assert (cpus.loadgen, cpus.server, cpus.engine) == ((0,), (1,), tuple(range(2, 16)))


def test_thread_mode_gives_the_server_every_core_but_locusts(monkeypatch):
    cpus = plan(monkeypatch, 4, engine_process=False)
    assert (cpus.loadgen, cpus.server, cpus.engine) == ((0,), (1, 2, 3), None)


def test_nothing_is_pinned_on_one_core_or_for_an_external_server(monkeypatch):
    assert plan(monkeypatch, 1) == cpu_pinning.CpuPlan(None, None)
    monkeypatch.setattr(cpu_pinning.os, "sched_getaffinity", lambda pid: {0, 1})
    assert cpu_pinning.plan_cpus(enabled=True, external_server=True) == cpu_pinning.CpuPlan(None, None)
    assert cpu_pinning.plan_cpus(enabled=False, external_server=False) == cpu_pinning.CpuPlan(None, None)


def sweep(monkeypatch, cores: int, server_args: str = "") -> Runner:
    monkeypatch.setattr(cpu_pinning.os, "sched_getaffinity", lambda pid: set(range(cores)))
    monkeypatch.setattr(cpu_pinning.shutil, "which", lambda name: "/usr/bin/taskset")
    args = sweep_parser().parse_args(["--out", "unused", "--strategies", "none", "--concurrency", "1",
                                      "--server-args", server_args])
    return Runner(experiment_from_args(args))


def test_the_plan_fills_the_launch_spec(monkeypatch):
    cpus = sweep(monkeypatch, 4).cpus
    spec = cpus.place(ReferenceServerSpec(model="tiny", strategy="none"))
    assert (spec.server_cpus, spec.engine_cpus, spec.num_threads) == ((1,), (2, 3), 2)
    assert spec.serve_args() == ["--model", "tiny", "--strategy", "none", "--engine-cpus", "2,3", "--num-threads", "2"]
    assert spec.command()[:3] == ["taskset", "-c", "1"]


def test_what_the_user_set_in_server_args_wins_over_the_plan(monkeypatch):
    s = sweep(monkeypatch, 4, "--engine-cpus=3 --num-threads 4 --max-num-seqs 16")
    spec = s.launch["none"]   # placed by the plan
    assert (spec.server_cpus, spec.engine_cpus, spec.num_threads) == ((1,), (3,), 4)
    assert spec.options == ("--max-num-seqs", "16")
    # threads default to the engine's cores, the user's as much as the plan's
    spec = s.cpus.place(ReferenceServerSpec(engine_cpus=(2, 3)))
    assert spec.num_threads == 2


def test_an_engine_thread_from_server_args_changes_the_plan(monkeypatch):
    s = sweep(monkeypatch, 4, "--engine-mode thread")
    assert (s.cpus.loadgen, s.cpus.server, s.cpus.engine) == ((0,), (1, 2, 3), None)
    spec = s.launch["none"]
    assert spec.engine_cpus == () and spec.num_threads == 3 and spec.server_cpus == (1, 2, 3)
    assert "--engine-cpus" not in spec.serve_args() and "--engine-mode" in spec.serve_args()


def test_unpinned_the_server_leaves_one_core_to_locust(monkeypatch):
    s = sweep(monkeypatch, 1)
    spec = s.launch["none"]
    assert (spec.server_cpus, spec.engine_cpus) == ((), ())
    assert spec.num_threads == engine_threads() == 1


@pytest.mark.parametrize("server_args, message", [
    ("--strategy none", "must not set --strategy; --strategies says it"),
    ("--model small", "must not set --model; --model says it"),
    ("--port 8000", "--port is chosen by the launcher"),
    ("--max-num-seq 4", "unrecognized arguments: --max-num-seq 4"),
    ("--num-threads many", "argument --num-threads: invalid int value: 'many'"),
    ("--engine-mode thread --engine-cpus 1", "--engine-cpus needs --engine-mode process"),
])
def test_bad_server_args_fail_before_any_server_starts(monkeypatch, server_args, message):
    with pytest.raises(ValueError) as exc:
        sweep(monkeypatch, 2, server_args)
    assert str(exc.value).startswith("--server-args") and message in str(exc.value)


def parse(*flags: str):
    return configs_from_args(build_parser().parse_args(list(flags)))


def test_engine_cpus_take_taskset_lists():
    _, server, _ = parse("--engine-cpus", "0,2,4-6")
    assert server.engine_cpus == (0, 2, 4, 5, 6) and server.engine_mode == "process"


@pytest.mark.parametrize("value", ["", "a", "3-x", "-1", ","])
def test_bad_engine_cpus_exit_2_naming_the_flag(value, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--engine-cpus", value])
    assert exc.value.code == 2 and "--engine-cpus" in capsys.readouterr().err


def test_engine_cpus_need_the_engine_process():
    with pytest.raises(ValueError, match="engine_cpus needs engine_mode 'process'"):
        parse("--engine-mode", "thread", "--engine-cpus", "1")


def test_several_locust_processes_get_a_core_each_where_cores_allow(monkeypatch):
    cpus = plan(monkeypatch, 6, loadgen_processes=2)
    assert (cpus.loadgen, cpus.server, cpus.engine) == ((0, 1), (2,), (3, 4, 5))
    assert plan(monkeypatch, 3, loadgen_processes=2) == plan(monkeypatch, 3)   # too few: they share core 0
    assert plan(monkeypatch, 4, loadgen_processes=2, engine_process=False).server == (2, 3)

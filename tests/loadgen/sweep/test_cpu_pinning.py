"""Where the sweep puts Locust, the server's front end and its engine process, and the
server flags that carry the engine's cores."""

from __future__ import annotations

import pytest

from loadgen.sweep import cpu_pinning
from loadgen.sweep.runner import _flag_value
from reference_server.cli import build_parser, configs_from_args


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


def test_flag_value_reads_both_spellings_and_the_last_wins():
    assert _flag_value(["--engine-mode", "thread"], "--engine-mode") == "thread"
    assert _flag_value(["--engine-mode=thread", "--engine-mode", "process"], "--engine-mode") == "process"
    assert _flag_value(["--engine-modes", "x"], "--engine-mode") is None


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

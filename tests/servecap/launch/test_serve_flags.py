"""`servecap serve` flags <-> values through the reference server's own parser, and the launch spec built on it."""

from __future__ import annotations

import argparse
import sys

import pytest

from reference_server.cli import build_parser
from servecap.launch import serve_flags
from contract.ready_line import ready_line, ready_url
from servecap.launch.serve_flags import parse_serve_flags, render_serve_flags
from servecap.launch.spec import ReferenceServerSpec


def test_parse_returns_only_what_the_flags_set_typed_by_the_servers_parser():
    assert parse_serve_flags([]) == {}
    assert parse_serve_flags(["--engine-cpus=2-4", "--no-classifier", "--batch-timeout-ms", "20"]) == {
        "engine_cpus": (2, 3, 4), "no_classifier": True, "batch_timeout_ms": 20.0}
    # both spellings, the last one wins: the parser's reading, not a string scan
    assert parse_serve_flags(["--engine-mode=thread", "--engine-mode", "process"]) == {"engine_mode": "process"}


@pytest.mark.parametrize("flags, message", [
    (["--engine-modes", "x"], "unrecognized arguments: --engine-modes x"),
    (["--max-num-seq", "4"], "unrecognized arguments: --max-num-seq 4"),   # no abbreviations
    (["--engine-mode", "fiber"], "argument --engine-mode: invalid choice: 'fiber'"),
    (["--num-threads"], "argument --num-threads: expected one argument"),
    (["--help"], "--help is not a server flag"),
])
def test_flags_the_server_would_refuse_are_a_value_error_quoting_its_parser(flags, message, capsys):
    with pytest.raises(ValueError) as exc:
        parse_serve_flags(flags)
    assert message in str(exc.value) and "usage:" not in str(exc.value)
    assert capsys.readouterr() == ("", "")   # nothing printed: the caller says it


def _example(action) -> object:
    """A non-default value of the option's type (comma lists, choices, numbers, text, switches)."""
    if action.nargs == 0:
        return action.const
    if action.nargs == "+":
        return ["a=random", "b=random:4"]
    if isinstance(action, argparse._AppendAction):   # repeatable: one flag per value
        return ["slow:factor=2", "crash:at=1s"]
    if action.choices:
        return list(action.choices)[-1]
    if action.type in (int, float):
        return action.type(3)
    if action.type is not None:   # the server's comma-list parsers
        return action.type("1,2")
    return "text"


def test_render_is_the_inverse_of_parse_for_every_option_the_server_declares():
    values = {dest: _example(action) for dest, action in serve_flags._actions().items() if dest != "port"}
    assert len(values) > 30
    argv = render_serve_flags(values)
    assert parse_serve_flags(argv) == values
    with pytest.raises(ValueError, match="no option 'max_num_seq'"):
        render_serve_flags({"max_num_seq": 4})


def test_the_spec_types_placement_and_keeps_the_rest_as_normalized_options():
    spec = ReferenceServerSpec.from_flags(["--max-num-seqs=16", "--model", "tiny", "--num-threads", "2",
                                          "--engine-mode", "thread", "--preferred-batch-sizes", "4,8"])
    assert (spec.model, spec.engine_mode, spec.num_threads, spec.engine_cpus) == ("tiny", "thread", 2, ())
    assert not spec.engine_process
    # options come in the parser's order of declaration (the strategy registry's), as flag/value pairs
    pairs = lambda argv: sorted(zip(argv[::2], argv[1::2]))  # noqa: E731
    assert pairs(spec.options) == [("--max-num-seqs", "16"), ("--preferred-batch-sizes", "4,8")]
    args = spec.serve_args()
    assert args[:4] == ["--model", "tiny", "--engine-mode", "thread"] and args[-2:] == ["--num-threads", "2"]
    assert pairs(args[4:-2]) == pairs(spec.options)
    # the serve args parse back into the same server configuration
    assert vars(build_parser().parse_args(spec.serve_args())) == vars(build_parser().parse_args(
        ["--max-num-seqs=16", "--model", "tiny", "--num-threads", "2", "--engine-mode", "thread",
         "--preferred-batch-sizes", "4,8"]))


def test_the_spec_renders_the_command_with_port_zero_and_a_taskset_prefix():
    spec = ReferenceServerSpec(strategy="none", server_cpus=(0,), engine_cpus=(1,))
    assert spec.engine_process   # the server's default mode
    assert spec.command() == ["taskset", "-c", "0", sys.executable, "-m", "reference_server", "--port", "0",
                              "--strategy", "none", "--engine-cpus", "1"]
    assert ReferenceServerSpec().command() == [sys.executable, "-m", "reference_server", "--port", "0"]


@pytest.mark.parametrize("kwargs, message", [
    ({"engine_mode": "thread", "engine_cpus": (1,)}, "--engine-cpus needs --engine-mode process"),
    ({"engine_mode": "fiber"}, "engine_mode must be 'process' or 'thread'"),
    ({"num_threads": 0}, "--num-threads must be at least 1"),
    ({"server_cpus": (-1,)}, "must not be negative"),
])
def test_conflicting_placement_is_refused_before_any_start(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ReferenceServerSpec(**kwargs)


def test_the_port_belongs_to_the_launcher():
    with pytest.raises(ValueError, match="--port is chosen by the launcher"):
        ReferenceServerSpec.from_flags(["--port", "8000"])


def test_ready_line_round_trip():
    line = ready_line("http://127.0.0.1:8123", strategy="none", model="tiny")
    assert line == "servecap serve: ready on http://127.0.0.1:8123 (strategy=none, model=tiny)"
    assert ready_url("INFO booting\n" + line + "\n") == "http://127.0.0.1:8123"
    assert ready_url("servecap serve: error: no engine\n") is None

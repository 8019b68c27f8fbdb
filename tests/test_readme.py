"""Every command in README.md is run or parsed here, so the README cannot drift from the CLI.

A README command is a line of an untagged (or shell) code block, or the `example` cell of a table
row, that starts with `servecap `, `make `, `locust `, `jupyter ` or `python -m ` (a `.venv/bin/`
or `$ ` prefix is dropped, `\\` continuations are joined, `# comments` are dropped).

- `servecap ...` and `python -m MODULE ...`: parsed in-process by the subcommand's own argument
  parser. Its `main` runs, and argparse stops it right after the outermost `parse_args` returns:
  a renamed flag or subcommand exits 2 and fails here, and nothing heavy (a sweep, a server) runs.
- `make TARGET`: TARGET is a target of the Makefile.
- `jupyter lab DIR`: DIR exists and jupyterlab is installed.
- slow: every `servecap calc ...` runs for real (each takes about a second) and must exit 0 with
  its expected output; every `locust -f ...` is parsed by Locust's own parser with the
  locustfiles' flags registered, in a subprocess (importing locust monkey-patches the process).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from servecap import cli as servecap_cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PREFIXES = ("servecap ", "make ", "locust ", "jupyter ", "python -m ", "python3 -m ")
SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}


def _command(text: str) -> str | None:
    text = text.strip()
    for prefix in ("$ ", ".venv/bin/"):
        text = text.removeprefix(prefix)
    # comments dropped, quoting normalised: the command as the shell would split it
    return shlex.join(shlex.split(text, comments=True)) if text.startswith(PREFIXES) else None


def _table_examples(rows: list[str]) -> list[tuple[str, str]]:
    """(command cell, example) for each row of a table with an `example` column."""
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    header = [c.lower() for c in cells[0]]
    if "example" not in header:
        return []
    at = header.index("example")
    out = []
    for row in cells[2:]:   # after the header and its --- line
        spans = re.findall(r"`([^`]+)`", row[at]) if at < len(row) else []
        out += [(re.sub(r"`", "", row[0]), span) for span in spans]
    return out


def readme_commands(text: str) -> list[str]:
    commands: list[str] = []
    lines = text.splitlines()
    block: str | None = None          # the open code block's language, None outside one
    pending = ""
    table: list[str] = []
    for line in lines + [""]:
        if line.startswith("```"):
            block = None if block is not None else line[3:].strip().lower()
            continue
        if block is not None:
            if block not in SHELL_BLOCKS:
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            found = _command(pending + line)
            pending = ""
            if found:
                commands.append(found)
            continue
        if line.lstrip().startswith("|"):
            table.append(line)
            continue
        if table:
            for name, example in _table_examples(table):
                assert example.startswith(name), f"README table: the example {example!r} is not a {name!r} command"
                found = _command(example)
                assert found, f"README table: {example!r} is not a command this test knows how to check"
                commands.append(found)
            table = []
    return list(dict.fromkeys(commands))


COMMANDS = readme_commands(README.read_text())


def _argv(command: str) -> list[str]:
    return shlex.split(command)


def _of_kind(*prefixes: str) -> list[str]:
    return [c for c in COMMANDS if c.startswith(prefixes)]


def _id(command: str) -> str:
    return command if len(command) <= 72 else command[:69] + "..."


def test_readme_has_commands_of_every_kind():
    # guards the parser above: a README whose commands it stopped finding would pass vacuously
    assert len(COMMANDS) >= 20, COMMANDS
    for prefix in ("servecap calc ", "servecap sweep ", "make ", "locust -f "):
        assert _of_kind(prefix), f"no {prefix!r} command found in README.md"


# ---- parse without running ------------------------------------------------------------------

class _Parsed(BaseException):
    """Raised right after the outermost parse_args: BaseException, so no `except Exception` in a
    main() swallows it."""

    def __init__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace):
        super().__init__()
        self.parser, self.namespace = parser, namespace


@pytest.fixture
def stop_after_parsing(monkeypatch):
    original = argparse.ArgumentParser.parse_args
    depth = [0]

    def parse_args(self, *args, **kwargs):
        depth[0] += 1
        try:
            namespace = original(self, *args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0:      # a parser used inside another's parsing (a type= callback) returns as usual
            raise _Parsed(self, namespace)
        return namespace

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_args)


def _parse(argv: list[str], capsys, monkeypatch) -> _Parsed:
    """Run the command's main until its argument parser has parsed argv; fail on a parse error."""
    try:
        if argv[0] == "servecap":
            code = servecap_cli.main(argv[1:])
        else:   # python -m MODULE ...
            module = argv[2]
            if module == "servecap":
                code = servecap_cli.main(argv[3:])
            else:
                monkeypatch.setattr(sys, "argv", [module, *argv[3:]])
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
    except _Parsed as parsed:
        return parsed
    except SystemExit as exc:
        if exc.code in (0, None):    # --help
            return _Parsed(argparse.ArgumentParser(), argparse.Namespace())
        pytest.fail(f"{shlex.join(argv)}: its parser exited {exc.code}:\n{capsys.readouterr().err}")
    pytest.fail(f"{shlex.join(argv)}: returned {code} without reaching an argument parser:\n"
                f"{capsys.readouterr().err}")


@pytest.mark.parametrize("command", _of_kind("servecap ", "python -m ", "python3 -m "), ids=_id)
def test_command_parses(command, stop_after_parsing, capsys, monkeypatch):
    _parse(_argv(command), capsys, monkeypatch)


def test_readme_lists_every_subcommand(stop_after_parsing, capsys, monkeypatch):
    """The README's table names every `servecap` subcommand and every calculator."""
    named = {tuple(_argv(c)[1:3]) for c in _of_kind("servecap ")}
    missing = [name for name in servecap_cli.SUBCOMMANDS if name not in {n[0] for n in named}]
    calc = _parse(["servecap", "calc", "gpus"], capsys, monkeypatch).parser
    calculators = next(a.choices for a in calc._actions if isinstance(a, argparse._SubParsersAction))
    missing += [f"calc {name}" for name in calculators if ("calc", name) not in named]
    assert not missing, f"README.md has no command for: {', '.join(missing)}"


def _make_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-][A-Za-z0-9_. -]*?)\s*:(?!=)", line)
        if match and not match.group(1).startswith("."):
            targets.update(match.group(1).split())
    return targets


@pytest.mark.parametrize("command", _of_kind("make "), ids=_id)
def test_make_target_exists(command):
    argv = _argv(command)
    assert len(argv) >= 2 and all(not a.startswith("-") for a in argv[1:]), command
    missing = [target for target in argv[1:] if target not in _make_targets()]
    assert not missing, f"{command}: no such Makefile target {missing}"


@pytest.mark.parametrize("command", _of_kind("jupyter "), ids=_id)
def test_jupyter_command(command):
    argv = _argv(command)
    assert argv[1] == "lab", command
    assert importlib.util.find_spec("jupyterlab"), "jupyterlab is not installed in this venv"
    assert (Path(sys.executable).parent / "jupyter").exists()
    for path in argv[2:]:
        assert (ROOT / path).exists(), f"{command}: {path} does not exist"


# ---- run for real (subprocesses) ------------------------------------------------------------

# Input files a README command names, written into its working directory first.
INPUTS = {"steps.csv": "batch_size,step_s\n1,0.0100\n2,0.0105\n4,0.0115\n8,0.0135\n16,0.0175\n"}

# What each calculator's output must contain.
EXPECTED = {"gpus": "h100-sxm", "models": "llama-3.1-8b", "kv": "kv_bytes_per_token", "weights": "weight_bytes",
            "fit": "max_concurrency", "roofline": "decode_step", "queue": "utilization", "fleet": "replicas",
            "cost": "usd_per_million_tokens", "simulate": "output_tokens_per_s", "calibrate": "per_seq_s"}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.slow
@pytest.mark.parametrize("command", _of_kind("servecap calc "), ids=_id)
def test_calc_command_runs(command, tmp_path):
    argv = _argv(command)
    for name, text in INPUTS.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run([sys.executable, "-m", "servecap", *argv[1:]], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
    assert EXPECTED.get(argv[2], "") in done.stdout and done.stdout.strip(), f"{command}:\n{done.stdout}"
    if "--json" in argv:
        assert isinstance(json.loads(done.stdout), dict)


# Locust's `main` up to its full parser (the locustfiles imported, so their flags are registered).
LOCUST_PARSE = r"""
import sys
import configargparse

class Parsed(BaseException):
    pass

original = configargparse.ArgumentParser.parse_args

def parse_args(self, *args, **kwargs):
    namespace = original(self, *args, **kwargs)
    if hasattr(namespace, "headless") and hasattr(namespace, "locustfile"):   # Locust's full parser
        raise Parsed()
    return namespace

configargparse.ArgumentParser.parse_args = parse_args
from locust.main import main

sys.argv = ["locust", *sys.argv[1:]]
try:
    main()
except Parsed:
    print("parsed")
    sys.exit(0)
sys.exit("locust's main returned without parsing its arguments")
"""


@pytest.mark.slow
@pytest.mark.parametrize("command", _of_kind("locust "), ids=_id)
def test_locust_command_parses(command):
    argv = _argv(command)
    done = subprocess.run([sys.executable, "-c", LOCUST_PARSE, *argv[1:]], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "parsed" in done.stdout, f"{command}: exit {done.returncode}\n{done.stderr}"

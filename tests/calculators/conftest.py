"""`servecap calc` in-process, for every calculator's tests: the same `main` the console script calls."""

from __future__ import annotations

import json

import pytest

from calculators.cli.commands import main


@pytest.fixture
def calc(capsys):
    """`servecap calc ARGS` in-process (same `main` the console script calls): (exit code, stdout, stderr)."""
    def run(*args: str):
        try:
            code = main(list(args))
        except SystemExit as exit_:   # argparse
            code = exit_.code
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


@pytest.fixture
def calc_json(calc):
    def run(*args: str) -> dict:
        code, out, err = calc(*args, "--json")
        assert code == 0, err
        return json.loads(out)
    return run

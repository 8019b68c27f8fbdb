"""`servecap serve` flags <-> values, through the reference server's own parser (no second copy of its options).

    parse_serve_flags(["--max-num-seqs", "16", "--engine-mode=thread"])
        -> {"max_num_seqs": 16, "engine_mode": "thread"}          # only what the flags set
    render_serve_flags({"max_num_seqs": 16, "engine_cpus": (2, 3)})
        -> ["--max-num-seqs", "16", "--engine-cpus", "2,3"]

Parsing answers "did the user set --num-threads?" by the parser's own reading of the
argv (both spellings, the last one wins, abbreviations refused), never by scanning strings.
`reference_server.cli` imports only argparse, so this stays free of torch.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
from collections.abc import Mapping, Sequence

from reference_server.cli import build_parser

_UNSET = object()   # a namespace pre-filled with it tells "given" from "left at the default"


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


@functools.cache
def _actions() -> dict[str, argparse.Action]:
    """dest -> its option (argparse keeps the table in `_actions`; there is no public accessor)."""
    return {action.dest: action for action in _parser()._actions if action.option_strings and action.dest != "help"}


def parse_serve_flags(flags: Sequence[str]) -> dict[str, object]:
    """The options `flags` set, by destination, typed by the server's parser.
    ValueError quotes the parser's own complaint (unknown flag, bad value, missing value)."""
    flags = list(flags)
    if any(flag in ("-h", "--help") for flag in flags):
        raise ValueError("--help is not a server flag")
    # a repeatable option (`--fault`) appends to what is there: None starts its list, and means "not given"
    namespace = argparse.Namespace(**{dest: None if _repeatable(action) else _UNSET
                                      for dest, action in _actions().items()})
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):
            _parser().parse_args(flags, namespace=namespace)
    except SystemExit:
        lines = complaint.getvalue().strip().splitlines() or ["invalid server flags"]
        raise ValueError(lines[-1].removeprefix(f"{_parser().prog}: error: ")) from None
    return {dest: value for dest, value in vars(namespace).items()
            if value is not _UNSET and not (value is None and _repeatable(_actions()[dest]))}


def _repeatable(action: argparse.Action) -> bool:
    return isinstance(action, argparse._AppendAction)


def render_serve_flags(values: Mapping[str, object]) -> list[str]:
    """argv for `values` (dest -> value, in the given order; None = leave the server's default).
    Inverse of parse_serve_flags for every option the server declares."""
    argv: list[str] = []
    for dest, value in values.items():
        if value is None:
            continue
        action = _actions().get(dest)
        if action is None:
            raise ValueError(f"the reference server has no option {dest!r}")
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:   # store_true / store_false: the flag alone, or nothing
            if value == action.const:
                argv.append(flag)
        elif _repeatable(action):   # the flag once per value (--fault A --fault B)
            for item in value:
                argv += [flag, str(item)]
        elif action.nargs == "+":   # several values after one flag (--lora-modules A=... B=...)
            if value:
                argv += [flag, *(str(item) for item in value)]
        elif isinstance(value, (tuple, list)):   # comma lists (--engine-cpus, --preferred-batch-sizes)
            argv += [flag, ",".join(str(item) for item in value)]
        else:
            argv += [flag, str(value)]
    return argv


def server_default(dest: str) -> object:
    """The reference server's default for an option (e.g. "engine_mode" -> "process")."""
    return _parser().get_default(dest)

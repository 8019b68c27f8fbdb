"""`--config FILE`: a command's options from a file, under the command line's.

A config file holds the same options as the command line: YAML (.yaml, .yml), TOML (.toml) or JSON,
one key per long option name (`prompt-tokens` or `prompt_tokens`), lists for comma lists, true for
a switch. Flags on the command line override the file. A run directory's run.json is a config too:
its `config` section is every option the run was started with (`settings_of`), so
`--config runs/x/run.json` repeats a run (the command line then says what changes, e.g. `--out`).
An unknown key, a value of the wrong kind or a file that cannot be read exits 2 with one line.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CONFIG_HELP = ("options from a YAML, TOML or JSON file (keys are the long option names; flags given here "
               "override it), or a run directory's run.json to repeat that run")
NOT_OPTIONS = ("help", "config")   # dests that are no setting of a run


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The parsed options: the --config file's (when given) with the command line's over them."""
    argv = list(argv)
    path = _config_path(parser, argv)
    if path is None:
        return parser.parse_args(argv)
    try:
        file_argv = config_argv(parser, read_config(path))
    except ValueError as exc:
        parser.error(f"--config {path}: {exc}")
    return parser.parse_args(file_argv + argv)


def _config_path(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """--config's value, taken out of argv (only the last one counts, as for any flag)."""
    path = None
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--config":
            if index + 1 >= len(argv):
                parser.error("argument --config: expected one argument")
            path = argv[index + 1]
            del argv[index:index + 2]
        elif arg.startswith("--config="):
            path = arg.split("=", 1)[1]
            del argv[index]
        else:
            index += 1
    return path


def read_config(path: str | Path) -> dict[str, Any]:
    """{option: value} from a YAML, TOML or JSON file; a run.json gives its `config` section."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot be read ({exc.__class__.__name__}: {exc})") from None
    suffix = path.suffix.lower()
    try:
        if suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except Exception as exc:   # each parser has its own error type; all mean "not this format"
        kind = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}.get(suffix, "JSON")
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ValueError(f"not valid {kind} ({first})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("must hold a mapping of option names to values")
    if isinstance(data.get("config"), dict) and "status" in data:   # a run directory's run.json
        return dict(data["config"])
    return data


def _long_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """'--prompt-tokens' -> its action, for every option with a long name (help and --config left out)."""
    found = {}
    for action in parser._actions:
        if action.dest in NOT_OPTIONS:
            continue
        for option in action.option_strings:
            if option.startswith("--"):
                found[option] = action
    return found


def _first_long_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Each option once, by its first long name (an alias such as --trace-speedup is left out)."""
    found = {}
    for action in parser._actions:
        names = [option for option in action.option_strings if option.startswith("--")]
        if action.dest not in NOT_OPTIONS and names:
            found[names[0]] = action
    return found


def option_key(key: str) -> str:
    """A config key as its flag: 'prompt_tokens' and 'prompt-tokens' -> '--prompt-tokens'."""
    return "--" + str(key).strip().lstrip("-").replace("_", "-")


def config_argv(parser: argparse.ArgumentParser, config: dict[str, Any]) -> list[str]:
    """The command-line arguments a config mapping stands for; ValueError naming an unknown key or a
    value of the wrong kind."""
    options = _long_options(parser)
    argv: list[str] = []
    unknown = [key for key in config if option_key(key) not in options]
    if unknown:
        raise ValueError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(str, unknown))} "
                         f"(keys are {parser.prog}'s long option names)")
    for key, value in config.items():
        flag = option_key(key)
        action = options[flag]
        if value is None:
            continue
        if action.nargs == 0:   # a switch
            if not isinstance(value, bool):
                raise ValueError(f"{key}: {flag} is a switch: give true or false, got {value!r}")
            if isinstance(action, argparse.BooleanOptionalAction):
                argv.append(flag if value else "--no-" + flag[2:])
            elif value:
                argv.append(flag)
            continue
        if isinstance(action, argparse._AppendAction):
            for item in value if isinstance(value, list) else [value]:
                argv += [flag, _text(item)]
            continue
        if isinstance(value, dict):
            raise ValueError(f"{key}: expected a value or a list, got a mapping")
        argv += [flag, ",".join(_text(item) for item in value) if isinstance(value, list) else _text(value)]
    return argv


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def settings_of(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> dict[str, Any]:
    """Every option of the parser as the run was started with it: {long option name: value}, the
    inverse of `config_argv` (run.json's `config`, which `--config run.json` replays). Switches left
    at their default are written too, so a replay does not depend on today's defaults."""
    settings = {}
    for flag, action in _first_long_options(parser).items():
        name = flag[2:]
        if not hasattr(namespace, action.dest):
            continue
        value = getattr(namespace, action.dest)
        if action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction):
            # a switch: true when it was given (store_const / store_true set the dest to its const)
            value = value == action.const and value != action.default
        if isinstance(value, tuple):
            value = list(value)
        settings[name] = value
    return settings

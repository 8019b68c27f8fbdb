"""How every command reads its options: one parser class, one syntax for durations and lists.

Each group of options (the workload, the load, the SLO, the target, the output) is declared once,
by the module that owns what it means (contract.workload, contract.load, contract.slo, ...), and
every command that takes the group adds it to its parser with that module's `add_*_arguments`.

A config file (`--config FILE`) holds the same options (contract.config_file reads it).

A group is declared as the fields of the frozen dataclass it validates into: `option(...)` gives a
field its flag, help and parser, `add_options(parser, Spec)` adds them to a parser, and
`options_from_args(Spec, args)` reads them back (each value parsed by its field's parser, the error
naming the flag). The command line and the validated object are one schema, as in GuideLLM's
`BenchmarkArgs` and nano-vllm's one `Config`: nothing is listed twice.

A bad option exits 2 with one line naming it: argparse's own errors, an unknown key in a file, a
file that cannot be read.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class CommandParser(argparse.ArgumentParser):
    """A command's parser: a bad flag prints the usage and one line `PROG: error: ...`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_duration(text: str | float, option: str) -> float:
    """'10' | '30s' | '2m' | '500ms' -> seconds; ValueError naming `option` otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _DURATION.match(str(text))
        if not match:
            raise ValueError(f"{option}: {text!r} is not a duration (e.g. 10, 30s, 2m)")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds < 0:
        raise ValueError(f"{option} must not be negative, got {text!r}")
    return seconds


def parse_number_list(text: str | Sequence, option: str, kind=float) -> tuple:
    """'1,2,4' (or a list from a config file) -> (1, 2, 4); every item positive."""
    items = [str(item).strip() for item in (text if isinstance(text, (list, tuple)) else str(text).split(","))]
    items = [item for item in items if item]
    if not items:
        raise ValueError(f"{option} needs at least one value, e.g. 1,2,4")
    values = []
    for item in items:
        try:
            value = kind(item)
        except ValueError:
            raise ValueError(f"{option}: {item!r} is not a {'whole ' if kind is int else ''}number") from None
        if value <= 0:
            raise ValueError(f"{option}: values must be positive, got {item}")
        values.append(value)
    return tuple(values)


# -- options declared as dataclass fields --------------------------------------------------------
KINDS = ("value", "switch", "off", "negatable", "append")


@dataclasses.dataclass(frozen=True)
class Option:
    """How one dataclass field is an option: its flag (default from the field's name), help, the text
    its default is shown as on the command line (`text`), the parser from a command-line string to the
    field's value (`parse(text, flag)`), and its kind: a value, a switch that sets the field (store_true),
    one that clears it ("off": --no-pin-cpus clears pin_cpus), a negatable switch (--x / --no-x) or a
    repeatable value (append)."""

    help: str
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    parse: Callable[[str, str], Any] | None = None
    text: str | None = None
    kind: str = "value"


def option(default: Any = dataclasses.MISSING, *, help: str, flag: str | None = None, aliases: tuple[str, ...] = (),
           metavar: str | None = None, choices: tuple[str, ...] | None = None,
           parse: Callable[[str, str], Any] | None = None, text: str | None = None, kind: str = "value",
           default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that is also a command-line option (see `Option`)."""
    if kind not in KINDS:
        raise ValueError(f"an option's kind is one of {KINDS}, got {kind!r}")
    info = Option(help, flag, tuple(aliases), metavar, tuple(choices) if choices else None, parse, text, kind)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"option": info})


def option_fields(spec: type, only: Sequence[str] | None = None,
                  prefix: str | None = None) -> list[tuple[dataclasses.Field, Option, str]]:
    """(field, its Option, its flag) of every option field of `spec`; `only`: these flags' names only
    (without the prefix); `prefix`: the flags are `--PREFIX-NAME` (one declaration for several owners,
    e.g. the classifier's and the embedding model's batchers)."""
    found = []
    for f in dataclasses.fields(spec):
        info = f.metadata.get("option")
        if info is None:
            continue
        name = (info.flag or "--" + f.name.replace("_", "-"))[2:]
        if only is None or name in only:
            found.append((f, info, f"--{prefix}-{name}" if prefix else f"--{name}"))
    if only is not None:
        names = {(info.flag or "--" + f.name.replace("_", "-"))[2:] for f, info, _ in found}
        unknown = set(only) - names
        if unknown:
            raise ValueError(f"{spec.__name__} has no option {', '.join(sorted(unknown))}")
    return found


def _dest(f: dataclasses.Field, prefix: str | None) -> str:
    return f"{prefix}_{f.name}" if prefix else f.name


def add_options(parser: Any, spec: type, *, title: str | None = None, only: Sequence[str] | None = None,
                description: str | None = None, prefix: str | None = None, typed: bool = False) -> None:
    """Add `spec`'s option fields to `parser` (in an argument group when `title` is given; Locust's own
    parser takes none). The command line keeps each value as text; `options_from_args` parses it.
    `typed`: argparse parses each value with its field's parser instead (int and float fields with int
    and float, as argparse's own), for a command that reads its values off the namespace; a bad value
    is then argparse's error (exit 2, naming the flag). `prefix`: see `option_fields`."""
    group = parser.add_argument_group(title, description) if title else parser
    for f, info, flag in option_fields(spec, only, prefix):
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = info.text if info.text is not None else default
        kwargs: dict[str, Any] = {"dest": _dest(f, prefix), "help": info.help}
        if info.kind == "switch":
            kwargs.update(action="store_true", default=bool(default))
        elif info.kind == "off":
            kwargs.update(action="store_false", default=bool(default))
        elif info.kind == "negatable":
            kwargs.update(action=argparse.BooleanOptionalAction, default=bool(default))
        elif info.kind == "append":
            kwargs.update(action="append", default=[])
        else:
            kwargs.update(default=None if shown is None else str(shown) if not isinstance(shown, str) else shown)
            if info.metavar:
                kwargs["metavar"] = info.metavar
            if info.choices:
                kwargs["choices"] = info.choices
            if typed and info.parse is not None:
                kwargs["type"] = _argparse_type(info.parse, flag)
                if kwargs["default"] == "":
                    kwargs["default"] = None   # shown as nothing: left out, the field's default applies
        aliases = () if prefix else info.aliases
        group.add_argument(flag, *aliases, **kwargs)


def _argparse_type(parse: Callable[[str, str], Any], flag: str) -> Callable[[str], Any]:
    """A field's parser as an argparse `type` (argparse's own int and float for whole numbers and numbers)."""
    if parse is parse_int:
        return int
    if parse is parse_float:
        return float

    def convert(text: str) -> Any:
        try:
            return parse(text, flag)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag}: ")) from None
    convert.__name__ = flag   # argparse names a failed type by it
    return convert


def options_from_args(spec: type, args: Any, only: Sequence[str] | None = None, prefix: str | None = None,
                      **given: Any) -> dict[str, Any]:
    """{field: value} of `spec`'s options as `args` holds them (text from a command line or a web UI is
    parsed by the field's parser; an option `args` lacks keeps the field's default). ValueError names
    the flag. `given`: values that win over the options'."""
    values = {}
    for f, info, flag in option_fields(spec, only, prefix):
        if f.name in given:
            continue
        value = getattr(args, _dest(f, prefix), _MISSING)
        if value is _MISSING or (value is None or value == "") and f.default not in (None, dataclasses.MISSING):
            continue   # the field's default
        values[f.name] = parse_option(info, flag, value)
    return {**values, **given}


_MISSING = object()


def parse_option(info: Option, flag: str, value: Any) -> Any:
    """A value as its option's parser reads it (None and "" stay None for a value option)."""
    if info.kind in ("switch", "off", "negatable"):
        return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")
    if info.kind == "append":
        return tuple(value or ())
    if value is None or value == "":
        return None
    return value if info.parse is None else info.parse(value, flag)   # a parser takes its own values too


def parse_int(text: str, flag: str) -> int:
    """A whole number; ValueError naming the flag."""
    try:
        number = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{flag}: {text!r} is not a whole number") from None
    if number != int(number):
        raise ValueError(f"{flag}: {text!r} is not a whole number")
    return int(number)


def parse_float(text: str, flag: str) -> float:
    """A number; ValueError naming the flag."""
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{flag}: {text!r} is not a number") from None


# -- the output group ----------------------------------------------------------------------------
RUN_DIR_HELP = "the run directory to create (default runs/COMMAND-TIME)"
JSON_HELP = "print one JSON object instead of the table"


def add_output_arguments(parser: Any, *, out: str | None = RUN_DIR_HELP, metavar: str = "DIR",
                         required: bool = False, report: bool = True, json: str | None = None,
                         title: str = "output") -> None:
    """Where a command writes (--out PATH: `out` says what goes there), whether a run's report is written
    at the end (--no-report) and whether the answer is printed as JSON (--json: `json` is its help), once
    for every command."""
    group = parser.add_argument_group(title)
    if out is not None:
        group.add_argument("--out", metavar=metavar, required=required, help=out)
    if report:
        group.add_argument("--no-report", action="store_true", help="skip the report (`servecap report`) at the end")
    if json is not None:
        group.add_argument("--json", action="store_true", help=json)


def out_dir(args: argparse.Namespace, command: str) -> str:
    """--out, else runs/COMMAND-YYYYmmdd-HHMMSS."""
    import time

    return args.out or f"runs/{command}-{time.strftime('%Y%m%d-%H%M%S')}"

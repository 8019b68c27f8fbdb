"""The base of every strategy's limits: a frozen dataclass whose fields carry their CLI flag and help.

A strategy declares its limits once, e.g.

    @dataclass(frozen=True)
    class StaticLimits(Limits):
        batch_size: int = limit(8, "batch size")

and everything else reads them from there: `servecap serve` turns each field into a flag
(`--batch-size`, type from `parse`, help from `help`), `describe()` is what `GET /v1/engine`
and run.json report under `strategy_limits`, `max_running` sizes the default KV cache and
the report's running-sequences prediction. Validation lives in each subclass's
`__post_init__` (`contract.checks`: `positive_int`, `non_negative_int`) and raises ValueErrors
that name the field.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields


def parse_int_list(text: str) -> tuple[int, ...]:
    """'4,8' -> (4, 8); '' -> () (an argparse `type`)."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 4,8, got {text!r}") from None


def parse_on_off(text: str) -> bool:
    """'on'/'off' (also true/false, yes/no, 1/0) -> bool (an argparse `type`)."""
    value = str(text).strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def limit(default, help: str, *, parse: Callable[[str], object] | None = None, choices: tuple = (),
          metavar: str | None = None):
    """A limit field: its default, its help line, how its flag's text is parsed (default: type(default)) and,
    where the values are few, which (the flag's choices, after parsing) and how --help names them."""
    return field(default=default, metadata={"help": help, "parse": parse or type(default), "choices": choices,
                                            "metavar": metavar})


def flag_for(name: str) -> str:
    """`max_num_seqs` -> `--max-num-seqs`."""
    return "--" + name.replace("_", "-")


def check_non_negative_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number, got {value!r}")


@dataclass(frozen=True)
class Limits(ABC):
    """What one batching strategy may do; subclasses add `limit(...)` fields."""

    @classmethod
    def limit_fields(cls) -> tuple[Field, ...]:
        return fields(cls)

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    def describe(self) -> dict:
        """{field: value}, JSON-ready (tuples as lists): `strategy_limits` in /v1/engine and run.json."""
        return {f.name: list(value) if isinstance(value := getattr(self, f.name), tuple) else value
                for f in fields(self)}

    @property
    @abstractmethod
    def max_running(self) -> int:
        """Most sequences that can run at once under these limits (before the KV cache says no)."""

"""`Section`: a dataclass that reads itself tolerantly from a JSON object and writes itself back.

The sections of run.json (run_json.py) are Sections: each field is one key. Reading
(`from_dict`) takes the keys it knows, converts nested sections by the field's type
hint, keeps the keys it does not know in `extra` (written back as read), and replaces
a value of the wrong shape (a list where an object belongs) by the default, with a
sentence in `problems`. Writing (`to_dict`) leaves out fields that are None unless the
field says `keep_null` (keys the file has always carried, even as null). A `tuple[...]` field reads
from a JSON list and writes back as one (summary.json's frozen parts, contract/summary.py).

So a field or a section is one line: `queue_s: float | None = None`. A `FrozenSection` is the same,
immutable once built.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

KEEP_NULL = {"keep_null": True}


def keep_null(default: Any = None) -> Any:
    """A field written even when None (its key has always been in the file)."""
    return field(default=default, metadata=KEEP_NULL)


def null_as(empty: Callable[[], Any]) -> Any:
    """A field None in memory but written as `empty()` ({} or []: the shape the file has always had)."""
    return field(default=None, metadata={"keep_null": True, "null_as": empty})


class SectionIO:
    """`to_dict` and `from_dict` for a dataclass whose fields are its JSON object's keys, in order."""

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (value is None and not f.metadata.get("keep_null")):
                continue
            out[f.name] = f.metadata["null_as"]() if value is None and "null_as" in f.metadata else encode(value)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Any, problems: list[str] | None = None, where: str = "") -> Any:
        where = where or cls.__name__
        if not isinstance(data, dict):
            note(problems, f"{where} is not an object; left out")
            return cls()
        hints = _hints(cls)
        known, extra = {}, {}
        for key, value in data.items():
            if key in hints and key != "extra":
                decoded = decode(hints[key], value, problems, f"{where}.{key}")
                if decoded is not MISSING:
                    known[key] = decoded
            else:
                extra[key] = value
        return cls(**known, extra=extra)


@dataclass(kw_only=True)
class Section(SectionIO):
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # keys this version does not know


@dataclass(frozen=True, kw_only=True)
class FrozenSection(SectionIO):
    """A Section that cannot change once built: summary.json's parts (contract/summary.py)."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def note(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def encode(value: Any) -> Any:
    """Sections (and anything with `to_dict`) to dicts, through lists and dicts."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    if isinstance(value, dict):
        return {key: encode(item) for key, item in value.items()}
    return value


def decode(hint: Any, value: Any, problems: list[str] | None, where: str) -> Any:
    """`value` as read, converted to `hint` where that is a section or a container of sections;
    MISSING (the field keeps its default) when its shape is wrong."""
    if get_origin(hint) in (Union, UnionType):
        if value is None:
            return None
        hint = next(arg for arg in get_args(hint) if arg is not NoneType)
    origin = get_origin(hint) or hint
    if isinstance(origin, type) and hasattr(origin, "from_dict"):
        return origin.from_dict(value, problems, where)
    if origin is tuple:   # a JSON list, read into an immutable tuple (frozen sections)
        return _decode_tuple(get_args(hint), value, problems, where)
    if origin is list or origin is dict:
        if not isinstance(value, origin):
            note(problems, f"{where} is not {'a list' if origin is list else 'an object'}; left out")
            return MISSING
        args = get_args(hint)
        if not args:
            return value
        if origin is list:
            items = (decode(args[0], item, problems, f"{where}[{i}]") for i, item in enumerate(value))
            return [item for item in items if item is not MISSING]
        pairs = ((key, decode(args[1], item, problems, f"{where}.{key}")) for key, item in value.items())
        return {key: item for key, item in pairs if item is not MISSING}
    return value


def _decode_tuple(args: tuple, value: Any, problems: list[str] | None, where: str) -> Any:
    """`tuple[X, ...]` (any length) or `tuple[X, Y]` (that many) from a JSON list; MISSING when it is not one."""
    if not isinstance(value, list) or (args and args[-1] is not Ellipsis and len(args) != len(value)):
        length = "" if not args or args[-1] is Ellipsis else f" of {len(args)}"
        note(problems, f"{where} is not a list{length}; left out")
        return MISSING
    hints = [args[0]] * len(value) if args and args[-1] is Ellipsis else list(args) or [Any] * len(value)
    items = (decode(hint, item, problems, f"{where}[{i}]") for i, (hint, item) in enumerate(zip(hints, value)))
    return tuple(item for item in items if item is not MISSING)

"""Reading a user's input file (a dataset, a trace): its text and its JSONL objects, with errors that name
the flag, the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


def read_input_text(path: Path, flag: str) -> str:
    """The file's UTF-8 text; ValueError "FLAG: PATH does not exist" / "FLAG: cannot read PATH (why)"."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{flag}: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{flag}: cannot read {path} ({exc})") from None


def jsonl_objects(path: Path, text: str, flag: str) -> Iterator[tuple[str, dict]]:
    """("PATH: line N", object) per non-blank line; ValueError naming the line when one is not a JSON object."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{flag}: {where}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{flag}: {where}: not a JSON object")
        yield where, row

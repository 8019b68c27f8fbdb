"""The `requests.jsonl` record format: field names, a crash-safe writer, a tolerant reader.

One JSON object per finished request (see DESIGN.md, "The run directory"). The writer
appends each line with a single `os.write` on an `O_APPEND` descriptor, so a SIGKILL
loses at most the request in flight and concurrent appenders never interleave lines.
Readers skip a torn last line (a partial write cut by a kill) and reject a broken line
anywhere else, naming its line number.

Run metadata that belongs to the records (load-generator health per level: CPU,
lateness, in-flight cap hits) lives next to them in `<records stem>.meta.json`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

# The contract with reports (DESIGN.md); every record carries all of these keys.
FIELDS: tuple[str, ...] = (
    "level",          # load level id, e.g. "c=8" or "rps=4.0"
    "phase",          # "warmup" | "measure"
    "t_sched",        # intended send time (unix s) in open-loop modes, else None
    "t_start",        # actual send time (unix s)
    "ttft_s",         # first content chunk - t_start, None if none arrived
    "e2e_s",          # last byte received - t_start (None if nothing arrived)
    "itl_s",          # gaps between successive content chunks (s)
    "prompt_tokens",  # server usage when given, else asked
    "output_tokens",  # server usage when given, else content chunks counted
    "status",         # see STATUSES, or "http_<code>"
    "error",          # short message or None
    "worker",         # which Locust process sent it
    "response_id",    # the server's response `id`
)

# Extra keys loadgen adds; readers must tolerate their absence and unknown extras.
EXTRA_FIELDS: tuple[str, ...] = (
    "request_id",           # client-side id "<worker>#<seq>", unique within a run
    "api",                  # "chat" | "completions" | "classify"
    "prompt_tokens_asked",  # length the prompt was built for
    "output_tokens_asked",  # max_tokens sent
    "usage_from",           # "server" | "counted" | "none": where the token counts came from
)

STATUSES: tuple[str, ...] = ("ok", "timeout", "error", "incomplete")  # plus "http_<code>"
PHASES: tuple[str, ...] = ("warmup", "measure")


def is_valid_status(status: object) -> bool:
    if not isinstance(status, str):
        return False
    if status in STATUSES:
        return True
    return status.startswith("http_") and status[5:].isdigit()


def check_record(record: dict[str, Any]) -> list[str]:
    """Problems with one record (empty list when it follows the contract)."""
    problems = [f"missing field {name!r}" for name in FIELDS if name not in record]
    if problems:
        return problems
    if record["phase"] not in PHASES:
        problems.append(f"phase {record['phase']!r} is not one of {PHASES}")
    if not is_valid_status(record["status"]):
        problems.append(f"status {record['status']!r} is not ok/timeout/error/incomplete/http_<code>")
    if not isinstance(record["t_start"], (int, float)):
        problems.append("t_start is not a number")
    if not isinstance(record["itl_s"], list):
        problems.append("itl_s is not a list")
    for name in ("t_sched", "ttft_s", "e2e_s"):
        value = record[name]
        if value is not None and not isinstance(value, (int, float)):
            problems.append(f"{name} is neither a number nor null")
    return problems


class RecordWriter:
    """Appends one JSON line per record and hands it to the kernel before returning.

    Safe to share between greenlets (each `write` is one `os.write`) and between
    processes appending to the same file (O_APPEND writes of a whole line).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.count = 0

    def write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            raise ValueError(f"records file {self.path} is closed")
        line = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        view = memoryview(line)
        while view:  # regular files take the whole line at once; loop only on a short write
            written = os.write(self._fd, view)
            view = view[written:]
        self.count += 1

    def write_many(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.write(record)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RecordsRead:
    records: list[dict[str, Any]] = field(default_factory=list)
    torn_last_line: bool = False  # a partial last line (cut by a kill) was skipped


def read_records_with_status(path: str | os.PathLike) -> RecordsRead:
    """Parse a records file; skip a torn last line, raise ValueError on any other bad line."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"records file {path} does not exist")
    data = path.read_bytes()
    lines = data.split(b"\n")
    # `data` ending in "\n" leaves one empty string at the end: nothing torn.
    last_index = len(lines) - 1
    result = RecordsRead()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if number - 1 == last_index:  # no newline after it: a write cut short
                result.torn_last_line = True
                break
            raise ValueError(f"{path}: line {number} is not a JSON record ({exc})") from None
        result.records.append(record)
    return result


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All complete records in file order (a torn last line is skipped)."""
    return read_records_with_status(path).records


def meta_path(records_path: str | os.PathLike) -> Path:
    """`runs/x/requests.jsonl` -> `runs/x/requests.meta.json`."""
    path = Path(records_path)
    return path.with_name(path.stem + ".meta.json")


def read_meta(records_path: str | os.PathLike) -> dict[str, Any]:
    path = meta_path(records_path)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def update_meta(records_path: str | os.PathLike, level: str, level_meta: dict[str, Any]) -> Path:
    """Merge one level's load-generator metadata into the records' meta file (atomic replace)."""
    path = meta_path(records_path)
    meta = read_meta(records_path) if path.exists() else {}
    meta.setdefault("levels", {})[level] = level_meta
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path

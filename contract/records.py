"""The `requests.jsonl` record: its fields (one declaration), a crash-safe writer, a tolerant reader.

One JSON object per finished request (see DESIGN.md, "The run directory"). `Record`
declares every field once; the field lists, the column kinds the report's polars schema
is made of (`record_schema`) and the JSON line all derive from it, so adding a field is
one line in `Record`.

The writer appends each line with a single `os.write` on an `O_APPEND` descriptor, so a
SIGKILL loses at most the request in flight and concurrent appenders never interleave
lines. Readers skip a torn last line (a partial write cut by a kill) and reject a broken
line anywhere else, naming its line number.

Pure: numpy only (no torch, gevent or locust), so the Locust process imports it.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Iterable, Mapping, Union, get_args, get_origin, get_type_hints

import numpy as np

RECORDS_FILE = "requests.jsonl"   # a run directory's records, one Record per line


def refuse_existing_run(run_dir: Path) -> None:
    """A sweep or compare writes a new run directory: ValueError when `run_dir` already holds records."""
    records = Path(run_dir) / RECORDS_FILE
    if records.exists() and records.stat().st_size:
        raise ValueError(f"{run_dir} already holds a run ({RECORDS_FILE}); choose another --out")


# Field metadata. Unmarked: a DESIGN.md field every record carries. SOMETIMES: a DESIGN.md field only
# some runs write (e.g. a compare run's `arm`): readers fill null and do not call it missing.
# LOADGEN: an extra of loadgen's, not in DESIGN.md's table, which the report does not read.
SOMETIMES = {"kind": "sometimes"}
LOADGEN = {"kind": "loadgen"}


@dataclass(kw_only=True)
class Record:
    """One finished request. Optional fields default to None; readers tolerate their absence."""

    level: str                        # load level id, e.g. "c=8", "continuous/c=8" or "rps=4.0"
    phase: str                        # "warmup" | "measure"; only measure records enter the summary
    t_sched: float | None = None      # intended send time (unix s) in open-loop modes, else None
    t_start: float                    # actual send time (unix s)
    ttft_s: float | None = None       # first content chunk - t_start, None if none arrived
    e2e_s: float | None = None        # last byte received - t_start (None if nothing arrived)
    itl_s: list[float] = field(default_factory=list)  # gaps between successive content chunks (s)
    prompt_tokens: int | None = None  # server usage when given, else asked
    output_tokens: int | None = None  # server usage when given, else content chunks counted
    status: str                       # see STATUSES, or "http_<code>", or "grpc_<status name>"
    error: str | None = None          # short message or None
    worker: str | None = None         # which Locust process sent it
    response_id: str | None = None    # the server's response `id` (joins with server-side logs)
    ttft_any_s: float | None = None   # first chunk of any kind (even one without text) - t_start, None if none
    arm: str | None = field(default=None, metadata=SOMETIMES)      # compare runs: "a" | "b"
    slice: int | None = field(default=None, metadata=SOMETIMES)    # compare runs: the slice it was sent in
    switch: str | None = field(default=None, metadata=SOMETIMES)   # compare runs: "drained" (finished after its
                                                                   # slice's switch) | "excluded" (cut off by it)
    queue_s: float | None = field(default=None, metadata=SOMETIMES)  # t_start - intended send time: t_sched (open
                                                                   # loop), else when the user was ready (closed loop)
    conversation_id: str | None = field(default=None, metadata=SOMETIMES)  # multi-turn: "<worker>/c<n>"
    turn: int | None = field(default=None, metadata=SOMETIMES)             # multi-turn: 1, 2, ... in its conversation
    step: int | None = field(default=None, metadata=SOMETIMES)   # --session: the main agent's request in its turn
                                                                 # (1, 2, ...; a sub-agent's: its round's)
    agent: str | None = field(default=None, metadata=SOMETIMES)  # --session: "main" or "sub<k>" (a fan-out's)
    tool_calls: int | None = field(default=None, metadata=SOMETIMES)     # --session: calls in the answer
    tool_wait_s: float | None = field(default=None, metadata=SOMETIMES)  # --session: from the round's answer
                                                                 # to this request being ready (tools or sub-agents)
    session_end: bool | None = field(default=None, metadata=SOMETIMES)   # --session: its session's last request
    round: int | None = field(default=None, metadata=SOMETIMES)   # sweep --rounds: its level's round (0, 1, ...;
                                                                   # see contract.level_windows)
    replica: str | None = field(default=None, metadata=SOMETIMES)  # fleet runs: the replica that answered, from its
                                                                   # x-servecap-replica header (None: the server sent none)
    model: str | None = field(default=None, metadata=SOMETIMES)    # --model-mix runs: the model (a LoRA adapter, or
                                                                   # the base) the request asked for
    protocol: str | None = field(default=None, metadata=SOMETIMES)  # KServe V2 runs: "rest" | "grpc", how it was sent
    ttfa_s: float | None = field(default=None, metadata=SOMETIMES)  # streams: first answer token - t_start (after any
                                                                   # reasoning; = ttft_s when nothing reasons)
    reasoning_tokens: int | None = field(default=None, metadata=SOMETIMES)  # streams: of output_tokens, the reasoning
                                                                   # (server usage's, else the chunks counted)
    answer_tokens: int | None = field(default=None, metadata=SOMETIMES)     # output_tokens - reasoning_tokens
    hedge: str | None = field(default=None, metadata=SOMETIMES)  # --hedge-after: "primary" | "copy" of a hedged
                                                                 # pair (the one that lost is status "cancelled")
    hedge_delay_s: float | None = field(default=None, metadata=SOMETIMES)  # a copy: sent this long after the
                                                                 # primary; kept, its times count from the primary's
    cached_tokens: int | None = field(default=None, metadata=SOMETIMES)     # of prompt_tokens, served from the
                                                                   # server's prefix cache (its usage's
                                                                   # prompt_tokens_details.cached_tokens)
    request_id: str | None = field(default=None, metadata=LOADGEN)           # "<worker>#<seq>", unique in a run
    api: str | None = field(default=None, metadata=LOADGEN)                  # "chat" | "completions" | "classify"
    prompt_tokens_asked: int | None = field(default=None, metadata=LOADGEN)  # length the prompt was built for
    output_tokens_asked: int | None = field(default=None, metadata=LOADGEN)  # max_tokens sent
    usage_from: str | None = field(default=None, metadata=LOADGEN)           # "server" | "counted" | "none"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Record":
        """From one parsed JSON line: absent optional fields take their defaults, unknown ones are
        ignored; ValueError naming the required fields that are absent."""
        absent = [name for name in REQUIRED_FIELDS if name not in data]
        if absent:
            raise ValueError(f"record lacks required field(s): {', '.join(absent)}")
        return cls(**{name: data[name] for name in ALL_FIELDS if name in data})

    def to_dict(self) -> dict[str, Any]:
        """Every field, in declaration order (DESIGN.md's fields first): the JSON object of the line."""
        return {name: getattr(self, name) for name in ALL_FIELDS}

    def to_json_line(self) -> bytes:
        return json_line(self.to_dict())

    @property
    def tpot_s(self) -> float | None:
        return tpot_s(self.e2e_s, self.ttft_s, self.output_tokens)


ALL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record))
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record) if "kind" not in f.metadata)  # every record
SOMETIMES_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record) if f.metadata.get("kind") == "sometimes")
EXTRA_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record) if f.metadata.get("kind") == "loadgen")
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Record)  # those without a default
                                         if f.default is MISSING and f.default_factory is MISSING)

STATUSES: tuple[str, ...] = ("ok", "timeout", "error", "incomplete", "cancelled")  # plus "http_<code>",
                                                                                  # "grpc_<status>"; "cancelled": a
                                                                                  # hedge's copy that lost
GRPC_STATUSES = ("cancelled", "unknown", "invalid_argument", "deadline_exceeded", "not_found", "already_exists",
                 "permission_denied", "resource_exhausted", "failed_precondition", "aborted", "out_of_range",
                 "unimplemented", "internal", "unavailable", "data_loss", "unauthenticated")
PHASES: tuple[str, ...] = ("warmup", "measure")


@cache
def field_kinds() -> dict[str, str]:
    """{field: "str" | "number" | "list" | "bool"} from the annotations (ints and floats are both numbers)."""
    def kind(hint) -> str:
        if get_origin(hint) in (Union, UnionType):  # `X | None`: the kind of X
            hint = next(arg for arg in get_args(hint) if arg is not NoneType)
        return {str: "str", list: "list", bool: "bool"}.get(get_origin(hint) or hint, "number")

    return {name: kind(hint) for name, hint in get_type_hints(Record).items()}


MIN_TOKENS_FOR_TPOT = 2  # TPOT is the gap after the first token: one token has none


def tpot_s(e2e_s, ttft_s, output_tokens):
    """Time per output token after the first: (e2e - ttft) / (output_tokens - 1), undefined below 2 tokens.

    One request (scalars) gives a float, or None where undefined; arrays (numpy, pandas columns)
    give float64 [N] with NaN where undefined.
    """
    def per_token(e2e, ttft, tokens):
        return (e2e - ttft) / (tokens - 1)

    if output_tokens is None or isinstance(output_tokens, (int, float, np.number)):  # one request (the Locust process)
        if e2e_s is None or ttft_s is None or output_tokens is None or output_tokens < MIN_TOKENS_FOR_TPOT:
            return None
        return per_token(e2e_s, ttft_s, output_tokens)
    tokens = np.asarray(output_tokens, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tokens >= MIN_TOKENS_FOR_TPOT, per_token(np.asarray(e2e_s, dtype=np.float64),
                                                                np.asarray(ttft_s, dtype=np.float64), tokens), np.nan)


def is_valid_status(status: object) -> bool:
    if not isinstance(status, str):
        return False
    if status in STATUSES:
        return True
    if status.startswith("grpc_"):
        return status[5:] in GRPC_STATUSES
    return status.startswith("http_") and status[5:].isdigit()


def check_record(record: dict[str, Any]) -> list[str]:
    """Problems with one record as written (empty list when it follows the contract)."""
    problems = [f"missing field {name!r}" for name in FIELDS if name not in record]
    if problems:
        return problems
    if record["phase"] not in PHASES:
        problems.append(f"phase {record['phase']!r} is not one of {PHASES}")
    if not is_valid_status(record["status"]):
        problems.append(f"status {record['status']!r} is not ok/timeout/error/incomplete/cancelled/http_<code>/"
                        "grpc_<status>")
    if not isinstance(record["t_start"], (int, float)):
        problems.append("t_start is not a number")
    if not isinstance(record["itl_s"], list):
        problems.append("itl_s is not a list")
    for name in ("t_sched", "ttft_s", "e2e_s"):
        value = record[name]
        if value is not None and not isinstance(value, (int, float)):
            problems.append(f"{name} is neither a number nor null")
    return problems


def json_line(record: Mapping[str, Any]) -> bytes:
    """One compact JSON line; NaN and infinity are refused (the file must stay strict JSON)."""
    return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()


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

    def write(self, record: Record | Mapping[str, Any]) -> None:
        """A `Record`, or a record dict as it travels between Locust processes."""
        if self._fd is None:
            raise ValueError(f"records file {self.path} is closed")
        line = record.to_json_line() if isinstance(record, Record) else json_line(record)
        view = memoryview(line)
        while view:  # regular files take the whole line at once; loop only on a short write
            written = os.write(self._fd, view)
            view = view[written:]
        self.count += 1

    def write_many(self, records: Iterable[Record | Mapping[str, Any]]) -> None:
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
    """All complete records in file order, as written (a torn last line is skipped).

    Dicts, so a test can check what the file holds (`check_record`); `Record.from_dict`
    makes each one typed.
    """
    return read_records_with_status(path).records

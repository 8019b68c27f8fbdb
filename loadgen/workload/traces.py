"""Trace replay (`--trace PATH`): when each request of a recorded trace was sent, and its lengths.

Formats (a .csv file by its header, any other file as JSONL):

    Azure LLM inference trace (CSV)   TIMESTAMP,ContextTokens,GeneratedTokens
                                      (TIMESTAMP a date-time such as 2023-11-16 18:15:46.6805900, or seconds)
    BurstGPT trace (CSV)              Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
                                      (Timestamp in seconds; newer files add Session ID and Elapsed time)
    Mooncake trace (JSONL)            {"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [...]}
                                      (and servecap's "user": whose request it is)
      with AIPerf's sessions          ... "session_id": S, and on a session's later rows "delay": ms instead of
                                      "timestamp" (AIPerf's mooncake_trace: the wait after the previous
                                      turn's answer)

A CSV whose header has BurstGPT's `Timestamp`, `Request tokens` or `Response tokens` is read as
BurstGPT (github.com/HPMLL/BurstGPT), any other as Azure. BurstGPT's files keep the requests
that failed, with `Response tokens` 0 (its `*_without_fails_*.csv` files are the same rows less
those): such a row's work is unknown, so it is left out and counted in `Trace.skipped`, and
`BurstGPT_1.csv` reads as `BurstGPT_without_fails_1.csv` does. `Model`, `Total tokens` and
`Log Type` are not used; a `Session ID`, where a row has one, is kept as `TraceRow.session`.

Offsets are seconds since the trace's first request (rows are sorted by time; equal times
stay in file order) and are divided by `--trace-speedup`. Mooncake's `hash_ids` name the
prompt's blocks of `block_tokens` tokens (512 in the published traces): two requests that
share leading ids share that prefix, so the server's prefix cache sees the trace's reuse.
Each id's block is the same seeded text wherever it appears; a request without ids gets
text of its own. Text is ASCII pseudo-words of one byte per token (the reference server's
tokenizer); other tokenizers see other counts, and the record keeps the server's usage.

Sessions (AIPerf's mooncake_trace `session_id`, docs/benchmark-modes/trace-replay.md): rows that share a
`session_id` are one session's turns in file order. Its first row is sent at its `timestamp`; each later
row `delay` ms after the previous turn's answer ended (a later row with a `timestamp` instead is sent then,
or at the answer if that comes later). So a session is closed within itself and its turns wait on the
server, as the agent that made the trace did; sessions start open loop. Each row's `input_length` and
`hash_ids` are its whole prompt, as recorded (the shared ids carry the history's reuse); the live answer is
not threaded in. A later row with neither time, a first row with only a `delay` (a turn with no turn before
it) and a negative delay are refused, naming the line. `Trace.sessions` lists each session's rows.

A session's rows may also carry `parallel` (servecap's own field, an integer): consecutive rows of a session
with the same `parallel` run at once, each its `delay` after the answer of the row before them (sub-agents an
agent fans out to), and the row after them waits on every one of them, its `delay` after the last of their
answers (the agent's turn that joins them). `parallel_groups` gives a session's steps; `Trace.links` who waits
on whom. A session's first row cannot be one of them (they wait on a row before them).

A Mooncake row may also name its `user` (servecap's own field, the end user as OpenAI's request `user` means
it, for traffic whose requests do not wait on each other, as `servecap fleet` writes a plan's --sessions
users). A row's session, else its user, else BurstGPT's Session ID is its `key`: the replay sends it as
--session-header (default x-session-id), so vllm-router's consistent_hash keeps it on one replica.

Pure: no locust or gevent; a bad file raises ValueError naming the file and the line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from contract.prompt_text import trace_block_text, trace_tail_text
from loadgen.workload.input_files import jsonl_objects, read_input_text

MOONCAKE_BLOCK_TOKENS = 512
_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")   # the columns read; Session ID when present


@dataclass(frozen=True)
class TraceRow:
    offset_s: float                  # since the trace's first request, before --trace-speedup
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()   # Mooncake: the prompt's blocks (shared ids = a shared prefix)
    session: str = ""                # BurstGPT's Session ID (a conversation), "" = none; Mooncake: session_id
    delay_s: float | None = None     # Mooncake session: the wait after the previous turn's answer (None: at
                                     # offset_s, which for such a row is its session's previous row's)
    user: str = ""                   # Mooncake "user": whose request it is (no turn waits on another)
    parallel: int | None = None      # servecap's "parallel": its group of rows that run at once (module doc)

    @property
    def key(self) -> str:
        """The session a router may keep together (sent as --session-header): the session, else the user."""
        return self.session or self.user


@dataclass(frozen=True)
class Trace:
    path: str
    format: str                      # "azure" | "burstgpt" | "mooncake"
    rows: tuple[TraceRow, ...] = field(repr=False)
    skipped: int = 0                 # BurstGPT rows of failed requests (Response tokens 0), left out
    sessions: tuple[tuple[int, ...], ...] = ()   # Mooncake sessions: each one's row indices, in turn order
                                                 # (by its first row's time); () when the trace has none

    @property
    def span_s(self) -> float:
        return self.rows[-1].offset_s

    @property
    def chained(self) -> bool:
        """Some turn waits on its session's previous answer: the replay is not open loop row by row."""
        return any(row.delay_s is not None for row in self.rows)

    def offsets(self, speedup: float = 1.0) -> list[float]:
        return [row.offset_s / speedup for row in self.rows]

    def links(self) -> tuple[list[int | None], list[tuple[int, int]]]:
        """Who waits on whom, by row index: each row's predecessor (None: none; sessions' rows in turn order,
        a group of `parallel` rows each on the row before the group) and the (row, another row) pairs of a
        row that also waits on the rest of a group before it."""
        parents: list[int | None] = [None] * len(self.rows)
        joins: list[tuple[int, int]] = []
        for rows in self.sessions:
            before: tuple[int, ...] = ()
            for step in parallel_groups(rows, self.rows):
                for index in step:
                    if before:
                        parents[index] = before[-1]
                        joins.extend((index, other) for other in before[:-1])
                before = step
        return parents, joins


def parallel_groups(rows: tuple[int, ...], trace_rows: tuple[TraceRow, ...]) -> list[tuple[int, ...]]:
    """A session's rows (indices, in turn order) as its steps: one row, or a run of consecutive rows with the
    same `parallel` (sent at once)."""
    steps: list[list[int]] = []
    for index in rows:
        group = trace_rows[index].parallel
        if group is not None and steps and trace_rows[steps[-1][-1]].parallel == group:
            steps[-1].append(index)
        else:
            steps.append([index])
    return [tuple(step) for step in steps]


def load_trace(path: str | Path) -> Trace:
    path = Path(path)
    text = read_input_text(path, "--trace")
    skipped = 0
    if path.suffix.lower() != ".csv":
        fmt, rows = "mooncake", _mooncake_rows(path, text)
    else:
        reader = csv.DictReader(text.splitlines())
        if any(name in (reader.fieldnames or []) for name in _BURSTGPT):
            fmt, (rows, skipped) = "burstgpt", _burstgpt_rows(path, reader)
        else:
            fmt, rows = "azure", _azure_rows(path, reader)
    if not rows:
        failed = f" ({skipped} failed request(s), with Response tokens 0, left out)" if skipped else ""
        raise ValueError(f"--trace: {path} holds no request{failed}")
    rows.sort(key=lambda pair: pair[0])   # stable: equal times keep file order
    first = rows[0][0]
    trace_rows = tuple(TraceRow(t - first, *rest) for t, *rest in rows)
    return Trace(str(path), fmt, trace_rows, skipped, _sessions(trace_rows) if fmt == "mooncake" else ())


def _sessions(rows: tuple[TraceRow, ...]) -> tuple[tuple[int, ...], ...]:
    """Rows sharing a session id, in order (their rows sort by their first row's time, then file order)."""
    if not any(row.session for row in rows):
        return ()
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(row.session or f"row {index}", []).append(index)
    return tuple(tuple(group) for group in groups.values())


def _azure_rows(path: Path, reader: csv.DictReader) -> list[tuple]:
    missing = [name for name in _AZURE if name not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"--trace: {path}: line 1 lacks column(s) {', '.join(missing)} "
                         f"(Azure trace columns: {', '.join(_AZURE)})")
    rows = []
    for line, row in enumerate(reader, start=2):
        where = f"{path}: line {line}"
        rows.append((_seconds(row["TIMESTAMP"], where), _count(row["ContextTokens"], "ContextTokens", where),
                     _count(row["GeneratedTokens"], "GeneratedTokens", where), ()))
    return rows


def _burstgpt_rows(path: Path, reader: csv.DictReader) -> tuple[list[tuple], int]:
    missing = [name for name in _BURSTGPT if name not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"--trace: {path}: line 1 lacks column(s) {', '.join(missing)} "
                         f"(BurstGPT trace columns: Timestamp, Model, Request tokens, Response tokens, "
                         f"Total tokens, Log Type)")
    has_session = "Session ID" in (reader.fieldnames or [])
    rows, skipped = [], 0
    for line, row in enumerate(reader, start=2):
        where = f"{path}: line {line}"
        response = (row["Response tokens"] or "").strip()
        try:
            failed = float(response) == 0
        except ValueError:
            failed = False   # not a number: _count names it below
        if failed:
            skipped += 1
            continue
        timestamp = _float(row["Timestamp"])
        if timestamp is None or timestamp < 0:
            raise ValueError(f"--trace: {where}: Timestamp must be seconds >= 0, got {row['Timestamp']!r}")
        session = (row.get("Session ID") or "").strip() if has_session else ""
        rows.append((timestamp, _count(row["Request tokens"], "Request tokens", where),
                     _count(response, "Response tokens", where), (), session))
    return rows, skipped


def _float(value) -> float | None:
    """A finite number, or None."""
    try:
        number = float((value or "").strip())
    except (TypeError, ValueError, AttributeError):
        return None
    return number if math.isfinite(number) else None


def _mooncake_rows(path: Path, text: str) -> list[tuple]:
    rows = []
    last_time: dict[str, float] = {}   # session id -> its previous row's time (s)
    for where, row in jsonl_objects(path, text, "--trace"):
        session = row.get("session_id")
        if session is not None and (not isinstance(session, (str, int)) or isinstance(session, bool)
                                    or str(session) == ""):
            raise ValueError(f"--trace: {where}: \"session_id\" must be a non-empty string, got {session!r}")
        session = "" if session is None else str(session)
        if not all(key in row for key in ("input_length", "output_length")):
            raise ValueError(f"--trace: {where}: needs \"timestamp\" (ms), \"input_length\" and \"output_length\"")
        hash_ids = row.get("hash_ids") or []
        if not isinstance(hash_ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in hash_ids):
            raise ValueError(f"--trace: {where}: \"hash_ids\" must be a list of integers")
        user = row.get("user")
        if user is not None and (not isinstance(user, (str, int)) or isinstance(user, bool) or str(user) == ""):
            raise ValueError(f"--trace: {where}: \"user\" must be a non-empty string, got {user!r}")
        parallel = row.get("parallel")
        if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 0):
            raise ValueError(f"--trace: {where}: \"parallel\" must be an integer >= 0 (a group of a session's rows "
                             f"sent at once), got {parallel!r}")
        if parallel is not None and (not session or session not in last_time):
            raise ValueError(f"--trace: {where}: \"parallel\" rows run at once after a row of their session before "
                             "them: it needs a \"session_id\" whose earlier row they follow")
        timestamp, delay = row.get("timestamp"), row.get("delay")
        if delay is not None and not _non_negative(delay):
            raise ValueError(f"--trace: {where}: \"delay\" must be milliseconds >= 0, got {delay!r}")
        if delay is not None and not session:
            raise ValueError(f"--trace: {where}: \"delay\" is a session's wait between turns: it needs a "
                             "\"session_id\"")
        if session and session not in last_time and timestamp is None:
            raise ValueError(f"--trace: {where}: the first row of session {session!r} needs a \"timestamp\" (ms): "
                             "a \"delay\" follows a turn, and this session has none before it")
        if timestamp is None and delay is None:
            raise ValueError(f"--trace: {where}: needs \"timestamp\" (ms), or in a session \"delay\" (ms)")
        if timestamp is not None and not _non_negative(timestamp):
            raise ValueError(f"--trace: {where}: \"timestamp\" must be milliseconds >= 0, got {timestamp!r}")
        first = session not in last_time
        seconds = timestamp / 1000.0 if timestamp is not None else last_time[session]
        if session:
            last_time[session] = seconds
        rows.append((seconds, _count(row["input_length"], "input_length", where),
                     _count(row["output_length"], "output_length", where), tuple(hash_ids), session,
                     None if (first or not session) else (0.0 if delay is None else delay / 1000.0),
                     "" if user is None else str(user), parallel))
    return rows


def _non_negative(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def _seconds(value: str, where: str) -> float:
    text = (value or "").strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(f"--trace: {where}: TIMESTAMP {value!r} is neither seconds nor a date-time") from None


def _count(value, name: str, where: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not math.isfinite(number) or number != int(number) or number < 1:
        raise ValueError(f"--trace: {where}: {name} must be a whole number >= 1, got {value!r}")
    return int(number)


class TracePrompts:
    """Prompt text for trace rows: shared blocks for shared hash ids, fresh text otherwise."""

    def __init__(self, seed: int, block_tokens: int = MOONCAKE_BLOCK_TOKENS) -> None:
        if block_tokens < 1:
            raise ValueError(f"--trace-block-tokens must be >= 1, got {block_tokens}")
        self.seed, self.block_tokens = seed, block_tokens
        self._blocks: dict[int, str] = {}

    def text(self, index: int, row: TraceRow) -> str:
        """Exactly row.input_tokens ASCII bytes."""
        if not row.hash_ids:
            return trace_tail_text(self.seed, index, row.input_tokens)
        text = "".join(self._block(h) for h in row.hash_ids)
        if len(text) < row.input_tokens:   # more tokens than the blocks cover: this request's own tail
            text += trace_tail_text(self.seed, index, row.input_tokens - len(text))
        return text[:row.input_tokens]

    def _block(self, hash_id: int) -> str:
        if hash_id not in self._blocks:
            self._blocks[hash_id] = trace_block_text(self.seed, hash_id, self.block_tokens)
        return self._blocks[hash_id]

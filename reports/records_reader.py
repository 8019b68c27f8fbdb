"""requests.jsonl -> a pandas records frame and the flattened inter-token gaps.

Parsing is polars' multi-threaded NDJSON reader with a fixed schema of the
columns the report reads, derived from the contract's `Record` (about twice
arrow's JSON reader per core, and it ignores the other fields - response_id,
loadgen's request_id, api - without building them). A killed writer's torn
last line is dropped and named; a file the fast reader rejects (a broken line
in the middle) is re-read line by line, skipping and naming the unreadable lines.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from contract.record_schema import polars_schema
from contract.records import FIELDS, SOMETIMES_FIELDS

# DESIGN.md's fields but response_id (it only joins with server logs); loadgen's extras are not read
COLUMNS = tuple(name for name in (*FIELDS, *SOMETIMES_FIELDS) if name != "response_id")
SCHEMA = polars_schema(COLUMNS)
JOIN_SCHEMA = polars_schema((*COLUMNS, "response_id"))   # when an engine record is there to join with
STRING_COLUMNS = tuple(name for name, dtype in SCHEMA.items() if dtype == pl.Utf8)
NUMBER_COLUMNS = tuple(name for name, dtype in SCHEMA.items() if dtype == pl.Float64)
BOOL_COLUMNS = tuple(name for name, dtype in SCHEMA.items() if dtype == pl.Boolean)


class RecordsError(ValueError):
    """No request record can be read."""


def read_records(path: Path, missing: list[str], *, response_id: bool = False
                 ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(records frame [N rows], gaps [G], owning row of each gap [G]); notes go to `missing`.

    String columns come back as pandas categoricals (few distinct values: they
    compare and group far faster than 1M Python strings). `response_id` adds that
    column (plain strings: one per request), for joining with the engine's request record.
    """
    schema = JOIN_SCHEMA if response_id else SCHEMA
    if not path.exists():
        raise RecordsError(f"{path} is missing: a run without request records cannot be reported")
    size = path.stat().st_size
    with open(path, "rb") as f:  # the first and last 64 KiB decide; polars reads the file itself
        head = f.read(65536)
        f.seek(max(0, size - 65536))
        tail = f.read()
    source: Path | bytes = path
    if not tail.endswith(b"\n"):  # a torn (or unterminated) last line: hand polars the repaired bytes
        source = _drop_torn_tail(path.read_bytes(), missing)
        head = source[:65536]
    if not head or (len(head) == size and head.isspace()) or (isinstance(source, bytes) and source.isspace()):
        raise RecordsError(f"{path} holds no complete request record")
    _note_absent_fields(head, missing)
    try:
        table = pl.read_ndjson(source, schema=schema)
    except pl.exceptions.PolarsError:
        table = _read_line_by_line(source if isinstance(source, bytes) else path.read_bytes(), missing, schema)
    return _to_pandas(table, missing)


def _drop_torn_tail(data: bytes, missing: list[str]) -> bytes:
    """A killed writer leaves a last line without its newline; keep it only if it parses."""
    if not data or data.endswith(b"\n"):
        return data
    cut = data.rfind(b"\n") + 1
    tail = data[cut:]
    try:
        json.loads(tail)
        return data + b"\n"
    except (json.JSONDecodeError, UnicodeDecodeError):
        missing.append(f"requests.jsonl: torn last line ({len(tail)} bytes) skipped")
        return data[:cut]


def _note_absent_fields(data: bytes, missing: list[str]) -> None:
    """Name schema fields the first record lacks (the reader fills them with nulls)."""
    first = data[:data.find(b"\n")] if b"\n" in data else data
    try:
        keys = set(json.loads(first))
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError):
        return
    absent = [name for name in FIELDS if name not in keys and name != "response_id"]
    if absent:
        missing.append(f"requests.jsonl records lack field(s): {', '.join(absent)}")


def _read_line_by_line(data: bytes, missing: list[str], schema: dict) -> pl.DataFrame:
    """Slow path: keep the lines that are JSON objects, name the others, parse the kept ones fast."""
    good, bad = [], []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            ok = isinstance(json.loads(line), dict)
        except (json.JSONDecodeError, UnicodeDecodeError):
            ok = False
        (good if ok else bad).append(line if ok else number)
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        missing.append(f"requests.jsonl: {len(bad)} unreadable line(s) skipped (line {shown})")
    if not good:
        raise RecordsError("requests.jsonl holds no readable request record")
    try:
        return pl.read_ndjson(b"\n".join(good) + b"\n", schema=schema)
    except pl.exceptions.PolarsError as exc:  # valid JSON of the wrong shape (e.g. itl_s a string)
        raise RecordsError(f"requests.jsonl records do not follow the schema: {exc}") from None


def _categorical(column: pl.Series) -> pd.Categorical:
    categories = column.drop_nulls().unique(maintain_order=True)
    codes = column.replace_strict(categories, pl.int_range(len(categories), eager=True),
                                  default=-1, return_dtype=pl.Int32).fill_null(-1)
    return pd.Categorical.from_codes(codes.to_numpy(), categories=categories.to_list())


def _to_pandas(table: pl.DataFrame, missing: list[str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    unlabelled = table["level"].null_count()
    if unlabelled:
        missing.append(f"requests.jsonl: {unlabelled} record(s) without a level dropped")
        table = table.filter(pl.col("level").is_not_null())
    if table.is_empty():
        raise RecordsError("requests.jsonl holds no record with a level")
    # itl_s: flattened once into gaps [G] and the row each belongs to [G]
    exploded = (table.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("row"), "itl_s")
                .explode("itl_s").drop_nulls("itl_s"))
    gaps = exploded["itl_s"].to_numpy().astype(np.float64, copy=False)
    rows = exploded["row"].to_numpy().astype(np.int64, copy=False)
    frame = {name: _categorical(table[name]) for name in STRING_COLUMNS}
    frame.update({name: table[name].to_numpy().astype(np.float64, copy=False) for name in NUMBER_COLUMNS})
    frame.update({name: table[name].fill_null(False).to_numpy() for name in BOOL_COLUMNS})   # null: not set
    if "response_id" in table.columns:
        frame["response_id"] = table["response_id"].to_numpy()
    return pd.DataFrame(frame), gaps, rows

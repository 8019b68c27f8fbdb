"""The polars schema of `requests.jsonl`, derived from `records.Record` (the report reads with it).

Kept apart from records.py so the Locust process, which imports the record, never imports polars.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from contract.records import field_kinds

# Numbers (ints too) read as Float64: an absent or null value is then NaN in pandas, not an object column.
_DTYPES = {"str": pl.Utf8, "number": pl.Float64, "list": pl.List(pl.Float64), "bool": pl.Boolean}


def polars_schema(names: Iterable[str]) -> dict[str, pl.DataType]:
    """{field: polars dtype} for these `Record` fields, in the order given."""
    names, kinds = list(names), field_kinds()
    unknown = [name for name in names if name not in kinds]
    if unknown:
        raise ValueError(f"not record fields: {', '.join(unknown)}")
    return {name: _DTYPES[kinds[name]] for name in names}

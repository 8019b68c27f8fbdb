"""The report's polars schema is derived from the contract's Record, never declared again."""

import polars as pl
import pytest

from reports import records_reader
from contract.record_schema import polars_schema
from contract.records import FIELDS, SOMETIMES_FIELDS


def test_schema_maps_each_kind():
    assert polars_schema(["level", "t_start", "output_tokens", "itl_s", "session_end"]) == {
        "level": pl.Utf8, "t_start": pl.Float64, "output_tokens": pl.Float64, "itl_s": pl.List(pl.Float64),
        "session_end": pl.Boolean}
    with pytest.raises(ValueError, match="not record fields: nope"):
        polars_schema(["level", "nope"])


def test_the_report_reads_with_the_contract_schema():
    assert records_reader.SCHEMA == polars_schema(name for name in (*FIELDS, *SOMETIMES_FIELDS)
                                                  if name != "response_id")
    assert set(records_reader.STRING_COLUMNS) == {"level", "phase", "status", "error", "worker", "arm", "switch",
                                                  "conversation_id", "replica", "model", "protocol", "agent", "hedge"}
    assert set(records_reader.NUMBER_COLUMNS) == {"t_sched", "t_start", "queue_s", "ttft_s", "ttft_any_s", "e2e_s",
                                                  "prompt_tokens", "output_tokens", "slice", "turn", "round",
                                                  "ttfa_s", "reasoning_tokens", "answer_tokens", "step",
                                                  "tool_calls", "tool_wait_s", "cached_tokens", "hedge_delay_s"}
    assert records_reader.BOOL_COLUMNS == ("session_end",)

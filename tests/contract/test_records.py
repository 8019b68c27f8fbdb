"""The requests.jsonl contract: the typed record, the writer appends whole lines, the reader skips only a
torn last line."""

import json

import numpy as np
import pandas as pd
import pytest

from contract.records import (EXTRA_FIELDS, FIELDS, SOMETIMES_FIELDS, Record, RecordWriter, check_record, field_kinds,
                                       read_records, read_records_with_status, tpot_s)


def _record(**over):
    base = {"level": "c=1", "phase": "measure", "t_sched": None, "t_start": 1.5, "ttft_s": 0.1, "e2e_s": 0.5,
            "itl_s": [0.01, 0.02], "prompt_tokens": 10, "output_tokens": 3, "status": "ok", "error": None,
            "worker": "local@h:1", "response_id": "r1", "ttft_any_s": None}
    base.update(over)
    return base


def test_writer_appends_one_flushed_line_per_record(tmp_path):
    path = tmp_path / "sub" / "requests.jsonl"
    with RecordWriter(path) as writer:
        writer.write(_record(response_id="a"))
        # visible to another reader before close: handed to the kernel on write
        assert read_records(path) == [_record(response_id="a")]
        writer.write(_record(response_id="b"))
    with RecordWriter(path) as writer:  # reopening appends
        writer.write(_record(response_id="c"))
    assert [r["response_id"] for r in read_records(path)] == ["a", "b", "c"]
    assert path.read_bytes().count(b"\n") == 3


def test_reader_skips_torn_last_line_only(tmp_path):
    path = tmp_path / "r.jsonl"
    good = json.dumps(_record()) + "\n"
    path.write_text(good + good + good[: len(good) // 2])
    result = read_records_with_status(path)
    assert len(result.records) == 2 and result.torn_last_line
    path.write_text(good + "{broken\n" + good)
    with pytest.raises(ValueError, match="line 2"):
        read_records(path)


def test_reader_names_missing_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        read_records(tmp_path / "nope.jsonl")


def test_writer_refuses_nan(tmp_path):
    with RecordWriter(tmp_path / "r.jsonl") as writer, pytest.raises(ValueError):
        writer.write(_record(ttft_s=float("nan")))


def test_check_record_names_problems():
    assert check_record(_record()) == []
    assert check_record(_record(status="http_503")) == []
    assert "missing field 'level'" in check_record({k: v for k, v in _record().items() if k != "level"})
    assert any("status" in p for p in check_record(_record(status="weird")))
    assert any("phase" in p for p in check_record(_record(phase="x")))
    assert any("itl_s" in p for p in check_record(_record(itl_s=None)))
    assert len(FIELDS) == 14


def test_record_writes_every_field_in_design_order_and_reads_back():
    record = Record(level="c=1", phase="measure", t_start=1.5, ttft_s=0.1, e2e_s=0.5, itl_s=[0.01, 0.02],
                    prompt_tokens=10, output_tokens=3, status="ok", worker="local@h:1", response_id="r1",
                    request_id="local@h:1#0", api="chat", usage_from="server")
    line = json.loads(record.to_json_line())
    assert list(line) == [*FIELDS, *SOMETIMES_FIELDS, *EXTRA_FIELDS] and check_record(line) == []
    assert line == {**_record(), "arm": None, "slice": None, "switch": None, "queue_s": None,
                    "conversation_id": None, "turn": None, "step": None, "agent": None, "tool_calls": None,
                    "tool_wait_s": None, "session_end": None, "round": None, "replica": None, "model": None, "protocol": None,
                    "ttfa_s": None, "reasoning_tokens": None, "answer_tokens": None, "hedge": None,
                    "hedge_delay_s": None, "cached_tokens": None,
                    "request_id": "local@h:1#0", "api": "chat", "prompt_tokens_asked": None,
                    "output_tokens_asked": None, "usage_from": "server"}
    assert Record.from_dict(line) == record
    assert record.to_json_line().endswith(b"\n") and b" " not in record.to_json_line()


def test_from_dict_tolerates_absent_and_unknown_fields_but_names_missing_required_ones():
    record = Record.from_dict({"level": "c=2", "phase": "warmup", "t_start": 3.0, "status": "timeout",
                               "ttft_any_s": 0.2, "shard": "a"})  # a field of a later version
    assert record.ttft_any_s == 0.2 and (record.ttft_s, record.itl_s, record.worker, record.api) == (None, [], None, None)
    with pytest.raises(ValueError, match="phase, status"):
        Record.from_dict({"level": "c=2", "t_start": 3.0})


def test_writer_takes_records_and_record_dicts(tmp_path):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as writer:
        writer.write(Record(level="c=1", phase="measure", t_start=1.0, status="ok"))
        writer.write_many([{"level": "c=1", "shipped": True}])  # a dict as it travels between Locust processes
    first, second = read_records(path)
    assert first["level"] == "c=1" and first["itl_s"] == [] and second == {"level": "c=1", "shipped": True}
    assert writer.count == 2


def test_field_kinds_come_from_the_annotations():
    kinds = field_kinds()
    assert kinds["level"] == kinds["error"] == kinds["api"] == "str"
    assert kinds["t_sched"] == kinds["output_tokens"] == kinds["prompt_tokens_asked"] == "number"
    assert kinds["itl_s"] == "list"
    assert list(kinds) == [*FIELDS, *SOMETIMES_FIELDS, *EXTRA_FIELDS]
    assert (kinds["arm"], kinds["slice"], kinds["switch"]) == ("str", "number", "str")


def test_tpot_is_one_formula_for_one_request_and_for_columns():
    assert tpot_s(1.0, 0.1, 10) == pytest.approx(0.1)          # (1.0 - 0.1) / (10 - 1)
    assert tpot_s(1.0, 0.1, 2) == pytest.approx(0.9)
    assert tpot_s(1.0, 0.1, 1) is None and tpot_s(1.0, 0.1, 0) is None   # undefined below 2 tokens
    assert tpot_s(None, 0.1, 5) is None and tpot_s(1.0, None, 5) is None and tpot_s(1.0, 0.1, None) is None
    column = tpot_s(pd.Series([1.0, 1.0, 2.0]), pd.Series([0.1, 0.1, np.nan]), pd.Series([10.0, 1.0, 4.0]))
    assert column[0] == pytest.approx(0.1) and np.isnan(column[1]) and np.isnan(column[2])
    assert Record(level="x", phase="measure", t_start=0, status="ok", e2e_s=1.0, ttft_s=0.1,
                  output_tokens=10).tpot_s == pytest.approx(0.1)

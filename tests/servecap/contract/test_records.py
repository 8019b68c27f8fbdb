"""The requests.jsonl contract: writer appends whole lines, reader skips only a torn last line."""

import json
import os

import pytest

from servecap.contract.records import (FIELDS, RecordWriter, check_record, meta_path, read_meta, read_records,
                             read_records_with_status, update_meta)


def _record(**over):
    base = {"level": "c=1", "phase": "measure", "t_sched": None, "t_start": 1.5, "ttft_s": 0.1, "e2e_s": 0.5,
            "itl_s": [0.01, 0.02], "prompt_tokens": 10, "output_tokens": 3, "status": "ok", "error": None,
            "worker": "local@h:1", "response_id": "r1"}
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
    assert len(FIELDS) == 13


def test_meta_merges_levels(tmp_path):
    records = tmp_path / "requests.jsonl"
    assert meta_path(records).name == "requests.meta.json"
    update_meta(records, "c=1", {"limited_by_loadgen": False})
    update_meta(records, "c=2", {"limited_by_loadgen": True})
    assert read_meta(records)["levels"] == {"c=1": {"limited_by_loadgen": False}, "c=2": {"limited_by_loadgen": True}}
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]

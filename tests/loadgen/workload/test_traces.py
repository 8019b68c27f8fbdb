"""Trace files: Azure CSV and Mooncake JSONL, offsets, shared prefixes from hash ids, errors naming the line."""

import pytest

from loadgen.workload.traces import TracePrompts, TraceRow, load_trace


def test_azure_csv_rows_sorted_with_offsets_from_the_first(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:47.1805900,100,20\n"
                    "2023-11-16 18:15:46.6805900,374,44\n"
                    "2023-11-16 18:15:49.6805900,7,3\n")
    trace = load_trace(path)
    assert trace.format == "azure" and [r.input_tokens for r in trace.rows] == [374, 100, 7]
    assert trace.offsets() == pytest.approx([0.0, 0.5, 3.0])
    assert trace.offsets(2.0) == pytest.approx([0.0, 0.25, 1.5]) and trace.span_s == pytest.approx(3.0)
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n10.5,5,6\n10,1,2\n")   # seconds work too
    assert load_trace(path).offsets() == [0.0, 0.5]


def test_mooncake_jsonl_in_milliseconds_with_hash_ids(tmp_path):
    path = tmp_path / "mooncake.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n\n'
                    '{"timestamp": 3052, "input_length": 700, "output_length": 9, "hash_ids": [0, 2]}\n'
                    '{"timestamp": 3052, "input_length": 10, "output_length": 1}\n')
    trace = load_trace(path)
    assert trace.format == "mooncake" and trace.offsets() == [0.0, 3.052, 3.052]
    assert trace.rows[1] == TraceRow(3.052, 700, 9, (0, 2)) and trace.rows[2].hash_ids == ()


def test_shared_hash_ids_give_shared_prefixes():
    prompts = TracePrompts(seed=1, block_tokens=8)
    a = prompts.text(0, TraceRow(0, 20, 1, (5, 6, 7)))
    b = prompts.text(1, TraceRow(0, 12, 1, (5, 9)))
    c = prompts.text(2, TraceRow(0, 30, 1, (5,)))   # more tokens than its blocks: a tail of its own
    assert len(a) == 20 and len(b) == 12 and len(c) == 30
    assert a[:8] == b[:8] == c[:8] and a[8:12] != b[8:12]
    plain = [prompts.text(i, TraceRow(0, 16, 1)) for i in range(2)]
    assert plain[0] != plain[1] and TracePrompts(seed=1, block_tokens=8).text(0, TraceRow(0, 16, 1)) == plain[0]


@pytest.mark.parametrize("name, content, message", [
    ("t.csv", "TIMESTAMP,ContextTokens\n1,2\n", r"t.csv: line 1 lacks column\(s\) GeneratedTokens"),
    ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\nyesterday,2,3\n", r"line 3: TIMESTAMP 'yesterday'"),
    ("t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n1,0,3\n", r"line 2: ContextTokens must be a whole number >= 1"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 5}\n', r"line 1: needs \"timestamp\" \(ms\)"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": -1, "input_length": 5, '
                '"output_length": 1}\n', r"line 2: \"timestamp\" must be milliseconds >= 0"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}\n', "list of integers"),
    ("t.jsonl", "{oops\n", r"line 1: not valid JSON"),
    ("t.jsonl", "\n", "holds no request"),
])
def test_bad_traces_name_the_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        load_trace(path)
    assert str(err.value).startswith("--trace:")

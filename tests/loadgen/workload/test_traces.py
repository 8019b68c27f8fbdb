"""Trace files: Azure CSV, BurstGPT CSV and Mooncake JSONL, offsets, shared prefixes from hash ids, errors naming
the line."""

import pytest

from loadgen.workload.traces import TracePrompts, TraceRow, load_trace, parallel_groups


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


BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def test_burstgpt_csv_by_its_header_with_failures_left_out_and_counted(tmp_path):
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text(BURSTGPT_HEADER +
                    "5,ChatGPT,472,18,490,Conversation log\n"
                    "45,ChatGPT,1087,0,1087,Conversation log\n"       # failed: no response
                    "110.5,GPT-4,417,505,922,API log\n"
                    "20,ChatGPT,30,7,37,API log\n")
    trace = load_trace(path)
    assert trace.format == "burstgpt" and trace.skipped == 1
    assert [(r.input_tokens, r.output_tokens) for r in trace.rows] == [(472, 18), (30, 7), (417, 505)]
    assert trace.offsets() == pytest.approx([0.0, 15.0, 105.5]) and trace.rows[0].session == ""
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n1,2,3\n")   # the header decides, not the name
    assert load_trace(path).format == "azure" and load_trace(path).skipped == 0


def test_burstgpt_session_ids_kept_where_the_file_has_them(tmp_path):
    path = tmp_path / "b3.csv"
    path.write_text("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "1,abc,2.5,ChatGPT,10,5,15,Conversation log\n"
                    "2,,1.0,GPT-4,20,6,26,API log\n")
    trace = load_trace(path)
    assert [r.session for r in trace.rows] == ["abc", ""] and trace.skipped == 0


def test_mooncake_jsonl_in_milliseconds_with_hash_ids(tmp_path):
    path = tmp_path / "mooncake.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n\n'
                    '{"timestamp": 3052, "input_length": 700, "output_length": 9, "hash_ids": [0, 2]}\n'
                    '{"timestamp": 3052, "input_length": 10, "output_length": 1}\n')
    trace = load_trace(path)
    assert trace.format == "mooncake" and trace.offsets() == [0.0, 3.052, 3.052]
    assert trace.rows[1] == TraceRow(3.052, 700, 9, (0, 2)) and trace.rows[2].hash_ids == ()


def test_aiperf_sessions_chain_their_turns_by_delay(tmp_path):
    path = tmp_path / "sessions.jsonl"
    path.write_text('{"session_id": "a", "timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [0]}\n'
                    '{"session_id": "b", "timestamp": 100, "input_length": 30, "output_length": 8}\n'
                    '{"session_id": "a", "delay": 300, "input_length": 60, "output_length": 8, "hash_ids": [0, 1]}\n'
                    '{"timestamp": 50, "input_length": 20, "output_length": 4}\n'
                    '{"session_id": "a", "delay": 200, "input_length": 90, "output_length": 8}\n'
                    '{"session_id": "b", "timestamp": 900, "input_length": 50, "output_length": 8}\n')
    trace = load_trace(path)
    assert trace.chained
    sessions = [[(trace.rows[i].session, trace.rows[i].input_tokens, trace.rows[i].delay_s) for i in rows]
                for rows in trace.sessions]
    # a later turn's time is its session's previous row's (its delay counts from that turn's answer)
    # b's second row has a time of its own: sent then, or at b's first answer if that is later (delay 0)
    assert sessions == [[("a", 40, None), ("a", 60, 0.3), ("a", 90, 0.2)], [("", 20, None)],
                        [("b", 30, None), ("b", 50, 0.0)]]
    assert [trace.rows[i].offset_s for i in trace.sessions[0]] == [0.0, 0.0, 0.0]
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1}\n')
    assert not load_trace(plain).chained and load_trace(plain).sessions == ()


def test_a_row_names_its_user_and_the_router_key_is_the_session_else_the_user(tmp_path):
    path = tmp_path / "users.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "user": "u1"}\n'
                    '{"timestamp": 10, "input_length": 5, "output_length": 1, "user": 7}\n'
                    '{"session_id": "s", "timestamp": 20, "input_length": 5, "output_length": 1, "user": "u1"}\n'
                    '{"timestamp": 30, "input_length": 5, "output_length": 1}\n')
    trace = load_trace(path)
    assert [(r.user, r.key) for r in trace.rows] == [("u1", "u1"), ("7", "7"), ("u1", "s"), ("", "")]
    assert not trace.chained   # a user's requests wait on nothing
    burst = tmp_path / "b.csv"
    burst.write_text(BURSTGPT_HEADER.replace("Timestamp,", "Timestamp,Session ID,") + "1,abc,ChatGPT,5,3,8,API log\n")
    assert load_trace(burst).rows[0].key == "abc"


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
    ("t.jsonl", '{"session_id": "s", "delay": 10, "input_length": 5, "output_length": 1}\n',
     r"line 1: the first row of session 's' needs a \"timestamp\" \(ms\): a \"delay\" follows a turn"),
    ("t.jsonl", '{"session_id": "s", "timestamp": 0, "input_length": 5, "output_length": 1}\n'
                '{"session_id": "s", "delay": -5, "input_length": 5, "output_length": 1}\n',
     r"line 2: \"delay\" must be milliseconds >= 0, got -5"),
    ("t.jsonl", '{"timestamp": 0, "delay": 5, "input_length": 5, "output_length": 1}\n', r"it needs a \"session_id\""),
    ("t.jsonl", '{"session_id": "s", "timestamp": 0, "input_length": 5, "output_length": 1}\n'
                '{"session_id": "s", "input_length": 5, "output_length": 1}\n', r"line 2: needs \"timestamp\" \(ms\), or"),
    ("t.jsonl", '{"session_id": [], "timestamp": 0, "input_length": 5, "output_length": 1}\n', "non-empty string"),
    ("t.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1, "user": ""}\n', r"\"user\" must be a non-empty"),
    ("t.jsonl", "\n", "holds no request"),
    ("b.csv", "Timestamp,Model,Request tokens\n1,ChatGPT,5\n", r"b.csv: line 1 lacks column\(s\) Response tokens \(Bu"),
    ("b.csv", BURSTGPT_HEADER + "1,ChatGPT,5,3,8,API log\nsoon,ChatGPT,5,3,8,API log\n",
     r"line 3: Timestamp must be seconds >= 0, got 'soon'"),
    ("b.csv", BURSTGPT_HEADER + "1,ChatGPT,0,3,3,API log\n", r"line 2: Request tokens must be a whole number >= 1"),
    ("b.csv", BURSTGPT_HEADER + "1,ChatGPT,5,-2,3,API log\n", r"line 2: Response tokens must be a whole number >= 1"),
    ("b.csv", BURSTGPT_HEADER + "1,ChatGPT,5,0,5,API log\n2,GPT-4,6,0,6,API log\n",
     r"b.csv holds no request \(2 failed request\(s\), with Response tokens 0, left out\)"),
])
def test_bad_traces_name_the_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        load_trace(path)
    assert str(err.value).startswith("--trace:")


def test_parallel_rows_of_a_session_run_at_once_and_the_next_row_waits_on_them_all(tmp_path):
    path = tmp_path / "fanout.jsonl"
    path.write_text('{"session_id": "a", "timestamp": 0, "input_length": 40, "output_length": 8}\n'
                    '{"session_id": "a", "delay": 0, "parallel": 0, "input_length": 30, "output_length": 16}\n'
                    '{"session_id": "a", "delay": 0, "parallel": 0, "input_length": 35, "output_length": 16}\n'
                    '{"session_id": "a", "delay": 0, "input_length": 90, "output_length": 8}\n'
                    '{"session_id": "a", "delay": 500, "parallel": 1, "input_length": 20, "output_length": 4}\n'
                    '{"session_id": "a", "delay": 500, "parallel": 1, "input_length": 20, "output_length": 4}\n'
                    '{"session_id": "a", "delay": 0, "parallel": 2, "input_length": 20, "output_length": 4}\n')
    trace = load_trace(path)
    assert [r.parallel for r in trace.rows] == [None, 0, 0, None, 1, 1, 2]
    assert parallel_groups(trace.sessions[0], trace.rows) == [(0,), (1, 2), (3,), (4, 5), (6,)]
    parents, joins = trace.links()
    # the group on the row before it; the row after a group on its last and, joined, on the rest
    assert parents == [None, 0, 0, 2, 3, 3, 5] and joins == [(3, 1), (6, 4)]


@pytest.mark.parametrize("row, message", [
    ('{"session_id": "a", "timestamp": 0, "parallel": 0, "input_length": 4, "output_length": 1}', "whose earlier row they follow"),
    ('{"timestamp": 0, "parallel": 0, "input_length": 4, "output_length": 1}', "it needs a .session_id."),
    ('{"session_id": "b", "timestamp": 0, "input_length": 4, "output_length": 1}\n'
     '{"session_id": "b", "delay": 0, "parallel": -1, "input_length": 4, "output_length": 1}', "integer >= 0"),
    ('{"session_id": "b", "timestamp": 0, "input_length": 4, "output_length": 1}\n'
     '{"session_id": "b", "delay": 0, "parallel": true, "input_length": 4, "output_length": 1}', "integer >= 0"),
])
def test_a_parallel_row_that_follows_nothing_is_refused_naming_its_line(tmp_path, row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(row + "\n")
    with pytest.raises(ValueError, match=message) as caught:
        load_trace(path)
    assert "line" in str(caught.value) and "\n" not in str(caught.value)

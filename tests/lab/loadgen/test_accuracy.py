"""The accuracy join used by the benchmarks (pure): errors per request against server truth."""

import pytest

from lab.loadgen.accuracy import compare


def test_compare_joins_on_response_id_and_measures_errors():
    truth = {"a": {"t_read": 100.0, "t_chunks": [100.050, 100.060, 100.070]},
             "b": {"t_read": 200.0, "t_chunks": [200.050, 200.060]}}
    records = [
        {"status": "ok", "response_id": "a", "t_start": 99.9995, "ttft_s": 0.0510, "itl_s": [0.0100, 0.0102]},
        {"status": "ok", "response_id": "b", "t_start": 199.999, "ttft_s": 0.0520, "itl_s": [0.0095]},
        {"status": "ok", "response_id": "zzz", "t_start": 1.0, "ttft_s": 0.05, "itl_s": []},
        {"status": "incomplete", "response_id": "a", "t_start": 1.0, "ttft_s": 0.05, "itl_s": []},
    ]
    result = compare(records, truth)
    assert (result.matched, result.unmatched, result.chunks) == (2, 1, 5)
    assert result.ttft.count == 2 and result.ttft.max_abs_ms == pytest.approx(2.0)
    assert result.ttft.mean_ms == pytest.approx(1.5)
    assert result.itl.count == 3 and result.itl.max_abs_ms == pytest.approx(0.5)
    assert result.send_delay.p50_abs_ms == pytest.approx(0.75)
    assert result.ttft.within(2.0, 2.0) and not result.ttft.within(1.0, 3.0)
    assert compare([], truth).ttft.count == 0 and not compare([], truth).ttft.within(1, 3)
    assert result.ttfa is None   # nothing reasoned: no answer start to compare


def test_the_first_answer_token_is_compared_where_the_truth_has_one():
    # a scripted truth line (answer_index) and a capture's (t_answer)
    truth = {"s": {"t_read": 10.0, "t_chunks": [10.02, 10.03, 10.04, 10.05], "answer_index": 2},
             "c": {"t_read": 20.0, "t_chunks": [20.02, 20.03], "t_answer": 20.03}}
    records = [{"status": "ok", "response_id": "s", "t_start": 10.0, "ttft_s": 0.02, "ttfa_s": 0.0405, "itl_s": []},
               {"status": "ok", "response_id": "c", "t_start": 20.0, "ttft_s": 0.02, "ttfa_s": 0.0290, "itl_s": []}]
    result = compare(records, truth)
    assert result.ttfa.count == 2 and result.ttfa.max_abs_ms == pytest.approx(1.0)
    assert result.ttfa.mean_ms == pytest.approx(-0.25)

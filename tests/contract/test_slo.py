"""contract.slo: the one SLO class and the one rule that says whether a set of requests meets it."""

import math

import numpy as np
import pytest

from contract.records import Record
from contract.run_json import RunInfo
from contract.slo import ERROR_RATE_LIMIT, SLO, SloSample, judge, judge_p99s, percentile


@pytest.mark.parametrize("field", ["ttft_ms", "tpot_ms", "e2e_ms"])
@pytest.mark.parametrize("bad", [0, -5, "fast", True])
def test_bad_slo_values_name_the_field_and_the_flag(field, bad):
    with pytest.raises(ValueError, match=f"{field} must be a positive number of milliseconds \\(--slo-{field[:-3]}-ms\\)"):
        SLO(**{field: bad})


def test_command_line_slos_override_run_json():
    run = RunInfo.from_dict({"slo": {"ttft_ms": 300, "e2e_ms": 2000}})
    slo = run.slo.with_overrides(ttft_ms=150, tpot_ms=None)
    assert slo == SLO(ttft_ms=150, tpot_ms=None, e2e_ms=2000)
    assert slo.limits_s() == {"ttft_s": 0.15, "e2e_s": 2.0}
    assert slo.only("e2e_s") == SLO(e2e_ms=2000) and slo.only("tpot_s") == SLO()
    assert slo.to_dict() == {"ttft_ms": 150, "e2e_ms": 2000}
    assert slo.as_dict() == {"ttft_ms": 150, "tpot_ms": None, "e2e_ms": 2000, "ttfa_ms": None}
    assert slo.with_overrides(ttfa_ms=900).limits_s()["ttfa_s"] == 0.9   # a reasoning model's first answer
    assert not SLO().is_set and slo.is_set


def test_run_json_slo_is_read_tolerantly():
    problems = []
    assert SLO.from_dict({"ttft_ms": -1}, problems) == SLO() and "ttft_ms" in problems[0]
    assert SLO.from_dict("fast", problems) == SLO() and "not an object" in problems[1]
    assert SLO.from_dict({"tpot_ms": 20, "unknown": 1}) == SLO(tpot_ms=20)


P99S = {"ttft_s": 0.090, "tpot_s": 0.019, "e2e_s": 1.5}


@pytest.mark.parametrize("error_rate, p99_s, meets, reason", [
    (0.0, P99S, True, ""),
    (None, P99S, True, ""),                         # no answered request: no errors to count
    (0.005, P99S, True, ""),                        # 0.5% errors: within the 1% allowance
    (ERROR_RATE_LIMIT, P99S, True, ""),             # exactly 1%: still sustainable
    (0.015, P99S, False, "error rate 1.5% > 1%"),
    (0.0, {**P99S, "ttft_s": 0.1001}, False, "ttft_s p99 100.1 ms > 100.0 ms"),   # just over
    (0.0, {**P99S, "ttft_s": 0.100}, True, ""),     # limits are inclusive
    (0.0, {**P99S, "tpot_s": None}, False, "no tpot_s values"),
    (0.0, {**P99S, "e2e_s": None}, True, ""),       # no e2e SLO: its values do not matter
    (0.0, {**P99S, "ttft_s": math.inf}, False, "ttft_s p99 unbounded > 100.0 ms: unfinished requests"),
])
def test_predicted_p99s_meet_the_same_limits(error_rate, p99_s, meets, reason):
    check = judge_p99s(SLO(ttft_ms=100, tpot_ms=20), p99_s, error_rate)
    assert (check.meets, check.reason) == (meets, reason)


def test_no_slo_only_errors_decide():
    assert judge(SLO(), SloSample(ok=10)).meets and not judge(SLO(), SloSample(ok=1, failed=1)).meets


def _sample(ok_values, failed=0, unfinished=0, column="ttft_s"):
    return SloSample(ok=len(ok_values), failed=failed, unfinished=unfinished, values={column: ok_values})


@pytest.mark.parametrize("ok, failed, unfinished, meets, reason", [
    (99, 1, 0, True, ""),                           # 1 of 100 answered: exactly 1%, still sustainable
    (198, 2, 0, True, ""),                          # 2 of 200: exactly 1%
    (98, 2, 0, False, "error rate 2.0% > 1%"),      # 2 of 100
    (197, 3, 0, False, "error rate 1.5% > 1%"),
    (99, 1, 40, True, ""),                          # unfinished requests are neither ok nor failed
    (0, 0, 3, True, ""),                            # nothing answered: no error rate
])
def test_the_error_rate_counts_failed_over_answered_requests(ok, failed, unfinished, meets, reason):
    judged = judge(SLO(), SloSample(ok=ok, failed=failed, unfinished=unfinished))
    assert (judged.meets, judged.reason) == (meets, reason)
    assert judged.error_rate == (failed / (ok + failed) if ok + failed else None)
    assert judged.broken_by == (None if meets else "error_rate")


def test_the_p99_is_numpys_linear_percentile_over_the_ok_values():
    values = np.random.default_rng(3).lognormal(-3, 1, 997)
    judged = judge(SLO(ttft_ms=1000), _sample(values))
    assert judged.p99_s["ttft_s"] == float(np.percentile(values, 99))   # exactly the report's method
    assert judged.p99_s["ttft_s"] != float(np.percentile(values, 99, method="higher"))
    assert judged.p99_s == {"ttft_s": judged.p99_s["ttft_s"], "tpot_s": None, "e2e_s": None, "ttfa_s": None}


def test_a_p99_equal_to_its_limit_meets_it_and_a_hair_over_does_not():
    values = np.full(50, 0.25)
    assert judge(SLO(ttft_ms=250), _sample(values)).meets
    over = judge(SLO(ttft_ms=250), _sample(np.append(values[:-1], 0.2501)))
    assert over.p99_s["ttft_s"] == pytest.approx(0.25 + 0.0001 * 0.51)   # 0.99 x 49 = 48.51: between the last two
    assert (over.meets, over.reason, over.broken_by) == (False, "ttft_s p99 250.1 ms > 250.0 ms", "ttft_s")
    assert over.excess == pytest.approx(over.p99_s["ttft_s"] / 0.25)


@pytest.mark.parametrize("ok, unfinished, unbounded", [
    (99, 1, True),      # 100 values: numpy's p99 lies at position 98.01, 1% of the way to the unfinished one
    (100, 2, True),     # 102 values: position 99.99, between the last ok value and the first unfinished
    (100, 1, False),    # 101 values: position 99.00 exactly, the largest ok value, weight 0 on the unfinished
    (300, 2, False),    # 302 values: position 297.99, between two ok values
])
def test_an_unfinished_request_in_the_top_percent_makes_the_p99_unbounded(ok, unfinished, unbounded):
    values = np.random.default_rng(ok).uniform(0.01, 0.09, ok)
    judged = judge(SLO(ttft_ms=100), _sample(values, unfinished=unfinished))
    if unbounded:
        assert judged.p99_s["ttft_s"] == math.inf and not judged.meets
        assert judged.reason == (f"ttft_s p99 unbounded > 100.0 ms: {unfinished} of {ok + unfinished} "
                                 "requests never finished")
    else:   # exact: numpy's figure over the whole set, the unfinished ones only moving the position
        ordered = np.sort(values)
        position = 0.99 * (ok + unfinished - 1)
        low = int(position)
        expected = ordered[low] + (position - low) * (ordered[low + 1] - ordered[low]) if low + 1 < ok else ordered[low]
        assert judged.p99_s["ttft_s"] == pytest.approx(expected, rel=1e-12)
        assert judged.p99_s["ttft_s"] > float(np.percentile(values, 99))   # the position moved up
        assert judged.meets
    # numpy on +inf itself: NaN where the weight on an unfinished one is 0, which the judge avoids
    assert not math.isnan(judged.p99_s["ttft_s"])


def test_percentile_is_numpys_over_the_whole_set_without_its_nans():
    rng = np.random.default_rng(0)
    for _ in range(300):
        ok, unfinished = int(rng.integers(1, 250)), int(rng.integers(0, 6))
        values = rng.exponential(size=ok)
        with np.errstate(invalid="ignore"):
            numpy_says = float(np.percentile(np.append(values, np.full(unfinished, np.inf)), 99))
        ours = percentile(values, 99, unfinished)
        if math.isnan(numpy_says):   # 0 x inf or inf - inf: a huge stand-in shows whether it was read
            stand_in = float(np.percentile(np.append(values, np.full(unfinished, 1e300)), 99))
            numpy_says = math.inf if stand_in > 1e200 else stand_in
        assert ours == numpy_says, (ok, unfinished)
    assert percentile([], 99) is None and percentile([], 99, unfinished=1) == math.inf


def test_unfinished_requests_are_unbounded_in_every_column_tpot_included():
    sample = SloSample(ok=40, unfinished=2, values={"tpot_s": np.full(40, 0.01), "e2e_s": np.full(40, 0.5)})
    judged = judge(SLO(tpot_ms=50), sample)
    assert judged.p99_s["tpot_s"] == judged.p99_s["e2e_s"] == math.inf and not judged.meets
    assert judged.p99_s["ttft_s"] == math.inf   # no ok value, but unfinished ones: unbounded, not "none"


def test_a_set_limit_with_no_values_fails_and_an_unset_one_does_not_matter():
    sample = SloSample(ok=5, values={"e2e_s": np.full(5, 0.2)})
    judged = judge(SLO(ttft_ms=100, e2e_ms=1000), sample)
    assert (judged.meets, judged.reason, judged.broken_by) == (False, "no ttft_s values", "ttft_s")
    assert judged.excess == math.inf
    assert judge(SLO(e2e_ms=1000), sample).meets
    assert not judge(SLO(e2e_ms=1000), SloSample(ok=0)).meets   # nothing at all to judge


def test_ttfa_is_judged():
    sample = SloSample(ok=100, values={"ttft_s": np.full(100, 0.05), "ttfa_s": np.linspace(0.1, 1.2, 100)})
    judged = judge(SLO(ttft_ms=100, ttfa_ms=900), sample)
    assert judged.p99_s["ttfa_s"] == pytest.approx(float(np.percentile(np.linspace(0.1, 1.2, 100), 99)))
    assert (judged.meets, judged.broken_by) == (False, "ttfa_s")
    assert judged.reason == f"ttfa_s p99 {judged.p99_s['ttfa_s'] * 1000:.1f} ms > 900.0 ms"
    assert judge(SLO(ttft_ms=100, ttfa_ms=1200), sample).meets


def test_a_sample_from_records_counts_statuses_and_drops_missing_values():
    def record(status, ttft=0.1, e2e=1.0, tokens=10, ttfa=None):
        return Record(level="c=1", phase="measure", t_start=0.0, status=status, ttft_s=ttft, e2e_s=e2e,
                      output_tokens=tokens, ttfa_s=ttfa)
    records = [record("ok", ttfa=0.3), record("ok", tokens=1), record("ok", ttft=None), record("http_503", e2e=0.01),
               record("timeout"), record("incomplete")]
    cut = record("incomplete")
    cut.switch = "excluded"   # a compare run's request cut off at a slice switch: not the server's doing
    records.append(cut)
    sample = SloSample.from_records(records)
    assert (sample.ok, sample.failed, sample.unfinished, sample.requests) == (3, 2, 1, 6)
    assert sample.values["ttft_s"].tolist() == [0.1, 0.1]
    assert sample.values["tpot_s"].tolist() == pytest.approx([0.1])       # one token: no TPOT; no TTFT: none
    assert sample.values["e2e_s"].tolist() == [1.0, 1.0, 1.0] and sample.values["ttfa_s"].tolist() == [0.3]
    assert sample.error_rate == 0.4


def test_a_sample_refuses_what_it_cannot_judge():
    with pytest.raises(ValueError, match="unknown latency column"):
        SloSample(ok=1, values={"itl_s": [0.1]})
    with pytest.raises(ValueError, match="2 values from 1 ok requests"):
        SloSample(ok=1, values={"e2e_s": [0.1, 0.2]})
    with pytest.raises(ValueError, match="SloSample.failed must be a count"):
        SloSample(ok=1, failed=-1)
    with pytest.raises(ValueError, match="never both true"):
        SloSample.from_arrays(ok=[True], unfinished=[True], e2e_s=[0.1])

"""contract.slo: the one SLO class and the one rule that says whether a level meets it."""

import pytest

from contract.run_json import RunInfo
from contract.slo import ERROR_RATE_LIMIT, SLO, check_level


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
    (None, P99S, True, ""),                         # no finished request: no errors to count
    (0.005, P99S, True, ""),                        # 0.5% errors: within the 1% allowance
    (ERROR_RATE_LIMIT, P99S, True, ""),             # exactly 1%: still sustainable
    (0.015, P99S, False, "error rate 1.5% > 1%"),
    (0.0, {**P99S, "ttft_s": 0.1001}, False, "ttft_s p99 100.1 ms > 100.0 ms"),   # just over
    (0.0, {**P99S, "ttft_s": 0.100}, True, ""),     # limits are inclusive
    (0.0, {**P99S, "tpot_s": None}, False, "no tpot_s values"),
    (0.0, {**P99S, "e2e_s": None}, True, ""),       # no e2e SLO: its values do not matter
])
def test_check_level(error_rate, p99_s, meets, reason):
    check = check_level(SLO(ttft_ms=100, tpot_ms=20), error_rate, p99_s)
    assert (check.meets, check.reason) == (meets, reason)


def test_no_slo_only_errors_decide():
    assert check_level(SLO(), 0.0, {}).meets and not check_level(SLO(), 0.5, {}).meets

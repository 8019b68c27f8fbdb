"""`--hedge-after`: its forms, the running percentile, and the flags that do not fit (contract.hedging)."""

import pytest

from contract.hedging import MIN_SAMPLES, WINDOW, parse_hedge
from loadgen.scenario.run_settings import RunSettings


def test_a_fixed_delay_and_a_running_percentile():
    assert parse_hedge("200ms").delay() == 0.2 and parse_hedge("2s").delay() == 2.0 and parse_hedge("0.5").delay() == 0.5
    assert parse_hedge(None) is None and parse_hedge("") is None
    rule = parse_hedge("p90")
    for k in range(MIN_SAMPLES - 1):
        rule.note(k / 100)
    assert rule.delay() is None   # too few answers to know the percentile: no hedging yet
    rule.note(None)
    rule.note(float("nan"))
    rule.note(0.19)
    assert rule.delay() == pytest.approx(0.171)   # numpy's p90 of 0.00 ... 0.19
    for _ in range(WINDOW):
        rule.note(1.0)
    assert rule.delay() == 1.0   # the last WINDOW answers only
    assert rule.spec == "p90" and parse_hedge("250ms").spec == "0.25s"


@pytest.mark.parametrize("text, says", [("-1", "must not be negative"), ("p0", "p1 ... p99.9"),
                                        ("p100", "neither a delay"), ("soon", "neither a delay")])
def test_a_bad_delay_names_the_flag(text, says):
    with pytest.raises(ValueError, match="--hedge-after") as caught:
        parse_hedge(text)
    assert says in str(caught.value)


def test_the_flags_that_do_not_fit():
    with pytest.raises(ValueError, match="--hedge-host .* needs --hedge-after"):
        RunSettings(hedge_host="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="must be a URL"):
        RunSettings(hedge_after="p95", hedge_host="127.0.0.1:9")
    assert RunSettings(hedge_after="p95", hedge_host="http://127.0.0.1:9").hedge_after == "p95"

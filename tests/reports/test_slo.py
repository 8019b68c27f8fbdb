"""reports.slo: DistServe goodput checked by hand on a small table (the SLO itself: tests/contract)."""

import numpy as np
import pandas as pd
import pytest

from reports.slo import goodput_rps, request_meets_slo
from contract.slo import SLO


def _table() -> pd.DataFrame:
    # ttft, tpot and e2e in seconds; by hand against ttft <= 100 ms, tpot <= 20 ms, e2e <= 1 s:
    rows = [
        ("ok", 0.050, 0.010, 0.5),     # meets all
        ("ok", 0.150, 0.010, 0.6),     # TTFT miss
        ("ok", 0.080, 0.030, 0.9),     # TPOT miss
        ("ok", 0.090, 0.015, 1.2),     # E2E miss
        ("ok", 0.100, np.nan, 0.1),    # one output token: no TPOT, meets (limits are inclusive)
        ("http_500", 0.010, 0.001, 0.02),  # fast but failed: never counts
        ("ok", 0.020, 0.020, 1.0),     # exactly at every limit: meets
    ]
    return pd.DataFrame(rows, columns=["status", "ttft_s", "tpot_s", "e2e_s"])


def test_goodput_counts_only_requests_meeting_every_slo():
    slo = SLO(ttft_ms=100, tpot_ms=20, e2e_ms=1000)
    assert request_meets_slo(_table(), slo).tolist() == [True, False, False, False, True, False, True]
    assert goodput_rps(_table(), slo, duration_s=2.0) == pytest.approx(3 / 2.0)


def test_goodput_with_one_slo_ignores_the_others():
    slo = SLO(ttft_ms=100)
    assert request_meets_slo(_table(), slo).tolist() == [True, False, True, True, True, False, True]
    assert goodput_rps(_table(), slo, duration_s=10.0) == pytest.approx(0.5)


def test_no_slo_means_no_goodput():
    assert goodput_rps(_table(), SLO(), duration_s=1.0) is None
    assert not SLO().is_set

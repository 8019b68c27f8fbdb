"""servecap.sweep.knee_search: the --auto ramp and bisection, on made-up pass/fail answers."""

import pytest

from servecap.sweep.knee_search import search_knee


@pytest.mark.parametrize("knee, tried, found", [
    (6, [1, 2, 4, 8, 6, 7], (6, 7)),             # ramp to the first miss, bisect to adjacent levels
    (0, [1], (None, 1)),                         # even one user misses
    (1, [1, 2], (1, 2)),
    (100, [1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104], (96, 104)),    # stops within 12.5% of 96
    (300, [1, 2, 4, 8, 16, 32, 64, 128, 256], (256, None)),           # never misses up to the limit
])
def test_search(knee, tried, found):
    asked = []

    def meets(concurrency: int) -> bool:
        asked.append(concurrency)
        return concurrency <= knee

    result = search_knee(meets, max_concurrency=256)
    assert asked == tried and (result.max_meeting_slo, result.first_failing) == found
    # every level tried at or below the answer met the SLO and every one above it missed
    assert all((c <= (result.max_meeting_slo or 0)) == (c <= knee) for c in asked)

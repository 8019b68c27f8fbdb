"""The number checks every config and calculator shares: what passes, and the one wording of each error."""

import math

import numpy as np
import pytest

from contract.checks import non_negative_int, non_negative_number, positive_int, positive_number


def test_each_check_returns_what_passes():
    assert positive_int("n", 3) == 3 and positive_int("n", None, allow_none=True) is None
    assert non_negative_int("n", 0) == 0
    assert positive_number("x", 2) == 2.0 and isinstance(positive_number("x", 2), float)
    assert non_negative_number("x", 0) == 0.0 and positive_number("x", math.inf) == math.inf


@pytest.mark.parametrize("check, value, message", [
    (positive_int, 0, "n must be a positive integer, got 0"),
    (positive_int, True, "n must be a positive integer, got True"),
    (positive_int, 2.0, "n must be a positive integer, got 2.0"),
    (positive_int, np.int64(2), "n must be a positive integer"),        # would not write to JSON
    (positive_int, None, "n must be a positive integer, got None"),
    (non_negative_int, -1, "n must be a non-negative integer, got -1"),
    (non_negative_int, False, "n must be a non-negative integer, got False"),
    (positive_number, 0, "n must be positive, got 0"),
    (positive_number, math.nan, "n must be positive, got nan"),
    (positive_number, "3", "n must be positive, got '3'"),
    (non_negative_number, -0.5, "n must be >= 0, got -0.5"),
    (non_negative_number, True, "n must be >= 0, got True"),
])
def test_each_check_names_the_field_and_the_value(check, value, message):
    with pytest.raises(ValueError) as err:
        check("n", value)
    assert str(err.value).startswith(message)

"""Displayed numbers: significant digits, distinct values stay distinct, intervals."""

from __future__ import annotations

import pytest

from reprobridge.report.numbers import (
    fmt_ci,
    fmt_delta,
    fmt_opt,
    fmt_value,
    fmt_values,
    round_numbers,
)
from reprobridge.stats import summarize


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.8803333333333333, "0.8803"), (0, "0"), (1234567.0, "1.235e+06"), (12.5, "12.5")],
)
def test_fmt_value(value: float, shown: str) -> None:
    assert fmt_value(value) == shown


def test_close_values_get_the_digits_that_tell_them_apart() -> None:
    assert fmt_values([0.88034, 0.88031, 0.88034]) == ["0.88034", "0.88031", "0.88034"]
    assert fmt_values([0.5, 0.25]) == ["0.5", "0.25"]


def test_claim_text_is_rounded() -> None:
    assert round_numbers("0.8803333333333333 > 0.85") == "0.8803 > 0.85"
    assert round_numbers("0.8803333333333333 - 0.0100000001 >= 0.5") == "0.8803 - 0.01 >= 0.5"
    # Numbers that would print equal keep the digits that make the comparison readable.
    assert round_numbers("0.880341234 > 0.880311234") == "0.88034 > 0.88031"
    # Words, versions and exit codes are left alone.
    assert round_numbers("python 3.11.2 exit(127) a.b2") == "python 3.11.2 exit(127) a.b2"


def test_fmt_ci() -> None:
    assert fmt_ci(summarize([0.8803333333333333])) == "n/a (n=1)"
    assert fmt_ci(summarize([0.88]), mean=True) == "0.88 [n/a (n=1)]"
    s = summarize([0.91, 0.89, 0.93, 0.90, 0.92])
    assert fmt_ci(s) == "[0.8904, 0.9296]"
    assert fmt_ci(s, mean=True) == "0.91 [0.8904, 0.9296]"
    clipped = summarize([0.99, 1.0, 0.97], value_range=(0, 1))
    assert fmt_ci(clipped) == "[0.9487, 1] (clipped to the range [0, 1]; raw [0.9487, 1.025])"


def test_an_absent_value_or_difference_is_a_dash_and_a_difference_has_its_sign() -> None:
    assert [fmt_opt(None), fmt_opt(0.88031)] == ["—", "0.8803"]
    assert [fmt_delta(None), fmt_delta(0.01), fmt_delta(-0.02), fmt_delta(0.0)] == [
        "—",
        "+0.01",
        "-0.02",
        "0",
    ]

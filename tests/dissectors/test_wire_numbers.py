"""``dissectors._wire.ascii_decimal``: the one parser of decimal protocol integers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dissectors._wire import MAX_DECIMAL_DIGITS, ascii_decimal


@pytest.mark.parametrize(
    "text,value",
    [
        ("0", 0),
        ("200", 200),
        (b"404", 404),
        (bytearray(b"7"), 7),
        ("0012", 12),
        ("9" * 19, 10**19 - 1),
    ],
)
def test_ascii_digits(text, value):
    assert ascii_decimal(text) == value


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "²",
        "²00",
        "٢٠٠",
        "２００",
        "+7",
        "-7",
        " 7",
        "7 ",
        "7_0",
        "0x10",
        "1e3",
        "1.0",
        b"\xb2",
        "9" * 20,
    ],
)
def test_anything_else_is_none(text):
    assert ascii_decimal(text) is None


def test_max_digits_bounds_the_work():
    assert ascii_decimal("7" * 5000) is None  # int() would raise past 4,300 digits
    assert ascii_decimal("7" * 30, max_digits=30) == int("7" * 30)


@given(st.text(max_size=25))
def test_agrees_with_the_ascii_definition(s):
    ok = 0 < len(s) <= MAX_DECIMAL_DIGITS and all("0" <= ch <= "9" for ch in s)
    assert ascii_decimal(s) == (int(s) if ok else None)

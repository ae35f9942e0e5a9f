"""The text report (issue 16: the findings' rows read once and only the columns the
summary and the verdict need, text columns converted at once, a line that fits not sent
through textwrap) prints what main's printed, kept as the oracle in text_oracle.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import text_oracle as oracle

import pcapkit
from pcapkit.report import text
from pcapkit.rows import column_arrays, columns

ROOT = Path(__file__).resolve().parents[2]

WRAPPED = [
    "",
    " ",
    "   ",
    "a ",
    " a",
    "a  b",
    "x" * 94,
    "x" * 95,
    "x" * 96,
    "x" * 95 + " ",
    "x" * 90 + " yyyy",
    "x" * 90 + " yyyyy",
    "x" * 90 + " yyyyyy",
    "a\tb",
    "a\nb",
    "a\rb",
    "a\x0bb\x0cc",
    "a\xa0b",
    "a\u2003b",
    "é" * 95,
    "word-with-hyphens " * 3,
    "flow 3 (tcp.stream 3) 10.0.0.1:443: 12.00 ms — tcp_hol_blocking ×2 (12.00 ms)",
    "frames: hole 1, 2; victim 3",
    "x" * 300,
    "a " * 80,
]


@pytest.mark.parametrize("indent", ["", "  ", "      "])
@pytest.mark.parametrize("s", WRAPPED, ids=repr)
def test_wrap_is_textwrap(s: str, indent: str) -> None:
    want = textwrap.wrap(s, width=100, initial_indent=indent, subsequent_indent=indent + "  ")
    assert text._wrap(s, indent) == (want or [indent])
    assert text._wrap(s, indent) == oracle._wrap(s, indent)


def test_text_values_are_what_itertuples_yields() -> None:
    arrays = [
        pd.array(["a", None, "é"], dtype="str"),
        pd.array(["a", None, "é"], dtype="string"),
        pd.array([1, None, 3], dtype="Int64"),
        pd.array([0.5, None, 1.0], dtype="Float64"),
        pd.Categorical(["a", None, "b"]),
        np.array([1, 2, 3]),
        np.array([0.5, np.nan, 1.0]),
        np.array([{"a": 1}, None, [1]], dtype=object),
    ]
    for a in arrays:
        df = pd.DataFrame({"c": a})
        (got,) = [text._text_values(x) for x in column_arrays(df)]
        (want,) = columns(df)  # what rows.itertuples yields
        assert [type(x) for x in got] == [type(x) for x in want], a
        assert [repr(x) for x in got] == [repr(x) for x in want], a


def _same_report(t: pcapkit.Trace, **kw: object) -> None:
    assert text.analysis_text(t, **kw) == oracle.analysis_text(t, **kw), kw  # type: ignore[arg-type]


def test_findings_without_a_flow_and_hostile_text() -> None:
    """Findings on no connection (flow missing) are listed after the connections, and a
    finding whose text a capture controls prints as main printed it."""
    path = ROOT / "fixtures" / "nagle_wwr" / "client.pcapng"
    with pcapkit.open(path) as t:
        f = t.findings.copy()
        assert len(f)
        f.loc[f.index[0], "flow"] = pd.NA
        f.loc[f.index[-1], "explanation"] = "a\tb\r\n" + "x" * 120 + " \x1b[31m"
        f.loc[f.index[-1], "remedy"] = " " * 3
        for kw in ({}, {"max_flows": 0}, {"max_flows": None}):
            _same_report(t, findings=f, **kw)
        assert text.verdict(f) == oracle.verdict(f)

"""Every public table is declared once in pcapkit.schema and built with its declared columns."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcapkit
from pcapkit import schema

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_describe_lists_every_table() -> None:
    d = schema.describe()
    assert list(d["table"]) == list(schema.SCHEMAS)
    assert d["description"].str.len().min() > 10
    for name in schema.SCHEMAS:
        cols = schema.describe(name)
        assert list(cols["column"]) == schema.columns(name)
    with pytest.raises(KeyError, match="tables: packets"):
        schema.describe("nope")


@pytest.mark.parametrize("capture", ["tls_sse_nagle/client.pcapng", "h3_sse_drop/client.pcapng"])
def test_every_trace_table_has_its_declared_columns_and_dtypes(capture: str) -> None:
    with pcapkit.open(FIX / capture) as t:
        for name in schema.SCHEMAS:
            df = getattr(t, name)
            assert list(df.columns) == schema.columns(name), name
            empty = schema.frame(name, n=0)
            for c in df.columns:
                assert str(df[c].dtype) == str(empty[c].dtype), (name, c, df[c].dtype)
        assert len(t.gaps) > 0 and len(t.requests) > 0


@pytest.mark.parametrize("names", [[""], ["abc"], ["", "ClientHello", "Finished"], ["ü→x", "b"]])
def test_strings_one_value_or_many_equals_the_take(names: list[str]) -> None:
    """Synthetic codes (not traffic): ``schema.strings`` — its one-value path (offsets and
    bytes made directly) and its take — gives what a take over the names gives."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(5)
    dtype = pd.api.types.pandas_dtype("str")
    for n in (0, 1, 7, 5000):
        for codes in (
            np.zeros(n, np.int32),
            np.full(n, len(names) - 1, np.int32),
            rng.integers(0, len(names), n).astype(np.int32),
        ):
            got = schema.strings(codes, names)
            want = pd.array(np.asarray(names, dtype=object)[codes], dtype=dtype)
            assert got.dtype == want.dtype and len(got) == n
            assert got.tolist() == want.tolist()
    # a code outside the names is the take's error, one value in every row or not
    with pytest.raises(IndexError):
        schema.strings(np.full(3, -1, np.int32), names)

"""The report and export layers' fast paths give what the pandas calls they replace give.

``pcapkit.rows.itertuples`` stands for ``DataFrame.itertuples(index=False)`` and
``pcapkit.export.tables.write_csv`` for ``to_csv_frame(with_datetimes(df)).to_csv()``
(issue 15: they were most of a fuzz mutant's CPU); these tests compare them with the
pandas originals on every table of real captures, empty tables included.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcapkit
from pcapkit import schema
from pcapkit.export.tables import to_csv_frame, with_datetimes, write_csv
from pcapkit.rows import itertuples

FIX = Path(__file__).resolve().parent.parent / "fixtures"
# TCP + TLS + HTTP/2 (findings, requests, gaps), QUIC + HTTP/3, and one without keys
CAPTURES = [
    FIX / "h2_sse_drop" / "client.pcapng",
    FIX / "h3_streams_drop" / "client.pcapng",
    FIX / "grpc_stream" / "server.pcapng",
]


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if a is None or a is pd.NA or a is pd.NaT:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


def _tables(path: Path, keys: bool) -> list[tuple[str, pd.DataFrame]]:
    t = pcapkit.open(str(path), embedded_keys=keys)
    out = []
    for name in schema.SCHEMAS:
        df = getattr(t, name)
        out += [(name, df), (name + "+datetimes", with_datetimes(df))]
    t.close()
    return out


@pytest.mark.parametrize("keys", [True, False], ids=["keys", "nokeys"])
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.parent.name)
def test_itertuples_equals_pandas(path: Path, keys: bool) -> None:
    rows = 0
    for name, df in _tables(path, keys):
        want = list(df.itertuples(index=False))
        got = list(itertuples(df))
        assert len(got) == len(want), name
        for w, g in zip(want, got, strict=True):
            assert type(g).__name__ == type(w).__name__ == "Pandas", name
            assert g._fields == w._fields, name
            bad = [(f, x, y) for f, x, y in zip(w._fields, w, g, strict=True) if not _same(x, y)]
            assert not bad, (name, bad[:3])
        rows += len(got)
    assert rows > 100  # the comparison saw real rows


def test_itertuples_of_a_frame_without_columns_or_rows() -> None:
    assert list(itertuples(pd.DataFrame(index=range(3)))) == list(
        pd.DataFrame(index=range(3)).itertuples(index=False)
    )
    empty = pd.DataFrame({"a": pd.Series(dtype="Int64"), "b": pd.Series(dtype=object)})
    assert list(itertuples(empty)) == []


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.parent.name)
def test_write_csv_equals_pandas(path: Path, tmp_path: Path) -> None:
    empty = full = 0
    for name, df in _tables(path, True):
        if name.endswith("+datetimes"):
            continue
        p = tmp_path / f"{name}.csv"
        write_csv(df, p)
        want = to_csv_frame(with_datetimes(df)).to_csv(index=False)
        assert p.read_text(encoding="utf-8") == want, name
        empty += len(df) == 0
        full += len(df) > 0
    assert empty and full  # both paths ran


@pytest.mark.parametrize("n", [0, 1, 7])
def test_absent_columns_are_missing_values_of_the_schema_dtype(n: int) -> None:
    """``schema.frame`` fills an absent column by repeating one built missing value: the
    same array type, dtype and (for a Categorical) inferred categories as n Nones give."""
    for table, cols in schema.SCHEMAS.items():
        df = schema.frame(table, n=n)
        assert len(df) == n and list(df.columns) == [c for c, _, _ in cols]
        for c, dtype, _ in cols:
            s = df[c]
            if dtype == "category":
                want = pd.Categorical([None] * n)
                assert s.cat.categories.dtype == want.categories.dtype, (table, c)
                assert s.isna().all()
            elif dtype in ("str", "object", "boolean") or dtype[0].isupper():
                want = pd.array([None] * n, dtype=dtype)
                assert type(s.array) is type(want), (table, c)
                assert s.dtype == pd.Series(want).dtype, (table, c)
                assert s.isna().all()
            else:
                assert str(s.dtype) == dtype and not s.any(), (table, c)


@pytest.mark.parametrize("path", CAPTURES[:1], ids=lambda p: p.parent.name)
def test_column_arrays_are_the_series_arrays(path: Path) -> None:
    """``column_arrays`` (the block manager's arrays) are the arrays ``df.items()``
    Series hold: an extension column's ``s.array``, a numpy column's ``to_numpy()``."""
    from pcapkit.rows import column_arrays

    seen = set()
    for name, df in _tables(path, True):
        arrays = column_arrays(df)
        assert len(arrays) == df.shape[1], name
        for (c, s), a in zip(df.items(), arrays, strict=True):
            if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biufcO":
                assert isinstance(a, np.ndarray) and a.dtype == s.dtype, (name, c)
                assert a.tolist() == s.to_numpy().tolist(), (name, c)
            else:
                assert type(a) is type(s.array) and a.dtype == s.dtype, (name, c)
                assert all(_same(x, y) for x, y in zip(a, s.array, strict=True)), (name, c)
            seen.add(type(a).__name__)
    # numpy, nullable, string, categorical and datetime columns were all compared
    assert {"ndarray", "IntegerArray", "ArrowStringArray", "Categorical"} <= seen
    assert "DatetimeArray" in seen


def test_empty_frames_are_independent_copies() -> None:
    """``schema.frame(table)`` without rows is a copy of one built once: the same
    dtypes as a fresh build, and changing one never reaches the next."""
    for table in schema.SCHEMAS:
        a, b = schema.frame(table), schema._build(table, {}, 0)
        assert list(a.columns) == list(b.columns) and a.dtypes.equals(b.dtypes), table
    a = schema.frame("findings")
    a["extra"] = []
    a.index.name = "changed"
    a.attrs["x"] = 1
    b = schema.frame("findings")
    assert "extra" not in b.columns and b.index.name is None and not b.attrs
    assert schema.frame("findings", n=3).shape == (3, b.shape[1])  # rows: built, not cached


def _request_metrics_pandas(q: pd.DataFrame) -> pd.DataFrame:
    """``report.diff.request_metrics`` as it was written with pandas' Float64 operations."""
    from pcapkit.report.diff import REQUEST_METRICS

    span = (q.last_byte_ts_ns.astype("Float64") - q.response_ts_ns.astype("Float64")) / 1e9
    bps = (q.response_body_bytes.astype("Float64") / span).where(span > 0)
    out = {c: q[c] for c in ("request", "flow", "stream", "method", "authority", "path")}
    for c in REQUEST_METRICS:
        if c in q.columns:
            out[c] = q[c].astype("Float64")
    took = q.last_byte_ts_ns.astype("Float64") - q.request_start_ts_ns.astype("Float64")
    out["response_ms"] = (took / 1e6).astype("Float64")
    out["bytes_per_s"] = bps.astype("Float64")
    cols = ["request", "flow", "stream", "method", "authority", "path", *REQUEST_METRICS]
    return pd.DataFrame({c: out[c] for c in cols}, index=q.index)


def _cells(s: pd.Series) -> list[Any]:
    return [("NA",) if v is pd.NA else ("nan",) if v != v else (type(v), v) for v in s]


def test_request_metrics_equals_pandas_float64() -> None:
    """Spans positive, zero, negative and missing; bodies missing; epoch-size ns (the
    float64 rounding of the int64 → Float64 conversion is the same)."""
    from pcapkit.report.diff import request_metrics

    t0 = 1_796_005_387_708_218_164
    na = None
    q = schema.frame(
        "requests",
        {
            "request": [0, 1, 2, 3, 4, 5],
            "flow": [0, 0, 1, 1, 2, 2],
            "request_start_ts_ns": [t0, t0, na, t0 + 7, t0, t0],
            "response_ts_ns": [t0 + 10, t0 + 5, t0 + 5, na, t0 + 9, t0 + 1_000_000_001],
            "last_byte_ts_ns": [t0 + 5_000_000_123, t0 + 5, t0 + 3, t0 + 9, na, t0 + 10**12],
            "response_body_bytes": [1234, 10, 7, 8, 9, na],
            "ttfb_ms": [1.5, na, float("nan"), 0.0, 2.25, na],
        },
    )
    want, got = _request_metrics_pandas(q), request_metrics(q)
    assert list(got.columns) == list(want.columns) and got.dtypes.equals(want.dtypes)
    for c in want.columns:
        assert _cells(got[c]) == _cells(want[c]), c
    assert got["bytes_per_s"].isna().tolist() == [False, True, True, True, True, True]
    for path in CAPTURES:  # real requests tables
        q = pcapkit.open(str(path)).requests
        want, got = _request_metrics_pandas(q), request_metrics(q)
        assert len(q) and all(_cells(got[c]) == _cells(want[c]) for c in want.columns)


def _tcp_turns_pandas(trace: Any) -> pd.DataFrame:
    """``report.diff.tcp_turns`` as it was written with pandas (filter, sort, cumcount)."""
    cols = ["flow", "turn", "request_ts_ns", "response_ts_ns", "exchange_ms"]
    seg = trace.segments
    if len(seg) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    http = set(trace.requests.flow.tolist())
    seg = seg[(seg.new_bytes.to_numpy() > 0) & ~seg.flow.isin(list(http)).to_numpy(bool)]
    seg = seg.sort_values(["flow", "ts_ns", "frame"], kind="stable")
    flow = seg.flow.to_numpy(np.int64)
    c2s = (seg.dir.astype(str) == "c2s").to_numpy(bool)
    ts = seg.ts_ns.to_numpy(np.int64)
    if len(flow) == 0:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    start = np.ones(len(flow), bool)
    start[1:] = (flow[1:] != flow[:-1]) | (c2s[1:] != c2s[:-1])
    idx = np.flatnonzero(start)
    r_flow, r_c2s, r_ts = flow[idx], c2s[idx], ts[idx]
    i = np.flatnonzero(r_c2s[:-1] & ~r_c2s[1:] & (r_flow[:-1] == r_flow[1:]))
    out = pd.DataFrame(
        {
            "flow": r_flow[i],
            "request_ts_ns": r_ts[i],
            "response_ts_ns": r_ts[i + 1],
            "exchange_ms": (r_ts[i + 1] - r_ts[i]) / 1e6,
        }
    )
    out.insert(1, "turn", out.groupby("flow").cumcount())
    return out[cols]


@pytest.mark.parametrize(
    "path",
    [
        FIX / "connection_pool_queueing_control" / "client.pcapng",  # 24 turns on 8 flows
        FIX / "tls_resumption_rejected" / "client.pcapng",
        CAPTURES[2],
    ],
    ids=lambda p: p.parent.name,
)
def test_tcp_turns_equals_pandas(path: Path) -> None:
    """Turns of the non-HTTP TCP connections, keys with and without (the HTTP flows are
    excluded only when their requests are read)."""
    from pcapkit.report.diff import tcp_turns

    seen = 0
    for keys in (True, False):
        t = pcapkit.open(str(path), embedded_keys=keys)
        want, got = _tcp_turns_pandas(t), tcp_turns(t)
        assert list(got.columns) == list(want.columns) and got.dtypes.equals(want.dtypes)
        assert got.equals(want) and type(got.index) is type(want.index)
        seen += len(got)
    assert seen  # the comparison saw turns (without keys: TLS connections are not HTTP)


def test_empty_gaps_frame_is_the_schema_empty_table() -> None:
    """``detect.gaps`` returns the schema's cached empty table when no gap was found:
    the frame its row lists would build has the same columns and dtypes."""
    from pcapkit.detect import gaps

    rows: dict[str, list[Any]] = {
        c: [] for c in schema.columns("gaps") if c not in gaps.TWO_VANTAGE_COLUMNS
    }
    data: dict[str, Any] = dict(rows)
    for c in ("stream", "frame"):
        data[c] = pd.array([], dtype="Int64")
    built = schema.frame("gaps", data, 0)
    got = gaps._frame(rows)
    assert list(got.columns) == list(built.columns) and got.dtypes.equals(built.dtypes)
    assert len(got) == 0 and type(got.index) is type(built.index)

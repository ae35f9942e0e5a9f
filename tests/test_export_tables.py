"""pcapkit export --tables: every table reloads into pandas with equal values (issue 14)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit import schema
from pcapkit.cli import cli
from pcapkit.report.json import to_jsonable

FIX = Path(__file__).resolve().parent.parent / "fixtures"
# a capture with findings (evidence, details), requests with headers, gaps, h2 windows
CAPTURE = FIX / "h2_sse_drop" / "client.pcapng"


def _norm(v: Any) -> Any:
    """A value as JSON would carry it (missing → None, numpy → Python, tuples → lists)."""
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in v):
            # a Parquet map read back: (key, JSON value) pairs
            try:
                return {k: json.loads(x) for k, x in v}
            except (TypeError, ValueError):
                pass
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _norm(x) for k, x in v.items()}
    v = to_jsonable(v)
    if isinstance(v, float) and (math.isnan(v) or v == int(v)):
        return None if math.isnan(v) else int(v)
    return v


def _same(a: Any, b: Any) -> bool:
    a, b = _norm(a), _norm(b)
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-12)
    return a == b


def _from_csv(x: Any, y: Any, nested: bool) -> tuple[Any, Any]:
    """A CSV cell (text) read back in the original value's type."""
    if isinstance(x, str) and x == "":
        x = None  # CSV has no empty string apart from a missing value
    if not isinstance(y, str):
        return x, y
    if nested:
        return x, json.loads(y)
    n = _norm(x)
    if isinstance(n, bool):
        return x, y == "True"
    if isinstance(n, int):
        return x, int(float(y)) if "." in y or "e" in y else int(y)
    if isinstance(n, float):
        return x, float(y)
    return x, y


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_every_table_reloads_with_equal_values(tmp_path: Path, fmt: str) -> None:
    r = CliRunner().invoke(
        cli, ["export", str(CAPTURE), "--tables", str(tmp_path), "--format", fmt]
    )
    assert r.exit_code == 0, r.output
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f"{t}.{fmt}" for t in schema.SCHEMAS)
    with pcapkit.open(CAPTURE) as t:
        for name in schema.SCHEMAS:
            orig = getattr(t, name)
            path = tmp_path / f"{name}.{fmt}"
            if fmt == "parquet":
                back = pd.read_parquet(path)
            elif fmt == "csv":
                # as text: CSV carries no types (read_csv would make Int64-with-nulls float)
                back = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
            else:  # one JSON object per line, kept as objects (ints with nulls stay ints)
                lines = path.read_text().splitlines()
                back = pd.DataFrame([json.loads(x) for x in lines], dtype=object) if lines else None
            if back is None or len(orig) == 0:
                assert len(orig) == 0 or back is not None
                continue
            assert len(back) == len(orig), name
            for c in orig.columns:
                assert c in back.columns, (name, c)
                nested = orig[c].dtype == object
                for i, (x, y) in enumerate(zip(orig[c].tolist(), back[c].tolist(), strict=True)):
                    if fmt == "csv":
                        x, y = _from_csv(x, y, nested)
                    assert _same(x, y), (name, c, i, x, y)
                if c.endswith("_ts_ns") and fmt != "jsonl":
                    ts = back[c[:-3]]
                    got = pd.to_datetime(ts, utc=True)
                    want = pd.to_datetime(orig[c].astype("Int64"), unit="ns", utc=True)
                    assert got.tolist() == want.tolist(), (name, c)


def test_parquet_keeps_nested_values_nested(tmp_path: Path) -> None:
    with pcapkit.open(CAPTURE) as t:
        from pcapkit.export.tables import export_tables

        export_tables(t, tmp_path, "parquet", ["findings", "requests"])
    f = pd.read_parquet(tmp_path / "findings.parquet")
    ev = f.evidence.iloc[0]
    assert isinstance(ev[0], dict) and set(ev[0]) == {"frame", "role", "ts_ns"}
    assert all(isinstance(x, int) for x in f.frames.iloc[0].tolist())
    assert str(f.t_start.dtype) == "datetime64[ns, UTC]"
    q = pd.read_parquet(tmp_path / "requests.parquet")
    assert list(q.request_headers.iloc[0][0]) == [":method", "GET"]


def test_export_needs_a_destination() -> None:
    r = CliRunner().invoke(cli, ["export", str(CAPTURE)])
    assert r.exit_code == 2 and "needs --tables DIR or --qlog DIR" in r.output

"""Every table of a capture as files other tools load: Parquet, CSV or JSON Lines.

``pcapkit export CAPTURE --tables DIR --format parquet|csv|jsonl`` writes
``DIR/<table>.<format>`` for every table of :mod:`pcapkit.schema` (issue 14):

* every ``*_ts_ns`` column (integer ns since the epoch) gets a ``*_ts`` column beside
  it, a UTC timestamp, so pandas, DuckDB and Polars read times directly;
* nested columns are real nested values in Parquet — ``frames`` a list of integers,
  ``evidence`` a list of structs, header lists a list of [name, value] pairs, and the
  detector-specific ``details`` (whose keys differ per kind) a map of name to its
  JSON-encoded value — and JSON text in CSV (never a Python repr); in JSON Lines they
  are plain JSON;
* Parquet needs pyarrow (``pip install 'pcapkit-forensics[export]'``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from ..report.json import to_jsonable
from ..rows import column_arrays, itertuples
from ..trace import Trace

FORMATS = ("parquet", "csv", "jsonl")


# epoch-time columns not named *_ts_ns (findings' interval)
EPOCH_COLUMNS = ("t_start_ns", "t_end_ns")


_NAT = np.iinfo(np.int64).min  # NaT as int64 nanoseconds


def _is_epoch(c: Any) -> bool:
    return str(c).endswith("_ts_ns") or c in EPOCH_COLUMNS


def _datetimes(s: pd.Series) -> Any:
    """``pd.to_datetime(s, unit="ns", utc=True)``'s values: an int64 or Int64 column's
    nanoseconds viewed as datetime64[ns] (NA → NaT), localised to UTC."""
    if s.dtype == np.int64 or isinstance(s.dtype, pd.Int64Dtype):
        v = s.to_numpy(dtype=np.int64, na_value=_NAT)
        return pd.DatetimeIndex(v.view("M8[ns]")).tz_localize("UTC").array
    return pd.to_datetime(s.astype("Int64"), unit="ns", utc=True).array


def _with_datetimes(df: pd.DataFrame, nested_as_json: bool) -> pd.DataFrame:
    """:func:`with_datetimes`, and with ``nested_as_json`` :func:`to_csv_frame` of it,
    built in one DataFrame construction from the columns' arrays (no copy; an object
    column stays a Series: pandas would infer strings from a bare object array)."""
    data: dict[Any, Any] = {}
    for c, a in zip(df.columns.tolist(), column_arrays(df), strict=True):
        if isinstance(a, np.ndarray) and a.dtype == object:
            if nested_as_json:
                data[c] = [_json(v) for v in a.tolist()]
            else:
                data[c] = pd.Series(a, index=df.index, dtype=object, copy=False)
        else:
            data[c] = a
        if _is_epoch(c):
            data[str(c)[: -len("_ns")]] = _array_datetimes(a, df.index)
    return pd.DataFrame(data, index=df.index, copy=False)


def _array_datetimes(a: Any, index: pd.Index) -> Any:
    """:func:`_datetimes` of the column whose array is ``a``."""
    if isinstance(a, np.ndarray) and a.dtype == np.int64:  # a copy: the table keeps its own
        return pd.DatetimeIndex(a.astype("M8[ns]")).tz_localize("UTC").array
    if isinstance(a.dtype, pd.Int64Dtype):
        v = a.to_numpy(dtype=np.int64, na_value=_NAT)
        return pd.DatetimeIndex(v.view("M8[ns]")).tz_localize("UTC").array
    return _datetimes(pd.Series(a, index=index, copy=False))


def with_datetimes(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a UTC timestamp column after every epoch-ns column (``x_ts_ns`` →
    ``x_ts``, ``t_start_ns`` → ``t_start``)."""
    return _with_datetimes(df, nested_as_json=False)


def _json(v: Any) -> str | None:
    if v is None or v is pd.NA:
        return None
    return json.dumps(to_jsonable(v), sort_keys=True)


def _object_columns(df: pd.DataFrame) -> list[str]:
    return [str(c) for c, t in zip(df.columns, df.dtypes.tolist(), strict=True) if t == object]  # noqa: E721


def to_csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Nested values as JSON text (CSV has no lists)."""
    out = df.copy()
    for c in _object_columns(out):
        out[c] = [_json(v) for v in out[c].tolist()]
    return out


def _arrow_column(values: list[Any]) -> Any:
    """A pyarrow array for a column of nested Python values (lists, tuples, dicts)."""
    import pyarrow as pa

    present = [v for v in values if v is not None and v is not pd.NA]
    if present and all(isinstance(v, dict) for v in present):
        # keys differ per row (a finding's details per kind): a map of JSON values
        return pa.array(
            [
                None
                if v is None or v is pd.NA
                else [(str(k), json.dumps(to_jsonable(x))) for k, x in v.items()]
                for v in values
            ],
            type=pa.map_(pa.string(), pa.string()),
        )
    if present and all(isinstance(v, (list, tuple, np.ndarray)) for v in present):
        rows = [None if v is None or v is pd.NA else to_jsonable(list(v)) for v in values]
        try:
            return pa.array(rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    return pa.array([_json(v) for v in values], type=pa.string())


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    nested = _object_columns(df)
    plain = df.drop(columns=nested)
    table = pa.Table.from_pandas(plain, preserve_index=False)
    for c in nested:
        table = table.append_column(c, _arrow_column(df[c].tolist()))
    table = table.select([str(c) for c in df.columns])  # the schema's order
    pq.write_table(table, path)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    """``to_csv_frame(with_datetimes(df)).to_csv(path, index=False)``; an empty table's
    header line written directly (pandas' writer is the csv module's, minimal quoting)."""
    if len(df) == 0 and len(df.columns):
        names: list[str] = []
        for c in df.columns:
            names.append(str(c))
            if _is_epoch(c):
                names.append(str(c)[: -len("_ns")])
        with open(path, "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerow(names)
        return
    _with_datetimes(df, nested_as_json=True).to_csv(path, index=False)


def write_jsonl(df: pd.DataFrame, path: Path) -> None:
    cols = [str(c) for c in df.columns]
    with open(path, "w", encoding="utf-8") as f:
        for row in itertuples(df):
            rec = {}
            for c, v in zip(cols, row, strict=True):
                if isinstance(v, pd.Timestamp):
                    rec[c] = v.isoformat()
                else:
                    rec[c] = to_jsonable(v)
            f.write(json.dumps(rec) + "\n")


def export_tables(
    trace: Trace, outdir: str | Path, fmt: str, tables: Iterable[str] | None = None
) -> list[Path]:
    """Write every table (or ``tables``) of ``trace`` into ``outdir`` as ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(
                "Parquet needs pyarrow: pip install 'pcapkit-forensics[export]'"
            ) from exc
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in tables or schema.SCHEMAS:
        path = out / f"{name}.{fmt}"
        if fmt == "csv":
            write_csv(getattr(trace, name), path)
        elif fmt == "parquet":
            write_parquet(with_datetimes(getattr(trace, name)), path)
        else:
            write_jsonl(with_datetimes(getattr(trace, name)), path)
        written.append(path)
    return written

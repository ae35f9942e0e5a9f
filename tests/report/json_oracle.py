"""The JSON writer of main at 82535da, kept as the oracle of the columnar writer
(issue 16): :func:`write_analysis_json` and :func:`write_records_json` here write row by
row through ``_dump_jsonable``; ``pcapkit.report.json`` must write the same bytes.

"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from json.encoder import encode_basestring_ascii
from typing import IO, Any

import numpy as np
import pandas as pd

from pcapkit.report.coverage import coverage
from pcapkit.report.names import JSON_KEYS
from pcapkit.rows import column_arrays
from pcapkit.trace import Trace

SCHEMA_VERSION = 1


def to_jsonable(v: Any) -> Any:
    """Convert numpy/pandas scalars and containers to plain JSON values."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if math.isnan(f) else f
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, dict):
        return {str(k): to_jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [to_jsonable(x) for x in v]
    return v


def _numeric(v: Any) -> bool:
    return isinstance(v, np.ndarray) and v.dtype.kind in "iubf"


def _column_values(v: Any) -> list[Any]:
    """:func:`to_jsonable` of every value of a column (its array, from
    :func:`pcapkit.rows.column_arrays`) as ``itertuples`` yields them, a numpy column at
    once: iterating one yields ``.item()`` of each value, which is ``tolist()``'s (Python
    int, float, bool; NaN → None as to_jsonable does).  Any other array is iterated, as
    iterating its Series does (a Series iterates its array when that is not numpy)."""
    if _numeric(v):
        if v.dtype.kind != "f":
            return v.tolist()  # type: ignore[no-any-return]
        return [None if x != x else x for x in v.tolist()]
    return [to_jsonable(x) for x in v]


def iter_records(df: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The rows of ``df`` as JSON-ready dicts, one at a time (converted column by
    column: the same values as ``to_jsonable`` of each ``itertuples`` cell)."""
    cols = list(df.columns)
    if not cols:
        for _ in range(len(df)):
            yield {}
        return
    values = [_column_values(v) for v in column_arrays(df)]
    for row in zip(*values, strict=True):
        yield dict(zip(cols, row, strict=True))


def _raw_records(df: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """:func:`iter_records` for the streamed writers: numpy columns converted at once, the
    other columns' values as the column yields them — :func:`_dump_jsonable` converts
    them as it writes (one walk of a finding's details, not two)."""
    cols = list(df.columns)
    if not cols:
        for _ in range(len(df)):
            yield {}
        return
    values = [_column_values(v) if _numeric(v) else list(v) for v in column_arrays(df)]
    for row in zip(*values, strict=True):
        yield dict(zip(cols, row, strict=True))


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return list(iter_records(df))


def _sections(
    trace: Trace,
    findings: pd.DataFrame | None,
    only_flows: set[int] | None,
    iter_records: Any = iter_records,
) -> Iterator[tuple[str, Any, bool]]:
    """(key, value, is_rows) of the report, in :data:`JSON_KEYS` order; rows are computed
    lazily (by ``iter_records``: :func:`_raw_records` for the streamed writer)."""
    from pcapkit.report.narrow import flow_rows

    # the detectors run first: a detector that failed is an anomaly the capture's
    # ``anomalies`` count must include
    findings = trace.findings if findings is None else findings
    requests = trace.requests
    gaps = trace.gaps
    if only_flows is not None:
        gaps = gaps[gaps.request.isin(list(flow_rows(requests, only_flows).index))]
    yield "schema_version", SCHEMA_VERSION, False
    yield (
        "capture",
        to_jsonable({**trace.capture_summary(), "key_sources": trace.key_sources}),
        False,
    )
    yield "coverage", to_jsonable(coverage(trace)), False
    # flows: those analysed in detail (the connections limit), narrowed
    yield "flows", iter_records(flow_rows(trace.flows_in_detail, only_flows)), True
    yield "tls", iter_records(flow_rows(trace.tls, only_flows)), True
    yield "quic", iter_records(flow_rows(trace.quic, only_flows)), True
    yield "requests", iter_records(flow_rows(requests, only_flows)), True
    yield "gaps", iter_records(gaps), True
    yield "hol_counterfactual", iter_records(flow_rows(trace.hol_counterfactual, only_flows)), True
    yield "findings", iter_records(findings), True
    yield "anomalies", iter_records(trace.anomalies), True


def analysis_json(
    trace: Trace,
    findings: pd.DataFrame | None = None,
    only_flows: set[int] | None = None,
) -> dict[str, Any]:
    """The JSON report (:data:`JSON_KEYS`); ``findings`` as narrowed by the caller, the
    per-flow tables limited to ``only_flows`` when given."""
    doc = {k: list(v) if rows else v for k, v, rows in _sections(trace, findings, only_flows)}
    assert tuple(doc) == JSON_KEYS
    return doc


def _indented(value: Any, pad: str) -> str:
    return json.dumps(value, indent=2).replace("\n", "\n" + pad)


_INF = float("inf")


def _scalar(v: Any, nan: str = "NaN") -> str | None:
    """``json.dumps(v)`` for a plain scalar (NaN written as ``nan``); None for anything
    else."""
    t = type(v)
    if t is str:
        return encode_basestring_ascii(v)  # type: ignore[no-any-return]
    if t is int:
        return int.__repr__(v)
    if t is float:
        if v != v:
            return nan
        if v == _INF:
            return "Infinity"
        if v == -_INF:
            return "-Infinity"
        return float.__repr__(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    return None


def _dump(v: Any, pad: str) -> str:
    """``json.dumps(v, indent=2)`` with every line after the first prefixed by ``pad``
    (:func:`_indented`), without the pure-Python encoder ``indent`` forces: scalars,
    lists and dicts with text keys directly; anything else through ``json.dumps``."""
    e = _scalar(v)
    if e is not None:
        return e
    t = type(v)
    inner = "\n" + pad + "  "
    if t is dict:
        if not v:
            return "{}"
        parts = []
        for k, x in v.items():
            if type(k) is not str:
                return _indented(v, pad)
            parts.append(encode_basestring_ascii(k) + ": " + _dump(x, pad + "  "))
        return "{" + inner + ("," + inner).join(parts) + "\n" + pad + "}"
    if t is list or t is tuple:
        if not v:
            return "[]"
        return (
            "[" + inner + ("," + inner).join([_dump(x, pad + "  ") for x in v]) + "\n" + pad + "]"
        )
    return _indented(v, pad)


_indented_row = _dump


def _dump_jsonable(v: Any, pad: str) -> str:
    """``_dump(to_jsonable(v), pad)`` in one walk: plain scalars, lists, tuples, arrays
    and dicts with text keys directly; anything else (numpy scalars, pandas missing
    values, subclasses, other keys) through :func:`to_jsonable` first."""
    e = _scalar(v, "null")  # to_jsonable: NaN → None
    if e is not None:
        return e
    t = type(v)
    inner = "\n" + pad + "  "
    if t is dict:
        if not v:
            return "{}"
        parts = []
        sub = pad + "  "
        for k, x in v.items():
            if type(k) is not str:
                return _dump(to_jsonable(v), pad)
            tx = type(x)  # the commonest values written here, as _scalar writes them
            if tx is str:
                e = encode_basestring_ascii(x)
            elif tx is int:
                e = int.__repr__(x)
            elif x is None:
                e = "null"
            elif tx is float:
                e = _scalar(x, "null") or "null"  # a float's text: never None or empty
            else:
                e = _dump_jsonable(x, sub)
            parts.append(encode_basestring_ascii(k) + ": " + e)
        return "{" + inner + ("," + inner).join(parts) + "\n" + pad + "}"
    if t is list or t is tuple or t is np.ndarray:
        if not len(v):
            return "[]"
        return "[" + inner + ("," + inner).join(_dump_items(v, pad + "  ")) + "\n" + pad + "]"
    return _dump(to_jsonable(v), pad)


def _dump_items(v: Any, pad: str) -> list[str]:
    """``[_dump_jsonable(x, pad) for x in v]``; a list or tuple of only ``int`` (not
    bool) or only ``str`` — a finding's frames, its checks — at C speed
    (``int.__repr__`` and ``encode_basestring_ascii`` are what :func:`_scalar` writes)."""
    if type(v) is not np.ndarray:
        kinds = set(map(type, v))
        if len(kinds) == 1:
            (only,) = kinds
            if only is int:
                return list(map(int.__repr__, v))
            if only is str:
                return list(map(encode_basestring_ascii, v))
    return [_dump_jsonable(x, pad) for x in v]


def write_analysis_json(
    trace: Trace,
    fp: IO[str],
    findings: pd.DataFrame | None = None,
    only_flows: set[int] | None = None,
) -> None:
    """Write :func:`analysis_json`'s document to ``fp`` as ``json.dumps(doc, indent=2)``
    followed by a newline would — row by row, never the whole document in memory."""
    fp.write("{")
    keys = []
    for key, value, rows in _sections(trace, findings, only_flows, _raw_records):
        fp.write(("," if keys else "") + "\n  " + json.dumps(key) + ": ")
        keys.append(key)
        if rows:
            _write_rows(fp, value)
        else:
            fp.write(_indented(value, "  "))
    fp.write("\n}\n")
    assert tuple(keys) == JSON_KEYS


def _write_rows(fp: IO[str], rows: Iterable[dict[str, Any]]) -> None:
    fp.write("[")
    empty = True
    for row in rows:
        fp.write(("\n    " if empty else ",\n    ") + _dump_jsonable(row, "    "))
        empty = False
    fp.write("]" if empty else "\n  ]")


def write_records_json(df: pd.DataFrame, fp: IO[str]) -> None:
    """``json.dumps(records(df), indent=2)`` and a newline, written row by row."""
    fp.write("[")
    empty = True
    for row in _raw_records(df):
        fp.write(("\n  " if empty else ",\n  ") + _dump_jsonable(row, "  "))
        empty = False
    fp.write("]\n" if empty else "\n]\n")

"""The stable JSON report of ``pcapkit analyze --format json``.

Top-level keys (stable contract, documented in the README):

* ``capture``   — file facts: ``path``, ``format``, ``compressed``, ``file_size``,
  ``frames``, ``first_ts_ns``, ``last_ts_ns``, ``duration_ms``, ``interfaces``,
  ``tcp_packets``, ``udp_packets``, ``flows``, ``secrets_blocks``, ``anomalies``.
* ``coverage``  — what could be read: TCP connections, UDP flows, TLS sessions and QUIC
  connections decrypted of all, cleartext HTTP connections, frames in readable
  connections, and why the rest was not decrypted (``pcapkit.report.coverage``).
* ``flows``     — one object per flow with the columns of ``Trace.flows``
  (``pcapkit.schema.describe("flows")``); missing values are ``null``.
* ``tls``       — one object per TLS session with the columns of ``Trace.tls``.
* ``findings``  — one object per finding with the columns of ``Trace.findings``.
* ``anomalies`` — one object per anomaly row (``name``, ``frame``, ``flow``,
  ``offset``, ``detail``).
* ``schema_version`` — bumped only when a key changes meaning or disappears.

:func:`write_analysis_json` streams the same document to a file object, one row at a
time (a capture with a million connections is written without building the document or
one string of it in memory); its output is byte for byte ``json.dumps(doc, indent=2)``.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections.abc import Callable, Iterator
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import IO, Any

import numpy as np
import pandas as pd

from ..rows import column_arrays
from ..trace import Trace
from .coverage import coverage
from .names import JSON_KEYS as JSON_KEYS  # re-exported: the report's top-level keys

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
    from .narrow import flow_rows

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


# --- the columnar writer (issue 16) ---------------------------------------------------
# ``json.dumps(indent=2)`` runs the pure-Python encoder; the C encoder (no indent) writes
# a container whose items are all plain scalars at C speed, its item separator carrying
# the newline and the indentation of that depth.  A list of such dicts is one C call too:
# its dicts' items and the list's items share that separator, and ``},\n<pad>{`` (a dict's
# end, the list's separator, the next dict) can only be between two dicts — an encoded
# string never holds a raw newline — so one ``str.replace`` re-indents the list's level.
# Anything else (NaN, which ``to_jsonable`` writes as null, ±inf, numpy scalars, pandas
# missing values, subclasses, keys that are not text) goes the old way,
# :func:`_dump_jsonable`; tests/report/test_json_columnar.py checks the bytes against
# the old writer (tests/report/json_oracle.py).

_PLAIN = frozenset((str, int, float, bool, type(None)))
_STR = frozenset((str,))
_INT = frozenset((int,))
_DICT = frozenset((dict,))
# a table is written a chunk of rows at a time, each chunk about CHUNK_BYTES of text (its
# rows per chunk from the last chunk's length; the first has CHUNK_FIRST rows): the
# writing step's transient memory is a few copies of one chunk (a finding of TCP HOL
# blocking is ~4 kB of text, a record ~0.4 kB)
CHUNK_FIRST = 16
CHUNK_BYTES = 1 << 19
CHUNK_MAX_ROWS = 1 << 16


def _no_default(o: Any) -> Any:
    raise TypeError(type(o).__name__)


@functools.lru_cache(maxsize=64)
def _flat_encoder(sep: str) -> Callable[[Any], str]:
    """``json.dumps(v, separators=(sep, ": "), allow_nan=False)`` for a container of
    plain scalars (raises ValueError on NaN or ±inf, TypeError on anything not JSON)."""
    if c_make_encoder is not None:  # CPython: the C encoder, built once per separator
        enc = c_make_encoder(
            None, _no_default, encode_basestring_ascii, None, ": ", sep, False, False, False
        )
        return lambda v: "".join(enc(v, 0))
    return json.JSONEncoder(  # pragma: no cover - an interpreter without _json
        separators=(sep, ": "), allow_nan=False, check_circular=False, default=_no_default
    ).encode


def _plain_dicts(v: list[Any]) -> bool:
    """Every item of ``v`` a non-empty dict with text keys and plain scalar values."""
    return (
        set(map(type, v)) == _DICT
        and all(v)
        and set(map(type, itertools.chain.from_iterable(v))) == _STR
        and set(map(type, itertools.chain.from_iterable(map(dict.values, v)))) <= _PLAIN
    )


def _enc(v: Any, pad: str) -> str:
    """:func:`_dump_jsonable` (``_dump(to_jsonable(v), pad)``), containers of plain values
    written by the C encoder."""
    t = type(v)
    if t in _PLAIN:
        return _scalar(v, "null") or "null"  # a plain scalar's text: never None or empty
    sub = pad + "  "
    if t is dict:
        if not v:
            return "{}"
        keys = set(map(type, v))
        if keys != _STR:
            # int keys (not bool): the C encoder writes int.__repr__, to_jsonable's str(k)
            if keys == _INT and set(map(type, v.values())) <= _PLAIN:
                try:
                    body = _flat_encoder(",\n" + sub)(v)
                except ValueError:
                    pass
                else:
                    return "{\n" + sub + body[1:-1] + "\n" + pad + "}"
            return _dump_jsonable(v, pad)
        if set(map(type, v.values())) <= _PLAIN:
            try:
                body = _flat_encoder(",\n" + sub)(v)
            except ValueError:  # NaN or ±inf: written value by value below
                pass
            else:
                return "{\n" + sub + body[1:-1] + "\n" + pad + "}"
        parts = [
            encode_basestring_ascii(k)
            + ": "
            + ((_scalar(x, "null") or "null") if type(x) in _PLAIN else _enc(x, sub))
            for k, x in v.items()
        ]
        return "{\n" + sub + (",\n" + sub).join(parts) + "\n" + pad + "}"
    if t is list or t is tuple:
        if not v:
            return "[]"
        kinds = set(map(type, v))
        try:
            if kinds <= _PLAIN:
                body = _flat_encoder(",\n" + sub)(v)
                return "[\n" + sub + body[1:-1] + "\n" + pad + "]"
            if kinds == _DICT and _plain_dicts(v):
                item = sub + "  "
                body = _flat_encoder(",\n" + item)(v)[2:-2].replace(
                    "},\n" + item + "{", "\n" + sub + "},\n" + sub + "{\n" + item
                )
                return "[\n" + sub + "{\n" + item + body + "\n" + sub + "}\n" + pad + "]"
        except ValueError:  # NaN or ±inf: written item by item below
            pass
        return "[\n" + sub + (",\n" + sub).join([_enc(x, sub) for x in v]) + "\n" + pad + "]"
    return _dump_jsonable(v, pad)


def _column_texts(a: Any, pad: str) -> list[str]:
    """The text of every value of a column (its array, from
    :func:`pcapkit.rows.column_arrays`) as :func:`_dump_jsonable` writes the value
    :func:`_raw_records` gives for it, at ``pad``: the column converted at once where its
    type is known (numpy numbers, pandas' nullable numbers and strings), else value by
    value (:func:`_enc`)."""
    if isinstance(a, np.ndarray) and a.dtype.kind in "iub":
        vals = a.tolist()
    elif isinstance(a, np.ndarray) and a.dtype.kind == "f":
        vals = a.tolist()  # NaN → null and ±inf by _scalar below
    elif isinstance(a, (pd.arrays.IntegerArray, pd.arrays.BooleanArray, pd.arrays.FloatingArray)):
        # iterating yields numpy scalars and pd.NA: to_jsonable makes them Python's and None
        vals = a.to_numpy(dtype=object, na_value=None).tolist()  # type: ignore[arg-type]
    elif isinstance(a, pd.api.extensions.ExtensionArray) and isinstance(a.dtype, pd.StringDtype):
        vals = a.to_numpy(dtype=object, na_value=None).tolist()  # type: ignore[arg-type]
    else:
        vals = list(a)
    kinds = set(map(type, vals))
    if kinds == _INT:
        return list(map(int.__repr__, vals))
    if kinds == _STR:
        return list(map(encode_basestring_ascii, vals))
    if kinds == _BOOL:
        return list(map(_BOOL_TEXT.__getitem__, vals))
    if kinds == _INT_OR_NONE:
        r = int.__repr__
        return ["null" if x is None else r(x) for x in vals]
    if kinds == _STR_OR_NONE:
        e = encode_basestring_ascii
        return ["null" if x is None else e(x) for x in vals]
    return [(_scalar(x, "null") or "null") if type(x) in _PLAIN else _enc(x, pad) for x in vals]


_BOOL = frozenset((bool,))
_BOOL_TEXT = {True: "true", False: "false"}
_INT_OR_NONE = frozenset((int, type(None)))
_STR_OR_NONE = frozenset((str, type(None)))


def _columnar(df: pd.DataFrame) -> bool:
    """Whether :func:`_table_chunks` writes ``df``: text column labels, each once (else
    :func:`_raw_records`' dicts, which merge repeated labels, and to_jsonable's ``str``
    of other labels are written row by row)."""
    cols = list(df.columns)
    return bool(cols) and set(map(type, cols)) == _STR and len(set(cols)) == len(cols)


def _table_chunks(df: pd.DataFrame, pad: str) -> Iterator[str]:
    """Each chunk of rows of ``df`` (:data:`CHUNK_BYTES`) as the text of its rows at
    ``pad`` (``_dump_jsonable(row, pad)`` of each, joined by ``",\n" + pad``), built
    column by column: every column's values encoded at once, each row its columns' texts
    put in the row's template (its keys, indentation and separators)."""
    sub = pad + "  "
    template = (
        "{\n"
        + sub
        + (",\n" + sub).join(
            encode_basestring_ascii(c).replace("%", "%%") + ": %s" for c in df.columns
        )
        + "\n"
        + pad
        + "}"
    )
    arrays = column_arrays(df)
    between = ",\n" + pad
    start, n, rows = 0, len(df), CHUNK_FIRST
    while start < n:
        stop = min(n, start + rows)
        cols = [_column_texts(a[start:stop], sub) for a in arrays]
        text = between.join(map(template.__mod__, zip(*cols, strict=True)))
        del cols
        yield text
        rows = max(1, min(CHUNK_MAX_ROWS, CHUNK_BYTES * (stop - start) // len(text)))
        start = stop


def write_analysis_json(
    trace: Trace,
    fp: IO[str],
    findings: pd.DataFrame | None = None,
    only_flows: set[int] | None = None,
) -> None:
    """Write :func:`analysis_json`'s document to ``fp`` as ``json.dumps(doc, indent=2)``
    followed by a newline would — a chunk of rows at a time (:func:`_table_chunks`), never
    the whole document in memory."""
    fp.write("{")
    keys: list[str] = []
    for key, value, rows in _sections(trace, findings, only_flows, _frame):
        fp.write(("," if keys else "") + "\n  " + json.dumps(key) + ": ")
        keys.append(key)
        if rows:
            _write_table(fp, value, "    ", "\n  ]")
        else:
            fp.write(_indented(value, "  "))
    fp.write("\n}\n")
    assert tuple(keys) == JSON_KEYS


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    return df


def _write_table(fp: IO[str], df: pd.DataFrame, pad: str, close: str) -> None:
    """``[``, the rows of ``df`` at ``pad`` and ``close`` (``[]`` when it has none)."""
    if not len(df):
        fp.write("[]")
        return
    if not _columnar(df):
        fp.write("[")
        for i, row in enumerate(_raw_records(df)):
            fp.write(("\n" if i == 0 else ",\n") + pad + _dump_jsonable(row, pad))
        fp.write(close)
        return
    for i, text in enumerate(_table_chunks(df, pad)):
        fp.write(("[\n" if i == 0 else ",\n") + pad + text)
    fp.write(close)


def write_records_json(df: pd.DataFrame, fp: IO[str]) -> None:
    """``json.dumps(records(df), indent=2)`` and a newline, written a chunk of rows at a
    time."""
    _write_table(fp, df, "  ", "\n]")
    fp.write("\n")

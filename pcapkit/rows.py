"""A table's rows as ``DataFrame.itertuples(index=False)`` yields them, made column by column
(a base module: the detectors, reports and exports all read rows this way).

pandas' ``itertuples`` takes ``df.iloc[:, k]`` for every column and defines a new
namedtuple class on every call: on the small tables of a typical capture that costs more
than the rows themselves (issue 15: the report and export layers were most of a file-level
fuzz mutant's CPU).  :func:`itertuples` yields equal rows — the same namedtuple type name
and fields, the same values (a numpy column's ``tolist()`` is the ``.item()`` of each
value that iterating the column yields; an extension column is iterated) — from one list
per column and a namedtuple class made once per column set.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd


@functools.lru_cache(maxsize=256)
def _row_type(fields: tuple[str, ...]) -> Any:
    return collections.namedtuple("Pandas", fields, rename=True)  # noqa: PYI024


def column_values(s: pd.Series) -> list[Any]:
    """The values iterating ``s`` yields, as one list."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biufcO":
        # a numpy column (datetime64/timedelta64 are not: pandas wraps them, iterating
        # yields Timestamps)
        return s.to_numpy(copy=False).tolist()  # type: ignore[no-any-return]
    return list(s.array)


def column_arrays(df: pd.DataFrame) -> list[Any]:
    """The array behind every column of ``df``, in order: what ``s.array`` gives for an
    extension column, the 1-D numpy array for a numpy column.

    ``df.items()`` builds a Series for each column and looks its label up in the column
    Index (Arrow-backed strings in pandas 3: ~20 µs a column, which on a capture's many
    small tables was more than the rows).  The block manager's ``iget_values`` gives the
    same arrays without either (a pandas private, listed in tests/test_layers.py; a
    pandas without it gets the Series' arrays)."""
    try:
        iget = df._mgr.iget_values
    except AttributeError:  # pragma: no cover - pandas 2.1-3.1 all have it
        return [s.to_numpy(copy=False) if _numpy(s.dtype) else s.array for _, s in df.items()]
    return [iget(k) for k in range(df.shape[1])]


def _numpy(dtype: Any) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind in "biufcO"


def _values(a: Any) -> list[Any]:
    """:func:`column_values` of the column whose array (:func:`column_arrays`) is ``a``."""
    if isinstance(a, np.ndarray) and _numpy(a.dtype):
        return a.tolist()  # type: ignore[no-any-return]
    if isinstance(a, np.ndarray):  # pragma: no cover - pandas wraps datetime64 blocks
        return list(pd.array(a))
    return list(a)


def columns(df: pd.DataFrame) -> list[list[Any]]:
    """:func:`column_values` of every column of ``df``, in order."""
    return [_values(a) for a in column_arrays(df)]


def itertuples(df: pd.DataFrame) -> Iterator[Any]:
    """``df.itertuples(index=False)``: namedtuples named ``Pandas`` (plain tuples past
    254 columns, as pandas does)."""
    fields = [str(c) for c in df.columns]
    values = columns(df)
    if not values:
        return (_row_type(())() for _ in range(len(df)))  # pandas: an empty row per row
    if len(fields) >= 255:
        return zip(*values, strict=True)
    return map(_row_type(tuple(fields)), *values)

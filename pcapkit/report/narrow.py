"""Narrowing a report: which findings (and connections) ``pcapkit analyze`` shows.

A pure function of the findings table, so the text and the JSON report narrow alike
and ``--fail-on`` judges exactly what is shown.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from ..detect.spec import SEVERITIES


def narrow(
    findings: pd.DataFrame,
    *,
    flows: Iterable[int] | None = None,
    kinds: Iterable[str] | None = None,
    min_severity: str | None = None,
    min_cost_ms: float = 0.0,
    since_ns: int | None = None,
    until_ns: int | None = None,
    top: int | None = None,
) -> pd.DataFrame:
    """The findings on ``flows``, of ``kinds``, at least ``min_severity``, costing at least
    ``min_cost_ms`` (unknown costs kept), overlapping [``since_ns``, ``until_ns``], the
    ``top`` worst (the table is worst first)."""
    f = findings
    keep = pd.Series(True, index=f.index)
    if flows is not None:
        keep &= f.flow.isin(list(flows)).fillna(False).astype(bool)
    if kinds is not None:
        keep &= f.kind.isin(list(kinds))
    if min_severity is not None:
        rank = SEVERITIES.index(min_severity)
        keep &= f.severity.map(SEVERITIES.index) >= rank
    if min_cost_ms > 0:
        keep &= (f.cost_ms.isna() | (f.cost_ms >= min_cost_ms)).astype(bool)
    if since_ns is not None:
        keep &= f.t_end_ns >= since_ns
    if until_ns is not None:
        keep &= f.t_start_ns <= until_ns
    out = f[keep.to_numpy(bool)]
    if top is not None:
        out = out.head(top)
    return out


def parse_kinds(values: Iterable[str], known: Iterable[str]) -> set[str]:
    """``--kind a,b --kind c`` as a set; raises ValueError naming unknown kinds."""
    kinds = {k.strip() for v in values for k in v.split(",") if k.strip()}
    unknown = kinds - set(known)
    if unknown:
        raise ValueError(f"unknown kind(s) {', '.join(sorted(unknown))}")
    return kinds


def capture_time_ns(value: float, first_ts_ns: int | None) -> int:
    """``--since/--until`` seconds from the capture's first frame, as epoch ns."""
    return int((first_ts_ns or 0) + round(value * 1e9))


def flow_rows(table: pd.DataFrame, flows: Any) -> pd.DataFrame:
    """Rows of a per-flow table on ``flows`` (None: all)."""
    if flows is None or "flow" not in table.columns:
        return table
    keep = table["flow"].isin(list(flows))  # a missing flow is never kept
    return table[keep.to_numpy(dtype=bool, na_value=False)]

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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..trace import Trace
from .coverage import coverage

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


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    cols = list(df.columns)
    out = []
    for row in df.itertuples(index=False, name=None):
        out.append({c: to_jsonable(x) for c, x in zip(cols, row, strict=True)})
    return out


# The report's top-level keys, in order (the README's JSON section and ``--help`` are
# checked against this list by tests/test_cli.py).
JSON_KEYS = (
    "schema_version",
    "capture",
    "coverage",
    "flows",
    "tls",
    "quic",
    "requests",
    "gaps",
    "findings",
    "anomalies",
)


def analysis_json(
    trace: Trace,
    findings: pd.DataFrame | None = None,
    only_flows: set[int] | None = None,
) -> dict[str, Any]:
    """The JSON report (:data:`JSON_KEYS`); ``findings`` as narrowed by the caller, the
    per-flow tables limited to ``only_flows`` when given."""
    from .narrow import flow_rows

    requests = trace.requests
    gaps = trace.gaps
    if only_flows is not None:
        gaps = gaps[gaps.request.isin(list(flow_rows(requests, only_flows).index))]
    doc = {
        "schema_version": SCHEMA_VERSION,
        "capture": to_jsonable({**trace.capture_summary(), "key_sources": trace.key_sources}),
        "coverage": to_jsonable(coverage(trace)),
        "flows": records(flow_rows(trace.flows, only_flows)),
        "tls": records(flow_rows(trace.tls, only_flows)),
        "quic": records(flow_rows(trace.quic, only_flows)),
        "requests": records(flow_rows(requests, only_flows)),
        "gaps": records(gaps),
        "findings": records(trace.findings if findings is None else findings),
        "anomalies": records(trace.anomalies),
    }
    assert tuple(doc) == JSON_KEYS
    return doc

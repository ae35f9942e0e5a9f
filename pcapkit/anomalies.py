"""The ``anomalies`` table: what could not be parsed, one row each (DESIGN.md §4).

Every layer reports what it gave up on as rows ``{name, frame, flow, offset,
detail}``; :func:`anomalies_table` joins them into one table in frame order,
filling a row's flow from its frame when the layer did not know it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from . import schema


def anomalies_table(rows: Iterable[dict[str, Any]], pkt_flow: np.ndarray) -> pd.DataFrame:
    """The anomalies table of ``rows``; ``pkt_flow`` is each frame's flow (-1: none)."""
    rows = [dict(r) for r in rows]
    for r in rows:
        if r.get("flow") is None and r.get("frame") is not None and 0 < r["frame"] <= len(pkt_flow):
            fl = int(pkt_flow[r["frame"] - 1])
            r["flow"] = fl if fl >= 0 else None
    rows.sort(key=lambda r: (r["frame"] is None, r["frame"] or 0))
    n = len(rows)
    if n == 0:
        return schema.frame("anomalies", n=0)

    def col(k: str) -> list[Any]:
        return [r.get(k) for r in rows]

    return schema.frame(
        "anomalies",
        {
            "name": col("name"),
            "frame": pd.array(col("frame"), dtype="Int64"),
            "flow": pd.array(col("flow"), dtype="Int64"),
            "offset": pd.array(col("offset"), dtype="Int64"),
            "detail": col("detail"),
        },
        n,
    )

"""DetectContext's numpy views equal the pandas slices they replace (real lab fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pcapkit
from pcapkit.detect.tcp_model import DirView, timeline

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CAPTURES = ["tls_sse_drop/client.pcapng", "nagle_wwr/client.pcapng", "tls_resumed/client.pcapng"]


def _as_array(col: pd.Series) -> np.ndarray:
    if isinstance(col.dtype, pd.CategoricalDtype | pd.StringDtype) or col.dtype == object:
        return col.astype(str).to_numpy()
    if isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
        return col.to_numpy(dtype=float, na_value=np.nan)
    return col.to_numpy()


@pytest.mark.parametrize("name", CAPTURES)
def test_seg_and_rec_arrays_equal_the_table_slices(name):
    t = pcapkit.open(FIXTURES / name)
    ctx = t.detect_context
    checked = 0
    for f in ctx.tcp_flows():
        for d in (0, 1):
            seg, sa = ctx.segments_of(f, d), ctx.seg_arrays(f, d)
            assert set(sa) == set(seg.columns) - {"dir"}
            for c, v in sa.items():
                assert np.array_equal(_as_array(seg[c]), v), c
            rec, ra = ctx.records_of(f, d), ctx.rec_arrays(f, d)
            assert set(ra) == set(rec.columns)
            for c, v in ra.items():
                assert np.array_equal(_as_array(rec[c]), v, equal_nan=v.dtype.kind == "f"), c
            checked += len(seg) + len(rec)
    assert checked > 0


def test_shared_views_are_built_once():
    ctx = pcapkit.open(FIXTURES / CAPTURES[1]).detect_context
    f = ctx.tcp_flows()[0]
    v = DirView.build(ctx, f, 1)
    assert v is not None and DirView.build(ctx, f, 1) is v
    assert timeline(ctx, f) is timeline(ctx, f)

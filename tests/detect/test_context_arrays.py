"""DetectContext's numpy views equal the pandas slices they replace (real lab fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pcapkit
from pcapkit.detect import context
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


def test_dir_keys_if_sorted_equals_the_whole_column_check():
    """Synthetic arrays (not traffic): the sliced order check and keys of
    ``dir_keys_if_sorted`` against the whole-column formula it replaced, across slice
    boundaries, unsorted rows and keys beyond int32."""
    from pcapkit import schema

    rng = np.random.default_rng(7)
    cases = 0
    for trial in range(120):
        n = int(rng.integers(1, 3 * schema.KEY_SLICE if trial < 6 else 300))
        f = np.sort(rng.integers(0, 40, n))
        d = rng.integers(0, 2, n).astype(np.int8)
        off = rng.integers(0, 1000, n)
        o = np.lexsort((off, d, f))
        f, d, off = f[o], d[o], off[o]
        if trial % 3 == 1 and n > 2:  # one swap: out of order (or, rarely, still sorted)
            i, j = (int(x) for x in rng.integers(0, n, 2))
            off[i], off[j] = off[j], off[i]
        if trial % 5 == 2:
            f = f + 2**31  # keys need int64
        key = f * 2 + d.astype(np.int64)
        ordered = bool(
            ((key[1:] > key[:-1]) | ((key[1:] == key[:-1]) & (off[1:] >= off[:-1]))).all()
        )
        got = schema.dir_keys_if_sorted(f, d, off)
        assert (got is not None) == ordered, trial
        if got is not None:
            assert np.array_equal(got, key)
            assert got.dtype == (np.int64 if trial % 5 == 2 else np.int32)
            cases += 1
    assert cases > 60


def test_dir_keys_sorts_rows_that_are_not_in_order():
    """Synthetic arrays (not traffic): ``dir_keys`` gives the keys in (flow, dir, offset)
    order and the permutation to it (None when the rows are in it), int32 when they fit."""
    from pcapkit import schema

    rng = np.random.default_rng(11)
    f = rng.integers(0, 30, 5000)
    d = rng.integers(0, 2, 5000).astype(np.int8)
    off = rng.integers(0, 10_000, 5000)
    key, order = schema.dir_keys(f, d, off)
    want = np.lexsort((off, d, f))
    assert order is not None and np.array_equal(order, want)
    assert key.dtype == np.int32 and np.array_equal(key, (f * 2 + d)[want])
    key2, order2 = schema.dir_keys(f[want], d[want], off[want])
    assert order2 is None and np.array_equal(key2, key)
    big, _ = schema.dir_keys(f + 2**31, d, off)
    assert big.dtype == np.int64 and np.array_equal(big, ((f + 2**31) * 2 + d)[want])


def test_run_index_equals_the_cumulative_sum():
    """Synthetic masks (not traffic): ``schema.run_index`` against ``np.cumsum(m) - 1``, the
    formula it replaces (empty, all, none, first row not a start)."""
    from pcapkit import schema

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 1000, 70_000):
        for p in (0.0, 0.05, 0.5, 1.0):
            m = rng.random(n) < p
            got = schema.run_index(m)
            assert got.dtype == np.int64 and np.array_equal(got, np.cumsum(m) - 1), (n, p)


def test_record_keys_are_made_once_for_the_http_layer_and_the_detectors():
    """The records' direction keys ``Trace`` makes are the ones DetectContext holds (not
    a second pass over the records), and equal what it would make itself."""
    from pcapkit import schema
    from pcapkit.detect import DetectContext

    t = pcapkit.open(FIXTURES / CAPTURES[0])
    key, order = t._record_keys
    ctx = t.detect_context
    assert ctx.rec_dir_keys is key and order is None and key.shape[0] == len(t.records) > 0
    own = DetectContext(t.packets, t.flows, t.segments, t.records, t.tls)
    assert np.array_equal(own.rec_dir_keys, key)
    assert np.array_equal(schema.record_dir_keys(t.records)[0], key)


@pytest.mark.parametrize("name", CAPTURES)
def test_columns_gathered_on_threads_equal_one_thread(name, monkeypatch):
    """DetectContext gathers its sorted packet and segment columns on threads when they
    are long (GATHER_THREADS_MIN); forced onto threads for every column, the context's
    arrays equal those gathered on one thread, and the segments table (made only when
    asked for) is the (flow, dir, frame) sort of the trace's (real lab fixtures)."""
    from thread_spy import spy_threads

    from pcapkit.detect import context

    t = pcapkit.open(FIXTURES / name)
    kw = dict(packets=t.packets, flows=t.flows, segments=t.segments, records=t.records, tls=t.tls)
    one = context.DetectContext(**kw)
    calls = spy_threads(monkeypatch, context)
    monkeypatch.setattr(context, "GATHER_THREADS_MIN", 1)
    many = context.DetectContext(**kw)
    assert calls and min(calls) >= 2  # packets' and segments' columns went to the threads
    for a, b in ((one.packet_columns, many.packet_columns), (one.seg_columns, many.seg_columns)):
        assert list(a) == list(b)
        for c in a:
            assert a[c].dtype == b[c].dtype and np.array_equal(a[c], b[c]), c
    assert np.array_equal(one.packet_flows, many.packet_flows)
    assert many._seg_df is None  # not made until read
    s = t.segments
    order = np.lexsort(
        (
            s["frame"].to_numpy(np.int64),
            s["dir"].cat.codes.to_numpy(),
            s["flow"].to_numpy(np.int64),
        )
    )
    assert many._seg.equals(s.iloc[order].reset_index(drop=True))
    for kind in ("new", "retransmission"):
        want = (s["kind"].astype(str).to_numpy() == kind)[order]
        assert np.array_equal(many.seg_kind_is(kind), want)
        assert np.array_equal(one.seg_kind_is(kind), want)


@pytest.mark.parametrize(
    "top, frames_sorted",
    [(3_000, True), (70_000, True), (1 << 33, True), (3_000, False), (0, True)],
)
def test_key_then_frame_order_is_lexsort(top, frames_sorted):
    """DetectContext's (flow, frame) order (synthetic columns): a radix sort of the key
    alone when the frames do not go down — one pass below 2**16, two below 2**32 — and
    numpy's lexsort otherwise; always the lexsort's permutation, ties in both kept in
    table order."""
    rng = np.random.default_rng(3)
    n = 50_000
    key = rng.integers(0, top + 1, n).astype(np.int64)
    frame = np.sort(rng.integers(0, n // 3, n)) if frames_sorted else rng.integers(0, n, n)
    got = context._by_key_then_frame(key, frame)
    assert np.array_equal(got, np.lexsort((frame, key)))
    assert frames_sorted or bool((frame[1:] < frame[:-1]).any())

"""Every direction's view built in one pass (issue 16) against the per-direction build.

``DirView._build`` (one direction at a time) is kept as the oracle: ``build_views`` must
give every field of every view the same values and dtypes, on the synthetic scenarios of
test_vectorised (handshake only, holes, retransmissions, three vantages) and the fixture
captures, and on its fallbacks (keys that do not fit, the lexsort medians).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from test_nagle import FIX
from test_vectorised import MS, _traces

import pcapkit
from pcapkit.detect import ssr, tcp_model
from pcapkit.detect.context import DetectContext
from pcapkit.detect.tcp_model import DirView


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return list(_traces(tmp_path_factory))


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.dtype == object:  # text with NaN for missing
            return all(
                x == y or (x != x and y != y) for x, y in zip(a.tolist(), b.tolist(), strict=True)
            )
        return bool(np.array_equal(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return type(a) is type(b) and a == b


def _check_all(ctx, label, seen):
    for f in ctx.tcp_flows():
        for d in (0, 1):
            got = DirView.build(ctx, f, d)
            want = DirView._build(ctx, f, d)
            bad = [
                x.name
                for x in dataclasses.fields(got)
                if not _same(getattr(got, x.name), getattr(want, x.name))
            ]
            assert not bad, (label, f, d, bad)
            assert _same(got.s_new, want.s_new) and _same(got.new_pos, want.new_pos)
            seen["views"] += 1
            seen["jitter"] += want.jitter is not None
            seen["y"] += want.y_idx.size > 0
            seen["x_bad"] += want.x_bad_ts.size > 0


def test_views_at_once_as_per_direction(traces):
    seen = {"views": 0, "jitter": 0, "y": 0, "x_bad": 0}
    for label, t in traces:
        ctx = t.detect_context
        ctx._memo.clear()
        n = tcp_model.build_views(ctx)
        assert n == 2 * len(ctx.tcp_flows())
        assert ctx.memoised(("tcp_model.DirView", ctx.tcp_flows()[0], 1)) if n else True
        _check_all(ctx, label, seen)
        ctx._memo.clear()
    assert seen["views"] > 60 and seen["jitter"] > 10 and seen["y"] > 50, seen
    assert seen["x_bad"] > 5, seen


def test_build_asks_for_every_view_once(traces):
    """The first ``DirView.build`` builds every TCP direction (the same objects later);
    a flow that is not a TCP flow of the trace is built on its own."""
    t = dict(traces)["holds-client"]
    ctx = t.detect_context
    ctx._memo.clear()
    f = ctx.tcp_flows()[0]
    v = DirView.build(ctx, f, 0)
    assert ctx.memoised(("tcp_model.views_built",))
    assert DirView.build(ctx, f, 1) is ctx.memo(("tcp_model.DirView", f, 1), lambda: None)
    assert DirView.build(ctx, f, 0) is v
    ctx._memo.clear()


def test_views_fallbacks(traces, monkeypatch):
    """Keys that do not fit the one-array searches: no view built at once, each built on
    its own when asked (same values); Grouped keys that do not fit and lags too long for
    exact halves: the lexsort medians (same jitter)."""
    seen = {"views": 0, "jitter": 0, "y": 0, "x_bad": 0}
    picked = [x for x in traces if x[0] in ("holds-client", "retransmissions-middle")]
    picked += [x for x in traces if x[0].endswith(".pcapng")][:3]
    with monkeypatch.context() as m:
        m.setattr(tcp_model, "_FLOW_MAX", 0)
        for label, t in picked:
            ctx = t.detect_context
            ctx._memo.clear()
            assert tcp_model.build_views(ctx) == 0
            _check_all(ctx, label, seen)
            ctx._memo.clear()
    with monkeypatch.context() as m:
        m.setattr(tcp_model, "grouped", lambda *a: None)
        m.setattr(tcp_model, "_HALVES_EXACT_NS", 0)
        for label, t in picked:
            ctx = t.detect_context
            ctx._memo.clear()
            _check_all(ctx, label, seen)
            ctx._memo.clear()
    assert seen["views"] >= 20 and seen["jitter"] > 4, seen


def test_medians_sorted_as_median_of():
    rng = np.random.default_rng(16)
    for _ in range(200):
        counts = rng.integers(0, 7, rng.integers(1, 9))
        gid = np.repeat(np.arange(counts.shape[0]), counts)
        v = rng.integers(-50, 50, gid.shape[0]) * int(rng.choice([1, 1_000_003]))
        s = tcp_model._sorted_in_groups(gid, v, counts.shape[0])
        assert s.tolist() == v[np.lexsort((v, gid))].tolist()
        med = tcp_model._medians_sorted(s, counts)
        first = np.cumsum(counts) - counts
        for g, (a, n) in enumerate(zip(first.tolist(), counts.tolist(), strict=True)):
            if n:
                assert med[g] == tcp_model.median_of(v[a : a + n])
            else:
                assert np.isnan(med[g])


# --- the detector context's narrower columns ---------------------------------------------
def _ctx_with(t, records):
    return DetectContext(t.packets, t.flows, t.segments, records, t.tls)


def _old_rows(keys64, f, d):
    k = 2 * f + d
    return slice(
        int(np.searchsorted(keys64, k, side="left")), int(np.searchsorted(keys64, k, side="right"))
    )


def test_rec_keys_int32_where_they_fit():
    """Direction keys of the records as int32 when every key fits, int64 when one does
    not; each direction's rows as the int64 search found them, none for a flow whose key
    is past int32."""
    t = pcapkit.open(FIX / "tls_sse_drop/client.pcapng")
    rec = t.records
    keys64 = rec["flow"].to_numpy(np.int64) * 2 + rec["dir"].cat.codes.to_numpy(np.int64)
    for records, dtype, shift in (
        (rec, np.int32, 0),
        (rec.assign(flow=rec["flow"].astype(np.int64) + (1 << 31)), np.int64, 1 << 31),
    ):
        ctx = _ctx_with(t, records)
        assert ctx.rec_dir_keys.dtype == dtype
        assert ctx.rec_dir_keys.tolist() == (keys64 + 2 * shift).tolist()
        seen = 0
        for f in sorted(set(rec["flow"].tolist())):
            for d in (0, 1):
                want = _old_rows(keys64, f, d)
                assert ctx.rec_rows(f + shift, d) == want
                assert len(ctx.records_of(f + shift, d)) == want.stop - want.start
                seen += want.stop - want.start
        assert seen == len(rec)
    ctx = _ctx_with(t, rec)
    n = len(rec)
    assert ctx.rec_rows(1 << 40, 0) == slice(n, n) and ctx.rec_rows(-(1 << 40), 0) == slice(0, 0)


def test_rec_nullable_ints_as_floats():
    """A nullable integer column (content_type: Int16, plaintext_len: Int32) reads as the
    float64 copy it was (NaN where missing) in any slice, without the copy being kept;
    ``rec_int_is`` = that copy ``== value``."""
    t = pcapkit.open(FIX / "tls_sse_drop/client.pcapng")
    rec = t.records.copy()
    na = rec.copy()
    na.loc[na.index[::3], "content_type"] = pd.NA
    na.loc[na.index[1::4], "plaintext_len"] = pd.NA
    for records in (rec, na):
        ctx = _ctx_with(t, records)
        n = len(records)
        for c in ("content_type", "plaintext_len"):
            want = records[c].to_numpy(dtype=float, na_value=np.nan)
            for rows in (slice(0, n), slice(0, 0), slice(3, 17), slice(n - 5, n)):
                got = ctx.rec_column(c, rows)
                assert got.dtype == np.float64
                assert np.array_equal(got, want[rows], equal_nan=True), (c, rows)
            assert c not in ctx._rec_np  # no float copy of the whole column kept
            for value in (23, 22, 0):
                assert ctx.rec_int_is(c, value).tolist() == (want == value).tolist()
        assert bool(np.isnan(ctx.rec_column("content_type", slice(0, n))).any()) == (records is na)
        # a column that is not a nullable integer: as rec_column gives it
        assert ctx.rec_int_is("length", 5).tolist() == (records["length"].to_numpy() == 5).tolist()


# --- ssr: which idles can start a burst of two flights, every idle at once ----------------
def _two_reference(ts, idles, ack_sorted, rtt, continue_ns):
    out = []
    for i, g in enumerate(idles):
        end = idles[i + 1] if i + 1 < len(idles) else len(ts) - 1
        fl = ssr._flights(
            ts,
            np.ones(ts.shape[0], np.int64),
            np.arange(g + 1, end + 1),
            ack_sorted,
            rtt,
            continue_ns=continue_ns,
        )
        out.append(len(fl) >= 2)
    return out


def test_bursts_of_two_as_flights():
    """``_bursts_of_two`` = "the walk of the burst finds two flights or more" for every
    idle, on seeded random segment and ACK times (ties, ACKs before/after every segment,
    no ACK, one-segment bursts, rtt 0); all True when the times go backwards."""
    rng = np.random.default_rng(16)
    seen = {True: 0, False: 0}
    for _ in range(400):
        n = int(rng.integers(1, 80))
        ts = np.sort(rng.integers(0, 2000, n)).astype(np.int64) * MS // 10
        ack = np.sort(rng.integers(-10, 2020, int(rng.integers(0, 40)))).astype(np.int64)
        ack *= MS // 10
        rtt = int(rng.choice([0, MS // 2, MS, 2 * MS, 20 * MS]))
        gaps = np.diff(ts)
        idles = np.nonzero(gaps > int(rng.integers(2, 30)) * MS)[0].tolist()
        cont = 1.5 * rtt
        got = ssr._bursts_of_two(ts, idles, ack, rtt, cont)
        assert got == _two_reference(ts, idles, ack, rtt, cont), (ts, ack, rtt, idles)
        for x in got:
            seen[x] += 1
        if n > 2:
            back = ts.copy()
            back[[0, -1]] = back[[-1, 0]]
            assert ssr._bursts_of_two(back, idles, ack, rtt, cont) == [True] * len(idles)
    assert seen[True] > 80 and seen[False] > 500, seen


def test_ssr_idles_at_once_changes_nothing(traces, monkeypatch):
    """ssr's findings with the idles asked at once = with every idle walked (the oracle):
    the restart fixtures (both findings kept) and the synthetic traces of test_vectorised."""
    caps = [FIX / f"slow_start_restart/{v}.pcapng" for v in ("client", "server")]
    caps += [FIX / f"slow_start_restart_off/{v}.pcapng" for v in ("client", "server")]
    runs = [(p.name, pcapkit.open(p)) for p in caps if p.exists()] + list(traces)
    found = 0
    for label, t in runs:
        ctx = t.detect_context
        with monkeypatch.context() as m:
            m.setattr(ssr, "IDLES_AT_ONCE", False)
            want = ssr.detect(ctx)
        got = ssr.detect(ctx)
        assert got == want, label
        found += len(got)
    assert found >= 2

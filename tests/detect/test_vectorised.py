"""Detector loops rewritten for speed (issue 16) against the per-item code they replaced.

Each reference below is the loop as it stood before the rewrite (main 8c48adc), kept here
only as the oracle; the rewritten function must answer exactly as it did on labelled
edge cases (empty, one item, holes at the start/end, retransmissions) and on seeded
random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_issue16 as ref16
from test_nagle import FIX, Sim, wwr

import pcapkit
from pcapkit.detect import cork, delayed_ack, nagle, ssr, tcp_model
from pcapkit.detect.constants import FLIGHT_BREAK_RTT
from pcapkit.detect.tcp_model import DirView

MS = 1_000_000


# --- ssr: flights -------------------------------------------------------------------------
def _flights_reference(ts, wire, idx, ack_ts, rtt):
    """ssr._flights before the rewrite: one Flight per step of the walk."""
    out = []
    if idx.shape[0] == 0:
        return out
    lo, hi = int(idx[0]), int(idx[-1]) + 1
    seg_ts = ts[lo:hi]
    cum = np.concatenate(([0], np.cumsum(wire[lo:hi]))).tolist()
    n = hi - lo
    j1 = np.searchsorted(seg_ts, seg_ts + FLIGHT_BREAK_RTT * rtt, side="left")
    a = np.searchsorted(ack_ts, seg_ts, side="right")
    if ack_ts.shape[0]:
        j2 = np.searchsorted(seg_ts, ack_ts[np.minimum(a, ack_ts.shape[0] - 1)], side="left")
        j2 = np.where(a < ack_ts.shape[0], j2, n)
    else:
        j2 = np.full(n, n, np.int64)
    nxt = np.minimum(np.maximum(np.maximum(j1, j2), np.arange(1, n + 1)), n).tolist()
    t = seg_ts.tolist()
    i = 0
    while i < n:
        j = nxt[i]
        out.append(ssr.Flight(lo + i, lo + j - 1, int(cum[j] - cum[i]), t[i], t[j - 1]))
        i = j
    return out


def _burst_reference(post_fl, continue_ns):
    burst = post_fl[:1]
    for fl in post_fl[1:]:
        if fl.start_ns - burst[-1].start_ns > continue_ns:
            break
        burst.append(fl)
    return burst


def _flight_cases():
    """(label, ts, wire, idx, ack_ts, rtt): segment times sorted, ACK times sorted."""
    rtt = 10 * MS
    one = np.array([5 * MS], np.int64)
    yield "one segment, no ACK", one, np.array([1]), np.arange(1), np.zeros(0, np.int64), rtt
    yield "one segment, ACK before", one, np.array([2]), np.arange(1), np.array([MS]), rtt
    ts = np.arange(0, 40 * MS, 2 * MS, dtype=np.int64)  # 20 segments, 2 ms apart
    w = np.ones(ts.shape[0], np.int64)
    yield "no ACK at all: one flight", ts, w, np.arange(20), np.zeros(0, np.int64), rtt
    acks = np.array([9 * MS, 21 * MS, 33 * MS], np.int64)
    yield "ACK-clocked flights", ts, w, np.arange(20), acks, rtt
    yield "a slice in the middle", ts, w, np.arange(4, 15), acks, rtt
    yield "ACKs only before the slice", ts, w, np.arange(10, 20), np.array([MS]), rtt
    w2 = w.copy()
    w2[[0, 7, 19]] = 3  # super-segments at the start, middle and end
    yield "super-segments", ts, w2, np.arange(20), acks, rtt
    same = np.full(6, 7 * MS, np.int64)  # a burst at one instant (retransmissions)
    yield "equal times", same, np.ones(6, np.int64), np.arange(6), np.array([7 * MS]), rtt
    yield "rtt 0", ts, w, np.arange(20), acks, 0
    rng = np.random.default_rng(16)
    for k in range(60):
        n = int(rng.integers(1, 400))
        ts_r = np.sort(rng.integers(0, 2_000 * MS, n)).astype(np.int64)
        w_r = rng.integers(1, 4, n).astype(np.int64)
        ack_r = np.sort(rng.integers(0, 2_000 * MS, int(rng.integers(0, n + 1)))).astype(np.int64)
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n))
        yield f"random {k}", ts_r, w_r, np.arange(lo, hi + 1), ack_r, int(rng.integers(0, 80)) * MS


@pytest.mark.parametrize("case", list(_flight_cases()), ids=lambda c: c[0])
def test_flights_as_before(case):
    _, ts, wire, idx, ack_ts, rtt = case
    ref = _flights_reference(ts, wire, idx, ack_ts, rtt)
    assert ssr._flights(ts, wire, idx, ack_ts, rtt) == ref
    for factor in (0.0, 1.5, 4.0):
        cont = factor * rtt
        got = ssr._flights(ts, wire, idx, ack_ts, rtt, continue_ns=cont)
        assert got == _burst_reference(ref, cont)
    if idx.shape[0]:
        big = max(ref, key=lambda x: x.segments)
        assert ssr._largest_flight(ts, wire, idx, ack_ts, rtt) == (big.first, big.segments)


def test_flights_empty():
    z = np.zeros(0, np.int64)
    assert ssr._flights(z, z, z, z, MS) == []
    assert ssr._flights(z, z, z, z, MS, continue_ns=1.0) == []


# --- tcp_model / delayed_ack / cork: per-direction equivalence on traces ----------------------
def _wwr_run(s, t, n, **kw):
    for _ in range(n):
        t, _ = wwr(s, t, **kw)
    return t


def _scenarios():
    """(label, builder): SYNTHETIC connections (test_nagle.Sim), each one edge case."""

    def handshake_only(s):
        s.handshake()

    def one_segment(s):
        s.handshake()
        s.client(100_000, 120)
        s.server(100_000 + s.d_s + 40_000, 0)

    def holds(s):
        s.handshake()
        _wwr_run(s, 100_000, 8)

    def hole_at_start(s):
        s.handshake()
        s.nxt[0] = 300  # the client's first 300 bytes never reached the capture
        _wwr_run(s, 100_000, 6)

    def hole_at_end(s):
        s.handshake()
        t = _wwr_run(s, 100_000, 6)
        s.nxt[0] += 700  # lost before P, never repaired in the capture
        s.client(t, 90)
        s.server(t + s.d_s + 40_000, 0)

    def retransmission(s):
        s.handshake()
        t = _wwr_run(s, 100_000, 4)
        s.client(t, 100, offset=max(s.nxt[0] - 100, 0))  # a resend of the last segment
        _wwr_run(s, t + 250_000, 4)

    def retransmissions(s):
        s.handshake()
        t = _wwr_run(s, 100_000, 3)
        for k in range(3):  # three resends of the last segment, each later
            s.client(t + k * 220_000, 100, offset=max(s.nxt[0] - 100, 0))
        _wwr_run(s, t + 700_000, 4)

    def quick_and_piggybacked(s):
        s.handshake()
        t = _wwr_run(s, 100_000, 3, quick=True)
        t = _wwr_run(s, t, 3, delack_us=200_000)  # ACK later than RFC 1122 allows
        # the server talks on its own: data after the client's first segment
        for k in range(4):
            h = t + k * 300_000
            s.client(h, 100)
            s.server(h + 5_000, 50)
            s.client(h + 5_000 + s.d_s + s.d_c + 30, 100)

    def server_full_then_partial(s):
        # the server's full segment, a delayed ACK, then its partial tail (delayed_ack's
        # classic_nagle / cwnd reasons)
        s.handshake()
        t = 100_000.0
        for _ in range(6):
            s.client(t, 200)
            t1 = t + s.d_c + 300
            s.server(t1, s.mss)
            s.server(t1 + 10, s.mss)
            ta = t1 + s.d_c + 40_000
            s.client(ta, 0)
            s.server(ta + s.d_s + 20, 700)
            s.client(ta + s.d_s + 20 + s.d_c + 40_000, 0)
            t += 400_000

    def small_window(s):
        s.handshake()
        t = 100_000.0
        for _ in range(5):
            s.client(t, 100)
            a = t + s.d_s + 40_000
            s.server(a, 0, window=120)
            s.client(a + s.d_c + 20, 100)
            s.server(a + s.d_c + 20 + s.d_s + 50, 0, window=0)
            t = a + 300_000

    for b in (
        handshake_only,
        one_segment,
        holds,
        hole_at_start,
        hole_at_end,
        retransmission,
        retransmissions,
        quick_and_piggybacked,
        server_full_then_partial,
        small_window,
    ):
        for vantage in ("client", "server", "middle"):
            yield f"{b.__name__}-{vantage}", b, vantage


FIXTURE_CAPTURES = [
    "nagle_wwr/client.pcapng",
    "nagle_wwr/server.pcapng",
    "tls_record_split_write/client.pcapng",
    "tls_sse_nagle/server.pcapng",
    "tls_sse_drop/client.pcapng",
    "tcp_cork/server.pcapng",
    "fast_retransmit/middle.pcapng",
    "tls_tiny_records/client.pcapng",
    "h2_concurrency_limited_control/middle.pcapng",
]


def _traces(tmp_path_factory):
    for label, build, vantage in _scenarios():
        s = Sim.at(vantage)
        build(s)
        yield label, s.trace(tmp_path_factory.mktemp(label))
    for name in FIXTURE_CAPTURES:
        p = FIX / name
        if p.exists():
            yield name, pcapkit.open(p)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return list(_traces(tmp_path_factory))


def _hold_key(h):
    return (h.j1, h.j2, h.ka, h.lag_ns, h.gap_ns, h.delay_ns, h.tol_ns, h.pure, h.kind, h.note)


def _scan_key(scan):
    return [(*_hold_key(h), tuple(h.checks)) for h in scan.holds], scan.opportunities


def _views(ctx):
    for f in ctx.tcp_flows():
        for d in (0, 1):
            yield f, d, DirView.build(ctx, f, d)


def test_find_holds_as_before(traces):
    seen = {"views": 0, "holds": 0, "nagle_off": 0, "accepted": 0}
    for label, t in traces:
        ctx = t.detect_context
        for _, _, v in _views(ctx):
            if not (v.timing_applies and v.s_frame.size):
                continue
            seen["views"] += 1
            ref = ref16.find_holds_reference(ctx, v)
            got = tcp_model.find_holds(ctx, v)
            assert _scan_key(got) == _scan_key(ref), label
            assert got.nodelay_frames == ref.nodelay_frames, label
            seen["holds"] += len(got.holds)
            shared = tcp_model.scan_holds(ctx, v)
            assert shared.nodelay_frames == ref.nodelay_frames
            assert shared.opportunities == ref.opportunities
            if ref.nodelay_frames is None:
                assert _scan_key(shared) == _scan_key(ref), label
            else:
                seen["nagle_off"] += 1
                assert shared.holds == [], label
            want = ref16.accepted_holds_reference(ctx, v, scan=ref)
            for _ in range(2):  # the shared scan is not changed by asking twice
                kept = tcp_model.accepted_holds(ctx, v)
                assert [(*_hold_key(h), h.checks, h.tls_records, h.tls_split) for h in kept] == [
                    (*_hold_key(h), h.checks, h.tls_records, h.tls_split) for h in want
                ], label
            seen["accepted"] += len(want)
    # the cases exercise what they are meant to
    assert seen["views"] > 40 and seen["holds"] > 20 and seen["accepted"] > 10, seen


@pytest.mark.parametrize("thresholds", [(30.0, 500.0), (0.0, 1e6)])
def test_delayed_ack_events_as_before(traces, thresholds):
    lo, hi = thresholds
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        for _, _, v in _views(ctx):
            if not (v.timing_applies and v.s_frame.size and v.y_idx.size):
                continue
            kw = {"delack_timer_min_ms": lo, "ack_delay_max_ms": hi}
            want = ref16.events_reference(ctx, v, **kw)
            got = delayed_ack._events(ctx, v, **kw)
            assert got == want, label
            assert [type(x) for e in got for x in e.values()] == [
                type(x) for e in want for x in e.values()
            ]
            n += len(got)
    assert n > 0


def test_legs_and_jitter_as_before(traces):
    for label, t in traces:
        ctx = t.detect_context
        for f in ctx.tcp_flows():
            assert tcp_model._sampled_legs(ctx, f) == ref16.sampled_legs_reference(ctx, f), label
            for d in (0, 1):
                for d_x in (0, 5 * MS, 40 * MS):
                    assert tcp_model.reaction_jitter_ns(
                        ctx, f, d, d_x
                    ) == ref16.reaction_jitter_reference(ctx, f, d, d_x), label


def test_app_units_and_coalesced_as_before(traces):
    n_units = n_hits = 0
    for label, t in traces:
        ctx = t.detect_context
        for f, d, v in _views(ctx):
            fr, n = cork._app_units(ctx, f, d)
            rf, rn = ref16.app_units_reference(ctx, f, d)
            assert fr.dtype == rf.dtype and n.dtype == rn.dtype
            assert fr.tolist() == rf.tolist() and n.tolist() == rn.tolist(), label
            n_units += fr.size
            if not (v.timing_applies and v.s_frame.size):
                continue
            for max_gap, quiet in ((2 * MS, v.tolerance()), (50 * MS, 0), (0, 10 * MS)):
                got = cork._coalesced(v, (fr, n), max_gap, quiet)
                assert got == ref16.coalesced_reference(v, (fr, n), max_gap, quiet), label
                n_hits += len(got)
    assert n_units > 0 and n_hits > 0


def _near_candidates(v, units, max_gap):
    """``cork._coalesced``'s candidates before its release test, one view at a time."""
    fr, n = units
    multi = set(fr[n >= 2].tolist())
    new = v.new_pos.tolist()
    return [
        b
        for a, b in zip(new, new[1:], strict=False)
        if int(v.s_frame[b]) in multi and int(v.s_ts[b]) - int(v.s_ts[a]) <= max_gap
    ]


def test_key_chunks():
    """Row ranges of sorted keys: in order, covering every row once, cut only where the
    key changes, about the size asked (a longer key whole)."""
    rng = np.random.default_rng(5)
    keys = np.sort(rng.integers(0, 40, 500)).astype(np.int32)
    keys[100:300] = keys[100]  # one key longer than any range
    keys = np.sort(keys)
    for size in (1, 3, 17, 64, 1000):
        got = list(tcp_model.key_chunks(keys, size))
        assert got[0][0] == 0 and got[-1][1] == keys.shape[0]
        assert all(b0 == a1 for (_, b0), (a1, _) in zip(got, got[1:], strict=False))
        for a, b in got:
            assert b > a and (a == 0 or keys[a] != keys[a - 1])
            assert b - a <= size or keys[a] == keys[b - 1]  # a longer key: alone
    assert list(tcp_model.key_chunks(keys[:0], 5)) == []


@pytest.mark.parametrize("rows", [None, 1, 7])
@pytest.mark.parametrize("max_gap_ms", [0.0, 1.0, 50.0, 1e6])
def test_coalescing_dirs_as_per_view(traces, monkeypatch, max_gap_ms, rows):
    """cork's directions with a write-coalescing candidate, found for every direction at
    once (in passes of ``rows`` segment rows' worth of directions, or the default) =
    those whose view has one (so a direction left out has nothing for ``_coalesced`` to
    test)."""
    if rows is not None:
        monkeypatch.setattr(tcp_model, "ROWS_AT_ONCE", rows)
    max_gap = int(max_gap_ms * MS)
    seen = {"dirs": 0, "with": 0}
    for label, t in traces:
        ctx = t.detect_context
        got = cork._coalescing_dirs(ctx, max_gap)
        assert got is not None, label
        want = set()
        for f, d, v in _views(ctx):
            units = cork._app_units(ctx, f, d)
            seen["dirs"] += 1
            if units[0].size and _near_candidates(v, units, max_gap):
                want.add(2 * f + d)
        assert got == want, label
        seen["with"] += len(want)
    floor = {0.0: 0, 1.0: 0, 50.0: 2, 1e6: 3}[max_gap_ms]  # what the fixtures hold
    assert seen["dirs"] > 40 and seen["with"] >= floor, seen


def test_rec_text_is(traces):
    for _, t in traces:
        ctx = t.detect_context
        everything = slice(0, ctx.rec_dir_keys.shape[0])
        for c, value in (
            ("epoch", "handshake"),
            ("epoch", "application"),
            ("epoch", "nope"),
            ("status", "decrypted"),
        ):
            want = np.asarray(ctx.rec_column(c, everything) == value, bool)
            assert ctx.rec_text_is(c, value).tolist() == want.tolist()


def test_rec_text_contains(traces):
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        for f in ctx.tcp_flows():
            for d in (0, 1):
                hs = ctx.rec_arrays(f, d)["handshake"]
                for sub in ("ClientHello", "Finished", "nope"):
                    want = np.char.find(hs.astype(str), sub) >= 0
                    got = ctx.rec_text_contains("handshake", sub, f, d)
                    assert got.tolist() == want.tolist(), label
                    n += int(want.sum())
    assert n > 0


def test_median_as_numpy():
    rng = np.random.default_rng(16)
    cases = [np.array([5]), np.array([3, 1]), np.array([2, 2, 2, 2]), np.array([-7, 0, 7])]
    for _ in range(3000):
        k = int(rng.integers(1, 60))
        a = rng.integers(-(10 ** int(rng.integers(1, 17))), 10 ** int(rng.integers(1, 17)), k)
        cases.append(a.astype(np.int64))
        cases.append(np.abs(a - np.median(a)))  # the float64 second step of the MAD
    for a in cases:
        assert tcp_model.median_of(a) == float(np.median(a)), a


# --- cork: when X had the request -------------------------------------------------------
def test_request_complete_at_as_before_on_traces(traces):
    """The calls :func:`cork._cork` makes (Y's last packet reaching X before each new
    segment of X, when it carries data), on every timed direction of the traces."""
    calls = 0
    for label, t in traces:
        ctx = t.detect_context
        for _, _, v in _views(ctx):
            if not (v.timing_applies and v.s_frame.size and v.y_idx.size):
                continue
            for j in v.new_pos.tolist():
                ts = int(v.p.ts[v.s_pi[j]])
                for slack in (0, v.tolerance(), 50 * MS):
                    kb = v.last_y_reaching(ts, slack)
                    if kb is None or not bool(v.y_data[kb]):
                        continue
                    tb = int(v.p.ts[v.y_idx[kb]])
                    want = ref16.request_complete_at_reference(v, kb, tb, ts)
                    assert cork._request_complete_at(v, kb, tb, ts) == want, label
                    calls += 1
    assert calls > 100


def _random_flow(rng, n, backwards, unit=1):
    """A flow of ``n`` packets: random directions, times (ties; a few going backwards when
    ``backwards``), cumulative ACKs that mostly grow (some dips, some packets without
    ACK), payloads (some empty, a few ending below offset 0); with ``unit`` > 1, offsets in
    steps of ``unit`` (ACKs equal to a data end, often)."""
    ts = np.cumsum(rng.integers(0, 3 * MS, n)).astype(np.int64)
    if backwards:
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, n))
            ts[i] -= int(rng.integers(1, 10 * MS))
    ack = np.cumsum(rng.integers(0, 400 // unit + 1, n) * unit).astype(np.int64)
    ack = ack - np.where(rng.random(n) < 0.15, rng.integers(0, 2_000 // unit + 1, n) * unit, 0)
    ack = np.where(rng.random(n) < 0.1, -1, np.maximum(ack, 0))
    start = np.cumsum(rng.integers(0, 300 // unit + 1, n) * unit).astype(np.int64)
    start = np.where(rng.random(n) < 0.05, -int(rng.integers(1, 1_000)), start)
    length = np.where(rng.random(n) < 0.4, 0, rng.integers(1, 500 // unit + 1, n) * unit)
    return tcp_model.FlowPackets(
        frame=np.arange(1, n + 1, dtype=np.int64),
        ts=ts,
        dir=rng.integers(0, 2, n).astype(np.int64),
        flags=np.full(n, 0x10, np.int64),
        start=start,
        length=length.astype(np.int64),
        ack=ack,
        win_raw=np.full(n, 1_000, np.int64),
        win=np.full(n, 1_000, np.int64),
    )


def test_request_complete_at_as_before_random(traces):
    """Random flows, times in order and going backwards (the scan's fallback), every Y
    position, windows from empty to the whole flow, d_X from 0 to larger than the flow."""
    import dataclasses

    base = next(v for _, t in traces for _, _, v in _views(t.detect_context) if v.timing_applies)
    rng = np.random.default_rng(1616)
    seen = {"answers": 0, "none": 0, "searched": 0, "scanned": 0, "known": 0, "unknown": 0}
    for k in range(400):
        n = int(rng.integers(1, 120))
        p = _random_flow(rng, n, backwards=k % 3 == 0, unit=100 if k % 3 == 1 else 1)
        d = int(rng.integers(0, 2))
        y = np.nonzero(p.dir == 1 - d)[0]
        if not y.size:
            continue
        v = dataclasses.replace(
            base,
            p=p,
            d=d,
            d_x=int(rng.choice([0, MS, 5 * MS, 10**12])),
            y_idx=y,
            y_data=p.length[y] > 0,
        )
        seen["searched" if v.x_acks is not None else "scanned"] += 1
        q_kb, q_tb, q_t, q_hold = [], [], [], []
        for kb in range(y.size):
            tb = int(p.ts[y[kb]])
            for t in (tb, tb + int(rng.integers(0, 40 * MS)), int(p.ts.max()), tb - MS):
                want = ref16.request_complete_at_reference(v, kb, tb, t)
                assert cork._request_complete_at(v, kb, tb, t) == want, (k, kb, t)
                seen["none" if want is None else "answers"] += 1
                hold = t - tb - v.d_x
                q_kb.append(kb), q_tb.append(tb), q_t.append(t)
                q_hold.append(hold if want is None else min(hold, t - want))
        # the prefilter's form: the same holds for all questions at once, where it answers
        hold = np.array(q_t) - np.array(q_tb) - v.d_x
        arr = (np.array(q_kb), np.array(q_tb), np.array(q_t), hold)
        got, known = cork._request_hold_all(v, *arr)
        assert got[known].tolist() == np.array(q_hold)[known].tolist(), k
        assert got[~known].tolist() == hold[~known].tolist(), k
        seen["known"] += int(known.sum())
        seen["unknown"] += int((~known).sum())
    assert seen["answers"] > 50 and seen["none"] > 50, seen
    assert seen["searched"] > 50 and seen["scanned"] > 20, seen
    assert seen["known"] > 1000 and seen["unknown"] > 50, seen


def test_y_end_max_is_the_prefix_max():
    """``np.max(ends of Y's data packets up to k, initial=0)``: 0 before any data, and
    when every end so far is below 0."""
    rng = np.random.default_rng(7)
    zeros = 0
    for _ in range(200):
        p = _random_flow(rng, int(rng.integers(0, 60)), backwards=False)
        y = np.nonzero(p.dir == 1)[0]
        v = DirView.__new__(DirView)
        v.p, v.y_idx, v.y_data = p, y, p.length[y] > 0
        got = v.y_end_max
        assert got.shape == y.shape
        for kb in range(y.size):
            want = int(np.max(p.end[y[: kb + 1]][v.y_data[: kb + 1]], initial=0))
            assert int(got[kb]) == want
            zeros += want == 0
    assert zeros > 20


@pytest.mark.parametrize("at_once", [cork.REQUESTS_AT_ONCE_MIN, 1])
def test_cork_prefilter_changes_nothing(traces, monkeypatch, at_once):
    """cork's prefilter settles partial segments (and prompt answers' service times) that
    :func:`cork._cork`'s loop would settle the same way: the findings are those of the
    loop over every partial segment (answers to requests settled by the prefilter from
    ``at_once`` per direction on)."""
    monkeypatch.setattr(cork, "REQUESTS_AT_ONCE_MIN", at_once)
    got = {label: cork.detect(t.detect_context) for label, t in traces}

    def every_partial(v, new, partial, lo, hi, quiet):
        return np.nonzero(partial)[0], None, []

    monkeypatch.setattr(cork, "_cork_prefilter", every_partial)
    monkeypatch.setattr(cork, "_prefilter_all", lambda ctx, jobs: {})
    n = 0
    for label, t in traces:
        want = cork.detect(t.detect_context)
        assert [repr(f) for f in got[label]] == [repr(f) for f in want], label
        n += len(want)
    assert n > 0


# --- every direction at once (segmented passes) ---------------------------------------------
def test_seg_kind_is(traces):
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        kinds = ctx.seg_columns["kind"]
        for value in ("new", "prev_not_captured", "retransmission", "spurious_retransmission"):
            got = ctx.seg_kind_is(value)
            assert got.dtype == bool and got.tolist() == (kinds == value).tolist(), label
            n += int(got.sum())
        # a misspelt kind is an error, not a mask of False (receiver_limited read "spurious")
        with pytest.raises(ValueError, match="not a segment kind: 'spurious'"):
            ctx.seg_kind_is("spurious")
    assert n > 0


def test_all_data_acks_as_per_direction(traces, monkeypatch):
    """One segmented pass = ``_make_data_acks`` (the per-direction function, kept as the
    fallback) for every direction: handshake only, one segment, holes at the start and
    end, retransmissions, both vantages, and directions without new data or without a
    packet from the other side (None)."""
    seen = {"dirs": 0, "none": 0, "pairs": 0}
    for label, t in traces:
        ctx = t.detect_context
        every = tcp_model._all_data_acks(ctx)
        assert every is not None, label
        for f in ctx.tcp_flows():
            for d in (0, 1):
                want = tcp_model._make_data_acks(ctx, f, d)
                got = every.get(2 * f + d)
                if want is None:
                    assert got is None, (label, f, d)
                    seen["none"] += 1
                    continue
                assert got[0] == want[0], (label, f, d)
                for g, w in zip(got[1:], want[1:], strict=True):
                    assert g.dtype == w.dtype and g.tolist() == w.tolist(), (label, f, d)
                memo = tcp_model._data_acks(ctx, f, d)  # what the detectors read
                assert memo is not None and memo[2].tolist() == want[2].tolist()
                seen["dirs"] += 1
                seen["pairs"] += want[1].size
    assert seen["dirs"] > 40 and seen["none"] > 5 and seen["pairs"] > 500, seen
    # keys that do not fit one int64: each direction on its own, same answers
    t = dict(traces)["holds-client"]
    ctx = t.detect_context
    monkeypatch.setattr(tcp_model, "_FLOW_MAX", 0)
    ctx._memo.clear()
    assert tcp_model._all_data_acks(ctx) is None
    for f in ctx.tcp_flows():
        for d in (0, 1):
            want = tcp_model._make_data_acks(ctx, f, d)
            got = tcp_model._data_acks(ctx, f, d)
            assert (got is None) == (want is None)
            if got is not None:
                assert got[1].tolist() == want[1].tolist() and got[2].tolist() == want[2].tolist()
    ctx._memo.clear()


def test_frames_and_prior_order(traces, monkeypatch):
    """``Finding.frames`` = the old first-seen loop; ``ctx.prior`` as each detector sees
    it = ``sorted(findings so far of the kinds it reads, key=finding_order)`` (nothing for
    a detector that reads none), and the result in that order."""
    from pcapkit import detect
    from pcapkit.detect import registry

    def frames_reference(f):
        seen = []
        for e in f.evidence:
            if e.frame not in seen:
                seen.append(e.frame)
        return seen

    checked = 0
    for label, t in traces[-len(FIXTURE_CAPTURES) :]:
        ctx = t.detect_context
        ctx._memo.clear()
        so_far = []
        for det in registry.DETECTORS:
            orig = det.module.detect
            kinds = registry.read_kinds(det)

            def spy(c, *a, _orig=orig, so_far=so_far, _kinds=kinds, **kw):
                read = [f for f in so_far if f.kind in _kinds]
                assert c.prior == sorted(read, key=detect.finding_order)
                found = _orig(c, *a, **kw)
                so_far.extend(found)
                return found

            monkeypatch.setattr(det.module, "detect", spy)
        out = detect.run_detectors(ctx)
        monkeypatch.undo()
        assert out == sorted(so_far, key=detect.finding_order), label
        for f in out:
            assert f.frames == frames_reference(f)
            checked += len(f.evidence)
    assert checked > 20


def _cork_jobs(ctx, params):
    lo_f, hi_f, rto_min_ms, slack_ms = params
    for f in ctx.tcp_flows():
        for d in (0, 1):
            v = DirView.timed(ctx, f, d)
            if v is None:
                continue
            quiet = v.tolerance() + v.coupling.late_ns
            rto_est = v.rtt + max(int(rto_min_ms * MS), 2 * v.rtt)
            lo = int(lo_f * (v.rtt + rto_min_ms * MS))
            yield v, lo, int(hi_f * rto_est + slack_ms * MS), quiet, rto_est


def _prefilter_pairs(ctx, params):
    jobs = list(_cork_jobs(ctx, params))
    pre = cork._prefilter_all(ctx, jobs)
    for v, lo, hi, quiet, _ in jobs:
        new = v.new_pos
        partial = ~v.s_super[new] & (v.s_len[new] < v.mss)
        yield v, pre.get(2 * v.f + v.d), cork._cork_prefilter(v, new, partial, lo, hi, quiet)


def _same_prefilter(got, want):
    assert got[0].dtype == want[0].dtype and got[0].tolist() == want[0].tolist()
    assert (got[1] is None) == (want[1] is None)
    if want[1] is not None:
        assert got[1].dtype == want[1].dtype and got[1].tolist() == want[1].tolist()
    assert got[2] == want[2]


@pytest.mark.parametrize("params", [(0.95, 1.25, 200.0, 20.0), (0.2, 3.0, 50.0, 0.0)])
def test_prefilter_all_as_per_direction(traces, params):
    """cork's prefilter of every timed direction at once = ``_cork_prefilter`` (the
    per-direction function, kept for the directions it leaves) on the labelled traces;
    most directions are answered at once."""
    seen = {"at_once": 0, "left": 0, "todo": 0, "resets": 0}
    for _label, t in traces:
        for v, got, want in _prefilter_pairs(t.detect_context, params):
            if got is None:
                seen["left"] += 1
                continue
            if v.new_pos.size:
                _same_prefilter(got, want)
                seen["at_once"] += 1
                seen["todo"] += want[0].size
                seen["resets"] += int(want[1][-1]) if want[1] is not None else 0
    assert seen["at_once"] > 40 and seen["todo"] > 20 and seen["resets"] > 20, seen


@pytest.mark.parametrize("chunk", [1, 7, 24])
def test_prefilter_all_in_passes(traces, monkeypatch, chunk):
    """cork's prefilter in passes of a few segments' worth of directions
    (``PREFILTER_CHUNK``) = in one pass: the same directions answered, the same
    answers."""
    params = (0.95, 1.25, 200.0, 20.0)
    split = compared = 0
    part = cork._prefilter_part
    for _label, t in traces:
        ctx = t.detect_context
        jobs = list(_cork_jobs(ctx, params))
        whole = cork._prefilter_all(ctx, jobs)
        calls = []

        def spy(*a, calls=calls, **kw):
            calls.append(len(a[1]))
            return part(*a, **kw)

        monkeypatch.setattr(cork, "PREFILTER_CHUNK", chunk)
        monkeypatch.setattr(cork, "_prefilter_part", spy)
        got = cork._prefilter_all(ctx, jobs)
        monkeypatch.undo()
        if whole:  # every direction in exactly one pass
            assert sum(calls) == len(jobs)
        split += len(calls) > 1
        assert got.keys() == whole.keys()
        for k, want in whole.items():
            _same_prefilter(got[k], want)
            compared += 1
    assert compared > 40 and split >= 3, (compared, split)


def _tamper_y_backwards(ctx, v, a):
    ts = ctx.packet_columns["ts"]
    y = v.y_idx[: v.y_idx.size // 2] + a  # Y's first half: after Y's last packet
    return ts, y, int(ts[v.y_idx[-1] + a]) + 1


def _tamper_x_bad_backwards(ctx, v, a):
    cols = ctx.seg_columns  # (pandas' arrays are read-only: a copy to change)
    ts = cols["ts_ns"] = cols["ts_ns"].copy()
    rows = np.flatnonzero(ctx.seg_dir_keys == 2 * v.f + v.d)
    kind = ctx.seg_columns["kind"][rows]
    bad = rows[(kind != "new") & (kind != "prev_not_captured")]
    if bad.size < 2:
        return None
    return ts, bad[:1], int(ts[bad[-1]]) + 1  # the first retransmission after the last


def _tamper_y_at_bound(ctx, v, a):
    """A Y packet seen exactly at a partial segment's search bound (t − d_X + quiet)."""
    ts = ctx.packet_columns["ts"]
    quiet = v.tolerance() + v.coupling.late_ns
    ys = v.y_ts
    for j in v.new_pos[~v.s_super[v.new_pos] & (v.s_len[v.new_pos] < v.mss)].tolist():
        t = int(v.p.ts[v.s_pi[j]])
        bound = min(t - v.d_x + quiet, t - 1)
        k = int(np.searchsorted(ys, bound, side="right"))
        if 0 < k < ys.size and int(ys[k]) > bound and int(ys[k - 1]) < bound:
            return ts, v.y_idx[k : k + 1] + a, bound
    return None


@pytest.mark.parametrize(
    "label,tamper,left",
    [
        ("holds-server", _tamper_y_backwards, True),
        ("retransmissions-client", _tamper_x_bad_backwards, True),
        ("holds-server", _tamper_y_at_bound, False),
        ("holds-client", _tamper_y_at_bound, False),
    ],
)
def test_prefilter_all_tampered(traces, label, tamper, left):
    """Times going backwards (Y's, or X's retransmissions'): that direction is left to
    ``_cork_prefilter`` (which then loops over every partial segment: resets None); a Y
    packet exactly at a segment's search bound: answered at once, as before."""
    ctx = dict(traces)[label].detect_context
    ctx._memo.clear()
    params = (0.95, 1.25, 200.0, 20.0)
    changed = 0
    for v, got, _ in list(_prefilter_pairs(ctx, params)):
        if got is None or (not left and not got[0].size):
            continue
        a = int(np.searchsorted(ctx.packet_flows, v.f))
        hit = tamper(ctx, v, a)
        if hit is None:
            continue
        arr, idx, value = hit
        saved = arr[idx].copy()
        try:
            arr[idx] = value
            ctx._memo.clear()
            for w, got2, want in _prefilter_pairs(ctx, params):
                if (w.f, w.d) == (v.f, v.d):
                    changed += 1
                    if left:
                        assert got2 is None and want[1] is None
                    else:
                        _same_prefilter(got2, want)
                elif got2 is not None and w.new_pos.size:
                    _same_prefilter(got2, want)
        finally:
            arr[idx] = saved
            ctx._memo.clear()
    assert changed > 0


def _same_values(a, b):
    return a.dtype == b.dtype and all(
        x == y or (x != x and y != y) for x, y in zip(a.tolist(), b.tolist(), strict=True)
    )


def test_app_record_rows_as_app_records(traces):
    """tls_records: the application records of a direction from masks over all records =
    ``app_records`` of its columns — with keys, and without them (TLS 1.3 records of the
    handshake epoch: those after the first encrypted push unit are application data)."""
    from pcapkit.detect import tls_records

    without_keys = [
        (f"{name} (no keys)", pcapkit.open(FIX / name, embedded_keys=False))
        for name in ("tls_tiny_records/client.pcapng", "tls_sse_nagle/server.pcapng")
        if (FIX / name).exists()
    ]
    seen = {"dirs": 0, "none": 0, "hidden": 0}
    for label, t in [*traces, *without_keys]:
        ctx = t.detect_context
        for f in ctx.tcp_flows():
            for d in (0, 1):
                cols = ctx.rec_arrays(f, d)
                want = tls_records.app_records({c: cols[c] for c in tls_records._REC_COLS})
                keep = tls_records.app_record_rows(ctx, f, d)
                assert keep.dtype == bool and keep.shape[0] == ctx.records_of(f, d).shape[0]
                if not tls_records.n_rows(want):
                    assert not keep.any(), (label, f, d)
                    seen["none"] += 1
                    continue
                for c in tls_records._REC_COLS:
                    assert _same_values(cols[c][keep], want[c]), (label, f, d, c)
                seen["dirs"] += 1
                epoch = cols["epoch"][keep]
                seen["hidden"] += int((epoch == "handshake").sum())
    assert seen["dirs"] > 10 and seen["none"] > 10 and seen["hidden"] > 0, seen


def test_ssr_kind_masks(traces):
    """ssr's data and retransmission masks sliced from masks over every segment = the
    direction's kinds compared as text (what ``seg_rows`` slices is ``seg_arrays``)."""
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        for f in ctx.tcp_flows():
            for d in (0, 1):
                rows = ctx.seg_rows(f, d)
                kind = ctx.seg_arrays(f, d)["kind"]
                assert ctx.seg_columns["frame"][rows].tolist() == (
                    ctx.seg_arrays(f, d)["frame"].tolist()
                )
                for values in (ssr.DATA_KINDS, ("retransmission", "out_of_order")):
                    want = np.isin(kind.astype(str), values)
                    got = np.zeros(kind.shape[0], bool)
                    for x in values:
                        got |= ctx.seg_kind_is(x)[rows]
                    assert got.tolist() == want.tolist(), label
                    n += int(want.sum())
    assert n > 0


def test_percentiles_as_numpy():
    """cost_stats' p50/p95 = ``np.percentile(a, (50, 95))`` (numpy's linear method) on
    100,000 arrays: sizes 1–60, costs as the detectors form them (ns differences / 1e6),
    ties, negative values, huge and tiny magnitudes; not finite: numpy itself."""
    rng = np.random.default_rng(1695)
    cases = [np.array([2.5]), np.array([1.0, 3.0]), np.array([7.0] * 4), np.array([-1.0, 1.0])]
    cases += [np.array([1.0, np.nan, 3.0]), np.array([np.inf, 1.0]), np.array([-np.inf, np.inf])]
    for _ in range(30_000):
        k = int(rng.integers(1, 61))
        scale = 10 ** int(rng.integers(0, 13))
        a = rng.integers(-scale, scale + 1, k) / MS
        if rng.random() < 0.3:
            a = np.round(a, int(rng.integers(0, 4)))  # ties
        cases.append(a.astype(float))
    with np.errstate(invalid="ignore"):  # (numpy's own arithmetic on ±inf)
        for a in cases:
            want = np.percentile(a, (50, 95)).tolist()
            got = tcp_model._percentiles(a, (0.5, 0.95))
            assert [repr(x) for x in got] == [repr(x) for x in want], a
        for a in cases[:3000]:
            p50, p95 = np.percentile(a, (50, 95)).tolist()  # cost_stats as it was
            want = {
                "count": int(a.size),
                "total_ms": round(float(a.sum()), 3),
                "p50_ms": round(p50, 3),
                "p95_ms": round(p95, 3),
                "max_ms": round(float(a.max()), 3),
            }
            assert repr(tcp_model.cost_stats(a.tolist())) == repr(want), a


def test_kind_masks_in_views(traces):
    """The views' kind tests sliced from masks over every segment = the text compared per
    direction (DirView.s_new and x_bad_ts, hol's seg_new and seg_retx)."""
    from pcapkit.detect import hol

    n = {"new": 0, "bad": 0, "retx": 0}
    for label, t in traces:
        ctx = t.detect_context
        extras = hol._PacketExtras(ctx.packets)
        for f, d, v in _views(ctx):
            k = v.s_kind
            assert v.s_new.dtype == bool and v.s_new.tolist() == (k == "new").tolist(), label
            want_bad = v.s_ts[(k != "new") & (k != "prev_not_captured")]
            assert v.x_bad_ts.tolist() == want_bad.tolist(), label
            h = hol._Dir(ctx, extras, f, d)
            retx = (k == "retransmission") | (k == "spurious_retransmission")
            assert h.seg_retx.tolist() == retx.tolist()
            assert h.seg_new.tolist() == (k == "new").tolist()
            rows = ctx.seg_rows(f, d)  # delivery's mask
            got = ctx.seg_kind_is("new")[rows] | ctx.seg_kind_is("prev_not_captured")[rows]
            assert got.tolist() == np.isin(k, ("new", "prev_not_captured")).tolist()
            n["new"] += int(v.s_new.sum())
            n["bad"] += want_bad.size
            n["retx"] += int(retx.sum())
    assert n["new"] > 100 and n["bad"] > 3 and n["retx"] > 3, n


def _grouped_case(rng, n_groups, backwards_share=0.0):
    sizes = rng.integers(0, 12, n_groups)
    gid = np.repeat(np.arange(n_groups), sizes)
    vals = []
    for n in sizes.tolist():
        v = np.sort(rng.integers(-50, 50, n) * int(rng.choice([1, 10**9])))
        if n > 1 and rng.random() < backwards_share:
            v = v[::-1].copy()
        vals.append(v)
    values = np.concatenate(vals) if vals else np.zeros(0, np.int64)
    return sizes, gid, values.astype(np.int64)


def test_grouped_search_as_per_group():
    """``Grouped.search`` = ``np.searchsorted`` in each group's own values (both sides,
    queries below, inside, between and above a group's values, empty groups);
    ``running_max`` = each group's ``np.maximum.accumulate``; ``backwards`` names the
    groups whose values go backwards; keys that would not fit int64: None."""
    rng = np.random.default_rng(16)
    n = 0
    for _ in range(300):
        ng = int(rng.integers(1, 8))
        sizes, gid, values = _grouped_case(rng, ng, backwards_share=0.3)
        back = tcp_model.backwards(gid, values, ng)
        start = np.cumsum(sizes) - sizes
        for g in range(ng):
            own = values[gid == g]
            assert bool(back[g]) == bool(own.size > 1 and (np.diff(own) < 0).any())
        gr = tcp_model.grouped(gid, values, ng)
        assert gr is not None
        q = np.concatenate([values, values - 1, values + 1, [-(10**12), 10**12, 0]])
        for g in np.flatnonzero(~back).tolist():
            own = values[gid == g]
            for side in ("left", "right"):
                got = gr.search(np.full(q.shape, g), q, side) - start[g]
                assert got.tolist() == np.searchsorted(own, q, side=side).tolist()
                n += q.size
        rm = tcp_model.grouped(gid, values, ng).running_max()
        for g in range(ng):
            own = values[gid == g]
            assert rm[gid == g].tolist() == np.maximum.accumulate(own).tolist()
    assert n > 10_000
    assert tcp_model.backwards(np.zeros(0, np.int64), np.zeros(0, np.int64), 0).tolist() == [False]
    big = np.array([0, 1 << 61], np.int64)
    assert tcp_model.grouped(np.array([0, 1]), big, 2) is None
    assert tcp_model.grouped(np.array([0, 1]), big.astype(float), 2) is None


def _delack_views(ctx):
    return [
        v
        for f in ctx.tcp_flows()
        for d in (0, 1)
        if (v := DirView.timed(ctx, f, d)) is not None and v.y_idx.size
    ]


def _same_candidates(got, want, label):
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist(), label


@pytest.mark.parametrize("thresholds", [(30.0, 500.0), (0.0, 1e6)])
def test_delack_prefix_all_as_per_direction(traces, thresholds):
    """delayed_ack's candidate ACKs of every direction at once = ``_prefix`` of each
    direction (what ``_events`` asks for a direction left out); most directions are
    answered at once, and some have candidates."""
    lo, hi = thresholds
    seen = {"at_once": 0, "left": 0, "cand": 0, "dirs_with": 0}
    for label, t in traces:
        ctx = t.detect_context
        views = _delack_views(ctx)
        every = delayed_ack._prefix_all(ctx, views, lo, hi)
        for v in views:
            got = every.get(2 * v.f + v.d)
            if got is None:
                seen["left"] += 1
                continue
            want = delayed_ack._prefix(v, v.tolerance(), v.coupling.late_ns, lo, hi)
            _same_candidates(got, want, label)
            seen["at_once"] += 1
            seen["cand"] += want[0].size
            seen["dirs_with"] += bool(want[0].size)
    # (a candidate must also leave X waiting: at the RFC's bounds only a few do here)
    assert seen["at_once"] > 40 and seen["cand"] > 8 and seen["dirs_with"] >= 3, seen


def test_delack_prefix_all_backwards(traces):
    """A direction whose new segments' ends go backwards is left to ``_prefix`` (the
    grouped search would not stand for its own); the others keep their answers."""
    t = dict(traces)["tls_sse_nagle/server.pcapng"]
    ctx = t.detect_context
    views = _delack_views(ctx)
    before = delayed_ack._prefix_all(ctx, views, 0.0, 1e6)
    v = max(views, key=lambda v: v.new_pos.size)
    rows = np.flatnonzero(ctx.seg_dir_keys == 2 * v.f + v.d)
    new = rows[ctx.seg_kind_is("new")[rows]]
    assert new.size > 2
    cols = ctx.seg_columns  # (pandas' arrays are read-only: a copy to change)
    end = cols["end"]
    try:
        cols["end"] = end.copy()
        cols["end"][new[1]] = cols["end"][new[0]] - 1
        got = delayed_ack._prefix_all(ctx, views, 0.0, 1e6)
    finally:
        cols["end"] = end
    assert 2 * v.f + v.d not in got
    assert got.keys() == before.keys() - {2 * v.f + v.d}
    for k, c in got.items():
        _same_candidates(c, before[k], k)


def _detected(traces, *detectors):
    """[(label, repr(finding))] of ``detectors`` run in order on every trace, each trace
    from an empty memo (and left with one)."""
    out = []
    for label, t in traces:
        ctx = t.detect_context
        ctx._memo.clear()
        for det in detectors:
            out += [(label, repr(f)) for f in det.detect(ctx)]
        ctx._memo.clear()
    return out


def test_delayed_ack_detect_without_prefix_all(traces, monkeypatch):
    """delayed_ack.detect with the candidates of every direction at once = with each
    direction's own ``_prefix`` (the directions without a candidate skipped early)."""
    want = _detected(traces, delayed_ack)
    monkeypatch.setattr(delayed_ack, "_prefix_all", lambda *a: {})
    assert _detected(traces, delayed_ack) == want
    assert len(want) > 0


def test_scan_holds_all_as_find_holds(traces):
    """The hold scans made for many directions at once = ``find_holds(...,
    holds_if_nagle_off=False)`` of each (what ``scan_holds`` makes); the directions with
    holds to describe are left to it.  Some scans show Nagle off with opportunities."""
    seen = {"made": 0, "left": 0, "nodelay": 0, "opportunities": 0}
    for label, t in traces:
        ctx = t.detect_context
        for th in ((30.0, 500.0), (0.0, 1e6)):
            ctx._memo.clear()
            views = _delack_views(ctx)
            kw = {"delack_timer_min_ms": th[0], "ack_delay_max_ms": th[1]}
            made = tcp_model.scan_holds_all(ctx, views, **kw)
            n = 0
            for v in views:
                key = ("tcp_model.scan_holds", v.f, v.d, *th)
                got = ctx._memo.get(key)
                if got is None:
                    seen["left"] += 1
                    continue
                n += 1
                want = tcp_model.find_holds(ctx, v, holds_if_nagle_off=False, **kw)
                assert got.holds == [] and want.holds == [], label
                assert got.opportunities == want.opportunities, label
                assert got.nodelay_frames == want.nodelay_frames, label
                assert type(got.opportunities) is int
                seen["nodelay"] += got.nodelay_frames is not None
                seen["opportunities"] += got.opportunities
            assert n == made, label
            seen["made"] += made
        ctx._memo.clear()
    assert seen["made"] > 30 and seen["left"] > 5, seen
    assert seen["nodelay"] > 3 and seen["opportunities"] > 3, seen


def test_scan_holds_all_y_times_backwards(traces):
    """A direction whose Y packets' times go backwards keeps find_holds for its
    opportunities (a search in Y's times would not stand for its own)."""
    ref = {}
    for _label, t in traces:
        ctx = t.detect_context
        ctx._memo.clear()
        tcp_model.scan_holds_all(ctx, _delack_views(ctx))
        for v in _delack_views(ctx):
            got = ctx._memo.get(("tcp_model.scan_holds", v.f, v.d, 30.0, 500.0))
            if got is not None and got.opportunities:
                ref[2 * v.f + v.d] = v
        if ref:
            break
    assert ref
    v = next(iter(ref.values()))
    pc = ctx.packet_columns
    ts = pc["ts"]
    a = int(np.searchsorted(ctx.packet_flows, v.f))
    try:
        pc["ts"] = ts.copy()
        pc["ts"][v.y_idx[0] + a] = int(ts[v.y_idx[-1] + a]) + 1  # Y's first after its last
        ctx._memo.clear()
        tcp_model.scan_holds_all(ctx, _delack_views(ctx))
        assert ("tcp_model.scan_holds", v.f, v.d, 30.0, 500.0) not in ctx._memo
    finally:
        pc["ts"] = ts
        ctx._memo.clear()


def test_hold_counts_as_find_holds(traces):
    """The pairs' opportunities and Nagle-off evidence of every direction at once =
    ``find_holds``' (Nagle on or off: the counts scan_holds_all relies on), on the
    labelled traces: quick, late and piggy-backed ACKs, data from Y before S2."""
    seen = {"dirs": 0, "opportunities": 0, "nodelay": 0, "pairs": 0}
    for label, t in traces:
        ctx = t.detect_context
        views = _delack_views(ctx)
        got = tcp_model._hold_counts(ctx, views)
        if not views:
            continue
        assert got is not None, label
        n_pairs, opportunities, nodelay, back_ts = got
        for i, v in enumerate(views):
            want = tcp_model.find_holds(ctx, v)
            assert nodelay.get(i) == want.nodelay_frames, label
            if not back_ts[i]:
                assert (opportunities[i] if n_pairs[i] else 0) == want.opportunities, label
            seen["dirs"] += 1
            seen["opportunities"] += want.opportunities
            seen["nodelay"] += want.nodelay_frames is not None
            seen["pairs"] += n_pairs[i]
    assert seen["dirs"] > 40 and seen["opportunities"] > 30 and seen["nodelay"] > 3, seen


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_all_app_units_in_chunks(traces, monkeypatch, chunk):
    """The (direction, frame) keys of the selected records built a chunk of records at a
    time: the same units as the per-direction reference for any chunk size (one record,
    a few, all at once)."""
    monkeypatch.setattr(cork, "_CHUNK", chunk)
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        ctx._memo.clear()
        for f, d, _v in _views(ctx):
            got = cork._app_units(ctx, f, d)
            want = ref16.app_units_reference(ctx, f, d)
            assert [x.tolist() for x in got] == [x.tolist() for x in want], label
            n += want[0].size
        ctx._memo.clear()
    assert n > 100


def test_hold_counts_y_data_at_the_bound(traces):
    """A data packet of Y seen exactly at a pair's bound (t2 − d_X + tol) reached X before
    S2 left (a search to the right in Y's times): the opportunities still = find_holds'."""
    done = 0
    for _label, t in traces:
        ctx = t.detect_context
        ts = ctx.packet_columns["ts"]
        for v in _delack_views(ctx):
            ref = tcp_model.find_holds(ctx, v)
            if not ref.opportunities:
                continue
            a0 = int(np.searchsorted(ctx.packet_flows, v.f))
            tol = v.tolerance()
            for j in range(1, v.s_frame.size):
                i2 = int(v.s_pi[j])
                bound = min(int(v.p.ts[i2]) - v.d_x + tol, int(v.p.ts[i2]) - 1)
                k = int(np.searchsorted(v.y_ts, bound, side="right"))  # first Y after it
                if not (0 < k < v.y_idx.size and v.y_data[k] and v.y_ts[k - 1] <= bound):
                    continue
                row = int(v.y_idx[k]) + a0
                old = int(ts[row])
                try:
                    ts[row] = bound
                    ctx._memo.clear()
                    w = DirView.timed(ctx, v.f, v.d)
                    views = _delack_views(ctx)
                    i = next(n for n, x in enumerate(views) if (x.f, x.d) == (v.f, v.d))
                    pairs, opp, _nod, back = tcp_model._hold_counts(ctx, views)
                    want = tcp_model.find_holds(ctx, w)
                    assert not back[i]
                    assert (opp[i] if pairs[i] else 0) == want.opportunities
                    done += want.opportunities != ref.opportunities
                finally:
                    ts[row] = old
                    ctx._memo.clear()
                if done >= 3:
                    return
    assert done > 0


def test_views_in_passes(traces, monkeypatch):
    """The segmented passes over a few views at a time (``VIEWS_AT_ONCE``, kept small for
    memory) give what one pass over every view gives."""
    whole = []
    for _label, t in traces:
        ctx = t.detect_context
        views = _delack_views(ctx)
        whole.append(
            (tcp_model._hold_counts(ctx, views), delayed_ack._prefix_all(ctx, views, 0.0, 1e6))
        )
    for n in (1, 3):
        monkeypatch.setattr(tcp_model, "VIEWS_AT_ONCE", n)
        monkeypatch.setattr(delayed_ack, "VIEWS_AT_ONCE", n)
        for (label, t), (hc, pre) in zip(traces, whole, strict=True):
            ctx = t.detect_context
            views = _delack_views(ctx)
            got = tcp_model._hold_counts(ctx, views)
            if hc is None:
                assert got is None
            else:
                assert got[:3] == hc[:3], label
                assert got[3].tolist() == hc[3][: len(views)].tolist(), label
            got_pre = delayed_ack._prefix_all(ctx, views, 0.0, 1e6)
            assert got_pre.keys() == pre.keys(), label
            for k, c in got_pre.items():
                _same_candidates(c, pre[k], label)
    assert sum(len(p) for _h, p in whole) > 40
    assert sum(len(h[2]) for h, _p in whole if h is not None) > 3


def test_nagle_detect_without_scan_holds_all(traces, monkeypatch):
    """nagle.detect (after delayed_ack, as the registry runs them) with the hold scans
    made for every direction at once = with find_holds per direction."""
    want = _detected(traces, delayed_ack, nagle)
    for mod in (delayed_ack, nagle):
        monkeypatch.setattr(mod, "scan_holds_all", lambda *a, **k: 0)
    assert _detected(traces, delayed_ack, nagle) == want
    assert sum("kind='nagle" in r for _l, r in want) > 3


def test_leg_minima_with_the_pairs(traces):
    """Every direction's least data → ACK sample, made with the pairs of every direction
    at once, gives ``_sampled_legs`` as the per-flow reference does (both legs, flows with
    one leg or none)."""
    seen = {"flows": 0, "legs": 0, "at_once": 0}
    for label, t in traces:
        ctx = t.detect_context
        ctx._memo.clear()
        if tcp_model._all_data_acks(ctx):  # (none without new data: per flow)
            assert ctx.memoised(("tcp_model.leg_minima",)), label
            seen["at_once"] += 1
        for f in ctx.tcp_flows():
            got = tcp_model._sampled_legs(ctx, f)
            assert got == ref16.sampled_legs_reference(ctx, f), label
            seen["flows"] += 1
            seen["legs"] += sum(x is not None for x in got)
        ctx._memo.clear()
    assert seen["legs"] > seen["flows"] > 20 and seen["at_once"] > 20, seen

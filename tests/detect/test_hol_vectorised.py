"""The HoL detector's searches over a direction's holes, dupACK periods and records
(issue 16) give what its per-hole / per-episode masks gave: the rewritten steps of
pcapkit/detect/hol.py against the oracles kept in reference_hol.py, on the lab's
fixtures with drops (real traffic) and on SYNTHETIC edge cases — timestamps going
backwards, a direction without ACKs from the peer, a hole at the first and at the last
segment, a hole never filled — plus seeded random questions for each search helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import reference_hol as ref
from test_hol import _ack, _receiver_side, _seg, _sender_side

import pcapkit
from pcapkit.detect import hol
from pcapkit.io.writer import write_pcap

from synth import Conn

FIX = Path(__file__).resolve().parents[2] / "fixtures"
# fixtures with drops, reordering or retransmissions at every vantage (real traffic)
LAB = [
    p
    for name in (
        "h2_hol_drop",
        "h2_sse_drop",
        "tls_large_record_drop",
        "tls_small_records_drop",
        "fast_retransmit",
        "rto_tail_loss",
        "rto_lost_retransmission",
        "delivery_stall",
    )
    for p in sorted((FIX / name).glob("*.pcapng"))
]


def _write(tmp: Path, name: str, frames: list[tuple[int, bytes]], *, keep_order: bool) -> Path:
    p = tmp / f"{name}.pcap"
    write_pcap(p, frames if keep_order else sorted(frames, key=lambda x: x[0]), 1)
    return p


def _backwards(c: Conn) -> list[tuple[int, bytes]]:
    """The frames in send order with every 4th timestamp pulled 3 ms back: times that go
    backwards in a capture (a clock step; reassembly keeps frame order)."""
    fr = sorted(c.frames, key=lambda x: x[0])
    return [(t - 3_000_000 if k % 4 == 3 else t, b) for k, (t, b) in enumerate(fr)]


def _hole_at_first() -> Conn:
    """SYNTHETIC receiver side: the first data segment is missing, 1-3 arrive with
    dupACKs (SACK), then the retransmission fills it."""
    c = Conn()
    c.handshake(0, rtt_us=20_000, client_leg_us=50)
    for k, t in ((1, 30_100), (2, 30_200), (3, 30_300)):
        _seg(c, t, k)
        _ack(c, t + 10, 0, (1, k + 1))
    _seg(c, 52_000, 0)
    _ack(c, 52_010, 4)
    return c


def _hole_at_last(filled: bool) -> Conn:
    """SYNTHETIC receiver side: segments 0-3 arrive, 4 is missing, 5 arrives (the last
    one), then 4 again (or never)."""
    c = Conn()
    c.handshake(0, rtt_us=20_000, client_leg_us=50)
    for k in range(4):
        _seg(c, 30_000 + 100 * k, k)
        _ack(c, 30_010 + 100 * k, k + 1)
    _seg(c, 30_500, 5)
    _ack(c, 30_510, 4, (5, 6))
    if filled:
        _seg(c, 51_000, 4)
        _ack(c, 51_010, 6)
    return c


def _data_only() -> Conn:
    """SYNTHETIC: only the server's segments were captured (no ACK from the client after
    the handshake): a direction with holes and an empty reverse direction."""
    c = Conn()
    c.handshake(0, rtt_us=20_000, client_leg_us=50)
    for k in (0, 2, 3, 1, 4):
        _seg(c, 30_000 + 100 * k + (20_000 if k == 1 else 0), k)
    return c


def _stale_ack() -> Conn:
    """SYNTHETIC sender side with a stale ACK (below the ones before it) among the
    dupACKs: Y's ACK values go back once."""
    c = _sender_side(20_000)
    _ack(c, 50_045, 0)
    return c


def _synthetic(tmp: Path) -> list[tuple[str, Path]]:
    out = []
    for name, c in (
        ("loss_at_receiver", _receiver_side(50_400)),
        ("reordering", _receiver_side(30_450)),
        ("late_original_ts", _receiver_side(45_200, ts_fill=101)),
        ("capture_drop", _receiver_side(None, dupacks=False)),
        ("sender_side", _sender_side(20_000)),
        ("sender_side_too_soon", _sender_side(1_000)),
        ("hole_at_first", _hole_at_first()),
        ("hole_at_last", _hole_at_last(True)),
        ("hole_at_last_unfilled", _hole_at_last(False)),
        ("data_only", _data_only()),
        ("stale_ack", _stale_ack()),
    ):
        out.append((name, _write(tmp, name, c.frames, keep_order=False)))
        out.append((name + "_backwards", _write(tmp, name + "_b", _backwards(c), keep_order=True)))
    return out


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> list[tuple[str, pcapkit.Trace]]:
    tmp = tmp_path_factory.mktemp("hol_vec")
    got = [(str(p.relative_to(FIX)), pcapkit.open(p)) for p in LAB]
    got += [(name, pcapkit.open(p)) for name, p in _synthetic(tmp)]
    yield got
    for _, t in got:
        t.close()


def _dirs(t: pcapkit.Trace):
    ctx = t.detect_context
    extras = hol._PacketExtras(ctx.packets)
    for f, d in hol._candidates(ctx):
        yield ctx, hol._Dir(ctx, extras, f, d)


def _same(a, b) -> bool:
    return [vars(x) for x in a] == [vars(x) for x in b]


# --------------------------------------------------------------------------- the detector


@pytest.mark.parametrize(
    "kw", [{}, {"loss_min_rtt_fraction": 0.1, "min_dupacks": 3, "reorder_window_no_rtt_ms": 50}]
)
def test_detect_as_reference(traces, kw):
    """Every finding (kind, times, evidence, checks, texts, details) as the per-hole code
    made it, on every trace; two threshold sets."""
    n = 0
    for label, t in traces:
        ctx = t.detect_context
        ctx.prior = [f for f in t.finding_objects if f.kind == "rto_stall"]
        got, want = hol.detect(ctx, **kw), ref.detect(ctx, **kw)
        assert _same(got, want), label
        n += len(want)
    assert n >= 8, n


def test_synthetic_edges_are_exercised(traces):
    """The SYNTHETIC edge cases reach the steps they test (else the equality above says
    little): holes at the first and last segment, one never filled, backwards times."""
    st: dict[str, list[str]] = {}
    for label, t in traces:
        for ctx, x in _dirs(t):
            holes = hol._holes_at_p(x, ctx.rtt_ns(x.f), 0.5, 3.0, 1)
            st.setdefault(label, []).extend(h.status for h in holes)
            if holes and label.startswith("hole_at_first"):
                assert min(h.a for h in holes) == 0, label
    assert st["hole_at_first"] == ["ok"] and st["hole_at_first_backwards"]
    assert st["hole_at_last"] == ["ok"] and st["hole_at_last_unfilled"] == ["unfilled"]
    assert st["data_only"] and "ok" not in st["data_only"]  # no ACK: no dupACK either
    stale = [x for _, x in _dirs(dict(traces)["stale_ack"])]
    assert any((np.diff(x.y_ack) < 0).any() and x.y_ack.shape[0] > 3 for x in stale)
    assert any(
        bool((np.diff(t.segments.ts_ns.to_numpy(np.int64)) < 0).any())
        for label, t in traces
        if label.endswith("_backwards")
    )


# --------------------------------------------------------------------------- the steps


@pytest.mark.parametrize("at_once", [1, hol.HOLES_AT_ONCE_MIN, 1 << 30])
def test_holes_as_reference(traces, monkeypatch, at_once):
    """Each hole (extent, fill, status, dupACKs, checks) as before — with Y's ACKs asked
    for all holes at once (at_once = 1), per hole (never at once), and as shipped."""
    monkeypatch.setattr(hol, "HOLES_AT_ONCE_MIN", at_once)
    n = dups = 0
    for label, t in traces:
        for ctx, x in _dirs(t):
            for kw in ((0.5, 3.0, 1), (0.05, 100.0, 3)):
                got = hol._holes_at_p(x, ctx.rtt_ns(x.f), *kw)
                want = ref._holes_at_p(x, ctx.rtt_ns(x.f), *kw)
                assert [vars(h) for h in got] == [vars(h) for h in want], label
                n += len(want)
                dups += sum(len(h.dupacks) for h in want)
    assert n >= 20 and dups >= 20, (n, dups)


@pytest.mark.parametrize("suffix_min", [1, 1 << 30])
def test_units_and_ack_stream_as_reference(traces, monkeypatch, suffix_min):
    """Per episode: the units at P (victims, hit units) and the ACK-stream findings of
    each direction, as the masks over every record and segment gave them — with the
    records' suffix minimum asked first (from one period on) and never."""
    monkeypatch.setattr(hol, "PERIODS_FOR_SUFFIX_MIN", suffix_min)
    eps = ack = 0
    for label, t in traces:
        for ctx, x in _dirs(t):
            holes = ref._holes_at_p(x, ctx.rtt_ns(x.f), 0.5, 3.0, 1)
            spans = hol._Spans([(h.a, h.b) for h in holes])
            for ep in hol._episodes([h for h in holes if h.fill_i is not None]):
                got = hol._units_at_p(ctx, x, ep, holes, spans)
                assert got == ref._units_at_p(ctx, x, ep, holes), label
                assert got == hol._units_at_p(ctx, x, ep, holes), label  # spans made inside
                eps += 1
            _, d_y = ctx.sender_receiver_legs(x.f, x.d)
            covered = [(h.a, h.b) for h in holes]
            for frac in (0.5, 0.0):
                got_f = hol._ack_stream_episodes(ctx, x, spans, d_y, frac, 0.0)
                want_f = ref._ack_stream_episodes(ctx, x, covered, d_y, frac, 0.0)
                assert _same(got_f, want_f), label
                ack += len(want_f)
    assert eps >= 10 and ack >= 2, (eps, ack)


def test_ack_stream_with_acks_going_back(traces):
    """Y's ACK values going back (stale ACKs, here planted by hand in real directions: the
    step is a function of the arrays) take the sorted path; the findings stay as before."""
    rng = np.random.default_rng(7)
    ack = tampered = 0
    for label, t in traces:
        for ctx, x in _dirs(t):
            if x.y_ack.shape[0] < 8:
                continue
            holes = ref._holes_at_p(x, ctx.rtt_ns(x.f), 0.5, 3.0, 1)
            covered = [(h.a, h.b) for h in holes]
            _, d_y = ctx.sender_receiver_legs(x.f, x.d)
            y = x.y_ack.copy()
            for _ in range(3):
                k = rng.integers(1, y.shape[0], 4)
                x.y_ack = y.copy()
                x.y_ack[k] = y[rng.integers(0, k)]  # an earlier (lower or equal) value
                tampered += int((np.diff(x.y_ack) < 0).any())
                got = hol._ack_stream_episodes(ctx, x, hol._Spans(covered), d_y, 0.5, 0.0)
                want = ref._ack_stream_episodes(ctx, x, covered, d_y, 0.5, 0.0)
                assert _same(got, want), label
                ack += len(want)
    assert tampered >= 20 and ack >= 2, (tampered, ack)


def test_spans_as_any():
    """_Spans.touches / holds = Python any() over the holes, on seeded random holes
    (overlapping, nested, empty, none) and units/bytes below, inside, between, above."""
    rng = np.random.default_rng(16)
    for _ in range(300):
        k = int(rng.integers(0, 6))
        a = rng.integers(0, 60, k)
        spans = [(int(x), int(x + rng.integers(0, 12))) for x in a]
        s = hol._Spans(spans)
        o = rng.integers(-5, 80, 40)
        e = o + rng.integers(0, 15, 40)
        got = s.touches(o, e).tolist()
        assert got == [
            any(oo < sb and sa < ee for sa, sb in spans) for oo, ee in zip(o, e, strict=True)
        ]
        assert s.holds(o).tolist() == [any(sa <= oo < sb for sa, sb in spans) for oo in o]


def test_direction_searches_as_masks(traces, monkeypatch):
    """Each _Dir search helper against the mask it replaced, on every candidate direction
    with seeded random questions (plus the real ones: every hole, every re-sent segment)."""
    rng = np.random.default_rng(22)
    asked = 0
    for label, t in traces:
        for _ctx, x in _dirs(t):
            n_y = x.y_ack.shape[0]
            if n_y:
                h = np.concatenate(
                    [x.y_ack[rng.integers(0, n_y, 20)], rng.integers(-2, x.y_ack.max() + 3, 10)]
                )
                lo = rng.integers(x.y_frame.min() - 2, x.y_frame.max() + 2, h.shape[0])
                hi = lo + rng.integers(0, 60, h.shape[0])
                got = x.dupacks_all(h, lo, hi)
                assert got is not None, label
                want = [
                    x.dupacks_at(int(a), int(b), int(c)).tolist()
                    for a, b, c in zip(h, lo, hi, strict=True)
                ]
                assert got == want, label
                past = x.acked_past(h, hi)
                want_p = [
                    bool(((x.y_ack > a) & (x.y_frame < c)).any())
                    for a, c in zip(h, hi, strict=True)
                ]
                assert past.tolist() == want_p, label
                asked += h.shape[0]
            n_s = x.seg_off.shape[0]
            if not n_s:
                continue
            resent = np.nonzero(np.isin(x.seg_kind, list(hol._RETX_KINDS)))[0]
            assert x.seg_resent.tolist() == resent.tolist(), label
            q = 25
            hs = rng.integers(x.seg_off.min() - 2, x.seg_end.max() + 2, q)
            f_lo = rng.integers(x.seg_frame.min() - 2, x.seg_frame.max() + 2, q)
            f_hi = f_lo + rng.integers(0, 80, q)
            for limit in (hol.PAIRS_AT_ONCE, 0):  # listed at once, or one period at a time
                monkeypatch.setattr(hol, "PAIRS_AT_ONCE", limit)
                got = hol._last_retx_covering(x, hs, f_lo, f_hi).tolist()
                for hh, a, b, j in zip(hs.tolist(), f_lo.tolist(), f_hi.tolist(), got, strict=True):
                    c = [
                        i
                        for i in resent.tolist()
                        if x.seg_off[i] <= hh < x.seg_end[i] and a < x.seg_frame[i] < b
                    ]
                    assert j == (c[-1] if c else -1), label
            for hh, j in zip(hs.tolist(), rng.integers(0, n_s, q).tolist(), strict=True):
                cover = np.nonzero((x.seg_off <= hh) & (x.seg_end > hh))[0]
                want_o = [i for i in cover.tolist() if x.seg_frame[i] < x.seg_frame[j]][:1]
                assert x.first_covering_before(hh, j) == want_o, label
                i = int(rng.integers(0, n_s))
                t_rx = int(rng.integers(x.seg_ts.min() - 1, x.seg_ts.max() + 2))
                k = np.nonzero(
                    (x.seg_frame > x.seg_frame[i]) & (x.seg_off >= hh) & (x.seg_ts < t_rx)
                )[0]
                want_k = int(k[0]) if k.shape[0] else None
                assert x.first_sent_behind(i, hh, t_rx, j) == want_k, label
                asked += 2
            if x.recs:
                off, lb = x.recs["offset"], x.recs["last_byte_ts_ns"]
                for he, tr in zip(
                    rng.integers(off.min() - 2, off.max() + 2, q).tolist(),
                    (lb[rng.integers(0, lb.shape[0], q)] + rng.integers(-1, 2, q)).tolist(),
                    strict=True,
                ):
                    assert x.any_record_behind(he, tr) == bool(((off >= he) & (lb < tr)).any())
    assert asked >= 1000, asked


def test_dupacks_all_gives_way_when_frames_go_backwards(traces):
    """A hand-made table whose Y frames are not in order: the at-once answers step aside
    (None / all True) and the holes come out as before."""
    for label, t in traces:
        for ctx, x in _dirs(t):
            if x.y_frame.shape[0] < 3 or not (x.seg_gap > 0).any():
                continue
            x.y_frame = x.y_frame[::-1].copy()
            h = x.y_ack[:3]
            if x.dupacks_all(h, h * 0, h * 0 + (1 << 40)) is not None:
                m = x.y_pure & (x.y_sack > 0) if x.sack_ok else x.y_pure
                assert m.sum() < 2, label  # fewer than two eligible ACKs: nothing to order
            assert x.acked_past(h, h).all(), label
            got = hol._holes_at_p(x, ctx.rtt_ns(x.f), 0.5, 3.0, 1)
            want = ref._holes_at_p(x, ctx.rtt_ns(x.f), 0.5, 3.0, 1)
            assert [vars(a) for a in got] == [vars(b) for b in want], label
            return
    pytest.fail("no direction with holes and ACKs")

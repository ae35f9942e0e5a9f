"""Detector loops rewritten for speed (issue 16) against the per-item code they replaced.

Each reference below is the loop as it stood before the rewrite (main 8c48adc), kept here
only as the oracle; the rewritten function must answer exactly as it did on labelled
edge cases (empty, one item, holes at the start/end, retransmissions) and on seeded
random inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from pcapkit.detect import ssr
from pcapkit.detect.constants import FLIGHT_BREAK_RTT

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

"""Issue 13, classes 2 and 10: what a wait cost, counted once, and by whom it was paid.

Both captures the issue describes are browser captures that are not in ../shared, so these
tests rebuild their shape SYNTHETICALLY (``tests/synth.py``, scapy; TLS 1.2 AES-GCM records
whose bodies are zeros, no keys):

* class 2 — a download stalls 338 ms, then a segment lands 111 KB ahead and the originals
  fill the hole: one episode, one tcp_hol_blocking finding naming the reordering (and the
  stall before it), no record-sizing finding for records that waited for the hole;
* class 10 — two 16 KiB records of a 98 KB download each straddle a slow-start flight
  (29 ms): the download's first data was readable at once and its last byte arrives at the
  same time with smaller records, so nobody paid: one informational finding, cost 0, and a
  verdict that adds nothing up.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tls_records import TlsConn, app

import pcapkit
from pcapkit.io.writer import write_pcap
from pcapkit.report.text import time_lost_ms, verdict

MSS = 1448


def _trace(tmp_path: Path, c: TlsConn, name: str) -> pcapkit.Trace:
    p = tmp_path / name
    write_pcap(p, sorted(c.frames, key=lambda x: x[0]), 1)
    return pcapkit.open(p)


def _sack_ack(c: TlsConn, t_us: float, ack_off: int, sack: tuple[int, int] | None) -> None:
    opts = []
    if sack:
        opts = [
            ("NOP", None),
            ("NOP", None),
            ("SAck", (c.sisn + 1 + sack[0], c.sisn + 1 + sack[1])),
        ]
    c.raw(t_us, True, "A", c.cisn + 1 + c.c_next, c.sisn + 1 + ack_off, options=opts)


def test_class2_stall_then_out_of_order_arrival_is_one_hol_episode(tmp_path):
    """SYNTHETIC (client vantage, RTT 40 ms): 60 records of 4 KiB stream in; after 40
    segments nothing arrives for 338 ms; then six segments land 111 KB ahead (77 segments
    beyond the in-order point) and the 77 originals fill the hole 0.1 ms apart — no
    retransmission.  Before the fix: record-spanning findings for records that waited for
    the hole, each with the same record-sizing remedy, and no tcp_hol_blocking."""
    c = TlsConn(server_vantage=False, rtt_us=40_000)
    base = c.s_next
    data = b"".join(app(4096) for _ in range(60))
    segs = [data[i : i + MSS] for i in range(0, len(data), MSS)]
    off = [base + i * MSS for i in range(len(segs))]
    t = c.t
    sent: set[int] = set()

    def send(i: int, ts: float) -> None:
        c.s2c(ts, segs[i], offset=off[i], flags="A")
        sent.add(i)

    for i in range(40):  # one continuous stretch, ACKed every second segment
        send(i, t)
        if i % 2:
            _sack_ack(c, t + 50, off[i] + MSS, None)
        t += 200
    t += 338_000  # the delivery stall: nothing of this direction arrives
    far = range(117, 123)  # 111.5 KB beyond the in-order point, one 4 KiB record whole
    for i in far:
        send(i, t)
        _sack_ack(c, t + 50, off[40], (off[117], off[i] + MSS))  # dupACKs with SACK
        t += 100
    for i in range(40, 117):  # the originals fill the hole in order
        send(i, t)
        hi = off[i] + MSS if i < 116 else off[122] + MSS
        _sack_ack(c, t + 50, hi, None if i == 116 else (off[117], off[122] + MSS))
        t += 100
    for i in range(123, len(segs)):
        send(i, t)
        if i % 2:
            _sack_ack(c, t + 50, off[i] + MSS, None)
        t += 200
    tr = _trace(tmp_path, c, "class2.pcap")
    f = tr.findings
    spanning = f[f.kind == "tls_record_spanning"]
    assert (spanning.severity == "info").all() and (spanning.cost_ms == 0).all()
    assert spanning.empty, "records that waited for a hole or a stall are not record sizing"
    (hol,) = f[f.kind == "tcp_hol_blocking"].itertuples()
    assert hol.details["cause"] == "reordering"
    assert abs(hol.details["stall_before_ms"] - 338.2) < 1
    assert "retransmission" not in {e["role"] for e in hol.evidence}
    assert 7 < hol.cost_ms < 9  # the originals needed 77 × 0.1 ms to fill the hole
    assert "delivery stall" in hol.explanation and "not a loss" in hol.explanation
    # issue 22: the stall is priced once, with the reordering that followed it: the
    # delivery_stall episode (silence + refill) contains the HoL finding's interval, and
    # the verdict counts the episode once
    (ds,) = f[f.kind == "delivery_stall"].itertuples()
    assert ds.details["method"] == "reordering"
    assert ds.cost_ms == pytest.approx(hol.details["stall_before_ms"] + hol.cost_ms, abs=0.5)
    assert ds.t_end_ns == hol.t_end_ns and ds.t_start_ns <= hol.t_start_ns
    costly = f[f.severity != "info"]
    assert time_lost_ms(costly) == pytest.approx(ds.cost_ms)


def test_class10_records_inside_a_download_cost_nobody(tmp_path):
    """SYNTHETIC (client vantage, RTT 29 ms): a 98 KB answer — an 8 KiB record, then 16 KiB
    records — in slow-start flights of 10, 20 and 40 segments, each released one RTT after
    the last.  Records 2 and 4 each straddle a flight boundary and became readable 29 ms
    after their first bytes; the answer's first record was readable at once and its last
    byte arrives when it arrives whatever the record size.  Before the fix: two
    tls_record_spanning of 29 ms each and a verdict adding them up (58 ms)."""
    c = TlsConn(server_vantage=False, rtt_us=29_000)
    c.c2s(c.t - 29_000, app(300))  # the request
    base = c.s_next
    data = app(8192) + b"".join(app(16_384) for _ in range(5)) + app(8_000)
    assert 97_000 < len(data) < 99_000
    segs = [data[i : i + MSS] for i in range(0, len(data), MSS)]
    t = c.t
    k = 0
    for flight in (10, 20, 40):
        for j in range(flight):
            if k >= len(segs):
                break
            c.s2c(
                t + 10 * j, segs[k], offset=base + k * MSS, flags="A" if k < len(segs) - 1 else "PA"
            )
            k += 1
        ack = t + 10 * flight + 50
        _sack_ack(c, ack, base + k * MSS, None)
        t = ack + 29_000 + 30  # the next flight: released by that ACK (d_S = 29 ms)
    tr = _trace(tmp_path, c, "class10.pcap")
    f = tr.findings
    (sp,) = f[f.kind == "tls_record_spanning"].itertuples()
    assert sp.cost_ms == 0 and sp.severity == "info" and not sp.details["paid"]
    waits = [x["wait_ms"] for x in sp.details["unpaid_records"]]
    assert len(waits) == 2 and all(28 < w < 30 for w in waits)
    assert "nobody paid" in sp.explanation
    assert verdict(f).startswith("verdict: 1 informational finding(s), nothing that cost time")

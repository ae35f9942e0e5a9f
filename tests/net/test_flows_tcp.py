"""Flows and TCP reassembly on SYNTHETIC scripted connections (edge cases one at a time)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcapkit
from pcapkit.io.writer import write_pcap

from synth import Conn
from tshark_util import fields, needs_tshark


def trace(tmp_path, *conns: Conn, name: str = "c.pcap") -> pcapkit.Trace:
    frames = sorted((f for c in conns for f in c.frames), key=lambda x: x[0])
    p = tmp_path / name
    write_pcap(p, frames, 1)
    return pcapkit.open(p)


def kinds(t: pcapkit.Trace) -> dict[int, str]:
    s = t.segments
    return dict(zip(s.frame.tolist(), s.kind.astype(str).tolist(), strict=True))


# ---- flows --------------------------------------------------------------------


def test_roles_and_handshake_parameters(tmp_path):
    c = Conn()
    c.handshake(rtt_us=20_000, client_leg_us=50)
    c.c2s(21_000, b"GET / HTTP/1.1\r\n\r\n")
    t = trace(tmp_path, c)
    f = t.flows.iloc[0]
    assert (f.client_ip, f.client_port, f.server_ip, f.server_port) == (
        "10.1.0.1",
        40000,
        "10.2.0.2",
        443,
    )
    assert f.roles_from == "syn"
    assert (f.c_mss, f.s_mss, f.c_wscale, f.s_wscale) == (1460, 1460, 7, 7)
    assert f.sack_permitted and f.timestamps and f.handshake
    assert f.eff_mss == 1448  # MSS − 12 with timestamps (DETECTION.md §1.3)
    assert f.server_leg_ms == pytest.approx(20.0) and f.client_leg_ms == pytest.approx(0.05)
    assert f.vantage == "client"
    assert f.c2s_bytes == 18 and f.s2c_bytes == 0


def test_server_side_vantage(tmp_path):
    c = Conn()
    # at the server: SYN → SYN/ACK is µs, SYN/ACK → ACK is a full RTT
    c.raw(0, True, "S", c.cisn, 0, options=[("MSS", 1460)])
    c.raw(40, False, "SA", c.sisn, c.cisn + 1, options=[("MSS", 1460)])
    c.raw(30_040, True, "A", c.cisn + 1, c.sisn + 1)
    assert trace(tmp_path, c).flows.vantage.iloc[0] == "server"


def test_window_scaling_applied_after_handshake(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"x" * 10, window=100)
    t = trace(tmp_path, c)
    p = t.packets
    assert p.window.iloc[3] == 100 << 7
    assert p.window.iloc[0] == 65535  # SYN windows are never scaled


def test_roles_from_synack_when_syn_missing(tmp_path):
    c = Conn()
    c.handshake()
    c.frames.pop(0)
    assert trace(tmp_path, c).flows.roles_from.iloc[0] == "synack"


def test_roles_from_ports_midstream(tmp_path):
    c = Conn(cport=51000, sport=443)
    c.s2c(0, b"data from server first")
    c.ack_c(100)
    f = trace(tmp_path, c).flows.iloc[0]
    assert (f.client_port, f.server_port, f.roles_from) == (51000, 443, "ports")
    assert f.s2c_bytes == 22
    assert pd.isna(f.rtt_ms) and f.vantage == "unknown"


def test_port_reuse_starts_a_new_connection(tmp_path):
    a = Conn(cisn=1000)
    a.handshake(0)
    a.c2s(30_000, b"first")
    a.raw(40_000, True, "FA", a.cisn + 1 + 5, a.sisn + 1)
    b = Conn(cisn=900_000, sisn=77_000, t0=a.t0 + 1_000_000_000)
    b.handshake(0)
    b.c2s(30_000, b"second!")
    t = trace(tmp_path, a, b)
    fl = t.flows
    assert len(fl) == 2
    assert fl.stream.tolist() == [0, 1]
    assert [bytes(t.stream(i, "c2s")) for i in range(2)] == [b"first", b"second!"]
    assert fl.fin.tolist() == [True, False]


def test_syn_retransmission_is_not_a_new_connection(tmp_path):
    c = Conn()
    c.raw(0, True, "S", c.cisn, 0)
    c.raw(1_000_000, True, "S", c.cisn, 0)  # same ISN: retransmitted SYN
    c.raw(1_020_000, False, "SA", c.sisn, c.cisn + 1)
    c.raw(1_020_050, True, "A", c.cisn + 1, c.sisn + 1)
    t = trace(tmp_path, c)
    assert len(t.flows) == 1
    # RTT legs use the last SYN before the SYN/ACK
    assert t.flows.server_leg_ms.iloc[0] == pytest.approx(20.0)


def test_ipv6_and_udp_flows(tmp_path):
    c = Conn(v6=True)
    c.handshake()
    c.c2s(30_000, b"v6 data")
    t = trace(tmp_path, c)
    f = t.flows.iloc[0]
    assert f.client_ip == "2001:db8::1" and f.c2s_bytes == 7


# ---- reassembly and segment classes ----------------------------------------------


def test_sequence_wraparound(tmp_path):
    c = Conn(cisn=0xFFFFFFF0)
    c.handshake()
    for i in range(4):
        c.c2s(30_000 + i * 100, bytes([65 + i]) * 10)
    t = trace(tmp_path, c)
    assert bytes(t.stream(0, "c2s")) == b"A" * 10 + b"B" * 10 + b"C" * 10 + b"D" * 10
    assert t.segments.offset.tolist() == [0, 10, 20, 30]
    assert set(t.segments.kind.astype(str)) == {"new"}
    assert t.packets.rel_seq.iloc[-1] == 31  # Wireshark's relative seq keeps counting


def test_retransmission_and_spurious(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"a" * 100)  # frame 4
    c.s2c(30_010, b"a" * 100, offset=0)  # frame 5: retransmission (not yet acked)
    c.ack_c(50_000)  # frame 6 acks 100
    c.s2c(60_000, b"a" * 100, offset=0)  # frame 7: spurious (already acked)
    t = trace(tmp_path, c)
    assert kinds(t) == {4: "new", 5: "retransmission", 7: "spurious_retransmission"}
    assert t.flows.retransmissions.iloc[0] == 2


def test_out_of_order_vs_late_hole_fill(tmp_path):
    c = Conn()
    c.handshake(rtt_us=20_000)
    c.s2c(30_000, b"A" * 100)  # 4
    c.s2c(30_100, b"C" * 100, offset=200)  # 5: hole [100, 200)
    c.s2c(30_200, b"B" * 50, offset=100)  # 6: fills half within iRTT → out-of-order
    c.s2c(90_000, b"B" * 50, offset=150)  # 7: fills the rest after iRTT → retransmission
    t = trace(tmp_path, c)
    assert kinds(t) == {4: "new", 5: "prev_not_captured", 6: "out_of_order", 7: "retransmission"}
    seg = t.segments.set_index("frame")
    assert seg.gap_before[5] == 100 and seg.new_bytes[6] == 50 and seg.new_bytes[7] == 50
    s = t.stream(0, "s2c")
    assert bytes(s) == b"A" * 100 + b"B" * 100 + b"C" * 100 and s.complete
    idx = t.stream_index(0, "s2c")
    assert idx.locate([0, 120, 160, 250])[0].tolist() == [4, 6, 7, 5]
    # in-order delivery: bytes after the hole are delivered when the hole closes
    assert idx.delivered([99, 250])[0].tolist() == [4, 7]


def test_overlap_same_and_different(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"0123456789")  # 4
    c.s2c(30_010, b"56789abcde", offset=5)  # 5: half old (same bytes) + half new
    c.s2c(30_020, b"XXXXX", offset=10)  # 6: old bytes, different content
    t = trace(tmp_path, c)
    assert kinds(t) == {4: "new", 5: "overlap_same", 6: "overlap_diff"}
    assert bytes(t.stream(0, "s2c")) == b"0123456789abcde"  # first-seen bytes win


def test_hole_never_filled_stays_a_gap(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"a" * 10)
    c.s2c(30_010, b"c" * 10, offset=20)
    t = trace(tmp_path, c)
    s = t.stream(0, "s2c")
    assert bytes(s) == b"a" * 10 + b"c" * 10
    assert s.gaps == [(10, 10)]
    assert s.at(5) == 5 and s.at(15) is None and s.at(25) == 15
    assert s.chunks() == [(0, b"a" * 10), (20, b"c" * 10)]
    f = t.flows.iloc[0]
    assert (f.s2c_bytes, f.s2c_missing) == (20, 10)
    assert t.stream_index(0, "s2c").delivered([25])[0].tolist() == [-1]


def test_keep_alive_and_zero_window_probe(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"z" * 10)  # 4
    c.ack_c(30_100)  # 5
    c.raw(60_000_000, False, "A", c.sisn + 1 + 9, c.cisn + 1)  # 6: 0-byte at next-1 → keep-alive
    c.raw(70_000_000, False, "A", c.sisn + 1 + 9, c.cisn + 1, b"\x00")  # 7: 1-byte keep-alive
    c.ack_c(70_100_000, window=0)  # 8: client window closes
    c.raw(70_300_000, False, "A", c.sisn + 1 + 9, c.cisn + 1)  # 9: Linux-style probe
    c.s2c(70_400_000, b"p")  # 10: Wireshark-style 1-byte probe at next seq
    t = trace(tmp_path, c)
    k = kinds(t)
    assert k[6] == "keep_alive" and k[7] == "keep_alive"
    assert k[9] == "zero_window_probe" and k[10] == "zero_window_probe"
    assert bytes(t.stream(0, "s2c")) == b"z" * 10 + b"p"


def test_super_segments_flagged(tmp_path):
    c = Conn()
    c.handshake()
    c.s2c(30_000, b"g" * 5000)  # GSO-sized: 5000 > 1448
    c.s2c(30_100, b"h" * 1448)
    t = trace(tmp_path, c)
    s = t.segments
    assert s.super_segment.tolist() == [True, False]
    assert s.wire_segments.tolist() == [4, 1]


def test_psh_and_relative_ack(tmp_path):
    c = Conn()
    c.handshake()
    c.c2s(30_000, b"req", flags="PA")
    c.s2c(31_000, b"resp", flags="A")
    t = trace(tmp_path, c)
    s = t.segments
    assert s.psh.tolist() == [True, False]
    assert s.ack.tolist() == [0, 3]  # next expected offset of the reverse stream
    assert t.packets.rel_ack.iloc[4] == 4


def _snapshot(t: pcapkit.Trace) -> tuple:
    return (
        t.packets.to_dict("list"),
        t.flows.to_dict("list"),
        t.segments.to_dict("list"),
        t.anomalies.to_dict("list"),
        [bytes(t.stream(f, d)) for f in range(len(t.flows)) for d in ("c2s", "s2c")],
    )


def test_chunked_decode_and_batched_tcp_give_identical_tables(tmp_path, monkeypatch):
    """Chunk sizes are a memory bound, never a result: tiny chunks change nothing."""
    conns = []
    for k in range(5):
        c = Conn(cport=41000 + k, cisn=1000 * k, t0=1_700_000_000_000_000_000 + k * 7_000_000)
        c.handshake()
        c.c2s(30_000, b"x" * (10 + k))
        c.s2c(31_000, b"y" * 100)
        c.s2c(31_100, b"z" * 50, offset=150)  # a hole, then its fill
        c.s2c(60_000, b"w" * 50, offset=100)
        c.ack_c(61_000)
        conns.append(c)
    whole = _snapshot(trace(tmp_path, *conns, name="a.pcap"))
    import pcapkit.net.decode as dmod
    import pcapkit.net.tcp as tmod

    monkeypatch.setattr(dmod, "DECODE_CHUNK", 7)
    monkeypatch.setattr(tmod, "TCP_BATCH_PACKETS", 9)
    # chunks and batches run on threads (pcapkit._parallel): the count changes nothing
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("PCAPKIT_THREADS", threads)
        chunked = _snapshot(trace(tmp_path, *conns, name=f"b{threads}.pcap"))
        assert chunked == whole, threads
    assert len(whole[1]["flow"]) == 5


@needs_tshark
@pytest.mark.tshark
@pytest.mark.parametrize(
    "capture",
    [
        "tls_sse_drop/client.pcapng",
        "h2_hol_drop/server.pcapng",
        "tls_large_record_drop/client.pcapng",
    ],
)
def test_sack_blocks_match_tshark(capture):
    path = Path(__file__).resolve().parents[2] / "fixtures" / capture
    want = []
    rows = fields(
        path,
        "frame.number",
        "tcp.options.sack_le",
        "tcp.options.sack_re",
        display_filter="tcp.options.sack_le",
    )
    for f, le, re_ in rows:
        for a, b in zip(le.split(","), re_.split(","), strict=True):
            want.append((int(f), int(a) - 1, int(b) - 1))  # tshark's relative edges count the SYN
    with pcapkit.open(path) as t:
        s = t.sack_blocks
        got = list(zip(s.frame.tolist(), s.left.tolist(), s.right.tolist(), strict=True))
        assert want and sorted(got) == sorted(want)
        assert (s.right > s.left).all()
        # a SACK block reports data of the reverse direction above the cumulative ACK
        pk = t.packets.set_index("frame")
        assert (s.left.to_numpy() >= pk.loc[s.frame, "rel_ack"].to_numpy() - 1).all()

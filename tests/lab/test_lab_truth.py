"""Ground-truth helpers of the new scenarios, on synthetic input — no root, no namespaces.

The forwarder is driven with in-memory ports on a virtual clock (as in test_lab_forwarder),
so the trace that ``truth`` reads is the real trace format; the HTTP/2, TLS-layout and qlog
helpers get hand-built input with known answers.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from pcapkit.lab import truth
from pcapkit.lab.forwarder import (
    DirectionConfig,
    Forwarder,
    ForwarderConfig,
    MemoryPort,
    VirtualClock,
    ipv4_header_checksum,
    parse_packet,
)
from pcapkit.lab.scenarios.h2 import frames_in, wire_layout
from pcapkit.lab.scenarios.h3 import _compact_qlog
from pcapkit.lab.scenarios.rwnd import zero_window_episodes
from pcapkit.lab.scenarios.tls_records import record_layout

MS = 1_000_000
CLI, SRV = bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2])
ISN_C, ISN_S = 1000, 5000
SYN, ACK, PSH = 0x02, 0x10, 0x08


def ipv4(payload: bytes, src: bytes, dst: bytes) -> bytes:
    hdr = bytearray(
        struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, 64, 6, 0, src, dst)
    )
    hdr[10:12] = struct.pack("!H", ipv4_header_checksum(hdr))
    return bytes(hdr) + payload


def seg(
    c2s: bool,
    seq: int,
    ack: int,
    data: bytes = b"",
    *,
    flags: int = ACK,
    win: int = 500,
    sack: list[tuple[int, int]] | None = None,
) -> bytes:
    """A TCP segment; ``seq``/``ack`` relative (0 = first payload byte), made absolute here."""
    isn, peer = (ISN_C, ISN_S) if c2s else (ISN_S, ISN_C)
    opts = b""
    if sack:
        opts = b"\x01\x01" + bytes([5, 2 + 8 * len(sack)])
        for le, re in sack:
            opts += struct.pack("!II", peer + 1 + le, peer + 1 + re)
    abs_seq = isn if flags & SYN else isn + 1 + seq
    hdr = struct.pack(
        "!HHIIHHHH",
        40000 if c2s else 9000,
        9000 if c2s else 40000,
        abs_seq,
        peer + 1 + ack if flags & ACK else 0,
        ((5 + len(opts) // 4) << 12) | flags,
        win,
        0,
        0,
    )
    return ipv4(hdr + opts + data, CLI, SRV) if c2s else ipv4(hdr + opts + data, SRV, CLI)


def run_forwarder(
    events: list[tuple[int, bool, bytes]], s2c: DirectionConfig | None = None
) -> dict[str, Any]:
    """Feed ``(t_ns, from_client, packet)`` through a 10 ms forwarder; return its log."""
    clock = VirtualClock(start_ns=0)
    cport, sport = MemoryPort(clock), MemoryPort(clock)
    cfg = ForwarderConfig(
        c2s=DirectionConfig(delay_ns=10 * MS),
        s2c=s2c or DirectionConfig(delay_ns=10 * MS),
    )
    fwd = Forwarder((cport, sport), cfg, clock)
    for t, from_client, pkt in events:
        (cport if from_client else sport).inject(t, pkt)
    for _ in range(100_000):
        if (
            fwd.impairment.pending() == 0
            and cport.next_arrival_ns() is None
            and sport.next_arrival_ns() is None
        ):
            break
        fwd.run_once()
    return fwd.result()


def handshake() -> list[tuple[int, bool, bytes]]:
    return [
        (0, True, seg(True, 0, 0, flags=SYN)),
        (10 * MS, False, seg(False, 0, 0, flags=SYN | ACK)),
        (20 * MS, True, seg(True, 0, 0)),
    ]


def test_parse_packet_reads_window_and_sack_blocks() -> None:
    info = parse_packet(seg(True, 0, 100, win=0, sack=[(200, 300), (400, 500)]))
    assert info.window == 0 and info.sack_blocks == 2
    assert parse_packet(seg(True, 0, 100)).sack_blocks == 0


def test_tcp_drops_finds_retransmission_hole_and_dupacks() -> None:
    ev = handshake()
    t = 30 * MS
    for i in range(5):  # server sends 5 × 100 B; the 2nd payload packet is dropped
        ev.append((t + i * 10_000, False, seg(False, 100 * i, 0, b"x" * 100)))
    # client ACKs: up to the hole, then SACK dupACKs for the 3 segments behind it
    ev.append((t + 10 * MS + 50_000, True, seg(True, 0, 100)))
    for k in range(3):
        ev.append(
            (
                t + 10 * MS + 100_000 + k * 10_000,
                True,
                seg(True, 0, 100, sack=[(200, 300 + 100 * k)]),
            )
        )
    ev.append((t + 30 * MS, False, seg(False, 100, 0, b"x" * 100)))  # the retransmission
    ev.append((t + 40 * MS + 50_000, True, seg(True, 0, 500)))
    log = run_forwarder(ev, DirectionConfig(delay_ns=10 * MS, drop=(2,)))
    pkts = truth.packets(log)
    (d,) = truth.tcp_drops(pkts, log)
    assert (d["dir"], d["rel_seq"], d["wireshark_seq"], d["len"]) == ("s2c", 100, 101, 100)
    assert d["retransmit_after_ms"] == pytest.approx(30 - 0.01, abs=0.001)
    assert [r["rel_seq"] for r in d["retransmissions"]] == [100]
    assert d["dupacks"] == 3  # the plain ACK at 100 is not a duplicate
    # hole at the receiver: 3rd packet arrives at t+10.02 ms, the fill at t+40 ms
    assert d["receiver_hole_ms"] == pytest.approx(40 - 10.02, abs=0.001)


def test_flights_split_at_acks() -> None:
    ev = handshake()
    t = 30 * MS
    for i in range(3):
        ev.append((t + i * 1000, False, seg(False, 100 * i, 0, b"y" * 100)))
    ev.append((t + 10 * MS, True, seg(True, 0, 300)))  # reaches the server at t + 20 ms
    for i in range(3, 8):
        ev.append((t + 20 * MS + 100_000 + i * 1000, False, seg(False, 100 * i, 0, b"y" * 100)))
    pkts = truth.packets(run_forwarder(ev))
    fl = truth.flights(pkts, "s2c", start_ns=t - 1, rtt_ns=20 * MS)
    assert [f["segments"] for f in fl] == [3, 5]


def test_zero_window_episode_probes_and_reopen() -> None:
    ev = handshake()
    t = 30 * MS
    ev.append((t, False, seg(False, 0, 0, b"z" * 100)))
    ev.append((t + 11 * MS, True, seg(True, 0, 100, win=0)))  # zero window
    ev.append((t + 250 * MS, False, seg(False, 99, 0)))  # probe: 0 bytes at snd_una − 1
    ev.append((t + 261 * MS, True, seg(True, 0, 100, win=0)))
    ev.append((t + 900 * MS, True, seg(True, 0, 100, win=64)))  # reopen
    ev.append((t + 911 * MS, False, seg(False, 100, 0, b"z" * 100)))
    pkts = truth.packets(run_forwarder(ev))
    (ep,) = zero_window_episodes(pkts, "c2s")
    assert ep["zero_ack_count"] == 2 and ep["probe_count"] == 1
    assert ep["duration_ms"] == pytest.approx(889.0) and ep["reopen_window"] == 64


def test_record_layout_and_tiny_overhead() -> None:
    assert record_layout(65_536, None) == [16_384] * 4
    assert record_layout(65_536, 1426) == [1426] * 45 + [1366]
    assert record_layout(40_000, 20_000) == [16_384, 3_616, 16_384, 3_616]


def test_frames_in_and_wire_layout() -> None:
    def frame(ftype: int, sid: int, payload: bytes, flags: int = 0) -> bytes:
        return (
            len(payload).to_bytes(3, "big")
            + bytes([ftype, flags])
            + struct.pack("!I", sid)
            + payload
        )

    write = (
        frame(0, 1, b"a" * 100) + frame(8, 0, struct.pack("!I", 32768)) + frame(0, 3, b"b" * 50, 1)
    )
    fr = frames_in(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + write)
    assert [(f["type"], f["stream"], f["len"]) for f in fr] == [
        ("DATA", 1, 100),
        ("WINDOW_UPDATE", 0, 4),
        ("DATA", 3, 50),
    ]
    assert fr[1]["increment"] == 32768 and fr[2].get("end_stream") is True
    big = {"t_ns": 0, "len": 9 + 20_000, "frames": [{"type": "DATA", "stream": 5, "len": 20_000}]}
    small = {"t_ns": 1, "len": len(write), "frames": fr}
    lay = wire_layout([big, small], start=1000)
    # the 20 009-byte write is two records: 16 384 + 22 and 3 625 + 22 bytes on the wire
    assert (lay[0]["wire_start"], lay[0]["wire_end"]) == (1000, 1000 + 20_009 + 44)
    assert lay[1]["wire_start"] == lay[3]["wire_start"] == 1000 + 20_009 + 44


def test_compact_qlog_maps_packets_to_datagrams() -> None:
    def sent(pn: int, ptype: str, length: int, frames: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "name": "transport:packet_sent",
            "time": 1000.0 + pn,
            "data": {
                "header": {"packet_number": pn, "packet_type": ptype},
                "raw": {"length": length},
                "frames": frames,
            },
        }

    def dgrams(*lengths: int) -> dict[str, Any]:
        return {
            "name": "transport:datagrams_sent",
            "time": 1000.0,
            "data": {"raw": [{"payload_length": n} for n in lengths]},
        }

    stream = {"frame_type": "stream", "stream_id": 4, "offset": 100, "length": 900, "fin": False}
    events = [
        sent(0, "initial", 200, [{"frame_type": "crypto"}]),
        sent(1, "handshake", 1000, [{"frame_type": "crypto"}]),
        dgrams(1200),  # Initial + Handshake coalesced in datagram 1
        sent(2, "1RTT", 1200, [stream]),
        sent(3, "1RTT", 300, [{"frame_type": "ack"}]),
        dgrams(1200, 300),
        {
            "name": "recovery:packet_lost",
            "time": 1050.0,
            "data": {"packet_number": 2, "type": "1RTT"},
        },
    ]
    q = _compact_qlog({"traces": [{"events": events}]})
    assert q["datagrams_sent"] == 3
    assert [(p["pn"], p["datagram"]) for p in q["sent"]] == [(0, 1), (1, 1), (2, 2), (3, 3)]
    assert q["sent"][2]["stream_frames"] == [[4, 100, 900, False]]
    assert q["lost"] == [{"t_ns": 1_050_000_000, "pn": 2, "type": "1RTT"}]

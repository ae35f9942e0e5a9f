"""Decoding of link types, IP and transport headers (SYNTHETIC frames via scapy)."""

from __future__ import annotations

import io
import struct

import pandas as pd
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.l2 import CookedLinux, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

import pcapkit
from pcapkit.io.writer import PcapngWriter, PcapWriter

T0 = 1_700_000_000_000_000_000
TCP_PKT = (
    IP(src="192.0.2.1", dst="198.51.100.2", ttl=61)
    / TCP(sport=40001, dport=443, flags="PA", seq=7, ack=9)
    / Raw(b"hello")
)
TCP6_PKT = (
    IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=33)
    / TCP(sport=40001, dport=443, flags="PA", seq=7, ack=9)
    / Raw(b"hello")
)


def one(tmp_path, linktype: int, frame: bytes) -> pd.Series:
    p = tmp_path / f"lt{linktype}.pcap"
    with open(p, "wb") as f:
        PcapWriter(f, linktype).write(T0, frame)
    t = pcapkit.open(p)
    assert t.anomalies.empty, t.anomalies.to_dict("records")
    return t.packets.iloc[0]


def sll2(proto: int) -> bytes:
    # LINKTYPE_LINUX_SLL2: protocol, reserved, ifindex, arphrd, pkttype, addrlen, addr[8]
    return struct.pack(">HHIHBB8s", proto, 0, 2, 1, 0, 6, b"\x02" * 6 + b"\x00\x00")


@pytest.mark.parametrize(
    "linktype,frame,version",
    [
        (1, bytes(Ether() / TCP_PKT), 4),
        (1, bytes(Ether() / Dot1Q(vlan=5) / TCP_PKT), 4),
        (1, bytes(Ether(type=0x88A8) / Dot1AD(vlan=7) / Dot1Q(vlan=5) / TCP_PKT), 4),  # QinQ
        (1, bytes(Ether() / TCP6_PKT), 6),
        (0, struct.pack("<I", 2) + bytes(TCP_PKT), 4),  # BSD NULL, little-endian host
        (0, struct.pack(">I", 2) + bytes(TCP_PKT), 4),  # BSD NULL, big-endian host
        (0, struct.pack("<I", 30) + bytes(TCP6_PKT), 6),  # AF_INET6 on macOS
        (108, struct.pack(">I", 2) + bytes(TCP_PKT), 4),  # OpenBSD LOOP
        (12, bytes(TCP_PKT), 4),
        (14, bytes(TCP6_PKT), 6),
        (101, bytes(TCP_PKT), 4),
        (101, bytes(TCP6_PKT), 6),
        (228, bytes(TCP_PKT), 4),
        (229, bytes(TCP6_PKT), 6),
        (113, bytes(CookedLinux(proto=0x0800) / TCP_PKT), 4),
        (276, sll2(0x86DD) + bytes(TCP6_PKT), 6),
        (9, b"\xff\x03\x00\x21" + bytes(TCP_PKT), 4),  # PPP with HDLC address/control
        (9, b"\x00\x57" + bytes(TCP6_PKT), 6),
        (9, b"\x21" + bytes(TCP_PKT), 4),  # protocol-field compression
        (50, b"\xff\x03\x00\x21" + bytes(TCP_PKT), 4),
    ],
)
def test_link_types(tmp_path, linktype, frame, version):
    r = one(tmp_path, linktype, frame)
    assert r.ip_version == version
    assert r.proto == "tcp"
    assert (r.sport, r.dport) == (40001, 443)
    assert (r.tcp_seq, r.tcp_ack) == (7, 9)
    assert r.payload_len == 5
    assert r.ttl == (61 if version == 4 else 33)
    assert r.src == ("192.0.2.1" if version == 4 else "2001:db8::1")
    assert r.tcp_flags == 0x18


def test_vlan_tag_count(tmp_path):
    r = one(tmp_path, 1, bytes(Ether(type=0x88A8) / Dot1AD(vlan=7) / Dot1Q(vlan=5) / TCP_PKT))
    assert r.vlan_tags == 2


def test_ethernet_padding_uses_ip_length(tmp_path):
    tiny = IP(src="192.0.2.1", dst="198.51.100.2") / TCP(sport=1, dport=2, flags="A")
    frame = bytes(Ether() / tiny) + b"\x00" * 6  # padded to the 60-byte minimum
    r = one(tmp_path, 1, frame)
    assert r.payload_len == 0


def test_ipv6_extension_chain(tmp_path):
    pkt = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting()
        / IPv6ExtHdrDestOpt()
        / UDP(sport=5000, dport=53)
        / Raw(b"abcd")
    )
    r = one(tmp_path, 229, bytes(pkt))
    assert r.proto == "udp"
    assert r.ip_proto == 17
    assert (r.sport, r.dport, r.payload_len) == (5000, 53, 4)


def test_tcp_options(tmp_path):
    opts = [
        ("MSS", 1400),
        ("SAckOK", b""),
        ("Timestamp", (123456, 654321)),
        ("NOP", None),
        ("WScale", 9),
    ]
    pkt = IP(src="192.0.2.1", dst="198.51.100.2") / TCP(sport=1, dport=2, flags="S", options=opts)
    r = one(tmp_path, 228, bytes(pkt))
    assert (r.mss, r.wscale, bool(r.sack_perm), r.tsval, r.tsecr) == (1400, 9, True, 123456, 654321)
    assert r.tcp_hdr_len == 20 + 20


def test_sack_blocks(tmp_path):
    pkt = IP(src="192.0.2.1", dst="198.51.100.2") / TCP(
        sport=1,
        dport=2,
        flags="A",
        options=[("NOP", None), ("NOP", None), ("SAck", (100, 200, 300, 400, 500, 600))],
    )
    p = tmp_path / "sack.pcap"
    with open(p, "wb") as f:
        PcapWriter(f, 228).write(T0, bytes(pkt))
    t = pcapkit.open(p)
    assert t.packets.sack_n.iloc[0] == 3
    assert t._net.dec.sack(0) == [(100, 200), (300, 400), (500, 600)]


def _anoms(tmp_path, linktype: int, frames: list[bytes]) -> pd.DataFrame:
    p = tmp_path / "an.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, linktype)
        for i, fr in enumerate(frames):
            w.write(T0 + i, fr)
    return pcapkit.open(p).anomalies


def test_fragments_are_anomalies(tmp_path):
    big = IP(src="192.0.2.1", dst="198.51.100.2", id=77) / UDP(sport=1, dport=2) / Raw(b"x" * 3000)
    from scapy.layers.inet import fragment

    frags = [bytes(f) for f in fragment(big, fragsize=1000)]
    v6 = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrFragment(offset=10, m=0, id=1)
        / Raw(b"y" * 16)
    )
    an = _anoms(tmp_path, 101, frags + [bytes(v6)])
    assert an["name"].tolist() == ["ip_fragment"] * (len(frags) + 1)
    assert an["frame"].tolist() == list(range(1, len(frags) + 2))


def test_bad_headers_are_anomalies(tmp_path):
    good = bytes(TCP_PKT)
    bad_ihl = bytes([0x43]) + good[1:]  # IHL 3 words
    bad_doff = bytearray(good)
    bad_doff[20 + 12] = 0x30  # TCP data offset 3 words
    short_tcp = good[:30]  # IPv4 header + 10 bytes of TCP
    an = _anoms(tmp_path, 228, [bad_ihl, bytes(bad_doff), short_tcp, good])
    names = dict(zip(an["frame"].tolist(), an["name"].tolist(), strict=True))
    assert names[1] == "ip_bad_header"
    assert names[2] == "tcp_bad_header_len"
    assert names[3] in ("tcp_truncated_header", "ip_length_exceeds_frame")
    assert 4 not in names


def test_snaplen_truncation_is_flagged_and_payload_length_kept(tmp_path):
    frame = bytes(Ether() / TCP_PKT)
    p = tmp_path / "snap.pcap"
    with open(p, "wb") as f:
        PcapWriter(f, 1, snaplen=len(frame) - 3).write(T0, frame[:-3], origlen=len(frame))
    t = pcapkit.open(p)
    r = t.packets.iloc[0]
    assert (r.payload_len, r.payload_caplen) == (5, 2)
    assert t.anomalies["name"].tolist() == ["snaplen_truncated_payload"]


def test_udp_and_unknown_ethertype(tmp_path):
    arp = bytes(Ether(type=0x0806) / Raw(b"\x00" * 28))
    udp = bytes(
        Ether() / IP(src="192.0.2.1", dst="198.51.100.2") / UDP(sport=9, dport=53) / Raw(b"q" * 7)
    )
    p = tmp_path / "u.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, 1)
        w.write(T0, arp)
        w.write(T0 + 1, udp)
    t = pcapkit.open(p)
    pk = t.packets
    assert pd.isna(pk.ip_version.iloc[0]) and pd.isna(pk.proto.iloc[0]) and pd.isna(pk.flow.iloc[0])
    assert pk.proto.iloc[1] == "udp" and pk.payload_len.iloc[1] == 7
    assert t.flows.proto.tolist() == ["udp"]


def test_pcapng_interfaces_with_different_linktypes(tmp_path):
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    w.add_interface(1)
    w.add_interface(101)
    w.add_interface(113)
    w.write(0, T0, bytes(Ether() / TCP_PKT))
    w.write(1, T0 + 1, bytes(TCP6_PKT))
    w.write(2, T0 + 2, bytes(CookedLinux(proto=0x0800) / TCP_PKT))
    p = tmp_path / "m.pcapng"
    p.write_bytes(buf.getvalue())
    pk = pcapkit.open(p).packets
    assert pk.linktype.tolist() == [1, 101, 113]
    assert pk.ip_version.tolist() == [4, 6, 4]
    assert pk.payload_len.tolist() == [5, 5, 5]


def test_header_window_matches_reading_the_file(tmp_path):
    """SYNTHETIC: the decoder reads headers from the reader's copy of each frame's first
    HEAD_BYTES; frames whose headers run past that window (IPv6 extension chains, QinQ +
    IPv6 + a SYN's 40 option bytes), cut-short frames and a last frame whose window runs
    past the end of the file must decode exactly as when every read goes to the file."""
    import numpy as np

    from pcapkit.io.reader import HEAD_BYTES, read_capture
    from pcapkit.net.decode import decode

    syn_opts = [("MSS", 1400), ("SAckOK", b""), ("Timestamp", (1, 2)), ("WScale", 7)]
    syn_opts += [("NOP", None)] * 20  # 40 bytes of option space in all
    deep6 = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting()
        / IPv6ExtHdrDestOpt()
        / TCP(sport=40001, dport=443, flags="PA", seq=7, ack=9, options=[("Timestamp", (5, 6))])
        / Raw(b"deep")
    )
    qinq_syn = (
        Ether(type=0x88A8)
        / Dot1AD(vlan=7)
        / Dot1Q(vlan=5)
        / IPv6(src="2001:db8::1", dst="2001:db8::2")
        / TCP(sport=40002, dport=443, flags="S", options=syn_opts)
    )
    frames = [
        bytes(Ether() / TCP_PKT),
        bytes(Ether() / deep6),
        bytes(qinq_syn),
        bytes(Ether() / deep6)[:70],  # cut short inside the extension chain
        bytes(Ether() / TCP6_PKT),
        bytes(Ether() / TCP_PKT)[:40],  # last frame: its window runs past the file end
    ]
    assert max(len(f) for f in frames[1:3]) > HEAD_BYTES
    p = tmp_path / "window.pcap"
    with open(p, "wb") as f:
        w = PcapWriter(f, 1)
        for i, fr in enumerate(frames):
            w.write(T0 + i * 1000, fr)
    with_head = read_capture(p)
    rows = with_head.head_rows(0, len(frames))
    assert rows is not None and rows.shape == (len(frames), HEAD_BYTES)
    a = decode(with_head)
    from_file = read_capture(p)
    from_file.head_parts = []
    b = decode(from_file)
    assert a.cols.keys() == b.cols.keys()
    for k in a.cols:
        assert np.array_equal(a.cols[k], b.cols[k]), k
    assert a.anomalies == b.anomalies
    assert np.array_equal(a.src6, b.src6) and np.array_equal(a.dst6, b.dst6)
    # and the deep frames were really decoded, past the window
    assert a.cols["l4"][1] == 6 and a.cols["payload_len"][1] == 4
    assert a.cols["mss"][2] == 1400 and a.cols["wscale"][2] == 7
    assert a.cols["vlan_tags"][2] == 2

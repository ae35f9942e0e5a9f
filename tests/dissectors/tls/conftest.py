"""Fixtures for the TLS dissector tests.

The corpus (``../shared/corpus`` beside the repository, see its MANIFEST.md) is optional:
tests that need it take the ``corpus`` fixture and are skipped with a reason when it is
absent.  ``capture`` is a deliberately small, test-only reader for the corpus captures
(classic pcap and pcapng; Ethernet, NULL loopback and raw IPv4/IPv6; TCP reassembled per
direction by sequence number).  It exists so the dissectors can be tested against real
traffic before the project's own reader lands; it is not the project's reader.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not (CORPUS / "MANIFEST.md").is_file():
        pytest.skip(
            f"external corpus not present at {CORPUS} (../shared/corpus): corpus tests skipped"
        )
    return CORPUS


# ---------------------------------------------------------------------------------------
# Minimal capture reader (test helper)
# ---------------------------------------------------------------------------------------
@dataclass
class Capture:
    packets: list[tuple[int, int, bytes]]  # (frame number, linktype, frame bytes)
    dsb: list[bytes]  # pcapng Decryption Secrets Block payloads (TLS key logs), in order


def _read_pcap(data: bytes) -> Capture:
    magic = data[:4]
    endian = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    packets = []
    off, n = 24, 0
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off : off + 16])
        n += 1
        packets.append((n, linktype, data[off + 16 : off + 16 + incl]))
        off += 16 + incl
    return Capture(packets, [])


def _read_pcapng(data: bytes) -> Capture:
    endian = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
    linktypes: list[int] = []
    packets: list[tuple[int, int, bytes]] = []
    dsb: list[bytes] = []
    off, n = 0, 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack(endian + "II", data[off : off + 8])
        body = data[off + 8 : off + blen - 4]
        if btype == 0x0A0D0D0A:
            linktypes = []
        elif btype == 1:
            linktypes.append(struct.unpack(endian + "H", body[:2])[0])
        elif btype == 6:
            iface, _, _, caplen, _ = struct.unpack(endian + "IIIII", body[:20])
            n += 1
            packets.append((n, linktypes[iface], body[20 : 20 + caplen]))
        elif btype == 3:
            caplen = struct.unpack(endian + "I", body[:4])[0]
            n += 1
            packets.append((n, linktypes[0], body[4 : 4 + caplen]))
        elif btype == 0x0A:
            stype, slen = struct.unpack(endian + "II", body[:8])
            if stype == 0x544C534B:  # "TLSK": an NSS key log
                dsb.append(body[8 : 8 + slen])
        off += blen
    return Capture(packets, dsb)


def read_capture(path: Path) -> Capture:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        return _read_pcapng(data)
    return _read_pcap(data)


def _ip_payload(linktype: int, frame: bytes) -> bytes | None:
    if linktype == 1:  # Ethernet
        ethertype = struct.unpack("!H", frame[12:14])[0]
        off = 14
        while ethertype == 0x8100:
            ethertype = struct.unpack("!H", frame[off + 2 : off + 4])[0]
            off += 4
        return frame[off:] if ethertype in (0x0800, 0x86DD) else None
    if linktype == 0:  # NULL/BSD loopback: 4-byte host-order family
        return frame[4:]
    if linktype in (101, 228, 229, 12, 14):  # raw IP
        return frame
    return None


@dataclass
class Segment:
    frame: int
    direction: str  # "c2s" or "s2c"
    seq: int
    payload: bytes
    syn: bool


@dataclass
class Connection:
    client: tuple[str, int]
    server: tuple[str, int]
    segments: list[Segment] = field(default_factory=list)

    def events(self) -> Iterator[tuple[int, str, bytes | int]]:
        """(frame, direction, new in-order bytes or a gap length) in capture order.

        Retransmitted bytes are dropped; out-of-order bytes wait until contiguous; at the
        end, bytes still waiting behind a hole are released after a gap event.
        """
        nxt: dict[str, int | None] = {"c2s": None, "s2c": None}
        pending: dict[str, dict[int, tuple[int, bytes]]] = {"c2s": {}, "s2c": {}}
        for seg in self.segments:
            d = seg.direction
            if seg.syn:
                nxt[d] = (seg.seq + 1) & 0xFFFFFFFF
                continue
            if not seg.payload:
                continue
            if nxt[d] is None:
                nxt[d] = seg.seq
            pending[d][seg.seq] = (seg.frame, seg.payload)
            yield from self._drain(d, nxt, pending)
        for d in ("c2s", "s2c"):
            while pending[d]:
                expected = nxt[d]
                assert expected is not None
                first = min(pending[d], key=lambda s: (s - expected) & 0xFFFFFFFF)
                gap = (first - expected) & 0xFFFFFFFF
                if 0 < gap < 1 << 31:  # a hole: report it, then continue after it
                    yield (pending[d][first][0], d, gap)
                    nxt[d] = first
                before = len(pending[d])
                yield from self._drain(d, nxt, pending)
                if len(pending[d]) == before and gap == 0:
                    break

    @staticmethod
    def _drain(
        d: str, nxt: dict[str, int | None], pending: dict[str, dict[int, tuple[int, bytes]]]
    ) -> Iterator[tuple[int, str, bytes | int]]:
        progress = True
        while progress:
            progress = False
            expected = nxt[d]
            assert expected is not None
            for seq in list(pending[d]):
                frame, payload = pending[d][seq]
                rel = (seq - expected) & 0xFFFFFFFF
                if rel >= 1 << 31:  # starts before expected: retransmission or overlap
                    skip = (expected - seq) & 0xFFFFFFFF
                    del pending[d][seq]
                    if skip < len(payload):
                        pending[d][expected] = (frame, payload[skip:])
                        progress = True
                    continue
                if rel == 0:
                    del pending[d][seq]
                    nxt[d] = (expected + len(payload)) & 0xFFFFFFFF
                    yield (frame, d, payload)
                    progress = True
                    break


def tcp_connections(cap: Capture) -> list[Connection]:
    """TCP connections in order of first appearance; the SYN sender (or first talker) is the client."""
    conns: dict[tuple[tuple[str, int], tuple[str, int]], Connection] = {}
    order: list[Connection] = []
    for frame, linktype, data in cap.packets:
        ip = _ip_payload(linktype, data)
        if ip is None or not ip:
            continue
        version = ip[0] >> 4
        if version == 4:
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            if ip[9] != 6:
                continue
            src, dst = ip[12:16].hex(), ip[16:20].hex()
            tcp = ip[ihl:total] if total else ip[ihl:]
        elif version == 6:
            if ip[6] != 6:
                continue
            plen = struct.unpack("!H", ip[4:6])[0]
            src, dst = ip[8:24].hex(), ip[24:40].hex()
            tcp = ip[40 : 40 + plen]
        else:
            continue
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        a, b = (src, sport), (dst, dport)
        key = (a, b) if (a, b) in conns else (b, a)
        conn = conns.get(key)
        if conn is None or (
            flags & 0x02
            and not flags & 0x10
            and conn.segments
            and a == conn.client
            and any(s.syn for s in conn.segments)
        ):
            conn = Connection(client=a, server=b)
            conns[(a, b)] = conn
            order.append(conn)
            if key != (a, b):
                conns.pop(key, None)
        direction = "c2s" if a == conn.client else "s2c"
        conn.segments.append(Segment(frame, direction, seq, tcp[doff:], bool(flags & 0x02)))
    return order


class CaptureTools:
    read_capture = staticmethod(read_capture)
    tcp_connections = staticmethod(tcp_connections)


@pytest.fixture(scope="session")
def capture() -> type[CaptureTools]:
    return CaptureTools

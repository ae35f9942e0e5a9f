"""SYNTHETIC captures for fuzzing and hostile-input tests: raw IPv4 TCP/UDP frames, fast.

No scapy (too slow for a million SYNs): headers are packed with ``struct``; checksums
are left zero (pcapkit does not check them).  The link type is raw IPv4
(``LINKTYPE_IPV4`` = 228), timestamps are nanoseconds.

* :class:`Tcp` — one scripted TCP connection with consistent sequence numbers:
  ``handshake()``, ``send(c2s, data)`` (cut into ``mss`` segments), ``hole(c2s, n)``
  (bytes the capture never saw);
* :func:`udp` — one UDP datagram frame;
* :func:`pcap_bytes` / :func:`write_pcap` — frames into a classic pcap.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

LINKTYPE_IPV4 = 228
T0_NS = 1_700_000_000_000_000_000

_IP = struct.Struct("!BBHHHBBH4s4s")
_TCP = struct.Struct("!HHIIBBHHH")
_UDP = struct.Struct("!HHHH")
_REC = struct.Struct("<IIII")

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def ip4(a: int, b: int, c: int, d: int) -> bytes:
    return bytes((a, b, c, d))


def ipv4(src: bytes, dst: bytes, proto: int, payload: bytes) -> bytes:
    return _IP.pack(0x45, 0, 20 + len(payload), 0, 0x4000, 64, proto, 0, src, dst) + payload


def tcp_frame(
    src: bytes,
    dst: bytes,
    sport: int,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    window: int = 65535,
    options: bytes = b"",
) -> bytes:
    options += b"\x00" * (-len(options) % 4)
    hdr = _TCP.pack(
        sport,
        dport,
        seq & 0xFFFFFFFF,
        ack & 0xFFFFFFFF,
        (5 + len(options) // 4) << 4,
        flags,
        window,
        0,
        0,
    )
    return ipv4(src, dst, 6, hdr + options + payload)


def udp(src: bytes, dst: bytes, sport: int, dport: int, payload: bytes) -> bytes:
    return ipv4(src, dst, 17, _UDP.pack(sport, dport, 8 + len(payload), 0) + payload)


# MSS 1460, SACK permitted, window scale 7 (what Linux sends, minus timestamps)
SYN_OPTIONS = b"\x02\x04\x05\xb4\x04\x02\x01\x03\x03\x07"


@dataclass
class Tcp:
    """A scripted TCP connection (client ``cip:cport`` → server ``sip:sport``)."""

    cip: bytes = ip4(10, 0, 0, 1)
    sip: bytes = ip4(10, 0, 0, 2)
    cport: int = 40000
    sport: int = 443
    cisn: int = 1000
    sisn: int = 50000
    mss: int = 1448
    t_ns: int = T0_NS
    step_ns: int = 100_000
    frames: list[tuple[int, bytes]] = field(default_factory=list)
    c_next: int = 0  # next c2s stream offset
    s_next: int = 0

    def _tick(self) -> int:
        self.t_ns += self.step_ns
        return self.t_ns

    def _frame(
        self, c2s: bool, seq: int, ack: int, flags: int, payload: bytes = b"", opts: bytes = b""
    ) -> None:
        if c2s:
            f = tcp_frame(self.cip, self.sip, self.cport, self.sport, seq, ack, flags, payload)
        else:
            f = tcp_frame(self.sip, self.cip, self.sport, self.cport, seq, ack, flags, payload)
        if opts:  # rebuild with options (rare: the handshake)
            src, dst = (self.cip, self.sip) if c2s else (self.sip, self.cip)
            sp, dp = (self.cport, self.sport) if c2s else (self.sport, self.cport)
            f = tcp_frame(src, dst, sp, dp, seq, ack, flags, payload, options=opts)
        self.frames.append((self._tick(), f))

    def handshake(self) -> Tcp:
        self._frame(True, self.cisn, 0, SYN, opts=SYN_OPTIONS)
        self._frame(False, self.sisn, self.cisn + 1, SYN | ACK, opts=SYN_OPTIONS)
        self._frame(True, self.cisn + 1, self.sisn + 1, ACK)
        return self

    def send(self, c2s: bool, data: bytes, *, ack: bool = True) -> Tcp:
        """``data`` from one side, in ``mss`` segments (PSH on the last), then an ACK back."""
        for i in range(0, len(data), self.mss):
            chunk = data[i : i + self.mss]
            last = i + self.mss >= len(data)
            flags = ACK | (PSH if last else 0)
            if c2s:
                self._frame(
                    True, self.cisn + 1 + self.c_next, self.sisn + 1 + self.s_next, flags, chunk
                )
                self.c_next += len(chunk)
            else:
                self._frame(
                    False, self.sisn + 1 + self.s_next, self.cisn + 1 + self.c_next, flags, chunk
                )
                self.s_next += len(chunk)
        if ack and data:
            if c2s:
                self._frame(False, self.sisn + 1 + self.s_next, self.cisn + 1 + self.c_next, ACK)
            else:
                self._frame(True, self.cisn + 1 + self.c_next, self.sisn + 1 + self.s_next, ACK)
        return self

    def hole(self, c2s: bool, n: int) -> Tcp:
        """``n`` stream bytes the capture never saw."""
        if c2s:
            self.c_next += n
        else:
            self.s_next += n
        return self


def pcap_header(linktype: int = LINKTYPE_IPV4, snaplen: int = 262_144) -> bytes:
    return struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snaplen, linktype)


def pcap_record(ts_ns: int, frame: bytes) -> bytes:
    sec, sub = divmod(ts_ns, 1_000_000_000)
    return _REC.pack(sec, sub, len(frame), len(frame)) + frame


def pcap_bytes(frames: Iterable[tuple[int, bytes]], linktype: int = LINKTYPE_IPV4) -> bytes:
    """A classic pcap (nanosecond timestamps) of ``(ts_ns, frame)`` pairs."""
    parts = [pcap_header(linktype)]
    parts += [pcap_record(t, f) for t, f in frames]
    return b"".join(parts)


def write_pcap(
    path: str | os.PathLike[str],
    frames: Iterable[tuple[int, bytes]],
    linktype: int = LINKTYPE_IPV4,
) -> None:
    with open(path, "wb") as f:
        f.write(pcap_header(linktype))
        for t, fr in frames:
            f.write(pcap_record(t, fr))

"""Write pcap and pcapng files; embed key logs as Decryption Secrets Blocks.

Used by the lab (captures carry their keys in the file), by tests (Hypothesis
round-trips through :func:`pcapkit.io.read_capture`) and by the benchmarks.
The pcapng writer always records nanosecond timestamps (``if_tsresol`` = 9).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import BinaryIO

from .reader import LINKTYPE_NONE, RawCapture, read_capture

SECRETS_TLS_KEYLOG = 0x544C534B  # "TLSK": NSS key log (pcapng §4.7)


def _pad4(b: bytes) -> bytes:
    return b + b"\x00" * (-len(b) % 4)


class PcapWriter:
    """Classic pcap, one link type, µs or ns resolution, either byte order."""

    def __init__(
        self,
        f: BinaryIO,
        linktype: int,
        *,
        nanosecond: bool = True,
        snaplen: int = 262_144,
        big_endian: bool = False,
    ) -> None:
        self.f = f
        self.o = ">" if big_endian else "<"
        self.ns = nanosecond
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        f.write(struct.pack(self.o + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def write(self, ts_ns: int, data: bytes, origlen: int | None = None) -> None:
        sec, sub = divmod(ts_ns, 1_000_000_000)
        if not self.ns:
            sub //= 1000
        ol = len(data) if origlen is None else origlen
        self.f.write(struct.pack(self.o + "IIII", sec, sub, len(data), ol))
        self.f.write(data)


class PcapngWriter:
    """pcapng with one section; interfaces, EPBs, SPBs and secrets blocks."""

    def __init__(self, f: BinaryIO, *, big_endian: bool = False) -> None:
        self.f = f
        self.o = ">" if big_endian else "<"
        self._ifaces = 0
        body = struct.pack(self.o + "IHHq", 0x1A2B3C4D, 1, 0, -1)
        self._block(0x0A0D0D0A, body)

    def _block(self, btype: int, body: bytes) -> None:
        body = _pad4(body)
        total = 12 + len(body)
        self.f.write(
            struct.pack(self.o + "II", btype, total) + body + struct.pack(self.o + "I", total)
        )

    @staticmethod
    def _opt(o: str, code: int, value: bytes) -> bytes:
        return struct.pack(o + "HH", code, len(value)) + _pad4(value)

    def add_interface(
        self, linktype: int, *, snaplen: int = 262_144, tsresol: int = 9, name: str = ""
    ) -> int:
        """Add an IDB; ``tsresol`` is the raw if_tsresol byte (9 = ns, 6 = µs, 0x80|k = 2^-k)."""
        opts = self._opt(self.o, 9, bytes([tsresol]))
        if name:
            opts += self._opt(self.o, 2, name.encode())
        opts += struct.pack(self.o + "HH", 0, 0)
        self._block(1, struct.pack(self.o + "HHI", linktype, 0, snaplen) + opts)
        self._ifaces += 1
        return self._ifaces - 1

    def write(self, iface: int, ticks: int, data: bytes, origlen: int | None = None) -> None:
        """An Enhanced Packet Block; ``ticks`` are in the interface's resolution.  A negative
        ``ticks`` is written as the unsigned 64-bit value it wrapped from (a capture whose
        timestamp exceeds 2^63 ns reads back as the same negative ``ts_ns``)."""
        ol = len(data) if origlen is None else origlen
        ticks &= 0xFFFF_FFFF_FFFF_FFFF
        body = struct.pack(self.o + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), ol)
        self._block(6, body + data)

    def write_simple(self, data: bytes, origlen: int | None = None) -> None:
        ol = len(data) if origlen is None else origlen
        self._block(3, struct.pack(self.o + "I", ol) + data)

    def write_secrets(self, data: bytes, secrets_type: int = SECRETS_TLS_KEYLOG) -> None:
        self._block(10, struct.pack(self.o + "II", secrets_type, len(data)) + data)

    def write_raw_block(self, btype: int, body: bytes) -> None:
        """Any other block (NRB, ISB, custom) — for tests of the reader's skipping."""
        self._block(btype, body)


def write_pcap(
    path: str | os.PathLike[str],
    packets: Iterable[tuple[int, bytes]],
    linktype: int,
    *,
    nanosecond: bool = True,
) -> None:
    """Write ``(ts_ns, frame_bytes)`` pairs as a classic pcap."""
    with open(path, "wb") as f:
        w = PcapWriter(f, linktype, nanosecond=nanosecond)
        for ts, data in packets:
            w.write(ts, data)


def write_frames(
    cap: RawCapture,
    rows: Iterable[int],
    dst_path: str | os.PathLike[str],
    secrets: Iterable[tuple[int, bytes]] = (),
) -> int:
    """Copy the frames at ``rows`` (0-based, in order) of ``cap`` to a pcapng at
    ``dst_path`` with each of ``secrets`` (secrets type, data; ``TLSK`` for an NSS key
    log) in a Decryption Secrets Block before the first packet; interfaces, nanosecond
    timestamps and original lengths are kept.  Returns the number of frames written."""
    n = 0
    with open(dst_path, "wb") as f:
        w = PcapngWriter(f)
        for intf in cap.interfaces:
            w.add_interface(intf.linktype, snaplen=intf.snaplen, name=intf.name)
        for stype, data in secrets:
            if data:
                w.write_secrets(data, stype)
        buf = cap.buf
        for i in rows:
            iface = int(cap.iface[i])
            if iface < 0 or cap.interfaces[iface].linktype == LINKTYPE_NONE:
                continue
            o = int(cap.data_off[i])
            w.write(
                iface,
                int(cap.ts_ns[i]),
                buf[o : o + int(cap.caplen[i])].tobytes(),
                int(cap.origlen[i]),
            )
            n += 1
    return n


def inject_secrets(
    src_path: str | os.PathLike[str], dst_path: str | os.PathLike[str], keylog: bytes
) -> None:
    """Copy a pcap/pcapng capture to pcapng with ``keylog`` in a Decryption Secrets Block.

    The block (type ``TLSK``, an NSS key log as written by ``SSLKEYLOGFILE`` or
    aioquic's ``secrets_log_file``) is placed before the first packet, so any
    reader (pcapkit, Wireshark) has the keys before it needs them.  Packets,
    interfaces and nanosecond timestamps are preserved; secrets already in the
    source are kept too.
    """
    cap = read_capture(src_path)
    try:
        secrets = [(s.secrets_type, s.data) for s in cap.secrets]
        write_frames(cap, range(cap.frames), dst_path, secrets + [(SECRETS_TLS_KEYLOG, keylog)])
    finally:
        cap.close()

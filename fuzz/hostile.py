"""Hostile inputs (issue 15), SYNTHETIC, at any scale:

    python -m fuzz.hostile OUTDIR            # the issue's full-size inputs
    python -m fuzz.hostile OUTDIR --scale 0.01

* :func:`gzip_bomb` — a ``.gz`` that inflates to ``inflated`` bytes of zero-length
  records (full size: 1 MB → 1 GB);
* :func:`h2_stream_flood` — HTTP/2 HEADERS on ``n`` new streams, one connection
  (full: 200,000, 4.8 MB);
* :func:`syn_flood` — ``n`` SYNs on distinct 5-tuples (full: 10^6, 56 MB);
* :func:`tls_handshake_bomb` — a TLS handshake message claiming 2^24 − 1 bytes, then
  ``mb`` MB of handshake records continuing it (full: 20 MB).

Each returns the path it wrote.  ``tests/test_hostile.py`` runs them scaled down under
resource limits; ``make hostile`` runs the full-size ones.
"""

from __future__ import annotations

import argparse
import os
import struct
import zlib
from pathlib import Path

from .build import SYN, T0_NS, Tcp, ip4, pcap_header, pcap_record, tcp_frame

FULL = {
    "gzip_bomb": 1 << 30,  # inflated bytes
    "h2_stream_flood": 200_000,  # streams
    "syn_flood": 1_000_000,  # connections
    "tls_handshake_bomb": 20,  # MB of handshake records
}


def gzip_bomb(path: str | os.PathLike[str], inflated: int = FULL["gzip_bomb"]) -> Path:
    """A classic pcap of zero-length records (16-byte headers, caplen 0), gzip'd in a
    stream: ``inflated`` bytes once inflated, about a thousandth of that on disk."""
    rec = struct.pack("<IIII", 1_700_000_000, 0, 0, 0)
    block = rec * 65536  # 1 MiB
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    with open(path, "wb") as f:
        f.write(z.compress(pcap_header()))
        left = inflated - 24
        while left > 0:
            chunk = block[: min(len(block), left - left % 16 or len(block))]
            f.write(z.compress(chunk))
            left -= len(chunk)
        f.write(z.flush())
    return Path(path)


def h2_stream_flood(path: str | os.PathLike[str], n: int = FULL["h2_stream_flood"]) -> Path:
    """One cleartext HTTP/2 connection (h2c preface) whose client opens ``n`` streams,
    each with one HEADERS frame (END_HEADERS | END_STREAM; a 4-byte HPACK block)."""
    block = bytes([0x82, 0x86, 0x84, 0x41])[:3]  # :method GET, :scheme http, :path /
    parts = [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"]
    for i in range(n):
        sid = 1 + 2 * i
        parts.append(
            struct.pack("!I", len(block))[1:] + b"\x01\x05" + struct.pack("!I", sid) + block
        )
    data = b"".join(parts)
    c = Tcp(sport=80, mss=65000).handshake()
    c.send(True, data)
    with open(path, "wb") as f:
        f.write(pcap_header())
        for t, fr in c.frames:
            f.write(pcap_record(t, fr))
    return Path(path)


def syn_flood(path: str | os.PathLike[str], n: int = FULL["syn_flood"]) -> Path:
    """``n`` SYNs, each from its own client address and port (distinct 5-tuples)."""
    dst = ip4(10, 9, 9, 9)
    with open(path, "wb") as f:
        f.write(pcap_header())
        out = []
        for i in range(n):
            src = ip4(10, (i >> 16) & 255, (i >> 8) & 255, i & 255)
            fr = tcp_frame(src, dst, 1024 + i % 60000, 443, i * 7919, 0, SYN)
            out.append(pcap_record(T0_NS + i * 1000, fr))
            if len(out) == 65536:
                f.write(b"".join(out))
                out.clear()
        f.write(b"".join(out))
    return Path(path)


def tls_handshake_bomb(
    path: str | os.PathLike[str], mb: float = FULL["tls_handshake_bomb"]
) -> Path:
    """A ClientHello header claiming 2^24 − 1 bytes, then ``mb`` MB of handshake records
    (16 KiB each) that continue it — no message ever completes."""
    first = bytes([1, 0xFF, 0xFF, 0xFF]) + b"\x03\x03" + b"\x00" * (16384 - 6)
    rec = lambda body: bytes([22, 3, 1]) + struct.pack("!H", len(body)) + body  # noqa: E731
    filler = rec(b"\x00" * 16384)
    count = max(1, int(mb * (1 << 20)) // len(filler))
    c = Tcp(mss=65000).handshake()
    c.send(True, rec(first) + filler * count, ack=False)
    with open(path, "wb") as f:
        f.write(pcap_header())
        for t, fr in c.frames:
            f.write(pcap_record(t, fr))
    return Path(path)


GENERATORS = {
    "gzip_bomb": (gzip_bomb, ".pcap.gz"),
    "h2_stream_flood": (h2_stream_flood, ".pcap"),
    "syn_flood": (syn_flood, ".pcap"),
    "tls_handshake_bomb": (tls_handshake_bomb, ".pcap"),
}


def write_all(outdir: str | os.PathLike[str], scale: float = 1.0) -> dict[str, Path]:
    out = {}
    Path(outdir).mkdir(parents=True, exist_ok=True)
    for name, (gen, ext) in GENERATORS.items():
        size = FULL[name] * scale
        size = int(size) if isinstance(FULL[name], int) and name != "tls_handshake_bomb" else size
        out[name] = gen(Path(outdir) / f"{name}{ext}", size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    for name, p in write_all(a.outdir, a.scale).items():
        print(f"{name}: {p} ({p.stat().st_size} bytes)")


if __name__ == "__main__":
    main()

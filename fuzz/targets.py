"""The dissector entry points the fuzzers drive, one function of ``bytes`` each.

The contract under test (DESIGN.md §4): a dissector given any bytes returns records or
raises a :class:`dissectors.errors.DissectError` (``Truncated``, ``Malformed``,
``LimitExceeded``) — never ``IndexError``, ``struct.error``, ``KeyError``,
``ValueError``, ``UnicodeDecodeError``, ``RecursionError``, ``OverflowError``, … .
:func:`run_one` runs a target and returns the traceback text of anything else (None:
the input was handled).

Multi-part targets read their parameters from the first bytes (so mutations explore
chunkings and options too) and split the rest with 2-byte length prefixes
(:func:`parts`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from dissectors.errors import DissectError

Target = Callable[[bytes], None]
TARGETS: dict[str, Target] = {}


def target(name: str) -> Callable[[Target], Target]:
    def deco(f: Target) -> Target:
        TARGETS[name] = f
        return f

    return deco


def parts(data: bytes, n: int) -> list[bytes]:
    """``n`` parts of ``data``, each behind a 2-byte length (short or missing parts: b"")."""
    out = []
    pos = 0
    for _ in range(n - 1):
        k = int.from_bytes(data[pos : pos + 2], "big")
        out.append(data[pos + 2 : pos + 2 + k])
        pos += 2 + k
    out.append(data[pos + 2 :] if n > 1 else data)
    return out


def chunks(data: bytes, size: int) -> list[bytes]:
    size = max(1, size)
    return [data[i : i + size] for i in range(0, len(data), size)]


def run_one(t: Target, data: bytes) -> str | None:
    """None when ``t`` handled ``data`` (records or a DissectError), else the traceback."""
    try:
        t(data)
    except DissectError:
        return None
    except Exception:  # noqa: BLE001 - exactly what the fuzzer looks for
        return traceback.format_exc()
    return None


# -- TLS ------------------------------------------------------------------------------
@target("tls_record")
def tls_record(data: bytes) -> None:
    from dissectors.tls.record import is_record_header, parse_record

    off = 0
    is_record_header(data)
    while off < len(data):
        try:
            _, off = parse_record(data, off)
        except DissectError:
            off += 1 + (data[off] if off < len(data) else 0)


@target("tls_record_stream")
def tls_record_stream(data: bytes) -> None:
    """RecordParser in chunks with holes: byte 0 = chunk size, byte 1 = options."""
    from dissectors.tls.record import RecordParser

    size, opt = (data[0] if data else 1), (data[1] if len(data) > 1 else 0)
    p = RecordParser(
        resync=bool(opt & 1), scan_after_gap=bool(opt & 2), accept_sslv2_hello=bool(opt & 4)
    )
    try:
        for i, c in enumerate(chunks(data[2:], size)):
            p.feed(c)
            if opt & 8 and i % 3 == 1:
                p.feed_gap(1 + c[0] if c else 1)
        p.close()
    except DissectError:
        pass


@target("tls_handshake")
def tls_handshake(data: bytes) -> None:
    """Handshake reassembly, then every message decoded as TLS 1.2 and 1.3."""
    from dissectors.tls.handshake import HandshakeReassembler, decode_handshake

    r = HandshakeReassembler()
    msgs = []
    try:
        for c in chunks(data, 1 + (data[0] if data else 0)):
            msgs += r.feed(c)
        r.close()
    except DissectError as e:
        msgs += list(getattr(e, "messages", ()))
    for m in msgs:
        for tls13 in (False, True):
            try:
                decode_handshake(m, tls13=tls13)
            except DissectError:
                pass


@target("tls_session")
def tls_session(data: bytes) -> None:
    """A TLS session fed both directions (records), interleaved, with resync."""
    from dissectors.tls.keylog import KeyLog
    from dissectors.tls.session import TlsSession

    c2s, s2c = parts(data, 2)
    kl = KeyLog()
    kl.add_text(b"CLIENT_RANDOM " + b"00" * 32 + b" " + b"11" * 48 + b"\n")
    s = TlsSession(kl, resync=True)
    a, b = chunks(c2s, 700), chunks(s2c, 1300)
    for i in range(max(len(a), len(b))):
        if i < len(a):
            s.feed_data("c2s", a[i])
        if i < len(b):
            s.feed_data("s2c", b[i])
    s.close()
    s.summary()


@target("tls_keylog")
def tls_keylog(data: bytes) -> None:
    from dissectors.tls.keylog import KeyLog

    kl = KeyLog()
    kl.add_text(data, source="fuzz")
    for line in data.splitlines()[:4]:  # the client randoms the lines name, if any
        f = line.split()
        if len(f) > 1:
            try:
                kl.labels_for(bytes.fromhex(f[1].decode("ascii", "replace")))
            except ValueError:
                pass
    kl.problems()


# -- QUIC -----------------------------------------------------------------------------
@target("quic_packet")
def quic_packet(data: bytes) -> None:
    from dissectors.quic.packet import parse_packet_header

    for dcid_len in (None, 0, 8, 20):
        off = 0
        while off < len(data):
            try:
                _, nxt = parse_packet_header(data, off, dcid_length=dcid_len)
            except DissectError:
                break
            if nxt <= off:
                break
            off = nxt


@target("quic_frames")
def quic_frames(data: bytes) -> None:
    from dissectors.quic.frames import parse_frames

    parse_frames(data)


@target("quic_initial")
def quic_initial(data: bytes) -> None:
    """A QUIC Initial whose *plaintext* is the input (byte 0: from the client), protected
    with the Initial keys and fed to a connection — mutations reach the frame, CRYPTO and
    TLS handshake parsers."""
    from dissectors.quic import QuicConnection

    from .seeds import InitialTemplate, initial_packet

    dcid = b"\x83\x94\xc8\xf0\x3e\x51\x57\x08"
    t = InitialTemplate(
        from_client=True, version=1, client_dcid=dcid, dcid=dcid, scid=b"\x01" * 8,
        token=b"", packet_number=0, plaintext=b"",
    )  # fmt: skip
    conn = QuicConnection(None)
    pt = data[1:]
    if data[:1] == b"\x00":  # the server's Initial answers a client one
        conn.feed(initial_packet(t, b"\x01" + b"\x00" * 1200), 1, 0, True)
        t.from_client, t.dcid, t.scid = False, b"\x01" * 8, b"\x02" * 8
    conn.feed(initial_packet(t, pt), 2, 1, t.from_client)
    conn.feed(initial_packet(t, pt[::-1]), 3, 2, t.from_client)


@target("quic_datagram")
def quic_datagram(data: bytes) -> None:
    """Raw datagrams (byte 0: from the client) into one connection: header parsing,
    Version Negotiation, Retry, short headers, coalescing."""
    from dissectors.quic import QuicConnection

    conn = QuicConnection(None)
    for i, c in enumerate(parts(data[1:], 3)):
        conn.feed(c, i + 1, i, bool(data[0] & (1 << i)) if data else True)
    for sid, d in conn.streams()[:4]:
        conn.stream_bytes(sid, d)


# -- HTTP -----------------------------------------------------------------------------
@target("http1")
def http1(data: bytes) -> None:
    from dissectors.http1 import dissect_connection

    c2s, s2c = parts(data, 2)
    dissect_connection(c2s, s2c, eof=True)
    dissect_connection(c2s, s2c, eof=False)


@target("sse")
def sse(data: bytes) -> None:
    from dissectors.sse import SseParser

    p = SseParser()
    try:
        for c in chunks(data, 1 + (data[0] if data else 0)):
            p.feed(c)
    except DissectError:
        pass


@target("http2")
def http2(data: bytes) -> None:
    """Both directions of an HTTP/2 connection, interleaved in chunks."""
    from dissectors.http2 import H2Connection

    c2s, s2c = parts(data, 2)
    conn = H2Connection(expect_preface=c2s.startswith(b"PRI"))
    a, b = chunks(c2s, 333), chunks(s2c, 777)
    for i in range(max(len(a), len(b))):
        if i < len(a):
            conn.feed("c2s", a[i])
        if i < len(b):
            conn.feed("s2c", b[i])
    conn.close()


@target("grpc")
def grpc(data: bytes) -> None:
    from dissectors.grpc import GrpcMessageParser

    p = GrpcMessageParser()
    off = 0
    for i, c in enumerate(chunks(data[1:], 1 + (data[0] if data else 0))):  # byte 0: chunk size
        p.feed(c, off)
        off += len(c)
        if i % 5 == 4:
            p.feed_gap(3)
            off += 3
    p.close()


@target("http3")
def http3(data: bytes) -> None:
    """Stream data (varint stream id, c2s flag, fin flag, varint length, bytes)* into an
    HTTP/3 connection: control, QPACK and request streams."""
    from dissectors._wire import Cursor
    from dissectors.http3 import H3Connection

    conn = H3Connection()
    cur = Cursor(data)
    offsets: dict[tuple[int, bool], int] = {}
    try:
        while not cur.eof():
            sid = cur.pull_varint()
            c2s = bool(cur.pull_u8() & 1)
            fin = bool(cur.pull_u8() & 1)
            chunk = cur.pull_bytes(min(cur.pull_varint(), cur.remaining))
            off = offsets.get((sid, c2s), 0)
            conn.feed(sid, "c2s" if c2s else "s2c", chunk, off, fin=fin)
            offsets[(sid, c2s)] = off + len(chunk)
    except DissectError:
        pass
    conn.close()


@target("qpack")
def qpack(data: bytes) -> None:
    """An encoder stream then field sections on streams 0, 4, 8, … (QPACK, RFC 9204)."""
    from dissectors.qpack import QpackDecoder

    enc, *sections = parts(data, 6)
    dec = QpackDecoder(4096, 16)
    try:
        dec.feed_encoder(enc)
    except DissectError:
        pass
    for i, s in enumerate(sections):
        try:
            dec.decode(4 * i, s)
        except DissectError:
            pass

"""Seed corpora made from the project's fixtures (real traffic of the lab, keys embedded).

Mutating a TLS-protected capture mostly breaks AEAD tags, and mutating an encrypted QUIC
Initial never reaches a frame parser; so the seeds carry what the parsers see *inside*:

* :func:`file_seeds` — captures for the file-level fuzzer: a few fixtures as they are
  (pcapng, TLS/QUIC keys embedded), their HTTP/1.1 + SSE, HTTP/2 and gRPC connections
  re-encoded as *cleartext* TCP (the decrypted bytes of each record, in the frame order
  they were read), and *re-encrypted QUIC Initials*: the decrypted payload of every
  Initial packet of the HTTP/3 fixtures, kept as a template that the fuzzer mutates
  in plaintext and protects again (:class:`InitialTemplate`, :func:`initial_datagram`);
* :func:`dissector_seeds` — byte strings per dissector entry point
  (:data:`fuzz.targets.TARGETS`): TLS streams, handshake messages, key logs, QUIC
  datagrams and decrypted frames, HTTP/1.1, SSE, HTTP/2, gRPC, HTTP/3 stream data and
  QPACK encoder streams with field sections.

Everything is SYNTHETIC in form (re-encoded, re-encrypted) but real in content.  Seeds
are built on demand (a few seconds) and cached per process.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .build import T0_NS, Tcp, ip4, udp

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

# fixtures whose client capture seeds the corpora (one of each protocol family)
FILE_FIXTURES = (
    "tls_sse_nagle",  # HTTP/1.1 + SSE over TLS 1.3
    "h2_sse_drop",  # HTTP/2 + SSE, a drop (holes, retransmissions)
    "grpc_stream",  # gRPC over HTTP/2
    "h2_flow_control",  # HTTP/2 flow control
    "h3_sse_drop",  # HTTP/3 over QUIC
    "h3_resumed_0rtt",  # QUIC 0-RTT, two connections
    "tls_resumed",  # TLS 1.2 resumption
    "nagle_wwr",  # cleartext TCP
)
MAX_SEED_BYTES = 4096  # per dissector seed: small inputs, cheap mutations, more of them


@dataclass
class InitialTemplate:
    """One QUIC Initial packet as plaintext: the fuzzer mutates ``plaintext`` and protects
    it again with the Initial keys of ``client_dcid`` (RFC 9001 §5.2)."""

    from_client: bool
    version: int
    client_dcid: bytes
    dcid: bytes
    scid: bytes
    token: bytes
    packet_number: int
    plaintext: bytes


@dataclass
class FileSeed:
    """A capture: frames (ts_ns, link-layer bytes) of one link type, key-log secrets, and
    QUIC Initial templates by frame index (that frame is rebuilt from its template)."""

    name: str
    linktype: int
    frames: list[tuple[int, bytes]]
    secrets: list[bytes] = field(default_factory=list)
    initials: dict[int, InitialTemplate] = field(default_factory=dict)


def _varint(v: int) -> bytes:
    from dissectors._wire import encode_varint

    return encode_varint(v)


def _length_varint(length: int) -> bytes:
    """The Length field: a 2-byte varint (as clients send it) up to 16383, else 4 bytes
    (the fuzzer's payloads can be longer than any datagram; RFC 9000 §16)."""
    if length < 0x4000:
        return (length | 0x4000).to_bytes(2, "big")
    return (length | 0x80000000).to_bytes(4, "big")


def initial_packet(t: InitialTemplate, plaintext: bytes | None = None) -> bytes:
    """The protected Initial packet of ``t`` (with ``plaintext`` instead of its own)."""
    from dissectors.quic.crypto import initial_protection

    pt = t.plaintext if plaintext is None else plaintext
    pt = pt + b"\x00" * max(0, 4 - len(pt))  # a header protection sample needs 20 bytes after pn
    pn_len = 4
    first = 0xC0 | (pn_len - 1)  # long header, fixed bit, type Initial (RFC 9000 §17.2.2)
    length = pn_len + len(pt) + 16
    head = (
        bytes([first])
        + struct.pack("!I", t.version)
        + bytes([len(t.dcid)])
        + t.dcid
        + bytes([len(t.scid)])
        + t.scid
        + _varint(len(t.token))
        + t.token
        + _length_varint(length)
        + (t.packet_number & 0xFFFFFFFF).to_bytes(4, "big")
    )
    client, server = initial_protection(t.version, t.client_dcid)
    prot = client if t.from_client else server
    return prot.protect(head, len(head) - pn_len, t.packet_number, pt)


def initial_datagram(
    t: InitialTemplate, plaintext: bytes | None = None, port: int = 50000
) -> bytes:
    """A raw-IPv4 UDP frame carrying the Initial of ``t`` (client ``port`` → 443)."""
    pkt = initial_packet(t, plaintext)
    c, s = ip4(10, 0, 0, 1), ip4(10, 0, 0, 2)
    return udp(c, s, port, 443, pkt) if t.from_client else udp(s, c, 443, port, pkt)


def initial_port(t: InitialTemplate) -> int:
    """One client port per QUIC connection (client DCID) of a seed."""
    return 50000 + int.from_bytes(t.client_dcid[:2].ljust(2, b"\0"), "big") % 10000


@lru_cache(maxsize=1)
def file_seeds() -> tuple[FileSeed, ...]:
    """Every file-level seed (see the module docstring)."""
    import pcapkit

    out: list[FileSeed] = []
    for name in FILE_FIXTURES:
        path = FIXTURES / name / "client.pcapng"
        if not path.exists():
            continue
        with pcapkit.open(path) as t:
            raw = t.raw
            frames = [(int(raw.ts_ns[i]), raw.frame_bytes(i + 1)) for i in range(raw.frames)]
            lt = raw.interfaces[0].linktype if raw.interfaces else 101
            secrets = [s.data for s in raw.secrets]
            out.append(FileSeed(f"fixture:{name}", lt, frames, secrets))
            clear = _cleartext(t)
            if clear:
                out.append(FileSeed(f"cleartext:{name}", 228, clear))
            inits = _initial_templates(t)
            if inits:
                frames = [
                    (T0_NS + i * 1_000_000, initial_datagram(x, port=initial_port(x)))
                    for i, x in enumerate(inits)
                ]
                out.append(
                    FileSeed(f"quic-initials:{name}", 228, frames, [], dict(enumerate(inits)))
                )
    return tuple(out)


def _cleartext(t: Any) -> list[tuple[int, bytes]]:
    """The decrypted connections of ``t`` as cleartext TCP: each record's plaintext sent in
    the order the records were read (frame order), from the same side."""
    r = t.records
    if not len(r):
        return []
    frames: list[tuple[int, bytes]] = []
    port = 8000
    for flow in sorted(set(r["flow"].tolist())):
        rows = r[(r.flow == flow) & (r.content_type == 23) & r.plaintext_len.gt(0)]
        if not len(rows):
            continue
        pts = {d: t.plaintext(flow, d) for d in ("c2s", "s2c")}
        if not pts["c2s"] and not pts["s2c"]:
            continue
        pos = {"c2s": 0, "s2c": 0}
        c = Tcp(cport=port, sport=80 + flow)
        port += 1
        c.handshake()
        order = sorted(
            zip(
                rows["dir"].astype(str).tolist(),
                rows["plaintext_len"].astype(int).tolist(),
                rows["last_frame"].astype(int).tolist(),
                strict=True,
            ),
            key=lambda x: x[2],
        )
        for d, n, _ in order:
            chunk = pts[d][pos[d] : pos[d] + n]
            pos[d] += n
            if chunk:
                c.send(d == "c2s", chunk)
        frames += c.frames
    frames.sort(key=lambda x: x[0])
    return frames


def _initial_templates(t: Any) -> list[InitialTemplate]:
    """The decrypted Initial packets of every QUIC connection of ``t``."""
    from dissectors.quic import QuicConnection
    from dissectors.quic.packet import PacketType

    out: list[InitialTemplate] = []
    flows = t.flows
    for fl in flows[flows.proto == "udp"]["flow"].tolist():
        dgs = [(f, b, True) for f, b in t.datagrams(fl, "c2s")]
        dgs += [(f, b, False) for f, b in t.datagrams(fl, "s2c")]
        dgs.sort(key=lambda x: x[0])
        conn = QuicConnection(None, keep_plaintext=True)
        for f, b, c in dgs:
            conn.feed(b, f, 0, c)
        if conn.client_dcid is None:
            continue
        for p in conn.packets:
            if p.packet_type is PacketType.INITIAL and p.decrypted and p.plaintext:
                out.append(
                    InitialTemplate(
                        from_client=p.direction == "c2s",
                        version=p.version or 1,
                        client_dcid=conn.client_dcid,
                        dcid=p.dcid,
                        scid=p.scid,
                        token=p.token,
                        packet_number=p.packet_number or 0,
                        # PADDING frames (0x00) to a full client datagram (RFC 9000 §14.1)
                        plaintext=p.plaintext.ljust(1200 if p.direction == "c2s" else 0, b"\x00"),
                    )
                )
    return out


# ---------------------------------------------------------------------------------------
# per-dissector seeds
# ---------------------------------------------------------------------------------------
def _cut(b: bytes) -> bytes:
    return b[:MAX_SEED_BYTES]


def _lp(*parts: bytes) -> bytes:
    """Parts with 2-byte length prefixes (how multi-part targets split their input)."""
    return b"".join(struct.pack("!H", min(len(p), 0xFFFF)) + p[:0xFFFF] for p in parts)


@lru_cache(maxsize=1)
def dissector_seeds() -> dict[str, list[bytes]]:
    """Seeds per target name of :data:`fuzz.targets.TARGETS`."""
    import pcapkit
    from dissectors.quic import QuicConnection

    s: dict[str, list[bytes]] = {}

    def add(target: str, data: bytes) -> None:
        if data:
            s.setdefault(target, []).append(_cut(data))

    for name in FILE_FIXTURES:
        path = FIXTURES / name / "client.pcapng"
        if not path.exists():
            continue
        with pcapkit.open(path) as t:
            flows = t.flows
            for fl in flows[flows.proto == "tcp"]["flow"].tolist():
                c2s, s2c = bytes(t.stream(fl, "c2s")), bytes(t.stream(fl, "s2c"))
                add("tls_record", s2c)
                add("tls_record_stream", b"\x07\x01" + s2c)
                add("tls_session", _lp(c2s[:4096], s2c[:8192]))
                for tf in t._tls:  # noqa: SLF001 - the fuzzer reads the session results
                    if tf.flow != fl:
                        continue
                    for d in ("c2s", "s2c"):
                        hs = b"".join(
                            r.plaintext
                            for r in tf.results
                            if r.direction == d and r.inner_content_type == 22 and r.plaintext
                        )
                        add("tls_handshake", hs)
                pc, ps = t.plaintext(fl, "c2s"), t.plaintext(fl, "s2c")
                if pc.startswith(b"PRI * HTTP/2.0"):
                    add("http2", _lp(pc[:8192], ps[:16384]))
                    add("grpc", b"\xff" + _grpc_body(ps))
                elif pc[:3].isalpha():
                    add("http1", _lp(pc[:8192], ps[:16384]))
                    body = ps.split(b"\r\n\r\n", 1)[-1]
                    add("sse", body)
            for sec in t.raw.secrets:
                add("tls_keylog", sec.data)
            for fl in flows[flows.proto == "udp"]["flow"].tolist():
                dgs = [(f, b, True) for f, b in t.datagrams(fl, "c2s")]
                dgs += [(f, b, False) for f, b in t.datagrams(fl, "s2c")]
                dgs.sort(key=lambda x: x[0])
                from dissectors.tls.keylog import KeyLog

                kl = KeyLog()
                for sec in t.raw.secrets:
                    kl.add_text(sec.data)
                conn = QuicConnection(kl, keep_plaintext=True)
                for f, b, c in dgs[:64]:
                    conn.feed(b, f, 0, c)
                    add("quic_packet", b)
                    add("quic_datagram", bytes([int(c)]) + b)
                for p in conn.packets:
                    if p.plaintext:
                        add("quic_frames", p.plaintext.rstrip(b"\x00") or p.plaintext)
                        if p.packet_type is not None and p.packet_type.value == "initial":
                            add(
                                "quic_initial",
                                bytes([p.direction == "c2s"]) + p.plaintext.rstrip(b"\x00"),
                            )
                h3 = b""
                qp_enc = {"c2s": b"", "s2c": b""}
                for sid, d in conn.streams():
                    sd = conn.stream_bytes(sid, d)
                    data = b"".join(c for _, c in sd.chunks)[:4096]
                    h3 += _varint(sid) + bytes([d == "c2s", sd.fin]) + _varint(len(data)) + data
                    if sid % 4 in (2, 3) and data[:1] == b"\x02":  # QPACK encoder stream
                        qp_enc[d] += data[1:]
                add("http3", h3)
                for d, enc in qp_enc.items():
                    add("qpack", _lp(enc, *_field_sections(conn, d)))
    # the HTTP/1.1 and SSE seeds of the corpus' cleartext shapes (chunked, pipelined)
    add("http1", _lp(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
                     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                     b"HTTP/1.1 204 No Content\r\n\r\n"))  # fmt: skip
    add("sse", b"retry: 100\nid: 1\nevent: a\ndata: x\ndata: y\n\n: comment\ndata: z\r\n\r\n")
    return s


def _grpc_body(s2c_h2: bytes) -> bytes:
    """The DATA payloads of an HTTP/2 server stream (gRPC length-prefixed messages)."""
    out = b""
    pos = 0
    while pos + 9 <= len(s2c_h2):
        n = int.from_bytes(s2c_h2[pos : pos + 3], "big")
        if s2c_h2[pos + 3] == 0:  # DATA
            out += s2c_h2[pos + 9 : pos + 9 + n]
        pos += 9 + n
    return out


def _field_sections(conn: Any, d: str) -> list[bytes]:
    """HEADERS field sections of ``d``'s request streams (QPACK-encoded)."""
    out = []
    for sid, dd in conn.streams():
        if dd != d or sid % 4 not in (0, 1):
            continue
        data = b"".join(c for _, c in conn.stream_bytes(sid, dd).chunks)
        pos = 0
        from dissectors._wire import Cursor
        from dissectors.errors import DissectError

        while pos < len(data) and len(out) < 8:
            try:
                cur = Cursor(data, pos)
                ftype, n = cur.pull_varint(), cur.pull_varint()
                body = cur.pull_bytes(n)
            except DissectError:
                break
            if ftype == 1:
                out.append(bytes(body))
            pos = cur.pos
    return out

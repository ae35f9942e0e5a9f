"""Test helper: build HTTP/2 frames by hand (RFC 9113 §4.1, §6) for the dissector tests.

Independent of the parser under test: it only packs the 9-octet header and payload layouts
written out in the RFC; header blocks come from ``hpack.Encoder``.
"""

from __future__ import annotations

import struct

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS = 0, 1, 2, 3, 4
PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 5, 6, 7, 8, 9
END_STREAM = ACK = 0x1
END_HEADERS, PADDED, PRIORITY_FLAG = 0x4, 0x8, 0x20


def frame(ftype: int, flags: int, sid: int, payload: bytes = b"", reserved: bool = False) -> bytes:
    return (
        len(payload).to_bytes(3, "big")
        + bytes((ftype, flags))
        + ((sid | (0x8000_0000 if reserved else 0)).to_bytes(4, "big"))
        + payload
    )


def settings(*params: tuple[int, int]) -> bytes:
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", i, v) for i, v in params))


def settings_ack() -> bytes:
    return frame(SETTINGS, ACK, 0)


def data(sid: int, body: bytes, *, end: bool = False, pad: int | None = None) -> bytes:
    flags = END_STREAM if end else 0
    if pad is not None:
        return frame(DATA, flags | PADDED, sid, bytes((pad,)) + body + bytes(pad))
    return frame(DATA, flags, sid, body)


def headers(
    sid: int,
    block: bytes,
    *,
    end_stream: bool = False,
    end_headers: bool = True,
    pad: int | None = None,
    priority: tuple[bool, int, int] | None = None,
) -> bytes:
    flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
    payload = block
    if priority is not None:
        excl, dep, weight = priority
        flags |= PRIORITY_FLAG
        payload = (
            ((dep | (0x8000_0000 if excl else 0)).to_bytes(4, "big"))
            + bytes((weight - 1,))
            + payload
        )
    if pad is not None:
        flags |= PADDED
        payload = bytes((pad,)) + payload + bytes(pad)
    return frame(HEADERS, flags, sid, payload)


def continuation(sid: int, block: bytes, *, end_headers: bool = True) -> bytes:
    return frame(CONTINUATION, END_HEADERS if end_headers else 0, sid, block)


def push_promise(sid: int, promised: int, block: bytes) -> bytes:
    return frame(PUSH_PROMISE, END_HEADERS, sid, promised.to_bytes(4, "big") + block)


def ping(opaque: bytes, *, ack: bool = False) -> bytes:
    return frame(PING, ACK if ack else 0, 0, opaque)


def rst_stream(sid: int, code: int) -> bytes:
    return frame(RST_STREAM, 0, sid, code.to_bytes(4, "big"))


def goaway(last: int, code: int, debug: bytes = b"") -> bytes:
    return frame(GOAWAY, 0, 0, last.to_bytes(4, "big") + code.to_bytes(4, "big") + debug)


def window_update(sid: int, inc: int) -> bytes:
    return frame(WINDOW_UPDATE, 0, sid, inc.to_bytes(4, "big"))


class Encoders:
    """One HPACK encoder per direction, as two real endpoints have."""

    def __init__(self) -> None:
        self.enc = {"c2s": hpack.Encoder(), "s2c": hpack.Encoder()}

    def block(self, direction: str, hdrs: list[tuple[str, str]]) -> bytes:
        return self.enc[direction].encode(hdrs)


def request(
    path: str = "/", method: str = "GET", authority: str = "example.com"
) -> list[tuple[str, str]]:
    return [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)]


Write = tuple[str, bytes]  # (direction, bytes written at once)


def simple_exchange(body: bytes = b"hello world", *, pad: int | None = 3) -> list[Write]:
    """Preface, SETTINGS both ways + ACKs, one GET, a padded body, trailers, a PING."""
    e = Encoders()
    return [
        ("c2s", PREFACE + settings((4, 1 << 20), (2, 0))),
        ("s2c", settings((3, 100), (5, 1 << 15))),
        ("c2s", settings_ack()),
        ("s2c", settings_ack()),
        ("c2s", headers(1, e.block("c2s", request("/index.html")), end_stream=True)),
        ("s2c", headers(1, e.block("s2c", [(":status", "200"), ("content-type", "text/plain")]))),
        ("s2c", data(1, body[:4], pad=pad) + data(1, body[4:])),
        ("c2s", ping(b"12345678")),
        ("s2c", ping(b"12345678", ack=True)),
        ("s2c", headers(1, e.block("s2c", [("x-trailer", "done")]), end_stream=True)),
    ]

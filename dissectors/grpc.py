"""gRPC over HTTP/2: length-prefixed messages and call status.

Implements the wire format of the gRPC "HTTP/2 protocol" document
(grpc/grpc ``doc/PROTOCOL-HTTP2.md``), on top of :mod:`dissectors.http2`:

* **Length-Prefixed-Message** → Compressed-Flag (1 octet, 0 or 1) Message-Length
  (4 octets, big-endian) Message.  A stream's messages run across its DATA frames with no
  relation to frame boundaries; :class:`GrpcMessageParser` is the streaming parser, fed
  the per-stream body chunks (:class:`dissectors.http2.BodyChunk`) with their stream
  offsets.  Its output does not depend on how the body is chunked.
* **Status** → the ``grpc-status`` and ``grpc-message`` (percent-encoded UTF-8) of the
  trailers, or of the response headers of a *Trailers-Only* response (a single HEADERS
  frame with END_STREAM): :func:`grpc_status`.

Coordinates.  A body's octets are contiguous in the *body* but not in the connection's
stream (other streams' frames and frame headers sit between DATA payloads), so every
message carries both: ``body_offset`` (position in the reassembled body) and ``offset`` /
``end`` (stream offsets of its first prefix octet and one past its last octet — ``end``
is where the caller finds the capture frame that completed the message).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote

from ._wire import Buffer, ascii_decimal
from .http2 import C2S, S2C, Direction, H2Stream, HeaderBlock

__all__ = [
    "MAX_BUFFERED_MESSAGE",
    "PREFIX_LENGTH",
    "GrpcCall",
    "GrpcError",
    "GrpcMessage",
    "GrpcMessageParser",
    "GrpcStatus",
    "dissect_grpc_stream",
    "grpc_status",
    "is_grpc",
]

#: Compressed-Flag (1) + Message-Length (4).
PREFIX_LENGTH: Final = 5
#: Messages longer than this are framed and counted but their octets are not kept: 4 MiB is
#: gRPC's default maximum receive message size in the reference implementations, so a
#: larger message would be refused by a default receiver anyway, and a hostile 4 GiB length
#: must not make the dissector buffer 4 GiB.
MAX_BUFFERED_MESSAGE: Final = 4 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcMessage:
    """One Length-Prefixed-Message.

    ``compressed_flag`` is the raw flag octet (1 = compressed with the call's
    ``grpc-encoding``); ``length`` the Message-Length; ``offset``/``end`` stream offsets of
    the first prefix octet and one past the last message octet; ``body_offset`` its
    position in the reassembled body.  ``data`` is the message (``None`` when not kept,
    longer than :data:`MAX_BUFFERED_MESSAGE`, or ``missing`` > 0 octets were not captured).
    """

    offset: int
    end: int
    body_offset: int
    compressed_flag: int
    length: int
    data: bytes | None
    missing: int = 0

    @property
    def compressed(self) -> bool:
        return self.compressed_flag == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcError:
    """A body that does not follow the gRPC framing, with a stable snake_case ``name``."""

    offset: int
    body_offset: int
    name: str
    detail: str


GrpcItem = GrpcMessage | GrpcError

_PREFIX, _BODY, _FAILED = range(3)


class GrpcMessageParser:
    """Streaming parser of one direction of one gRPC stream's body.

    ``feed(data, offset)`` takes the next body octets and the stream offset of
    ``data[0]`` (each DATA frame's data is contiguous in the stream; successive chunks need
    not be); ``feed_gap(length)`` says ``length`` body octets were never captured;
    ``close()`` reports a message cut short.  Items are :class:`GrpcMessage` and
    :class:`GrpcError`; after an error that loses the message boundary nothing more is
    parsed.
    """

    def __init__(self, *, keep_data: bool = True) -> None:
        self.keep_data = keep_data
        self._mode = _PREFIX
        self._body_pos = 0
        self._prefix = bytearray()
        self._start = 0  # stream offset of the current message's first prefix octet
        self._start_body = 0
        self._flag = 0
        self._length = 0
        self._remaining = 0
        self._data: bytearray | None = None
        self._missing = 0
        self._last_end = 0

    def feed(self, data: Buffer, offset: int) -> list[GrpcItem]:
        out: list[GrpcItem] = []
        view = memoryview(bytes(data))
        i = 0
        n = len(view)
        while i < n and self._mode != _FAILED:
            if self._mode == _PREFIX:
                if not self._prefix:
                    self._start = offset + i
                    self._start_body = self._body_pos
                take = min(PREFIX_LENGTH - len(self._prefix), n - i)
                self._prefix += view[i : i + take]
                i += take
                self._body_pos += take
                if len(self._prefix) == PREFIX_LENGTH:
                    self._begin(offset + i, out)
            else:
                take = min(self._remaining, n - i)
                if self._data is not None:
                    self._data += view[i : i + take]
                i += take
                self._body_pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._finish(offset + i, out)
        return out

    def feed_gap(self, length: int) -> list[GrpcItem]:
        out: list[GrpcItem] = []
        if self._mode == _FAILED or length <= 0:
            return out
        if self._mode == _BODY and length <= self._remaining:
            self._missing += length
            self._remaining -= length
            self._body_pos += length
            self._data = None
            if self._remaining == 0:
                self._finish(None, out)
            return out
        in_message = self._mode == _BODY or bool(self._prefix)
        self._mode = _FAILED
        out.append(
            GrpcError(
                offset=self._start if in_message else self._last_end,
                body_offset=self._body_pos,
                name="lost_boundary",
                detail=f"{length} body octets missing across a message prefix",
            )
        )
        return out

    def close(self) -> list[GrpcItem]:
        out: list[GrpcItem] = []
        if self._mode == _BODY or (self._mode == _PREFIX and self._prefix):
            out.append(
                GrpcError(
                    offset=self._start,
                    body_offset=self._start_body,
                    name="message_truncated",
                    detail=(
                        f"body ended {self._remaining} octets before the end of a "
                        f"{self._length}-octet message"
                        if self._mode == _BODY
                        else f"body ended inside a message prefix ({len(self._prefix)} of 5)"
                    ),
                )
            )
        self._mode = _FAILED
        return out

    def _begin(self, here: int, out: list[GrpcItem]) -> None:
        p = self._prefix
        self._flag = p[0]
        self._length = int.from_bytes(p[1:5], "big")
        self._prefix = bytearray()
        self._remaining = self._length
        self._missing = 0
        self._data = (
            bytearray() if self.keep_data and self._length <= MAX_BUFFERED_MESSAGE else None
        )
        if self._flag > 1:
            # PROTOCOL-HTTP2.md: "Compressed-Flag → 0 / 1 # encoded as 1 byte unsigned
            # integer"; the framing still holds, so the message is reported too.
            out.append(
                GrpcError(
                    offset=self._start,
                    body_offset=self._start_body,
                    name="invalid_compressed_flag",
                    detail=f"Compressed-Flag {self._flag}",
                )
            )
        self._mode = _BODY
        if self._remaining == 0:
            self._finish(here, out)

    def _finish(self, end: int | None, out: list[GrpcItem]) -> None:
        data = self._data
        out.append(
            GrpcMessage(
                offset=self._start,
                # after a hole at the very end, the last octet's offset is unknown: the
                # message ends where the last captured octet did
                end=end if end is not None else self._last_end,
                body_offset=self._start_body,
                compressed_flag=self._flag,
                length=self._length,
                data=bytes(data) if data is not None and not self._missing else None,
                missing=self._missing,
            )
        )
        if end is not None:
            self._last_end = end
        self._data = None
        self._mode = _PREFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpcStatus:
    """``grpc-status`` (raw int; 0 = OK) and the decoded ``grpc-message``.

    ``trailers_only`` is true when they came in the response headers of a Trailers-Only
    response.  ``code`` is ``None`` when the header is missing or not an integer.
    """

    code: int | None
    message: str | None
    trailers_only: bool
    block_offset: int
    block_end: int


def _status_from(block: HeaderBlock, trailers_only: bool) -> GrpcStatus | None:
    raw = block.get("grpc-status")
    if raw is None:
        return None
    msg = block.get("grpc-message")
    return GrpcStatus(
        code=ascii_decimal(raw),  # PROTOCOL-HTTP2.md: Status → 1*DIGIT
        # "grpc-message" is percent-encoded UTF-8 (PROTOCOL-HTTP2.md, Responses)
        message=unquote(msg, errors="replace") if msg is not None else None,
        trailers_only=trailers_only,
        block_offset=block.offset,
        block_end=block.end,
    )


def grpc_status(stream: H2Stream) -> GrpcStatus | None:
    """The call status from the response trailers, or a Trailers-Only response."""
    if stream.response_trailers is not None:
        st = _status_from(stream.response_trailers, False)
        if st is not None:
            return st
    if stream.response_headers is not None:
        return _status_from(stream.response_headers, stream.response_headers.end_stream)
    return None


def is_grpc(stream: H2Stream) -> bool:
    """Does the request (or response) say ``content-type: application/grpc[+proto|…]``?"""
    for block in (stream.request_headers, stream.response_headers):
        ct = block.get("content-type") if block is not None else None
        if ct is not None and ct.split(";")[0].strip().lower().startswith("application/grpc"):
            return True
    return False


@dataclass(slots=True, kw_only=True)
class GrpcCall:
    """One gRPC call: the messages each way, the status, the errors."""

    stream_id: int
    path: str | None
    encoding: dict[Direction, str | None]
    messages: dict[Direction, list[GrpcMessage]] = field(default_factory=lambda: {C2S: [], S2C: []})
    errors: dict[Direction, list[GrpcError]] = field(default_factory=lambda: {C2S: [], S2C: []})
    status: GrpcStatus | None = None


def dissect_grpc_stream(stream: H2Stream, *, keep_data: bool = True) -> GrpcCall:
    """Run :class:`GrpcMessageParser` over both bodies of an HTTP/2 stream."""
    req, resp = stream.request_headers, stream.response_headers
    call = GrpcCall(
        stream_id=stream.stream_id,
        path=stream.path,
        encoding={
            C2S: req.get("grpc-encoding") if req is not None else None,
            S2C: resp.get("grpc-encoding") if resp is not None else None,
        },
        status=grpc_status(stream),
    )
    for d in (C2S, S2C):
        parser = GrpcMessageParser(keep_data=keep_data)
        items: list[GrpcItem] = []
        for chunk in stream.body_chunks[d]:
            if chunk.data is None:
                if chunk.missing:
                    items += parser.feed_gap(chunk.length)
                    continue
                raise ValueError("the HTTP/2 connection was run with keep_bodies=False")
            items += parser.feed(chunk.data, chunk.offset)
        items += parser.close()
        for it in items:
            if isinstance(it, GrpcMessage):
                call.messages[d].append(it)
            else:
                call.errors[d].append(it)
    return call

"""HTTP/1.1 message framing, sans-I/O (RFC 9112; semantics from RFC 9110).

One :class:`Http1Parser` per direction of a connection.  It is fed the direction's
byte stream (cleartext TCP, or TLS plaintext) and yields, in stream coordinates:

* :class:`Http1Head` — a request line or status line with its header fields
  (RFC 9112 §3, §4, §5), including 1xx interim responses (RFC 9110 §15.2);
* :class:`Http1Body` — message body bytes after removing chunked framing
  (RFC 9112 §7.1), each piece with the stream offset of its first byte, so a
  consumer (the SSE parser, gRPC, the token timeline) can find the frame that
  carried any body byte;
* :class:`Http1End` — the end of a message, with how its length was delimited
  (RFC 9112 §6.3: Content-Length, chunked, connection close, or no body) and the
  chunked trailer section (§7.1.2);
* :class:`Http1Tunnel` — the bytes after a ``101 Switching Protocols`` or a 2xx
  answer to ``CONNECT`` (RFC 9110 §7.8, §9.3.6): no longer HTTP/1.1.

The body-length rules of RFC 9112 §6.3 need the request a response answers (a
response to ``HEAD`` has no body; a 2xx to ``CONNECT`` opens a tunnel), so a
response parser is given the request methods in order — pipelining (§9.3.2) pairs
the n-th response with the n-th request.  A request carrying ``Upgrade`` (or a
``CONNECT``) ends HTTP/1.1 on the client side unless the server declined it;
:func:`dissect_connection` resolves that with both directions in hand.

Body pieces follow the boundaries of the input (an event must be stamped with the
bytes that carried it); heads, ends and each message's concatenated body are
chunking-invariant.  Malformed framing raises :class:`Http1Malformed` (carrying the
records completed in that call), after which the parser stays failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._wire import Buffer, ascii_decimal
from .errors import LimitExceeded, Malformed

__all__ = [
    "MAX_HEAD_BYTES",
    "MAX_CHUNK_LINE_BYTES",
    "Http1Body",
    "Http1End",
    "Http1Head",
    "Http1Malformed",
    "Http1Parser",
    "Http1PartialHead",
    "Http1Tunnel",
    "Http1Item",
    "Http1Connection",
    "dissect_connection",
    "looks_like_http1",
]

# A whole request/status line plus header section.  RFC 9112 §2.3 leaves the limit to
# the implementation; common servers cap it at 8–64 KiB (nginx large_client_header_buffers
# 4 × 8 KiB, Apache LimitRequestFieldSize 8190 × LimitRequestFields 100 ≈ 800 KiB worst
# case, Node 16 KiB).  64 KiB keeps a broken or non-HTTP stream from buffering forever.
MAX_HEAD_BYTES = 65_536
# chunk-size [ chunk-ext ] CRLF (RFC 9112 §7.1): hex size plus extensions; 4 KiB is far
# beyond any real extension and bounds the scan of a desynchronised stream.
MAX_CHUNK_LINE_BYTES = 4_096
# Each pass of dissect_connection declines at least one more refused Upgrade; a real
# connection has one or two Upgrade requests, 8 bounds a hostile one.
MAX_UPGRADE_PASSES = 8
# 16 hex digits overflow 2**64; no real chunk is that long.
_MAX_CHUNK_HEX = 16

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 §5.6.2
_VERSION = re.compile(rb"HTTP/(\d)\.(\d)\Z")  # RFC 9112 §2.3
_REQUEST_LINE = re.compile(rb"([^ ]+) +([^ ]+) +(HTTP/\d\.\d)\Z")
_STATUS_LINE = re.compile(rb"(HTTP/\d\.\d) +(\d{3})(?: (.*))?\Z", re.S)
# What a start line cut short can look like: a method token and a space then visible
# characters (RFC 9112 §3), or the beginning of "HTTP/1.x" (§4).
_REQUEST_PREFIX = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [\x21-\x7e ]*\r?\Z")
_STATUS_PREFIX = re.compile(
    rb"H(?:T(?:T(?:P(?:/(?:\d(?:\.(?:\d(?: [\x20-\x7e]*)?)?)?)?)?)?)?)?\r?\Z"
)
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_BLANK_LINE = re.compile(rb"\n\r?\n")
_METHODS_START = (
    b"GET ",
    b"POST ",
    b"PUT ",
    b"HEAD ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
    b"PRI ",
)

_HEAD, _LENGTH, _CHUNK_LINE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILERS, _CLOSE, _TUNNEL, _FAILED = range(
    9
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Http1Head:
    """A request line or status line and its header section (RFC 9112 §3–§5).

    ``offset``/``length`` span the start line through the empty line.  ``message``
    numbers the messages of the direction from 0; an interim (1xx) response shares
    the number of the final response it precedes.  Field names keep their wire
    spelling; :meth:`get` compares them case-insensitively (RFC 9110 §5.1).
    """

    offset: int
    length: int
    message: int
    is_request: bool
    method: str | None = None
    target: str | None = None
    status: int | None = None
    reason: str | None = None
    version: str = "HTTP/1.1"
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def interim(self) -> bool:
        """A 1xx response other than 101: another response follows (RFC 9110 §15.2)."""
        return self.status is not None and 100 <= self.status < 200 and self.status != 101

    def get(self, name: str) -> str | None:
        """The field's value, repeated fields joined with ``", "`` (RFC 9110 §5.3)."""
        want = name.lower()
        vals = [v for k, v in self.headers if k.lower() == want]
        return ", ".join(vals) if vals else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Http1PartialHead:
    """A message head the stream ended inside: its empty line never arrived (RFC 9112
    §2.1).  Reported by :meth:`Http1Parser.close`, never by ``feed``.

    ``offset``/``length`` span the bytes that did arrive; the start line's fields are
    set when it arrived whole and parses; ``headers`` holds the whole field lines after
    it that parse (an unfinished last line is left out).  ``message`` is the number the
    message would have had.
    """

    offset: int
    length: int
    message: int
    is_request: bool
    method: str | None = None
    target: str | None = None
    status: int | None = None
    version: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def end(self) -> int:
        return self.offset + self.length

    def get(self, name: str) -> str | None:
        """The field's value, repeated fields joined with ``", "`` (RFC 9110 §5.3)."""
        want = name.lower()
        vals = [v for k, v in self.headers if k.lower() == want]
        return ", ".join(vals) if vals else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Http1Body:
    """Body bytes of message ``message``: ``data`` sits at stream ``[offset, offset+length)``
    and at ``[body_offset, body_offset+length)`` of the de-framed body."""

    offset: int
    length: int
    message: int
    body_offset: int
    data: bytes

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class Http1End:
    """The end of message ``message`` at stream offset ``offset`` (``length`` 0).

    ``framing`` is ``content-length``, ``chunked``, ``close`` (ended by the end of the
    stream, RFC 9112 §6.3 rule 8) or ``none`` (no body by rule 1–2 or a request
    without length fields).  ``complete`` is False when the stream ended first.
    """

    offset: int
    message: int
    body_bytes: int
    framing: str
    complete: bool = True
    trailers: tuple[tuple[str, str], ...] = ()
    length: int = 0

    @property
    def end(self) -> int:
        return self.offset


@dataclass(frozen=True, slots=True, kw_only=True)
class Http1Tunnel:
    """Bytes after a protocol switch (101) or an accepted CONNECT: not HTTP/1.1."""

    offset: int
    length: int
    data: bytes

    @property
    def end(self) -> int:
        return self.offset + self.length


Http1Item = Http1Head | Http1Body | Http1End | Http1Tunnel | Http1PartialHead


class Http1Malformed(Malformed):
    """Framing that cannot be HTTP/1.1; ``records`` holds what the call completed first."""

    def __init__(
        self, message: str, *, offset: int | None = None, reason: str = "malformed"
    ) -> None:
        super().__init__(message, offset=offset)
        self.reason = reason
        self.records: tuple[Http1Item, ...] = ()


class Http1HeadTooLarge(LimitExceeded):
    """The start line plus header section exceeds :data:`MAX_HEAD_BYTES`."""

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message, offset=offset)
        self.reason = "head_too_large"
        self.records: tuple[Http1Item, ...] = ()


def _status_code(digits: bytes, offset: int) -> int:
    """The status code of a status line (RFC 9112 §4: ``status-code = 3DIGIT``)."""
    code = ascii_decimal(digits)
    if code is None:
        raise Http1Malformed(f"bad status code {digits[:10]!r}", offset=offset)
    return code


def looks_like_http1(data: bytes) -> bool:
    """Content-based recognition: a request line's method or a status line's version."""
    head = bytes(data[:16]).lstrip(b"\r\n")
    return head.startswith(_METHODS_START) or bool(re.match(rb"HTTP/1\.[01] \d", head))


def _split_lines(block: bytes) -> list[bytes]:
    # RFC 9112 §2.2: a recipient MAY recognise a single LF as a line terminator and
    # ignore the preceding CR.
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in block.split(b"\n")]


def _parse_fields(lines: Sequence[bytes], offset: int) -> tuple[tuple[str, str], ...]:
    out: list[list[str]] = []
    for ln in lines:
        if not ln:
            continue
        if ln[:1] in (b" ", b"\t"):
            # obs-fold (RFC 9112 §5.2): a recipient MAY replace it with SP.
            if not out:
                raise Http1Malformed("continuation line before any field", offset=offset)
            out[-1][1] = (out[-1][1] + " " + ln.strip(b" \t").decode("latin-1")).strip()
            continue
        name, sep, value = ln.partition(b":")
        # RFC 9112 §5.1: "No whitespace is allowed between the field name and colon ...
        # a server MUST reject" such a message.
        if not sep or not _TOKEN.match(name):
            raise Http1Malformed(f"bad header field line {bytes(ln[:40])!r}", offset=offset)
        out.append([name.decode("ascii"), value.strip(b" \t").decode("latin-1")])
    return tuple((k, v) for k, v in out)


@dataclass(slots=True)
class _Message:
    number: int
    framing: str
    remaining: int = 0
    body_bytes: int = 0
    trailers: tuple[tuple[str, str], ...] = ()
    tunnel_after: bool = False  # an Upgrade/CONNECT request: its body, then not HTTP/1.1


class Http1Parser:
    """Streaming parser of one direction (``is_request`` True for client → server).

    ``start_offset`` is the stream offset of the first byte fed.  A response parser
    takes ``request_methods`` — the methods of the requests it answers, in order;
    without them every response is assumed to answer a GET.  ``declined_upgrades``
    (request side) lists message numbers whose ``Upgrade`` the server refused, so
    the client's later bytes are HTTP/1.1 again.
    """

    __slots__ = (
        "_buf",
        "_buf_start",
        "_pos",
        "_state",
        "_msg",
        "_count",
        "_is_request",
        "_methods",
        "_declined",
        "_error",
        "_scan_from",
    )

    def __init__(
        self,
        *,
        is_request: bool,
        start_offset: int = 0,
        request_methods: Sequence[str] | None = None,
        declined_upgrades: Sequence[int] = (),
    ) -> None:
        self._buf = bytearray()
        self._buf_start = start_offset  # stream offset of _buf[0]
        self._pos = start_offset  # stream offset of the next byte to be fed
        self._state = _HEAD
        self._msg: _Message | None = None
        self._count = 0
        self._is_request = is_request
        self._methods = list(request_methods) if request_methods is not None else None
        self._declined = set(declined_upgrades)
        self._error: Http1Malformed | Http1HeadTooLarge | None = None
        self._scan_from = 0

    # -- state ----------------------------------------------------------------
    @property
    def position(self) -> int:
        """Stream offset of the next byte to be fed."""
        return self._pos

    @property
    def failed(self) -> bool:
        return self._state == _FAILED

    @property
    def messages(self) -> int:
        """Messages whose head has been parsed (interim responses not counted)."""
        return self._count

    @property
    def in_tunnel(self) -> bool:
        return self._state == _TUNNEL

    # -- input ----------------------------------------------------------------
    def feed(self, data: Buffer) -> list[Http1Item]:
        if self._error is not None:
            raise self._error
        out: list[Http1Item] = []
        self._buf += data
        self._pos += len(data)
        try:
            self._run(out)
        except (Http1Malformed, Http1HeadTooLarge) as exc:
            exc.records = tuple(out)
            self._state = _FAILED
            self._error = exc
            raise
        return out

    def close(self) -> list[Http1Item]:
        """The stream ended: finish a close-delimited body, flag an unfinished message."""
        if self._error is not None:
            return []
        out: list[Http1Item] = []
        m = self._msg
        if self._state == _TUNNEL:
            self._flush_tunnel(out)
        elif self._state == _HEAD and bytes(self._buf).strip(b"\r\n"):
            partial = self._partial_head()
            if partial is not None:
                out.append(partial)
        elif m is not None:
            self._flush_body(out)
            complete = self._state == _CLOSE
            out.append(
                Http1End(
                    offset=self._pos,
                    message=m.number,
                    body_bytes=m.body_bytes,
                    framing=m.framing,
                    complete=complete,
                    trailers=m.trailers,
                )
            )
            self._msg = None
        self._state = _FAILED if self._state != _TUNNEL else _TUNNEL
        return out

    def _partial_head(self) -> Http1PartialHead | None:
        """What arrived of a head whose empty line never did (never raises); None when
        the bytes are not the start of an HTTP/1.x message (a whole first line that is no
        request or status line, or a cut one that cannot begin one)."""
        b = bytes(self._buf)
        skip = len(b) - len(b.lstrip(b"\r\n"))
        offset, body = self._buf_start + skip, b[skip:]
        # whole lines only: the last one may be cut
        whole = body[: body.rfind(b"\n") + 1] if b"\n" in body else b""
        lines = _split_lines(whole)[:-1] if whole else []
        facts: dict[str, Any] = {}
        if not lines:
            start_prefix = _REQUEST_PREFIX if self._is_request else _STATUS_PREFIX
            if not start_prefix.match(body):
                return None
        else:
            start = lines[0]
            if self._is_request:
                mt = _REQUEST_LINE.match(start)
                if not mt or not _TOKEN.match(mt.group(1)):
                    return None
                facts = {
                    "method": mt.group(1).decode("ascii"),
                    "target": mt.group(2).decode("latin-1"),
                    "version": mt.group(3).decode("ascii"),
                }
            else:
                ms = _STATUS_LINE.match(start)
                if not ms:
                    return None
                facts = {
                    "status": ascii_decimal(ms.group(2)),
                    "version": ms.group(1).decode("ascii"),
                }
            fields: tuple[tuple[str, str], ...] = ()
            for k in range(len(lines), 1, -1):  # the longest prefix of lines that parses
                try:
                    fields = _parse_fields(lines[1:k], offset)
                    break
                except Http1Malformed:
                    continue
            facts["headers"] = fields
        return Http1PartialHead(
            offset=offset,
            length=len(body),
            message=self._count,
            is_request=self._is_request,
            **facts,
        )

    # -- machinery ------------------------------------------------------------
    def _consume(self, n: int) -> bytes:
        b = bytes(self._buf[:n])
        del self._buf[:n]
        self._buf_start += n
        self._scan_from = 0
        return b

    def _run(self, out: list[Http1Item]) -> None:
        while self._buf:
            st = self._state
            if st == _HEAD:
                if not self._head(out):
                    return
            elif st == _LENGTH:
                self._body_piece(out, self._msg.remaining if self._msg else 0)
                if self._msg is not None and self._msg.remaining == 0:
                    self._end(out, "content-length")
            elif st == _CLOSE:
                self._body_piece(out, len(self._buf))
            elif st == _CHUNK_LINE:
                if not self._chunk_line():
                    return
            elif st == _CHUNK_DATA:
                self._body_piece(out, self._msg.remaining if self._msg else 0)
                if self._msg is not None and self._msg.remaining == 0:
                    self._state = _CHUNK_CRLF
            elif st == _CHUNK_CRLF:
                if not self._chunk_crlf():
                    return
            elif st == _TRAILERS:
                if not self._trailers(out):
                    return
            elif st == _TUNNEL:
                self._flush_tunnel(out)
            else:  # _FAILED after close(): ignore further bytes
                self._consume(len(self._buf))

    def _find_blank_line(self, *, allow_empty: bool) -> int | None:
        """End offset (in ``_buf``) of a section closed by an empty line, or None yet."""
        b = self._buf
        if allow_empty:
            if b[:1] == b"\n":
                return 1
            if b[:2] == b"\r\n":
                return 2
            if b == b"\r":
                return None
        m = _BLANK_LINE.search(b, max(0, self._scan_from - 2))
        if m is None:
            self._scan_from = len(b)
            return None
        return m.end()

    def _head(self, out: list[Http1Item]) -> bool:
        b = self._buf
        # RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a request-line
        skip = 0
        while skip < len(b) and b[skip] in (0x0D, 0x0A):
            skip += 1
        if skip:
            self._consume(skip)
            if not self._buf:
                return False
        end = self._find_blank_line(allow_empty=False)
        if end is None:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise Http1HeadTooLarge(
                    f"no end of header section within {MAX_HEAD_BYTES} bytes",
                    offset=self._buf_start,
                )
            return False
        if end > MAX_HEAD_BYTES:
            raise Http1HeadTooLarge(
                f"header section of {end} bytes exceeds {MAX_HEAD_BYTES}", offset=self._buf_start
            )
        offset = self._buf_start
        block = self._consume(end)
        lines = _split_lines(block)
        start = lines[0]
        fields = _parse_fields(lines[1:], offset)
        if self._is_request:
            mt = _REQUEST_LINE.match(start)
            if not mt or not _TOKEN.match(mt.group(1)):
                raise Http1Malformed(f"bad request line {start[:60]!r}", offset=offset)
            head = Http1Head(
                offset=offset,
                length=end,
                message=self._count,
                is_request=True,
                method=mt.group(1).decode("ascii"),
                target=mt.group(2).decode("latin-1"),
                version=mt.group(3).decode("ascii"),
                headers=fields,
            )
        else:
            ms = _STATUS_LINE.match(start)
            if not ms:
                raise Http1Malformed(f"bad status line {start[:60]!r}", offset=offset)
            head = Http1Head(
                offset=offset,
                length=end,
                message=self._count,
                is_request=False,
                status=_status_code(ms.group(2), offset),
                reason=(ms.group(3) or b"").decode("latin-1"),
                version=ms.group(1).decode("ascii"),
                headers=fields,
            )
        out.append(head)
        if head.interim:
            return True  # the final response follows, same message number
        self._count += 1
        self._start_body(head, out)
        return True

    def _start_body(self, head: Http1Head, out: list[Http1Item]) -> None:
        """RFC 9112 §6.3: how the length of this message's body is determined."""
        n = head.message
        te = head.get("transfer-encoding")
        cl = head.get("content-length")
        if self._is_request:
            tunnel = head.method == "CONNECT" or (
                head.get("upgrade") is not None and n not in self._declined
            )
        else:
            method = "GET"
            if self._methods is not None and n < len(self._methods):
                method = self._methods[n]
            status = head.status or 0
            if status == 101 or (method == "CONNECT" and 200 <= status < 300):
                self._msg = _Message(n, "none", tunnel_after=True)
                self._end(out, "none")
                return
            tunnel = False
            if method == "HEAD" or status in (204, 304):
                te = cl = None
                self._msg = _Message(n, "none")
                self._end(out, "none")
                return
        if te is not None:
            codings = [c.strip().lower() for c in te.split(",") if c.strip()]
            if codings and codings[-1] == "chunked":
                self._msg = _Message(n, "chunked", tunnel_after=tunnel)
                self._state = _CHUNK_LINE
                return
            if self._is_request:
                # RFC 9112 §6.3 rule 4: a request whose final coding is not chunked
                # MUST be answered with 400 — its length cannot be determined.
                raise Http1Malformed(
                    f"request transfer-coding {te!r} without chunked", offset=head.offset
                )
            self._msg = _Message(n, "close")
            self._state = _CLOSE
            return
        if cl is not None:
            vals = {ascii_decimal(v.strip(" \t")) for v in cl.split(",")}
            if len(vals) != 1 or None in vals:
                # RFC 9112 §6.3 rule 5: invalid or differing Content-Length is unrecoverable
                raise Http1Malformed(f"invalid Content-Length {cl!r}", offset=head.offset)
            length = next(iter(vals))
            assert length is not None
            self._msg = _Message(n, "content-length", remaining=length, tunnel_after=tunnel)
            if length == 0:
                self._end(out, "content-length")
            else:
                self._state = _LENGTH
            return
        if self._is_request:
            self._msg = _Message(n, "none", tunnel_after=tunnel)
            self._end(out, "none")
            return
        self._msg = _Message(n, "close")
        self._state = _CLOSE

    def _body_piece(self, out: list[Http1Item], want: int) -> None:
        m = self._msg
        assert m is not None
        take = min(want, len(self._buf))
        if take <= 0:
            return
        offset = self._buf_start
        data = self._consume(take)
        out.append(
            Http1Body(
                offset=offset, length=take, message=m.number, body_offset=m.body_bytes, data=data
            )
        )
        m.body_bytes += take
        if self._state != _CLOSE:
            m.remaining -= take

    def _flush_body(self, out: list[Http1Item]) -> None:
        if self._state == _CLOSE and self._buf:
            self._body_piece(out, len(self._buf))

    def _end(self, out: list[Http1Item], framing: str) -> None:
        m = self._msg
        assert m is not None
        out.append(
            Http1End(
                offset=self._buf_start,
                message=m.number,
                body_bytes=m.body_bytes,
                framing=framing,
                trailers=m.trailers,
            )
        )
        self._msg = None
        self._state = _TUNNEL if m.tunnel_after else _HEAD

    def _chunk_line(self) -> bool:
        j = self._buf.find(b"\n")
        if j < 0:
            if len(self._buf) > MAX_CHUNK_LINE_BYTES:
                raise Http1Malformed("chunk-size line too long", offset=self._buf_start)
            return False
        offset = self._buf_start
        line = self._consume(j + 1).rstrip(b"\r\n")
        size_part = line.split(b";", 1)[0].strip(b" \t")
        if not _HEX.fullmatch(size_part) or len(size_part) > _MAX_CHUNK_HEX:
            raise Http1Malformed(f"bad chunk-size {line[:40]!r}", offset=offset)
        size = int(size_part, 16)
        m = self._msg
        assert m is not None
        if size == 0:
            self._state = _TRAILERS
        else:
            m.remaining = size
            self._state = _CHUNK_DATA
        return True

    def _chunk_crlf(self) -> bool:
        b = self._buf
        if b[0] == 0x0A:
            self._consume(1)
            self._state = _CHUNK_LINE
            return True
        if b[0] != 0x0D:
            raise Http1Malformed("chunk data not followed by CRLF", offset=self._buf_start)
        if len(b) < 2:
            return False
        if b[1] != 0x0A:
            raise Http1Malformed("chunk data not followed by CRLF", offset=self._buf_start)
        self._consume(2)
        self._state = _CHUNK_LINE
        return True

    def _trailers(self, out: list[Http1Item]) -> bool:
        end = self._find_blank_line(allow_empty=True)
        if end is None:
            if len(self._buf) > MAX_HEAD_BYTES:
                raise Http1HeadTooLarge("trailer section too large", offset=self._buf_start)
            return False
        offset = self._buf_start
        block = self._consume(end)
        m = self._msg
        assert m is not None
        m.trailers = _parse_fields(_split_lines(block), offset)
        self._end(out, "chunked")
        return True

    def _flush_tunnel(self, out: list[Http1Item]) -> None:
        if self._buf:
            offset = self._buf_start
            data = self._consume(len(self._buf))
            out.append(Http1Tunnel(offset=offset, length=len(data), data=data))


@dataclass(slots=True)
class Http1Connection:
    """Both directions of one connection, dissected (see :func:`dissect_connection`).

    ``c2s`` / ``s2c`` hold the items in stream order; ``error`` maps a direction to
    the :class:`Http1Malformed` that stopped it (items before it are kept).
    """

    c2s: list[Http1Item] = field(default_factory=list)
    s2c: list[Http1Item] = field(default_factory=list)
    error: dict[str, DissectErrorInfo] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DissectErrorInfo:
    reason: str
    message: str
    offset: int | None


def _run_direction(
    parser: Http1Parser, data: bytes, eof: bool
) -> tuple[list[Http1Item], DissectErrorInfo | None]:
    try:
        items = parser.feed(data)
        if eof:
            items += parser.close()
        return items, None
    except (Http1Malformed, Http1HeadTooLarge) as exc:
        return list(exc.records), DissectErrorInfo(exc.reason, str(exc), exc.offset)


def dissect_connection(
    c2s: bytes, s2c: bytes, *, c2s_start: int = 0, s2c_start: int = 0, eof: bool = True
) -> Http1Connection:
    """Dissect a whole connection: requests first, then responses paired by order.

    A request with ``Upgrade`` whose response is not ``101`` did not switch
    protocols (RFC 9110 §7.8): the client side is re-parsed with that upgrade
    declined.  ``eof`` says the streams ended (close-delimited bodies complete).
    """
    declined: list[int] = []
    for _ in range(MAX_UPGRADE_PASSES):
        req = Http1Parser(is_request=True, start_offset=c2s_start, declined_upgrades=declined)
        c_items, c_err = _run_direction(req, c2s, eof)
        heads = [h for h in c_items if isinstance(h, Http1Head)]
        methods = [h.method or "GET" for h in heads]
        resp = Http1Parser(is_request=False, start_offset=s2c_start, request_methods=methods)
        s_items, s_err = _run_direction(resp, s2c, eof)
        finals = {h.message: h for h in s_items if isinstance(h, Http1Head) and not h.interim}
        more = [
            h.message
            for h in heads
            if h.method != "CONNECT"
            and h.get("upgrade") is not None
            and h.message in finals
            and finals[h.message].status != 101
            and h.message not in declined
        ]
        if not more:
            break
        declined += more
    conn = Http1Connection(c2s=c_items, s2c=s_items)
    if c_err:
        conn.error["c2s"] = c_err
    if s_err:
        conn.error["s2c"] = s_err
    return conn

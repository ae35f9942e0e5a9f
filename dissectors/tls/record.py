"""TLS record layer framing: RFC 5246 §6.2.1 and RFC 8446 §5.1–§5.2.

Every TLS record starts with a 5-byte header::

    struct {
        ContentType type;              /* 1 byte  */
        ProtocolVersion legacy_record_version;   /* 2 bytes */
        uint16 length;
        opaque fragment[length];
    } TLSPlaintext / TLSCiphertext;

Two shapes, as every dissector (DESIGN.md §5):

* :func:`parse_record` — one-shot ``parse_record(buf, offset) -> (TlsRecord, next_offset)``;
  raises :class:`~dissectors.errors.Truncated` if ``buf`` ends inside the record and
  :class:`~dissectors.errors.Malformed` on a header that cannot be TLS.  The fragment is a
  zero-copy ``memoryview`` slice of ``buf``.
* :class:`RecordParser` — streaming over one direction of a reassembled TCP stream,
  ``feed(data) -> list[item]``, ``feed_gap(length)`` for a hole in the capture, and
  ``close() -> list[item]``.  Items are :class:`TlsRecord` (complete record, fragment as
  ``bytes``), :class:`IncompleteRecord` (framing known, some bytes were never captured) and
  :class:`StreamGap` (bytes that cannot be attributed to records because the record
  boundary was lost).  The sequence of items is independent of how the input was chunked.

Header checks (all raise :class:`Malformed`, and the parser then refuses further input):

* content type must be one of change_cipher_spec(20), alert(21), handshake(22),
  application_data(23), heartbeat(24, RFC 6520).  The one exception is an SSL
  2.0-compatible ClientHello (RFC 5246 Appendix E.2: high bit set in the first byte,
  msg_type 1, version 3.x) as the *first* record of a stream, which old clients send; it
  is returned as :class:`Sslv2ClientHello`.  Anywhere else that pattern is malformed.
* the version's major byte must be 3 (SSL 3.0 … TLS 1.3 all use 3.x on the record layer).
* the length must not exceed 2^14 + 2048 (RFC 5246 §6.2.3: "The length (in bytes) of the
  following TLSCiphertext.fragment.  The length MUST NOT exceed 2^14 + 2048.").  The tighter
  TLS 1.3 limit, 2^14 + 256 (RFC 8446 §5.2), depends on the negotiated version, which the
  record layer does not know; :class:`dissectors.tls.crypto.TlsSession` enforces it per record.
  Checking a version-independent limit here keeps the parser's output independent of
  chunking.
* zero-length change_cipher_spec, alert and handshake fragments are rejected (RFC 5246
  §6.2.1: "Implementations MUST NOT send zero-length fragments of Handshake, Alert, or
  ChangeCipherSpec content types."); zero-length application data is legal.

Gaps (holes in the reassembled TCP stream), see :meth:`RecordParser.feed_gap`:

* a hole that falls inside a record whose 5-byte header was captured does not lose
  synchronisation: the record is reported as :class:`IncompleteRecord` (with the number of
  missing bytes) and parsing resumes at the next record boundary, which is known;
* a hole that covers a record header (or starts at a record boundary, or runs past the end
  of the record in progress) loses the boundary.  The parser does not guess: everything
  from the lost boundary on is reported as one :class:`StreamGap` at :meth:`close`.  With
  ``scan_after_gap=True`` it looks for a new boundary and resumes only at a position where
  ``RESYNC_CHAIN`` consecutive record headers are plausible *and* chain exactly (each
  header's length leads to the next); the :class:`StreamGap` then ends there
  (``reason="resynchronised"``).  Even then the records' sequence numbers are unknown, which
  the session layer has to take into account.

Resynchronisation (``resync=True``, what the session layer of pcapkit uses): a header
that cannot be TLS (content type or version) does not stop the parser.  It loses the
boundary there and scans for ``RESYNC_CHAIN`` chained headers as after a hole; the
skipped span is a :class:`StreamGap` with ``cause="malformed_header"`` (and the reason in
``detail``).  A header whose type and version are valid but whose length breaks a rule of
the record layer (above 2^14 + 2048, or a zero-length handshake, alert or
ChangeCipherSpec) keeps its framing: the length says where the next record starts, so it
is returned as a :class:`TlsRecord` for the session to flag (``tls_record_overflow``,
``tls_empty_handshake_record``), and no byte after it is lost.  A length field is 16 bits,
so such a record holds at most 65,540 bytes.

:meth:`RecordParser.close` never raises for a short tail: a record cut by the end of the
stream is returned as an :class:`IncompleteRecord` with ``missing > 0``, and a tail shorter
than a header as a :class:`StreamGap` with ``reason="truncated_header"`` — the caller turns
these into anomalies.  It re-raises the stored error if the parser has failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from .._wire import Buffer, Cursor
from ..errors import DissectError, Malformed, Truncated

__all__ = [
    "HEADER_LENGTH",
    "MAX_CIPHERTEXT_LENGTH",
    "MAX_PLAINTEXT_LENGTH",
    "MAX_TLS13_CIPHERTEXT_LENGTH",
    "RESYNC_CHAIN",
    "ContentType",
    "IncompleteRecord",
    "ProtocolVersion",
    "RecordItem",
    "RecordMalformed",
    "RecordParser",
    "Sslv2ClientHello",
    "StreamGap",
    "TlsRecord",
    "code_name",
    "is_record_header",
    "parse_record",
]

HEADER_LENGTH: Final = 5
#: RFC 8446 §5.1 / RFC 5246 §6.2.1: TLSPlaintext.length MUST NOT exceed 2^14.
MAX_PLAINTEXT_LENGTH: Final = 1 << 14
#: RFC 5246 §6.2.3: TLSCiphertext.length MUST NOT exceed 2^14 + 2048 (TLS 1.0–1.2).
MAX_CIPHERTEXT_LENGTH: Final = (1 << 14) + 2048
#: RFC 8446 §5.2: TLSCiphertext.length MUST NOT exceed 2^14 + 256 (TLS 1.3).
MAX_TLS13_CIPHERTEXT_LENGTH: Final = (1 << 14) + 256
#: Headers that must chain before the parser trusts a boundary found by scanning after a
#: lost boundary.  One plausible header matches random bytes with probability ≈ 2e-7
#: (4/256 types × 3/65536 versions × 0.28 lengths); three chained ones make a false
#: resynchronisation negligible even over gigabytes of ciphertext.
RESYNC_CHAIN: Final = 3


class ContentType(IntEnum):
    """TLS ContentType (RFC 8446 §5.1, RFC 6520 for heartbeat)."""

    INVALID = 0
    CHANGE_CIPHER_SPEC = 20
    ALERT = 21
    HANDSHAKE = 22
    APPLICATION_DATA = 23
    HEARTBEAT = 24


class ProtocolVersion(IntEnum):
    """ProtocolVersion values seen on the record layer and in hellos."""

    SSL3 = 0x0300
    TLS1_0 = 0x0301
    TLS1_1 = 0x0302
    TLS1_2 = 0x0303
    TLS1_3 = 0x0304


_VALID_TYPES: Final = frozenset({20, 21, 22, 23, 24})
_NONEMPTY_TYPES: Final = frozenset({20, 21, 22})
# The stricter test used only when looking for a new boundary after a hole: real records
# use TLS 1.0–1.2 on the wire (TLS 1.3 freezes legacy_record_version at 0x0303).
_RESYNC_CANDIDATE: Final = re.compile(rb"[\x14-\x17]\x03[\x01-\x03]")


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsRecord:
    """One complete record.

    ``offset`` is the stream offset of the 5-byte header and ``length`` the wire length
    including the header.  ``content_type`` and ``version`` are the raw header values
    (names via :class:`ContentType` / :class:`ProtocolVersion`).
    """

    offset: int
    length: int
    content_type: int
    version: int
    fragment: bytes | memoryview

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def header(self) -> bytes:
        """The 5 header bytes as they were on the wire (the AEAD additional data in TLS 1.3)."""
        n = self.length - HEADER_LENGTH
        return bytes((self.content_type, self.version >> 8, self.version & 0xFF, n >> 8, n & 0xFF))


@dataclass(frozen=True, slots=True, kw_only=True)
class IncompleteRecord:
    """A record whose header was captured but ``missing`` of its bytes were not.

    ``length`` is the wire length announced by the header (header included), so the record
    occupies ``[offset, offset + length)`` in the stream.
    """

    offset: int
    length: int
    content_type: int
    version: int
    missing: int

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamGap:
    """Stream bytes ``[offset, offset + length)`` that could not be framed as records.

    ``reason`` is ``"lost_boundary"`` (a hole destroyed the record boundary and the stream
    ended before one was found again), ``"resynchronised"`` (records resume at
    ``offset + length``, found by header chaining) or ``"truncated_header"`` (the stream
    ended inside a record header).  ``missing`` counts the bytes of the span that were
    never captured (the holes).
    """

    offset: int
    length: int
    reason: str
    missing: int
    #: what lost the boundary: ``"hole"`` (bytes never captured) or ``"malformed_header"``
    #: (bytes that cannot be a record header, with the reason in ``detail``)
    cause: str = "hole"
    detail: str = ""

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def skipped(self) -> int:
        """Captured bytes of the span that could not be framed as records."""
        return self.length - self.missing


@dataclass(frozen=True, slots=True, kw_only=True)
class Sslv2ClientHello:
    """An SSL 2.0-compatible ClientHello (RFC 5246 Appendix E.2), accepted only as the
    very first record of a stream, from clients that then speak SSL 3.0 / TLS.

    ``length`` includes the 2-byte SSLv2 header.  ``cipher_specs`` are the 3-byte
    V2CipherSpec values (TLS suites appear as ``0x00XXXX``).
    """

    offset: int
    length: int
    version: int
    cipher_specs: tuple[int, ...]
    session_id: bytes
    challenge: bytes

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def client_random(self) -> bytes:
        """The challenge right-justified in 32 bytes with leading zeros (RFC 5246 E.2)."""
        return bytes(32 - len(self.challenge)) + self.challenge[-32:]

    @property
    def cipher_suites(self) -> tuple[int, ...]:
        return tuple(c for c in self.cipher_specs if c >> 16 == 0)


RecordItem = TlsRecord | IncompleteRecord | StreamGap | Sslv2ClientHello


class RecordMalformed(Malformed):
    """A record header that cannot be TLS.

    ``records`` holds the items the same :meth:`RecordParser.feed` call completed before
    the bad header, so no record is lost to the exception (and the items a stream yields
    do not depend on chunking).
    """

    def __init__(
        self, message: str, *, offset: int | None = None, records: tuple[RecordItem, ...] = ()
    ) -> None:
        super().__init__(message, offset=offset)
        self.records = records


def _check_header(
    content_type: int, version: int, length: int, offset: int, max_length: int
) -> str | None:
    """Return why this header cannot be a TLS record, or ``None`` if it can."""
    why = _check_type_version(content_type, version, offset)
    if why is not None:
        return why
    if length > max_length:
        return f"record length {length} > {max_length} at offset {offset}"
    if length == 0 and content_type in _NONEMPTY_TYPES:
        # RFC 5246 §6.2.1: "Implementations MUST NOT send zero-length fragments of
        # Handshake, Alert, or ChangeCipherSpec content types."
        return f"zero-length {ContentType(content_type).name} record at offset {offset}"
    return None


def _check_type_version(content_type: int, version: int, offset: int) -> str | None:
    """Why these bytes cannot start a record header at all (the framing is unknown)."""
    if content_type not in _VALID_TYPES:
        return f"unknown content type {content_type} at offset {offset}"
    if version >> 8 != 3:
        return f"record version 0x{version:04x} (major != 3) at offset {offset}"
    return None


def code_name(enum: type[IntEnum], value: int) -> str:
    """The IntEnum name of a wire code, or ``UNKNOWN(0x1a)`` (DESIGN.md §5)."""
    try:
        return enum(value).name
    except ValueError:
        return f"UNKNOWN(0x{value:02x})"


def _sslv2_hello_length(b0: int, b1: int, b2: int, b3: int) -> int | None:
    """Total length of an SSLv2-compatible ClientHello starting with these bytes, or None.

    RFC 5246 E.2: "msg_length: The highest bit MUST be 1; the remaining bits contain the
    length of the following data in bytes", msg_type 1 (CLIENT-HELLO), then the version,
    whose major byte is 3 for SSL 3.0 / TLS clients.
    """
    if not b0 & 0x80 or b2 != 1 or b3 != 3:
        return None
    return 2 + (((b0 & 0x7F) << 8) | b1)


def _parse_sslv2_hello(body: bytes, offset: int) -> Sslv2ClientHello:
    cur = Cursor(body, 2)
    cur.pull_u8()  # msg_type (1)
    version = cur.pull_u16()
    spec_len = cur.pull_u16()
    sid_len = cur.pull_u16()
    challenge_len = cur.pull_u16()
    if spec_len % 3 or not 16 <= challenge_len <= 32:
        # RFC 5246 E.2: challenge lengths "between 16 and 32 bytes inclusive"
        raise Malformed(
            f"SSLv2 ClientHello with cipher_spec_length {spec_len}, challenge {challenge_len}",
            offset=offset,
        )
    raw = cur.pull_bytes(spec_len)
    specs = tuple(int.from_bytes(raw[i : i + 3], "big") for i in range(0, spec_len, 3))
    session_id = cur.pull_bytes(sid_len)
    challenge = cur.pull_bytes(challenge_len)
    if not cur.eof():
        raise Malformed("trailing bytes in SSLv2 ClientHello", offset=offset)
    return Sslv2ClientHello(
        offset=offset,
        length=len(body),
        version=version,
        cipher_specs=specs,
        session_id=session_id,
        challenge=challenge,
    )


def is_record_header(
    buf: Buffer, offset: int = 0, *, max_length: int = MAX_CIPHERTEXT_LENGTH
) -> bool:
    """True if ``buf[offset:offset+5]`` is a plausible record header (content sniffing)."""
    if offset < 0 or len(buf) - offset < HEADER_LENGTH:
        return False
    b = buf
    length = (b[offset + 3] << 8) | b[offset + 4]
    version = (b[offset + 1] << 8) | b[offset + 2]
    return _check_header(b[offset], version, length, offset, max_length) is None


def parse_record(
    buf: Buffer, offset: int = 0, *, max_length: int = MAX_CIPHERTEXT_LENGTH
) -> tuple[TlsRecord, int]:
    """Parse the record at ``buf[offset:]``; return it and the offset after it.

    ``TlsRecord.offset`` is ``offset`` itself: pass the whole reassembled stream to get
    stream coordinates.  The fragment is a ``memoryview`` into ``buf`` (no copy).
    """
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if offset < 0 or offset > len(mv):
        raise Truncated(f"offset {offset} outside buffer of {len(mv)}", offset=offset)
    if len(mv) - offset < HEADER_LENGTH:
        raise Truncated(f"need a 5-byte record header at offset {offset}", offset=offset)
    content_type = mv[offset]
    version = (mv[offset + 1] << 8) | mv[offset + 2]
    length = (mv[offset + 3] << 8) | mv[offset + 4]
    why = _check_header(content_type, version, length, offset, max_length)
    if why is not None:
        raise Malformed(why, offset=offset)
    end = offset + HEADER_LENGTH + length
    if end > len(mv):
        raise Truncated(f"record at {offset} needs {end - len(mv)} more bytes", offset=offset)
    record = TlsRecord(
        offset=offset,
        length=HEADER_LENGTH + length,
        content_type=content_type,
        version=version,
        fragment=mv[offset + HEADER_LENGTH : end],
    )
    return record, end


# Parser modes.
_SYNC = 0  # _buf holds the bytes of the record in progress, starting at _rec_start
_SKIP = 1  # inside a record with a known header after a hole; counting bytes to its end
_DESYNC = 2  # record boundary lost at _lost_start
_FAILED = 3  # a bad header was seen; refuse input


class RecordParser:
    """Streaming record parser for one direction of a TCP stream.

    ``start_offset`` is the stream offset of the first byte that will be fed, so record
    offsets come out in stream coordinates.  ``feed`` keeps a short tail (a partial record)
    and returns the items completed so far; it raises :class:`RecordMalformed` on a header
    that cannot be TLS, after which every call raises again.  ``feed_gap(n)`` says that the
    next ``n`` stream bytes were not captured.  With ``accept_sslv2_hello`` (default) the
    first record of the stream may be an SSLv2-compatible ClientHello
    (:class:`Sslv2ClientHello`); anywhere else that byte pattern is malformed.
    """

    __slots__ = (
        "_buf",
        "_rec_start",
        "_pos",
        "_mode",
        "_cur_total",
        "_cur_v2",
        "_skip_ctype",
        "_skip_version",
        "_skip_end",
        "_missing",
        "_lost_start",
        "_lost_missing",
        "_scan",
        "_error",
        "_max_length",
        "_start",
        "_v2",
        "_resync",
        "_lost_cause",
        "_lost_detail",
    )

    def __init__(
        self,
        *,
        start_offset: int = 0,
        scan_after_gap: bool = False,
        max_length: int = MAX_CIPHERTEXT_LENGTH,
        accept_sslv2_hello: bool = True,
        resync: bool = False,
    ) -> None:
        self._buf = bytearray()
        self._rec_start = start_offset
        self._pos = start_offset
        self._start = start_offset
        self._mode = _SYNC
        self._cur_total = 0  # wire length of the record in progress (valid once its header is)
        self._cur_v2 = False
        self._skip_ctype = 0
        self._skip_version = 0
        self._skip_end = 0
        self._missing = 0
        self._lost_start = 0
        self._lost_missing = 0
        self._scan = scan_after_gap
        self._error: tuple[str, int] | None = None
        self._max_length = max_length
        self._v2 = accept_sslv2_hello
        # resync: never fail; a bad header loses the boundary (scanned for, as after a
        # hole) and a record whose only fault is its length keeps its framing
        self._resync = resync
        self._scan = scan_after_gap or resync
        self._lost_cause = "hole"
        self._lost_detail = ""

    # -- state --------------------------------------------------------------
    @property
    def position(self) -> int:
        """Stream offset of the next byte to be fed."""
        return self._pos

    @property
    def max_length(self) -> int:
        """Largest fragment length accepted (fixed for the parser's life: see the module doc)."""
        return self._max_length

    @property
    def failed(self) -> bool:
        return self._mode == _FAILED

    @property
    def in_sync(self) -> bool:
        """False while the record boundary is lost after a hole."""
        return self._mode in (_SYNC, _SKIP)

    @property
    def buffered(self) -> int:
        """Bytes held for a record (or a resynchronisation candidate) not yet complete."""
        return len(self._buf)

    # -- input --------------------------------------------------------------
    def feed(self, data: Buffer) -> list[RecordItem]:
        self._raise_if_failed()
        out: list[RecordItem] = []
        try:
            self._feed(data, out)
        except RecordMalformed as exc:
            # Hand over what this call completed before the bad header.
            exc.records = tuple(out)
            raise
        return out

    def _feed(self, data: Buffer, out: list[RecordItem]) -> None:
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
        i = 0
        n = len(mv)
        while i < n:
            if self._mode == _SKIP:
                take = min(n - i, self._skip_end - self._pos)
                i += take
                self._pos += take
                if self._pos == self._skip_end:
                    self._finish_skip(out)
                continue
            if self._mode == _DESYNC:
                if self._scan:
                    self._buf += mv[i:]
                self._pos += n - i
                i = n
                if self._scan:
                    rest = self._try_resync(out)
                    if rest is not None:
                        mv, i, n = memoryview(rest), 0, len(rest)
                continue
            if not self._buf:
                # Fast path: parse whole records straight from the input.
                while n - i >= HEADER_LENGTH:
                    total = self._frame(mv, i, self._pos)
                    if total < 0 or i + total > n:
                        break
                    item = self._make(mv[i : i + total], self._pos)
                    if item is None:
                        total = -1
                        break
                    out.append(item)
                    self._pos += total
                    i += total
                else:
                    total = 0
                if total < 0:  # a bad header (resync): scan from it
                    continue
                self._rec_start = self._pos
                self._buf += mv[i:]
                self._pos += n - i
                i = n
                continue
            # Top up the buffered record: first its header, then the rest.
            have = len(self._buf)
            need = HEADER_LENGTH - have if have < HEADER_LENGTH else self._cur_total - have
            take = min(need, n - i)
            self._buf += mv[i : i + take]
            self._pos += take
            i += take
            b = self._buf
            if len(b) == HEADER_LENGTH and self._frame(b, 0, self._rec_start) < 0:
                # a bad header (resync): the bytes after it are scanned from the header on
                rest = bytes(b) + bytes(mv[i:])
                self._pos = self._rec_start
                mv, i, n = memoryview(rest), 0, len(rest)
                continue
            if len(b) >= HEADER_LENGTH and len(b) == self._cur_total:
                item = self._make(b, self._rec_start)
                if item is None:
                    rest = bytes(b) + bytes(mv[i:])
                    self._pos = self._rec_start
                    mv, i, n = memoryview(rest), 0, len(rest)
                    continue
                out.append(item)
                self._buf = bytearray()
                self._rec_start = self._pos

    def _frame(self, b: Buffer, i: int, offset: int) -> int:
        """Validate the header at ``b[i:i+5]``; return the record's wire length (-1: a bad
        header, the boundary is lost there; only with ``resync``, which never raises)."""
        if self._v2 and offset == self._start:
            total = _sslv2_hello_length(b[i], b[i + 1], b[i + 2], b[i + 3])
            if total is not None:
                self._cur_total, self._cur_v2 = total, True
                return total
        length = (b[i + 3] << 8) | b[i + 4]
        version = (b[i + 1] << 8) | b[i + 2]
        if self._resync:
            # only type and version decide whether this is a header: a bad length keeps
            # the framing (the session flags the record)
            why = _check_type_version(b[i], version, offset)
            if why is not None:
                self._lose_sync(offset, why)
                return -1
        else:
            why = _check_header(b[i], version, length, offset, self._max_length)
            if why is not None:
                self._fail(why, offset)
        self._cur_total, self._cur_v2 = HEADER_LENGTH + length, False
        return HEADER_LENGTH + length

    def _make(self, b: Buffer, offset: int) -> TlsRecord | Sslv2ClientHello | None:
        """The record of ``b`` (None: an SSLv2 hello that does not parse, with ``resync``:
        the boundary is lost at ``offset``)."""
        if self._cur_v2:
            self._cur_v2 = False
            try:
                return _parse_sslv2_hello(bytes(b), offset)
            except DissectError as exc:
                if self._resync:
                    self._lose_sync(offset, str(exc))
                    return None
                self._fail(str(exc), offset)
        return TlsRecord(
            offset=offset,
            length=len(b),
            content_type=b[0],
            version=(b[1] << 8) | b[2],
            fragment=bytes(b[HEADER_LENGTH:]),
        )

    def feed_gap(self, length: int) -> list[RecordItem]:
        """The next ``length`` stream bytes were not captured (a hole in reassembly)."""
        self._raise_if_failed()
        if length < 0:
            raise ValueError("gap length must be >= 0")
        out: list[RecordItem] = []
        if length == 0:
            return out
        gap_end = self._pos + length
        if self._mode == _SYNC:
            if len(self._buf) >= HEADER_LENGTH:
                b = self._buf
                self._skip_ctype = 22 if self._cur_v2 else b[0]
                self._skip_version = ((b[3] << 8) | b[4]) if self._cur_v2 else ((b[1] << 8) | b[2])
                self._skip_end = self._rec_start + self._cur_total
                self._missing = 0
                self._buf = bytearray()
                self._cur_v2 = False
                self._mode = _SKIP
            else:
                self._lose_boundary(self._rec_start, gap_end)
                return out
        if self._mode == _SKIP:
            in_record = min(gap_end, self._skip_end) - self._pos
            self._missing += in_record
            self._pos += in_record
            if self._pos == self._skip_end:
                self._finish_skip(out)
                if gap_end > self._pos:
                    # The hole runs past the record's end: the next header is lost.
                    self._lose_boundary(self._pos, gap_end)
            return out
        # _DESYNC: a hole restarts the contiguous run a resync scan may use.
        self._lost_missing += length
        self._pos = gap_end
        self._buf = bytearray()
        return out

    def close(self) -> list[RecordItem]:
        """End of stream: report what is left (see the module docstring)."""
        self._raise_if_failed()
        out: list[RecordItem] = []
        if self._mode == _SKIP:
            out.append(
                IncompleteRecord(
                    offset=self._rec_start,
                    length=self._skip_end - self._rec_start,
                    content_type=self._skip_ctype,
                    version=self._skip_version,
                    missing=self._missing + (self._skip_end - self._pos),
                )
            )
        elif self._mode == _DESYNC:
            if self._pos > self._lost_start:
                out.append(
                    StreamGap(
                        offset=self._lost_start,
                        length=self._pos - self._lost_start,
                        reason="lost_boundary",
                        missing=self._lost_missing,
                        cause=self._lost_cause,
                        detail=self._lost_detail,
                    )
                )
        elif self._buf:
            b = self._buf
            if len(b) >= HEADER_LENGTH:
                out.append(
                    IncompleteRecord(
                        offset=self._rec_start,
                        length=self._cur_total,
                        content_type=22 if self._cur_v2 else b[0],
                        version=((b[3] << 8) | b[4]) if self._cur_v2 else ((b[1] << 8) | b[2]),
                        missing=self._cur_total - len(b),
                    )
                )
            else:
                out.append(
                    StreamGap(
                        offset=self._rec_start, length=len(b), reason="truncated_header", missing=0
                    )
                )
        self._buf = bytearray()
        self._mode = _SYNC
        self._cur_v2 = False
        self._rec_start = self._pos
        return out

    # -- internals ----------------------------------------------------------
    def _raise_if_failed(self) -> None:
        if self._error is not None:
            why, offset = self._error
            raise RecordMalformed(f"parser stopped after a bad header: {why}", offset=offset)

    def _fail(self, why: str, offset: int) -> None:
        self._mode = _FAILED
        self._buf = bytearray()
        self._error = (why, offset)
        raise RecordMalformed(why, offset=offset)

    def _finish_skip(self, out: list[RecordItem]) -> None:
        out.append(
            IncompleteRecord(
                offset=self._rec_start,
                length=self._skip_end - self._rec_start,
                content_type=self._skip_ctype,
                version=self._skip_version,
                missing=self._missing,
            )
        )
        self._mode = _SYNC
        self._rec_start = self._pos
        self._buf = bytearray()

    def _lose_boundary(self, lost_start: int, gap_end: int) -> None:
        self._mode = _DESYNC
        self._lost_start = lost_start
        self._lost_missing = gap_end - self._pos
        self._lost_cause, self._lost_detail = "hole", ""
        self._pos = gap_end
        self._buf = bytearray()
        self._cur_v2 = False

    def _lose_sync(self, offset: int, why: str) -> None:
        """A bad header at stream offset ``offset`` (resync): the boundary is lost there;
        the caller feeds the bytes from the header on to the scan."""
        self._mode = _DESYNC
        self._lost_start = offset
        self._lost_missing = 0
        self._lost_cause, self._lost_detail = "malformed_header", why
        self._pos = offset
        self._buf = bytearray()
        self._cur_v2 = False

    def _chain(self, start: int) -> bool | None:
        """Do RESYNC_CHAIN headers chain from ``_buf[start]``?  ``None``: not enough bytes yet."""
        b = self._buf
        p = start
        for _ in range(RESYNC_CHAIN):
            if len(b) - p < HEADER_LENGTH:
                return None
            ctype = b[p]
            version = (b[p + 1] << 8) | b[p + 2]
            length = (b[p + 3] << 8) | b[p + 4]
            if ctype not in (20, 21, 22, 23) or not 0x0301 <= version <= 0x0303:
                return False
            if _check_header(ctype, version, length, 0, self._max_length) is not None:
                return False
            p += HEADER_LENGTH + length
        return True

    def _try_resync(self, out: list[RecordItem]) -> bytes | None:
        """Look for a chained boundary in the scan buffer.

        The buffer stays bounded: bytes before the first undecided candidate are dropped,
        and a candidate waits for at most RESYNC_CHAIN records of at most ``max_length``.

        On success, report the gap, switch back to _SYNC at the boundary and return the
        buffered bytes from there on (the caller parses them); else return ``None``.
        """
        b = self._buf
        base = self._pos - len(b)  # stream offset of _buf[0]
        start = 0
        while True:
            m = _RESYNC_CANDIDATE.search(b, start)
            if m is None:
                # Keep the last two bytes: a candidate may straddle the next chunk.
                del b[: max(0, len(b) - 2)]
                return None
            p = m.start()
            verdict = self._chain(p)
            if verdict is None:
                del b[:p]  # wait for more bytes; nothing before p can start a chain
                return None
            if verdict:
                out.append(
                    StreamGap(
                        offset=self._lost_start,
                        length=base + p - self._lost_start,
                        reason="resynchronised",
                        missing=self._lost_missing,
                        cause=self._lost_cause,
                        detail=self._lost_detail,
                    )
                )
                rest = bytes(b[p:])
                self._mode = _SYNC
                self._buf = bytearray()
                self._rec_start = base + p
                self._pos = base + p
                return rest
            start = p + 1

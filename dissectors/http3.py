"""HTTP/3 (RFC 9114) over QUIC stream bytes, with QPACK (RFC 9204), for a passive observer.

Implements:

* RFC 9114 §6.1 — request streams (client-initiated bidirectional); §6.2 — unidirectional
  stream types: control (§6.2.1), push (§6.2.2, with its Push ID), QPACK encoder/decoder
  (RFC 9204 §4.2), reserved types ``0x1f * N + 0x21`` (§6.2.3) and unknown types, whose
  bytes are skipped and counted ("Recipients of unknown stream types MUST either abort
  reading of the stream or discard incoming data without further processing");
* RFC 9114 §7.1 — frame layout (Type varint, Length varint, payload) and §7.2 — DATA,
  HEADERS, CANCEL_PUSH, SETTINGS (§7.2.4, with §7.2.4.1 parameters and RFC 9204 §5 /
  RFC 9220 / RFC 9297 ones), PUSH_PROMISE, GOAWAY, MAX_PUSH_ID; reserved (§7.2.8) and
  unknown (§9) types kept as rows; HTTP/2 frame types reserved by §11.2.1 flagged;
* RFC 9114 §4.1 — the request/response exchange on a request stream: HEADERS, DATA*,
  trailers; informational 1xx responses (§4.1: "zero or more interim responses");
* RFC 9204 — encoder/decoder stream instructions (:mod:`dissectors.qpack`), field sections
  decoded by ``pylsqpack``, and blocked streams (§2.1.2) reported with when and by which
  encoder instruction they were unblocked.

Two shapes (DESIGN.md §5): :func:`parse_frame` is the one-shot ``parse_frame(buf, offset)
-> (H3Frame, next_offset)``; :class:`H3StreamParser` is the streaming parser of one
stream direction (``feed(data, offset)``, ``close()``), chunking-invariant.
:class:`H3Connection` takes every stream of one QUIC connection *in arrival order*
(``feed(stream_id, direction, data, offset, fin=..., frame=..., ts_ns=...)``), delivers each
stream's bytes in order as the receiving application would (out-of-order chunks wait for
the hole to fill), runs QPACK per direction and assembles :class:`H3Stream` exchanges
shaped like :class:`dissectors.http2.H2Stream`.  :func:`dissect_quic` does it for a
:class:`~dissectors.quic.connection.QuicConnection`.

Coordinates: ``offset`` is a QUIC stream offset (RFC 9000 §2.2) of that stream direction;
a frame occupies ``[offset, end)`` with ``end = offset + header_length + length``
(``length`` is the Length field: payload octets).

What a passive observer knows: which encoder instructions had *arrived* when a field
section arrived, at this vantage point.  At the receiver's side of the path that is what
the decoder experienced (a lost encoder-stream packet blocks the sections that need it);
at the sender's side sections are never seen blocked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TYPE_CHECKING, Final, Literal

from ._exchange import HeaderFields, HttpExchange
from ._wire import Buffer, Cursor
from .errors import DissectError, Malformed, Truncated
from .qpack import (
    DEFAULT_BLOCKED_STREAMS,
    DEFAULT_MAX_TABLE_CAPACITY,
    MAX_INSTRUCTION_LENGTH,
    DecodedFieldSection,
    QpackDecoder,
    QpackInstruction,
    parse_decoder_instruction,
    parse_encoder_instruction,
    parse_field_section_prefix,
)

if TYPE_CHECKING:
    from .quic.connection import QuicConnection

__all__ = [
    "C2S",
    "H3_ALPNS",
    "MAX_FRAME_PAYLOAD",
    "MAX_REORDER_BYTES",
    "S2C",
    "BodyChunk",
    "Direction",
    "FrameType",
    "H3Connection",
    "H3Error",
    "H3Event",
    "H3Frame",
    "H3Stream",
    "H3StreamParser",
    "H3StreamType",
    "HeaderBlock",
    "QpackBlocked",
    "QpackInstruction",
    "SettingsParameter",
    "StreamKind",
    "StreamType",
    "dissect_quic",
    "frame_type_name",
    "is_h3_alpn",
    "is_reserved",
    "parse_frame",
    "settings_name",
    "stream_type_name",
]

Direction = Literal["c2s", "s2c"]
C2S: Final = "c2s"
S2C: Final = "s2c"
_DIRECTIONS: Final = (C2S, S2C)

#: ALPN tokens of HTTP/3 (RFC 9114 §3.1 "h3") and of the interop drafts ("h3-29" …).
H3_ALPNS: Final = ("h3",)
#: Cap on a frame payload that is buffered to be interpreted (HEADERS, PUSH_PROMISE,
#: SETTINGS, …; DATA and unknown payloads are streamed, never buffered).  The protocol has
#: no limit (a Length varint reaches 2^62); 1 MiB is far above any real field section and
#: bounds the memory one hostile frame can claim.  A larger frame is skipped (its framing
#: is kept) and reported as ``frame_too_large``.
MAX_FRAME_PAYLOAD: Final = 1 << 20
#: Out-of-order stream bytes held per stream direction while waiting for a hole to fill
#: (what a receiver's QUIC stack buffers).  Same bound as QUIC reassembly
#: (``dissectors.quic.reassembly.MAX_REASSEMBLY_BYTES``): 64 MiB.
MAX_REORDER_BYTES: Final = 64 << 20


class FrameType(IntEnum):
    """RFC 9114 §7.2 frame types (§11.2.1 registry) and RFC 9218 PRIORITY_UPDATE."""

    DATA = 0x0
    HEADERS = 0x1
    CANCEL_PUSH = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    GOAWAY = 0x7
    MAX_PUSH_ID = 0xD
    PRIORITY_UPDATE_REQUEST = 0xF0700  # RFC 9218 §7.1
    PRIORITY_UPDATE_PUSH = 0xF0701


#: RFC 9114 §7.2.8 / §11.2.1: HTTP/2 frame types with no HTTP/3 equivalent (PRIORITY,
#: PING, WINDOW_UPDATE, CONTINUATION): "Receipt of any of these frames MUST be treated as a
#: connection error of type H3_FRAME_UNEXPECTED."
H2_ONLY_FRAME_TYPES: Final = {
    0x2: "PRIORITY",
    0x6: "PING",
    0x8: "WINDOW_UPDATE",
    0x9: "CONTINUATION",
}


class StreamType(IntEnum):
    """RFC 9114 §6.2 / §11.2.4 unidirectional stream types (and RFC 9204 §4.2)."""

    CONTROL = 0x00
    PUSH = 0x01
    QPACK_ENCODER = 0x02
    QPACK_DECODER = 0x03


class SettingsParameter(IntEnum):
    """RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9220 §3, RFC 9297 §2.1.1."""

    QPACK_MAX_TABLE_CAPACITY = 0x1
    MAX_FIELD_SECTION_SIZE = 0x6
    QPACK_BLOCKED_STREAMS = 0x7
    ENABLE_CONNECT_PROTOCOL = 0x8
    H3_DATAGRAM = 0x33


#: RFC 9114 §7.2.4.1: "Setting identifiers that were defined in [HTTP/2] where there is no
#: corresponding HTTP/3 setting have also been reserved ... Their receipt MUST be treated
#: as a connection error of type H3_SETTINGS_ERROR."  (0x0 and 0x2–0x5, §11.2.2.)
H2_ONLY_SETTINGS: Final = frozenset({0x0, 0x2, 0x3, 0x4, 0x5})


class StreamKind(str, Enum):
    """What a QUIC stream carries in HTTP/3 (RFC 9114 §6)."""

    REQUEST = "request"  # client-initiated bidirectional (§6.1)
    CONTROL = "control"
    PUSH = "push"
    QPACK_ENCODER = "qpack_encoder"
    QPACK_DECODER = "qpack_decoder"
    RESERVED = "reserved"  # 0x1f * N + 0x21 (§6.2.3)
    UNKNOWN = "unknown"  # unknown unidirectional type, or a server-initiated bidi stream
    PENDING = "pending"  # unidirectional, type varint not yet received


_KIND_OF_TYPE: Final = {
    StreamType.CONTROL: StreamKind.CONTROL,
    StreamType.PUSH: StreamKind.PUSH,
    StreamType.QPACK_ENCODER: StreamKind.QPACK_ENCODER,
    StreamType.QPACK_DECODER: StreamKind.QPACK_DECODER,
}


def is_reserved(value: int) -> bool:
    """RFC 9114 §6.2.3 / §7.2.8 / §7.2.4.1 greasing values: ``0x1f * N + 0x21``."""
    return value >= 0x21 and (value - 0x21) % 0x1F == 0


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        if is_reserved(value):
            return f"RESERVED(0x{value:02x})"
        return f"UNKNOWN(0x{value:02x})"


def frame_type_name(value: int) -> str:
    """``"DATA"`` … ``"MAX_PUSH_ID"``, ``"H2_PING(0x06)"``, ``"RESERVED(0x21)"`` or
    ``"UNKNOWN(0x..)"``."""
    if value in H2_ONLY_FRAME_TYPES:
        return f"H2_{H2_ONLY_FRAME_TYPES[value]}(0x{value:02x})"
    return _name(FrameType, value)


def stream_type_name(value: int) -> str:
    """``"CONTROL"``, ``"PUSH"``, ``"QPACK_ENCODER"``, ``"QPACK_DECODER"``, ``"RESERVED(..)"``
    or ``"UNKNOWN(..)"``."""
    return _name(StreamType, value)


def settings_name(value: int) -> str:
    """RFC 9114 §7.2.4.1 name of a settings identifier, or ``"RESERVED/UNKNOWN(0x..)"``."""
    return _name(SettingsParameter, value)


def is_h3_alpn(alpn: str | None) -> bool:
    """Is ``alpn`` HTTP/3 (RFC 9114 §3.1 "h3", or a draft token "h3-NN")?"""
    return alpn is not None and (alpn in H3_ALPNS or alpn.startswith("h3-"))


def _stream_kind_of(stream_id: int) -> StreamKind:
    """RFC 9000 §2.1: bit 0 = initiator (server), bit 1 = unidirectional."""
    if stream_id & 0x2:
        return StreamKind.PENDING
    return StreamKind.REQUEST if stream_id & 0x1 == 0 else StreamKind.UNKNOWN


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class H3StreamType:
    """The stream-type prefix of a unidirectional stream (RFC 9114 §6.2), at offset 0.

    ``length`` covers the type varint and, for a push stream, the Push ID varint (§6.2.2).
    """

    stream_id: int
    direction: Direction
    offset: int
    length: int
    stream_type: int
    type_name: str
    kind: StreamKind
    push_id: int | None = None
    frame: int | None = None
    ts_ns: int | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class H3Frame:
    """One HTTP/3 frame (RFC 9114 §7.1) with its type's fields.

    ``offset`` is the Type varint's stream offset, ``header_length`` the octets of the Type
    and Length varints, ``length`` the Length field (payload octets).  ``missing`` counts
    payload octets lost in a capture hole (then type fields are ``None``); ``problem`` names
    the first violation (an :class:`H3Error` carries the detail).  ``frame``/``ts_ns`` are
    the capture frame whose bytes completed this frame.

    Per type (``None`` elsewhere): DATA — ``data`` (when bodies are kept); HEADERS and
    PUSH_PROMISE — ``field_section`` (the QPACK-encoded section, §4.5 of RFC 9204);
    CANCEL_PUSH, PUSH_PROMISE, MAX_PUSH_ID — ``push_id``; GOAWAY — ``goaway_id`` (a stream
    id from the server, a push id from the client, §5.2); SETTINGS — ``settings``
    ((identifier, value) pairs in wire order).
    """

    stream_id: int
    direction: Direction
    offset: int
    header_length: int
    length: int
    type: int
    type_name: str
    missing: int = 0
    problem: str | None = None
    frame: int | None = None
    ts_ns: int | None = None
    data: bytes | None = field(default=None, repr=False)
    field_section: bytes | None = field(default=None, repr=False)
    push_id: int | None = None
    goaway_id: int | None = None
    settings: tuple[tuple[int, int], ...] | None = None

    @property
    def payload_offset(self) -> int:
        return self.offset + self.header_length

    @property
    def end(self) -> int:
        return self.offset + self.header_length + self.length

    @property
    def wire_length(self) -> int:
        return self.header_length + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class H3Error:
    """A violation of RFC 9114 / RFC 9204, or something the dissector could not interpret.

    ``name`` is stable snake_case (an ``anomalies`` row): ``h3_frame_unexpected``,
    ``h3_missing_settings``, ``h3_settings_error``, ``h3_frame_error``,
    ``h3_stream_creation_error``, ``h3_closed_critical_stream``, ``h3_id_error``,
    ``frame_too_large``, ``frame_truncated``, ``lost_boundary``, ``unknown_stream_type``,
    ``qpack_decompression_failed``, ``qpack_encoder_stream_error``,
    ``qpack_decoder_stream_error``, ``qpack_state_lost``, ``qpack_blocked_at_end``,
    ``reorder_buffer_full``.  ``offset`` is a stream offset of ``stream_id``/``direction``.
    """

    stream_id: int | None
    direction: Direction
    offset: int
    name: str
    detail: str
    frame: int | None = None
    ts_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderBlock(HeaderFields):
    """A decoded field section (RFC 9114 §4.2; RFC 9204 §4.5) from HEADERS or PUSH_PROMISE.

    Shaped like :class:`dissectors.http2.HeaderBlock`.  ``offset``/``end`` are those of the
    frame carrying it; ``kind`` is ``"request"``, ``"response"``, ``"informational"`` (1xx),
    ``"trailers"``, ``"push_promise"`` or ``"unknown"``.  ``headers`` are (name, value)
    pairs as text, or ``None`` when ``error`` says why they are unknown.  QPACK:
    ``required_insert_count`` (§4.5.1.1), ``blocked`` (the section waited for encoder-stream
    inserts, §2.1.2; see :class:`QpackBlocked`).  ``frame``/``ts_ns``: when it was decoded
    (for a blocked section, when it got unblocked).
    """

    direction: Direction
    offset: int
    end: int
    stream_id: int
    frame_type: int
    kind: str
    fragment_length: int
    headers: tuple[tuple[str, str], ...] | None
    push_id: int | None = None
    error: str | None = None
    required_insert_count: int | None = None
    blocked: bool = False
    frame: int | None = None
    ts_ns: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class QpackBlocked:
    """A field section that could not be decoded on arrival (RFC 9204 §2.1.2).

    ``direction`` is the sender of the section (and of the encoder stream it waited for);
    ``offset`` is the HEADERS/PUSH_PROMISE frame's offset on ``stream_id``.
    ``required_insert_count`` is what it needed, ``inserts_at_block`` what had arrived.
    ``unblocked_encoder_offset`` is the end offset, on the encoder stream
    (``encoder_stream_id``), of the instruction whose arrival unblocked it, with that
    capture frame and time; all ``None`` if the capture ended first.
    """

    direction: Direction
    stream_id: int
    offset: int
    frame_type: int
    required_insert_count: int | None
    inserts_at_block: int
    blocked_frame: int | None
    blocked_ts_ns: int | None
    encoder_stream_id: int | None = None
    unblocked_encoder_offset: int | None = None
    unblocked_frame: int | None = None
    unblocked_ts_ns: int | None = None

    @property
    def blocked_ns(self) -> int | None:
        """How long the section waited at this vantage point."""
        if self.unblocked_ts_ns is None or self.blocked_ts_ns is None:
            return None
        return self.unblocked_ts_ns - self.blocked_ts_ns


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyChunk:
    """The data of one DATA frame: ``length`` octets at stream ``offset`` (the payload).
    ``data`` is ``None`` when bodies are not kept or octets were missing."""

    offset: int
    length: int
    frame_offset: int
    data: bytes | None
    missing: int = 0
    frame: int | None = None
    ts_ns: int | None = None

    @property
    def end(self) -> int:
        return self.offset + self.length


H3Event = H3StreamType | H3Frame | QpackInstruction | H3Error | HeaderBlock | QpackBlocked


def _dir_pair() -> dict[Direction, int]:
    return {C2S: 0, S2C: 0}


@dataclass(slots=True, kw_only=True)
class H3Stream(HttpExchange):
    """One request stream (or server push) and its exchange (RFC 9114 §4.1, §4.6).

    Attribute-compatible with :class:`dissectors.http2.H2Stream`: ``request_headers``,
    ``response_headers`` (final, non-1xx), ``informational``, ``request_trailers``,
    ``response_trailers``, ``header_blocks``, ``headers_unknown``, ``body_chunks`` /
    ``body_bytes`` / ``body_missing`` / ``data_frames`` per direction, and
    ``end_stream_offset[direction]`` — the stream's final size when the FIN arrived
    (RFC 9114 §4.1: the end of a message is the end of the stream).  ``push_id`` is set
    for a pushed response (its ``request_headers`` come from PUSH_PROMISE).
    ``blocked`` lists this stream's QPACK-blocked sections.
    """

    stream_id: int
    push_id: int | None = None
    request_headers: HeaderBlock | None = None
    response_headers: HeaderBlock | None = None
    informational: list[HeaderBlock] = field(default_factory=list)
    request_trailers: HeaderBlock | None = None
    response_trailers: HeaderBlock | None = None
    header_blocks: list[HeaderBlock] = field(default_factory=list)
    headers_unknown: bool = False
    body_chunks: dict[Direction, list[BodyChunk]] = field(
        default_factory=lambda: {C2S: [], S2C: []}
    )
    body_bytes: dict[Direction, int] = field(default_factory=_dir_pair)
    body_missing: dict[Direction, int] = field(default_factory=_dir_pair)
    data_frames: dict[Direction, int] = field(default_factory=_dir_pair)
    end_stream_offset: dict[Direction, int | None] = field(
        default_factory=lambda: {C2S: None, S2C: None}
    )
    first_offset: dict[Direction, int | None] = field(
        default_factory=lambda: {C2S: None, S2C: None}
    )
    blocked: list[QpackBlocked] = field(default_factory=list)


# ---------------------------------------------------------------------------------------
# One-shot frame parsing
# ---------------------------------------------------------------------------------------
def _frame_header(buf: Buffer, offset: int) -> tuple[int, int, int]:
    """(type, length, header_length) of the frame at ``buf[offset:]`` (§7.1)."""
    cur = Cursor(buf, offset)
    ftype = cur.pull_varint()
    length = cur.pull_varint()
    return ftype, length, cur.pos - offset


def _interpret(ftype: int, payload: bytes) -> tuple[dict[str, object], str | None]:
    """Decode a payload per §7.2; (fields, problem detail or None).  H3_FRAME_ERROR on
    "a frame that fails to satisfy layout requirements or with an invalid size" (§7.1)."""
    fields: dict[str, object] = {}
    cur = Cursor(payload)
    try:
        if ftype == FrameType.HEADERS:
            fields["field_section"] = cur.rest()
        elif ftype == FrameType.PUSH_PROMISE:
            fields["push_id"] = cur.pull_varint()
            fields["field_section"] = cur.rest()
        elif ftype in (FrameType.CANCEL_PUSH, FrameType.MAX_PUSH_ID):
            fields["push_id"] = cur.pull_varint()
        elif ftype == FrameType.GOAWAY:
            fields["goaway_id"] = cur.pull_varint()
        elif ftype == FrameType.SETTINGS:
            pairs: list[tuple[int, int]] = []
            while not cur.eof():
                ident = cur.pull_varint()
                pairs.append((ident, cur.pull_varint()))
            fields["settings"] = tuple(pairs)
        else:
            return fields, None
    except DissectError as e:
        return fields, f"{frame_type_name(ftype)} payload cut short: {e}"
    if not cur.eof():
        return fields, f"{cur.remaining} octets left after the {frame_type_name(ftype)} fields"
    return fields, None


_BUFFERED: Final = frozenset(
    {
        FrameType.HEADERS,
        FrameType.CANCEL_PUSH,
        FrameType.SETTINGS,
        FrameType.PUSH_PROMISE,
        FrameType.GOAWAY,
        FrameType.MAX_PUSH_ID,
    }
)


def parse_frame(
    buf: Buffer, offset: int = 0, *, stream_id: int = 0, direction: Direction = C2S
) -> tuple[H3Frame, int]:
    """Parse the frame at ``buf[offset:]`` (RFC 9114 §7.1); return it and the next offset.

    Raises :class:`Truncated` when ``buf`` ends inside the frame and :class:`Malformed` when
    a known type's payload does not match its layout (§7.1 H3_FRAME_ERROR).  Unknown and
    reserved types are returned undecoded (§9: "Implementations MUST ignore unknown or
    unsupported values in all extensible protocol elements").
    """
    ftype, length, hlen = _frame_header(buf, offset)
    start = offset + hlen
    if start + length > len(buf):
        raise Truncated(f"frame needs {length} payload octets", offset=start)
    payload = bytes(buf[start : start + length])
    fields, problem = _interpret(ftype, payload) if ftype in _BUFFERED else ({}, None)
    if problem is not None:
        raise Malformed(problem, offset=offset)
    return (
        H3Frame(
            stream_id=stream_id,
            direction=direction,
            offset=offset,
            header_length=hlen,
            length=length,
            type=ftype,
            type_name=frame_type_name(ftype),
            data=payload if ftype == FrameType.DATA else None,
            **fields,  # type: ignore[arg-type]
        ),
        start + length,
    )


# ---------------------------------------------------------------------------------------
# The per-stream streaming parser
# ---------------------------------------------------------------------------------------
_TYPE, _PUSH_ID, _HEADER, _BUFFER, _STREAM, _INSTR, _SKIP = range(7)


@dataclass(slots=True)
class _Open:
    """The frame whose payload is being received."""

    offset: int
    header_length: int
    type: int
    length: int
    remaining: int
    keep: bool
    oversized: bool = False
    missing: int = 0
    parts: list[bytes] = field(default_factory=list)


class H3StreamParser:
    """Streaming parser of one direction of one QUIC stream carrying HTTP/3.

    ``feed(data, offset)`` takes the next bytes (``offset`` = QUIC stream offset of
    ``data[0]``; ``None`` = right after the previous bytes; overlapping bytes are ignored;
    an offset beyond is a hole) and returns the records completed: :class:`H3StreamType`
    (unidirectional streams), :class:`H3Frame`, :class:`QpackInstruction` (QPACK streams)
    and :class:`H3Error`.  Records depend only on the bytes, not on how they are chunked.
    ``close(fin=True)`` when the stream ended cleanly at the bytes seen; ``fin=False`` when
    the capture ended.

    The stream's kind comes from its id (RFC 9000 §2.1) and, for unidirectional streams,
    from the type varint.  Frames not allowed where they appear are still returned, with
    ``problem`` set (§7.2 per-type rules; §6.2.1 first frame of a control stream; §4.1
    frame order on a request stream).  A hole inside a DATA or skipped payload keeps the
    framing (``missing`` counted); a hole elsewhere loses the frame boundaries
    (``lost_boundary``) and the rest of the stream is only counted.
    """

    def __init__(
        self,
        stream_id: int,
        direction: str,
        *,
        keep_bodies: bool = True,
        max_frame_payload: int = MAX_FRAME_PAYLOAD,
    ) -> None:
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        self.stream_id = stream_id
        self.direction: Direction = C2S if direction == C2S else S2C
        self.keep_bodies = keep_bodies
        self.max_frame_payload = max_frame_payload
        self.kind = _stream_kind_of(stream_id)
        self.stream_type: int | None = None
        self.push_id: int | None = None
        self._mode = _TYPE if self.kind is StreamKind.PENDING else _HEADER
        self._buf = bytearray()
        self._pos = 0  # stream offset of _buf[0]
        self._open: _Open | None = None
        self._frames = 0
        self._settings_seen = False
        self._headers_seen = 0
        self._closed = False
        #: octets skipped without parsing (unknown stream types, after a lost boundary)
        self.skipped_bytes = 0
        self.lost = False
        self._stamp: tuple[int | None, int | None] = (None, None)
        if self.kind is StreamKind.UNKNOWN:
            self._mode = _SKIP

    # -- public ---------------------------------------------------------------------
    @property
    def consumed(self) -> int:
        """Stream offset up to which bytes were received (parsed or held)."""
        return self._pos + len(self._buf)

    @property
    def frames_seen(self) -> int:
        return self._frames

    def feed(
        self,
        data: Buffer,
        offset: int | None = None,
        *,
        frame: int | None = None,
        ts_ns: int | None = None,
    ) -> list[H3Event]:
        """Feed the next bytes; return the records they completed (see the class doc)."""
        out: list[H3Event] = []
        if self._closed:
            return out
        self._stamp = (frame, ts_ns)
        data = bytes(data)
        expected = self.consumed
        if offset is None:
            offset = expected
        if offset < expected:
            cut = expected - offset
            if cut >= len(data):
                return out
            data = data[cut:]
            offset = expected
        if offset > expected:
            self._gap(offset - expected, out)
        if data:
            self._buf += data
            self._parse(out)
        return out

    def feed_gap(self, length: int) -> list[H3Event]:
        """``length`` octets at the current offset were never captured."""
        out: list[H3Event] = []
        if not self._closed and length > 0:
            self._gap(length, out)
        return out

    def close(self, *, fin: bool = False) -> list[H3Event]:
        """End of the stream (``fin``) or of the capture: report what was cut short.

        RFC 9114 §7.1: "When a stream terminates cleanly, if the last frame on the stream
        was truncated, this MUST be treated as a connection error of type H3_FRAME_ERROR."
        """
        out: list[H3Event] = []
        if self._closed:
            return out
        self._closed = True
        how = "the stream ended (FIN)" if fin else "the capture ended"
        op = self._open
        if op is not None and self._mode in (_BUFFER, _STREAM):
            got = self.consumed - (op.offset + op.header_length)
            self._error(
                out,
                op.offset,
                "frame_truncated",
                f"{how} {got} of {op.length} payload octets into a "
                f"{frame_type_name(op.type)} frame",
            )
            if self._mode == _STREAM:  # report what arrived of a streamed payload
                op.missing += op.remaining
                op.remaining = 0
                self._emit_open(out, "frame_truncated")
            self._open = None
        elif self._buf and self._mode in (_TYPE, _PUSH_ID, _HEADER, _INSTR):
            what = {
                _TYPE: "stream type",
                _PUSH_ID: "push ID",
                _HEADER: "frame header",
                _INSTR: "QPACK instruction",
            }[self._mode]
            self._error(out, self._pos, "frame_truncated", f"{how} inside a {what}")
        self._buf = bytearray()
        return out

    # -- internals ------------------------------------------------------------------
    def _error(self, out: list[H3Event], offset: int, name: str, detail: str) -> None:
        out.append(
            H3Error(
                stream_id=self.stream_id,
                direction=self.direction,
                offset=offset,
                name=name,
                detail=detail,
                frame=self._stamp[0],
                ts_ns=self._stamp[1],
            )
        )

    def _consume(self, n: int) -> bytes:
        chunk = bytes(self._buf[:n])
        del self._buf[:n]
        self._pos += n
        return chunk

    def _lose(self, out: list[H3Event], offset: int, detail: str) -> None:
        self._error(out, offset, "lost_boundary", detail)
        self.lost = True
        self._open = None
        self._mode = _SKIP

    def _gap(self, n: int, out: list[H3Event]) -> None:
        op = self._open
        if self._mode == _SKIP:
            self._pos += n
            self.skipped_bytes += n
            return
        if self._mode == _STREAM and op is not None and not self._buf and n <= op.remaining:
            op.missing += n
            op.remaining -= n
            self._pos += n
            if op.remaining == 0:
                self._emit_open(out, None)
                self._open = None
                self._mode = _HEADER
            return
        at = self.consumed
        self._buf = bytearray()
        self._pos = at + n
        self.skipped_bytes += n
        self._lose(out, at, f"{n} octets missing at offset {at}: frame boundaries lost")

    def _parse(self, out: list[H3Event]) -> None:
        while self._buf:
            mode = self._mode
            if mode == _SKIP:
                self.skipped_bytes += len(self._buf)
                self._pos += len(self._buf)
                self._buf = bytearray()
                return
            if mode == _TYPE:
                if not self._stream_type(out):
                    return
            elif mode == _PUSH_ID:
                if not self._push_id(out):
                    return
            elif mode == _HEADER:
                if not self._header(out):
                    return
            elif mode == _BUFFER:
                if not self._buffered(out):
                    return
            elif mode == _STREAM:
                self._streamed(out)
            else:  # _INSTR
                if not self._instruction(out):
                    return
        # a zero-length payload completes without further bytes
        if self._mode in (_BUFFER, _STREAM) and self._open is not None:
            if self._open.remaining == 0:
                if self._mode == _BUFFER:
                    self._buffered(out)
                else:
                    self._streamed(out)

    def _varint(self) -> tuple[int, int] | None:
        try:
            cur = Cursor(bytes(self._buf[:8]))
            return cur.pull_varint(), cur.pos
        except Truncated:
            return None

    def _stream_type(self, out: list[H3Event]) -> bool:
        got = self._varint()
        if got is None:
            return False
        st, n = got
        self.stream_type = st
        if st in _KIND_OF_TYPE:
            self.kind = _KIND_OF_TYPE[StreamType(st)]
        else:
            self.kind = StreamKind.RESERVED if is_reserved(st) else StreamKind.UNKNOWN
        if self.kind is StreamKind.PUSH:
            self._mode = _PUSH_ID
            return True  # the type octets stay in _buf until the push ID is complete
        self._consume(n)
        out.append(self._type_record(n))
        if self.kind in (StreamKind.QPACK_ENCODER, StreamKind.QPACK_DECODER):
            self._mode = _INSTR
        elif self.kind is StreamKind.CONTROL:
            self._mode = _HEADER
        else:
            # §6.2: "Recipients of unknown stream types MUST either abort reading of the
            # stream or discard incoming data without further processing."
            if self.kind is StreamKind.UNKNOWN:
                self._error(out, 0, "unknown_stream_type", f"stream type 0x{st:x}: bytes skipped")
            self._mode = _SKIP
        return True

    def _type_record(self, n: int) -> H3StreamType:
        assert self.stream_type is not None
        return H3StreamType(
            stream_id=self.stream_id,
            direction=self.direction,
            offset=0,
            length=n,
            stream_type=self.stream_type,
            type_name=stream_type_name(self.stream_type),
            kind=self.kind,
            push_id=self.push_id,
            frame=self._stamp[0],
            ts_ns=self._stamp[1],
        )

    def _push_id(self, out: list[H3Event]) -> bool:
        try:
            cur = Cursor(bytes(self._buf[:16]))
            cur.pull_varint()
            self.push_id = cur.pull_varint()
        except Truncated:
            return False
        n = cur.pos
        self._consume(n)
        out.append(self._type_record(n))
        if self.direction == C2S:
            # §6.2.2: "Only servers can push; if a server receives a client-initiated push
            # stream, this MUST be treated as a connection error of type
            # H3_STREAM_CREATION_ERROR."
            self._error(out, 0, "h3_stream_creation_error", "client-initiated push stream")
        self._mode = _HEADER
        return True

    def _header(self, out: list[H3Event]) -> bool:
        try:
            ftype, length, hlen = _frame_header(bytes(self._buf[:16]), 0)
        except Truncated:
            return False
        offset = self._pos
        self._consume(hlen)
        buffered = ftype in _BUFFERED
        oversized = buffered and length > self.max_frame_payload
        op = _Open(
            offset=offset,
            header_length=hlen,
            type=ftype,
            length=length,
            remaining=length,
            keep=(ftype == FrameType.DATA and self.keep_bodies),
            oversized=oversized,
        )
        self._open = op
        if oversized:
            self._error(
                out,
                offset,
                "frame_too_large",
                f"{frame_type_name(ftype)} payload of {length} octets > cap "
                f"{self.max_frame_payload}: skipped",
            )
        self._mode = _BUFFER if buffered and not oversized else _STREAM
        return True

    def _buffered(self, out: list[H3Event]) -> bool:
        op = self._open
        assert op is not None
        if len(self._buf) < op.remaining:
            return False
        payload = self._consume(op.remaining)
        op.remaining = 0
        fields, problem = _interpret(op.type, payload)
        name = None
        if problem is not None:
            name = "h3_frame_error"
            self._error(out, op.offset, name, problem)
        name = self._check(out, op, fields) or name
        self._frames += 1
        out.append(
            H3Frame(
                stream_id=self.stream_id,
                direction=self.direction,
                offset=op.offset,
                header_length=op.header_length,
                length=op.length,
                type=op.type,
                type_name=frame_type_name(op.type),
                problem=name,
                frame=self._stamp[0],
                ts_ns=self._stamp[1],
                **fields,  # type: ignore[arg-type]
            )
        )
        self._open = None
        self._mode = _HEADER
        return True

    def _streamed(self, out: list[H3Event]) -> None:
        op = self._open
        assert op is not None
        take = min(len(self._buf), op.remaining)
        if take:
            chunk = self._consume(take)
            if op.keep:
                op.parts.append(chunk)
            op.remaining -= take
        if op.remaining == 0:
            self._emit_open(out, None)
            self._open = None
            self._mode = _HEADER

    def _emit_open(self, out: list[H3Event], problem: str | None) -> None:
        op = self._open
        assert op is not None
        problem = self._check(out, op, {}) or problem
        if op.oversized:
            problem = problem or "frame_too_large"
        self._frames += 1
        data = b"".join(op.parts) if op.keep and not op.missing else None
        out.append(
            H3Frame(
                stream_id=self.stream_id,
                direction=self.direction,
                offset=op.offset,
                header_length=op.header_length,
                length=op.length,
                type=op.type,
                type_name=frame_type_name(op.type),
                missing=op.missing,
                problem=problem,
                frame=self._stamp[0],
                ts_ns=self._stamp[1],
                data=data,
            )
        )

    def _check(self, out: list[H3Event], op: _Open, fields: dict[str, object]) -> str | None:
        """Per-stream frame rules (RFC 9114 §6.2.1, §7.2, §4.1); the problem name or None."""
        t = op.type
        kind = self.kind
        first = self._frames == 0

        def bad(name: str, detail: str) -> str:
            self._error(out, op.offset, name, detail)
            return name

        tname = frame_type_name(t)
        if t in H2_ONLY_FRAME_TYPES:
            # §7.2.8: "Receipt of any of these frames MUST be treated as a connection error
            # of type H3_FRAME_UNEXPECTED."
            return bad("h3_frame_unexpected", f"HTTP/2-only frame type {tname}")
        if kind is StreamKind.CONTROL:
            if first and t != FrameType.SETTINGS:
                # §6.2.1: "If the first frame of the control stream is any other frame
                # type, this MUST be treated as a connection error of type
                # H3_MISSING_SETTINGS."
                return bad("h3_missing_settings", f"control stream starts with {tname}")
            if t == FrameType.SETTINGS:
                if self._settings_seen:
                    # §7.2.4: "If an endpoint receives a second SETTINGS frame on the
                    # control stream, the endpoint MUST respond with a connection error of
                    # type H3_FRAME_UNEXPECTED."
                    return bad("h3_frame_unexpected", "second SETTINGS frame")
                self._settings_seen = True
                return self._check_settings(out, op, fields)
            if t in (FrameType.DATA, FrameType.HEADERS, FrameType.PUSH_PROMISE):
                return bad("h3_frame_unexpected", f"{tname} on the control stream")
            if t == FrameType.MAX_PUSH_ID and self.direction == S2C:
                # §7.2.7: "A server MUST NOT send a MAX_PUSH_ID frame."
                return bad("h3_frame_unexpected", "MAX_PUSH_ID sent by the server")
            return None
        if kind in (StreamKind.REQUEST, StreamKind.PUSH):
            if t in (
                FrameType.CANCEL_PUSH,
                FrameType.SETTINGS,
                FrameType.GOAWAY,
                FrameType.MAX_PUSH_ID,
            ):
                # §7.2.3/§7.2.4/§7.2.6/§7.2.7: only on the control stream
                return bad("h3_frame_unexpected", f"{tname} on a {kind.value} stream")
            if t == FrameType.PUSH_PROMISE and (self.direction == C2S or kind is StreamKind.PUSH):
                # §7.2.5: "A client MUST NOT send a PUSH_PROMISE frame."
                return bad("h3_frame_unexpected", "PUSH_PROMISE not on a server request stream")
            if t == FrameType.HEADERS:
                self._headers_seen += 1
            elif t == FrameType.DATA and not self._headers_seen:
                # §4.1: "Receipt of an invalid sequence of frames MUST be treated as a
                # connection error of type H3_FRAME_UNEXPECTED" (DATA before HEADERS).
                return bad("h3_frame_unexpected", "DATA before any HEADERS")
        return None

    def _check_settings(
        self, out: list[H3Event], op: _Open, fields: dict[str, object]
    ) -> str | None:
        pairs = fields.get("settings")
        if not isinstance(pairs, tuple):
            return None
        seen: set[int] = set()
        for ident, value in pairs:
            if ident in H2_ONLY_SETTINGS:
                self._error(out, op.offset, "h3_settings_error", f"HTTP/2-only setting 0x{ident:x}")
                return "h3_settings_error"
            if ident in seen:
                # §7.2.4: "The same setting identifier MUST NOT occur more than once in the
                # SETTINGS frame."
                self._error(out, op.offset, "h3_settings_error", f"setting 0x{ident:x} twice")
                return "h3_settings_error"
            seen.add(ident)
            if ident in (SettingsParameter.ENABLE_CONNECT_PROTOCOL, SettingsParameter.H3_DATAGRAM):
                if value > 1:
                    # RFC 9220 §3 / RFC 9297 §2.1.1: the value MUST be 0 or 1.
                    self._error(
                        out,
                        op.offset,
                        "h3_settings_error",
                        f"{settings_name(ident)} = {value} (must be 0 or 1)",
                    )
                    return "h3_settings_error"
        return None

    def _instruction(self, out: list[H3Event]) -> bool:
        parse = (
            parse_encoder_instruction
            if self.kind is StreamKind.QPACK_ENCODER
            else parse_decoder_instruction
        )
        try:
            fields, n = parse(self._buf, 0)
        except Truncated:
            if len(self._buf) > MAX_INSTRUCTION_LENGTH:
                self._lose(
                    out, self._pos, f"QPACK instruction longer than {MAX_INSTRUCTION_LENGTH}"
                )
            return False
        except DissectError as e:
            name = (
                "qpack_encoder_stream_error"
                if self.kind is StreamKind.QPACK_ENCODER
                else "qpack_decoder_stream_error"
            )
            self._error(out, self._pos, name, str(e))
            self.lost = True
            self._mode = _SKIP
            return True
        offset = self._pos
        raw = self._consume(n)
        out.append(
            QpackInstruction(
                stream_id=self.stream_id,
                direction=self.direction,
                offset=offset,
                length=n,
                raw=raw,
                frame=self._stamp[0],
                ts_ns=self._stamp[1],
                **fields,  # type: ignore[arg-type]
            )
        )
        return True


# ---------------------------------------------------------------------------------------
# The connection
# ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class _StreamIn:
    """Delivery state of one stream direction: in-order release of arrival-order chunks."""

    parser: H3StreamParser
    next: int = 0
    pending: dict[int, tuple[bytes, int | None, int | None]] = field(default_factory=dict)
    pending_bytes: int = 0
    final_size: int | None = None
    closed: bool = False


@dataclass(slots=True)
class _Section:
    """A field section waiting for decoding (blocked, or queued behind a blocked one)."""

    frame: H3Frame
    blocked_at: QpackBlocked | None = None


class H3Connection:
    """HTTP/3 over every stream of one QUIC connection, fed in arrival order.

    ``feed(stream_id, direction, data, offset, fin=..., frame=..., ts_ns=...)`` takes one
    chunk of stream data as it arrived (typically one QUIC STREAM frame); chunks of a
    stream are delivered to its :class:`H3StreamParser` in offset order, as a receiving
    application reads them.  Arrival order *across* streams is the caller's order: QPACK
    encoder instructions are applied when they are delivered, so a field section delivered
    before the inserts it references is blocked (RFC 9204 §2.1.2) and a
    :class:`QpackBlocked` row says until which encoder instruction.

    The QPACK decoder of each direction uses the settings the *receiving* endpoint sent on
    its control stream (SETTINGS_QPACK_MAX_TABLE_CAPACITY, SETTINGS_QPACK_BLOCKED_STREAMS;
    RFC 9204 §5).  ``max_table_capacity`` / ``blocked_streams`` are used when that SETTINGS
    frame was not captured by the time the decoder is needed (default: the RFC defaults, 0).

    Results accumulate in :attr:`streams` (request stream id → :class:`H3Stream`),
    :attr:`pushes` (push id → :class:`H3Stream`), :attr:`settings` (per sender direction),
    :attr:`goaways`, :attr:`blocked`, :attr:`errors`, :attr:`frames`, :attr:`instructions`
    and :attr:`stream_types`.
    """

    def __init__(
        self,
        *,
        keep_bodies: bool = True,
        max_table_capacity: int = DEFAULT_MAX_TABLE_CAPACITY,
        blocked_streams: int = DEFAULT_BLOCKED_STREAMS,
        max_frame_payload: int = MAX_FRAME_PAYLOAD,
    ) -> None:
        self.keep_bodies = keep_bodies
        self.max_frame_payload = max_frame_payload
        self._fallback = (max_table_capacity, blocked_streams)
        self._in: dict[tuple[int, Direction], _StreamIn] = {}
        self._decoders: dict[Direction, QpackDecoder] = {}
        self._pinned: dict[Direction, bool] = {C2S: False, S2C: False}
        self._qpack_lost: dict[Direction, str | None] = {C2S: None, S2C: None}
        self._queues: dict[tuple[int, Direction], list[_Section]] = {}
        self._encoder_stream: dict[Direction, int | None] = {C2S: None, S2C: None}
        self._critical: dict[tuple[Direction, StreamKind], int] = {}
        self._closed = False

        self.streams: dict[int, H3Stream] = {}
        self.pushes: dict[int, H3Stream] = {}
        #: SETTINGS each endpoint sent (keyed by sender direction), identifier → value.
        self.settings: dict[Direction, dict[int, int]] = {C2S: {}, S2C: {}}
        self.goaways: list[H3Frame] = []
        self.blocked: list[QpackBlocked] = []
        self.errors: list[H3Error] = []
        self.frames: list[H3Frame] = []
        self.instructions: list[QpackInstruction] = []
        self.stream_types: dict[tuple[int, Direction], H3StreamType] = {}

    # -- public -------------------------------------------------------------------------
    def stream_kind(self, stream_id: int, direction: str) -> StreamKind:
        """What ``stream_id`` carries in ``direction`` (as far as seen)."""
        st = self._in.get((stream_id, C2S if direction == C2S else S2C))
        return st.parser.kind if st is not None else _stream_kind_of(stream_id)

    def feed(
        self,
        stream_id: int,
        direction: str,
        data: Buffer,
        offset: int,
        *,
        fin: bool = False,
        frame: int | None = None,
        ts_ns: int | None = None,
    ) -> list[H3Event]:
        """One arrival of stream data (``fin``: the chunk ends the stream, RFC 9000 §4.5)."""
        if direction not in _DIRECTIONS:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        d: Direction = C2S if direction == C2S else S2C
        out: list[H3Event] = []
        if self._closed:
            return out
        st = self._stream_in(stream_id, d)
        data = bytes(data)
        if fin and st.final_size is None:
            st.final_size = offset + len(data)
        if st.closed:
            return out
        end = offset + len(data)
        if end > st.next and data:
            if offset <= st.next:
                self._deliver(st, data[st.next - offset :], st.next, frame, ts_ns, out)
                self._release(st, frame, ts_ns, out)
            elif offset not in st.pending or len(st.pending[offset][0]) < len(data):
                if st.pending_bytes + len(data) > MAX_REORDER_BYTES:
                    self._record(
                        out,
                        H3Error(
                            stream_id=stream_id, direction=d, offset=offset,
                            name="reorder_buffer_full",
                            detail=f"more than {MAX_REORDER_BYTES} octets wait for a hole",
                            frame=frame, ts_ns=ts_ns,
                        ),
                    )  # fmt: skip
                else:
                    old = st.pending.get(offset)
                    st.pending_bytes += len(data) - (len(old[0]) if old else 0)
                    st.pending[offset] = (data, frame, ts_ns)
        self._maybe_end(st, frame, ts_ns, out)
        return out

    def close(self) -> list[H3Event]:
        """End of the capture: deliver what waits behind holes, report what was cut short."""
        out: list[H3Event] = []
        if self._closed:
            return out
        for st in list(self._in.values()):
            if st.closed:
                continue
            while st.pending:
                off = min(st.pending)
                data, frame, ts_ns = st.pending.pop(off)
                st.pending_bytes -= len(data)
                if off + len(data) <= st.next:
                    continue
                if off > st.next:
                    self._handle(st, st.parser.feed_gap(off - st.next), out)
                    st.next = off
                self._deliver(st, data[st.next - off :], st.next, frame, ts_ns, out)
            fin = st.final_size is not None and st.next >= st.final_size
            st.closed = True
            self._handle(st, st.parser.close(fin=fin), out)
            if fin:
                self._on_fin(st, None, None, out)
        self._closed = True
        for (sid, d), queue in list(self._queues.items()):
            for sec in queue:
                fr = sec.frame
                if sec.blocked_at is not None:
                    self._record(out, sec.blocked_at)
                    dec = self._decoders.get(d)
                    if dec is not None:
                        dec.cancel(sid)
                self._record(
                    out,
                    H3Error(
                        stream_id=sid, direction=d, offset=fr.offset,
                        name="qpack_blocked_at_end",
                        detail="field section still blocked when the capture ended",
                    ),
                )  # fmt: skip
                self._attach(d, fr, None, "qpack_blocked_at_end", None, sec.blocked_at, out)
            queue.clear()
        self._queues.clear()
        return out

    # -- delivery -------------------------------------------------------------------------
    def _stream_in(self, stream_id: int, d: Direction) -> _StreamIn:
        key = (stream_id, d)
        st = self._in.get(key)
        if st is None:
            st = self._in[key] = _StreamIn(
                H3StreamParser(
                    stream_id,
                    d,
                    keep_bodies=self.keep_bodies,
                    max_frame_payload=self.max_frame_payload,
                )
            )
            if stream_id & 0x3 == 0x1:
                self._record(
                    [],
                    H3Error(
                        stream_id=stream_id, direction=d, offset=0,
                        name="h3_stream_creation_error",
                        detail="server-initiated bidirectional stream (RFC 9114 §6.1): skipped",
                    ),
                )  # fmt: skip
        return st

    def _deliver(
        self,
        st: _StreamIn,
        data: bytes,
        offset: int,
        frame: int | None,
        ts_ns: int | None,
        out: list[H3Event],
    ) -> None:
        if not data:
            return
        st.next = offset + len(data)
        self._handle(st, st.parser.feed(data, offset, frame=frame, ts_ns=ts_ns), out)

    def _release(
        self, st: _StreamIn, frame: int | None, ts_ns: int | None, out: list[H3Event]
    ) -> None:
        """Deliver held chunks that became contiguous; stamped with the arrival that
        completed them (the application could read them only then)."""
        while st.pending:
            ready = [o for o in st.pending if o <= st.next]
            if not ready:
                return
            for o in sorted(ready):
                data, _, _ = st.pending.pop(o)
                st.pending_bytes -= len(data)
                if o + len(data) > st.next:
                    self._deliver(st, data[st.next - o :], st.next, frame, ts_ns, out)

    def _maybe_end(
        self, st: _StreamIn, frame: int | None, ts_ns: int | None, out: list[H3Event]
    ) -> None:
        if st.closed or st.final_size is None or st.next < st.final_size:
            return
        st.closed = True
        self._handle(st, st.parser.close(fin=True), out)
        self._on_fin(st, frame, ts_ns, out)

    def _on_fin(
        self, st: _StreamIn, frame: int | None, ts_ns: int | None, out: list[H3Event]
    ) -> None:
        p = st.parser
        if p.kind in (StreamKind.REQUEST, StreamKind.PUSH):
            ex = self._exchange(p)
            if ex is not None:
                ex.end_stream_offset[p.direction] = st.final_size
        elif p.kind in (StreamKind.CONTROL, StreamKind.QPACK_ENCODER, StreamKind.QPACK_DECODER):
            # RFC 9114 §6.2.1: "If either control stream is closed at any point, this MUST be
            # treated as a connection error of type H3_CLOSED_CRITICAL_STREAM."  RFC 9204
            # §4.2 says the same of the encoder and decoder streams.
            self._record(
                out,
                H3Error(
                    stream_id=p.stream_id, direction=p.direction, offset=st.final_size or 0,
                    name="h3_closed_critical_stream", detail=f"{p.kind.value} stream closed",
                    frame=frame, ts_ns=ts_ns,
                ),
            )  # fmt: skip

    # -- records ------------------------------------------------------------------------
    def _record(self, out: list[H3Event], ev: H3Event) -> None:
        if isinstance(ev, H3Error):
            self.errors.append(ev)
        elif isinstance(ev, QpackBlocked):
            self.blocked.append(ev)
            ex = (
                self.streams.get(ev.stream_id)
                if _stream_kind_of(ev.stream_id) is StreamKind.REQUEST
                else None
            )
            if ex is not None:
                ex.blocked.append(ev)
        out.append(ev)

    def _handle(self, st: _StreamIn, events: list[H3Event], out: list[H3Event]) -> None:
        p = st.parser
        for ev in events:
            self._record(out, ev)
            if isinstance(ev, H3StreamType):
                self._on_stream_type(ev, out)
            elif isinstance(ev, H3Frame):
                self.frames.append(ev)
                self._on_frame(p, ev, out)
            elif isinstance(ev, QpackInstruction):
                self.instructions.append(ev)
                if p.kind is StreamKind.QPACK_ENCODER:
                    self._on_encoder(ev, out)
            elif isinstance(ev, H3Error):
                if ev.name in ("lost_boundary", "qpack_encoder_stream_error") and (
                    p.kind is StreamKind.QPACK_ENCODER
                ):
                    self._lose_qpack(p.direction, ev.name, ev.offset, out)

    def _on_stream_type(self, ev: H3StreamType, out: list[H3Event]) -> None:
        self.stream_types[(ev.stream_id, ev.direction)] = ev
        if ev.kind in (StreamKind.CONTROL, StreamKind.QPACK_ENCODER, StreamKind.QPACK_DECODER):
            key = (ev.direction, ev.kind)
            if key in self._critical and self._critical[key] != ev.stream_id:
                # §6.2.1 / RFC 9204 §4.2: "receipt of a second stream claiming to be a
                # control stream MUST be treated as a connection error of type
                # H3_STREAM_CREATION_ERROR."
                self._record(
                    out,
                    H3Error(
                        stream_id=ev.stream_id, direction=ev.direction, offset=0,
                        name="h3_stream_creation_error",
                        detail=f"second {ev.kind.value} stream (first: {self._critical[key]})",
                        frame=ev.frame, ts_ns=ev.ts_ns,
                    ),
                )  # fmt: skip
            else:
                self._critical[key] = ev.stream_id
                if ev.kind is StreamKind.QPACK_ENCODER:
                    self._encoder_stream[ev.direction] = ev.stream_id
        elif ev.kind is StreamKind.PUSH and ev.push_id is not None:
            ex = self.pushes.setdefault(
                ev.push_id, H3Stream(stream_id=ev.stream_id, push_id=ev.push_id)
            )
            ex.stream_id = ev.stream_id

    def _exchange(self, p: H3StreamParser) -> H3Stream | None:
        if p.kind is StreamKind.REQUEST:
            ex = self.streams.get(p.stream_id)
            if ex is None:
                ex = self.streams[p.stream_id] = H3Stream(stream_id=p.stream_id)
            return ex
        if p.kind is StreamKind.PUSH and p.push_id is not None:
            return self.pushes.setdefault(
                p.push_id, H3Stream(stream_id=p.stream_id, push_id=p.push_id)
            )
        return None

    def _on_frame(self, p: H3StreamParser, fr: H3Frame, out: list[H3Event]) -> None:
        d = p.direction
        if p.kind is StreamKind.CONTROL:
            if fr.type == FrameType.SETTINGS and fr.settings is not None and fr.problem is None:
                self.settings[d] = dict(fr.settings)
                self._settings_arrived(d)
            elif fr.type == FrameType.GOAWAY:
                self.goaways.append(fr)
            return
        ex = self._exchange(p)
        if ex is None:
            return
        if ex.first_offset[d] is None:
            ex.first_offset[d] = fr.offset
        if fr.type == FrameType.DATA:
            ex.data_frames[d] += 1
            ex.body_bytes[d] += fr.length - fr.missing
            ex.body_missing[d] += fr.missing
            ex.body_chunks[d].append(
                BodyChunk(
                    offset=fr.payload_offset,
                    length=fr.length,
                    frame_offset=fr.offset,
                    data=fr.data,
                    missing=fr.missing,
                    frame=fr.frame,
                    ts_ns=fr.ts_ns,
                )
            )
        elif fr.type in (FrameType.HEADERS, FrameType.PUSH_PROMISE) and fr.missing == 0:
            if fr.field_section is None:
                return  # malformed PUSH_PROMISE (already reported)
            self._section(p.stream_id, d, fr, out)

    # -- QPACK ----------------------------------------------------------------------------
    def _decoder(self, d: Direction, *, pin: bool) -> QpackDecoder:
        """The decoder for sections sent in ``d``, configured by the peer's SETTINGS."""
        dec = self._decoders.get(d)
        if dec is None:
            peer: Direction = S2C if d == C2S else C2S
            cap, blocked = self._fallback
            s = self.settings[peer]
            if s:
                cap = s.get(SettingsParameter.QPACK_MAX_TABLE_CAPACITY, DEFAULT_MAX_TABLE_CAPACITY)
                blocked = s.get(SettingsParameter.QPACK_BLOCKED_STREAMS, DEFAULT_BLOCKED_STREAMS)
            try:
                dec = QpackDecoder(cap, blocked)
            except DissectError:
                dec = QpackDecoder(*self._fallback)
            self._decoders[d] = dec
        if pin:
            self._pinned[d] = True
        return dec

    def _settings_arrived(self, sender: Direction) -> None:
        """The receiver's SETTINGS configure the decoder of the other direction, unless that
        decoder already holds dynamic state (then it is too late to change it)."""
        d: Direction = S2C if sender == C2S else C2S
        if not self._pinned[d]:
            self._decoders.pop(d, None)

    def _lose_qpack(self, d: Direction, name: str, offset: int, out: list[H3Event]) -> None:
        if self._qpack_lost[d] is None:
            self._qpack_lost[d] = name

    def _on_encoder(self, ins: QpackInstruction, out: list[H3Event]) -> None:
        d: Direction = C2S if ins.direction == C2S else S2C
        if self._qpack_lost[d] is not None:
            return
        dec = self._decoder(d, pin=True)
        try:
            unblocked = dec.feed_encoder(ins.raw)
        except DissectError as e:
            self._record(
                out,
                H3Error(
                    stream_id=ins.stream_id, direction=d, offset=ins.offset,
                    name="qpack_encoder_stream_error", detail=str(e),
                    frame=ins.frame, ts_ns=ins.ts_ns,
                ),
            )  # fmt: skip
            self._qpack_lost[d] = "qpack_encoder_stream_error"
            return
        for sid in unblocked:
            queue = self._queues.get((sid, d))
            if not queue or queue[0].blocked_at is None:
                continue
            sec = queue.pop(0)
            b = sec.blocked_at
            assert b is not None
            done = QpackBlocked(
                direction=b.direction, stream_id=b.stream_id, offset=b.offset,
                frame_type=b.frame_type, required_insert_count=b.required_insert_count,
                inserts_at_block=b.inserts_at_block, blocked_frame=b.blocked_frame,
                blocked_ts_ns=b.blocked_ts_ns, encoder_stream_id=ins.stream_id,
                unblocked_encoder_offset=ins.end, unblocked_frame=ins.frame,
                unblocked_ts_ns=ins.ts_ns,
            )  # fmt: skip
            self._record(out, done)
            try:
                res: DecodedFieldSection | None = dec.resume(sid)
                err = None
            except DissectError as e:
                res, err = None, f"qpack_decompression_failed: {e}"
            self._finish(sid, d, sec.frame, res, err, done, ins.frame, ins.ts_ns, out)
            self._drain(sid, d, out)

    def _section(self, sid: int, d: Direction, fr: H3Frame, out: list[H3Event]) -> None:
        key = (sid, d)
        queue = self._queues.setdefault(key, [])
        queue.append(_Section(fr))
        if len(queue) == 1:
            self._drain(sid, d, out)

    def _drain(self, sid: int, d: Direction, out: list[H3Event]) -> None:
        """Decode queued sections of one stream in order until one blocks (§2.1.2)."""
        key = (sid, d)
        queue = self._queues.get(key, [])
        while queue:
            sec = queue[0]
            fr = sec.frame
            assert fr.field_section is not None
            dec = self._decoder(d, pin=False)
            if self._qpack_lost[d] is not None:
                if not _static_only(fr.field_section):
                    queue.pop(0)
                    self._attach(d, fr, None, "qpack_state_lost", None, None, out)
                    continue
                # Required Insert Count 0: the section does not use the dynamic table
                # (RFC 9204 §4.5.1.1), so it decodes without the lost state.
                dec = QpackDecoder(0, 0)
            try:
                res = dec.decode(sid, fr.field_section)
            except DissectError as e:
                queue.pop(0)
                self._record(
                    out,
                    H3Error(
                        stream_id=sid, direction=d, offset=fr.offset,
                        name="qpack_decompression_failed", detail=str(e),
                        frame=fr.frame, ts_ns=fr.ts_ns,
                    ),
                )  # fmt: skip
                self._attach(d, fr, None, f"qpack_decompression_failed: {e}", None, None, out)
                continue
            if res is None:
                self._pinned[d] = True
                sec.blocked_at = QpackBlocked(
                    direction=d, stream_id=sid, offset=fr.offset, frame_type=fr.type,
                    required_insert_count=dec.blocked.get(sid), inserts_at_block=dec.total_inserts,
                    blocked_frame=fr.frame, blocked_ts_ns=fr.ts_ns,
                    encoder_stream_id=self._encoder_stream[d],
                )  # fmt: skip
                return
            queue.pop(0)
            self._finish(sid, d, fr, res, None, None, fr.frame, fr.ts_ns, out)
        self._queues.pop(key, None)

    def _finish(
        self,
        sid: int,
        d: Direction,
        fr: H3Frame,
        res: DecodedFieldSection | None,
        err: str | None,
        blocked: QpackBlocked | None,
        frame: int | None,
        ts_ns: int | None,
        out: list[H3Event],
    ) -> None:
        if err is not None:
            self._record(
                out,
                H3Error(
                    stream_id=sid, direction=d, offset=fr.offset,
                    name="qpack_decompression_failed", detail=err, frame=frame, ts_ns=ts_ns,
                ),
            )  # fmt: skip
        self._attach(d, fr, res, err, frame, blocked, out, ts_ns=ts_ns)

    def _attach(
        self,
        d: Direction,
        fr: H3Frame,
        res: DecodedFieldSection | None,
        err: str | None,
        frame: int | None,
        blocked: QpackBlocked | None,
        out: list[H3Event],
        *,
        ts_ns: int | None = None,
    ) -> None:
        """Make the :class:`HeaderBlock` and place it in its exchange (RFC 9114 §4.1)."""
        sid = fr.stream_id
        headers = res.headers if res is not None else None
        kind_of = _stream_kind_of(sid)
        if fr.type == FrameType.PUSH_PROMISE:
            ex: H3Stream | None = None
            kind = "push_promise"
        elif kind_of is StreamKind.REQUEST:
            ex = self.streams.setdefault(sid, H3Stream(stream_id=sid))
            kind = self._classify(ex, d, headers)
        else:
            pt = self.stream_types.get((sid, d))
            pid = pt.push_id if pt is not None else None
            ex = self.pushes.get(pid) if pid is not None else None
            kind = self._classify(ex, S2C, headers) if ex is not None else "unknown"
        hb = HeaderBlock(
            direction=d,
            offset=fr.offset,
            end=fr.end,
            stream_id=sid,
            frame_type=fr.type,
            kind=kind,
            fragment_length=len(fr.field_section or b""),
            headers=headers,
            push_id=fr.push_id,
            error=err,
            required_insert_count=res.required_insert_count if res is not None else None,
            blocked=blocked is not None,
            frame=frame if frame is not None else fr.frame,
            ts_ns=ts_ns if ts_ns is not None else fr.ts_ns,
        )
        self._record(out, hb)
        if fr.type == FrameType.PUSH_PROMISE:
            origin = self.streams.setdefault(sid, H3Stream(stream_id=sid))
            origin.header_blocks.append(hb)
            if fr.push_id is not None:
                px = self.pushes.setdefault(fr.push_id, H3Stream(stream_id=-1, push_id=fr.push_id))
                px.request_headers = hb
                px.header_blocks.append(hb)
                if headers is None:
                    px.headers_unknown = True
            return
        if ex is None:
            return
        ex.header_blocks.append(hb)
        if headers is None:
            ex.headers_unknown = True
        if kind == "request":
            ex.request_headers = hb
        elif kind == "response":
            ex.response_headers = hb
        elif kind == "informational":
            ex.informational.append(hb)
        elif kind == "trailers":
            if d == C2S:
                ex.request_trailers = hb
            else:
                ex.response_trailers = hb

    @staticmethod
    def _classify(ex: H3Stream, d: Direction, headers: tuple[tuple[str, str], ...] | None) -> str:
        """RFC 9114 §4.1: request / interim (1xx) responses / final response / trailers."""
        if d == C2S:
            return "request" if ex.request_headers is None else "trailers"
        if ex.response_headers is not None:
            return "trailers"
        if headers is None:
            return "unknown"
        status = next((v for k, v in headers if k == ":status"), None)
        if status is None:
            return "trailers" if ex.informational else "unknown"
        if len(status) == 3 and status.startswith("1"):
            return "informational"
        return "response"


def _static_only(field_section: bytes) -> bool:
    """Is the Encoded Required Insert Count zero (RFC 9204 §4.5.1)?"""
    try:
        return parse_field_section_prefix(field_section).encoded_insert_count == 0
    except DissectError:
        return False


# ---------------------------------------------------------------------------------------
# From a QUIC connection
# ---------------------------------------------------------------------------------------
def dissect_quic(
    conn: QuicConnection,
    *,
    force: bool = False,
    keep_bodies: bool = True,
    max_table_capacity: int = DEFAULT_MAX_TABLE_CAPACITY,
    blocked_streams: int = DEFAULT_BLOCKED_STREAMS,
) -> H3Connection | None:
    """HTTP/3 of a dissected QUIC connection, or ``None`` when it is not HTTP/3.

    A connection is HTTP/3 when its negotiated ALPN is "h3" (RFC 9114 §3.1) — or, with
    ``force``, whatever it says.  Every STREAM frame (``conn.stream_frames``, arrival order)
    is fed with its first-seen bytes from ``conn.stream_bytes`` (retransmissions carry the
    same bytes, RFC 9000 §2.2), then :meth:`H3Connection.close` is called.
    """
    if not force and not is_h3_alpn(conn.alpn):
        return None
    h3 = H3Connection(
        keep_bodies=keep_bodies,
        max_table_capacity=max_table_capacity,
        blocked_streams=blocked_streams,
    )
    cache: dict[tuple[int, str], tuple[tuple[int, bytes], ...]] = {}
    for row in conn.stream_frames:
        key = (row.stream_id, row.direction)
        chunks = cache.get(key)
        if chunks is None:
            chunks = cache[key] = conn.stream_bytes(row.stream_id, row.direction).chunks
        data = _slice(chunks, row.offset, row.length)
        if data is None:
            continue
        off, piece = data
        h3.feed(
            row.stream_id,
            row.direction,
            piece,
            off,
            fin=row.fin and off + len(piece) == row.offset + row.length,
            frame=row.frame,
            ts_ns=row.ts_ns,
        )
    h3.close()
    return h3


def _slice(
    chunks: tuple[tuple[int, bytes], ...], offset: int, length: int
) -> tuple[int, bytes] | None:
    """The held bytes of ``[offset, offset+length)`` (from its start, contiguous)."""
    if length == 0:
        return offset, b""
    for start, data in chunks:
        end = start + len(data)
        if start <= offset <= end:
            piece = data[offset - start : offset - start + length]
            return offset, piece
    return None

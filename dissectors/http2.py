"""HTTP/2 framing, HPACK header blocks, stream states and flow control (passive observer).

Implements, for a dissector that *watches* a connection rather than takes part in it:

* RFC 9113 §3.4 — the client connection preface (also how h2c "prior knowledge" is
  recognised on any port: :func:`is_h2_preface`);
* RFC 9113 §4.1 — the 9-byte frame header, and §6.1–§6.10 — every frame type (DATA,
  HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE,
  CONTINUATION).  Unknown types are kept as rows: "Implementations MUST ignore and discard
  frames of unknown types" (§5.5) — ignoring is the endpoint's business, a dissector reports;
* RFC 9113 §4.3 and RFC 7541 — header blocks (HEADERS / PUSH_PROMISE + CONTINUATION),
  decoded with the ``hpack`` library, one decoder per direction;
* RFC 9113 §5.1 — stream states; §5.2 and §6.9 — flow-control windows; §6.5.3 — settings
  synchronisation; §8.1 — request/response exchanges (informational 1xx, trailers).

Two shapes, as every dissector (DESIGN.md §5): :func:`parse_frame` is the one-shot
``parse_frame(buf, offset) -> (RawFrame, next_offset)``; :class:`H2Connection` is the
streaming parser over both directions of one connection, ``feed(direction, data, offset)``
and ``close()``.  Its output is independent of how each direction's bytes are chunked.

Coordinates.  ``offset`` everywhere is a byte offset in that direction's (plaintext) stream,
as given to :meth:`H2Connection.feed`; a frame occupies ``[offset, end)`` where
``end = offset + 9 + length`` (``length`` is the frame header's Length field: the payload).

What a passive observer can and cannot know:

* SETTINGS take effect for the *receiver* of the SETTINGS frame when it processes it, and
  the receiver then "MUST immediately emit a SETTINGS frame with the ACK flag set"
  (§6.5.3).  The ACK travels in the same direction as that endpoint's later DATA and header
  blocks, so this parser applies SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE and
  SETTINGS_HEADER_TABLE_SIZE when it sees the ACK: exact, and independent of how the two
  directions are interleaved by the caller.
* WINDOW_UPDATE frames travel against the DATA they credit; the windows computed here are
  those of the capture's order of events.  At a vantage near the receiver, DATA already in
  flight when a WINDOW_UPDATE left is counted after it, so a window can look larger than
  the sender's was — never smaller.
* An HPACK decoding error corrupts that direction's dynamic table for good (RFC 9113 §4.3:
  "A decoding error in a field block MUST be treated as a connection error of type
  COMPRESSION_ERROR").  The block becomes an ``hpack_decoding_error`` error row; every later
  header block in that direction is reported with ``headers=None`` and
  ``error="hpack_state_lost"`` (their headers are unknown — decoding them against a wrong
  table could give wrong headers silently), while framing, stream states and flow control
  go on.
* A hole in the stream (``feed`` at an offset beyond the bytes seen) inside a frame whose
  header was captured keeps the framing: the frame is reported with ``missing > 0`` and its
  payload unparsed.  A hole that covers a frame header loses the frame boundaries: one
  ``lost_boundary`` error row, and that direction is not parsed further.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Final, Literal

import hpack
from hpack import NeverIndexedHeaderTuple

from ._exchange import HeaderFields, HttpExchange
from ._wire import Buffer, Cursor
from .errors import DissectError

__all__ = [
    "C2S",
    "DEFAULT_INITIAL_WINDOW_SIZE",
    "DEFAULT_MAX_FRAME_SIZE",
    "FRAME_HEADER_LENGTH",
    "MAX_HEADER_BLOCK_LENGTH",
    "MAX_HEADER_LIST_SIZE",
    "MAX_STREAMS",
    "MAX_WINDOW_SIZE",
    "PREFACE",
    "S2C",
    "BodyChunk",
    "Direction",
    "ErrorCode",
    "Flag",
    "FrameType",
    "GoAway",
    "H2Connection",
    "H2Error",
    "H2Event",
    "H2Frame",
    "H2Stream",
    "HeaderBlock",
    "PingRoundTrip",
    "RawFrame",
    "RstStream",
    "SettingsParameter",
    "StreamState",
    "WindowSample",
    "error_code_name",
    "frame_type_name",
    "headers_dict",
    "is_h2_preface",
    "parse_frame",
    "settings_name",
]

Direction = Literal["c2s", "s2c"]
C2S: Final = "c2s"
S2C: Final = "s2c"
_DIRECTIONS: Final = (C2S, S2C)

#: RFC 9113 §3.4: "the connection preface starts with the string
#: PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (24 octets), followed by a SETTINGS frame.
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#: RFC 9113 §4.1: Length (24) + Type (8) + Flags (8) + R (1) + Stream Identifier (31).
FRAME_HEADER_LENGTH: Final = 9
#: RFC 9113 §6.5.2: SETTINGS_MAX_FRAME_SIZE initial value 2^14; allowed up to 2^24-1.
DEFAULT_MAX_FRAME_SIZE: Final = 1 << 14
MAX_ALLOWED_FRAME_SIZE: Final = (1 << 24) - 1
#: RFC 9113 §6.5.2 / §6.9.2: SETTINGS_INITIAL_WINDOW_SIZE initial value 2^16-1, and the
#: connection window always starts at 65,535 octets.
DEFAULT_INITIAL_WINDOW_SIZE: Final = 65_535
#: RFC 9113 §6.9.1: "A sender MUST NOT allow a flow-control window to exceed 2^31-1 octets."
MAX_WINDOW_SIZE: Final = (1 << 31) - 1
#: RFC 7541 §6.5.2 / RFC 9113 §6.5.2: SETTINGS_HEADER_TABLE_SIZE initial value 4,096.
DEFAULT_HEADER_TABLE_SIZE: Final = 4096
#: Cap on a header block's encoded bytes across HEADERS/PUSH_PROMISE + CONTINUATION.  The
#: protocol has no limit (CONTINUATION can go on forever — the 2024 "CONTINUATION flood"
#: attacks); 1 MiB is 64 maximum-size frames, far above any real request or response.
MAX_HEADER_BLOCK_LENGTH: Final = 1 << 20
#: Streams kept per connection (:attr:`H2Connection.streams`).  RFC 9113 lets a peer open
#: up to 2^30 over a connection's life; browsers and gRPC channels open hundreds to
#: thousands.  Beyond, frames are still framed (and header blocks HPACK-decoded, to keep
#: the dynamic table right) but neither kept nor returned: only counted
#: (:attr:`H2Connection.streams_over_limit`, :attr:`H2Connection.frames_over_limit`).
MAX_STREAMS: Final = 10_000
#: Cap on a decoded header list (RFC 7541 §4.1 entry sizes: name + value + 32).  hpack's own
#: default is 64 KiB, which real servers exceed with large cookies; 1 MiB bounds the memory a
#: hostile block can make the decoder allocate while keeping every plausible real list.
MAX_HEADER_LIST_SIZE: Final = 1 << 20


class FrameType(IntEnum):
    """RFC 9113 §6 frame types (§11.2 registry)."""

    DATA = 0x0
    HEADERS = 0x1
    PRIORITY = 0x2
    RST_STREAM = 0x3
    SETTINGS = 0x4
    PUSH_PROMISE = 0x5
    PING = 0x6
    GOAWAY = 0x7
    WINDOW_UPDATE = 0x8
    CONTINUATION = 0x9


class Flag(IntEnum):
    """Frame flags (RFC 9113 §6); ACK and END_STREAM share bit 0x1 on different types."""

    END_STREAM = 0x1
    ACK = 0x1
    END_HEADERS = 0x4
    PADDED = 0x8
    PRIORITY = 0x20


class SettingsParameter(IntEnum):
    """RFC 9113 §6.5.2 (and RFC 8441 §3 for ENABLE_CONNECT_PROTOCOL)."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6
    ENABLE_CONNECT_PROTOCOL = 0x8
    NO_RFC7540_PRIORITIES = 0x9


class ErrorCode(IntEnum):
    """RFC 9113 §7 error codes (RST_STREAM, GOAWAY)."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class StreamState(str, Enum):
    """RFC 9113 §5.1 stream states, seen from the *client* ("local" = the client).

    ``half_closed_local``: the client has sent END_STREAM (typical after a request);
    ``half_closed_remote``: the server has sent END_STREAM; ``reserved_remote``: the server
    promised the stream with PUSH_PROMISE.
    """

    IDLE = "idle"
    RESERVED_REMOTE = "reserved_remote"
    OPEN = "open"
    HALF_CLOSED_LOCAL = "half_closed_local"
    HALF_CLOSED_REMOTE = "half_closed_remote"
    CLOSED = "closed"


_TYPE_NAMES: Final = {t.value: t.name for t in FrameType}


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"UNKNOWN(0x{value:02x})"


def frame_type_name(value: int) -> str:
    """``"DATA"`` … ``"CONTINUATION"``, or ``"UNKNOWN(0x1a)"``."""
    name = _TYPE_NAMES.get(value)
    return name if name is not None else _name(FrameType, value)


def error_code_name(value: int) -> str:
    """RFC 9113 §7 name of an error code, or ``"UNKNOWN(0x..)"``."""
    return _name(ErrorCode, value)


def settings_name(value: int) -> str:
    """RFC 9113 §6.5.2 name of a settings parameter, or ``"UNKNOWN(0x..)"``."""
    return _name(SettingsParameter, value)


def is_h2_preface(data: Buffer) -> bool:
    """Does ``data`` start with the client connection preface (RFC 9113 §3.4)?

    This is how HTTP/2 with prior knowledge (h2c without Upgrade, §3.3) is recognised on
    any port: the 24-octet string cannot begin any HTTP/1.x request.
    """
    return bytes(data[: len(PREFACE)]) == PREFACE


# ---------------------------------------------------------------------------------------
# One-shot frame parsing
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class RawFrame:
    """One frame as framed on the wire (RFC 9113 §4.1), payload not interpreted.

    ``offset`` is the position of the 9-byte header in the buffer; ``length`` the Length
    field (payload octets).  The reserved bit is dropped: "The semantics of this bit are
    undefined, and the bit MUST remain unset (0x0) when sending and MUST be ignored when
    receiving."
    """

    offset: int
    length: int
    type: int
    flags: int
    stream_id: int
    payload: bytes | memoryview

    @property
    def end(self) -> int:
        return self.offset + FRAME_HEADER_LENGTH + self.length


def parse_frame(buf: Buffer, offset: int = 0) -> tuple[RawFrame, int]:
    """Parse the frame at ``buf[offset:]``; return it and the offset after it.

    Raises :class:`~dissectors.errors.Truncated` when ``buf`` ends inside the frame.  Every
    9-byte header frames *something* (any type, any 24-bit length), so framing itself is
    never malformed; payload rules are checked by :class:`H2Connection`.
    """
    cur = Cursor(buf, offset)
    length = cur.pull_u24()
    ftype = cur.pull_u8()
    flags = cur.pull_u8()
    stream_id = cur.pull_u32() & 0x7FFF_FFFF
    payload = cur.pull_view(length)
    return (
        RawFrame(
            offset=offset,
            length=length,
            type=ftype,
            flags=flags,
            stream_id=stream_id,
            payload=payload,
        ),
        cur.pos,
    )


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class H2Frame:
    """One frame (RFC 9113 §4.1) with the fields of its type decoded.

    Common: ``direction``, ``offset`` (of the 9-byte header), ``length`` (payload octets,
    the Length field), ``end`` (``offset + 9 + length``), ``type`` (raw) and ``type_name``,
    ``flags`` (raw), ``stream_id``, ``end_stream`` (DATA/HEADERS), ``end_headers``
    (HEADERS/PUSH_PROMISE/CONTINUATION), ``ack`` (SETTINGS/PING).  ``missing`` counts payload
    octets lost in a capture hole (the payload is then not interpreted and type fields are
    ``None``).  ``problem`` names the first protocol violation seen on this frame (an
    :class:`H2Error` row carries the detail).

    Per type (``None`` elsewhere):

    * padding (DATA/HEADERS/PUSH_PROMISE, §6.1): ``pad_length``;
    * DATA: ``data_offset`` (stream offset of the first data octet) and ``data_length``
      (excluding Pad Length and Padding); ``flow_controlled_length`` is the whole payload
      (§6.9.1: "The entire DATA frame payload is included in flow control, including the Pad
      Length and Padding fields if present"); ``stream_window`` / ``connection_window`` are
      the *sender's* send windows left after this frame (may be negative if it overran);
    * HEADERS/PUSH_PROMISE/CONTINUATION: ``fragment_length`` (header block fragment octets);
      HEADERS with PRIORITY and PRIORITY frames: ``exclusive``, ``stream_dependency``,
      ``weight`` (1–256, i.e. the wire value + 1); PUSH_PROMISE: ``promised_stream_id``;
    * RST_STREAM and GOAWAY: ``error_code`` (raw; name via :func:`error_code_name`); GOAWAY:
      ``last_stream_id``, ``debug_data``;
    * SETTINGS: ``settings`` — (identifier, value) pairs in wire order;
    * PING: ``opaque_data`` (8 octets);
    * WINDOW_UPDATE: ``window_size_increment``; ``stream_window`` (stream ≠ 0) and
      ``connection_window``: the peer's send windows after the increment (the window that
      this frame reopened).
    """

    direction: Direction
    offset: int
    length: int
    type: int
    type_name: str
    flags: int
    stream_id: int
    end_stream: bool = False
    end_headers: bool = False
    ack: bool = False
    missing: int = 0
    problem: str | None = None
    pad_length: int | None = None
    data_offset: int | None = None
    data_length: int | None = None
    flow_controlled_length: int = 0
    stream_window: int | None = None
    connection_window: int | None = None
    fragment_length: int | None = None
    exclusive: bool | None = None
    stream_dependency: int | None = None
    weight: int | None = None
    promised_stream_id: int | None = None
    error_code: int | None = None
    last_stream_id: int | None = None
    debug_data: bytes | None = None
    settings: tuple[tuple[int, int], ...] | None = None
    opaque_data: bytes | None = None
    window_size_increment: int | None = None

    @property
    def end(self) -> int:
        return self.offset + FRAME_HEADER_LENGTH + self.length

    @property
    def wire_length(self) -> int:
        return FRAME_HEADER_LENGTH + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderBlock(HeaderFields):
    """A complete header block (RFC 9113 §4.3): HEADERS or PUSH_PROMISE + CONTINUATION.

    ``offset`` is that of the first frame's header, ``end`` the end of the frame that
    carried END_HEADERS.  ``kind`` is ``"request"``, ``"response"``, ``"informational"``
    (1xx, §8.1), ``"trailers"``, ``"push_promise"`` or ``"unknown"`` (headers not decoded and
    no way to tell).  ``headers`` are (name, value) pairs decoded as UTF-8 (undecodable
    octets backslash-escaped), or ``None`` when ``error`` says why they are unknown
    (``"hpack_decoding_error: …"`` for this block, ``"hpack_state_lost"`` after an earlier
    failure, ``"header_block_too_large"``, ``"incomplete"`` for a frame cut by a hole).
    ``never_indexed`` lists the names sent as never-indexed literals (RFC 7541 §6.2.3:
    typically secrets).  ``table_size`` is the decoder's dynamic table size afterwards.
    """

    direction: Direction
    offset: int
    end: int
    stream_id: int
    frame_type: int
    kind: str
    end_stream: bool
    fragment_length: int
    frames: int
    headers: tuple[tuple[str, str], ...] | None
    never_indexed: tuple[str, ...] = ()
    promised_stream_id: int | None = None
    error: str | None = None
    table_size: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class H2Error:
    """Something that violates RFC 9113/7541 or that the parser could not interpret.

    ``name`` is stable snake_case (it becomes an ``anomalies`` row); ``detail`` is prose.
    ``offset`` is the stream offset of the frame concerned (or where the problem begins).
    """

    direction: Direction
    offset: int
    stream_id: int | None
    name: str
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PingRoundTrip:
    """A PING (§6.7) and its ACK with the same opaque data.

    ``direction`` is that of the PING (the endpoint measuring); the ACK travelled the
    other way.  Offsets are in each frame's own direction's stream.
    """

    direction: Direction
    opaque_data: bytes
    ping_offset: int
    ping_end: int
    ack_offset: int
    ack_end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GoAway:
    """A GOAWAY frame (§6.8): the sender processed no stream above ``last_stream_id``."""

    direction: Direction
    offset: int
    last_stream_id: int
    error_code: int
    debug_data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class RstStream:
    """A RST_STREAM frame (§6.4) that closed a stream."""

    direction: Direction
    offset: int
    error_code: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowSample:
    """One change of a sender's send windows (§6.9).

    ``sender`` is the endpoint whose windows these are (the direction its DATA flows);
    ``cause`` is ``"DATA"`` (sent by ``sender``), ``"WINDOW_UPDATE"`` (sent by the peer) or
    ``"SETTINGS"`` (a new SETTINGS_INITIAL_WINDOW_SIZE took effect, at its ACK by
    ``sender``).  ``frame_direction``/``offset`` locate the frame that caused it.
    ``stream_window`` is ``None`` for a connection-only change.
    """

    sender: Direction
    stream_id: int
    cause: str
    frame_direction: Direction
    offset: int
    end: int
    stream_window: int | None
    connection_window: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyChunk:
    """The data of one DATA frame: ``length`` octets at stream ``offset`` (padding
    excluded).  ``data`` is ``None`` when bodies are not kept or octets were missing; for
    a frame cut by a capture hole (``missing`` > 0) the padding split is unknown, so the
    chunk spans the whole payload (``offset`` = payload start, ``length`` = Length)."""

    offset: int
    length: int
    frame_offset: int
    data: bytes | None
    missing: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.length


H2Event = H2Frame | HeaderBlock | H2Error


def _dir_pair() -> dict[Direction, int]:
    return {C2S: 0, S2C: 0}


@dataclass(slots=True, kw_only=True)
class H2Stream(HttpExchange):
    """One stream and the HTTP exchange on it (RFC 9113 §5.1, §8.1).

    Filled in as frames arrive (not frozen).  ``request_headers`` / ``response_headers``
    are the first request block and the final (non-1xx) response block; ``informational``
    holds 1xx responses; ``request_trailers`` / ``response_trailers`` the trailing blocks.
    ``header_blocks`` keeps every block in order.  ``headers_unknown`` is set when a header
    block of this stream could not be decoded (then e.g. ``response_headers`` may be
    ``None`` even though the server answered).  Bodies: ``body_chunks[direction]`` (each
    DATA frame's data with its offset), ``body_bytes[direction]`` (data octets, padding
    excluded).  ``end_stream_offset[direction]``: end of the frame/header block that
    carried END_STREAM.  ``promised_by``: the stream whose PUSH_PROMISE reserved this one.
    """

    stream_id: int
    state: StreamState = StreamState.IDLE
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
    rst_stream: RstStream | None = None
    promised_by: int | None = None
    first_offset: dict[Direction, int | None] = field(
        default_factory=lambda: {C2S: None, S2C: None}
    )


# ---------------------------------------------------------------------------------------
# The connection
# ---------------------------------------------------------------------------------------
_PREFACE, _HEADER, _SKIP, _FAILED = range(4)


@dataclass(slots=True)
class _Dir:
    """Framing state of one direction."""

    mode: int
    pos: int  # stream offset of buf[0]
    buf: bytearray = field(default_factory=bytearray)
    frames: int = 0
    # _SKIP: a frame cut by a hole; its header is known
    skip_header: tuple[int, int, int, int, int] | None = None  # offset, length, type, flags, sid
    skip_remaining: int = 0
    skip_missing: int = 0


@dataclass(slots=True)
class _Block:
    """A header block being assembled."""

    direction: Direction
    offset: int
    stream_id: int
    frame_type: int
    end_stream: bool
    promised_stream_id: int | None
    fragments: list[bytes]
    size: int
    frames: int
    incomplete: bool


def _other(d: Direction) -> Direction:
    return S2C if d == C2S else C2S


class H2Connection:
    """Streaming HTTP/2 dissector over both directions of one connection.

    ``feed(direction, data, offset)`` takes the next bytes of one direction (``offset`` is
    the stream offset of ``data[0]``; ``None`` means "right after the previous bytes") and
    returns the events completed by them: :class:`H2Frame` per frame, :class:`HeaderBlock`
    per complete header block, :class:`H2Error` per problem.  Overlapping bytes are
    ignored; an offset beyond the bytes seen is a hole (see the module docstring).
    ``close()`` reports what the end of the capture cut short.

    Connection-wide results accumulate in attributes: :attr:`streams`
    (stream id → :class:`H2Stream`), :attr:`ping_round_trips`, :attr:`goaways`,
    :attr:`window_series`, :attr:`settings` (latest values each endpoint sent) and
    :attr:`errors`.

    ``expect_preface=False`` for a capture that starts mid-connection; ``c2s_start`` /
    ``s2c_start`` are the stream offsets where HTTP/2 begins (after an HTTP/1.1 Upgrade,
    RFC 7540 §3.2).  ``keep_bodies=False`` keeps only body lengths, not bytes.
    ``max_streams`` bounds the streams kept (:data:`MAX_STREAMS`).
    """

    def __init__(
        self,
        *,
        expect_preface: bool = True,
        c2s_start: int = 0,
        s2c_start: int = 0,
        keep_bodies: bool = True,
        max_header_list_size: int = MAX_HEADER_LIST_SIZE,
        max_streams: int = MAX_STREAMS,
    ) -> None:
        self.max_streams = max_streams
        self._over: set[int] = set()  # stream ids beyond max_streams
        #: frames of the streams beyond ``max_streams`` (framed, counted, not returned)
        self.frames_over_limit = 0
        self.keep_bodies = keep_bodies
        self._whole = expect_preface  # the capture holds the connection from its start
        self._dirs: dict[Direction, _Dir] = {
            C2S: _Dir(_PREFACE if expect_preface else _HEADER, c2s_start),
            S2C: _Dir(_HEADER, s2c_start),
        }
        self._decoders: dict[Direction, hpack.Decoder] = {}
        for d in _DIRECTIONS:
            dec = hpack.Decoder(max_header_list_size=max_header_list_size)
            self._decoders[d] = dec
        self._hpack_lost: dict[Direction, bool] = {C2S: False, S2C: False}
        self._block: dict[Direction, _Block | None] = {C2S: None, S2C: None}
        #: SETTINGS sent by each endpoint and not yet acknowledged, in order (§6.5.3).
        self._pending_settings: dict[Direction, deque[tuple[tuple[int, int], ...]]] = {
            C2S: deque(),
            S2C: deque(),
        }
        #: Parameters in force for the *sender* of each direction (acked by it).
        self._initial_window: dict[Direction, int] = {
            C2S: DEFAULT_INITIAL_WINDOW_SIZE,
            S2C: DEFAULT_INITIAL_WINDOW_SIZE,
        }
        self._max_frame_size: dict[Direction, int] = {
            C2S: DEFAULT_MAX_FRAME_SIZE,
            S2C: DEFAULT_MAX_FRAME_SIZE,
        }
        self._conn_window: dict[Direction, int] = {
            C2S: DEFAULT_INITIAL_WINDOW_SIZE,
            S2C: DEFAULT_INITIAL_WINDOW_SIZE,
        }
        self._stream_window: dict[Direction, dict[int, int]] = {C2S: {}, S2C: {}}
        self._pings: dict[Direction, dict[bytes, deque[tuple[int, int]]]] = {C2S: {}, S2C: {}}
        self._max_stream_id: dict[Direction, int] = {C2S: 0, S2C: 0}

        self.streams: dict[int, H2Stream] = {}
        self.ping_round_trips: list[PingRoundTrip] = []
        self.goaways: list[GoAway] = []
        self.window_series: list[WindowSample] = []
        #: Latest value of each parameter each endpoint *sent* (keyed by sender direction).
        self.settings: dict[Direction, dict[int, int]] = {C2S: {}, S2C: {}}
        self.errors: list[H2Error] = []
        self._closed = False

    # -- public -------------------------------------------------------------------------
    def feed(self, direction: str, data: Buffer, offset: int | None = None) -> list[H2Event]:
        """Feed the next bytes of ``direction`` ("c2s" or "s2c"); return completed events."""
        d = self._direction(direction)
        st = self._dirs[d]
        out: list[H2Event] = []
        if st.mode == _FAILED or self._closed:
            return out
        data = bytes(data)
        expected = st.pos + len(st.buf)
        if offset is None:
            offset = expected
        if offset < expected:  # overlap: keep only what is new
            cut = expected - offset
            if cut >= len(data):
                return out
            data = data[cut:]
            offset = expected
        if offset > expected:
            self._gap(d, offset - expected, out)
            if st.mode == _FAILED:
                return out
        if data:
            if st.mode == _SKIP:
                data = self._skip(d, data, out)
            if data:
                st.buf += data
                self._parse(d, out)
        return out

    def feed_gap(self, direction: str, length: int) -> list[H2Event]:
        """``length`` octets of ``direction`` were never captured (a hole)."""
        d = self._direction(direction)
        st = self._dirs[d]
        out: list[H2Event] = []
        if st.mode != _FAILED and not self._closed and length > 0:
            self._gap(d, length, out)
        return out

    def close(self) -> list[H2Event]:
        """End of both directions: report frames and header blocks cut short."""
        out: list[H2Event] = []
        if self._closed:
            return out
        self._closed = True
        for d in _DIRECTIONS:
            st = self._dirs[d]
            if st.mode == _PREFACE and st.buf:
                self._error(
                    out, d, st.pos, None, "preface_truncated", "stream ended in the preface"
                )
            elif st.mode == _HEADER and st.buf:
                self._error(
                    out,
                    d,
                    st.pos,
                    None,
                    "frame_truncated",
                    f"stream ended {len(st.buf)} octets into a frame",
                )
            elif st.mode == _SKIP and st.skip_header is not None:
                self._error(
                    out,
                    d,
                    st.skip_header[0],
                    st.skip_header[4],
                    "frame_truncated",
                    "stream ended inside a frame after a hole",
                )
            blk = self._block[d]
            if blk is not None:
                self._error(
                    out,
                    d,
                    blk.offset,
                    blk.stream_id,
                    "header_block_incomplete",
                    "stream ended before END_HEADERS",
                )
                self._block[d] = None
            st.buf = bytearray()
        return out

    @property
    def frames_seen(self) -> dict[Direction, int]:
        return {d: self._dirs[d].frames for d in _DIRECTIONS}

    def send_windows(self, sender: Direction) -> tuple[int, dict[int, int]]:
        """Current (connection window, {stream id: stream window}) of ``sender``."""
        return self._conn_window[sender], dict(self._stream_window[sender])

    # -- framing --------------------------------------------------------------------------
    @staticmethod
    def _direction(direction: str) -> Direction:
        if direction == C2S:
            return C2S
        if direction == S2C:
            return S2C
        raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")

    def _error(
        self,
        out: list[H2Event],
        d: Direction,
        offset: int,
        stream_id: int | None,
        name: str,
        detail: str,
    ) -> None:
        e = H2Error(direction=d, offset=offset, stream_id=stream_id, name=name, detail=detail)
        self.errors.append(e)
        out.append(e)

    def _fail(self, d: Direction, out: list[H2Event], offset: int, name: str, detail: str) -> None:
        st = self._dirs[d]
        self._error(out, d, offset, None, name, detail)
        st.mode = _FAILED
        st.buf = bytearray()
        self._hpack_lost[d] = True
        self._block[d] = None

    def _gap(self, d: Direction, length: int, out: list[H2Event]) -> None:
        st = self._dirs[d]
        if st.mode == _SKIP:
            if length <= st.skip_remaining:
                st.skip_remaining -= length
                st.skip_missing += length
                st.pos += length
                if st.skip_remaining == 0:
                    self._finish_skip(d, out)
                return
            assert st.skip_header is not None
            self._fail(
                d,
                out,
                st.pos,
                "lost_boundary",
                f"a {length}-octet hole runs past the end of the frame at {st.skip_header[0]}",
            )
            return
        if st.mode == _HEADER and len(st.buf) >= FRAME_HEADER_LENGTH:
            raw, _ = self._header(st.buf)
            need = FRAME_HEADER_LENGTH + raw[0] - len(st.buf)
            if length <= need:
                st.skip_header = (st.pos, raw[0], raw[1], raw[2], raw[3])
                st.skip_missing = length
                st.skip_remaining = need - length
                st.pos += len(st.buf) + length
                st.buf = bytearray()
                st.mode = _SKIP
                if st.skip_remaining == 0:
                    self._finish_skip(d, out)
                return
        where = st.pos + len(st.buf)
        self._fail(
            d,
            out,
            where,
            "lost_boundary",
            f"a {length}-octet hole at offset {where} covers a frame header; "
            "frame boundaries are lost for the rest of this direction",
        )

    def _skip(self, d: Direction, data: bytes, out: list[H2Event]) -> bytes:
        st = self._dirs[d]
        n = min(len(data), st.skip_remaining)
        st.skip_remaining -= n
        st.pos += n
        if st.skip_remaining == 0:
            self._finish_skip(d, out)
        return data[n:]

    def _finish_skip(self, d: Direction, out: list[H2Event]) -> None:
        st = self._dirs[d]
        assert st.skip_header is not None
        off, length, ftype, flags, sid = st.skip_header
        missing = st.skip_missing
        st.skip_header = None
        st.skip_missing = 0
        st.mode = _HEADER
        st.frames += 1
        self._frame(d, off, length, ftype, flags, sid, None, missing, out)

    @staticmethod
    def _header(buf: bytearray) -> tuple[tuple[int, int, int, int], int]:
        length = (buf[0] << 16) | (buf[1] << 8) | buf[2]
        sid = int.from_bytes(buf[5:9], "big") & 0x7FFF_FFFF
        return (length, buf[3], buf[4], sid), FRAME_HEADER_LENGTH + length

    def _parse(self, d: Direction, out: list[H2Event]) -> None:
        st = self._dirs[d]
        buf = st.buf
        pos = 0
        if st.mode == _PREFACE:
            n = min(len(buf), len(PREFACE))
            if bytes(buf[:n]) != PREFACE[:n]:
                self._fail(
                    d,
                    out,
                    st.pos,
                    "bad_preface",
                    "the client stream does not start with the HTTP/2 connection preface "
                    "(RFC 9113 §3.4)",
                )
                return
            if n < len(PREFACE):
                return
            pos = len(PREFACE)
            st.mode = _HEADER
        while len(buf) - pos >= FRAME_HEADER_LENGTH:
            (length, ftype, flags, sid), total = self._header(buf[pos : pos + FRAME_HEADER_LENGTH])
            if len(buf) - pos < total:
                break
            payload = bytes(buf[pos + FRAME_HEADER_LENGTH : pos + total])
            off = st.pos + pos
            pos += total
            st.frames += 1
            self._frame(d, off, length, ftype, flags, sid, payload, 0, out)
            if st.mode == _FAILED:
                return
        if pos:
            del buf[:pos]
            st.pos += pos

    # -- frame semantics ----------------------------------------------------------------
    @property
    def streams_over_limit(self) -> int:
        """Streams opened beyond ``max_streams`` (not kept)."""
        return len(self._over)

    def _stream(self, sid: int) -> H2Stream:
        s = self.streams.get(sid)
        if s is None:
            s = H2Stream(stream_id=sid)  # beyond the limit: filled, then dropped
            if sid in self._over or len(self.streams) >= self.max_streams:
                self._over.add(sid)
            else:
                self.streams[sid] = s
        return s

    def _swin(self, sender: Direction, sid: int) -> int:
        w = self._stream_window[sender]
        if sid not in w:
            w[sid] = self._initial_window[sender]
        return w[sid]

    def _frame(
        self,
        d: Direction,
        off: int,
        length: int,
        ftype: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        missing: int,
        out: list[H2Event],
    ) -> None:
        problems: list[tuple[str, str]] = []
        f: dict[str, object] = {}
        after: list[H2Event] = []  # events that follow the frame row
        end = off + FRAME_HEADER_LENGTH + length
        if missing:
            problems.append(("frame_incomplete", f"{missing} payload octets were not captured"))
        if self._whole and self._dirs[d].frames == 1 and ftype != FrameType.SETTINGS:
            # §3.4: the preface "MUST be followed by a SETTINGS frame" (client); the
            # server preface "MUST be the first frame the server sends".
            problems.append(
                ("first_frame_not_settings", f"first frame is {frame_type_name(ftype)}")
            )

        blk = self._block[d]
        if blk is not None and (ftype != FrameType.CONTINUATION or sid != blk.stream_id):
            # §6.10: "a receiver MUST treat the receipt of any other type of frame or a
            # frame on a different stream as a connection error of type PROTOCOL_ERROR."
            self._error(
                after,
                d,
                blk.offset,
                blk.stream_id,
                "continuation_expected",
                f"header block of stream {blk.stream_id} interrupted by "
                f"{frame_type_name(ftype)} on stream {sid}; its headers are unknown",
            )
            self._abort_block(d, blk, "continuation_expected", end, after)
            blk = None

        if ftype <= FrameType.CONTINUATION and length > self._max_frame_size[d]:
            # §4.2: "An endpoint MUST send an error code of FRAME_SIZE_ERROR if a frame
            # exceeds the size defined in SETTINGS_MAX_FRAME_SIZE".
            problems.append(
                (
                    "frame_size_error",
                    f"length {length} exceeds SETTINGS_MAX_FRAME_SIZE {self._max_frame_size[d]}",
                )
            )

        handler = _HANDLERS.get(ftype)
        if handler is not None:
            try:
                handler(self, d, off, end, length, flags, sid, payload, f, problems, after)
            except DissectError as exc:  # a payload too short for its fields
                problems.append(("frame_size_error", f"{frame_type_name(ftype)}: {exc}"))
                if ftype in (FrameType.HEADERS, FrameType.PUSH_PROMISE):
                    self._hpack_lost[d] = True  # its block is never decoded
        if sid in self._over:  # a stream beyond max_streams: counted, not returned
            self.frames_over_limit += 1
            out.extend(e for e in after if isinstance(e, H2Error))
            return
        row = H2Frame(
            direction=d,
            offset=off,
            length=length,
            type=ftype,
            type_name=frame_type_name(ftype),
            flags=flags,
            stream_id=sid,
            missing=missing,
            problem=problems[0][0] if problems else None,
            **f,  # type: ignore[arg-type]
        )
        out.append(row)
        for name, detail in problems:
            self._error(out, d, off, sid, name, detail)
        out.extend(after)

    # Per-type handlers: fill ``f`` (H2Frame fields) and ``problems``; events that follow
    # the frame row (header blocks) go to ``after``.
    def _need_stream(self, sid: int, name: str, problems: list[tuple[str, str]]) -> bool:
        if sid == 0:
            # e.g. §6.1: "If a DATA frame is received whose Stream Identifier field is 0x00,
            # the recipient MUST respond with a connection error of type PROTOCOL_ERROR."
            problems.append(("stream_id_zero", f"{name} on stream 0"))
            return False
        return True

    def _need_connection(self, sid: int, name: str, problems: list[tuple[str, str]]) -> None:
        if sid != 0:
            problems.append(("stream_id_nonzero", f"{name} on stream {sid}, not 0"))

    @staticmethod
    def _unpad(
        cur: Cursor, flags: int, f: dict[str, object], problems: list[tuple[str, str]]
    ) -> int | None:
        """Read Pad Length if PADDED; return the padding length, None if it overruns."""
        if not flags & Flag.PADDED:
            return 0
        pad = cur.pull_u8()
        f["pad_length"] = pad
        if pad > cur.remaining:
            # §6.1: "If the length of the padding is the length of the frame payload or
            # greater, the recipient MUST treat this as a connection error".
            problems.append(
                ("padding_exceeds_payload", f"Pad Length {pad} > {cur.remaining} octets left")
            )
            return None
        return pad

    def _on_data(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        f["end_stream"] = bool(flags & Flag.END_STREAM)
        f["flow_controlled_length"] = length
        if not self._need_stream(sid, "DATA", problems):
            return
        s = self._stream(sid)
        if s.first_offset[d] is None:
            s.first_offset[d] = off
        s.data_frames[d] += 1
        # §6.9.1 flow control: the sender's windows shrink by the whole payload.
        self._conn_window[d] -= length
        sw = self._swin(d, sid) - length
        self._stream_window[d][sid] = sw
        cw = self._conn_window[d]
        f["stream_window"] = sw
        f["connection_window"] = cw
        self.window_series.append(
            WindowSample(
                sender=d,
                stream_id=sid,
                cause="DATA",
                frame_direction=d,
                offset=off,
                end=end,
                stream_window=sw,
                connection_window=cw,
            )
        )
        if length and (sw < 0 or cw < 0):
            # §6.9.1: "A sender MUST NOT send a flow-controlled frame with a length that
            # exceeds the space available in either of the flow-control windows".
            problems.append(
                (
                    "flow_control_window_exceeded",
                    f"DATA of {length} octets leaves stream window {sw}, connection window {cw}",
                )
            )
        if self._whole and s.state in (StreamState.IDLE, StreamState.RESERVED_REMOTE):
            # §5.1: DATA on an idle stream is a connection error of type PROTOCOL_ERROR.
            problems.append(("data_on_idle_stream", f"DATA on {s.state.value} stream {sid}"))
        if payload is None:
            # A hole: the data octets (and any padding split) are unknown; the chunk spans
            # the whole payload so the body keeps its place, marked missing.
            s.body_missing[d] += length
            s.body_chunks[d].append(
                BodyChunk(
                    offset=off + FRAME_HEADER_LENGTH,
                    length=length,
                    frame_offset=off,
                    data=None,
                    missing=length,
                )
            )
        else:
            cur = Cursor(payload)
            pad = self._unpad(cur, flags, f, problems)
            if pad is None:
                data_len = 0
            else:
                data_len = cur.remaining - pad
                start = FRAME_HEADER_LENGTH + cur.pos
                f["data_offset"] = off + start
                f["data_length"] = data_len
                s.body_chunks[d].append(
                    BodyChunk(
                        offset=off + start,
                        length=data_len,
                        frame_offset=off,
                        data=cur.pull_bytes(data_len) if self.keep_bodies else None,
                    )
                )
            s.body_bytes[d] += data_len
        if flags & Flag.END_STREAM:
            self._end_stream(d, s, end)

    def _on_headers(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        end_stream = bool(flags & Flag.END_STREAM)
        f["end_stream"] = end_stream
        f["end_headers"] = bool(flags & Flag.END_HEADERS)
        if not self._need_stream(sid, "HEADERS", problems):
            self._hpack_lost[d] = True  # the block is never decoded
            return
        s = self._stream(sid)
        if s.first_offset[d] is None:
            s.first_offset[d] = off
        if s.state == StreamState.IDLE:
            # §5.1.1: a new stream identifier "MUST be numerically greater than all streams
            # that the initiating endpoint has opened or reserved"; client streams are odd.
            if d == C2S and sid % 2 == 0:
                problems.append(("invalid_stream_id", f"client opened even stream {sid}"))
            if d == C2S and sid <= self._max_stream_id[C2S]:
                problems.append(
                    (
                        "stream_id_not_increasing",
                        f"stream {sid} opened after {self._max_stream_id[C2S]}",
                    )
                )
            if d == C2S:
                self._max_stream_id[C2S] = max(sid, self._max_stream_id[C2S])
            s.state = StreamState.OPEN
        elif s.state == StreamState.RESERVED_REMOTE and d == S2C:
            # §5.1: reserved (remote) --recv H--> half-closed (local)
            s.state = StreamState.HALF_CLOSED_LOCAL
        fragment = b""
        incomplete = payload is None
        if payload is not None:
            cur = Cursor(payload)
            pad = self._unpad(cur, flags, f, problems)
            if pad is None:
                incomplete = True
            else:
                if flags & Flag.PRIORITY:
                    dep = cur.pull_u32()
                    f["exclusive"] = bool(dep >> 31)
                    f["stream_dependency"] = dep & 0x7FFF_FFFF
                    f["weight"] = cur.pull_u8() + 1
                    if pad > cur.remaining:
                        problems.append(("padding_exceeds_payload", "padding overruns the block"))
                        pad = None
                        incomplete = True
                if pad is not None:
                    fragment = cur.pull_bytes(cur.remaining - pad)
        f["fragment_length"] = len(fragment)
        blk = _Block(
            direction=d,
            offset=off,
            stream_id=sid,
            frame_type=FrameType.HEADERS,
            end_stream=end_stream,
            promised_stream_id=None,
            fragments=[],
            size=0,
            frames=0,
            incomplete=incomplete,
        )
        self._block[d] = blk
        self._add_fragment(d, blk, fragment, flags, end, after)

    def _on_push_promise(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        f["end_headers"] = bool(flags & Flag.END_HEADERS)
        if d == C2S:
            # §8.4: "A client cannot push. Thus, servers MUST treat the receipt of a
            # PUSH_PROMISE frame as a connection error of type PROTOCOL_ERROR."
            problems.append(("push_promise_from_client", "a client sent PUSH_PROMISE"))
        if not self._need_stream(sid, "PUSH_PROMISE", problems):
            self._hpack_lost[d] = True
            return
        fragment = b""
        promised: int | None = None
        incomplete = payload is None
        if payload is not None:
            cur = Cursor(payload)
            pad = self._unpad(cur, flags, f, problems)
            promised = cur.pull_u32() & 0x7FFF_FFFF
            f["promised_stream_id"] = promised
            if pad is None or pad > cur.remaining:
                if pad is not None:
                    problems.append(("padding_exceeds_payload", "padding overruns the block"))
                incomplete = True
            else:
                fragment = cur.pull_bytes(cur.remaining - pad)
        f["fragment_length"] = len(fragment)
        if promised is not None:
            p = self._stream(promised)
            if p.state == StreamState.IDLE:
                p.state = StreamState.RESERVED_REMOTE
            else:
                problems.append(
                    ("invalid_stream_id", f"promised stream {promised} is {p.state.value}")
                )
            p.promised_by = sid
        blk = _Block(
            direction=d,
            offset=off,
            stream_id=sid,
            frame_type=FrameType.PUSH_PROMISE,
            end_stream=False,
            promised_stream_id=promised,
            fragments=[],
            size=0,
            frames=0,
            incomplete=incomplete,
        )
        self._block[d] = blk
        self._add_fragment(d, blk, fragment, flags, end, after)

    def _on_continuation(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        f["end_headers"] = bool(flags & Flag.END_HEADERS)
        f["fragment_length"] = length
        blk = self._block[d]
        if blk is None:
            # §6.10: a CONTINUATION not preceded by HEADERS, PUSH_PROMISE or CONTINUATION
            # without END_HEADERS "MUST" be a connection error of type PROTOCOL_ERROR.
            problems.append(
                ("unexpected_continuation", f"CONTINUATION on stream {sid} outside a header block")
            )
            self._hpack_lost[d] = True
            return
        if payload is None:
            blk.incomplete = True
        self._add_fragment(d, blk, payload or b"", flags, end, after)

    def _add_fragment(
        self,
        d: Direction,
        blk: _Block,
        fragment: bytes,
        flags: int,
        end: int,
        after: list[H2Event],
    ) -> None:
        blk.frames += 1
        blk.size += len(fragment)
        if blk.size > MAX_HEADER_BLOCK_LENGTH:
            self._error(
                after,
                d,
                blk.offset,
                blk.stream_id,
                "header_block_too_large",
                f"header block exceeds {MAX_HEADER_BLOCK_LENGTH} octets; its headers are unknown",
            )
            self._abort_block(d, blk, "header_block_too_large", end, after)
            return
        blk.fragments.append(fragment)
        if flags & Flag.END_HEADERS:
            self._complete_block(d, blk, end, after)

    def _abort_block(
        self, d: Direction, blk: _Block, reason: str, end: int, after: list[H2Event]
    ) -> None:
        """A header block that will never be decoded: the dynamic table is lost."""
        self._hpack_lost[d] = True
        blk.incomplete = True
        self._complete_block(d, blk, end, after, reason=reason)

    def _complete_block(
        self,
        d: Direction,
        blk: _Block,
        end: int,
        after: list[H2Event],
        reason: str | None = None,
    ) -> None:
        self._block[d] = None
        headers: tuple[tuple[str, str], ...] | None = None
        never: tuple[str, ...] = ()
        error = reason
        dec = self._decoders[d]
        if error is None and blk.incomplete:
            error = "incomplete"
            self._hpack_lost[d] = True
        elif error is None and self._hpack_lost[d]:
            error = "hpack_state_lost"
        elif error is None:
            try:
                decoded = dec.decode(b"".join(blk.fragments), raw=True)
            except Exception as exc:  # noqa: BLE001 - hpack may raise beyond HPACKError
                # RFC 9113 §4.3: a decoding error is a COMPRESSION_ERROR; the dynamic
                # table is unusable from here on.
                self._hpack_lost[d] = True
                error = f"hpack_decoding_error: {type(exc).__name__}: {exc}"
                self._error(
                    after,
                    d,
                    blk.offset,
                    blk.stream_id,
                    "hpack_decoding_error",
                    f"{type(exc).__name__}: {exc}; later header blocks in this direction "
                    "are unknown",
                )
            else:
                headers = tuple((_text(bytes(h[0])), _text(bytes(h[1]))) for h in decoded)
                never = tuple(
                    _text(bytes(h[0])) for h in decoded if isinstance(h, NeverIndexedHeaderTuple)
                )
        kind = self._classify(d, blk, headers)
        hb = HeaderBlock(
            direction=d,
            offset=blk.offset,
            end=end,
            stream_id=blk.stream_id,
            frame_type=blk.frame_type,
            kind=kind,
            end_stream=blk.end_stream,
            fragment_length=blk.size,
            frames=blk.frames,
            headers=headers,
            never_indexed=never,
            promised_stream_id=blk.promised_stream_id,
            error=error,
            table_size=None if self._hpack_lost[d] else dec.header_table_size,
        )
        after.append(hb)
        self._attach(d, blk, hb, end)

    def _classify(
        self, d: Direction, blk: _Block, headers: tuple[tuple[str, str], ...] | None
    ) -> str:
        """RFC 9113 §8.1: request / response (1xx informational first) / trailers."""
        if blk.frame_type == FrameType.PUSH_PROMISE:
            return "push_promise"
        s = self._stream(blk.stream_id)
        if d == C2S:
            return "request" if s.request_headers is None else "trailers"
        if s.response_headers is not None:
            return "trailers"
        if headers is None:
            return "unknown"
        status = next((v for k, v in headers if k == ":status"), None)
        if status is None:
            # a response must carry :status; a second block without it is trailers
            return "trailers" if s.informational else "unknown"
        if len(status) == 3 and status.startswith("1"):
            return "informational"
        return "response"

    def _attach(self, d: Direction, blk: _Block, hb: HeaderBlock, end: int) -> None:
        s = self._stream(blk.stream_id)
        s.header_blocks.append(hb)
        if hb.headers is None:
            s.headers_unknown = True
        if blk.frame_type == FrameType.PUSH_PROMISE:
            if blk.promised_stream_id is not None:
                p = self._stream(blk.promised_stream_id)
                p.request_headers = hb
                p.header_blocks.append(hb)
                if hb.headers is None:
                    p.headers_unknown = True
            return
        if hb.kind == "request":
            s.request_headers = hb
        elif hb.kind == "response":
            s.response_headers = hb
        elif hb.kind == "informational":
            s.informational.append(hb)
        elif hb.kind == "trailers":
            if d == C2S:
                s.request_trailers = hb
            else:
                s.response_trailers = hb
        if blk.end_stream:
            self._end_stream(d, s, end)

    def _end_stream(self, d: Direction, s: H2Stream, end: int) -> None:
        """§5.1: END_STREAM moves open → half-closed, half-closed → closed."""
        s.end_stream_offset[d] = end
        mine, theirs = (
            (StreamState.HALF_CLOSED_LOCAL, StreamState.HALF_CLOSED_REMOTE)
            if d == C2S
            else (StreamState.HALF_CLOSED_REMOTE, StreamState.HALF_CLOSED_LOCAL)
        )
        if s.state in (StreamState.OPEN, StreamState.IDLE):
            s.state = mine
        elif s.state == theirs:
            s.state = StreamState.CLOSED

    def _on_priority(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        self._need_stream(sid, "PRIORITY", problems)
        if length != 5:
            # §6.3: "A PRIORITY frame with a length other than 5 octets MUST be treated as a
            # stream error of type FRAME_SIZE_ERROR."
            problems.append(("frame_size_error", f"PRIORITY of length {length}, not 5"))
            return
        if payload is None:
            return
        cur = Cursor(payload)
        dep = cur.pull_u32()
        f["exclusive"] = bool(dep >> 31)
        f["stream_dependency"] = dep & 0x7FFF_FFFF
        f["weight"] = cur.pull_u8() + 1

    def _on_rst_stream(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        if not self._need_stream(sid, "RST_STREAM", problems):
            return
        if length != 4:
            # §6.4: "A RST_STREAM frame with a length other than 4 octets MUST be treated as a
            # connection error of type FRAME_SIZE_ERROR."
            problems.append(("frame_size_error", f"RST_STREAM of length {length}, not 4"))
            return
        s = self._stream(sid)
        if s.state == StreamState.IDLE:
            # §6.4: "If a RST_STREAM frame identifying an idle stream is received, the
            # recipient MUST treat this as a connection error of type PROTOCOL_ERROR."
            problems.append(("rst_stream_on_idle_stream", f"RST_STREAM on idle stream {sid}"))
        s.state = StreamState.CLOSED
        if payload is None:
            return
        code = Cursor(payload).pull_u32()
        f["error_code"] = code
        if s.rst_stream is None:
            s.rst_stream = RstStream(direction=d, offset=off, error_code=code)

    def _on_settings(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        ack = bool(flags & Flag.ACK)
        f["ack"] = ack
        self._need_connection(sid, "SETTINGS", problems)
        if ack:
            if length:
                # §6.5: "Receipt of a SETTINGS frame with the ACK flag set and a length field
                # value other than 0 MUST be treated as a connection error ... FRAME_SIZE_ERROR"
                problems.append(("frame_size_error", f"SETTINGS ACK of length {length}"))
            pending = self._pending_settings[_other(d)]
            if not pending:
                problems.append(("unexpected_settings_ack", "SETTINGS ACK with nothing to ack"))
                return
            self._apply_settings(d, pending.popleft(), off, end)
            return
        if length % 6:
            # §6.5: "A SETTINGS frame with a length other than a multiple of 6 octets MUST be
            # treated as a connection error of type FRAME_SIZE_ERROR."
            problems.append(("frame_size_error", f"SETTINGS of length {length}"))
            return
        if payload is None:
            return
        cur = Cursor(payload)
        params: list[tuple[int, int]] = []
        while not cur.eof():
            ident = cur.pull_u16()
            value = cur.pull_u32()
            params.append((ident, value))
            bad = _check_setting(ident, value)
            if bad is not None:
                problems.append(("invalid_setting", bad))
            else:
                self.settings[d][ident] = value
        f["settings"] = tuple(params)
        self._pending_settings[d].append(
            tuple(p for p in params if _check_setting(p[0], p[1]) is None)
        )

    def _apply_settings(
        self, acker: Direction, params: tuple[tuple[int, int], ...], off: int, end: int
    ) -> None:
        """``acker`` acknowledged the peer's SETTINGS: they now govern what ``acker`` sends."""
        for ident, value in params:
            if ident == SettingsParameter.INITIAL_WINDOW_SIZE:
                # §6.9.2: "When the value of SETTINGS_INITIAL_WINDOW_SIZE changes, a receiver
                # MUST adjust the size of all stream flow-control windows that it maintains by
                # the difference between the new value and the old value."
                delta = value - self._initial_window[acker]
                self._initial_window[acker] = value
                if delta:
                    wins = self._stream_window[acker]
                    for sid in sorted(wins):
                        st = self.streams.get(sid)
                        if st is not None and st.state == StreamState.CLOSED:
                            continue
                        wins[sid] += delta
                        self.window_series.append(
                            WindowSample(
                                sender=acker,
                                stream_id=sid,
                                cause="SETTINGS",
                                frame_direction=acker,
                                offset=off,
                                end=end,
                                stream_window=wins[sid],
                                connection_window=self._conn_window[acker],
                            )
                        )
            elif ident == SettingsParameter.MAX_FRAME_SIZE:
                self._max_frame_size[acker] = value
            elif ident == SettingsParameter.HEADER_TABLE_SIZE:
                # RFC 7541 §4.2: the encoder (``acker``) may now use up to this size; the
                # decoder of its header blocks enforces it as the maximum allowed.
                self._decoders[acker].max_allowed_table_size = value

    def _on_ping(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        ack = bool(flags & Flag.ACK)
        f["ack"] = ack
        self._need_connection(sid, "PING", problems)
        if length != 8:
            # §6.7: "Receipt of a PING frame with a length field value other than 8 MUST be
            # treated as a connection error of type FRAME_SIZE_ERROR."
            problems.append(("frame_size_error", f"PING of length {length}, not 8"))
            return
        if payload is None:
            return
        f["opaque_data"] = payload
        if not ack:
            self._pings[d].setdefault(payload, deque()).append((off, end))
            return
        waiting = self._pings[_other(d)].get(payload)
        if not waiting:
            problems.append(("unmatched_ping_ack", "PING ACK without a matching PING"))
            return
        p_off, p_end = waiting.popleft()
        self.ping_round_trips.append(
            PingRoundTrip(
                direction=_other(d),
                opaque_data=payload,
                ping_offset=p_off,
                ping_end=p_end,
                ack_offset=off,
                ack_end=end,
            )
        )

    def _on_goaway(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        self._need_connection(sid, "GOAWAY", problems)
        if length < 8:
            problems.append(("frame_size_error", f"GOAWAY of length {length} < 8"))
            return
        if payload is None:
            return
        cur = Cursor(payload)
        last = cur.pull_u32() & 0x7FFF_FFFF
        code = cur.pull_u32()
        debug = cur.rest()
        f["last_stream_id"] = last
        f["error_code"] = code
        f["debug_data"] = debug
        self.goaways.append(
            GoAway(direction=d, offset=off, last_stream_id=last, error_code=code, debug_data=debug)
        )

    def _on_window_update(
        self,
        d: Direction,
        off: int,
        end: int,
        length: int,
        flags: int,
        sid: int,
        payload: bytes | None,
        f: dict[str, object],
        problems: list[tuple[str, str]],
        after: list[H2Event],
    ) -> None:
        if length != 4:
            # §6.9: "A WINDOW_UPDATE frame with a length other than 4 octets MUST be treated as
            # a connection error of type FRAME_SIZE_ERROR."
            problems.append(("frame_size_error", f"WINDOW_UPDATE of length {length}, not 4"))
            return
        if payload is None:
            return
        inc = Cursor(payload).pull_u32() & 0x7FFF_FFFF
        f["window_size_increment"] = inc
        if inc == 0:
            # §6.9: "A receiver MUST treat the receipt of a WINDOW_UPDATE frame with a
            # flow-control window increment of 0 as a stream error of type PROTOCOL_ERROR".
            problems.append(("zero_window_increment", "WINDOW_UPDATE increment 0"))
        sender = _other(d)  # whose send window this credits
        sw: int | None = None
        if sid == 0:
            self._conn_window[sender] += inc
        else:
            sw = self._swin(sender, sid) + inc
            self._stream_window[sender][sid] = sw
        cw = self._conn_window[sender]
        if max(cw, sw or 0) > MAX_WINDOW_SIZE:
            # §6.9.1: "If a sender receives a WINDOW_UPDATE that causes a flow-control window
            # to exceed this maximum, it MUST terminate either the stream or the connection".
            problems.append(("window_overflow", f"window exceeds 2^31-1 after +{inc}"))
        f["stream_window"] = sw
        f["connection_window"] = cw
        self.window_series.append(
            WindowSample(
                sender=sender,
                stream_id=sid,
                cause="WINDOW_UPDATE",
                frame_direction=d,
                offset=off,
                end=end,
                stream_window=sw,
                connection_window=cw,
            )
        )


def _check_setting(ident: int, value: int) -> str | None:
    """RFC 9113 §6.5.2 value rules; the reason if ``value`` is invalid."""
    if ident == SettingsParameter.ENABLE_PUSH and value > 1:
        return f"SETTINGS_ENABLE_PUSH = {value} (must be 0 or 1)"
    if ident == SettingsParameter.INITIAL_WINDOW_SIZE and value > MAX_WINDOW_SIZE:
        return f"SETTINGS_INITIAL_WINDOW_SIZE = {value} > 2^31-1"
    if ident == SettingsParameter.MAX_FRAME_SIZE and not (
        DEFAULT_MAX_FRAME_SIZE <= value <= MAX_ALLOWED_FRAME_SIZE
    ):
        return f"SETTINGS_MAX_FRAME_SIZE = {value} outside [2^14, 2^24-1]"
    return None


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


_Handler = Callable[
    [
        H2Connection,
        Direction,
        int,
        int,
        int,
        int,
        int,
        "bytes | None",
        "dict[str, object]",
        "list[tuple[str, str]]",
        "list[H2Event]",
    ],
    None,
]
_HANDLERS: dict[int, _Handler] = {
    FrameType.DATA: H2Connection._on_data,
    FrameType.HEADERS: H2Connection._on_headers,
    FrameType.PRIORITY: H2Connection._on_priority,
    FrameType.RST_STREAM: H2Connection._on_rst_stream,
    FrameType.SETTINGS: H2Connection._on_settings,
    FrameType.PUSH_PROMISE: H2Connection._on_push_promise,
    FrameType.PING: H2Connection._on_ping,
    FrameType.GOAWAY: H2Connection._on_goaway,
    FrameType.WINDOW_UPDATE: H2Connection._on_window_update,
    FrameType.CONTINUATION: H2Connection._on_continuation,
}


def headers_dict(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict (repeated names joined with ", ", cookies with "; ", §8.2.3)."""
    out: dict[str, str] = {}
    for k, v in headers:
        if k in out:
            out[k] += ("; " if k == "cookie" else ", ") + v
        else:
            out[k] = v
    return out

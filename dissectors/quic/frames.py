"""QUIC frames: RFC 9000 §19 (PADDING … HANDSHAKE_DONE) and RFC 9221 §4 (DATAGRAM).

:func:`parse_frame` is the one-shot parser ``(frame, next_offset)``; :func:`parse_frames`
parses a whole decrypted packet payload.  Every frame record carries ``frame_offset`` and
``frame_length`` (its position in the plaintext payload) and the raw ``frame_type``; the
other fields are the RFC's in snake_case (so STREAM and CRYPTO ``offset``/``length`` are in
stream coordinates).  A run of PADDING bytes becomes one :class:`Padding` record.

Rules enforced (each raises :class:`~dissectors.errors.Malformed` for the packet):

* an unknown frame type (§12.4: "An endpoint MUST treat the receipt of a frame of unknown
  type as a connection error of type FRAME_ENCODING_ERROR"): :class:`UnknownFrameType`;
* a packet with no frames (§12.4: "An endpoint MUST treat receipt of a packet containing
  no frames as a connection error of type PROTOCOL_VIOLATION");
* STREAM/CRYPTO data beyond 2^62-1 (§19.6, §19.8), an ACK range below packet number 0
  (§19.3.1), NEW_CONNECTION_ID with a length outside 1..20 or Retire Prior To greater than
  its Sequence Number (§19.15), an empty NEW_TOKEN (§19.7), MAX_STREAMS /
  STREAMS_BLOCKED over 2^60 (§19.11, §19.14).

:func:`frame_allowed` answers §12.4 Table 3 (which frames each packet type may carry).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from .._wire import Buffer, Cursor
from ..errors import DissectError, Malformed
from .packet import PacketType

__all__ = [
    "Ack",
    "ConnectionClose",
    "Crypto",
    "DataBlocked",
    "Datagram",
    "Frame",
    "FrameError",
    "FrameType",
    "HandshakeDone",
    "MaxData",
    "MaxStreamData",
    "MaxStreams",
    "NewConnectionId",
    "NewToken",
    "Padding",
    "PathChallenge",
    "PathResponse",
    "Ping",
    "ResetStream",
    "RetireConnectionId",
    "StopSending",
    "Stream",
    "StreamDataBlocked",
    "StreamsBlocked",
    "UnknownFrameType",
    "frame_allowed",
    "frame_name",
    "parse_frame",
    "parse_frames",
]

#: RFC 9000 §19.8: "The largest offset delivered on a stream -- the sum of the offset and
#: data length -- cannot exceed 2^62-1".
MAX_STREAM_OFFSET: Final = (1 << 62) - 1
#: RFC 9000 §19.11: "This value cannot exceed 2^60".
MAX_STREAMS_LIMIT: Final = 1 << 60


class FrameType(IntEnum):
    PADDING = 0x00
    PING = 0x01
    ACK = 0x02
    ACK_ECN = 0x03
    RESET_STREAM = 0x04
    STOP_SENDING = 0x05
    CRYPTO = 0x06
    NEW_TOKEN = 0x07
    STREAM = 0x08  # 0x08..0x0f: OFF 0x04, LEN 0x02, FIN 0x01
    MAX_DATA = 0x10
    MAX_STREAM_DATA = 0x11
    MAX_STREAMS_BIDI = 0x12
    MAX_STREAMS_UNI = 0x13
    DATA_BLOCKED = 0x14
    STREAM_DATA_BLOCKED = 0x15
    STREAMS_BLOCKED_BIDI = 0x16
    STREAMS_BLOCKED_UNI = 0x17
    NEW_CONNECTION_ID = 0x18
    RETIRE_CONNECTION_ID = 0x19
    PATH_CHALLENGE = 0x1A
    PATH_RESPONSE = 0x1B
    CONNECTION_CLOSE = 0x1C
    CONNECTION_CLOSE_APP = 0x1D
    HANDSHAKE_DONE = 0x1E
    DATAGRAM = 0x30  # RFC 9221 §4
    DATAGRAM_LEN = 0x31


def frame_name(frame_type: int) -> str:
    if 0x08 <= frame_type <= 0x0F:
        return "STREAM"
    try:
        return FrameType(frame_type).name
    except ValueError:
        return f"UNKNOWN(0x{frame_type:x})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Padding:
    frame_offset: int
    frame_length: int  # number of PADDING bytes in the run
    frame_type: int = 0x00


@dataclass(frozen=True, slots=True, kw_only=True)
class Ping:
    frame_offset: int
    frame_length: int
    frame_type: int = 0x01


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """§19.3.  ``ranges`` are the acknowledged (smallest, largest) packet numbers, largest
    first; ``ecn_counts`` = (ECT0, ECT1, ECN-CE) for type 0x03."""

    frame_offset: int
    frame_length: int
    frame_type: int
    largest_acknowledged: int
    ack_delay: int
    first_ack_range: int
    ranges: tuple[tuple[int, int], ...]
    ecn_counts: tuple[int, int, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetStream:
    frame_offset: int
    frame_length: int
    stream_id: int
    application_protocol_error_code: int
    final_size: int
    frame_type: int = 0x04


@dataclass(frozen=True, slots=True, kw_only=True)
class StopSending:
    frame_offset: int
    frame_length: int
    stream_id: int
    application_protocol_error_code: int
    frame_type: int = 0x05


@dataclass(frozen=True, slots=True, kw_only=True)
class Crypto:
    """§19.6: ``offset``/``length`` in the crypto stream of the packet number space."""

    frame_offset: int
    frame_length: int
    offset: int
    length: int
    data: bytes
    frame_type: int = 0x06


@dataclass(frozen=True, slots=True, kw_only=True)
class NewToken:
    frame_offset: int
    frame_length: int
    token: bytes
    frame_type: int = 0x07


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """§19.8: ``offset``/``length`` in the stream; ``fin`` marks the final size."""

    frame_offset: int
    frame_length: int
    frame_type: int
    stream_id: int
    offset: int
    length: int
    fin: bool
    data: bytes

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxData:
    frame_offset: int
    frame_length: int
    maximum_data: int
    frame_type: int = 0x10


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxStreamData:
    frame_offset: int
    frame_length: int
    stream_id: int
    maximum_stream_data: int
    frame_type: int = 0x11


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxStreams:
    frame_offset: int
    frame_length: int
    frame_type: int
    bidirectional: bool
    maximum_streams: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DataBlocked:
    frame_offset: int
    frame_length: int
    maximum_data: int
    frame_type: int = 0x14


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDataBlocked:
    frame_offset: int
    frame_length: int
    stream_id: int
    maximum_stream_data: int
    frame_type: int = 0x15


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsBlocked:
    frame_offset: int
    frame_length: int
    frame_type: int
    bidirectional: bool
    maximum_streams: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NewConnectionId:
    frame_offset: int
    frame_length: int
    sequence_number: int
    retire_prior_to: int
    connection_id: bytes
    stateless_reset_token: bytes
    frame_type: int = 0x18


@dataclass(frozen=True, slots=True, kw_only=True)
class RetireConnectionId:
    frame_offset: int
    frame_length: int
    sequence_number: int
    frame_type: int = 0x19


@dataclass(frozen=True, slots=True, kw_only=True)
class PathChallenge:
    frame_offset: int
    frame_length: int
    data: bytes
    frame_type: int = 0x1A


@dataclass(frozen=True, slots=True, kw_only=True)
class PathResponse:
    frame_offset: int
    frame_length: int
    data: bytes
    frame_type: int = 0x1B


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionClose:
    """§19.19: type 0x1c (transport, with the offending ``error_frame_type``) or 0x1d
    (application)."""

    frame_offset: int
    frame_length: int
    frame_type: int
    error_code: int
    error_frame_type: int | None
    reason_phrase: bytes

    @property
    def application(self) -> bool:
        return self.frame_type == FrameType.CONNECTION_CLOSE_APP


@dataclass(frozen=True, slots=True, kw_only=True)
class HandshakeDone:
    frame_offset: int
    frame_length: int
    frame_type: int = 0x1E


@dataclass(frozen=True, slots=True, kw_only=True)
class Datagram:
    """RFC 9221 §4: type 0x30 runs to the end of the packet, 0x31 has a Length."""

    frame_offset: int
    frame_length: int
    frame_type: int
    data: bytes


Frame = (
    Padding
    | Ping
    | Ack
    | ResetStream
    | StopSending
    | Crypto
    | NewToken
    | Stream
    | MaxData
    | MaxStreamData
    | MaxStreams
    | DataBlocked
    | StreamDataBlocked
    | StreamsBlocked
    | NewConnectionId
    | RetireConnectionId
    | PathChallenge
    | PathResponse
    | ConnectionClose
    | HandshakeDone
    | Datagram
)


class FrameError(Malformed):
    """A packet payload that does not parse; ``frames`` holds the frames before the error."""

    def __init__(
        self, message: str, *, offset: int | None = None, frames: tuple[Frame, ...] = ()
    ) -> None:
        super().__init__(message, offset=offset)
        self.frames = frames


class UnknownFrameType(FrameError):
    """RFC 9000 §12.4: unknown frame types are FRAME_ENCODING_ERROR."""

    def __init__(
        self,
        message: str,
        *,
        frame_type: int,
        offset: int | None = None,
        frames: tuple[Frame, ...] = (),
    ) -> None:
        super().__init__(message, offset=offset, frames=frames)
        self.frame_type = frame_type


def _ack(cur: Cursor, start: int, t: int) -> Ack:
    largest = cur.pull_varint()
    delay = cur.pull_varint()
    count = cur.pull_varint()
    first = cur.pull_varint()
    hi = largest
    lo = largest - first
    if lo < 0:
        raise Malformed(f"ACK first range {first} below packet number 0", offset=start)
    ranges = [(lo, hi)]
    if count > cur.remaining:  # each range takes at least 2 bytes: cheap bound before looping
        raise Malformed(f"ACK Range Count {count} exceeds the frame", offset=start)
    for _ in range(count):
        gap = cur.pull_varint()
        length = cur.pull_varint()
        # §19.3.1: largest = previous smallest - gap - 2; smallest = largest - ack range length
        hi = lo - gap - 2
        lo = hi - length
        if lo < 0:
            # "If any computed packet number is negative, an endpoint MUST generate a
            # connection error of type FRAME_ENCODING_ERROR."
            raise Malformed("ACK range below packet number 0", offset=start)
        ranges.append((lo, hi))
    ecn = None
    if t == FrameType.ACK_ECN:
        ecn = (cur.pull_varint(), cur.pull_varint(), cur.pull_varint())
    return Ack(
        frame_offset=start,
        frame_length=cur.pos - start,
        frame_type=t,
        largest_acknowledged=largest,
        ack_delay=delay,
        first_ack_range=first,
        ranges=tuple(ranges),
        ecn_counts=ecn,
    )


def parse_frame(buf: Buffer, offset: int = 0) -> tuple[Frame, int]:
    """Parse the frame at ``offset`` of a decrypted payload; return it and the next offset."""
    cur = Cursor(buf, offset)
    start = offset
    t = cur.pull_varint()
    f: Frame
    if t == FrameType.PADDING:
        b = cur.buf
        p = cur.pos
        while p < cur.end and b[p] == 0:
            p += 1
        cur.pos = p
        f = Padding(frame_offset=start, frame_length=p - start)
    elif t == FrameType.PING:
        f = Ping(frame_offset=start, frame_length=cur.pos - start)
    elif t in (FrameType.ACK, FrameType.ACK_ECN):
        f = _ack(cur, start, t)
    elif t == FrameType.RESET_STREAM:
        sid, code, final = cur.pull_varint(), cur.pull_varint(), cur.pull_varint()
        f = ResetStream(
            frame_offset=start,
            frame_length=cur.pos - start,
            stream_id=sid,
            application_protocol_error_code=code,
            final_size=final,
        )
    elif t == FrameType.STOP_SENDING:
        sid, code = cur.pull_varint(), cur.pull_varint()
        f = StopSending(
            frame_offset=start,
            frame_length=cur.pos - start,
            stream_id=sid,
            application_protocol_error_code=code,
        )
    elif t == FrameType.CRYPTO:
        off = cur.pull_varint()
        n = cur.pull_varint()
        if off + n > MAX_STREAM_OFFSET:
            raise Malformed("CRYPTO data beyond 2^62-1", offset=start)
        data = cur.pull_bytes(n)
        f = Crypto(
            frame_offset=start, frame_length=cur.pos - start, offset=off, length=n, data=data
        )
    elif t == FrameType.NEW_TOKEN:
        token = cur.pull_bytes(cur.pull_varint())
        if not token:
            # §19.7: "A client MUST treat receipt of a NEW_TOKEN frame with an empty Token
            # field as a connection error of type FRAME_ENCODING_ERROR."
            raise Malformed("empty NEW_TOKEN", offset=start)
        f = NewToken(frame_offset=start, frame_length=cur.pos - start, token=token)
    elif 0x08 <= t <= 0x0F:
        sid = cur.pull_varint()
        off = cur.pull_varint() if t & 0x04 else 0
        n = cur.pull_varint() if t & 0x02 else cur.remaining
        if off + n > MAX_STREAM_OFFSET:
            raise Malformed("STREAM data beyond 2^62-1", offset=start)
        data = cur.pull_bytes(n)
        f = Stream(
            frame_offset=start,
            frame_length=cur.pos - start,
            frame_type=t,
            stream_id=sid,
            offset=off,
            length=n,
            fin=bool(t & 0x01),
            data=data,
        )
    elif t == FrameType.MAX_DATA:
        f = MaxData(frame_offset=start, frame_length=0, maximum_data=cur.pull_varint())
    elif t == FrameType.MAX_STREAM_DATA:
        sid, mx = cur.pull_varint(), cur.pull_varint()
        f = MaxStreamData(frame_offset=start, frame_length=0, stream_id=sid, maximum_stream_data=mx)
    elif t in (FrameType.MAX_STREAMS_BIDI, FrameType.MAX_STREAMS_UNI):
        mx = cur.pull_varint()
        if mx > MAX_STREAMS_LIMIT:
            raise Malformed(f"MAX_STREAMS {mx} > 2^60", offset=start)
        f = MaxStreams(
            frame_offset=start,
            frame_length=0,
            frame_type=t,
            bidirectional=t == FrameType.MAX_STREAMS_BIDI,
            maximum_streams=mx,
        )
    elif t == FrameType.DATA_BLOCKED:
        f = DataBlocked(frame_offset=start, frame_length=0, maximum_data=cur.pull_varint())
    elif t == FrameType.STREAM_DATA_BLOCKED:
        sid, mx = cur.pull_varint(), cur.pull_varint()
        f = StreamDataBlocked(
            frame_offset=start, frame_length=0, stream_id=sid, maximum_stream_data=mx
        )
    elif t in (FrameType.STREAMS_BLOCKED_BIDI, FrameType.STREAMS_BLOCKED_UNI):
        mx = cur.pull_varint()
        if mx > MAX_STREAMS_LIMIT:
            raise Malformed(f"STREAMS_BLOCKED {mx} > 2^60", offset=start)
        f = StreamsBlocked(
            frame_offset=start,
            frame_length=0,
            frame_type=t,
            bidirectional=t == FrameType.STREAMS_BLOCKED_BIDI,
            maximum_streams=mx,
        )
    elif t == FrameType.NEW_CONNECTION_ID:
        seq, retire = cur.pull_varint(), cur.pull_varint()
        n = cur.pull_u8()
        if not 1 <= n <= 20:
            # §19.15: "Values less than 1 and greater than 20 are invalid and MUST be
            # treated as a connection error of type FRAME_ENCODING_ERROR."
            raise Malformed(f"NEW_CONNECTION_ID length {n}", offset=start)
        if retire > seq:
            # §19.15: "The value in the Retire Prior To field MUST be less than or equal to
            # the value in the Sequence Number field."
            raise Malformed("NEW_CONNECTION_ID Retire Prior To > Sequence Number", offset=start)
        cid = cur.pull_bytes(n)
        token = cur.pull_bytes(16)
        f = NewConnectionId(
            frame_offset=start,
            frame_length=0,
            sequence_number=seq,
            retire_prior_to=retire,
            connection_id=cid,
            stateless_reset_token=token,
        )
    elif t == FrameType.RETIRE_CONNECTION_ID:
        f = RetireConnectionId(
            frame_offset=start, frame_length=0, sequence_number=cur.pull_varint()
        )
    elif t == FrameType.PATH_CHALLENGE:
        f = PathChallenge(frame_offset=start, frame_length=0, data=cur.pull_bytes(8))
    elif t == FrameType.PATH_RESPONSE:
        f = PathResponse(frame_offset=start, frame_length=0, data=cur.pull_bytes(8))
    elif t in (FrameType.CONNECTION_CLOSE, FrameType.CONNECTION_CLOSE_APP):
        code = cur.pull_varint()
        eft = cur.pull_varint() if t == FrameType.CONNECTION_CLOSE else None
        reason = cur.pull_bytes(cur.pull_varint())
        f = ConnectionClose(
            frame_offset=start,
            frame_length=0,
            frame_type=t,
            error_code=code,
            error_frame_type=eft,
            reason_phrase=reason,
        )
    elif t == FrameType.HANDSHAKE_DONE:
        f = HandshakeDone(frame_offset=start, frame_length=cur.pos - start)
    elif t in (FrameType.DATAGRAM, FrameType.DATAGRAM_LEN):
        n = cur.pull_varint() if t == FrameType.DATAGRAM_LEN else cur.remaining
        f = Datagram(frame_offset=start, frame_length=0, frame_type=t, data=cur.pull_bytes(n))
    else:
        raise UnknownFrameType(f"unknown frame type 0x{t:x}", frame_type=t, offset=start)
    if f.frame_length != cur.pos - start:
        object.__setattr__(f, "frame_length", cur.pos - start)
    return f, cur.pos


def parse_frames(payload: Buffer) -> list[Frame]:
    """All frames of one decrypted packet payload (RFC 9000 §12.4).

    Raises :class:`FrameError` (a :class:`Malformed`) carrying the frames parsed before
    the error.
    """
    out: list[Frame] = []
    n = len(payload)
    if n == 0:
        raise FrameError("packet contains no frames", offset=0)
    off = 0
    while off < n:
        try:
            f, off = parse_frame(payload, off)
        except UnknownFrameType as e:
            raise UnknownFrameType(
                str(e), frame_type=e.frame_type, offset=e.offset, frames=tuple(out)
            ) from None
        except DissectError as e:
            raise FrameError(
                f"{frame_name(payload[off]) if off < n else 'frame'} at {off}: {e}",
                offset=off,
                frames=tuple(out),
            ) from None
        out.append(f)
    return out


_LONG_HEADER_FRAMES: Final = frozenset(
    {FrameType.PADDING, FrameType.PING, FrameType.ACK, FrameType.ACK_ECN, FrameType.CRYPTO,
     FrameType.CONNECTION_CLOSE}
)  # fmt: skip
_NOT_IN_0RTT: Final = frozenset(
    {FrameType.ACK, FrameType.ACK_ECN, FrameType.CRYPTO, FrameType.HANDSHAKE_DONE,
     FrameType.NEW_TOKEN, FrameType.PATH_RESPONSE, FrameType.RETIRE_CONNECTION_ID}
)  # fmt: skip


def frame_allowed(frame_type: int, packet_type: PacketType) -> bool:
    """RFC 9000 §12.4 Table 3 ("IH01"): may ``frame_type`` appear in ``packet_type``?"""
    if packet_type in (PacketType.INITIAL, PacketType.HANDSHAKE):
        return frame_type in _LONG_HEADER_FRAMES
    if packet_type is PacketType.ZERO_RTT:
        return frame_type not in _NOT_IN_0RTT
    return True

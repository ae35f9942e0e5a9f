"""Frame parsing: every RFC 9000 §19 frame type and RFC 9221 DATAGRAM."""

from __future__ import annotations

import pytest

from dissectors._wire import encode_varint as v
from dissectors.errors import Malformed
from dissectors.quic import FrameError, PacketType, UnknownFrameType, parse_frame, parse_frames
from dissectors.quic.frames import (
    Ack,
    ConnectionClose,
    Crypto,
    DataBlocked,
    Datagram,
    FrameType,
    HandshakeDone,
    MaxData,
    MaxStreamData,
    MaxStreams,
    NewConnectionId,
    NewToken,
    Padding,
    PathChallenge,
    PathResponse,
    Ping,
    ResetStream,
    RetireConnectionId,
    StopSending,
    Stream,
    StreamDataBlocked,
    StreamsBlocked,
    frame_allowed,
    frame_name,
)

TOKEN16 = bytes(range(16))

CASES = [
    (b"\x00\x00\x00", Padding(frame_offset=0, frame_length=3)),
    (b"\x01", Ping(frame_offset=0, frame_length=1)),
    (
        b"\x04" + v(4) + v(7) + v(1000),
        ResetStream(
            frame_offset=0, frame_length=5, stream_id=4, application_protocol_error_code=7,
            final_size=1000,
        ),
    ),
    (
        b"\x05" + v(8) + v(0x10C),
        StopSending(frame_offset=0, frame_length=4, stream_id=8, application_protocol_error_code=0x10C),
    ),
    (
        b"\x06" + v(70) + v(3) + b"abc",
        Crypto(frame_offset=0, frame_length=7, offset=70, length=3, data=b"abc"),
    ),
    (b"\x07" + v(2) + b"tk", NewToken(frame_offset=0, frame_length=4, token=b"tk")),
    (b"\x10" + v(1 << 20), MaxData(frame_offset=0, frame_length=5, maximum_data=1 << 20)),
    (
        b"\x11" + v(0) + v(99),
        MaxStreamData(frame_offset=0, frame_length=4, stream_id=0, maximum_stream_data=99),
    ),
    (
        b"\x12" + v(100),
        MaxStreams(frame_offset=0, frame_length=3, frame_type=0x12, bidirectional=True, maximum_streams=100),
    ),
    (
        b"\x13" + v(3),
        MaxStreams(frame_offset=0, frame_length=2, frame_type=0x13, bidirectional=False, maximum_streams=3),
    ),
    (b"\x14" + v(5), DataBlocked(frame_offset=0, frame_length=2, maximum_data=5)),
    (
        b"\x15" + v(4) + v(6),
        StreamDataBlocked(frame_offset=0, frame_length=3, stream_id=4, maximum_stream_data=6),
    ),
    (
        b"\x16" + v(9),
        StreamsBlocked(frame_offset=0, frame_length=2, frame_type=0x16, bidirectional=True, maximum_streams=9),
    ),
    (
        b"\x17" + v(9),
        StreamsBlocked(frame_offset=0, frame_length=2, frame_type=0x17, bidirectional=False, maximum_streams=9),
    ),
    (
        b"\x18" + v(2) + v(1) + b"\x04" + b"wxyz" + TOKEN16,
        NewConnectionId(
            frame_offset=0, frame_length=24, sequence_number=2, retire_prior_to=1,
            connection_id=b"wxyz", stateless_reset_token=TOKEN16,
        ),
    ),
    (b"\x19" + v(3), RetireConnectionId(frame_offset=0, frame_length=2, sequence_number=3)),
    (b"\x1a" + b"12345678", PathChallenge(frame_offset=0, frame_length=9, data=b"12345678")),
    (b"\x1b" + b"12345678", PathResponse(frame_offset=0, frame_length=9, data=b"12345678")),
    (
        b"\x1c" + v(0x0A) + v(0x08) + v(3) + b"bad",
        ConnectionClose(
            frame_offset=0, frame_length=7, frame_type=0x1C, error_code=0x0A,
            error_frame_type=0x08, reason_phrase=b"bad",
        ),
    ),
    (
        b"\x1d" + v(0x100) + v(0),
        ConnectionClose(
            frame_offset=0, frame_length=4, frame_type=0x1D, error_code=0x100,
            error_frame_type=None, reason_phrase=b"",
        ),
    ),
    (b"\x1e", HandshakeDone(frame_offset=0, frame_length=1)),
    (b"\x30" + b"dgram", Datagram(frame_offset=0, frame_length=6, frame_type=0x30, data=b"dgram")),
    (b"\x31" + v(2) + b"hi", Datagram(frame_offset=0, frame_length=4, frame_type=0x31, data=b"hi")),
]  # fmt: skip


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[frame_name(c[0][0]) for c in CASES])
def test_each_frame_type(wire: bytes, expected: object) -> None:
    frame, nxt = parse_frame(wire)
    assert frame == expected
    assert nxt == len(wire)


@pytest.mark.parametrize("t", range(0x08, 0x10))
def test_stream_flag_combinations(t: int) -> None:
    wire = bytes((t,)) + v(4)
    if t & 0x04:
        wire += v(1000)
    if t & 0x02:
        wire += v(3)
    wire += b"xyz"
    (f,) = parse_frames(wire)
    assert isinstance(f, Stream)
    assert (f.stream_id, f.offset, f.length, f.fin, f.data) == (
        4, 1000 if t & 0x04 else 0, 3, bool(t & 1), b"xyz",
    )  # fmt: skip


def test_stream_without_length_runs_to_end_and_next_frames_follow_lengthed_one() -> None:
    wire = b"\x0a" + v(0) + v(2) + b"ab" + b"\x01" + b"\x08" + v(4) + b"rest"
    frames = parse_frames(wire)
    assert [type(f) for f in frames] == [Stream, Ping, Stream]
    assert frames[2].data == b"rest"  # type: ignore[union-attr]
    assert [f.frame_offset for f in frames] == [0, 5, 6]


def test_ack_ranges_decoded() -> None:
    # largest 100, delay 5, 2 extra ranges, first range 3 → 97..100; gap 1, len 2 → 92..94;
    # gap 0, len 0 → 90..90
    wire = b"\x02" + v(100) + v(5) + v(2) + v(3) + v(1) + v(2) + v(0) + v(0)
    (f,) = parse_frames(wire)
    assert isinstance(f, Ack)
    assert f.ranges == ((97, 100), (92, 94), (90, 90))
    assert f.ack_delay == 5 and f.ecn_counts is None
    (g,) = parse_frames(b"\x03" + wire[1:] + v(1) + v(2) + v(3))
    assert isinstance(g, Ack) and g.ecn_counts == (1, 2, 3) and g.frame_type == FrameType.ACK_ECN


def test_ack_below_zero_is_malformed() -> None:
    with pytest.raises(Malformed):
        parse_frame(b"\x02" + v(2) + v(0) + v(0) + v(3))
    with pytest.raises(Malformed):
        parse_frame(b"\x02" + v(5) + v(0) + v(1) + v(0) + v(3) + v(1))  # 5..5, then -1..0


def test_unknown_frame_type_keeps_earlier_frames() -> None:
    with pytest.raises(UnknownFrameType) as ei:
        parse_frames(b"\x01\x01\x21\x00")
    assert ei.value.frame_type == 0x21
    assert [type(f) for f in ei.value.frames] == [Ping, Ping]
    assert frame_name(0x21) == "UNKNOWN(0x21)"


@pytest.mark.parametrize(
    "wire",
    [
        b"",  # RFC 9000 §12.4: a packet with no frames
        b"\x07\x00",  # empty NEW_TOKEN
        b"\x18" + v(1) + v(2) + b"\x04wxyz" + TOKEN16,  # retire_prior_to > sequence
        b"\x18" + v(1) + v(0) + b"\x15" + bytes(21) + TOKEN16,  # CID length 21
        b"\x12" + v((1 << 60) + 1),  # MAX_STREAMS over 2^60
        b"\x0e" + v(0) + v((1 << 62) - 1) + v(2) + b"ab",  # offset + length > 2^62-1
        b"\x06" + v(0) + v(10) + b"abc",  # CRYPTO longer than the packet
    ],
)
def test_malformed_payloads(wire: bytes) -> None:
    with pytest.raises(FrameError):
        parse_frames(wire)


def test_frame_allowed_rfc9000_table3() -> None:
    assert frame_allowed(FrameType.CRYPTO, PacketType.INITIAL)
    assert not frame_allowed(0x08, PacketType.HANDSHAKE)
    assert not frame_allowed(FrameType.HANDSHAKE_DONE, PacketType.ZERO_RTT)
    assert frame_allowed(0x08, PacketType.ZERO_RTT)
    assert frame_allowed(FrameType.HANDSHAKE_DONE, PacketType.ONE_RTT)
    assert not frame_allowed(FrameType.CONNECTION_CLOSE_APP, PacketType.INITIAL)

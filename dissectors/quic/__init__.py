"""Sans-I/O QUIC dissectors: packets, protection, frames, reassembly, connections.

* :mod:`.packet` — long/short headers, Version Negotiation, Retry, coalesced packets
  (RFC 8999, RFC 9000 §17, RFC 9369 §3.2), :func:`looks_like_quic`
* :mod:`.crypto` — Initial secrets, packet and header protection, packet numbers, key
  updates, Retry integrity (RFC 9001 §5, §6; RFC 9369 §3.3; RFC 9000 App. A.3)
* :mod:`.frames` — every RFC 9000 §19 frame and RFC 9221 DATAGRAM
* :mod:`.reassembly` — CRYPTO / STREAM reassembly by offset (RFC 9000 §2.2)
* :mod:`.connection` — :class:`QuicConnection`, one connection's packets, TLS handshake,
  streams
"""

from .connection import (
    Anomaly,
    HandshakeEvent,
    HandshakeTiming,
    PacketRecord,
    QuicConnection,
    StreamFrameRow,
    TlsMessageRow,
)
from .crypto import (
    QUIC_SUITES,
    AuthenticationFailed,
    PacketProtection,
    QuicSuite,
    decode_packet_number,
    initial_protection,
    initial_secrets,
    next_traffic_secret,
    packet_keys,
    retry_integrity_tag,
    verify_retry,
)
from .frames import (
    Frame,
    FrameError,
    FrameType,
    UnknownFrameType,
    frame_name,
    parse_frame,
    parse_frames,
)
from .packet import (
    QUIC_DRAFT_29,
    QUIC_V1,
    QUIC_V2,
    DcidLengthUnknown,
    PacketHeader,
    PacketSpace,
    PacketType,
    iter_packets,
    looks_like_quic,
    parse_packet_header,
    version_name,
)
from .reassembly import AddResult, Reassembler, StreamData

__all__ = [
    "QUIC_DRAFT_29",
    "QUIC_SUITES",
    "QUIC_V1",
    "QUIC_V2",
    "AddResult",
    "Anomaly",
    "AuthenticationFailed",
    "DcidLengthUnknown",
    "Frame",
    "FrameError",
    "FrameType",
    "HandshakeEvent",
    "HandshakeTiming",
    "PacketHeader",
    "PacketProtection",
    "PacketRecord",
    "PacketSpace",
    "PacketType",
    "QuicConnection",
    "QuicSuite",
    "Reassembler",
    "StreamData",
    "StreamFrameRow",
    "TlsMessageRow",
    "UnknownFrameType",
    "decode_packet_number",
    "frame_name",
    "initial_protection",
    "initial_secrets",
    "iter_packets",
    "looks_like_quic",
    "next_traffic_secret",
    "packet_keys",
    "parse_frame",
    "parse_frames",
    "parse_packet_header",
    "retry_integrity_tag",
    "verify_retry",
    "version_name",
]

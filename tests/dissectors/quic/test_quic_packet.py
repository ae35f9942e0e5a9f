"""Header parsing (RFC 9000 §17, RFC 8999, RFC 9369 §3.2), coalescing (§12.2), recognition."""

from __future__ import annotations

import pytest

from dissectors._wire import encode_varint
from dissectors.errors import Malformed, Truncated
from dissectors.quic import (
    QUIC_DRAFT_29,
    QUIC_V1,
    QUIC_V2,
    DcidLengthUnknown,
    PacketSpace,
    PacketType,
    iter_packets,
    looks_like_quic,
    parse_packet_header,
    version_name,
)

DCID = bytes.fromhex("0001020304050607")
SCID = b"s_cid"


def long_packet(
    version: int, type_bits: int, payload_len: int = 20, token: bytes | None = b""
) -> bytes:
    first = 0xC0 | (type_bits << 4)
    out = bytes((first,)) + version.to_bytes(4, "big")
    out += bytes((len(DCID),)) + DCID + bytes((len(SCID),)) + SCID
    if token is not None:
        out += encode_varint(len(token)) + token
    return out + encode_varint(payload_len) + bytes(range(payload_len))


@pytest.mark.parametrize(
    ("version", "bits", "ptype"),
    [
        (QUIC_V1, 0, PacketType.INITIAL),
        (QUIC_V1, 1, PacketType.ZERO_RTT),
        (QUIC_V1, 2, PacketType.HANDSHAKE),
        (QUIC_DRAFT_29, 0, PacketType.INITIAL),
        (QUIC_DRAFT_29, 2, PacketType.HANDSHAKE),
        # RFC 9369 §3.2: Initial 0b01, 0-RTT 0b10, Handshake 0b11
        (QUIC_V2, 1, PacketType.INITIAL),
        (QUIC_V2, 2, PacketType.ZERO_RTT),
        (QUIC_V2, 3, PacketType.HANDSHAKE),
    ],
)
def test_long_header_types(version: int, bits: int, ptype: PacketType) -> None:
    pkt = long_packet(version, bits, token=b"tok" if ptype is PacketType.INITIAL else None)
    hdr, nxt = parse_packet_header(pkt)
    assert nxt == len(pkt) and hdr.length == len(pkt)
    assert hdr.packet_type is ptype and hdr.version == version
    assert hdr.dcid == DCID and hdr.scid == SCID and hdr.long_header and hdr.fixed_bit
    assert hdr.payload_length == 20 and hdr.pn_offset == len(pkt) - 20
    if ptype is PacketType.INITIAL:
        assert hdr.token == b"tok" and hdr.space is PacketSpace.INITIAL


@pytest.mark.parametrize(("version", "bits"), [(QUIC_V1, 3), (QUIC_V2, 0)])
def test_retry_type_bits(version: int, bits: int) -> None:
    body = bytes((0xC0 | bits << 4,)) + version.to_bytes(4, "big") + b"\x00\x03abc"
    hdr, _ = parse_packet_header(body + b"TOKEN" + bytes(16))
    assert hdr.packet_type is PacketType.RETRY and hdr.token == b"TOKEN"
    assert hdr.retry_integrity_tag == bytes(16) and hdr.scid == b"abc"
    with pytest.raises(Truncated):
        parse_packet_header(body + bytes(15))


def test_version_negotiation() -> None:
    pkt = b"\x80" + bytes(4) + b"\x01\xaa\x01\xbb" + bytes.fromhex("000000016b3343cf1a2a3a4a")
    hdr, nxt = parse_packet_header(pkt)
    assert hdr.packet_type is PacketType.VERSION_NEGOTIATION and nxt == len(pkt)
    assert hdr.supported_versions == (QUIC_V1, QUIC_V2, 0x1A2A3A4A)
    assert looks_like_quic(pkt)
    with pytest.raises(Malformed):
        parse_packet_header(pkt[:-1])


def test_unknown_version_is_framed_not_failed() -> None:
    pkt = b"\xc0" + bytes.fromhex("51303530") + b"\x00\x00" + bytes(30)
    hdr, nxt = parse_packet_header(pkt)
    assert hdr.packet_type is PacketType.UNKNOWN_VERSION and nxt == len(pkt)
    assert not looks_like_quic(pkt)


def test_short_header_needs_dcid_length() -> None:
    pkt = b"\x41" + DCID + bytes(30)
    with pytest.raises(DcidLengthUnknown):
        parse_packet_header(pkt)
    hdr, nxt = parse_packet_header(pkt, dcid_length=8)
    assert hdr.packet_type is PacketType.ONE_RTT and hdr.dcid == DCID and hdr.pn_offset == 9
    assert nxt == len(pkt) and hdr.space is PacketSpace.APPLICATION
    hdr, _ = parse_packet_header(pkt, dcid_length=lambda rest: 4 if rest[:1] == b"\x00" else None)
    assert hdr.dcid == DCID[:4]


def test_cid_longer_than_20_is_malformed_in_v1() -> None:
    pkt = b"\xc0" + QUIC_V1.to_bytes(4, "big") + b"\x15" + bytes(21) + b"\x00" + bytes(30)
    with pytest.raises(Malformed):
        parse_packet_header(pkt)


def test_length_beyond_datagram_is_truncated() -> None:
    pkt = long_packet(QUIC_V1, 2, token=None)
    with pytest.raises(Truncated):
        parse_packet_header(pkt[:-1])


def test_coalesced_packets_and_trailing_padding() -> None:
    a = long_packet(QUIC_V1, 0, token=b"")
    b = long_packet(QUIC_V1, 2, token=None)
    short = b"\x40" + DCID + bytes(25)
    headers = list(iter_packets(a + b + short))
    assert [h.packet_type for h in headers] == [
        PacketType.INITIAL,
        PacketType.HANDSHAKE,
        PacketType.ONE_RTT,
    ]
    assert [h.offset for h in headers] == [0, len(a), len(a) + len(b)]
    assert headers[2].dcid == DCID  # the first packet's DCID length (RFC 9000 §12.2)
    # zeros after the last packet are padding, not a packet
    assert len(list(iter_packets(a + bytes(900)))) == 1
    assert looks_like_quic(a + b + bytes(100))


def test_iter_packets_yields_before_error() -> None:
    a = long_packet(QUIC_V1, 0, token=b"")
    got = []
    with pytest.raises(Truncated):
        for h in iter_packets(a + b"\xe0\x00\x00\x00\x01\x08"):
            got.append(h)
    assert len(got) == 1


@pytest.mark.parametrize(
    "data",
    [b"", b"\x40" + bytes(40), b"GET / HTTP/1.1\r\n\r\n", bytes(1200), b"\xc0\x00\x00\x00\x01\x30"],
)
def test_looks_like_quic_rejects(data: bytes) -> None:
    assert not looks_like_quic(data)


def test_version_names() -> None:
    assert version_name(QUIC_V1) == "v1"
    assert version_name(QUIC_V2) == "v2"
    assert version_name(QUIC_DRAFT_29) == "draft-29"
    assert version_name(0x1A2A3A4A).startswith("grease")


def test_reserved_versions_and_drafts_are_recognised() -> None:
    """SYNTHETIC: a full-size client Initial in a version reserved to force negotiation
    (RFC 9000 §15) is QUIC; so are drafts 22-34 and mvfst; a short datagram with a
    reserved version, or one whose CIDs are longer than 20 bytes, is not."""
    from dissectors.quic import looks_like_quic, version_name

    def initial(version: int, size: int, cid: int = 8) -> bytes:
        head = bytes((0xC0,)) + version.to_bytes(4, "big") + bytes((cid,)) + bytes(cid) + b"\x00"
        return head + bytes(size - len(head))

    assert looks_like_quic(initial(0x0A0A0A0A, 1200))
    assert not looks_like_quic(initial(0x0A0A0A0A, 600))
    assert not looks_like_quic(initial(0x1A2A3A4A, 1200, cid=21))
    assert version_name(0xFF000017) == "draft-23" and version_name(0xFACEB002) == "mvfst-draft-27"
    assert version_name(0xFACEB00E) == "mvfst-exp"


def test_draft_24_retry_names_its_odcid() -> None:
    """SYNTHETIC: before draft-25 a Retry carries ODCID Len, ODCID and the token, and no
    integrity tag (draft-ietf-quic-transport-24 §17.2.5)."""
    from dissectors.quic import parse_packet_header
    from dissectors.quic.crypto import verify_retry

    odcid = bytes(range(8))
    pkt = bytes((0xF5,)) + (0xFF000018).to_bytes(4, "big") + b"\x00\x04abcd"
    pkt += bytes((8,)) + odcid + b"the token"
    hdr, _ = parse_packet_header(pkt)
    assert hdr.packet_type.value == "retry" and hdr.original_dcid == odcid
    assert hdr.token == b"the token" and hdr.scid == b"abcd"
    assert verify_retry(0xFF000018, odcid, pkt) and not verify_retry(0xFF000018, bytes(8), pkt)


def test_draft_transport_parameters_before_27() -> None:
    """SYNTHETIC: drafts before 27 sent a 2-byte list length, 2-byte ids and lengths."""
    from dissectors.quic.transport_params import from_extensions

    body = b"\x00\x04\x00\x02\x40\x64"  # initial_max_data = 100 (varint in the value)
    legacy = len(body).to_bytes(2, "big") + body
    assert from_extensions([(0xFFA5, legacy)], 0xFF000017) == {"initial_max_data": 100}
    assert from_extensions([(0xFFA5, legacy)], 0xFACEB001) == {"initial_max_data": 100}

"""QUIC packet headers: RFC 8999 (version-independent properties), RFC 9000 §17, RFC 9369 §3.2.

* Long header (RFC 9000 §17.2): Initial (§17.2.2), 0-RTT (§17.2.3), Handshake (§17.2.4),
  Retry (§17.2.5); the two type bits are version-dependent: QUIC v1 and draft-29 use
  Initial 0, 0-RTT 1, Handshake 2, Retry 3; QUIC v2 (RFC 9369 §3.2) uses Initial 1,
  0-RTT 2, Handshake 3, Retry 0.
* Version Negotiation (RFC 9000 §17.2.1, RFC 8999 §6): version 0, a list of 32-bit versions.
* Short header (1-RTT, RFC 9000 §17.3.1): the Destination Connection ID has no length
  field, so the parser needs the length from connection context (``dcid_length``).
* Coalesced packets (RFC 9000 §12.2): several long-header packets, optionally ending with
  one short-header packet, share a datagram; :func:`iter_packets` walks them.

Everything here is *before* header protection is removed: the packet number and the low
bits of the first byte are still masked (RFC 9001 §5.4); :mod:`.crypto` unmasks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Final

from .._wire import Buffer, Cursor
from ..errors import DissectError, Malformed, Truncated

__all__ = [
    "DRAFT_29_FAMILY",
    "KNOWN_VERSIONS",
    "MVFST_DRAFTS",
    "MAX_CID_LENGTH",
    "QUIC_DRAFT_29",
    "QUIC_V1",
    "QUIC_V2",
    "DcidLengthUnknown",
    "DcidLength",
    "PacketHeader",
    "PacketSpace",
    "PacketType",
    "is_grease_version",
    "iter_packets",
    "looks_like_quic",
    "parse_packet_header",
    "quic_draft",
    "retry_has_odcid_field",
    "version_name",
]

QUIC_V1: Final = 0x00000001
#: RFC 9369 §3.1.
QUIC_V2: Final = 0x6B3343CF
#: draft-ietf-quic-transport-29; drafts 30–32 kept its salt, labels and Retry key.
QUIC_DRAFT_29: Final = 0xFF00001D
DRAFT_29_FAMILY: Final = frozenset({0xFF00001D, 0xFF00001E, 0xFF00001F, 0xFF000020})
#: Facebook's mvfst versions and the IETF draft each follows (Wireshark's
#: quic_draft_version): 0xfaceb001 draft-22, 0xfaceb002 draft-27, 0xfaceb00e
#: (experimental) draft-27.
MVFST_DRAFTS: Final = {0xFACEB001: 22, 0xFACEB002: 27, 0xFACEB00E: 27}
#: Every version whose packets this package can parse and protect: v1, v2, drafts 22–34
#: (the long header, packet protection and frames of RFC 9000 with the draft's Initial
#: salt and Retry key, :mod:`.crypto`) and mvfst.
KNOWN_VERSIONS: Final = (
    frozenset({QUIC_V1, QUIC_V2})
    | frozenset(0xFF000000 | d for d in range(22, 35))
    | frozenset(MVFST_DRAFTS)
)

#: RFC 9000 §17.2: "In QUIC version 1, this value MUST NOT exceed 20 bytes."  RFC 8999 §5.1
#: allows up to 255 for other versions (and so in Version Negotiation packets).
MAX_CID_LENGTH: Final = 20
#: Retry Integrity Tag length (RFC 9001 §5.8: the AEAD_AES_128_GCM tag).
RETRY_TAG_LENGTH: Final = 16


class PacketType(str, Enum):
    INITIAL = "initial"
    ZERO_RTT = "0rtt"
    HANDSHAKE = "handshake"
    RETRY = "retry"
    VERSION_NEGOTIATION = "version_negotiation"
    ONE_RTT = "1rtt"
    #: a long header of a version this module does not know (RFC 8999 §5.1 framing only)
    UNKNOWN_VERSION = "unknown_version"


class PacketSpace(str, Enum):
    """Packet number spaces (RFC 9000 §12.3); 0-RTT and 1-RTT share ``application``."""

    INITIAL = "initial"
    HANDSHAKE = "handshake"
    APPLICATION = "application"


_SPACE: Final = {
    PacketType.INITIAL: PacketSpace.INITIAL,
    PacketType.HANDSHAKE: PacketSpace.HANDSHAKE,
    PacketType.ZERO_RTT: PacketSpace.APPLICATION,
    PacketType.ONE_RTT: PacketSpace.APPLICATION,
}

_V1_TYPES: Final = (PacketType.INITIAL, PacketType.ZERO_RTT, PacketType.HANDSHAKE, PacketType.RETRY)
# RFC 9369 §3.2: Initial 0b01, 0-RTT 0b10, Handshake 0b11, Retry 0b00
_V2_TYPES: Final = (PacketType.RETRY, PacketType.INITIAL, PacketType.ZERO_RTT, PacketType.HANDSHAKE)


def long_packet_type(version: int, type_bits: int) -> PacketType:
    """The packet type of long-header type bits ``type_bits`` (0–3) in ``version``."""
    table = _V2_TYPES if version == QUIC_V2 else _V1_TYPES
    return table[type_bits & 3]


def is_grease_version(version: int) -> bool:
    """RFC 9000 §15: versions 0x?a?a?a?a are reserved to exercise version negotiation."""
    return version & 0x0F0F0F0F == 0x0A0A0A0A


def quic_draft(version: int | None) -> int | None:
    """The IETF draft a version follows (drafts and mvfst), None for v1, v2 and others."""
    if version is None:
        return None
    if version >> 8 == 0xFF0000:
        return version & 0xFF
    return MVFST_DRAFTS.get(version)


def retry_has_odcid_field(version: int) -> bool:
    """Retry packets carry an ODCID field and no integrity tag before draft-25
    (draft-ietf-quic-transport-24 §17.2.5)."""
    d = quic_draft(version)
    return d is not None and d < 25


def version_name(version: int | None) -> str:
    if version is None:
        return ""
    if version == QUIC_V1:
        return "v1"
    if version == QUIC_V2:
        return "v2"
    if version >> 8 == 0xFF0000:
        return f"draft-{version & 0xFF}"
    if version == 0xFACEB00E:
        return "mvfst-exp"
    if version in MVFST_DRAFTS:
        return f"mvfst-draft-{MVFST_DRAFTS[version]}"
    if version == 0:
        return "version_negotiation"
    if is_grease_version(version):
        return f"grease(0x{version:08x})"
    return f"0x{version:08x}"


class DcidLengthUnknown(DissectError):
    """A short-header packet whose Destination Connection ID length is not known.

    Not a protocol violation: RFC 9000 §17.3.1 leaves the length to connection state.
    """


#: A fixed DCID length, or a function from the bytes after the first byte to a length.
DcidLength = int | Callable[[bytes], int | None] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PacketHeader:
    """One packet's header as on the wire (header protection not yet removed).

    ``offset``/``length`` locate the whole packet in its datagram; ``pn_offset`` is the
    absolute datagram offset of the (protected) Packet Number, ``payload_length`` the
    long header's Length field (packet number + protected payload).
    """

    offset: int
    length: int
    packet_type: PacketType
    first_byte: int
    version: int | None
    dcid: bytes
    scid: bytes = b""
    token: bytes = b""
    pn_offset: int | None = None
    payload_length: int | None = None
    supported_versions: tuple[int, ...] = ()
    retry_integrity_tag: bytes = b""
    original_dcid: bytes | None = None  # the ODCID field of a Retry before draft-25

    @property
    def long_header(self) -> bool:
        return bool(self.first_byte & 0x80)

    @property
    def fixed_bit(self) -> bool:
        """RFC 9000 §17.2 "Fixed Bit" (may be greased to 0 under RFC 9287)."""
        return bool(self.first_byte & 0x40)

    @property
    def end(self) -> int:
        return self.offset + self.length

    @property
    def space(self) -> PacketSpace | None:
        return _SPACE.get(self.packet_type)


def _check_cid(n: int, version: int, offset: int) -> None:
    if n > MAX_CID_LENGTH and version in KNOWN_VERSIONS:
        raise Malformed(f"connection ID of {n} bytes > {MAX_CID_LENGTH}", offset=offset)


def parse_packet_header(
    buf: Buffer, offset: int = 0, *, dcid_length: DcidLength = None
) -> tuple[PacketHeader, int]:
    """Parse the header of the packet at ``offset``; return it and the next packet's offset.

    The end of the datagram is ``len(buf)``.  A short header, Version Negotiation, Retry
    or unknown-version packet runs to the end of the datagram.
    """
    cur = Cursor(buf, offset)
    first = cur.pull_u8()
    end = cur.end
    if not first & 0x80:
        n = (
            dcid_length(bytes(cur.buf[cur.pos : min(end, cur.pos + MAX_CID_LENGTH)]))
            if callable(dcid_length)
            else dcid_length
        )
        if n is None:
            raise DcidLengthUnknown(
                "short header: destination connection ID length unknown", offset=offset
            )
        dcid = cur.pull_bytes(n)
        hdr = PacketHeader(
            offset=offset,
            length=end - offset,
            packet_type=PacketType.ONE_RTT,
            first_byte=first,
            version=None,
            dcid=dcid,
            pn_offset=cur.pos,
        )
        return hdr, end
    version = cur.pull_u32()
    dcil = cur.pull_u8()
    _check_cid(dcil, version, cur.pos)
    dcid = cur.pull_bytes(dcil)
    scil = cur.pull_u8()
    _check_cid(scil, version, cur.pos)
    scid = cur.pull_bytes(scil)
    common = {"offset": offset, "first_byte": first, "version": version, "dcid": dcid, "scid": scid}
    if version == 0:
        # RFC 9000 §17.2.1: Supported Version (32) ...
        rest = cur.remaining
        if rest == 0 or rest % 4:
            raise Malformed(f"version negotiation list of {rest} bytes", offset=cur.pos)
        versions = tuple(cur.pull_u32() for _ in range(rest // 4))
        hdr = PacketHeader(
            length=end - offset,
            packet_type=PacketType.VERSION_NEGOTIATION,
            supported_versions=versions,
            **common,  # type: ignore[arg-type]
        )
        return hdr, end
    if version not in KNOWN_VERSIONS:
        hdr = PacketHeader(length=end - offset, packet_type=PacketType.UNKNOWN_VERSION, **common)  # type: ignore[arg-type]
        return hdr, end
    ptype = long_packet_type(version, (first >> 4) & 3)
    if ptype is PacketType.RETRY and retry_has_odcid_field(version):
        # draft-ietf-quic-transport-24 §17.2.5: ODCID Len (8), Original Destination
        # Connection ID (0..160), Retry Token (..) — no integrity tag before draft-25
        odcid = cur.pull_bytes(cur.pull_u8())
        hdr = PacketHeader(
            length=end - offset,
            packet_type=ptype,
            token=cur.pull_bytes(cur.remaining),
            original_dcid=odcid,
            **common,  # type: ignore[arg-type]
        )
        return hdr, end
    if ptype is PacketType.RETRY:
        # RFC 9000 §17.2.5: Retry Token (..), Retry Integrity Tag (128)
        if cur.remaining < RETRY_TAG_LENGTH:
            raise Truncated("Retry packet shorter than its integrity tag", offset=cur.pos)
        token = cur.pull_bytes(cur.remaining - RETRY_TAG_LENGTH)
        tag = cur.pull_bytes(RETRY_TAG_LENGTH)
        hdr = PacketHeader(
            length=end - offset,
            packet_type=ptype,
            token=token,
            retry_integrity_tag=tag,
            **common,  # type: ignore[arg-type]
        )
        return hdr, end
    token = b""
    if ptype is PacketType.INITIAL:
        token = cur.pull_bytes(cur.pull_varint())
    length = cur.pull_varint()
    pn_offset = cur.pos
    if length > cur.remaining:
        raise Truncated(
            f"{ptype.value} packet declares {length} bytes, datagram has {cur.remaining}",
            offset=pn_offset,
        )
    hdr = PacketHeader(
        length=pn_offset + length - offset,
        packet_type=ptype,
        token=token,
        pn_offset=pn_offset,
        payload_length=length,
        **common,  # type: ignore[arg-type]
    )
    return hdr, pn_offset + length


def iter_packets(buf: Buffer, *, dcid_length: DcidLength = None) -> Iterator[PacketHeader]:
    """The coalesced packets of one datagram (RFC 9000 §12.2), in order.

    Stops at the end of the datagram or at trailing zero bytes (padding some stacks add
    after the last packet).  A short header following long ones in the same datagram uses
    the first packet's DCID length when ``dcid_length`` is not given (RFC 9000 §12.2:
    "Senders MUST NOT coalesce QUIC packets with different connection IDs into a single
    UDP datagram").  Raises at the first packet that does not parse, after yielding the
    ones before it.
    """
    mv = memoryview(buf) if not isinstance(buf, memoryview) else buf
    off = 0
    first: PacketHeader | None = None
    while off < len(mv):
        if off and not any(mv[off:]):
            return
        dl = dcid_length
        if dl is None and first is not None:
            dl = len(first.dcid)
        hdr, off = parse_packet_header(mv, off, dcid_length=dl)
        if first is None:
            first = hdr
        yield hdr


def looks_like_quic(datagram: Buffer) -> bool:
    """Content-based recognition of QUIC on any UDP port.

    True when the datagram starts with a well-framed long header of a known version (or a
    Version Negotiation packet, or a full-size client Initial of a version reserved to
    force version negotiation) and every coalesced packet parses.  Short headers carry
    no version and cannot be recognised without connection context, so they give False.
    """
    mv = memoryview(datagram) if not isinstance(datagram, memoryview) else datagram
    if len(mv) < 7 or not mv[0] & 0x80:
        return False
    version = int.from_bytes(mv[1:5], "big")
    # RFC 9000 §15: 0x?a?a?a?a is reserved for clients to force version negotiation; such a
    # client Initial is padded like one (§14.1) — QUIC, whose packets cannot be read
    grease = is_grease_version(version) and len(mv) >= 1200
    if version != 0 and version not in KNOWN_VERSIONS and not grease:
        return False
    try:
        headers = list(iter_packets(mv))
    except DissectError:
        return False
    if not headers:
        return False
    h0 = headers[0]
    if h0.packet_type is PacketType.VERSION_NEGOTIATION:
        return len(h0.dcid) <= 255 and len(h0.scid) <= 255
    if h0.packet_type is PacketType.UNKNOWN_VERSION and (
        len(h0.dcid) > MAX_CID_LENGTH or len(h0.scid) > MAX_CID_LENGTH
    ):
        return False  # RFC 8999 allows longer CIDs; a client forcing negotiation does not
    # RFC 9000 §17.2: the Fixed Bit is 1 in valid long headers (RFC 9287 greasing is
    # negotiated first, so a connection's first packets still carry it).
    return h0.fixed_bit

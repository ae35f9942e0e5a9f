"""QUIC packet protection (RFC 9001 §5, §6; RFC 9369 §3.3), on top of ``cryptography``.

* §5.2 Initial secrets: ``initial_secret = HKDF-Extract(initial_salt, client_dst_connection_id)``,
  then ``HKDF-Expand-Label(initial_secret, "client in" | "server in", "", 32)`` with SHA-256;
  the salt is per version (v1 §5.2, v2 RFC 9369 §3.3.1, draft-29 §5.2 of that draft).
* §5.1 packet protection keys from a secret: ``"quic key"``, ``"quic iv"``, ``"quic hp"``
  (v1 and drafts), ``"quicv2 key"`` etc. for v2 (RFC 9369 §3.3.2).  1-RTT/Handshake/0-RTT
  secrets are the TLS 1.3 traffic secrets (from an NSS key log).
* §5.3 AEAD: nonce = iv XOR packet number (left-padded); AAD = the unprotected header up to
  and including the packet number.  AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 and
  AES-128-CCM (the TLS 1.3 suites QUIC allows).
* §5.4 header protection: a 16-byte sample taken 4 bytes after the start of the packet
  number field, AES-ECB (§5.4.3) or ChaCha20 (§5.4.4) mask; 4 (long) or 5 (short) low bits
  of the first byte and the packet-number bytes are XORed with the mask.
* RFC 9000 §17.1 / App. A.3 packet number reconstruction (:func:`decode_packet_number`).
* §6 key update: ``secret_<n+1> = HKDF-Expand-Label(secret_<n>, "quic ku", "", Hash.length)``;
  the header protection key does not change.
* §5.8 Retry integrity tag: AES-128-GCM with a fixed key and nonce per version over the
  Retry pseudo-packet (ODCID length, ODCID, then the Retry packet without its tag).

A payload that does not authenticate raises :class:`AuthenticationFailed`; it is never
returned as plaintext.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from ..errors import DissectError, Malformed, Truncated
from ..tls.crypto import AuthenticationFailed, hkdf_expand_label, hkdf_extract
from .packet import (
    DRAFT_29_FAMILY,
    QUIC_V1,
    QUIC_V2,
    parse_packet_header,
    quic_draft,
    retry_has_odcid_field,
)

__all__ = [
    "QUIC_SUITES",
    "AuthenticationFailed",
    "PacketProtection",
    "QuicSuite",
    "UnsupportedVersion",
    "decode_packet_number",
    "initial_protection",
    "initial_secrets",
    "next_traffic_secret",
    "packet_keys",
    "retry_integrity_tag",
    "verify_retry",
]

#: RFC 9001 §5.4.2: the sample is 16 bytes, taken assuming a 4-byte packet number.
SAMPLE_LENGTH: Final = 16
#: Every QUIC AEAD has a 16-byte tag (RFC 9001 §5.3).
TAG_LENGTH: Final = 16


class UnsupportedVersion(Malformed):
    """No key schedule is known for this QUIC version."""


@dataclass(frozen=True, slots=True)
class _VersionKeys:
    initial_salt: bytes
    retry_key: bytes
    retry_nonce: bytes
    label_prefix: str  # "quic " or "quicv2 "


_V1: Final = _VersionKeys(
    # RFC 9001 §5.2 and §5.8
    bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a"),
    bytes.fromhex("be0c690b9f66575a1d766b54e368c84e"),
    bytes.fromhex("461599d35d632bf2239825bb"),
    "quic ",
)
_V2: Final = _VersionKeys(
    # RFC 9369 §3.3.1, §3.3.3, §3.3.2
    bytes.fromhex("0dede3def700a6db819381be6e269dcbf9bd2ed9"),
    bytes.fromhex("8fb4b01b56ac48e260fbcbcead7ccc92"),
    bytes.fromhex("d86969bc2d7c6d9990efb04a"),
    "quicv2 ",
)
_DRAFT_29: Final = _VersionKeys(
    # draft-ietf-quic-tls-29 §5.2 and §5.8
    bytes.fromhex("afbfec289993d24c9e9786f19c6111e04390a899"),
    bytes.fromhex("ccce187ed09a09d05728155a6cb96be1"),
    bytes.fromhex("e54930f97f2136f0530a8c1c"),
    "quic ",
)
_DRAFT_25: Final = _VersionKeys(
    # draft-ietf-quic-tls-23 §5.2 (salt, drafts 23–28) and draft-ietf-quic-tls-25 §5.8
    # (the first Retry Integrity Tag key, drafts 25–28)
    bytes.fromhex("c3eef712c72ebb5a11a7d2432bb46365bef9f502"),
    bytes.fromhex("4d32ecdb2a2133c841e4043df27d4430"),
    bytes.fromhex("4d1611d05513a552c587d575"),
    "quic ",
)
_DRAFT_23: Final = _VersionKeys(
    # draft-ietf-quic-tls-23 §5.2; Retry packets had no integrity tag before draft-25
    bytes.fromhex("c3eef712c72ebb5a11a7d2432bb46365bef9f502"),
    b"",
    b"",
    "quic ",
)
_DRAFT_22: Final = _VersionKeys(
    # draft-ietf-quic-tls-22 §5.2
    bytes.fromhex("7fbcdb0e7c66bbe9193a96cd21519ebd7a02644a"),
    b"",
    b"",
    "quic ",
)


def _version_keys(version: int) -> _VersionKeys:
    if version == QUIC_V1:
        return _V1
    if version == QUIC_V2:
        return _V2
    if version in DRAFT_29_FAMILY:
        return _DRAFT_29
    d = quic_draft(version)
    if d is not None and 22 <= d <= 34:
        # as Wireshark selects them: drafts 33–34 already used the v1 salt and Retry key
        if d >= 33:
            return _V1
        return _DRAFT_22 if d == 22 else _DRAFT_23 if d < 25 else _DRAFT_25
    raise UnsupportedVersion(f"no QUIC key schedule for version 0x{version:08x}")


@dataclass(frozen=True, slots=True)
class QuicSuite:
    """A TLS 1.3 cipher suite as QUIC packet protection uses it (RFC 9001 §5.3, §5.4)."""

    id: int
    name: str
    hash_name: str
    key_length: int
    hp: str  # "aes" or "chacha20"

    @property
    def hash_length(self) -> int:
        return 48 if self.hash_name == "sha384" else 32


QUIC_SUITES: Final[dict[int, QuicSuite]] = {
    s.id: s
    for s in (
        QuicSuite(0x1301, "TLS_AES_128_GCM_SHA256", "sha256", 16, "aes"),
        QuicSuite(0x1302, "TLS_AES_256_GCM_SHA384", "sha384", 32, "aes"),
        QuicSuite(0x1303, "TLS_CHACHA20_POLY1305_SHA256", "sha256", 32, "chacha20"),
        QuicSuite(0x1304, "TLS_AES_128_CCM_SHA256", "sha256", 16, "aes"),
    )
}
#: RFC 9001 §5.2: "Initial packets use AEAD_AES_128_GCM with keys derived from ..."
INITIAL_SUITE: Final = QUIC_SUITES[0x1301]


def initial_secrets(version: int, client_dcid: bytes) -> tuple[bytes, bytes]:
    """(client_initial_secret, server_initial_secret) for the client's first DCID (§5.2)."""
    vk = _version_keys(version)
    initial = hkdf_extract("sha256", vk.initial_salt, bytes(client_dcid))
    return (
        hkdf_expand_label("sha256", initial, "client in", b"", 32),
        hkdf_expand_label("sha256", initial, "server in", b"", 32),
    )


def packet_keys(version: int, suite: QuicSuite, secret: bytes) -> tuple[bytes, bytes, bytes]:
    """(key, iv, hp) from a traffic secret (RFC 9001 §5.1; RFC 9369 §3.3.2 labels)."""
    p = _version_keys(version).label_prefix
    h = suite.hash_name
    return (
        hkdf_expand_label(h, secret, p + "key", b"", suite.key_length),
        hkdf_expand_label(h, secret, p + "iv", b"", 12),
        hkdf_expand_label(h, secret, p + "hp", b"", suite.key_length),
    )


def next_traffic_secret(version: int, suite: QuicSuite, secret: bytes) -> bytes:
    """RFC 9001 §6.1: the secret of the next key phase ("quic ku" / "quicv2 ku")."""
    p = _version_keys(version).label_prefix
    return hkdf_expand_label(suite.hash_name, secret, p + "ku", b"", suite.hash_length)


def decode_packet_number(truncated: int, pn_nbits: int, largest_pn: int) -> int:
    """RFC 9000 App. A.3: the full packet number closest to ``largest_pn + 1``.

    ``largest_pn`` is the largest packet number successfully processed in the space
    (-1 before any).
    """
    expected = largest_pn + 1
    win = 1 << pn_nbits
    hwin = win // 2
    mask = win - 1
    candidate = (expected & ~mask) | truncated
    if candidate <= expected - hwin and candidate < (1 << 62) - win:
        return candidate + win
    if candidate > expected + hwin and candidate >= win:
        return candidate - win
    return candidate


class PacketProtection:
    """Packet and header protection of one direction at one key phase.

    The key material is held privately and never shown in ``repr``.
    """

    __slots__ = ("version", "suite", "_secret", "_aead", "_iv", "_hp_key", "_ecb")

    def __init__(
        self, version: int, suite: QuicSuite, secret: bytes, *, _hp: bytes | None = None
    ) -> None:
        key, iv, hp = packet_keys(version, suite, secret)
        self.version = version
        self.suite = suite
        self._secret = bytes(secret)
        self._iv = iv
        self._hp_key = hp if _hp is None else _hp  # §6: a key update keeps the hp key
        if suite.id == 0x1303:
            self._aead: AESGCM | AESCCM | ChaCha20Poly1305 = ChaCha20Poly1305(key)
        elif suite.id == 0x1304:
            self._aead = AESCCM(key)
        else:
            self._aead = AESGCM(key)
        self._ecb = (
            Cipher(algorithms.AES(self._hp_key), modes.ECB()).encryptor()
            if suite.hp == "aes"
            else None
        )

    def __repr__(self) -> str:
        return f"<PacketProtection {self.suite.name} v=0x{self.version:08x}: keys redacted>"

    def next_phase(self) -> PacketProtection:
        """Keys of the next key phase (RFC 9001 §6.1), same header protection key."""
        return PacketProtection(
            self.version,
            self.suite,
            next_traffic_secret(self.version, self.suite, self._secret),
            _hp=self._hp_key,
        )

    def header_mask(self, sample: bytes) -> bytes:
        """RFC 9001 §5.4.3 (AES-ECB) / §5.4.4 (ChaCha20: counter = sample[0:4] LE, nonce = rest)."""
        if len(sample) != SAMPLE_LENGTH:
            raise Truncated(f"header protection sample of {len(sample)} bytes")
        if self._ecb is not None:
            return self._ecb.update(bytes(sample))[:5]
        enc = Cipher(algorithms.ChaCha20(self._hp_key, bytes(sample)), mode=None).encryptor()
        return enc.update(bytes(5))

    def remove_header_protection(
        self, packet: bytes | bytearray | memoryview, pn_offset: int, end: int
    ) -> tuple[int, int, int]:
        """Unmask the first byte and packet number of the packet ``packet[:end]``.

        ``packet`` starts at the packet's first byte; returns (first_byte, pn_length,
        truncated packet number).
        """
        sample_at = pn_offset + 4
        if sample_at + SAMPLE_LENGTH > end:
            # §5.4.2: packets must be long enough to sample; shorter cannot be genuine
            raise Malformed(
                f"packet of {end} bytes too short for a header protection sample", offset=sample_at
            )
        mask = self.header_mask(bytes(packet[sample_at : sample_at + SAMPLE_LENGTH]))
        first = packet[0]
        first ^= mask[0] & (0x0F if first & 0x80 else 0x1F)
        pn_len = (first & 0x03) + 1
        pn = 0
        for i in range(pn_len):
            pn = (pn << 8) | (packet[pn_offset + i] ^ mask[1 + i])
        return first, pn_len, pn

    def decrypt(self, packet_number: int, header: bytes, ciphertext: bytes) -> bytes:
        """AEAD-open a payload (§5.3); ``header`` is the unprotected header (the AAD)."""
        if len(ciphertext) < TAG_LENGTH:
            raise Malformed(f"{len(ciphertext)}-byte payload is shorter than the AEAD tag")
        nonce = (int.from_bytes(self._iv, "big") ^ packet_number).to_bytes(12, "big")
        try:
            return self._aead.decrypt(nonce, bytes(ciphertext), bytes(header))
        except InvalidTag:
            raise AuthenticationFailed("AEAD tag does not verify") from None

    def encrypt(self, packet_number: int, header: bytes, plaintext: bytes) -> bytes:
        """AEAD-seal a payload (for tests and synthetic captures)."""
        nonce = (int.from_bytes(self._iv, "big") ^ packet_number).to_bytes(12, "big")
        return self._aead.encrypt(nonce, bytes(plaintext), bytes(header))

    def unprotect(
        self, packet: bytes | bytearray | memoryview, pn_offset: int, end: int, largest_pn: int
    ) -> tuple[bytes, int, bytes]:
        """Remove header protection and decrypt ``packet[:end]``.

        Returns (unprotected header, full packet number, plaintext payload).
        """
        first, pn_len, truncated = self.remove_header_protection(packet, pn_offset, end)
        pn = decode_packet_number(truncated, pn_len * 8, largest_pn)
        header = bytes((first,)) + bytes(packet[1:pn_offset]) + truncated.to_bytes(pn_len, "big")
        payload = self.decrypt(pn, header, bytes(packet[pn_offset + pn_len : end]))
        return header, pn, payload

    def protect(self, header: bytes, pn_offset: int, packet_number: int, payload: bytes) -> bytes:
        """Build a protected packet from an unprotected header (tests, synthetic captures)."""
        ct = self.encrypt(packet_number, header, payload)
        packet = bytearray(header + ct)
        pn_len = (header[0] & 0x03) + 1
        mask = self.header_mask(bytes(packet[pn_offset + 4 : pn_offset + 4 + SAMPLE_LENGTH]))
        packet[0] ^= mask[0] & (0x0F if packet[0] & 0x80 else 0x1F)
        for i in range(pn_len):
            packet[pn_offset + i] ^= mask[1 + i]
        return bytes(packet)


def initial_protection(
    version: int, client_dcid: bytes
) -> tuple[PacketProtection, PacketProtection]:
    """(client, server) Initial packet protection for the client's first DCID."""
    c, s = initial_secrets(version, client_dcid)
    return PacketProtection(version, INITIAL_SUITE, c), PacketProtection(version, INITIAL_SUITE, s)


def retry_integrity_tag(version: int, odcid: bytes, retry_without_tag: bytes) -> bytes:
    """RFC 9001 §5.8: the tag over the Retry pseudo-packet."""
    vk = _version_keys(version)
    pseudo = bytes((len(odcid),)) + bytes(odcid) + bytes(retry_without_tag)
    return AESGCM(vk.retry_key).encrypt(vk.retry_nonce, b"", pseudo)


def verify_retry(version: int, odcid: bytes, retry_packet: bytes) -> bool:
    """True if ``retry_packet`` (the whole Retry packet) carries the right integrity tag.

    Before draft-25 a Retry has no tag: it names the ODCID instead, which is compared."""
    if retry_has_odcid_field(version):
        try:
            hdr, _ = parse_packet_header(retry_packet)
        except DissectError:
            return False
        return hdr.original_dcid == bytes(odcid)
    if len(retry_packet) < 16:
        return False
    tag = retry_integrity_tag(version, odcid, retry_packet[:-16])
    return tag == bytes(retry_packet[-16:])

"""TLS key schedules and record protection (decryption), on top of ``cryptography``.

TLS 1.3 (RFC 8446):

* §7.1 key schedule: HKDF-Extract / HKDF-Expand (RFC 5869 §2.2–2.3), ``HKDF-Expand-Label``
  and ``Derive-Secret``; early, handshake and master secrets for the RFC 8448 vectors.
* §7.2 ``application_traffic_secret_N+1 = HKDF-Expand-Label(secret_N, "traffic upd", "",
  Hash.length)`` (KeyUpdate).
* §7.3 traffic keys: ``key = HKDF-Expand-Label(secret, "key", "", key_length)``,
  ``iv = HKDF-Expand-Label(secret, "iv", "", iv_length)``.
* §5.3 per-record nonce: the 64-bit sequence number, left-padded to iv_length, XORed with
  the iv; §5.2 additional data = the record header; §5.4 inner plaintext: content, then the
  real content type, then zero padding.
* Suites (§B.4): TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
  TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_CCM_SHA256, TLS_AES_128_CCM_8_SHA256.

TLS 1.0–1.2:

* PRF: RFC 5246 §5 (P_SHA256 / P_SHA384); RFC 2246 §5 / RFC 4346 §5 (P_MD5 ⊕ P_SHA1).
* master secret RFC 5246 §8.1 (and RFC 7627 §4 extended master secret) — with a key log the
  master secret comes directly from the ``CLIENT_RANDOM`` line; key block RFC 5246 §6.3.
* AEAD records (RFC 5246 §6.2.3.3): AES-GCM (RFC 5288 §3: 4-byte salt from the key block +
  8-byte explicit nonce in the record), AES-CCM / CCM_8 (RFC 6655 §3, RFC 7251),
  ChaCha20-Poly1305 (RFC 7905 §2: 12-byte IV XOR padded sequence number, no explicit
  nonce).  additional_data = seq_num + type + version + length (of the plaintext).
* CBC records (RFC 5246 §6.2.3.2; RFC 4346 for the per-record explicit IV of TLS 1.1+,
  RFC 2246 §6.2.3.2 for TLS 1.0's chained IV): MAC-then-encrypt with HMAC-SHA1/256/384, or
  encrypt-then-MAC (RFC 7366 §3) when the ``encrypt_then_mac`` extension was negotiated.

Every decryption either authenticates or raises :class:`AuthenticationFailed`; structurally
impossible ciphertext raises :class:`~dissectors.errors.Malformed`.  A record that does not
authenticate is never returned as plaintext.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final, Protocol

from ..errors import DissectError, Malformed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers import BlockCipherAlgorithm
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

# ``cryptography`` (~10 ms of imports) is loaded by the first record protection built
# (:func:`_aead_factories`, :func:`_block_ciphers`): a capture without keys never needs it.

__all__ = [
    "CIPHER_SUITES",
    "AuthenticationFailed",
    "CipherSuite",
    "RecordProtection",
    "Tls12Keys",
    "Tls13Protection",
    "cipher_suite",
    "derive_secret",
    "hkdf_expand",
    "hkdf_expand_label",
    "hkdf_extract",
    "make_tls12_protection",
    "tls12_key_block",
    "tls12_master_secret",
    "tls12_extended_master_secret",
    "tls12_prf",
    "tls13_early_secret",
    "tls13_handshake_secret",
    "tls13_master_secret",
    "tls13_next_traffic_secret",
    "tls13_traffic_keys",
]

_HASH_LEN: Final = {"md5": 16, "sha1": 20, "sha256": 32, "sha384": 48}


class AuthenticationFailed(DissectError):
    """The record's AEAD tag, MAC or padding does not verify under this key."""


# ---------------------------------------------------------------------------------------
# Cipher suites
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class CipherSuite:
    """What record protection needs to know about a suite (RFC 5246 §6.2.3, App. C).

    ``fixed_iv_length`` is the implicit IV taken from the key block (TLS 1.2 AEAD: GCM/CCM
    4, ChaCha20 12) or derived (TLS 1.3: 12); ``record_iv_length`` the explicit nonce/IV
    carried in each record (GCM/CCM 8; CBC: the block size in TLS 1.1+).  ``mac`` is the
    HMAC hash of CBC suites; ``prf_hash`` the TLS 1.2 PRF / TLS 1.3 HKDF hash.
    """

    id: int
    name: str
    key_exchange: str  # ECDHE, DHE, RSA, PSK, ECDHE_PSK, DHE_PSK, RSA_PSK, TLS13
    cipher: str
    mode: str  # "aead" or "cbc"
    key_length: int
    fixed_iv_length: int
    record_iv_length: int
    tag_length: int = 0
    block_size: int = 0
    mac: str | None = None
    prf_hash: str = "sha256"
    tls13: bool = False

    @property
    def mac_length(self) -> int:
        return _HASH_LEN[self.mac] if self.mac else 0

    @property
    def supported(self) -> bool:
        """True if this module can decrypt the suite."""
        return self.cipher in _AEAD_CIPHERS or self.cipher in _BLOCK_CIPHERS

    @property
    def hash_length(self) -> int:
        return _HASH_LEN[self.prf_hash]


def _tls13(id_: int, name: str, cipher: str, key: int, tag: int, h: str) -> CipherSuite:
    return CipherSuite(
        id=id_, name=name, key_exchange="TLS13", cipher=cipher, mode="aead", key_length=key,
        fixed_iv_length=12, record_iv_length=0, tag_length=tag, prf_hash=h, tls13=True,
    )  # fmt: skip


def _aead(
    id_: int, kx: str, auth: str, cipher: str, h: str = "sha256", name: str | None = None
) -> CipherSuite:
    key = 32 if "256" in cipher or cipher == "CHACHA20_POLY1305" else 16
    tag = 8 if cipher.endswith("CCM_8") else 16
    chacha = cipher == "CHACHA20_POLY1305"
    with_ = f"{kx}_{auth}" if auth else kx
    if name is None:
        name = (
            f"TLS_{with_}_WITH_{cipher}"
            if "CCM" in cipher
            else f"TLS_{with_}_WITH_{cipher}_{h.upper()}"
        )
    return CipherSuite(
        id=id_, name=name, key_exchange=kx, cipher=cipher, mode="aead", key_length=key,
        fixed_iv_length=12 if chacha else 4, record_iv_length=0 if chacha else 8, tag_length=tag, prf_hash=h,
    )  # fmt: skip


def _cbc(id_: int, kx: str, auth: str, cipher: str, mac: str) -> CipherSuite:
    key = {
        "AES_128_CBC": 16,
        "AES_256_CBC": 32,
        "3DES_EDE_CBC": 24,
        "CAMELLIA_128_CBC": 16,
        "CAMELLIA_256_CBC": 32,
    }[cipher]
    block = 8 if cipher == "3DES_EDE_CBC" else 16
    with_ = f"{kx}_{auth}" if auth else kx
    return CipherSuite(
        id=id_, name=f"TLS_{with_}_WITH_{cipher}_{'SHA' if mac == 'sha1' else mac.upper()}", key_exchange=kx,
        cipher=cipher, mode="cbc", key_length=key, fixed_iv_length=block, record_iv_length=block,
        block_size=block, mac=mac, prf_hash="sha384" if mac == "sha384" else "sha256",
    )  # fmt: skip


_SUITE_LIST: Final = [
    # TLS 1.3, RFC 8446 §B.4
    _tls13(0x1301, "TLS_AES_128_GCM_SHA256", "AES_128_GCM", 16, 16, "sha256"),
    _tls13(0x1302, "TLS_AES_256_GCM_SHA384", "AES_256_GCM", 32, 16, "sha384"),
    _tls13(0x1303, "TLS_CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305", 32, 16, "sha256"),
    _tls13(0x1304, "TLS_AES_128_CCM_SHA256", "AES_128_CCM", 16, 16, "sha256"),
    _tls13(0x1305, "TLS_AES_128_CCM_8_SHA256", "AES_128_CCM_8", 16, 8, "sha256"),
    # AES-GCM, RFC 5288, RFC 5289, RFC 5487, RFC 8442
    _aead(0x009C, "RSA", "", "AES_128_GCM"),
    _aead(0x009D, "RSA", "", "AES_256_GCM", "sha384"),
    _aead(0x009E, "DHE", "RSA", "AES_128_GCM"),
    _aead(0x009F, "DHE", "RSA", "AES_256_GCM", "sha384"),
    _aead(0x00A8, "PSK", "", "AES_128_GCM"),
    _aead(0x00A9, "PSK", "", "AES_256_GCM", "sha384"),
    _aead(0x00AA, "DHE_PSK", "", "AES_128_GCM"),
    _aead(0x00AB, "DHE_PSK", "", "AES_256_GCM", "sha384"),
    _aead(0x00AC, "RSA_PSK", "", "AES_128_GCM"),
    _aead(0x00AD, "RSA_PSK", "", "AES_256_GCM", "sha384"),
    _aead(0xC02B, "ECDHE", "ECDSA", "AES_128_GCM"),
    _aead(0xC02C, "ECDHE", "ECDSA", "AES_256_GCM", "sha384"),
    _aead(0xC02F, "ECDHE", "RSA", "AES_128_GCM"),
    _aead(0xC030, "ECDHE", "RSA", "AES_256_GCM", "sha384"),
    _aead(0xD001, "ECDHE_PSK", "", "AES_128_GCM"),
    _aead(0xD002, "ECDHE_PSK", "", "AES_256_GCM", "sha384"),
    # ChaCha20-Poly1305, RFC 7905 §2
    _aead(0xCCA8, "ECDHE", "RSA", "CHACHA20_POLY1305"),
    _aead(0xCCA9, "ECDHE", "ECDSA", "CHACHA20_POLY1305"),
    _aead(0xCCAA, "DHE", "RSA", "CHACHA20_POLY1305"),
    _aead(0xCCAB, "PSK", "", "CHACHA20_POLY1305"),
    _aead(0xCCAC, "ECDHE_PSK", "", "CHACHA20_POLY1305"),
    _aead(0xCCAD, "DHE_PSK", "", "CHACHA20_POLY1305"),
    _aead(0xCCAE, "RSA_PSK", "", "CHACHA20_POLY1305"),
    # AES-CCM, RFC 6655 §3, RFC 7251 §2, RFC 8442 §3
    _aead(0xC09C, "RSA", "", "AES_128_CCM"),
    _aead(0xC09D, "RSA", "", "AES_256_CCM"),
    _aead(0xC09E, "DHE", "RSA", "AES_128_CCM"),
    _aead(0xC09F, "DHE", "RSA", "AES_256_CCM"),
    _aead(0xC0A0, "RSA", "", "AES_128_CCM_8"),
    _aead(0xC0A1, "RSA", "", "AES_256_CCM_8"),
    _aead(0xC0A2, "DHE", "RSA", "AES_128_CCM_8"),
    _aead(0xC0A3, "DHE", "RSA", "AES_256_CCM_8"),
    _aead(0xC0A4, "PSK", "", "AES_128_CCM"),
    _aead(0xC0A5, "PSK", "", "AES_256_CCM"),
    _aead(0xC0A6, "DHE_PSK", "", "AES_128_CCM", name="TLS_DHE_PSK_WITH_AES_128_CCM"),
    _aead(0xC0A7, "DHE_PSK", "", "AES_256_CCM", name="TLS_DHE_PSK_WITH_AES_256_CCM"),
    _aead(0xC0A8, "PSK", "", "AES_128_CCM_8"),
    _aead(0xC0A9, "PSK", "", "AES_256_CCM_8"),
    _aead(0xC0AA, "DHE_PSK", "", "AES_128_CCM_8", name="TLS_PSK_DHE_WITH_AES_128_CCM_8"),
    _aead(0xC0AB, "DHE_PSK", "", "AES_256_CCM_8", name="TLS_PSK_DHE_WITH_AES_256_CCM_8"),
    _aead(0xC0AC, "ECDHE", "ECDSA", "AES_128_CCM"),
    _aead(0xC0AD, "ECDHE", "ECDSA", "AES_256_CCM"),
    _aead(0xC0AE, "ECDHE", "ECDSA", "AES_128_CCM_8"),
    _aead(0xC0AF, "ECDHE", "ECDSA", "AES_256_CCM_8"),
    _aead(0xD003, "ECDHE_PSK", "", "AES_128_CCM_8", name="TLS_ECDHE_PSK_WITH_AES_128_CCM_8_SHA256"),
    _aead(0xD005, "ECDHE_PSK", "", "AES_128_CCM", name="TLS_ECDHE_PSK_WITH_AES_128_CCM_SHA256"),
    # CBC with HMAC, RFC 5246 App. C, RFC 4492, RFC 5289, RFC 4279, RFC 5487, RFC 5489
    _cbc(0x000A, "RSA", "", "3DES_EDE_CBC", "sha1"),
    _cbc(0x002F, "RSA", "", "AES_128_CBC", "sha1"),
    _cbc(0x0033, "DHE", "RSA", "AES_128_CBC", "sha1"),
    _cbc(0x0035, "RSA", "", "AES_256_CBC", "sha1"),
    _cbc(0x0039, "DHE", "RSA", "AES_256_CBC", "sha1"),
    _cbc(0x003C, "RSA", "", "AES_128_CBC", "sha256"),
    _cbc(0x003D, "RSA", "", "AES_256_CBC", "sha256"),
    _cbc(0x0067, "DHE", "RSA", "AES_128_CBC", "sha256"),
    _cbc(0x006B, "DHE", "RSA", "AES_256_CBC", "sha256"),
    _cbc(0x008C, "PSK", "", "AES_128_CBC", "sha1"),
    _cbc(0x008D, "PSK", "", "AES_256_CBC", "sha1"),
    _cbc(0x00AE, "PSK", "", "AES_128_CBC", "sha256"),
    _cbc(0x00AF, "PSK", "", "AES_256_CBC", "sha384"),
    _cbc(0xC009, "ECDHE", "ECDSA", "AES_128_CBC", "sha1"),
    _cbc(0xC00A, "ECDHE", "ECDSA", "AES_256_CBC", "sha1"),
    _cbc(0xC012, "ECDHE", "RSA", "3DES_EDE_CBC", "sha1"),
    _cbc(0xC013, "ECDHE", "RSA", "AES_128_CBC", "sha1"),
    _cbc(0xC014, "ECDHE", "RSA", "AES_256_CBC", "sha1"),
    _cbc(0xC023, "ECDHE", "ECDSA", "AES_128_CBC", "sha256"),
    _cbc(0xC024, "ECDHE", "ECDSA", "AES_256_CBC", "sha384"),
    _cbc(0xC027, "ECDHE", "RSA", "AES_128_CBC", "sha256"),
    _cbc(0xC028, "ECDHE", "RSA", "AES_256_CBC", "sha384"),
    _cbc(0xC035, "ECDHE_PSK", "", "AES_128_CBC", "sha1"),
    _cbc(0xC036, "ECDHE_PSK", "", "AES_256_CBC", "sha1"),
    _cbc(0xC037, "ECDHE_PSK", "", "AES_128_CBC", "sha256"),
    _cbc(0xC038, "ECDHE_PSK", "", "AES_256_CBC", "sha384"),
]

#: Cipher suite id → :class:`CipherSuite`.
CIPHER_SUITES: Final[dict[int, CipherSuite]] = {s.id: s for s in _SUITE_LIST}


def cipher_suite(suite_id: int) -> CipherSuite | None:
    return CIPHER_SUITES.get(suite_id)


# ---------------------------------------------------------------------------------------
# HKDF and the TLS 1.3 key schedule (RFC 5869, RFC 8446 §7)
# ---------------------------------------------------------------------------------------
def hkdf_extract(hash_name: str, salt: bytes, ikm: bytes) -> bytes:
    """RFC 5869 §2.2; an empty salt means HashLen zero bytes."""
    if not salt:
        salt = bytes(_HASH_LEN[hash_name])
    return hmac.new(salt, ikm, hash_name).digest()


def hkdf_expand(hash_name: str, prk: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869 §2.3."""
    hlen = _HASH_LEN[hash_name]
    if length > 255 * hlen:
        raise ValueError("HKDF-Expand length too large")
    out = b""
    t = b""
    i = 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes((i,)), hash_name).digest()
        out += t
        i += 1
    return out[:length]


def hkdf_expand_label(
    hash_name: str,
    secret: bytes,
    label: str | bytes,
    context: bytes,
    length: int,
    *,
    prefix: bytes = b"tls13 ",
) -> bytes:
    """RFC 8446 §7.1: HkdfLabel = uint16 length, opaque label<7..255> = "tls13 " + Label,
    opaque context<0..255>.  TLS 1.3 drafts before 20 used the prefix "TLS 1.3, "."""
    full = prefix + (label.encode("ascii") if isinstance(label, str) else label)
    info = length.to_bytes(2, "big") + bytes((len(full),)) + full + bytes((len(context),)) + context
    return hkdf_expand(hash_name, secret, info, length)


def derive_secret(hash_name: str, secret: bytes, label: str, transcript_hash: bytes) -> bytes:
    """RFC 8446 §7.1 Derive-Secret, given the transcript hash (not the messages)."""
    return hkdf_expand_label(hash_name, secret, label, transcript_hash, _HASH_LEN[hash_name])


def _empty_hash(hash_name: str) -> bytes:
    return hashlib.new(hash_name, b"").digest()


def tls13_early_secret(hash_name: str, psk: bytes | None = None) -> bytes:
    """Early Secret = HKDF-Extract(0, PSK or 0^HashLen)."""
    return hkdf_extract(hash_name, b"", psk if psk is not None else bytes(_HASH_LEN[hash_name]))


def tls13_handshake_secret(hash_name: str, early_secret: bytes, shared_secret: bytes) -> bytes:
    """Handshake Secret = HKDF-Extract(Derive-Secret(Early Secret, "derived", ""), (EC)DHE)."""
    salt = derive_secret(hash_name, early_secret, "derived", _empty_hash(hash_name))
    return hkdf_extract(hash_name, salt, shared_secret)


def tls13_master_secret(hash_name: str, handshake_secret: bytes) -> bytes:
    """Master Secret = HKDF-Extract(Derive-Secret(Handshake Secret, "derived", ""), 0)."""
    salt = derive_secret(hash_name, handshake_secret, "derived", _empty_hash(hash_name))
    return hkdf_extract(hash_name, salt, bytes(_HASH_LEN[hash_name]))


def tls13_traffic_keys(
    suite: CipherSuite, traffic_secret: bytes, *, prefix: bytes = b"tls13 "
) -> tuple[bytes, bytes]:
    """RFC 8446 §7.3: (write_key, write_iv) for a traffic secret."""
    h = suite.prf_hash
    key = hkdf_expand_label(h, traffic_secret, "key", b"", suite.key_length, prefix=prefix)
    iv = hkdf_expand_label(h, traffic_secret, "iv", b"", suite.fixed_iv_length, prefix=prefix)
    return key, iv


def tls13_next_traffic_secret(
    hash_name: str, traffic_secret: bytes, *, prefix: bytes = b"tls13 "
) -> bytes:
    """RFC 8446 §7.2: application_traffic_secret_N+1 after a KeyUpdate (drafts before 20:
    label "application traffic secret" with the "TLS 1.3, " prefix)."""
    label = "traffic upd" if prefix == b"tls13 " else "application traffic secret"
    n = _HASH_LEN[hash_name]
    return hkdf_expand_label(hash_name, traffic_secret, label, b"", n, prefix=prefix)


# ---------------------------------------------------------------------------------------
# TLS 1.0–1.2 PRF and key block (RFC 2246 §5, RFC 5246 §5, §6.3, §8.1; RFC 7627 §4)
# ---------------------------------------------------------------------------------------
def _p_hash(hash_name: str, secret: bytes, seed: bytes, length: int) -> bytes:
    out = b""
    a = seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_name).digest()
        out += hmac.new(secret, a + seed, hash_name).digest()
    return out[:length]


def tls12_prf(
    version: int, hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int
) -> bytes:
    """PRF(secret, label, seed): P_<hash> for TLS 1.2; P_MD5 ⊕ P_SHA-1 for TLS 1.0/1.1."""
    if version >= 0x0303:
        return _p_hash(hash_name, secret, label + seed, length)
    half = (len(secret) + 1) // 2
    md5 = _p_hash("md5", secret[:half], label + seed, length)
    sha = _p_hash("sha1", secret[len(secret) - half :], label + seed, length)
    return bytes(x ^ y for x, y in zip(md5, sha, strict=True))


def tls12_master_secret(
    version: int,
    hash_name: str,
    pre_master_secret: bytes,
    client_random: bytes,
    server_random: bytes,
) -> bytes:
    """RFC 5246 §8.1 (not needed with key logs, which give the master secret directly)."""
    return tls12_prf(
        version, hash_name, pre_master_secret, b"master secret", client_random + server_random, 48
    )


def tls12_extended_master_secret(
    version: int, hash_name: str, pre_master_secret: bytes, session_hash: bytes
) -> bytes:
    """RFC 7627 §4."""
    return tls12_prf(
        version, hash_name, pre_master_secret, b"extended master secret", session_hash, 48
    )


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Tls12Keys:
    """The key block split as in RFC 5246 §6.3 (repr hides the values)."""

    client_mac: bytes
    server_mac: bytes
    client_key: bytes
    server_key: bytes
    client_iv: bytes
    server_iv: bytes

    def __repr__(self) -> str:
        return "<Tls12Keys: redacted>"


def tls12_key_block(
    suite: CipherSuite,
    version: int,
    master_secret: bytes,
    client_random: bytes,
    server_random: bytes,
) -> Tls12Keys:
    """key_block = PRF(master_secret, "key expansion", server_random + client_random)."""
    mac = suite.mac_length
    key = suite.key_length
    if suite.mode == "cbc":
        iv = suite.block_size if version <= 0x0301 else 0  # TLS 1.1+ carry the IV per record
    else:
        iv = suite.fixed_iv_length
    block = tls12_prf(
        version,
        suite.prf_hash,
        master_secret,
        b"key expansion",
        server_random + client_random,
        2 * (mac + key + iv),
    )
    p = 0

    def take(n: int) -> bytes:
        nonlocal p
        p += n
        return block[p - n : p]

    return Tls12Keys(
        client_mac=take(mac),
        server_mac=take(mac),
        client_key=take(key),
        server_key=take(key),
        client_iv=take(iv),
        server_iv=take(iv),
    )


# ---------------------------------------------------------------------------------------
# Record protection
# ---------------------------------------------------------------------------------------
class RecordProtection(Protocol):
    """Decrypts the records of one direction in one epoch."""

    suite: CipherSuite

    def decrypt(
        self, content_type: int, version: int, fragment: bytes, seq: int
    ) -> tuple[int, bytes]:
        """Return (content type, plaintext) or raise AuthenticationFailed / Malformed."""
        ...


if TYPE_CHECKING:
    _AeadCipher = AESGCM | AESCCM | ChaCha20Poly1305

# the ciphers of _aead_factories and _block_ciphers, known without importing cryptography
_AEAD_CIPHERS: Final = frozenset(
    (
        "AES_128_GCM",
        "AES_256_GCM",
        "CHACHA20_POLY1305",
        "AES_128_CCM",
        "AES_256_CCM",
        "AES_128_CCM_8",
        "AES_256_CCM_8",
    )
)
_BLOCK_CIPHERS: Final = frozenset(("AES_128_CBC", "AES_256_CBC", "3DES_EDE_CBC"))


def _make_aead(cipher: str, key: bytes) -> _AeadCipher:
    return _aead_factories()[cipher](key)


@cache
def _aead_factories() -> dict[str, Callable[[bytes], _AeadCipher]]:
    from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

    return {
        "AES_128_GCM": AESGCM,
        "AES_256_GCM": AESGCM,
        "CHACHA20_POLY1305": ChaCha20Poly1305,
        "AES_128_CCM": AESCCM,
        "AES_256_CCM": AESCCM,
        "AES_128_CCM_8": lambda k: AESCCM(k, tag_length=8),
        "AES_256_CCM_8": lambda k: AESCCM(k, tag_length=8),
    }


def _triple_des(key: bytes) -> BlockCipherAlgorithm | None:
    try:
        from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    except ImportError:  # pragma: no cover - cryptography < 43
        return None
    return TripleDES(key)


@cache
def _block_ciphers() -> dict[str, Callable[[bytes], BlockCipherAlgorithm | None]]:
    from cryptography.hazmat.primitives.ciphers import algorithms

    return {
        "AES_128_CBC": algorithms.AES,
        "AES_256_CBC": algorithms.AES,
        "3DES_EDE_CBC": _triple_des,
    }


@cache
def _invalid_tag() -> type[Exception]:
    """cryptography's ``InvalidTag`` (loaded already: an AEAD was built to get here)."""
    from cryptography.exceptions import InvalidTag

    return InvalidTag


def _xor_seq(iv: bytes, seq: int) -> bytes:
    """RFC 8446 §5.3 / RFC 7905 §2: iv XOR the sequence number left-padded to len(iv)."""
    return (int.from_bytes(iv, "big") ^ seq).to_bytes(len(iv), "big")


class Tls13Protection:
    """TLS 1.3 record protection for one traffic secret (RFC 8446 §5.2–§5.4).

    ``prefix`` and ``header_aad`` select a draft's variant (:mod:`.versions`): the
    HKDF-Expand-Label prefix, and whether the record header is the additional data."""

    __slots__ = ("suite", "_aead", "_iv", "_header_aad")

    def __init__(
        self,
        suite: CipherSuite,
        traffic_secret: bytes,
        *,
        prefix: bytes = b"tls13 ",
        header_aad: bool = True,
    ) -> None:
        if not suite.tls13:
            raise ValueError(f"{suite.name} is not a TLS 1.3 suite")
        if len(traffic_secret) != suite.hash_length:
            raise ValueError(f"{len(traffic_secret)}-byte secret for a {suite.prf_hash} suite")
        key, iv = tls13_traffic_keys(suite, traffic_secret, prefix=prefix)
        self.suite = suite
        self._aead = _make_aead(suite.cipher, key)
        self._iv = iv
        self._header_aad = header_aad

    def decrypt(
        self, content_type: int, version: int, fragment: bytes, seq: int
    ) -> tuple[int, bytes]:
        n = len(fragment)
        if n < self.suite.tag_length + 1:
            raise Malformed(f"{n}-byte protected record is shorter than tag + content type")
        aad = (
            bytes((content_type, version >> 8, version & 0xFF, n >> 8, n & 0xFF))
            if self._header_aad
            else b""
        )
        try:
            inner = self._aead.decrypt(_xor_seq(self._iv, seq), bytes(fragment), aad)
        except _invalid_tag():
            raise AuthenticationFailed("AEAD tag does not verify") from None
        stripped = inner.rstrip(b"\x00")
        if not stripped:
            # RFC 8446 §5.4: "If a receiving implementation does not find a non-zero octet in
            # the cleartext, it MUST terminate the connection with an "unexpected_message" alert."
            raise Malformed("TLSInnerPlaintext has no non-zero content type")
        return stripped[-1], stripped[:-1]


class Tls12AeadProtection:
    """TLS 1.2 AEAD records: GCM/CCM with explicit nonce, or ChaCha20-Poly1305 (RFC 7905)."""

    __slots__ = ("suite", "_aead", "_iv")

    def __init__(self, suite: CipherSuite, key: bytes, fixed_iv: bytes) -> None:
        self.suite = suite
        self._aead = _make_aead(suite.cipher, key)
        self._iv = fixed_iv

    def decrypt(
        self, content_type: int, version: int, fragment: bytes, seq: int
    ) -> tuple[int, bytes]:
        s = self.suite
        explicit = s.record_iv_length
        n = len(fragment) - explicit - s.tag_length
        if n < 0:
            raise Malformed(f"{len(fragment)}-byte AEAD record is shorter than nonce + tag")
        if explicit:
            # RFC 5288 §3: nonce = salt (4 bytes of the key block) + nonce_explicit (8 bytes)
            nonce = self._iv + bytes(fragment[:explicit])
        else:
            # RFC 7905 §2: the 64-bit sequence number, padded to 96 bits, XORed with the IV
            nonce = _xor_seq(self._iv, seq)
        aad = seq.to_bytes(8, "big") + bytes(
            (content_type, version >> 8, version & 0xFF, n >> 8, n & 0xFF)
        )
        try:
            plaintext = self._aead.decrypt(nonce, bytes(fragment[explicit:]), aad)
        except _invalid_tag():
            raise AuthenticationFailed("AEAD tag does not verify") from None
        return content_type, plaintext


class Tls12CbcProtection:
    """TLS 1.0–1.2 block cipher records with HMAC (RFC 5246 §6.2.3.2, RFC 7366)."""

    __slots__ = ("suite", "_key", "_mac_key", "_iv", "_explicit_iv", "_etm", "_algorithm")

    def __init__(
        self,
        suite: CipherSuite,
        version: int,
        key: bytes,
        mac_key: bytes,
        iv: bytes,
        *,
        encrypt_then_mac: bool,
    ) -> None:
        algorithm = _block_ciphers()[suite.cipher](key)
        if algorithm is None:
            raise ValueError(f"{suite.cipher} is not available in this cryptography build")
        self.suite = suite
        self._algorithm = algorithm
        self._key = key
        self._mac_key = mac_key
        self._iv = iv  # TLS 1.0 only: the chained IV (RFC 2246 §6.2.3.2)
        self._explicit_iv = version >= 0x0302  # RFC 4346 §6.2.3.2
        self._etm = encrypt_then_mac

    def _mac(self, seq: int, content_type: int, version: int, data: bytes) -> bytes:
        n = len(data)
        header = seq.to_bytes(8, "big") + bytes(
            (content_type, version >> 8, version & 0xFF, n >> 8, n & 0xFF)
        )
        return hmac.new(self._mac_key, header + data, self.suite.mac or "sha1").digest()

    def decrypt(
        self, content_type: int, version: int, fragment: bytes, seq: int
    ) -> tuple[int, bytes]:
        s = self.suite
        bs = s.block_size
        fragment = bytes(fragment)
        mac_len = s.mac_length
        if self._etm:
            # RFC 7366 §3: MAC(MAC_write_key, seq_num + type + version + length +
            # IV + ENC(content + padding + padding_length)), checked before decryption.
            if len(fragment) < mac_len:
                raise Malformed("encrypt-then-MAC record shorter than its MAC")
            body, mac = fragment[:-mac_len], fragment[-mac_len:]
            if not hmac.compare_digest(self._mac(seq, content_type, version, body), mac):
                self._chain(body)
                raise AuthenticationFailed("encrypt-then-MAC does not verify")
            padded = self._decrypt_body(body, bs)
            pad = padded[-1]
            if pad + 1 > len(padded) or padded[-pad - 1 :] != bytes((pad,)) * (pad + 1):
                raise AuthenticationFailed("bad CBC padding")
            return content_type, padded[: -pad - 1]
        padded = self._decrypt_body(fragment, bs)
        pad = padded[-1]
        if pad + 1 + mac_len > len(padded) or padded[-pad - 1 :] != bytes((pad,)) * (pad + 1):
            # RFC 5246 §6.2.3.2: a padding error is reported as bad_record_mac, like a MAC error
            raise AuthenticationFailed("bad CBC padding")
        content = padded[: -pad - 1 - mac_len]
        mac = padded[len(content) : len(content) + mac_len]
        if not hmac.compare_digest(self._mac(seq, content_type, version, content), mac):
            raise AuthenticationFailed("record MAC does not verify")
        return content_type, content

    def _decrypt_body(self, body: bytes, bs: int) -> bytes:
        if self._explicit_iv:
            iv, ct = body[:bs], body[bs:]
        else:
            iv, ct = self._iv, body
        if not ct or len(ct) % bs or (self._explicit_iv and len(iv) != bs):
            self._chain(body)
            raise Malformed(f"CBC ciphertext of {len(ct)} bytes is not a positive multiple of {bs}")
        from cryptography.hazmat.primitives.ciphers import Cipher, modes

        dec = Cipher(self._algorithm, modes.CBC(iv)).decryptor()
        padded = dec.update(ct) + dec.finalize()
        self._chain(body)
        return padded

    def _chain(self, body: bytes) -> None:
        if not self._explicit_iv and len(body) >= self.suite.block_size:
            self._iv = body[-self.suite.block_size :]


def make_tls12_protection(
    suite: CipherSuite,
    version: int,
    keys: Tls12Keys,
    *,
    client: bool,
    encrypt_then_mac: bool = False,
) -> RecordProtection:
    """Protection for the client's (``client=True``) or the server's records."""
    key = keys.client_key if client else keys.server_key
    iv = keys.client_iv if client else keys.server_iv
    if suite.mode == "aead":
        return Tls12AeadProtection(suite, key, iv)
    mac = keys.client_mac if client else keys.server_mac
    return Tls12CbcProtection(suite, version, key, mac, iv, encrypt_then_mac=encrypt_then_mac)

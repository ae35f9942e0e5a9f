"""TLS protocol versions: names, and the TLS 1.3 drafts and variants seen on the wire.

Before RFC 8446, TLS 1.3 drafts were deployed with their own version numbers:
``0x7f00 | n`` for draft-n (draft-ietf-tls-tls13-n §4.2.1), ``0xfb17`` / ``0xfb1a`` for
Facebook's fizz builds of drafts 23 and 26, and ``0x7e01``… for Google's 2017 "TLS 1.3
experiment" variants (BoringSSL/Chrome).  All of them are TLS 1.3 for the handshake
state machine.  What changes between drafts and matters here (as Wireshark handles them,
``packet-tls-utils.c``):

* drafts before 22 send a ServerHello without legacy_session_id_echo and
  legacy_compression_method, its first field is the negotiated version (draft-21 §4.1.3);
  draft-22 brought the TLS 1.2-looking ServerHello and supported_versions;
* the HKDF-Expand-Label prefix is ``"TLS 1.3, "`` before draft-20 and ``"tls13 "`` since
  (draft-20 §7.1), and the KeyUpdate label was ``"application traffic secret"``;
* the record header is the AEAD additional data since draft-25 (§5.2), empty before.

Traffic keys for the experiment variants are not documented: they are recognised, not
decrypted (``unsupported_version``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "TLS13",
    "is_tls13",
    "tls13_draft",
    "tls13_label_prefix",
    "tls13_record_aad",
    "tls13_schedule_known",
    "version_name",
]

TLS13: Final = 0x0304
_NAMES: Final = {
    0x0002: "SSL 2.0",
    0x0300: "SSL 3.0",
    0x0301: "TLS 1.0",
    0x0302: "TLS 1.1",
    0x0303: "TLS 1.2",
    0x0304: "TLS 1.3",
}
#: fizz (Facebook) builds of TLS 1.3 drafts: version → draft number
_FACEBOOK: Final = {0xFB17: 23, 0xFB1A: 26}


def tls13_draft(version: int | None) -> int | None:
    """The TLS 1.3 draft a version number stands for (0 for the RFC), else None.

    The experiment variants 0x7e01… return -1: TLS 1.3, draft unknown."""
    if version is None:
        return None
    if version == TLS13:
        return 0
    if version >> 8 == 0x7F:
        return version & 0xFF
    if version in _FACEBOOK:
        return _FACEBOOK[version]
    if version >> 8 == 0x7E:
        return -1
    return None


def is_tls13(version: int | None) -> bool:
    """TLS 1.3, one of its drafts or a pre-RFC variant."""
    return tls13_draft(version) is not None


def tls13_schedule_known(version: int | None) -> bool:
    """Record protection can be derived from key-log secrets for this version: the RFC,
    drafts 14–28 and fizz's drafts 23 and 26 (what Wireshark decrypts)."""
    d = tls13_draft(version)
    return d is not None and (d == 0 or 14 <= d <= 28)


def tls13_label_prefix(version: int | None) -> bytes:
    """HKDF-Expand-Label's prefix: "TLS 1.3, " before draft-20, "tls13 " since."""
    d = tls13_draft(version)
    return b"TLS 1.3, " if d is not None and 0 < d < 20 else b"tls13 "


def tls13_record_aad(version: int | None) -> bool:
    """The record header is the AEAD additional data (RFC 8446 §5.2; draft-25 on)."""
    d = tls13_draft(version)
    return d is None or d == 0 or d >= 25


def version_name(version: int) -> str:
    """``TLS 1.2``, ``TLS 1.3 (draft 20)``, ``TLS 1.3 (Facebook draft 26)``, … (Wireshark's
    names), ``GREASE`` for RFC 8701 values, else ``0x%04x``."""
    if version in _NAMES:
        return _NAMES[version]
    d = tls13_draft(version)
    if version in _FACEBOOK:
        return f"TLS 1.3 (Facebook draft {d})"
    if d is not None and d > 0:
        return f"TLS 1.3 (draft {d})"
    if d == -1:
        return f"TLS 1.3 (experiment 0x{version:04x})"
    if version & 0x0F0F == 0x0A0A and version >> 8 == version & 0xFF:
        return "GREASE"
    return f"0x{version:04x}"

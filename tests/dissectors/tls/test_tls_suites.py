"""Cipher suite names: the IANA registry, whole (issue 13 class 7)."""

from __future__ import annotations

from dissectors.tls.crypto import CIPHER_SUITES
from dissectors.tls.suites import CIPHER_SUITE_NAMES, cipher_suite_name, is_grease


def test_every_registered_suite_has_its_iana_name() -> None:
    # a few from each era of the registry (RFC 5246, RFC 4492, RFC 7905, RFC 8446, RFC 8998)
    assert cipher_suite_name(0x0005) == "TLS_RSA_WITH_RC4_128_SHA"
    assert cipher_suite_name(0x0004) == "TLS_RSA_WITH_RC4_128_MD5"
    assert cipher_suite_name(0x00FF) == "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"
    assert cipher_suite_name(0x5600) == "TLS_FALLBACK_SCSV"
    assert cipher_suite_name(0xC011) == "TLS_ECDHE_RSA_WITH_RC4_128_SHA"
    assert cipher_suite_name(0xCCA8) == "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
    assert cipher_suite_name(0x1305) == "TLS_AES_128_CCM_8_SHA256"
    assert cipher_suite_name(0x00C6) == "TLS_SM4_GCM_SM3"
    assert len(CIPHER_SUITE_NAMES) == 352


def test_decryptable_suites_keep_their_names() -> None:
    for sid, suite in CIPHER_SUITES.items():
        assert CIPHER_SUITE_NAMES[sid] == suite.name


def test_grease_and_unassigned_values() -> None:
    assert is_grease(0x0A0A) and is_grease(0xFAFA) and not is_grease(0x0A1A)
    assert cipher_suite_name(0x3A3A) == "GREASE"
    assert cipher_suite_name(0x0100) == "0x0100"

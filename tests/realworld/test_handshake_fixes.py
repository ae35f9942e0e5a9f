"""Handshake facts on real captures from ../shared/realworld (issue 13), one test per
class of error found on traffic nobody here made.  Skips when ../shared is absent."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import pcapkit

NDPI = (Path(__file__).resolve().parents[2].parent / "shared" / "realworld" / "ndpi").resolve()


def _open(name: str) -> pcapkit.Trace:
    path = NDPI / "pcap" / name
    if not path.is_file():
        pytest.skip(f"{path} not found (../shared/realworld)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pcapkit.open(path)


def test_class7_every_iana_cipher_suite_is_named() -> None:
    """whatsapp_login_call.pcap: Apple servers choose TLS_RSA_WITH_RC4_128_MD5 (0x0004),
    which nDPI names and tshark shows as such; the table used to leave it empty.  RC4
    is still not decrypted (unsupported_suite)."""
    with _open("whatsapp_login_call.pcap") as t:
        tls = t.tls.set_index("flow")
        rc4 = tls[tls.cipher == "TLS_RSA_WITH_RC4_128_MD5"]
        assert len(rc4) == 3
        assert set(rc4.why_not) == {"unsupported_suite"}
        assert tls.cipher.notna().sum() == tls.version.notna().sum()  # every ServerHello named


def test_class6_tls13_draft_versions_are_tls13() -> None:
    """instagram.pcap: fizz (Facebook) negotiates 0xfb1a, TLS 1.3 draft-26, in
    supported_versions — tshark: "TLS 1.3 (Facebook draft 26)", nDPI: "TLSv1.3 (Fizz)".
    The session used to treat it as an unknown version (why_not unsupported_version on one
    flow); it is TLS 1.3 with the RFC key schedule, so without keys: missing_key.
    (The short ServerHello of drafts before 22 has a SYNTHETIC test in
    tests/dissectors/tls/test_tls_session.py: no capture in ../shared has one.)"""
    with _open("instagram.pcap") as t:
        fb = t.tls[t.tls.version.str.startswith("TLS 1.3", na=False)]
        assert len(fb) == 6
        assert set(fb.version) == {"TLS 1.3 (Facebook draft 26)"}
        assert set(fb.why_not) == {"missing_key"}
        recs = t.records[t.records.flow.isin(fb.flow) & (t.records.outer_content_type == 23)]
        assert set(recs.epoch) <= {"early", "handshake", "application"}  # the TLS 1.3 machine

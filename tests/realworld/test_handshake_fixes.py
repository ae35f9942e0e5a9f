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
    google_ssl.pcap TLS_RSA_WITH_RC4_128_SHA (0x0005),
    which nDPI names and tshark shows as such; the table used to leave it empty.  RC4
    is still not decrypted (unsupported_suite)."""
    with _open("whatsapp_login_call.pcap") as t:
        tls = t.tls.set_index("flow")
        rc4 = tls[tls.cipher == "TLS_RSA_WITH_RC4_128_MD5"]
        assert len(rc4) == 3
        assert set(rc4.why_not) == {"unsupported_suite"}
        assert tls.cipher.notna().sum() == tls.version.notna().sum()  # every ServerHello named
    with _open("google_ssl.pcap") as t:  # 0x0005, the suite the issue names
        assert t.tls.cipher.tolist() == ["TLS_RSA_WITH_RC4_128_SHA"]
        assert t.tls.why_not.tolist() == ["unsupported_suite"]


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


@pytest.mark.parametrize(
    ("name", "version", "sni", "alpn_offered"),
    [
        ("quic-23.pcap", "draft-23", "quic.aiortc.org", "h3-22"),
        ("quic-24.pcap", "draft-24", "localhost", "h3-24"),
        ("quic-27.pcap", "draft-27", "play.google.com", "h3-27"),
        ("quic-mvfst-22.pcap", "mvfst-draft-22", "graph.facebook.com", "h3-fb-05,h1q-fb"),
        ("quic-mvfst-27.pcapng", "mvfst-draft-27", "graph.facebook.com", "h3-fb-05"),
        ("quic-mvfst-exp.pcap", "mvfst-exp", "video.fmct2-3.fna.fbcdn.net", "h3-fb-05"),
    ],
)
def test_quic_drafts_and_mvfst_initials_are_read(
    name: str, version: str, sni: str, alpn_offered: str
) -> None:
    """QUIC drafts 22-34 and Facebook's mvfst: their Initials decrypt with the draft's
    salt (Wireshark's choice per draft) — SNI and offered ALPNs as nDPI reads them.  They
    used to be no QUIC at all (no row).  Draft-24's Retry has no integrity tag: its ODCID
    field is checked instead; drafts before 27 encode transport parameters differently."""
    with _open(name) as t:
        (q,) = t.quic.itertuples()
        assert (q.version_name, q.sni, q.alpn_offered) == (version, sni, alpn_offered)
        names = set(t.anomalies.name)
        assert not names & {"retry_integrity_failed", "transport_parameters_malformed"}
        if name == "quic-24.pcap":
            assert q.retry


def test_quic_client_forcing_version_negotiation() -> None:
    """quic_interop_V.pcapng: clients open with the reserved version 0x0a0a0a0a (RFC 9000
    §15, forcing Version Negotiation) — QUIC, shown with that version (nDPI:
    "Ver-Negotiation"); quic-forcing-vn-with-data.pcapng: the client goes on in v1."""
    with _open("quic_interop_V.pcapng") as t:
        assert len(t.quic) == 63 and set(t.quic.version) == {"0x0a0a0a0a"}
    with _open("quic-forcing-vn-with-data.pcapng") as t:
        (q,) = t.quic.itertuples()
        assert q.version_name == "v1" and q.version_negotiation and q.retry
        assert t.quic_handshake.client_initial_frame.iloc[0] == 1  # the 0xbabababa Initial


def test_repeated_synack_with_a_new_isn() -> None:
    """tls_multiple_synack_different_seq.pcapng: the server sends four SYN/ACKs, the last
    two with new ISNs; the client acknowledges the last one and the server's data continue
    from it.  Wireshark re-bases there ("TCP port numbers reused"): tcp.seq of frames 1-10
    is 0 0 0 0 1 1 97 1457 2817 4177.  We took the first SYN/ACK's ISN, saw the server's
    bytes 2.5 GB away as spurious retransmissions and never read its ServerHello (nDPI:
    TLSv1.2, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)."""
    with _open("tls_multiple_synack_different_seq.pcapng") as t:
        assert t.packets.rel_seq.tolist() == [0, 0, 0, 0, 1, 1, 97, 1457, 2817, 4177]
        assert set(t.segments.kind) == {"new"}
        (tls,) = t.tls.itertuples()
        assert (tls.version, tls.cipher) == ("TLS 1.2", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")


def test_quic_new_attempt_after_version_negotiation() -> None:
    """quic-28.pcap: the client's draft-28 Initial is answered by Version Negotiation; it
    starts over in draft-27 with a new ClientHello (RFC 9000 §6.2), which the server
    answers.  That is a new CRYPTO stream, not conflicting retransmitted data, and its
    random is the one the key log would name."""
    with _open("quic-28.pcap") as t:
        assert "crypto_data_conflict" not in set(t.anomalies.name)
        assert t.quic_tls.name.tolist()[:3] == ["CLIENT_HELLO", "CLIENT_HELLO", "SERVER_HELLO"]
        (q,) = t.quic.itertuples()
        assert q.version_name == "draft-27" and q.version_negotiation
        assert q.alpn_offered == "h3-28,h3-27" and bool(t.quic_tls.decoded.iloc[1])

"""The external corpus (../shared/corpus, MANIFEST.md): illustrated-quic byte-exact against
its published ``caps/`` and the Wireshark fragmented-handshake capture's PEER facts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from quic_capture import run_capture

from dissectors.quic import QUIC_DRAFT_29, QUIC_V1, PacketSpace, PacketType, looks_like_quic

pytestmark = pytest.mark.corpus

# Per datagram: (packet type, packet number) of each coalesced packet.  MANIFEST.md says
# "8 datagrams" but its list stops at 6 and puts 1-RTT alone in datagrams 5 and 6; the
# capture (and caps/pkt*_chand1/cdata0, shand2/sdata0) has Handshake PN1 + 1-RTT PN0 in
# datagram 5, Handshake PN2 + 1-RTT PN0 in 6, then 1-RTT PN1 each way in 7 and 8.
ILLUSTRATED_PACKETS = [
    [("initial", 0)],
    [("initial", 0), ("handshake", 0)],
    [("handshake", 1)],
    [("initial", 1), ("handshake", 0)],
    [("handshake", 1), ("1rtt", 0)],
    [("handshake", 2), ("1rtt", 0)],
    [("1rtt", 1)],
    [("1rtt", 1)],
]


@pytest.fixture(scope="module")
def illustrated(corpus: Path):  # type: ignore[no-untyped-def]
    d = corpus / "illustrated-quic"
    (flow,) = run_capture(d / "capture.pcap", d / "keylog.txt", keep_plaintext=True)
    return d, flow


def test_illustrated_packets_per_datagram(illustrated) -> None:  # type: ignore[no-untyped-def]
    _, flow = illustrated
    conn = flow.conn
    by_frame: dict[int, list[tuple[str, int | None]]] = {}
    for r in conn.packets:
        assert r.decrypted and r.reason is None, (r.frame, r.reason)
        by_frame.setdefault(r.frame, []).append((r.packet_type.value, r.packet_number))
    assert [by_frame[f] for f in sorted(by_frame)] == ILLUSTRATED_PACKETS
    assert [c for _, c in flow.datagrams] == [True, False, False, True, True, False, True, False]


def test_illustrated_byte_exact(illustrated) -> None:  # type: ignore[no-untyped-def]
    d, flow = illustrated
    caps = d / "caps"
    payloads = sorted(caps.glob("pkt_payload*"))
    assert len(payloads) == 12
    packets = flow.conn.packets
    for cap, rec in zip(payloads, packets, strict=True):
        tag = cap.name.split("_")[-1]  # e.g. cinit0, shand2, cdata1
        direction = "c2s" if tag[0] == "c" else "s2c"
        kind = {
            "init": PacketType.INITIAL,
            "hand": PacketType.HANDSHAKE,
            "data": PacketType.ONE_RTT,
        }[tag[1:5]]
        assert (rec.direction, rec.packet_type, rec.packet_number) == (
            direction,
            kind,
            int(tag[5:]),
        )
        assert rec.plaintext == cap.read_bytes(), cap.name
        unprot = (caps / cap.name.replace("payload", "unprot")).read_bytes()
        assert unprot[: len(rec.header)] == rec.header, cap.name
    # the TLS handshake bytes carried in CRYPTO frames, per space and direction
    conn = flow.conn
    cat = lambda *names: b"".join((caps / n).read_bytes() for n in names)  # noqa: E731
    assert conn.crypto_bytes(PacketSpace.INITIAL, "c2s").data == cat("crypto_clienthello")
    assert conn.crypto_bytes(PacketSpace.INITIAL, "s2c").data == cat("crypto_serverhello")
    assert conn.crypto_bytes(PacketSpace.HANDSHAKE, "s2c").data == cat(
        "crypto_extensions", "crypto_cert", "crypto_certverify", "crypto_s_finished"
    )
    assert conn.crypto_bytes(PacketSpace.HANDSHAKE, "c2s").data == cat("crypto_c_finished")


def test_illustrated_connection_facts(illustrated) -> None:  # type: ignore[no-untyped-def]
    _, flow = illustrated
    c = flow.conn
    assert c.version == QUIC_V1 and c.client_dcid_hex == "0001020304050607"
    assert c.connection_ids("c2s") == {b"c_cid"} and c.connection_ids("s2c") == {b"s_cid"}
    assert c.sni == "example.ulfheim.net" and c.alpn == "ping/1.0"
    assert c.cipher_suite == 0x1301
    assert c.stream_bytes(0, "c2s").data == b"ping" and c.stream_bytes(0, "s2c").data == b"pong"
    assert [(r.stream_id, r.offset, r.length, r.fin) for r in c.stream_frames] == [
        (0, 0, 4, True),
        (0, 0, 4, True),
    ]
    names = [(m.direction, m.name) for m in c.tls_messages]
    assert names == [
        ("c2s", "CLIENT_HELLO"), ("s2c", "SERVER_HELLO"), ("s2c", "ENCRYPTED_EXTENSIONS"),
        ("s2c", "CERTIFICATE"), ("s2c", "CERTIFICATE_VERIFY"), ("s2c", "FINISHED"),
        ("c2s", "FINISHED"),
    ]  # fmt: skip
    h = c.handshake
    assert h.client_initial is not None and h.client_initial.frame == 1
    assert h.client_finished is not None and h.client_finished.frame == 5
    assert h.handshake_done is not None and h.handshake_done.frame == 6
    assert h.handshake_ms is not None and h.handshake_ms > 0
    assert c.anomalies == []


def test_illustrated_recognised_by_content(corpus: Path) -> None:
    import pcapkit

    with pcapkit.open(corpus / "illustrated-quic" / "capture.pcap") as t:
        dgs = sorted(t.datagrams(0, "c2s") + t.datagrams(0, "s2c"))
    # datagrams 1–6 start with a long header; 7 and 8 are short-header only
    assert [looks_like_quic(b) for _, b in dgs] == [True] * 6 + [False] * 2


FRAG = "wireshark/quic-fragmented-handshakes.pcapng.gz"


def test_fragmented_handshakes_initial_only(corpus: Path) -> None:
    """PEER (MANIFEST): ClientHello 18, ServerHello 2 — with Initial keys alone."""
    flows = run_capture(corpus / FRAG, use_dsb=False)
    msgs = Counter(m.name for f in flows for m in f.conn.tls_messages)
    assert msgs["CLIENT_HELLO"] == 18
    # one HelloRetryRequest (a ServerHello on the wire, RFC 8446 §4.1.3) + one ServerHello
    assert msgs["SERVER_HELLO"] + msgs["HELLO_RETRY_REQUEST"] == 2
    for f in flows:
        for r in f.conn.packets:
            if r.packet_type is PacketType.INITIAL:
                assert r.decrypted, (r.frame, r.reason)
            elif r.packet_type in (PacketType.HANDSHAKE, PacketType.ONE_RTT):
                assert not r.decrypted and r.reason == (
                    f"no keys for {'Handshake' if r.packet_type is PacketType.HANDSHAKE else '1-RTT'}: no key log"
                )
        assert f.conn.anomalies == []
    main = flows[0].conn
    assert main.version == QUIC_DRAFT_29 and main.hello_retry_request
    (retry,) = [r for r in main.packets if r.packet_type is PacketType.RETRY]
    assert retry.frame == 2 and retry.retry_integrity_ok is True  # draft-29 Retry key
    assert {f.conn.version for f in flows} == {QUIC_V1, QUIC_DRAFT_29}
    # every ClientHello but the one on ::1 (frame 17) names a server, as tshark shows
    assert sum(1 for f in flows if f.conn.sni) == 16
    assert flows[1].conn.alpn_offered[:2] == ("h3-34", "hq-34") and flows[1].conn.sni is None
    assert main.sni == "localhost" and main.alpn_offered == ("h3-29",)


def test_fragmented_handshakes_with_embedded_keys(corpus: Path) -> None:
    """With the capture's Decryption Secrets Blocks: Finished 2, NewSessionTicket pair.

    MANIFEST's "Certificate 2" counts Certificate and CertificateVerify (tshark 4.0 shows
    one Certificate, type 11, and one CertificateVerify, type 15, both in the server's
    Handshake packets)."""
    flows = run_capture(corpus / FRAG)
    msgs = Counter(m.name for f in flows for m in f.conn.tls_messages)
    assert msgs["FINISHED"] == 2
    assert msgs["CERTIFICATE"] == 1 and msgs["CERTIFICATE_VERIFY"] == 1
    assert msgs["NEW_SESSION_TICKET"] == 2
    main = flows[0].conn
    assert main.cipher_name == "TLS_CHACHA20_POLY1305_SHA256" and main.alpn == "h3-29"
    assert all(r.decrypted for r in main.packets if r.packet_type is not PacketType.RETRY)
    assert b"404" in main.stream_bytes(0, "s2c").data

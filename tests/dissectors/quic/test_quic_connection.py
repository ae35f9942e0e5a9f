"""QuicConnection on synthetic traffic built from the RFC 9001 Appendix A packets.

The client Initial (A.2, ClientHello with random ebf8fa56…, SNI example.com) and server
Initial (A.3, ServerHello TLS_AES_128_GCM_SHA256) are followed by 1-RTT packets protected
here with made-up traffic secrets given as a key log mapping: key update (RFC 9001 §6),
reordering across the update, STREAM reassembly with a hole, a retransmission and FIN,
and the reasons given for what cannot be decrypted.
"""

from __future__ import annotations

import pytest
from test_quic_crypto import RFC9001_CLIENT_PACKET, RFC9001_SERVER_PACKET

from dissectors._wire import encode_varint as v
from dissectors.quic import QUIC_SUITES, QUIC_V1, PacketProtection, PacketType, QuicConnection
from dissectors.quic.frames import Stream

CLIENT_RANDOM = bytes.fromhex("ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c")
SERVER_CID = bytes.fromhex("f067a5502a4262b5")  # A.3 server SCID; the A.2 client SCID is empty
S_SECRET = bytes(range(32))
C_SECRET = bytes(range(32, 64))
AES128 = QUIC_SUITES[0x1301]


def short_packet(prot: PacketProtection, dcid: bytes, pn: int, phase: int, frames: bytes) -> bytes:
    header = bytes((0x40 | phase << 2 | 1,)) + dcid + pn.to_bytes(2, "big")
    return prot.protect(header, 1 + len(dcid), pn, frames + bytes(max(0, 4 - len(frames))))


def stream(sid: int, off: int, data: bytes, fin: bool = False) -> bytes:
    return bytes((0x0E | fin,)) + v(sid) + v(off) + v(len(data)) + data


def handshake(keylog: dict[bytes, dict[str, bytes]] | None) -> QuicConnection:
    conn = QuicConnection(keylog)
    (ci,) = conn.feed(RFC9001_CLIENT_PACKET, 1, 1_000_000, True)
    assert ci.decrypted and ci.packet_type is PacketType.INITIAL and ci.packet_number == 2
    (si,) = conn.feed(RFC9001_SERVER_PACKET, 2, 31_000_000, False)
    assert si.decrypted and si.packet_number == 1 and si.frame_names == ("ACK", "CRYPTO")
    return conn


def test_handshake_facts_from_initials_only() -> None:
    conn = handshake(None)
    assert conn.version == QUIC_V1 and conn.client_dcid_hex == "8394c8f03e515708"
    assert conn.client_random == CLIENT_RANDOM
    assert conn.sni == "example.com" and conn.alpn_offered == ("alpn",)
    assert conn.cipher_suite == 0x1301 and conn.cipher_name == "TLS_AES_128_GCM_SHA256"
    assert [m.name for m in conn.tls_messages] == ["CLIENT_HELLO", "SERVER_HELLO"]
    assert conn.handshake.server_hello_ms == 30.0
    assert conn.connection_ids("s2c") == {SERVER_CID}


def test_key_update_reordering_and_stream_reassembly() -> None:
    conn = handshake({CLIENT_RANDOM: {"SERVER_TRAFFIC_SECRET_0": S_SECRET,
                                      "CLIENT_TRAFFIC_SECRET_0": C_SECRET}})  # fmt: skip
    p0 = PacketProtection(QUIC_V1, AES128, S_SECRET)
    p1 = p0.next_phase()
    pkts = [
        short_packet(p0, b"", 0, 0, stream(3, 0, b"hello ")),
        short_packet(p1, b"", 2, 1, stream(3, 12, b"!", fin=True)),  # key update
        short_packet(p0, b"", 1, 0, stream(3, 6, b"world ")),  # late, old phase
        short_packet(p1, b"", 3, 1, stream(3, 0, b"hello ") + b"\x1e"),  # retransmission
    ]
    recs = [conn.feed(p, 10 + i, 40_000_000 + i, False)[0] for i, p in enumerate(pkts)]
    assert [r.decrypted for r in recs] == [True] * 4
    assert [r.packet_number for r in recs] == [0, 2, 1, 3]
    assert [r.key_phase for r in recs] == [0, 1, 0, 1]
    assert conn.key_updates == {"c2s": 0, "s2c": 1}
    sd = conn.stream_bytes(3, "s2c")
    assert sd.data == b"hello world !" and sd.complete and sd.final_size == 13
    rows = conn.stream_frames
    assert [(r.offset, r.length, r.fin, r.retransmission) for r in rows] == [
        (0, 6, False, False),
        (12, 1, True, False),
        (6, 6, False, False),
        (0, 6, False, True),
    ]
    assert [r.contiguous_end for r in rows] == [6, 6, 13, 13]
    assert conn.handshake.handshake_done is not None
    # client → server short headers use the server's CID (learned from its Initial)
    c0 = PacketProtection(QUIC_V1, AES128, C_SECRET)
    (cr,) = conn.feed(short_packet(c0, SERVER_CID, 0, 0, stream(0, 0, b"GET")), 20, 0, True)
    assert cr.decrypted and cr.dcid == SERVER_CID
    assert conn.stream_bytes(0, "c2s").data == b"GET"
    assert conn.streams() == [(0, "c2s"), (3, "s2c")]
    # a corrupted packet is a reason, never garbage
    bad = bytearray(short_packet(p1, b"", 4, 1, stream(3, 13, b"x")))
    bad[-1] ^= 0xFF
    (br,) = conn.feed(bytes(bad), 21, 0, False)
    assert not br.decrypted and br.reason == "authentication failed" and br.frames == ()
    assert conn.anomalies == []


def test_reasons_when_keys_are_missing() -> None:
    conn = handshake({CLIENT_RANDOM: {"SERVER_TRAFFIC_SECRET_0": S_SECRET}})
    c0 = PacketProtection(QUIC_V1, AES128, C_SECRET)
    (r,) = conn.feed(short_packet(c0, SERVER_CID, 0, 0, stream(0, 0, b"x")), 5, 0, True)
    assert not r.decrypted and r.packet_number is None
    assert r.reason == (
        "no keys for 1-RTT: key log has no CLIENT_TRAFFIC_SECRET_0 for this ClientHello"
    )
    hs = PacketProtection(QUIC_V1, AES128, bytes(32))
    header = b"\xe1\x00\x00\x00\x01\x00\x08" + SERVER_CID + v(40) + b"\x00\x00"
    pkt = hs.protect(header, len(header) - 2, 0, b"\x01" + bytes(21))
    (h,) = conn.feed(pkt, 6, 0, False)
    assert h.packet_type is PacketType.HANDSHAKE and not h.decrypted
    assert h.reason is not None and "SERVER_HANDSHAKE_TRAFFIC_SECRET" in h.reason

    bare = handshake(None)
    (r2,) = bare.feed(short_packet(c0, SERVER_CID, 0, 0, stream(0, 0, b"x")), 5, 0, True)
    assert r2.reason == "no keys for 1-RTT: no key log"


def test_short_header_dcid_length_guessed_from_keys() -> None:
    conn = QuicConnection({CLIENT_RANDOM: {"CLIENT_TRAFFIC_SECRET_0": C_SECRET}})
    conn.feed(RFC9001_CLIENT_PACKET, 1, 0, True)  # no server packet: CID length unknown
    c0 = PacketProtection(QUIC_V1, AES128, C_SECRET)
    (r,) = conn.feed(short_packet(c0, SERVER_CID, 7, 0, stream(0, 0, b"hi")), 2, 0, True)
    assert r.decrypted and r.dcid == SERVER_CID and r.packet_number == 7
    assert conn.connection_ids("s2c") == {SERVER_CID}
    assert isinstance(r.frames[0], Stream)


def test_retry_rekeys_initial_and_bad_tag_is_reported() -> None:
    from test_quic_crypto import RFC9001_RETRY

    conn = QuicConnection()
    conn.feed(RFC9001_CLIENT_PACKET, 1, 0, True)
    (rr,) = conn.feed(RFC9001_RETRY, 2, 0, False)
    assert rr.packet_type is PacketType.RETRY and rr.retry_integrity_ok is True
    assert conn.retry_scid == SERVER_CID and conn.handshake.retry is not None
    bad = QuicConnection()
    bad.feed(RFC9001_CLIENT_PACKET, 1, 0, True)
    (br,) = bad.feed(RFC9001_RETRY[:-1] + b"\x00", 2, 0, False)
    assert br.retry_integrity_ok is False
    assert [a.name for a in bad.anomalies] == ["retry_integrity_failed"]


def test_two_retries_both_verify_with_the_original_dcid() -> None:
    """SYNTHETIC (issue 13 class 4): the client's first Initial is retransmitted before
    any answer and the server answers each copy with a Retry.  RFC 9001 §5.8: both tags are computed over
    the client's original DCID; the first Retry re-keys the Initials, the second is
    verified and otherwise ignored (RFC 9000 §17.2.5.2)."""
    from test_quic_crypto import RFC9001_DCID, RFC9001_RETRY

    from dissectors.quic import retry_integrity_tag

    other_scid = bytes([0x11]) * 8
    second = bytes((0xF0,)) + QUIC_V1.to_bytes(4, "big") + b"\x00" + bytes((8,)) + other_scid
    second += b"another token"
    second += retry_integrity_tag(QUIC_V1, RFC9001_DCID, second)
    conn = QuicConnection()
    conn.feed(RFC9001_CLIENT_PACKET, 1, 0, True)
    conn.feed(RFC9001_CLIENT_PACKET, 2, 0, True)  # retransmitted before any answer
    (r1,) = conn.feed(RFC9001_RETRY, 3, 0, False)
    (r2,) = conn.feed(second, 4, 0, False)
    assert r1.retry_integrity_ok is True and r2.retry_integrity_ok is True
    assert conn.anomalies == []
    assert conn.retry_scid == SERVER_CID and conn.handshake.retry is not None
    assert conn.handshake.retry.frame == 3


def test_small_client_initial_datagram_is_an_anomaly() -> None:
    from test_quic_crypto import RFC9001_CLIENT_CRYPTO_FRAME, RFC9001_DCID

    from dissectors.quic import initial_protection

    cp, _ = initial_protection(QUIC_V1, RFC9001_DCID)
    payload = RFC9001_CLIENT_CRYPTO_FRAME + bytes(10)
    header = bytes.fromhex("c300000001088394c8f03e51570800") + b"\x00" + v(4 + len(payload) + 16)
    header += (0).to_bytes(4, "big")
    pkt = cp.protect(header, len(header) - 4, 0, payload)
    conn = QuicConnection()
    (r,) = conn.feed(pkt, 1, 0, True)
    assert r.decrypted and r.anomalies == ("small_initial_datagram",)
    assert conn.sni == "example.com"
    # RFC 9000 §14.1 names the 1200-byte floor; the A.2 packet itself is exactly 1200
    assert QuicConnection().feed(RFC9001_CLIENT_PACKET, 1, 0, True)[0].anomalies == ()


@pytest.mark.parametrize("n", [1, 7, 30, 1199])
def test_truncated_client_initial_gives_a_reason(n: int) -> None:
    (r,) = QuicConnection().feed(RFC9001_CLIENT_PACKET[:n], 1, 0, True)
    assert not r.decrypted and r.reason is not None and r.reason.startswith("malformed header")

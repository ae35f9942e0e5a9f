"""quic_handshake_extra_rtt on the corpus capture with a draft-29 Retry and a HelloRetryRequest;
zero_rtt_unused and the anti-amplification pause on the lab fixtures; both detectors on QUIC
tables written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quic_tables import Conn, stream

import pcapkit
from pcapkit.detect import quic_handshake

from tshark_util import CORPUS, fields, needs_corpus, needs_tshark

CAP = CORPUS / "wireshark" / "quic-fragmented-handshakes.pcapng.gz"


@needs_corpus
def test_retry_and_hrr_each_cost_a_round_trip() -> None:
    with pcapkit.open(CAP) as t:
        f = t.findings
        pk = t.packets.set_index("frame")
    x = f[f.kind == "quic_handshake_extra_rtt"].sort_values("t_start_ns")
    assert [d["cause"] for d in x.details] == ["retry", "hello_retry_request"]
    assert x.frames.tolist() == [[1, 2, 3], [3, 4, 5]]
    assert set(x.flow) == {0}
    for frames, cost in zip(x.frames, x.cost_ms, strict=True):
        a, b = frames[0], frames[-1]
        assert cost == pytest.approx((pk.ts_ns[b] - pk.ts_ns[a]) / 1e6, abs=1e-3)
    # the other 16 connections of the file are single Initials: nothing to say
    assert (f.kind == "quic_handshake_extra_rtt").sum() == 2


@needs_corpus
@needs_tshark
def test_tshark_sees_the_same_retry_and_hrr() -> None:
    rows = fields(
        CAP,
        "frame.number",
        "quic.long.packet_type",
        "tls.handshake.type",
        display_filter="frame.number <= 5",
    )
    by_frame = {int(r[0]): r for r in rows}
    assert "3" in by_frame[2][1].split(",")  # long packet type 3 = Retry
    # frames 1, 3 and 5 carry a ClientHello (type 1); frame 4 the HRR (a ServerHello, type 2)
    assert "2" in by_frame[4][2].split(",")
    for fr in (1, 5):
        assert "1" in by_frame[fr][2].split(",")


FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _resumption(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())["ground_truth"]["resumption"]


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_zero_rtt_unused_on_the_resumed_connection(vantage: str) -> None:
    r_wait, r_0rtt = _resumption("h3_resumed_no_0rtt"), _resumption("h3_resumed_0rtt")
    assert r_wait["session_resumed"] and r_wait["client_0rtt_packets"] == 0
    with pcapkit.open(FIX / "h3_resumed_no_0rtt" / f"{vantage}.pcapng") as t:
        f = t.findings
    z = f[f.kind == "zero_rtt_unused"]
    assert z.flow.tolist() == [1]  # the second (resumed) connection only
    row = z.iloc[0]
    assert row.details["early_data_offered"] and row.details["method"] == "GET"
    # what the application lost: its request went out this much later than with 0-RTT
    saved = r_wait["request_after_connect_ms"] - r_0rtt["request_after_connect_ms"]
    assert row.cost_ms == pytest.approx(saved, rel=0.25)


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_zero_rtt_used_is_clean(vantage: str) -> None:
    assert _resumption("h3_resumed_0rtt")["client_0rtt_packets"] >= 1
    with pcapkit.open(FIX / "h3_resumed_0rtt" / f"{vantage}.pcapng") as t:
        assert "zero_rtt_unused" not in set(t.findings.kind)
        assert len(t.requests) == 2 and (t.requests.status == 200).all()


def test_zero_rtt_request_decrypts_from_the_early_secret() -> None:
    """aioquic logs CLIENT_EARLY_TRAFFIC_SECRET: the GET inside the 0-RTT packet decrypts
    and the request row points at that packet's frame."""
    with pcapkit.open(FIX / "h3_resumed_0rtt" / "client.pcapng") as t:
        pk, fr = t.quic_packets, t.quic_frames
        q = t.requests
    early = pk[(pk.flow == 1) & (pk.packet_type == "0rtt")]
    assert len(early) and early.decrypted.all() and early.from_client.all()
    assert (early.space == "application").all()
    in_early = fr[fr.packet.isin(early.index)]
    assert (in_early.type == "STREAM").any()
    second = q[q.flow == 1].iloc[0]
    assert (second.method, second.status) == ("GET", 200)
    assert second.request_frame == early.frame.iloc[0]


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_anti_amplification_pause(vantage: str) -> None:
    """A 7 KB certificate: aioquic's server sends exactly 3 × the client's 1200-byte
    Initial, then waits for the client's next datagram (RFC 9000 §8.1)."""
    fp = json.loads((FIX / "h3_amplification_limit" / "scenario.json").read_text())["ground_truth"][
        "first_flight_pause"
    ]
    assert fp["flight_bytes_before"] == 3 * 1200
    with pcapkit.open(FIX / "h3_amplification_limit" / f"{vantage}.pcapng") as t:
        f = t.findings
    x = f[f.kind == "quic_handshake_extra_rtt"]
    assert [d["cause"] for d in x.details] == ["anti_amplification"]
    assert x.cost_ms.iloc[0] == pytest.approx(fp["pause_ms"], rel=0.2)


def test_small_certificate_flight_is_clean() -> None:
    for v in ("client", "server"):
        with pcapkit.open(FIX / "h3_small_certificate" / f"{v}.pcapng") as t:
            assert "quic_handshake_extra_rtt" not in set(t.findings.kind)


# --------------------------------------------------------------------------- by hand


def _extra_rtt(c: Conn) -> list:
    return [f for f in quic_handshake.detect(c.context()) if f.kind == "quic_handshake_extra_rtt"]


@pytest.mark.parametrize("ptype", ["retry", "version_negotiation"])
def test_retry_or_version_negotiation_by_hand(ptype: str) -> None:
    c = Conn(sni="example.net")
    c.packet("c2s", 0.0, ptype="initial", pn=0)
    c.packet("s2c", 10.0, ptype=ptype, decrypted=False)
    c.packet("c2s", 11.0, ptype="initial", pn=1)
    c.packet("s2c", 21.0, ptype="initial", pn=0)
    (f,) = _extra_rtt(c)
    assert f.details == {"cause": ptype, "version": "v1"}
    assert f.frames == [1, 2, 3] and f.cost_ms == pytest.approx(11.0)
    assert (f.flow, f.dir) == (0, "c2s")
    assert "(example.net)" in f.explanation


def test_hello_retry_request_by_hand() -> None:
    c = Conn()
    f1 = c.packet("c2s", 0.0, ptype="initial", pn=0)
    c.tls_message("c2s", "CLIENT_HELLO", f1)
    f2 = c.packet("s2c", 10.0, ptype="initial", pn=0)
    c.tls_message("s2c", "HELLO_RETRY_REQUEST", f2)
    f3 = c.packet("c2s", 10.5, ptype="initial", pn=1)
    c.tls_message("c2s", "CLIENT_HELLO", f3)
    (f,) = _extra_rtt(c)
    assert f.details["cause"] == "hello_retry_request"
    assert [e.role for e in f.evidence] == [
        "first ClientHello",
        "hello retry request",
        "client starts again",
    ]
    assert f.frames == [1, 2, 3] and f.cost_ms == pytest.approx(10.5)


CRYPTO_BYTES = 1100  # Handshake CRYPTO bytes per 1200-byte server datagram


def crypto(offset: int, length: int = CRYPTO_BYTES) -> dict[str, object]:
    return {"frame_type": 0x06, "type": "CRYPTO", "offset": offset, "length": length}


def amplification(
    server_datagrams: int,
    *,
    keys: bool = False,
    finished_before_pause: bool = False,
    resume: str = "new_crypto",
) -> Conn:
    """The server sends ``server_datagrams`` × 1200 bytes after the client's 1200-byte
    Initial, then waits 20 ms until the client's Handshake datagram.  With ``keys`` the
    server's Handshake packets decrypt: each carries the next CRYPTO bytes of its flight
    (its Finished in the last one before the pause when ``finished_before_pause``), and
    the datagram after the pause carries ``resume``: new CRYPTO bytes, or only an ACK."""
    c = Conn()
    c.packet("c2s", 0.0, ptype="initial", pn=0, size=1200)
    last = 0
    for k in range(server_datagrams):
        hs = k > 0
        frames = [crypto((k - 1) * CRYPTO_BYTES)] if hs and keys else []
        last = c.packet(
            "s2c",
            10.0 + k / 10,
            *frames,
            ptype="handshake" if hs else "initial",
            pn=k,
            size=1200,
            decrypted=keys or not hs,
        )
    if keys and finished_before_pause:
        c.tls_message("s2c", "FINISHED", last)
    c.packet("c2s", 30.0, ptype="handshake", pn=0, size=100, decrypted=keys)
    after = (
        [crypto((server_datagrams - 1) * CRYPTO_BYTES)]
        if resume == "new_crypto"
        else [{"frame_type": 0x02, "type": "ACK", "largest_acknowledged": 0}]
    )
    c.packet(
        "s2c",
        31.0,
        *(after if keys else []),
        ptype="handshake",
        pn=server_datagrams,
        size=1200,
        decrypted=keys,
    )
    return c


@pytest.mark.parametrize("keys", [False, True])
def test_anti_amplification_by_hand(keys: bool) -> None:
    (f,) = _extra_rtt(amplification(3, keys=keys))  # 3 × 1200 = 3 × the client's bytes
    assert f.details["cause"] == "anti_amplification"
    assert f.frames == [4, 5, 6]  # last server datagram, client datagram, server resumes
    assert f.cost_ms == pytest.approx(31.0 - 10.2)
    if keys:  # the cut is visible: Finished not sent, new CRYPTO bytes after the pause
        assert f.confidence == 0.9 and "new Handshake CRYPTO bytes" in f.checks[-1]
    else:  # without keys a complete flight followed by a pause would look the same
        assert f.confidence == 0.6 and "without the handshake keys" in f.checks[-1]
        assert "if the server does not use it already" in f.remedy


def test_flight_below_the_budget_is_clean() -> None:
    assert _extra_rtt(amplification(2)) == []  # 2400 < 90 % of 3600: not at the limit


def test_flight_past_the_budget_was_not_held_by_it() -> None:
    """Issue 13 class 1 (SYNTHETIC): 4 × 1200 B against one 1200-byte Initial is more than
    3 × — the server was not stopped by the limit (it was validated some other way), so
    the pause after it is not an anti-amplification stop."""
    assert _extra_rtt(amplification(4)) == []


@pytest.mark.parametrize(
    ("finished_before_pause", "resume"), [(True, "new_crypto"), (False, "ack_only")]
)
def test_complete_flight_then_a_pause_is_no_stop(finished_before_pause: bool, resume: str) -> None:
    """Issue 13 class 1 (SYNTHETIC): with keys the wire shows the flight was not cut — the
    server's Finished had already left, or what followed the pause carried no new
    handshake bytes (an ACK) — so no extra round trip is reported."""
    c = amplification(3, keys=True, finished_before_pause=finished_before_pause, resume=resume)
    assert _extra_rtt(c) == []


def test_no_compression_advice_to_a_server_that_compresses() -> None:
    """With keys: a CompressedCertificate (RFC 8879) means the server compresses already;
    a client that did not offer compression cannot get it: no such advice either way."""
    c = amplification(3, keys=True)
    c.tls_message("c2s", "CLIENT_HELLO", 1, extensions=(0, 16, 27, 43, 51))
    c.tls_message("s2c", "COMPRESSED_CERTIFICATE", 3)
    (f,) = _extra_rtt(c)
    assert "compression" not in f.remedy
    c = amplification(3, keys=True)
    c.tls_message("c2s", "CLIENT_HELLO", 1, extensions=(0, 16, 27, 43, 51))
    c.tls_message("s2c", "CERTIFICATE", 3)
    (f,) = _extra_rtt(c)
    assert "the client offered it, the server did not use it" in f.remedy


def resumed(
    *, accepted: bool = False, zero_rtt: bool = False, method: str = "GET", psk: bool = True
) -> Conn:
    """A resumed connection: the ClientHello offers a PSK and early data, the ServerHello
    accepts the PSK; the request leaves 50 ms after the first Initial."""
    c = Conn(sni="example.net")
    f1 = c.packet("c2s", 0.0, ptype="initial", pn=0)
    c.tls_message("c2s", "CLIENT_HELLO", f1, pre_shared_key=True, early_data=True)
    c.event("client_initial", f1)
    if zero_rtt:
        c.packet("c2s", 0.0, ptype="0rtt", pn=0, frame=f1)
    f2 = c.packet("s2c", 20.0, ptype="initial", pn=0)
    c.tls_message("s2c", "SERVER_HELLO", f2, pre_shared_key=psk)
    f3 = c.packet("s2c", 20.0, ptype="handshake", pn=0, frame=f2)
    c.tls_message("s2c", "ENCRYPTED_EXTENSIONS", f3, early_data=accepted)
    c.packet("c2s", 50.0, stream(0, 0, 40), pn=1)
    c.requests.append({"flow": 0, "protocol": "h3", "method": method})
    return c


def test_zero_rtt_unused_by_hand() -> None:
    (f,) = quic_handshake.detect(resumed().context())
    assert (f.kind, f.flow, f.dir, f.stream) == ("zero_rtt_unused", 0, "c2s", 0)
    assert f.cost_ms == pytest.approx(50.0)
    assert f.frames == [1, 2, 3]  # first Initial, ServerHello, request
    assert f.details == {"early_data_offered": True, "early_data_accepted": False, "method": "GET"}
    assert "rejected" in f.explanation and "(example.net)" in f.explanation
    assert f.confidence == 0.8


def test_zero_rtt_used_or_unsafe_is_clean() -> None:
    assert quic_handshake.detect(resumed(accepted=True, zero_rtt=True).context()) == []
    assert quic_handshake.detect(resumed(method="POST").context()) == []
    assert quic_handshake.detect(resumed(psk=False).context()) == []  # a full handshake


def test_version_negotiation_counts_from_the_packet_it_answered() -> None:
    """SYNTHETIC: the client's first packet is in a version the server does not speak
    (e.g. a reserved 0x?a?a?a?a version forcing negotiation), the Version Negotiation
    answers it, the client's Initial follows: 1 → 2 → 3, not from the later Initial (a
    backwards chain of 0 ms, as on nDPI's quic-forcing-vn-with-data before)."""
    c = Conn()
    c.packet("c2s", 0.0, ptype="unknown_version", decrypted=False)
    c.packet("s2c", 1.0, ptype="version_negotiation", decrypted=False)
    c.packet("c2s", 2.0, ptype="initial", pn=0)
    c.packet("s2c", 12.0, ptype="initial", pn=0)
    (f,) = _extra_rtt(c)
    assert f.details["cause"] == "version_negotiation"
    assert f.frames == [1, 2, 3] and f.cost_ms == pytest.approx(2.0)

"""quic_handshake_extra_rtt on the corpus capture with a draft-29 Retry and a HelloRetryRequest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit

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
        conn = t._quic[1].conn
        q = t.requests
    early = [p for p in conn.packets if p.packet_type.value == "0rtt"]
    assert early and all(p.decrypted for p in early)
    assert any(type(f).__name__ == "Stream" for p in early for f in p.frames)
    second = q[q.flow == 1].iloc[0]
    assert (second.method, second.status) == ("GET", 200)
    assert second.request_frame == early[0].frame


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

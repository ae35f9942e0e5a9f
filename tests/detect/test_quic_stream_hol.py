"""quic_stream_hol / h3_single_stream_hol on QUIC tables written by hand (DETECTION.md §4.4,
§4.5): the detector reads quic, quic_packets, quic_frames and quic_handshake only.

The connection: the server sends streams 0 and 4; packet 11 (stream 0, bytes
1000–2000) is lost; packet 14 carries those bytes again 28 ms after packet 12 arrived.
"""

from __future__ import annotations

import pytest
from quic_tables import Conn, ack, stream

from pcapkit.detect import quic as quic_detector


def _handshake(c: Conn) -> None:
    """Client-side vantage: the client answers the server's Initial 0.1 ms after it
    arrives (d_C ≈ 0), the server took 20 ms (d_S = RTT)."""
    f1 = c.packet("c2s", -40.0, ptype="initial", pn=0)
    f2 = c.packet("s2c", -20.0, ptype="initial", pn=0)
    c.packet("c2s", -19.9, ptype="handshake", pn=0)
    c.event("client_initial", f1)
    c.event("server_initial", f2)


def hole_at_p(
    *, other_stream: bool = True, acked_lost: bool = False, swapped: bool = False
) -> Conn:
    """Receiver side: packet 11 never reaches the capture point."""
    c = Conn(swapped=swapped)
    _handshake(c)
    c.packet("s2c", 0.0, stream(0, 0, 1000), *([stream(4, 0, 1000)] if other_stream else []), pn=10)
    c.packet("s2c", 2.0, stream(0, 2000, 1000), pn=12)  # opens the hole [1000, 2000)
    if other_stream:
        c.packet("s2c", 3.0, stream(4, 1000, 1000), pn=13)
    else:
        c.packet("s2c", 3.0, pn=13)
    # the client acknowledges 12 and 13 but not 11 (or, for a capture drop, 11 too)
    c.packet("c2s", 4.0, ack((0, 13)) if acked_lost else ack((0, 10), (12, 13)), pn=1)
    c.packet("s2c", 30.0, stream(0, 1000, 1000), pn=14)  # the retransmission fills it
    return c


def test_hole_at_capture_point_charges_only_the_stalled_stream() -> None:
    (f,) = quic_detector.detect(hole_at_p().context())
    assert (f.kind, f.flow, f.dir, f.stream) == ("quic_stream_hol", 0, "s2c", 0)
    assert f.cost_ms == pytest.approx(28.0)  # packet 12 (first after the lost one) → 14
    assert f.cost_method == "measured_interval"
    assert f.vantage == "client"
    d = f.details
    assert d["view"] == "hole_at_capture_point"
    assert (d["hole_offset"], d["hole_bytes"]) == (1000, 1000)
    assert d["lost_packet_number"] == 11
    assert d["retransmission_packet_numbers"] == [14]
    assert d["blocked_bytes"] == 1000  # packet 12's bytes waited behind the hole
    assert d["other_streams"] == {"4": 1000} and d["other_streams_bytes"] == 1000
    assert d["streams_in_lost_packet"] == [0]
    assert d["single_stream_share"] == pytest.approx(0.5)
    assert [(e.frame, e.role) for e in f.evidence] == [
        (5, "stream data behind the hole"),
        (8, "retransmission"),
    ]
    assert any("not a capture drop" in c and "packet 11" in c for c in f.checks)
    assert f.confidence == 0.9
    assert "QUIC saved" in f.explanation and "stream 0" in f.explanation
    assert f.display_filter.startswith("udp.stream == 0 && (quic.stream.stream_id == 0")


def test_one_stream_is_h3_single_stream_hol() -> None:
    """§4.5 case 1: nothing else moved, so QUIC's per-stream delivery could not help."""
    (f,) = quic_detector.detect(hole_at_p(other_stream=False).context())
    assert (f.kind, f.stream) == ("h3_single_stream_hol", 0)
    assert f.details["other_streams_bytes"] == 0
    assert "one stream" in f.explanation


def test_capture_drop_is_not_a_loss() -> None:
    """The client acknowledged packet 11: the network delivered it, the capture lost it."""
    assert quic_detector.detect(hole_at_p(acked_lost=True).context()) == []


def test_roles_swapped_finding_in_flow_directions() -> None:
    """The flow table called the QUIC client the server: the finding speaks flow roles."""
    (f,) = quic_detector.detect(hole_at_p(swapped=True).context())
    assert (f.kind, f.dir, f.stream) == ("quic_stream_hol", "c2s", 0)
    assert "from the server" in f.explanation  # QUIC roles in the words


def test_reordering_is_not_a_loss() -> None:
    """Packet 11 arrives after 12: the original was late, nothing was retransmitted."""
    c = Conn()
    c.packet("s2c", 0.0, stream(0, 0, 1000), pn=10)
    c.packet("s2c", 2.0, stream(0, 2000, 1000), pn=12)
    c.packet("s2c", 3.0, stream(0, 1000, 1000), pn=11)
    assert quic_detector.detect(c.context()) == []


def sender_side(*, acked_before_copy: bool = False) -> Conn:
    """Sender side: the capture point saw packet 11 leave; the client's ACK skips it and
    the server sends its bytes again in packet 14."""
    c = Conn()
    c.packet("s2c", 0.0, stream(0, 0, 1000), pn=10)
    c.packet("s2c", 1.0, stream(0, 1000, 1000), pn=11)
    c.packet("s2c", 2.0, stream(0, 2000, 1000), pn=12)
    c.packet("c2s", 25.0, ack((0, 12)) if acked_before_copy else ack((0, 10), (12, 12)), pn=3)
    c.packet("s2c", 30.0, stream(0, 1000, 1000), pn=14)
    return c


def test_retransmission_at_capture_point() -> None:
    (f,) = quic_detector.detect(sender_side().context())
    assert (f.kind, f.stream, f.dir) == ("h3_single_stream_hol", 0, "s2c")
    assert f.cost_ms == pytest.approx(28.0)  # first packet after 11 (12, at 2 ms) → 14
    d = f.details
    assert d["view"] == "retransmission_at_capture_point"
    assert d["lost_packet_number"] == 11 and d["retransmission_packet_numbers"] == [14]
    assert d["blocked_bytes"] == 1000
    assert [(e.frame, e.role) for e in f.evidence] == [
        (2, "lost packet (original)"),
        (3, "first packet after the lost one"),
        (5, "retransmission"),
    ]
    assert f.confidence == 0.85  # the ACK that skipped packet 11 confirms the loss
    assert f.vantage == "unknown"  # no handshake rows


def test_spurious_retransmission_is_skipped() -> None:
    """The client had acknowledged packet 11 before the copy left: nothing waited."""
    assert quic_detector.detect(sender_side(acked_before_copy=True).context()) == []


def test_undecrypted_connection_yields_nothing() -> None:
    """Without 1-RTT keys the STREAM frames are not in the tables."""
    c = Conn()
    for pn, ms in ((10, 0.0), (12, 2.0), (14, 30.0)):
        c.packet("s2c", ms, stream(0, 0, 10), pn=pn, decrypted=False)
    assert c.context().quic_frames.empty
    assert quic_detector.detect(c.context()) == []

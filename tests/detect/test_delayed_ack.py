"""delayed_ack (D1, DETECTION.md §2.7): a delayed ACK that a waiting sender paid for.

No lab fixture has a sender blocked on a delayed ACK outside Nagle (those are
``nagle_delayed_ack``), so the fixtures must stay clean — tls_sse_nodelay's client
delays one ACK by 45.8 ms, but the server kept streaming and waited for nothing.  The
rules are checked one at a time on SYNTHETIC connections (``Sim`` from test_nagle).
"""

from __future__ import annotations

import pytest
from test_nagle import FIX, Sim, fixture, of_kind, scenario, vantages_of


def _names_it(name: str) -> bool:
    sc = scenario(name)
    return "delayed_ack" in set((sc.get("expected") or []) + (sc.get("incidental") or []))


@pytest.mark.parametrize(
    "name",
    sorted(
        p.name for p in FIX.glob("*") if (p / "scenario.json").exists() and not _names_it(p.name)
    ),
)
def test_no_delayed_ack_on_fixtures(name):
    for v in vantages_of(name):
        assert of_kind(fixture(name, v), {"delayed_ack"}).empty, v


def test_tls_sse_nodelay_delayed_ack_that_nobody_waited_for():
    gt = scenario("tls_sse_nodelay")["ground_truth"]
    assert gt["summary"]["client_delayed_acks_ms"] == [pytest.approx(44.1, abs=0.1)]
    for v in ("client", "server"):
        assert of_kind(fixture("tls_sse_nodelay", v), {"delayed_ack", "nagle_delayed_ack"}).empty


def _clocked_flights(s: Sim, t: float, n: int = 3) -> float:
    """SYNTHETIC: ``n`` flights of two full segments from the client, each released by the
    server's immediate ACK of the previous one: an ACK-clocked (window-limited) sender.
    Returns when the next flight may start."""
    for _ in range(n):
        s.client(t, 1448)
        s.client(t + 10, 1448)
        a = t + s.d_s + 100  # an immediate ACK of both (every second segment)
        s.server(a, 0)
        t = a + s.d_c + 30
    return t


def _cwnd_case(vantage: str, *, clocked: bool = True) -> tuple[Sim, list[int]]:
    """SYNTHETIC: a cwnd-limited sender — three flights of two full segments, each released
    by the receiver's immediate ACK of the previous one (ACK-clocked) — then a lone full
    segment (the odd one of a flight) is ACKed after 40 ms and the sender, with a full
    segment ready, sends it only then.  ``clocked=False`` drops the ACK-clocked flights:
    the lone coupling is then not corroborated."""
    s = Sim.at(vantage)
    s.handshake()
    t = 100_000.0
    if clocked:
        t = _clocked_flights(s, t)
    s1 = s.client(t, 1448)
    a = s.server(t + s.d_s + 40_000, 0)
    s2 = s.client(t + s.d_s + 40_000 + s.d_c + 30, 1448)
    s.client(t + s.d_s + 40_000 + s.d_c + 40, 1448)
    s.server(t + 2 * (s.d_s + s.d_c) + 40_000 + 60, 0)
    return s, [s1, a, s2]


def test_synthetic_lone_coupling_without_ack_clocking_is_not_believed(tmp_path):
    """SYNTHETIC: the same delayed ACK and release, but nothing else shows the sender
    waiting on ACKs: one coupling within ±tol of an ACK can be chance (§2.3) — silent.
    (nDPI's netflix.pcap stream 23: a range download paced at one segment per 60–110 ms,
    one ACK in eight followed at lag d_X, was reported as delayed_ack; issue 13 review.)"""
    s, _ = _cwnd_case("client", clocked=False)
    assert of_kind(s.trace(tmp_path), {"delayed_ack"}).empty


@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_synthetic_cwnd_limited_sender_waits_for_delayed_ack(tmp_path, vantage):
    """SYNTHETIC: see ``_cwnd_case``; at every vantage."""
    s, frames = _cwnd_case(vantage)
    f = of_kind(s.trace(tmp_path), {"delayed_ack", "nagle", "nagle_delayed_ack"})
    assert f.kind.tolist() == ["delayed_ack"]
    row = f.iloc[0]
    assert row.frames == frames
    assert [e["role"] for e in row.evidence] == [
        "acknowledged_segment",
        "delayed_ack",
        "released_segment",
    ]
    assert row.cost_ms == pytest.approx(40.0, abs=0.5)
    assert row.details["waiting_on"] == "cwnd" and row.details["os_guess"] == "linux"
    # D = Δ − d_Y: measured at the receiver (d_Y ≈ 0), an estimate elsewhere
    assert row.cost_method == ("measured_interval" if vantage == "server" else "estimate")
    assert row.details["ack_delay_histogram"]  # the direction's fingerprint
    assert "TCP_QUICKACK" in row.remedy and "server" in row.remedy
    assert "client 10.1.0.1:40000" in row.explanation


def test_synthetic_rwnd_full_sender_waits_for_delayed_ack(tmp_path):
    """SYNTHETIC: the 128-byte segment fills the server's window; the next one leaves
    when the delayed ACK reopens it."""
    s = Sim.at("client")
    s.handshake()
    s.server(90_000, 0, window=1)  # 1 << 7 = 128 bytes
    s.client(100_000, 128)
    s.server(160_000, 0)
    s.client(160_030, 100)
    f = of_kind(s.trace(tmp_path), {"delayed_ack", "nagle", "nagle_delayed_ack"})
    assert f.kind.tolist() == ["delayed_ack"]
    assert f.details.iloc[0]["waiting_on"] == "rwnd"


def test_synthetic_classic_nagle_sender_after_a_full_segment(tmp_path):
    """SYNTHETIC: a full segment, a delayed ACK, then a partial one right after it: a
    classic RFC 896 Nagle sender (Minshall's variant would not have held it)."""
    s = Sim.at("client")
    s.handshake()
    t = _clocked_flights(s, 100_000)
    s.client(t, 1448)
    s.server(t + 60_000, 0)
    s.client(t + 60_030, 100)
    f = of_kind(s.trace(tmp_path), {"delayed_ack", "nagle", "nagle_delayed_ack"})
    assert f.kind.tolist() == ["delayed_ack"]
    assert f.details.iloc[0]["waiting_on"] == "classic_nagle"
    assert "TCP_NODELAY" in f.remedy.iloc[0]


def test_synthetic_nodelay_sender_was_not_waiting(tmp_path):
    """SYNTHETIC: on a TCP_NODELAY socket with the window open, a lone small segment
    cannot block the next one (cwnd ≥ 2): a coupling to the delayed ACK is chance."""
    s = Sim.at("client")
    s.handshake()
    s.client(50_000, 100)
    s.client(50_050, 100)  # back to back while unacknowledged: TCP_NODELAY
    s.server(70_100, 0)
    s.client(100_000, 100)
    s.server(160_000, 0)
    s.client(160_030, 100)
    assert of_kind(s.trace(tmp_path), {"delayed_ack", "nagle_delayed_ack"}).empty


def test_synthetic_delayed_ack_nobody_waited_for(tmp_path):
    """SYNTHETIC: the sender's next data comes 20 ms after the delayed ACK: it was not
    waiting for it."""
    s = Sim.at("client")
    s.handshake()
    t = _clocked_flights(s, 100_000)  # an ACK-clocked sender: only this rule can say no
    s.client(t, 1448)
    s.server(t + 60_000, 0)
    s.client(t + 80_000, 1448)
    assert of_kind(s.trace(tmp_path), {"delayed_ack"}).empty


def test_synthetic_ack_of_two_full_segments_is_not_delayed(tmp_path):
    """SYNTHETIC: an ACK covering two full segments is the every-second-segment ACK
    (RFC 1122 SHOULD), whatever its timing."""
    s = Sim.at("client")
    s.handshake()
    t = _clocked_flights(s, 100_000)  # an ACK-clocked sender: only this rule can say no
    s.client(t, 1448)
    s.client(t + 10, 1448)
    s.server(t + 60_000, 0)
    s.client(t + 60_030, 1448)
    assert of_kind(s.trace(tmp_path), {"delayed_ack"}).empty


def test_synthetic_ack_later_than_500ms_is_not_a_delayed_ack(tmp_path):
    """SYNTHETIC: 600 ms breaks RFC 1122's "MUST be less than 0.5 seconds"."""
    s = Sim.at("client")
    s.handshake()
    t = _clocked_flights(s, 100_000)  # an ACK-clocked sender: only this rule can say no
    s.client(t, 1448)
    s.server(t + 620_000, 0)
    s.client(t + 620_030, 1448)
    assert of_kind(s.trace(tmp_path), {"delayed_ack"}).empty


def test_synthetic_windows_delack_on_a_cwnd_limited_sender(tmp_path):
    """SYNTHETIC: a 200 ms (Windows) delayed ACK stalls a cwnd-limited sender."""
    s = Sim.at("client")
    s.handshake()
    t = _clocked_flights(s, 100_000)
    s.client(t, 1448)
    s.server(t + 220_000, 0)
    s.client(t + 220_030, 1448)
    f = of_kind(s.trace(tmp_path), {"delayed_ack"})
    assert f.details.iloc[0]["os_guess"] == "windows"
    assert f.cost_ms.iloc[0] == pytest.approx(200.0, abs=0.5)

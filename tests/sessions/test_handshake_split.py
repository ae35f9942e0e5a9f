"""The one handshake timing model (pcapkit.sessions.timing) and the handshake_*_delay
detector on real captures."""

from __future__ import annotations

from pathlib import Path

import pytest

import pcapkit
from pcapkit.sessions.timing import Split, split_handshake

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
REAL = ROOT.parent / "shared" / "realworld" / "ndpi" / "pcap"
MS = 1_000_000


def test_split_adds_up_and_does_not_depend_on_the_vantage() -> None:
    """SYNTHETIC times: client 0, server answers after 5 ms of work, a 2 ms flight, the
    client works 7 ms, its Finished follows its answer 1 ms later; RTT 40 ms."""
    truth = Split(network_ms=40.0, server_ms=5.0, flight_ms=3.0, client_ms=7.0)
    for d_c in (0, 10, 40):  # client-side, middle, server-side capture
        d_s = 40 - d_c
        # each event seen at P: client-sent ones d_C/2 after they left, server-sent d_S/2
        c0 = 0 + d_c / 2
        s0 = 20 + 5 + d_s / 2  # the ClientHello reaches the server at 20 ms
        s1 = s0 + 2
        ca = 20 + 5 + 2 + 20 + 7 + d_c / 2  # the flight ends at the client at 47
        c1 = ca + 1
        got = split_handshake(
            *(int(t * MS) for t in (c0, s0, s1, ca, c1)), int(d_c * MS), int(d_s * MS)
        )
        assert got == truth, d_c
        total = c1 - c0
        assert sum(v for v in (got.network_ms, got.server_ms, got.flight_ms, got.client_ms)) == (
            pytest.approx(total)
        )


def test_split_unknown_without_legs_or_in_the_wrong_order() -> None:
    assert split_handshake(0, 1, 2, 3, 4, None, 5) == Split()
    assert split_handshake(0, None, 2, 3, 4, 1, 1) == Split()
    assert split_handshake(0, 3, 2, 3, 4, 1, 1) == Split()  # flight ends before it starts


@pytest.mark.parametrize("name", ["tls_sse_nagle", "tls_resumed"])
def test_lab_handshakes_split_alike_at_every_vantage(name: str) -> None:
    """Real lab traffic (20 ms one way each side of the forwarder): the same server and
    client times whether captured at the client, the middle or the server."""
    got = {}
    for v in ("client", "middle", "server"):
        with pcapkit.open(FIX / name / f"{v}.pcapng") as t:
            r = t.tls.iloc[0]
            parts = [
                r.handshake_network_ms,
                r.handshake_server_ms,
                r.handshake_flight_ms,
                r.handshake_client_ms,
            ]
            assert sum(parts) == pytest.approx(r.handshake_ms, abs=0.3)
            got[v] = (r.handshake_network_ms, r.handshake_server_ms, r.handshake_client_ms)
    for v in ("middle", "server"):
        for a, b in zip(got["client"], got[v], strict=True):
            assert a == pytest.approx(b, abs=0.5)
    assert got["client"][0] == pytest.approx(30.4, abs=1.0)  # RTT: 2 × 15 ms + stacks


def test_quic_handshakes_split_too() -> None:
    with pcapkit.open(FIX / "h3_amplification_limit" / "client.pcapng") as t:
        r = t.quic.iloc[0]
    # the 3 × limit stop is in the server's flight, not in its own time
    assert r.handshake_flight_ms > 30 and r.handshake_server_ms < 15
    assert r.handshake_network_ms == pytest.approx(31.4, abs=1.5)


def _real(name: str) -> Path:
    p = REAL / name
    if not p.exists():
        pytest.skip("../shared/realworld is absent")
    return p


def test_a_client_that_waited_half_a_second_is_named() -> None:
    """nDPI's doh.pcapng: the server's flight is complete at frame 10 (38.8 ms), the
    client ACKs it at once but sends its ClientKeyExchange only in frame 12, 548 ms
    later (tshark: frames 10 → 12)."""
    with pcapkit.open(_real("doh.pcapng")) as t:
        f = t.findings
        (x,) = f[f.kind == "handshake_client_delay"].itertuples()
        assert x.frames == [10, 12] and x.cost_ms == pytest.approx(548.2, abs=0.5)
        assert x.details["client_ms"] > 0.9 * x.details["handshake_ms"]
        assert "handshake_server_delay" not in set(f.kind)


def test_a_finished_held_by_nagle_is_not_the_clients_time() -> None:
    """nDPI's ssl-cert-name-mismatch.pcap: the client answers 0.9 ms after the flight
    (ClientKeyExchange, frame 12); its CCS + Finished wait 167 ms for the server's
    delayed ACK (frame 13 → 14, a nagle_delayed_ack finding): flight time, no
    handshake_client_delay."""
    with pcapkit.open(_real("ssl-cert-name-mismatch.pcap")) as t:
        kinds = set(t.findings.kind)
        assert "handshake_client_delay" not in kinds and "nagle_delayed_ack" in kinds
        r = t.tls.iloc[0]
        assert r.handshake_client_ms < 2 and r.handshake_flight_ms > 160


def _ctx_with(**tls_values: object) -> object:
    """A real lab capture's detection context with its tls row's split changed by hand."""
    with pcapkit.open(FIX / "tls_sse_nagle" / "client.pcapng") as t:
        ctx = t.detect_context
    tls = ctx.tls.copy()
    for k, v in tls_values.items():
        tls.loc[0, k] = v
    ctx.tls = tls
    return ctx


def test_detector_thresholds_and_counter_checks() -> None:
    from pcapkit.detect import handshake

    slow = {"handshake_ms": 150.0, "handshake_client_ms": 100.0, "handshake_network_ms": 30.0}
    (f,) = handshake.detect(_ctx_with(**slow))
    assert f.kind == "handshake_client_delay" and f.cost_ms == 100.0 and f.frames == [6, 8]
    assert f.cost_method == "estimate" and "client's own time was 100.0 ms" in f.explanation
    assert handshake.detect(_ctx_with(**slow), min_ms=120) == []
    assert handshake.detect(_ctx_with(**slow), min_share=0.8) == []
    # legs longer than the handshake itself: no split to trust
    assert handshake.detect(_ctx_with(**{**slow, "handshake_network_ms": 200.0})) == []
    # a HelloRetryRequest's round trip would sit in the server's time
    assert handshake.detect(_ctx_with(**slow, hello_retry_request=True)) == []
    # the lab capture as it is: 0.9 ms server, 1.3 ms client — nothing to say
    assert handshake.detect(_ctx_with()) == []

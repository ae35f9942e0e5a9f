"""Slow-start restart after idle (R1): lab fixtures against their ground truth, the corpus,
and SYNTHETIC flights (tests/synth.py) for each false-positive trap of DETECTION.md §7.1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pcapkit
from pcapkit.detect import ssr
from pcapkit.detect.ssr import flights_needed
from pcapkit.io.writer import write_pcap

from synth import Conn
from tshark_util import CORPUS

FIX = Path(__file__).resolve().parents[2] / "fixtures"
VANTAGES = ("client", "server")
MSS = 1448


def scenario(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


@pytest.mark.parametrize("vantage", VANTAGES)
def test_slow_start_restart_fixture(vantage):
    gt = scenario("slow_start_restart")["ground_truth"]
    t = pcapkit.open(FIX / f"slow_start_restart/{vantage}.pcapng")
    (f,) = ssr.detect(t.detect_context)
    assert (f.kind, f.flow, f.dir) == ("slow_start_restart", 0, "s2c")
    d = f.details
    # flights as the forwarder's trace counted them (cwnd's steps)
    assert d["flights_before_idle"] == gt["burst1_flights"] == [10, 20, 27]
    assert d["flights_after_idle"] == gt["burst2_flights"] == [10, 20, 30]
    assert d["first_flight"] == gt["summary"]["first_flight_after_idle"] == 10
    assert d["largest_flight_before_idle"] == gt["summary"]["largest_flight_before_idle"]
    # Linux's tcp_cwnd_restart from the pre-idle window: TCP_INFO read cwnd 10 after the write
    assert d["first_flight_expected_linux"] == gt["cwnd_after_burst2_write"]
    assert d["idle_ms"] == pytest.approx(gt["idle_gap_ms"], rel=0.01)
    # cost: the burst took 3 RTTs; without the restart the pre-idle cwnd (67 segments, TCP_INFO)
    # would have sent it in flights_needed(60, min(67, client window)).  The client advertised
    # 80 896 B = 55 segments just before the burst (its receive window, not cwnd, would have cut
    # the first flight), so 2 flights: 1 extra RTT.
    ctx = t.detect_context
    p = ctx.packets_of(0)
    first = next(e for e in f.evidence if e.role == "first flight after idle (start)")
    y = np.nonzero((p.dir == 0) & (p.ts <= first.ts_ns))[0]
    rwnd_segments = int(p.win[y[-1]]) // MSS
    window = min(gt["cwnd_after_burst1"], rwnd_segments)
    burst = sum(gt["burst2_flights"])
    extra = gt["summary"]["burst2_rtts"] - flights_needed(burst, window)
    assert d["extra_rtts"] == extra == 1
    assert f.cost_ms == pytest.approx(extra * gt["handshake"][0]["rtt_ms"], rel=0.2)
    assert d["cost_lower_bound_ms"] <= f.cost_ms + 1e-3  # details are rounded to µs
    assert f.cost_method == "estimate" and f.severity == "medium"
    assert "tcp_slow_start_after_idle=0" in f.remedy and "BBR" in f.remedy
    assert "server 10.77.0.2:9000" in f.explanation


def test_slow_start_restart_frames_at_the_server():
    # fixtures/README: "first flight frames 93–102 (10 segments), first ACK frame 103"
    (f,) = ssr.detect(pcapkit.open(FIX / "slow_start_restart/server.pcapng").detect_context)
    roles = {e.role: e.frame for e in f.evidence}
    assert roles["first flight after idle (start)"] == 93
    assert roles["first flight after idle (end)"] == 102
    assert roles["first ACK of the burst"] == 103


@pytest.mark.parametrize("vantage", VANTAGES)
def test_slow_start_restart_off_is_clean(vantage):
    # slow_start_after_idle=0: the burst leaves in one flight of 60 (the pre-idle cwnd)
    t = pcapkit.open(FIX / f"slow_start_restart_off/{vantage}.pcapng")
    assert ssr.detect(t.detect_context) == []


def test_no_restart_findings_on_other_fixtures():
    """Every other fixture: no idle > RTO followed by a window-bound burst (the SSE streams
    idle between tiny events; the cork/zero-window runs idle but send < IW afterwards)."""
    for sc in sorted(FIX.glob("*/scenario.json")):
        if sc.parent.name == "slow_start_restart":
            continue
        for p in sorted(sc.parent.glob("*.pcapng")):  # every vantage the fixture holds
            t = pcapkit.open(p)
            assert ssr.detect(t.detect_context) == [], (sc.parent.name, p.name)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"external corpus not found at {CORPUS}")
def test_corpus_has_no_restart():
    """Reviewed: the corpus captures are short exchanges (handshakes, single requests, one
    76 KB download without idle); none has an idle gap followed by a window-bound burst."""
    for p in sorted(set(CORPUS.glob("*/*.pcap*")) | set(CORPUS.glob("*/capture.pcap"))):
        assert ssr.detect(pcapkit.open(p).detect_context) == [], p.name


# ----------------------------------------------------------------------------- SYNTHETIC


class Sender(Conn):
    """SYNTHETIC: a plain TCP server sending MSS-sized segments in ACK-clocked flights, seen
    at the server (d_S = 50 µs, d_C = RTT = 20 ms)."""

    def __init__(self, rtt_us: float = 20_000) -> None:
        super().__init__(sport=9000)
        self.rtt = rtt_us
        self.handshake(0, rtt_us=50, client_leg_us=rtt_us)
        self.c2s(rtt_us + 1000, b"GET /bursts\n")
        self.t = rtt_us + 2000

    def flights(self, sizes: list[int], *, gap_us: float = 10, window: int = 65535) -> None:
        """Each flight back to back, then the client's ACK one RTT after it started."""
        for n in sizes:
            for i in range(n):
                self.s2c(self.t + gap_us * i, b"\x00" * MSS, flags="A")
            self.ack_c(self.t + self.rtt, window=window)
            self.t += self.rtt + 50

    def findings(self, tmp_path: Path) -> list:
        p = tmp_path / "ssr.pcap"
        write_pcap(p, self.frames, 1)
        return ssr.detect(pcapkit.open(p).detect_context)


def test_synth_restart_after_idle(tmp_path):
    """SYNTHETIC: flights 10, 20, 27; 1 s idle; a 60-segment burst from 10 again."""
    s = Sender()
    s.flights([10, 20, 27])
    s.t += 1_000_000
    s.flights([10, 20, 30])
    (f,) = s.findings(tmp_path)
    d = f.details
    assert d["flights_before_idle"] == [10, 20, 27] and d["flights_after_idle"] == [10, 20, 30]
    # slow start without loss: cwnd = IW + 57 acknowledged = 67, capped at 2 × 27 = 54 (Linux
    # grows cwnd only while it is < 2 × the packets in flight) → 54 + 108: 2 flights; 3 taken
    assert d["window_before_idle_est"] == 54 and d["extra_rtts"] == 1
    assert f.cost_ms == pytest.approx(20.05, abs=0.01)
    # lower bound: from the largest flight seen (27): 27 + 54 ≥ 60 → 2 flights, 1 extra
    assert d["extra_rtts_lower_bound"] == 1
    assert d["first_flight_expected_linux"] == 10


def test_synth_restart_big_burst(tmp_path):
    """SYNTHETIC: flights 10, 20, 40 (cwnd ≈ 80), 1 s idle, a 150-segment burst from 10:
    flights 10, 20, 40, 80 instead of 80 + 70 → 2 extra RTTs."""
    s = Sender()
    s.flights([10, 20, 40])
    s.t += 1_000_000
    s.flights([10, 20, 40, 80])
    (f,) = s.findings(tmp_path)
    assert f.details["window_before_idle_est"] == 80 and f.details["extra_rtts"] == 2
    assert f.cost_ms == pytest.approx(2 * 20.05, abs=0.01)
    assert f.confidence > 0.8


@pytest.mark.parametrize(
    "case",
    ["kept_cwnd", "app_limited", "short_idle", "paced", "rwnd_limited", "trickle"],
)
def test_synth_restart_counter_hypotheses(tmp_path, case):
    """SYNTHETIC traps of §7.1: the window kept (slow_start_after_idle=0, or BBR); a burst no
    bigger than the first flight (SSE events, app-limited); an idle shorter than RTO_est
    (srtt + 200 ms); a paced sender (fq/BBR: no ACK-coupled silence after the first flight);
    a receiver window of 10 segments that is what stopped the first flight; a first flight
    below any restart window (1 segment, then 2: the application writing in pieces)."""
    s = Sender()
    s.flights([10, 20, 27])
    s.t += 150_000 if case == "short_idle" else 1_000_000
    if case == "kept_cwnd":
        s.flights([60])
    elif case == "app_limited":
        s.flights([8])
    elif case == "paced":
        # one segment every 2 ms for 120 ms, ACKs returning continuously one RTT later
        for i in range(60):
            s.s2c(s.t + 2000 * i, b"\x00" * MSS, flags="A")
            if i % 2:
                s.ack_c(s.t + 2000 * i + s.rtt)
    elif case == "trickle":
        s.flights([1, 2, 2, 2])
    elif case == "rwnd_limited":
        s.ack_c(s.t - 500_000, window=113)  # 113 << 7 = 14 464 B: ten segments
        s.flights([10, 10, 10, 10], window=113)
    else:
        s.flights([10, 20, 30])
    assert s.findings(tmp_path) == []


def test_synth_loopback_bulk_after_idle(tmp_path):
    """SYNTHETIC: loopback-like (RTT 0.11 ms), GSO super-segments of 16 segments: bursts of
    three back to back, an ACK, 0.1 ms of scheduling; a 300 ms idle (> srtt + 200 ms); then
    one super-segment, 0.1 ms, more bursts.  By the ½-RTT rule alone that is a 16-segment
    first flight after 48-segment ones, ACK-clocked — but sub-millisecond gaps are
    scheduling, not cwnd steps (§1.4): no restart finding."""
    s = Sender(rtt_us=60)

    def burst(n: int) -> None:
        for _ in range(n):
            s.s2c(s.t, b"\x00" * (16 * MSS), flags="PA")
            s.t += 5
        s.ack_c(s.t + 50)

    for _ in range(3):
        burst(3)
        s.t += 100
    s.t += 300_000
    burst(1)
    s.t += 100
    for _ in range(3):
        burst(3)
        s.t += 100
    assert s.findings(tmp_path) == []


def test_flights_needed():
    assert flights_needed(60, 10) == 3  # 10 + 20 + 40
    assert flights_needed(60, 27) == 2  # 27 + 54
    assert flights_needed(60, 67) == 1
    assert flights_needed(1, 1) == 1

"""Flows on the lab's own captures: vantage and RTT legs match what the lab did.

Each fixture folder holds client.pcapng and server.pcapng of the same traffic and a
scenario.json with the path's one-way delays (ground truth).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit

from tshark_util import TSHARK, fields

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCENARIOS = sorted(p.parent for p in FIXTURES.glob("*/scenario.json"))


def test_fixtures_exist():
    assert len(SCENARIOS) >= 4


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_vantage_and_rtt_legs(folder):
    """Each end's capture is recognised as that end's; the handshake RTT equals tshark's
    tcp.analysis.initial_rtt and is of the size of the path the lab built."""
    sc = json.loads((folder / "scenario.json").read_text())
    rtt_ms = sc["path"]["rtt_ms"]
    for side, near in (("client", "client_leg_ms"), ("server", "server_leg_ms")):
        path = folder / f"{side}.pcapng"
        with pcapkit.open(path) as t:
            tcp = t.flows[t.flows.proto == "tcp"]
            if tcp.empty:
                continue
            f = tcp.iloc[0]
            assert f.vantage == side
            assert f[near] < 0.1 * rtt_ms
            # a real path: jitter adds, nothing subtracts from the configured delay
            assert 0.95 * rtt_ms < f.rtt_ms < 1.5 * rtt_ms
            if TSHARK:
                rows = fields(
                    path,
                    "tcp.stream",
                    "tcp.analysis.initial_rtt",
                    display_filter="tcp.analysis.initial_rtt",
                )
                irtt = {int(r[0]): float(r[1]) * 1e3 for r in rows}
                assert f.rtt_ms == pytest.approx(irtt[int(f.stream)], abs=0.002)


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_both_vantages_carry_the_same_streams(folder):
    with pcapkit.open(folder / "client.pcapng") as a, pcapkit.open(folder / "server.pcapng") as b:
        fa, fb = a.flows, b.flows
        assert len(fa) == len(fb)
        for i in range(len(fa)):
            if fa.proto.iloc[i] != "tcp":
                continue
            for d in ("c2s", "s2c"):
                assert bytes(a.stream(i, d)) == bytes(b.stream(i, d))

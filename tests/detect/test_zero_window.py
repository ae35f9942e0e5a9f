"""zero_window on the lab fixtures: right frames, cost = the scenario's stall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit

FIX = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_zero_window_positive(vantage):
    sc = json.loads((FIX / "zero_window/scenario.json").read_text())
    t = pcapkit.open(FIX / f"zero_window/{vantage}.pcapng")
    f = t.findings
    assert f.kind.tolist() == ["zero_window"]
    row = f.iloc[0]
    assert row.dir == "s2c" and row.flow == 0
    episodes = sc["ground_truth"]["zero_window_episodes"]
    truth_ms = (
        episodes[0]["duration_ms"]
        if isinstance(episodes, list) and episodes and "duration_ms" in episodes[0]
        else None
    )
    pause_ms = (sc["ground_truth"]["pause_end_ns"] - sc["ground_truth"]["pause_start_ns"]) / 1e6
    # the stall cannot exceed the reader's pause, and covers most of it
    assert 0.8 * pause_ms <= row.cost_ms <= pause_ms
    if truth_ms is not None:
        assert row.cost_ms == pytest.approx(truth_ms, rel=0.2)
    roles = {e["role"] for e in row.evidence}
    assert {"zero_window_ack", "window_update", "resumed_data"} <= roles
    assert row.severity == "high"
    assert "tcp.stream == 0" in row.display_filter


def test_zero_window_control_is_clean():
    for v in ("client", "server"):
        assert pcapkit.open(FIX / f"zero_window_control/{v}.pcapng").findings.empty

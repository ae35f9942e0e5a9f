"""receiver_limited (R7, DETECTION.md §11.5) on its lab fixtures: the cost is the sender's
own ``tcpi_rwnd_limited`` (read from TCP_INFO by the server program) within 20 % at every
vantage; the edge advances at the reader's 10 ms cadence; the fast-reader control and the
small-SO_RCVBUF captures of zero_window (a buffer cap with a prompt reader, §11.5's trap)
stay silent."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import pcapkit

FIX = Path(__file__).resolve().parents[2] / "fixtures"
VANTAGES = ("client", "server", "middle")


def _findings(name: str, vantage: str):
    with pcapkit.open(FIX / f"{name}/{vantage}.pcapng") as t:
        return t.findings


@pytest.mark.parametrize("vantage", VANTAGES)
def test_positive_cost_is_the_kernels_rwnd_limited_time(vantage):
    sc = json.loads((FIX / "receiver_limited/scenario.json").read_text())
    s = sc["ground_truth"]["summary"]
    f = _findings("receiver_limited", vantage)
    assert f.kind.tolist() == ["receiver_limited"]  # and not zero_window: never window 0
    row = f.iloc[0]
    assert row.dir == "s2c" and row.cost_method == "lower_bound"
    assert row.cost_ms == pytest.approx(s["rwnd_limited_ms"], rel=0.2)
    d = row.details
    # the edge moves at the reader's cadence (recv + sleep 10 ms), not once per RTT (30 ms)
    assert d["edge_cadence_ms"] == pytest.approx(sc["ground_truth"]["read_gap_p50_ms"], rel=0.2)
    assert not d["per_rtt"]
    assert d["median_gap_bytes"] < 1448
    assert d["median_window_bytes"] < 0.75 * d["max_window_bytes"]
    roles = {e["role"] for e in row.evidence}
    assert {"sent_to_window_edge", "window_update", "resumed_data"} <= roles
    assert "reader" in row.remedy


@pytest.mark.parametrize(
    "name", ["receiver_limited_control", "zero_window", "zero_window_control", "h2_flow_control"]
)
def test_silent_where_the_reader_keeps_up_or_the_window_closes(name):
    for v in ("client", "server"):
        assert "receiver_limited" not in set(_findings(name, v).kind)


def test_capped_fraction_is_what_separates_a_slow_reader():
    """Allow any window (capped_fraction 1): the zero_window_control capture — 8 KiB
    SO_RCVBUF, a prompt reader, window pinned at its maximum — would then be reported,
    which is exactly the §11.5 trap the default rules out."""
    with pcapkit.open(
        FIX / "zero_window_control/server.pcapng",
        thresholds={"receiver_limited.capped_fraction": 1.0},
    ) as t:
        f = t.findings
    assert "receiver_limited" in set(f.kind)


def _with_resends_in_pauses(t, kind: str):
    """SYNTHETIC: the receiver_limited fixture's segments plus, inside every pause of the
    s2c direction, a resend of the last byte sent before it, of ``kind`` — a sender that
    resent during a pause was not waiting for the reader (§11.5's trap)."""
    from pcapkit.detect.context import DetectContext

    seg = t.segments
    s2c = seg[(seg.dir == "s2c") & (seg.kind == "new")].sort_values("frame")
    ts = s2c.ts_ns.to_numpy()
    at = ts[:-1][(ts[1:] - ts[:-1]) > 3_000_000]
    extra = s2c[s2c.ts_ns.isin(at)].copy()
    extra["ts_ns"] += (s2c.ts_ns.to_numpy()[1:][(ts[1:] - ts[:-1]) > 3_000_000] - at) // 2
    extra["kind"] = kind
    extra["new_bytes"] = 0
    both = pd.concat([seg, extra]).sort_values(["flow", "dir", "frame", "ts_ns"], kind="stable")
    both["kind"] = both["kind"].astype(seg["kind"].dtype)
    return DetectContext(t.packets, t.flows, both.reset_index(drop=True), t.records, t.tls)


@pytest.mark.parametrize("kind", ["retransmission", "spurious_retransmission"])
def test_a_resend_inside_the_pause_is_not_a_reader_stall(kind):
    from pcapkit.detect import receiver_limited

    with pcapkit.open(FIX / "receiver_limited/server.pcapng") as t:
        assert [f.kind for f in receiver_limited.detect(_with_resends_in_pauses(t, "new"))] == [
            "receiver_limited"
        ]
        assert receiver_limited.detect(_with_resends_in_pauses(t, kind)) == []

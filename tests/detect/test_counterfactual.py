"""What QUIC saved / would have saved (DETECTION.md §11.7) on the head-of-line fixtures,
against their ground truth (scenario.json):

* h2_hol_drop (HTTP/2 over TCP, one dropped segment): the streams whose DATA was *not* in
  the dropped segment (ground truth ``streams_released_by_fill`` − ``streams_hit``) are the
  ones QUIC would have spared, each by about the hole (``receiver_hole_ms``);
* h3_streams_drop (HTTP/3, one dropped packet): the streams that kept delivering during
  the hole (``per_stream``: not in the lost packet, bytes during the hole) are the ones one
  TCP byte stream would have held, each by at most the hole;
* single-stream captures (h2_sse_drop, h3_sse_drop) gain nothing; no loss, no row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect.counterfactual import hol_counterfactual

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _gt(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())["ground_truth"]


@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_h2_over_tcp_what_quic_would_have_saved(vantage):
    (drop,) = _gt("h2_hol_drop")["drops"]
    spared = sorted(set(drop["streams_released_by_fill"]) - set(drop["streams_hit"]))
    with pcapkit.open(FIX / f"h2_hol_drop/{vantage}.pcapng") as t:
        h = t.hol_counterfactual
    (row,) = h.itertuples(index=False)
    assert row.transport == "tcp" and row.dir == "s2c" and row.episodes == 1
    assert list(row.streams_saved) == spared
    assert list(row.streams_blocked) == drop["streams_hit"]
    assert row.max_ms == pytest.approx(drop["receiver_hole_ms"], rel=0.2)
    assert row.quic_saved_ms == pytest.approx(len(spared) * drop["receiver_hole_ms"], rel=0.2)


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_h3_what_quic_saved(vantage):
    (drop,) = _gt("h3_streams_drop")["drops"]
    moved = sorted(
        int(s)
        for s, v in drop["per_stream"].items()
        if not v["in_lost_packet"] and v["bytes_during_hole"] > 0
    )
    with pcapkit.open(FIX / f"h3_streams_drop/{vantage}.pcapng") as t:
        h = t.hol_counterfactual
    (row,) = h.itertuples(index=False)
    assert row.transport == "quic"
    assert list(row.streams_saved) == moved
    assert list(row.streams_blocked) == drop["streams_hit"]
    # each spared stream's first byte inside the hole would have waited for the repair
    assert 0 < row.max_ms <= drop["hole_ms"] * 1.2
    assert row.quic_saved_ms <= len(moved) * drop["hole_ms"] * 1.2


@pytest.mark.parametrize("name", ["h2_sse_drop", "h3_sse_drop", "grpc_stream"])
def test_one_stream_gains_nothing(name):
    with pcapkit.open(FIX / f"{name}/client.pcapng") as t:
        h = t.hol_counterfactual
    (row,) = h.itertuples(index=False)
    assert row.quic_saved_ms == 0 and list(row.streams_saved) == []


@pytest.mark.parametrize("name", ["h2_hol_nodrop", "h3_streams_nodrop", "tls_sse_drop"])
def test_no_row_without_multiplexed_hol(name):
    """No loss — or HTTP/1.1, where no stream information exists — no claim."""
    with pcapkit.open(FIX / f"{name}/client.pcapng") as t:
        assert t.hol_counterfactual.empty


def test_report_line_and_json():
    from pcapkit.report.html import analysis_html
    from pcapkit.report.json import analysis_json
    from pcapkit.report.text import analysis_text

    with pcapkit.open(FIX / "h2_hol_drop/client.pcapng") as t:
        text = analysis_text(t)
        doc = analysis_json(t)
        page = analysis_html(t)
    assert "HoL: QUIC would have saved" in text
    assert "HoL: QUIC would have saved" in page
    (row,) = doc["hol_counterfactual"]
    assert row["streams_saved"] == [5, 7, 9, 11, 13]


def test_empty_and_odd_findings():
    """No findings, or HoL findings without stream details: an empty declared table."""
    assert list(hol_counterfactual([], None).columns)[:3] == ["flow", "dir", "transport"]

    class F:
        kind, flow, dir, details, cost_ms = "tcp_hol_blocking", 0, "s2c", {}, 5.0

    assert hol_counterfactual([F()], None).empty

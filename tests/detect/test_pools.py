"""connection_pool_queueing (P1) and h2_concurrency_limited (P2) on their lab fixtures:
the cost is the scenario's queueing (Σ sent − first sent of the requests that waited, from
the client program's own clock) within 20 % at every vantage, the queued requests are the
ones the program held back, and each control is clean (DETECTION.md §11.3, §11.4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit

FIX = Path(__file__).resolve().parents[2] / "fixtures"
VANTAGES = ("client", "server", "middle")
PAIRS = {
    "connection_pool_queueing": "connection_pool_queueing_control",
    "h2_concurrency_limited": "h2_concurrency_limited_control",
    "h3_concurrency_limited": "h3_concurrency_limited_control",
}
KIND = {"h3_concurrency_limited": "h2_concurrency_limited"}  # fixture → the kind it shows
_cache: dict[Path, object] = {}


def findings(path: Path):
    if path not in _cache:
        with pcapkit.open(path) as t:
            _cache[path] = t.findings
    return _cache[path]


CASES = [(n, v) for n in sorted(PAIRS) for v in VANTAGES if (FIX / n / f"{v}.pcapng").exists()]


@pytest.mark.parametrize("name,vantage", CASES)
def test_positive_cost_matches_ground_truth(name, vantage):
    sc = json.loads((FIX / name / "scenario.json").read_text())
    gt = sc["ground_truth"]
    f = findings(FIX / name / f"{vantage}.pcapng")
    rows = f[f.kind == KIND.get(name, name)]
    assert len(rows) == 1, rows
    row = rows.iloc[0]
    assert row.cost_ms == pytest.approx(gt["queueing_ms"], rel=0.2)
    assert row.details["queued"] == gt["queued"]
    # each queued request's wait, one by one (sorted: the program's order)
    assert sorted(row.details["waits_ms"]) == pytest.approx(sorted(gt["queued_waits_ms"]), rel=0.2)
    assert row.cost_method == "lower_bound" and row.dir == "c2s"
    assert row.severity == "high"
    assert len(row.frames) >= 2 * 3


def test_h2_limit_and_streams():
    sc = json.loads((FIX / "h2_concurrency_limited/scenario.json").read_text())
    held = sorted(r["stream"] for r in sc["ground_truth"]["requests"])[2:]  # all but the first 2
    for v in VANTAGES:
        f = findings(FIX / f"h2_concurrency_limited/{v}.pcapng")
        row = f[f.kind == "h2_concurrency_limited"].iloc[0]
        assert row.details["max_concurrent_streams"] == 2
        assert sorted(row.details["streams"]) == held
        roles = [e["role"] for e in row.evidence]
        assert roles[0] == "settings_max_concurrent_streams"
        assert "stream_end_freed_slot" in roles and "queued_stream_headers" in roles
        assert "SETTINGS_MAX_CONCURRENT_STREAMS = 2" in row.explanation


def test_h3_max_streams():
    """QUIC (§11.4 (iii)): 2 bidirectional streams granted, one more per MAX_STREAMS; the
    queued streams are request streams 8, 12, … (4n), each opened after the grant."""
    sc = json.loads((FIX / "h3_concurrency_limited/scenario.json").read_text())
    held = sorted(r["stream"] for r in sc["ground_truth"]["requests"])[2:]
    for v in ("client", "server"):
        f = findings(FIX / f"h3_concurrency_limited/{v}.pcapng")
        row = f[f.kind == "h2_concurrency_limited"].iloc[0]
        assert row.details["protocol"] == "h3" and row.details["max_concurrent_streams"] == 2
        assert sorted(row.details["streams"]) == held
        roles = [e["role"] for e in row.evidence]
        assert roles[0] == "streams_blocked"
        assert roles.count("max_streams") == roles.count("queued_stream_opened") == 6
        assert "udp.stream" in row.display_filter


def test_pool_names_the_cap():
    for v in VANTAGES:
        f = findings(FIX / f"connection_pool_queueing/{v}.pcapng")
        row = f[f.kind == "connection_pool_queueing"].iloc[0]
        assert row.details["connections"] == 2
        assert "semaphore" in row.explanation  # the wire cannot tell a pool from a semaphore
        assert {e["role"] for e in row.evidence} == {
            "queued_request",
            "response_end_released_connection",
        }


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_controls_are_clean(name):
    for v in VANTAGES:
        if not (FIX / PAIRS[name] / f"{v}.pcapng").exists():
            continue
        f = findings(FIX / PAIRS[name] / f"{v}.pcapng")
        assert not set(f.kind) & {"connection_pool_queueing", "h2_concurrency_limited"}


def test_settings_detail_carries_the_limit():
    """The messages table shows the SETTINGS values (MAX_CONCURRENT_STREAMS first): the
    server's 2 in the positive, the client's own 100 in its SETTINGS."""
    with pcapkit.open(FIX / "h2_concurrency_limited/client.pcapng") as t:
        m = t.messages
    s = m[(m.type == "SETTINGS") & ~m.detail.str.startswith("flags 0x01")]
    by_dir = dict(zip(s["dir"].astype(str), s["detail"], strict=True))
    assert by_dir["s2c"].startswith("flags 0x00; MAX_CONCURRENT_STREAMS=2,")
    assert by_dir["c2s"].startswith("flags 0x00; MAX_CONCURRENT_STREAMS=100,")


def test_threshold_min_queued_is_honoured():
    """With more queued dispatches required than the capture has, nothing is reported."""
    with pcapkit.open(
        FIX / "h2_concurrency_limited/client.pcapng",
        thresholds={"pools.min_queued": 7},
    ) as t:
        assert "h2_concurrency_limited" not in set(t.findings.kind)


@pytest.mark.parametrize("name", ["connection_pool_one", "h2_client_cap"])
def test_the_wire_cannot_decide_stays_silent(name):
    """Requests that really queued (ground truth ≥ 3) but not because of a pool of N ≥ 2
    or the peer's stream limit: a pool of one (a sequential program on the wire) and an
    application semaphore of 2 under SETTINGS_MAX_CONCURRENT_STREAMS 100 (DETECTION.md
    §11.3, §11.4 false positives)."""
    sc = json.loads((FIX / name / "scenario.json").read_text())
    assert sc["ground_truth"]["queued"] >= 3
    for v in VANTAGES:
        f = findings(FIX / name / f"{v}.pcapng")
        assert not set(f.kind) & {"connection_pool_queueing", "h2_concurrency_limited"}

"""pcapkit diff / pcapkit.diff: before and after a fix, on the lab's fixture pairs.

Each pair is one workload captured with the pathology and with its remedy (nagle_wwr vs
nagle_wwr_nodelay, tls_sse_nagle vs tls_sse_nodelay, h2_hol_drop vs h2_hol_nodrop);
the scenarios' ground truth (the forwarder's and the applications' own clocks) says how
much the remedy saved, and the diff must say the same.
"""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import pcapkit
from pcapkit.cli import cli
from pcapkit.report.diff import diff_json, match_requests

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def cap(name: str, vantage: str = "client") -> str:
    return str(FIX / name / f"{vantage}.pcapng")


@cache
def d(before: str, after: str):  # type: ignore[no-untyped-def]
    return pcapkit.diff(cap(before), cap(after))


def truth(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((FIX / name / "scenario.json").read_text())["ground_truth"]


def metric(dd, name: str) -> pd.Series:  # type: ignore[no-untyped-def]
    return dd.metrics.set_index("metric").loc[name]


def test_nagle_pair_improves_by_what_the_ground_truth_says() -> None:
    dd = d("nagle_wwr", "nagle_wwr_nodelay")
    assert dd.verdict == "improved"
    ex = metric(dd, "exchange_ms")
    want_b = statistics.median(e["exchange_ms"] for e in truth("nagle_wwr")["exchanges"])
    want_a = statistics.median(e["exchange_ms"] for e in truth("nagle_wwr_nodelay")["exchanges"])
    # the capture point is the client's interface, the truth the application's clock
    assert ex.before == pytest.approx(want_b, rel=0.05)
    assert ex.after == pytest.approx(want_a, rel=0.05)
    assert ex.change == "improved"
    assert set(dd.gone.kind) >= {"nagle_delayed_ack"}
    assert dd.appeared.empty


def test_the_same_pair_backwards_is_a_regression() -> None:
    dd = d("nagle_wwr_nodelay", "nagle_wwr")
    assert dd.verdict == "regressed"
    assert metric(dd, "exchange_ms").change == "regressed"
    assert set(dd.appeared.kind) >= {"nagle_delayed_ack"}
    assert dd.gone.empty
    assert "exchange_ms" in set(dd.regressions(50.0).metric)
    assert dd.regressions(500.0, ["exchange_ms"]).empty
    # findings' cost from nothing is worse by any percentage
    assert "findings_cost_ms" in set(dd.regressions(500.0).metric)


def test_sse_pair_ttft_improves_and_gaps_stay() -> None:
    dd = d("tls_sse_nagle", "tls_sse_nodelay")
    assert dd.verdict == "improved"
    assert len(dd.requests) == 1
    r = dd.requests.iloc[0]
    assert r.path == "/v1/stream"
    # event 1 waited behind the client's delayed ACK (~40 ms) on a 30 ms path: TTFT about
    # three round trips before, one after
    rtt = truth("tls_sse_nagle")["handshake"][0]["rtt_ms"]
    assert r.ttft_ms_before > 2.5 * rtt
    assert r.ttft_ms_after < 1.3 * rtt
    assert metric(dd, "ttft_ms").change == "improved"
    # the 50 ms cadence of the tokens is the server's, not the fix's
    assert metric(dd, "gap_p95_ms").change == "unchanged"
    assert 45 < r.gap_p95_ms_before < 60 and 45 < r.gap_p95_ms_after < 60
    assert r.events_per_s_before > 0 and r.events_per_s_after > 0
    assert "nagle_delayed_ack" in set(dd.gone.kind)


def test_h2_hol_pair_response_time_improves() -> None:
    dd = d("h2_hol_drop", "h2_hol_nodrop")
    assert dd.verdict == "improved"
    assert len(dd.requests) == 8 and dd.unmatched_before.empty and dd.unmatched_after.empty
    resp = metric(dd, "response_ms")
    assert resp.change == "improved"
    assert resp.before - resp.after > 15.0  # one retransmission's worth
    gone = dd.gone[dd.gone.kind == "tcp_hol_blocking"]
    assert len(gone) == 1 and gone.cost_ms.iloc[0] > 10.0
    # the same workload: connection counts are judged, and did not change
    conn = metric(dd, "connections")
    assert bool(conn.judged) and conn.change == "unchanged"


def test_a_capture_against_itself_is_unchanged() -> None:
    dd = d("tls_sse_nagle", "tls_sse_nagle")
    assert dd.verdict == "unchanged"
    assert dd.appeared.empty and dd.gone.empty
    assert set(dd.metrics.change) == {"unchanged", "not comparable"}
    # a TLS capture with keys has HTTP exchanges, so no TCP turns to compare
    assert metric(dd, "exchange_ms").change == "not comparable"
    assert metric(dd, "ttft_ms").change == "unchanged"
    assert dd.regressions(0.0).empty


def test_connection_reuse_is_compared() -> None:
    dd = d("tls_no_reuse", "tls_reuse")
    conn = metric(dd, "connections")
    assert conn.before > conn.after
    assert metric(dd, "handshakes").before > metric(dd, "handshakes").after


def test_json_contract() -> None:
    doc = json.loads(json.dumps(diff_json(d("tls_sse_nagle", "tls_sse_nodelay"))))
    assert doc["verdict"] == "improved"
    (req,) = doc["requests"]
    for k in ("ttfb_ms", "ttft_ms", "gap_p95_ms", "events_per_s"):
        assert isinstance(req[f"{k}_before"], float) and isinstance(req[f"{k}_after"], float)
    assert set(doc["findings"]) == {"appeared", "gone"}
    assert doc["findings"]["gone"]
    for f in doc["findings"]["gone"]:
        assert isinstance(f["kind"], str) and "cost_ms" in f


def _synthetic_requests(rows: list[tuple[int, str, str | None, int]]) -> pd.DataFrame:
    """SYNTHETIC: requests tables of two runs, only the columns the matcher reads."""
    return pd.DataFrame(
        [
            {
                "request": i,
                "method": "POST",
                "authority": "api",
                "path": path,
                "request_id": rid,
                "traceparent": None,
                "request_start_ts_ns": t,
            }
            for i, path, rid, t in rows
        ]
    )


def test_requests_match_by_request_id_before_order() -> None:
    a = _synthetic_requests([(0, "/v1/chat", "r-1", 10), (1, "/v1/chat", "r-2", 20)])
    # after: the same two requests, started in the other order
    b = _synthetic_requests([(5, "/v1/chat", "r-2", 11), (6, "/v1/chat", "r-1", 21)])
    assert match_requests(a, b) == [(0, 6, "x-request-id"), (1, 5, "x-request-id")]
    # without ids they pair by order
    a2 = a.assign(request_id=None)
    b2 = b.assign(request_id=None)
    assert match_requests(a2, b2) == [(0, 5, "order"), (1, 6, "order")]


# --- the command line -------------------------------------------------------------


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["diff", *args])


def test_cli_exit_codes() -> None:
    good, bad = cap("nagle_wwr_nodelay"), cap("nagle_wwr")
    r = run(good, bad)
    assert r.exit_code == 0, r.output
    assert "verdict: regressed" in r.output
    r = run(good, bad, "--fail-on-regression", "50")
    assert r.exit_code == 3
    assert "exchange_ms" in r.stderr
    # a metric that did not move does not trip the gate
    r = run(good, bad, "--fail-on-regression", "50", "--metric", "connections")
    assert r.exit_code == 0, r.output
    r = run(bad, good, "--fail-on-regression", "0")
    assert r.exit_code == 0, r.output


def test_cli_json_is_one_object() -> None:
    r = run(cap("nagle_wwr"), cap("nagle_wwr_nodelay"), "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "improved"
    assert {f["kind"] for f in doc["findings"]["gone"]} >= {"nagle_delayed_ack"}


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    r = run(str(tmp_path / "missing.pcapng"), cap("nagle_wwr"))
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcapkit: error:")
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    r = run(cap("nagle_wwr"), str(junk))
    assert r.exit_code == 1
    assert len(r.stderr.strip().splitlines()) == 1

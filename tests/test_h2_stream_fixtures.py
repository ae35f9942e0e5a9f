"""The HTTP/2 stream fixtures (pcapkit/lab/scenarios/h2_stream.py) against their ground truth.

SSE and gRPC over HTTP/2 (with and without a dropped segment) and the send-buffer
head-of-line pair: what the applications logged (each event's write and read time, the
urgent response's queueing) must match what the analysis reads from every vantage
(DETECTION.md §1.1, §4.1, §4.3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.lab.scenarios.h2_stream import grpc_frame, grpc_payload

FIX = Path(__file__).resolve().parent.parent / "fixtures"
VANTAGES = ("client", "server")  # no middle capture (fixtures folder budget)
STREAMS = ["h2_sse_drop", "h2_sse_nodrop", "grpc_stream", "grpc_stream_control"]

_cache: dict[Path, pcapkit.Trace] = {}


def _trace(name: str, vantage: str) -> pcapkit.Trace:
    path = FIX / name / f"{vantage}.pcapng"
    if path not in _cache:
        _cache[path] = pcapkit.open(path)
    return _cache[path]


def _doc(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


@pytest.mark.parametrize("vantage", VANTAGES)
@pytest.mark.parametrize("name", STREAMS)
def test_stream_events_match_the_applications_clock(name: str, vantage: str) -> None:
    doc = _doc(name)
    gt, p = doc["ground_truth"], doc["params"]
    delay = p["delay_ms"]
    t = _trace(name, vantage)
    req, msgs = t.requests, t.messages
    q = req[req.stream == 1].iloc[0]
    assert q.protocol == "h2" and q.status == 200 and q.complete
    if p["mode"] == "sse":
        assert (q.method, q.path, q.content_type) == ("GET", "/v1/stream", "text/event-stream")
        ev = msgs[(msgs.protocol == "sse") & (msgs.type == "event") & (msgs.stream == 1)]
        assert ev.detail.tolist() == [f"token {g['n']}" for g in gt["events"]]
        blob = req[req.path == "/blob"].iloc[0]
        assert blob.stream == 3 and blob.response_body_bytes == p["blob_len"]
    else:
        assert (q.method, q.path) == ("POST", "/pkg.Svc/Stream")
        assert q.content_type.startswith("application/grpc")
        assert q.grpc_status == 0 and gt["trailers"]["grpc-status"] == "0"
        ev = msgs[(msgs.protocol == "grpc") & (msgs.type == "message") & (msgs.dir == "s2c")]
        sizes = [len(grpc_frame(grpc_payload(g["n"], p["message_len"]))) for g in gt["events"]]
        assert ev.length.tolist() == sizes
    assert q.events == len(ev) == len(gt["events"]) == p["events"]
    assert q.first_event_ts_ns == ev.ts_ns.iloc[0]
    dropped = set(gt["summary"]["late_events"])
    for ts, g in zip(ev.ts_ns.tolist(), gt["events"], strict=True):
        assert g["write_ns"] <= ts <= g["read_ns"]
        late_ms = (g["read_ns"] - ts) / 1e6
        if g["n"] in dropped and vantage != "client":
            continue  # the capture saw the lost original; the client read it after the fill
        want = {"client": 0.0, "server": delay, "middle": delay / 2}[vantage]
        assert want - 1.0 < late_ms < want + 5.0, (g["n"], late_ms)
    # TTFT from the request's header block: the app's own TTFT within the path delay
    ttft_app = gt["summary"]["ttft_client_ms"]
    assert q.ttft_ms == pytest.approx((q.first_event_ts_ns - q.request_end_ts_ns) / 1e6)
    lag = {"client": 0.0, "server": 2 * delay, "middle": delay}[vantage]
    assert q.ttft_ms == pytest.approx(ttft_app - lag, abs=5.0)


@pytest.mark.parametrize("name", ["h2_sse_drop", "grpc_stream"])
def test_the_drop_hit_event_10_of_stream_1(name: str) -> None:
    s = _doc(name)["ground_truth"]["summary"]
    assert s["drop_events_hit"] == [10] and s["drop_streams_hit"] == [1]
    assert s["late_events"][0] == 10


@pytest.mark.parametrize("vantage", ["client"])
@pytest.mark.parametrize("name", ["h2_sse_drop", "grpc_stream"])
def test_dropped_event_gap_is_attributed_to_tcp_hol_blocking(name: str, vantage: str) -> None:
    doc = _doc(name)
    delay = doc["params"]["delay_ms"]
    ev = doc["ground_truth"]["events"]
    lost = next(e for e in ev if e["n"] == 10)
    extra_ms = lost["latency_ms"] - delay  # what the lost event lost, as the apps saw it
    gaps = _trace(name, vantage).gaps
    g = gaps[(gaps.stream == 1) & (gaps.event == 9)].iloc[0]  # the gap before event 10
    assert g.cause == "tcp_hol_blocking"
    assert g.network_ms == pytest.approx(extra_ms, rel=0.2)
    assert g.server_ms < 5.0


@pytest.mark.parametrize("name", ["h2_sse_drop", "grpc_stream"])
def test_dropped_event_is_on_time_at_the_server(name: str) -> None:
    t = _trace(name, "server")
    assert (t.gaps.event == 0).all()
    assert "tcp_hol_blocking" in set(t.findings.kind)


@pytest.mark.parametrize("vantage", VANTAGES)
@pytest.mark.parametrize("name", ["h2_sse_nodrop", "grpc_stream_control"])
def test_controls_have_no_long_gap(name: str, vantage: str) -> None:
    t = _trace(name, vantage)
    assert (t.gaps.event == 0).all()
    assert not set(t.findings.kind) & {"tcp_hol_blocking", "sse_batching"}


# -- send-buffer HoL (DETECTION.md §4.3) ------------------------------------------------------
@pytest.mark.parametrize("vantage", VANTAGES)
def test_send_buffer_finding_matches_ground_truth(vantage: str) -> None:
    gt = _doc("h2_send_buffer")["ground_truth"]
    s = gt["summary"]
    t = _trace("h2_send_buffer", vantage)
    f = t.findings
    hol = f[f.kind == "h2_send_buffer_hol"]
    assert len(hol) == 1
    row = hol.iloc[0]
    assert row.stream == gt["urgent"]["stream"] == 3
    assert row.cost_method == "lower_bound"
    # the bytes counted are HTTP/2 frames (9-byte headers) sent after the request arrived:
    # the kernel's unsent queue at that moment, within one 4 KiB frame
    assert row.details["queued_bytes"] == pytest.approx(s["queued_ahead_bytes"], abs=4_200)
    assert row.details["streams_ahead"] == [1]
    # cost: ≈ the time the urgent response sat behind them in the server (within 15 %),
    # and a lower bound of what the client felt beyond the one-way delay
    assert row.cost_ms == pytest.approx(s["urgent_left_after_ms"], rel=0.15)
    assert row.cost_ms <= s["urgent_extra_ms"]
    req = t.requests
    urgent = req[req.stream == 3].iloc[0]
    assert urgent.path == "/urgent" and urgent.status == 200
    assert row.frames[0] == urgent.request_frame and row.frames[-1] == urgent.response_frame


def test_send_buffer_ground_truth_pair() -> None:
    pos = _doc("h2_send_buffer")["ground_truth"]["summary"]
    ctl = _doc("h2_send_buffer_lowat")["ground_truth"]["summary"]
    assert pos["notsent_lowat"] == 0 and ctl["notsent_lowat"] == 16_384
    assert pos["queued_ahead_bytes"] > 40_000 > 16_384 + 4_096 + 64 >= ctl["queued_ahead_bytes"]
    assert pos["urgent_extra_ms"] > ctl["urgent_extra_ms"] + 200


@pytest.mark.parametrize("vantage", VANTAGES)
def test_lowat_control_is_clean(vantage: str) -> None:
    assert "h2_send_buffer_hol" not in set(_trace("h2_send_buffer_lowat", vantage).findings.kind)

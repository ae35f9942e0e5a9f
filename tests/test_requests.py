"""Trace.messages / Trace.requests on the real lab fixtures (HTTP/1.1 + SSE over TLS 1.3).

The fixtures' scenario.json holds what the applications logged: when the server wrote
each event and when the client read it.  The capture's event stamps must sit between
those times as the vantage implies (DETECTION.md §1.1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import pcapkit
from pcapkit import schema

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SSE_FIXTURES = ["tls_sse_nagle", "tls_sse_nodelay"]


def _truth(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


@pytest.mark.parametrize("name", SSE_FIXTURES)
@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_sse_events_match_the_applications_clock(name: str, vantage: str) -> None:
    sc = _truth(name)
    truth = sc["ground_truth"]["events"]
    delay_ms = sc["params"]["delay_ms"]
    with pcapkit.open(FIX / name / f"{vantage}.pcapng") as t:
        req = t.requests
        msgs = t.messages
    assert list(req.columns) == schema.columns("requests")
    assert len(req) == 1
    q = req.iloc[0]
    assert (q.protocol, q.method, q.path, q.status) == ("http/1.1", "GET", "/v1/stream", 200)
    assert q.content_type == "text/event-stream"
    assert q.events == len(truth) == 20
    assert q.complete
    ev = msgs[(msgs.type == "event") & (msgs.protocol == "sse")]
    assert ev.detail.tolist() == [f"token {g['n']}" for g in truth]
    assert q.first_event_ts_ns == ev.ts_ns.iloc[0]
    for ts, g in zip(ev.ts_ns.tolist(), truth, strict=True):
        # the capture sees each event after the server wrote it and before the client read it
        assert g["write_ns"] <= ts <= g["read_ns"]
        late_ms = (g["read_ns"] - ts) / 1e6
        if vantage == "client":
            assert late_ms < 5.0  # the client read it as soon as it arrived
        elif vantage == "server":
            assert delay_ms - 1.0 < late_ms < delay_ms + 5.0  # one path delay still to go
        else:
            assert delay_ms / 2 - 1.0 < late_ms < delay_ms / 2 + 5.0
    # TTFT counts from the request's header block; at the client it includes one RTT
    assert q.ttft_ms == pytest.approx((q.first_event_ts_ns - q.request_end_ts_ns) / 1e6)
    if vantage == "client":
        assert q.ttft_ms > 2 * delay_ms


def test_nagle_delays_the_first_token_not_the_control() -> None:
    def ttft(name: str) -> float:
        with pcapkit.open(FIX / name / "client.pcapng") as t:
            return float(t.requests.ttft_ms.iloc[0])

    held, control = ttft("tls_sse_nagle"), ttft("tls_sse_nodelay")
    # the applications' own first-event latencies (write → read) differ by the hold
    extra = (
        _truth("tls_sse_nagle")["ground_truth"]["first_event_latency_ms"]
        - _truth("tls_sse_nodelay")["ground_truth"]["first_event_latency_ms"]
    )
    assert extra > 40.0  # at least one delayed-ACK timer (TCP_DELACK_MIN)
    assert held - control == pytest.approx(extra, rel=0.1)


def test_messages_rows_point_at_wireshark_frames() -> None:
    """response_head_frame is the frame whose record completed the response head (the
    records table's last_frame of that record); request_frame the request's."""
    with pcapkit.open(FIX / "tls_sse_nodelay" / "client.pcapng") as t:
        q = t.requests.iloc[0]
        rec = t.records
        app = rec[(rec.content_type == 23) & (rec.status == "decrypted")]
        c2s_first = app[app.dir == "c2s"].iloc[0]
        assert q.request_frame == c2s_first.last_frame
        s2c_first = app[app.dir == "s2c"].iloc[0]
        assert q.response_head_frame == s2c_first.last_frame
        # the chunked SSE body ends with the last application record
        assert q.response_frame == app[app.dir == "s2c"].iloc[-1].last_frame
        m = t.messages
        assert set(m.request.dropna().tolist()) == {0}
        assert m.frame.notna().all()
        heads = m[m.type.isin(["request", "response"])]
        assert heads.detail.tolist() == ["GET /v1/stream HTTP/1.1", "HTTP/1.1 200 OK"]


CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "wireshark"
HTTP_CAPTURES = [
    ("http-ooo.pcap", None),
    ("http-ooo2.pcap", None),
    ("tls13-rfc8446.pcap", "keys/tls13-rfc8446.keys"),
    ("tls13-rfc8446.pcap", "keys/tls13-rfc8446-noearly.keys"),
    ("tls12-dsb.pcapng", None),
]


@pytest.mark.parametrize("name,keys", HTTP_CAPTURES)
def test_http1_frames_equal_tshark(name: str, keys: str | None) -> None:
    """Differential: every HTTP/1.1 request and response sits at the frame tshark shows it
    (out-of-order reassembly on, as MANIFEST.md's facts were taken)."""
    from tshark_util import TSHARK, fields

    path = CORPUS / name
    if TSHARK is None or not path.exists():
        pytest.skip("tshark or the corpus is missing")
    extra = ["-o", "tcp.reassemble_out_of_order:TRUE"]
    if keys:
        extra += ["-o", f"tls.keylog_file:{CORPUS / keys}"]
    rows = fields(
        path,
        "frame.number",
        "http.request.method",
        "http.response.code",
        display_filter="http",
        extra=extra,
    )
    req_frames = [int(r[0]) for r in rows if r[1]]
    resp_frames = [int(r[0]) for r in rows if len(r) > 2 and r[2]]
    with pcapkit.open(path, keylog=CORPUS / keys if keys else None) as t:
        q = t.requests
    assert q.request_frame.dropna().astype(int).tolist() == req_frames
    assert q.response_frame.dropna().astype(int).tolist() == resp_frames


def test_http_ooo_manifest_facts() -> None:
    path = CORPUS / "http-ooo.pcap"
    if not path.exists():
        pytest.skip("corpus missing")
    with pcapkit.open(path) as t:
        q = t.requests
    got = list(zip(q.method, q.path, q.request_frame.astype(int), strict=True))
    assert got == [
        ("PUT", "/1", 4),
        ("GET", "/2", 7),
        ("PUT", "/3", 10),
        ("PUT", "/4", 11),
        ("PUT", "/5", 15),
    ]
    assert q.request_body_bytes.tolist() == [4, 0, 6, 5, 4]


def test_tls13_rfc8446_bodies() -> None:
    path = CORPUS / "tls13-rfc8446.pcap"
    if not path.exists():
        pytest.skip("corpus missing")
    with pcapkit.open(path, keylog=CORPUS / "keys/tls13-rfc8446.keys") as t:
        q = t.requests
        bodies = [t.plaintext(int(f), "s2c").split(b"\r\n\r\n", 1)[1] for f in q.flow.unique()]
    assert q.path.tolist() == ["/first", "/early", "/second"]
    assert (q.status == 200).all() and (q.content_type == "text/plain").all()
    assert bodies[0] == b"Request for /first, version TLSv1.3, Early data: no\n"
    assert q.response_body_bytes.tolist() == [52, 53, 54]


def test_requests_need_keys_and_say_why() -> None:
    """Without keys the TLS flows have no readable HTTP: an empty table with every column."""
    with pcapkit.open(FIX / "bulk_loopback_tls" / "client.pcapng") as t:
        r = t.requests
    assert list(r.columns) == schema.columns("requests")


# -- detectors and gap attribution ------------------------------------------------------
@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_sse_batching_and_first_event_attributed_to_nagle(vantage: str) -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / f"{vantage}.pcapng") as t:
        f = t.findings
        gaps = t.gaps
        flows = t.flows
    sb = f[f.kind == "sse_batching"]
    assert len(sb) == 1
    row = sb.iloc[0]
    assert row.details["cause"] == "nagle_delayed_ack"
    assert row.details["bursts"] == [[1, 2]]  # tokens 1 and 2 arrived together
    assert row.cost_ms == pytest.approx(50.0, abs=2.0)  # one cadence period
    nda = f[f.kind == "nagle_delayed_ack"].iloc[0]
    first = gaps[gaps.event == 0].iloc[0]
    assert first.cause == "nagle_delayed_ack"
    assert first.network_ms == pytest.approx(nda.cost_ms, abs=0.5)
    assert first.path_ms == pytest.approx(float(flows.server_leg_ms.iloc[0]), abs=0.5)
    assert first.gap_ms == pytest.approx(
        first.path_ms + first.network_ms + first.server_ms, abs=0.01
    )
    assert first.server_ms < 5.0  # the server wrote the first token at once (ground truth)


@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_control_has_no_batching_and_no_network_wait(vantage: str) -> None:
    with pcapkit.open(FIX / "tls_sse_nodelay" / f"{vantage}.pcapng") as t:
        f = t.findings
        gaps = t.gaps
    assert "sse_batching" not in set(f.kind)
    assert (gaps.network_ms == 0).all()
    assert gaps.event.tolist() == [0]  # no long gap in a steady 50 ms stream
    assert gaps.cause.iloc[0] in ("path", "server")


def _http_capture(tmp_path: Path, response: bytes, name: str) -> Path:
    """A SYNTHETIC cleartext HTTP/1.1 exchange (scapy-built frames)."""
    from pcapkit.io.writer import write_pcap

    from synth import Conn

    c = Conn(sport=80)
    c.handshake()
    c.c2s(
        30_000,
        b"GET /v1/chat HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer sk-secret\r\n"
        b"X-Request-Id: abc-123\r\n\r\n",
    )
    c.ack_s(50_000)
    c.s2c(70_000, response)
    c.ack_c(90_000)
    p = tmp_path / name
    write_pcap(p, c.frames, 1)
    return p


def test_rate_limited_429_with_retry_after(tmp_path: Path) -> None:
    p = _http_capture(
        tmp_path,
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nx-ratelimit-remaining-requests: 0\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        "429.pcap",
    )
    with pcapkit.open(p) as t:
        q = t.requests.iloc[0]
        f = t.findings
    assert (q.status, q.retry_after, q.request_id) == (429, "7", "abc-123")
    assert q.ratelimit == "x-ratelimit-remaining-requests=0"
    assert dict(q.request_headers)["Authorization"] == "<redacted>"
    rl = f[f.kind == "rate_limited"]
    assert len(rl) == 1
    assert rl.iloc[0].cost_ms == 7000.0
    assert rl.iloc[0].frames == [4, 6]
    with pcapkit.open(p, redact=False) as t:
        assert dict(t.requests.iloc[0].request_headers)["Authorization"] == "Bearer sk-secret"


def test_a_retry_after_of_any_length_ends_within_int64(tmp_path: Path) -> None:
    """The server's Retry-After has any number of digits (RFC 9110 §10.2.3; up to 19 are
    read): a wait past int64 nanoseconds (here 10^19 − 1 s) still makes a finding, its end
    capped (it raised OverflowError building the findings table)."""
    p = _http_capture(
        tmp_path,
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: " + b"9" * 19 + b"\r\n"
        b"Content-Length: 0\r\n\r\n",
        "429-long.pcap",
    )
    with pcapkit.open(p) as t:
        rl = t.findings[t.findings.kind == "rate_limited"]
        assert t.internal_errors == []
    assert len(rl) == 1
    assert rl.iloc[0].t_end_ns == (1 << 63) - 1
    assert rl.iloc[0].cost_ms == 1e22


def test_503_without_hint_and_200_are_not_rate_limiting(tmp_path: Path) -> None:
    for i, resp in enumerate(
        [
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        ]
    ):
        with pcapkit.open(_http_capture(tmp_path, resp, f"r{i}.pcap")) as t:
            assert "rate_limited" not in set(t.findings.kind)
            assert len(t.requests) == 1


# -- HTTP/2 ------------------------------------------------------------------------------
@pytest.mark.parametrize("vantage", ["client", "server"])
def test_h2_flow_control_stalls_match_ground_truth(vantage: str) -> None:
    truth = _truth("h2_flow_control")["ground_truth"]["stalls"]
    with pcapkit.open(FIX / "h2_flow_control" / f"{vantage}.pcapng") as t:
        f = t.findings
        q = t.requests
    st = f[f.kind == "h2_flow_control_stall"].sort_values("t_start_ns")
    assert len(st) == len(truth) == 3
    assert set(st.stream) == {1}
    for got, want in zip(st.cost_ms.tolist(), [s["idle_ms"] for s in truth], strict=True):
        assert got == pytest.approx(want, rel=0.2)
    assert (q.protocol.tolist(), q.stream.tolist(), q.status.tolist()) == (["h2"], [1], [200])
    assert q.response_body_bytes.iloc[0] == 160 * 1024
    if vantage == "server":  # the reopening WINDOW_UPDATEs the fixtures README names
        assert sorted(e[1] for e in st.frames) == [75, 116, 144]


def test_h2_large_windows_do_not_stall() -> None:
    for v in ("client", "server"):
        with pcapkit.open(FIX / "h2_flow_control_large" / f"{v}.pcapng") as t:
            assert "h2_flow_control_stall" not in set(t.findings.kind)


def test_h2_hol_requests_and_frames() -> None:
    """Eight streams of one connection: one request row each; the frames in messages
    are the HTTP/2 frames tshark shows (types per stream)."""
    with pcapkit.open(FIX / "h2_hol_drop" / "client.pcapng") as t:
        q = t.requests
        m = t.messages
    assert q.stream.tolist() == [1, 3, 5, 7, 9, 11, 13, 15]
    assert (q.status == 200).all() and (q.response_body_bytes == 8192).all()
    assert q.request_frame.notna().all() and q.response_frame.notna().all()
    h2 = m[m.protocol == "h2"]
    data = h2[h2.type == "DATA"]
    assert set(data.stream) == set(q.stream)
    # streams whose bytes sat behind the dropped segment got their first byte later
    late = q.sort_values("ttft_ms").stream.tolist()[-3:]
    assert q.ttft_ms.max() - q.ttft_ms.min() > 15.0, late


# -- planted gaps: server think time vs a dropped segment -----------------------------------
@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_think_time_gap_is_attributed_to_the_server(vantage: str) -> None:
    sc = _truth("tls_sse_think")
    p = sc["params"]
    with pcapkit.open(FIX / "tls_sse_think" / f"{vantage}.pcapng") as t:
        gaps = t.gaps
        kinds = set(t.findings.kind)
    g = gaps[gaps.event > 0]
    assert g.event.tolist() == [p["think_before"] - 1]  # the one long gap, before event 11
    row = g.iloc[0]
    assert row.cause == "server"
    assert row.network_ms == 0
    assert row.server_ms == pytest.approx(p["think_ms"], abs=10.0)
    assert row.cadence_ms == pytest.approx(p["interval_ms"], abs=2.0)
    assert not kinds & {"sse_batching", "tcp_hol_blocking", "nagle_delayed_ack"}


@pytest.mark.parametrize("vantage", ["client", "middle"])
def test_dropped_event_gap_is_attributed_to_the_loss(vantage: str) -> None:
    sc = _truth("tls_sse_drop")
    delay = sc["params"]["delay_ms"]
    late = [e for e in sc["ground_truth"]["events"] if e["latency_ms"] > delay + 5]
    extra_ms = late[0]["latency_ms"] - delay  # what the lost event lost, as the apps saw it
    with pcapkit.open(FIX / "tls_sse_drop" / f"{vantage}.pcapng") as t:
        gaps = t.gaps
        f = t.findings
    g = gaps[gaps.event == late[0]["n"] - 1].iloc[0]
    assert g.cause == "tcp_hol_blocking"
    assert g.network_ms == pytest.approx(extra_ms, rel=0.2)
    assert g.server_ms < 5.0
    sb = f[f.kind == "sse_batching"]
    assert len(sb) == 1 and sb.iloc[0].details["cause"] == "tcp_hol_blocking"


def test_dropped_event_is_on_time_at_the_server() -> None:
    """The server sent every event on schedule: its capture shows no long gap."""
    with pcapkit.open(FIX / "tls_sse_drop" / "server.pcapng") as t:
        assert (t.gaps.event == 0).all()
        assert "tcp_hol_blocking" in set(t.findings.kind)


@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_tcp_hol_blocking_names_the_http2_streams(vantage: str) -> None:
    """The lab knows which HTTP/2 streams' frames were in the dropped segment and that
    the fill released every stream; the finding says the same per stream."""
    gt = _truth("h2_hol_drop")["ground_truth"]["summary"]
    with pcapkit.open(FIX / "h2_hol_drop" / f"{vantage}.pcapng") as t:
        f = t.findings
    hol = f[f.kind == "tcp_hol_blocking"].iloc[0]
    assert hol.details["h2_streams_lost"] == gt["drop_streams_hit"]
    victims = hol.details["h2_victim_streams"]
    assert sorted(victims) == gt["streams_released_by_fill"]
    for w in victims.values():
        assert w == pytest.approx(gt["retransmit_after_ms"], abs=3.0)
    assert "stream(s) 1, 3, 15" in hol.explanation


# -- HTTP/3 ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["h3_streams_drop", "h3_streams_nodrop"])
@pytest.mark.parametrize("vantage", ["client", "server"])
def test_h3_requests_match_the_lab(name: str, vantage: str) -> None:
    sc = _truth(name)
    sizes = {int(k): v for k, v in sc["ground_truth"]["stream_bytes"].items()}
    with pcapkit.open(FIX / name / f"{vantage}.pcapng") as t:
        q = t.requests
        m = t.messages
    assert q.protocol.unique().tolist() == ["h3"]
    assert dict(zip(q.stream.tolist(), q.response_body_bytes.tolist(), strict=True)) == sizes
    assert (q.status == 200).all() and q.complete.all()
    assert q.path.tolist() == [f"/blob/{i}" for i in range(len(sizes))]
    assert q.request_frame.notna().all() and q.response_frame.notna().all()
    assert (q.ttfb_ms > 0).all() and (q.ttft_ms >= q.ttfb_ms).all()
    h3 = m[m.protocol == "h3"]
    assert len(h3) == 2 * len(sizes)  # request and response header sections


def test_h3_lost_stream_completes_only_after_the_retransmission() -> None:
    """Only stream 0's bytes were in the dropped packet: its response cannot complete
    before the retransmission that quic_stream_hol names; the others are not blocked."""
    hit = _truth("h3_streams_drop")["ground_truth"]["summary"]["drop_streams_hit"]
    with pcapkit.open(FIX / "h3_streams_drop" / "client.pcapng") as t:
        q = t.requests.set_index("stream")
        f = t.findings
    hol = f[f.kind == "quic_stream_hol"]
    assert hol.stream.tolist() == hit
    assert q.last_byte_ts_ns[hit[0]] >= hol.t_end_ns.iloc[0]


def test_tls13_rfc8446_without_the_early_secret() -> None:
    """MANIFEST: with the -noearly keys the 0-RTT request (frame 8) is missing; its
    response still pairs with an unknown request and /second with its own response."""
    path = CORPUS / "tls13-rfc8446.pcap"
    if not path.exists():
        pytest.skip("corpus missing")
    with pcapkit.open(path, keylog=CORPUS / "keys/tls13-rfc8446-noearly.keys") as t:
        q = t.requests
    assert q.path.tolist()[0] == "/first" and q.path.tolist()[2] == "/second"
    assert pd.isna(q.path.iloc[1]) and q.response_frame.tolist() == [6, 10, 13]
    assert q.request_frame.iloc[2] == 12


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_h2_flow_control_stalls_without_keys(vantage: str) -> None:
    """DETECTION.md §4.2's heuristic: the same fixture opened as a third party without
    its keys (the pcapng's Decryption Secrets Block ignored)."""
    truth = _truth("h2_flow_control")["ground_truth"]["stalls"]
    with pcapkit.open(FIX / "h2_flow_control" / f"{vantage}.pcapng", embedded_keys=False) as t:
        assert t.tls.decrypted_records.iloc[0] == 0 and t.requests.empty
        f = t.findings
    st = f[f.kind == "h2_flow_control_stall"].sort_values("t_start_ns")
    assert len(st) == len(truth)
    assert all(d["method"] == "without_keys" for d in st.details)
    assert (st.confidence < 0.8).all()
    for got, want in zip(st.cost_ms.tolist(), [s["idle_ms"] for s in truth], strict=True):
        assert got == pytest.approx(want, rel=0.2)


@pytest.mark.parametrize(
    "name",
    ["h2_flow_control_large", "h2_hol_nodrop", "h2_sse_nodrop", "h2_send_buffer", "grpc_stream"],
)
def test_h2_no_keys_heuristic_is_quiet_elsewhere(name: str) -> None:
    for v in ("client", "server"):
        with pcapkit.open(FIX / name / f"{v}.pcapng", embedded_keys=False) as t:
            assert "h2_flow_control_stall" not in set(t.findings.kind)


def _h2_frame(ftype: int, flags: int, sid: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") + payload
    )


def test_h2c_upgrade_becomes_http2(tmp_path: Path) -> None:
    """SYNTHETIC h2c by Upgrade (RFC 7540 §3.2; frames encoded here with hpack): the GET
    sent as HTTP/1.1 is stream 1, answered in HTTP/2 after 101 Switching Protocols."""
    import hpack

    from pcapkit.io.writer import write_pcap

    from synth import Conn

    enc = hpack.Encoder()
    c = Conn(sport=80)
    c.handshake()
    c.c2s(
        30_000,
        b"GET /stream HTTP/1.1\r\nHost: h2c.example\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nAccept: text/event-stream\r\n\r\n",
    )
    c.s2c(
        50_000, b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
    )
    c.c2s(51_000, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2_frame(4, 0, 0, b""))
    c.s2c(52_000, _h2_frame(4, 0, 0, b"") + _h2_frame(4, 1, 0, b""))
    head = enc.encode([(":status", "200"), ("content-type", "text/event-stream")])
    c.s2c(53_000, _h2_frame(1, 4, 1, head))
    c.s2c(103_000, _h2_frame(0, 0, 1, b"data: a\n\n"))
    c.s2c(153_000, _h2_frame(0, 1, 1, b"data: b\n\n"))
    c.ack_c(160_000)
    p = tmp_path / "h2c.pcap"
    write_pcap(p, c.frames, 1)
    with pcapkit.open(p) as t:
        q = t.requests
        m = t.messages
    h2 = q[q.protocol == "h2"]
    assert len(h2) == 1
    r = h2.iloc[0]
    assert (r.stream, r.method, r.path, r.authority, r.status) == (
        1,
        "GET",
        "/stream",
        "h2c.example",
        200,
    )
    assert r.events == 2 and r.gap_max_ms == pytest.approx(50.0, abs=0.5)
    assert r.request_frame == 4  # the HTTP/1.1 request's frame
    # the HTTP/1.1 side keeps the switch itself
    h1 = q[q.protocol == "http/1.1"]
    assert h1.status.tolist() == [101]
    assert set(m[m.protocol == "h2"].type) >= {"SETTINGS", "HEADERS", "DATA"}


def test_request_whose_head_never_ended_is_listed_incomplete(tmp_path: Path) -> None:
    """Issue 13 class 8 (SYNTHETIC, scapy): an HTTP/1.0 request whose empty line never
    arrived before the capture ended is a request row with request_complete false and an
    http1_head_incomplete anomaly, not silently absent."""
    from pcapkit.io.writer import write_pcap

    from synth import Conn

    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, b"GET /slow HTTP/1.0\r\nHost: example.com\r\nUser-Ag")
    c.ack_s(50_000)
    p = tmp_path / "cut.pcap"
    write_pcap(p, c.frames, 1)
    with pcapkit.open(p) as t:
        r = t.requests
        assert len(r) == 1
        q = r.iloc[0]
        assert (q.method, q.path, q.authority) == ("GET", "/slow", "example.com")
        assert q.request_complete is not pd.NA and not q.request_complete
        assert pd.isna(q.status) and not q.complete
        a = t.anomalies
        (detail,) = a[a.name == "http1_head_incomplete"].detail
        assert "request head (GET /slow; no empty line)" in detail
        m = t.messages
        assert list(m.detail) == ["incomplete: GET /slow"]


def test_complete_requests_say_so() -> None:
    with pcapkit.open(FIX / "tls_sse_nagle" / "client.pcapng") as t:
        assert t.requests.request_complete.tolist() == [True]
    with pcapkit.open(FIX / "h2_sse_drop" / "client.pcapng") as t:
        assert t.requests.request_complete.all()
    with pcapkit.open(FIX / "h3_sse_drop" / "client.pcapng") as t:
        assert t.requests.request_complete.all()


# -- join keys ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,kind",
    [
        ("h2_flow_control", "h2_flow_control_stall"),  # names its stream
        ("tls_sse_nagle", "sse_batching"),  # names its request
        ("tls_no_reuse", "tls_resumption_missing"),  # ends before its request begins
        ("h3_flow_control", "quic_flow_control_stall"),
    ],
)
@pytest.mark.parametrize("vantage", ["client", "server"])
def test_findings_join_the_request_they_delayed(name: str, kind: str, vantage: str) -> None:
    with pcapkit.open(FIX / name / f"{vantage}.pcapng") as t:
        f = t.findings
        q = t.requests
    assert q.request.tolist() == list(range(len(q)))
    mine = f[f.kind == kind]
    assert len(mine) and mine.request.notna().all()
    j = mine.merge(q, on="request", suffixes=("", "_req"))
    assert len(j) == len(mine)
    assert (j.flow == j.flow_req).all()
    named = j.stream.notna()
    assert (j.stream[named] == j.stream_req[named]).all()
    for _, r in j.iterrows():  # the exchange was not over before the finding began
        assert r.last_byte_ts_ns >= r.t_start_ns
    # messages and gaps point at the same ids
    assert set(t.messages.request.dropna()) <= set(q.request)


def test_findings_of_other_connections_join_nothing() -> None:
    with pcapkit.open(FIX / "nagle_wwr" / "client.pcapng") as t:
        assert len(t.requests) == 0
        assert len(t.findings) and t.findings.request.isna().all()


def test_http2_findings_name_the_stream_they_delayed() -> None:
    """A connection-level finding (TCP head-of-line blocking) names the HTTP/2 stream
    when it was the only exchange in flight, and none when eight streams waited."""
    with pcapkit.open(FIX / "h2_sse_drop" / "client.pcapng") as t:
        f = t.findings.set_index("kind")
        assert f.loc["tcp_hol_blocking", "stream"] == 1
        assert f.loc["sse_batching", "stream"] == 1
    with pcapkit.open(FIX / "h2_hol_drop" / "client.pcapng") as t:
        hol = t.findings[t.findings.kind == "tcp_hol_blocking"]
        assert len(hol) == 1 and hol.stream.isna().all() and hol.request.notna().all()
        assert len(hol.iloc[0].details["h2_victim_streams"]) == 8

"""Issue 21 (first half): retry_ignored_retry_after, retry_amplification, client_timeout and
the requests table's delivery rate and idempotency key — on the lab's fixtures (cost
against the scenario's ground truth at every vantage; silence on the controls) and on
SYNTHETIC edge cases built with ``tests/synth.py`` (the false-positive traps of
DETECTION.md §11.1, §11.2, §11.6)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect.retries import identity, wait_s
from pcapkit.io.writer import write_pcap

from synth import Conn

FIX = Path(__file__).resolve().parents[2] / "fixtures"
VANTAGES = ("client", "server", "middle")

# fixture, kind, ground-truth section of scenario.json
POSITIVES = [
    ("retry_early", "retry_ignored_retry_after", "retry"),
    ("hedged_duplicate", "retry_amplification", "amplification"),
    ("layered_retries", "retry_amplification", "amplification"),
    ("stream_timeout", "client_timeout", "timeout"),
    ("h2_stream_timeout", "client_timeout", "timeout"),
    ("h3_stream_timeout", "client_timeout", "timeout"),
]
CONTROLS = [
    ("retry_honoured", "retry_ignored_retry_after"),
    ("single_attempt", "retry_amplification"),
    ("single_layer_retries", "retry_amplification"),
    ("stream_complete", "client_timeout"),
    ("h2_stream_complete", "client_timeout"),
    ("h3_stream_complete", "client_timeout"),
]
NEW = {"retry_ignored_retry_after", "retry_amplification", "client_timeout"}


def _open(path: Path):
    class _T:
        pass

    out = _T()
    with pcapkit.open(path) as t:
        out.findings = t.findings
        out.requests = t.requests
    return out


def _kinds(t, kind: str):
    return t.findings[t.findings.kind == kind]


@pytest.mark.parametrize("name,kind,key", POSITIVES, ids=[p[0] for p in POSITIVES])
def test_positive_costs_within_20_percent_of_the_ground_truth(name, kind, key):
    gt = json.loads((FIX / name / "scenario.json").read_text())["ground_truth"][key]
    for v in VANTAGES:
        t = _open(FIX / name / f"{v}.pcapng")
        f = _kinds(t, kind)
        assert len(f) == 1, (v, f[["kind", "frames"]].to_dict("records"))
        assert f.cost_ms.iloc[0] == pytest.approx(gt["cost_ms"], rel=0.2), v
        assert f.cost_method.iloc[0] == "measured_interval"
        assert f.explanation.iloc[0] and f.remedy.iloc[0] and f.checks.iloc[0]
        # QUIC has no TCP handshake to place the capture point from (flows.vantage)
        assert f.vantage.iloc[0] == ("unknown" if name.startswith("h3") else v)
        # findings.request joins the first attempt / cancelled call
        assert f.request.iloc[0] == f.details.iloc[0]["request"], v
        assert set(NEW) & set(t.findings.kind) == {kind}, v


@pytest.mark.parametrize("name,kind", CONTROLS, ids=[c[0] for c in CONTROLS])
def test_controls_are_silent(name, kind):
    for v in VANTAGES:
        assert not set(_open(FIX / name / f"{v}.pcapng").findings.kind) & NEW, v


def test_retry_early_lists_each_early_attempt_and_its_outcome():
    gt = json.loads((FIX / "retry_early" / "scenario.json").read_text())["ground_truth"]["retry"]
    (f,) = _kinds(
        _open(FIX / "retry_early" / "client.pcapng"), "retry_ignored_retry_after"
    ).itertuples()
    early = f.details["early"]
    assert len(early) == gt["early_attempts"]
    assert [e["refused"] for e in early] == [e["status"] == 429 for e in gt["early"]]
    for mine, truth in zip(early, gt["early"], strict=True):
        assert mine["wait_ms"] == pytest.approx(truth["wait_ms"], abs=5.0)
        assert mine["asked_s"] == 1.0 and mine["field"] == "retry-after"
    assert f.details["identity"] == "idempotency-key" and f.confidence >= 0.9


@pytest.mark.parametrize("name", ["stream_timeout", "h2_stream_timeout", "h3_stream_timeout"])
def test_client_timeout_finds_the_deadline_from_the_request_anchor(name):
    gt = json.loads((FIX / name / "scenario.json").read_text())["ground_truth"]
    for v in VANTAGES:
        (f,) = _kinds(_open(FIX / name / f"{v}.pcapng"), "client_timeout").itertuples()
        assert f.details["anchor"] == "request" and f.details["round_s"] == 1, v
        # HTTP/1.1 cuts by closing the connection, HTTP/2 by RST_STREAM(CANCEL) per stream
        # HTTP/3 by STOP_SENDING (the request side had ended: RESET_STREAM is moot)
        want = {"h2": "RST_STREAM (error CANCEL)", "h3": "STOP_SENDING"}.get(name[:2], "client")
        assert want in f.explanation, v
        assert len(f.details["requests"]) == gt["timeout"]["cancelled"]
        for e, c in zip(f.details["elapsed_s"], gt["timeout"]["cancels"], strict=True):
            assert e * 1000 == pytest.approx(c["elapsed_ms"], abs=10.0), v


def test_requests_table_has_the_idempotency_key_and_the_delivery_rate():
    t = _open(FIX / "retry_early" / "client.pcapng")
    r = t.requests
    gt = json.loads((FIX / "retry_early" / "scenario.json").read_text())["ground_truth"]
    assert len(r) == len(gt["attempts"])
    assert r.idempotency_key.nunique() == 1 and r.idempotency_key.notna().all()
    assert r.traceparent.notna().all() and r.request_id.notna().all()
    # every attempt carries the same JSON body: one digest, that of the body the client sent
    from pcapkit.lab.scenarios.retries import BODY

    assert set(r.request_body_sha256) == {hashlib.sha256(BODY).hexdigest()}
    ok = r[r.status == 200].iloc[0]
    span_s = (ok.last_byte_ts_ns - ok.first_body_ts_ns) / 1e9
    assert ok.body_bytes_per_s == pytest.approx(ok.response_body_bytes / span_s, rel=1e-6)
    # 11 events (10 tokens and [DONE]) every 50 ms: 20 per second
    assert ok.events_per_s == pytest.approx(20.0, rel=0.05)
    # a 429 answer arrives in one record: no span, no rate
    assert r[r.status == 429].body_bytes_per_s.isna().all()


# ------------------------------------------------------------------ parsing (no capture)
def test_wait_from_each_field():
    assert wait_s([("Retry-After", "120")]) == (120.0, "retry-after")
    assert wait_s([("retry-after-ms", "1500"), ("Retry-After", "2")]) == (1.5, "retry-after-ms")
    dated = [
        ("Retry-After", "Wed, 21 Oct 2015 07:28:30 GMT"),
        ("Date", "Wed, 21 Oct 2015 07:28:00 GMT"),
    ]
    assert wait_s(dated) == (30.0, "retry-after-date")
    assert wait_s([("RateLimit", '"default";r=0;t=30')]) == (30.0, "ratelimit")
    assert wait_s([("RateLimit", '"default";r=5;t=30')]) is None  # quota left: no wait
    openai = [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "6m0s")]
    assert wait_s(openai) == (360.0, "x-ratelimit-reset-requests")
    assert wait_s([("Retry-After", "soon")]) is None
    assert wait_s([("Retry-After", "-5")]) is None
    assert wait_s([("retry-after-ms", "nan"), ("Retry-After", "1")]) == (1.0, "retry-after")


class _Q:
    def __init__(self, method, path, headers, body=0, authority="api"):
        self.method, self.path, self.request_headers = method, path, headers
        self.request_body_bytes, self.authority = body, authority
        self.request_body_sha256 = None


def test_identity_strongest_first_and_never_for_bare_gets():
    key = [("Idempotency-Key", "k1"), ("traceparent", "00-" + "a" * 32 + "-" + "b" * 16 + "-01")]
    assert identity(_Q("POST", "/v1", key, 10)) == ("idempotency-key", "k1")
    tp = identity(_Q("POST", "/v1", key[1:], 10))
    assert tp is not None and tp[0] == "traceparent" and tp[1].startswith("a" * 32)
    zero = [("traceparent", "00-" + "0" * 32 + "-" + "b" * 16 + "-01")]
    assert identity(_Q("POST", "/v1", zero, 10)) == ("signature", "POST api/v1 10 B")
    q = _Q("POST", "/v1", [], 10)
    q.request_body_sha256 = "ab" * 32
    assert identity(q) == ("body-sha256", "POST api/v1 " + "ab" * 32)
    assert identity(_Q("GET", "/poll", [], 0)) is None  # polling is not a retry


# ------------------------------------------------------------------ SYNTHETIC traps
REQ = b"POST /v1/chat HTTP/1.1\r\nHost: api\r\nIdempotency-Key: %s\r\nContent-Length: 2\r\n\r\n{}"


def _write(tmp_path: Path, conns: list[Conn], name: str):
    frames = sorted(f for c in conns for f in c.frames)
    path = tmp_path / name
    write_pcap(path, frames, linktype=1)
    return _open(path)


def test_synthetic_retry_after_zero_and_in_flight_requests_are_exempt(tmp_path):
    """SYNTHETIC (client vantage): a 429 with Retry-After: 0, retried at once; and a second
    request that left before the 429 arrived.  Neither ignores a wait."""
    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, REQ % b"k0")
    c.c2s(31_000, REQ % b"k0")  # the same request again, before any answer (pipelined)
    c.s2c(50_000, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n")
    c.s2c(50_100, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n")
    c.c2s(51_000, REQ % b"k0")  # right after "wait 0 s"
    c.s2c(71_000, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c.ack_c(71_100)
    t = _write(tmp_path, [c], "ra0.pcap")
    assert len(t.requests) == 3
    assert _kinds(t, "retry_ignored_retry_after").empty
    assert _kinds(t, "rate_limited").shape[0] == 2


def test_synthetic_early_retry_of_another_request_is_not_judged(tmp_path):
    """SYNTHETIC: 429 Retry-After: 5, then a *different* call (another key) 100 ms later:
    it may belong to another quota (the partition key is opaque) — no finding; the same
    call 100 ms later is one."""
    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, REQ % b"k1")
    c.s2c(50_000, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")
    c.c2s(150_000, REQ % b"k2")
    c.s2c(170_000, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")
    c.ack_c(170_100)
    assert _kinds(_write(tmp_path, [c], "other.pcap"), "retry_ignored_retry_after").empty
    c2 = Conn(sport=80)
    c2.handshake()
    c2.c2s(30_000, REQ % b"k1")
    c2.s2c(50_000, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")
    c2.c2s(150_000, REQ % b"k1")
    c2.s2c(
        170_000, b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n"
    )
    c2.ack_c(170_100)
    (f,) = _kinds(_write(tmp_path, [c2], "same.pcap"), "retry_ignored_retry_after").itertuples()
    assert f.details["early"][0]["wait_ms"] == pytest.approx(100.0, abs=0.5)
    # the refused early attempt's round trip: request → 429, 20 ms
    assert f.cost_ms == pytest.approx(20.0, abs=0.5)


def _stream(c: Conn, t0: float, events: int, gap_us: float = 100_000) -> float:
    c.s2c(
        t0,
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    t = t0
    for n in range(events):
        t += gap_us
        ev = b"data: %d\n\n" % n
        c.s2c(t, b"%x\r\n%s\r\n" % (len(ev), ev))
    return t


def test_synthetic_user_aborts_at_random_times_are_not_a_timeout(tmp_path):
    """SYNTHETIC: two streams cut by the client at 1.3 s and 4.7 s: no common deadline."""
    conns = []
    for i, cut_us in enumerate((1_300_000, 4_700_000)):
        c = Conn(sport=80, cport=40000 + i, t0=1_700_000_000_000_000_000 + i * 10_000_000_000)
        c.handshake()
        c.c2s(30_000, b"GET /s HTTP/1.1\r\nHost: api\r\n\r\n")
        _stream(c, 50_000, int(cut_us / 100_000) + 5)
        c.raw(30_000 + cut_us, True, "FA", c.cisn + 1 + c.c_next, c.sisn + 1 + c.s_next)
        conns.append(c)
    assert _kinds(_write(tmp_path, conns, "abort.pcap"), "client_timeout").empty


def test_synthetic_equal_cuts_are_a_timeout_but_server_closes_are_not(tmp_path):
    """SYNTHETIC: two streams cut by the client 2 s after the request: client_timeout
    (2 × 2 s).  The same cuts made by the server (its FIN first): no client_timeout."""
    for who, want in (("client", 1), ("server", 0)):
        conns = []
        for i in range(2):
            c = Conn(sport=80, cport=41000 + i, t0=1_700_000_000_000_000_000 + i * 10_000_000_000)
            c.handshake()
            c.c2s(30_000, b"GET /s HTTP/1.1\r\nHost: api\r\n\r\n")
            _stream(c, 50_000, 25)
            if who == "client":
                c.raw(2_030_000, True, "RA", c.cisn + 1 + c.c_next, c.sisn + 1 + c.s_next)
            else:
                c.raw(2_030_000, False, "FA", c.sisn + 1 + c.s_next, c.cisn + 1 + c.c_next)
                c.raw(2_030_100, True, "FA", c.cisn + 1 + c.c_next, c.sisn + 1 + c.s_next + 1)
            conns.append(c)
        f = _kinds(_write(tmp_path, conns, f"{who}.pcap"), "client_timeout")
        assert len(f) == want, who
        if want:
            assert f.cost_ms.iloc[0] == pytest.approx(4000.0, abs=1.0)
            assert f.details.iloc[0]["anchor"] == "request"


def test_synthetic_identical_polling_gets_in_parallel_are_not_amplification(tmp_path):
    """SYNTHETIC: the same GET on two connections at once (a dashboard polling): no
    identity, no retry_amplification; the same POST with one Idempotency-Key is one."""
    for req, want in ((b"GET /poll HTTP/1.1\r\nHost: api\r\n\r\n", 0), (REQ % b"k9", 1)):
        conns = []
        for i in range(2):
            c = Conn(sport=80, cport=42000 + i, t0=1_700_000_000_000_000_000 + i * 100_000_000)
            c.handshake()
            c.c2s(30_000, req)
            c.s2c(1_030_000, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            c.ack_c(1_030_100)
            conns.append(c)
        f = _kinds(_write(tmp_path, conns, f"poll{want}.pcap"), "retry_amplification")
        assert len(f) == want
        if want:  # the loser (second copy) was in flight 1 s
            assert f.cost_ms.iloc[0] == pytest.approx(1000.0, abs=1.0)


def test_layered_retries_count_the_restarting_attempt_counter():
    gt = json.loads((FIX / "layered_retries" / "scenario.json").read_text())["ground_truth"]
    a = gt["amplification"]
    for v in VANTAGES:
        (f,) = _kinds(
            _open(FIX / "layered_retries" / f"{v}.pcapng"), "retry_amplification"
        ).itertuples()
        assert f.details["layers"] == a["layers"] == 2, v
        assert f.details["attempts"] == a["attempts"] and f.details["connections"] == 1
        assert "x-stainless-retry-count 0, 1, 2, 0, 1" in f.explanation


def test_synthetic_409_on_a_repeated_key_is_amplification(tmp_path):
    """SYNTHETIC: a call, its repeat 50 ms after the first answer (serial, one layer: no
    overlap), answered 409 Conflict — the server was still processing the key."""
    c = Conn(sport=80)
    c.handshake()
    c.c2s(30_000, REQ % b"k7")
    c.s2c(50_000, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    c.c2s(100_000, REQ % b"k7")
    c.s2c(120_000, b"HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n")
    c.ack_c(120_100)
    (f,) = _kinds(_write(tmp_path, [c], "conflict.pcap"), "retry_amplification").itertuples()
    assert f.details["conflicts"] == 1 and "409" in f.explanation
    # the losing (second) attempt: request → 409, 20 ms
    assert f.cost_ms == pytest.approx(20.0, abs=0.5)


def test_synthetic_one_cut_at_the_announced_read_timeout_is_enough(tmp_path):
    """SYNTHETIC: one stream cut by the client 2 s after a request that announced
    ``x-stainless-read-timeout: 2`` — the deadline is on the wire, one cancel suffices; the
    same cut without the header is one anecdote (no finding)."""
    for announce, want in ((b"x-stainless-read-timeout: 2\r\n", 1), (b"", 0)):
        c = Conn(sport=80)
        c.handshake()
        c.c2s(30_000, b"GET /s HTTP/1.1\r\nHost: api\r\n" + announce + b"\r\n")
        _stream(c, 50_000, 25)
        c.raw(2_030_000, True, "RA", c.cisn + 1 + c.c_next, c.sisn + 1 + c.s_next)
        f = _kinds(_write(tmp_path, [c], f"announced{want}.pcap"), "client_timeout")
        assert len(f) == want
        if want:
            assert f.details.iloc[0]["announced"] and f.confidence.iloc[0] == 0.9
            assert f.cost_ms.iloc[0] == pytest.approx(2000.0, abs=1.0)

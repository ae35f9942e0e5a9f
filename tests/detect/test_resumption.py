"""tls_resumption_missing (R4): not offered (client) vs offered and rejected (server), the TLS
1.2 vs 1.3 price, the resumed and keep-alive controls, and every corpus finding reviewed."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect import resumption

FIX = Path(__file__).resolve().parents[2] / "fixtures"
CORPUS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus").resolve()
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")


def r4(t: pcapkit.Trace) -> list:
    return sorted(
        (f for f in t.finding_objects if f.kind == "tls_resumption_missing"), key=lambda f: f.flow
    )


def roles(f) -> dict[str, int]:
    return {e.role: e.frame for e in f.evidence}


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_tls12_offered_but_rejected_costs_the_second_round_trip(vantage):
    """The client offers its session on every repeat connection; each is served by a new
    server context (unshared ticket keys): full TLS 1.2 handshakes, one RTT each."""
    gt = json.loads((FIX / "tls_resumption_rejected/scenario.json").read_text())["ground_truth"]
    t = pcapkit.open(FIX / f"tls_resumption_rejected/{vantage}.pcapng")
    found = r4(t)
    assert [f.flow for f in found] == [1, 2, 3]
    assert t.tls.resumption_offered.tolist() == [False, True, True, True]
    assert not t.tls.resumption_accepted.any()
    for f, c in zip(found, gt["connections"][1:], strict=True):
        assert f.details["cause"] == "server_rejected" and f.details["offered"]
        assert f.details["version"] == "TLS 1.2" and f.details["extra_round_trips"] == 1
        # ground truth: the client's 2nd flight leaves → the server's Finished arrives
        assert f.cost_ms == pytest.approx(c["second_round_trip_ms"], rel=0.2)
        assert f.cost_method == "measured_interval" and f.severity == "medium"
        assert {"previous_session", "client_hello", "certificate"} <= set(roles(f))
        assert f.dir == "s2c" and f.vantage == vantage  # the server refused
        assert "ticket keys" in f.remedy and "rejected" in " ".join(f.checks)
        assert "tls.handshake.type" in f.display_filter


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_tls13_not_offered_is_reported_without_an_extra_round_trip(vantage):
    """No session cache: the client offers nothing.  TLS 1.3 resumption would save the
    certificate flight and the signatures, not a round trip (the flight fits IW10)."""
    gt = json.loads((FIX / "tls_no_reuse/scenario.json").read_text())["ground_truth"]
    t = pcapkit.open(FIX / f"tls_no_reuse/{vantage}.pcapng")
    found = r4(t)
    assert [f.flow for f in found] == [1, 2]
    # ground truth: each full TLS 1.3 handshake took ~1 RTT, as a resumed one would
    rtt = gt["summary"]["rtt_ms"]
    assert all(ms < 1.3 * rtt for ms in gt["summary"]["tls_ms_full"])
    for f in found:
        assert f.details["cause"] == "client_not_offered" and not f.details["offered"]
        assert f.dir == "c2s"  # the client's side
        assert f.details["extra_round_trips"] == 0 and f.cost_ms == 0.0
        assert f.severity == "info" and f.details["server_flight_bytes"] > 500
        assert "session cache" in f.remedy and "TLS 1.3" in f.explanation


@pytest.mark.parametrize("name", ["tls_resumed", "tls_reuse"])
@pytest.mark.parametrize("vantage", ["client", "server"])
def test_controls_are_clean(name, vantage):
    t = pcapkit.open(FIX / name / f"{vantage}.pcapng")
    assert r4(t) == []
    if name == "tls_resumed":  # the repeat connections really resumed (abbreviated)
        assert t.tls.resumption_accepted.tolist() == [False, True, True, True]


# --------------------------------------------------------------------------- corpus


@needs_corpus
def test_corpus_tls12_chacha20_test_script_could_not_resume():
    """RE-REVIEWED (issue 13): 7 sequential TLS 1.2 connections to one server within 212 ms,
    none offering the previous session — but each ClientHello offers exactly one suite, a
    different one each time (0xcca9, 0xcca8, 0xccaa, … + the renegotiation SCSV: a test
    script trying one suite per connection).  RFC 5246 §7.4.1.2: a client resuming a session
    MUST offer its cipher suite, so none of these connections could have resumed its
    predecessor's session.  It was reported 6 times (with keys) as tls_resumption_missing."""
    w = CORPUS / "wireshark"
    t = pcapkit.open(
        w / "tls12-chacha20poly1305.pcap", keylog=w / "keys/tls12-chacha20poly1305.keys"
    )
    offered = t.tls.cipher_suites_offered.tolist()
    assert len(set(offered)) == 7 and all(x.count(",") == 1 for x in offered)
    assert r4(t) == []


@needs_corpus
@pytest.mark.parametrize(
    "name,keys,why",
    [
        ("rsasnakeoil2.pcap", None, "the 2nd connection resumes by session ID"),
        ("tls13-rfc8446.pcap", "tls13-rfc8446.keys", "the 2nd connection resumes (PSK, 0-RTT)"),
        ("tls12-dsb.pcapng", None, "different SNI: example.com vs example.net"),
        ("tls-fragmented-handshakes.pcap.gz", None, "no ServerHello: nothing to judge"),
    ],
)
def test_corpus_counter_hypotheses_hold(name, keys, why):
    w = CORPUS / "wireshark"
    t = pcapkit.open(w / name, keylog=(w / "keys" / keys) if keys else None)
    assert r4(t) == [], why


@needs_corpus
def test_no_other_corpus_capture_has_r4():
    for p in sorted(set(CORPUS.glob("*/*.pcap*")) | set(CORPUS.glob("*/capture.pcap"))):
        assert r4(pcapkit.open(p)) == [], p.name


def test_thresholds_are_keyword_only_with_cited_defaults():
    sig = inspect.signature(resumption.detect)
    params = list(sig.parameters.values())[1:]
    assert params and all(p.kind is p.KEYWORD_ONLY for p in params)
    assert sig.parameters["session_lifetime_s"].default == resumption.SESSION_LIFETIME_S == 300
    assert sig.parameters["initial_window_segments"].default == 10
    src = inspect.getsource(resumption)
    assert "SSL_CTX_set_timeout" in src and "RFC 6928" in src and "RFC 8446" in src

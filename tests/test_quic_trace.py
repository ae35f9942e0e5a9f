"""QUIC through the whole pipeline: Trace.quic, Trace.quic_messages, Trace.quic_stream on
the lab's HTTP/3 fixtures (keys in the pcapng DSBs) and the illustrated-quic corpus
capture (keys in keylog.txt); the stream-HoL detector (DETECTION.md §4.4, §4.5) against
the fixtures' ground truth (scenario.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit import schema
from pcapkit.detect import DetectContext
from pcapkit.detect import quic as quic_detector

from tshark_util import CORPUS, needs_corpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H3 = [
    FIXTURES / s / f"{v}.pcapng"
    for s in ("h3_streams_drop", "h3_streams_nodrop")
    for v in ("client", "server")
]
DROP = FIXTURES / "h3_streams_drop"
IQ = CORPUS / "illustrated-quic"

_cache: dict[tuple[Path, Path | None], pcapkit.Trace] = {}


def trace(path: Path, keylog: Path | None = None) -> pcapkit.Trace:
    if (path, keylog) not in _cache:
        _cache[(path, keylog)] = pcapkit.open(path, keylog)
    return _cache[(path, keylog)]


def scenario(folder: Path) -> dict:
    return json.loads((folder / "scenario.json").read_text())


# --------------------------------------------------------------------------- Trace.quic


@pytest.mark.parametrize("path", H3, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_quic_table_on_h3_fixtures(path):
    t = trace(path)
    q = t.quic
    assert list(q.columns) == schema.columns("quic")
    assert len(q) == 1
    r = q.iloc[0]
    assert r.flow == 0
    assert r.version == "0x00000001"
    assert r.version_name == "v1"
    assert r.sni == "pcapkit.lab"
    assert r.alpn == scenario(path.parent)["tls"]["alpn"] == "h3"
    assert bool(r.decrypted) is True  # the keys are embedded in the pcapng DSBs
    assert r.undecrypted_packets == 0
    assert r.why_not is None or r.why_not != r.why_not  # missing
    assert len(r.client_dcid) >= 16 and int(r.client_dcid, 16) >= 0
    assert r.handshake_ms > 0
    assert not r.retry and not r.version_negotiation
    assert r.key_updates == 0
    # 4 request streams (0, 4, 8, 12) plus HTTP/3 control / QPACK streams
    assert {0, 4, 8, 12} <= set(t.quic_messages.stream.dropna().astype(int))
    assert r.streams >= 4
    body = sum(scenario(path.parent)["ground_truth"]["stream_bytes"].values())
    assert r.stream_bytes > body  # bodies plus HTTP/3 framing and headers


def test_quic_stream_reassembles_h3_bodies():
    t = trace(DROP / "client.pcapng")
    for sid in (0, 4, 8, 12):
        data = t.quic_stream(0, sid, "s2c")
        assert data.complete, data.gaps
        assert len(data) > 16384  # 16 KiB body + HTTP/3 HEADERS/DATA framing
        assert t.quic_stream(0, sid, "c2s")  # the request's HEADERS


def test_quic_messages_rows():
    t = trace(DROP / "server.pcapng")
    m = t.quic_messages
    assert list(m.columns) == schema.columns("messages")
    assert set(m.protocol) == {"quic"}
    assert "PADDING" not in set(m.type)
    assert m.request.isna().all()
    st = m[m.type == "STREAM"]
    conn = t._quic[0].conn
    assert len(st) == len(conn.stream_frames)
    assert st.stream.notna().all()
    # STREAM rows carry stream offsets and lengths; frames are the packets' frames
    got = sorted(
        zip(st.stream.astype(int), st.offset, st.length, st.frame.astype(int), strict=True)
    )
    want = sorted((r.stream_id, r.offset, r.length, r.frame) for r in conn.stream_frames)
    assert got == want
    assert (m[m.type == "CRYPTO"].stream.isna()).all()
    assert {"ACK", "CRYPTO", "HANDSHAKE_DONE"} <= set(m.type)
    assert not t.quic_anomalies


def test_no_quic_gives_empty_tables():
    t = trace(FIXTURES / "nagle_wwr" / "client.pcapng")
    assert list(t.quic.columns) == schema.columns("quic") and t.quic.empty
    assert list(t.quic_messages.columns) == schema.columns("messages")
    assert t.quic_messages.empty
    assert t.quic_anomalies == []
    with pytest.raises(KeyError):
        t.quic_stream(0, 0, "c2s")


def test_quic_stream_errors():
    t = trace(DROP / "client.pcapng")
    with pytest.raises(KeyError):
        t.quic_stream(0, 1000, "s2c")
    with pytest.raises(KeyError):
        t.quic_stream(99, 0, "s2c")
    with pytest.raises(ValueError):
        t.quic_stream(0, 0, "up")


@needs_corpus
def test_illustrated_quic_with_keylog():
    t = trace(IQ / "capture.pcap", IQ / "keylog.txt")
    q = t.quic
    assert len(q) == 1
    r = q.iloc[0]
    assert r.version == "0x00000001"
    assert r.client_dcid == "0001020304050607"  # RFC 9001 App. A style fixed DCID
    assert r.sni == "example.ulfheim.net"
    assert r.alpn == "ping/1.0"
    assert r.cipher == "TLS_AES_128_GCM_SHA256"
    assert bool(r.decrypted) is True and r.undecrypted_packets == 0
    assert t.quic_stream(0, 0, "c2s") == b"ping"
    assert t.quic_stream(0, 0, "s2c") == b"pong"
    st = t.quic_messages[t.quic_messages.type == "STREAM"]
    assert list(zip(st.dir.astype(str), st.stream.astype(int), strict=True)) == [
        ("c2s", 0),
        ("s2c", 0),
    ]


@needs_corpus
def test_illustrated_quic_without_keys():
    t = pcapkit.open(IQ / "capture.pcap")
    r = t.quic.iloc[0]
    assert r.sni == "example.ulfheim.net"  # Initial packets decrypt without keys
    assert bool(r.decrypted) is False
    assert r.undecrypted_packets > 0 and "no keys" in r.why_not
    with pytest.raises(KeyError):
        t.quic_stream(0, 0, "c2s")


# --------------------------------------------------------------------------- detector


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_stream_hol_found_at_both_vantages(vantage):
    gt = scenario(DROP)["ground_truth"]["drops"][0]
    f = trace(DROP / f"{vantage}.pcapng").findings
    q = f[f.kind.isin(quic_detector.KINDS)]
    assert list(q.kind) == ["quic_stream_hol"]
    r = q.iloc[0]
    assert r.dir == gt["dir"] == "s2c"
    assert [int(r.stream)] == gt["streams_hit"]  # only the stream in the dropped packet
    assert r.details["streams_in_lost_packet"] == gt["streams_hit"]
    assert r.details["lost_packet_number"] == gt["packets"][0]["pn"]
    assert r.details["retransmission_packet_numbers"] == [x["pn"] for x in gt["retransmissions"]]
    assert r.cost_ms == pytest.approx(gt["hole_ms"], rel=0.2)
    assert r.cost_method == "measured_interval"
    assert r.vantage == vantage
    roles = {e["role"] for e in r.evidence}
    assert {"first packet after the lost one", "retransmission"} <= roles
    # the other streams kept going: what TCP would have blocked
    saved = {
        s: v["bytes_during_hole"] for s, v in gt["per_stream"].items() if not v["in_lost_packet"]
    }
    assert set(r.details["other_streams"]) == set(saved)
    for s, n in saved.items():
        assert r.details["other_streams"][s] == pytest.approx(n, rel=0.2)
    assert "stream 0" in r.explanation and "QUIC saved" in r.explanation


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_control_has_no_quic_findings(vantage):
    f = trace(FIXTURES / "h3_streams_nodrop" / f"{vantage}.pcapng").findings
    assert not f.kind.isin(quic_detector.KINDS).any()


def _quic_context(t: pcapkit.Trace, **tables) -> DetectContext:
    """The trace's detection context with some QUIC tables replaced."""
    q = {
        k: getattr(t, k)
        for k in ("quic", "quic_packets", "quic_frames", "quic_tls", "quic_handshake")
    }
    q.update(tables)
    return DetectContext(t.packets, t.flows, t.segments, t.records, t.tls, **q)


def test_single_stream_variant():
    """With only the stalled stream carrying data, QUIC cannot help (§4.5 case 1): the
    capture's tables without the STREAM frames of the other streams."""
    t = trace(DROP / "client.pcapng")
    fr = t.quic_frames
    only0 = fr[(fr.type != "STREAM") | (fr.stream_id == 0)].reset_index(drop=True)
    assert len(only0) < len(fr)
    out = quic_detector.detect(_quic_context(t, quic_frames=only0))
    assert [(f.kind, f.stream) for f in out] == [("h3_single_stream_hol", 0)]
    assert out[0].details["other_streams_bytes"] == 0
    assert "one stream" in out[0].explanation


def test_no_keys_no_findings():
    t = trace(DROP / "client.pcapng")
    assert quic_detector.detect(t.detect_context)  # with the keys: the stall
    # the same connection with no decrypted packet: no frames, nothing to say
    pk = t.quic_packets.assign(decrypted=False)
    ctx = _quic_context(t, quic_packets=pk, quic_frames=schema.frame("quic_frames", n=0))
    assert quic_detector.detect(ctx) == []
    # and as a third party without the keys really sees it
    with pcapkit.open(DROP / "client.pcapng", embedded_keys=False) as t2:
        assert not t2.quic_packets[t2.quic_packets.packet_type == "1rtt"].decrypted.any()
        assert not t2.findings.kind.isin(quic_detector.KINDS).any()


# -- SSE over HTTP/3 on one stream: QUIC cannot help (issue 7, DETECTION.md §4.5) ---------
_FIX3 = Path(__file__).resolve().parent.parent / "fixtures"


def _sse_truth(name: str) -> dict:
    return json.loads((_FIX3 / name / "scenario.json").read_text())


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_single_stream_sse_drop_is_h3_single_stream_hol(vantage: str) -> None:
    sc = _sse_truth("h3_sse_drop")
    gt, one_way = sc["ground_truth"], sc["params"]["delay_ms"]
    with pcapkit.open(_FIX3 / "h3_sse_drop" / f"{vantage}.pcapng") as t:
        f = t.findings
        q = t.requests
        gaps = t.gaps
    hol = f[f.kind == "h3_single_stream_hol"]
    assert hol.stream.tolist() == gt["drops"][0]["streams_hit"] == [0]
    assert "quic_stream_hol" not in set(f.kind)  # nothing else kept flowing
    assert hol.cost_ms.iloc[0] == pytest.approx(gt["summary"]["hole_ms"], rel=0.2)
    assert q.protocol.tolist() == ["h3"] and q.events.tolist() == [sc["params"]["sse_events"]]
    if vantage == "client":
        # the event in the lost packet: its extra wait is attributed to the finding
        late = max(gt["events"], key=lambda e: e["latency_ms"])
        g = gaps[gaps.event == late["n"] - 1].iloc[0]
        assert g.cause == "h3_single_stream_hol"
        assert g.network_ms == pytest.approx(late["latency_ms"] - one_way, rel=0.2)


def test_single_stream_sse_control_is_clean() -> None:
    for v in ("client", "server"):
        with pcapkit.open(_FIX3 / "h3_sse_nodrop" / f"{v}.pcapng") as t:
            kinds = set(t.findings.kind)
            assert not kinds & {"h3_single_stream_hol", "quic_stream_hol", "sse_batching"}
            assert (t.gaps.event == 0).all()


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_first_event_wait_splits_path_and_server_on_quic(vantage: str) -> None:
    """The round trip to the server comes from QUIC's own RTT samples (ACK timing minus
    ACK Delay): one path RTT at the client, ~0 at the server; the server's share is the
    same from both sides."""
    delay = _sse_truth("h3_sse_nodrop")["params"]["delay_ms"]
    with pcapkit.open(_FIX3 / "h3_sse_nodrop" / f"{vantage}.pcapng") as t:
        g = t.gaps.iloc[0]
    want_path = 2 * delay if vantage == "client" else 0.0
    assert g.path_ms == pytest.approx(want_path, abs=3.0)
    assert g.server_ms < 15.0 and g.gap_ms == pytest.approx(g.path_ms + g.server_ms, abs=0.01)


def test_analyze_reports_quic() -> None:
    from click.testing import CliRunner

    from pcapkit.cli import cli

    path = str(_FIX3 / "h3_streams_drop" / "client.pcapng")
    r = CliRunner().invoke(cli, ["analyze", path, "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert [q["alpn"] for q in doc["quic"]] == ["h3"]
    assert {q["protocol"] for q in doc["requests"]} == {"h3"}
    text = CliRunner().invoke(cli, ["analyze", path]).output
    assert "QUIC v1, SNI pcapkit.lab, ALPN h3" in text

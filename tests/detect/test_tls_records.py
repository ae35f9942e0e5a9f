"""TLS record sizing and alignment (T1, T2, T3a, T3b): lab fixtures, corpus, SYNTHETIC edges.

Fixture tests check each finding against the scenario's ground truth (scenario.json) at both
vantages.  The corpus tests run the detector on every external capture and assert what it
finds (nothing: each capture is justified below).  The SYNTHETIC tests build connections
frame by frame with ``tests/synth.py`` (scapy) — TLS 1.2 AES-GCM hellos, then application
records whose bodies are zeros (no keys: the detector bounds plaintext by the suite's
overhead, DETECTION.md §1.7) — to pin one rule or one false-positive trap each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect import tls_records
from pcapkit.detect.tls_records import MIN_RECORD_OVERHEAD, overhead_of
from pcapkit.io.writer import write_pcap

from synth import Conn
from tshark_util import CORPUS

FIX = Path(__file__).resolve().parents[2] / "fixtures"
REALWORLD = Path(__file__).resolve().parents[2].parent / "shared" / "realworld" / "ndpi" / "pcap"
VANTAGES = ("client", "server")
_cache: dict[Path, pcapkit.Trace] = {}


def trace(path: Path) -> pcapkit.Trace:
    if path not in _cache:
        _cache[path] = pcapkit.open(path)
    return _cache[path]


def found(path: Path, kind: str) -> list:
    return [f for f in tls_records.detect(trace(path).detect_context) if f.kind == kind]


def scenario(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


# ----------------------------------------------------------------------------- fixtures: T1


@pytest.mark.parametrize("vantage", VANTAGES)
def test_tiny_records_fixture(vantage):
    gt = scenario("tls_tiny_records")["ground_truth"]
    (f,) = found(FIX / f"tls_tiny_records/{vantage}.pcapng", "tls_tiny_records")
    assert (f.flow, f.dir) == (0, "s2c")
    assert f.details["tiny_records"] == gt["app_records"]["count"] == 100
    assert f.details["longest_run"] == 100
    assert f.details["plaintext_histogram"] == {gt["app_records"]["plaintext_len"]: 100}
    assert f.details["plaintext_exact"]  # keys are embedded: sizes are the decrypted ones
    assert f.details["overhead_ratio"] == pytest.approx(gt["summary"]["overhead_ratio"], abs=0.01)
    # nearly every tiny record travelled alone in its own segment (ground truth: 88)
    assert f.details["single_record_segments"] == gt["single_record_segments"]
    # the time price: message 0's 20 records used up the initial window (2 session tickets + 8
    # records); the other 12 waited one round trip for the first ACK.  Ground truth: message
    # 0's latency minus the others' (≈ one-way delay) — the extra the tiny writes caused.
    lat = [m["latency_ms"] for m in gt["messages"]]
    extra = lat[0] - sorted(lat[1:])[len(lat[1:]) // 2]
    assert f.cost_ms == pytest.approx(extra, rel=0.2)
    assert f.cost_method == "estimate" and f.severity == "medium"
    roles = {e.role for e in f.evidence}
    assert {"tiny record", "releasing ACK", "queued tiny records"} <= roles
    assert "tls.record.length <= 33" in f.display_filter  # 16 B plaintext in TLS 1.3
    assert "server 10.77.0.2:443" in f.explanation and "SSL_write" in f.remedy


@pytest.mark.parametrize("vantage", VANTAGES)
def test_buffered_records_are_not_tiny(vantage):
    # 20-byte messages in 42-byte records: > 16 B plaintext, and one record per write
    for kind in tls_records.KINDS:
        assert not found(FIX / f"tls_buffered_records/{vantage}.pcapng", kind), kind


# ----------------------------------------------------------------------------- fixtures: T2


@pytest.mark.parametrize("vantage", VANTAGES)
def test_large_record_drop_fixture(vantage):
    gt = scenario("tls_large_record_drop")["ground_truth"]
    drop = gt["drops"][0]
    rtt = gt["handshake"][0]["rtt_ms"]
    fs = found(FIX / f"tls_large_record_drop/{vantage}.pcapng", "tls_record_spanning")
    # one transfer (the 64 KiB answer), one finding: its first record, hit by the drop, is
    # what the reader paid for (it could use none of the answer until the retransmission)
    (f,) = fs
    assert f.details["paid"] and f.details["record_offset"] == gt["records"][0]["rel_seq"]
    assert f.details["retransmitted"] and f.details["plaintext_len"] == 16_384
    # cost = its wait at the receiver, first byte readable → last byte (the retransmission);
    # ground truth: how long the bytes behind the hole sat undeliverable at the receiver
    assert f.cost_ms == pytest.approx(drop["receiver_hole_ms"], rel=0.2)
    assert f.cost_method == "upper_bound"  # a reader needing the whole answer lost nothing
    assert "retransmission" in {e.role for e in f.evidence}
    # records 2 and 4 crossed slow-start flights (≈ 1 RTT each), after the reader already
    # had data: unpaid (issue 13 class 10), listed but not priced
    later = f.details["unpaid_records"]
    assert {x["record_offset"] for x in later} <= {r["rel_seq"] for r in gt["records"][1:]}
    assert later and all(x["wait_ms"] == pytest.approx(rtt, rel=0.2) for x in later)
    assert "nobody paid" in f.explanation


def test_large_record_drop_retransmission_frames():
    gt = scenario("tls_large_record_drop")["ground_truth"]
    off = gt["records"][0]["rel_seq"]
    srv = {
        f.details["record_offset"]: f
        for f in found(FIX / "tls_large_record_drop/server.pcapng", "tls_record_spanning")
    }
    cli = {
        f.details["record_offset"]: f
        for f in found(FIX / "tls_large_record_drop/client.pcapng", "tls_record_spanning")
    }
    # fixtures/README: retransmitted in server frame 39; the client's hole is filled by frame 38
    assert 39 in [e.frame for e in srv[off].evidence if e.role == "retransmission"]
    assert 38 in [e.frame for e in cli[off].evidence if e.role == "retransmission"]


@pytest.mark.parametrize("vantage", VANTAGES)
def test_small_records_drop_has_no_spanning(vantage):
    # 1426-byte records are one segment each: nothing to span, whatever the drop did
    assert not found(FIX / f"tls_small_records_drop/{vantage}.pcapng", "tls_record_spanning")


# ----------------------------------------------------------------------------- fixtures: T3a


@pytest.mark.parametrize("vantage", VANTAGES)
def test_split_write_fixture(vantage):
    gt = scenario("tls_record_split_write")["ground_truth"]
    (f,) = found(FIX / f"tls_record_split_write/{vantage}.pcapng", "tls_record_split_write")
    assert (f.flow, f.dir) == (0, "s2c")
    assert f.details["split_records"] == gt["summary"]["records_split"]
    # cost = Σ head → tail per record; ground truth from the forwarder's trace
    assert f.cost_ms == pytest.approx(gt["summary"]["head_to_tail_ms_total"], rel=0.2)
    for w, t in zip(
        sorted(f.details["waits_ms"]), sorted(gt["summary"]["head_to_tail_ms"]), strict=True
    ):
        assert w == pytest.approx(t, rel=0.2)
    # every tail was released by the client's ACK of the header: Nagle, said so
    assert f.details["tail_release"] == {"nagle": gt["summary"]["records_split"]}
    roles = [e.role for e in f.evidence]
    assert {
        "sub-MSS PSH inside the record",
        "ACK releasing the tail",
        "record tail (next write)",
    } <= set(roles)
    assert "Nagle" in f.explanation and "TCP_NODELAY" in f.remedy


@pytest.mark.parametrize("vantage", VANTAGES)
def test_whole_write_control_is_clean(vantage):
    for kind in tls_records.KINDS:
        assert not found(FIX / f"tls_record_whole_write/{vantage}.pcapng", kind), kind


# ----------------------------------------------------------------------------- fixtures: T3b


@pytest.mark.parametrize("vantage", VANTAGES)
def test_coalesced_records_behind_nagle_match_the_nagle_hold(vantage):
    """tls_sse_nagle: event 1 and the records written after it leave together, released by the
    client's delayed ACK (fixtures/README: frames 11 → 12).  The coalescing finding is the
    record-level evidence of the same hold: same frames, same wait, severity info."""
    path = FIX / f"tls_sse_nagle/{vantage}.pcapng"
    (f,) = found(path, "tls_records_coalesced")
    assert f.details["cause"] == "nagle" and f.severity == "info" and f.cost_method == "estimate"
    assert {e.frame for e in f.evidence if e.role == "releasing ACK"} == {11}
    assert f.details["unit_frames"] == [12]
    # ground truth: event 1 was written and left 70.6 ms later
    assert f.cost_ms == pytest.approx(70.6, rel=0.2)
    nagle = trace(path).findings
    nagle = nagle[nagle.kind == "nagle_delayed_ack"]
    if len(nagle):  # the nagle detector prices the same hold: same frames, same cost
        row = nagle.iloc[0]
        assert 12 in row.frames and 11 in row.frames
        assert float(row.cost_ms) == pytest.approx(f.cost_ms, abs=1.0)


@pytest.mark.parametrize("vantage", VANTAGES)
def test_coalesced_tiny_records_behind_the_initial_window(vantage):
    # tls_tiny_records message 0: 12 records left in one segment when the first ACK freed
    # room in a window still holding 8 unacknowledged segments: cwnd, not Nagle (NODELAY)
    (f,) = found(FIX / f"tls_tiny_records/{vantage}.pcapng", "tls_records_coalesced")
    assert f.details["cause"] == "cwnd" and f.details["records"] == 12
    assert f.severity == "info"
    assert "congestion window" in f.explanation


# ------------------------------------------------------------------ every fixture: no strays


def test_fixtures_report_only_what_their_scenario_allows():
    """A kind of this module appears only where the scenario expects it, lists it as
    incidental, or the coalescing is justified (T3b is evidence, not a pathology of its own)."""
    justified = {
        ("tls_tiny_records", "tls_records_coalesced"),  # cwnd wait of message 0 (above)
        ("tls_sse_nagle", "tls_records_coalesced"),  # the Nagle hold of event 1 (above)
    }
    for sc in sorted(FIX.glob("*/scenario.json")):
        doc = json.loads(sc.read_text())
        allowed = set(doc["expected"]) | set(doc.get("incidental") or [])
        for p in sorted(sc.parent.glob("*.pcapng")):  # every vantage the fixture holds
            for f in tls_records.detect(trace(p).detect_context):
                assert f.kind in allowed or (sc.parent.name, f.kind) in justified, (
                    sc.parent.name,
                    p.name,
                    f.kind,
                    f.frames,
                )


# ----------------------------------------------------------------------------- corpus


def corpus_cases() -> list[tuple[Path, Path | None]]:
    if not CORPUS.is_dir():
        return []
    out = []
    for p in sorted(set(CORPUS.glob("*/*.pcap*")) | set(CORPUS.glob("*/capture.pcap"))):
        base = p.name.split(".pcap")[0]
        key = next(
            (
                k
                for k in (CORPUS / "wireshark/keys" / f"{base}.keys", p.parent / "keylog.txt")
                if k.exists()
            ),
            None,
        )
        out.append((p, key))
    return out


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"external corpus not found at {CORPUS}")
@pytest.mark.parametrize(
    "path,key", corpus_cases(), ids=lambda x: x.name if isinstance(x, Path) else ""
)
def test_corpus_has_no_record_findings(path, key):
    """Reviewed: no capture of the corpus shows a record pathology.

    * http2-data-reassembly.pcap (keys): a bulk 76 KB download in 16 KiB-ish records, each
      captured as one GRO/TSO super-segment at µs spacing — nothing spans flights or a loss
      (its one retransmission re-sends a 38-byte record already delivered).  Its client sends
      SETTINGS ACK (9 B) and WINDOW_UPDATE (13 B) records: HTTP/2 control frames, not tiny.
    * rsasnakeoil2.pcap: HTTP responses of two records (headers + body) in one segment.  One
      leaves 537 ms after its request with nothing inbound — the server's think time, not a
      cork: a probe-timer release comes ≈ RTO (≈ 200 ms) after the write (§3.2); the others
      answer a request that arrived µs earlier (request/response, §2.5), not a hold.
    * illustrated-tls12/13, tls13-rfc8446, tls12-*: one or two tiny records ("ping", "pong",
      alerts, short HTTP exchanges) — single small records are legitimate (§5.1).
    """
    t = pcapkit.open(path, keylog=key)
    fs = tls_records.detect(t.detect_context)
    assert fs == [], [(f.kind, f.flow, f.frames) for f in fs]


# ----------------------------------------------------------------------------- SYNTHETIC


def _hello(version: int, cipher: int, alpn: bytes | None, server: bool) -> bytes:
    from scapy.layers.tls.all import TLS, TLSClientHello, TLSServerHello
    from scapy.layers.tls.extensions import ProtocolName, TLS_Ext_ALPN

    ext = [TLS_Ext_ALPN(protocols=[ProtocolName(protocol=alpn)])] if alpn else None
    common = {
        "gmt_unix_time": 0,
        "random_bytes": (b"\x02" if server else b"\x01") * 28,
        "version": version,
    }
    if server:
        msg = TLSServerHello(cipher=cipher, ext=ext, **common)
    else:
        msg = TLSClientHello(ciphers=[cipher], ext=ext, **common)
    return bytes(TLS(version=version, msg=[msg]))


def record(ctype: int, n: int, version: int = 0x0303) -> bytes:
    """A TLS record of ``n`` body bytes (zeros: opaque without keys)."""
    return bytes([ctype, version >> 8, version & 0xFF]) + n.to_bytes(2, "big") + b"\x00" * n


GCM = 29  # TLS 1.2 AES-GCM: 5 header + 8 explicit nonce + 16 tag (DETECTION.md §1.7)


def ccs(version: int = 0x0303) -> bytes:
    """ChangeCipherSpec: one byte 0x01 (RFC 5246 §7.1)."""
    return bytes([20, version >> 8, version & 0xFF, 0, 1, 1])


def app(plaintext: int, overhead: int = GCM) -> bytes:
    return record(23, plaintext + overhead - 5)


class TlsConn(Conn):
    """SYNTHETIC: a TLS 1.2 connection (hellos + ChangeCipherSpec, no keys) at a server-side
    vantage by default: d_S = 50 µs, d_C = RTT (20 ms)."""

    def __init__(
        self,
        *,
        version: int = 0x0303,
        cipher: int = 0xC02F,  # TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        alpn: bytes | None = None,
        rtt_us: float = 20_000,
        server_vantage: bool = True,
        server_alpn: bytes | None | bool = True,
    ) -> None:
        super().__init__()
        self.rtt = rtt_us
        if server_vantage:
            self.handshake(0, rtt_us=50, client_leg_us=rtt_us)
        else:
            self.handshake(0, rtt_us=rtt_us, client_leg_us=50)
        t = rtt_us + 1000
        chosen = alpn if server_alpn is True else (server_alpn or None)
        # each side answers the other one leg after it saw it (the vantage model, §1.1)
        d_s, d_c = (100, rtt_us) if server_vantage else (rtt_us, 100)
        self.c2s(t, _hello(version, cipher, alpn, False))
        self.s2c(t + d_s, _hello(version, cipher, chosen, True) + ccs(version))
        self.c2s(t + d_s + d_c, ccs(version) + record(22, 40, version))
        self.s2c(t + 2 * d_s + d_c, ccs(version) + record(22, 40, version))
        self.ack_c(t + 2 * d_s + 2 * d_c)
        self.t = t + 2 * rtt_us + 10_000  # µs: when the application data starts

    def findings(self, tmp_path: Path, kind: str | None = None) -> list:
        p = tmp_path / "synth.pcap"
        write_pcap(p, self.frames, 1)
        fs = tls_records.detect(pcapkit.open(p).detect_context)
        return [f for f in fs if kind is None or f.kind == kind]


# --- T1 -----------------------------------------------------------------------------------


def test_synth_tiny_run_without_window_pressure(tmp_path):
    """SYNTHETIC: 12 one-byte records, each alone in a segment and acknowledged at once:
    a tiny-record pattern whose price is bytes and packets, not time (cost 0, low)."""
    c = TlsConn()
    for _ in range(12):
        c.s2c(c.t, app(1))
        c.ack_c(c.t + c.rtt)
        c.t += c.rtt + 1000
    (f,) = c.findings(tmp_path, "tls_tiny_records")
    assert f.details["tiny_records"] == 12 and not f.details["plaintext_exact"]
    assert f.details["plaintext_histogram"] == {1: 12}
    assert f.cost_ms == 0 and f.severity == "low"
    assert "bytes and packets" in f.explanation


@pytest.mark.parametrize(
    "tiny,big,flagged",
    [
        (9, 100, False),  # a run of 9 (< 10) and 8 % of the records: not a pattern
        (10, 100, True),  # a run of 10
        (5, 15, True),  # 25 % ≥ 20 % with ≥ 5 tiny records, run 5
        (4, 6, False),  # 40 %, but only 4 tiny records
    ],
)
def test_synth_tiny_pattern_rule(tmp_path, tiny, big, flagged):
    """SYNTHETIC: §5.1's pattern rule — ≥ 10 consecutive, or ≥ 20 % of application records."""
    c = TlsConn()
    for i in range(big):
        c.s2c(c.t, app(400))
        c.t += 2000
        if i == 0:
            for _ in range(tiny):
                c.s2c(c.t, app(3))
                c.t += 2000
    assert bool(c.findings(tmp_path, "tls_tiny_records")) is flagged


def test_synth_small_but_not_tiny(tmp_path):
    """SYNTHETIC: 30 records of 20 B plaintext (the buffered control's size) are not tiny."""
    c = TlsConn()
    for _ in range(30):
        c.s2c(c.t, app(20))
        c.t += 5000
    assert not c.findings(tmp_path, "tls_tiny_records")


@pytest.mark.parametrize("alpn,flagged", [(b"h2", False), (None, True)])
def test_synth_h2_window_updates_are_not_tiny(tmp_path, alpn, flagged):
    """SYNTHETIC: a client acknowledging a download with 13-byte HTTP/2 WINDOW_UPDATE frames,
    one per record: control frames under h2 — the same sizes without h2 are tiny writes."""
    c = TlsConn(alpn=alpn)
    for _ in range(15):
        c.c2s(c.t, app(13))
        c.t += 3000
    assert bool(c.findings(tmp_path, "tls_tiny_records")) is flagged


def test_synth_h2_offered_but_not_chosen_in_tls12_is_tiny(tmp_path):
    """SYNTHETIC: the client offers h2, the TLS 1.2 server chooses no ALPN (visible in its
    ServerHello): the connection is not HTTP/2 (RFC 9113 §3.2), so 13-byte records are
    tiny writes — only a *hidden* ALPN (TLS 1.3 without keys) gives them the benefit."""
    c = TlsConn(alpn=b"h2", server_alpn=None)
    for _ in range(15):
        c.c2s(c.t, app(13))
        c.t += 3000
    assert c.findings(tmp_path, "tls_tiny_records")


@pytest.mark.parametrize(
    "name,frames",
    [("dns_doh.pcap", 19), ("doh.pcapng", 11), ("dnscrypt-v2-doh.pcap", 7)],
)
def test_doh_end_stream_records_are_not_tiny(name, frames):
    """Real DNS-over-HTTPS captures (nDPI's test suite, TLS 1.3 without keys, the client
    offered h2,http/1.1): every answer is a HEADERS+DATA record followed by a 9-byte
    record — an empty HTTP/2 DATA frame with END_STREAM (or a 13-byte WINDOW_UPDATE /
    RST_STREAM).  The negotiated ALPN is hidden in EncryptedExtensions, so the records are
    HTTP/2 control frames for all the wire can tell: not tiny application writes (issue 13
    review: these were 4 false tls_tiny_records)."""
    path = REALWORLD / name
    if not path.exists():
        pytest.skip("../shared/realworld is absent")
    with pcapkit.open(path) as t:
        r = t.records
        ctrl = r[(r.content_type == 23) & (r.length.isin([31, 35]))]
        assert len(ctrl) >= frames  # the 9/13-byte records are there …
        assert not (t.findings.kind == "tls_tiny_records").any()  # … and are not flagged


@pytest.mark.parametrize("version,flagged", [(0x0301, False), (0x0303, True)])
def test_synth_tls10_one_n_minus_one_split(tmp_path, version, flagged):
    """SYNTHETIC: TLS 1.0 CBC senders split every write 1/n−1 (a 1-byte record, then the rest:
    the BEAST countermeasure) — not tiny records.  The same shape under TLS 1.2 GCM is."""
    c = TlsConn(version=version, cipher=0x002F)  # TLS_RSA_WITH_AES_128_CBC_SHA
    # 1 B + 20 B HMAC-SHA1, padded to two AES blocks; TLS 1.1+ adds a 16-byte explicit IV
    one = record(23, 32 if version == 0x0301 else 48, version)
    for _ in range(12):
        c.s2c(c.t, one + record(23, 400, version))
        c.t += 5000
    assert bool(c.findings(tmp_path, "tls_tiny_records")) is flagged


# --- T2 -----------------------------------------------------------------------------------


def _record_in_segments(c: TlsConn, plaintext: int, *, mss: int = 1448) -> list[bytes]:
    data = app(plaintext)
    return [data[i : i + mss] for i in range(0, len(data), mss)]


def test_synth_record_across_a_flight_break(tmp_path):
    """SYNTHETIC: a 16 KiB record, 10 segments (IW), then the last 2 one RTT later after the
    client's ACK: T2 with cost = first → last segment."""
    c = TlsConn()
    segs = _record_in_segments(c, 16_384)
    for i, s in enumerate(segs[:10]):
        c.s2c(c.t + 10 * i, s, flags="A" if i < 9 else "PA")
    c.ack_c(c.t + c.rtt)
    t2 = c.t + c.rtt + 100
    for i, s in enumerate(segs[10:]):
        c.s2c(t2 + 10 * i, s, flags="PA")
    (f,) = c.findings(tmp_path, "tls_record_spanning")
    assert f.details["flight_break"] and not f.details["retransmitted"]
    assert f.cost_ms == pytest.approx((t2 + 10 * (len(segs) - 11) - c.t) / 1000, abs=0.01)
    assert {"record first segment", "last segment of the flight", "next flight (after ACKs)"} <= {
        e.role for e in f.evidence
    }


def test_synth_record_in_one_burst_is_fine(tmp_path):
    """SYNTHETIC: the same record in back-to-back segments (window open): no T2."""
    c = TlsConn()
    for i, s in enumerate(_record_in_segments(c, 16_384)):
        c.s2c(c.t + 10 * i, s, flags="A")
    assert not c.findings(tmp_path, "tls_record_spanning")


def test_synth_record_with_a_hole_at_the_receiver(tmp_path):
    """SYNTHETIC: client vantage; the 3rd segment of a 16 KiB record is lost before the
    capture point and fills 25 ms later: T2 on the loss, cost until the fill."""
    c = TlsConn(server_vantage=False)
    segs = _record_in_segments(c, 16_384)
    off0 = c.s_next
    offs = [off0 + sum(len(s) for s in segs[:i]) for i in range(len(segs))]
    for i, s in enumerate(segs):
        if i != 2:
            c.s2c(c.t + 10 * i, s, offset=offs[i], flags="A")
    c.s2c(c.t + 25_000, segs[2], offset=offs[2], flags="A")
    (f,) = c.findings(tmp_path, "tls_record_spanning")
    assert f.details["retransmitted"] and not f.details["flight_break"]
    assert f.cost_ms == pytest.approx(25.0, abs=0.01)


def test_synth_loopback_bulk_is_not_spanning(tmp_path):
    """SYNTHETIC: loopback-like bulk (RTT 60 µs): 16 KiB records in 8 KiB GSO super-segments
    with ACKs and 100–300 µs scheduling gaps between them — ≥ ½ RTT, but sub-millisecond
    gaps are not flights (§1.4): no T2."""
    c = TlsConn(rtt_us=60)
    data = b"".join(app(16_384) for _ in range(6))
    t = c.t
    for k, i in enumerate(range(0, len(data), 8192)):
        c.s2c(t, data[i : i + 8192], flags="PA")
        c.ack_c(t + 40)
        t += 100 + 200 * (k % 2)
    assert not c.findings(tmp_path, "tls_record_spanning")


def test_synth_small_record_straddling_a_flight_is_packing(tmp_path):
    """SYNTHETIC: a 1000-byte record split over two segments one RTT apart: it fits one
    segment, so smaller records would not help — not T2 (§5.2: record wire size > MSS)."""
    c = TlsConn()
    data = app(1000)
    c.s2c(c.t, app(818) + data[:600], flags="PA")  # 848 + 600 = one 1448-byte segment
    c.ack_c(c.t + c.rtt)
    c.s2c(c.t + c.rtt + 100, data[600:], flags="PA")
    assert not c.findings(tmp_path, "tls_record_spanning")


def test_synth_bulk_after_ramp_up_is_not_flagged(tmp_path):
    """SYNTHETIC: 20 × 16 KiB records sent in ACK-clocked flights of 40 segments: records
    crossing flights within the first 128 KiB are T2, later ones are bulk transfer."""
    c = TlsConn()
    data = b"".join(app(16_384) for _ in range(20))
    segs = [data[i : i + 1448] for i in range(0, len(data), 1448)]
    t = c.t
    for k in range(0, len(segs), 40):
        for i, s in enumerate(segs[k : k + 40]):
            c.s2c(t + 10 * i, s, flags="A")
        c.ack_c(t + c.rtt)
        t += c.rtt + 100
    fs = c.findings(tmp_path, "tls_record_spanning")
    assert fs and all(f.details["bytes_into_burst"] < 128 * 1024 for f in fs)
    assert all(f.details["flight_break"] for f in fs)


# --- T3a ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gap_us,flagged", [(30_000, True), (50, False)])
def test_synth_header_then_body(tmp_path, gap_us, flagged):
    """SYNTHETIC: a record's 5-byte header leaves alone with PSH, its body ``gap_us`` later:
    a write boundary inside the record.  µs apart it costs nothing (< 1 ms): not reported."""
    c = TlsConn()
    for _ in range(3):
        rec = app(600)
        c.s2c(c.t, rec[:5])
        if gap_us > 1000:
            c.ack_c(c.t + gap_us - 100)
        c.s2c(c.t + gap_us, rec[5:])
        c.ack_c(c.t + gap_us + c.rtt)
        c.t += gap_us + c.rtt + 50_000
    fs = c.findings(tmp_path, "tls_record_split_write")
    assert bool(fs) is flagged
    if flagged:
        (f,) = fs
        assert f.details["split_records"] == 3
        assert f.cost_ms == pytest.approx(3 * gap_us / 1000, abs=0.01)
        assert f.details["tail_release"] == {"nagle": 3}


def test_synth_full_mss_psh_inside_a_record_is_not_a_split(tmp_path):
    """SYNTHETIC: PSH on a full-MSS segment inside a record (a GSO burst end, or a partial
    write Linux cut at an skb boundary) followed by a pause: not T3a (§1.5 rule 6)."""
    c = TlsConn()
    segs = _record_in_segments(c, 16_384)
    for i, s in enumerate(segs[:4]):
        c.s2c(c.t + 10 * i, s, flags="PA" if i % 2 else "A")
    c.ack_c(c.t + c.rtt)
    for i, s in enumerate(segs[4:]):
        c.s2c(c.t + c.rtt + 100 + 10 * i, s, flags="PA" if i % 2 else "A")
    assert not c.findings(tmp_path, "tls_record_split_write")
    assert c.findings(tmp_path, "tls_record_spanning")  # the pause is T2's business


def test_synth_window_edge_probe_is_not_a_split(tmp_path):
    """SYNTHETIC: a sub-MSS PSH segment ending exactly at the peer's window edge (Linux sends
    what fits, with PSH, from tcp_write_wakeup): not a write boundary."""
    c = TlsConn()
    rec = app(3000)
    start = c.s_next
    c.ack_c(c.t - 1000, window=8, ack_off=start)  # 8 << 7 (window scale) = 1024 bytes
    c.s2c(c.t, rec[:1024])  # fills the window, PSH
    c.ack_c(c.t + c.rtt, window=65535)
    c.s2c(c.t + c.rtt + 100, rec[1000:])
    assert not c.findings(tmp_path, "tls_record_split_write")


# --- T3b ----------------------------------------------------------------------------------


def test_synth_coalesced_by_nagle(tmp_path):
    """SYNTHETIC (server vantage): one small record, the client's pure ACK one RTT later, and
    three records leave 40 µs after it in one segment: queued by Nagle."""
    c = TlsConn()
    c.s2c(c.t, app(50))
    c.ack_c(c.t + c.rtt)
    c.s2c(c.t + c.rtt + 40, app(50) + app(60) + app(70))
    (f,) = c.findings(tmp_path, "tls_records_coalesced")
    assert f.details["cause"] == "nagle" and f.details["records"] == 3
    assert f.severity == "info" and f.cost_method == "estimate"
    assert f.cost_ms == pytest.approx(c.rtt / 1000 + 0.04, abs=0.01)


def test_synth_coalesced_by_the_window(tmp_path):
    """SYNTHETIC: ten small records in flight, an ACK covering two of them frees room, and the
    next four leave together: the congestion window queued them, not Nagle."""
    c = TlsConn()
    for i in range(10):
        c.s2c(c.t + 10 * i, app(50))
    c.ack_c(c.t + c.rtt, ack_off=c.s_next - 8 * len(app(50)))
    c.s2c(c.t + c.rtt + 40, app(50) * 4)
    (f,) = c.findings(tmp_path, "tls_records_coalesced")
    assert f.details["cause"] == "cwnd"
    assert "10 segments were in flight" in f.explanation


def test_synth_coalesced_by_cork_timer(tmp_path):
    """SYNTHETIC: three records in one segment 210 ms after the last packet from the peer,
    nothing inbound meanwhile: the cork's probe timer (≈ RTO ≥ 200 ms after the write)."""
    c = TlsConn()
    c.s2c(c.t, app(50))
    c.ack_c(c.t + c.rtt)
    c.s2c(c.t + c.rtt + 210_000, app(50) * 3)
    (f,) = c.findings(tmp_path, "tls_records_coalesced")
    assert f.details["cause"] == "cork"


def test_synth_coalesced_without_a_handshake_has_no_cause(tmp_path):
    """SYNTHETIC: the same three records 210 ms after the peer's last packet, but the capture
    started after the TCP handshake: without the legs nothing says when the peer's packets
    reached the sender (its request may have arrived just before: request/response), so no
    cause can be named and nothing is reported — nDPI's dnscrypt-v2-doh.pcap (stream 5, no
    SYN) had two session tickets sent one RTT after the client's Finished reported as a
    cork hold (issue 13 review)."""
    c = TlsConn()
    c.frames = c.frames[3:]  # drop SYN, SYN/ACK, ACK
    c.s2c(c.t, app(50))
    c.ack_c(c.t + c.rtt)
    c.s2c(c.t + c.rtt + 210_000, app(50) * 3)
    assert not c.findings(tmp_path, "tls_records_coalesced")


@pytest.mark.parametrize(
    "case",
    ["response", "think_time", "autocork"],
)
def test_synth_records_written_together_are_not_a_hold(tmp_path, case):
    """SYNTHETIC counter-hypotheses of §5.4: records answering a request that just arrived
    (request/response, §2.5), records sent 500 ms after anything (the application's pace, not
    a 200 ms timer), records 100 µs after the previous segment with no trigger (autocork/TSQ
    or one gathered write: write_coalescing's business)."""
    c = TlsConn()
    c.s2c(c.t, app(50))
    c.ack_c(c.t + c.rtt)
    if case == "response":
        c.c2s(c.t + 100_000, app(200))
        c.s2c(c.t + 100_000 + 60, app(50) + app(900))
    elif case == "think_time":
        c.s2c(c.t + 500_000, app(50) * 3)
    else:
        c.s2c(c.t + 100, app(50) * 3)
    assert not c.findings(tmp_path, "tls_records_coalesced")


def test_synth_records_in_one_send_on_a_microsecond_path_are_not_a_hold(tmp_path):
    """SYNTHETIC (bulk_veth_gso_tls's false alarm): on a 60 µs path every segment follows
    some ACK within the 0.5 ms coupling tolerance; two records written with one send() leave
    90 µs after the previous segment, 40 µs after an ACK — no one waited, nothing to report.
    The same pattern on a 20 ms path is the Nagle hold of test_synth_coalesced_by_nagle."""
    c = TlsConn(rtt_us=60)
    c.s2c(c.t, app(50))
    c.ack_c(c.t + 50)
    c.s2c(c.t + 90, app(16_000) + app(16_000))
    assert not c.findings(tmp_path, "tls_records_coalesced")
    (f,) = [
        f
        for f in tls_records.detect(_ctx(tmp_path, c), coalesced_min_wait_ns=0)
        if f.kind == "tls_records_coalesced"
    ]  # without the 1 ms floor: read as a hold
    assert f.details["cause"] == "nagle"


def _ctx(tmp_path: Path, c: TlsConn):
    p = tmp_path / "synth0.pcap"
    write_pcap(p, c.frames, 1)
    return pcapkit.open(p).detect_context


def test_overhead_comes_from_the_tls_table():
    """DETECTION.md §1.7: the tls row's record_overhead (the suite's protection, see
    tests/sessions/test_tls_overhead.py), else 21 B, the smallest of all suites."""
    with pcapkit.open(FIX / "tls_sse_nagle" / "client.pcapng") as t:
        row = next(t.tls.itertuples(index=False))
        assert overhead_of(row) == row.record_overhead == 22
    assert overhead_of(None) == MIN_RECORD_OVERHEAD == 21


@pytest.mark.parametrize(
    "name",
    [
        "tls_1.2_unidirectional_server.pcapng",
        "tls_1.2_unidirectional_server_no_cert.pcapng",
        "tls_1.3_unidirectional_server.pcapng",
    ],
)
def test_one_sided_server_capture_is_silent_not_a_crash(name: str) -> None:
    """Real one-sided captures (nDPI's test suite): only the server's segments, so no ACK
    of the client's can show whether a record waited on the window; the record detectors
    must say nothing (they raised IndexError in split_records before)."""
    path = REALWORLD / name
    if not path.exists():
        pytest.skip("../shared/realworld is absent")
    with pcapkit.open(path) as t:
        assert (t.flows.c2s_packets == 0).all() and len(t.records) > 0
        assert t.findings.empty

"""nagle / nagle_delayed_ack (DETECTION.md §2.3–§2.5).

Real traffic: the lab fixtures against their scenario.json ground truth, every other
fixture and the external corpus must stay clean.  Edge cases one rule at a time on
SYNTHETIC scripted connections (``Sim``: a connection seen from one capture point, each
packet acknowledging exactly what the sender could have received by then).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import pcapkit
from pcapkit.detect import nagle
from pcapkit.io.writer import write_pcap

from synth import Conn

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"
NAGLE_KINDS = {"nagle", "nagle_delayed_ack"}
OURS = {"nagle", "nagle_delayed_ack", "delayed_ack", "tcp_cork", "write_coalescing"}

_cache: dict[Path, pcapkit.Trace] = {}


def fixture(name: str, vantage: str) -> pcapkit.Trace:
    p = FIX / name / f"{vantage}.pcapng"
    if p not in _cache:
        _cache[p] = pcapkit.open(p)
    return _cache[p]


def scenario(name: str) -> dict:
    return json.loads((FIX / name / "scenario.json").read_text())


def vantages_of(name: str) -> list[str]:
    """The captures a fixture holds: client, server (not on loopback: its one capture is
    both ends'), middle (where the scenario has one)."""
    return [v for v in ("client", "server", "middle") if (FIX / name / f"{v}.pcapng").exists()]


def of_kind(t: pcapkit.Trace, kinds: set[str]):
    f = t.findings
    return f[f.kind.isin(sorted(kinds))]


def role(row, name: str) -> int:
    return next(e["frame"] for e in row.evidence if e["role"] == name)


# ---- SYNTHETIC connections ---------------------------------------------------------


@dataclass
class Sim:
    """SYNTHETIC: a scripted TCP connection as one capture point sees it.

    ``d_c``/``d_s`` are the legs from the capture point to the client/server (µs).  A
    packet seen at P at time t from the client acknowledges the server bytes P saw
    before t − d_c (and symmetrically), unless ``ack=`` overrides it — so timings obey
    the vantage model of DETECTION.md §1.1 by construction.
    """

    d_c: float = 50.0
    d_s: float = 20_000.0
    mss: int = 1460
    timestamps: bool = True
    conn: Conn = field(default_factory=Conn)
    seen: dict[int, list[tuple[float, int]]] = field(default_factory=lambda: {0: [], 1: []})
    nxt: list[int] = field(default_factory=lambda: [0, 0])

    @classmethod
    def at(cls, vantage: str, rtt_us: float = 20_000.0, **kw) -> Sim:
        legs = {
            "client": (50.0, rtt_us - 50.0),
            "server": (rtt_us - 50.0, 50.0),
            "middle": (rtt_us / 2, rtt_us / 2),
        }[vantage]
        return cls(d_c=legs[0], d_s=legs[1], **kw)

    def handshake(self, t: float = 0.0) -> None:
        opts = [("MSS", self.mss), ("SAckOK", b""), ("NOP", None), ("WScale", 7)]
        if self.timestamps:
            opts.insert(2, ("Timestamp", (1, 0)))
        c = self.conn
        c.raw(t, True, "S", c.cisn, 0, options=opts)
        c.raw(t + self.d_s, False, "SA", c.sisn, c.cisn + 1, options=opts)
        c.raw(t + self.d_s + self.d_c, True, "A", c.cisn + 1, c.sisn + 1)

    def _ack(self, d: int, t: float) -> int:
        """What the sender of direction ``d`` has received of the reverse stream."""
        leg = self.d_c if d == 0 else self.d_s
        got = [end for ts, end in self.seen[1 - d] if ts <= t - leg + 1e-6]
        return max(got, default=0)

    def send(
        self,
        d: int,
        t: float,
        n: int,
        *,
        flags: str = "PA",
        offset: int | None = None,
        ack: int | None = None,
        window: int = 65535,
        data: bytes | None = None,
    ) -> int:
        """Data (n > 0) or a pure ACK (n == 0) from the client (d = 0) or server (d = 1)
        seen at P at ``t`` µs; returns its frame number.  The payload is ``data`` when
        given (``n`` is then its length), else ``n`` filler bytes."""
        if data is not None:
            n = len(data)
        c = self.conn
        off = self.nxt[d] if offset is None else offset
        a = self._ack(d, t) if ack is None else ack
        if d == 0:
            seq, ackno = c.cisn + 1 + off, c.sisn + 1 + a
        else:
            seq, ackno = c.sisn + 1 + off, c.cisn + 1 + a
        fl = flags if n else "A"
        c.raw(t, d == 0, fl, seq, ackno, b"x" * n if data is None else data, window=window)
        if n:
            self.seen[d].append((t, off + n))
            self.nxt[d] = max(self.nxt[d], off + n)
        return len(c.frames)

    def client(self, t: float, n: int, **kw) -> int:
        return self.send(0, t, n, **kw)

    def server(self, t: float, n: int, **kw) -> int:
        return self.send(1, t, n, **kw)

    def trace(self, tmp_path: Path, name: str = "synthetic.pcap") -> pcapkit.Trace:
        p = tmp_path / name
        write_pcap(p, sorted(self.conn.frames, key=lambda x: x[0]), 1)
        return pcapkit.open(p)


def wwr(
    s: Sim,
    t: float,
    *,
    delack_us: float = 40_000.0,
    header: int = 100,
    body: int = 100,
    response: int = 100,
    quick: bool = False,
) -> tuple[float, tuple[int, int, int]]:
    """One write-write-read exchange with Nagle on at the client; the server ACKs the
    header after ``delack_us`` (or at once) and answers the body at once.  Returns the
    time after the exchange and the (header, releasing ACK, body) frames."""
    # seen at P: the header reaches the server d_s/2·2 … everything below is in P's clock
    h = s.client(t, header)
    t_ack = t + s.d_s + (0 if quick else delack_us)
    a = s.server(t_ack, 0)
    t_body = t_ack + s.d_c + 20
    b = s.client(t_body, body)
    t_resp = t_body + s.d_s + 60
    s.server(t_resp, response)
    return t_resp + s.d_c + 100, (h, a, b)


# ---- fixtures: ground truth --------------------------------------------------------


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_nagle_wwr_every_exchange_from_the_second(vantage):
    sc = scenario("nagle_wwr")
    ex = sc["ground_truth"]["exchanges"]
    t = fixture("nagle_wwr", vantage)
    seg = t.segments
    off = dict(zip(seg.frame.tolist(), seg.offset.tolist(), strict=True))
    f = of_kind(t, NAGLE_KINDS)
    assert set(f.dir) == {"c2s"} and set(f.flow) == {0}
    by_exchange = {}
    for row in f.itertuples():
        body = off[role(row, "held_segment")]
        e = next(x for x in ex if x["body_rel_seq"] == body)
        assert off[role(row, "first_segment")] == e["header_rel_seq"]
        by_exchange[e["exchange"]] = row
    assert {n for n, r in by_exchange.items() if r.kind == "nagle_delayed_ack"} == set(range(2, 9))
    for n, row in by_exchange.items():
        e = ex[n - 1]
        assert row.cost_ms == pytest.approx(e["body_hold_ms"], rel=0.2)
        if n == 1:  # quick-ACKed: Nagle alone, one round trip
            assert row.kind == "nagle" and row.details["note"] == "quick_ack"
            assert row.cost_ms == pytest.approx(sc["path"]["rtt_ms"], rel=0.2)
            continue
        assert row.details["os_guess"] == "linux"
        assert row.details["ack_delay_ms"] == pytest.approx(e["server_ack_delay_ms"], abs=3.0)
        assert row.cost_method == ("upper_bound" if vantage == "client" else "measured_interval")
        assert row.vantage == vantage
        assert "TCP_NODELAY on the client's socket" in row.remedy
        assert "client 10.77.0.1" in row.explanation and "delayed ACK" in row.explanation
        assert row.display_filter.startswith("(tcp.stream == 0 && frame.number >= ")
        assert len(row.checks) >= 6 and row.confidence >= 0.85
        assert row.details["direction_holds"]["nagle_delayed_ack"]["count"] == 7
    if vantage == "client":  # README: frames of interest
        assert by_exchange[2].frames == [10, 11, 12]
        assert by_exchange[3].frames == [15, 16, 17]
        assert [e["role"] for e in by_exchange[2].evidence] == [
            "first_segment",
            "releasing_ack",
            "held_segment",
        ]


def test_nagle_wwr_nodelay_is_clean():
    for v in ("client", "server"):
        assert of_kind(fixture("nagle_wwr_nodelay", v), NAGLE_KINDS | {"delayed_ack"}).empty


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_tls_sse_first_event_waits_for_the_delayed_ack(vantage):
    gt = scenario("tls_sse_nagle")["ground_truth"]
    t = fixture("tls_sse_nagle", vantage)
    f = of_kind(t, NAGLE_KINDS)
    # one hold: the 2nd ticket + headers + events 1–2 behind the 1st ticket (frames 10,
    # 11, 12).  Later events couple to quick ACKs by chance only now and then (3 of 20
    # pairs, the 50 ms cadence against a 30 ms RTT): not reported.
    assert f.kind.tolist() == ["nagle_delayed_ack"]
    row = f.iloc[0]
    assert row.dir == "s2c" and row.frames == [10, 11, 12]
    srv = fixture("tls_sse_nagle", "server").packets
    left = int(srv.ts_ns[srv.frame == 12].iloc[0])
    hold_ms = (left - gt["events"][0]["write_ns"]) / 1e6  # event 1: written → on the wire
    assert hold_ms == pytest.approx(70.6, abs=0.5)
    assert row.cost_ms == pytest.approx(hold_ms, rel=0.2)
    wait = next(w for w in gt["client_ack_waits"] if w["delayed"])["wait_ms"]
    assert row.details["ack_delay_ms"] == pytest.approx(wait, abs=3.0)
    assert row.details["tls_records_in_held_segment"] == 4  # ticket 2, headers, events 1–2
    assert "server 10.77.0.2:443" in row.explanation


def test_tls_sse_nodelay_is_clean():
    for v in ("client", "server"):
        assert of_kind(fixture("tls_sse_nodelay", v), NAGLE_KINDS).empty


@pytest.mark.parametrize("vantage", ["client", "server"])
def test_tls_record_split_write_bodies_wait_for_the_ack(vantage):
    """The lab's split-write server (Nagle on) writes each record's 5-byte header, then
    its body: the body waits ≥ 1 RTT for the ACK of the header (incidental nagle), and
    the first record waits behind the response headers' delayed ACK."""
    gt = scenario("tls_record_split_write")["ground_truth"]
    t = fixture("tls_record_split_write", vantage)
    seg = t.segments
    off = dict(zip(seg.frame.tolist(), seg.offset.tolist(), strict=True))
    held = {off[role(r, "held_segment")]: r for r in of_kind(t, NAGLE_KINDS).itertuples()}
    for rec in gt["records"]:
        if rec["psh_inside"]:
            row = held[rec["rel_seq"] + 5]
            assert row.kind == "nagle" and row.details["note"] == "quick_ack"
            assert off[role(row, "first_segment")] == rec["rel_seq"]
            assert row.cost_ms == pytest.approx(rec["head_to_tail_ms"], rel=0.2)
    first = held[gt["records"][0]["rel_seq"]]
    assert first.kind == "nagle_delayed_ack" and first.details["os_guess"] == "linux"


def _names_ours(name: str) -> bool:
    sc = scenario(name)
    return bool(NAGLE_KINDS & set((sc.get("expected") or []) + (sc.get("incidental") or [])))


OTHER = sorted(
    p.name for p in FIX.glob("*") if (p / "scenario.json").exists() and not _names_ours(p.name)
)


@pytest.mark.parametrize("name", OTHER)
def test_no_nagle_on_other_fixtures(name):
    # includes the bulk transfers (h2_flow_control_large, slow_start_restart_off: full
    # segments, cwnd-bound) and tls_tiny_records, whose client capture shows a 30 ms
    # coupling to a delayed ACK by chance — its server socket has TCP_NODELAY, proved by
    # 23-byte segments leaving back to back while unacknowledged.  Also the healthy bulk
    # controls over loopback (64 KB segments) and veth (GSO super-segments).
    for v in vantages_of(name):
        assert of_kind(fixture(name, v), NAGLE_KINDS).empty, v


def corpus_files() -> list[Path]:
    if not CORPUS.exists():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".pcap", ".pcapng", ".gz"))


@pytest.mark.skipif(not CORPUS.exists(), reason="external corpus (../shared/corpus) absent")
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_has_no_nagle_holds(path):
    # Reviewed: http2-data-reassembly (bulk over loopback MSS: full records back to back),
    # the illustrated TLS exchanges (ping/pong over loopback: request/response, every
    # release answers data), rsasnakeoil2 and the h2-14 capture yield no coupled hold;
    # captures without a handshake have no legs and are not judged (DETECTION.md §1.1).
    keys = [path.parent / "keylog.txt", path.parent / "keys" / (path.name.split(".")[0] + ".keys")]
    keylog = next((k for k in keys if k.exists()), None)
    t = pcapkit.open(path, keylog=keylog)  # decrypted records: C2 can count units
    assert of_kind(t, OURS).empty, of_kind(t, OURS)[["kind", "frames", "cost_ms"]]


# ---- SYNTHETIC edge cases -------------------------------------------------------------


@pytest.mark.parametrize("vantage", ["client", "server", "middle"])
def test_synthetic_nagle_delayed_ack_at_every_vantage(tmp_path, vantage):
    """SYNTHETIC: write-write-read, 40 ms delayed ACK, 20 ms RTT, seen from the client,
    the server and the middle of the path: same holds, same cost (§1.1)."""
    s = Sim.at(vantage)
    s.handshake()
    t = 100_000.0
    frames = []
    for _ in range(3):
        t, fr = wwr(s, t)
        frames.append(list(fr))
    tr = s.trace(tmp_path)
    f = of_kind(tr, NAGLE_KINDS)
    assert f.kind.tolist() == ["nagle_delayed_ack"] * 3
    assert sorted(f.frames.tolist()) == frames
    row = f.iloc[0]
    # RTT 20 ms + delack 40 ms: the body waited ≈ 60 ms at every vantage
    assert row.cost_ms == pytest.approx(60.0, abs=0.5)
    assert row.details["ack_delay_ms"] == pytest.approx(40.0, abs=0.5)
    assert row.details["os_guess"] == "linux"
    expected = {
        "client": "upper_bound",
        "server": "measured_interval",
        "middle": "measured_interval",
    }
    assert row.cost_method == expected[vantage]
    assert of_kind(tr, {"delayed_ack"}).empty  # the same ACK is not reported twice


def test_synthetic_piggybacked_release_is_nagle_not_delayed_ack(tmp_path):
    """SYNTHETIC: the server streams on its own; its next data segment carries the ACK
    of the client's small header, and the held body leaves right after it."""
    s = Sim.at("client")
    s.handshake()
    t = 100_000.0
    held = []
    for _ in range(3):
        s.server(t - 2_000, 50)  # server data in flight before the header arrives
        h = s.client(t, 100)  # header (acks the server's data so far)
        s.server(t + 5_000, 50)  # sent before the header arrived: does not ack it
        a = s.server(t + 22_000, 50)  # acks the header, piggy-backed
        b = s.client(t + 22_030, 100)  # body released by it
        held.append([h, a, b])
        s.client(t + 45_000, 0)
        t += 80_000
    f = of_kind(s.trace(tmp_path), NAGLE_KINDS | {"delayed_ack"})
    assert f.kind.tolist() == ["nagle"] * 3
    assert sorted(f.frames.tolist()) == held
    row = f.iloc[0]
    assert row.details["release"] == "piggybacked" and row.details["note"] == "piggybacked"
    assert row.cost_ms == pytest.approx(22.03, abs=0.1)
    assert row.confidence < 0.85


def test_synthetic_request_response_turn_taking_is_not_nagle(tmp_path):
    """SYNTHETIC: each request answered by a response that carries the ACK; the next
    request follows the response at once — the application waited, not Nagle."""
    s = Sim.at("client")
    s.handshake()
    t = 100_000.0
    for _ in range(5):
        s.client(t, 100)
        s.server(t + 20_000 + 500, 200)  # response, piggy-backs the ACK
        t += 20_000 + 500 + 100
    assert of_kind(s.trace(tmp_path), OURS).empty


def test_synthetic_quick_ack_hold_needs_repetition(tmp_path):
    """SYNTHETIC: one hold released by a quick ACK (≈ 1 RTT) could be chance; the same
    coupling on every exchange is Nagle."""
    one = Sim.at("client")
    one.handshake()
    wwr(one, 100_000.0, quick=True)
    assert of_kind(one.trace(tmp_path, "one.pcap"), NAGLE_KINDS).empty
    many = Sim.at("client")
    many.handshake()
    t = 100_000.0
    for _ in range(3):
        t, _ = wwr(many, t, quick=True)
    f = of_kind(many.trace(tmp_path, "many.pcap"), NAGLE_KINDS)
    assert f.kind.tolist() == ["nagle"] * 3
    assert f.cost_ms.iloc[0] == pytest.approx(20.0, abs=0.5)
    assert f.details.iloc[0]["note"] == "quick_ack"


def test_synthetic_cwnd_limited_full_segments_are_not_nagle(tmp_path):
    """SYNTHETIC: an ACK-clocked bulk sender (full 1448-byte segments, the tail partial):
    segments follow ACKs, but a full-sized S1 is never held by Minshall's Nagle."""
    s = Sim.at("client")
    s.handshake()
    t = 100_000.0
    for _ in range(6):
        s.client(t, 1448)
        s.client(t + 10, 1448)
        s.server(t + 20_000 + 20, 0)  # every second full segment: an immediate ACK
        t += 20_000 + 20 + 30
    s.client(t, 700)
    s.server(t + 20_000, 0)
    assert of_kind(s.trace(tmp_path), OURS).empty


def test_synthetic_loopback_mss_makes_1400_bytes_small(tmp_path):
    """SYNTHETIC: loopback MSS 65495 (65483 with timestamps): a 1400-byte write is
    sub-MSS, so Nagle holds the next one behind it (DETECTION.md §1.3)."""
    s = Sim(d_c=20.0, d_s=30.0, mss=65495)
    s.handshake()
    t = 1_000.0
    frames = []
    for _ in range(3):
        h = s.client(t, 1400)
        a = s.server(t + 30 + 40_000, 0)
        b = s.client(t + 30 + 40_000 + 30, 1400)
        s.server(t + 30 + 40_000 + 100, 300)
        frames.append([h, a, b])
        t += 50_000
    tr = s.trace(tmp_path)
    assert int(tr.flows.eff_mss.iloc[0]) == 65483
    f = of_kind(tr, NAGLE_KINDS)
    assert f.kind.tolist() == ["nagle_delayed_ack"] * 3
    assert sorted(f.frames.tolist()) == frames
    assert f.details.iloc[0]["s1_len"] == 1400 and f.details.iloc[0]["eff_mss"] == 65483


def test_synthetic_super_segment_s1_small_iff_not_a_multiple_of_mss(tmp_path):
    """SYNTHETIC: GSO super-segments at the sender (§1.4): 2×1448+100 bytes is small
    (Minshall: len mod MSS ≠ 0, its tail was a partial segment); 2×1448 is not."""
    pos = Sim.at("client")
    pos.handshake()
    h = pos.client(100_000, 2 * 1448 + 100)
    pos.server(120_000, 0, ack=2 * 1448)  # the two full segments: ACKed at once
    a = pos.server(160_000, 0)  # the 100-byte tail: delayed ACK
    b = pos.client(160_030, 100)
    tr = pos.trace(tmp_path, "pos.pcap")
    assert tr.segments.super_segment.iloc[0]
    f = of_kind(tr, NAGLE_KINDS)
    assert f.kind.tolist() == ["nagle_delayed_ack"] and f.frames.iloc[0] == [h, a, b]

    neg = Sim.at("client")
    neg.handshake()
    neg.client(100_000, 2 * 1448)
    neg.server(160_000, 0)
    neg.client(160_030, 100)
    assert of_kind(neg.trace(tmp_path, "neg.pcap"), NAGLE_KINDS | {"delayed_ack"}).empty


def test_synthetic_windows_200ms_delayed_ack(tmp_path):
    """SYNTHETIC: a 200 ms delayed-ACK timer (Windows TcpDelAckTicks = 2) → os guess."""
    s = Sim.at("client")
    s.handshake()
    wwr(s, 100_000.0, delack_us=200_000)
    f = of_kind(s.trace(tmp_path), NAGLE_KINDS)
    assert f.kind.tolist() == ["nagle_delayed_ack"]
    row = f.iloc[0]
    assert row.details["os_guess"] == "windows"
    assert row.details["ack_delay_ms"] == pytest.approx(200.0, abs=0.5)
    assert row.cost_ms == pytest.approx(220.0, abs=0.5) and row.severity == "high"
    assert "Windows 200 ms" in row.explanation


@pytest.mark.parametrize(
    "delack_ms,guess",
    [(42.0, "linux"), (100.0, "bsd_macos"), (200.0, "windows"), (75.0, "unknown")],
)
def test_os_guess_bands(delack_ms, guess):
    assert nagle.os_guess(delack_ms)[0] == guess


def test_synthetic_ack_later_than_500ms_is_not_a_delayed_ack(tmp_path):
    """SYNTHETIC: an ACK 600 ms after the segment breaks RFC 1122's 500 ms MUST: not a
    delayed-ACK timer."""
    s = Sim.at("client")
    s.handshake()
    wwr(s, 100_000.0, delack_us=600_000)
    assert of_kind(s.trace(tmp_path), {"nagle_delayed_ack", "delayed_ack"}).empty


def test_synthetic_nodelay_socket_is_not_nagle(tmp_path):
    """SYNTHETIC: two small segments back to back while the first is unacknowledged prove
    TCP_NODELAY; a later small segment that follows a delayed ACK is then chance."""
    s = Sim.at("client")
    s.handshake()
    s.client(100_000, 100)
    s.client(100_050, 100)  # Nagle would have held this one
    s.server(120_100, 0)
    wwr(s, 200_000.0)
    assert of_kind(s.trace(tmp_path), NAGLE_KINDS | {"delayed_ack"}).empty


def test_synthetic_rwnd_limited_is_not_nagle(tmp_path):
    """SYNTHETIC: S1 fills the server's advertised window: the wait is rwnd, not Nagle."""
    s = Sim.at("client")
    s.handshake()
    s.server(90_000, 0, window=1)  # 1 << 7 = 128 bytes of window
    s.client(100_000, 128)  # small, and fills the window
    s.server(160_000, 0)
    s.client(160_030, 100)
    assert of_kind(s.trace(tmp_path), NAGLE_KINDS).empty


def test_synthetic_after_rto_is_not_nagle(tmp_path):
    """SYNTHETIC: cwnd = 1 after a retransmission timeout clocks segments on ACKs."""
    s = Sim.at("client")
    s.handshake()
    s.client(100_000, 100)
    s.client(320_000, 100, offset=0)  # RTO retransmission
    s.server(340_000, 0)
    s.client(340_030, 100)
    s.server(380_000, 0)
    s.client(380_030, 100)
    assert of_kind(s.trace(tmp_path), NAGLE_KINDS).empty


def test_synthetic_capture_gap_is_not_nagle(tmp_path):
    """SYNTHETIC: the server acknowledges bytes the capture never saw (a capture drop):
    the pair is not judged."""
    s = Sim.at("client")
    s.handshake()
    s.client(100_000, 100)
    s.nxt[0] += 100  # a 100-byte segment the capture missed
    s.seen[0].append((100_010, 200))
    s.server(160_000, 0)
    s.client(160_030, 100)
    assert of_kind(s.trace(tmp_path), NAGLE_KINDS).empty


def test_synthetic_pacing_is_not_coupled(tmp_path):
    """SYNTHETIC: the second write leaves 5 ms after the delayed ACK at the client: not
    released by it (pacing, an application timer)."""
    s = Sim.at("client")
    s.handshake()
    t = 100_000.0
    for _ in range(3):
        s.client(t, 100)
        s.server(t + 60_000, 0)
        s.client(t + 65_000, 100)
        s.server(t + 83_100, 100)
        t += 90_000
    assert of_kind(s.trace(tmp_path), NAGLE_KINDS | {"delayed_ack"}).empty


def test_synthetic_super_segment_of_a_sender_with_unknown_segment_size(tmp_path):
    """SYNTHETIC: a 2800-byte GSO burst from a server whose SYN/ACK carried no MSS option
    (its segment size is unknown: a 1400-byte MSS makes it two full segments) is not known
    to be small, so the 38 bytes behind it are not a Nagle hold — what nDPI's
    cloudflare-warp.pcap showed (frames 51–53: a local userspace stack's 2800-byte burst,
    its tail 0.3 ms after the client's ACK) was reported as nagle_delayed_ack."""
    for announced, holds in ((True, 1), (False, 0)):
        s = Sim.at("client", rtt_us=900.0)
        c = s.conn
        opts = [("MSS", 1460), ("SAckOK", b""), ("NOP", None), ("WScale", 7)]
        c.raw(0, True, "S", c.cisn, 0, options=opts)
        c.raw(s.d_s, False, "SA", c.sisn, c.cisn + 1, options=opts if announced else [])
        c.raw(s.d_s + s.d_c, True, "A", c.cisn + 1, c.sisn + 1)
        s.client(10_000, 186)
        s.server(11_000, 0)
        s.server(100_000, 2800)
        s.client(150_000, 0)  # delayed ACK of the burst
        s.server(150_000 + s.d_s + 300, 38)
        s.client(200_000, 93)
        tr = s.trace(tmp_path, f"gso_{announced}.pcap")
        assert len(of_kind(tr, NAGLE_KINDS)) == holds, announced


def test_synthetic_relay_near_the_capture_point_is_not_judged(tmp_path):
    """SYNTHETIC: the server-side TCP is a relay near the capture point (a VPN capture
    app's userspace stack that connects upstream before answering the SYN: SYN/ACK after
    61 ms, the client's data acknowledged in 60 µs — split TCP).  Its segments follow the
    client's delayed ACKs, but whether by Nagle, a one-segment window or a timer of the
    relay cannot be told, and TCP_NODELAY on "the server" would address nobody: silent.
    The same exchanges from a genuine server 20 ms away are Nagle × delayed ACK (control).
    What nDPI's whatsapp_voice_and_message.pcap showed (7 nagle_delayed_ack, issue 13)."""
    for relay in (True, False):
        s = Sim.at("client", rtt_us=20_000.0)
        c = s.conn
        opts = [("MSS", 1460), ("SAckOK", b""), ("NOP", None), ("WScale", 7)]
        syn_ack = 61_000.0 if relay else s.d_s
        c.raw(0, True, "S", c.cisn, 0, options=opts)
        c.raw(syn_ack, False, "SA", c.sisn, c.cisn + 1, options=opts)
        c.raw(syn_ack + s.d_c, True, "A", c.cisn + 1, c.sisn + 1)
        if relay:
            s.d_s = 60.0  # the relay's reactions: µs
        t = 100_000.0
        for _ in range(3):
            s.client(t, 170)  # request
            s.server(t + s.d_s + 20, 0)  # ACKed
            t1 = t + 120_000.0  # the answer after 120 ms of service (not ≈ RTO)
            s.server(t1, 78)  # S1
            a = t1 + s.d_c + 50_000  # the client's 50 ms delayed ACK
            s.client(a, 0)
            s.server(a + s.d_s + 100, 505)  # S2 released by it
            s.client(a + 50_000, 0)
            t = a + 1_000_000.0
        tr = s.trace(tmp_path, f"relay_{relay}.pcap")
        f = of_kind(tr, NAGLE_KINDS | {"delayed_ack", "tcp_cork"})
        assert (len(f) == 0) if relay else (f.kind.tolist() == ["nagle_delayed_ack"] * 3), f

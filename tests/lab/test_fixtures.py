"""The committed fixtures show their scenario's ground truth — no root needed, runs everywhere.

Each fixture folder (``fixtures/<scenario>/``) holds both vantages of one lab run and the
run's ``scenario.json``.  These tests read the captures with ``pcapkit.open`` (and tshark
where decryption is the point) and check that what the scenario recorded while it ran —
write times, the dropped packet, socket options, windows — is what the capture shows:
the dropped packet is missing at the receiver and retransmitted at the sender, the corked
segment leaves ≈ RTO after its write with PSH and no inbound trigger, zero-window ACKs
exist only in the positive, tiny records are 23-byte TLS 1.3 records, the HTTP/2 captures
decrypt to HEADERS/DATA on 8 streams, the HTTP/3 capture decrypts to STREAM frames, etc.
Timing comparisons are between the capture and the run's own ground truth (same clock).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pcapkit
from pcapkit.lab import list_scenarios
from pcapkit.lab.fixtures import (
    CAPTURE_BUDGET_BYTES,
    FOLDER_BUDGET_BYTES,
    check_fixture,
    path_lateness,
    render_readme,
    topology_of,
    wants_middle,
)
from pcapkit.lab.scenarios import get

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
MS = 1_000_000
CLIENT_IP, SERVER_IP = "10.77.0.1", "10.77.0.2"
NAMES = sorted(s["name"] for s in list_scenarios())
TLS13_OVERHEAD = 22  # 5 header + 1 inner type + 16 tag

Doc = dict[str, Any]


@functools.cache
def doc(name: str) -> Doc:
    path = FIXTURES / name / "scenario.json"
    if not path.exists():
        pytest.fail(f"fixture {name} is missing: run `sudo pcapkit lab fixtures -o fixtures`")
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


_TRACES: dict[tuple[str, str], pcapkit.Trace] = {}


def trace(name: str, role: str) -> pcapkit.Trace:
    if (name, role) not in _TRACES:
        _TRACES[name, role] = pcapkit.open(FIXTURES / name / f"{role}.pcapng")
    return _TRACES[name, role]


@pytest.fixture(scope="module", autouse=True)
def _close_traces() -> Iterator[None]:
    """Close the cached captures when the module is done: the lab's end-to-end tests wait
    with select(), which cannot take file descriptors above 1024."""
    yield
    for t in _TRACES.values():
        t.close()
    _TRACES.clear()


def segs(name: str, role: str, direction: str) -> pd.DataFrame:
    s = trace(name, role).segments
    return s[s["dir"] == direction].sort_values("frame").reset_index(drop=True)


def pkts(name: str, role: str) -> pd.DataFrame:
    return trace(name, role).packets


def covering(s: pd.DataFrame, offset: int) -> pd.DataFrame:
    return s[(s["offset"] <= offset) & (offset < s["offset"] + s["length"])]


def tls_records(name: str, role: str, start: int, end: int) -> list[tuple[int, int, int]]:
    """(stream offset, content type, record.length) of each s2c TLS record in [start, end)."""
    t = trace(name, role)
    data = t.stream(0, "s2c")
    pos = data.at(start)
    assert pos is not None, f"{name}/{role}: offset {start} not captured"
    out = []
    off = start
    while off < end:
        hdr = data[pos : pos + 5]
        assert len(hdr) == 5 and hdr[1:3] == b"\x03\x03", f"no TLS record header at {off}"
        length = int.from_bytes(hdr[3:5], "big")
        out.append((off, hdr[0], length))
        off += 5 + length
        pos += 5 + length
    return out


def _tshark() -> str:
    exe = shutil.which("tshark")
    if exe is None:
        pytest.skip("tshark is not installed")
    return exe


def tshark_json(path: Path, layer: str, display_filter: str, *opts: str) -> list[Doc]:
    """Packets as tshark's JSON (layer ``layer`` and below), duplicate keys as lists."""
    argv = [_tshark(), "-r", str(path), *opts, "-Y", display_filter, "-T", "json"]
    argv += ["-J", f"frame {layer}", "--no-duplicate-keys"]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={**os.environ, "LC_ALL": "C"}
    ).stdout
    return json.loads(out) if out.strip() else []


def walk(obj: Any, key: str) -> Iterator[Doc]:
    """Every dict below ``obj`` that has ``key`` (tshark JSON nests lists and dicts freely)."""
    if isinstance(obj, dict):
        if key in obj:
            yield obj
        for v in obj.values():
            yield from walk(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk(v, key)


def frame_no(p: Doc) -> int:
    return int(p["_source"]["layers"]["frame"]["frame.number"])


# --------------------------------------------------------------------------- every fixture


def test_every_scenario_has_a_fixture_within_budget() -> None:
    present = {p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith(".")}
    assert present == set(NAMES), "fixtures/ and the scenario registry disagree"
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    assert total < FOLDER_BUDGET_BYTES
    for name in NAMES:
        # the capture files are the ones scenario.json lists: client and server (loopback:
        # client only, both ends' vantage), plus middle where the scenario wants one
        files = {p.stem for p in (FIXTURES / name).glob("*.pcapng")}
        assert files == set(doc(name)["captures"]), name
        want = {"client"} if topology_of(doc(name)) == "loopback" else {"client", "server"}
        assert files == want | ({"middle"} if wants_middle(name) else set()), name
        for role in files:
            assert (FIXTURES / name / f"{role}.pcapng").stat().st_size < CAPTURE_BUDGET_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_fixture_metadata_matches_registry_and_capture(name: str) -> None:
    d, sc = doc(name), get(name)
    assert d["scenario"] == name and d["schema"] == "pcapkit.lab.scenario/1"
    assert d["expected"] == list(sc.expected) and d["variant"] == sc.variant
    assert d["controls"] == list(sc.controls) and d["incidental"] == list(sc.incidental)
    if sc.variant == "control" and sc.pair is not None:
        assert d["expected"] == [] and d["controls"] == list(get(sc.pair).expected)
    for role in d["captures"]:
        t = trace(name, role)
        assert t.frames == d["captures"][role]["packets"]
        # the middle tap is the forwarder's own writer: no kernel, no drop count
        assert d["captures"][role]["dropped_by_kernel"] == (None if role == "middle" else 0)
        assert (FIXTURES / name / f"{role}.pcapng").read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
        secrets = [s for s in t.raw.secrets if s.secrets_type == 0x544C534B]
        if d["tls"] is None:
            assert secrets == []
        else:  # one key log, the same in both files, as many lines as scenario.json says
            assert len(secrets) == 1
            assert secrets[0].data.count(b"\n") == d["tls"]["keylog_lines"] >= 4
    assert not d["forwarder"]["trace_truncated"]
    assert d["forwarder"]["tun_tx_dropped"] == {"cli": 0, "srv": 0}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_passes_its_scenario_check(name: str) -> None:
    """The check `pcapkit lab fixtures` applied before accepting the run still holds."""
    sc = get(name)
    assert sc.validate is not None
    assert sc.validate(doc(name)) == []
    assert check_fixture(doc(name), FIXTURES / name) == []


@pytest.mark.parametrize("name", NAMES)
def test_fixture_path_has_the_configured_rtt(name: str) -> None:
    """At the client vantage SYN → SYN/ACK is the path RTT (+ ≤ 5 % forwarder lag)."""
    p = pkts(name, "client")
    tcp = p[p["proto"] == "tcp"]
    if tcp.empty:
        assert doc(name)["ground_truth"]["alpn"] == "h3"  # QUIC: no TCP handshake
        return
    tcp = tcp[tcp["flow"] == tcp["flow"].iloc[0]]  # the first connection
    syns = tcp[(tcp["tcp_flags"] & 0x12) == 0x02]["ts_ns"]
    synacks = tcp[(tcp["tcp_flags"] & 0x12) == 0x12]["ts_ns"]
    rtt = doc(name)["path"]["rtt_ms"]
    if len(syns) > 1 or len(synacks) > 1:  # a lost handshake: no SYN → SYN/ACK round trip
        path = doc(name)["path"]
        assert path["c2s"].get("drop_syn") or path["s2c"].get("drop_syn")
        return
    syn, synack = syns.iloc[0], synacks.iloc[0]
    if topology_of(doc(name)) != "tun":  # loopback/veth: no delay, two stacks' processing
        assert rtt == 0 and (synack - syn) / MS < 5.0
        return
    assert rtt <= (synack - syn) / MS <= 1.05 * rtt


def test_path_lateness_flags_packets_later_than_the_configured_delay() -> None:
    """check_fixture's path-fidelity rule: every packet crosses each leg (client → middle →
    server) within the configured delay + 5 ms; a path claimed 10 ms shorter fails it."""
    name = "nagle_wwr"
    assert path_lateness(doc(name), FIXTURES / name) == []
    d = json.loads(json.dumps(doc(name)))
    for leg in ("c2s", "s2c"):
        d["path"][leg]["delay_ms"] -= 10.0
        if d["path"]["middle"]:
            d["path"]["middle"][leg] = {k: v - 8.0 for k, v in d["path"]["middle"][leg].items()}
    problems = path_lateness(d, FIXTURES / name)
    assert problems and all("later than the path's delay" in p for p in problems)
    assert len(problems) == (3 if (FIXTURES / name / "middle.pcapng").exists() else 1)


def test_readme_is_current() -> None:
    text = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert text == render_readme(FIXTURES), "regenerate: pcapkit lab fixtures --readme-only"
    for name in NAMES:
        assert f"| `{name}` |" in text


# --------------------------------------------------------------------------- drops (TCP)

TCP_DROPS = ["tls_large_record_drop", "tls_small_records_drop", "h2_hol_drop"]


@pytest.mark.parametrize("name", TCP_DROPS)
def test_dropped_segment_missing_at_receiver_retransmitted_by_sender(name: str) -> None:
    (drop,) = doc(name)["ground_truth"]["drops"]
    (ev,) = [e for e in doc(name)["forwarder"]["events"] if e["event"] == "drop"]
    assert (ev["dir"], ev["rel_seq"], ev["len"]) == ("s2c", drop["rel_seq"], drop["len"])
    off, rtx = drop["rel_seq"], drop["retransmissions"][0]
    sent = covering(segs(name, "server", "s2c"), off)
    assert list(sent["kind"]) == ["new", "retransmission"]
    assert list(sent["length"]) == [drop["len"], rtx["len"]]
    # the sender capture stamps a packet µs before the forwarder reads it
    assert 0 <= drop["t_ns"] - sent["ts_ns"].iloc[0] < 2 * MS
    assert 0 <= rtx["t_in_ns"] - sent["ts_ns"].iloc[1] < 2 * MS
    cli = segs(name, "client", "s2c")
    got = covering(cli, off)
    assert len(got) == 1, "the receiver must see only the retransmission"
    fill = got.iloc[0]
    assert abs(fill["ts_ns"] - rtx["t_out_ns"]) < 2 * MS  # t_out: the TUN write (µs)
    # the hole: later bytes arrived first, flagged as such by the reader
    later = cli[(cli["offset"] > off) & (cli["ts_ns"] < fill["ts_ns"])]
    assert len(later) >= 3 and later.iloc[0]["kind"] == "prev_not_captured"
    assert fill["kind"] in ("out_of_order", "retransmission")
    hole_ms = (fill["ts_ns"] - later["ts_ns"].iloc[0]) / MS
    assert hole_ms == pytest.approx(drop["receiver_hole_ms"], abs=1.0)
    # the client's ACKs stick at the hole (dupACKs with SACK) until the fill
    c = pkts(name, "client")
    dup = c[(c["dir"] == "c2s") & (c["rel_ack"] == off + 1) & (c["sack_n"] > 0)]
    assert len(dup) == drop["dupacks"] >= 3


def test_large_record_is_readable_only_after_the_fill() -> None:
    name = "tls_large_record_drop"
    gt = doc(name)["ground_truth"]
    start = gt["response_rel_seq"]
    recs = tls_records(name, "client", start, start + 4 * (16_384 + TLS13_OVERHEAD))
    assert [r[2] for r in recs] == [16_401] * 4  # 16 KiB plaintext + type + tag
    (drop,) = gt["drops"]
    assert drop["in_record"] == 1 and recs[0][0] <= drop["rel_seq"] < recs[1][0]
    cli = segs(name, "client", "s2c")
    rec1 = cli[(cli["offset"] < recs[1][0]) & (cli["end"] > start)]
    spread_ms = (rec1["ts_ns"].max() - rec1["ts_ns"].min()) / MS
    assert len(rec1) >= 12 and spread_ms >= 0.8 * doc(name)["path"]["rtt_ms"]
    assert rec1["ts_ns"].max() == covering(cli, drop["rel_seq"])["ts_ns"].iloc[0]
    # the application read nothing before the record's last piece arrived
    assert drop["app_bytes_before_fill"] == 0
    assert gt["first_read_ns"] >= rec1["ts_ns"].max()


def test_small_records_are_one_per_segment_and_readable_before_the_fill() -> None:
    name = "tls_small_records_drop"
    gt = doc(name)["ground_truth"]
    start, n = gt["response_rel_seq"], doc(name)["params"]["slice_len"]
    size = 65_536
    end = start + sum(r["wire_len"] for r in gt["records"])
    recs = tls_records(name, "server", start, end)
    assert len(recs) == -(-size // n) and {r[2] for r in recs[:-1]} == {n + 17}
    srv = segs(name, "server", "s2c")
    resp = srv[(srv["offset"] >= start) & (srv["offset"] < end) & (srv["kind"] == "new")]
    bounds = {r[0] for r in recs} | {end}
    for _, s in resp.iterrows():  # every segment is exactly whole records
        assert s["offset"] in bounds and s["end"] in bounds, f"frame {s['frame']}"
    (drop,) = gt["drops"]
    assert drop["records_hit"] == [drop["in_record"]] and drop["app_bytes_before_fill"] > 0
    assert gt["first_read_ns"] < drop["retransmissions"][0]["t_out_ns"]


# --------------------------------------------------------------------------- TLS records


@pytest.mark.parametrize("name", ["tls_tiny_records", "tls_buffered_records"])
def test_tiny_records_are_23_byte_tls13_records(name: str) -> None:
    d = doc(name)
    gt = d["ground_truth"]
    start = gt["response_rel_seq"]
    end = start + gt["response_wire_len"]
    tiny = d["params"]["mode"] == "tiny"
    for role in ("client", "server"):
        recs = tls_records(name, role, start, end)
        assert {r[1] for r in recs} == {0x17}  # application data (opaque type)
        if tiny:
            assert len(recs) == d["params"]["messages"] * d["params"]["message_len"]
            assert {r[2] for r in recs} == {18}  # 1 B plaintext + type + 16 B tag: 23 on the wire
        else:
            assert len(recs) == d["params"]["messages"]
            assert all(r[2] - 17 > 16 for r in recs)  # > 16 B plaintext: not "tiny" (§5.1)
        s = segs(name, role, "s2c")
        resp = s[(s["offset"] >= start) & (s["offset"] < end)]
        single = resp[resp["length"] == gt["app_records"]["wire_len"]]
        assert len(single) == gt["single_record_segments"]
        assert single["psh"].all()
    if tiny:  # most records travel alone, one per PSH segment
        assert gt["single_record_segments"] >= 0.8 * len(recs)


# --------------------------------------------------------------------------- TCP_CORK


@pytest.mark.parametrize("name", ["tcp_cork", "tcp_cork_cleared"])
def test_corked_segment_leaves_rto_after_its_write_without_trigger(name: str) -> None:
    d = doc(name)
    corked = not d["params"]["clear_cork"]
    assert d["sockets"]["server"]["TCP_CORK"] is True
    assert d["sockets"]["server"]["TCP_CORK_at_end"] is corked
    srv = segs(name, "server", "s2c")
    p = pkts(name, "server")
    inbound = p[p["dir"] == "c2s"]
    msgs = d["ground_truth"]["messages"]
    assert len(msgs) == d["params"]["messages"] >= 3
    for m in msgs:
        seg = covering(srv, m["rel_seq"]).iloc[0]
        hold_ms = (seg["ts_ns"] - m["write_ns"]) / MS
        assert hold_ms == pytest.approx(m["hold_ms"], abs=1.0)
        assert bool(seg["psh"]) and seg["length"] == d["params"]["message_len"]
        if corked:  # the probe timer: max(RTO, 200 ms), RTO ≈ srtt + 200 ms
            rto = d["ground_truth"]["server_rto_ms"]
            assert 200 <= hold_ms and hold_ms == pytest.approx(rto, abs=20)
            between = inbound[
                (inbound["ts_ns"] > m["write_ns"]) & (inbound["ts_ns"] < seg["ts_ns"])
            ]
            assert between.empty, "a client packet could have triggered the release"
        else:
            assert hold_ms < 5


# --------------------------------------------------------------------------- zero window


def _zero_window_acks(name: str, role: str) -> pd.DataFrame:
    p = pkts(name, role)
    syn_fin_rst = 0x07
    return p[
        (p["dir"] == "c2s")
        & (p["proto"] == "tcp")
        & (p["tcp_window"] == 0)
        & ((p["tcp_flags"] & syn_fin_rst) == 0)
    ]


def probe_next(srv: pd.DataFrame) -> int:
    """The stream offset right after the last zero-window probe (probes sit at snd_una − 1)."""
    probes = srv[srv["kind"] == "zero_window_probe"]
    return int(probes["offset"].iloc[-1]) + 1


def test_zero_window_acks_exist_in_positive_only() -> None:
    pos, ctl = doc("zero_window"), doc("zero_window_control")
    (ep,) = pos["ground_truth"]["zero_window_episodes"]
    for role in ("client", "server"):
        zw = _zero_window_acks("zero_window", role)
        assert len(zw) == ep["zero_ack_count"] >= 2
        assert _zero_window_acks("zero_window_control", role).empty
        p = pkts("zero_window", role)
        reopen = p[(p["dir"] == "c2s") & (p["ts_ns"] > zw["ts_ns"].max()) & (p["tcp_window"] > 0)]
        stall_ms = (reopen["ts_ns"].iloc[0] - zw["ts_ns"].iloc[0]) / MS
        # ground truth is taken where the ACKs leave the client; at the server vantage both
        # ends of the interval also carry the path's jitter (the forwarder's rare ms hiccups)
        assert stall_ms == pytest.approx(ep["duration_ms"], abs=2.0 if role == "client" else 10.0)
        # the reader paused ~1.5 s; the window stayed shut for most of it
        assert 0.5 * pos["params"]["pause_s"] * 1e3 < stall_ms < pos["params"]["pause_s"] * 1e3 + 50
    # the sender probes (Linux: 0-byte segment at snd_una − 1) and resumes on the update
    srv = segs("zero_window", "server", "s2c")
    assert (srv["kind"] == "zero_window_probe").sum() == ep["probe_count"] >= 1
    p = pkts("zero_window", "server")
    last_zero = _zero_window_acks("zero_window", "server")["ts_ns"].max()
    reopen = p[(p["dir"] == "c2s") & (p["ts_ns"] > last_zero) & (p["tcp_window"] > 0)].iloc[0]
    resume = srv[(srv["ts_ns"] >= reopen["ts_ns"]) & (srv["length"] > 0)].iloc[0]
    assert resume["ts_ns"] - reopen["ts_ns"] < MS  # d_X ≈ 0 at the sender vantage
    assert resume["offset"] == probe_next(srv)
    assert ctl["ground_truth"]["summary"]["zero_window_acks"] == 0
    assert pos["ground_truth"]["client_rcvbuf"] == ctl["ground_truth"]["client_rcvbuf"]


# --------------------------------------------------------------------------- slow-start restart


def _flights(name: str, start_ns: int, stop_ns: int | None = None) -> list[int]:
    """Sender-vantage flights: segments sent before an ACK for the flight came back."""
    p = pkts(name, "server").sort_values("frame")
    out: list[int] = []
    first_seq: int | None = None
    for _, r in p.iterrows():
        if r["ts_ns"] < start_ns or (stop_ns is not None and r["ts_ns"] >= stop_ns):
            continue
        if r["dir"] == "s2c" and r["payload_len"] > 0:
            if first_seq is None:
                out.append(0)
                first_seq = int(r["rel_seq"])
            out[-1] += 1
        elif r["dir"] == "c2s" and first_seq is not None and r["rel_ack"] > first_seq:
            first_seq = None  # an ACK for this flight arrived: the next data is a new flight
    return out


@pytest.mark.parametrize("name", ["slow_start_restart", "slow_start_restart_off"])
def test_first_flight_after_idle(name: str) -> None:
    d = doc(name)
    gt = d["ground_truth"]
    ssai = gt["slow_start_after_idle"]
    assert d["sysctls"]["srv"]["net.ipv4.tcp_slow_start_after_idle"] == str(ssai)
    assert d["sockets"]["server"]["TCP_CONGESTION"] == "cubic"
    data = segs(name, "server", "s2c")
    gaps = data["ts_ns"].diff()
    idle = gaps.idxmax()
    assert gaps[idle] / MS >= 1000 * d["params"]["idle_s"]  # the idle is in the capture
    before = _flights(name, int(data["ts_ns"].iloc[0]), int(data["ts_ns"].iloc[idle]))
    after = _flights(name, int(data["ts_ns"].iloc[idle]))
    assert before == gt["burst1_flights"] and after == gt["burst2_flights"]
    assert sum(after) == len(data) - idle
    if ssai:  # cwnd halved per RTO of idle, floored at IW = 10
        assert after[0] == 10 == gt["cwnd_after_burst2_write"]
        assert after[0] < 0.5 * max(before) and len(after) > len(before) - 1
    else:
        assert after[0] >= max(before) and gt["cwnd_after_burst2_write"] == gt["cwnd_after_burst1"]


# --------------------------------------------------------------------------- HTTP/2

H2_OPTS = ("-o", "tcp.reassemble_out_of_order:TRUE")


def h2_frames(
    name: str, role: str, direction: str | None = None
) -> list[tuple[int, int, int, Doc]]:
    """(frame number, type, stream, fields) of every decrypted HTTP/2 frame (of ``direction``)."""
    path = FIXTURES / name / f"{role}.pcapng"
    dirs = pkts(name, role).set_index("frame")["dir"]
    out = []
    for p in tshark_json(path, "http2", "http2", *H2_OPTS):
        fr = frame_no(p)
        if direction is not None and dirs[fr] != direction:
            continue
        for f in walk(p["_source"]["layers"].get("http2"), "http2.type"):
            out.append((fr, int(f["http2.type"]), int(f["http2.streamid"]), f))
    return out


@pytest.mark.parametrize("name", ["h2_hol_drop", "h2_hol_nodrop"])
def test_h2_captures_decrypt_to_8_streams(name: str) -> None:
    d = doc(name)
    assert d["tls"]["alpn"] == "h2"
    n = d["params"]["body_len"] // d["params"]["frame_len"]
    for role in ("client", "server"):
        frames = h2_frames(name, role)
        headers = {s for _, t, s, _ in frames if t == 1}
        data: dict[int, int] = {}
        for _, t, s, _ in frames:
            if t == 0:
                data[s] = data.get(s, 0) + 1
        assert headers == set(range(1, 16, 2)), f"{role}: HEADERS on {sorted(headers)}"
        assert data == {s: n for s in range(1, 16, 2)}, f"{role}: DATA {data}"


def test_h2_hol_drop_stalls_every_stream() -> None:
    gt = doc("h2_hol_drop")["ground_truth"]
    (drop,) = gt["drops"]
    assert drop["streams_hit"] and set(drop["streams_hit"]) < set(range(1, 16, 2))
    assert drop["streams_released_by_fill"] == list(range(1, 16, 2))  # TCP HoL: all 8
    # at the client, nothing decrypts between the hole and the fill: every HTTP/2 frame
    # behind the hole appears in (or after) the frame that fills it
    cli = segs("h2_hol_drop", "client", "s2c")
    fill = int(covering(cli, drop["rel_seq"])["frame"].iloc[0])
    hole = int(cli[cli["kind"] == "prev_not_captured"]["frame"].iloc[0])
    frames = h2_frames("h2_hol_drop", "client")
    assert not [f for f, t, _, _ in frames if t == 0 and hole <= f < fill]
    assert len({s for f, t, s, _ in frames if t == 0 and f == fill}) >= 1
    assert doc("h2_hol_nodrop")["ground_truth"]["drops"] == []


def test_h2_flow_control_stalls_resume_on_window_update() -> None:
    name = "h2_flow_control"
    gt = doc(name)["ground_truth"]
    assert gt["client_window"] == 65_535 and len(gt["stalls"]) >= 2
    frames = h2_frames(name, "server", "c2s")
    settings = [f for _, t, _, f in frames if t == 4 and list(walk(f, "http2.settings.id"))]
    iws = {
        int(s["http2.settings.initial_window_size"])
        for f in settings
        for s in walk(f, "http2.settings.initial_window_size")
    }
    assert iws <= {65_535}  # the client keeps (or restates) the RFC 9113 default
    wu_frames = sorted({fr for fr, t, _, _ in frames if t == 8})
    wus = [
        (s, int(f["http2.window_update.window_size_increment"])) for _, t, s, f in frames if t == 8
    ]
    assert len(wus) == len(gt["client_window_updates"]) >= 4
    p = pkts(name, "server").set_index("frame")
    srv = segs(name, "server", "s2c")
    for st in gt["stalls"]:
        resume = srv[srv["ts_ns"] >= st["resume_ns"]].iloc[0]
        last = srv[srv["ts_ns"] <= st["last_data_ns"] + MS].iloc[-1]
        idle_ms = (resume["ts_ns"] - last["ts_ns"]) / MS
        assert idle_ms == pytest.approx(st["idle_ms"], abs=1.0) and idle_ms > 10
        # the resuming DATA leaves right after a WINDOW_UPDATE reached the server: within
        # the h2 server's own turnaround (Python, ~0.1–1 ms) and far below one RTT
        wu = [fr for fr in wu_frames if p.loc[fr, "ts_ns"] <= resume["ts_ns"]][-1]
        lag_ms = (resume["ts_ns"] - p.loc[wu, "ts_ns"]) / MS
        assert (
            lag_ms < st["resume_after_wu_ms"] + 2.0 and lag_ms < 0.1 * doc(name)["path"]["rtt_ms"]
        )
        assert p.loc[wu, "ts_ns"] > last["ts_ns"]


def test_h2_large_windows_no_stall() -> None:
    name = "h2_flow_control_large"
    gt = doc(name)["ground_truth"]
    assert gt["client_window"] == 16_777_216 and gt["stalls"] == []
    frames = h2_frames(name, "client", "c2s")
    iws = [
        int(s["http2.settings.initial_window_size"])
        for _, t, _, f in frames
        if t == 4
        for s in walk(f, "http2.settings.initial_window_size")
    ]
    assert iws == [16_777_216]
    wus = [
        (s, int(f["http2.window_update.window_size_increment"])) for _, t, s, f in frames if t == 8
    ]
    assert wus == [(0, 16_777_216 - 65_535)]  # the connection window, raised once
    data = sum(int(f["http2.length"]) for _, t, _, f in h2_frames(name, "client", "s2c") if t == 0)
    assert data == doc(name)["params"]["body_len"]
    pos = doc("h2_flow_control")["ground_truth"]["summary"]["transfer_ms"]
    assert gt["summary"]["transfer_ms"] < pos  # the stalls cost time


# --------------------------------------------------------------------------- HTTP/3


def quic_packets(
    name: str, role: str
) -> list[tuple[int, int, int | None, list[tuple[int, int, int]]]]:
    """Server→client packets: (frame, ts_ns, 1-RTT packet number, [(stream, offset, length)])."""
    path = FIXTURES / name / f"{role}.pcapng"
    p_ = pkts(name, role).set_index("frame")
    out = []
    for p in tshark_json(path, "quic", "quic"):
        fr = frame_no(p)
        if p_.loc[fr, "dir"] != "s2c":
            continue
        q = p["_source"]["layers"].get("quic")
        pn = None
        for short in walk(q, "quic.short"):
            if "quic.packet_number" in short["quic.short"]:
                pn = int(short["quic.short"]["quic.packet_number"])
        streams = [
            (
                int(f["quic.stream.stream_id"]),
                int(f.get("quic.stream.offset", 0)),
                int(f.get("quic.stream.length", 0)),
            )
            for f in walk(q, "quic.stream.stream_id")
        ]
        out.append((fr, int(p_.loc[fr, "ts_ns"]), pn, streams))
    return out


def _quic_or_skip(
    name: str, role: str
) -> list[tuple[int, int, int | None, list[tuple[int, int, int]]]]:
    q = quic_packets(name, role)
    if not any(s for *_, s in q):
        pytest.skip(
            f"tshark decrypted no QUIC STREAM frame in {name}/{role}.pcapng: this tshark "
            "does not take QUIC secrets from the pcapng Decryption Secrets Block"
        )
    return q


@pytest.mark.parametrize("name", ["h3_streams_drop", "h3_streams_nodrop"])
def test_h3_captures_decrypt_to_stream_frames(name: str) -> None:
    d = doc(name)
    assert d["ground_truth"]["alpn"] == "h3"
    want = {4 * i for i in range(d["params"]["streams"])}
    for role in ("client", "server"):
        q = _quic_or_skip(name, role)
        got: dict[int, int] = {}
        for *_, streams in q:
            for sid, off, ln in streams:
                if sid in want:
                    got[sid] = max(got.get(sid, 0), off + ln)
        # every request stream carries its whole response (HEADERS + DATA framing on top)
        assert set(got) == want and min(got.values()) > d["params"]["body_len"]


def test_h3_drop_blocks_only_its_stream() -> None:
    name = "h3_streams_drop"
    gt = doc(name)["ground_truth"]
    (drop,) = gt["drops"]
    assert drop["packet_types"] == ["1RTT"]  # never a handshake packet
    ((pn, off),) = {(p["pn"], f[1]) for p in drop["packets"] for f in drop["stream_frames"]}
    sid = drop["streams_hit"][0]
    srv, cli = _quic_or_skip(name, "server"), _quic_or_skip(name, "client")
    # the original is on the wire at the server, absent at the client
    assert any(p == pn and (sid, off) in {(s, o) for s, o, _ in st} for _, _, p, st in srv)
    assert pn not in {p for _, _, p, _ in cli}
    assert (
        len([x for x in srv if x[2] is not None]) - len([x for x in cli if x[2] is not None]) == 1
    )
    # the client gets that offset of that stream only from the retransmission
    rtx_pns = {r["pn"] for r in drop["retransmissions"]}
    carried = [(fr, t, p) for fr, t, p, st in cli if any(s == sid and o == off for s, o, _ in st)]
    assert len(carried) == 1 and carried[0][2] in rtx_pns
    fill = max(t for _, t, p, _ in cli if p in rtx_pns)
    assert fill == pytest.approx(drop["fill_at_client_ns"], abs=2 * MS)
    # meanwhile the other streams keep receiving STREAM data; the blocked one gets none
    start = drop["gap_start_at_client_ns"]
    during = {s for _, t, _, st in cli if start - MS <= t < fill - MS for s, _, _ in st}
    others = {4 * i for i in range(doc(name)["params"]["streams"])} - {sid}
    assert others <= during
    beyond = [
        (s, o) for _, t, _, st in cli if start - MS <= t < fill - MS for s, o, _ in st if s == sid
    ]
    assert all(o > off for _, o in beyond)  # only bytes behind the hole: undeliverable
    assert gt["summary"]["streams_progressing_during_hole"] == sorted(others)
    assert doc("h3_streams_nodrop")["ground_truth"]["summary"]["lost_packets"] == 0


# --------------------------------------------------------------------------- bulk controls


@pytest.mark.parametrize(
    "name,eff_mss", [("bulk_loopback_tls", 65_483), ("bulk_veth_gso_tls", 1_448)]
)
def test_bulk_captures_show_the_offload_artefacts(name: str, eff_mss: int) -> None:
    """DETECTION.md §1.4: loopback — MSS 65 483 and full 64 KB segments; veth — GSO
    super-segments (> MSS) at *both* ends.  Every response record is a 16 KiB one."""
    d = doc(name)
    assert d["ground_truth"]["summary"]["server_snd_mss"] == eff_mss
    assert d["ground_truth"]["summary"]["retransmissions"] == 0
    for role in d["captures"]:
        f = trace(name, role).flows.iloc[0]
        assert f.eff_mss == eff_mss and f.retransmissions == 0
        data = segs(name, role, "s2c")
        if eff_mss == 65_483:
            assert (data["length"] == eff_mss).sum() >= 2  # a 64 KiB send: 65 483 + 141 B
            assert data["length"].max() == eff_mss
        else:
            big = data[data["length"] > eff_mss]
            assert len(big) >= 5 and big["super_segment"].all(), role
            assert data["length"].max() > 20 * eff_mss
        end = int((data["offset"] + data["length"]).max())
        recs = tls_records(name, role, int(data["offset"].min()), end)
        full = [r for r in recs if r[1] == 23 and r[2] == 16_384 + 17]  # 16 KiB + type + tag
        assert len(full) == 10 and full[0][2] + 5 == 16_384 + TLS13_OVERHEAD

"""Flow-hash shards (issue 20): per-connection results on the shards of a capture equal
the whole file's, on fixtures (real lab traffic) and on the shared corpus captures with
their key logs; the streaming windows read exactly what the whole-file reader reads."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pcapkit
from pcapkit.io.reader import iter_windows, read_capture
from pcapkit.io.writer import PcapWriter, write_pcap
from pcapkit.net.decode import decode
from pcapkit.net.shard import flow_hash, frame_map, shard_capture
from tests.realworld.shared_captures import CORPUS_KEYS, SHARED

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
# one capture of each kind of traffic the lab makes: TLS/HTTP1+SSE, HTTP/2 with loss,
# gRPC, HTTP/3 over QUIC (0-RTT, loss), TCP loss and retransmission, connection reuse
SHARD_FIXTURES = [
    "tls_sse_nagle/server.pcapng",
    "h2_hol_drop/client.pcapng",
    "grpc_stream/client.pcapng",
    "h3_sse_drop/client.pcapng",
    "h3_resumed_0rtt/client.pcapng",
    "rto_tail_loss/middle.pcapng",
    "fast_retransmit/client.pcapng",
    "tls_reuse/client.pcapng",
    "syn_lost/client.pcapng",
]


def _conn_keys(t: Any) -> dict[int, tuple[Any, ...]]:
    """Flow id → the connection's identity, which does not depend on the file it is in."""
    return {
        int(r.flow): (
            r.proto,
            r.client_ip,
            int(r.client_port),
            r.server_ip,
            int(r.server_port),
            int(r.first_ts_ns),
        )
        for r in t.flows.itertuples(index=False)
    }


def per_connection(t: Any, fmap: np.ndarray | None) -> dict[str, list[str]]:
    """Findings, requests, flows and TLS sessions keyed by connection (not flow id) with
    frame numbers of the original file (``fmap``: a shard's frame → the input's)."""

    def m(f: Any) -> int | None:
        if f is None or pd.isna(f):
            return None
        return int(f) if fmap is None else int(fmap[int(f) - 1])

    key = _conn_keys(t)
    out: dict[str, list[str]] = {"findings": [], "requests": [], "flows": [], "tls": []}
    for r in t.findings.itertuples(index=False):
        flow = None if pd.isna(r.flow) else key[int(r.flow)]
        frames = tuple(m(x) for x in r.frames)
        ev = tuple((m(e.get("frame")), e.get("role")) for e in (r.evidence or []))
        out["findings"].append(
            repr(
                (r.kind, r.severity, flow, r.dir, r.cost_ms, frames, ev, r.t_start_ns)
                + (r.t_end_ns, str(r.stream), r.confidence, r.explanation, r.remedy)
            )
        )
    for r in t.requests.itertuples(index=False):
        d = r._asdict()
        d["flow"] = key[int(r.flow)]
        d.pop("request")
        for c in ("request_frame", "response_frame", "response_head_frame"):
            d[c] = m(d[c])
        out["requests"].append(repr(sorted((k, str(v)) for k, v in d.items())))
    for r in t.flows.itertuples(index=False):
        d = r._asdict()
        for c in ("flow", "stream"):  # numbered within the file
            d.pop(c)
        d["first_frame"], d["last_frame"] = m(d["first_frame"]), m(d["last_frame"])
        out["flows"].append(repr(sorted((k, str(v)) for k, v in d.items())))
    for r in t.tls.itertuples(index=False):
        d = r._asdict()
        d["flow"] = key[int(r.flow)]
        out["tls"].append(repr(sorted((k, str(v)) for k, v in d.items() if "frame" not in k)))
    return {k: sorted(v) for k, v in out.items()}


def assert_shards_equal_whole(
    path: Path, tmp: Path, keylog: Path | None, n: int = 3, by: str = "connection"
) -> None:
    with pcapkit.open(path, keylog) as t:
        whole = per_connection(t, None)
    # a small window: several windows per capture, the streaming path is exercised
    res = shard_capture(path, n, tmp, by=by, window_bytes=1 << 15)
    parts: dict[str, list[str]] = {k: [] for k in whole}
    for sp in res.paths:
        with pcapkit.open(sp, keylog) as t:
            for k, v in per_connection(t, frame_map(sp)).items():
                parts[k] += v
    for k in whole:
        assert sorted(parts[k]) == whole[k], k
    assert sum(res.frames) == read_capture(path).frames


@pytest.mark.parametrize("name", SHARD_FIXTURES)
def test_shards_equal_whole_file_fixtures(name: str, tmp_path: Path) -> None:
    path = FIXTURES / name
    with pcapkit.open(path) as t:  # the comparison compares something
        assert len(t.flows) and (len(t.findings) or len(t.requests) or len(t.tls))
    assert_shards_equal_whole(path, tmp_path, None)


# Detectors that relate connections (a connection not reused, a session not resumed, a
# timeout counted over several) see them only when they share a shard: by host pair they
# do.  On every fixture the 5-tuple shards differ from the whole file only in these four.
CROSS_CONNECTION_FIXTURES = [
    "stream_timeout/client.pcapng",  # client_timeout counts three connections' timeouts
    "tls_no_reuse/client.pcapng",
    "tls_resumed/server.pcapng",
    "tls_resumption_rejected/middle.pcapng",
]


@pytest.mark.parametrize("name", CROSS_CONNECTION_FIXTURES)
def test_shards_by_hosts_keep_cross_connection_findings(name: str, tmp_path: Path) -> None:
    path = FIXTURES / name
    with pcapkit.open(path) as t:
        assert len(t.flows) >= 2 and len(t.findings)
    assert_shards_equal_whole(path, tmp_path, None, by="hosts")


@pytest.mark.parametrize("name", sorted(CORPUS_KEYS))
def test_shards_equal_whole_file_corpus_with_keys(name: str, tmp_path: Path) -> None:
    corpus = SHARED / "corpus"
    if not (corpus / name).is_file():
        pytest.skip("../shared/corpus is not here")
    assert_shards_equal_whole(corpus / name, tmp_path, corpus / CORPUS_KEYS[name], n=4)


def test_connections_spread_and_stay_whole(tmp_path: Path) -> None:
    """A capture of many connections: they spread over the shards, each whole."""
    path = FIXTURES / "tls_reuse" / "client.pcapng"
    many = SHARED / "corpus" / "wireshark" / "http2-data-reassembly.pcap"
    src = next((p for p in (many, path) if p.is_file()), path)
    with pcapkit.open(src) as t:
        flows = t.flows
    res = shard_capture(src, 4, tmp_path)
    seen = 0
    for sp in res.paths:
        with pcapkit.open(sp) as t:
            seen += len(t.flows)
            # every connection in a shard has its SYN and both directions when the input had
            for r in t.flows.itertuples(index=False):
                assert r.c2s_packets + r.s2c_packets > 0
    assert seen == len(flows)


def test_hash_is_symmetric_and_fragments_stay_together(tmp_path: Path) -> None:
    from scapy.layers.inet import IP, TCP, UDP, fragment
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw

    pkts = []
    for i in range(40):
        a, b = f"10.0.{i}.1", f"10.1.{i}.2"
        pkts.append(bytes(IP(src=a, dst=b) / TCP(sport=40000 + i, dport=443, flags="S")))
        pkts.append(bytes(IP(src=b, dst=a) / TCP(sport=443, dport=40000 + i, flags="SA")))
        pkts.append(bytes(IPv6(src=f"fd00::{i}", dst="fd00::ffff") / UDP(sport=5000 + i, dport=53)))
        pkts.append(bytes(IPv6(src="fd00::ffff", dst=f"fd00::{i}") / UDP(sport=53, dport=5000 + i)))
    big = IP(src="10.9.9.1", dst="10.9.9.2", id=7) / UDP(sport=1, dport=2) / Raw(b"x" * 3000)
    frags = [bytes(f) for f in fragment(big, fragsize=1000)]
    assert len(frags) == 4
    cap_path = tmp_path / "in.pcap"
    write_pcap(cap_path, [(1_000_000_000 + k, p) for k, p in enumerate(pkts + frags)], 101)
    cap = read_capture(cap_path)
    dec = decode(cap)
    h = flow_hash(dec.cols, dec.v6_idx, dec.src6, dec.dst6)
    n = len(pkts)
    assert (h[0:n:2] == h[1:n:2]).all()  # both directions of each 5-tuple
    assert len(set(h[0:n:4].tolist())) == 40  # different connections differ
    assert len(set(h[n:].tolist())) == 1  # every fragment of the datagram, the first too
    res = shard_capture(cap_path, 7, tmp_path / "out")
    where = [
        k
        for k, sp in enumerate(res.paths)
        for f in frame_map(sp).tolist()
        if f > n  # type: ignore[union-attr]
    ]
    assert len(where) == 4 and len(set(where)) == 1
    assert sum(x > 0 for x in res.frames) > 3  # 40 connections spread over the 7 shards


def test_secrets_interfaces_and_pcap_to_pcapng(tmp_path: Path) -> None:
    path = FIXTURES / "tls_sse_nagle" / "server.pcapng"
    src = read_capture(path)
    assert src.secrets
    res = shard_capture(path, 3, tmp_path)
    for sp in res.paths:
        got = read_capture(sp)
        assert got.format == "pcapng"
        assert [s.data for s in got.secrets] == [s.data for s in src.secrets]
        assert [(i.linktype, i.snaplen, i.name) for i in got.interfaces] == [
            (i.linktype, i.snaplen, i.name) for i in src.interfaces
        ]
    # classic pcap (µs) in: pcapng shards with the same timestamps and bytes
    pcap = tmp_path / "in.pcap"
    with open(pcap, "wb") as f:
        w = PcapWriter(f, src.interfaces[0].linktype, nanosecond=False)
        for i in range(src.frames):
            w.write(int(src.ts_ns[i]) // 1000 * 1000, src.frame_bytes(i + 1))
    res = shard_capture(pcap, 2, tmp_path / "p")
    back = sorted(
        (int(fr), int(c.ts_ns[i]), c.frame_bytes(i + 1))
        for sp in res.paths
        for c, fm in [(read_capture(sp), frame_map(sp))]
        for i, fr in enumerate(fm.tolist())  # type: ignore[union-attr]
    )
    assert [b[0] for b in back] == list(range(1, src.frames + 1))
    assert [b[1] for b in back] == [int(t) // 1000 * 1000 for t in src.ts_ns]
    assert [b[2] for b in back] == [src.frame_bytes(i + 1) for i in range(src.frames)]


def _windows_equal(path: Path, window: int) -> None:
    cap = read_capture(path)
    ws = list(iter_windows(path, window))

    def cat(f: Any) -> list[int]:
        return [int(x) for w in ws for x in f(w.cap)]

    assert cat(lambda c: c.ts_ns) == cap.ts_ns.tolist()
    assert cat(lambda c: c.origlen) == cap.origlen.tolist()
    assert cat(lambda c: c.iface) == cap.iface.tolist()
    got = [w.cap.frame_bytes(i + 1) for w in ws for i in range(w.cap.frames)]
    assert got == [cap.frame_bytes(i + 1) for i in range(cap.frames)]
    secrets = [(s.secrets_type, s.data, s.frames_before) for w in ws for s in w.cap.secrets]
    assert secrets == [(s.secrets_type, s.data, s.frames_before) for s in cap.secrets]
    # where in the file too: a window's offsets are made the file's (the sharded report
    # shows them; they were offsets into the window's buffer)
    anomalies = [(a["name"], a["frame"], a["offset"]) for w in ws for a in w.cap.anomalies]
    assert anomalies == [(a["name"], a["frame"], a["offset"]) for a in cap.anomalies]
    assert [w.first_frame for w in ws] == list(
        np.cumsum([0] + [w.cap.frames for w in ws[:-1]]).tolist()
    )


@pytest.mark.parametrize("window", [4096, 1 << 20])
def test_windows_read_what_the_reader_reads(window: int) -> None:
    paths = sorted(FIXTURES.glob("*/client.pcapng"))[:12]
    corpus = SHARED / "corpus"
    paths += [corpus / n for n in sorted(CORPUS_KEYS) if (corpus / n).is_file()]
    for p in paths:
        _windows_equal(p, window)


def test_windows_of_broken_files(tmp_path: Path) -> None:
    """Cut and corrupt files: the same frames and anomalies as the whole-file reader."""
    src = (FIXTURES / "tls_sse_nagle" / "server.pcapng").read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(src[: len(src) - 37])
    _windows_equal(cut, 4096)
    bad = tmp_path / "bad.pcapng"
    mid = len(src) // 2
    bad.write_bytes(src[:mid] + struct.pack("<II", 6, 7) + src[mid + 8 :])
    _windows_equal(bad, 2048)
    pcap = tmp_path / "cut.pcap"
    write_pcap(pcap, [(k * 1000, bytes(60 + k)) for k in range(300)], 1)
    whole = pcap.read_bytes()
    pcap.write_bytes(whole[:-10])
    _windows_equal(pcap, 1000)
    absurd = tmp_path / "absurd.pcap"
    absurd.write_bytes(whole[:5000] + struct.pack("<IIII", 0, 0, 1 << 29, 1 << 29) + whole[5016:])
    _windows_equal(absurd, 1000)


def test_shard_command(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from pcapkit.cli import cli

    runner = CliRunner()
    src = FIXTURES / "tls_sse_nagle" / "client.pcapng"
    res = runner.invoke(cli, ["shard", str(src), "-n", "2", "-o", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "56 frames in 2 shard(s), 1 secrets block(s) copied into each" in res.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "shard-0.frames",
        "shard-0.pcapng",
        "shard-1.frames",
        "shard-1.pcapng",
    ]
    bad = tmp_path / "notes.txt"
    bad.write_text("not a capture")
    res = runner.invoke(cli, ["shard", str(bad), "-n", "2", "-o", str(tmp_path / "b")])
    assert res.exit_code == 1
    assert "not a pcap or pcapng capture" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "b").exists()  # nothing written for an input that is not a capture
    res = runner.invoke(cli, ["shard", str(src), "-n", "0", "-o", str(tmp_path / "z")])
    assert res.exit_code == 2


# --- gzip inputs read within the gzip limits, as the whole-file reader reads them --------
# SYNTHETIC inputs: fuzz.hostile's gzip bomb (zero-length records) and a lab fixture gzip'd
# then cut short.


def _streamed(path: Path, limits: Any = None, window: int = 1 << 20) -> tuple[int, list[str]]:
    """Frames and anomaly names of every window, and the names on the last window."""
    frames, names = 0, []
    for w in iter_windows(path, window, limits):
        frames += w.cap.frames
        names += [a["name"] for a in w.cap.anomalies]
        w.cap.close()
    return frames, names


@pytest.mark.parametrize(
    ("size", "settings", "stop"),
    [
        (24 << 20, None, "gzip_ratio"),  # a bomb past the 16 MiB grace
        (4 << 20, {"gzip_bytes": 1 << 20}, "gzip_bytes"),
    ],
    ids=["ratio", "bytes"],
)
def test_streamed_gzip_stops_where_the_whole_file_read_stops(
    tmp_path: Path, size: int, settings: Any, stop: str
) -> None:
    from fuzz import hostile
    from pcapkit.limits import resolve

    path = hostile.gzip_bomb(tmp_path / "bomb.pcap.gz", size)
    lim = resolve(settings)
    whole = read_capture(path, limits=lim)
    names = [a["name"] for a in whole.anomalies]
    assert "gzip_limit_exceeded" in names
    assert stop in next(a["detail"] for a in whole.anomalies if a["name"] == "gzip_limit_exceeded")
    frames, streamed = _streamed(path, lim, window=1 << 19)
    # the same bytes inflated, so the same frames; before the limits reached this path,
    # the streaming reader inflated the whole bomb (here 1.5 M frames where 1 M are read)
    assert frames == whole.frames < (size - 24) // 16
    assert sorted(streamed) == sorted(names)
    whole.close()


def test_streamed_gzip_cut_short_keeps_what_inflated(tmp_path: Path) -> None:
    import gzip

    raw = (FIXTURES / "h2_hol_drop" / "client.pcapng").read_bytes()
    packed = gzip.compress(raw)
    cut = tmp_path / "cut.pcapng.gz"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    whole = read_capture(cut)
    frames, names = _streamed(cut, window=1 << 14)
    assert "gzip_truncated" in names and "gzip_truncated" in [a["name"] for a in whole.anomalies]
    assert 0 < frames == whole.frames
    whole.close()
    empty = tmp_path / "empty.pcap.gz"
    empty.write_bytes(gzip.compress(b""))
    from pcapkit.errors import NotACapture

    with pytest.raises(NotACapture, match="empty gzip stream"):
        _streamed(empty)


def test_shards_of_a_gzip_bomb_hold_what_the_limits_let_inflate(tmp_path: Path) -> None:
    from fuzz import hostile
    from pcapkit.limits import resolve

    path = hostile.gzip_bomb(tmp_path / "bomb.pcap.gz", 6 << 20)
    limits = {"gzip_bytes": 2 << 20}
    whole = read_capture(path, limits=resolve(limits))
    res = shard_capture(path, 3, tmp_path / "shards", limits=limits, window_bytes=1 << 19)
    assert sum(res.frames) == whole.frames == ((2 << 20) - 24) // 16
    assert [a["name"] for a in res.anomalies].count("gzip_limit_exceeded") == 1
    whole.close()

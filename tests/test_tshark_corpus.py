"""Differential tests against tshark on the external corpus (../shared/corpus) and
on the project's own fixtures (fixtures/*/*.pcapng, made by the lab).

For every capture: frame count, TCP connection count, every connection's
reassembled bytes per direction (``tshark -z follow,tcp,raw,N``) and the bytes
tshark reports missing, and per packet the fields Wireshark computes (stream
index, raw and relative seq/ack, length, flags, window, options).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pcapkit

from tshark_util import CORPUS, fields, follow_tcp_many, needs_tshark

pytestmark = [needs_tshark, pytest.mark.tshark]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def corpus_files() -> list[Path]:
    files = sorted(FIXTURES.glob("*/*.pcapng"))
    if CORPUS.is_dir():
        files += sorted(set(CORPUS.glob("*/*.pcap*")) | set(CORPUS.glob("*/capture.pcap")))
    return files


FILES = corpus_files()
IDS = [f"{p.parent.name}/{p.name}" for p in FILES]


def test_corpus_is_present():
    """The external corpus is part of the differential suite wherever it exists."""
    if not CORPUS.is_dir():
        pytest.skip(f"external corpus not found at {CORPUS}")
    assert sum(1 for f in FILES if CORPUS in f.parents) >= 19


@pytest.fixture(scope="module", params=FILES, ids=IDS)
def case(request):
    path = request.param
    t = pcapkit.open(path)
    yield path, t
    t.close()


def test_frame_and_connection_counts(case):
    path, t = case
    rows = fields(path, "frame.number", "tcp.stream", "udp.stream")
    assert t.frames == len(rows)
    tcp_streams = {int(r[1]) for r in rows if r[1]}
    udp_streams = {int(r[2]) for r in rows if r[2]}
    flows = t.flows
    assert int((flows.proto == "tcp").sum()) == len(tcp_streams)
    assert int((flows.proto == "udp").sum()) == len(udp_streams)


def test_udp_payloads_match(case):
    path, t = case
    rows = fields(path, "frame.number", "udp.payload", display_filter="udp")
    ours = {}
    for r in t.flows[t.flows.proto == "udp"].itertuples():
        for d in ("c2s", "s2c"):
            for frame, payload in t.datagrams(int(r.flow), d):
                ours[frame] = payload
    assert ours == {int(r[0]): bytes.fromhex(r[1]) for r in rows}


def test_reassembled_streams_match_follow(case):
    path, t = case
    flows = t.flows[t.flows.proto == "tcp"]
    follows = follow_tcp_many(path, [int(s) for s in flows.stream])
    for r in flows.itertuples():
        fo = follows[int(r.stream)]
        ours = [t.stream(int(r.flow), "c2s"), t.stream(int(r.flow), "s2c")]
        client = f"{r.client_ip}:{r.client_port}".replace("[", "").replace("]", "")
        node0 = fo.node0.replace("[", "").replace("]", "")
        order = [0, 1] if node0 == client else [1, 0]
        for d in (0, 1):
            got = ours[order[d]]
            assert bytes(got) == fo.data[d], f"stream {r.stream} node {d}"
            # tshark reports the bytes it never saw; so do we (holes + snaplen)
            assert sum(ln for _, ln in got.gaps) == fo.missing[d], (
                f"stream {r.stream} node {d} missing"
            )
        assert r.c2s_bytes == len(ours[0]) and r.s2c_bytes == len(ours[1])


PKT_FIELDS = [
    "frame.number",
    "tcp.stream",
    "udp.stream",
    "tcp.seq",
    "tcp.seq_raw",
    "tcp.ack",
    "tcp.ack_raw",
    "tcp.len",
    "tcp.flags",
    "tcp.window_size",
    "tcp.window_size_value",
    "tcp.options.mss_val",
    "tcp.options.wscale.shift",
    "tcp.options.timestamp.tsval",
    "tcp.options.sack.count",
    "udp.length",
    "ip.ttl",
    "ipv6.hlim",
    "tcp.srcport",
    "udp.srcport",
]


def test_packet_fields_match(case):
    path, t = case
    rows = fields(path, *PKT_FIELDS)
    p = t.packets
    fl = t.flows
    mism: list[tuple] = []

    def chk(frame: int, name: str, ours, theirs: str) -> None:
        if theirs == "":
            return
        th = int(theirs.split(",")[0], 0)
        o = None if pd.isna(ours) else int(ours)
        if o != th:
            mism.append((frame, name, o, th))

    for r in rows:
        v = dict(zip(PKT_FIELDS, r, strict=False))
        fr = int(v["frame.number"])
        row = p.iloc[fr - 1]
        stream = None if pd.isna(row.flow) else fl.stream.iloc[int(row.flow)]
        if v["tcp.stream"]:
            chk(fr, "tcp.stream", stream, v["tcp.stream"])
            chk(fr, "tcp.srcport", row.sport, v["tcp.srcport"])
            chk(fr, "tcp.seq", row.rel_seq, v["tcp.seq"])
            chk(fr, "tcp.seq_raw", row.tcp_seq, v["tcp.seq_raw"])
            if int(row.tcp_flags) & 0x10:
                chk(fr, "tcp.ack", row.rel_ack, v["tcp.ack"])
                chk(fr, "tcp.ack_raw", row.tcp_ack, v["tcp.ack_raw"])
            chk(fr, "tcp.len", row.payload_len, v["tcp.len"])
            chk(fr, "tcp.flags", row.tcp_flags, v["tcp.flags"])
            chk(fr, "tcp.window_size_value", row.tcp_window, v["tcp.window_size_value"])
            # With an unknown scale Wireshark shows the raw window; we say "unknown".
            if not pd.isna(row.window):
                chk(fr, "tcp.window_size", row.window, v["tcp.window_size"])
            chk(fr, "mss", row.mss, v["tcp.options.mss_val"])
            chk(fr, "wscale", row.wscale, v["tcp.options.wscale.shift"])
            chk(fr, "tsval", row.tsval, v["tcp.options.timestamp.tsval"])
            chk(fr, "sack", row.sack_n, v["tcp.options.sack.count"])
        if v["udp.stream"]:
            chk(fr, "udp.stream", stream, v["udp.stream"])
            chk(fr, "udp.srcport", row.sport, v["udp.srcport"])
            if v["udp.length"]:
                chk(fr, "udp.len", row.payload_len, str(int(v["udp.length"]) - 8))
        chk(fr, "ttl", row.ttl, v["ip.ttl"] or v["ipv6.hlim"])
    assert not mism, mism[:10]

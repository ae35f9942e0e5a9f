"""HTTP/2 over real captures: the corpus facts (../shared/corpus/MANIFEST.md), the project's
own h2 fixtures (fixtures/h2_*), and a differential test against tshark's HTTP/2 frames.

Corpus tests skip when ../shared/corpus is absent; tshark tests skip without tshark.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from h2_trace_util import H2Flow, frame_at, h2_flows

import pcapkit
from dissectors.grpc import is_grpc
from dissectors.http2 import FrameType, StreamState

from tshark_util import CORPUS, fields, needs_corpus, needs_tshark

W = CORPUS / "wireshark"
REPO = Path(__file__).resolve().parents[3]
FIXTURES = sorted(p for p in (REPO / "fixtures").glob("*h2*/*.pcapng"))

# (capture, keylog, extra tshark options)
H2_CORPUS = [
    ("http2-data-reassembly.pcap", "keys/http2-data-reassembly.keys", []),
    ("http2-brotli.pcapng", None, []),  # key in a DSB
    ("packet-h2-14_headers.pcapng", None, ["-d", "tcp.port==3000,http2"]),
]


def corpus_flows(name: str, keys: str | None = None) -> list[H2Flow]:
    return h2_flows(W / name, W / keys if keys else None)


# ---------------------------------------------------------------------------------------
# Corpus facts
# ---------------------------------------------------------------------------------------
@needs_corpus
@pytest.mark.corpus
def test_http2_data_reassembly() -> None:
    (f,) = corpus_flows("http2-data-reassembly.pcap", "keys/http2-data-reassembly.keys")
    assert f.tls and f.errors == []
    s = f.conn.streams[1]
    assert (s.method, s.path, s.status, s.content_type) == (
        "GET",
        "/wireshark.png",
        200,
        "image/png",
    )
    data = [fr for fr in f.frames if fr.type == FrameType.DATA and fr.stream_id == 1]
    assert [fr.length for fr in data] == [16384] * 4 + [10555, 0]
    assert [fr.end_stream for fr in data] == [False] * 5 + [True]
    assert s.response_body_bytes == 76_091
    body = s.body("s2c")
    assert len(body) == 76_091 and body.count(b"PNG") == 1 and body.count(b"END") == 1
    assert body.startswith(b"\x89PNG\r\n\x1a\n")
    # the END_STREAM DATA frame was completed by capture frame 37
    assert frame_at(f, "s2c", data[-1].end - 1) == 37
    assert s.state == StreamState.CLOSED


@needs_corpus
@pytest.mark.corpus
def test_packet_h2_14_headers() -> None:
    (f,) = corpus_flows("packet-h2-14_headers.pcapng")
    assert not f.tls and f.errors == []
    s = f.conn.streams[1]
    assert s.request_headers is not None and s.response_headers is not None
    assert [v for _, v in s.request_headers.headers or ()] == [
        "localhost:3000",
        "GET",
        "/doc/manual/html/index.html",
        "http",
        "*/*",
        "gzip, deflate",
        "nghttp2/0.5.2-DEV",
    ]
    assert frame_at(f, "c2s", s.request_headers.end - 1) == 6
    assert [v for _, v in (s.response_headers.headers or ())][:4] == [
        "200",
        "nghttpd nghttp2/0.5.2-DEV",
        "22617",
        "max-age=3600",
    ]
    assert frame_at(f, "s2c", s.response_headers.end - 1) == 10
    assert s.response_body_bytes == 22617
    in_14 = [
        fr.stream_id
        for fr in f.frames
        if fr.type == FrameType.HEADERS and frame_at(f, fr.direction, fr.end - 1) == 14
    ]
    assert in_14 == [5, 7, 9, 11]


@needs_corpus
@pytest.mark.corpus
def test_http2_brotli() -> None:
    (f,) = corpus_flows("http2-brotli.pcapng")
    assert f.tls and f.errors == []
    s = f.conn.streams[1]
    assert (s.method, s.path, s.status) == ("GET", "/test.txt", 200)
    assert s.response_headers is not None
    assert s.response_headers.get("content-encoding") == "br"
    assert s.response_body_bytes == 52 == int(s.response_headers.get("content-length") or 0)
    (chunk,) = s.body_chunks["s2c"]
    assert frame_at(f, "s2c", chunk.end - 1) == 20
    brotli = pytest.importorskip("brotli", reason="brotli not installed: text check skipped")
    text = brotli.decompress(s.body("s2c"))
    assert b"This is a test file for testing brotli decompression in Wireshark" in text


@needs_corpus
@pytest.mark.corpus
def test_tls13_rfc8446_carries_no_h2() -> None:
    """MANIFEST: HTTP/1.1 inside; nothing may be mistaken for HTTP/2."""
    assert corpus_flows("tls13-rfc8446.pcap", "keys/tls13-rfc8446.keys") == []
    t = pcapkit.open(W / "tls13-rfc8446.pcap", keylog=W / "keys/tls13-rfc8446.keys")
    assert t.plaintext(0, "c2s").startswith(b"GET /first HTTP/1.1")  # the check has teeth


# ---------------------------------------------------------------------------------------
# The project's fixtures
# ---------------------------------------------------------------------------------------
def scenario(path: Path) -> dict:
    return json.loads((path.parent / "scenario.json").read_text())


# the h2 lab module's fixtures (N streams × body_len); the SSE / send-buffer ones
# (pcapkit/lab/scenarios/h2_stream.py) are checked in tests/test_h2_stream_fixtures.py
BLOB_FIXTURES = [p for p in FIXTURES if "streams" in scenario(p)["params"]]


@pytest.mark.parametrize("path", BLOB_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_exchanges(path: Path) -> None:
    sc = scenario(path)
    (f,) = h2_flows(path)
    assert f.errors == [] and f.tls
    n, body_len = sc["params"]["streams"], sc["params"]["body_len"]
    assert sorted(f.conn.streams) == [2 * i + 1 for i in range(n)]
    for s in f.conn.streams.values():
        assert s.method == "GET" and s.status == 200 and s.authority == "pcapkit.lab"
        assert s.state == StreamState.CLOSED
        assert s.response_body_bytes == body_len  # body_len is per stream
        assert len(s.body("s2c")) == s.response_body_bytes
        assert not is_grpc(s)
    # the server's SETTINGS_INITIAL_WINDOW_SIZE as the lab configured it
    want = sc["ground_truth"].get("client_window")
    if want:
        assert f.conn.settings["c2s"].get(4, 65535) == want


def test_fixture_flow_control_stalls() -> None:
    """Server vantage: the sender's windows hit 0 exactly at the 3 stalls of the ground truth,
    and each is reopened by the client's WINDOW_UPDATE in the frames the README names."""
    path = REPO / "fixtures" / "h2_flow_control" / "server.pcapng"
    (f,) = h2_flows(path)
    stalls = scenario(path)["ground_truth"]["stalls"]
    series = f.conn.window_series
    zero = [
        i
        for i, w in enumerate(series)
        if w.cause == "DATA" and min(w.stream_window or 0, w.connection_window) <= 0
    ]
    assert len(zero) == len(stalls) == 3
    reopen_frames = []
    for i in zero:
        nxt = next(w for w in series[i + 1 :] if w.cause == "WINDOW_UPDATE")
        assert nxt.sender == "s2c" and nxt.frame_direction == "c2s"
        reopen_frames.append(frame_at(f, "c2s", nxt.end - 1))
    assert reopen_frames == [75, 116, 144]
    # bytes sent when blocked = the ground truth's bytes_sent
    data = [fr for fr in f.frames if fr.type == FrameType.DATA]
    totals = []
    for i in zero:
        w = series[i]
        totals.append(sum(fr.data_length or 0 for fr in data if fr.offset <= w.offset))
    assert totals == [s["bytes_sent"] for s in stalls]


def test_fixture_large_windows_never_stall() -> None:
    (f,) = h2_flows(REPO / "fixtures" / "h2_flow_control_large" / "server.pcapng")
    assert all(
        min(w.stream_window or 1, w.connection_window) > 0
        for w in f.conn.window_series
        if w.cause == "DATA"
    )
    assert f.conn.settings["c2s"][4] == 16_777_216


# ---------------------------------------------------------------------------------------
# Differential: tshark's HTTP/2 frames
# ---------------------------------------------------------------------------------------
def tshark_frames(
    path: Path, extra: list[str]
) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
    """(srcport, dstport) -> [(stream id, type, length)] in tshark's order."""
    out: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
    rows = fields(
        path,
        "tcp.srcport",
        "tcp.dstport",
        "http2.streamid",
        "http2.type",
        "http2.length",
        display_filter="http2.type",
        extra=extra,
    )
    for src, dst, sids, types, lengths in rows:
        for sid, t, ln in zip(sids.split(","), types.split(","), lengths.split(","), strict=True):
            out[(int(src), int(dst))].append((int(sid), int(t), int(ln)))
    return out


def per_stream(seq: list[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    d: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for sid, t, ln in seq:
        d[sid].append((t, ln))
    return dict(d)


def compare_with_tshark(path: Path, keylog: Path | None, extra: list[str]) -> int:
    ours = h2_flows(path, keylog)
    assert ours
    opts = list(extra) + ["-o", "tcp.reassemble_out_of_order:TRUE"]
    if keylog is not None:
        opts += ["-o", f"tls.keylog_file:{keylog}"]
    theirs = tshark_frames(path, opts)
    t = pcapkit.open(path, keylog=keylog)
    n = 0
    for f in ours:
        row = t.flows.iloc[f.flow]
        cp, sp = int(row.client_port), int(row.server_port)
        for d, key in (("c2s", (cp, sp)), ("s2c", (sp, cp))):
            mine = [(fr.stream_id, fr.type, fr.length) for fr in f.frames if fr.direction == d]
            assert per_stream(mine) == per_stream(theirs.get(key, [])), (path.name, d)
            n += len(mine)
    return n


@needs_tshark
@needs_corpus
@pytest.mark.tshark
@pytest.mark.corpus
@pytest.mark.parametrize("name,keys,extra", H2_CORPUS, ids=[c[0] for c in H2_CORPUS])
def test_tshark_http2_frames_corpus(name: str, keys: str | None, extra: list[str]) -> None:
    assert compare_with_tshark(W / name, W / keys if keys else None, extra) > 5


@needs_tshark
@pytest.mark.tshark
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_tshark_http2_frames_fixtures(path: Path) -> None:
    assert compare_with_tshark(path, None, []) > 10

"""HTTP/3 on real captures: the lab's h3 fixtures (aioquic client and server, keys in
pcapng DSBs) and the corpus's illustrated-quic (QUIC, but not HTTP/3).

The fixtures' requests are those ``pcapkit/lab/scenarios/h3.py`` makes: ``params.streams``
GET requests, ``:path`` ``/blob/<i>`` on the client's i-th bidirectional stream (0, 4, 8,
…), each answered ``200`` with ``content-type: application/octet-stream`` and a body of
``params.body_len`` octets ``bytes(range(256))`` repeated; ``ground_truth.stream_bytes``
gives each stream's body length as the lab's client counted it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from h3_capture import CORPUS, FIXTURES, h3_flows

from dissectors.http3 import C2S, S2C, FrameType, StreamKind

CASES = [
    (FIXTURES / fx / f"{vantage}.pcapng", vantage)
    for fx in ("h3_streams_drop", "h3_streams_nodrop")
    for vantage in ("client", "server")
]


@pytest.mark.parametrize(("path", "vantage"), CASES, ids=[f"{p.parent.name}-{v}" for p, v in CASES])
def test_fixture_exchanges_match_scenario(path: Path, vantage: str) -> None:
    scenario = json.loads((path.parent / "scenario.json").read_text())
    params = scenario["params"]
    stream_bytes = {int(k): v for k, v in scenario["ground_truth"]["stream_bytes"].items()}
    assert scenario["tls"]["alpn"] == "h3"
    (flow,) = h3_flows(path)
    assert flow.quic.alpn == "h3"
    h3 = flow.h3
    assert h3 is not None
    assert sorted(h3.streams) == sorted(stream_bytes) == [4 * i for i in range(params["streams"])]
    body = (bytes(range(256)) * (params["body_len"] // 256 + 1))[: params["body_len"]]
    for i, sid in enumerate(sorted(h3.streams)):
        ex = h3.streams[sid]
        assert (ex.method, ex.scheme, ex.path) == ("GET", "https", f"/blob/{i}")
        assert ex.authority == "pcapkit.lab"
        assert ex.status == 200 and ex.content_type == "application/octet-stream"
        assert ex.response_headers is not None
        assert ex.response_headers.get("content-length") == str(params["body_len"])
        assert ex.response_body_bytes == stream_bytes[sid] == params["body_len"]
        assert ex.body(S2C) == body
        assert ex.request_body_bytes == 0
        # RFC 9114 §4.1: each message ends with its stream (FIN) at the QUIC final size
        for d in (C2S, S2C):
            assert ex.end_stream_offset[d] == flow.quic.stream_bytes(sid, d).final_size
            assert ex.end_stream_offset[d] is not None
        assert not ex.headers_unknown
    # both endpoints' control and QPACK streams, SETTINGS with aioquic's QPACK parameters
    kinds = {(t.direction, t.kind) for t in h3.stream_types.values()}
    assert kinds == {
        (d, k)
        for d in (C2S, S2C)
        for k in (StreamKind.CONTROL, StreamKind.QPACK_ENCODER, StreamKind.QPACK_DECODER)
    }
    for d in (C2S, S2C):
        assert h3.settings[d][0x1] > 0 and h3.settings[d][0x7] > 0
    assert not h3.errors
    # every frame tiles its stream: frames of one stream direction are contiguous
    by: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for f in h3.frames:
        by.setdefault((f.stream_id, f.direction), []).append((f.offset, f.end))
    for (sid, d), spans in by.items():
        for (_, e), (s, _) in zip(spans, spans[1:], strict=False):
            assert e == s, (sid, d)
        assert spans[-1][1] == flow.quic.stream_bytes(sid, d).end or sid & 2


def test_drop_fixture_stream0_completes_after_the_lost_bytes() -> None:
    """h3_streams_drop, client vantage: the s2c packet carrying stream 0 bytes at offset
    5797 was dropped (scenario ground truth); stream 0's DATA frame can only complete once
    those bytes arrive, while the other streams are not held up by it (RFC 9000 §2.2)."""
    path = FIXTURES / "h3_streams_drop" / "client.pcapng"
    scenario = json.loads((path.parent / "scenario.json").read_text())
    (drop,) = scenario["ground_truth"]["drops"]
    sid, off, _length, _fin = drop["stream_frames"][0]
    (flow,) = h3_flows(path)
    assert flow.h3 is not None
    (row,) = [
        r
        for r in flow.quic.stream_frames
        if r.stream_id == sid and r.direction == S2C and r.offset == off
    ]
    (chunk,) = flow.h3.streams[sid].body_chunks[S2C]
    assert chunk.frame is not None and chunk.frame >= row.frame
    data = [f for f in flow.h3.frames if f.type == FrameType.DATA and f.direction == S2C]
    assert len(data) == 4


@pytest.mark.corpus
@pytest.mark.skipif(not (CORPUS / "illustrated-quic").is_dir(), reason="corpus absent")
def test_illustrated_quic_is_not_http3() -> None:
    """illustrated-quic negotiates ALPN "ping/1.0" (MANIFEST.md): not HTTP/3 (RFC 9114 §3.1
    needs "h3"), so it is not dissected as such; forced, its "ping" bytes make no exchange."""
    base = CORPUS / "illustrated-quic"
    (flow,) = h3_flows(base / "capture.pcap", base / "keylog.txt")
    assert flow.quic.alpn == "ping/1.0"
    assert flow.quic.stream_bytes(0, C2S).data == b"ping"
    assert flow.h3 is None
    (forced,) = h3_flows(base / "capture.pcap", base / "keylog.txt", force=True)
    assert forced.h3 is not None
    assert all(ex.request_headers is None for ex in forced.h3.streams.values())
    assert forced.h3.errors  # "ping" is no valid HTTP/3 frame sequence

"""HTTP/1.1 framing (RFC 9112) and SSE (WHATWG HTML §9.2.6) on SYNTHETIC byte strings.

The byte strings here are hand-written protocol text exercising edge cases; real traffic
is covered by the fixture tests (tests/test_requests.py).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors.errors import DissectError
from dissectors.http1 import (
    Http1Body,
    Http1End,
    Http1Head,
    Http1Malformed,
    Http1Parser,
    Http1Tunnel,
    dissect_connection,
    looks_like_http1,
)
from dissectors.sse import SseComment, SseEvent, SseParser

REQS = (
    b"GET /v1/stream HTTP/1.1\r\nHost: api.example\r\nAccept: text/event-stream\r\n\r\n"
    b"POST /v1/chat HTTP/1.1\r\nHost: api.example\r\nContent-Length: 5\r\n\r\nhello"
    b"HEAD /x HTTP/1.1\r\nHost: api.example\r\n\r\n"
    b"PUT /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
)
RESPS = (
    b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"f\r\ndata: token 1\n\n\r\nf;ext=1\r\ndata: token 2\n\n\r\n0\r\nGrpc-Status: 0\r\n\r\n"
    b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
    b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"  # answers HEAD: no body
    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ntail bytes until close"
)


def _run(parser: Http1Parser, data: bytes, sizes: list[int] | None = None) -> list[object]:
    out: list[object] = []
    i = 0
    for s in sizes or [len(data)]:
        out += parser.feed(data[i : i + s])
        i += s
    out += parser.feed(data[i:])
    out += parser.close()
    return out


def _normal(items: list[object]) -> list[object]:
    """Heads/ends/tunnels as they are; body pieces merged per message (their split
    follows the input by design)."""
    res: list[object] = []
    for it in items:
        if isinstance(it, Http1Body) and res and isinstance(res[-1], tuple):
            msg, start, data = res[-1]
            if msg == it.message and start + len(data) == it.body_offset:
                res[-1] = (msg, start, data + it.data)
                continue
        if isinstance(it, Http1Body):
            res.append((it.message, it.body_offset, it.data))
        elif isinstance(it, Http1Tunnel):
            if res and isinstance(res[-1], Http1Tunnel):
                prev = res[-1]
                res[-1] = Http1Tunnel(
                    offset=prev.offset, length=prev.length + it.length, data=prev.data + it.data
                )
            else:
                res.append(it)
        else:
            res.append(it)
    return res


def test_pipelined_connection_pairs_responses_with_requests() -> None:
    conn = dissect_connection(REQS, RESPS)
    assert not conn.error
    reqs = [h for h in conn.c2s if isinstance(h, Http1Head)]
    assert [(h.method, h.target) for h in reqs] == [
        ("GET", "/v1/stream"),
        ("POST", "/v1/chat"),
        ("HEAD", "/x"),
        ("PUT", "/up"),
    ]
    req_ends = [e for e in conn.c2s if isinstance(e, Http1End)]
    assert [(e.framing, e.body_bytes) for e in req_ends] == [
        ("none", 0),
        ("content-length", 5),
        ("none", 0),
        ("chunked", 3),
    ]
    heads = [h for h in conn.s2c if isinstance(h, Http1Head)]
    assert [(h.message, h.status, h.interim) for h in heads] == [
        (0, 100, True),
        (0, 200, False),
        (1, 201, False),
        (2, 200, False),
        (3, 200, False),
    ]
    ends = [e for e in conn.s2c if isinstance(e, Http1End)]
    assert [(e.message, e.framing, e.body_bytes, e.complete) for e in ends] == [
        (0, "chunked", 30, True),
        (1, "content-length", 2, True),
        (2, "none", 0, True),  # HEAD: Content-Length describes the GET it stands for
        (3, "close", len(b"tail bytes until close"), True),
    ]
    assert ends[0].trailers == (("Grpc-Status", "0"),)
    body0 = b"".join(b.data for b in conn.s2c if isinstance(b, Http1Body) and b.message == 0)
    assert body0 == b"data: token 1\n\ndata: token 2\n\n"
    # every body piece sits at its stream offset
    for b in conn.s2c:
        if isinstance(b, Http1Body):
            assert RESPS[b.offset : b.end] == b.data


def test_head_get_is_case_insensitive_and_joins_repeats() -> None:
    p = Http1Parser(is_request=False)
    items = p.feed(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n"
    )
    head = items[0]
    assert isinstance(head, Http1Head)
    assert head.status == 429 and head.reason == "Too Many Requests"
    assert head.get("retry-after") == "3" and head.get("X-A") == "1, 2"
    assert head.get("missing") is None


def test_lf_only_lines_and_obs_fold_are_accepted() -> None:
    p = Http1Parser(is_request=True)
    items = _run(p, b"\r\nGET / HTTP/1.0\nHost: a\nX-Long: one\n two\n\n")
    head = items[0]
    assert isinstance(head, Http1Head)
    assert head.version == "HTTP/1.0" and head.get("x-long") == "one two"
    assert head.offset == 2  # the leading empty line is skipped (RFC 9112 §2.2)


def test_upgrade_101_switches_and_declined_upgrade_does_not() -> None:
    req = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    ok = dissect_connection(
        req,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    )
    tun = [t for t in ok.c2s if isinstance(t, Http1Tunnel)]
    assert len(tun) == 1 and tun[0].data.startswith(b"PRI * HTTP/2.0")
    assert isinstance(ok.s2c[-1], Http1Tunnel) and ok.s2c[-1].data.startswith(b"\x00\x00\x00\x04")
    req2 = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n"
    no = dissect_connection(
        req2, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
    )
    assert [h.target for h in no.c2s if isinstance(h, Http1Head)] == ["/", "/next"]
    assert not any(isinstance(t, Http1Tunnel) for t in no.c2s)


def test_connect_tunnel() -> None:
    conn = dissect_connection(
        b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n\x16\x03\x01\x00\x05hello",
        b"HTTP/1.1 200 Connection established\r\n\r\n\x16\x03\x03",
    )
    assert isinstance(conn.c2s[-1], Http1Tunnel) and conn.c2s[-1].data.startswith(b"\x16\x03\x01")
    assert isinstance(conn.s2c[-1], Http1Tunnel)


def test_close_marks_unfinished_message_incomplete() -> None:
    p = Http1Parser(is_request=False)
    items = p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
    items += p.close()
    end = items[-1]
    assert isinstance(end, Http1End) and not end.complete and end.body_bytes == 3


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n",
        b"HTTPS/1.1 200 OK\r\n\r\n",
    ],
)
def test_malformed_raises_and_stays_failed(data: bytes) -> None:
    p = Http1Parser(is_request=False)
    with pytest.raises(Http1Malformed):
        p.feed(data)
    assert p.failed
    with pytest.raises(Http1Malformed):
        p.feed(b"more")


def test_malformed_keeps_records_before_the_error() -> None:
    p = Http1Parser(is_request=False)
    with pytest.raises(Http1Malformed) as ei:
        p.feed(b"HTTP/1.1 204 No Content\r\n\r\nnot http at all\r\n\r\n")
    assert [type(r).__name__ for r in ei.value.records] == ["Http1Head", "Http1End"]


def test_looks_like_http1() -> None:
    assert looks_like_http1(b"GET / HTTP/1.1\r\n")
    assert looks_like_http1(b"HTTP/1.1 200 OK\r\n")
    assert not looks_like_http1(b"\x16\x03\x01\x02\x00")
    assert not looks_like_http1(b"PRX * HTTP/2.0")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), max_size=60))
def test_http1_chunking_invariance(sizes: list[int]) -> None:
    methods = ["GET", "POST", "HEAD", "PUT"]
    whole = _normal(_run(Http1Parser(is_request=False, request_methods=methods), RESPS))
    split = _normal(_run(Http1Parser(is_request=False, request_methods=methods), RESPS, sizes))
    assert split == whole
    whole_r = _normal(_run(Http1Parser(is_request=True), REQS))
    assert _normal(_run(Http1Parser(is_request=True), REQS, sizes)) == whole_r


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_http1_garbage_raises_only_dissect_errors(data: bytes, is_request: bool) -> None:
    p = Http1Parser(is_request=is_request)
    try:
        p.feed(data)
        p.close()
    except DissectError:
        pass


# -- SSE -------------------------------------------------------------------------------
SSE = (
    "\ufeff: heartbeat\r\n\r\n"
    "data: token 1\n\n"
    "event: delta\r\nid: 7\r\ndata: a\r\ndata:b\r\nretry: 250\r\n\r\n"
    "data\n\n"  # a field name alone: empty data, still dispatched
    "id: x\x00y\nevent: e\n\n"  # no data: not dispatched, id with NULL ignored
    "data: café ✓\r\r"
    "data: tail-without-blank-line\n"
).encode()


def _sse(data: bytes, sizes: list[int] | None = None) -> list[object]:
    p = SseParser()
    out: list[object] = []
    i = 0
    for s in sizes or []:
        out += p.feed(data[i : i + s])
        i += s
    out += p.feed(data[i:])
    return out


def test_sse_fields_and_dispatch() -> None:
    items = _sse(SSE)
    events = [e for e in items if isinstance(e, SseEvent)]
    assert [(e.index, e.event, e.data, e.id) for e in events] == [
        (0, "message", "token 1", None),
        (1, "delta", "a\nb", "7"),
        (2, "message", "", "7"),
        (3, "message", "café ✓", "7"),
    ]
    assert events[1].retry_ms == 250
    comments = [c for c in items if isinstance(c, SseComment)]
    assert [c.text for c in comments] == ["heartbeat"]
    # offsets: the event's bytes end at its dispatching terminator
    raw = SSE
    e0 = events[0]
    assert raw[e0.offset : e0.end] == b"data: token 1\n\n"
    e3 = events[3]
    assert raw[e3.offset : e3.end] == "data: café ✓\r\r".encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=12), max_size=40))
def test_sse_chunking_invariance(sizes: list[int]) -> None:
    assert _sse(SSE, sizes) == _sse(SSE)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_sse_garbage_never_raises(data: bytes) -> None:
    _sse(data)
    _sse(data, [1] * len(data))


def test_close_reports_a_head_the_stream_ended_inside() -> None:
    from dissectors.http1 import Http1PartialHead

    p = Http1Parser(is_request=True)
    assert p.feed(b"\r\nGET /a HTTP/1.0\r\nHost: x\r\nAccept: te") == []
    (h,) = p.close()
    assert isinstance(h, Http1PartialHead)
    assert (h.offset, h.length, h.message) == (2, 36, 0)  # 17 + 9 + 10 bytes
    assert (h.method, h.target, h.version) == ("GET", "/a", "HTTP/1.0")
    assert h.headers == (("Host", "x"),) and h.get("host") == "x"
    # the start line itself cut: nothing but the span
    p = Http1Parser(is_request=True)
    p.feed(b"GET /only-a-pa")
    (h,) = p.close()
    assert (h.method, h.headers, h.length) == (None, (), 14)
    # a response: the status line and the whole field lines that parse
    p = Http1Parser(is_request=False)
    p.feed(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nbad line\r\nX-Cut: 1")
    (h,) = p.close()
    assert (h.status, h.version, h.is_request) == (200, "HTTP/1.1", False)
    assert h.headers == (("Content-Type", "text/plain"),)
    # nothing pending: nothing to report
    p = Http1Parser(is_request=True)
    p.feed(b"GET / HTTP/1.1\r\n\r\n")
    assert p.close() == []


def test_close_reports_nothing_for_bytes_that_cannot_start_a_head() -> None:
    for is_request, data in [
        (True, b"GET /download\n"),  # a whole line, but no HTTP version: not HTTP/1.x
        (True, b"\x16\x03\x01\x02\x00\x01"),  # TLS, cut
        (False, b"\x00\x01\x02\x03\t\n\x0b"),  # binary
        (False, b"HTTX"),
    ]:
        p = Http1Parser(is_request=is_request)
        try:
            p.feed(data)
        except DissectError:
            continue
        assert p.close() == [], data
    p = Http1Parser(is_request=False)
    p.feed(b"HTTP/1.")
    (h,) = p.close()
    assert h.length == 7 and h.status is None

"""gRPC length-prefixed messages and status (grpc PROTOCOL-HTTP2.md) over dissectors.http2."""

from __future__ import annotations

from h2_build import PREFACE, Encoders, data, headers, settings, settings_ack
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from dissectors.grpc import (
    MAX_BUFFERED_MESSAGE,
    GrpcError,
    GrpcItem,
    GrpcMessage,
    GrpcMessageParser,
    dissect_grpc_stream,
    grpc_status,
    is_grpc,
)
from dissectors.http2 import H2Connection, H2Event


def lpm(msg: bytes, compressed: int = 0) -> bytes:
    return bytes((compressed,)) + len(msg).to_bytes(4, "big") + msg


def feed_chunks(chunks: list[tuple[int, bytes]], keep: bool = True) -> list[GrpcItem]:
    p = GrpcMessageParser(keep_data=keep)
    out: list[GrpcItem] = []
    for off, b in chunks:
        out += p.feed(b, off)
    return out + p.close()


def test_messages_across_chunks_with_offsets() -> None:
    body = lpm(b"hello") + lpm(b"", 0) + lpm(b"world!", 1)
    # chunk 1 at stream offset 100 (7 octets), chunk 2 at 500 (the rest)
    items = feed_chunks([(100, body[:7]), (500, body[7:])])
    msgs = [i for i in items if isinstance(i, GrpcMessage)]
    assert [(m.compressed_flag, m.length, m.data) for m in msgs] == [
        (0, 5, b"hello"),
        (0, 0, b""),
        (1, 6, b"world!"),
    ]
    # first message: prefix at 100, last octet (body 9) in chunk 2 at 500 + (9 - 7)
    assert (msgs[0].offset, msgs[0].end, msgs[0].body_offset) == (100, 503, 0)
    assert (msgs[1].offset, msgs[1].end, msgs[1].body_offset) == (503, 508, 10)
    assert (msgs[2].offset, msgs[2].end, msgs[2].body_offset) == (508, 500 + len(body) - 7, 15)
    assert msgs[2].compressed and not msgs[0].compressed
    assert [i for i in items if isinstance(i, GrpcError)] == []


def test_truncated_and_invalid_flag_and_gap() -> None:
    items = feed_chunks([(0, lpm(b"abc", 7) + lpm(b"long message")[:9])])
    names = [i.name for i in items if isinstance(i, GrpcError)]
    assert names == ["invalid_compressed_flag", "message_truncated"]
    p = GrpcMessageParser()
    out = p.feed(lpm(b"0123456789")[:8], 0) + p.feed_gap(4) + p.feed(b"789", 20)
    (m,) = [i for i in out if isinstance(i, GrpcMessage)]
    assert m.missing == 4 and m.data is None and m.end == 23
    out = p.feed_gap(3)  # inside a prefix: the boundary is lost
    assert [i.name for i in out if isinstance(i, GrpcError)] == ["lost_boundary"]
    assert p.feed(lpm(b"x"), 30) == []


def test_huge_length_is_not_buffered() -> None:
    p = GrpcMessageParser()
    n = MAX_BUFFERED_MESSAGE + 1
    out = p.feed(b"\x00" + n.to_bytes(4, "big"), 0)
    assert out == [] and p._data is None  # noqa: SLF001 - the memory cap itself
    out = p.feed(bytes(n), 5)
    (m,) = out
    assert m.length == n and m.data is None and m.end == 5 + n


@given(
    st.lists(st.tuples(st.binary(max_size=40), st.integers(0, 1)), max_size=8),
    st.data(),
)
@hsettings(max_examples=200, deadline=None)
def test_chunking_invariance(msgs: list[tuple[bytes, int]], draw: st.DataObject) -> None:
    body = b"".join(lpm(m, c) for m, c in msgs)
    # the body as one DATA payload at offset 1000 ...
    whole = feed_chunks([(1000, body)])
    # ... and the same octets split into pieces that keep their stream offsets
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(body)), max_size=10)))
    pieces, prev = [], 0
    for c in [*cuts, len(body)]:
        pieces.append((1000 + prev, body[prev:c]))
        prev = c
    assert feed_chunks(pieces) == whole
    assert [(m.data, m.compressed_flag) for m in whole if isinstance(m, GrpcMessage)] == msgs


@given(st.lists(st.binary(max_size=30), max_size=10))
@hsettings(max_examples=300, deadline=None)
def test_garbage_gives_items_only(chunks: list[bytes]) -> None:
    p = GrpcMessageParser()
    off = 0
    for i, c in enumerate(chunks):
        for it in p.feed(c, off) if i % 4 != 3 else p.feed_gap(len(c)):
            assert isinstance(it, GrpcMessage | GrpcError)
        off += len(c) + 9
    for it in p.close():
        assert isinstance(it, GrpcMessage | GrpcError)


def grpc_connection(trailers_only: bool = False) -> tuple[H2Connection, list[H2Event]]:
    e = Encoders()
    req = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "svc"),
        (":path", "/pkg.Echo/Say"),
        ("content-type", "application/grpc+proto"),
        ("te", "trailers"),
        ("grpc-encoding", "identity"),
    ]
    m1, m2 = lpm(b"ping-1"), lpm(b"ping-2" * 10)
    w = [
        ("c2s", PREFACE + settings()),
        ("s2c", settings()),
        ("c2s", settings_ack()),
        ("s2c", settings_ack()),
        ("c2s", headers(1, e.block("c2s", req))),
        ("c2s", data(1, m1 + m2[:3]) + data(1, m2[3:], end=True, pad=4)),
    ]
    if trailers_only:
        w.append(
            (
                "s2c",
                headers(
                    1,
                    e.block(
                        "s2c",
                        [
                            (":status", "200"),
                            ("content-type", "application/grpc"),
                            ("grpc-status", "12"),
                            ("grpc-message", "no%20such%20method%3A%20%E2%9C%93"),
                        ],
                    ),
                    end_stream=True,
                ),
            )
        )
    else:
        r1 = lpm(b"pong")
        w += [
            (
                "s2c",
                headers(
                    1, e.block("s2c", [(":status", "200"), ("content-type", "application/grpc")])
                ),
            ),
            ("s2c", data(1, r1[:2]) + data(1, r1[2:])),
            (
                "s2c",
                headers(
                    1, e.block("s2c", [("grpc-status", "0"), ("grpc-message", "")]), end_stream=True
                ),
            ),
        ]
    conn = H2Connection()
    offs = {"c2s": 0, "s2c": 0}
    ev: list[H2Event] = []
    for d, b in w:
        ev += conn.feed(d, b, offs[d])
        offs[d] += len(b)
    return conn, ev + conn.close()


def test_grpc_call_over_h2() -> None:
    conn, _ = grpc_connection()
    s = conn.streams[1]
    assert is_grpc(s)
    call = dissect_grpc_stream(s)
    assert call.path == "/pkg.Echo/Say" and call.encoding["c2s"] == "identity"
    assert [m.data for m in call.messages["c2s"]] == [b"ping-1", b"ping-2" * 10]
    assert [m.data for m in call.messages["s2c"]] == [b"pong"]
    # the second request message ends at the last data octet of the padded DATA frame
    last_chunk = s.body_chunks["c2s"][-1]
    assert call.messages["c2s"][1].end == last_chunk.end
    assert call.messages["c2s"][0].offset == s.body_chunks["c2s"][0].offset
    assert call.status is not None and call.status.code == 0 and not call.status.trailers_only
    assert call.errors == {"c2s": [], "s2c": []}


def test_grpc_trailers_only() -> None:
    conn, _ = grpc_connection(trailers_only=True)
    st_ = grpc_status(conn.streams[1])
    assert st_ is not None
    assert st_.code == 12 and st_.trailers_only
    assert st_.message == "no such method: \u2713"
    call = dissect_grpc_stream(conn.streams[1])
    assert call.messages["s2c"] == [] and len(call.messages["c2s"]) == 2

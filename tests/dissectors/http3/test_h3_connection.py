"""H3Connection: exchanges, QPACK blocking (RFC 9204 §2.1.2) and stream delivery order.

Field sections and encoder streams are made with ``pylsqpack.Encoder`` (ls-qpack), as a
real endpoint would; frames per RFC 9114 §7.1.
"""

from __future__ import annotations

import pylsqpack
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors._wire import encode_varint as v
from dissectors.http3 import (
    C2S,
    S2C,
    H3Connection,
    H3Error,
    HeaderBlock,
    QpackBlocked,
    SettingsParameter,
    StreamKind,
)

CAP, BLOCKED = 4096, 16


def fr(ftype: int, payload: bytes) -> bytes:
    return v(ftype) + v(len(payload)) + payload


def settings_frame(cap: int = CAP, blocked: int = BLOCKED) -> bytes:
    return fr(0x4, v(0x1) + v(cap) + v(0x7) + v(blocked))


REQ = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"example.com")]
X = [(b"x-long-custom-header", b"a value worth indexing in the dynamic table")]


def client_side() -> tuple[bytes, dict[int, bytes]]:
    """Client encoder-stream bytes (type octet included) and HEADERS frames per stream:
    stream 0 inserts entries, stream 4 references them (§2.1.2: may block)."""
    enc = pylsqpack.Encoder()
    estream = v(0x02) + enc.apply_settings(CAP, BLOCKED)
    heads = {}
    for sid in (0, 4):
        e, block = enc.encode(sid, [*REQ, (b":path", f"/r{sid}".encode()), *X])
        estream += e
        heads[sid] = fr(0x1, block)
    return estream, heads


def response(status: bytes, body: bytes, *, extra: list[tuple[bytes, bytes]] = ()) -> bytes:  # type: ignore[assignment]
    enc = pylsqpack.Encoder()
    out = b""
    if status != b"200":
        out += fr(0x1, enc.encode(0, [(b":status", b"103"), (b"link", b"</a>")])[1])
    out += fr(0x1, enc.encode(0, [(b":status", status), (b"content-type", b"text/plain")])[1])
    out += fr(0x0, body[:3]) + fr(0x0, body[3:])
    if extra:
        out += fr(0x1, enc.encode(0, list(extra))[1])
    return out


def open_connection(h3: H3Connection) -> None:
    h3.feed(3, S2C, v(0x00) + settings_frame(), 0, frame=1, ts_ns=1000)
    h3.feed(2, C2S, v(0x00) + settings_frame(0, 0), 0, frame=2, ts_ns=2000)


def test_exchange_shape() -> None:
    h3 = H3Connection()
    open_connection(h3)
    estream, heads = client_side()
    h3.feed(6, C2S, estream, 0, frame=3, ts_ns=3000)
    h3.feed(0, C2S, heads[0], 0, fin=True, frame=4, ts_ns=4000)
    resp = response(b"201", b"hello world", extra=[(b"grpc-status", b"0")])
    h3.feed(0, S2C, resp, 0, fin=True, frame=5, ts_ns=5000)
    h3.close()
    ex = h3.streams[0]
    assert (ex.method, ex.scheme, ex.authority, ex.path) == ("GET", "https", "example.com", "/r0")
    assert ex.request_headers is not None
    assert ex.request_headers.get("x-long-custom-header") == X[0][1].decode()
    assert ex.status == 201 and ex.content_type == "text/plain"
    assert [b.get(":status") for b in ex.informational] == ["103"]  # §4.1 interim kept
    assert ex.response_trailers is not None and ex.response_trailers.get("grpc-status") == "0"
    assert ex.response_body_bytes == 11 and ex.body(S2C) == b"hello world"
    assert [(c.offset, c.length) for c in ex.body_chunks[S2C]] == [
        (c.frame_offset + 2, c.length) for c in ex.body_chunks[S2C]
    ]
    assert ex.end_stream_offset == {C2S: len(heads[0]), S2C: len(resp)}
    assert h3.settings[S2C][SettingsParameter.QPACK_MAX_TABLE_CAPACITY] == CAP
    assert h3.stream_kind(6, C2S) is StreamKind.QPACK_ENCODER
    assert not h3.errors and not h3.blocked


def test_blocked_section_reported_and_resumed() -> None:
    """The section of stream 4 arrives before the encoder instructions it references
    (ls-qpack indexes a field the second time it sees it, so stream 0 needs no inserts)."""
    h3 = H3Connection()
    open_connection(h3)
    estream, heads = client_side()
    h3.feed(0, C2S, heads[0], 0, fin=True, frame=3, ts_ns=3000)
    h3.feed(4, C2S, heads[4], 0, fin=True, frame=4, ts_ns=4000)
    assert h3.streams[0].path == "/r0" and h3.streams[4].request_headers is None
    evs = h3.feed(6, C2S, estream, 0, frame=5, ts_ns=9000)
    h3.close()
    blocked = [e for e in evs if isinstance(e, QpackBlocked)]
    assert blocked == h3.blocked and len(blocked) == 1
    b = blocked[0]
    assert (b.stream_id, b.direction, b.offset, b.encoder_stream_id) == (4, C2S, 0, 6)
    assert b.inserts_at_block == 0 and b.required_insert_count and b.required_insert_count > 0
    assert (b.blocked_frame, b.unblocked_frame, b.blocked_ns) == (4, 5, 5000)
    assert b.unblocked_encoder_offset is not None
    assert 0 < b.unblocked_encoder_offset <= len(estream)
    ex = h3.streams[4]
    assert ex.path == "/r4" and ex.blocked == [b]
    assert ex.request_headers is not None
    assert ex.request_headers.get("x-long-custom-header") == X[0][1].decode()
    hb = ex.request_headers
    assert isinstance(hb, HeaderBlock) and hb.blocked and hb.frame == 5
    assert hb.required_insert_count == b.required_insert_count
    assert not h3.streams[0].request_headers.blocked  # type: ignore[union-attr]
    assert not h3.errors


def test_unblocked_by_exact_instruction() -> None:
    """Encoder bytes fed in any chunking: unblocking is reported at the end of the
    instruction that completed the required inserts (instructions are parsed whole)."""
    estream, heads = client_side()
    ends = []
    for step in (1, 7, len(estream)):
        h3 = H3Connection()
        open_connection(h3)
        h3.feed(4, C2S, heads[4], 0, frame=3)
        for i in range(0, len(estream), step):
            h3.feed(6, C2S, estream[i : i + step], i, frame=10 + i)
        h3.close()
        (b,) = h3.blocked
        ends.append(b.unblocked_encoder_offset)
        assert h3.streams[4].path == "/r4"
        # the instruction ending there is an insert: the count it completes is the RIC
        ins = [i for i in h3.instructions if i.stream_id == 6 and i.inserts]
        assert sum(i.inserts for i in ins if i.end <= b.unblocked_encoder_offset) == (
            b.required_insert_count
        )
    assert len(set(ends)) == 1


def test_blocked_until_capture_end() -> None:
    h3 = H3Connection()
    open_connection(h3)
    _, heads = client_side()
    h3.feed(4, C2S, heads[4], 0, fin=True, frame=3)
    h3.close()
    (b,) = h3.blocked
    assert b.unblocked_encoder_offset is None and b.blocked_ns is None
    assert [e.name for e in h3.errors] == ["qpack_blocked_at_end"]
    ex = h3.streams[4]
    assert ex.headers_unknown and ex.header_blocks[0].error == "qpack_blocked_at_end"


def test_out_of_order_delivery_waits_for_the_hole() -> None:
    """Chunks arriving out of order are released when the hole fills (RFC 9000 §2.2):
    the DATA frame is stamped with the arrival that completed it."""
    h3 = H3Connection()
    open_connection(h3)
    estream, heads = client_side()
    h3.feed(6, C2S, estream, 0, frame=3)
    h3.feed(0, C2S, heads[0], 0, fin=True, frame=4)
    resp = response(b"200", b"0123456789" * 50)
    a, b, c = resp[:30], resp[30:300], resp[300:]
    h3.feed(0, S2C, c, 300, fin=True, frame=7, ts_ns=7)
    h3.feed(0, S2C, b, 30, frame=6, ts_ns=6)
    assert h3.streams[0].response_headers is None
    h3.feed(0, S2C, a, 0, frame=8, ts_ns=8)
    h3.feed(0, S2C, resp[:40], 0, frame=9, ts_ns=9)  # a retransmission: ignored
    h3.close()
    ex = h3.streams[0]
    assert ex.status == 200 and ex.response_body_bytes == 500
    assert ex.body(S2C) == b"0123456789" * 50
    assert {c.frame for c in ex.body_chunks[S2C]} == {8}
    assert ex.end_stream_offset[S2C] == len(resp)


def test_settings_arrive_after_a_static_only_section() -> None:
    """The decoder is configured from the receiver's SETTINGS even when a static-only
    section was decoded before they arrived (no dynamic state yet)."""
    h3 = H3Connection()
    enc = pylsqpack.Encoder()
    h3.feed(0, C2S, fr(0x1, enc.encode(0, REQ)[1]), 0)
    open_connection(h3)
    estream, heads = client_side()
    h3.feed(6, C2S, estream, 0)
    h3.feed(4, C2S, heads[4], 0)
    h3.close()
    assert h3.streams[0].method == "GET" and h3.streams[4].path == "/r4"
    assert not h3.errors


def test_encoder_without_settings_is_an_encoder_stream_error() -> None:
    """No SETTINGS captured: RFC 9204 §5 defaults (capacity 0) make Set Dynamic Table
    Capacity 4096 an encoder stream error; later sections report the lost state."""
    h3 = H3Connection()
    estream, heads = client_side()
    h3.feed(6, C2S, estream, 0)
    h3.feed(0, C2S, heads[0], 0)
    h3.feed(4, C2S, heads[4], 0)
    h3.close()
    assert [e.name for e in h3.errors] == ["qpack_encoder_stream_error"]
    assert h3.streams[0].path == "/r0"  # Required Insert Count 0: no dynamic state needed
    assert h3.streams[4].header_blocks[0].error == "qpack_state_lost"
    assert h3.streams[4].headers_unknown
    # the caller can supply the settings the capture missed
    h3 = H3Connection(max_table_capacity=CAP, blocked_streams=BLOCKED)
    h3.feed(6, C2S, estream, 0)
    h3.feed(0, C2S, heads[0], 0)
    h3.close()
    assert h3.streams[0].path == "/r0" and not h3.errors


def test_push() -> None:
    h3 = H3Connection()
    open_connection(h3)
    enc = pylsqpack.Encoder()
    promise = fr(0x5, v(0) + enc.encode(0, [*REQ, (b":path", b"/pushed.css")])[1])
    h3.feed(0, S2C, promise, 0)
    senc = pylsqpack.Encoder()
    push = v(0x01) + v(0) + fr(0x1, senc.encode(15, [(b":status", b"200")])[1]) + fr(0x0, b"css")
    h3.feed(15, S2C, push, 0, fin=True)
    h3.close()
    px = h3.pushes[0]
    assert px.path == "/pushed.css" and px.status == 200 and px.response_body_bytes == 3
    assert px.stream_id == 15 and px.end_stream_offset[S2C] == len(push)
    assert [hb.kind for hb in h3.streams[0].header_blocks] == ["push_promise"]
    assert not h3.errors


def test_critical_stream_errors() -> None:
    h3 = H3Connection()
    open_connection(h3)
    h3.feed(7, S2C, v(0x00) + settings_frame(), 0)  # a second server control stream
    h3.feed(3, S2C, b"", len(v(0x00) + settings_frame()), fin=True)  # the control stream closes
    h3.feed(1, S2C, b"junk", 0)  # server-initiated bidirectional stream (§6.1)
    h3.close()
    names = [e.name for e in h3.errors]
    assert names == [
        "h3_stream_creation_error",
        "h3_closed_critical_stream",
        "h3_stream_creation_error",
    ]
    assert isinstance(h3.errors[0], H3Error) and h3.errors[0].stream_id == 7


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(
        st.tuples(
            st.sampled_from([0, 1, 2, 3, 4, 6, 7, 10, 11, 15]),
            st.sampled_from([C2S, S2C]),
            st.binary(max_size=60),
            st.integers(0, 80),
            st.booleans(),
        ),
        max_size=25,
    ),
    prefix=st.booleans(),
)
def test_connection_never_raises_on_garbage(
    chunks: list[tuple[int, str, bytes, int, bool]], prefix: bool
) -> None:
    """DESIGN.md §4: bad input becomes rows, never exceptions (QPACK included)."""
    h3 = H3Connection(max_table_capacity=CAP, blocked_streams=BLOCKED)
    if prefix:
        open_connection(h3)
        estream, heads = client_side()
        h3.feed(6, C2S, estream[:20], 0)
    for sid, d, data, off, fin in chunks:
        h3.feed(sid, d, data, off, fin=fin)
    h3.close()
    for e in h3.errors:
        assert e.name and e.name == e.name.lower()

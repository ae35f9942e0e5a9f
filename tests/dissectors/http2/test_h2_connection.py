"""HTTP/2 framing, header blocks, stream states and flow control (RFC 9113, RFC 7541)."""

from __future__ import annotations

import hpack
import pytest
from h2_build import (
    PREFACE,
    Encoders,
    Write,
    continuation,
    data,
    frame,
    goaway,
    headers,
    ping,
    push_promise,
    request,
    rst_stream,
    settings,
    settings_ack,
    simple_exchange,
    window_update,
)
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from dissectors.errors import DissectError, Truncated
from dissectors.http2 import (
    H2Connection,
    H2Error,
    H2Event,
    H2Frame,
    HeaderBlock,
    StreamState,
    error_code_name,
    frame_type_name,
    is_h2_preface,
    parse_frame,
)


def run(
    writes: list[Write], conn: H2Connection | None = None
) -> tuple[H2Connection, list[H2Event]]:
    conn = conn or H2Connection()
    offs = {"c2s": 0, "s2c": 0}
    events: list[H2Event] = []
    for d, b in writes:
        events += conn.feed(d, b, offs[d])
        offs[d] += len(b)
    events += conn.close()
    return conn, events


def frames_of(events: list[H2Event]) -> list[H2Frame]:
    return [e for e in events if isinstance(e, H2Frame)]


def errors_of(events: list[H2Event]) -> list[str]:
    return [e.name for e in events if isinstance(e, H2Error)]


def blocks_of(events: list[H2Event]) -> list[HeaderBlock]:
    return [e for e in events if isinstance(e, HeaderBlock)]


def opening(e: Encoders) -> list[Write]:
    return [
        ("c2s", PREFACE + settings()),
        ("s2c", settings()),
        ("c2s", settings_ack()),
        ("s2c", settings_ack()),
    ]


# ---------------------------------------------------------------------------------------
# Preface and one-shot framing (RFC 9113 §3.4, §4.1)
# ---------------------------------------------------------------------------------------
def test_is_h2_preface() -> None:
    assert is_h2_preface(PREFACE + b"\x00\x00\x00\x04")
    assert is_h2_preface(memoryview(PREFACE))
    assert not is_h2_preface(PREFACE[:-1])
    assert not is_h2_preface(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not is_h2_preface(b"")


def test_parse_frame_one_shot() -> None:
    buf = b"junk" + frame(0xFA, 0x3, 7, b"abc", reserved=True) + b"tail"
    f, nxt = parse_frame(buf, 4)
    # §4.1: the reserved bit "MUST be ignored when receiving"
    assert (f.offset, f.length, f.type, f.flags, f.stream_id) == (4, 3, 0xFA, 0x3, 7)
    assert bytes(f.payload) == b"abc"
    assert nxt == f.end == 4 + 9 + 3
    with pytest.raises(Truncated):
        parse_frame(buf[:-6], 4)
    with pytest.raises(Truncated):
        parse_frame(b"\x00\x00", 0)


def test_names() -> None:
    assert frame_type_name(0x9) == "CONTINUATION"
    assert frame_type_name(0x1A) == "UNKNOWN(0x1a)"
    assert error_code_name(0x8) == "CANCEL"


# ---------------------------------------------------------------------------------------
# A whole exchange
# ---------------------------------------------------------------------------------------
def test_simple_exchange_rows() -> None:
    writes = simple_exchange(b"hello world", pad=3)
    conn, events = run(writes)
    assert errors_of(events) == []
    fr = frames_of(events)
    assert [(f.direction, f.type_name) for f in fr] == [
        ("c2s", "SETTINGS"),
        ("s2c", "SETTINGS"),
        ("c2s", "SETTINGS"),
        ("s2c", "SETTINGS"),
        ("c2s", "HEADERS"),
        ("s2c", "HEADERS"),
        ("s2c", "DATA"),
        ("s2c", "DATA"),
        ("c2s", "PING"),
        ("s2c", "PING"),
        ("s2c", "HEADERS"),
    ]
    c_settings = fr[0]
    assert c_settings.offset == 24 and c_settings.length == 12 and c_settings.end == 24 + 9 + 12
    assert c_settings.settings == ((4, 1 << 20), (2, 0))
    assert fr[2].ack and fr[2].length == 0
    # padded DATA: 1 (Pad Length) + 4 data + 3 padding
    d1, d2 = fr[6], fr[7]
    assert d1.length == 8 and d1.pad_length == 3 and d1.data_length == 4
    assert d1.flow_controlled_length == 8
    assert d1.data_offset == d1.offset + 9 + 1
    assert d2.data_length == 7 and d2.pad_length is None and not d2.end_stream
    # windows: the server's initial stream window is the client's SETTINGS (1 MiB), acked
    assert d1.stream_window == (1 << 20) - 8 and d1.connection_window == 65535 - 8
    assert d2.stream_window == (1 << 20) - 15 and d2.connection_window == 65535 - 15
    assert fr[8].opaque_data == b"12345678" and not fr[8].ack and fr[9].ack
    assert fr[10].end_stream and fr[10].end_headers

    s = conn.streams[1]
    assert s.state == StreamState.CLOSED
    assert (s.method, s.path, s.scheme, s.authority) == (
        "GET",
        "/index.html",
        "https",
        "example.com",
    )
    assert s.status == 200 and s.content_type == "text/plain"
    assert s.response_trailers is not None and s.response_trailers.get("x-trailer") == "done"
    assert s.response_body_bytes == 11 and s.request_body_bytes == 0
    assert s.body("s2c") == b"hello world"
    assert [(c.offset, c.length) for c in s.body_chunks["s2c"]] == [
        (d1.data_offset, 4),
        (d2.offset + 9, 7),
    ]
    assert s.end_stream_offset["c2s"] == fr[4].end
    assert s.end_stream_offset["s2c"] == fr[10].end
    (rt,) = conn.ping_round_trips
    assert (
        rt.direction == "c2s" and rt.ping_offset == fr[8].offset and rt.ack_offset == fr[9].offset
    )
    assert conn.settings["s2c"] == {3: 100, 5: 1 << 15}
    kinds = [b.kind for b in blocks_of(events)]
    assert kinds == ["request", "response", "trailers"]


@given(st.data())
@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunking_invariance(draw: st.DataObject) -> None:
    """DESIGN §5: one feed or any split gives the same events (per-direction order kept)."""
    body = draw.draw(st.binary(min_size=0, max_size=300))
    pad = draw.draw(st.none() | st.integers(0, 20))
    writes = simple_exchange(body, pad=pad)
    _, whole = run(writes)
    split: list[Write] = []
    for d, b in writes:
        cuts = sorted(draw.draw(st.lists(st.integers(0, len(b)), max_size=6)))
        prev = 0
        for c in [*cuts, len(b)]:
            split.append((d, b[prev:c]))
            prev = c
    _, pieces = run(split)
    assert pieces == whole


def test_byte_at_a_time_equals_one_feed() -> None:
    writes = simple_exchange(bytes(range(256)) * 3, pad=7)
    _, whole = run(writes)
    tiny = [(d, b[i : i + 1]) for d, b in writes for i in range(len(b))]
    _, pieces = run(tiny)
    assert pieces == whole


def test_overlapping_feed_is_ignored() -> None:
    writes = simple_exchange()
    _, whole = run(writes)
    conn = H2Connection()
    offs = {"c2s": 0, "s2c": 0}
    events: list[H2Event] = []
    for d, b in writes:
        # re-send the last 5 octets seen (a retransmission) before the new ones
        back = min(5, offs[d])
        events += conn.feed(d, b"\xee" * back + b, offs[d] - back)
        offs[d] += len(b)
    events += conn.close()
    assert events == whole


# ---------------------------------------------------------------------------------------
# Header blocks (RFC 9113 §4.3, §6.2, §6.10; RFC 7541)
# ---------------------------------------------------------------------------------------
def test_continuation_assembly_and_priority_padding() -> None:
    e = Encoders()
    big = request("/" + "p" * 300) + [("cookie", "a" * 200)]
    block = e.block("c2s", big)
    w = opening(e) + [
        (
            "c2s",
            headers(1, block[:50], end_headers=False, pad=5, priority=(True, 0, 200))
            + continuation(1, block[50:120], end_headers=False)
            + continuation(1, block[120:], end_headers=True),
        ),
    ]
    conn, events = run(w)
    assert errors_of(events) == []
    fr = frames_of(events)[-3:]
    assert [f.type_name for f in fr] == ["HEADERS", "CONTINUATION", "CONTINUATION"]
    assert fr[0].exclusive is True and fr[0].stream_dependency == 0 and fr[0].weight == 200
    assert fr[0].pad_length == 5 and fr[0].fragment_length == 50 and not fr[0].end_headers
    (hb,) = blocks_of(events)
    assert hb.frames == 3 and hb.offset == fr[0].offset and hb.end == fr[2].end
    assert hb.headers == tuple(big) and hb.fragment_length == len(block)
    assert conn.streams[1].state == StreamState.OPEN


def test_interrupted_continuation_loses_hpack_state_but_goes_on() -> None:
    e = Encoders()
    b1 = e.block("c2s", request("/a"))
    b3 = e.block("c2s", request("/b"))
    w = opening(e) + [
        ("c2s", headers(1, b1[:3], end_headers=False) + data(1, b"x", end=True)),
        ("c2s", headers(3, b3, end_stream=True)),
        ("s2c", data(1, b"late")),
    ]
    conn, events = run(w)
    names = errors_of(events)
    assert "continuation_expected" in names
    blocks = blocks_of(events)
    assert blocks[0].error == "continuation_expected" and blocks[0].headers is None
    # §4.3: the table is unknown now; the next block is not guessed at
    assert blocks[1].error == "hpack_state_lost" and blocks[1].headers is None
    assert conn.streams[1].headers_unknown and conn.streams[3].headers_unknown
    # framing and flow control carry on
    assert conn.streams[1].body_bytes["c2s"] == 1
    assert conn.streams[1].body_bytes["s2c"] == 4


def test_hpack_error_row_then_connection_goes_on() -> None:
    e = Encoders()
    good = e.block("c2s", request("/ok"))
    w = opening(e) + [
        ("c2s", headers(1, b"\xff\xff\xff\xff\x7f", end_stream=True)),  # index out of range
        ("c2s", headers(3, good, end_stream=True)),
        ("s2c", headers(1, Encoders().block("s2c", [(":status", "204")]), end_stream=True)),
    ]
    conn, events = run(w)
    assert errors_of(events) == ["hpack_decoding_error"]
    b = blocks_of(events)
    assert b[0].headers is None and b[0].error is not None
    assert b[0].error.startswith("hpack_decoding_error")
    assert b[1].error == "hpack_state_lost"
    # the other direction has its own decoder and is unaffected
    assert b[2].headers == ((":status", "204"),) and conn.streams[1].status == 204
    assert conn.streams[1].state == StreamState.CLOSED


def test_header_table_size_applies_at_ack() -> None:
    """RFC 7541 §4.2 / RFC 9113 §6.5.3: the peer's smaller table governs once acked."""
    e = Encoders()
    b1 = e.block("c2s", request("/1"))  # populates the encoder's dynamic table
    w = [
        ("c2s", PREFACE + settings()),
        ("s2c", settings((1, 0))),  # server: HEADER_TABLE_SIZE 0
        ("c2s", headers(1, b1, end_stream=True)),  # before the ACK: 4096 still allowed
        ("c2s", settings_ack()),
        ("c2s", headers(3, e.block("c2s", request("/1")), end_stream=True)),
    ]
    _, events = run(w)
    b = blocks_of(events)
    assert b[0].headers is not None
    # the encoder never shrank its table (no size update): a decoding error
    assert b[1].headers is None and "hpack_decoding_error" in errors_of(events)

    e = Encoders()
    e.enc["c2s"].header_table_size = 0  # emits a dynamic table size update
    w[-1] = ("c2s", headers(3, e.block("c2s", request("/1")), end_stream=True))
    _, events = run(w)
    b = blocks_of(events)
    assert b[1].headers == tuple(request("/1")) and b[1].table_size == 0
    assert errors_of(events) == []


def test_never_indexed_and_informational() -> None:
    e = Encoders()
    enc = hpack.Encoder()
    secret = enc.encode([(":status", "200"), hpack.NeverIndexedHeaderTuple("set-cookie", "s=1")])
    w = opening(e) + [
        ("c2s", headers(1, e.block("c2s", request()), end_stream=True)),
        ("s2c", headers(1, hpack.Encoder().encode([(":status", "103"), ("link", "</a>")]))),
        ("s2c", headers(1, secret, end_stream=True)),
    ]
    conn, events = run(w)
    s = conn.streams[1]
    assert [b.get(":status") for b in s.informational] == ["103"]
    assert s.status == 200 and s.response_headers is not None
    assert s.response_headers.never_indexed == ("set-cookie",)


# ---------------------------------------------------------------------------------------
# Stream states, RST_STREAM, GOAWAY, PUSH_PROMISE, unknown types
# ---------------------------------------------------------------------------------------
def test_rst_goaway_push_unknown() -> None:
    e = Encoders()
    w = opening(e) + [
        ("c2s", headers(1, e.block("c2s", request("/page")), end_stream=True)),
        ("s2c", push_promise(1, 2, e.block("s2c", request("/style.css")))),
        ("s2c", frame(0xFA, 0xFF, 0, b"future")),
        ("s2c", headers(2, e.block("s2c", [(":status", "200")]))),
        ("s2c", data(2, b"css", end=True)),
        ("c2s", headers(3, e.block("c2s", request("/x")), end_stream=True)),
        ("c2s", rst_stream(3, 0x8)),
        ("s2c", goaway(3, 0x0, b"bye")),
    ]
    conn, events = run(w)
    assert errors_of(events) == []
    fr = frames_of(events)
    unk = next(f for f in fr if f.type == 0xFA)
    assert unk.type_name == "UNKNOWN(0xfa)" and unk.length == 6 and unk.flags == 0xFF
    pp = next(f for f in fr if f.type_name == "PUSH_PROMISE")
    assert pp.promised_stream_id == 2
    pushed = conn.streams[2]
    assert pushed.promised_by == 1 and pushed.path == "/style.css" and pushed.status == 200
    assert pushed.state == StreamState.CLOSED and pushed.body("s2c") == b"css"
    assert conn.streams[1].state == StreamState.HALF_CLOSED_LOCAL
    s3 = conn.streams[3]
    assert s3.state == StreamState.CLOSED and s3.rst_stream is not None
    assert s3.rst_stream.error_code == 0x8 and s3.rst_stream.direction == "c2s"
    (ga,) = conn.goaways
    assert (ga.direction, ga.last_stream_id, ga.error_code, ga.debug_data) == ("s2c", 3, 0, b"bye")
    assert next(f for f in fr if f.type_name == "RST_STREAM").error_code == 8


def test_protocol_violations_are_rows() -> None:
    e = Encoders()
    w = opening(e) + [
        ("c2s", headers(1, e.block("c2s", request()))),
        ("c2s", frame(6, 0, 0, b"short")),  # PING length 5
        ("c2s", data(0, b"x")),  # DATA on stream 0
        ("c2s", frame(0, 0x8, 1, b"\x09abc")),  # padding longer than the payload
        ("c2s", window_update(0, 0)),  # zero increment
        ("c2s", continuation(5, b"\x82")),  # CONTINUATION outside a block
        ("s2c", settings_ack()),  # nothing to ack
        ("s2c", ping(b"abcdefgh", ack=True)),  # unmatched
        ("s2c", frame(4, 0, 0, b"\x00\x02\x00\x00\x00\x05")),  # ENABLE_PUSH = 5
        ("c2s", frame(1, 0x24, 7, b"\x00")),  # PRIORITY flag but only 1 octet
    ]
    conn, events = run(w)
    assert errors_of(events) == [
        "frame_size_error",
        "stream_id_zero",
        "padding_exceeds_payload",
        "zero_window_increment",
        "unexpected_continuation",
        "unexpected_settings_ack",
        "unmatched_ping_ack",
        "invalid_setting",
        "frame_size_error",
    ]
    assert sum(1 for f in frames_of(events) if f.problem) == 9
    assert conn.streams[1].state == StreamState.OPEN


def test_frame_size_over_max_frame_size() -> None:
    e = Encoders()
    w = opening(e) + [
        ("c2s", headers(1, e.block("c2s", request()), end_stream=True)),
        ("s2c", headers(1, e.block("s2c", [(":status", "200")]))),
        ("s2c", data(1, bytes(16385), end=True)),
    ]
    _, events = run(w)
    assert errors_of(events) == ["frame_size_error"]


# ---------------------------------------------------------------------------------------
# Flow control (RFC 9113 §6.9)
# ---------------------------------------------------------------------------------------
def test_window_hits_zero_and_window_update_reopens() -> None:
    e = Encoders()
    w: list[Write] = [
        ("c2s", PREFACE + settings((4, 20))),  # client: initial stream window 20
        ("s2c", settings()),
        ("c2s", settings_ack()),
        ("s2c", settings_ack()),
        ("c2s", headers(1, e.block("c2s", request()), end_stream=True)),
        ("s2c", headers(1, e.block("s2c", [(":status", "200")]))),
        ("s2c", data(1, bytes(12)) + data(1, bytes(4), pad=3)),  # 12 + 8 = 20
        ("c2s", window_update(1, 30) + window_update(0, 100)),
        ("s2c", data(1, bytes(5), end=True)),
    ]
    conn, events = run(w)
    assert errors_of(events) == []
    fr = [f for f in frames_of(events) if f.type_name in ("DATA", "WINDOW_UPDATE")]
    assert [(f.type_name, f.stream_window, f.connection_window) for f in fr] == [
        ("DATA", 8, 65535 - 12),
        ("DATA", 0, 65535 - 20),
        ("WINDOW_UPDATE", 30, 65535 - 20),
        ("WINDOW_UPDATE", None, 65535 - 20 + 100),
        ("DATA", 25, 65535 - 25 + 100),
    ]
    series = [(x.sender, x.cause, x.frame_direction, x.stream_window) for x in conn.window_series]
    assert series == [
        ("s2c", "DATA", "s2c", 8),
        ("s2c", "DATA", "s2c", 0),
        ("s2c", "WINDOW_UPDATE", "c2s", 30),
        ("s2c", "WINDOW_UPDATE", "c2s", None),
        ("s2c", "DATA", "s2c", 25),
    ]
    zero = conn.window_series[1]
    reopen = conn.window_series[2]
    assert zero.offset == fr[1].offset and reopen.offset == fr[2].offset


def test_initial_window_change_mid_connection_applies_to_open_streams() -> None:
    e = Encoders()
    w: list[Write] = [
        *opening(e),
        ("c2s", headers(1, e.block("c2s", request("/1")), end_stream=True)),
        ("c2s", headers(3, e.block("c2s", request("/3")), end_stream=True)),
        ("s2c", headers(1, e.block("s2c", [(":status", "200")]), end_stream=True)),
        ("s2c", headers(3, e.block("s2c", [(":status", "200")]))),
        ("s2c", data(3, bytes(1000))),
        ("c2s", settings((4, 1000))),  # shrink by 64535
        ("s2c", data(3, bytes(10))),  # sent before the server processed it
        ("s2c", settings_ack()),  # §6.9.2 delta applies now
        ("s2c", data(5 - 2, bytes(1))),
    ]
    conn, events = run(w)
    d = [f for f in frames_of(events) if f.type_name == "DATA"]
    assert d[0].stream_window == 65535 - 1000
    assert d[1].stream_window == 65535 - 1010
    # after the ACK: 64525 + (1000 - 65535) = -10 ; then one more octet: -11
    assert d[2].stream_window == -11
    assert "flow_control_window_exceeded" in errors_of(events)
    settings_samples = [x for x in conn.window_series if x.cause == "SETTINGS"]
    # stream 1 is closed (§6.9.2 adjusts the windows the receiver "maintains")
    assert [(x.stream_id, x.stream_window) for x in settings_samples] == [(3, -10)]


# ---------------------------------------------------------------------------------------
# Holes, truncation, garbage (DESIGN §4)
# ---------------------------------------------------------------------------------------
def test_hole_inside_data_keeps_framing() -> None:
    writes = simple_exchange(b"0123456789" * 10, pad=None)
    conn = H2Connection()
    offs = {"c2s": 0, "s2c": 0}
    events: list[H2Event] = []
    for d, b in writes:
        if d == "s2c" and b[3] == 0 and b[9 + 4 + 4] == 0 and len(b) > 60:  # the DATA write
            # first DATA frame: 9 header + 4 data; second: 9 + 96. Lose 20 octets of it.
            cut = 13 + 9 + 30
            events += conn.feed(d, b[:cut], offs[d])
            events += conn.feed(d, b[cut + 20 :], offs[d] + cut + 20)
        else:
            events += conn.feed(d, b, offs[d])
        offs[d] += len(b)
    events += conn.close()
    assert "frame_incomplete" in errors_of(events)
    holed = next(f for f in frames_of(events) if f.missing)
    assert holed.type_name == "DATA" and holed.missing == 20 and holed.length == 96
    assert holed.data_length is None
    s = conn.streams[1]
    assert s.body_missing["s2c"] == 96 and s.response_trailers is not None


def test_hole_over_a_frame_header_loses_the_direction() -> None:
    writes = simple_exchange()
    conn = H2Connection()
    events: list[H2Event] = []
    offs = {"c2s": 0, "s2c": 0}
    for d, b in writes:
        skip = 4 if (d == "s2c" and offs[d] > 0) else 0
        events += conn.feed(d, b[skip:], offs[d] + skip)
        offs[d] += len(b)
    events += conn.close()
    assert errors_of(events).count("lost_boundary") == 1
    # only the server's first write (SETTINGS) was framed; the client side is intact
    assert [f.type_name for f in frames_of(events) if f.direction == "s2c"] == ["SETTINGS"]
    assert conn.streams[1].method == "GET" and conn.streams[1].response_headers is None


def test_bad_preface_and_truncated_tail() -> None:
    conn = H2Connection()
    ev = conn.feed("c2s", b"GET / HTTP/1.1\r\n", 0)
    assert [e.name for e in ev if isinstance(e, H2Error)] == ["bad_preface"]
    assert conn.feed("c2s", PREFACE, 16) == []  # the direction is given up
    ev = conn.feed("s2c", settings()[:7], 0)
    ev += conn.feed("s2c", b"\x00\x00\x04\x04", 0)  # already seen: ignored
    assert ev == []
    ev = conn.close()
    assert [e.name for e in ev if isinstance(e, H2Error)] == ["frame_truncated"]


def test_first_frame_must_be_settings() -> None:
    e = Encoders()
    _, events = run([("c2s", PREFACE + headers(1, e.block("c2s", request())))])
    assert errors_of(events)[0] == "first_frame_not_settings"
    # a capture that starts mid-connection has no such rule
    _, events = run([("s2c", data(1, b"x"))], H2Connection(expect_preface=False))
    assert errors_of(events) == []


def test_bad_direction_is_a_usage_error() -> None:
    with pytest.raises(ValueError):
        H2Connection().feed("up", b"", 0)


@given(
    st.binary(max_size=400),
    st.binary(max_size=400),
    st.lists(st.integers(min_value=0, max_value=50), max_size=8),
    st.booleans(),
)
@hsettings(max_examples=400, deadline=None)
def test_garbage_never_raises(c2s: bytes, s2c: bytes, cuts: list[int], preface: bool) -> None:
    """Hostile bytes become rows; nothing but events comes out (DESIGN §4)."""
    conn = H2Connection(expect_preface=preface)
    if preface:
        c2s = PREFACE + c2s
    pos = {"c2s": 0, "s2c": 0}
    for i, cut in enumerate(cuts):
        d = "c2s" if i % 2 else "s2c"
        src = c2s if d == "c2s" else s2c
        chunk = src[pos[d] : pos[d] + cut]
        # sometimes skip a few octets: holes must not break anything either
        off = pos[d] + (3 if cut % 7 == 6 else 0)
        for e in conn.feed(d, chunk, off):
            assert isinstance(e, H2Frame | HeaderBlock | H2Error)
        pos[d] = off + len(chunk)
    conn.feed("c2s", c2s[pos["c2s"] :], pos["c2s"])
    conn.feed("s2c", s2c[pos["s2c"] :], pos["s2c"])
    conn.close()


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=70))
@hsettings(max_examples=300, deadline=None)
def test_parse_frame_garbage_raises_only_dissect_errors(buf: bytes, offset: int) -> None:
    try:
        f, nxt = parse_frame(buf, offset)
    except DissectError:
        return
    assert nxt == f.end <= len(buf)


@given(st.lists(st.binary(min_size=9, max_size=40), min_size=1, max_size=12))
@hsettings(max_examples=200, deadline=None)
def test_valid_framing_of_random_frames_is_exact(payloads: list[bytes]) -> None:
    """Random well-framed frames (any type/flags): every one becomes exactly one row."""
    wire = PREFACE + settings()
    for p in payloads:
        wire += frame(p[0] % 12, p[1], int.from_bytes(p[2:6], "big") & 0x7FFFFFFF, p[9:])
    conn = H2Connection()
    events = conn.feed("c2s", wire, 0) + conn.close()
    fr = frames_of(events)
    assert len(fr) == len(payloads) + 1
    assert [f.length for f in fr[1:]] == [len(p) - 9 for p in payloads]
    assert fr[-1].end == len(wire)

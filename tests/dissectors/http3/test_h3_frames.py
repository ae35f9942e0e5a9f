"""HTTP/3 framing (RFC 9114 §6.2, §7.1, §7.2): the one-shot parser and H3StreamParser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors._wire import encode_varint as v
from dissectors.errors import DissectError, Malformed, Truncated
from dissectors.http3 import (
    FrameType,
    H3Error,
    H3Frame,
    H3StreamParser,
    H3StreamType,
    SettingsParameter,
    StreamKind,
    frame_type_name,
    is_reserved,
    parse_frame,
    settings_name,
    stream_type_name,
)
from dissectors.qpack import QpackInstruction


def fr(ftype: int, payload: bytes) -> bytes:
    """RFC 9114 §7.1: Type (i), Length (i), Frame Payload (..)."""
    return v(ftype) + v(len(payload)) + payload


#: RFC 9114 §7.2.4: a SETTINGS frame with QPACK_MAX_TABLE_CAPACITY=4096,
#: MAX_FIELD_SECTION_SIZE=16384, QPACK_BLOCKED_STREAMS=16, ENABLE_CONNECT_PROTOCOL=1,
#: H3_DATAGRAM=1 and a reserved (greasing, §7.2.4.1) identifier 0x21.
SETTINGS = fr(
    0x4,
    v(0x1) + v(4096) + v(0x6) + v(16384) + v(0x7) + v(16) + v(0x8) + v(1) + v(0x33) + v(1)
    + v(0x21) + v(7),
)  # fmt: skip
CONTROL = v(0x00) + SETTINGS + fr(0xD, v(8)) + fr(0x21, b"grease") + fr(0x7, v(0))
REQUEST = (
    fr(0x1, b"\x00\x00\xd1\xd7") + fr(0x0, b"hello ") + fr(0x0, b"world") + fr(0x1, b"\x00\x00")
)


def frames(recs: list[object]) -> list[H3Frame]:
    return [r for r in recs if isinstance(r, H3Frame)]


def feed_all(p: H3StreamParser, data: bytes, cuts: list[int]) -> list[object]:
    out: list[object] = []
    prev = 0
    for c in sorted({min(c, len(data)) for c in cuts}) + [len(data)]:
        out += p.feed(data[prev:c], prev)
        prev = c
    out += p.close(fin=True)
    return out


def test_names() -> None:
    assert frame_type_name(0x4) == "SETTINGS"
    assert frame_type_name(0x6) == "H2_PING(0x06)"
    assert frame_type_name(0x21) == "RESERVED(0x21)"
    assert frame_type_name(0x1F * 3 + 0x21) == "RESERVED(0x7e)"
    assert frame_type_name(0x22) == "UNKNOWN(0x22)"
    assert stream_type_name(0x2) == "QPACK_ENCODER"
    assert settings_name(0x33) == "H3_DATAGRAM"
    assert is_reserved(0x21) and is_reserved(0x40) and not is_reserved(0x22)


def test_one_shot_settings() -> None:
    f, nxt = parse_frame(SETTINGS)
    assert nxt == len(SETTINGS) == f.end
    assert f.type == FrameType.SETTINGS and f.header_length == 2
    assert f.settings is not None
    s = dict(f.settings)
    assert s[SettingsParameter.QPACK_MAX_TABLE_CAPACITY] == 4096
    assert s[SettingsParameter.MAX_FIELD_SECTION_SIZE] == 16384
    assert s[SettingsParameter.QPACK_BLOCKED_STREAMS] == 16
    assert s[SettingsParameter.ENABLE_CONNECT_PROTOCOL] == 1
    assert s[SettingsParameter.H3_DATAGRAM] == 1
    assert s[0x21] == 7  # unknown kept


def test_one_shot_errors() -> None:
    with pytest.raises(Truncated):
        parse_frame(SETTINGS[:-1])
    with pytest.raises(Malformed):
        parse_frame(fr(0x7, v(3) + b"x"))  # GOAWAY with trailing octet (§7.1 H3_FRAME_ERROR)
    with pytest.raises(Malformed):
        parse_frame(fr(0x4, v(0x1)))  # a SETTINGS identifier without value


def test_control_stream() -> None:
    p = H3StreamParser(3, "s2c")
    recs = feed_all(p, CONTROL, [])
    st = [r for r in recs if isinstance(r, H3StreamType)]
    assert [(s.kind, s.length) for s in st] == [(StreamKind.CONTROL, 1)]
    fs = frames(recs)
    assert [f.type_name for f in fs] == ["SETTINGS", "MAX_PUSH_ID", "RESERVED(0x21)", "GOAWAY"]
    assert fs[0].offset == 1 and fs[1].offset == fs[0].end
    # §7.2.7: "A server MUST NOT send a MAX_PUSH_ID frame."
    assert fs[1].problem == "h3_frame_unexpected"
    assert fs[2].problem is None and fs[3].goaway_id == 0
    assert fs[-1].end == len(CONTROL)


def test_control_stream_must_start_with_settings() -> None:
    p = H3StreamParser(2, "c2s")
    recs = feed_all(p, v(0) + fr(0x7, v(0)) + SETTINGS + SETTINGS, [])
    names = [e.name for e in recs if isinstance(e, H3Error)]
    assert names == ["h3_missing_settings", "h3_frame_unexpected"]


def test_h2_only_frame_and_setting() -> None:
    p = H3StreamParser(2, "c2s")
    recs = feed_all(p, v(0) + fr(0x4, v(0x2) + v(1)) + fr(0x6, b"12345678"), [])
    assert [e.name for e in recs if isinstance(e, H3Error)] == [
        "h3_settings_error",
        "h3_frame_unexpected",
    ]


def test_request_stream() -> None:
    p = H3StreamParser(0, "s2c")
    recs = feed_all(p, REQUEST, [])
    fs = frames(recs)
    assert [f.type for f in fs] == [1, 0, 0, 1]
    assert fs[0].field_section == b"\x00\x00\xd1\xd7"
    assert fs[1].data == b"hello " and fs[1].payload_offset == fs[0].end + 2
    assert not [r for r in recs if isinstance(r, H3Error)]
    assert p.kind is StreamKind.REQUEST


def test_data_before_headers_is_unexpected() -> None:
    p = H3StreamParser(4, "c2s")
    recs = feed_all(p, fr(0x0, b"x") + fr(0x4, b""), [])
    assert [f.problem for f in frames(recs)] == ["h3_frame_unexpected", "h3_frame_unexpected"]


def test_grease_and_unknown_stream_types_are_skipped() -> None:
    g = H3StreamParser(7, "s2c")
    recs = feed_all(g, v(0x1F * 2 + 0x21) + b"anything at all", [3])
    assert [(r.kind, r.stream_type) for r in recs if isinstance(r, H3StreamType)] == [
        (StreamKind.RESERVED, 0x5F)
    ]
    assert not [r for r in recs if isinstance(r, H3Error)]
    assert g.skipped_bytes == len(b"anything at all")
    u = H3StreamParser(6, "c2s")
    recs = feed_all(u, v(0x54) + b"webtransport?", [])
    assert [e.name for e in recs if isinstance(e, H3Error)] == ["unknown_stream_type"]
    assert u.kind is StreamKind.UNKNOWN and u.skipped_bytes == 13


def test_push_stream() -> None:
    p = H3StreamParser(15, "s2c")
    recs = feed_all(p, v(0x01) + v(300) + fr(0x1, b"\x00\x00\xd9") + fr(0x0, b"pushed"), [1, 2])
    st = [r for r in recs if isinstance(r, H3StreamType)]
    assert [(s.kind, s.push_id, s.length) for s in st] == [(StreamKind.PUSH, 300, 3)]
    assert [f.offset for f in frames(recs)] == [3, 8]


def test_qpack_streams() -> None:
    enc = H3StreamParser(6, "c2s")
    # RFC 9204 §4.3: Set Dynamic Table Capacity 220; Insert With Literal Name "a"="b";
    # Insert With Name Reference static 1 (":path") = "/x"; Duplicate 0.
    data = v(0x02) + bytes([0x3F, 0xBD, 0x01]) + b"\x41a\x01b" + b"\xc1\x02/x" + b"\x00"
    recs = feed_all(enc, data, [2, 5, 6])
    ins = [r for r in recs if isinstance(r, QpackInstruction)]
    assert [(i.kind, i.value) for i in ins] == [
        ("set_dynamic_table_capacity", 220),
        ("insert_with_literal_name", 0),
        ("insert_with_name_reference", 1),
        ("duplicate", 0),
    ]
    assert ins[1].name == b"a" and ins[1].value_bytes == b"b"
    assert ins[2].static is True and ins[2].value_bytes == b"/x"
    assert [i.offset for i in ins] == [1, 4, 8, 12] and ins[-1].end == len(data)
    dec = H3StreamParser(10, "s2c")
    recs = feed_all(dec, v(0x03) + b"\x84\x41\x01", [])  # Section Ack 4, Cancel 1, ICI 1
    assert [(i.kind, i.value) for i in recs if isinstance(i, QpackInstruction)] == [
        ("section_acknowledgment", 4),
        ("stream_cancellation", 1),
        ("insert_count_increment", 1),
    ]


def test_truncated_frame_at_fin_is_reported() -> None:
    """§7.1: a truncated last frame on a cleanly terminated stream is H3_FRAME_ERROR."""
    p = H3StreamParser(0, "s2c")
    recs = p.feed(fr(0x1, b"\x00\x00\xd9") + fr(0x0, b"0123456789")[:-4], 0)
    recs += p.close(fin=True)
    errs = [e for e in recs if isinstance(e, H3Error)]
    assert [e.name for e in errs] == ["frame_truncated"] and "FIN" in errs[0].detail
    data = frames(recs)[-1]
    assert data.type == 0 and data.missing == 4 and data.problem == "frame_truncated"


def test_hole_inside_data_keeps_framing() -> None:
    body = fr(0x1, b"\x00\x00\xd9") + fr(0x0, bytes(100)) + fr(0x0, b"tail")
    p = H3StreamParser(0, "s2c")
    recs = p.feed(body[:20], 0) + p.feed(body[60:], 60) + p.close(fin=True)
    fs = frames(recs)
    assert [(f.type, f.missing, f.data) for f in fs[1:]] == [(0, 40, None), (0, 0, b"tail")]
    assert not [e for e in recs if isinstance(e, H3Error)]


def test_hole_over_a_frame_header_loses_boundaries() -> None:
    body = fr(0x1, b"\x00\x00\xd9") + fr(0x0, b"abc") + fr(0x0, b"tail")
    p = H3StreamParser(0, "s2c")
    recs = p.feed(body[:5], 0) + p.feed(body[11:], 11) + p.close()
    assert [e.name for e in recs if isinstance(e, H3Error)] == ["lost_boundary"]
    assert p.lost


def test_oversized_buffered_frame_is_skipped_with_framing() -> None:
    p = H3StreamParser(0, "c2s", max_frame_payload=8)
    recs = feed_all(p, fr(0x1, bytes(20)) + fr(0x0, b"ok"), [5])
    assert [e.name for e in recs if isinstance(e, H3Error)] == ["frame_too_large"]
    assert [(f.type, f.problem) for f in frames(recs)] == [
        (1, "frame_too_large"),
        (0, None),
    ]


# -- Hypothesis ---------------------------------------------------------------------------
STREAMS = [(0, "c2s", REQUEST), (0, "s2c", REQUEST), (3, "s2c", CONTROL)]


def _records(sid: int, d: str, data: bytes, cuts: list[int]) -> list[object]:
    return feed_all(H3StreamParser(sid, d), data, cuts)


@settings(max_examples=200, deadline=None)
@given(
    which=st.integers(0, len(STREAMS) - 1),
    cuts=st.lists(st.integers(0, 200), max_size=12),
)
def test_chunking_invariance(which: int, cuts: list[int]) -> None:
    """DESIGN.md §5: one feed or any split gives the same records."""
    sid, d, data = STREAMS[which]
    assert _records(sid, d, data, cuts) == _records(sid, d, data, [])


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_chunking_invariance_on_garbage(data: bytes, cuts: list[int]) -> None:
    for sid, d in [(0, "c2s"), (2, "c2s"), (3, "s2c"), (7, "s2c")]:
        assert _records(sid, d, data, cuts) == _records(sid, d, data, [])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), sid=st.sampled_from([0, 1, 2, 3, 6, 10, 15]))
def test_garbage_raises_only_dissect_errors(data: bytes, sid: int) -> None:
    try:
        parse_frame(data)
    except DissectError:
        pass
    p = H3StreamParser(sid, "s2c" if sid & 1 else "c2s")
    p.feed(data, 0)  # a streaming parser never raises on input
    p.close(fin=True)


@settings(max_examples=200, deadline=None)
@given(prefix=st.binary(max_size=16), payload=st.binary(max_size=64))
def test_any_framed_type_roundtrips(prefix: bytes, payload: bytes) -> None:
    """Every Type/Length pair frames something (unknown types are kept, §9)."""
    t = int.from_bytes(prefix[:4] or b"\x00", "big") & 0x3FFFFFFF
    if t in (0x3, 0x4, 0x5, 0x7, 0xD, 0x1):
        return
    f, nxt = parse_frame(fr(t, payload))
    assert (f.type, f.length, nxt) == (t, len(payload), len(fr(t, payload)))

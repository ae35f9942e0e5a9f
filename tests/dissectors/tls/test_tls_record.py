"""Record layer: one-shot and streaming parsing, header checks, gaps, chunking invariance."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dissectors.errors import DissectError, Malformed, Truncated
from dissectors.tls.record import (
    MAX_CIPHERTEXT_LENGTH,
    ContentType,
    IncompleteRecord,
    RecordItem,
    RecordMalformed,
    RecordParser,
    Sslv2ClientHello,
    StreamGap,
    TlsRecord,
    code_name,
    is_record_header,
    parse_record,
)


def rec(ctype: int, body: bytes, version: int = 0x0303) -> bytes:
    return bytes((ctype, version >> 8, version & 0xFF, len(body) >> 8, len(body) & 0xFF)) + body


def pseudo_random(n: int, seed: int) -> bytes:
    out = b""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}/{i}".encode()).digest()
        i += 1
    return out[:n]


Chunk = bytes | int  # bytes to feed, or the length of a gap


def run(chunks: list[Chunk], **kwargs: object) -> tuple[list[RecordItem], int | None]:
    """Feed chunks (ints are gaps) then close; return the items and the error offset."""
    parser = RecordParser(**kwargs)  # type: ignore[arg-type]
    items: list[RecordItem] = []
    try:
        for c in chunks:
            items += parser.feed_gap(c) if isinstance(c, int) else parser.feed(c)
        items += parser.close()
    except RecordMalformed as exc:
        items += exc.records
        return items, exc.offset
    return items, None


# ---------------------------------------------------------------------------------------
# One-shot
# ---------------------------------------------------------------------------------------
def test_parse_record_fields_and_zero_copy() -> None:
    buf = bytearray(b"junk" + rec(23, b"hello") + rec(21, b"\x01\x00"))
    record, nxt = parse_record(buf, 4)
    assert (record.offset, record.length, record.content_type, record.version) == (
        4,
        10,
        23,
        0x0303,
    )
    assert bytes(record.fragment) == b"hello" and nxt == 14
    assert record.header == bytes(buf[4:9])
    buf[9] = ord("j")  # the fragment is a view into the caller's buffer
    assert bytes(record.fragment) == b"jello"
    record2, end = parse_record(buf, nxt)
    assert record2.content_type == 21 and end == len(buf)


@pytest.mark.parametrize("cut", [0, 3, 4, 5, 9])
def test_parse_record_truncated(cut: int) -> None:
    data = rec(22, b"\x01\x00\x00\x00x")
    with pytest.raises(Truncated) as info:
        parse_record(data[:cut])
    assert info.value.offset == 0


@pytest.mark.parametrize(
    "header",
    [
        bytes((0x19, 3, 3, 0, 1)),  # content type 25 (not TLS on TCP)
        bytes((0x00, 3, 3, 0, 1)),
        bytes((0x80, 3, 3, 0, 1)),
        bytes((22, 2, 0, 0, 1)),  # major version 2
        bytes((23, 4, 0, 0, 1)),  # major version 4
        bytes((23, 3, 3)) + (MAX_CIPHERTEXT_LENGTH + 1).to_bytes(2, "big"),
        bytes((22, 3, 3, 0, 0)),  # zero-length handshake
        bytes((21, 3, 3, 0, 0)),  # zero-length alert
        bytes((20, 3, 3, 0, 0)),  # zero-length change_cipher_spec
    ],
)
def test_bad_headers_are_malformed(header: bytes) -> None:
    with pytest.raises(Malformed):
        parse_record(header + b"x")
    assert not is_record_header(header)
    parser = RecordParser()
    with pytest.raises(RecordMalformed):
        parser.feed(header)


def test_code_names() -> None:
    assert code_name(ContentType, 23) == "APPLICATION_DATA"
    assert code_name(ContentType, 0x1A) == "UNKNOWN(0x1a)"


def test_limits_that_are_legal() -> None:
    big = rec(23, bytes(MAX_CIPHERTEXT_LENGTH))
    record, _ = parse_record(big)
    assert record.length == MAX_CIPHERTEXT_LENGTH + 5
    empty_app = rec(23, b"")
    assert parse_record(empty_app)[0].length == 5
    assert is_record_header(empty_app) and is_record_header(rec(22, b"x", 0x0301))


# ---------------------------------------------------------------------------------------
# Streaming
# ---------------------------------------------------------------------------------------
def test_streaming_keeps_the_tail_and_uses_stream_offsets() -> None:
    data = rec(22, b"abc") + rec(23, b"defgh")
    parser = RecordParser(start_offset=1000)
    assert parser.feed(data[:6]) == []
    assert parser.buffered == 6
    first = parser.feed(data[6:10])
    assert first == [
        TlsRecord(offset=1000, length=8, content_type=22, version=0x0303, fragment=b"abc")
    ]
    second = parser.feed(data[10:])
    assert second == [
        TlsRecord(offset=1008, length=10, content_type=23, version=0x0303, fragment=b"defgh")
    ]
    assert parser.position == 1018 and parser.close() == []


def test_malformed_header_hands_over_earlier_records_and_stops() -> None:
    good = rec(22, b"abc") + rec(23, b"x")
    parser = RecordParser(start_offset=10)
    with pytest.raises(RecordMalformed) as info:
        parser.feed(good + b"\x99\x03\x03\x00\x01z")
    assert [r.offset for r in info.value.records] == [10, 18]
    assert info.value.offset == 10 + len(good)
    assert parser.failed
    with pytest.raises(RecordMalformed):
        parser.feed(rec(23, b"more"))
    with pytest.raises(RecordMalformed):
        parser.close()


def test_close_reports_a_cut_record_and_a_cut_header() -> None:
    parser = RecordParser()
    parser.feed(rec(23, b"0123456789")[:8])
    assert parser.close() == [
        IncompleteRecord(offset=0, length=15, content_type=23, version=0x0303, missing=7)
    ]
    parser = RecordParser(start_offset=5)
    parser.feed(b"\x17\x03")
    assert parser.close() == [StreamGap(offset=5, length=2, reason="truncated_header", missing=0)]


# ---------------------------------------------------------------------------------------
# Gaps
# ---------------------------------------------------------------------------------------
def test_gap_inside_a_record_keeps_synchronisation() -> None:
    a, b, c = rec(23, b"A" * 20), rec(23, b"B" * 20), rec(21, b"\x01\x00")
    stream = a + b + c
    # b's header (5 bytes) and 3 bytes were captured, then 10 bytes are missing.
    hole_start, hole_len = len(a) + 8, 10
    items, err = run([stream[:hole_start], hole_len, stream[hole_start + hole_len :]])
    assert err is None
    assert items == [
        TlsRecord(offset=0, length=25, content_type=23, version=0x0303, fragment=b"A" * 20),
        IncompleteRecord(offset=25, length=25, content_type=23, version=0x0303, missing=10),
        TlsRecord(offset=50, length=7, content_type=21, version=0x0303, fragment=b"\x01\x00"),
    ]


def test_gap_ending_exactly_at_the_record_end() -> None:
    a, b = rec(23, b"A" * 20), rec(22, b"hi")
    items, _ = run([a[:10], len(a) - 10, b])
    assert [type(i) for i in items] == [IncompleteRecord, TlsRecord]
    assert items[1] == TlsRecord(
        offset=25, length=7, content_type=22, version=0x0303, fragment=b"hi"
    )


@pytest.mark.parametrize(
    ("before", "gap", "lost_at"),
    [
        (25, 10, 25),  # hole starts exactly at a record boundary
        (27, 10, 25),  # hole inside the next header
        (15, 20, 25),  # hole runs 10 bytes past the end of the record in progress
    ],
)
def test_gap_that_hides_a_boundary_is_reported_not_guessed(
    before: int, gap: int, lost_at: int
) -> None:
    stream = b"".join(rec(23, bytes([i]) * 20) for i in range(6))
    items, err = run([stream[:before], gap, stream[before + gap :]])
    assert err is None
    tail = items[-1]
    assert isinstance(tail, StreamGap) and tail.reason == "lost_boundary"
    assert (tail.offset, tail.end) == (lost_at, len(stream))
    assert tail.missing == 10  # the hole bytes at or after the lost boundary
    # Nothing after the lost boundary is presented as a record.
    assert all(i.end <= lost_at for i in items[:-1])


def test_scan_after_gap_resynchronises_on_chained_headers() -> None:
    records = [rec(23, pseudo_random(40 + 7 * i, i)) for i in range(8)]
    stream = b"".join(records)
    starts = [sum(len(r) for r in records[:i]) for i in range(len(records))]
    hole_start, hole_len = starts[2], 30  # boundary of record 2 lost
    items, err = run(
        [stream[:hole_start], hole_len, stream[hole_start + hole_len :]], scan_after_gap=True
    )
    assert err is None
    gap = next(i for i in items if isinstance(i, StreamGap))
    assert gap.reason == "resynchronised" and gap.offset == starts[2] and gap.end == starts[3]
    assert gap.missing == hole_len
    resumed = [i for i in items if isinstance(i, TlsRecord) and i.offset >= starts[3]]
    assert [bytes(r.fragment) for r in resumed] == [r[5:] for r in records[3:]]


def test_scan_does_not_resynchronise_without_a_chain() -> None:
    # Only two records follow the hole: RESYNC_CHAIN (3) headers cannot be confirmed.
    records = [rec(23, pseudo_random(50, i)) for i in range(4)]
    stream = b"".join(records)
    items, _ = run([stream[:3], 60, stream[63:]], scan_after_gap=True)
    assert items == [StreamGap(offset=0, length=len(stream), reason="lost_boundary", missing=60)]


# ---------------------------------------------------------------------------------------
# SSLv2-compatible ClientHello (RFC 5246 Appendix E.2)
# ---------------------------------------------------------------------------------------
SSLV2_HELLO = (
    bytes((0x80, 0x1F, 0x01, 0x03, 0x01, 0x00, 0x06, 0x00, 0x00, 0x00, 0x10))
    + bytes.fromhex("00002f 010080")
    + bytes(range(16))
)


def test_sslv2_hello_accepted_only_as_the_first_record() -> None:
    items, err = run([SSLV2_HELLO + rec(22, b"\x0e\x00\x00\x00")])
    assert err is None
    hello = items[0]
    assert isinstance(hello, Sslv2ClientHello)
    assert hello.version == 0x0301 and hello.length == len(SSLV2_HELLO)
    assert hello.cipher_suites == (0x002F,) and hello.cipher_specs == (0x00002F, 0x010080)
    assert hello.client_random == bytes(16) + bytes(range(16))
    assert isinstance(items[1], TlsRecord) and items[1].offset == len(SSLV2_HELLO)
    _, err = run([rec(22, b"x") + SSLV2_HELLO])
    assert err == 6
    _, err = run([SSLV2_HELLO], accept_sslv2_hello=False)
    assert err == 0


# ---------------------------------------------------------------------------------------
# Hypothesis: chunking invariance, garbage, tiling
# ---------------------------------------------------------------------------------------
record_st = st.builds(
    lambda t, v, body: rec(t, body or (b"\x00" if t != 23 else b""), v),
    st.sampled_from([20, 21, 22, 23, 24]),
    st.sampled_from([0x0300, 0x0301, 0x0302, 0x0303]),
    st.binary(max_size=300),
)
stream_st = st.lists(record_st, max_size=12).map(b"".join)


def split(data: bytes, cuts: list[int]) -> list[Chunk]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@given(
    stream_st,
    st.lists(st.integers(min_value=0), max_size=20),
    st.integers(min_value=0, max_value=10**9),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunking_invariance_on_valid_streams(data: bytes, cuts: list[int], start: int) -> None:
    whole = run([data], start_offset=start)
    assert whole[1] is None
    assert run(split(data, cuts), start_offset=start) == whole
    assert run([data[i : i + 1] for i in range(len(data))], start_offset=start) == whole
    # The records tile the stream exactly.
    pos = start
    for item in whole[0]:
        assert isinstance(item, TlsRecord) and item.offset == pos
        pos = item.end
    assert pos == start + len(data)


@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=20), st.booleans())
@settings(max_examples=300, deadline=None)
def test_garbage_only_raises_dissect_errors_and_is_chunking_invariant(
    data: bytes, cuts: list[int], scan: bool
) -> None:
    try:
        whole = run([data], scan_after_gap=scan)
        pieces = run(split(data, cuts), scan_after_gap=scan)
        bytewise = run([data[i : i + 1] for i in range(len(data))], scan_after_gap=scan)
    except DissectError:  # pragma: no cover - run() catches RecordMalformed already
        raise AssertionError("a DissectError escaped run()") from None
    assert pieces == whole and bytewise == whole
    try:
        parse_record(data)
    except DissectError:
        pass


@given(
    stream_st,
    st.lists(
        st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=80)), max_size=3
    ),
    st.lists(st.integers(min_value=0), max_size=10),
    st.booleans(),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_items_tile_the_stream_whatever_the_holes(
    data: bytes, holes: list[tuple[int, int]], cuts: list[int], scan: bool
) -> None:
    # Build the event list: data with some spans replaced by gaps, then split further.
    events: list[Chunk] = []
    pos = 0
    for at, n in sorted(holes):
        at = at % (len(data) + 1)
        if at < pos:
            continue
        n = min(n, len(data) - at)
        if n <= 0:
            continue
        events += split(data[pos:at], cuts)
        events.append(n)
        pos = at + n
    events += split(data[pos:], cuts)
    items, err = run(events, scan_after_gap=scan)
    assert err is None
    cursor = 0
    for item in items:
        assert item.offset == cursor, (item, cursor)
        cursor = item.end
    assert cursor == len(data)
    hole_bytes = sum(e for e in events if isinstance(e, int))
    assert (
        sum(i.missing for i in items if isinstance(i, IncompleteRecord | StreamGap)) == hole_bytes
    )
    originals = {r.offset: r for r in run([data])[0] if isinstance(r, TlsRecord)}
    for item in items:
        if isinstance(item, TlsRecord):
            assert originals[item.offset] == item  # never an invented record
        elif isinstance(item, IncompleteRecord):
            o = originals[item.offset]
            assert (o.length, o.content_type, o.version) == (
                item.length,
                item.content_type,
                item.version,
            )
    # Whole-stream and byte-at-a-time feeding agree even with holes.
    bytewise: list[Chunk] = []
    for e in events:
        bytewise += [e] if isinstance(e, int) else [e[i : i + 1] for i in range(len(e))]
    assert run(bytewise, scan_after_gap=scan) == (items, err)


# ---------------------------------------------------------------------------------------
# resync=True (issue 15): nothing the parser gives up on goes unaccounted
# ---------------------------------------------------------------------------------------
def test_resync_skips_a_bad_header_to_the_next_chain() -> None:
    good = [rec(23, bytes(100 + i)) for i in range(4)]
    junk = b"GARBAGE!" * 10
    data = good[0] + junk + b"".join(good)
    for chunks in ([data], [data[i : i + 7] for i in range(0, len(data), 7)]):
        items, err = run(chunks, resync=True)
        assert err is None
        gap = items[1]
        assert isinstance(gap, StreamGap) and gap.cause == "malformed_header"
        assert (gap.offset, gap.length, gap.reason, gap.skipped) == (
            len(good[0]),
            len(junk),
            "resynchronised",
            len(junk),
        )
        assert "unknown content type 71" in gap.detail
        assert [i.offset for i in items[2:]] == [
            len(good[0]) + len(junk) + sum(map(len, good[:k])) for k in range(4)
        ]


def test_resync_keeps_the_framing_of_an_oversize_or_empty_record() -> None:
    big = rec(23, bytes(0xFFFF))  # 65,535 > 2^14 + 2048: framing known, record kept
    empty = rec(22, b"")  # RFC 5246 §6.2.1 forbids it; the framing holds
    data = rec(23, b"a") + big + empty + rec(23, b"b")
    items, err = run([data], resync=True)
    assert err is None
    assert [type(i).__name__ for i in items] == ["TlsRecord"] * 4
    assert items[1].length == 5 + 0xFFFF and items[2].length == 5
    _, err = run([data])  # without resync: a header check, the parser stops
    assert err == 6


def test_resync_at_the_end_reports_the_rest_as_skipped() -> None:
    data = rec(23, b"a") + b"\x00" * 50
    items, err = run([data], resync=True)
    assert err is None
    gap = items[-1]
    assert isinstance(gap, StreamGap)
    assert (gap.reason, gap.cause, gap.offset, gap.skipped) == (
        "lost_boundary",
        "malformed_header",
        6,
        50,
    )


@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=20))
@settings(max_examples=300, deadline=None)
def test_resync_never_raises_tiles_the_stream_and_is_chunking_invariant(
    data: bytes, cuts: list[int]
) -> None:
    whole = run([data], resync=True)
    assert whole[1] is None
    assert run(split(data, cuts), resync=True) == whole
    assert run([data[i : i + 1] for i in range(len(data))], resync=True) == whole
    cursor = 0
    for item in whole[0]:
        assert item.offset == cursor, (item, cursor)
        cursor = item.end
    assert cursor == len(data)

"""CRYPTO/STREAM reassembly (RFC 9000 §2.2, §4.5) and robustness on garbage (DESIGN.md §4)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dissectors.errors import DissectError
from dissectors.quic import (
    QuicConnection,
    Reassembler,
    iter_packets,
    looks_like_quic,
    parse_frames,
    parse_packet_header,
)


def test_out_of_order_duplicates_gaps_and_fin() -> None:
    r = Reassembler()
    a = r.add(5, b"fghij")
    assert (a.new_bytes, a.duplicate_bytes, a.contiguous_end) == (5, 0, 0)
    b = r.add(0, b"abcdefg")  # overlaps 5..7
    assert (b.new_bytes, b.duplicate_bytes, b.retransmission, b.conflict) == (5, 2, True, False)
    assert b.contiguous_end == 10
    c = r.add(20, b"uv", fin=True)
    assert r.final_size == 22 and not c.retransmission
    snap = r.snapshot()
    assert snap.data == b"abcdefghijuv"
    assert snap.gaps == ((10, 10),)
    assert snap.chunks == ((0, b"abcdefghij"), (20, b"uv"))
    assert snap.fin and not snap.complete and snap.end == 22
    assert r.read() == b"abcdefghij" and r.read() == b""
    r.add(10, bytes(10))
    assert r.snapshot().complete and r.read() == bytes(10) + b"uv"


def test_conflicting_retransmission_keeps_first_bytes() -> None:
    r = Reassembler()
    r.add(0, b"hello")
    res = r.add(2, b"LLO!")
    assert res.conflict and res.duplicate_bytes == 3 and res.new_bytes == 1
    assert r.snapshot().data == b"hello!"


def test_final_size_violations() -> None:
    r = Reassembler()
    r.add(0, b"abc", fin=True)
    assert r.add(0, b"abcd").beyond_final_size
    assert r.add(0, b"ab", fin=True).final_size_changed
    assert r.final_size == 3


def test_memory_cap_drops_and_counts() -> None:
    r = Reassembler(max_bytes=4)
    res = r.add(0, b"abcdef")
    assert res.new_bytes == 4 and res.dropped_bytes == 2 and r.dropped == 2


@st.composite
def split_stream(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, bytes]], int]:
    data = draw(st.binary(min_size=0, max_size=300))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    pieces = [(bounds[i], data[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]
    # some retransmissions of arbitrary sub-ranges, and some pieces lost
    for _ in range(draw(st.integers(0, 4))):
        if data:
            s = draw(st.integers(0, len(data) - 1))
            e = draw(st.integers(s, len(data)))
            pieces.append((s, data[s:e]))
    drop = draw(st.integers(-1, len(pieces) - 1))
    return data, pieces, drop


@given(split_stream(), st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_reassembly_is_independent_of_arrival_order(
    case: tuple[bytes, list[tuple[int, bytes]], int], rnd: object
) -> None:
    data, pieces, drop = case
    kept = [p for i, p in enumerate(pieces) if i != drop]
    a = Reassembler()
    for off, chunk in kept:
        a.add(off, chunk, fin=off + len(chunk) == len(data))
    shuffled = list(kept)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    b = Reassembler()
    for off, chunk in shuffled:
        b.add(off, chunk, fin=off + len(chunk) == len(data))
    sa, sb = a.snapshot(), b.snapshot()
    assert sa == sb
    # every received piece is where it belongs, and holes + data cover the stream
    for off, chunk in sa.chunks:
        assert data[off : off + len(chunk)] == chunk
    covered = sum(len(c) for _, c in sa.chunks) + sum(n for _, n in sa.gaps)
    assert covered == sa.end
    if drop < 0:
        assert sa.data == data and not sa.gaps


@given(st.binary(max_size=400))
@settings(max_examples=400, deadline=None)
def test_parsers_raise_only_dissect_errors(data: bytes) -> None:
    for fn in (
        lambda: parse_packet_header(data),
        lambda: parse_packet_header(data, dcid_length=8),
        lambda: list(iter_packets(data)),
        lambda: parse_frames(data),
    ):
        try:
            fn()
        except DissectError:
            pass
    assert isinstance(looks_like_quic(data), bool)


@given(st.lists(st.tuples(st.binary(max_size=300), st.booleans()), max_size=8))
@settings(max_examples=200, deadline=None)
def test_connection_never_raises_on_garbage(datagrams: list[tuple[bytes, bool]]) -> None:
    conn = QuicConnection({bytes(32): {"CLIENT_TRAFFIC_SECRET_0": bytes(32)}})
    for i, (d, c) in enumerate(datagrams):
        for rec in conn.feed(d, i + 1, i, c):
            assert rec.decrypted is False or rec.frames is not None


@given(st.binary(min_size=1, max_size=60), st.sampled_from([0x00, 0x40, 0xC0, 0xD0, 0xE0]))
@settings(max_examples=300, deadline=None)
def test_long_header_garbage_with_valid_version(tail: bytes, first: int) -> None:
    data = bytes((first,)) + b"\x00\x00\x00\x01" + tail
    try:
        list(iter_packets(data, dcid_length=0))
    except DissectError:
        pass
    conn = QuicConnection()
    conn.feed(data, 1, 0, True)

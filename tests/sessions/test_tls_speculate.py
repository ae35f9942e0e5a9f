"""The speculative header walk (issue 16): :func:`tls.speculate` walks every captured
piece of many directions at once on the guess that each starts with a record header;
:func:`tls.walk_headers` takes a piece's records from it only where its own walk reaches
the piece's first byte.  The walk must be exactly the reference walk's (offsets, header
positions, split headers, end) whatever the pieces look like.  SYNTHETIC directions:
labelled cases (records straddling pieces, a header split across pieces, holes, a cut
snaplen, bad headers, empty directions, one-record and many-record pieces) and random
ones, each compared with the reference walk alone."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pcapkit
from dissectors.tls.session import DecryptStatus, Epoch
from fuzz.build import T0_NS, Tcp, write_pcap
from pcapkit.net.tcp import DirectionIndex
from pcapkit.sessions import tls

TRIG = tls._Trigger("s2c", DecryptStatus.NO_HANDSHAKE, Epoch.PLAINTEXT)


# a payload that reads as a chain of record headers when a walk lands in it: a wrong
# guess walks on through plausible headers instead of stopping at the first byte
FAKE = bytes([23, 3, 3, 0, 2, 0xAB, 0xCD])


NOISE = np.random.default_rng(1).integers(0, 256, 5003, np.uint8).tobytes()  # ciphertext


def rec(n: int, ct: int = 23, fill: bytes = FAKE) -> bytes:
    """One record of ``n`` payload bytes (content type ``ct``, TLS 1.2 framing)."""
    return bytes([ct, 3, 3, n >> 8, n & 0xFF]) + (fill * (n // len(fill) + 1))[:n]


@dataclass
class Piece:
    start: int
    end: int
    cap: int | None = None  # captured end (None: the whole piece)


def build(
    dirs: list[tuple[bytes, list[Piece]]], shuffle: int | None = None
) -> tuple[np.ndarray, list[DirectionIndex]]:
    """One capture buffer holding the captured bytes of every piece of every direction
    (with junk between them, in stream order or shuffled), and each direction's index."""
    layout: list[tuple[int, int]] = [
        (d, k) for d, (_, ps) in enumerate(dirs) for k in range(len(ps))
    ]
    if shuffle is not None:
        random.Random(shuffle).shuffle(layout)
    buf = bytearray(b"\xee" * 7)
    where: dict[tuple[int, int], int] = {}
    for d, k in layout:
        stream, ps = dirs[d]
        p = ps[k]
        cap = p.end if p.cap is None else p.cap
        where[d, k] = len(buf)
        buf += stream[p.start : cap]
        buf += b"\xee" * 3
    idxs = []
    for d, (_, ps) in enumerate(dirs):
        z = np.array
        idxs.append(
            DirectionIndex(
                start=z([p.start for p in ps], np.int64),
                end=z([p.end for p in ps], np.int64),
                cap_end=z([p.end if p.cap is None else p.cap for p in ps], np.int64),
                frame=np.arange(1, len(ps) + 1, dtype=np.int64),
                ts_ns=np.arange(len(ps), dtype=np.int64),
                buf_off=z([where[d, k] for k in range(len(ps))], np.int64),
            )
        )
    return np.frombuffer(bytes(buf), np.uint8), idxs


def cut(stream: bytes, sizes: list[int]) -> list[Piece]:
    """Contiguous pieces of the given sizes (the last one takes the rest)."""
    out, o = [], 0
    for s in sizes:
        out.append(Piece(o, min(o + s, len(stream))))
        o += s
        if o >= len(stream):
            return out
    out.append(Piece(o, len(stream)))
    return out


def walks(
    buf: np.ndarray, idxs: list[DirectionIndex], starts: list[int], pager: tls._Pager | None = None
) -> tuple[list[tls._Walk], list[tls._Walk]]:
    """(reference walks, walks helped by speculate) of every direction."""
    ref = [tls.walk_headers(buf, ix, s, TRIG) for ix, s in zip(idxs, starts, strict=True)]
    runs = tls.speculate(buf, idxs, starts, pager)
    fast = [
        tls.walk_headers(buf, ix, s, TRIG, None, r)
        for ix, s, r in zip(idxs, starts, runs, strict=True)
    ]
    return ref, fast


def same(a: tls._Walk, b: tls._Walk) -> bool:
    return (
        list(a.offsets) == list(b.offsets)
        and list(a.pos) == list(b.pos)
        and a.split == b.split
        and a.end == b.end
    )


def taken(w: tls._Walk) -> int:
    """Records of a walk taken from the speculative walk."""
    return sum(hi - lo for _, lo, hi in w.known)


def check(
    dirs: list[tuple[bytes, list[Piece]]],
    starts: list[int] | None = None,
    shuffle: int | None = None,
) -> tuple[list[tls._Walk], list[tls._Walk]]:
    buf, idxs = build(dirs, shuffle)
    ref, fast = walks(buf, idxs, starts or [0] * len(dirs))
    for d, (r, f) in enumerate(zip(ref, fast, strict=True)):
        assert same(r, f), f"direction {d}: {list(r.offsets)} vs {list(f.offsets)}"
    return ref, fast


SSE = b"".join(rec(30 + 7 * (i % 5)) for i in range(40))
# record boundaries of SSE
BOUNDS = np.cumsum([0] + [5 + 30 + 7 * (i % 5) for i in range(40)]).tolist()


def aligned_pieces(stream_bounds: list[int], per: int) -> list[Piece]:
    """Pieces of ``per`` whole records each."""
    b = stream_bounds
    return [Piece(b[i], b[min(i + per, len(b) - 1)]) for i in range(0, len(b) - 1, per)]


def test_aligned_pieces_are_taken_whole() -> None:
    ref, fast = check([(SSE, aligned_pieces(BOUNDS, 4))])
    assert len(ref[0].offsets) == 40
    assert taken(fast[0]) == 40 and len(fast[0].known) == 1  # one chain, one step


def test_one_record_pieces_and_hundreds_of_records_in_one_piece() -> None:
    many = b"".join(rec(3) for _ in range(700))
    ref, fast = check([(SSE, aligned_pieces(BOUNDS, 1)), (many, [Piece(0, len(many))])])
    assert [len(w.offsets) for w in ref] == [40, 700]
    assert [taken(w) for w in fast] == [40, 700]


def test_record_straddling_pieces() -> None:
    # pieces cut mid-record: the walk crosses them, the guess of the cut pieces fails
    sizes = [100, 100, 37, 300, 5, 5, 500]
    ref, fast = check([(SSE, cut(SSE, sizes))])
    assert len(ref[0].offsets) == 40
    b = BOUNDS
    # a piece cut at a record boundary again is taken from its guess
    pieces = [Piece(0, b[3] + 10), Piece(b[3] + 10, b[5]), Piece(b[5], b[9]), Piece(b[9], b[40])]
    ref, fast = check([(SSE, pieces)])
    assert len(ref[0].offsets) == 40 and 0 < taken(fast[0]) < 40


def test_header_split_across_pieces() -> None:
    b = BOUNDS
    pieces = [Piece(0, b[6] + 2), Piece(b[6] + 2, b[12] + 4), Piece(b[12] + 4, b[40])]
    ref, fast = check([(SSE, pieces)])
    assert sorted(ref[0].split) == [6, 12]  # the reference gathers both headers
    assert len(ref[0].offsets) == 40


def test_hole_mid_record_and_over_a_header() -> None:
    b = BOUNDS
    mid = [Piece(0, b[5]), Piece(b[5], b[7] + 10), Piece(b[7] + 20, b[40])]  # hole inside record 7
    ref, _ = check([(SSE, mid)])
    assert len(ref[0].offsets) == 40
    over = [Piece(0, b[5]), Piece(b[5], b[7] - 2), Piece(b[7] + 3, b[40])]  # hole over header 7
    ref, fast = check([(SSE, over)])
    assert len(ref[0].offsets) == 7 and ref[0].end == b[7]  # the walk stops at the hole
    assert taken(fast[0]) == 7


def test_truncated_snaplen() -> None:
    b = BOUNDS
    pieces = [
        Piece(0, b[4]),
        Piece(b[4], b[8], b[4] + 50),
        Piece(b[8], b[20], b[8] + 3),
        Piece(b[20], b[40]),
    ]
    ref, _ = check([(SSE, pieces)])
    assert ref[0].end < b[40]  # a header past a cut snaplen stops the walk


def test_bad_header_mid_direction() -> None:
    b = BOUNDS
    bad = bytearray(SSE)
    bad[b[9]] = 0x99  # not a content type: the reference walks on through it
    pieces = aligned_pieces(BOUNDS, 3)
    ref, fast = check([(bytes(bad), pieces)])
    assert b[9] in list(ref[0].offsets) and b[10] in list(ref[0].offsets)
    assert 0 < taken(fast[0]) < len(ref[0].offsets)


def test_empty_direction_start_mid_piece_and_in_a_hole() -> None:
    b = BOUNDS
    pieces = aligned_pieces(BOUNDS, 5)
    gap = [Piece(0, b[3]), Piece(b[5], b[40])]
    check(
        [(SSE, pieces), (b"", []), (SSE, pieces), (SSE, gap), (SSE, pieces)],
        starts=[0, 0, b[2], b[4], b[40]],
    )


def test_chains_do_not_cross_directions() -> None:
    # two directions next to each other in speculate's pieces: the first ends at offset
    # b[40], the second's walk starts at a piece that begins at b[40] — they must not chain
    two = SSE + SSE
    b2 = BOUNDS + [BOUNDS[40] + x for x in BOUNDS[1:]]
    ref, fast = check(
        [(SSE, aligned_pieces(BOUNDS, 2)), (two, aligned_pieces(b2, 4))], [0, BOUNDS[40]]
    )
    assert [len(w.offsets) for w in ref] == [40, 40]
    assert [taken(w) for w in fast] == [40, 40]
    assert all(len(w.known) == 1 for w in fast)


def test_a_wrong_guess_is_not_taken() -> None:
    # pieces cut 7 bytes into a record: the guess walks the fake headers of the payload
    b = BOUNDS
    pieces = [
        Piece(0, b[2] + 12),
        Piece(b[2] + 12, b[6]),
        Piece(b[6], b[10] + 5),
        Piece(b[10] + 5, b[40]),
    ]
    buf, idxs = build([(SSE, pieces)])
    runs = tls.speculate(buf, idxs, [0])
    assert runs[0] is not None and (runs[0].end[[1, 3]] >= 0).all()  # guessed, plausibly
    ref, fast = check([(SSE, pieces)])
    # records 0-2 (the first piece, its walk's start) and 6-10 (the third piece, reached
    # at its first byte) taken; records 3-5 walked by the reference loop, the guessed
    # second and fourth pieces never taken
    assert taken(fast[0]) == 8 and len(fast[0].known) == 2


def test_windows_and_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    # the capture read a small window at a time (pieces in shuffled buffer order)
    monkeypatch.setattr(tls, "_REGION_SHIFT", 8)
    calls: list[int] = []
    monkeypatch.setattr(tls, "drop_pages", lambda buf: calls.append(1))
    dirs = [(SSE, aligned_pieces(BOUNDS, k)) for k in (1, 2, 3, 7)]
    buf, idxs = build(dirs, shuffle=5)
    pg = tls._Pager(buf)
    pg.limit = 1
    ref, fast = walks(buf, idxs, [0] * 4, pg)
    assert all(same(r, f) for r, f in zip(ref, fast, strict=True))
    assert len(calls) > 5 and all(taken(w) == 40 for w in fast)


def test_bulk_directions_are_not_guessed() -> None:
    big = b"".join(rec(16384, 23, NOISE) for _ in range(6))
    pieces = cut(big, [1448] * 100)
    buf, idxs = build([(big, pieces)])
    assert tls.speculate(buf, idxs, [0]) == [None]
    check([(big, pieces)])


def random_direction(rng: random.Random) -> tuple[bytes, list[Piece]]:
    sizes = [
        rng.choice([0, 1, 3, 20, 60, 200, 1400, 3000, 16384]) for _ in range(rng.randint(0, 60))
    ]
    stream = bytearray(b"".join(rec(s, rng.choice([20, 21, 22, 23, 23, 23])) for s in sizes))
    for _ in range(rng.randint(0, 2)):  # a byte that breaks a header, sometimes
        if stream:
            stream[rng.randrange(len(stream))] = rng.randrange(256)
    bounds = np.cumsum([0] + [5 + s for s in sizes]).tolist()
    pieces: list[Piece] = []
    o = 0
    while o < len(stream):
        r = rng.random()
        if r < 0.5:  # up to the next few record boundaries
            nxt = [x for x in bounds if x > o][: rng.randint(1, 6)]
            e = nxt[-1] if nxt else len(stream)
        else:
            e = o + rng.choice([1, 2, 4, 5, 6, 100, 1448])
        e = min(e, len(stream))
        cap = e if rng.random() < 0.9 else rng.randint(o, e)
        pieces.append(Piece(o, e, cap))
        o = e + (rng.choice([1, 5, 300]) if rng.random() < 0.1 else 0)  # a hole
    return bytes(stream), pieces


@pytest.mark.parametrize("seed", range(40))
def test_random_directions(seed: int) -> None:
    rng = random.Random(seed)
    dirs = [random_direction(rng) for _ in range(rng.randint(1, 6))]
    starts = [0 if rng.random() < 0.7 or not s else rng.randrange(len(s)) for s, _ in dirs]
    check(dirs, starts, shuffle=seed)


@pytest.mark.parametrize("workers", [2, 3])
def test_windows_walked_in_parts_on_threads(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """Each window cut into parts walked on threads side by side (WALK_PART_MIN down to
    one piece, small windows with drops between them): the walks are the reference's."""
    from thread_spy import spy_threads

    monkeypatch.setattr(tls, "WALK_PART_MIN", 1)
    monkeypatch.setattr(tls, "_REGION_SHIFT", 10)
    parts = spy_threads(monkeypatch, tls, workers)
    for seed in range(40):
        rng = random.Random(seed)
        dirs = [random_direction(rng) for _ in range(rng.randint(2, 6))]
        buf, idxs = build(dirs, shuffle=seed)
        pg = tls._Pager(buf)
        pg.limit = 2
        starts = [0 if rng.random() < 0.7 or not s else rng.randrange(len(s)) for s, _ in dirs]
        ref, fast = walks(buf, idxs, starts, pg)
        for d, (r, f) in enumerate(zip(ref, fast, strict=True)):
            assert same(r, f), (seed, d)
    assert parts and max(parts) == workers  # windows were walked in parts


def test_random_directions_exercise_the_fast_path() -> None:
    n_taken = n_total = 0
    for seed in range(40):
        rng = random.Random(seed)
        dirs = [random_direction(rng) for _ in range(rng.randint(1, 6))]
        buf, idxs = build(dirs, seed)
        _, fast = walks(buf, idxs, [0] * len(dirs))
        n_taken += sum(taken(w) for w in fast)
        n_total += sum(len(w.offsets) for w in fast)
    assert 0 < n_taken < n_total  # both paths used


def _sse_capture(tmp_path: Path) -> Path:
    """Three connections without a handshake, server → client: small records written a
    few per segment (one send per write), then a hole, a bad header, records again."""
    frames: list[tuple[int, bytes]] = []
    t_ns = T0_NS
    for k in range(3):
        c = Tcp(cport=41000 + k, t_ns=t_ns).handshake()
        c.send(True, rec(40, 23, NOISE))
        for i in range(200):
            c.send(False, b"".join(rec(20 + (i + j) % 90, 23, NOISE) for j in range(1 + i % 4)))
            if i == 60 + k:  # a hole over a header: the walk resyncs after it
                ra, rb = rec(50, 23, NOISE), rec(60, 23, NOISE)
                c.send(False, ra[:-5]).hole(False, 10).send(False, rb[5:] + rec(70, 23, NOISE))
            if i == 120 and k == 1:
                c.send(False, b"\x99\x01\x02" + rec(10, 23, NOISE))  # not a header
        frames += c.frames
        t_ns = c.t_ns
    p = tmp_path / "sse.pcap"
    write_pcap(p, frames)
    return p


def test_trace_records_and_anomalies_as_without_speculation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _sse_capture(tmp_path)
    taken_rows: list[int] = []
    walk = tls.walk_headers

    def counted(*a: Any, **k: Any) -> tls._Walk:
        w = walk(*a, **k)
        taken_rows.append(taken(w))
        return w

    monkeypatch.setattr(tls, "walk_headers", counted)
    with pcapkit.open(p) as t:
        fast, fast_anomalies = t.records, t.anomalies
    assert sum(taken_rows) > 1000  # the speculative walk did most of it
    monkeypatch.setattr(tls, "SPECULATE", False)
    with pcapkit.open(p) as t:
        ref, ref_anomalies = t.records, t.anomalies
    names = set(ref_anomalies["name"])
    assert {"tls_record_sync_lost", "tls_record_malformed"} <= names
    assert len(ref) > 1500
    assert fast.equals(ref)
    assert fast_anomalies.equals(ref_anomalies)

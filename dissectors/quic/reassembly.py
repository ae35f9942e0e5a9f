"""Offset-based reassembly of QUIC CRYPTO and STREAM data (RFC 9000 §2.2, §4.5, §19.6, §19.8).

Frames carry ``(offset, data)`` and may arrive out of order, split differently, or again
(retransmissions).  :class:`Reassembler` keeps the first-seen bytes of every offset
(§2.2: "The data at a given offset MUST NOT change if it is sent multiple times"; a
retransmission with different bytes is reported as a *conflict*, the first bytes win),
tracks the final size from FIN (§4.5: "Once a final size for a stream is known, it cannot
change"), and reports the holes.  The result of reassembly depends only on the set of
frames, not on their order; :class:`AddResult` says what each frame contributed.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_REASSEMBLY_BYTES", "AddResult", "Reassembler", "StreamData"]

#: Bytes kept per reassembled stream or crypto stream.  The forensic use needs the whole
#: body of each stream; 64 MiB bounds the memory one hostile stream (offsets up to 2^62)
#: can claim while holding any realistic API response.  Bytes beyond are counted, not kept.
MAX_REASSEMBLY_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class AddResult:
    """What one frame's data did to the stream."""

    new_bytes: int  # bytes never seen before
    duplicate_bytes: int  # bytes already held (retransmitted)
    conflict: bool  # some already-held byte differed (first kept)
    beyond_final_size: bool  # data past a known final size (§4.5 FINAL_SIZE_ERROR)
    final_size_changed: bool  # a FIN disagreed with an earlier final size
    dropped_bytes: int  # not kept because of MAX_REASSEMBLY_BYTES
    contiguous_end: int  # first offset not yet received, after this frame

    @property
    def retransmission(self) -> bool:
        return self.duplicate_bytes > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamData:
    """Reassembled bytes of one stream direction.

    Like ``pcapkit.StreamBytes``, holes are *not* filled: ``data`` is the received pieces
    in offset order, ``chunks`` gives each contiguous piece with its stream offset, and
    ``gaps`` lists each hole as ``(offset, length)`` up to the final size (or the highest
    offset received).
    """

    data: bytes
    chunks: tuple[tuple[int, bytes], ...]
    gaps: tuple[tuple[int, int], ...]
    final_size: int | None
    fin: bool

    @property
    def complete(self) -> bool:
        """Every byte up to a known final size was received."""
        return self.fin and not self.gaps

    @property
    def end(self) -> int:
        if self.final_size is not None:
            return self.final_size
        return self.chunks[-1][0] + len(self.chunks[-1][1]) if self.chunks else 0


class Reassembler:
    """First-seen bytes by offset, as sorted non-overlapping chunks."""

    __slots__ = ("_starts", "_chunks", "_final", "_read", "_held", "_max", "dropped")

    def __init__(self, *, max_bytes: int = MAX_REASSEMBLY_BYTES) -> None:
        self._starts: list[int] = []
        self._chunks: list[bytearray] = []
        self._final: int | None = None
        self._read = 0
        self._held = 0
        self._max = max_bytes
        self.dropped = 0

    # -- state ---------------------------------------------------------------
    @property
    def final_size(self) -> int | None:
        return self._final

    @property
    def contiguous_end(self) -> int:
        """First offset not received (everything before it is held)."""
        if self._starts and self._starts[0] == 0:
            return len(self._chunks[0])
        return 0

    @property
    def highest_end(self) -> int:
        return self._starts[-1] + len(self._chunks[-1]) if self._starts else 0

    # -- input ---------------------------------------------------------------
    def add(self, offset: int, data: bytes, *, fin: bool = False) -> AddResult:
        end = offset + len(data)
        final_changed = False
        if fin:
            if self._final is not None and self._final != end:
                final_changed = True  # §4.5: the first final size is kept
            elif self._final is None:
                self._final = end
        beyond = self._final is not None and end > self._final
        new = dup = dropped = 0
        conflict = False
        starts, chunks = self._starts, self._chunks
        pos = offset
        # first chunk that might overlap [offset, end)
        i = max(bisect_right(starts, offset) - 1, 0)
        pieces: list[tuple[int, bytes]] = []
        while pos < end:
            if i < len(starts) and starts[i] + len(chunks[i]) <= pos:
                i += 1
                continue
            if i < len(starts) and starts[i] <= pos:
                # overlap with chunk i: compare
                c_end = starts[i] + len(chunks[i])
                stop = min(end, c_end)
                have = chunks[i][pos - starts[i] : stop - starts[i]]
                got = data[pos - offset : stop - offset]
                if have != got:
                    conflict = True
                dup += stop - pos
                pos = stop
                i += 1
                continue
            nxt = starts[i] if i < len(starts) else end
            stop = min(end, nxt)
            piece = data[pos - offset : stop - offset]
            room = self._max - self._held
            if room < len(piece):
                dropped += len(piece) - max(room, 0)
                piece = piece[: max(room, 0)]
            if piece:
                pieces.append((pos, piece))
                new += len(piece)
                self._held += len(piece)
            pos = stop
        for p_off, piece in pieces:
            self._insert(p_off, piece)
        self.dropped += dropped
        return AddResult(
            new_bytes=new,
            duplicate_bytes=dup,
            conflict=conflict,
            beyond_final_size=beyond,
            final_size_changed=final_changed,
            dropped_bytes=dropped,
            contiguous_end=self.contiguous_end,
        )

    def _insert(self, offset: int, piece: bytes) -> None:
        """Insert a piece that overlaps nothing, merging with touching neighbours."""
        starts, chunks = self._starts, self._chunks
        i = bisect_right(starts, offset)
        end = offset + len(piece)
        left = i > 0 and starts[i - 1] + len(chunks[i - 1]) == offset
        right = i < len(starts) and starts[i] == end
        if left:
            chunks[i - 1] += piece
            if right:
                chunks[i - 1] += chunks[i]
                del starts[i], chunks[i]
        elif right:
            chunks[i][:0] = piece
            starts[i] = offset
        else:
            starts.insert(i, offset)
            chunks.insert(i, bytearray(piece))

    # -- output --------------------------------------------------------------
    def read(self) -> bytes:
        """Bytes that became contiguous since the last ``read`` (in-order delivery)."""
        end = self.contiguous_end
        if end <= self._read:
            return b""
        out = bytes(self._chunks[0][self._read : end])
        self._read = end
        return out

    def snapshot(self) -> StreamData:
        chunks = tuple((s, bytes(c)) for s, c in zip(self._starts, self._chunks, strict=True))
        gaps: list[tuple[int, int]] = []
        expect = 0
        for s, c in chunks:
            if s > expect:
                gaps.append((expect, s - expect))
            expect = s + len(c)
        if self._final is not None and self._final > expect:
            gaps.append((expect, self._final - expect))
        return StreamData(
            data=b"".join(c for _, c in chunks),
            chunks=chunks,
            gaps=tuple(gaps),
            final_size=self._final,
            fin=self._final is not None,
        )

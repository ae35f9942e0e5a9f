"""Bytes of one direction: reassembled TCP payload or concatenated UDP datagrams.

:func:`tcp_stream` reads a direction's first-seen pieces (:class:`DirectionIndex`)
out of the capture buffer; :func:`udp_stream` concatenates a flow direction's
datagram payloads.  Neither fills a hole: :class:`StreamBytes` keeps the bytes on
each side of a hole adjacent and lists the holes in ``gaps``.
"""

from __future__ import annotations

import numpy as np

from .tcp import DirectionIndex


class StreamBytes(bytes):
    """Captured bytes of one stream direction, in offset order.

    Holes (bytes never captured) are *not* filled: the bytes on each side of a
    hole are simply adjacent here, and :attr:`gaps` lists each hole as
    ``(stream_offset, length)``.  :meth:`chunks` gives the contiguous pieces with
    their stream offsets; :meth:`at` maps a stream offset to a position here.
    """

    gaps: list[tuple[int, int]]
    _runs: np.ndarray  # (k, 3): stream offset, position here, length

    def __new__(cls, data: bytes, runs: np.ndarray, gaps: list[tuple[int, int]]) -> StreamBytes:
        obj = super().__new__(cls, data)
        obj._runs = runs
        obj.gaps = gaps
        return obj

    @classmethod
    def from_chunks(
        cls, data: bytes, chunks: list[tuple[int, bytes]], gaps: list[tuple[int, int]]
    ) -> StreamBytes:
        """From contiguous ``(stream offset, bytes)`` chunks whose bytes make ``data``."""
        runs, pos = [], 0
        for off, chunk in chunks:
            runs.append((off, pos, len(chunk)))
            pos += len(chunk)
        return cls(
            data, np.array(runs, np.int64).reshape(-1, 3), [(int(a), int(b)) for a, b in gaps]
        )

    @property
    def complete(self) -> bool:
        return not self.gaps

    def chunks(self) -> list[tuple[int, bytes]]:
        return [(int(o), bytes(self[p : p + ln])) for o, p, ln in self._runs.tolist()]

    def at(self, offset: int) -> int | None:
        """Position in these bytes of stream ``offset`` (None if it falls in a hole)."""
        r = self._runs
        if r.shape[0] == 0:
            return None
        i = int(np.searchsorted(r[:, 0], offset, side="right")) - 1
        if i < 0 or offset >= r[i, 0] + r[i, 2]:
            return None
        return int(r[i, 1] + offset - r[i, 0])


def empty_index() -> DirectionIndex:
    """The index of a direction that carried no payload."""
    z = np.zeros(0, np.int64)
    return DirectionIndex(z, z, z, z, z, z)


def tcp_stream(buf: np.ndarray, idx: DirectionIndex) -> StreamBytes:
    """Reassembled payload of one TCP direction, read from the capture ``buf``."""
    if idx.start.shape[0] == 0:
        return StreamBytes(b"", np.zeros((0, 3), np.int64), [])
    parts = []
    runs: list[list[int]] = []
    gaps: list[tuple[int, int]] = []
    pos = 0
    expect = 0
    for s, ce, e, bo in zip(
        idx.start.tolist(),
        idx.cap_end.tolist(),
        idx.end.tolist(),
        idx.buf_off.tolist(),
        strict=True,
    ):
        if s > expect:
            gaps.append((expect, s - expect))
        ln = ce - s
        if ln > 0:
            parts.append(buf[bo : bo + ln].tobytes())
            if runs and runs[-1][0] + runs[-1][2] == s:
                runs[-1][2] += ln
            else:
                runs.append([s, pos, ln])
            pos += ln
        if ce < e:
            gaps.append((ce, e - ce))
        expect = e
    return StreamBytes(b"".join(parts), np.array(runs, np.int64).reshape(-1, 3), gaps)


def udp_stream(buf: np.ndarray, payload_off: np.ndarray, payload_caplen: np.ndarray) -> StreamBytes:
    """Datagram payloads (their capture offsets and captured lengths) concatenated."""
    parts = [
        buf[o : o + ln].tobytes()
        for o, ln in zip(payload_off.tolist(), payload_caplen.tolist(), strict=True)
    ]
    lens = np.array([len(p) for p in parts], np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if parts else np.zeros(0, np.int64)
    runs = np.stack([starts, starts, lens], axis=1) if parts else np.zeros((0, 3), np.int64)
    return StreamBytes(b"".join(parts), runs, [])

"""The record walk of a classic pcap, started in a forked child before the imports.

``pcapkit.open(path)`` in a fresh process spends about half a second importing numpy,
pandas and pyarrow before it reads a byte; the read's one per-record Python loop (the
walk from record header to record header, :func:`walk`, ~0.45 µs a record) needs none
of them.  :func:`start` forks a child that walks the whole file while the parent
imports, on the other core; the reader (:func:`pcapkit.io.reader.read_capture`) then
takes its offsets (:func:`take`) instead of walking, when the file is still the one
the child walked (same device, inode, size and modification time).  The child runs
the serial walk itself from the first record, so its offsets are the serial walk's.

This module imports nothing but the standard library and :mod:`pcapkit._parallel` (which
imports only the standard library): it runs before numpy is loaded.
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array
from collections.abc import Callable
from itertools import repeat
from typing import Any

from .. import _parallel

# magic bytes as they appear in the file -> (byte order, record header size); the
# reader's PCAP_MAGICS, without the tick
RECORD_HEADERS: dict[bytes, tuple[str, int]] = {
    b"\xd4\xc3\xb2\xa1": ("<", 16),
    b"\xa1\xb2\xc3\xd4": (">", 16),
    b"\x4d\x3c\xb2\xa1": ("<", 16),
    b"\xa1\xb2\x3c\x4d": (">", 16),
    b"\x34\xcd\xb2\xa1": ("<", 24),  # Kuznetzov modified pcap
    b"\xa1\xb2\xcd\x34": (">", 24),
}
# Smaller files are walked by the reader itself (the walk of 8 MB is ~10 ms).
PREFETCH_MIN_BYTES = 8 << 20

# Records the child walks between two drops of the pages it walked (its peak RSS is
# the process's too, as the kernel counts a child's: a whole walked file would exceed
# what the parent ever holds).
CHILD_DROP_EVERY = 1 << 16

Key = tuple[int, int, int, int]
# the walks started and not yet taken: file key -> [(child pid, read end of its pipe,
# where it starts)], by start (the first from the first record)
_pending: dict[Key, list[tuple[int, int, int]]] = {}


def file_key(st: os.stat_result) -> Key:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def walk(
    mm: Any,
    off: int,
    last: int,
    rec_hdr: int,
    caplen_at: Callable[[Any, int], tuple[int, ...]],
    append: Callable[[int], None],
    count: int,
) -> int:
    """Follow caplen from record header to header: ``append`` each offset up to
    ``last`` (at most ``count`` of them); return where the walk stopped.  The only
    per-record loop of the classic-pcap reader (this process, a forked child).  It checks
    nothing: a garbage caplen only makes it jump ahead, and it always ends; the reader
    validates the records afterwards."""
    for _ in repeat(None, count):
        if off > last:
            break
        append(off)
        off += rec_hdr + caplen_at(mm, off + 8)[0]
    return off


def child_walk(
    mm: Any, start: int, order: str, rec_hdr: int, w: int, stop: int | None = None
) -> None:
    """In a forked child: walk from ``start`` to the end (or to the first offset at or
    past ``stop``), write where it ended and the offsets (int64 words) to the pipe ``w``
    and leave without any cleanup."""
    code = 1
    try:
        n = len(mm)
        last = n - rec_hdr if stop is None else min(n - rec_hdr, stop - 1)
        offs = array("q", [0])  # slot 0: where the walk ends
        caplen_at = struct.Struct(order + "I").unpack_from
        off, page = start, mmap.PAGESIZE
        while off <= last:
            lo = off - off % page
            off = walk(mm, off, last, rec_hdr, caplen_at, offs.append, CHILD_DROP_EVERY)
            hi = min(off, n)
            if hi - hi % page > lo:  # the pages walked: not resident in the child
                mm.madvise(mmap.MADV_DONTNEED, lo, hi - hi % page - lo)
        offs[0] = off
        _parallel.write_all(w, offs.tobytes())
        code = 0
    finally:
        os._exit(code)


def start(path: str | os.PathLike[str]) -> None:
    """Fork a child walking the records of ``path`` if it is a classic pcap of at least
    PREFETCH_MIN_BYTES (else nothing).  A walk started before and not taken is ended."""
    abandon_all()
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            import stat

            if not stat.S_ISREG(st.st_mode) or st.st_size < PREFETCH_MIN_BYTES:
                return
            fmt = RECORD_HEADERS.get(f.read(4))
            if fmt is None or not _parallel.forking_allowed():
                return
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, TypeError):
        return  # the reader says what is wrong with the file
    order, rec_hdr = fmt
    mid = sync_point(mm, int(st.st_size * SPLIT_AT), order, rec_hdr)
    walks: list[tuple[int, int, int]] = []
    try:
        for a, b in ((24, mid), (mid, None)) if mid is not None else ((24, None),):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                child_walk(mm, a, order, rec_hdr, w, b)
            os.close(w)
            walks.append((pid, r, a))
    except OSError:
        pass
    finally:
        mm.close()
    if walks and walks[0][2] == 24:
        _pending[file_key(st)] = walks
    else:
        for pid, fd, _ in walks:
            _parallel.end_child(pid, fd)


# Where the second child starts, as a fraction of the file: the reader joins the first
# child, then the second, which walked the rest meanwhile.
SPLIT_AT = 0.5
# A start for the second child must begin this many plausible record headers.
SYNC_DEPTH = 8
# Plausible: the captured length at most this (or the snaplen) and not above the
# original length, the sub-second part below 10**9, the seconds within ten years of
# the first record's.
SYNC_MAX_CAPLEN = 262_144
SYNC_MAX_SKEW_S = 10 * 365 * 86400


def sync_point(mm: Any, lo: int, order: str, rec_hdr: int) -> int | None:
    """The first offset in [lo, lo + one record's reach) that begins SYNC_DEPTH plausible
    record headers, each followed by its length (or the file ending exactly), or None
    (then one walk covers the whole file).  A wrong pick costs only time: the walk from
    before ``lo`` is used with the walk from here only if it lands exactly on it.  Used
    before the imports (:func:`start`) and by the reader's own split."""
    n = len(mm)
    if n < 24 + 16:
        return None
    words = struct.Struct(order + "IIII").unpack_from
    snaplen = struct.unpack_from(order + "I", mm, 16)[0]
    limit = max(SYNC_MAX_CAPLEN, snaplen if snaplen < (1 << 30) else 0)
    sec0 = words(mm, 24)[0]

    def plausible(at: int) -> bool:
        for _ in range(SYNC_DEPTH):
            if at == n:
                return True
            if at + 16 > n:
                return False
            sec, frac, cap, orig = words(mm, at)
            if (
                cap > limit
                or cap > orig
                or frac >= 1_000_000_000
                or abs(sec - sec0) > SYNC_MAX_SKEW_S
                or at + rec_hdr + cap > n
            ):
                return False
            at += rec_hdr + cap
        return True

    # a record boundary lies within one whole record of any offset; the scan stops
    # at the first chain, most often a few bytes on
    for at in range(max(lo, 24), min(lo + rec_hdr + limit + 1, n - 16)):
        if plausible(at):
            return at
    return None


def take(key: Key) -> list[tuple[int, int, int]] | None:
    """The children walking the file with this key, as (pid, pipe, start) by start, once;
    None if there are none.  Any other walk started is ended."""
    got = _pending.pop(key, None)
    abandon_all()
    return got


def abandon_all() -> None:
    while _pending:
        _, walks = _pending.popitem()
        for pid, fd, _start in walks:
            _parallel.end_child(pid, fd)


__all__ = ["RECORD_HEADERS", "abandon_all", "child_walk", "start", "take", "walk"]

"""Read pcap and pcapng captures into columnar arrays over an mmap.

The file is memory-mapped (gzip input is first inflated into an anonymous
temporary file, recognised by its magic bytes, not its name) and walked once.
The walk is the only per-record Python loop and touches nothing but the record
headers; every per-packet field (timestamps, lengths, interface) is then
gathered with numpy from the record offsets.  No Python object per packet.
For classic pcap the same gather also copies the first ``HEAD_BYTES`` of every
frame (``RawCapture.head_parts``) for the decoder, while those pages are resident.

Formats
-------
* classic pcap — magic ``a1b2c3d4`` (µs) and ``a1b23c4d`` (ns) in either byte
  order, plus the Kuznetzov "modified pcap" header (``a1b2cd34``).
* pcapng — any number of sections in either byte order, several interfaces per
  section with their own link type, ``if_tsresol`` and ``if_tsoffset``;
  Enhanced, Simple and the obsolete Packet Block; Decryption Secrets Blocks are
  kept (with the frame count before them) for the TLS/QUIC layers; Name
  Resolution, Interface Statistics and custom blocks are skipped.

Frame numbers follow Wireshark: 1-based, one per packet block (EPB, SPB, PB) and
per systemd Journal Export Block, in file order.  Truncated or absurd records end
the walk with an anomaly row; the frames before them are kept.
"""

from __future__ import annotations

import functools
import io
import mmap
import os
import shutil
import stat
import struct
import sys
import tempfile
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

import numpy as np

from .. import _parallel
from ..errors import CaptureTooBroken, NotACapture
from ..limits import Limits
from . import prefetch
from .prefetch import walk as _walk

# Largest caplen accepted in a classic pcap record.  Wireshark's own limit for
# "normal" link types is 262144 (WTAP_MAX_PACKET_SIZE_STANDARD); loopback
# captures with a 64 KiB MTU stay far below it.  A bigger caplen means the file
# is corrupt from here on: we stop and report instead of reading garbage.
MAX_CAPLEN = 262_144

# Bytes at the start of each frame that the classic-pcap walk copies into
# ``RawCapture.head_parts`` while the record's page is resident anyway: Ethernet + a
# VLAN tag + IPv6 + TCP with timestamps is 90 bytes.  The decoder reads link,
# IP and TCP headers from this compact matrix instead of faulting every page of
# the file back in.
HEAD_BYTES = 96

# Largest pcapng block we accept (Wireshark: MAX_BLOCK_SIZE = 16 MiB + headroom).
MAX_BLOCK_LEN = 16 * 1024 * 1024 + 4096

GZIP_MAGIC = b"\x1f\x8b"
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BOM = 0x1A2B3C4D

# pcapng block types (draft-ietf-opsawg-pcapng §4)
BT_IDB = 0x00000001
BT_PB = 0x00000002  # obsolete Packet Block
BT_SPB = 0x00000003
BT_NRB = 0x00000004
BT_ISB = 0x00000005
BT_EPB = 0x00000006
BT_JOURNAL = 0x00000009  # systemd Journal Export Block: Wireshark shows it as a frame
BT_DSB = 0x0000000A

# if_tsresol beyond these cannot be real clocks (10^-19 s, 2^-63 s) and would
# overflow 64-bit tick arithmetic; such interfaces keep the µs default.
MAX_TSRESOL_POW10 = 19
MAX_TSRESOL_POW2 = 63
# if_tsoffset larger than ~272 years is corruption, not a clock offset.
MAX_TSOFFSET_S = 1 << 33
INT64_MAX = (1 << 63) - 1  # a record's ts_ns past this wraps (timestamp_out_of_range)

# Pseudo link type for frames that are not packets (journal entries).
LINKTYPE_NONE = -1

PCAP_MAGICS: dict[bytes, tuple[str, int, int]] = {
    # magic bytes as they appear in the file -> (byte order, ns per tick, record header size)
    b"\xd4\xc3\xb2\xa1": ("<", 1000, 16),
    b"\xa1\xb2\xc3\xd4": (">", 1000, 16),
    b"\x4d\x3c\xb2\xa1": ("<", 1, 16),
    b"\xa1\xb2\x3c\x4d": (">", 1, 16),
    b"\x34\xcd\xb2\xa1": ("<", 1000, 24),  # Kuznetzov modified pcap
    b"\xa1\xb2\xcd\x34": (">", 1000, 24),
}


@dataclass(frozen=True, slots=True)
class Interface:
    """One capture interface (classic pcap has exactly one)."""

    index: int
    linktype: int
    snaplen: int
    name: str = ""
    tsresol_ns_num: int = 1000  # ts_ns = ticks * num // den (+ offset)
    tsresol_ns_den: int = 1
    tsresol_pow2: int = -1  # >=0: resolution is 2**-pow2 seconds
    tsoffset_s: int = 0


@dataclass(frozen=True, slots=True)
class Secret:
    """A pcapng Decryption Secrets Block, e.g. an NSS key log (``TLSK``)."""

    secrets_type: int
    data: bytes
    frames_before: int  # how many frames precede the block in the file

    def __repr__(self) -> str:  # never show key material
        return f"Secret(type=0x{self.secrets_type:08x}, {len(self.data)} bytes, after frame {self.frames_before})"


@dataclass
class RawCapture:
    """The columnar result of reading a capture file."""

    path: str
    format: str
    compressed: bool
    file_size: int
    buf: np.ndarray  # uint8 over the whole (inflated) file
    data_off: np.ndarray  # int64, offset of each frame's captured bytes in buf
    caplen: np.ndarray  # int64
    origlen: np.ndarray  # int64
    ts_ns: np.ndarray  # int64, ns since the epoch
    iface: np.ndarray  # int32, index into interfaces
    interfaces: list[Interface]
    secrets: list[Secret] = field(default_factory=list)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    # consecutive (k × HEAD_BYTES) uint8 blocks, one row per frame: the bytes at each
    # data_off (past caplen: whatever follows in the file; rows whose window runs
    # past the file end are zero).  Empty for pcapng, and once the packets are
    # decoded (see head_rows).
    head_parts: list[np.ndarray] = field(default_factory=list, repr=False)
    _keepalive: list[Any] = field(default_factory=list, repr=False)

    @property
    def frames(self) -> int:
        return int(self.data_off.shape[0])

    @property
    def linktype(self) -> np.ndarray:
        """Link type per frame (int32)."""
        lt = np.array([i.linktype for i in self.interfaces] + [LINKTYPE_NONE], dtype=np.int32)
        return lt[np.where(self.iface >= 0, self.iface, len(lt) - 1)]

    def head_rows(self, lo: int, hi: int) -> np.ndarray | None:
        """The ``head_parts`` rows of frames [lo, hi) (a view when one block holds them), or None."""
        if not self.head_parts:
            return None
        got: list[np.ndarray] = []
        base = 0
        for part in self.head_parts:
            a, b = max(lo - base, 0), min(hi - base, part.shape[0])
            if a < b:
                got.append(part[a:b])
            base += part.shape[0]
        if sum(g.shape[0] for g in got) != hi - lo:
            return None
        if not got:  # no frames asked for
            return np.zeros((0, HEAD_BYTES), np.uint8)
        return got[0] if len(got) == 1 else np.concatenate(got)

    def frame_bytes(self, frame: int) -> bytes:
        """The captured bytes of one frame (1-based, like Wireshark)."""
        i = frame - 1
        o = int(self.data_off[i])
        return self.buf[o : o + int(self.caplen[i])].tobytes()

    def release(self, start: int = 0, end: int | None = None) -> None:
        """Drop the mapped pages of ``[start, end)`` from this process.

        The file stays in the page cache and pages fault back in on the next read,
        so this only bounds the resident memory of a long pass over a big file
        (``madvise(MADV_DONTNEED)`` on a read-only file mapping).
        """
        mm = self._keepalive[0] if self._keepalive else None
        if isinstance(mm, mmap.mmap):
            _dontneed(mm, start, len(mm) if end is None else end)

    def close(self) -> None:
        _close_all(self._keepalive)
        self._keepalive.clear()


def _dontneed(mm: mmap.mmap, start: int, end: int) -> None:
    """madvise(MADV_DONTNEED) on whole pages of [start, end); advisory, never fails."""
    if not hasattr(mmap, "MADV_DONTNEED") or not isinstance(mm, mmap.mmap):
        return  # a window of iter_windows is plain bytes
    page = mmap.PAGESIZE
    lo = (max(start, 0) // page) * page
    hi = min(end, len(mm))
    if hi > lo:
        try:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError):
            pass


def _close_all(objs: list[Any]) -> None:
    for obj in objs:
        try:
            obj.close()
        except (BufferError, OSError, ValueError):
            pass  # a numpy view still references the mmap; the GC closes it later


def _anomaly(
    name: str, detail: str, frame: int | None = None, offset: int | None = None
) -> dict[str, Any]:
    return {"name": name, "frame": frame, "flow": None, "offset": offset, "detail": detail}


# ---------------------------------------------------------------------------
# opening


# stdin, pipes and other streams are copied to an unlinked temporary file in chunks of
# this size, then mapped like a file: bounded memory however large the input
SPOOL_CHUNK = 1 << 20
STDIN = "-"
# The gzip_ratio limit is checked once this many bytes are inflated: a small capture of
# zero-filled frames may compress past the ratio and is no bomb (Apache POI's grace size
# is 100 KB; 16 MiB of frames is ~0.1 s of reading and ~10^6 frames at worst).
GZIP_RATIO_GRACE = 16 << 20
# at most this many bytes come out of one inflate call (deflate reaches ~1000:1: one
# unbounded call on a 1 MiB chunk of a bomb would hold ~1 GB)
GZIP_CHUNK = 1 << 20


def _spool(src: BinaryIO, prefix: str) -> BinaryIO:
    """``src`` read to its end into an unlinked temporary file (rewound)."""
    tmp = tempfile.TemporaryFile(prefix=prefix)
    shutil.copyfileobj(src, tmp, SPOOL_CHUNK)
    tmp.flush()
    tmp.seek(0)
    return tmp


def _open_bytes(
    path: str | os.PathLike[str], limits: Limits | None = None
) -> tuple[Any, bool, list[Any], list[dict[str, Any]]]:
    """Return (buffer, compressed, objects to keep alive/close, anomalies).

    Plain files are mmapped read-only.  ``-`` (stdin), pipes, FIFOs and character
    devices (``/dev/stdin``) cannot be mapped: they are spooled to an unlinked
    temporary file first.  gzip input is inflated into an unlinked temporary file
    that is then mmapped, so memory stays bounded for large input, and within the
    ``gzip_ratio`` / ``gzip_bytes`` limits (past them: the capture is read up to there,
    with a ``gzip_limit_exceeded`` anomaly); a gzip stream cut short (or corrupt
    part-way) keeps what inflated before the cut and says where, as tshark reads the
    frames before it.
    """
    limits = Limits.default() if limits is None else limits
    anomalies: list[dict[str, Any]] = []
    if os.fspath(path) == STDIN:
        f: BinaryIO = _spool(sys.stdin.buffer, "pcapkit-stdin-")
    else:
        f = open(path, "rb")  # noqa: SIM115 - kept open with the mmap
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            piped = f
            f = _spool(piped, "pcapkit-stream-")
            piped.close()
    head = f.read(4)
    f.seek(0)
    if head[:2] == GZIP_MAGIC:
        tmp = tempfile.TemporaryFile(prefix="pcapkit-gunzip-")
        end = _Inflated()
        for out in _inflate(f, limits, end):
            tmp.write(out)
        f.close()
        tmp.flush()
        if end.written == 0:
            tmp.close()
            _no_gzip_capture(path, end)
        anomalies += _gzip_anomalies(end)
        mm = mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ)
        return mm, True, [mm, tmp], anomalies
    size = os.fstat(f.fileno()).st_size
    if size == 0:
        f.close()
        raise NotACapture(f"{path}: empty file")
    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, False, [mm, f], anomalies


@dataclass
class _Inflated:
    """How :func:`_inflate` ended: the bytes it gave, what cut the gzip stream short (or
    None), which limit stopped it (or None)."""

    written: int = 0
    problem: str | None = None
    stop: str | None = None


def _inflate(src: BinaryIO, limits: Limits, end: _Inflated) -> Iterator[bytes]:
    """The inflated bytes of every gzip member of ``src``, at most ``GZIP_CHUNK`` bytes out
    of each inflate call, within the ``gzip_bytes`` and ``gzip_ratio`` limits; how it
    ended is written to ``end`` (complete once the iterator is exhausted).  What inflated
    before a cut or a corrupt block is given (``gzip.GzipFile`` would lose the last chunk
    read).  The one inflation of a gzip input, mapped (:func:`_open_bytes`) or streamed
    (:func:`iter_windows`)."""
    ratio, cap = limits["gzip_ratio"], limits["gzip_bytes"]
    packed = 0
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    while True:
        chunk = src.read(SPOOL_CHUNK)
        if not chunk:
            if not d.eof:
                end.problem = "the stream ends before its end-of-stream marker"
            return
        packed += len(chunk)
        while True:  # until this chunk is consumed and no output is pending
            try:
                out = d.decompress(chunk, GZIP_CHUNK)
            except zlib.error as exc:
                end.problem = str(exc)
                return
            if end.written + len(out) > cap:
                yield out[: cap - end.written]
                end.written = cap
                end.stop = f"inflates past the gzip_bytes limit ({cap} bytes)"
                return
            if out:
                yield out
            end.written += len(out)
            # compressed bytes consumed so far (not merely read: a 1 MiB read of a bomb
            # holds ~1 GB of output)
            used = max(packed - len(d.unconsumed_tail), 1)
            if end.written >= GZIP_RATIO_GRACE and end.written > ratio * used:
                end.stop = (
                    f"inflates {end.written} bytes from {used} compressed "
                    f"({end.written / used:.0f}x), past the gzip_ratio limit ({ratio}x): a "
                    "decompression bomb"
                )
                return
            if d.eof:  # a gzip member ended: another may follow (RFC 1952 §2.2)
                chunk = d.unused_data
                while len(chunk) < len(GZIP_MAGIC):  # the member ended at a read's end
                    more = src.read(SPOOL_CHUNK)
                    if not more:
                        break
                    packed += len(more)
                    chunk += more
                if chunk[:2] != GZIP_MAGIC:
                    return  # trailing garbage after the last member
                d = zlib.decompressobj(zlib.MAX_WBITS | 16)
                continue
            chunk = d.unconsumed_tail
            if not chunk and len(out) < GZIP_CHUNK:
                break


def _gzip_anomalies(end: _Inflated) -> list[dict[str, Any]]:
    """The anomaly rows of how a gzip input's inflation ended (none: it ended whole)."""
    rows = []
    if end.stop:
        rows.append(
            _anomaly(
                "gzip_limit_exceeded",
                f"the gzip stream {end.stop}; the capture is read up to there",
                offset=end.written,
            )
        )
    if end.problem:
        rows.append(
            _anomaly(
                "gzip_truncated",
                f"the gzip stream ends early or is corrupt after {end.written} inflated "
                f"bytes ({end.problem}); the capture is read up to there",
                offset=end.written,
            )
        )
    return rows


def _no_gzip_capture(path: str | os.PathLike[str], end: _Inflated) -> None:
    """Raise :class:`NotACapture` for a gzip input that inflated to nothing."""
    why = f"gzip stream is corrupt ({end.problem})" if end.problem else "empty gzip stream"
    raise NotACapture(f"{path}: {why}")


class _GunzipReader(io.RawIOBase):
    """:func:`_inflate` of ``src`` as a readable stream (``end`` says how it ended);
    closing it closes ``src``."""

    def __init__(self, src: BinaryIO, limits: Limits) -> None:
        super().__init__()
        self.end = _Inflated()
        self._src = src
        self._chunks = _inflate(src, limits, self.end)
        self._left = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not len(self._left):
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._left = memoryview(nxt)
        n = min(len(b), len(self._left))
        b[:n] = self._left[:n]
        self._left = self._left[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._chunks.close()
            self._left = memoryview(b"")
            if self._src is not sys.stdin.buffer:
                self._src.close()
        super().close()


ProgressFn = Callable[[float], None]
# How many records the walk reads between progress reports.
PROGRESS_EVERY = 1 << 16


def read_capture(
    path: str | os.PathLike[str],
    progress: ProgressFn | None = None,
    limits: Limits | None = None,
) -> RawCapture:
    """Read a pcap or pcapng file (optionally gzip-compressed).

    Raises :class:`~pcapkit.errors.NotACapture` when the file is neither;
    everything after a valid file header that cannot be read becomes an anomaly.
    ``progress`` (optional) is called with the fraction of the file walked; ``limits``
    (:mod:`pcapkit.limits`, default: the defaults) bounds a gzip input.
    """
    mm, compressed, keep, opened = _open_bytes(path, limits)
    try:
        magic = bytes(mm[:4])
        if magic in PCAP_MAGICS:
            cap = _read_pcap(mm, str(path), progress, _prefetched(compressed, keep))
        elif len(magic) == 4 and struct.unpack("<I", magic)[0] == PCAPNG_SHB:
            cap = _read_pcapng(mm, str(path), progress)
        else:
            raise NotACapture(
                f"{path}: not a pcap or pcapng capture (first bytes {magic.hex() or 'none'})"
            )
    except BaseException:
        prefetch.abandon_all()
        _close_all(keep)
        raise
    cap.compressed = compressed
    cap.anomalies[:0] = opened
    cap._keepalive = keep
    cap.release()  # the walk touched every page; later passes fault in only what they read
    return cap


# ---------------------------------------------------------------------------
# classic pcap


def _prefetched(compressed: bool, keep: list[Any]) -> list[_SplitWalk] | None:
    """The forked walk :func:`pcapkit.io.prefetch.start` began over this very file (the
    one mapped: same device, inode, size and modification time), if any."""
    if compressed or len(keep) != 2:
        prefetch.abandon_all()
        return None
    try:
        key = prefetch.file_key(os.fstat(keep[1].fileno()))
    except (OSError, AttributeError, ValueError):
        prefetch.abandon_all()
        return None
    got = prefetch.take(key)
    return None if got is None else [_SplitWalk(pid, fd, start) for pid, fd, start in got]


def _read_pcap(
    mm: Any, path: str, progress: ProgressFn | None = None, pre: list[_SplitWalk] | None = None
) -> RawCapture:
    n = len(mm)
    order, tick_ns, rec_hdr = PCAP_MAGICS[bytes(mm[:4])]
    if n < 24:
        raise CaptureTooBroken(f"{path}: pcap file header is cut short ({n} of 24 bytes)")
    _, _vmaj, _vmin, _tz, _sig, snaplen, network = struct.unpack_from(order + "IHHiIII", mm, 0)
    linktype = network & 0x0FFFFFFF  # upper bits: FCS length information
    anomalies: list[dict[str, Any]] = []
    limit = max(MAX_CAPLEN, snaplen if snaplen < (1 << 30) else 0)

    # The only per-record loop: follow caplen from header to header.  It checks
    # nothing (a garbage caplen only makes it jump ahead, and it always ends);
    # validation is vectorised below and cuts the walk at the first bad record.
    # Every PROGRESS_EVERY records the headers walked so far are gathered and
    # their pages dropped (madvise), so the mapping never needs to be resident
    # as a whole.  On a big file a forked child walks the second half from a
    # resynchronised record start (_split_walk); its offsets are used only if
    # this walk lands exactly on that start, so the result is the serial walk's.
    caplen_at = struct.Struct(order + "I").unpack_from
    offs = array("q")  # 8 bytes per record, not a Python int object
    append = offs.append
    off = 24
    last = n - rec_hdr
    buf = np.frombuffer(mm, dtype=np.uint8)
    hdr_parts: list[np.ndarray] = []
    head_parts: list[np.ndarray] = []
    done = 0  # records whose headers are gathered
    # children walking parts of the file, by start: forked before the imports
    # (pcapkit.io.prefetch: from the first record, and from about the middle), or one
    # forked now for the second half
    if pre:
        splits = list(pre)
    else:
        one = _split_walk(mm, order, rec_hdr)
        splits = [] if one is None else [one]
    try:
        while off <= last:
            nxt = splits[0] if splits else None
            stop = nxt.start if nxt is not None else n + 1
            off = _walk(mm, off, min(last, stop - 1), rec_hdr, caplen_at, append, PROGRESS_EVERY)
            if nxt is not None and off >= stop:
                splits.pop(0)
                if off == stop:
                    try:
                        tail, off = nxt.join()
                        offs.extend(array("q", tail.tobytes()))
                    except OSError:
                        pass  # the child failed: walk on from here
                else:  # the child started off the chain: walk on without it
                    nxt.abandon()
            if len(offs) == done:
                continue
            for a in range(done, len(offs), PROGRESS_EVERY):
                chunk = np.array(offs[a : a + PROGRESS_EVERY], dtype=np.int64)
                words, head = _gather_records(buf, chunk, order, rec_hdr)
                hdr_parts.append(words)  # ts_sec, ts_frac, caplen, origlen
                head_parts.append(head)
                hi = int(chunk[-1]) + rec_hdr if a + PROGRESS_EVERY < len(offs) else off
                _dontneed(mm, int(chunk[0]), min(hi, n))
                if progress:
                    progress(min(hi, n) / n)
            done = len(offs)
    finally:
        for sp in splits:
            sp.abandon()
    rec = np.frombuffer(offs, dtype=np.int64).copy() if len(offs) else np.zeros(0, np.int64)
    hdr = np.concatenate(hdr_parts) if hdr_parts else np.zeros((0, 4), np.int64)
    caplen = hdr[:, 2]
    bad = (caplen > limit) | (rec + rec_hdr + caplen > n)
    if bad.any():
        i = int(np.argmax(bad))
        o, cl = int(rec[i]), int(caplen[i])
        if cl > limit:
            detail = (
                f"record at byte {o} claims {cl} captured bytes (limit {limit}); "
                f"the rest of the file ({n - o} bytes) is ignored"
            )
            anomalies.append(_anomaly("absurd_caplen", detail, frame=i + 1, offset=o))
        else:
            detail = f"last record at byte {o} needs {cl} bytes, only {n - o - rec_hdr} remain"
            anomalies.append(_anomaly("truncated_record", detail, frame=i + 1, offset=o))
        rec, hdr = rec[:i], hdr[:i]
        head_parts = _first_rows(head_parts, i)  # one head row per kept frame, no more
    elif off < n:
        anomalies.append(
            _anomaly(
                "truncated_record",
                f"{n - off} trailing bytes do not hold a whole record header",
                frame=rec.shape[0] + 1,
                offset=off,
            )
        )
    caplen = hdr[:, 2]
    origlen = hdr[:, 3]
    ts_ns = hdr[:, 0] * 1_000_000_000 + hdr[:, 1] * tick_ns
    iface = np.zeros(rec.shape[0], dtype=np.int32)
    intf = Interface(
        index=0,
        linktype=linktype,
        snaplen=snaplen,
        tsresol_ns_num=tick_ns,
    )
    return RawCapture(
        path=path,
        format="pcap",
        compressed=False,
        file_size=n,
        buf=buf,
        data_off=rec + rec_hdr,
        caplen=caplen,
        origlen=origlen,
        ts_ns=ts_ns,
        iface=iface,
        interfaces=[intf],
        anomalies=anomalies,
        head_parts=head_parts,
    )


def _first_rows(parts: list[np.ndarray], n: int) -> list[np.ndarray]:
    """The first ``n`` rows of consecutive row blocks (the walk gathered rows for records
    that validation then cut: a cut or absurd first record leaves none)."""
    out: list[np.ndarray] = []
    for part in parts:
        if n <= 0:
            break
        out.append(part[:n])
        n -= part.shape[0]
    return out


# Files at least this big have the second half of their record walk done by a
# forked child (the walk is a Python loop, ~0.45 µs per record, and holds the GIL).
SPLIT_MIN_BYTES = 64 << 20
# Where the child starts, as a fraction of the file.  The parent also gathers the
# headers of its part as it walks, but the child faults every page of its part into
# its own page tables: measured on the 1M-packet benchmark, the two finish together
# at about half.
SPLIT_AT = 0.52


class _SplitWalk:
    """A forked child walking the records of a classic pcap from ``start`` to the end."""

    def __init__(self, pid: int, fd: int, start: int) -> None:
        self.pid, self.fd, self.start = pid, fd, start

    def join(self) -> tuple[np.ndarray, int]:
        """The child's record offsets (from ``start``) and where its walk ended."""
        try:
            data = _read_all(self.fd)
        finally:
            os.close(self.fd)
            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
        if status != 0 or len(data) < 8 or len(data) % 8:
            raise OSError(f"record walk child failed (status {status})")
        words = np.frombuffer(data, dtype=np.int64)
        return words[1:], int(words[0])

    def abandon(self) -> None:
        if self.pid:
            _parallel.end_child(self.pid, self.fd)
            self.pid = 0


def _read_all(fd: int) -> bytes:
    parts = []
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return b"".join(parts)
        parts.append(b)


def _split_walk(mm: Any, order: str, rec_hdr: int) -> _SplitWalk | None:
    """Fork a child that walks the second half of a big classic pcap, or None.

    Only on Linux (where it is measured and tested; on macOS not every system
    library is safe to use in a forked child), when the file is big, more than one
    thread is allowed (:func:`pcapkit._parallel.thread_count`) and this process runs
    a single thread (forking a multi-threaded process can deadlock).
    """
    n = len(mm)
    if n < SPLIT_MIN_BYTES or not _parallel.forking_allowed():
        return None
    start = prefetch.sync_point(mm, int(n * SPLIT_AT), order, rec_hdr)
    if start is None:
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: walk, send the offsets, leave without any cleanup
        os.close(r)
        prefetch.child_walk(mm, start, order, rec_hdr, w)
    os.close(w)
    return _SplitWalk(pid, r, start)


def drop_pages(buf: np.ndarray) -> None:
    """Drop the pages of the capture mapping under ``buf`` from this process (see
    :meth:`RawCapture.release`); nothing when ``buf`` is not over an mmap.

    A pass that reads scattered bytes of a big capture (retransmissions compared,
    TLS headers walked) calls it every so often: every page fault maps its neighbours
    too (the kernel's fault-around, 64 KiB), so a few thousand small reads would
    otherwise keep most of the file resident."""
    base = buf.base
    while isinstance(base, np.ndarray | memoryview) and not isinstance(base, mmap.mmap):
        base = base.obj if isinstance(base, memoryview) else base.base
    if isinstance(base, mmap.mmap):
        try:
            _dontneed(base, 0, len(base))
        except ValueError:
            pass  # closed


def rows_at_released(arr: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """:func:`rows_at`, gathered in order of offset a slice at a time with the mapping's
    pages dropped after each (:func:`drop_pages`): the same matrix, without the whole
    capture resident at once."""
    n = idx.shape[0]
    if n <= _GATHER_CHUNK:
        out = rows_at(arr, idx, width)
        drop_pages(arr)
        return out
    out = np.empty((n, width), np.uint8)
    order = np.argsort(idx, kind="stable")
    for lo in range(0, n, _GATHER_CHUNK):
        sel = order[lo : lo + _GATHER_CHUNK]
        out[sel] = rows_at(arr, idx[sel], width)
        drop_pages(arr)
    return out


_GATHER_CHUNK = 1 << 12


def rows_at(arr: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes of the 1-D uint8 ``arr`` at each offset, as an (n, width) matrix.

    The array is viewed as overlapping ``width``-byte items, one starting at every
    byte, so fancy indexing copies each row in one piece (every offset must leave
    ``width`` bytes in bounds).
    """
    if arr.shape[0] < width:
        return np.zeros((idx.shape[0], width), np.uint8)
    items = np.ndarray(
        shape=(arr.shape[0] - width + 1,),
        dtype=np.dtype((np.void, width)),
        buffer=arr,
        strides=(1,),
    )
    return items[idx].view(np.uint8).reshape(idx.shape[0], width)


def _gather_records(
    buf: np.ndarray, off: np.ndarray, order: str, rec_hdr: int
) -> tuple[np.ndarray, np.ndarray]:
    """The header words (n, 4) and the first HEAD_BYTES of the data of records at ``off``.

    One row copy per record: header and data sit next to each other in the file.
    """
    width = rec_hdr + HEAD_BYTES
    fits = off + width <= buf.shape[0]
    if fits.all():
        blk = rows_at(buf, off, width)
        words = np.ascontiguousarray(blk[:, :16]).view(order + "u4").astype(np.int64)
        return words, blk[:, rec_hdr:]
    words = _gather_words(buf, off, order, 4)
    head = np.zeros((off.shape[0], HEAD_BYTES), np.uint8)
    head[fits] = rows_at(buf, off[fits], width)[:, rec_hdr:]
    return words, head


def _gather_words(buf: np.ndarray, idx: np.ndarray, order: str, words: int) -> np.ndarray:
    """``words`` consecutive u32 at each byte offset in ``idx``, as an (n, words) int64 array
    (unaligned reads through :func:`rows_at`; every offset must leave 4·words bytes in bounds)."""
    return rows_at(buf, idx, 4 * words).view(order + "u4").astype(np.int64)


def _gather_u32(buf: np.ndarray, idx: np.ndarray, dt: np.dtype[Any]) -> np.ndarray:
    """One u32 at each byte offset in ``idx`` (see :func:`_gather_words`)."""
    return _gather_words(buf, idx, dt.str[0], 1)[:, 0]


# ---------------------------------------------------------------------------
# pcapng


def _parse_options(mm: Any, start: int, end: int, order: str) -> list[tuple[int, bytes]]:
    """TLV options (code u16, length u16, value padded to 32 bits) until opt_endofopt."""
    out: list[tuple[int, bytes]] = []
    p = start
    while p + 4 <= end:
        code, ln = struct.unpack_from(order + "HH", mm, p)
        if code == 0:
            break
        v0 = p + 4
        if v0 + ln > end:
            break
        out.append((code, bytes(mm[v0 : v0 + ln])))
        p = v0 + ((ln + 3) & ~3)
    return out


def _idb(mm: Any, off: int, blen: int, order: str, index: int) -> Interface:
    linktype, _res, snaplen = struct.unpack_from(order + "HHI", mm, off + 8)
    num, den, pow2, tsoff, name = 1000, 1, -1, 0, ""
    for code, val in _parse_options(mm, off + 16, off + blen - 4, order):
        if code == 9 and len(val) >= 1:  # if_tsresol
            r = val[0]
            if r & 0x80:
                if (r & 0x7F) <= MAX_TSRESOL_POW2:
                    pow2 = r & 0x7F
            elif r <= 9:
                num, den = 10 ** (9 - r), 1
            elif r <= MAX_TSRESOL_POW10:
                num, den = 1, 10 ** (r - 9)
            # else: an impossible resolution; keep the µs default
        elif code == 14 and len(val) >= 8:  # if_tsoffset, seconds
            off = struct.unpack(order + "q", val[:8])[0]
            if abs(off) <= MAX_TSOFFSET_S:
                tsoff = off
        elif code == 2:  # if_name
            name = val.rstrip(b"\x00").decode("utf-8", "replace")
    return Interface(
        index=index,
        linktype=linktype,
        snaplen=snaplen,
        name=name,
        tsresol_ns_num=num,
        tsresol_ns_den=den,
        tsresol_pow2=pow2,
        tsoffset_s=tsoff,
    )


def _ts_ns_exact(clock: tuple[int, int, int, int], t: int) -> int:
    """``ts_ns`` of ``t`` ticks as :func:`_read_pcapng` computes it, in Python integers
    (no wrap); ``clock`` is an interface's (pow2, num, den, offset_s)."""
    pow2, num, den, offset_s = clock
    if pow2 >= 0:
        k = pow2
        secs, frac = t >> k, t & ((1 << k) - 1)
        if k > 32:
            frac >>= k - 32
            k = 32
        v = secs * 1_000_000_000 + ((frac * 1_000_000_000) >> k)
    elif den == 1:
        v = t * num
    else:
        v = t // den
    return v + offset_s * 1_000_000_000


@functools.lru_cache(maxsize=64)
def _max_ticks(clock: tuple[int, int, int, int]) -> int:
    """The most ticks whose ``ts_ns`` fits in int64 (the conversion is monotone in the
    ticks: a binary search over the 64-bit range, ~64 steps once per clock)."""
    top = (1 << 64) - 1
    if _ts_ns_exact(clock, top) <= INT64_MAX:
        return top
    lo, hi = 0, top  # 0 ticks fit (|if_tsoffset| is bounded), ``top`` does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _ts_ns_exact(clock, mid) <= INT64_MAX:
            lo = mid
        else:
            hi = mid
    return lo


def _read_pcapng(mm: Any, path: str, progress: ProgressFn | None = None) -> RawCapture:
    n = len(mm)
    anomalies: list[dict[str, Any]] = []
    interfaces: list[Interface] = []
    secrets: list[Secret] = []
    # Per packet block: file offset, block type, section byte order, section iface base
    offs: list[int] = []
    kinds: list[int] = []
    sect_of: list[int] = []
    sections: list[tuple[str, int]] = []  # (byte order, first global iface index)
    order = "<"
    u32le = struct.Struct("<I").unpack_from
    u32be = struct.Struct(">I").unpack_from
    u32 = u32le
    off = 0
    section = -1
    frames = 0
    tick = PROGRESS_EVERY if progress else -1
    while off + 12 <= n:
        tick -= 1
        if tick == 0:
            progress(off / n)  # type: ignore[misc]
            tick = PROGRESS_EVERY
        btype = u32le(mm, off)[0]
        if btype == PCAPNG_SHB:
            bom = u32le(mm, off + 8)[0]
            if bom == PCAPNG_BOM:
                order, u32 = "<", u32le
            elif bom == 0x4D3C2B1A:
                order, u32 = ">", u32be
            else:
                anomalies.append(
                    _anomaly(
                        "bad_block",
                        f"section header at byte {off} has a bad byte-order magic; the rest "
                        f"of the file ({n - off} bytes) is ignored",
                        frames + 1,
                        off,
                    )
                )
                break
            section += 1
            sections.append((order, len(interfaces)))
        elif section < 0:
            raise CaptureTooBroken(f"{path}: pcapng without a Section Header Block")
        else:
            btype = u32(mm, off)[0]
        blen = u32(mm, off + 4)[0]
        if blen < 12 or blen % 4 or blen > MAX_BLOCK_LEN:
            anomalies.append(
                _anomaly(
                    "bad_block",
                    f"block at byte {off} has an invalid length {blen}; the rest of the file "
                    f"({n - off} bytes) is ignored",
                    frames + 1,
                    off,
                )
            )
            break
        if off + blen > n:
            anomalies.append(
                _anomaly(
                    "truncated_record",
                    f"last block at byte {off} needs {blen} bytes, only {n - off} remain",
                    frames + 1,
                    off,
                )
            )
            break
        if u32(mm, off + blen - 4)[0] != blen:
            anomalies.append(
                _anomaly(
                    "bad_block",
                    f"block at byte {off}: trailing length differs from {blen}; the rest of "
                    f"the file ({n - off} bytes) is ignored",
                    frames + 1,
                    off,
                )
            )
            break
        if btype in (BT_EPB, BT_SPB, BT_PB, BT_JOURNAL):
            offs.append(off)
            kinds.append(btype)
            sect_of.append(section)
            frames += 1
        elif btype == BT_IDB:
            if blen < 20:
                anomalies.append(
                    _anomaly(
                        "bad_block", f"interface block at byte {off} too short", frames + 1, off
                    )
                )
            else:
                interfaces.append(_idb(mm, off, blen, order, len(interfaces)))
        elif btype == BT_DSB:
            if blen >= 20:
                stype, slen = struct.unpack_from(order + "II", mm, off + 8)
                if 16 + slen <= blen - 4:
                    secrets.append(Secret(stype, bytes(mm[off + 16 : off + 16 + slen]), frames))
                else:
                    anomalies.append(
                        _anomaly(
                            "bad_block", f"secrets block at byte {off} overruns", frames + 1, off
                        )
                    )
        # NRB, ISB, custom and unknown blocks are skipped.
        off += blen
    if 0 < n - off < 12 and not anomalies:
        anomalies.append(
            _anomaly(
                "truncated_record",
                f"{n - off} trailing bytes after the last block",
                frames + 1,
                off,
            )
        )

    buf = np.frombuffer(mm, dtype=np.uint8)
    m = len(offs)
    rec = np.array(offs, dtype=np.int64)
    kind = np.array(kinds, dtype=np.int64)
    sect = np.array(sect_of, dtype=np.int64)
    data_off = np.zeros(m, np.int64)
    caplen = np.zeros(m, np.int64)
    origlen = np.zeros(m, np.int64)
    ts_ticks = np.zeros(m, np.uint64)
    local_if = np.zeros(m, np.int64)
    has_ts = np.zeros(m, bool)
    blen_arr = np.zeros(m, np.int64)
    for s, (sorder, _base) in enumerate(sections):
        dt = np.dtype(sorder + "u4")
        in_s = sect == s
        if not in_s.any():
            continue
        idx = np.nonzero(in_s)[0]
        blen_arr[idx] = _gather_u32(buf, rec[idx] + 4, dt)
        for btype, hdr in ((BT_EPB, 28), (BT_PB, 28)):
            sel = idx[kind[idx] == btype]
            if sel.shape[0] == 0:
                continue
            o = rec[sel]
            if btype == BT_EPB:
                local_if[sel] = _gather_u32(buf, o + 8, dt)
            else:  # PB: interface id is u16, then drops count u16
                dt16 = np.dtype(sorder + "u2")
                b = np.ascontiguousarray(buf[(o + 8)[:, None] + np.arange(2)])
                local_if[sel] = b.view(dt16).reshape(-1)
            hi = _gather_u32(buf, o + 12, dt).astype(np.uint64)
            lo = _gather_u32(buf, o + 16, dt).astype(np.uint64)
            ts_ticks[sel] = (hi << np.uint64(32)) | lo
            has_ts[sel] = True
            caplen[sel] = _gather_u32(buf, o + 20, dt)
            origlen[sel] = _gather_u32(buf, o + 24, dt)
            data_off[sel] = o + hdr
        sel = idx[kind[idx] == BT_SPB]
        if sel.shape[0]:
            o = rec[sel]
            origlen[sel] = _gather_u32(buf, o + 8, dt)
            data_off[sel] = o + 12
            local_if[sel] = 0
            # SPB: captured length = min(original length, snaplen, room in the block)
            snap = interfaces[sections[s][1]].snaplen if len(interfaces) > sections[s][1] else 0
            room = blen_arr[sel] - 16
            cl = np.minimum(origlen[sel], room)
            if snap:
                cl = np.minimum(cl, snap)
            caplen[sel] = cl
        sel = idx[kind[idx] == BT_JOURNAL]
        if sel.shape[0]:
            data_off[sel] = rec[sel] + 8
            caplen[sel] = blen_arr[sel] - 12
            origlen[sel] = caplen[sel]
            local_if[sel] = -1

    # Global interface index = section base + local id; validate.
    base = np.array([b for _, b in sections] or [0], dtype=np.int64)
    iface = np.where(local_if >= 0, base[sect] + local_if if m else local_if, -1)
    sect_if_count = np.array(
        [
            (sections[s + 1][1] if s + 1 < len(sections) else len(interfaces)) - sections[s][1]
            for s in range(len(sections))
        ]
        or [0],
        dtype=np.int64,
    )
    bad_if = (local_if >= 0) & (local_if >= sect_if_count[sect] if m else local_if >= 0)
    journal = kind == BT_JOURNAL
    # Captured data must fit in its block.
    bad_len = (data_off + caplen > rec + blen_arr - 4) & ~journal
    bad = bad_if | bad_len
    if bad.any():
        for i in np.nonzero(bad)[0][:1000]:
            why = "unknown interface id" if bad_if[i] else "captured length overruns the block"
            anomalies.append(
                _anomaly(
                    "bad_block", f"packet block at byte {rec[i]}: {why}", int(i) + 1, int(rec[i])
                )
            )
        caplen = np.where(bad, 0, caplen)
        iface = np.where(bad_if, -1, iface)

    # Timestamps: per interface resolution and offset.
    ts_ns = np.zeros(m, np.int64)
    for intf in interfaces:
        sel = (iface == intf.index) & has_ts
        if not sel.any():
            continue
        t = ts_ticks[sel]
        if intf.tsresol_pow2 >= 0:
            k = intf.tsresol_pow2
            secs = (t >> np.uint64(k)).astype(np.int64)
            frac = t & np.uint64((1 << k) - 1)
            if k > 32:  # keep 32 fractional bits so frac * 1e9 fits in 64 bits
                frac >>= np.uint64(k - 32)
                k = 32
            v = secs * 1_000_000_000 + ((frac * np.uint64(1_000_000_000)) >> np.uint64(k)).astype(
                np.int64
            )
        elif intf.tsresol_ns_den == 1:
            v = t.astype(np.int64) * intf.tsresol_ns_num
        else:
            v = (t // np.uint64(intf.tsresol_ns_den)).astype(np.int64)
        ts_ns[sel] = v + intf.tsoffset_s * 1_000_000_000
        clock = (intf.tsresol_pow2, intf.tsresol_ns_num, intf.tsresol_ns_den, intf.tsoffset_s)
        late = t > np.uint64(_max_ticks(clock))  # their ts_ns would not fit: they wrapped
        if late.any():
            where = np.nonzero(sel)[0][late]
            i = int(where[0])
            anomalies.append(
                _anomaly(
                    "timestamp_out_of_range",
                    f"{where.shape[0]} record(s) of interface {intf.index} have timestamps "
                    f"past 2^63 ns after its resolution and offset (the first, in this row's "
                    f"frame: {int(t[late][0])} ticks); their ts_ns wrap and are not times",
                    i + 1,
                    int(rec[i]),
                )
            )
    # SPB and journal blocks carry no timestamp: they inherit the previous frame's.
    if m and not has_ts.all():
        last = np.where(has_ts, np.arange(m), -1)
        np.maximum.accumulate(last, out=last)
        ts_ns = np.where(last >= 0, ts_ns[np.maximum(last, 0)], 0)

    return RawCapture(
        path=path,
        format="pcapng",
        compressed=False,
        file_size=n,
        buf=buf,
        data_off=data_off,
        caplen=caplen,
        origlen=origlen,
        ts_ns=ts_ns,
        iface=iface.astype(np.int32),
        interfaces=interfaces,
        secrets=secrets,
        anomalies=anomalies,
    )


# ---------------------------------------------------------------------------
# windows: one streaming pass in bounded memory (pcapkit.net.shard, issue 20)

# Bytes read per window by iter_windows: a window's frames, decoded, take a few times
# this in memory (the decoder's per-packet columns), whatever the size of the file.
# Sharding a 106 MB capture in 4 (in-process): 8 MB windows 0.83 s and 8 MB over the
# import's address space, 16 MB 1.05 s / +47 MB, 32 MB 1.08 s / +97 MB.
WINDOW_BYTES = 8 << 20


@dataclass
class Window:
    """Consecutive frames of a capture read by :func:`iter_windows`.

    ``cap`` holds this window's frames only (its ``buf`` is the window's bytes, not
    mapped); ``cap.iface`` and ``cap.interfaces`` are the file's global interface
    indices and every interface seen so far; ``cap.secrets`` are the Decryption Secrets
    Blocks read since the previous window (``frames_before`` counted in the whole file);
    anomaly frame numbers are the file's (their byte offsets are the window's).
    ``first_frame`` frames precede the window.
    """

    cap: RawCapture
    first_frame: int


def _stream_open(path: str | os.PathLike[str], limits: Limits) -> tuple[BinaryIO, _Inflated | None]:
    """A sequential byte stream of the capture — a file, stdin, or a gzip input inflated
    on the fly within ``limits``' gzip limits (:func:`_inflate`, as a whole-file read
    inflates it) — and, for gzip, how its inflation ended (None otherwise).  Nothing is
    spooled or mapped: the file may be larger than memory."""
    if os.fspath(path) == STDIN:
        f: BinaryIO = sys.stdin.buffer
    else:
        f = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    head = f.peek(2)[:2] if hasattr(f, "peek") else b""
    if head == GZIP_MAGIC:
        raw = _GunzipReader(f, limits)
        return io.BufferedReader(raw, SPOOL_CHUNK), raw.end  # type: ignore[return-value]
    return f, None


def iter_windows(
    path: str | os.PathLike[str],
    window_bytes: int = WINDOW_BYTES,
    limits: Limits | None = None,
) -> Iterator[Window]:
    """Read a pcap or pcapng capture (optionally gzip, or ``-``) as consecutive
    :class:`Window` s of about ``window_bytes`` each, in one sequential pass: memory is
    bounded by the window, not the file.  Each window is parsed by the same code as
    :func:`read_capture` (a classic-pcap window is the file header and whole records; a
    pcapng window is its section's header and interface blocks and whole blocks), so
    the frames, timestamps and anomalies are those of a whole-file read.  A gzip input
    is inflated within ``limits`` (default: the defaults) as :func:`read_capture` does;
    how its inflation ended (``gzip_limit_exceeded``, ``gzip_truncated``) is among the
    last window's anomalies."""
    f, end = _stream_open(path, Limits.default() if limits is None else limits)
    try:
        head = f.read(4)
        if len(head) == 4 and head in PCAP_MAGICS:
            windows = _pcap_windows(f, head, str(path), window_bytes)
        elif len(head) == 4 and struct.unpack("<I", head)[0] == PCAPNG_SHB:
            windows = _pcapng_windows(f, head, str(path), window_bytes)
        else:
            if end is not None and end.written == 0:
                _no_gzip_capture(path, end)
            raise NotACapture(
                f"{path}: not a pcap or pcapng capture (first bytes {head.hex() or 'none'})"
            )
        if end is None:
            yield from windows
            return
        last: Window | None = None  # held back: how the stream ended is known after it
        for w in windows:
            if last is not None:
                yield last
            last = w
        if last is not None:
            last.cap.anomalies += _gzip_anomalies(end)
            yield last
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _shift(cap: RawCapture, first_frame: int, parts: list[tuple[int, int]]) -> None:
    """A window's anomalies numbered as in the whole file: frames after ``first_frame``,
    offsets into the window's buffer made offsets into the file — ``parts`` lists, in
    buffer order, (buffer offset, file offset) where each piece joined into the buffer
    starts (a pcapng window puts its section's header and interface blocks in front)."""
    starts = [b for b, _ in parts]
    for a in cap.anomalies:
        if a.get("frame") is not None:
            a["frame"] += first_frame
        o = a.get("offset")
        if o is not None and parts:
            b, at = parts[max(bisect_right(starts, o) - 1, 0)]
            a["offset"] = at + o - b


def _pcap_windows(f: BinaryIO, magic: bytes, path: str, window: int) -> Iterator[Window]:
    hdr = magic + f.read(20)
    order, _tick, rec_hdr = PCAP_MAGICS[magic]
    if len(hdr) < 24:
        raise CaptureTooBroken(f"{path}: pcap file header is cut short ({len(hdr)} of 24 bytes)")
    snaplen = struct.unpack_from(order + "I", hdr, 16)[0]
    limit = max(MAX_CAPLEN, snaplen if snaplen < (1 << 30) else 0)
    caplen_at = struct.Struct(order + "I").unpack_from
    pending = b""
    frames = 0
    start = 24  # the file offset of the window's first record (pending's first byte)
    while True:
        # one buffer per window, the file header in front: the reader parses it in place
        arr = bytearray(24 + len(pending) + window)
        arr[:24] = hdr
        arr[24 : 24 + len(pending)] = pending
        got = _read_into(f, memoryview(arr)[24 + len(pending) :])
        n = 24 + len(pending) + got
        off = 24
        broken = False
        while off + rec_hdr <= n:
            cl = caplen_at(arr, off + 8)[0]
            if cl > limit:
                broken = True
                break
            if off + rec_hdr + cl > n:
                break
            off += rec_hdr + cl
        last = broken or got < window
        if last:
            off = n  # the reader says what is wrong with the tail
        if off == 24 and not last:
            pending = bytes(arr[24:n])  # one record is bigger than the window: read on
            continue
        cap = _read_pcap(memoryview(arr)[:off], path)
        _shift(cap, frames, [(0, 0), (24, start)])
        yield Window(cap, frames)
        frames += cap.frames
        if last:
            return
        start += off - 24
        pending = bytes(arr[off:n])


def _read_into(f: BinaryIO, mv: memoryview) -> int:
    """Fill ``mv`` from ``f`` (short reads repeated); the bytes read (fewer: end of input)."""
    got = 0
    while got < len(mv):
        k = f.readinto(mv[got:])
        if not k:
            break
        got += k
    return got


def _pcapng_windows(f: BinaryIO, magic: bytes, path: str, window: int) -> Iterator[Window]:
    interfaces: list[Interface] = []
    shb = b""  # the current section's header block
    idbs: list[bytes] = []  # the current section's interface blocks
    base = 0  # global index of the section's first interface
    order = "<"
    body: list[bytes | memoryview] = []  # this window's other blocks (views, not copies)
    # the file offsets where the section header, each interface block and each block of
    # the body start (a window's anomalies then say where in the file: _shift)
    shb_at, idb_at, body_at = 0, [], []
    size = 0
    frames = 0

    def flush(tail: bytes = b"", tail_at: int = 0) -> Window | None:
        nonlocal body, body_at, size, frames
        if not body and not tail:
            return None
        pieces = [shb, *idbs, *body, tail]
        cap = _read_pcapng(b"".join(pieces), path)
        cap.iface = np.where(cap.iface >= 0, cap.iface + base, -1).astype(np.int32)
        cap.interfaces = list(interfaces)
        cap.secrets = [replace(s, frames_before=s.frames_before + frames) for s in cap.secrets]
        parts, b = [], 0
        for piece, at in zip(pieces, [shb_at, *idb_at, *body_at, tail_at], strict=True):
            if len(piece):
                parts.append((b, at))
                b += len(piece)
        _shift(cap, frames, parts)
        w = Window(cap, frames)
        frames += cap.frames
        body, body_at, size = [], [], 0
        return w

    buf = magic  # bytes read and not yet consumed start at p
    p = 0
    at0 = 0  # the file offset of buf[0]
    eof = False

    def more(need: int) -> None:
        nonlocal buf, p, eof, at0
        got = f.read(max(window, need))
        eof = not got
        at0 += p
        buf = buf[p:] + got
        p = 0

    while True:
        avail = len(buf) - p
        if avail < 12 and not eof:
            more(12)
            continue
        if avail < 12:
            w = flush(buf[p:] if shb else b"", at0 + p)
            if w is not None:
                yield w
            return
        btype = struct.unpack_from("<I", buf, p)[0]
        if btype == PCAPNG_SHB:
            bom = struct.unpack_from("<I", buf, p + 8)[0]
            order = "<" if bom == PCAPNG_BOM else ">"
        else:
            btype = struct.unpack_from(order + "I", buf, p)[0]
        blen = struct.unpack_from(order + "I", buf, p + 4)[0]
        bad = blen < 12 or blen % 4 or blen > MAX_BLOCK_LEN
        if not bad and avail < blen and not eof:
            more(blen - avail)
            continue
        if not bad and avail >= blen:  # the reader stops at a trailer that disagrees
            bad = struct.unpack_from(order + "I", buf, p + blen - 4)[0] != blen
        if bad or avail < blen or (not shb and btype != PCAPNG_SHB):
            # a broken or cut block: the reader reports it and stops there
            rest = buf[p:] + (b"" if eof else f.read())
            if not shb:
                _read_pcapng(rest, path)  # raises: no section header
            w = flush(rest, at0 + p)
            if w is not None:
                yield w
            return
        block = memoryview(buf)[p : p + blen]
        at = at0 + p
        p += blen
        if btype == PCAPNG_SHB:
            w = flush()
            if w is not None:
                yield w
            shb, idbs, base = bytes(block), [], len(interfaces)
            shb_at, idb_at = at, []
        elif btype == BT_IDB:
            idbs.append(bytes(block))
            idb_at.append(at)
            if blen >= 20:
                interfaces.append(_idb(block, 0, blen, order, len(interfaces)))
        else:
            body.append(block)
            body_at.append(at)
            size += blen
            if size >= window:
                w = flush()
                if w is not None:
                    yield w

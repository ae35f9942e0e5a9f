"""Drive the TLS dissector over reassembled TCP streams.

For each TCP connection whose first bytes in either direction look like a TLS
record header (recognised by content, not port), one
:class:`dissectors.tls.session.TlsSession` is fed both directions interleaved
in the order a receiver could read them: every first-seen piece of a direction
becomes readable at the frame that completed the contiguous prefix up to it
(``DirectionIndex.delivered``), and pieces of both directions are fed in that
order.  Holes become ``feed_gap`` calls, so a record straddling a hole is
reported as incomplete, never invented.

Nothing is dropped silently (issue 15): a hole over a record header, or bytes that
cannot be a header, make the record layer skip to the next chain of record headers
(``RecordParser(resync=True)``; :func:`walk_all` for the header walk), and each skip is
an anomaly row (``tls_record_sync_lost``, ``tls_record_malformed``) with the offset and the
captured bytes skipped; a record longer than TLS allows keeps its framing
(``tls_record_overflow``).  :func:`anomaly_rows` gives the layer's rows of the anomalies
table.

Keys come from, in this order (the first value for a secret wins): the
``keylog`` argument (a path or the bytes of an NSS key log), the file named by
``SSLKEYLOGFILE`` when that variable is set, and every pcapng Decryption
Secrets Block of type ``TLSK`` in the capture.
"""

from __future__ import annotations

import functools
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from dissectors.tls.crypto import cipher_suite
from dissectors.tls.keylog import PROBLEMS, KeyLog, KeyLogStats

# ContentType and the record-layer sizes are re-exported for the layers above (only
# ``sessions`` imports ``dissectors``, DESIGN.md §1): detectors name content types by
# these, not by bare 20…23.
from dissectors.tls.record import HEADER_LENGTH as HEADER_LENGTH
from dissectors.tls.record import MAX_PLAINTEXT_LENGTH as MAX_PLAINTEXT_LENGTH
from dissectors.tls.record import ContentType as ContentType
from dissectors.tls.record import RecordParser, StreamGap, is_record_header
from dissectors.tls.session import (
    DecryptStatus,
    Epoch,
    RecordResult,
    ResumptionCache,
    TlsSession,
    TlsSummary,
)
from dissectors.tls.suites import group_name
from dissectors.tls.versions import is_tls13, version_name

from .._parallel import map_in_threads, thread_count
from ..anomalies import isolate
from ..io.reader import Secret as CaptureSecret
from ..io.reader import drop_pages, rows_at, rows_at_released
from ..limits import Limits
from ..net.tcp import DirectionIndex


def tls_version_name(version: int) -> str:
    """``TLS 1.2``, ``TLS 1.3 (draft 20)``, ``TLS 1.3 (Facebook draft 26)``, … (the table's
    ``version``; Wireshark's names)."""
    return version_name(version)


def tls_group_name(group: int) -> str:
    """The IANA name of a key-exchange group (``x25519``, ``X25519MLKEM768``, …)."""
    return group_name(group)


def is_tls13_version(version: int | None) -> bool:
    """TLS 1.3, one of its drafts or a pre-RFC variant (the TLS 1.3 state machine)."""
    return is_tls13(version)


SECRETS_TLS_KEYLOG = 0x544C534B  # pcapng DSB secrets type "TLSK"
DIRS = ("c2s", "s2c")


@dataclass
class KeySources:
    """Where the keys came from (for reports; never the keys themselves).

    ``sources`` says, per source, what could not be used as it was; ``anomalies`` are
    the matching rows of the anomalies table, one per source and kind of problem."""

    keylog: KeyLog
    sources: list[str] = field(default_factory=list)
    anomalies: list[dict[str, Any]] = field(default_factory=list)


def load_keys(
    keylog: Any, dsbs: list[CaptureSecret], *, env: Mapping[str, str] | None = None
) -> KeySources:
    kl = KeyLog()
    sources: list[str] = []
    if keylog is not None:
        if isinstance(keylog, (bytes, bytearray)):
            st = kl.add_text(bytes(keylog), source="keylog argument")
            sources.append("keylog argument" + _usable(st))
        else:
            path = os.fspath(keylog)
            with open(path, "rb") as f:
                st = kl.add_text(f.read(), source=path)
            sources.append(path + _usable(st))
    envfile = (os.environ if env is None else env).get("SSLKEYLOGFILE")
    if envfile and os.path.isfile(envfile):
        with open(envfile, "rb") as f:
            st = kl.add_text(f.read(), source="SSLKEYLOGFILE")
        sources.append(f"SSLKEYLOGFILE={envfile}" + _usable(st))
    n = 0
    dsb = KeyLogStats()
    for s in dsbs:
        if s.secrets_type == SECRETS_TLS_KEYLOG:
            n += 1
            name = f"pcapng DSB {n} (after frame {s.frames_before})"
            dsb.add(kl.add_text(s.data, source=name))
    if n:
        sources.append(f"{n} pcapng decryption secrets block(s)" + _usable(dsb))
    return KeySources(kl, sources, _keylog_anomalies(kl))


_UNUSED = {"malformed": "malformed", "unknown_labels": "unknown label", "rsa": "RSA pre-master"}


def _usable(st: KeyLogStats) -> str:
    """What of one source could not be used as it was, for the report's "keys from"."""
    notes = []
    unused = {k: getattr(st, k) for k in _UNUSED if getattr(st, k)}
    if unused:
        detail = ", ".join(f"{n} {_UNUSED[k]}" for k, n in unused.items())
        notes.append(f"{sum(unused.values())} line(s) not used: {detail}")
    if st.conflicts:
        notes.append(f"{st.conflicts} conflicting secret(s), the first kept")
    if st.trailing:
        notes.append(
            f"{st.trailing} line(s) with characters after the secret, ignored as Wireshark does"
        )
    if not notes:
        return "" if st.entries else " (no secrets in it)"
    return f" ({st.entries} secrets; {'; '.join(notes)})"


def _keylog_anomalies(kl: KeyLog) -> list[dict[str, Any]]:
    """One anomalies row per source and kind of key-log problem (line numbers, no values)."""
    rows = []
    for p in kl.problems():
        more = ", …" if p.count > len(p.lines) else ""
        at = f"line{'s' if p.count > 1 else ''} {', '.join(map(str, p.lines))}{more}"
        detail = f"{p.source}: {p.count} {PROBLEMS[p.kind]} ({at})"
        if p.kind == "malformed":
            rows.append({"name": "tls_keylog_line_malformed", "detail": detail})
        elif p.kind == "unknown_labels":
            rows.append({"name": "tls_keylog_unknown_label", "detail": detail})
        elif p.kind == "rsa":
            rows.append({"name": "tls_keylog_rsa_unused", "detail": detail})
        elif p.kind == "conflicts":
            rows.append({"name": "tls_keylog_conflict", "detail": detail})
        else:
            rows.append({"name": "tls_keylog_trailing_characters", "detail": detail})
    return [{"frame": None, "flow": None, "offset": None, **r} for r in rows]


# Key-availability failures: once a protected record of a session fails for one of
# these reasons, no later record of that direction can decrypt either (the key log
# is fixed), so the rest of the direction is walked header by header (bulk path).
_HOPELESS = frozenset(
    {
        "missing_key",
        "unsupported_suite",
        "unsupported_version",
        "psk_only",
        "rsa_key_exchange_no_keylog",
        "no_handshake",
    }
)
# RFC 8446 §5.1 / RFC 5246 §6.2.3: the largest ciphertext a record may carry.
MAX_CIPHERTEXT_LENGTH = (1 << 14) + 2048


@dataclass
class BulkRecords:
    """Records of one direction found by the header walk (no per-record objects)."""

    offset: np.ndarray
    length: np.ndarray
    content_type: np.ndarray
    version: np.ndarray
    status: str  # the failure that made decryption hopeless for this direction
    epoch: str
    key_generation: int
    # what the walk gave up on: bytes that are not a record header, or a hole over one
    # (skipped up to the next chain of headers), records of a length TLS forbids
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    # where the walk lost the framing (offset, why), until walk_all resumed from it
    stop: tuple[int, str] | None = None


@dataclass
class TlsFlow:
    flow: int
    results: list[RecordResult]
    summary: TlsSummary
    anomalies: list[dict[str, Any]]
    swapped: bool  # the TLS client is the TCP server (rare; recorded by the session)
    bulk: dict[str, BulkRecords] = field(default_factory=dict)


def stream_head(buf: np.ndarray, idx: DirectionIndex, n: int = 5) -> bytes:
    """The first ``n`` bytes of a direction when the capture holds them contiguously from 0."""
    head = b""
    expect = 0
    k = min(idx.start.shape[0], n)  # n bytes need at most n pieces
    for s, ce, e, o in zip(
        idx.start[:k].tolist(),
        idx.cap_end[:k].tolist(),
        idx.end[:k].tolist(),
        idx.buf_off[:k].tolist(),
        strict=True,
    ):
        if s != expect or len(head) >= n:
            break
        head += buf[o : o + min(ce - s, n - len(head))].tobytes()
        if ce < e:
            break
        expect = e
    return head


def looks_like_tls(buf: np.ndarray, idx: DirectionIndex) -> bool:
    """A plausible TLS record header at stream offset 0 of this direction."""
    head = stream_head(buf, idx)
    return len(head) >= 5 and is_record_header(head)


@dataclass(frozen=True)
class _Trigger:
    """Stands in for the record that made a direction hopeless when there was none."""

    direction: str
    status: DecryptStatus
    epoch: Epoch
    key_generation: int = 0


# A connection whose first records carry no handshake (the capture started after it)
# cannot be decrypted by any key log (the client random is unknown): both directions
# go straight to the header walk.  (Tests switch this off to compare with the session.)
FAST_NO_HANDSHAKE = True
# The header walks take what :func:`speculate` found where it holds (tests switch it off
# to compare with the reference walk alone).
SPECULATE = True


def _feed_order(indexes: list[DirectionIndex]) -> tuple[list[int], list[int]]:
    """(dir, piece) pairs in the order a receiver could read them (lists, for a lazy walk)."""
    ready, dirs, pieces = [], [], []
    for d, idx in enumerate(indexes):
        k = idx.start.shape[0]
        if k:
            ready.append(np.maximum.accumulate(idx.frame))
            dirs.append(np.full(k, d, np.int64))
            pieces.append(np.arange(k))
    if not ready:
        return [], []
    r, dd, pp = np.concatenate(ready), np.concatenate(dirs), np.concatenate(pieces)
    o = np.lexsort((pp, dd, r))
    return dd[o].tolist(), pp[o].tolist()


def run_tls(
    buf: np.ndarray,
    flows: list[int],
    index: dict[tuple[int, int], DirectionIndex],
    keys: KeySources,
    errors: list[dict[str, Any]] | None = None,
    limits: Limits | None = None,
) -> list[TlsFlow]:
    """One :class:`TlsFlow` per TCP connection of ``flows`` that carries TLS.

    An unexpected exception while dissecting one connection drops that connection's
    TLS results and becomes an ``internal_error`` row in ``errors``
    (:func:`pcapkit.anomalies.isolate`); the other connections go on.  Without
    ``errors`` the exception propagates.
    """
    lim = Limits.default() if limits is None else limits
    cache = ResumptionCache()
    out: list[TlsFlow] = []
    # (flow row, direction, where its header walk starts, what made it a header walk)
    pending: list[tuple[int, str, int, RecordResult | _Trigger]] = []
    empty = DirectionIndex(*(np.zeros(0, np.int64) for _ in range(6)))
    no_hs: list[Any] = []  # the summary every connection without a handshake shares

    pager = _Pager(buf)  # bounded RSS: the reads below are scattered over the capture

    def one(f: int) -> None:
        idx = [index.get((f, 0), empty), index.get((f, 1), empty)]
        for ix in idx:
            if ix.buf_off.shape[0]:
                pager.touch(int(ix.buf_off[0]))
        heads = [stream_head(buf, ix) for ix in idx]
        is_tls = [len(h) >= 5 and is_record_header(h) for h in heads]
        if not any(is_tls):
            return
        if FAST_NO_HANDSHAKE and all(
            ok and h[0] != 22 or (not ok and ix.start.shape[0] == 0)
            for h, ok, ix in zip(heads, is_tls, idx, strict=True)
        ):
            # no handshake in the capture: nothing for a session to learn or decrypt
            if not no_hs:  # the same for every such connection
                no_hs.append(
                    replace(
                        TlsSession(keys.keylog).summary(),
                        why_not=DecryptStatus.NO_HANDSHAKE.value,
                    )
                )
            summary = no_hs[0]
            out.append(TlsFlow(f, [], summary, [], False))
            for d, ix in enumerate(idx):
                if ix.start.shape[0]:
                    trig = _Trigger(DIRS[d], DecryptStatus.NO_HANDSHAKE, Epoch.PLAINTEXT)
                    pending.append((len(out) - 1, DIRS[d], 0, trig))
            return
        # resync: a bad header or a hole over one skips to the next chain of record
        # headers (an anomaly says how many bytes), never the rest of the direction
        sess = TlsSession(
            keys.keylog,
            resumption_cache=cache,
            resync=True,
            max_handshake_message=lim["handshake_message_bytes"],
            max_messages=lim["messages"],
        )
        results: list[RecordResult] = []
        expect = [0, 0]
        bulk_from: dict[int, RecordResult] = {}  # direction → the record that made it hopeless
        for d, i in zip(*_feed_order(idx), strict=True):
            if d in bulk_from:
                if len(bulk_from) == 2:
                    break
                continue
            ix = idx[d]
            s, ce, e = int(ix.start[i]), int(ix.cap_end[i]), int(ix.end[i])
            name = DIRS[d]
            new: list[RecordResult] = []
            if s > expect[d]:
                new += sess.feed_gap(name, s - expect[d])
            if ce > s:
                o = int(ix.buf_off[i])
                new += sess.feed_data(name, buf[o : o + ce - s].tobytes())
            if e > ce:
                new += sess.feed_gap(name, e - ce)
            expect[d] = e
            results += new
            for r in new:
                dd = DIRS.index(r.direction)
                if dd not in bulk_from and r.status.value in _HOPELESS and _no_keys(sess, keys):
                    bulk_from[dd] = r
        if bulk_from:
            # results of a bulk direction past its trigger come from the header walk
            results = [r for r in results if not _past(r, bulk_from)]
            tail = [r for r in sess.close() if not _past(r, bulk_from)]
        else:
            tail = sess.close()
        results += tail
        summary = sess.summary()
        for dd, rec in bulk_from.items():
            pending.append((len(out), DIRS[dd], rec.offset + rec.length, rec))
        anomalies = [
            {
                "name": a.name,
                "frame": None,
                "flow": f,
                "offset": a.offset,
                "detail": f"{a.direction or ''} {a.detail}".strip(),
                "_dir": a.direction,
            }
            for a in sess.anomalies
            if not _past_anomaly(a.direction, a.offset, bulk_from)
        ]
        out.append(TlsFlow(f, results, summary, anomalies, summary.roles_swapped))

    for f in flows:
        n_out, n_pending = len(out), len(pending)
        try:
            one(f)
        except Exception as exc:  # noqa: BLE001 - one connection's bug, not the capture's
            if errors is None:
                raise
            del out[n_out:], pending[n_pending:]
            errors.append(isolate("tls", exc, flow=f))
    idxs = [index.get((out[i].flow, DIRS.index(name)), empty) for i, name, _, _ in pending]
    starts = [s for _, _, s, _ in pending]
    runs: list[_Runs | None] = [None] * len(pending)
    if SPECULATE:
        try:
            runs = speculate(buf, idxs, starts, pager)
        except Exception as exc:  # noqa: BLE001 - the reference walk below does without
            if errors is None:
                raise
            errors.append(isolate("tls", exc, what="speculative record walk"))
    walks: list[_Walk] = []
    walk_failed: set[int] = set()
    for (i, _, start, trig), ix, rn in zip(pending, idxs, runs, strict=True):
        try:
            walks.append(walk_headers(buf, ix, start, trig, pager, rn))
        except Exception as exc:  # noqa: BLE001 - one connection's bug, not the capture's
            if errors is None:
                raise
            walks.append(_Walk(array("q"), array("q"), {}, trig, start))
            walk_failed.add(i)
            errors.append(isolate("tls", exc, flow=out[i].flow))
    try:
        bulk: list[BulkRecords | None] = list(walk_all(buf, walks, idxs, runs))
    except Exception:  # noqa: BLE001 - find the connection that fails, walk the others
        if errors is None:
            raise
        bulk = []
        for k, (i, _, _, _) in enumerate(pending):
            try:
                bulk += walk_all(buf, walks[k : k + 1], idxs[k : k + 1], runs[k : k + 1])
            except Exception as exc:  # noqa: BLE001
                bulk.append(None)
                errors.append(isolate("tls", exc, flow=out[i].flow, what="record walk"))
    failed = {out[i].flow for (i, _, _, _), b in zip(pending, bulk, strict=True) if b is None}
    failed |= {out[i].flow for i in walk_failed}
    for (i, name, _, _), b in zip(pending, bulk, strict=True):
        if b is None:
            continue
        out[i].bulk[name] = b
        for a in b.anomalies:
            a["flow"] = out[i].flow
            out[i].anomalies.append(a)
    return [tf for tf in out if tf.flow not in failed]


def anomaly_rows(
    tls_flows: list[TlsFlow], index: Mapping[tuple[int, int], DirectionIndex]
) -> list[dict[str, Any]]:
    """The TLS layer's rows of the anomalies table: each with its flow, its stream offset
    and the frame that carried that offset (or, for an offset in a hole, the first frame
    after it)."""
    rows = []
    for tf in tls_flows:
        for a in tf.anomalies:
            row = {k: a.get(k) for k in ("name", "frame", "flow", "offset", "detail")}
            row["flow"] = tf.flow
            d = a.get("_dir")
            ix = index.get((tf.flow, DIRS.index(d))) if d in DIRS else None
            if row["frame"] is None and row["offset"] is not None and ix is not None:
                off = int(row["offset"])
                fr = int(ix.locate(off)[0][0])
                if fr < 0:
                    k = int(np.searchsorted(ix.start, off))
                    fr = int(ix.frame[k]) if k < ix.start.shape[0] else -1
                row["frame"] = fr if fr >= 0 else None
            rows.append(row)
    return rows


def _no_keys(sess: TlsSession, keys: KeySources) -> bool:
    """True when the key log holds nothing for this session (or the suite/version is unsupported)."""
    cr = sess.client_random
    return cr is None or not keys.keylog.labels_for(cr)


def _past_anomaly(
    direction: str | None, offset: int | None, bulk_from: dict[int, RecordResult]
) -> bool:
    """An anomaly of the session past a bulk direction's trigger: the header walk reads
    that part (and reports its own), what the session buffered there is superseded."""
    if direction not in DIRS or offset is None:
        return False
    trig = bulk_from.get(DIRS.index(direction))
    return trig is not None and offset > trig.offset


def _past(r: RecordResult, bulk_from: dict[int, RecordResult]) -> bool:
    trig = bulk_from.get(DIRS.index(r.direction))
    return trig is not None and r.offset > trig.offset


# The capture's mapping is dropped after reads in this many distinct 2 MiB regions: a
# page fault on a file mapping maps the whole (large) folio around it — ~1.5–2 MiB of
# the file per scattered header read on ext4 — so a walk over headers spread through a
# big capture would otherwise make most of the file resident (bulk-1M: 1.5 GiB).
PAGER_REGIONS = 48
# ... or a quarter of the capture's regions when that is more: every drop makes the next
# reads fault their regions in again (h2-1M: 372 drops at 48 regions cost 0.5 s of 0.85)
PAGER_SHARE = 4
_REGION_SHIFT = 21


class _Pager:
    """The distinct 2 MiB regions of the capture read since the last :func:`drop_pages`;
    the mapping's pages are dropped when there are ``limit`` of them
    (:data:`PAGER_REGIONS`, or 1 / :data:`PAGER_SHARE` of the capture's): the resident
    file pages of a scattered pass stay bounded (~100 MiB, or a quarter of the file),
    and a capture smaller than that is never dropped."""

    __slots__ = ("buf", "seen", "last", "limit")

    def __init__(self, buf: np.ndarray) -> None:
        self.buf = buf
        self.seen: set[int] = set()
        self.last = -1
        self.limit = max(PAGER_REGIONS, (buf.shape[0] >> _REGION_SHIFT) // PAGER_SHARE)

    def touch(self, pos: int) -> None:
        reg = pos >> _REGION_SHIFT
        if reg != self.last:
            self.last = reg
            self.new_region(reg)

    def drop(self) -> None:
        """Drop the mapping's pages now and forget the regions read (a pass that reads
        a window at a time: :func:`_windows`)."""
        drop_pages(self.buf)
        self.seen.clear()
        self.last = -1

    def new_region(self, reg: int) -> None:
        seen = self.seen
        if reg not in seen:
            if len(seen) >= self.limit:
                drop_pages(self.buf)
                seen.clear()
            seen.add(reg)


@dataclass
class _Walk:
    """Where the header walk of one direction found record headers (no fields yet)."""

    offsets: array[int]  # int64 ('q'): one machine word per record, no int objects kept
    pos: array[int]  # buffer position of each 5-byte header, -1 when it straddles segments
    split: dict[int, bytes]  # record index → header bytes gathered across segments
    trig: RecordResult | _Trigger
    end: int = 0  # the stream offset where the walk stopped (the next header's)
    # records whose header bytes speculate() read already: (first record here, rows
    # lo, hi of ``hdr``)
    known: list[tuple[int, int, int]] = field(default_factory=list)
    hdr: np.ndarray | None = None


@dataclass
class _Runs:
    """One direction's view of :func:`speculate`: per piece of its index, the last piece
    chained to it (-1: no speculative walk to take at that piece), where its records
    start and end in ``off`` / ``pos`` (shared by every direction), and the stream
    offset where its walk left it."""

    end: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    exit: np.ndarray
    off: np.ndarray
    pos: np.ndarray
    hdr: np.ndarray  # the 5 header bytes of each record in off / pos

    def lists(self) -> tuple[list[int], list[int], list[int], list[int]]:
        return self.end.tolist(), self.lo.tolist(), self.hi.tolist(), self.exit.tolist()


def _plausible(b0: np.ndarray, b1: np.ndarray) -> np.ndarray:
    """Whether record headers whose first bytes are ``b0``, ``b1`` may be TLS: content
    type 20…24, version 3.x (what :func:`finish_walks` calls a header).  Three passes
    over bytes: a 256 × 256 table looked up by two fancy indexes took 3× their time at
    7.9 M headers."""
    return (b0 >= 20) & (b0 <= 24) & (b1 == 3)  # type: ignore[no-any-return]


_HDR = np.dtype((np.void, HEADER_LENGTH))
# a header's fields, as one item of HEADER_LENGTH bytes
_FIELDS = np.dtype([("type", "u1"), ("version", ">u2"), ("length", ">u2")])
assert _FIELDS.itemsize == HEADER_LENGTH


# speculate() walks a direction's pieces only when at least a quarter of its first
# SAMPLE pieces start with what may be a record header (bulk transfers of 16 KiB records
# over 1448-byte segments: almost none do, and the reference walk is cheap there)
SAMPLE = 16


def _windows(buf: np.ndarray, at: np.ndarray, pg: _Pager) -> Iterator[np.ndarray]:
    """The indexes of buffer positions ``at``, in file order, a window of ``pg.limit``
    2 MiB regions at a time; once the caller is done with a window the mapping's pages
    are dropped (when the capture is bigger than one window), so a pass over positions
    spread through a big capture keeps at most a window resident."""
    order = np.argsort(at, kind="stable")
    window = pg.limit << _REGION_SHIFT
    edges = np.searchsorted(at[order], np.arange(0, buf.shape[0] + window, window)).tolist()
    for lo, hi in zip(edges[:-1], edges[1:], strict=False):
        if hi > lo:
            yield order[lo:hi]
            if buf.shape[0] > window:
                pg.drop()


# pieces per part when speculate's windows walk on threads: below, one thread
WALK_PART_MIN = 1 << 14
R = TypeVar("R")


def _walk_windows(
    buf: np.ndarray, at: np.ndarray, pg: _Pager, fn: Callable[[np.ndarray], R]
) -> Iterator[R]:
    """``fn`` of every window of :func:`_windows` (in file order), on up to
    :func:`~pcapkit._parallel.thread_count` threads: each window cut into as many parts
    (numpy releases the GIL in its loops), the parts of one window walked side by side,
    the mapping's pages dropped between windows as :func:`_windows` does."""
    workers = thread_count()
    for w in _windows(buf, at, pg):
        k = min(workers, w.shape[0] // WALK_PART_MIN)
        if k <= 1:
            yield fn(w)
            continue
        # parts of consecutive buffer positions (w is in file order)
        yield from map_in_threads(fn, np.array_split(w, k))


def _aligned(
    buf: np.ndarray, idxs: list[DirectionIndex], kf: list[int], cnt: np.ndarray, pg: _Pager
) -> np.ndarray:
    """Per direction: enough of its first pieces (from ``kf``) start with a plausible
    record header (content type and version major at the piece's first captured bytes).

    The samples are read in file order, a pager's window at a time, the mapping's
    pages dropped between windows: read at once, each direction's first pieces faulted
    in their ~2 MiB folios and stayed resident (bulk-1M: peak RSS 0.81 → 1.16 GB)."""
    m = np.minimum(cnt, SAMPLE).tolist()
    if not any(m):
        return np.zeros(len(idxs), bool)
    sl = [slice(k, k + c) for k, c in zip(kf, m, strict=True)]
    st, ce, bo = (
        np.concatenate([getattr(ix, a)[s] for ix, s in zip(idxs, sl, strict=True)])
        for a in ("start", "cap_end", "buf_off")
    )
    ok = ce - st >= 2
    at = np.where(ok, bo, 0)
    plausible = np.zeros(at.shape[0], bool)
    for w in _windows(buf, at, pg):
        h = rows_at(buf, at[w], 2)
        plausible[w] = _plausible(h[:, 0], h[:, 1])
    ok &= plausible
    d = np.repeat(np.arange(len(idxs)), m)
    hits = np.bincount(d[ok], minlength=len(idxs))
    return (hits > 0) & (hits * 4 >= np.asarray(m))


_Batch = tuple[np.ndarray, np.ndarray, np.ndarray, int]  # (pieces, pos, hdr, step)


def _walk_pieces(
    buf: np.ndarray, bo: np.ndarray, stop: np.ndarray, fin: np.ndarray, w: np.ndarray
) -> list[_Batch]:
    """:func:`speculate`'s steps over the pieces ``w`` (a window, or a part of one): the
    records found at each step; where each piece's walk stopped written to its rows of
    ``fin`` (parts walk on threads side by side, each writing rows of its own)."""
    out: list[_Batch] = []
    a = np.sort(w)  # in piece order: the scatter in speculate goes forward
    a = a[bo[a] < stop[a]]
    p, ps = bo[a], stop[a]
    step = 0
    while a.shape[0]:
        h = rows_at(buf, p, HEADER_LENGTH)
        good = _plausible(h[:, 0], h[:, 1])
        if not good.all():  # stop there: not a header (or the guess was wrong)
            fin[a[~good]] = p[~good]
            a, p, ps, h = a[good], p[good], ps[good], h[good]
        out.append((a, p, h, step))
        p = p + h.reshape(-1).view(_FIELDS)["length"]  # int64 (a strided view: no copy)
        p += HEADER_LENGTH
        more = p < ps
        if not more.all():
            fin[a[~more]] = p[~more]
            a, p, ps = a[more], p[more], ps[more]
        step += 1
    return out


def speculate(
    buf: np.ndarray,
    idxs: list[DirectionIndex],
    starts: list[int],
    pager: _Pager | None = None,
) -> list[_Runs | None]:
    """The header walk of every captured piece of many directions at once, on the guess
    that each piece starts with a record header (on a TLS stream sent a record per write,
    most segments do).  One numpy step reads the header at every piece's current
    position and advances all of them; the number of steps is the most records one
    piece holds, not one direction's.  A piece's walk stops where :func:`walk_headers`
    leaves a piece (past its end, or a header not whole in its captured bytes) and at
    a header that cannot be TLS (the reference walk carries on there itself).

    Which guesses hold is left to :func:`walk_headers`: it takes a piece's records only
    when its own walk arrives at the piece's first byte.  Consecutive pieces whose walks
    chain (one ends exactly where the next begins) are taken in one step.  The pieces
    are read in order of their place in the capture, a window at a time, the mapping's
    pages dropped between windows as the pager would (bounded RSS)."""
    pg = _Pager(buf) if pager is None else pager
    kf = [
        int(np.searchsorted(ix.end, s, side="right")) if ix.end.shape[0] else 0
        for ix, s in zip(idxs, starts, strict=True)
    ]
    cnt_p = np.array([ix.start.shape[0] - k for ix, k in zip(idxs, kf, strict=True)], np.int64)
    cnt_p[~_aligned(buf, idxs, kf, cnt_p, pg)] = 0  # not worth a guess: left to walk_headers
    P = int(cnt_p.sum())
    if P == 0:
        return [None] * len(idxs)

    def cat(name: str) -> np.ndarray:
        return np.concatenate(
            [
                getattr(ix, name)[k : k + c]
                for ix, k, c in zip(idxs, kf, cnt_p.tolist(), strict=True)
            ],
            dtype=np.int64,
        )

    st, ce, en, bo = cat("start"), cat("cap_end"), cat("end"), cat("buf_off")
    wid = np.repeat(np.arange(len(idxs)), cnt_p)
    base = bo - st
    # a piece's walk goes on while a whole header fits in its captured bytes and the
    # offset is inside the piece (walk_headers' inner loop): as buffer positions
    stop = base + np.minimum(ce - (HEADER_LENGTH - 1), en)
    fin = bo.copy()  # the buffer position where each piece's walk stopped
    batches: list[_Batch] = []

    walk = functools.partial(_walk_pieces, buf, bo, stop, fin)
    for got in _walk_windows(buf, bo, pg, walk):
        batches.extend(got)
    o = fin - base  # stream offsets where the walks stopped
    del fin, stop, walk
    cnt = np.zeros(P, np.int64)
    for a, _, _, _ in batches:
        cnt[a] += 1
    rec_lo = np.cumsum(cnt) - cnt
    n = int(cnt.sum())
    pos = np.empty(n, np.int64)
    hdr = np.empty(n, _HDR)  # rows as one item each: a scatter copies 5 bytes at once
    while batches:
        a, p, h, step = batches.pop()
        at = rec_lo[a] + step
        pos[at] = p
        hdr[at] = h.view(_HDR)[:, 0]
    off = pos - np.repeat(base, cnt)
    # piece g chains to g + 1 (same direction): its walk left it exactly at g + 1's
    # first byte, past its own end (g + 1 starts there; pieces never overlap).  A chain
    # through a piece without records ends there (its walk stopped at its first byte,
    # where walk_headers goes on by itself).
    chain = np.zeros(P, bool)
    chain[:-1] = (wid[:-1] == wid[1:]) & (o[:-1] == st[1:]) & (en[:-1] <= st[1:])
    last = np.where(chain, P, np.arange(P))
    last = np.minimum.accumulate(last[::-1])[::-1]  # the end of each piece's chain
    out: list[_Runs | None] = []
    g0 = 0
    for k, c in zip(kf, cnt_p.tolist(), strict=True):
        sl = slice(g0, g0 + c)
        if c == 0 or not cnt[sl].any():
            out.append(None)
            g0 += c
            continue
        end = np.where(cnt[sl] > 0, last[sl] - g0 + k, -1)
        lo_, hi_, ex = rec_lo[sl], rec_lo[sl] + cnt[sl], o[sl]
        if k:
            pad = np.full(k, -1, np.int64)
            end, lo_, hi_, ex = (np.concatenate([pad, x]) for x in (end, lo_, hi_, ex))
        out.append(_Runs(end, lo_, hi_, ex, off, pos, hdr))
        g0 += c
    return out


def walk_headers(
    buf: np.ndarray,
    idx: DirectionIndex,
    start: int,
    trig: RecordResult | _Trigger,
    pager: _Pager | None = None,
    runs: _Runs | None = None,
) -> _Walk:
    """Walk record headers of one direction from stream offset ``start``.

    The reference per-record loop: follow the length field from header to header,
    reading each 5-byte header where the capture holds it (pieces found by
    bisection).  A header that falls in a hole or past the captured end stops
    the walk (the boundary is lost).  Header fields are read afterwards for all
    directions at once (:func:`finish_walks`), where invalid headers cut the walk.

    With ``runs`` (:func:`speculate`, this direction's view), whenever the walk
    reaches the first byte of a piece whose speculative walk is known, it takes that
    piece's records — and those of the contiguous pieces chained after it — from
    there instead of reading them one by one: the same records, since the walk
    from a stream offset depends on nothing but that offset.
    """
    st_l, ce_l, en_l, bo_l = (
        idx.start.tolist(),
        idx.cap_end.tolist(),
        idx.end.tolist(),
        idx.buf_off.tolist(),
    )
    k_max = len(st_l)
    mv = buf.data  # a memoryview of the capture
    offs = array("q")
    pos = array("q")
    split: dict[int, bytes] = {}
    o = start
    k = 0
    offs_append, pos_append = offs.append, pos.append
    # a long connection's headers are spread over the whole capture, and every page
    # fault maps a large folio around it: drop what was read every few regions
    pg = _Pager(buf) if pager is None else pager
    last_reg, new_region = pg.last, pg.new_region
    known: list[tuple[int, int, int]] = []
    if runs is not None:
        r_end, r_lo, r_hi, r_exit = runs.lists()
        r_off, r_pos = runs.off, runs.pos
    while True:
        k = bisect_right(en_l, o, k)  # first piece ending after o
        if k >= k_max or o < st_l[k]:
            break  # header inside a hole (or past the end): boundary lost
        if runs is not None and o == st_l[k] and r_end[k] >= 0:
            # a piece whose speculative walk holds: its records and the chained ones
            r = r_end[k]
            lo, hi = r_lo[k], r_hi[r]
            known.append((len(offs), lo, hi))
            offs.frombytes(r_off[lo:hi].tobytes())
            pos.frombytes(r_pos[lo:hi].tobytes())
            o, k = r_exit[r], r
            continue
        base = bo_l[k] - st_l[k]
        reg = bo_l[k] >> _REGION_SHIFT
        if reg != last_reg:
            last_reg = reg
            new_region(reg)
        # the headers read whole inside this piece, without the search per record
        last_hdr, en_k = ce_l[k] - 5, en_l[k]
        while o <= last_hdr and o < en_k:
            p = base + o
            pos_append(p)
            offs_append(o)
            o += 5 + ((mv[p + 3] << 8) | mv[p + 4])
        if o >= en_k:
            continue  # the next header is in a later piece (or a hole)
        p = base + o
        if o + 5 <= ce_l[k]:
            ln = (mv[p + 3] << 8) | mv[p + 4]
            pos.append(p)
        else:
            hdr = _gather(mv, st_l, ce_l, en_l, bo_l, k, o, 5)
            if hdr is None:
                break
            ln = (hdr[3] << 8) | hdr[4]
            split[len(offs)] = hdr
            pos.append(-1)
        offs.append(o)
        o += 5 + ln
    pg.last = last_reg
    return _Walk(offs, pos, split, trig, o, known, None if runs is None else runs.hdr)


def finish_walks(buf: np.ndarray, walks: list[_Walk]) -> list[BulkRecords]:
    """Header fields of every walked record, vectorised over all directions at once."""
    if not walks:
        return []
    counts = np.array([len(w.offsets) for w in walks], np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    off = np.concatenate([np.frombuffer(w.offsets, np.int64) for w in walks])
    hp = np.concatenate([np.frombuffer(w.pos, np.int64) for w in walks])
    # one row copy per header, but those speculate() read already
    need = hp >= 0
    for w, s0 in zip(walks, starts.tolist(), strict=True):
        for r, lo, hi in w.known:
            need[s0 + r : s0 + r + hi - lo] = False
    if need.all():
        hdr = rows_at_released(buf, hp, 5)
    else:
        hdr = np.zeros((hp.shape[0], 5), np.uint8)
        hdr[need] = rows_at_released(buf, hp[need], 5)
        for w, s0 in zip(walks, starts.tolist(), strict=True):
            if w.hdr is not None:
                for r, lo, hi in w.known:
                    hdr[s0 + r : s0 + r + hi - lo] = w.hdr[lo:hi].view(np.uint8).reshape(-1, 5)
    del hp, need
    for w, s0 in zip(walks, starts.tolist(), strict=True):
        for r, h in w.split.items():
            hdr[s0 + r] = np.frombuffer(h, np.uint8)
    # the fields straight at the records table's dtypes (every walk's arrays are views
    # of these): big-endian 16-bit views, no wider temporaries of every record
    fields = hdr.reshape(-1).view(_FIELDS)  # (strided views of the rows: no copies)
    ct_t = fields["type"].astype(RECORD_DTYPES["content_type"])
    ver_t = fields["version"].astype(RECORD_DTYPES["version"])
    len_t = fields["length"].astype(RECORD_DTYPES["length"])
    # not a header (the framing is lost there) vs. a header whose length breaks a rule
    # of the record layer (the framing holds: the walk went on past it)
    bad = ~_plausible(hdr[:, 0], hdr[:, 1])
    del hdr, fields
    ct, ver = ct_t, ver_t
    overflow = len_t > MAX_CIPHERTEXT_LENGTH
    empty = (len_t == 0) & (ct >= 20) & (ct <= 22)
    odd = overflow | empty  # once, not per walk (that was quadratic in the records)
    len_t += 5  # the record's wire bytes (the rows below name the header's length field)
    out = []
    for w, s0, n in zip(walks, starts.tolist(), counts.tolist(), strict=True):
        sl = slice(s0, s0 + n)
        cut = n
        anomalies: list[dict[str, Any]] = []
        d = w.trig.direction
        if bad[sl].any():
            cut = int(np.argmax(bad[sl]))
        for g in (s0 + np.nonzero(odd[s0 : s0 + cut])[0]).tolist():
            what = (
                f"record of {int(len_t[g]) - 5} bytes > 2^14 + 2048 (RFC 5246 §6.2.3): not decrypted"
                if overflow[g]
                else "zero-length"
            )
            name = "tls_record_overflow" if overflow[g] else "tls_empty_handshake_record"
            anomalies.append(_row(name, d, int(off[g]), f"{d} {what}"))
        sl = slice(s0, s0 + cut)
        out.append(
            BulkRecords(
                offset=off[sl],
                length=len_t[sl],
                content_type=ct_t[sl],
                version=ver_t[sl],
                status=w.trig.status.value,
                epoch=w.trig.epoch.value,
                key_generation=w.trig.key_generation,
                anomalies=anomalies,
            )
        )
        if cut < n:  # where the walk lost the framing: the caller resumes from here
            g = s0 + cut
            out[-1].stop = (
                int(off[g]),
                f"record header {int(ct[g])}/0x{int(ver[g]):04x}/{int(len_t[g]) - 5} at offset "
                f"{int(off[g])} is not TLS",
            )
    return out


def _row(name: str, d: str, offset: int | None, detail: str) -> dict[str, Any]:
    return {
        "name": name,
        "frame": None,
        "flow": None,
        "offset": offset,
        "detail": detail,
        "_dir": d,
    }


def walk_all(
    buf: np.ndarray,
    walks: list[_Walk],
    idxs: list[DirectionIndex],
    runs: list[_Runs | None] | None = None,
) -> list[BulkRecords]:
    """:func:`finish_walks`, then for each direction whose walk lost the framing (a
    header that is not TLS, or a hole over a header, with captured bytes after it):
    skip to the next chain of record headers (:func:`resume_after`) and walk on from
    there (with the direction's ``runs`` of :func:`speculate`, if any), until the
    direction ends.  Every skip is an anomaly row with its offset and the bytes
    skipped."""
    out = finish_walks(buf, walks)
    todo = list(range(len(walks)))
    while todo:
        more: list[tuple[int, _Walk]] = []
        for k in todo:
            b, w, ix = out[k], walks[k], idxs[k]
            d = w.trig.direction
            stop, why = b.stop if b.stop is not None else (_walk_end(w, b), "")
            b.stop = None
            end = int(ix.end[-1]) if ix.end.shape[0] else 0
            if stop >= end:
                continue
            gap = resume_after(buf, ix, stop)
            if gap is None:
                continue
            if gap.skipped > 0 or gap.cause == "malformed_header":
                b.anomalies.append(_skip_row(d, gap, why))
            if gap.reason == "resynchronised":
                rn = None if runs is None else runs[k]
                more.append((k, walk_headers(buf, ix, gap.end, w.trig, None, rn)))
        todo = []
        if more:
            for (k, w2), b2 in zip(more, finish_walks(buf, [w for _, w in more]), strict=True):
                out[k] = _joined(out[k], b2)
                walks[k] = w2
                todo.append(k)
    return out


def _walk_end(w: _Walk, b: BulkRecords) -> int:
    """The stream offset where a walk that did not hit a bad header stopped (a header in
    a hole, or past the captured end)."""
    return w.end


def _joined(a: BulkRecords, b: BulkRecords) -> BulkRecords:
    return BulkRecords(
        offset=np.concatenate([a.offset, b.offset]),
        length=np.concatenate([a.length, b.length]),
        content_type=np.concatenate([a.content_type, b.content_type]),
        version=np.concatenate([a.version, b.version]),
        status=a.status,
        epoch=a.epoch,
        key_generation=a.key_generation,
        anomalies=a.anomalies + b.anomalies,
        stop=b.stop,
    )


def _skip_row(d: str, gap: StreamGap, why: str) -> dict[str, Any]:
    where = (
        f"records resume at offset {gap.end}"
        if gap.reason == "resynchronised"
        else "no record header follows in the direction"
    )
    if gap.cause == "malformed_header":
        return _row(
            "tls_record_malformed",
            d,
            gap.offset,
            f"{d} {why or gap.detail}; {gap.skipped} bytes skipped, {where}",
        )
    return _row(
        "tls_record_sync_lost",
        d,
        gap.offset,
        f"{d} a hole of {gap.missing} bytes covered a record header; {gap.skipped} captured "
        f"bytes skipped, {where}",
    )


def resume_after(buf: np.ndarray, idx: DirectionIndex, start: int) -> StreamGap | None:
    """Where records can be framed again after stream offset ``start`` of a direction
    (a header there is not TLS, or a hole covers it): the scanning record parser
    (``RecordParser(resync=True)``) is fed the captured pieces and holes from ``start``
    until it finds a chain of record headers.  Its :class:`StreamGap` says how far
    (``reason="resynchronised"``, records resume at ``gap.end``) or that none followed
    (``"lost_boundary"``); None when nothing was skipped."""
    p = RecordParser(start_offset=start, resync=True, accept_sslv2_hello=False)
    st, ce, en, bo = idx.start, idx.cap_end, idx.end, idx.buf_off
    k = int(np.searchsorted(en, start, side="right"))  # first piece ending after start
    pos = start
    mv = buf.data
    for i in range(k, st.shape[0]):
        s, c, e, o = int(st[i]), int(ce[i]), int(en[i]), int(bo[i])
        items = []
        if s > pos:
            items += p.feed_gap(s - pos)
            pos = s
        if c > pos:
            items += p.feed(mv[o + pos - s : o + c - s])
            pos = c
        if e > pos:
            items += p.feed_gap(e - pos)
            pos = e
        for it in items:
            if isinstance(it, StreamGap):
                return it
    for it in p.close():
        if isinstance(it, StreamGap):
            return it
    return None


def _gather(
    mv: memoryview,
    st: list[int],
    ce: list[int],
    en: list[int],
    bo: list[int],
    k: int,
    o: int,
    n: int,
) -> bytes | None:
    """``n`` captured bytes at stream offset ``o`` that may straddle pieces (None if not captured)."""
    out = bytearray()
    while len(out) < n:
        while k < len(st) and en[k] <= o:
            k += 1
        if k >= len(st) or o < st[k] or o >= ce[k]:
            return None
        take = min(n - len(out), ce[k] - o)
        p = bo[k] + (o - st[k])
        out += mv[p : p + take]
        o += take
    return bytes(out)


# The records-table columns this layer fills (pcapkit.align adds where each record
# travelled: frames, times, segments, PSH).
RECORD_COLUMNS = (
    "flow",
    "dir",
    "offset",
    "length",
    "content_type",
    "plaintext_len",
    "outer_content_type",
    "version",
    "status",
    "epoch",
    "key_generation",
    "early_data",
    "handshake",
)
# the dtypes record_columns builds its columns at (the records table's, or the codes of
# its categoricals)
RECORD_DTYPES: dict[str, Any] = {
    "flow": np.int64,
    "dir": np.int8,
    "offset": np.int64,
    "length": np.int32,
    "content_type": np.int16,
    "plaintext_len": np.int32,
    "outer_content_type": np.int16,
    "version": np.int32,
    "status": np.int8,
    "epoch": np.int8,
    "key_generation": np.int16,
}
# the categories of the records table's status and epoch columns
DECRYPT_STATUSES = [x.value for x in DecryptStatus]
EPOCHS = [x.value for x in Epoch]


@dataclass
class RecordColumns:
    """Every TLS record of every session as columns, sorted by (group, offset).

    ``groups[g]`` is the (flow, dir code) of group ``g``, its rows
    ``group_start[g]:group_start[g + 1]``; the columns are those of
    :data:`RECORD_COLUMNS` (``dir``, ``status`` and ``epoch`` as codes, a missing
    ``plaintext_len`` as -1) plus ``_bulk`` (found by the header walk, not dissected).
    """

    data: dict[str, np.ndarray]
    groups: list[tuple[int, int]]
    handshake_names: list[str] = field(default_factory=lambda: [""])
    group_start: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))

    @property
    def n(self) -> int:
        return int(self.data["flow"].shape[0]) if self.data else 0


def record_columns(tls_flows: list[TlsFlow]) -> RecordColumns:
    """The records of ``run_tls``'s sessions as columns (no per-record pandas).

    Each column is built at the records table's dtype (:data:`RECORD_DTYPES`), so the
    table takes it without another copy; ``handshake`` is codes into
    :attr:`RecordColumns.handshake_names` (``""`` is code 0)."""
    statuses, epochs = DECRYPT_STATUSES, EPOCHS
    own = [c for c in RECORD_COLUMNS if c not in ("flow", "dir")]
    cols: dict[str, list[Any]] = {c: [] for c in own}
    groups: list[tuple[int, int]] = []
    # Per direction: the records the session dissected ("slow", a list) and those the
    # header walk found ("bulk", arrays).  Columns constant over a part are expanded
    # once at the end (np.repeat), so a capture with thousands of connections does
    # not pay a few numpy calls per column per direction.
    consts: dict[str, list[int]] = {c: [] for c in ("flow", "dir")}
    part_len: list[int] = []
    part_group: list[int] = []
    bulk_consts: dict[str, list[int]] = {
        c: [] for c in ("plaintext_len", "status", "epoch", "key_generation")
    }
    is_bulk: list[bool] = []
    # (flow, direction, part) of every header-walked part, re-pointed at the columns
    bulk_parts: list[tuple[TlsFlow, str, int]] = []
    hs_names: dict[str, int] = {"": 0}
    dt = RECORD_DTYPES
    for tf in tls_flows:
        for d, name in enumerate(DIRS):
            res = [r for r in tf.results if r.direction == name] if tf.results else []
            bulk = tf.bulk.get(name)
            nb = 0 if bulk is None else bulk.offset.shape[0]
            if not res and not nb:
                continue
            g = len(groups)
            groups.append((tf.flow, d))
            if res:
                part_len.append(len(res))
                is_bulk.append(False)
                part_group.append(g)
                for c, v in (("flow", tf.flow), ("dir", d)):
                    consts[c].append(v)
                for c in bulk_consts:
                    bulk_consts[c].append(0)  # unused for slow parts
                cols["offset"].append(np.array([r.offset for r in res], dt["offset"]))
                cols["length"].append(np.array([r.length for r in res], dt["length"]))
                cols["outer_content_type"].append(
                    np.array([r.content_type for r in res], dt["outer_content_type"])
                )
                cols["content_type"].append(
                    np.array(
                        [
                            r.inner_content_type
                            if r.inner_content_type is not None
                            else r.content_type
                            for r in res
                        ],
                        dt["content_type"],
                    )
                )
                cols["plaintext_len"].append(
                    np.array(
                        [-1 if r.plaintext_len is None else r.plaintext_len for r in res],
                        dt["plaintext_len"],
                    )
                )
                cols["version"].append(np.array([r.version for r in res], dt["version"]))
                cols["status"].append(
                    np.array([statuses.index(r.status.value) for r in res], dt["status"])
                )
                cols["epoch"].append(
                    np.array([epochs.index(r.epoch.value) for r in res], dt["epoch"])
                )
                cols["key_generation"].append(
                    np.array([r.key_generation for r in res], dt["key_generation"])
                )
                cols["early_data"].append(np.array([r.early_data for r in res], bool))
                hs = [",".join(type(m).__name__ for m in r.handshake) for r in res]
                cols["handshake"].append(
                    np.array([hs_names.setdefault(h, len(hs_names)) for h in hs], np.int32)
                )
            if nb:
                assert bulk is not None
                bulk_parts.append((tf, name, len(part_len)))
                part_len.append(nb)
                is_bulk.append(True)
                part_group.append(g)
                for c, v in (("flow", tf.flow), ("dir", d)):
                    consts[c].append(v)
                bulk_consts["plaintext_len"].append(-1)
                bulk_consts["status"].append(statuses.index(bulk.status))
                bulk_consts["epoch"].append(epochs.index(bulk.epoch))
                bulk_consts["key_generation"].append(bulk.key_generation)
                cols["offset"].append(bulk.offset)
                cols["length"].append(bulk.length)
                cols["outer_content_type"].append(bulk.content_type)
                cols["content_type"].append(bulk.content_type)
                cols["version"].append(bulk.version)
                for c in ("plaintext_len", "status", "epoch", "key_generation"):
                    cols[c].append(None)  # filled from bulk_consts below
                cols["early_data"].append(None)
                cols["handshake"].append(None)
    n = sum(part_len)
    if n == 0:
        return RecordColumns({}, groups)
    plen = np.asarray(part_len, np.int64)
    bmask = np.asarray(is_bulk, bool)
    data: dict[str, np.ndarray] = {}
    for c, vals in consts.items():
        data[c] = np.repeat(np.asarray(vals, dt.get(c, np.int64)), plen)
    data["_bulk"] = np.repeat(bmask, plen)
    starts = (np.cumsum(plen) - plen).tolist()

    def merged(parts: list[Any], fill: np.ndarray) -> np.ndarray:
        """One array: each part's fill value repeated, overwritten by a part's own
        array where it has one (the session-dissected records)."""
        out = np.repeat(fill, plen)
        for s0, part in zip(starts, parts, strict=True):
            if part is not None:
                out[s0 : s0 + len(part)] = part
        return out

    for c, vals in bulk_consts.items():
        data[c] = merged(cols.pop(c), np.asarray(vals, dt[c]))
    data["early_data"] = merged(cols.pop("early_data"), np.zeros(len(part_len), bool))
    data["handshake"] = merged(cols.pop("handshake"), np.zeros(len(part_len), np.int32))
    taken: set[int] = set()  # the arrays a column took whole (a column of its own each)
    for c in list(cols):
        parts = cols.pop(c)
        whole = _adjacent_whole(parts, dt[c], taken)
        data[c] = (
            whole if whole is not None else np.concatenate(parts, dtype=dt[c], casting="same_kind")
        )
        del parts, whole
    # each group's first row (its first part's), then n: parts come in group order
    pg = np.asarray(part_group, np.int64)
    first_part = np.flatnonzero(np.r_[True, pg[1:] != pg[:-1]])
    group_start = np.r_[np.asarray(starts, np.int64)[first_part], n]
    o = data["offset"]
    names = list(hs_names)
    in_order = o[1:] >= o[:-1]
    in_order[group_start[1:-1] - 1] = True  # a new group may start at any offset
    if bool(in_order.all()):
        # already in (group, offset) order, as the parts almost always are: the stable
        # lexsort below would be the identity (no copy of every column)
        del in_order
        _share_bulk(bulk_parts, data, starts, part_len)
        return RecordColumns(data, groups, names, group_start)
    grp = np.repeat(np.arange(len(groups)), np.diff(group_start))
    order = np.lexsort((o, grp))  # groups are (flow, dir) in order
    return RecordColumns({k: v[order] for k, v in data.items()}, groups, names, group_start)


def _adjacent_whole(parts: list[np.ndarray], dtype: Any, taken: set[int]) -> np.ndarray | None:
    """The array whose adjacent slices ``parts`` are, in order, when they cover all of
    it and it has ``dtype`` and no column took it yet: what ``np.concatenate(parts)``
    would copy.  A capture whose every direction was header-walked in one go holds its
    records' columns that way (:func:`finish_walks` slices one array per field): at
    sse-1M five columns of 7.9 M records, 0.08 s of copies and ~100 MB beside them."""
    some = [p for p in parts if p.shape[0]]
    if not some:
        return None
    b = some[0].base
    if (
        not isinstance(b, np.ndarray)
        or id(b) in taken
        or b.ndim != 1
        or b.dtype != dtype
        or not b.flags.c_contiguous
    ):
        return None
    at = b.ctypes.data
    for p in some:
        if p.base is not b or p.dtype != dtype or p.strides != b.strides or p.ctypes.data != at:
            return None
        at += p.nbytes
    if at != b.ctypes.data + b.nbytes:
        return None
    taken.add(id(b))
    return b


def _share_bulk(
    parts: list[tuple[TlsFlow, str, int]],
    data: dict[str, np.ndarray],
    starts: list[int],
    part_len: list[int],
) -> None:
    """Re-point each header-walked direction's arrays at its rows of the columns just
    built (same values, same dtypes: the records table takes these columns without a
    copy), so the walk's own arrays are freed instead of staying beside the table (at
    sse-1M 7.9 M records × 18 B = 136 MiB for the life of the trace)."""
    for tf, name, p in parts:
        sl = slice(starts[p], starts[p] + part_len[p])
        b = tf.bulk[name]
        b.offset = data["offset"][sl]
        b.length = data["length"][sl]
        b.content_type = data["outer_content_type"][sl]
        b.version = data["version"][sl]


def plaintext(tls_flows: list[TlsFlow], flow: int, direction: str) -> bytes:
    """Decrypted application data of one direction of ``flow``, in order.

    Records that did not decrypt contribute nothing (their ``status`` says why)."""
    parts = []
    for tf in tls_flows:
        if tf.flow != flow:
            continue
        for r in tf.results:
            if (
                r.direction == direction
                and r.plaintext is not None
                and r.inner_content_type == ContentType.APPLICATION_DATA
            ):
                parts.append(r.plaintext)
    return b"".join(parts)


TLS13 = 0x0304
TLS10 = 0x0301


def suite_name(suite_id: int) -> str | None:
    """The IANA name of a cipher suite this layer knows (``tls.cipher`` uses the same
    names), None for the others."""
    s = cipher_suite(suite_id)
    return None if s is None else s.name


def record_overhead(version: int | None, suite_id: int | None) -> int | None:
    """The fewest bytes a protected record adds to its plaintext (DETECTION.md §1.7).

    TLS 1.3 (RFC 8446 §5.2): header + 1 inner content type + the AEAD tag.  TLS 1.2 AEAD
    (RFC 5288, RFC 6655, RFC 7905): header + explicit nonce (GCM/CCM 8, ChaCha20 none) +
    tag.  CBC (RFC 5246 §6.2.3.2): header + explicit IV (one block, none before TLS 1.1,
    RFC 4346) + MAC + at least 1 padding-length byte.  None when the suite's record
    protection is unknown here.
    """
    if version is None or suite_id is None:
        return None
    s = cipher_suite(suite_id)
    if s is None:
        return None
    if version == TLS13 or s.tls13:
        return HEADER_LENGTH + 1 + s.tag_length
    if s.mode == "aead":
        return HEADER_LENGTH + s.record_iv_length + s.tag_length
    iv = 0 if version <= TLS10 else s.record_iv_length
    return HEADER_LENGTH + iv + s.mac_length + 1


def keylog_match(
    keys: KeySources, tls_flows: list[TlsFlow], quic_client_randoms: list[bytes]
) -> list[dict[str, Any]]:
    """An anomalies row when a key log was given but none of its client randoms is the
    random of a ClientHello in the capture (a key log of another capture, or a garbage
    file): without it, "not decrypted: missing_key" would be all the user sees."""
    kl = keys.keylog
    if not len(kl):
        return []
    randoms = [tf.summary.client_random for tf in tls_flows if tf.summary.client_random]
    randoms += [r for r in quic_client_randoms if r]
    if not randoms or any(r in kl for r in randoms):
        return []
    return [
        {
            "name": "tls_keylog_unmatched",
            "frame": None,
            "flow": None,
            "offset": None,
            "detail": f"none of the key log's {len(kl)} client random(s) matches one of the "
            f"{len(randoms)} ClientHello(s) in the capture: a key log of another capture? "
            f"(keys from: {'; '.join(keys.sources)})",
        }
    ]


def keylog_lines(keys: KeySources, client_randoms: list[bytes]) -> bytes:
    """The NSS key-log lines of these sessions only (what a shared slice of a capture
    needs to stay decryptable, and no other session's secrets)."""
    out = []
    for cr in dict.fromkeys(client_randoms):
        for label, secret in sorted(keys.keylog.secrets_for(cr).items()):
            out.append(f"{label} {cr.hex()} {secret.reveal().hex()}\n")
    return "".join(out).encode("ascii")

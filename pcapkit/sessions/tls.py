"""Drive the TLS dissector over reassembled TCP streams.

For each TCP connection whose first bytes in either direction look like a TLS
record header (recognised by content, not port), one
:class:`dissectors.tls.session.TlsSession` is fed both directions interleaved
in the order a receiver could read them: every first-seen piece of a direction
becomes readable at the frame that completed the contiguous prefix up to it
(``DirectionIndex.delivered``), and pieces of both directions are fed in that
order.  Holes become ``feed_gap`` calls, so a record straddling a hole is
reported as incomplete, never invented.

Keys come from, in this order (the first value for a secret wins): the
``keylog`` argument (a path or the bytes of an NSS key log), the file named by
``SSLKEYLOGFILE`` when that variable is set, and every pcapng Decryption
Secrets Block of type ``TLSK`` in the capture.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dissectors.tls.keylog import KeyLog
from dissectors.tls.record import is_record_header
from dissectors.tls.session import RecordResult, ResumptionCache, TlsSession, TlsSummary

from ..io.reader import Secret as CaptureSecret
from ..net.tcp import DirectionIndex

SECRETS_TLS_KEYLOG = 0x544C534B  # pcapng DSB secrets type "TLSK"
DIRS = ("c2s", "s2c")


@dataclass
class KeySources:
    """Where the keys came from (for reports; never the keys themselves)."""

    keylog: KeyLog
    sources: list[str] = field(default_factory=list)


def load_keys(
    keylog: Any, dsbs: list[CaptureSecret], *, env: dict[str, str] | None = None
) -> KeySources:
    kl = KeyLog()
    sources: list[str] = []
    if keylog is not None:
        if isinstance(keylog, (bytes, bytearray)):
            kl.add_text(bytes(keylog), source="keylog argument")
            sources.append("keylog argument")
        else:
            path = os.fspath(keylog)
            with open(path, "rb") as f:
                kl.add_text(f.read(), source=path)
            sources.append(path)
    env = os.environ if env is None else env
    envfile = env.get("SSLKEYLOGFILE")
    if envfile and os.path.isfile(envfile):
        with open(envfile, "rb") as f:
            kl.add_text(f.read(), source="SSLKEYLOGFILE")
        sources.append(f"SSLKEYLOGFILE={envfile}")
    n = 0
    for s in dsbs:
        if s.secrets_type == SECRETS_TLS_KEYLOG:
            kl.add_text(s.data, source=f"pcapng DSB after frame {s.frames_before}")
            n += 1
    if n:
        sources.append(f"{n} pcapng decryption secrets block(s)")
    return KeySources(kl, sources)


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
_VALID_TYPES = np.array([20, 21, 22, 23, 24])


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
    anomaly: dict[str, Any] | None = None  # a header that is not TLS ended the walk


@dataclass
class TlsFlow:
    flow: int
    results: list[RecordResult]
    summary: TlsSummary
    anomalies: list[dict[str, Any]]
    swapped: bool  # the TLS client is the TCP server (rare; recorded by the session)
    bulk: dict[str, BulkRecords] = field(default_factory=dict)


def looks_like_tls(buf: np.ndarray, idx: DirectionIndex) -> bool:
    """A plausible TLS record header at stream offset 0 of this direction."""
    head = b""
    expect = 0
    for s, ce, e, o in zip(
        idx.start.tolist(),
        idx.cap_end.tolist(),
        idx.end.tolist(),
        idx.buf_off.tolist(),
        strict=True,
    ):
        if s != expect or len(head) >= 5:
            break
        head += buf[o : o + min(ce - s, 5 - len(head))].tobytes()
        if ce < e:
            break
        expect = e
    return len(head) >= 5 and is_record_header(head)


def _feed_order(indexes: list[DirectionIndex]) -> list[tuple[int, int, int]]:
    """(dir, piece) pairs in the order a receiver could read them."""
    items = []
    for d, idx in enumerate(indexes):
        k = idx.start.shape[0]
        if k == 0:
            continue
        ready = np.maximum.accumulate(idx.frame)
        for i in range(k):
            items.append((int(ready[i]), d, i))
    items.sort()
    return items


def run_tls(
    buf: np.ndarray,
    flows: list[int],
    index: dict[tuple[int, int], DirectionIndex],
    keys: KeySources,
) -> list[TlsFlow]:
    cache = ResumptionCache()
    out: list[TlsFlow] = []
    empty = DirectionIndex(*(np.zeros(0, np.int64) for _ in range(6)))
    for f in flows:
        idx = [index.get((f, 0), empty), index.get((f, 1), empty)]
        if not (looks_like_tls(buf, idx[0]) or looks_like_tls(buf, idx[1])):
            continue
        sess = TlsSession(keys.keylog, resumption_cache=cache)
        results: list[RecordResult] = []
        expect = [0, 0]
        bulk_from: dict[int, RecordResult] = {}  # direction → the record that made it hopeless
        for _, d, i in _feed_order(idx):
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
        bulk: dict[str, BulkRecords] = {}
        for dd, trig in bulk_from.items():
            bulk[DIRS[dd]] = walk_headers(buf, idx[dd], trig.offset + trig.length, trig)
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
        ]
        anomalies += [b.anomaly for b in bulk.values() if b.anomaly is not None]
        out.append(TlsFlow(f, results, summary, anomalies, summary.roles_swapped, bulk))
    return out


def _no_keys(sess: TlsSession, keys: KeySources) -> bool:
    """True when the key log holds nothing for this session (or the suite/version is unsupported)."""
    cr = sess.client_random
    return cr is None or not keys.keylog.labels_for(cr)


def _past(r: RecordResult, bulk_from: dict[int, RecordResult]) -> bool:
    trig = bulk_from.get(DIRS.index(r.direction))
    return trig is not None and r.offset > trig.offset


def walk_headers(
    buf: np.ndarray, idx: DirectionIndex, start: int, trig: RecordResult
) -> BulkRecords:
    """Walk record headers of one direction from stream offset ``start``.

    The only per-record loop: follow the length field from header to header,
    reading each 5-byte header where the capture holds it.  A header that falls
    in a hole or past the captured end stops the walk (the boundary is lost);
    invalid headers are found afterwards, vectorised, and cut the walk there.
    """
    st_l, ce_l, en_l, bo_l = (
        idx.start.tolist(),
        idx.cap_end.tolist(),
        idx.end.tolist(),
        idx.buf_off.tolist(),
    )
    k_max = len(st_l)
    mv = memoryview(buf)
    offs: list[int] = []
    pos: list[int] = []  # buffer position of each header, -1 when it straddles segments
    split: dict[int, bytes] = {}  # record index → header bytes gathered across segments
    o = start
    k = 0
    while k < k_max:
        while k < k_max and en_l[k] <= o:
            k += 1
        if k >= k_max or o < st_l[k]:
            break  # header inside a hole (or past the end): boundary lost
        p = bo_l[k] + (o - st_l[k])
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
    off = np.array(offs, np.int64)
    hp = np.array(pos, np.int64)
    ok = hp >= 0
    q = np.where(ok, hp, 0)
    b = [buf[q + j].astype(np.int64) for j in range(5)]
    for r, h in split.items():
        for j in range(5):
            b[j][r] = h[j]
    ct, ver, ln_a = b[0], (b[1] << 8) | b[2], (b[3] << 8) | b[4]
    bad = (
        ~np.isin(ct, _VALID_TYPES)
        | ((ver >> 8) != 3)
        | (ln_a > MAX_CIPHERTEXT_LENGTH)
        | ((ln_a == 0) & np.isin(ct, (20, 21, 22)))
    )
    anomaly = None
    if bad.any():
        i = int(np.argmax(bad))
        anomaly = {
            "name": "tls_record_malformed",
            "frame": None,
            "flow": None,
            "offset": int(off[i]),
            "detail": f"{trig.direction} record header {int(ct[i])}/0x{int(ver[i]):04x}/{int(ln_a[i])} "
            f"at offset {int(off[i])} is not TLS; the rest of the direction is not parsed",
            "_dir": trig.direction,
        }
        off, ct, ver, ln_a = off[:i], ct[:i], ver[:i], ln_a[:i]
    return BulkRecords(
        offset=off,
        length=ln_a + 5,
        content_type=ct,
        version=ver,
        status=trig.status.value,
        epoch=trig.epoch.value,
        key_generation=trig.key_generation,
        anomaly=anomaly,
    )


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

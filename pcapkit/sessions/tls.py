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


@dataclass
class TlsFlow:
    flow: int
    results: list[RecordResult]
    summary: TlsSummary
    anomalies: list[dict[str, Any]]
    swapped: bool  # the TLS client is the TCP server (rare; recorded by the session)


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
        for _, d, i in _feed_order(idx):
            ix = idx[d]
            s, ce, e = int(ix.start[i]), int(ix.cap_end[i]), int(ix.end[i])
            name = DIRS[d]
            if s > expect[d]:
                results += sess.feed_gap(name, s - expect[d])
            if ce > s:
                o = int(ix.buf_off[i])
                results += sess.feed_data(name, buf[o : o + ce - s].tobytes())
            if e > ce:
                results += sess.feed_gap(name, e - ce)
            expect[d] = e
        results += sess.close()
        summary = sess.summary()
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
        out.append(TlsFlow(f, results, summary, anomalies, summary.roles_swapped))
    return out

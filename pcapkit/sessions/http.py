"""The HTTP session layer: HTTP/1.1, SSE, HTTP/2, gRPC over TCP and TLS, HTTP/3 over QUIC.

Builds the rows of ``Trace.messages``, ``Trace.requests``, ``Trace.h2_windows`` and
``Trace.qpack_blocked`` (DESIGN.md §2) from plain inputs (:class:`HttpInputs`: the
capture buffer, the TCP direction indexes, the TLS and QUIC sessions and the
records' stamps), never from a ``Trace``.  For each TCP
connection it finds the application byte stream of each direction — the decrypted
TLS plaintext, or the reassembled cleartext — with a *stamp*: for any byte, the
frame and time at which it became readable in order at the capture point (for TLS,
when the record holding it was complete; for cleartext, when every earlier byte had
arrived: :meth:`pcapkit.net.tcp.DirectionIndex.delivered`).  Units (HTTP heads,
SSE events, …) are stamped by their last byte: that is when the application above
could act on them, and the frame in which Wireshark shows them.

The stream stops at the first byte the capture cannot give (a hole never filled, a
record that did not decrypt): what follows is not guessed at, and an anomaly row
says where and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

# the one parser of decimal protocol integers, re-exported for the layers above (only
# ``sessions`` imports ``dissectors``, DESIGN.md §1): detectors read header values with it
from dissectors._wire import ascii_decimal as ascii_decimal

from .. import schema
from ..anomalies import isolate, qualified
from ..limits import Limits, limit_anomaly
from ..net.streams import empty_index, tcp_stream
from ..net.tcp import DirectionIndex

# RFC 9110 §11.6.2 / §11.7.2, RFC 6265: credentials — DESIGN.md §4 says reports never
# show them unless asked.
SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
REDACTED = "<redacted>"
# Bytes read from the start of a cleartext stream to recognise HTTP/1.1 (a method or
# status line) or the HTTP/2 preface (24 bytes).
HEAD_PROBE_BYTES = 24
DIRS = ("c2s", "s2c")
# How much of a unit's content goes into the messages table's ``detail``.
DETAIL_CHARS = 80

Stamp = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class AppDirection:
    """One direction's application bytes from stream position 0, and their stamps.

    ``data`` ends at the first byte the capture cannot provide; ``stop`` says why
    (None: the direction is complete as captured).  ``stamp(pos)`` maps positions
    in ``data`` to (frame, ts_ns) of in-order readability, -1 where unknown.
    """

    data: bytes
    stamp: Stamp
    stop: str | None = None
    stop_offset: int | None = None
    # positions in ``data`` where a delivery unit (TLS record / TCP piece) starts, and the
    # frame that made it readable: feeds a parser that needs both directions in wire order
    cuts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cut_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # undecryptable 0-RTT records were left out before this position (whole requests)
    early_skipped: bool = False


@dataclass
class AppFlow:
    flow: int
    alpn: str | None
    c2s: AppDirection
    s2c: AppDirection


@dataclass
class AppTables:
    messages: dict[str, list[Any]]
    requests: dict[str, list[Any]]
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    # rows of the h2_windows table: HTTP/2 flow control per DATA / WINDOW_UPDATE frame
    h2_windows: dict[str, list[Any]] = field(default_factory=dict)
    # rows of the qpack_blocked table: HTTP/3 field sections QPACK could not decode
    qpack_blocked: dict[str, list[Any]] = field(default_factory=dict)


def _no_stamp(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = np.atleast_1d(pos)
    return np.full(p.shape, -1, np.int64), np.full(p.shape, -1, np.int64)


def _tls_direction(tf: Any, name: str, rec_lookup: Any) -> AppDirection:
    """Plaintext of the application-data records of one direction, stamped per record."""
    starts: list[int] = []
    rec_off: list[int] = []
    parts: list[bytes] = []
    pos = 0
    stop = None
    stop_offset = None
    early_skipped = False
    for r in tf.results:
        if r.direction != name:
            continue
        inner = r.inner_content_type
        if r.plaintext is None and r.early_data:
            # 0-RTT data without the early secret: whole requests are missing, the
            # 1-RTT stream after them decrypts and parses on its own (what Wireshark
            # shows too); the anomaly comes from the TLS layer
            early_skipped = True
            continue
        if r.plaintext is None:
            if r.content_type == 23 or (inner is None and r.content_type not in (20, 21, 22, 24)):
                if pos or r.status.value != "no_handshake":
                    stop = (
                        f"TLS record at stream offset {r.offset} not decrypted ({r.status.value})"
                    )
                    stop_offset = r.offset
                    break
            continue
        if inner != 23:
            continue
        starts.append(pos)
        rec_off.append(r.offset)
        parts.append(r.plaintext)
        pos += len(r.plaintext)
    offs, frames, ts = rec_lookup(tf.flow, name)
    k = np.searchsorted(offs, np.asarray(rec_off, np.int64)) if offs.shape[0] else None
    if k is not None and rec_off:
        ok = (k < offs.shape[0]) & (offs[np.minimum(k, offs.shape[0] - 1)] == np.asarray(rec_off))
        kk = np.minimum(k, offs.shape[0] - 1)
        rf = np.where(ok, frames[kk], -1)
        rt = np.where(ok, ts[kk], -1)
    else:  # no record rows to stamp from: one unknown stamp per record, never fewer
        rf = rt = np.full(len(rec_off), -1, np.int64)
    st = np.asarray(starts, np.int64)

    def stamp(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = np.atleast_1d(np.asarray(p, np.int64))
        if st.shape[0] == 0:
            return _no_stamp(p)
        i = np.clip(np.searchsorted(st, p, side="right") - 1, 0, st.shape[0] - 1)
        return rf[i], rt[i]

    return AppDirection(
        b"".join(parts), stamp, stop, stop_offset, st, np.asarray(rf, np.int64), early_skipped
    )


def _tcp_direction(buf: np.ndarray, idx: DirectionIndex) -> AppDirection:
    sb = tcp_stream(buf, idx)
    stop = stop_offset = None
    data = bytes(sb)
    if sb.gaps:
        first_gap = sb.gaps[0][0]
        pos = sb.at(first_gap - 1) if first_gap > 0 else 0
        cut = 0 if pos is None or first_gap == 0 else pos + 1
        data = data[:cut]
        stop = f"{sb.gaps[0][1]} bytes at stream offset {first_gap} never captured"
        stop_offset = first_gap

    def stamp(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f, t = idx.delivered(np.atleast_1d(np.asarray(p, np.int64)))
        return np.asarray(f, np.int64), np.asarray(t, np.int64)

    cuts = np.unique(idx.start[idx.start < len(data)]) if len(data) else np.zeros(0, np.int64)
    if cuts.shape[0] == 0 or cuts[0] != 0:
        cuts = np.r_[0, cuts].astype(np.int64) if len(data) else cuts
    cut_frames = stamp(cuts)[0] if cuts.shape[0] else np.zeros(0, np.int64)
    return AppDirection(data, stamp, stop, stop_offset, cuts, cut_frames)


@dataclass(frozen=True)
class HttpInputs:
    """What the HTTP layer reads, all built by the layers below it."""

    buf: np.ndarray  # the capture's bytes (payloads are read at DirectionIndex.buf_off)
    tcp_flows: list[int]  # TCP connections, in flow order
    index: Mapping[tuple[int, int], DirectionIndex]  # (flow, 0 c2s | 1 s2c) -> pieces
    tls_flows: list[Any]  # pcapkit.sessions.tls.TlsFlow
    records: Any  # the aligned records table (flow, dir, offset, last_frame, last_ts_ns)
    first_ts_ns: np.ndarray  # per flow: first packet's time
    syn_seen: np.ndarray  # per flow: the TCP handshake was captured
    tls_done: Mapping[int, tuple[int, int]]  # per flow: (ClientHello, client Finished) ns
    quic_flows: list[Any] = field(default_factory=list)  # pcapkit.sessions.quic.QuicFlow
    # schema.record_dir_keys of ``records`` when the caller has them (Trace: made once, read by
    # the detectors too); else made here
    record_keys: tuple[np.ndarray, np.ndarray | None] | None = None

    def direction_index(self, flow: int, d: int) -> DirectionIndex:
        return self.index.get((flow, d)) or empty_index()


def app_flows(inp: HttpInputs, errors: list[dict[str, Any]] | None = None) -> list[AppFlow]:
    """Every TCP connection whose application bytes pcapkit can read (a connection whose
    bytes cannot be gathered is an ``internal_error`` row in ``errors``, if given)."""
    from .tls import stream_head

    buf = inp.buf
    lookup = _record_lookup(inp.records, inp.record_keys)
    tls_by_flow = {tf.flow: tf for tf in inp.tls_flows}
    out: list[AppFlow] = []

    def one(f: int) -> AppFlow | None:
        tf = tls_by_flow.get(f)
        if tf is not None:
            sm = tf.summary
            if not sm.decrypted_records:
                return None
            c2s = _tls_direction(tf, "c2s", lookup)
            s2c = _tls_direction(tf, "s2c", lookup)
            return AppFlow(f, sm.alpn, c2s, s2c)
        # cleartext: look at the first bytes before copying a whole stream out of the
        # capture (most TCP connections of a large capture are not HTTP); the dissectors
        # load here, at the first one (a capture of TLS only never needs them: ~50 ms)
        from dissectors.http1 import looks_like_http1
        from dissectors.http2 import is_h2_preface

        ci, si = inp.direction_index(f, 0), inp.direction_index(f, 1)
        ch = stream_head(buf, ci, HEAD_PROBE_BYTES)
        sh = stream_head(buf, si, HEAD_PROBE_BYTES)
        if not (is_h2_preface(ch) or looks_like_http1(ch or sh)):
            return None
        c2s = _tcp_direction(buf, ci)
        s2c = _tcp_direction(buf, si)
        return AppFlow(f, None, c2s, s2c) if c2s.data or s2c.data else None

    for f in inp.tcp_flows:
        try:
            af = one(f)
        except Exception as exc:  # noqa: BLE001 - one connection's bug, not the capture's
            if errors is None:
                raise
            errors.append(isolate("http", exc, flow=f))
            continue
        if af is not None:
            out.append(af)
    return out


def _record_lookup(
    recs: Any, keys: tuple[np.ndarray, np.ndarray | None] | None = None
) -> Callable[[int, str], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per direction, its records' (offset, last_frame, last_ts_ns); ``keys``:
    :func:`pcapkit.schema.record_dir_keys` of ``recs`` when known."""
    if recs.empty:
        z = np.zeros(0, np.int64)
        return lambda f, d: (z, z, z)
    from ..schema import record_dir_keys

    off = recs["offset"].to_numpy(np.int64)
    key, order = keys if keys is not None else record_dir_keys(recs)
    fr = recs["last_frame"].to_numpy(np.int64)
    ts = recs["last_ts_ns"].to_numpy(np.int64)
    if order is not None:  # not in (flow, dir, offset) order, as Trace.records is
        off, fr, ts = off[order], fr[order], ts[order]
    top = np.iinfo(key.dtype).max

    def look(f: int, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = f * 2 + (0 if name == "c2s" else 1)
        if not 0 <= k < top:
            return off[:0], fr[:0], ts[:0]
        # searched in the keys' own dtype (int64 values would make numpy copy the keys)
        lo, hi = np.searchsorted(key, np.array([k, k + 1], key.dtype))
        return off[lo:hi], fr[lo:hi], ts[lo:hi]

    return look


# -- tables ----------------------------------------------------------------------------
def _empty_rows(table: str) -> dict[str, list[Any]]:
    return {c: [] for c in schema.columns(table)}


def redact(headers: Any, *, redact_secrets: bool = True) -> list[tuple[str, str]]:
    return [
        (k, REDACTED if redact_secrets and k.lower() in SENSITIVE_HEADERS else v)
        for k, v in headers
    ]


def _short(text: str) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _gap_stats(ts: list[int]) -> tuple[float | None, float | None, float | None, float | None]:
    """(p50, p95, max) of consecutive gaps in ms and events per second."""
    t = np.asarray([x for x in ts if x >= 0], np.int64)
    if t.shape[0] < 2:
        return None, None, None, None
    g = np.diff(t) / 1e6
    span_s = (t[-1] - t[0]) / 1e9
    rate = (t.shape[0] - 1) / span_s if span_s > 0 else None
    return (
        round(float(np.percentile(g, 50)), 3),
        round(float(np.percentile(g, 95)), 3),
        round(float(g.max()), 3),
        None if rate is None else round(rate, 3),
    )


class _Builder:
    """Accumulates rows of the messages and requests tables."""

    def __init__(self, *, redact_secrets: bool, limits: Limits | None = None) -> None:
        self.messages = _empty_rows("messages")
        self.requests = _empty_rows("requests")
        self.anomalies: list[dict[str, Any]] = []
        self.h2_windows = _empty_rows("h2_windows")
        self.qpack_blocked = _empty_rows("qpack_blocked")
        self.redact_secrets = redact_secrets
        self.limits = Limits.default() if limits is None else limits
        # messages per connection (the messages limit: rows past it are only counted)
        self.counts: dict[int, int] = {}

    def count_only(self, flow: int, n: int) -> None:
        """``n`` messages of ``flow`` the dissector did not even hand over (past the limit)."""
        self.counts[flow] = self.counts.get(flow, 0) + n

    def flow_done(self, flow: int) -> None:
        """The connection is dissected: say so if it had more messages than the limit."""
        n, cap = self.counts.get(flow, 0), self.limits["messages"]
        if n > cap:
            self.anomalies.append(
                limit_anomaly(
                    "message_limit_exceeded",
                    f"{n} messages, the messages limit is {cap}: {n - cap} more are counted, "
                    "not listed (--limit messages=N)",
                    flow=flow,
                )
            )

    def message(
        self,
        flow: int,
        d: str,
        stream: int | None,
        protocol: str,
        kind: str,
        offset: int,
        length: int,
        frame: int,
        ts_ns: int,
        request: int | None,
        detail: str,
    ) -> None:
        n = self.counts.get(flow, 0)
        self.counts[flow] = n + 1
        if n >= self.limits["messages"]:
            return  # past the messages limit: counted (flow_done says how many)
        m = self.messages
        m["flow"].append(flow)
        m["dir"].append(d)
        m["stream"].append(stream)
        m["protocol"].append(protocol)
        m["type"].append(kind)
        m["offset"].append(offset)
        m["length"].append(length)
        m["frame"].append(None if frame < 0 else frame)
        m["ts_ns"].append(None if ts_ns < 0 else ts_ns)
        m["request"].append(request)
        m["detail"].append(_short(detail))

    def request(self, row: dict[str, Any]) -> int:
        r = self.requests
        n = len(r["flow"])
        for c in r:
            v = row.get(c)
            if (
                isinstance(v, (int, np.integer))
                and not isinstance(v, bool)
                and c.endswith(("_ts_ns", "_frame"))
            ):
                v = None if v < 0 else int(v)
            r[c].append(v)
        return n

    @staticmethod
    def row(table: dict[str, list[Any]], **values: Any) -> None:
        """Append one row (every declared column, missing ones None) to ``table``."""
        for c, col in table.items():
            col.append(values.get(c))

    def anomaly(self, name: str, flow: int, offset: int | None, detail: str) -> None:
        self.anomalies.append(
            {"name": name, "frame": None, "flow": flow, "offset": offset, "detail": detail}
        )

    def _tables(self) -> list[dict[str, list[Any]]]:
        return [self.messages, self.requests, self.h2_windows, self.qpack_blocked]

    def mark(self) -> tuple[list[int], int]:
        """Where every table ends now (:meth:`rollback` cuts back to it)."""
        return [len(next(iter(t.values()), [])) for t in self._tables()], len(self.anomalies)

    def rollback(self, mark: tuple[list[int], int]) -> None:
        """Drop every row added since ``mark`` (a connection that failed half way)."""
        for t, n in zip(self._tables(), mark[0], strict=True):
            for col in t.values():
                del col[n:]
        del self.anomalies[mark[1] :]


def _one(stamp: Stamp, pos: int) -> tuple[int, int]:
    f, t = stamp(np.asarray([max(pos, 0)], np.int64))
    return int(f[0]), int(t[0])


def _header_fields(req: Any, resp: Any) -> dict[str, Any]:
    """The diagnosis headers of the issue: trace ids, rate limits, content coding."""

    def pick(h: Any, name: str) -> str | None:
        return None if h is None else h.get(name)

    rl = []
    if resp is not None:
        for k, v in resp.headers:
            kl = k.lower()
            if kl.startswith(("x-ratelimit-", "ratelimit")):
                rl.append(f"{kl}={v}")
    return {
        "traceparent": pick(req, "traceparent"),
        "request_id": pick(req, "x-request-id") or pick(resp, "x-request-id"),
        "idempotency_key": pick(req, "idempotency-key") or pick(req, "x-idempotency-key"),
        "retry_after": pick(resp, "retry-after"),
        "ratelimit": "; ".join(rl) or None,
        "content_encoding": pick(resp, "content-encoding"),
        "content_type": pick(resp, "content-type"),
    }


def body_digest(chunks: Any, complete: bool | None) -> str | None:
    """SHA-256 (hex) of a request body from its pieces' ``data``, in order; None without a
    body, when a piece's bytes are missing, or when the request did not arrive whole."""
    import hashlib

    parts = list(chunks)
    if not parts or not complete or any(getattr(c, "data", None) is None for c in parts):
        return None
    h = hashlib.sha256()
    for c in parts:
        h.update(c.data)
    return h.hexdigest()


def _sse_events(
    b: _Builder,
    flow: int,
    d: str,
    stream: int | None,
    req_idx: int,
    pieces: list[tuple[int, bytes]],
    stamp: Stamp,
) -> list[int]:
    """SSE events (and comments) of one response body into messages; their times.

    ``pieces`` are the de-framed body's pieces as (stream offset, bytes), in order;
    each event is stamped with ``stamp`` at the stream offset of its last byte (when
    the application above could act on it)."""
    from dissectors.errors import DissectError
    from dissectors.sse import SseEvent, SseParser

    sse = SseParser()
    items: list[Any] = []
    body_off, strm_off = [], []
    pos = 0
    try:
        for off, data in pieces:
            body_off.append(pos)
            strm_off.append(off)
            items += sse.feed(data)
            pos += len(data)
    except DissectError as exc:  # LimitExceeded: keep what was parsed
        b.anomaly("sse_limit_exceeded", flow, None, str(exc))
    if not items:
        return []
    bo, so = np.asarray(body_off, np.int64), np.asarray(strm_off, np.int64)
    last = np.asarray([it.end - 1 for it in items], np.int64)
    k = np.searchsorted(bo, last, side="right") - 1
    at = so[k] + (last - bo[k])
    fr, ts = stamp(at)
    times: list[int] = []
    for it, f1, t1, p1 in zip(items, fr.tolist(), ts.tolist(), at.tolist(), strict=True):
        start = int(p1) - (it.length - 1)
        if isinstance(it, SseEvent):
            times.append(t1)
            detail = (f"{it.event}: " if it.event != "message" else "") + it.data
            b.message(flow, d, stream, "sse", "event", start, it.length, f1, t1, req_idx, detail)
        else:
            b.message(
                flow, d, stream, "sse", "comment", start, it.length, f1, t1, req_idx, ":" + it.text
            )
    return times


def _http1(b: _Builder, af: AppFlow, conn_times: dict[str, Any]) -> None:
    from dissectors.http1 import (
        Http1Body,
        Http1End,
        Http1Head,
        Http1PartialHead,
        Http1Tunnel,
        dissect_connection,
    )

    conn = dissect_connection(af.c2s.data, af.s2c.data, eof=af.s2c.stop is None)
    for d, err in conn.error.items():
        b.anomaly(qualified("http1", err.reason), af.flow, err.offset, f"{d}: {err.message}")
    dirs = {"c2s": af.c2s, "s2c": af.s2c}
    # stamp every item's last byte in one call per direction
    stamps: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for d, items in (("c2s", conn.c2s), ("s2c", conn.s2c)):
        # the last byte of each unit (an end-of-message marker has length 0: the byte
        # before it, the message's last)
        ends = np.asarray(
            [it.end - 1 if it.end > it.offset else max(it.offset - 1, 0) for it in items],
            np.int64,
        )
        stamps[d] = dirs[d].stamp(ends) if items else (np.zeros(0, np.int64),) * 2

    req_heads: dict[int, tuple[Any, int, int, int, int]] = {}
    req_ends: dict[int, tuple[Any, int, int]] = {}
    first_c2s: dict[int, int] = {}
    req_bodies: dict[int, list[Any]] = {}
    for i, it in enumerate(conn.c2s):
        fr, ts = int(stamps["c2s"][0][i]), int(stamps["c2s"][1][i])
        if isinstance(it, (Http1Head, Http1PartialHead)):
            f0, t0 = _one(af.c2s.stamp, it.offset)
            req_heads[it.message] = (it, fr, ts, f0, t0)
            if isinstance(it, Http1PartialHead):
                b.anomaly(
                    "http1_head_incomplete",
                    af.flow,
                    it.offset,
                    f"c2s: the readable bytes end {it.length} bytes into a request head "
                    f"({it.method or 'start line cut'} {it.target or ''}; no empty line"
                    + ("; the stream stops at a hole)" if af.c2s.stop else ")"),
                )
        elif isinstance(it, Http1End):
            req_ends[it.message] = (it, fr, ts)
        elif isinstance(it, Http1Body):
            first_c2s.setdefault(it.message, ts)
            req_bodies.setdefault(it.message, []).append(it)

    # responses, grouped per message number
    resp: dict[int, dict[str, Any]] = {}
    for i, it in enumerate(conn.s2c):
        fr, ts = int(stamps["s2c"][0][i]), int(stamps["s2c"][1][i])
        if isinstance(it, Http1Head):
            r = resp.setdefault(it.message, {"interim": [], "pieces": [], "items": []})
            if it.interim:
                r["interim"].append((it, fr, ts))
            else:
                r["head"] = (it, fr, ts)
        elif isinstance(it, Http1Body):
            r = resp.setdefault(it.message, {"interim": [], "pieces": [], "items": []})
            r["pieces"].append(it)
            if "first_body" not in r:
                r["first_body"] = _one(af.s2c.stamp, it.offset)
        elif isinstance(it, Http1End):
            r = resp.setdefault(it.message, {"interim": [], "pieces": [], "items": []})
            r["end"] = (it, fr, ts)
        elif isinstance(it, Http1PartialHead):
            b.anomaly(
                "http1_head_incomplete",
                af.flow,
                it.offset,
                f"s2c: the readable bytes end {it.length} bytes into a response head "
                f"(status {it.status if it.status is not None else 'line cut'}; no empty line"
                + ("; the stream stops at a hole)" if af.s2c.stop else ")"),
            )

    req_heads_by_msg = dict(req_heads)
    # requests sent as 0-RTT data without the early secret are missing from the client's
    # stream: the responses to them come first, so the requests pair with later answers
    finals = sum(1 for h in conn.s2c if isinstance(h, Http1Head) and not h.interim)
    surplus = max(0, finals - len(req_heads)) if af.c2s.early_skipped else 0
    if surplus:
        req_heads = {k + surplus: v for k, v in req_heads.items()}
        req_ends = {k + surplus: v for k, v in req_ends.items()}
    n_req = max([*req_heads, *resp, -1]) + 1
    for n in range(n_req):
        rh = req_heads.get(n)
        r = resp.get(n, {"interim": [], "pieces": []})
        head = r.get("head")
        req = rh[0] if rh else None
        resp_head = head[0] if head else None
        row: dict[str, Any] = {
            "flow": af.flow,
            "stream": None,
            "protocol": "http/1.1",
            "method": req.method if req else None,
            "authority": req.get("host") if req else None,
            "path": req.target if req else None,
            "status": resp_head.status if resp_head else None,
            # where Wireshark shows the messages: once head and body are complete (it
            # reassembles bodies); the response's header block is response_head_frame
            "request_frame": req_ends[n][1] if n in req_ends else (rh[1] if rh else -1),
            "response_frame": (
                r["end"][1] if r.get("end") and r["end"][0].complete else (head[1] if head else -1)
            ),
            "response_head_frame": head[1] if head else -1,
            "request_start_ts_ns": rh[4] if rh else -1,
            "request_end_ts_ns": req_ends[n][2] if n in req_ends else -1,
            "response_ts_ns": head[2] if head else -1,
            "request_body_bytes": req_ends[n][0].body_bytes if n in req_ends else None,
            "request_headers": redact(req.headers, redact_secrets=b.redact_secrets)
            if req
            else None,
            "response_headers": (
                redact(resp_head.headers, redact_secrets=b.redact_secrets) if resp_head else None
            ),
            **conn_times,
            **_header_fields(req, resp_head),
        }
        end = r.get("end")
        row["response_body_bytes"] = (
            end[0].body_bytes
            if end
            else (sum(p.length for p in r["pieces"]) if resp_head else None)
        )
        row["complete"] = bool(end and end[0].complete)
        row["request_complete"] = (
            None
            if req is None
            else isinstance(req, Http1Head) and (n not in req_ends or req_ends[n][0].complete)
        )
        # surplus (0-RTT) shifts the numbering: the bodies are keyed by the dissector's
        body_key = n - surplus
        row["request_body_sha256"] = body_digest(
            req_bodies.get(body_key, ()),
            bool(row["request_complete"]) and n in req_ends,
        )
        row["first_body_ts_ns"] = r["first_body"][1] if "first_body" in r else -1
        pieces = r["pieces"]
        last_ts = end[2] if end else -1
        if pieces and last_ts < 0:
            last_ts = _one(af.s2c.stamp, pieces[-1].end - 1)[1]
        row["last_byte_ts_ns"] = last_ts if resp_head else -1
        req_idx = len(b.requests["flow"])
        # SSE: parse the de-framed body, stamp each event at its last byte
        events_ts: list[int] = []
        ctype = (row.get("content_type") or "").split(";")[0].strip().lower()
        if ctype == "text/event-stream" and pieces:
            events_ts = _sse_events(
                b, af.flow, "s2c", None, req_idx, [(p.offset, p.data) for p in pieces], af.s2c.stamp
            )
            row["events"] = len(events_ts)
            row["first_event_ts_ns"] = events_ts[0] if events_ts else -1
            p50, p95, mx, rate = _gap_stats(events_ts)
            row.update(gap_p50_ms=p50, gap_p95_ms=p95, gap_max_ms=mx, events_per_s=rate)
        else:
            row["first_event_ts_ns"] = -1
        # TTFB/TTFT count from the request's header block (the request_frame point)
        t_req = rh[2] if rh else -1
        row["ttfb_ms"] = (head[2] - t_req) / 1e6 if head and t_req >= 0 and head[2] >= 0 else None
        t_first = events_ts[0] if events_ts else row["first_body_ts_ns"]
        row["ttft_ms"] = (t_first - t_req) / 1e6 if t_req >= 0 and t_first >= 0 else None
        b.request(row)
        # HTTP/1.1 units into the messages table
        if rh and req is not None:
            b.message(
                af.flow,
                "c2s",
                None,
                "http/1.1",
                "request",
                req.offset,
                req.length,
                rh[1],
                rh[2],
                req_idx,
                f"{req.method} {req.target} {req.version}"
                if isinstance(req, Http1Head)
                else f"incomplete: {req.method or '?'} {req.target or ''}".rstrip(),
            )
        if n in req_ends:
            e, fr, ts = req_ends[n]
            b.message(
                af.flow,
                "c2s",
                None,
                "http/1.1",
                "end",
                e.offset,
                0,
                fr,
                ts,
                req_idx,
                f"{e.framing}, {e.body_bytes} body bytes",
            )
        for h, fr, ts in r["interim"]:
            b.message(
                af.flow,
                "s2c",
                None,
                "http/1.1",
                "interim",
                h.offset,
                h.length,
                fr,
                ts,
                req_idx,
                f"{h.version} {h.status} {h.reason}",
            )
        if head:
            h = head[0]
            b.message(
                af.flow,
                "s2c",
                None,
                "http/1.1",
                "response",
                h.offset,
                h.length,
                head[1],
                head[2],
                req_idx,
                f"{h.version} {h.status} {h.reason}",
            )
        if end:
            e, fr, ts = end
            b.message(
                af.flow,
                "s2c",
                None,
                "http/1.1",
                "end",
                e.offset,
                0,
                fr,
                ts,
                req_idx,
                f"{e.framing}, {e.body_bytes} body bytes" + ("" if e.complete else ", incomplete"),
            )
    for d, items in (("c2s", conn.c2s), ("s2c", conn.s2c)):
        tun = [it for it in items if isinstance(it, Http1Tunnel)]
        if tun:
            tfr, tts = dirs[d].stamp(np.asarray([tun[-1].end - 1], np.int64))
            total = sum(t.length for t in tun)
            b.message(
                af.flow,
                d,
                None,
                "http/1.1",
                "tunnel",
                tun[0].offset,
                total,
                int(tfr[0]),
                int(tts[0]),
                None,
                f"{total} bytes after the protocol switch",
            )
    # h2c by Upgrade (RFC 7540 §3.2): after "101 Switching Protocols" with Upgrade: h2c the
    # same connection speaks HTTP/2 from the client's preface and the server's next byte
    switch = next(
        (
            h
            for h in conn.s2c
            if isinstance(h, Http1Head)
            and h.status == 101
            and (h.get("upgrade") or "").lower() == "h2c"
        ),
        None,
    )
    c_tun = next((it for it in conn.c2s if isinstance(it, Http1Tunnel)), None)
    if switch is not None and c_tun is not None and switch.message in req_heads_by_msg:
        rh = req_heads_by_msg[switch.message]
        _http2(
            b,
            af,
            conn_times,
            start={"c2s": c_tun.offset, "s2c": switch.end},
            upgraded=(rh[0], rh[1], rh[2]),
        )


def _wire_order(af: AppFlow) -> list[tuple[int, str, int, bytes]]:
    """Both directions' delivery units as (frame, dir, offset, bytes), in frame order."""
    units: list[tuple[int, str, int, bytes]] = []
    for d, ad in (("c2s", af.c2s), ("s2c", af.s2c)):
        cuts = ad.cuts.tolist()
        if not cuts:  # nothing sent this way (a server that never answered)
            continue
        frames = ad.cut_frames.tolist()
        ends = cuts[1:] + [len(ad.data)]
        for a, e, fr in zip(cuts, ends, frames, strict=True):
            if e > a:
                units.append((fr if fr >= 0 else 1 << 62, d, a, ad.data[a:e]))
    units.sort(key=lambda u: (u[0], u[1] == "s2c", u[2]))
    return units


def _http2(
    b: _Builder,
    af: AppFlow,
    conn_times: dict[str, Any],
    *,
    start: dict[str, int] | None = None,
    upgraded: tuple[Any, int, int] | None = None,
) -> None:
    """HTTP/2 (RFC 9113) frames into messages, streams into requests, SSE/gRPC events.

    ``start`` gives the stream offsets where HTTP/2 begins after an HTTP/1.1 Upgrade
    (RFC 7540 §3.2); ``upgraded`` is that request's head with its frame and time: it
    becomes stream 1's request (the server answers it on stream 1)."""
    from dissectors.grpc import dissect_grpc_stream, is_grpc
    from dissectors.http2 import H2Connection, H2Error, H2Frame, error_code_name, settings_name

    st0 = start or {"c2s": 0, "s2c": 0}
    streams_cap, frames_cap = b.limits["h2_streams"], b.limits["messages"]
    conn = H2Connection(c2s_start=st0["c2s"], s2c_start=st0["s2c"], max_streams=streams_cap)
    events: list[Any] = []
    kept = dropped = 0  # H2Frame events kept, and those past the messages limit

    def keep(new: list[Any]) -> None:
        nonlocal kept, dropped
        for e in new:
            if isinstance(e, H2Frame):
                if kept > frames_cap:  # one past the cap: flow_done reports the overflow
                    dropped += 1
                    continue
                kept += 1
            events.append(e)

    for _fr, d, off, data in _wire_order(af):
        end = off + len(data)
        if end <= st0[d]:
            continue
        if off < st0[d]:
            data, off = data[st0[d] - off :], st0[d]
        keep(conn.feed(d, data, off))
    keep(conn.close())
    b.count_only(af.flow, dropped)
    if conn.streams_over_limit:
        b.anomaly(
            "h2_stream_limit_exceeded",
            af.flow,
            None,
            f"{len(conn.streams) + conn.streams_over_limit} streams, the h2_streams limit is "
            f"{streams_cap}: {conn.streams_over_limit} more ({conn.frames_over_limit} frames) "
            "are counted, not kept (--limit h2_streams=N)",
        )
    dirs = {"c2s": af.c2s, "s2c": af.s2c}

    def stamp_all(d: str, ends: list[int]) -> tuple[list[int], list[int]]:
        if not ends:
            return [], []
        f, t = dirs[d].stamp(np.asarray([max(e - 1, 0) for e in ends], np.int64))
        return f.tolist(), t.tolist()

    req_of_stream: dict[int, int] = {}
    # requests first, so frames can point at their request row
    for sid in sorted(conn.streams):
        st = conn.streams[sid]
        if sid == 0 or (st.request_headers is None and st.response_headers is None):
            continue
        rq, rs = st.request_headers, st.response_headers
        (rf,), (rt,) = stamp_all("c2s", [rq.end]) if rq else ([-1], [-1])
        up = upgraded if (upgraded is not None and sid == 1 and rq is None) else None
        if up is not None:  # RFC 7540 §3.2: the upgraded request is stream 1's
            rf, rt = up[1], up[2]
        (sf,), (stt,) = stamp_all("s2c", [rs.end]) if rs else ([-1], [-1])
        chunks = st.body_chunks["s2c"]
        req_end = st.end_stream_offset["c2s"]
        (_,), (ret,) = stamp_all("c2s", [req_end]) if req_end is not None else ([-1], [-1])
        first_body = -1
        if chunks:
            first_body = int(dirs["s2c"].stamp(np.asarray([chunks[0].offset], np.int64))[1][0])
        end_off = st.end_stream_offset["s2c"]
        last = -1
        if end_off is not None:
            last = stamp_all("s2c", [end_off])[1][0]
        elif chunks:
            last = stamp_all("s2c", [chunks[-1].end])[1][0]
        row: dict[str, Any] = {
            "flow": af.flow,
            "stream": sid,
            "protocol": "h2",
            "method": up[0].method if up else st.method,
            "authority": up[0].get("host") if up else st.authority,
            "path": up[0].target if up else st.path,
            "status": st.status,
            "request_frame": rf,
            "response_frame": sf,
            "response_head_frame": sf,
            "request_start_ts_ns": rt,
            "request_end_ts_ns": ret if req_end is not None else rt,
            "response_ts_ns": stt,
            "first_body_ts_ns": first_body,
            "last_byte_ts_ns": last,
            "request_body_bytes": st.body_bytes["c2s"],
            "request_body_sha256": body_digest(st.body_chunks["c2s"], req_end is not None),
            "response_body_bytes": st.body_bytes["s2c"] if rs else None,
            "complete": end_off is not None,
            # a decoded header block is whole; the request ended at its END_STREAM
            "request_complete": None if rq is None else req_end is not None,
            "request_headers": redact(rq.headers or (), redact_secrets=b.redact_secrets)
            if rq
            else None,
            "response_headers": redact(rs.headers or (), redact_secrets=b.redact_secrets)
            if rs
            else None,
            **conn_times,
            **_header_fields(rq, rs),
        }
        req_idx = len(b.requests["flow"])
        req_of_stream[sid] = req_idx
        ev_ts: list[int] = []
        ctype = (row.get("content_type") or "").split(";")[0].strip().lower()
        if is_grpc(st):
            call = dissect_grpc_stream(st, keep_data=False)
            # the call's response messages (GrpcCall.messages is keyed by direction)
            s2c_msgs = list(call.messages.get("s2c", []))
            fr, ts = stamp_all("s2c", [m.end for m in s2c_msgs])
            for m, f1, t1 in zip(s2c_msgs, fr, ts, strict=True):
                ev_ts.append(t1)
                b.message(
                    af.flow,
                    "s2c",
                    sid,
                    "grpc",
                    "message",
                    m.offset,
                    m.end - m.offset,
                    f1,
                    t1,
                    req_idx,
                    f"{m.length} bytes" + (", compressed" if m.compressed else ""),
                )
            if call.status is not None:
                row["grpc_status"] = call.status.code
        elif ctype == "text/event-stream" and chunks:
            ok = []
            for c in chunks:
                if c.data is None:
                    break  # bytes not captured: later events cannot be placed
                ok.append((c.offset, c.data))
            ev_ts = _sse_events(b, af.flow, "s2c", sid, req_idx, ok, dirs["s2c"].stamp)
        if ev_ts or is_grpc(st) or ctype == "text/event-stream":
            row["events"] = len(ev_ts)
            p50, p95, mx, rate = _gap_stats(ev_ts)
            row.update(gap_p50_ms=p50, gap_p95_ms=p95, gap_max_ms=mx, events_per_s=rate)
        row["first_event_ts_ns"] = ev_ts[0] if ev_ts else -1
        t_req = rt
        row["ttfb_ms"] = (stt - t_req) / 1e6 if rs and t_req >= 0 and stt >= 0 else None
        t_first = ev_ts[0] if ev_ts else first_body
        row["ttft_ms"] = (t_first - t_req) / 1e6 if t_req >= 0 and t_first >= 0 else None
        b.request(row)
    # every frame into messages
    frames = [e for e in events if isinstance(e, H2Frame)]
    for d in ("c2s", "s2c"):
        fs = [f for f in frames if f.direction == d]
        fr, ts = stamp_all(d, [f.end for f in fs])
        for f, f1, t1 in zip(fs, fr, ts, strict=True):
            detail = f"flags 0x{f.flags:02x}"
            if f.type_name == "DATA":
                detail = f"{f.data_length} data bytes" + (", END_STREAM" if f.end_stream else "")
            elif f.type_name == "WINDOW_UPDATE":
                detail = f"increment {f.window_size_increment}"
            elif f.type_name == "SETTINGS" and f.settings:
                # NAME=value (RFC 9113 §6.5.2), MAX_CONCURRENT_STREAMS first (the detail is
                # cut at DETAIL_CHARS): what h2_concurrency_limited reads
                detail += "; " + ", ".join(
                    f"{settings_name(k)}={v}"
                    for k, v in sorted(f.settings, key=lambda kv: kv[0] != 0x3)
                )
            elif f.type_name == "RST_STREAM" and f.error_code is not None:
                detail = f"error {error_code_name(f.error_code)}"
            b.message(
                af.flow,
                d,
                f.stream_id,
                "h2",
                f.type_name,
                f.offset,
                f.wire_length,
                f1,
                t1,
                req_of_stream.get(f.stream_id),
                detail,
            )
            if f.type_name in ("DATA", "WINDOW_UPDATE"):
                b.row(
                    b.h2_windows,
                    flow=af.flow,
                    dir=d,
                    stream=f.stream_id,
                    frame=None if f1 < 0 else f1,
                    ts_ns=None if t1 < 0 else t1,
                    type=f.type_name,
                    length=f.flow_controlled_length,
                    end_stream=f.end_stream,
                    stream_window=f.stream_window,
                    connection_window=f.connection_window,
                    increment=f.window_size_increment,
                )
    for e in events:
        if isinstance(e, H2Error):
            b.anomaly(qualified("h2", e.name), af.flow, e.offset, f"{e.direction}: {e.detail}")


def _http3(b: _Builder, qf: Any) -> None:
    """HTTP/3 (RFC 9114) over a decrypted QUIC connection into requests and messages."""
    from dissectors.http3 import dissect_quic

    h3 = dissect_quic(qf.conn)
    if h3 is None:
        return
    for bl in h3.blocked:
        b.row(
            b.qpack_blocked,
            flow=qf.flow,
            dir=qf.flow_dir(bl.direction),
            stream=bl.stream_id,
            offset=bl.offset,
            frame_type=bl.frame_type,
            required_insert_count=bl.required_insert_count,
            inserts_at_block=bl.inserts_at_block,
            blocked_frame=bl.blocked_frame,
            blocked_ts_ns=bl.blocked_ts_ns,
            encoder_stream=bl.encoder_stream_id,
            unblocked_encoder_offset=bl.unblocked_encoder_offset,
            unblocked_frame=bl.unblocked_frame,
            unblocked_ts_ns=bl.unblocked_ts_ns,
        )
    hs = qf.conn.handshake
    conn_times = {
        "syn_ts_ns": hs.client_initial.ts_ns if hs.client_initial else -1,
        "tls_done_ts_ns": hs.client_finished.ts_ns if hs.client_finished else -1,
    }
    c2s, s2c = qf.flow_dir("c2s"), qf.flow_dir("s2c")

    def st(block: Any) -> tuple[int, int]:
        if block is None or block.frame is None:
            return -1, -1
        return int(block.frame), int(block.ts_ns if block.ts_ns is not None else -1)

    for sid in sorted(h3.streams):
        strm = h3.streams[sid]
        rq, rs = strm.request_headers, strm.response_headers
        if rq is None and rs is None:
            continue
        rf, rt = st(rq)
        sf, stt = st(rs)
        chunks = strm.body_chunks["s2c"]
        # a DATA chunk is stamped when the whole DATA frame was readable; the first body
        # byte came with the STREAM frame that carried the chunk's first byte
        first_body = -1
        if chunks:
            o0 = chunks[0].offset
            qd = "s2c"
            hit = [
                r.ts_ns
                for r in qf.conn.stream_frames
                if r.stream_id == sid and r.direction == qd and r.offset <= o0 < r.offset + r.length
            ]
            first_body = max(min(hit), stt) if hit else int(chunks[0].ts_ns or -1)
        last = max([int(c.ts_ns) for c in chunks if c.ts_ns is not None] + [stt])
        req_idx = len(b.requests["flow"])
        row: dict[str, Any] = {
            "flow": qf.flow,
            "stream": sid,
            "protocol": "h3",
            "method": strm.method,
            "authority": strm.authority,
            "path": strm.path,
            "status": strm.status,
            "request_frame": rf,
            "response_frame": sf,
            "response_head_frame": sf,
            "request_start_ts_ns": rt,
            "request_end_ts_ns": rt,
            "response_ts_ns": stt,
            "first_body_ts_ns": first_body,
            "last_byte_ts_ns": last if rs else -1,
            "request_body_bytes": strm.body_bytes["c2s"],
            "request_body_sha256": body_digest(
                strm.body_chunks["c2s"], strm.end_stream_offset["c2s"] is not None
            ),
            "response_body_bytes": strm.body_bytes["s2c"] if rs else None,
            "complete": strm.end_stream_offset["s2c"] is not None,
            "request_complete": (None if rq is None else strm.end_stream_offset["c2s"] is not None),
            "request_headers": redact(rq.headers or (), redact_secrets=b.redact_secrets)
            if rq
            else None,
            "response_headers": redact(rs.headers or (), redact_secrets=b.redact_secrets)
            if rs
            else None,
            **conn_times,
            **_header_fields(rq, rs),
        }
        ev_ts: list[int] = []
        ctype = (row.get("content_type") or "").split(";")[0].strip().lower()
        if ctype == "text/event-stream" and chunks:
            ok = [(c.offset, c.data) for c in chunks if c.data is not None]
            # an HTTP/3 DATA chunk is readable when the STREAM data completing it arrived
            c_off = np.asarray([c.offset for c in chunks if c.data is not None], np.int64)
            c_fr = np.asarray(
                [-1 if c.frame is None else c.frame for c in chunks if c.data is not None], np.int64
            )
            c_ts = np.asarray(
                [-1 if c.ts_ns is None else c.ts_ns for c in chunks if c.data is not None], np.int64
            )

            def chunk_stamp(
                at: np.ndarray, o: Any = c_off, f: Any = c_fr, t: Any = c_ts
            ) -> tuple[np.ndarray, np.ndarray]:
                i = np.clip(np.searchsorted(o, at, side="right") - 1, 0, max(len(o) - 1, 0))
                return f[i], t[i]

            ev_ts = _sse_events(b, qf.flow, s2c, sid, req_idx, ok, chunk_stamp)
            row["events"] = len(ev_ts)
            p50, p95, mx, rate = _gap_stats(ev_ts)
            row.update(gap_p50_ms=p50, gap_p95_ms=p95, gap_max_ms=mx, events_per_s=rate)
        row["first_event_ts_ns"] = ev_ts[0] if ev_ts else -1
        row["ttfb_ms"] = (stt - rt) / 1e6 if rs and rt >= 0 and stt >= 0 else None
        t_first = ev_ts[0] if ev_ts else first_body
        row["ttft_ms"] = (t_first - rt) / 1e6 if rt >= 0 and t_first >= 0 else None
        b.request(row)
        for blk, d in ((rq, c2s), (rs, s2c)):
            if blk is not None:
                f1, t1 = st(blk)
                b.message(
                    qf.flow,
                    d,
                    sid,
                    "h3",
                    "HEADERS",
                    blk.offset,
                    blk.end - blk.offset,
                    f1,
                    t1,
                    req_idx,
                    f"{blk.kind}" + (" (QPACK-blocked)" if blk.blocked else ""),
                )
    for e in h3.errors:
        b.anomaly(qualified("h3", e.name), qf.flow, getattr(e, "offset", None), str(e.detail))


def build(
    inp: HttpInputs,
    *,
    redact_secrets: bool = True,
    errors: list[dict[str, Any]] | None = None,
    limits: Limits | None = None,
) -> AppTables:
    """Dissect every readable connection into messages and requests rows.

    An unexpected exception while dissecting one connection drops that connection's rows
    and becomes an ``internal_error`` row in ``errors`` (:func:`pcapkit.anomalies.isolate`);
    the other connections go on.  Without ``errors`` the exception propagates.
    """
    b = _Builder(redact_secrets=redact_secrets, limits=limits)
    first_ts = inp.first_ts_ns
    syn_seen = inp.syn_seen
    hs = inp.tls_done

    def one(af: AppFlow) -> None:
        from dissectors.http1 import looks_like_http1  # loaded when a connection is read
        from dissectors.http2 import is_h2_preface

        conn_times = {
            "syn_ts_ns": int(first_ts[af.flow]) if syn_seen[af.flow] else -1,
            "tls_done_ts_ns": hs.get(af.flow, (-1, -1))[1],
        }
        alpn = (af.alpn or "").lower()
        head = af.c2s.data[:HEAD_PROBE_BYTES] or af.s2c.data[:HEAD_PROBE_BYTES]
        if alpn == "h2" or is_h2_preface(af.c2s.data[:HEAD_PROBE_BYTES]):
            _http2(b, af, conn_times)
        elif alpn in ("http/1.1", "http/1.0") or looks_like_http1(head):
            _http1(b, af, conn_times)
        else:
            return  # not HTTP: nothing of this layer to report
        for d, ad in (("c2s", af.c2s), ("s2c", af.s2c)):
            if ad.stop:
                b.anomaly("app_stream_truncated", af.flow, ad.stop_offset, f"{d}: {ad.stop}")

    def guarded(flow: int, fn: Callable[[], None]) -> None:
        mark = b.mark()
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - one connection's bug, not the capture's
            if errors is None:
                raise
            b.rollback(mark)
            b.counts.pop(flow, None)
            errors.append(isolate("http", exc, flow=flow))
            return
        b.flow_done(flow)

    for af in app_flows(inp, errors):
        guarded(af.flow, lambda af=af: one(af))  # type: ignore[misc]
    for qf in inp.quic_flows:
        if qf.conn.alpn and qf.conn.alpn.startswith("h3"):
            guarded(qf.flow, lambda qf=qf: _http3(b, qf))  # type: ignore[misc]
    return AppTables(b.messages, b.requests, b.anomalies, b.h2_windows, b.qpack_blocked)


def _table(name: str, rows: dict[str, list[Any]], nullable: tuple[str, ...]) -> pd.DataFrame:
    n = len(rows["flow"])
    if n == 0:
        return schema.frame(name, n=0)
    data: dict[str, Any] = dict(rows)
    if "dir" in data:
        data["dir"] = schema.categorical(
            np.asarray([DIRS.index(d) for d in rows["dir"]], np.int64), schema.DIRS
        )
    for k in nullable:
        data[k] = pd.array(rows[k], dtype="Int64")
    return schema.frame(name, data, n)


def messages_table(app: AppTables, quic_messages: pd.DataFrame) -> pd.DataFrame:
    """HTTP/1.1 heads, SSE events, HTTP/2 frames, gRPC messages (``app``) and QUIC
    frames (``quic_messages``), ordered by (flow, dir, stream, offset); see
    ``schema.describe("messages")``."""
    parts = []
    if len(app.messages["flow"]):
        parts.append(_table("messages", app.messages, ("stream", "frame", "ts_ns", "request")))
    if len(quic_messages):
        parts.append(quic_messages)
    if not parts:
        return schema.frame("messages", n=0)
    df = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    out: pd.DataFrame = df.sort_values(
        ["flow", "dir", "stream", "offset"], kind="stable"
    ).reset_index(drop=True)
    return out


def requests_table(app: AppTables) -> pd.DataFrame:
    """One row per HTTP exchange with its timeline; see ``schema.describe("requests")``."""
    n = len(app.requests["flow"])
    if n == 0:
        return schema.frame("requests", n=0)
    data: dict[str, Any] = dict(app.requests)
    data["request"] = np.arange(n, dtype=np.int64)
    data["body_bytes_per_s"] = _delivery_rate(
        data["response_body_bytes"], data["first_body_ts_ns"], data["last_byte_ts_ns"]
    )
    return schema.frame("requests", data, n)


def _delivery_rate(body: list[Any], first: list[Any], last: list[Any]) -> list[float | None]:
    """Response body bytes per second over [first body byte, last byte] (issue 21)."""
    out: list[float | None] = []
    for b, a, z in zip(body, first, last, strict=True):
        if b is None or a is None or z is None or int(z) <= int(a) or int(a) < 0:
            out.append(None)
        else:
            out.append(round(int(b) / ((int(z) - int(a)) / 1e9), 3))
    return out


def h2_windows_table(app: AppTables) -> pd.DataFrame:
    """HTTP/2 DATA and WINDOW_UPDATE frames with the send windows after each; see
    ``schema.describe("h2_windows")``."""
    nullable = ("frame", "ts_ns", "stream_window", "connection_window", "increment")
    return _table("h2_windows", app.h2_windows, nullable)


def qpack_blocked_table(app: AppTables) -> pd.DataFrame:
    """HTTP/3 field sections that waited for QPACK encoder instructions; see
    ``schema.describe("qpack_blocked")``."""
    nullable = (
        "required_insert_count",
        "blocked_frame",
        "blocked_ts_ns",
        "encoder_stream",
        "unblocked_encoder_offset",
        "unblocked_frame",
        "unblocked_ts_ns",
    )
    return _table("qpack_blocked", app.qpack_blocked, nullable)

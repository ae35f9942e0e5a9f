"""Requests that waited for a concurrency cap: an HTTP/1.1 connection pool (P1) and HTTP/2's
SETTINGS_MAX_CONCURRENT_STREAMS (P2) — DETECTION.md §11.3, §11.4.

Both are the same wire shape: a *dispatch* (a request line on a keep-alive connection, the
HEADERS of a new HTTP/2 stream) leaves the client ≤ ε after a *release* (the end of the
previous response on that connection; the end of another stream) while every slot the
client may use is busy.  Times are compared on the client's clock: a client-sent packet
seen at the capture point at t left the client at t − d_C/2, a server-sent one reaches it
at t + d_C/2 (d_C: the capture point ↔ client leg, §1.1); the coupling window is
−tol ≤ dispatch − release ≤ tol + late, tol = max(``tol_min_ms``, ``tol_fraction``·d_C)
(§11.3 "tol on lag = max(0.5 ms, 0.25·d_C)"), late = the TCP model's late slack (a busy
client reacts a little late, never early).

* ``connection_pool_queueing`` — per origin (server address and port, SNI/Host), N ≥ 2
  HTTP/1.1 connections; a request on connection c is *queued* when it is coupled to the
  end of the previous response on c, at that instant every other connection to the origin
  is busy (request sent, response not ended) and no connection to the origin is being
  opened (no SYN between the first dispatch and it).  ≥ ``min_queued`` queued requests.
  What the wire cannot decide: a client library's pool limit, an application semaphore
  of N and a program that waits for one response before sending the next on each of N
  workers look the same — the finding says "a cap of N concurrent requests", and the
  confidence stays moderate.  N = 1 is not reported (a pool of one is a sequential
  program, §11.3).
* ``h2_concurrency_limited`` — per HTTP/2 connection with the server's
  SETTINGS_MAX_CONCURRENT_STREAMS = M in force: a new client stream's HEADERS coupled to
  the close of another stream (END_STREAM from the server, or RST_STREAM) while M client
  streams were open just before the close; ≥ ``min_queued`` such.  Open streams below M
  (an application cap k < M) are not P2.  Needs keys (h2 frames).

Cost, per queued dispatch: dispatch − burst start, the burst start being the earliest
first dispatch of the streams/requests it waited behind (followed through chains of
queued ones): a lower bound on each wait (the request was wanted no later than the
burst began, §11.3).  Both ends of the interval are client-sent: unbiased at any vantage.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..rows import itertuples
from .base import Evidence, Finding, frame_filter
from .constants import LATE_SLACK_NS, MS
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import refined_legs_ns

SPEC = DetectorSpec(
    kinds=(
        Kind("connection_pool_queueing", "P1", "DETECTION.md §11.3"),
        Kind("h2_concurrency_limited", "P2", "DETECTION.md §11.4"),
    ),
    thresholds=(
        Threshold(
            "min_queued",
            "count",
            "DETECTION.md §11.3/§11.4: ≥ 3 coupled dispatches at a constant cap make "
            "coincidence negligible (as §2.3's ≥ 3 coupled exchanges)",
            minimum=1,
        ),
        Threshold(
            "tol_min_ms",
            "ms",
            "DETECTION.md §11.3: tol on the lag = max(0.5 ms, 0.25·d_C) [lab pool2v: 0.3–0.4 ms "
            "at the client]",
        ),
        Threshold("tol_fraction", "fraction", "DETECTION.md §11.3: 0.25·d_C", maximum=1.0),
        Threshold(
            "min_connections",
            "count",
            "DETECTION.md §11.3: N = 1 (a pool of one) is a sequential program on the wire",
            minimum=2,
        ),
    ),
)
KINDS = SPEC.kind_names

_MCS = re.compile(r"MAX_CONCURRENT_STREAMS=(\d+)")


@dataclass
class _Slot:
    """One request (P1) or stream (P2): dispatch and release on the client's clock."""

    key: Any  # (flow, request) or stream id
    sent: int  # client time of the dispatch
    end: int | None  # client time of the release (None: never ended)
    frame: int
    end_frame: int | None
    conn: int = 0  # P1: the connection (flow)
    queued_behind: list[int] = field(default_factory=list)  # indices of the busy slots
    release: int | None = None  # index of the slot whose end released it
    burst: int = 0  # client time of its burst's first dispatch


def _busy(o: _Slot, t: int) -> bool:
    """Dispatched at or before ``t`` and not yet released (client time)."""
    return o.sent <= t and (o.end is None or o.end > t)


def _burst_starts(slots: list[_Slot]) -> None:
    for i in sorted(range(len(slots)), key=lambda j: slots[j].sent):
        s = slots[i]
        s.burst = s.sent
        if s.release is not None:
            s.burst = min([s.sent] + [slots[b].burst for b in s.queued_behind])


def _window(d_c: int, tol_min_ms: float, tol_fraction: float) -> tuple[int, int]:
    tol = int(max(tol_min_ms * MS, tol_fraction * d_c))
    return -tol, tol + LATE_SLACK_NS


def detect(
    ctx: DetectContext,
    *,
    min_queued: int = 3,
    tol_min_ms: float = 0.5,
    tol_fraction: float = 0.25,
    min_connections: int = 2,
) -> list[Finding]:
    out: list[Finding] = []
    out += _pools(ctx, min_queued, tol_min_ms, tol_fraction, min_connections)
    out += _h2(ctx, min_queued, tol_min_ms, tol_fraction)
    out += _h3(ctx, min_queued, tol_min_ms, tol_fraction)
    return out


def _leg_c(ctx: DetectContext, f: int) -> int | None:
    if not ctx.has_flow(f) or ctx.flow(f).proto != "tcp":
        return None
    return refined_legs_ns(ctx, f)[0]


def _num(v: Any) -> int | None:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    iv = int(v)
    return iv if iv >= 0 else None


# ----------------------------------------------------------------------------- P1
def _pools(
    ctx: DetectContext, min_queued: int, tol_min_ms: float, tol_fraction: float, min_conns: int
) -> list[Finding]:
    r = ctx.requests
    if r.empty:
        return []
    r = r[r["protocol"] == "http/1.1"]
    if r.empty:
        return []
    by_origin: dict[tuple[str, int, str], list[int]] = {}
    for f in sorted(set(r["flow"].astype(int))):
        if _leg_c(ctx, f) is None:
            continue
        row = ctx.flow(f)
        tls = ctx.tls_row(f)
        sni = str(getattr(tls, "sni", "") or "") if tls is not None else ""
        if not sni:
            hosts = r.loc[r["flow"] == f, "authority"].dropna()
            sni = str(hosts.iloc[0]) if len(hosts) else ""
        by_origin.setdefault((str(row.server_ip), int(row.server_port), sni), []).append(f)
    out = []
    for origin, flows in by_origin.items():
        if len(flows) < min_conns:
            continue
        fd = _pool_origin(ctx, r, origin, flows, min_queued, tol_min_ms, tol_fraction)
        if fd is not None:
            out.append(fd)
    return out


def _pool_origin(
    ctx: DetectContext,
    r: pd.DataFrame,
    origin: tuple[str, int, str],
    flows: list[int],
    min_queued: int,
    tol_min_ms: float,
    tol_fraction: float,
) -> Finding | None:
    slots: list[_Slot] = []
    syn_ct: list[int] = []
    lags: dict[int, tuple[int, int]] = {}
    half: dict[int, int] = {}
    for f in flows:
        d_c = _leg_c(ctx, f) or 0
        half[f] = d_c // 2
        lags[f] = _window(d_c, tol_min_ms, tol_fraction)
        p = ctx.packets_of(f)
        syn = np.nonzero(((p.flags & 0x12) == 0x02) & (p.dir == 0))[0]
        syn_ct += [int(p.ts[i]) - half[f] for i in syn]
        rows = r[r["flow"] == f].sort_values("request_start_ts_ns")
        for q in itertuples(rows):
            t = _num(q.request_start_ts_ns)
            if t is None:
                continue
            e = _num(q.last_byte_ts_ns)
            slots.append(
                _Slot(
                    key=int(q.request),
                    sent=t - half[f],
                    end=None if e is None or not bool(q.complete) else e + half[f],
                    frame=_num(q.request_frame) or 0,
                    end_frame=_num(q.response_frame),
                    conn=f,
                )
            )
    if len(slots) < min_queued + 2:
        return None
    order = sorted(range(len(slots)), key=lambda j: slots[j].sent)
    first = slots[order[0]].sent
    # per connection, its requests in dispatch order (one exchange at a time per HTTP/1.1
    # connection: only the last one dispatched before t can be in progress at t)
    per_conn: dict[int, list[int]] = {}
    for j in order:
        per_conn.setdefault(slots[j].conn, []).append(j)
    sent_of = {c: [slots[j].sent for j in js] for c, js in per_conn.items()}
    syn_sorted = sorted(syn_ct)
    queued = []
    for c, js in per_conn.items():
        for pos in range(1, len(js)):
            i, pj = js[pos], js[pos - 1]
            s, pe = slots[i], slots[pj].end
            if pe is None:
                continue
            lo, hi = lags[c]
            if not lo <= s.sent - pe <= hi:
                continue
            # every other connection that had carried a request is busy just before the
            # release
            t = pe - 1
            used = [c2 for c2 in per_conn if c2 != c and sent_of[c2][0] <= t]
            busy = []
            for c2 in used:
                k = bisect.bisect_right(sent_of[c2], t) - 1
                if _busy(slots[per_conn[c2][k]], t):
                    busy.append(per_conn[c2][k])
            if not used or len(busy) != len(used):
                continue
            k0 = bisect.bisect_right(syn_sorted, first)
            if k0 < len(syn_sorted) and syn_sorted[k0] < s.sent:
                continue  # the client was opening another connection: not capped
            s.release = pj
            s.queued_behind = busy + [pj]
            queued.append(i)
    queued.sort(key=lambda j: slots[j].sent)
    if len(queued) < min_queued:
        return None
    _burst_starts(slots)
    n_conn = len({s.conn for s in slots})
    waits = [(slots[i].sent - slots[i].burst) / MS for i in queued]
    cost = float(sum(waits))
    ev: list[Evidence] = []
    for i in queued[:6]:
        s = slots[i]
        rel = slots[s.release] if s.release is not None else None
        if rel is not None and rel.end_frame is not None:
            ev.append(Evidence(rel.end_frame, "response_end_released_connection"))
        ev.append(Evidence(s.frame, "queued_request"))
    server_ip, port, host = origin
    streams = sorted({int(ctx.flow(f).stream) for f in flows})
    return Finding(
        kind="connection_pool_queueing",
        flow=slots[queued[0]].conn,
        dir="c2s",
        t_start_ns=int(min(slots[i].burst for i in queued) + 0),
        t_end_ns=int(max(slots[i].sent for i in queued)),
        cost_ms=cost,
        cost_method="lower_bound",
        evidence=ev,
        vantage=ctx.vantage(slots[queued[0]].conn),
        confidence=0.7,
        checks=[
            f"{len(queued)} requests left within the coupling window after the response "
            "on their own connection ended",
            f"at each of those moments the other {n_conn - 1} connection(s) to "
            f"{server_ip}:{port} were busy",
            "no new connection to the origin was being opened meanwhile",
        ],
        explanation=(
            f"{len(queued)} HTTP/1.1 requests to {host or server_ip}:{port} waited for a "
            f"free connection: the client used {n_conn} connections, all busy with "
            "responses, and sent each waiting request only when a response on its "
            f"connection ended ({cost:.0f} ms of waiting in all, up to "
            f"{max(waits):.0f} ms for one; counted from the start of the burst, a lower "
            "bound). A client-side cap of "
            f"{n_conn} concurrent requests per origin (a connection pool limit, or an "
            "application semaphore of the same size: the wire cannot tell them apart)."
        ),
        remedy=(
            "Raise the per-host connection limit of the client's pool (e.g. httpx "
            "Limits(max_connections), aiohttp TCPConnector(limit_per_host), browsers' 6 per "
            "host), keep long-lived SSE streams off the pool used for short calls, or use "
            "HTTP/2 or HTTP/3, which multiplex requests on one connection."
        ),
        display_filter="tcp.stream in {"
        + ", ".join(map(str, streams))
        + f"}} && (http.request || {frame_filter([e.frame for e in ev])})",
        details={
            "connections": n_conn,
            "queued": len(queued),
            "waits_ms": [round(w, 3) for w in waits],
            "origin": f"{server_ip}:{port}",
            "host": host,
        },
    )


# ----------------------------------------------------------------------------- P2
def _h2(
    ctx: DetectContext, min_queued: int, tol_min_ms: float, tol_fraction: float
) -> list[Finding]:
    m = ctx.messages
    if m.empty:
        return []
    m = m[(m["protocol"] == "h2") & m["ts_ns"].notna()]
    if m.empty:
        return []
    out = []
    for f in sorted(set(m["flow"].astype(int))):
        d_c = _leg_c(ctx, f)
        if d_c is None:
            continue
        fd = _h2_flow(ctx, f, m[m["flow"] == f], d_c, min_queued, tol_min_ms, tol_fraction)
        if fd is not None:
            out.append(fd)
    return out


def _flags(detail: str) -> int:
    mm = re.match(r"flags 0x([0-9a-f]{2})", detail)
    return int(mm.group(1), 16) if mm else 0


def _h2_flow(
    ctx: DetectContext,
    f: int,
    m: pd.DataFrame,
    d_c: int,
    min_queued: int,
    tol_min_ms: float,
    tol_fraction: float,
) -> Finding | None:
    half = d_c // 2
    lo, hi = _window(d_c, tol_min_ms, tol_fraction)
    m = m.sort_values(["ts_ns", "frame"])
    dirs = m["dir"].astype(str).to_numpy()
    types = m["type"].astype(str).to_numpy()
    sids = m["stream"].to_numpy(dtype=float, na_value=-1).astype(np.int64)
    ts = m["ts_ns"].to_numpy(dtype=np.int64)
    frames = m["frame"].to_numpy(dtype=float, na_value=0).astype(np.int64)
    details = m["detail"].astype(str).to_numpy()
    # the server's limit, in force from when the client had it
    limits: list[tuple[int, int, int]] = []  # (client time, M, frame)
    opens: dict[int, tuple[int, int]] = {}  # stream -> (client time, frame)
    closes: dict[int, tuple[int, int]] = {}
    for k in range(len(m)):
        d, ty, sid, t = dirs[k], types[k], int(sids[k]), int(ts[k])
        ct = t - half if d == "c2s" else t + half
        if ty == "SETTINGS" and d == "s2c":
            mm = _MCS.search(details[k])
            if mm:
                limits.append((ct, int(mm.group(1)), int(frames[k])))
        elif ty == "HEADERS" and d == "c2s" and sid % 2 == 1 and sid not in opens:
            opens[sid] = (ct, int(frames[k]))
        if sid > 0 and sid % 2 == 1 and sid not in closes:
            ended = ty == "RST_STREAM" or (
                d == "s2c"
                and (
                    (ty == "DATA" and "END_STREAM" in details[k])
                    or (ty == "HEADERS" and _flags(details[k]) & 0x1)
                )
            )
            if ended:
                closes[sid] = (ct, int(frames[k]))
    if not limits or len(opens) < min_queued + 2:
        return None
    sid_list = sorted(opens, key=lambda s: opens[s][0])
    slots = [
        _Slot(
            key=s,
            sent=opens[s][0],
            end=closes[s][0] if s in closes else None,
            frame=opens[s][1],
            end_frame=closes[s][1] if s in closes else None,
        )
        for s in sid_list
    ]
    queued = []
    limit_used: set[int] = set()
    ended = sorted((o.end, j) for j, o in enumerate(slots) if o.end is not None)
    end_ts = [e for e, _ in ended]
    sent_sorted = sorted(o.sent for o in slots)
    for i, s in enumerate(slots):
        # the latest release before this dispatch, within the coupling window
        a = bisect.bisect_left(end_ts, s.sent - hi)
        b = bisect.bisect_right(end_ts, s.sent - lo)
        cands = [j for _, j in ended[a:b] if j != i]
        if not cands:
            continue
        j = cands[-1]
        t = (slots[j].end or 0) - 1
        in_force = [lim for lim in limits if lim[0] <= t]
        if not in_force:
            continue
        cap = in_force[-1][1]
        n_busy = bisect.bisect_right(sent_sorted, t) - bisect.bisect_right(end_ts, t)
        n_busy -= int(_busy(s, t))
        if n_busy != cap:
            continue
        busy = [b_ for b_, o in enumerate(slots) if b_ != i and _busy(o, t)]
        s.release = j
        s.queued_behind = busy
        queued.append(i)
        limit_used.add(cap)
    if len(queued) < min_queued or len(limit_used) != 1:
        return None
    cap = next(iter(limit_used))
    _burst_starts(slots)
    waits = [(slots[i].sent - slots[i].burst) / MS for i in queued]
    cost = float(sum(waits))
    setting_frame = next(lim[2] for lim in limits if lim[1] == cap)
    ev: list[Evidence] = [Evidence(setting_frame, "settings_max_concurrent_streams")]
    for i in queued[:6]:
        s = slots[i]
        rel = slots[s.release] if s.release is not None else None
        if rel is not None and rel.end_frame is not None:
            ev.append(Evidence(rel.end_frame, "stream_end_freed_slot"))
        ev.append(Evidence(s.frame, "queued_stream_headers"))
    stream_no = int(ctx.flow(f).stream)
    return Finding(
        kind="h2_concurrency_limited",
        flow=f,
        dir="c2s",
        t_start_ns=int(min(slots[i].burst for i in queued) + half),
        t_end_ns=int(max(slots[i].sent for i in queued) + half),
        cost_ms=cost,
        cost_method="lower_bound",
        evidence=ev,
        vantage=ctx.vantage(f),
        confidence=0.85,
        checks=[
            f"the server's SETTINGS_MAX_CONCURRENT_STREAMS = {cap} was in force",
            f"{len(queued)} new streams opened within the coupling window after another "
            f"stream ended, with {cap} streams open just before",
            "open streams pinned at the peer's limit, not below (not an application cap)",
        ],
        explanation=(
            f"The server allows {cap} concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS "
            f"= {cap}) and the client had {cap} open: {len(queued)} requests were held back "
            "until another stream ended, each opening its stream right after a close "
            f"({cost:.0f} ms of waiting in all, up to {max(waits):.0f} ms for one; counted "
            "from the start of the burst, a lower bound)."
        ),
        remedy=(
            "Server: advertise SETTINGS_MAX_CONCURRENT_STREAMS ≥ 100 (RFC 9113 §6.5.2 "
            "recommends no smaller). Client: open a second connection when one is "
            "saturated (gRPC channel pools), and keep long-lived streams on their own "
            "connection."
        ),
        display_filter=f"tcp.stream == {stream_no} && (http2.type == 1 || "
        "http2.settings.max_concurrent_streams || http2.flags.end_stream == 1)",
        details={
            "max_concurrent_streams": cap,
            "queued": len(queued),
            "streams": [int(slots[i].key) for i in queued],
            "waits_ms": [round(w, 3) for w in waits],
            "frames_filter": frame_filter([e.frame for e in ev]),
        },
    )


# ------------------------------------------------------------------- P2 over QUIC (MAX_STREAMS)
def _h3(
    ctx: DetectContext, min_queued: int, tol_min_ms: float, tol_fraction: float
) -> list[Finding]:
    """§11.4 (iii): a client bidirectional stream 4n opens right after a MAX_STREAMS from
    the server raised the limit above n — the limit before it (the server's
    initial_max_streams_bidi, or the previous MAX_STREAMS) did not allow stream n, so it
    could not have opened earlier.  The lag MAX_STREAMS → open is at most the capture
    point ↔ client leg (≤ one handshake round trip) plus the tolerance."""
    qf = ctx.quic_frames
    if qf.empty:
        return []
    out = []
    for f in sorted(set(qf["flow"].astype(int))):
        fd = _h3_flow(ctx, f, qf[qf["flow"] == f], min_queued, tol_min_ms, tol_fraction)
        if fd is not None:
            out.append(fd)
    return out


def _initial_bidi_limit(ctx: DetectContext, f: int) -> int | None:
    qt = ctx.quic_tls
    if qt.empty or "initial_max_streams_bidi" not in qt.columns:
        return None
    rows = qt[(qt["flow"] == f) & ~qt["from_client"].astype(bool)]
    vals = rows["initial_max_streams_bidi"].dropna()
    return int(vals.iloc[0]) if len(vals) else None


def _h3_flow(
    ctx: DetectContext,
    f: int,
    qf: pd.DataFrame,
    min_queued: int,
    tol_min_ms: float,
    tol_fraction: float,
) -> Finding | None:
    client = qf["from_client"].astype(bool).to_numpy()
    types = qf["type"].astype(str).to_numpy()
    ts = qf["ts_ns"].to_numpy(np.int64)
    frames = qf["frame"].to_numpy(np.int64)
    sid = qf["stream_id"].to_numpy(dtype=float, na_value=-1).astype(np.int64)
    mx = qf["maximum"].to_numpy(dtype=float, na_value=-1).astype(np.int64)
    grants = np.nonzero(~client & (types == "MAX_STREAMS_BIDI") & (mx >= 0))[0]
    if grants.shape[0] < min_queued:
        return None
    opens: dict[int, tuple[int, int]] = {}
    for j in np.nonzero(client & (types == "STREAM") & (sid >= 0) & (sid % 4 == 0))[0].tolist():
        s_ = int(sid[j])
        if s_ not in opens or ts[j] < opens[s_][0]:
            opens[s_] = (int(ts[j]), int(frames[j]))
    blocked = np.nonzero(client & (types == "STREAMS_BLOCKED_BIDI"))[0]
    q = ctx.quic
    rtt_ms = None
    if not q.empty and "handshake_network_ms" in q.columns:
        v = q.loc[q["flow"] == f, "handshake_network_ms"].dropna()
        rtt_ms = float(v.iloc[0]) if len(v) else None
    if rtt_ms is None:
        return None
    rtt = int(rtt_ms * MS)
    lo, hi = _window(rtt, tol_min_ms, tol_fraction)
    initial = _initial_bidi_limit(ctx, f)
    order = sorted(opens, key=lambda x: opens[x][0])
    g_ts, g_mx = ts[grants], mx[grants]
    queued: list[tuple[int, int, int]] = []  # (stream, grant index, burst start)
    last_free: int | None = None
    limits_seen: set[int] = set()
    for s_ in order:
        t_o, _ = opens[s_]
        n = s_ // 4
        k = int(np.searchsorted(g_ts, t_o, side="right")) - 1
        before = [initial] if initial is not None else []
        coupled = False
        if k >= 0 and g_mx[k] > n and lo <= t_o - g_ts[k] <= rtt + hi:
            prev = [int(x) for x in g_mx[:k]] + before
            coupled = bool(prev) and max(prev) <= n
        if coupled and last_free is not None:
            queued.append((s_, k, last_free))
            limits_seen.add(max([int(x) for x in g_mx[:k]] + before))
        else:
            last_free = t_o
    if len(queued) < min_queued:
        return None
    waits = [(opens[s_][0] - b) / MS for s_, _, b in queued]
    cost = float(sum(waits))
    cap = initial if initial is not None else min(limits_seen)
    ev: list[Evidence] = []
    if blocked.shape[0]:
        ev.append(Evidence(int(frames[blocked[0]]), "streams_blocked", int(ts[blocked[0]])))
    for s_, gk, _ in queued[:6]:
        ev.append(Evidence(int(frames[grants[gk]]), "max_streams", int(g_ts[gk])))
        ev.append(Evidence(opens[s_][1], "queued_stream_opened", opens[s_][0]))
    udp_stream = int(ctx.flow(f).stream) if ctx.has_flow(f) else 0
    d = "c2s"
    return Finding(
        kind="h2_concurrency_limited",
        flow=f,
        dir=d,
        t_start_ns=int(min(b for _, _, b in queued)),
        t_end_ns=int(max(opens[s_][0] for s_, _, _ in queued)),
        cost_ms=cost,
        cost_method="lower_bound",
        evidence=ev,
        vantage=ctx.vantage(f) if ctx.has_flow(f) else "unknown",
        confidence=0.85 if blocked.shape[0] else 0.7,
        checks=[
            f"the server granted {cap} bidirectional streams at first "
            "(initial_max_streams_bidi) and raised the limit one MAX_STREAMS at a time",
            f"{len(queued)} request streams opened right after the MAX_STREAMS that first "
            "allowed them (within one round trip): they could not have opened earlier",
            f"the client sent STREAMS_BLOCKED ({int(blocked.shape[0])} frame(s))"
            if blocked.shape[0]
            else "no STREAMS_BLOCKED seen (RFC 9000 §4.6: SHOULD, not MUST)",
        ],
        explanation=(
            f"HTTP/3: the server let the client open {cap} bidirectional streams "
            "(QUIC initial_max_streams_bidi) and granted one more (MAX_STREAMS) only as "
            f"streams closed: {len(queued)} requests waited for that credit, each stream "
            f"opening right after a MAX_STREAMS ({cost:.0f} ms of waiting in all, up to "
            f"{max(waits):.0f} ms for one; counted from the start of the burst, a lower "
            "bound). The credit for a closed stream arrives a round trip after its end at "
            "the earliest (the server counts the stream closed once its FIN is "
            "acknowledged)."
        ),
        remedy=(
            "Server: grant enough bidirectional streams up front (initial_max_streams_bidi "
            "≥ 100, as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS) and send MAX_STREAMS early, "
            "not batched until the client is blocked (RFC 9000 §4.6: a receiver MUST NOT "
            "wait for STREAMS_BLOCKED before advertising credit). Client: a second "
            "connection when one is saturated; long streams on their own connection."
        ),
        display_filter=f"udp.stream == {udp_stream} && quic.frame_type in {{18, 22}}",
        details={
            "protocol": "h3",
            "max_concurrent_streams": cap,
            "queued": len(queued),
            "streams": [s_ for s_, _, _ in queued],
            "waits_ms": [round(w, 3) for w in waits],
            "frames_filter": frame_filter([e.frame for e in ev]),
        },
    )

"""Application-level symptoms: SSE batching and rate limiting (issue 6).

``sse_batching`` — events of a text/event-stream response that arrive together
(within :data:`BURST_GAP_MS` of each other) although the stream otherwise arrives
at a steady cadence: the earlier events of a burst were held somewhere and
released with the later ones.  The hold is attributed to a TCP/TLS finding of the
same flow and direction that overlaps it in time (Nagle, delayed ACK, cork, a
retransmission wait, a zero window, a record that completed late); with none, the
batching happened before the capture point saw the bytes — an upstream proxy's
response buffering (nginx ``proxy_buffering``, compression) or the server's own
write buffering.  Cost (an estimate): the first event of a burst of n would have
arrived (n − 1) median gaps earlier at the stream's cadence.

``rate_limited`` — a 429 response (RFC 6585 §4), or a 503 with ``Retry-After`` or
rate-limit fields (RFC 9110 §15.6.4, §10.2.3; draft-ietf-httpapi-ratelimit-headers).
Cost: the ``Retry-After`` delay when it gives seconds (a lower bound on the wait the
server asked for), else unknown.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..rows import itertuples
from ..schema import is_missing as _na
from ..sessions.http import ascii_decimal
from .base import Evidence, Finding, frame_filter
from .constants import INT64_MAX, ContentType
from .context import DetectContext
from .spec import DetectorSpec, Kind

SPEC = DetectorSpec(
    kinds=(
        Kind("sse_batching", "S1", "issue 6: events arrive in bursts"),
        Kind("rate_limited", "S2", "issue 6: 429 / 503 with Retry-After"),
    ),
    # attributes bursts to the transport findings that held the bytes, and names the
    # HTTP/2 streams behind a TCP hole
    reads=("holding", "tcp_hol_blocking"),
)
KINDS = SPEC.kind_names

# Events delivered within 1 ms of each other arrived in one segment or back to back:
# below any cadence an application produces deliberately, above capture jitter.
BURST_GAP_MS = 1.0
# The stream must show a cadence of its own to call a burst abnormal: at least 5 ms
# median gap (a token stream is ~10–100 ms per token) and 3 events.
MIN_CADENCE_MS = 5.0
MIN_EVENTS = 3
# A Retry-After past this (≈ 292 years) ends the finding where int64 nanoseconds end.
MAX_WAIT_S = 9.2e9
# Findings that can hold bytes of a direction and so explain a burst.


def overlapping(prior: list[Finding], flow: int, d: str, t0: int, t1: int) -> list[Finding]:
    """Holding findings of (flow, d) whose interval overlaps [t0, t1], costliest first."""
    from .registry import HOLDING_KINDS

    hits = [
        f
        for f in prior
        if f.kind in HOLDING_KINDS
        and f.flow == flow
        and f.dir == d
        and f.t_start_ns <= t1
        and f.t_end_ns >= t0
    ]
    return sorted(hits, key=lambda f: -(f.cost_ms or 0.0))


def _sse_batching(ctx: DetectContext) -> list[Finding]:
    out: list[Finding] = []
    m = ctx.messages
    if m.empty:
        return out
    ev = m[(m["protocol"] == "sse") & (m["type"] == "event") & m["request"].notna()]
    if ev.empty:
        return out
    starts = _request_starts(ctx)
    for req_id, grp in ev.groupby("request"):
        ts = grp["ts_ns"].to_numpy(np.int64, na_value=-1)
        fr = grp["frame"].to_numpy(np.int64, na_value=-1)
        if ts.shape[0] < MIN_EVENTS or (ts < 0).any():
            continue
        if (np.diff(ts) < 0).any():
            continue  # the capture's clock went back within the response: no cadence to read
        gaps = np.diff(ts) / 1e6
        steady = gaps[gaps >= BURST_GAP_MS]
        if steady.shape[0] == 0:
            continue
        cadence = float(np.median(steady))
        if cadence < MIN_CADENCE_MS:
            continue
        flow = int(grp["flow"].iloc[0])
        bursts = []
        i = 0
        n = ts.shape[0]
        while i < n - 1:
            j = i
            while j < n - 1 and gaps[j] < BURST_GAP_MS:
                j += 1
            if j > i:
                bursts.append((i, j))  # events i..j arrived together
                i = j + 1
            else:
                i += 1
        if not bursts:
            continue
        worst = max(bursts, key=lambda b: b[1] - b[0])
        held_ms = (worst[1] - worst[0]) * cadence
        b0, b1 = worst
        t_release = int(ts[b1])
        # the first event of the burst was produced after the event before it arrived, or
        # after the request began: the hold never starts earlier (a capture whose clock
        # jumps makes the cadence absurd, not the hold)
        floor = int(ts[b0 - 1]) if b0 > 0 else starts.get(int(req_id))
        if floor is not None and floor <= t_release:
            held_ms = min(held_ms, (t_release - floor) / 1e6)
        t_hold0 = t_release - int(held_ms * 1e6)
        causes = overlapping(ctx.prior, flow, "s2c", t_hold0, t_release)
        ev_frames = sorted({int(x) for x in fr[b0 : b1 + 1]})
        evidence = [Evidence(ev_frames[0], "burst of events", t_release)]
        prev = None
        if b0 > 0:
            prev = int(fr[b0 - 1])
            evidence.insert(0, Evidence(prev, "previous event", int(ts[b0 - 1])))
        for c in causes[:1]:
            for e in c.evidence:
                evidence.append(Evidence(e.frame, f"{c.kind}: {e.role}", e.ts_ns))
        total = sum(b[1] - b[0] + 1 for b in bursts)
        where = f"events {b0 + 1}–{b1 + 1}"
        if causes:
            c = causes[0]
            why = (
                f"They were held by {c.kind} (frames "
                + ", ".join(str(x) for x in c.frames)
                + f", {c.cost_ms:.1f} ms) on this connection at the same time."
            )
            remedy = c.remedy
            checks = [f"TCP/TLS cause found: {c.kind}"]
        else:
            why = (
                "No TCP or TLS hold on this connection explains it: the events were batched "
                "before this capture point saw them — typically a proxy buffering the "
                "response (nginx proxy_buffering, gzip), or the server's own write buffer."
            )
            remedy = (
                "Disable response buffering for event streams on every proxy on the path "
                "(nginx: proxy_buffering off or 'X-Accel-Buffering: no'; no compression of "
                "text/event-stream) and flush after each event in the server."
            )
            checks = ["no nagle/cork/delayed-ACK/retransmission/zero-window hold overlaps"]
        out.append(
            Finding(
                kind="sse_batching",
                flow=flow,
                dir="s2c",
                t_start_ns=t_hold0,
                t_end_ns=t_release,
                cost_ms=held_ms,
                cost_method="estimate",
                evidence=evidence,
                explanation=(
                    f"The event stream of request {int(req_id)} arrives every "
                    f"{cadence:.1f} ms, but {where} arrived together (within "
                    f"{BURST_GAP_MS:g} ms) in frame {ev_frames[-1]}: the first of them "
                    f"waited ≈{held_ms:.0f} ms for the others. {why} "
                    f"{len(bursts)} burst(s), {total} events in bursts."
                ),
                remedy=remedy,
                display_filter=frame_filter([e.frame for e in evidence]),
                confidence=0.8 if causes else 0.6,
                checks=checks,
                details={
                    "request": int(req_id),
                    "cadence_ms": round(cadence, 3),
                    "bursts": [[int(a) + 1, int(b) + 1] for a, b in bursts],
                    "cause": causes[0].kind if causes else "upstream",
                },
            )
        )
    return out


def _request_starts(ctx: DetectContext) -> dict[int, int]:
    """Each request's start time (ns), where the requests table has one."""
    r = ctx.requests
    if r.empty:
        return {}
    ids = r["request"].to_numpy(np.int64, na_value=-1)
    t0 = r["request_start_ts_ns"].to_numpy(np.int64, na_value=-1)
    return {int(i): int(t) for i, t in zip(ids, t0, strict=True) if i >= 0 and t >= 0}


def _retry_after_s(v: Any) -> float | None:
    if _na(v):
        return None
    s = ascii_decimal(str(v).strip(" \t"))  # RFC 9110 §10.2.3: delay-seconds = 1*DIGIT
    return None if s is None else float(s)


def _rate_limited(ctx: DetectContext) -> list[Finding]:
    out: list[Finding] = []
    r = ctx.requests
    if r.empty:
        return out
    for i, q in enumerate(itertuples(r)):
        if _na(q.status):
            continue
        status = int(q.status)
        has_hint = not _na(q.retry_after) or not _na(q.ratelimit)
        if not (status == 429 or (status == 503 and has_hint)):
            continue
        wait = _retry_after_s(q.retry_after)
        frames = [int(x) for x in (q.request_frame, q.response_frame) if not _na(x)]
        evidence = []
        if not _na(q.request_frame):
            evidence.append(Evidence(int(q.request_frame), "request", None))
        if not _na(q.response_frame):
            evidence.append(Evidence(int(q.response_frame), f"{status} response", None))
        t0 = int(q.response_ts_ns) if not _na(q.response_ts_ns) else 0
        hint = []
        if not _na(q.retry_after):
            hint.append(f"Retry-After: {q.retry_after}")
        if not _na(q.ratelimit):
            hint.append(str(q.ratelimit))
        out.append(
            Finding(
                kind="rate_limited",
                flow=int(q.flow),
                dir="s2c",
                stream=None if _na(q.stream) else int(q.stream),
                t_start_ns=t0,
                # a Retry-After is the server's (any number of digits): the end is capped
                # where nanosecond times end
                t_end_ns=min(t0 + int(min(wait or 0, MAX_WAIT_S) * 1e9), INT64_MAX),
                cost_ms=None if wait is None else wait * 1000.0,
                cost_method="lower_bound",
                evidence=evidence,
                explanation=(
                    f"{q.method} {'' if _na(q.authority) else q.authority}"
                    f"{'' if _na(q.path) else q.path} was refused with {status}"
                    + (f" ({'; '.join(hint)})" if hint else "")
                    + ": the server (or a gateway) is rate limiting this client; nothing in "
                    "the network is slow."
                ),
                remedy=(
                    "Back off as Retry-After says (exponential backoff with jitter without "
                    "it), lower request concurrency, or raise the quota/tier; read the "
                    "rate-limit fields to pace requests before hitting the limit."
                ),
                display_filter=frame_filter(frames),
                confidence=0.95,
                checks=["status and headers read from the decrypted response"],
                details={"request": i, "status": status, "retry_after_s": wait},
            )
        )
    return out


def _plaintext_map(ctx: DetectContext, flow: int, d: int) -> Any:
    """TCP stream range → plaintext range of one direction (identity without TLS)."""
    recs = ctx.records_of(flow, d)
    if not len(recs):
        return lambda a, b: [(a, b)]
    app = recs[
        (recs["content_type"] == ContentType.APPLICATION_DATA.value)
        & (recs["status"] == "decrypted")
    ]
    off = app["offset"].to_numpy(np.int64)
    end = off + app["length"].to_numpy(np.int64)
    plen = app["plaintext_len"].to_numpy(np.int64, na_value=0)
    pstart = np.concatenate([[0], np.cumsum(plen)[:-1]]) if plen.shape[0] else plen

    def to_plain(a: int, b: int) -> list[tuple[int, int]]:
        k = np.nonzero((off < b) & (end > a))[0]
        return [(int(pstart[i]), int(pstart[i] + plen[i])) for i in k.tolist()]

    return to_plain


def _refine_h2_hol(ctx: DetectContext) -> None:
    """tcp_hol_blocking on an HTTP/2 connection, per stream (DETECTION.md §4.1): which
    streams' bytes were lost, which streams waited behind them and for how long.  Adds
    ``h2_streams_lost`` / ``h2_victim_streams`` to the finding's details and a sentence
    to its explanation (the finding itself, its cost and frames are unchanged)."""
    m = ctx.messages
    if m.empty or not any(f.kind == "tcp_hol_blocking" for f in ctx.prior):
        return  # nothing to refine (and no table scan for it)
    h2 = m[(m["protocol"] == "h2") & m["type"].isin(["DATA", "HEADERS", "CONTINUATION"])]
    if h2.empty:
        return
    for f in ctx.prior:
        if f.kind != "tcp_hol_blocking" or f.flow is None or f.dir is None:
            continue
        fr = h2[(h2["flow"] == f.flow) & (h2["dir"] == f.dir)]
        if fr.empty:
            continue
        d = 0 if f.dir == "c2s" else 1
        to_plain = _plaintext_map(ctx, f.flow, d)
        fo = fr["offset"].to_numpy(np.int64)
        fe = fo + fr["length"].to_numpy(np.int64)
        fs_ = fr["stream"].to_numpy(np.int64, na_value=0)

        def streams_in(
            a: int, b: int, tp: Any = to_plain, o: Any = fo, e: Any = fe, s: Any = fs_
        ) -> set[int]:
            out: set[int] = set()
            for pa, pb in tp(a, b):
                out |= {int(x) for x in s[(o < pb) & (e > pa)].tolist() if x}
            return out

        det = f.details
        h0 = det.get("hole_offset")
        lost: set[int] = set()
        if h0 is not None:
            lost = streams_in(int(h0), int(h0) + int(det.get("hole_bytes") or 1))
        for u in det.get("hit_units") or []:
            lost |= streams_in(u["offset"], u["offset"] + u["length"])
        victims: dict[int, float] = {}
        for u in det.get("victim_units") or []:
            w = u.get("wait_ms")
            for sid in streams_in(u["offset"], u["offset"] + u["length"]):
                if w is not None and w > victims.get(sid, -1.0):
                    victims[sid] = round(float(w), 3)
        if not lost and not victims:
            continue
        det["h2_streams_lost"] = sorted(lost)
        det["h2_victim_streams"] = {k: victims[k] for k in sorted(victims)}
        others = {k: v for k, v in victims.items() if k not in lost}
        note = ""
        if lost:
            note += " HTTP/2: the lost bytes belonged to stream(s) " + ", ".join(
                str(x) for x in sorted(lost)
            )
        if others:
            note += (
                "; stream(s) "
                + ", ".join(f"{k} ({v:.1f} ms)" for k, v in sorted(others.items()))
                + " had their own bytes already and still waited behind them"
            )
        if note:
            f.explanation = f.explanation.rstrip() + note + "."


def detect(ctx: DetectContext) -> list[Finding]:
    _refine_h2_hol(ctx)
    return _sse_batching(ctx) + _rate_limited(ctx)

"""Retries: ``retry_ignored_retry_after`` (A1) and ``retry_amplification`` (A2),
DETECTION.md §11.1–§11.2 (issue 21).

**The same request** (§11.2, strongest first), always within one client IP and one origin
(server address, port and authority — other users behind a NAT are other clients):

1. an equal ``Idempotency-Key`` (or ``X-Idempotency-Key``, ``PayPal-Request-Id``);
2. an equal W3C ``traceparent`` trace id or client-set ``x-request-id``, with the same
   method and path (one trace may hold several different calls);
3. without either: the same method, authority, path and request body (its SHA-256,
   ``requests.request_body_sha256``; its size when the body was not captured whole), for
   methods with a body only (identical polling GETs are not retries).  ``Authorization``
   is redacted before detection, so the same prompt from two users of one client IP would
   pass as one request — such findings say so and keep a lower confidence.

**retry_ignored_retry_after.** A response R (429, 503, or any status with
``RateLimit: …;r=0``) sets a wait W: ``retry-after-ms`` (the non-standard millisecond field
OpenAI's SDKs read first), else ``Retry-After`` delay-seconds (RFC 9110 §10.2.3), else its
HTTP-date minus R's own ``Date`` (the server's clock on both sides), else RateLimit ``t``
with ``r=0`` (draft-ietf-httpapi-ratelimit-headers-10: "the Retry-After field MUST take
precedence").  The next attempt Q' of the same request *started after R reached the
client* violates it when ``wait = t(Q') − t(R) − d_C < W − tol`` (d_C: the capture point ↔
client round trip, ≈ 0 at the client; a client action triggered by R shows at a
server-side capture d_C after R, §11.0); tol = max(``tolerance_ms``, RTT, 5 % of W), + 1 s
for the HTTP-date form (1-s resolution).  ``Retry-After: 0`` and requests already in
flight when R arrived (wait < 0) are exempt.  One finding per chain of attempts.  Cost
(``measured_interval``): the round trips of the early attempts that were refused again —
request first byte → refusal at the capture point, + d_C (the legs the capture point did
not see): what the ignored wait bought.  An early attempt that was served (the limit had
lapsed) costs nothing but is listed.

What the wire cannot decide: the client's *intent* (a fixed backoff vs a bug), whether a
different request to the same origin shares the refused quota (the RateLimit partition key
is opaque: only the same request is judged), and nothing at all without keys over TLS or
over QUIC (the status is encrypted).

**retry_amplification.** Two attempts of the same request *in flight at once* for more than
max(RTT, ``overlap_ms``) — a hedge, a proxy retrying on its per-try timeout while the
application still waits, a retry on a new connection while the first copy still streams
(§11.2 "concurrent duplicate") — or a ``409 Conflict`` answering a request that carries an
idempotency key (the Idempotency-Key draft's "request is still being processed").  Serial
attempts after a refusal or a failure are the retry policy doing its job and are not
reported here (their waits are A1's business; their count is in the details of an A1
finding).  Cost (``measured_interval``): the time the non-winning copies were in flight
(first request byte → last response byte, + d_C each), the winner being the first copy to
complete with a 2xx.  The server's duplicated work is that many requests more; only a
server-side capture sees every layer's attempts.  Without a key or trace id, two components
of one client sending the same POST at once (a GraphQL query, a gRPC health check) are one
request by their body digest: duplicated work, reported, but not a retry — the wire cannot
tell, hence the lower confidence of that identity.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from typing import Any

from ..rows import itertuples
from ..schema import is_missing as _na
from ..sessions.http import ascii_decimal
from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(
        Kind("retry_ignored_retry_after", "A1", "DETECTION.md §11.1"),
        Kind("retry_amplification", "A2", "DETECTION.md §11.2"),
    ),
    thresholds=(
        Threshold(
            "tolerance_ms",
            "ms",
            "DETECTION.md §11.1: tol = max(100 ms, RTT, 5 % of the wait) — timer and "
            "scheduling slack of a client that does wait",
        ),
        Threshold(
            "overlap_ms",
            "ms",
            "DETECTION.md §11.2: two copies in flight together for more than max(RTT, 50 ms) "
            "are concurrent, not a hand-over",
        ),
    ),
)
KINDS = SPEC.kind_names

# identities that may join different requests: how much a finding on them is believed
WEAK = {"body-sha256": 0.7, "signature": 0.6}
WEAK_WHY = {
    "body-sha256": "method, path and body digest: the caller's credentials are not compared",
    "signature": "method, path and body size: the body is not compared",
}
KEY_HEADERS = ("idempotency-key", "x-idempotency-key", "paypal-request-id")
BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "CONNECT", "DELETE"})
# W3C Trace Context §3.2: version "-" trace-id (32 hex, not all zero) "-" parent-id "-" flags
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")
# x-ratelimit-reset-requests: "1s", "6m0s", "12ms", "1h2m3.5s" (OpenAI's Go-style durations)
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def header(headers: Any, name: str) -> str | None:
    """The first value of ``name`` in a requests-table header list, None without it."""
    if headers is None or _na(headers):
        return None
    for k, v in headers:
        if str(k).lower() == name:
            return str(v)
    return None


def _rate_limit_t(value: str) -> float | None:
    """``t`` of a RateLimit item whose ``r`` is 0 (draft-ietf-httpapi-ratelimit-headers-10)."""
    for item in value.split(","):
        params = dict(
            (p.split("=", 1)[0].strip(), p.split("=", 1)[1].strip())
            for p in item.split(";")[1:]
            if "=" in p
        )
        r, t = ascii_decimal(params.get("r", "")), ascii_decimal(params.get("t", ""))
        if r == 0 and t is not None:
            return float(t)
    return None


def _duration_s(value: str) -> float | None:
    parts = DURATION.findall(value.strip())
    if not parts or "".join(a + b for a, b in parts) != value.strip():
        return None
    return sum(float(a) * UNIT_S[b] for a, b in parts)


def wait_s(headers: Any) -> tuple[float, str] | None:
    """The wait a response asks for, in seconds, and the field it came from (module doc)."""
    ms = header(headers, "retry-after-ms")
    if ms is not None:
        try:
            v = float(ms.strip())
            if v >= 0 and v == v and v != float("inf"):
                return v / 1000, "retry-after-ms"
        except ValueError:
            pass
    ra = header(headers, "retry-after")
    if ra is not None:
        s = ascii_decimal(ra.strip(" \t"))  # RFC 9110 §10.2.3: delay-seconds = 1*DIGIT
        if s is not None:
            return float(s), "retry-after"
        when = _http_date(ra)
        now = _http_date(header(headers, "date"))
        if when is not None and now is not None:
            return max(0.0, when - now), "retry-after-date"
    rl = header(headers, "ratelimit")
    t = None if rl is None else _rate_limit_t(rl)
    if t is not None:
        return t, "ratelimit"
    for kind in ("requests", "tokens"):
        rem = header(headers, f"x-ratelimit-remaining-{kind}")
        reset = header(headers, f"x-ratelimit-reset-{kind}")
        if rem is not None and reset is not None and ascii_decimal(rem.strip()) == 0:
            d = _duration_s(reset)
            if d is not None:
                return d, f"x-ratelimit-reset-{kind}"
    return None


def _http_date(v: str | None) -> float | None:
    if not v:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None or dt.tzinfo is None:
        return None
    return dt.timestamp()


@dataclass(frozen=True, slots=True)
class Attempt:
    """One row of the requests table, as the retry detectors read it."""

    request: int
    flow: int
    stream: int | None
    start: int  # request's first byte at the capture point
    end: int  # last response byte (else the response head, else the request's start)
    response_ts: int | None
    status: int | None
    complete: bool
    request_frame: int | None
    response_frame: int | None
    method: str
    target: str  # authority + path
    headers: Any
    response_headers: Any
    identity: tuple[str, str]  # (how, value)


def identity(q: Any) -> tuple[str, str] | None:
    """How this request is recognised across attempts (module doc), None: it cannot be."""
    hs = q.request_headers
    for name in KEY_HEADERS:
        v = header(hs, name)
        if v:
            return (name, v)
    method = "" if _na(q.method) else str(q.method)
    path = "" if _na(q.path) else str(q.path)
    tp = header(hs, "traceparent")
    m = None if tp is None else TRACEPARENT.match(tp.strip().lower())
    if m and m.group(1) != "0" * 32:
        return ("traceparent", f"{m.group(1)} {method} {path}")
    rid = header(hs, "x-request-id")
    if rid:
        return ("x-request-id", f"{rid} {method} {path}")
    body = None if _na(q.request_body_bytes) else int(q.request_body_bytes)
    if method and method.upper() not in BODYLESS and body:
        auth = "" if _na(q.authority) else str(q.authority)
        digest = getattr(q, "request_body_sha256", None)
        if digest is not None and not _na(digest):
            return ("body-sha256", f"{method} {auth}{path} {digest}")
        return ("signature", f"{method} {auth}{path} {body} B")
    return None


def attempts(ctx: DetectContext) -> dict[tuple[Any, ...], list[Attempt]]:
    """Requests grouped by (client IP, server IP, port, authority, identity), in start order."""
    r = ctx.requests
    groups: dict[tuple[Any, ...], list[Attempt]] = {}
    if r is None or r.empty:
        return groups
    for q in itertuples(r):
        if _na(q.request_start_ts_ns) or not ctx.has_flow(int(q.flow)):
            continue
        ident = identity(q)
        if ident is None:
            continue
        fl = ctx.flow(int(q.flow))
        auth = "" if _na(q.authority) else str(q.authority).lower()
        start = int(q.request_start_ts_ns)
        end = start
        for c in (q.last_byte_ts_ns, q.response_ts_ns):
            if not _na(c):
                end = max(start, int(c))
                break
        a = Attempt(
            request=int(q.request),
            flow=int(q.flow),
            stream=None if _na(q.stream) else int(q.stream),
            start=start,
            end=end,
            response_ts=None if _na(q.response_ts_ns) else int(q.response_ts_ns),
            status=None if _na(q.status) else int(q.status),
            complete=bool(q.complete),
            request_frame=None if _na(q.request_frame) else int(q.request_frame),
            response_frame=None if _na(q.response_frame) else int(q.response_frame),
            method="" if _na(q.method) else str(q.method),
            target=auth + ("" if _na(q.path) else str(q.path)),
            headers=q.request_headers,
            response_headers=q.response_headers,
            identity=ident,
        )
        key = (str(fl.client_ip), str(fl.server_ip), int(fl.server_port), auth, ident)
        groups.setdefault(key, []).append(a)
    for v in groups.values():
        v.sort(key=lambda a: (a.start, a.request))
    return groups


def _legs(ctx: DetectContext, flow: int) -> tuple[int, int]:
    dc, ds = ctx.legs_ns(flow)
    return dc or 0, ds or 0


def _refusal(a: Attempt) -> tuple[float, str] | None:
    """The wait a refused attempt's answer asked for (429/503, or RateLimit r=0)."""
    if a.status is None or a.response_ts is None:
        return None
    w = wait_s(a.response_headers)
    if w is None:
        return None
    if a.status in (429, 503) or w[1] == "ratelimit":
        return w
    return None


def _ignored(ctx: DetectContext, group: list[Attempt], tolerance_ms: float) -> Finding | None:
    early: list[dict[str, Any]] = []
    evidence: list[Evidence] = []
    cost_ns = 0
    for prev, cur in zip(group, group[1:], strict=False):
        w = _refusal(prev)
        if w is None or w[0] <= 0 or prev.response_ts is None:
            continue
        dc, ds = _legs(ctx, prev.flow)
        wait_ns = cur.start - prev.response_ts - dc
        if wait_ns < 0:
            continue  # already in flight when the refusal reached the client
        tol_ns = max(tolerance_ms * 1e6, dc + ds, 0.05 * w[0] * 1e9)
        if w[1] == "retry-after-date":
            tol_ns += 1e9
        if wait_ns >= w[0] * 1e9 - tol_ns:
            continue
        refused = cur.status is not None and _refusal(cur) is not None
        if refused and cur.response_ts is not None:
            cost_ns += cur.response_ts - cur.start + _legs(ctx, cur.flow)[0]
        early.append(
            {
                "request": cur.request,
                "wait_ms": round(wait_ns / 1e6, 3),
                "asked_s": w[0],
                "field": w[1],
                "status": cur.status,
                "refused": refused,
            }
        )
        if prev.response_frame is not None:
            evidence.append(
                Evidence(prev.response_frame, f"{prev.status} asking {w[0]:g} s", prev.response_ts)
            )
        if cur.request_frame is not None:
            evidence.append(
                Evidence(cur.request_frame, f"retry after {wait_ns / 1e6:.0f} ms", cur.start)
            )
    if not early:
        return None
    first = group[0]
    refused_n = sum(1 for e in early if e["refused"])
    how = first.identity[0]
    strong = how not in WEAK
    statuses = [a.status for a in group]
    served = next((a for a in group if a.status is not None and 200 <= a.status < 300), None)
    asked = sorted({e["asked_s"] for e in early})
    return Finding(
        kind="retry_ignored_retry_after",
        flow=first.flow,
        dir="c2s",
        stream=first.stream,
        t_start_ns=first.start,
        t_end_ns=max(a.end for a in group),
        cost_ms=cost_ns / 1e6,
        cost_method="measured_interval",
        evidence=evidence,
        explanation=(
            f"{first.method} {first.target} was refused and told to wait "
            + " / ".join(f"{x:g} s" for x in asked)
            + f", but {len(early)} attempt(s) left sooner (after "
            + ", ".join(f"{e['wait_ms']:.0f}" for e in early)
            + f" ms); {refused_n} of them were refused again. Attempts: {len(group)}, "
            f"statuses {', '.join(str(s) for s in statuses)}"
            + (
                f"; served at attempt {group.index(served) + 1}."
                if served
                else "; never served in this capture."
            )
            + f" The attempts are one request by their {how}."
        ),
        remedy=(
            "Honour Retry-After / retry-after-ms / RateLimit t before retrying (openai-python "
            "≥ 2.52.0 honours waits up to 120 s); add jitter on top of the wait, never instead "
            "of it; surface the error instead of retrying early when the wait is long."
        ),
        display_filter=frame_filter([e.frame for e in evidence]),
        vantage=ctx.vantage(first.flow),
        confidence=0.9 if strong else WEAK[how],
        checks=[
            "the wait is measured from the refusal reaching the client (d_C removed)",
            "attempts already in flight when the refusal arrived are exempt",
            f"same request by {how}" + ("" if strong else f" ({WEAK_WHY[how]})"),
        ],
        details={
            "request": first.request,
            "attempts": len(group),
            "statuses": statuses,
            "early": early,
            "identity": how,
        },
    )


def _amplified(ctx: DetectContext, group: list[Attempt], overlap_ms: float) -> Finding | None:
    pairs: list[tuple[Attempt, Attempt, int]] = []
    for i, a in enumerate(group):
        for b in group[i + 1 :]:
            rtt = sum(_legs(ctx, a.flow))
            ov = min(a.end, b.end) - max(a.start, b.start)
            if ov > max(rtt, overlap_ms * 1e6):
                pairs.append((a, b, ov))
    conflicts = [
        a for a in group if a.status == 409 and a.identity[0] in KEY_HEADERS and a is not group[0]
    ]
    marker, layers = _layers(group)
    if not pairs and not conflicts and layers < 2:
        return None
    done = [a for a in group if a.complete and a.status is not None and 200 <= a.status < 300]
    winner = min(done, key=lambda a: a.end) if done else None
    losers = [a for a in group if a is not winner]
    if pairs or conflicts:
        cost_ns = sum(a.end - a.start + _legs(ctx, a.flow)[0] for a in losers)
        basis = "the losing copies' time in flight"
    else:  # serial, several layers: the delay they added (both ends client → server)
        until = winner.start if winner is not None else group[-1].end
        cost_ns = until - group[0].start
        basis = "first attempt → " + ("the winning attempt" if winner else "the last answer")
    evidence = []
    for a in group:
        if a.request_frame is not None:
            role = "winning attempt" if a is winner else f"duplicate attempt ({a.status})"
            evidence.append(Evidence(a.request_frame, role, a.start))
    for a in conflicts:
        if a.response_frame is not None:
            evidence.append(Evidence(a.response_frame, "409 Conflict", a.response_ts))
    first = group[0]
    conns = len({a.flow for a in group})
    how = first.identity[0]
    strong = how not in WEAK
    ov_ms = max((ov for _a, _b, ov in pairs), default=0) / 1e6
    markers = [
        f"{m} " + ", ".join("-" if c < 0 else str(c) for c in _counts(group, m))
        for m in MARKERS
        if any(header(a.headers, m) is not None for a in group)
    ]
    return Finding(
        kind="retry_amplification",
        flow=first.flow,
        dir="c2s",
        stream=first.stream,
        t_start_ns=first.start,
        t_end_ns=max(a.end for a in group),
        cost_ms=cost_ns / 1e6,
        cost_method="measured_interval",
        evidence=evidence,
        explanation=(
            f"{first.method} {first.target} was sent {len(group)} times "
            f"(one request by its {how}) over {conns} connection(s)"
            + (f", copies in flight together for up to {ov_ms:.0f} ms" if pairs else "")
            + (f", {len(conflicts)} answered 409 Conflict" if conflicts else "")
            + (
                f", by {layers} nested retry layers ({marker} restarted {layers - 1} time(s):"
                f" {len(group)} attempts where one layer would make at most "
                f"{max(_counts(group, marker)) + 1})"
                if layers >= 2
                else ""
            )
            + f": {cost_ns / 1e6:.0f} ms ({basis})"
            + (f" (attempt markers: {'; '.join(markers)})" if markers else "")
            + "."
        ),
        remedy=(
            "Retry at one layer only (SDK max_retries=0 behind a retrying proxy, or no proxy "
            "retries), cap retries with a budget (Envoy retry budget, gRPC retryThrottling), "
            "cancel the first attempt before sending another (close / RST_STREAM CANCEL), and "
            "send an Idempotency-Key so the server can refuse duplicates."
        ),
        display_filter=frame_filter([e.frame for e in evidence]),
        vantage=ctx.vantage(first.flow),
        confidence=0.85 if strong else WEAK[how] - 0.1,
        checks=[
            f"same request by {how}" + ("" if strong else f" ({WEAK_WHY[how]})"),
            "copies overlap by more than max(RTT, overlap_ms), a 409 on the key, or an "
            "attempt counter that restarts (an outer layer re-running the inner one's retries)",
        ],
        details={
            "request": first.request,
            "attempts": len(group),
            "connections": conns,
            "overlap_ms": round(ov_ms, 3),
            "conflicts": len(conflicts),
            "layers": layers,
            "cost_basis": basis,
            "winner": None if winner is None else winner.request,
            "identity": how,
            "markers": markers,
        },
    )


MARKERS = ("x-stainless-retry-count", "grpc-previous-rpc-attempts", "x-envoy-attempt-count")


def _counts(group: list[Attempt], marker: str) -> list[int]:
    out = []
    for a in group:
        v = header(a.headers, marker)
        n = None if v is None else ascii_decimal(v.strip())
        out.append(-1 if n is None else int(n))
    return out


def _layers(group: list[Attempt]) -> tuple[str, int]:
    """(marker, runs): an attempt counter every attempt carries that starts again (2 → 0)
    marks an outer layer re-running an inner layer's retries (§11.2 "multi-layer");
    grpc-previous-rpc-attempts is absent on a first attempt (counted as 0)."""
    for m in MARKERS:
        counts = _counts(group, m)
        if m == "grpc-previous-rpc-attempts":
            if all(c < 0 for c in counts):
                continue
            counts = [max(c, 0) for c in counts]
        elif any(c < 0 for c in counts):
            continue
        # strictly lower: 0, 0, 0 is three first attempts (or an outer layer over an inner
        # one that does not retry) — indistinguishable from a user asking three times
        return m, 1 + sum(1 for a, b in zip(counts, counts[1:], strict=False) if b < a)
    return "", 1


def detect(
    ctx: DetectContext, *, tolerance_ms: float = 100.0, overlap_ms: float = 50.0
) -> list[Finding]:
    out: list[Finding] = []
    for group in attempts(ctx).values():
        if len(group) < 2:
            continue
        for f in (_ignored(ctx, group, tolerance_ms), _amplified(ctx, group, overlap_ms)):
            if f is not None:
                out.append(f)
    return out


__all__ = ["KINDS", "SPEC", "detect", "header", "identity", "wait_s"]

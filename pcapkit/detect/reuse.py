"""Connection not reused (R3, DETECTION.md §7.3).

Mechanism: every new connection pays the TCP handshake (1 RTT), the TLS handshake
(TLS 1.3: 1 RTT, TLS 1.2: 2 RTT, resumed TLS 1.2: 1 RTT) and a fresh slow start
from the initial window, before the first request byte can leave.  A client that
keeps a pool (HTTP/1.1 keep-alive, RFC 9112 §9.3) or multiplexes (HTTP/2, RFC
9113 §9.1.1) pays that once per origin, not once per request.

Signature: for the same (client IP, server IP, server port, SNI), a connection N
whose start is visible (SYN, or a ClientHello at stream offset 0 when the SYN was
not captured) and that carries application data from the client, while another
connection E to the same server that had carried application data either

  (a) was open and idle — its last payload before N's start was the server's
      (the exchange had completed) — or, with HTTP/2 (ALPN ``h2``), simply open;
  (b) had closed (FIN, RST or a TLS close_notify/alert) less than
      ``reuse_window_s`` before N's start.

Cost per avoidable connection = t(first application byte from the client) −
t(SYN) at the capture point (TCP + TLS handshakes; both packets travel client →
server, so the interval is unbiased by the vantage, §1.1) — ``measured_interval``;
without the SYN, from the ClientHello (TLS only) — ``lower_bound``.  The cold
congestion window is not priced.

Counter-checks (§7.3 "FPs"):

* parallel opening / happy eyeballs racing (RFC 8305): N started before E was
  usable (E's client had not yet sent application data), or within
  ``parallel_window_ms`` of E's start — not avoidable;
* HTTP/1.1's parallel connections: E busy (the client's request outstanding) at
  N's start — legitimate, only an idle E makes N avoidable;
* different SNI: never grouped (connection coalescing is not permitted across
  authorities without the certificate covering them);
* NAT / load-balancer idle timeouts: an E silent for ``nat_idle_s`` or more, or
  reset after such a silence, may have been dead — not counted;
* connections without application data (probes, pre-connects, aborted
  handshakes) are neither N nor E;
* a cancelled HTTP/1.1 response: the client closed E while a response on it had begun,
  not completed and was still arriving (its last byte less than ``CLOSE_AFTER_USE_S``
  before the close, or after it; the requests table says so, with keys or in cleartext).  HTTP/1.1
  has no other way to abandon a response (RFC 9112 §9.6), so the next call needs a new
  connection; the cancellation itself is ``client_timeout``'s to judge.  (HTTP/2 can
  cancel one stream with RST_STREAM and keep the connection: not exempt.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import ConnTimeline, timelines

SPEC = DetectorSpec(
    kinds=(Kind("connection_not_reused", "R3", "DETECTION.md §7.3"),),
    thresholds=(
        Threshold(
            "reuse_window_s",
            "s",
            "DETECTION.md §7.3 (T = 60 s); below nginx keepalive_timeout 75 s, Go IdleConnTimeout 90 s",
        ),
        Threshold(
            "parallel_window_ms",
            "ms",
            "RFC 8305 §5: the Connection Attempt Delay MUST NOT be less than 10 ms",
        ),
        Threshold(
            "nat_idle_s",
            "s",
            "deployed NAT / load-balancer idle timeouts (Azure LB 4 min, AWS NAT gateway 350 s)",
        ),
    ),
)
KINDS = SPEC.kind_names

# (b) window: a connection closed less than this before the next one to the same
# server could have been kept for it.  DETECTION.md §7.3 ("T = e.g. 60 s"); below
# nginx's default keepalive_timeout (75 s) and Go's http.Transport IdleConnTimeout
# (90 s), so an ordinary pool would still have held it.
REUSE_WINDOW_S = 60.0
# RFC 8305 §5: happy-eyeballs Connection Attempt Delay "MUST NOT be less than 10
# milliseconds" — attempts closer together than this are racing, not a pool miss.
PARALLEL_WINDOW_MS = 10.0
# An idle connection may have been silently dropped by a NAT or load balancer;
# RFC 5382 REQ-5 asks NATs for ≥ 2 h 4 min on established TCP, but deployed
# defaults are far shorter (Azure load balancer 4 min, AWS NAT gateway 350 s).
# Past 4 min of silence the client may have known better than to reuse it.
NAT_IDLE_S = 240.0
# A close within this long of the connection's last use is "right after" it (the
# closer's policy: Connection: close, a client closing after each request); a later one
# came from an idle timeout [judgement: above any response's tail, below every
# keep-alive timeout in use — nginx 75 s, Apache 5 s].
CLOSE_AFTER_USE_S = 1.0


def _groups(tl: list[ConnTimeline]) -> dict[tuple[Any, ...], list[ConnTimeline]]:
    out: dict[tuple[Any, ...], list[ConnTimeline]] = {}
    for t in tl:
        out.setdefault((t.client_ip, t.server_ip, t.server_port, t.sni), []).append(t)
    for v in out.values():
        v.sort(key=lambda t: (t.start_ts if t.start_ts is not None else t.first_ts, t.flow))
    return out


def detect(
    ctx: DetectContext,
    *,
    reuse_window_s: float = REUSE_WINDOW_S,
    parallel_window_ms: float = PARALLEL_WINDOW_MS,
    nat_idle_s: float = NAT_IDLE_S,
) -> list[Finding]:
    """One finding per avoidable new connection (flow = the new connection)."""
    tl = [t for t in timelines(ctx) if t.app_ts is not None]
    cancelled = _cancelled_http1(ctx, tl)
    out: list[Finding] = []
    for group in _groups(tl).values():
        if len(group) < 2:
            continue
        claimed: set[int] = set()  # connections already standing in for a new one
        for n in group:  # in start order
            if n.start_ts is None:
                continue  # mid-connection capture: not known to be new
            best = None
            for e in group:
                if e is n or e.flow in claimed:
                    continue
                why = _reusable(
                    ctx, e, n, reuse_window_s, parallel_window_ms, nat_idle_s, cancelled
                )
                if why is not None and (best is None or e.first_ts > best[0].first_ts):
                    best = (e, why)
            if best is None:
                continue
            f = _finding(ctx, n, *best)
            if f is not None:
                out.append(f)
                if best[1]["state"] != "open_h2":
                    # one HTTP/1.1 connection carries one exchange at a time: a second new
                    # connection opened alongside the first could not have used it too
                    claimed.add(best[0].flow)
    return out


# RFC 8701 GREASE values (0x?A?A) and the signalling suites (RFC 5746
# TLS_EMPTY_RENEGOTIATION_INFO_SCSV, RFC 7507 TLS_FALLBACK_SCSV) vary per connection or
# per retry of one client; they say nothing about its configuration.
_SIGNALLING = frozenset({0x00FF, 0x5600})


def _config(suites: tuple[int, ...]) -> frozenset[int]:
    return frozenset(
        c
        for c in suites
        if c not in _SIGNALLING and not ((c & 0x0F0F) == 0x0A0A and c >> 8 == c & 0xFF)
    )


def _same_client_config(e: ConnTimeline, n: ConnTimeline) -> bool:
    """E and N could come from one client pool: their ClientHellos offer the same cipher
    suites (GREASE and signalling values aside).  A client context offers one fixed list;
    different lists are different clients or configurations (a test harness trying one
    suite per connection, two programs on one host), whose connections a pool cannot
    share.  Unknown (no ClientHello seen, not TLS) counts as the same."""
    if not e.suites_offered or not n.suites_offered:
        return True
    return _config(e.suites_offered) == _config(n.suites_offered)


def _last_payload_before(
    ctx: DetectContext, e: ConnTimeline, t: int, *, client_only: bool = False
) -> tuple[int, int, int] | None:
    p = ctx.packets_of(e.flow)
    k = np.nonzero((p.length > 0) & (p.ts < t) & ((p.dir == 0) | (not client_only)))[0]
    if not k.shape[0]:
        return None
    i = int(k[-1])
    return int(p.frame[i]), int(p.ts[i]), int(p.dir[i])


def _reusable(
    ctx: DetectContext,
    e: ConnTimeline,
    n: ConnTimeline,
    window_s: float,
    parallel_ms: float,
    nat_s: float,
    cancelled: set[int],
) -> dict[str, Any] | None:
    """Why E could have carried N's requests (None when it could not); ``cancelled``: the
    connections closed to abandon an HTTP/1.1 response (:func:`_cancelled_http1`)."""
    t = n.start_ts
    assert t is not None
    e_start = e.start_ts if e.start_ts is not None else e.first_ts
    if e_start >= t:
        return None
    if e.alpn is not None and n.alpn is not None and e.alpn != n.alpn:
        return None  # a different application protocol (e.g. h2 vs http/1.1)
    if e.ready_ts is None or e.ready_ts >= t:
        return None  # E not usable yet when N started: parallel opening / racing
    if (t - e_start) / 1e6 < parallel_ms:
        return None
    if not _same_client_config(e, n):
        return None  # another client (configuration): no pool holds both
    if e.close_ts is not None and e.close_ts <= t:
        if e.flow in cancelled:
            return None  # HTTP/1.1's only way to cancel a response: not a missed reuse
        # E's last use: the client's last payload before the close began (the closing
        # alert, a GOAWAY or a keep-alive timeout's close are not use)
        last = _last_payload_before(ctx, e, e.close_ts, client_only=True)
        if last is None:
            last = _last_payload_before(ctx, e, e.close_ts)
        # a pool keeps a connection for so long after its last use (Go's IdleConnTimeout,
        # nginx's keepalive_timeout count idle time): measured from E's last payload,
        # not from its close — a connection closed after a long idle was not going to
        # be there for a request that came later still
        since_use_s = (t - (last[1] if last is not None else e.close_ts)) / 1e9
        if since_use_s > window_s:
            return None
        if e.close_how == "RST" and last is not None and (e.close_ts - last[1]) / 1e9 >= nat_s:
            return None  # reset after a long silence: a middlebox timeout, not a pool policy
        return {
            "state": "closed",
            "gap_s": (t - e.close_ts) / 1e9,
            "idle_before_close_s": (e.close_ts - last[1]) / 1e9 if last is not None else None,
            "since_use_s": since_use_s,
            "frame": e.close_frame,
            "ts": e.close_ts,
            "by": e.close_by,
            "how": e.close_how,
        }
    last = _last_payload_before(ctx, e, t)
    if last is None:
        return None
    if e.last_ts < t:
        # nothing of E after N started, and no close seen: the capture cannot say whether
        # E was still open (a filtered capture, or a connection that died silently)
        return None
    if (t - last[1]) / 1e9 >= nat_s:
        return None  # silent for longer than NATs keep state: may be dead
    h2 = (e.alpn or "") in ("h2", "h3")
    if not h2 and last[2] != 1:
        return None  # HTTP/1.1 (or unknown) with the client's request outstanding: busy
    if not h2 and _answer_went_on(ctx, e, t):
        return None  # the server's answer was still coming: busy (HTTP/1.1 parallelism)
    return {
        "state": "open_h2" if h2 else "open_idle",
        "idle_ms": (t - last[1]) / 1e6,
        "frame": last[0],
        "ts": last[1],
        "by": None,
        "how": None,
    }


def _cancelled_http1(ctx: DetectContext, tl: list[ConnTimeline]) -> set[int]:
    """The connections (flows) the client closed to abandon an HTTP/1.1 response: one had
    begun on it, never completed, and was still arriving at the close (its last byte seen
    after the close or within ``CLOSE_AFTER_USE_S`` before it).  A response whose tail the
    capture lost long before the close is not a cancellation; HTTP/2 and HTTP/3 cancel a
    stream, not the connection.  Built once per run."""
    r = ctx.requests
    if not len(r):
        return set()
    open_ = (
        r["response_ts_ns"].notna()
        & r["last_byte_ts_ns"].notna()
        & ~r["complete"].fillna(False).astype(bool)
    ).to_numpy(bool)
    last: dict[int, int] = {}
    flows, ends = r["flow"].to_numpy()[open_].tolist(), r["last_byte_ts_ns"][open_].tolist()
    for f, b in zip(flows, ends, strict=True):
        last[int(f)] = max(last.get(int(f), int(b)), int(b))
    slack = int(CLOSE_AFTER_USE_S * 1e9)
    return {
        e.flow
        for e in tl
        if e.close_by == "client"
        and e.close_ts is not None
        and (e.alpn or "") not in ("h2", "h3")
        and e.flow in last
        and last[e.flow] > e.close_ts - slack
    }


def _answer_went_on(ctx: DetectContext, e: ConnTimeline, t: int) -> bool:
    """E's server was still answering at ``t``: before the client's next payload on E (and
    before E's close), the server sent more, or the client acknowledged server bytes the
    capture point had not seen by ``t`` (segments it missed).  A pause inside a response is
    not an idle connection."""
    p = ctx.packets_of(e.flow)
    after = p.ts >= t
    nxt_c = np.nonzero(after & (p.dir == 0) & (p.length > 0))[0]
    stop = int(p.ts[nxt_c[0]]) if nxt_c.shape[0] else None
    if e.close_ts is not None and e.close_ts > t:
        stop = e.close_ts if stop is None else min(stop, e.close_ts)
    window = after if stop is None else after & (p.ts < stop)
    if np.any(window & (p.dir == 1) & (p.length > 0)):
        return True
    s_seen = p.end[(p.dir == 1) & ~after]
    seen = int(s_seen.max()) if s_seen.shape[0] else 0
    acks = p.ack[window & (p.dir == 0) & (p.ack >= 0)]
    return bool(acks.shape[0] and int(acks.max()) > seen)


def _finding(
    ctx: DetectContext, n: ConnTimeline, e: ConnTimeline, why: dict[str, Any]
) -> Finding | None:
    assert n.start_ts is not None and n.app_ts is not None
    cost_ns = n.app_ts - n.start_ts
    if cost_ns <= 0:
        return None  # nothing to save (e.g. 0-RTT data with the SYN not captured)
    measured = n.syn_ts is not None
    cost = cost_ns / 1e6
    proto = f"TCP + {n.version}" if n.tls and n.version else ("TCP + TLS" if n.tls else "TCP")
    sni = f" (SNI {n.sni})" if n.sni else ""
    server = f"{n.server_ip}:{n.server_port}{sni}"
    if why["state"] == "closed":
        closer = {"client": "the client", "server": "the server"}.get(why["by"] or "", "one side")
        idle = why.get("idle_before_close_s")
        after_idle = idle is not None and idle >= CLOSE_AFTER_USE_S
        when = (
            (f" after {idle:.1f} s idle" if after_idle else " right after its last exchange")
            if idle is not None
            else ""
        )
        prior = (
            f"{closer} had closed connection tcp.stream {e.stream} (client port {e.client_port}) "
            f"to the same server{when}, {why['gap_s'] * 1000:.1f} ms earlier ({why['how']}, "
            f"frame {why['frame']})"
        )
        gap = f"{why['since_use_s']:.1f} s"
        if why["by"] == "server" and after_idle:
            policy = (
                f"The server closed the previous connection after {idle:.1f} s idle (its "
                f"keep-alive timeout), {gap} before the client needed it again: raise the "
                "server's keep-alive timeout above the client's request interval."
            )
        elif why["by"] == "server":
            policy = (
                "The server closed the previous connection right after answering (e.g. "
                "'Connection: close' on every response): let it keep connections alive."
            )
        elif after_idle:
            policy = (
                f"The client closed the previous connection after {idle:.1f} s idle (its "
                f"pool's idle timeout), {gap} before it needed one again: keep idle "
                "connections longer than the interval between requests."
            )
        else:
            policy = (
                "The client closed the previous connection itself after its request: keep "
                "connections in a pool instead of closing them."
            )
        conf = 0.85
        role = "previous_close"
    else:
        state = "open (HTTP/2 multiplexes)" if why["state"] == "open_h2" else "open and idle"
        prior = (
            f"connection tcp.stream {e.stream} (client port {e.client_port}) to the same "
            f"server was {state} — its last payload, frame {why['frame']}, "
            f"{why['idle_ms']:.1f} ms before"
        )
        policy = (
            "An idle connection to the same server was available: send the request on it "
            "(one shared client / connection pool)."
        )
        conf = 0.75 if why["state"] == "open_h2" else 0.6
        role = "idle_connection"
    assert n.start_frame is not None and n.app_frame is not None
    ev = [
        Evidence(int(why["frame"]), role, int(why["ts"])),
        Evidence(n.start_frame, "new_connection" if measured else "client_hello", n.start_ts),
        Evidence(n.app_frame, "first_request", n.app_ts),
    ]
    checks = [
        f"same client, server and SNI ({n.client_ip} → {server})",
        f"not racing: the new connection started {(n.start_ts - (e.start_ts or e.first_ts)) / 1e6:.1f} ms "
        "after the previous one, after the previous one was already carrying requests",
        "both connections carried application data from the client",
    ]
    if why["state"] == "open_idle":
        checks.append(
            "not HTTP/1.1 parallelism: the open connection was idle (its last payload was the "
            "server's), not busy with a request"
        )
    if why["state"] != "closed":
        checks.append(
            "the previous connection was demonstrably still open: it has packets after the "
            "new one started"
        )
    if why["state"] == "closed" and why["how"] == "RST":
        checks.append("closed by RST after activity, not after a NAT-length silence")
    if not measured:
        checks.append("SYN not captured: cost from the ClientHello (TLS handshake only)")
    explanation = (
        f"The client {n.client_ip} opened a new connection to {server} (client port "
        f"{n.client_port}, frame {n.start_frame}) although {prior}. "
        + (
            f"Its {proto} handshake took {cost:.1f} ms before the first request byte "
            f"(frame {n.app_frame})"
            if measured
            else f"Its TLS handshake alone took {cost:.1f} ms before the first request byte "
            f"(frame {n.app_frame}; the SYN was not captured, so the TCP handshake is not "
            "counted)"
        )
        + ", and the new connection starts again from the initial congestion window."
    )
    remedy = (
        policy + " Reuse connections: one long-lived HTTP client or session object per origin "
        "(HTTP/1.1 keep-alive, no 'Connection: close'), and HTTP/2 to multiplex concurrent "
        "requests over one connection; if new connections are unavoidable, TLS session "
        "resumption (and TLS 1.3) cuts their handshake."
    )
    return Finding(
        kind="connection_not_reused",
        flow=n.flow,
        dir="c2s",  # the client's doing: its SYN opens the avoidable connection
        t_start_ns=n.start_ts,
        t_end_ns=n.app_ts,
        cost_ms=cost,
        cost_method="measured_interval" if measured else "lower_bound",
        evidence=ev,
        vantage=ctx.vantage(n.flow),
        confidence=conf,
        checks=checks,
        explanation=explanation,
        remedy=remedy,
        display_filter=(
            f"tcp.stream in {{{e.stream}, {n.stream}}} && (tcp.flags.syn == 1 || "
            "tcp.flags.fin == 1 || tcp.flags.reset == 1 || tls.handshake.type == 1 || "
            "tls.alert_message)"
        ),
        details={
            "previous_flow": e.flow,
            "previous_state": why["state"],
            "previous_closed_by": why.get("by"),
            "previous_close": why.get("how"),
            "gap_ms": why["gap_s"] * 1000 if "gap_s" in why else None,
            "idle_before_close_ms": (
                None
                if why.get("idle_before_close_s") is None
                else why["idle_before_close_s"] * 1000
            ),
            "since_last_use_ms": why["since_use_s"] * 1000 if "since_use_s" in why else None,
            "idle_ms": why.get("idle_ms"),
            "handshake": proto,
            "sni": n.sni,
            "alpn": n.alpn,
            "frames_filter": frame_filter([x.frame for x in ev]),
        },
    )

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
  handshakes) are neither N nor E.
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
    out: list[Finding] = []
    for group in _groups(tl).values():
        if len(group) < 2:
            continue
        for n in group:
            if n.start_ts is None:
                continue  # mid-connection capture: not known to be new
            best = None
            for e in group:
                if e is n:
                    continue
                why = _reusable(ctx, e, n, reuse_window_s, parallel_window_ms, nat_idle_s)
                if why is not None and (best is None or e.first_ts > best[0].first_ts):
                    best = (e, why)
            if best is None:
                continue
            f = _finding(ctx, n, *best)
            if f is not None:
                out.append(f)
    return out


def _last_payload_before(
    ctx: DetectContext, e: ConnTimeline, t: int
) -> tuple[int, int, int] | None:
    p = ctx.packets_of(e.flow)
    k = np.nonzero((p.length > 0) & (p.ts < t))[0]
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
) -> dict[str, Any] | None:
    """Why E could have carried N's requests (None when it could not)."""
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
    last = _last_payload_before(ctx, e, t)
    if e.close_ts is not None and e.close_ts <= t:
        gap_s = (t - e.close_ts) / 1e9
        if gap_s > window_s:
            return None
        if e.close_how == "RST" and last is not None and (e.close_ts - last[1]) / 1e9 >= nat_s:
            return None  # reset after a long silence: a middlebox timeout, not a pool policy
        return {
            "state": "closed",
            "gap_s": gap_s,
            "frame": e.close_frame,
            "ts": e.close_ts,
            "by": e.close_by,
            "how": e.close_how,
        }
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
    return {
        "state": "open_h2" if h2 else "open_idle",
        "idle_ms": (t - last[1]) / 1e6,
        "frame": last[0],
        "ts": last[1],
        "by": None,
        "how": None,
    }


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
        prior = (
            f"{closer} had closed connection tcp.stream {e.stream} (client port {e.client_port}) "
            f"to the same server {why['gap_s'] * 1000:.1f} ms earlier ({why['how']}, frame "
            f"{why['frame']})"
        )
        if why["by"] == "server":
            policy = (
                "The server closed the previous connection (its keep-alive timeout or "
                "'Connection: close'): raise the server's keep-alive timeout above the "
                "client's request interval, and keep the client's pool."
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
            "idle_ms": why.get("idle_ms"),
            "handshake": proto,
            "sni": n.sni,
            "alpn": n.alpn,
            "frames_filter": frame_filter([x.frame for x in ev]),
        },
    )

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

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..net.decode import ACK, FIN, RST, SYN
from ..schema import is_missing as _na
from .base import Evidence, Finding, frame_filter
from .constants import ContentType
from .context import DetectContext

KINDS = ("connection_not_reused",)

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


@dataclass
class ConnTimeline:
    """When one connection started, became usable, was used, and ended (capture clock)."""

    flow: int
    stream: int
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    sni: str | None
    alpn: str | None
    version: str | None
    tls: bool
    syn_frame: int | None
    syn_ts: int | None
    ch_frame: int | None  # ClientHello at stream offset 0
    ch_ts: int | None
    app_frame: int | None  # first application byte from the client
    app_ts: int | None
    cfin_ts: int | None  # the client's Finished (TLS handshake done at the client)
    sess_frame: int | None  # first server record after the client's Finished
    sess_ts: int | None
    close_ts: int | None
    close_frame: int | None
    close_by: str | None  # "client" | "server"
    close_how: str | None  # "FIN" | "RST" | "TLS close_notify/alert"
    first_ts: int
    last_ts: int

    @property
    def start_ts(self) -> int | None:
        return self.syn_ts if self.syn_ts is not None else self.ch_ts

    @property
    def start_frame(self) -> int | None:
        return self.syn_frame if self.syn_frame is not None else self.ch_frame

    @property
    def ready_ts(self) -> int | None:
        """When the client could send a request on it (its first application byte)."""
        return self.app_ts


def _str(v: Any) -> str | None:
    return None if _na(v) else str(v)


def timeline(ctx: DetectContext, f: int) -> ConnTimeline:
    """The connection's timeline from its packets and TLS records (built once per
    flow and trace: reuse and resumption share it, read-only)."""
    return ctx.memo(("reuse.timeline", f), lambda: _timeline(ctx, f))  # type: ignore[no-any-return]


def _timeline(ctx: DetectContext, f: int) -> ConnTimeline:
    r = ctx.flow(f)
    p = ctx.packets_of(f)
    tls = ctx.tls_row(f)
    syn = np.nonzero((p.dir == 0) & ((p.flags & SYN) != 0) & ((p.flags & ACK) == 0))[0]
    syn_frame = int(p.frame[syn[0]]) if syn.shape[0] else None
    syn_ts = int(p.ts[syn[0]]) if syn.shape[0] else None
    c = ctx.rec_arrays(f, 0)
    s = ctx.rec_arrays(f, 1)
    ch_frame = ch_ts = app_frame = app_ts = cfin_ts = sess_frame = sess_ts = None
    close: list[tuple[int, int, str, str]] = []  # (ts, frame, by, how)
    version = _str(tls.version) if tls is not None else None
    is_tls = tls is not None and c["flow"].shape[0] > 0
    if is_tls:
        hs = c["handshake"]
        off = c["offset"]
        ch = np.nonzero(np.char.find(hs.astype(str), "ClientHello") >= 0)[0]
        if ch.shape[0] and off[ch[0]] == 0:
            ch_frame = int(c["first_frame"][ch[0]])
            ch_ts = int(c["first_ts_ns"][ch[0]])
        app = _client_app_record(c, version)
        if app is not None:
            app_frame = int(c["first_frame"][app])
            app_ts = int(c["first_ts_ns"][app])
        fin = _client_finished(c, version)
        if fin is not None:
            cfin_ts = int(c["last_ts_ns"][fin])
            later = np.nonzero(s["first_ts_ns"] > cfin_ts)[0]
            if later.shape[0]:
                sess_frame = int(s["first_frame"][later[0]])
                sess_ts = int(s["first_ts_ns"][later[0]])
        for rec, by in ((c, "client"), (s, "server")):
            if not rec["flow"].shape[0]:
                continue
            al = np.nonzero(
                (rec["content_type"] == ContentType.ALERT)
                | (rec["outer_content_type"] == ContentType.ALERT)
            )[0]
            if al.shape[0]:
                k = int(al[0])
                close.append(
                    (
                        int(rec["first_ts_ns"][k]),
                        int(rec["first_frame"][k]),
                        by,
                        "TLS close_notify/alert",
                    )
                )
    else:
        seg = ctx.segments_of(f, 0)
        if len(seg):
            app_frame = int(seg["frame"].iloc[0])
            app_ts = int(seg["ts_ns"].iloc[0])
    for mask, how in (((p.flags & FIN) != 0, "FIN"), ((p.flags & RST) != 0, "RST")):
        hit = np.nonzero(mask)[0]
        if hit.shape[0]:
            i = int(hit[0])
            close.append((int(p.ts[i]), int(p.frame[i]), ("client", "server")[int(p.dir[i])], how))
    close.sort()
    return ConnTimeline(
        flow=f,
        stream=int(r.stream),
        client_ip=str(r.client_ip),
        client_port=int(r.client_port),
        server_ip=str(r.server_ip),
        server_port=int(r.server_port),
        sni=_str(tls.sni) if tls is not None else None,
        alpn=_str(tls.alpn) if tls is not None else None,
        version=version,
        tls=is_tls,
        syn_frame=syn_frame,
        syn_ts=syn_ts,
        ch_frame=ch_frame,
        ch_ts=ch_ts,
        app_frame=app_frame,
        app_ts=app_ts,
        cfin_ts=cfin_ts,
        sess_frame=sess_frame,
        sess_ts=sess_ts,
        close_ts=close[0][0] if close else None,
        close_frame=close[0][1] if close else None,
        close_by=close[0][2] if close else None,
        close_how=close[0][3] if close else None,
        first_ts=int(r.first_ts_ns),
        last_ts=int(r.last_ts_ns),
    )


def _client_app_record(c: dict[str, np.ndarray], version: str | None) -> int | None:
    """Row (position) of the client's first application-data record, None if it sent none
    (``c``: the client's records as ``DetectContext.rec_arrays`` gives them)."""
    ct = c["content_type"]
    outer = c["outer_content_type"]
    status = c["status"]
    early = c["early_data"].astype(bool)
    dec = status == "decrypted"
    if dec.any():
        k = np.nonzero(dec & (ct == ContentType.APPLICATION_DATA))[0]
        return int(k[0]) if k.shape[0] else None
    prot = np.nonzero((outer == ContentType.APPLICATION_DATA) & ~early)[0]
    first_early = np.nonzero((outer == ContentType.APPLICATION_DATA) & early)[0]
    if version == "TLS 1.3":
        # without keys: the first protected record is the client's Finished flight
        cand = prot[1:2]
    else:
        cand = prot[:1]
    opts = [int(x) for x in (*cand.tolist(), *first_early[:1].tolist())]
    return min(opts) if opts else None


def _client_finished(c: dict[str, np.ndarray], version: str | None) -> int | None:
    """Row of the client's Finished record (first protected non-early handshake record)."""
    outer = c["outer_content_type"]
    early = c["early_data"].astype(bool)
    if version == "TLS 1.3":
        k = np.nonzero((outer == ContentType.APPLICATION_DATA) & ~early)[0]
        return int(k[0]) if k.shape[0] else None
    ccs = np.nonzero(outer == ContentType.CHANGE_CIPHER_SPEC)[0]
    if not ccs.shape[0] or ccs[0] + 1 >= outer.shape[0]:
        return None
    return int(ccs[0] + 1)


def timelines(ctx: DetectContext) -> list[ConnTimeline]:
    return [timeline(ctx, f) for f in ctx.tcp_flows()]


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
            f"tcp.stream in {{{e.stream} {n.stream}}} && (tcp.flags.syn == 1 || "
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

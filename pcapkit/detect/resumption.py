"""TLS session resumption missing (R4, DETECTION.md §7.4).

Mechanism: a client that kept the session of an earlier connection (TLS 1.2
session ID, RFC 5246 §7.4.1.2, or session ticket, RFC 5077; TLS 1.3 PSK from a
NewSessionTicket, RFC 8446 §2.2) can resume it: the server skips the certificate,
the signature and — in TLS 1.2 — a whole round trip (abbreviated handshake:
ServerHello, ChangeCipherSpec, Finished).  A full handshake on a repeat
connection pays all of it again.

Signature (visible without keys): a connection N to the same (client IP, server
IP, server port, SNI) as an earlier connection E whose handshake had completed
(and whose server had spoken after the client's Finished, when tickets arrive)
before N's ClientHello, within ``session_lifetime_s`` — and N's handshake was
full (the tls table's ``resumption_accepted`` is false: TLS 1.2 ServerHello did
not echo the offered session, TLS 1.3 ServerHello has no ``pre_shared_key``).
Which side is to blame, from N's ClientHello:

* **not offered** — empty session ID, no ticket, no ``pre_shared_key``: the client
  has no session cache (or a fresh TLS context per connection);
* **offered but rejected** — the client offered a session/ticket/PSK and the
  server ran a full handshake anyway: ticket keys rotated or not shared across
  load-balanced servers, no shared session cache, tickets disabled.

Cost (§7.4): TLS ≤ 1.2 — one round trip per full handshake: the client's second flight
(ClientKeyExchange) → the server's Finished as the client lived it, i.e. seen at
the capture point plus the client leg d_C (``measured_interval``; without the TCP
handshake the interval at P alone is a ``lower_bound``, and without the records
the handshake RTT is the ``estimate``);
TLS 1.3 — no extra round trip (resumption keeps 1-RTT) unless the server's
certificate flight overflowed the initial window (RFC 6928: 10 segments), so the
cost is 0 ms plus the certificate bytes and signature CPU, reported as ``info``.

``dir`` names the side at fault: ``c2s`` the client did not offer, ``s2c`` the server
refused what was offered.

Counter-checks: the first connection to a server is never flagged; a connection
started before the earlier one's handshake completed (parallel opening) could not
have resumed; different SNI never groups; connections whose handshake was not
seen (no ServerHello) are not judged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..schema import is_missing as _na
from ..sessions.tls import suite_name
from .base import Evidence, Finding, frame_filter
from .constants import IW_SEGMENTS, ContentType
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import ConnTimeline, timeline

SPEC = DetectorSpec(
    kinds=(Kind("tls_resumption_missing", "R4", "DETECTION.md §7.4"),),
    thresholds=(
        Threshold(
            "session_lifetime_s",
            "s",
            "OpenSSL's default session timeout, SSL_CTX_set_timeout(3): 300 s",
        ),
        Threshold("initial_window_segments", "segments", "RFC 6928 initial window", minimum=1),
    ),
)
KINDS = SPEC.kind_names

# OpenSSL's documented default session timeout (SSL_CTX_set_timeout(3): 300 s for
# every protocol) — the shortest lifetime a stock server gives a session or ticket;
# RFC 8446 §4.6.1 allows tickets up to 7 days.  Within 300 s resumption should work
# against any default-configured server.
SESSION_LIFETIME_S = 300.0
# A TLS 1.3 server flight larger than the initial congestion window (RFC 6928:
# constants.IW_SEGMENTS) needs a second round trip that resumption would have avoided.

_TLS12_OR_OLDER = ("SSL 3.0", "TLS 1.0", "TLS 1.1", "TLS 1.2")


def _bool(v: Any) -> bool:
    return False if _na(v) else bool(v)


def detect(
    ctx: DetectContext,
    *,
    session_lifetime_s: float = SESSION_LIFETIME_S,
    initial_window_segments: int = IW_SEGMENTS,
) -> list[Finding]:
    """One finding per repeat connection that did a full handshake (flow = that connection)."""
    conns: list[tuple[ConnTimeline, Any]] = []
    for f in ctx.tcp_flows():
        row = ctx.tls_row(f)
        if row is None or _na(row.version):
            continue  # no ServerHello seen: the handshake cannot be judged
        conns.append((timeline(ctx, f), row))
    groups: dict[tuple[Any, ...], list[tuple[ConnTimeline, Any]]] = {}
    for t, row in conns:
        groups.setdefault((t.client_ip, t.server_ip, t.server_port, t.sni), []).append((t, row))
    out: list[Finding] = []
    for group in groups.values():
        if len(group) < 2:
            continue
        for n, nrow in group:
            if _bool(nrow.resumption_accepted) or n.ch_ts is None:
                continue
            prev = [
                (e, erow)
                for e, erow in group
                if e is not n
                and _resumable_by(e, n)
                and _bool(erow.handshake_complete)
                and _session_ts(e) is not None
                and _session_ts(e) < n.ch_ts  # type: ignore[operator]
                and (n.ch_ts - _session_ts(e)) / 1e9 <= session_lifetime_s  # type: ignore[operator]
            ]
            if not prev:
                continue
            e, erow = max(prev, key=lambda x: _session_ts(x[0]) or 0)
            out.append(_finding(ctx, n, nrow, e, erow, initial_window_segments))
    return out


def _resumable_by(e: ConnTimeline, n: ConnTimeline) -> bool:
    """N's ClientHello could resume E's session at all.  RFC 5246 §7.4.1.2: a client
    offering a session "MUST include at least the cipher_suite from that session"; RFC 8446
    §4.2.11: a PSK is usable only with a cipher suite of its hash.  A ClientHello that offers
    neither (a test harness trying one suite per connection, another client) cannot
    resume E, whatever its cache holds.  Unknown lists count as compatible."""
    if not n.suites_offered or e.cipher is None:
        return True
    names = {suite_name(c) for c in n.suites_offered}
    if (e.version or "").startswith("TLS 1.3"):
        hash_of = e.cipher.rsplit("_", 1)[-1]
        return any(x is not None and x.rsplit("_", 1)[-1] == hash_of for x in names)
    return e.cipher in names


def _session_ts(e: ConnTimeline) -> int | None:
    """When E's client could hold a resumable session: the server's first record after
    the client's Finished (TLS 1.3 NewSessionTicket / TLS 1.2 ticket or Finished)."""
    return e.sess_ts if e.sess_ts is not None else e.cfin_ts


def _server_flight(ctx: DetectContext, n: ConnTimeline) -> tuple[int, int | None]:
    """(bytes of the server's handshake flight, frame of its Certificate record if visible)."""
    s = ctx.records_of(n.flow, 1)
    if not len(s):
        return 0, None
    cut = n.cfin_ts
    first = s["first_ts_ns"].to_numpy(np.int64)
    sel = first < cut if cut is not None else np.ones(len(s), bool)
    nbytes = int(s["length"].to_numpy(np.int64)[sel].sum())
    hs = s["handshake"].astype(str).to_numpy()
    cert = np.nonzero(np.char.find(hs.astype(str), "Certificate") >= 0)[0]
    cert = np.array([k for k in cert.tolist() if "CertificateVerify" != hs[k]], np.int64)
    return nbytes, (int(s["first_frame"].iloc[int(cert[0])]) if cert.shape[0] else None)


def _second_round_trip(ctx: DetectContext, n: ConnTimeline) -> int | None:
    """TLS ≤ 1.2 full handshake: client's second flight → server's Finished, at P (ns)."""
    c = ctx.records_of(n.flow, 0)
    s = ctx.records_of(n.flow, 1)
    if not len(c) or not len(s):
        return None
    hs = c["handshake"].astype(str).to_numpy()
    cke = np.nonzero(np.char.find(hs.astype(str), "ClientKeyExchange") >= 0)[0]
    if not cke.shape[0]:
        return None
    t0 = int(c["first_ts_ns"].iloc[int(cke[0])])
    outer = s["outer_content_type"].to_numpy(np.int64)
    ccs = np.nonzero(outer == ContentType.CHANGE_CIPHER_SPEC.value)[0]
    if not ccs.shape[0] or ccs[0] + 1 >= len(s):
        return None
    t1 = int(s["last_ts_ns"].iloc[int(ccs[0]) + 1])
    return t1 - t0 if t1 > t0 else None


def _finding(
    ctx: DetectContext,
    n: ConnTimeline,
    nrow: Any,
    e: ConnTimeline,
    erow: Any,
    iw_segments: int,
) -> Finding:
    offered = _bool(nrow.resumption_offered)
    kind = None if _na(nrow.resumption_kind) else str(nrow.resumption_kind)
    version = n.version or "TLS"
    tls12 = version in _TLS12_OR_OLDER
    rtt = ctx.rtt_ns(n.flow)
    flight, cert_frame = _server_flight(ctx, n)
    mss = ctx.eff_mss(n.flow) or 1448
    checks = [
        f"repeat connection: same client, server and SNI as tcp.stream {e.stream}, whose "
        "handshake had completed before this ClientHello",
        f"full handshake: the server did not resume ({'no pre_shared_key in ServerHello' if not tls12 else 'ServerHello did not echo the session'})",
    ]
    severity = None
    extra_rtts = 0
    if tls12:
        extra_rtts = 1
        rt = _second_round_trip(ctx, n)
        d_c, _ = ctx.legs_ns(n.flow)
        if rt is not None and d_c is not None:
            # the round trip the abbreviated handshake skips, as the client lived it: seen
            # at P from the client's second flight to the server's Finished, plus the leg
            # between P and the client (§1.1: ≈ 0 at a client-side capture)
            cost: float | None = (rt + d_c) / 1e6
            method = "measured_interval"
            price = (
                f"one round trip, {cost:.1f} ms here (client key exchange → server Finished, "
                "which an abbreviated handshake skips)"
            )
        elif rtt is not None:
            cost = rtt / 1e6
            method = "estimate"
            price = f"one round trip, ≈ {cost:.1f} ms (the connection's handshake RTT)"
        else:
            cost = None if rt is None else rt / 1e6
            method = "lower_bound"
            price = "one round trip" + (
                "" if cost is None else f", at least {cost:.1f} ms as seen at this capture point"
            )
    else:
        if flight > iw_segments * mss and rtt is not None:
            extra_rtts = 1
            cost = rtt / 1e6
            method = "estimate"
            price = (
                f"one round trip (≈ {cost:.1f} ms): the {flight}-byte server flight exceeded the "
                f"initial window of {iw_segments} segments"
            )
        else:
            cost = 0.0
            method = "estimate"
            severity = "info"
            price = (
                "no extra round trip in TLS 1.3, but the server sends its certificate flight "
                f"again ({flight} bytes of handshake) and both sides sign and verify again"
            )
            checks.append(
                f"TLS 1.3: the server's {flight}-byte flight fit the initial window "
                f"({iw_segments} × {mss} B): no round trip to save"
            )
    gap_s = (n.ch_ts - (_session_ts(e) or 0)) / 1e9  # type: ignore[operator]
    if offered:
        who = (
            f"the client offered to resume ({kind or 'session'}) but the server ran a full "
            "handshake anyway"
        )
        remedy = (
            "The server rejected the offered session: share session-ticket keys across all "
            "servers behind the load balancer (nginx ssl_session_ticket_key, HAProxy "
            "tls-ticket-keys) or use a shared session cache, rotate ticket keys no faster than "
            "the clients reconnect, and do not disable tickets (SSL_OP_NO_TICKET) or give "
            "sessions a lifetime shorter than the reconnect interval."
        )
        checks.append(f"resumption offered ({kind or 'session'}) and rejected by the server")
    else:
        who = (
            "the client did not offer to resume (no session ID, ticket or pre_shared_key in "
            "its ClientHello)"
        )
        remedy = (
            "The client did not offer resumption: enable its TLS session cache — reuse one TLS "
            "context/connector across connections and keep sessions (Python ssl: pass "
            "session=previous.session; Go: tls.Config.ClientSessionCache = "
            "tls.NewLRUClientSessionCache; curl: drop --no-sessionid; OpenSSL: "
            "SSL_set_session / SSL_CTX_sess_set_new_cb), and make sure the server issues "
            "tickets. Better still, reuse the connection itself."
        )
        checks.append("resumption not offered in the ClientHello (a client-side cause)")
    sni = f" (SNI {n.sni})" if n.sni else ""
    explanation = (
        f"Connection tcp.stream {n.stream} (client port {n.client_port}) to "
        f"{n.server_ip}:{n.server_port}{sni} did a full {version} handshake (ClientHello frame "
        f"{n.ch_frame}) although tcp.stream {e.stream} had established a session with the same "
        f"server {gap_s * 1000:.1f} ms earlier: {who}. Cost: {price}."
    )
    ev = [Evidence(int(e.sess_frame or e.ch_frame or 0), "previous_session", _session_ts(e))]
    if not ev[0].frame:
        ev = []
    ev.append(Evidence(int(n.ch_frame), "client_hello", n.ch_ts))  # type: ignore[arg-type]
    if cert_frame is not None:
        ev.append(Evidence(cert_frame, "certificate", None))
    return Finding(
        kind="tls_resumption_missing",
        flow=n.flow,
        # the side at fault: c2s = the client offered nothing, s2c = the server refused
        dir="s2c" if offered else "c2s",
        t_start_ns=int(n.ch_ts),  # type: ignore[arg-type]
        t_end_ns=int(n.cfin_ts if n.cfin_ts is not None else n.ch_ts),  # type: ignore[arg-type]
        cost_ms=cost,
        cost_method=method,
        evidence=ev,
        vantage=ctx.vantage(n.flow),
        confidence=0.9 if tls12 or offered else 0.8,
        checks=checks,
        explanation=explanation,
        remedy=remedy,
        display_filter=(
            f"tcp.stream in {{{e.stream}, {n.stream}}} && tls.handshake.type in {{1, 2, 4, 11}}"
        ),
        severity=severity,
        details={
            "previous_flow": e.flow,
            "offered": offered,
            "offered_kind": kind,
            "cause": "server_rejected" if offered else "client_not_offered",
            "version": version,
            "extra_round_trips": extra_rtts,
            "server_flight_bytes": flight,
            "cert_chain_len": None if _na(nrow.cert_chain_len) else int(nrow.cert_chain_len),
            "since_previous_session_ms": gap_s * 1000,
            "frames_filter": frame_filter([x.frame for x in ev]),
        },
    )

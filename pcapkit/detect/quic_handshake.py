"""QUIC handshakes that took extra round trips (issue 7; DETECTION.md §7.5).

``quic_handshake_extra_rtt`` — each of these costs the client one more round trip
before its first request can leave:

* **Retry** (RFC 9000 §8.1.2): the server answers the first Initial with a Retry
  carrying a token; the client sends its Initial again with the token.
* **Version Negotiation** (RFC 9000 §6): the server does not speak the client's
  version; the client starts over with another.
* **HelloRetryRequest** (RFC 8446 §4.1.4): the client's key_share groups do not
  include one the server accepts; the client sends a second ClientHello.

Cost (measured_interval at the capture point): from the client's first Initial /
ClientHello to the one it had to send again.  At a client-side capture this is the
round trip plus the client's turnaround; elsewhere it is the same interval shifted
(both packets travel client → server), so the vantage does not bias it.

The anti-amplification stall (RFC 9000 §8.1: a server may send only 3× what it
received before the address is validated) is not detected yet: it needs the
server's unsent flight, which a capture does not show directly.
"""

from __future__ import annotations

from typing import Any

from .base import Evidence, Finding, frame_filter
from .context import DetectContext

KINDS = ("quic_handshake_extra_rtt",)

_WHY = {
    "retry": (
        "the server answered the client's first Initial with a Retry (address "
        "validation, RFC 9000 §8.1.2), so the client had to send its Initial again "
        "with the token",
        "Send Retry only under load or attack (most servers can validate addresses "
        "lazily), and issue NEW_TOKEN frames so returning clients skip it.",
    ),
    "version_negotiation": (
        "the server does not support the client's QUIC version and sent Version "
        "Negotiation, so the client started over with another version",
        "Let the client start with a version the server supports (advertise it in "
        "Alt-Svc / the HTTPS DNS record), or enable that version on the server.",
    ),
    "hello_retry_request": (
        "none of the client's key_share groups suited the server, which sent a "
        "HelloRetryRequest, so the client built a second ClientHello",
        "Offer the server's preferred group (usually x25519) in the client's first "
        "key_share, or let the server accept the client's group.",
    ),
}


def _first(items: list[Any], pred: Any) -> Any:
    return next((x for x in items if pred(x)), None)


def detect(ctx: DetectContext) -> list[Finding]:
    out: list[Finding] = []
    for qf in getattr(ctx, "quic", None) or []:
        conn = qf.conn
        pkts = conn.packets
        first = _first(
            pkts,
            lambda p: (
                p.direction == "c2s" and str(getattr(p.packet_type, "value", "")) == "initial"
            ),
        )
        if first is None:
            continue
        episodes: list[tuple[str, Any, Any, Any]] = []
        for cause, ptype in (("retry", "retry"), ("version_negotiation", "version_negotiation")):
            trig = _first(
                pkts,
                lambda p, t=ptype: (
                    p.direction == "s2c" and str(getattr(p.packet_type, "value", "")) == t
                ),
            )
            if trig is None:
                continue
            again = _first(
                pkts,
                lambda p, t=trig: (
                    p.direction == "c2s"
                    and p.frame > t.frame
                    and str(getattr(p.packet_type, "value", "")) == "initial"
                ),
            )
            if again is not None:
                episodes.append((cause, first, trig, again))
        msgs = conn.tls_messages
        hrr = _first(msgs, lambda m: m.name == "HELLO_RETRY_REQUEST")
        if hrr is not None:
            ch1 = _first(msgs, lambda m: m.name == "CLIENT_HELLO" and m.direction == "c2s")
            ch2 = _first(
                msgs,
                lambda m, h=hrr: (
                    m.name == "CLIENT_HELLO" and m.direction == "c2s" and m.frame > h.frame
                ),
            )
            if ch1 is not None and ch2 is not None:
                # after a Retry/VN the ClientHello went out again: count from that resend
                resent = [e[3] for e in episodes if ch1.frame <= e[3].frame < hrr.frame]
                start = max(resent, key=lambda p: p.frame) if resent else ch1
                episodes.append(("hello_retry_request", start, hrr, ch2))
        for cause, a, trig, b in episodes:
            why, remedy = _WHY[cause]
            cost = (b.ts_ns - a.ts_ns) / 1e6
            d = qf.flow_dir("c2s")
            ev = [
                Evidence(
                    a.frame,
                    "first Initial" if cause != "hello_retry_request" else "first ClientHello",
                    a.ts_ns,
                ),
                Evidence(trig.frame, cause.replace("_", " "), trig.ts_ns),
                Evidence(b.frame, "client starts again", b.ts_ns),
            ]
            out.append(
                Finding(
                    kind="quic_handshake_extra_rtt",
                    flow=qf.flow,
                    dir=d,
                    t_start_ns=int(a.ts_ns),
                    t_end_ns=int(b.ts_ns),
                    cost_ms=cost,
                    cost_method="measured_interval",
                    evidence=ev,
                    explanation=(
                        f"The QUIC handshake of flow {qf.flow}"
                        + (f" ({conn.sni})" if conn.sni else "")
                        + f" took an extra round trip: {why} — frames {a.frame} → "
                        f"{trig.frame} → {b.frame}, {cost:.1f} ms before the handshake "
                        "could really start."
                    ),
                    remedy=remedy,
                    display_filter=frame_filter([e.frame for e in ev]),
                    confidence=0.9,
                    checks=["the client sent its first flight again after the server's answer"],
                    details={"cause": cause, "version": conn.version_name},
                )
            )
    return out

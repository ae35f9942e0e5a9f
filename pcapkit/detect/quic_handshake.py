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

``zero_rtt_unused`` (DETECTION.md §7.6): a resumed connection (the server accepted
the client's pre-shared key) whose first request — idempotent, so safe to replay —
went out only after the handshake instead of in 0-RTT packets with the ClientHello,
or whose early data the server rejected.  Cost (measured_interval): from the
client's first Initial to the first packet carrying the request — the round trip
0-RTT would have saved.

* **Anti-amplification limit** (RFC 9000 §8.1): until the client's address is
  validated the server may send at most 3 × the bytes it received.  A handshake
  flight larger than that (big certificate chains) stops at the limit and waits for
  the client's next datagram.  Signature: the server's datagrams before validation
  add up to between ``AMPLIFICATION_FILL`` of 3 × the client's bytes and 3 × (a
  server past the limit was not held by it), then the server pauses ≥
  ``MIN_PAUSE_MS`` and resumes only after a client datagram; the cost is that pause
  (both ends of it are server datagrams: the same at every vantage).  Where the
  server's Handshake packets decrypt, the flight must really have been cut: its
  Finished not yet sent before the pause, and the datagram after it carrying
  Handshake CRYPTO bytes not sent before (an ACK or a retransmission after a
  complete flight is no stop); without keys that cannot be seen, and the finding says
  so with a lower confidence.  The remedy suggests certificate compression only when
  the server is not already using it (a CompressedCertificate, RFC 8879, seen with
  keys) and the client offered it.

Reads the declared tables only: ``quic_packets`` (types, directions, datagram sizes),
``quic_tls`` (ClientHello / ServerHello / EncryptedExtensions and their
pre_shared_key / early_data extensions, HelloRetryRequest), ``quic_frames`` (the
client's first request STREAM frame), ``quic_handshake`` (the client's first
Initial), ``quic`` (roles, SNI, version) and ``requests`` (the request's method).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .quic_rows import CRYPTO, QuicConn, connections
from .spec import DetectorSpec, Kind

SPEC = DetectorSpec(
    kinds=(
        Kind("quic_handshake_extra_rtt", "Q5", "DETECTION.md §7.5; RFC 9000 §8.1"),
        Kind("zero_rtt_unused", "Q4", "DETECTION.md §7.6; RFC 9001 §4.6"),
    ),
)
KINDS = SPEC.kind_names

# RFC 9000 §8.1: "an endpoint MUST limit the amount of data it sends to the
# unvalidated address to three times the amount of data received from that address"
AMPLIFICATION_FACTOR = 3
# The sender stops within one datagram of the limit; 90 % allows for padding accounting.
AMPLIFICATION_FILL = 0.9
# A pause shorter than this is pacing within the flight, not a wait for budget.
MIN_PAUSE_MS = 1.0
# RFC 8879: the compress_certificate extension (27) and the CompressedCertificate
# handshake message (25, named by the dissector)
EXT_COMPRESS_CERTIFICATE = 27
COMPRESSED_CERTIFICATE = "COMPRESSED_CERTIFICATE"

# RFC 9110 §9.2.2: requests a client may safely replay — the only ones 0-RTT suits
# (RFC 8470, RFC 9114 §4.2.1 / RFC 8446 §8 replay caveats)
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})

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
    "anti_amplification": (
        "its first flight was larger than the 3 × budget a server has before it has "
        "validated the client's address (RFC 9000 §8.1), so it stopped until the client's "
        "next datagram raised the budget",
        "Make the server's first flight fit 3 × 1200 bytes: a shorter certificate chain "
        "(ECDSA keys, no cross-signed extras, fewer names){compression}; clients can pad "
        "their Initial to more than 1200 bytes.",
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


class _Datagram:
    __slots__ = ("frame", "ts_ns", "direction", "size", "types")

    def __init__(self, frame: int, ts_ns: int, direction: str, size: int) -> None:
        self.frame, self.ts_ns, self.direction, self.size = frame, ts_ns, direction, size
        self.types: set[str] = set()


def _amplification(qc: QuicConn) -> tuple[str, Any, Any, Any] | None:
    """The server's pause at the anti-amplification limit, as (cause, a, trigger, b)."""
    # validated once the server has a Handshake packet from the client (RFC 9000 §8.1):
    # without one nothing below can be found.  With one (frame F), the walk ends by the
    # server's first datagram after F at the latest: only datagrams up to it matter.
    hs = [p.frame for p in qc.key_packets if p.qdir == "c2s" and p.packet_type == "handshake"]
    if not hs:
        return None
    pk = qc.pk
    f_hs = min(hs)
    later = pk.frame[~pk.c2s & (pk.frame > f_hs)]
    upto = np.nonzero(pk.frame <= (int(later.min()) if later.shape[0] else f_hs))[0]
    grams: dict[int, _Datagram] = {}
    for fr, ts, c2s, size, ptype in zip(
        pk.frame[upto].tolist(),
        pk.ts_ns[upto].tolist(),
        pk.c2s[upto].tolist(),
        pk.datagram_bytes[upto].tolist(),
        pk.packet_types(upto),
        strict=True,
    ):
        g = grams.get(fr)
        if g is None:
            g = grams[fr] = _Datagram(fr, ts, "c2s" if c2s else "s2c", size)
        g.types.add(ptype or "")
    order = sorted(grams.values(), key=lambda g: g.frame)
    # validated once the server has a Handshake packet from the client (RFC 9000 §8.1)
    first_hs = next((g for g in order if g.direction == "c2s" and "handshake" in g.types), None)
    rcvd = sent = 0
    last_s: _Datagram | None = None
    for g in order:
        if g.direction == "c2s":
            if last_s is not None and first_hs is not None and g.frame >= first_hs.frame:
                # the pause ended by this client datagram: does the server resume next?
                nxt = next((h for h in order if h.direction == "s2c" and h.frame > g.frame), None)
                limit = AMPLIFICATION_FACTOR * rcvd
                if (
                    nxt is not None
                    and "handshake" in nxt.types
                    and AMPLIFICATION_FILL * limit <= sent <= limit
                    and (nxt.ts_ns - last_s.ts_ns) / 1e6 >= MIN_PAUSE_MS
                    and _flight_cut(qc, last_s.frame, nxt.frame) is not False
                ):
                    return ("anti_amplification", last_s, g, nxt)
                return None
            rcvd += g.size
        else:
            if first_hs is not None and g.frame > first_hs.frame:
                return None
            sent += g.size
            last_s = g
    return None


def _flight_cut(qc: QuicConn, last_frame: int, next_frame: int) -> bool | None:
    """Whether the server's handshake flight was cut at ``last_frame``: its Finished not
    sent by then and the datagram ``next_frame`` carrying Handshake CRYPTO bytes beyond
    everything sent before.  None when the server's Handshake packets did not decrypt."""
    seen = [
        p
        for p in qc.key_packets  # handshake packets are all there
        if p.qdir == "s2c" and p.space == "handshake" and p.frame <= next_frame
    ]
    if not seen or not all(p.decrypted for p in seen):
        return None
    fin = _first(qc.tls, lambda m: m.qdir == "s2c" and m.name == "FINISHED")
    if fin is not None and fin.frame <= last_frame:
        return False  # the whole flight had left before the pause
    crypto = [
        f
        for f in qc.frames
        if f.qdir == "s2c" and f.space == "handshake" and f.frame_type == CRYPTO
    ]
    before = max((f.offset + f.length for f in crypto if f.frame <= last_frame), default=0)
    return any(f.frame == next_frame and f.offset + f.length > before for f in crypto)


def _compression_offered_unused(qc: QuicConn) -> bool | None:
    """The client offered certificate compression (RFC 8879) and the server did not use
    it: True / False, or None when the server's messages are not visible (no keys)."""
    ch = _first(qc.tls, lambda m: m.qdir == "c2s" and m.name == "CLIENT_HELLO")
    offered = ch is not None and EXT_COMPRESS_CERTIFICATE in (ch.extensions or ())
    if any(m.qdir == "s2c" and m.name == COMPRESSED_CERTIFICATE for m in qc.tls):
        return False
    if any(m.qdir == "s2c" and m.name == "CERTIFICATE" for m in qc.tls):
        return offered
    return None


def _zero_rtt_unused(ctx: DetectContext, qc: QuicConn) -> Finding | None:
    msgs = {m.name: m for m in reversed(qc.tls)}  # first of each name
    ch, sh = msgs.get("CLIENT_HELLO"), msgs.get("SERVER_HELLO")
    if ch is None or sh is None or not sh.pre_shared_key:
        return None  # not a resumed connection
    offered = bool(ch.early_data)
    ee = msgs.get("ENCRYPTED_EXTENSIONS")
    accepted = ee is not None and bool(ee.early_data)
    zero_rtt = [p for p in qc.key_packets if p.qdir == "c2s" and p.packet_type == "0rtt"]
    if offered and accepted and zero_rtt:
        return None  # 0-RTT used
    req = ctx.requests
    mine = req[(req["flow"] == qc.flow) & (req["protocol"] == "h3")] if len(req) else req
    method = None if mine.empty else mine["method"].iloc[0]
    if method is not None and str(method).upper() not in IDEMPOTENT:
        return None  # not safe to send as early data: waiting was right
    c2s_req = [r for r in qc.stream_rows if r.qdir == "c2s" and r.stream_id % 4 == 0]
    first = qc.event("client_initial")
    if not c2s_req or first is None:
        return None
    r0 = min(c2s_req, key=lambda r: r.ts_ns)
    cost = (r0.ts_ns - first.ts_ns) / 1e6
    why = (
        "offered early data but the server rejected it, so the request was sent again "
        "after the handshake"
        if offered and not accepted
        else "did not use 0-RTT: the request waited for the handshake"
    )
    ev = [
        Evidence(first.frame, "first Initial (ClientHello with the ticket)", first.ts_ns),
        Evidence(sh.frame, "ServerHello accepts the PSK (resumed)", sh.ts_ns),
        Evidence(r0.frame, "request sent", r0.ts_ns),
    ]
    return Finding(
        kind="zero_rtt_unused",
        flow=qc.flow,
        dir=qc.flow_dir("c2s"),
        stream=int(r0.stream_id),
        t_start_ns=int(first.ts_ns),
        t_end_ns=int(r0.ts_ns),
        cost_ms=cost,
        cost_method="measured_interval",
        evidence=ev,
        explanation=(
            f"Flow {qc.flow}{f' ({qc.sni})' if qc.sni else ''} resumed a QUIC session "
            f"(the server accepted the ticket, frame {sh.frame}) but {why}: the "
            f"{method or 'first'} request left in frame {r0.frame}, {cost:.1f} ms after the "
            "client's first packet, instead of with it."
        ),
        remedy=(
            "Send idempotent requests (GET/HEAD) as 0-RTT early data on resumed connections "
            "(e.g. aioquic connect(wait_connected=False), quiche/ngtcp2 early data APIs), and "
            "let the server accept early data; keep non-idempotent requests out of 0-RTT "
            "(replay, RFC 8470)."
        ),
        display_filter=frame_filter([e.frame for e in ev]),
        confidence=0.8 if method is not None else 0.6,
        checks=[
            "PSK accepted (resumed)",
            "request method idempotent" if method else "method unknown",
        ],
        details={"early_data_offered": offered, "early_data_accepted": accepted, "method": method},
    )


def detect(ctx: DetectContext) -> list[Finding]:
    out: list[Finding] = []
    for qc in connections(ctx):
        z = _zero_rtt_unused(ctx, qc)
        if z is not None:
            out.append(z)
    for qc in connections(ctx):
        pkts = qc.key_packets  # every packet but undecrypted 1-RTT: none is looked for
        first = _first(pkts, lambda p: p.qdir == "c2s" and p.packet_type == "initial")
        if first is None:
            continue
        episodes: list[tuple[str, Any, Any, Any]] = []
        for cause, ptype in (("retry", "retry"), ("version_negotiation", "version_negotiation")):
            trig = _first(pkts, lambda p, t=ptype: p.qdir == "s2c" and p.packet_type == t)
            if trig is None:
                continue
            again = _first(
                pkts,
                lambda p, t=trig: (
                    p.qdir == "c2s" and p.frame > t.frame and p.packet_type == "initial"
                ),
            )
            # what the server answered: the client's last long-header packet before it (an
            # Initial, or one in a version the server does not speak, RFC 9000 §6)
            asked = [
                p
                for p in pkts
                if p.qdir == "c2s" and p.frame < trig.frame and p.packet_type != "1rtt"
            ]
            if again is not None and asked:
                episodes.append((cause, asked[-1], trig, again))
        amp = _amplification(qc)
        if amp is not None:
            episodes.append(amp)
        msgs = qc.tls
        hrr = _first(msgs, lambda m: m.name == "HELLO_RETRY_REQUEST")
        if hrr is not None:
            ch1 = _first(msgs, lambda m: m.name == "CLIENT_HELLO" and m.qdir == "c2s")
            ch2 = _first(
                msgs,
                lambda m, h=hrr: m.name == "CLIENT_HELLO" and m.qdir == "c2s" and m.frame > h.frame,
            )
            if ch1 is not None and ch2 is not None:
                # after a Retry/VN the ClientHello went out again: count from that resend
                resent = [e[3] for e in episodes if ch1.frame <= e[3].frame < hrr.frame]
                start = max(resent, key=lambda p: p.frame) if resent else ch1
                episodes.append(("hello_retry_request", start, hrr, ch2))
        for cause, a, trig, b in episodes:
            why, remedy = _WHY[cause]
            confidence = 0.9
            checks = ["the client sent its first flight again after the server's answer"]
            if cause == "anti_amplification":
                unused = _compression_offered_unused(qc)
                remedy = remedy.format(
                    compression=(
                        " or certificate compression (RFC 8879: the client offered it, the "
                        "server did not use it)"
                        if unused
                        else ""
                        if unused is False
                        else " or certificate compression (RFC 8879) if the server does not "
                        "use it already"
                    )
                )
                cut = _flight_cut(qc, a.frame, b.frame)
                checks = [
                    "the server had sent between 90 % and 100 % of 3 × the client's bytes",
                    "it resumed only after the client's next datagram",
                ]
                if cut:
                    checks.append(
                        "its Finished had not left before the pause, and the datagram after "
                        "it carried new Handshake CRYPTO bytes"
                    )
                else:
                    confidence = 0.6
                    checks.append(
                        "without the handshake keys the datagrams' contents are unknown: a "
                        "server that had sent its whole flight and paused would look the same"
                    )
            cost = (b.ts_ns - a.ts_ns) / 1e6
            d = qc.flow_dir("c2s")
            roles = {
                "anti_amplification": (
                    "server stops at 3× the client's bytes",
                    "client datagram (more budget)",
                    "server resumes its flight",
                ),
                "hello_retry_request": (
                    "first ClientHello",
                    "hello retry request",
                    "client starts again",
                ),
            }.get(cause, ("first Initial", cause.replace("_", " "), "client starts again"))
            ev = [
                Evidence(a.frame, roles[0], a.ts_ns),
                Evidence(trig.frame, roles[1], trig.ts_ns),
                Evidence(b.frame, roles[2], b.ts_ns),
            ]
            out.append(
                Finding(
                    kind="quic_handshake_extra_rtt",
                    flow=qc.flow,
                    dir=d,
                    t_start_ns=int(a.ts_ns),
                    t_end_ns=int(b.ts_ns),
                    cost_ms=cost,
                    cost_method="measured_interval",
                    evidence=ev,
                    explanation=(
                        f"The QUIC handshake of flow {qc.flow}"
                        + (f" ({qc.sni})" if qc.sni else "")
                        + f" took an extra round trip: {why} — frames {a.frame} → "
                        f"{trig.frame} → {b.frame}, {cost:.1f} ms before the handshake "
                        "could really start."
                    ),
                    remedy=remedy,
                    display_filter=frame_filter([e.frame for e in ev]),
                    confidence=confidence,
                    checks=checks,
                    details={"cause": cause, "version": qc.version_name},
                )
            )
    return out

"""Handshakes slowed by one end's own time (issue 13; pcapkit.sessions.timing).

Every TLS and QUIC handshake is split into network (one round trip), server (before it
answered the client's first flight), flight (the server's flight on the wire) and
client time (after the server's flight, before the client's Finished): the ``tls``
and ``quic`` tables' ``handshake_*_ms`` columns.  Network and flight time are the
path's; the other two are an endpoint's own work, which no transport setting fixes:

* ``handshake_server_delay`` — the server took long to answer the ClientHello / first
  Initial: key exchange and certificate signing (RSA-4096, a remote key server), a slow
  SNI or certificate lookup, a busy accept loop.
* ``handshake_client_delay`` — the client took long to answer once the server's flight
  had arrived (its ClientKeyExchange, or its Finished in TLS 1.3 and QUIC):
  certificate-chain verification, OCSP/CRL fetches, a busy event loop between reading
  the flight and answering it.  A Finished held after that answer (Nagle behind a
  ClientKeyExchange, loss) is flight time, not the client's.

Signature: that side's own time is at least ``min_ms`` and at least ``min_share`` of
the handshake.  Its time is measured at the capture point with the leg to that end
subtracted (the handshake's legs from the TCP handshake, or QUIC ACK timing), so the
result is the same at every vantage up to the legs' jitter (cost_method ``estimate``).
Silent where the legs or a milestone are unknown (no TCP handshake captured, QUIC
without keys).  A Retry or Version Negotiation round trip is not in these times
(``quic_handshake_extra_rtt`` reports it).

Counter-checks (silent when one fails): the round trip is shorter than the handshake
(legs that do not fit it were measured on a lost or delayed SYN); no TCP segment of the
connection was retransmitted, reordered or missing between the ClientHello and the
client's Finished (loss recovery — an RTO wait for the server's flight — would land in
the client's or the flight's time); no HelloRetryRequest (its extra round trip would
land in the server's).
"""

from __future__ import annotations

from typing import Any

from ..rows import itertuples
from ..schema import is_missing as _na
from .base import MEDIUM_COST_MS, Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(
        Kind("handshake_server_delay", "R8", "README: handshake time split (issue 13)"),
        Kind("handshake_client_delay", "R9", "README: handshake time split (issue 13)"),
    ),
    thresholds=(
        Threshold(
            "min_ms",
            "ms",
            "an endpoint's own handshake time a user can feel: one perceptible frame at 50 Hz "
            "(the medium-severity cost, pcapkit.detect.base.MEDIUM_COST_MS)",
        ),
        Threshold(
            "min_share",
            "fraction",
            "the side's own time dominates: at least half of the handshake",
            maximum=1.0,
        ),
    ),
)
KINDS = SPEC.kind_names

MIN_SHARE = 0.5

_SERVER_REMEDY = (
    "Find what the server does before it answers the first flight: certificate signing "
    "(prefer ECDSA certificates and x25519 to RSA-4096 and finite-field groups), a remote "
    "key server or HSM, a slow SNI / certificate lookup, a saturated accept loop or TLS "
    "worker pool; session resumption (tickets) skips the signature on repeat connections."
)
_CLIENT_REMEDY = (
    "Find what the client does between the server's flight and its Finished: "
    "certificate-chain verification and revocation checks (OCSP stapling on the server "
    "spares the client its own OCSP fetch; cache revocation results), a large trust store "
    "scan, or a busy event loop that reads the flight late; session resumption skips the "
    "verification on repeat connections."
)


def _f(v: Any) -> float | None:
    return None if v is None or _na(v) else float(v)


def _i(v: Any) -> int | None:
    return None if v is None or _na(v) else int(v)


# segment kinds that mean loss recovery or reordering (pcapkit.net.tcp.KINDS)
_RECOVERY = frozenset(
    {"retransmission", "spurious_retransmission", "out_of_order", "prev_not_captured"}
)


def _recovered(ctx: DetectContext, flow: int, t0: int, t1: int) -> bool:
    """A segment of ``flow`` in [t0, t1] was resent, reordered or follows a hole."""
    for d in (0, 1):
        s = ctx.seg_arrays(flow, d)
        ts = s["ts_ns"]
        inside = (ts >= t0) & (ts <= t1)
        if inside.any():
            kinds = s["kind"][inside]
            if any(k in _RECOVERY for k in kinds.tolist()):
                return True
            if (s["gap_before"][inside] > 0).any():
                return True
    return False


def detect(
    ctx: DetectContext, *, min_ms: float = MEDIUM_COST_MS, min_share: float = MIN_SHARE
) -> list[Finding]:
    """Handshakes whose server or client time dominates, TLS and QUIC."""
    out: list[Finding] = []
    hs = {int(r.flow): r for r in itertuples(ctx.tls_handshake)}
    for r in itertuples(ctx.tls):
        m = hs.get(int(r.flow))
        if m is None or bool(r.hello_retry_request):
            continue
        t0, t1 = _i(m.client_hello_ts_ns), _i(m.client_finished_ts_ns)
        if t0 is None or t1 is None or _recovered(ctx, int(r.flow), t0, t1):
            continue
        marks = (
            (_i(m.client_hello_frame), _i(m.client_hello_ts_ns)),
            (_i(m.server_hello_frame), _i(m.server_hello_ts_ns)),
            (_i(m.server_flight_end_frame), _i(m.server_flight_end_ts_ns)),
            (_i(m.client_answer_frame), _i(m.client_answer_ts_ns)),
        )
        out += _judge(ctx, "TLS", r, marks, r.sni, min_ms, min_share)
    qhs = {int(r.flow): r for r in itertuples(ctx.quic_handshake)}
    for r in itertuples(ctx.quic):
        m = qhs.get(int(r.flow))
        if m is None:
            continue
        marks = (
            (_i(m.client_initial_frame), _i(m.client_initial_ts_ns)),
            (_i(m.server_initial_frame), _i(m.server_initial_ts_ns)),
            (_i(m.server_finished_frame), _i(m.server_finished_ts_ns)),
            (_i(m.client_finished_frame), _i(m.client_finished_ts_ns)),
        )
        out += _judge(ctx, "QUIC", r, marks, r.sni, min_ms, min_share)
    return out


def _judge(
    ctx: DetectContext,
    proto: str,
    r: Any,
    marks: tuple[tuple[int | None, int | None], ...],
    sni: Any,
    min_ms: float,
    min_share: float,
) -> list[Finding]:
    total = _f(r.handshake_ms)
    server, client = _f(r.handshake_server_ms), _f(r.handshake_client_ms)
    net, flight = _f(r.handshake_network_ms), _f(r.handshake_flight_ms)
    if total is None or total <= 0 or None in (server, client, net, flight):
        return []
    if net is not None and net > total:
        return []  # legs that do not fit inside the handshake: no split to trust
    assert server is not None and client is not None and net is not None and flight is not None
    (f0, t0), (f1, t1), (f2, t2), (f3, t3) = marks
    flow = int(r.flow)
    name = f" ({sni})" if sni is not None and not _na(sni) else ""
    parts = (
        f"network {net:.1f} ms (one round trip), server {server:.1f} ms, flights "
        f"{flight:.1f} ms, client {client:.1f} ms"
    )
    out = []
    for kind, own, a, b, who, remedy in (
        ("handshake_server_delay", server, (f0, t0), (f1, t1), "server", _SERVER_REMEDY),
        ("handshake_client_delay", client, (f2, t2), (f3, t3), "client", _CLIENT_REMEDY),
    ):
        if own < min_ms or own < min_share * total:
            continue
        if a[0] is None or b[0] is None or a[1] is None or b[1] is None:
            continue
        roles = (
            ("client's first flight", "server answers")
            if who == "server"
            else ("server's flight ends", "client answers")
        )
        ev = [Evidence(a[0], roles[0], a[1]), Evidence(b[0], roles[1], b[1])]
        between = (
            "between the client's first flight and its answer"
            if who == "server"
            else "between the end of the server's flight and its first answer to it"
        )
        out.append(
            Finding(
                kind=kind,
                flow=flow,
                dir="s2c" if who == "server" else "c2s",
                t_start_ns=int(a[1]),
                t_end_ns=int(b[1]),
                cost_ms=own,
                cost_method="estimate",
                evidence=ev,
                explanation=(
                    f"The {proto} handshake of flow {flow}{name} took {total:.1f} ms and the "
                    f"{who}'s own time was {own:.1f} ms of it ({own / total:.0%}): that much "
                    f"passed {between} beyond the round trip to it (frames {a[0]} → {b[0]}). "
                    f"Split: {parts}."
                ),
                remedy=remedy,
                display_filter=frame_filter([e.frame for e in ev]),
                vantage=ctx.vantage(flow) if ctx.has_flow(flow) else "unknown",
                confidence=0.8,
                checks=[
                    "the round trip to that end is subtracted (the legs at the capture point)",
                    f"its own time is ≥ {min_share:.0%} of the handshake",
                ],
                details={
                    "protocol": proto,
                    "handshake_ms": round(total, 3),
                    "network_ms": net,
                    "server_ms": server,
                    "flight_ms": flight,
                    "client_ms": client,
                },
            )
        )
    return out

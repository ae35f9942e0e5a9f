"""One timing model for handshakes: TLS over TCP and QUIC (issue 13, DETECTION.md §1.1).

Five milestones, each stamped when its bytes were seen at the capture point P (a
record when its last byte was readable, a packet when its datagram arrived): the
client's first flight (ClientHello / first Initial), the server's first answer
(ServerHello / first Initial), the end of the server's flight as the client could
last wait on it, the client's first answer to it, and the client's Finished.  With the
round trips between P and each end (``d_C``, ``d_S``; their sum is the RTT), the
handshake time splits exactly into

* network — one round trip, ``d_C + d_S``;
* server  — ``(server first − client first) − d_S``: the server's own work before it
  answered (key exchange, certificate choice, a slow backend for the certificate);
* flight  — ``(server last − server first) + (client Finished − client answer)``: the
  two flights on the wire (their size, pacing, a congestion window that needed ACKs,
  Nagle holding the client's Finished behind its ClientKeyExchange, loss);
* client  — ``(client answer − server last) − d_C``: the client's own work after the
  server's flight (certificate verification, OCSP, a busy event loop).

At any vantage the sum is ``client Finished − client first`` (the handshake time);
each part is floored at 0 (the legs carry jitter), so the parts can exceed the sum by
that jitter.  Without the legs, or a milestone, the parts are unknown (None).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Split:
    network_ms: float | None = None
    server_ms: float | None = None
    flight_ms: float | None = None
    client_ms: float | None = None


def split_handshake(
    client_first_ns: int | None,
    server_first_ns: int | None,
    server_last_ns: int | None,
    client_answer_ns: int | None,
    client_finished_ns: int | None,
    client_leg_ns: int | None,
    server_leg_ns: int | None,
) -> Split:
    """The handshake split into network, server, flight and client time (ms)."""
    stamps = (client_first_ns, server_first_ns, server_last_ns, client_answer_ns)
    if any(t is None for t in stamps) or client_finished_ns is None:
        return Split()
    if client_leg_ns is None or server_leg_ns is None:
        return Split()
    c0, s0, s1, ca = (int(t) for t in stamps)  # type: ignore[arg-type]
    c1 = int(client_finished_ns)
    if not c0 <= s0 <= s1 <= ca <= c1:
        return Split()  # a milestone out of order (mid-capture start, a lost stamp)

    def ms(ns: int) -> float:
        return round(max(ns, 0) / 1e6, 3)

    return Split(
        network_ms=ms(client_leg_ns + server_leg_ns),
        server_ms=ms(s0 - c0 - server_leg_ns),
        flight_ms=ms(s1 - s0 + c1 - ca),
        client_ms=ms(ca - s1 - client_leg_ns),
    )

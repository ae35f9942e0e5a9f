"""QPACK-blocked HTTP/3 streams (issue 7; RFC 9204 §2.1.2, DETECTION.md §4.5).

Mechanism: a QPACK encoder may reference dynamic-table entries its peer's decoder has
not received yet (up to SETTINGS_QPACK_BLOCKED_STREAMS streams at a time).  The
encoder instructions travel on their own unidirectional stream; when those bytes
are late (lost, reordered, flow-control blocked), a request or response whose field
section needs them cannot be decoded — the stream waits although its own bytes
have arrived.  This is head-of-line blocking *between* streams that QUIC was meant
to remove, reintroduced by header compression.

Signature: the HTTP/3 dissector reports a field section that could not be decoded
on arrival (Required Insert Count above the inserts received) and the encoder
instruction whose arrival unblocked it.  Cost = t(unblocking instruction) −
t(section arrived): both at the decoder's side of the capture point
(measured_interval).  Never unblocked in the capture: cost unknown, reported as a
lower bound up to the end of the capture.
"""

from __future__ import annotations

from .base import Evidence, Finding, frame_filter
from .context import DetectContext

KINDS = ("qpack_blocked_stream",)

# A section decoded within 1 ms of arriving was blocked by packet ordering within one
# flight, not by a late encoder stream: nobody waited.
MIN_BLOCKED_MS = 1.0


def detect(ctx: DetectContext, *, min_blocked_ms: float = MIN_BLOCKED_MS) -> list[Finding]:
    out: list[Finding] = []
    for flow, qf, h3 in getattr(ctx, "h3", None) or []:
        for bl in h3.blocked:
            if bl.blocked_frame is None or bl.blocked_ts_ns is None:
                continue
            waited = bl.blocked_ns
            if waited is not None and waited / 1e6 < min_blocked_ms:
                continue
            ev = [
                Evidence(
                    int(bl.blocked_frame), "field section arrives, cannot decode", bl.blocked_ts_ns
                )
            ]
            if bl.unblocked_frame is not None:
                ev.append(
                    Evidence(
                        int(bl.unblocked_frame),
                        "encoder instruction unblocks it",
                        bl.unblocked_ts_ns,
                    )
                )
            who = "server" if bl.direction == "s2c" else "client"
            cost = None if waited is None else waited / 1e6
            out.append(
                Finding(
                    kind="qpack_blocked_stream",
                    flow=int(flow),
                    dir=qf.flow_dir(bl.direction),
                    stream=int(bl.stream_id),
                    t_start_ns=int(bl.blocked_ts_ns),
                    t_end_ns=int(
                        bl.unblocked_ts_ns if bl.unblocked_ts_ns is not None else bl.blocked_ts_ns
                    ),
                    cost_ms=cost,
                    cost_method="measured_interval" if cost is not None else "lower_bound",
                    evidence=ev,
                    explanation=(
                        f"HTTP/3 stream {bl.stream_id}: the {who}'s field section needed "
                        f"{bl.required_insert_count} QPACK dynamic-table entries but only "
                        f"{bl.inserts_at_block} had arrived on the encoder stream, so the "
                        "stream could not be decoded although its bytes were there"
                        + (
                            f"; the encoder instruction in frame {bl.unblocked_frame} released "
                            f"it {cost:.1f} ms later."
                            if cost is not None
                            else "; the capture ends before it was released."
                        )
                    ),
                    remedy=(
                        f"Let the {who}'s QPACK encoder reference only acknowledged entries "
                        "(or use literals) for latency-critical streams, or advertise "
                        "SETTINGS_QPACK_BLOCKED_STREAMS = 0 so peers never block; check for "
                        "loss on the encoder stream."
                    ),
                    display_filter=frame_filter([e.frame for e in ev]),
                    confidence=0.9,
                    checks=["the section's own bytes had arrived (blocked on the encoder stream)"],
                    details={
                        "required_insert_count": bl.required_insert_count,
                        "inserts_at_block": bl.inserts_at_block,
                        "encoder_stream": bl.encoder_stream_id,
                    },
                )
            )
    return out

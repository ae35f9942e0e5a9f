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

from ..rows import itertuples
from ..schema import is_missing as _na
from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("qpack_blocked_stream", "Q3", "DETECTION.md §4.5; RFC 9204 §2.1.2", holds=True),),
    thresholds=(
        Threshold(
            "min_blocked_ms",
            "ms",
            "decoded within 1 ms of arriving: packet order within one flight, nobody waited",
        ),
    ),
)
KINDS = SPEC.kind_names

# A section decoded within 1 ms of arriving was blocked by packet ordering within one
# flight, not by a late encoder stream: nobody waited.
MIN_BLOCKED_MS = 1.0


def detect(ctx: DetectContext, *, min_blocked_ms: float = MIN_BLOCKED_MS) -> list[Finding]:
    out: list[Finding] = []
    t = ctx.qpack_blocked
    if t.empty:
        return out
    for bl in itertuples(t):
        if _na(bl.blocked_frame) or _na(bl.blocked_ts_ns):
            continue
        released = not _na(bl.unblocked_ts_ns)
        waited = int(bl.unblocked_ts_ns) - int(bl.blocked_ts_ns) if released else None
        if waited is not None and waited / 1e6 < min_blocked_ms:
            continue
        ev = [
            Evidence(
                int(bl.blocked_frame),
                "field section arrives, cannot decode",
                int(bl.blocked_ts_ns),
            )
        ]
        if not _na(bl.unblocked_frame):
            ev.append(
                Evidence(
                    int(bl.unblocked_frame),
                    "encoder instruction unblocks it",
                    None if _na(bl.unblocked_ts_ns) else int(bl.unblocked_ts_ns),
                )
            )
        who = "server" if bl.dir == "s2c" else "client"
        cost = None if waited is None else waited / 1e6
        required = None if _na(bl.required_insert_count) else int(bl.required_insert_count)
        encoder = None if _na(bl.encoder_stream) else int(bl.encoder_stream)
        out.append(
            Finding(
                kind="qpack_blocked_stream",
                flow=int(bl.flow),
                dir=str(bl.dir),
                stream=int(bl.stream),
                t_start_ns=int(bl.blocked_ts_ns),
                t_end_ns=int(bl.unblocked_ts_ns) if released else int(bl.blocked_ts_ns),
                cost_ms=cost,
                cost_method="measured_interval" if cost is not None else "lower_bound",
                evidence=ev,
                explanation=(
                    f"HTTP/3 stream {bl.stream}: the {who}'s field section needed "
                    f"{required} QPACK dynamic-table entries but only "
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
                    "required_insert_count": required,
                    "inserts_at_block": int(bl.inserts_at_block),
                    "encoder_stream": encoder,
                },
            )
        )
    return out

"""QUIC flow-control stalls (issue 7; RFC 9000 §4, DETECTION.md §4.5).

Mechanism: a QUIC receiver Y grants credit per stream (initial_max_stream_data_* in
its transport parameters, then MAX_STREAM_DATA frames) and per connection
(initial_max_data, then MAX_DATA).  A sender X that has used the credit must stop
— it may say so with (STREAM_)DATA_BLOCKED — until Y's next MAX_* frame arrives:
a pause of up to a round trip per window, as in HTTP/2 (§4.2).

Signature (keys needed: the frames are encrypted): X's STREAM data on a stream
reaches exactly the stream's limit (or the connection's total reaches MAX_DATA),
X then sends no new data on it for at least ``min_idle_ms``, and resumes only after
a MAX_STREAM_DATA / MAX_DATA from Y raised that limit.  "At the limit" means the
stream's highest offset sent equals a limit Y granted (the transport parameter or a
MAX_STREAM_DATA value; for the connection, the sum over streams equals MAX_DATA):
senders stop exactly there when out of credit.  Timing is not used to decide which
grant X knew (QUIC handshake legs include user-space crypto time, so they are a
poor clock for the capture ↔ endpoint distance).

Cost = t(next new data) − t(data that hit the limit): both X's packets, so the
interval is the same at every vantage (measured_interval).

Reads the declared tables only: ``quic_tls`` (transport parameters of the
ClientHello and EncryptedExtensions), ``quic_frames`` (STREAM, MAX_DATA,
MAX_STREAM_DATA rows) and ``quic`` (roles).
"""

from __future__ import annotations

from typing import Any

from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .quic_rows import MAX_DATA, MAX_STREAM_DATA, QuicConn, connections
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("quic_flow_control_stall", "Q2", "DETECTION.md §4.5; RFC 9000 §4", holds=True),),
    thresholds=(
        Threshold("min_idle_ms", "ms", "a pause under 1 ms is scheduling within one flight"),
    ),
)
KINDS = SPEC.kind_names

# A pause below 1 ms is scheduling within one flight, not a wait for credit.
MIN_IDLE_MS = 1.0
# RFC 9000 §18.2: an absent initial_max_data / initial_max_stream_data_* is 0 (no credit)
DEFAULT_LIMITS = {
    "initial_max_data": 0,
    "initial_max_stream_data_bidi_local": 0,
    "initial_max_stream_data_bidi_remote": 0,
    "initial_max_stream_data_uni": 0,
}


def _params(qc: QuicConn) -> dict[str, dict[str, Any]]:
    """Transport parameters each side announced: {"c2s": client's, "s2c": server's}; a
    later ClientHello (after Retry / HelloRetryRequest) overrides what it announces."""
    out: dict[str, dict[str, Any]] = {"c2s": dict(DEFAULT_LIMITS), "s2c": dict(DEFAULT_LIMITS)}
    for m in qc.tls:
        side = {"CLIENT_HELLO": "c2s", "ENCRYPTED_EXTENSIONS": "s2c"}.get(m.name)
        if side and m.decoded:
            for k in DEFAULT_LIMITS:
                v = getattr(m, k)
                if v is not None:
                    out[side][k] = v
    return out


def _initial_stream_limit(sid: int, sender: str, y_params: dict[str, Any]) -> int:
    client_initiated = sid & 1 == 0
    x_initiated = client_initiated == (sender == "c2s")
    if sid & 2:  # unidirectional: only its initiator sends
        return int(y_params["initial_max_stream_data_uni"])
    key = (
        "initial_max_stream_data_bidi_remote"
        if x_initiated
        else "initial_max_stream_data_bidi_local"
    )
    return int(y_params[key])


def detect(ctx: DetectContext, *, min_idle_ms: float = MIN_IDLE_MS) -> list[Finding]:
    out: list[Finding] = []
    for qc in connections(ctx):
        if not qc.stream_rows:
            continue
        params = _params(qc)
        for x in ("c2s", "s2c"):
            y = "s2c" if x == "c2s" else "c2s"
            updates: list[tuple[int, int, int | None, int]] = []  # (ts, frame, stream|None, max)
            for fr in qc.frames:
                if fr.qdir != y:
                    continue
                if fr.frame_type == MAX_STREAM_DATA:
                    updates.append((fr.ts_ns, fr.frame, fr.stream_id, fr.maximum))
                elif fr.frame_type == MAX_DATA:
                    updates.append((fr.ts_ns, fr.frame, None, fr.maximum))
            rows = [r for r in qc.stream_rows if r.qdir == x and not r.retransmission]
            if not rows or not updates:
                continue
            ends: dict[int, int] = {}
            total = 0  # sum of ends: the connection-level data sent
            c_limits = {int(params[y]["initial_max_data"])} | {
                u[3] for u in updates if u[2] is None
            }
            s_limits: dict[int, set[int]] = {}  # per stream: every limit Y granted
            for u in updates:
                if u[2] is not None:
                    s_limits.setdefault(u[2], set()).add(u[3])
            for i, r in enumerate(rows):
                sid = r.stream_id
                if sid not in ends:
                    ends[sid] = 0
                    s_limits.setdefault(sid, set()).add(_initial_stream_limit(sid, x, params[y]))
                end = max(ends[sid], r.offset + r.length)
                total += end - ends[sid]
                ends[sid] = end
                # a sender stops *exactly* at a limit it was granted when it has no more
                # credit; which grant it knew of is not read from the clock (the
                # handshake legs of QUIC include user-space crypto time)
                at_stream = end in s_limits[sid]
                at_conn = total in c_limits
                if not (at_stream or at_conn):
                    continue
                s_lim = ends[r.stream_id]
                c_lim = total
                nxt = next(
                    (
                        q
                        for q in rows[i + 1 :]
                        if (q.stream_id == r.stream_id or at_conn)
                        and q.offset + q.length > ends.get(q.stream_id, 0)
                    ),
                    None,
                )
                if nxt is None:
                    continue
                idle = (nxt.ts_ns - r.ts_ns) / 1e6
                if idle < min_idle_ms:
                    continue
                # the grant that lifted the limit: the first one above it, captured
                # before the sender resumed
                raise_ = [
                    u
                    for u in updates
                    if u[0] <= nxt.ts_ns
                    and (
                        (at_stream and u[2] == r.stream_id and u[3] > s_lim)
                        or (at_conn and u[2] is None and u[3] > c_lim)
                    )
                ]
                if not raise_:
                    continue
                u = raise_[0]
                which = "stream" if at_stream else "connection"
                limit = s_lim if at_stream else c_lim
                frame_name = "MAX_STREAM_DATA" if u[2] is not None else "MAX_DATA"
                ev = [
                    Evidence(r.frame, f"STREAM data reaches the {which} limit", r.ts_ns),
                    Evidence(u[1], f"{frame_name} raises it", u[0]),
                    Evidence(nxt.frame, "new data resumes", nxt.ts_ns),
                ]
                sender = "server" if x == "s2c" else "client"
                receiver = "client" if x == "s2c" else "server"
                out.append(
                    Finding(
                        kind="quic_flow_control_stall",
                        flow=qc.flow,
                        dir=qc.flow_dir(x),
                        stream=int(r.stream_id),
                        t_start_ns=int(r.ts_ns),
                        t_end_ns=int(nxt.ts_ns),
                        cost_ms=idle,
                        cost_method="measured_interval",
                        evidence=ev,
                        explanation=(
                            f"QUIC stream {r.stream_id}: the {sender} had sent up to the "
                            f"{which} flow-control limit of {limit} bytes the {receiver} "
                            f"allowed (frame {r.frame}) and sent nothing new for "
                            f"{idle:.1f} ms, until the {receiver}'s {frame_name} (frame "
                            f"{u[1]}, to {u[3]}) let it go on in frame {nxt.frame}."
                        ),
                        remedy=(
                            f"Give the {receiver}'s QUIC stack larger receive windows "
                            "(initial_max_stream_data_* / initial_max_data, at least the "
                            "bandwidth-delay product) or window auto-tuning, and send "
                            "MAX_STREAM_DATA / MAX_DATA well before the credit runs out."
                        ),
                        display_filter=frame_filter([e.frame for e in ev]),
                        confidence=0.85,
                        checks=[
                            "resumed only after the limit was raised",
                            f"the {sender}'s data stopped exactly at a limit the {receiver} granted",
                        ],
                        details={"limit": limit, "window": which, "raised_to": u[3]},
                    )
                )
    return out

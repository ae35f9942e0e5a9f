"""HTTP/2 flow-control stalls (H2, DETECTION.md §4.2; RFC 9113 §5.2, §6.9).

Mechanism: a sender X may send DATA only within the credit its peer Y granted
(per stream and per connection: the initial window, 65 535 bytes unless
SETTINGS_INITIAL_WINDOW_SIZE says otherwise, plus WINDOW_UPDATE increments, minus
DATA lengths incl. padding).  With the credit spent, X goes silent until a
WINDOW_UPDATE arrives — a stall of at least one round trip per window.

Signature (with keys or h2c): DATA k of X leaves the stream's or the connection's
credit at ≤ ``stall_credit`` bytes (one max-size frame, RFC 9113 §4.2 default
SETTINGS_MAX_FRAME_SIZE 16 384), the stream is not finished, and X's next DATA on it
comes only after a WINDOW_UPDATE from Y.  The credit is taken from the HTTP/2
dissector and corrected for the vantage: WINDOW_UPDATEs seen less than twice the
sender's leg d_X (the round trip capture point ↔ X, DETECTION.md §1.1) before DATA k
had not reached X when X sent it, so they do not count; the reopening WINDOW_UPDATE
is the first seen after that, at least half that leg before the next DATA.

Cost = t(next DATA) − t(DATA k): both are X's frames, so the interval is the same at
every vantage (measured_interval).

Counter-checks: the stream ended (END_STREAM) — nothing left to send; X resumed
before any WINDOW_UPDATE — the pause was not for credit (application pause);
idle below ``min_idle_ms`` — no stall worth reporting.
"""

from __future__ import annotations

from typing import Any

from .base import Evidence, Finding, frame_filter
from .context import DetectContext

KINDS = ("h2_flow_control_stall",)

# RFC 9113 §4.2: SETTINGS_MAX_FRAME_SIZE starts at 16 384; a sender left with less
# credit than one full frame is (about to be) blocked.
STALL_CREDIT = 16_384
# A pause shorter than 1 ms is scheduling noise, not a round trip spent waiting.
MIN_IDLE_MS = 1.0


def detect(
    ctx: DetectContext, *, stall_credit: int = STALL_CREDIT, min_idle_ms: float = MIN_IDLE_MS
) -> list[Finding]:
    rows: list[dict[str, Any]] = getattr(ctx, "h2_flow", None) or []
    out: list[Finding] = []
    by_flow: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_flow.setdefault((r["flow"], r["dir"]), []).append(r)
    for (flow, d), data_rows in sorted(by_flow.items()):
        data = [r for r in data_rows if r["type"] == "DATA" and r["ts_ns"] >= 0]
        other = "s2c" if d == "c2s" else "c2s"
        wus = [r for r in by_flow.get((flow, other), []) if r["type"] == "WINDOW_UPDATE"]
        if not data or not wus:
            continue
        dd = 0 if d == "c2s" else 1
        leg_x, _ = ctx.sender_receiver_legs(flow, dd) if flow in ctx._flow_rows else (None, None)
        lag = leg_x or 0  # round trip capture point ↔ X
        stalls = []
        for i, k in enumerate(data):
            if k["end_stream"]:
                continue
            nxt = next((r for r in data[i + 1 :] if r["stream"] == k["stream"]), None)
            if nxt is None:
                continue
            idle_ms = (nxt["ts_ns"] - k["ts_ns"]) / 1e6
            if idle_ms < min_idle_ms:
                continue
            # credit X really had: undo WINDOW_UPDATEs still on their way to X
            unseen = [w for w in wus if k["ts_ns"] - lag < w["ts_ns"] <= k["ts_ns"]]
            sw = (k["stream_window"] or 0) - sum(
                w["increment"] or 0 for w in unseen if w["stream"] == k["stream"]
            )
            cw = (k["connection_window"] or 0) - sum(
                w["increment"] or 0 for w in unseen if w["stream"] == 0
            )
            credit = min(sw, cw)
            if credit > stall_credit:
                continue
            reopen = [
                w
                for w in wus
                if k["ts_ns"] - lag < w["ts_ns"] <= nxt["ts_ns"] and w["stream"] in (0, k["stream"])
            ]
            if not reopen:
                continue  # resumed without new credit: not flow control
            stalls.append(
                (k, reopen[0], nxt, idle_ms, credit, "stream" if sw <= cw else "connection")
            )
        for k, wu, nxt, idle_ms, credit, which in stalls:
            who = ctx.endpoint(flow, dd)
            peer = ctx.peer(flow, dd)
            ev = [
                Evidence(k["frame"], "DATA that spent the credit", k["ts_ns"]),
                Evidence(wu["frame"], "WINDOW_UPDATE granting credit", wu["ts_ns"]),
                Evidence(nxt["frame"], "next DATA (resumed)", nxt["ts_ns"]),
            ]
            out.append(
                Finding(
                    kind="h2_flow_control_stall",
                    flow=flow,
                    dir=d,
                    stream=int(k["stream"]),
                    t_start_ns=int(k["ts_ns"]),
                    t_end_ns=int(nxt["ts_ns"]),
                    cost_ms=idle_ms,
                    cost_method="measured_interval",
                    evidence=ev,
                    explanation=(
                        f"HTTP/2 stream {k['stream']}: {who} had spent its {which} "
                        f"flow-control window ({max(credit, 0)} bytes of credit left after "
                        f"frame {k['frame']}) and sent nothing for {idle_ms:.1f} ms, until "
                        f"{peer}'s WINDOW_UPDATE (frame {wu['frame']}, +{wu['increment']}) "
                        f"let it go on in frame {nxt['frame']}."
                    ),
                    remedy=(
                        f"Raise the receiver's HTTP/2 windows ({peer}): "
                        "SETTINGS_INITIAL_WINDOW_SIZE for streams and a connection "
                        "WINDOW_UPDATE early on, at least the bandwidth-delay product "
                        "(e.g. nghttp2 -w/-W, Go http2.Transport MaxReadFrameSize/"
                        "conn flow, gRPC InitialWindowSize or its BDP estimator); send "
                        "WINDOW_UPDATEs before the window runs out, not after."
                    ),
                    display_filter=frame_filter([e.frame for e in ev]),
                    confidence=0.85,
                    checks=[
                        "stream not finished (no END_STREAM)",
                        "resumed only after a WINDOW_UPDATE",
                        f"credit corrected for WINDOW_UPDATEs in flight ({lag / 1e6:.1f} ms)",
                    ],
                    details={
                        "credit_left": int(credit),
                        "window": which,
                        "increment": wu["increment"],
                    },
                )
            )
    return out

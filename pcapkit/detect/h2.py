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

Without keys (§4.2 "Heuristic without keys"), on a TLS connection whose ClientHello
offered h2 and whose records did not decrypt: the sender X goes idle for at least
``min_idle_ms`` with everything it sent acknowledged; a *small* application-data
record from Y (a WINDOW_UPDATE pair is 26 bytes of plaintext: ≤ ``small_record``
bytes on the wire) arrives; X's next record follows within d_X + ``resume_slack_ms``
— and this repeats at least ``min_repeats`` times, each pause after at least
``min_window`` bytes of new data (a window, or half of one; HTTP/2 stacks send
WINDOW_UPDATE at different fill levels, so the spacing is not constant).
Confidence is lower (a request/response protocol can look alike), the cost is the
same idle interval.

Counter-checks: the stream ended (END_STREAM) — nothing left to send; X resumed
before any WINDOW_UPDATE — the pause was not for credit (application pause);
idle below ``min_idle_ms`` — no stall worth reporting.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..rows import itertuples
from .base import Evidence, Finding, frame_filter
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("h2_flow_control_stall", "H2", "DETECTION.md §4.2", holds=True),),
    thresholds=(
        Threshold(
            "stall_credit",
            "bytes",
            "RFC 9113 §4.2: SETTINGS_MAX_FRAME_SIZE starts at 16 384 (less credit: blocked)",
        ),
        Threshold("min_idle_ms", "ms", "a pause under 1 ms is scheduling noise, not a round trip"),
    ),
)
KINDS = SPEC.kind_names

# RFC 9113 §4.2: SETTINGS_MAX_FRAME_SIZE starts at 16 384; a sender left with less
# credit than one full frame is (about to be) blocked.
STALL_CREDIT = 16_384
# A pause shorter than 1 ms is scheduling noise, not a round trip spent waiting.
MIN_IDLE_MS = 1.0


def detect(
    ctx: DetectContext, *, stall_credit: int = STALL_CREDIT, min_idle_ms: float = MIN_IDLE_MS
) -> list[Finding]:
    """With keys (HTTP/2 frames) when the connection decrypted, else the heuristic."""
    return _with_keys(ctx, stall_credit=stall_credit, min_idle_ms=min_idle_ms) + (
        detect_without_keys(ctx)
    )


def _window_rows(t: pd.DataFrame) -> list[dict[str, Any]]:
    """The h2_windows table as dicts; unknown frame / time as -1, missing windows None."""
    if t.empty:
        return []
    cols: dict[str, list[Any]] = {
        "flow": t["flow"].tolist(),
        "dir": t["dir"].astype(str).tolist(),
        "stream": t["stream"].tolist(),
        "frame": t["frame"].to_numpy(np.int64, na_value=-1).tolist(),
        "ts_ns": t["ts_ns"].to_numpy(np.int64, na_value=-1).tolist(),
        "type": t["type"].tolist(),
        "end_stream": t["end_stream"].tolist(),
    }
    for c in ("stream_window", "connection_window", "increment"):
        cols[c] = [None if v is pd.NA else int(v) for v in t[c].tolist()]
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*cols.values(), strict=True)]


def _with_keys(ctx: DetectContext, *, stall_credit: int, min_idle_ms: float) -> list[Finding]:
    rows = _window_rows(ctx.h2_windows)
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
        leg_x, _ = ctx.sender_receiver_legs(flow, dd) if ctx.has_flow(flow) else (None, None)
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


# A WINDOW_UPDATE pair (stream + connection) is 2 × 13 = 26 bytes of HTTP/2; in TLS 1.3
# that is 26 + 1 (inner type) + 16 (AEAD tag) + 5 (header) = 48 bytes on the wire, in
# TLS 1.2 GCM 26 + 8 + 16 + 5 = 55.  64 leaves room for one more small frame (a PING).
SMALL_RECORD = 64
# The sender resumes on receipt: its own processing plus scheduling, ~1 ms on Linux.
RESUME_SLACK_MS = 3.0
# "repeated with roughly constant bytes between resumptions (≈ the window or half)":
# at least two pauses, each after a window's worth of data; the smallest window that
# still stalls a sender is one full frame (SETTINGS_MAX_FRAME_SIZE 16 384, RFC 9113 §4.2)
MIN_REPEATS = 2
MIN_WINDOW = 16_384


def detect_without_keys(
    ctx: DetectContext,
    *,
    min_idle_ms: float = 5.0,
    small_record: int = SMALL_RECORD,
    resume_slack_ms: float = RESUME_SLACK_MS,
    min_repeats: int = MIN_REPEATS,
    min_window: int = MIN_WINDOW,
) -> list[Finding]:
    out: list[Finding] = []
    tls = ctx.tls
    recs = ctx.records
    if tls is None or not len(tls) or not len(recs):
        return out
    for row in itertuples(tls):
        offered = str(row.alpn_offered or "").split(",")
        if "h2" not in offered or row.decrypted_records:
            continue
        f = int(row.flow)
        for d in (1, 0):
            x = ctx.records_of(f, d)
            y = ctx.records_of(f, 1 - d)
            if len(x) < 4 or not len(y):
                continue
            # data records of X (a WINDOW_UPDATE, PING or close_notify is smaller)
            x = x[(x["outer_content_type"] == 23) & (x["length"] > small_record)]
            y = y[(y["outer_content_type"] == 23) & (y["length"] <= small_record)]
            if len(x) < 4 or not len(y):
                continue
            x_first = x["first_ts_ns"].to_numpy("int64")
            x_last = x["last_byte_ts_ns"].to_numpy("int64")
            x_fr = x["first_frame"].to_numpy("int64")
            x_lfr = x["last_byte_frame"].to_numpy("int64")
            x_len = x["length"].to_numpy("int64")
            sent = x_len.cumsum()
            y_ts = y["last_byte_ts_ns"].to_numpy("int64")
            y_fr = y["last_byte_frame"].to_numpy("int64")
            d_x, _ = ctx.sender_receiver_legs(f, d)
            slack = int(resume_slack_ms * 1e6) + (d_x or 0)
            eps = []
            for i in range(len(x) - 1):
                if sent[i] < min_window:
                    continue  # no window can be spent yet (the handshake and request phase)
                t0, t1 = int(x_last[i]), int(x_first[i + 1])
                if (t1 - t0) / 1e6 < min_idle_ms:
                    continue
                # the receiver's record may be captured before the pause begins when the
                # capture sits at the receiver (it left while X's last data was in flight)
                lo = t0 - (d_x or 0)
                k = [j for j in range(len(y_ts)) if lo < y_ts[j] <= t1 and t1 - y_ts[j] <= slack]
                if not k:
                    continue
                eps.append((i, k[-1], t0, t1, int(sent[i])))
            if len(eps) < min_repeats:
                continue
            # every pause after at least a window's worth of new data
            gaps = [b[4] - a[4] for a, b in zip(eps, eps[1:], strict=False)]
            if any(g < min_window for g in gaps):
                continue
            for i, j, t0, t1, _ in eps:
                ev = [
                    Evidence(int(x_lfr[i]), "last data before the pause", t0),
                    Evidence(
                        int(y_fr[j]),
                        "small record from the receiver (WINDOW_UPDATE?)",
                        int(y_ts[j]),
                    ),
                    Evidence(int(x_fr[i + 1]), "data resumes", t1),
                ]
                who, peer = ctx.endpoint(f, d), ctx.peer(f, d)
                out.append(
                    Finding(
                        kind="h2_flow_control_stall",
                        flow=f,
                        dir=DIRS[d],
                        t_start_ns=t0,
                        t_end_ns=t1,
                        cost_ms=(t1 - t0) / 1e6,
                        cost_method="measured_interval",
                        evidence=ev,
                        explanation=(
                            f"Probably HTTP/2 flow control (no keys: inferred from record "
                            f"sizes and timing): {who} paused {(t1 - t0) / 1e6:.1f} ms and "
                            f"resumed right after a {int(y['length'].iloc[j])}-byte record from "
                            f"{peer} (the size of a WINDOW_UPDATE), the same pattern "
                            f"{len(eps)} times, after {', '.join(str(e[4]) for e in eps)} bytes."
                        ),
                        remedy=(
                            f"Raise the receiver's HTTP/2 windows ({peer}): "
                            "SETTINGS_INITIAL_WINDOW_SIZE and a connection WINDOW_UPDATE of "
                            "at least the bandwidth-delay product. Capture with keys "
                            "(SSLKEYLOGFILE) to confirm from the frames."
                        ),
                        display_filter=frame_filter([e.frame for e in ev]),
                        confidence=0.5,
                        checks=[
                            "ClientHello offered h2; records not decrypted",
                            "resumed within the sender's leg after a small receiver record",
                            f"{len(eps)} pauses with similar bytes between them",
                        ],
                        details={"method": "without_keys", "episodes": len(eps)},
                    )
                )
    return out

"""What QUIC saved / would have saved: the head-of-line counterfactual (Q4, DETECTION.md §11.7).

Not a pathology: a metric per connection, from the head-of-line findings already made.
Hold packets, losses and repair times fixed and recompute delivery under the other
ordering rule — TCP delivers the connection's bytes in order, QUIC each stream's
(RFC 9000 §2; R. Marx 2020):

* HTTP/2 over TCP with ``tcp_hol_blocking`` (§4.1, refined per stream by
  :mod:`pcapkit.detect.http`: ``h2_streams_lost``, ``h2_victim_streams``): a stream whose
  bytes were *not* in the lost segment(s) would have been readable as its own bytes
  arrived — QUIC saves its whole wait behind the hole; streams that had bytes in the lost
  segment stay blocked under QUIC too (saved 0).  Without keys (no HTTP/2 frames) nothing
  is claimed.
* HTTP/3 with ``quic_stream_hol`` (§4.4): the other streams' STREAM frames that arrived
  between the loss and its repair would, over one TCP byte stream, have been readable only
  at the repair: per stream, repair − arrival of its first such frame ("TCP would have
  added").

Per connection and direction: ``quic_saved_ms`` = Σ over the streams that gained of each
stream's largest gain (one wait per stream, not per byte), ``max_ms`` the largest, the
streams that gained and those that would wait anyway.  Assumptions, printed with the
number (§11.7): same departures, losses and repair time (TCP's recovery may take longer
for tail losses: the H3 → TCP figure is then a lower bound); same byte order and
packetisation; congestion response, flow control and header compression not modelled;
the application reads at once.  Never added to findings' costs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import schema

ASSUMPTION = (
    "same losses, departures and repair time; per-stream delivery (QUIC) vs one in-order "
    "byte stream (TCP); DETECTION.md §11.7"
)


def hol_counterfactual(findings: list[Any], quic_frames: pd.DataFrame | None) -> pd.DataFrame:
    """One row per (connection, direction) with head-of-line blocking: what per-stream
    delivery saved (HTTP/3) or would have saved (HTTP/2 over TCP)."""
    rows: dict[tuple[int, str], dict[str, Any]] = {}

    def row(flow: int, d: str, transport: str) -> dict[str, Any]:
        key = (flow, d)
        if key not in rows:
            rows[key] = {
                "flow": flow,
                "dir": d,
                "transport": transport,
                "episodes": 0,
                "hol_ms": 0.0,
                "gains": {},
                "blocked": set(),
            }
        return rows[key]

    for f in findings:
        if f.flow is None or f.dir is None:
            continue
        det = f.details or {}
        if f.kind == "tcp_hol_blocking" and "h2_victim_streams" in det:
            r = row(int(f.flow), str(f.dir), "tcp")
            lost = {int(s) for s in det.get("h2_streams_lost") or []}
            r["episodes"] += 1
            r["hol_ms"] += float(f.cost_ms or 0.0)
            r["blocked"] |= lost
            for s, w in (det.get("h2_victim_streams") or {}).items():
                sid = int(s)
                if sid in lost or w is None:
                    continue
                r["gains"][sid] = max(r["gains"].get(sid, 0.0), float(w))
        elif f.kind in ("quic_stream_hol", "h3_single_stream_hol"):
            r = row(int(f.flow), str(f.dir), "quic")
            r["episodes"] += 1
            r["hol_ms"] += float(f.cost_ms or 0.0)
            in_lost = {int(s) for s in det.get("streams_in_lost_packet") or []}
            r["blocked"] |= in_lost
            others = [int(s) for s in (det.get("other_streams") or {})]
            for sid, w in _tcp_extra(f, others, in_lost, quic_frames).items():
                r["gains"][sid] = max(r["gains"].get(sid, 0.0), w)
    out = []
    for r in rows.values():
        gains = {k: v for k, v in r["gains"].items() if v > 0}
        out.append(
            {
                "flow": r["flow"],
                "dir": r["dir"],
                "transport": r["transport"],
                "episodes": r["episodes"],
                "hol_ms": round(r["hol_ms"], 3),
                "quic_saved_ms": round(sum(gains.values()), 3),
                "max_ms": round(max(gains.values()), 3) if gains else 0.0,
                "streams_saved": sorted(gains),
                "streams_blocked": sorted(r["blocked"]),
                "assumption": ASSUMPTION,
            }
        )
    out.sort(key=lambda x: (x["flow"], x["dir"]))
    if not out:
        return schema.frame("hol_counterfactual", n=0)
    data: dict[str, Any] = {k: [x[k] for x in out] for k in out[0]}
    data["flow"] = np.array(data["flow"], np.int64)
    data["episodes"] = np.array(data["episodes"], np.int64)
    return schema.frame("hol_counterfactual", data, len(out))


def _tcp_extra(
    f: Any, others: list[int], in_lost: set[int], qf: pd.DataFrame | None
) -> dict[int, float]:
    """HTTP/3 → TCP: each other stream's first STREAM frame that arrived inside the
    episode would have waited for the repair (t_end)."""
    if qf is None or qf.empty or not others:
        return {}
    sel = qf[
        (qf["flow"] == f.flow)
        & (qf["dir"].astype(str) == f.dir)
        & (qf["type"] == "STREAM")
        & qf["stream_id"].isin(others)
    ]
    if sel.empty:
        return {}
    ts = sel["ts_ns"].to_numpy(np.int64)
    new = sel["new_bytes"].to_numpy(dtype=float, na_value=0.0) > 0
    sid = sel["stream_id"].to_numpy(dtype=float, na_value=-1).astype(np.int64)
    inside = new & (ts >= f.t_start_ns) & (ts < f.t_end_ns)
    out: dict[int, float] = {}
    for s in others:
        if s in in_lost:
            continue
        t = ts[inside & (sid == s)]
        if t.shape[0]:
            out[s] = (f.t_end_ns - int(t.min())) / 1e6
    return out


def summary_line(row: Any) -> str:
    """The report's line for one row: "HoL: QUIC saved 64 ms here (…)"."""
    saved = float(row.quic_saved_ms)
    streams = list(row.streams_saved)
    blocked = list(row.streams_blocked)
    if row.transport == "quic":
        head = f"HoL: QUIC saved {saved:.1f} ms here"
        how = "over one TCP byte stream the same losses would have held"
    else:
        head = f"HoL: QUIC would have saved {saved:.1f} ms here"
        how = "with per-stream delivery the repair would not have held"
    if streams:
        detail = (
            f" ({how} stream(s) {', '.join(map(str, streams))} too, up to "
            f"{float(row.max_ms):.1f} ms each"
        )
        if blocked:
            detail += (
                f"; stream(s) {', '.join(map(str, blocked))} had lost bytes and wait either way"
            )
    else:
        detail = (
            f" (only stream(s) {', '.join(map(str, blocked)) or '?'} waited, and they had "
            "bytes in the lost packets: blocked under either transport"
        )
    return head + detail + "; same losses and repair time assumed)"

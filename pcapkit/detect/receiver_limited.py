"""Receiver-limited transfer — backpressure from a slow reader (R7, DETECTION.md §11.5).

Mechanism: a sender may not pass the right edge ack + window·2^ws (RFC 9293 §3.8.6;
RFC 7323 §2).  Linux autotunes the receive buffer from the bytes *the application copied*
per RTT (``tcp_rcv_space_adjust``), so a reader that keeps reading, but slowly, keeps the
window small; and the receiver advertises a zero window only when free space drops below
an MSS or 1/16 of the buffer (``__tcp_select_window``): a steady slow reader stays *just
above* zero.  The sender stops at the edge (Linux counts the time in
``tcpi_rwnd_limited``) and resumes each time the reader frees space.

Signature, per TCP direction X → Y: the sender's pauses (no new data for > ``pause_ms``)
at which the gap G = (right edge X knew) − snd_nxt is below max(eff_MSS, 2^ws) — X had
reached the advertised edge; the edge X knew is the highest ack + window of the ACKs
from Y captured up to d_X (the capture point ↔ X leg, §1.1) before X's last segment,
plus the coupling tolerance.  No window-0 ACK during the pause (those are ``zero_window``,
R2, with their lead-in).  A pause with a retransmission in it is loss recovery, not R7.

Reader-paced vs buffer-capped (the §11.5 trap): with a slow reader, the advertised window
sits *below* what the receiver advertised when it kept up (unread bytes occupy the
buffer) and the edge advances at the reader's cadence; with a small ``SO_RCVBUF`` and a
prompt reader the window stays at its maximum and advances once per round trip — the
buffer, not the reader, binds ("window < BDP").  Only the first is reported: the median
window at the limited pauses must not exceed ``capped_fraction`` of the largest window Y
advertised (the buffer is holding unread data).  The wire cannot tell *why* the reader
was slow (a slow consumer, deliberate backpressure, a busy event loop): the explanation
says so, and the confidence stays below the zero-window detector's.

Cost: Σ of the limited pauses (a lower bound: the time spent sending sub-window bursts in
between is not counted), comparable with the sender's ``tcpi_rwnd_limited``.  Durations
between packets of one direction are unbiased at any vantage (§1.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Evidence, Finding, frame_filter
from .constants import MS
from .context import DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import lag_tolerance_ns, refined_legs_ns

SPEC = DetectorSpec(
    kinds=(Kind("receiver_limited", "R7", "DETECTION.md §11.5", holds=True),),
    thresholds=(
        Threshold(
            "pause_ms",
            "ms",
            "DETECTION.md §11.8: a window release leaves in groups up to ~2.5 ms apart (pacing); "
            "a pause is longer than that",
            minimum=0.1,
        ),
        Threshold(
            "min_pauses",
            "count",
            "DETECTION.md §2.3 / §11.5: ≥ 3 window-limited pauses make a steady pattern, not "
            "one ACK that happened to arrive at the edge",
            minimum=1,
        ),
        Threshold(
            "min_share",
            "fraction",
            "DETECTION.md §11.5 [lab rl_slow4k: 60 % of the pauses within 1 MSS of the edge]: "
            "at least this share of the sender's pauses must be at the edge",
            maximum=1.0,
        ),
        Threshold(
            "capped_fraction",
            "fraction",
            "DETECTION.md §11.5 (SO_RCVBUF trap): a window at its maximum is the buffer's "
            "size, not a slow reader; the median limited window must not exceed this share of "
            "the largest advertised [lab rl_slow4k: 14 KiB of 64 KiB]",
            maximum=1.0,
        ),
        Threshold(
            "min_cost_ms",
            "ms",
            "one RTT of the lab path (30 ms): less window-limited time than that is noise",
        ),
    ),
)
KINDS = SPEC.kind_names


def _edge_known(
    y_ts: np.ndarray, y_edge_max: np.ndarray, t_ns: np.ndarray, lag_ns: int
) -> np.ndarray:
    """Highest right edge (ack + window) from Y's ACKs that reached X before X sent what
    the capture point saw at ``t_ns`` (-1: none yet)."""
    k = np.searchsorted(y_ts, t_ns - lag_ns, side="right") - 1
    out = np.full(t_ns.shape, -1, np.int64)
    ok = k >= 0
    out[ok] = y_edge_max[k[ok]]
    return out


def detect(
    ctx: DetectContext,
    *,
    pause_ms: float = 3.0,
    min_pauses: int = 3,
    min_share: float = 0.5,
    capped_fraction: float = 0.75,
    min_cost_ms: float = 30.0,
) -> list[Finding]:
    out: list[Finding] = []
    for f in ctx.tcp_flows():
        p = ctx.packets_of(f)
        if p.frame.shape[0] == 0:
            continue
        legs = refined_legs_ns(ctx, f)
        for d in (0, 1):
            fd = _direction(ctx, f, d, p, legs, pause_ms, min_pauses, min_share, capped_fraction)
            if fd is not None and fd.cost_ms is not None and fd.cost_ms >= min_cost_ms:
                out.append(fd)
    return out


def _direction(
    ctx: DetectContext,
    f: int,
    d: int,
    p: Any,
    legs: tuple[int | None, int | None],
    pause_ms: float,
    min_pauses: int,
    min_share: float,
    capped_fraction: float,
) -> Finding | None:
    seg = ctx.seg_arrays(f, d)
    if seg["frame"].shape[0] < 2 * min_pauses:
        return None
    d_x = legs[0] if d == 0 else legs[1]
    if d_x is None:
        return None
    yi = np.nonzero(
        (p.dir == 1 - d) & ((p.flags & 0x10) != 0) & ((p.flags & 0x07) == 0) & (p.ack >= 0)
    )[0]
    if yi.shape[0] == 0 or (p.win[yi] < 0).any():
        return None  # window scale unknown (no SYNs): no edge to compare with
    y_ts = p.ts[yi]
    y_edge = p.ack[yi] + p.win[yi]
    y_edge_max = np.maximum.accumulate(y_edge)
    rows = ctx.seg_rows(f, d)  # the kinds as masks over every segment, made once
    new = ctx.seg_kind_is("new")[rows]
    s_ts = seg["ts_ns"].astype(np.int64)
    s_end = seg["end"].astype(np.int64)
    s_frame = seg["frame"].astype(np.int64)
    ni = np.nonzero(new)[0]
    if ni.shape[0] < 2:
        return None
    gaps = np.diff(s_ts[ni])
    pz = np.nonzero(gaps > pause_ms * MS)[0]
    if pz.shape[0] < min_pauses:
        return None
    last = ni[pz]
    resume = ni[pz + 1]
    t_last, t_resume = s_ts[last], s_ts[resume]
    snd_nxt = np.maximum.accumulate(s_end)[last]
    tol = lag_tolerance_ns(d_x, None, tol_min_ms=0.5, tol_fraction=0.25)
    edge = _edge_known(y_ts, y_edge_max, t_last, d_x - tol)
    gap = edge - snd_nxt
    mss = ctx.eff_mss(f) or 1460
    ws = ctx.flow(f)
    scale = _scale(ws, d)
    limit = max(mss, 1 << scale)
    at_edge = (edge >= 0) & (gap < limit)
    # no zero window and no retransmission inside the pause
    zero_t = y_ts[p.win[yi] == 0]
    retx_t = s_ts[
        ctx.seg_kind_is("retransmission")[rows] | ctx.seg_kind_is("spurious_retransmission")[rows]
    ]
    if at_edge.any():  # counted in sorted copies: every pause at once
        zs, rs = np.sort(zero_t), np.sort(retx_t)
        lo, hi = t_last - d_x, t_resume
        zero_in = np.searchsorted(zs, hi, "right") > np.searchsorted(zs, lo, "left")
        retx_in = np.searchsorted(rs, hi, "left") > np.searchsorted(rs, t_last, "right")
        at_edge &= ~(zero_in | retx_in)
    n_lim = int(at_edge.sum())
    if n_lim < min_pauses or n_lim < min_share * pz.shape[0]:
        return None
    # reader-paced, not buffer-capped: the window at the limited pauses is well below the
    # largest window Y advertised
    win_at = _window_known(y_ts, p.win[yi], t_last[at_edge], d_x - tol)
    max_win = int(p.win[yi][y_ts <= t_resume[at_edge].max()].max())
    med_win = float(np.median(win_at))
    if max_win <= 0 or med_win > capped_fraction * max_win:
        return None
    durations = (t_resume - t_last)[at_edge]
    cost = float(durations.sum()) / MS
    li = np.nonzero(at_edge)[0]
    # the cadence of the edge: intervals between Y's window updates that moved the edge
    moved = np.nonzero(np.diff(y_edge_max) > 0)[0] + 1
    upd = y_ts[moved]
    upd = upd[(upd >= t_last[li[0]] - d_x) & (upd <= t_resume[li[-1]])]
    cadence = float(np.median(np.diff(upd))) / MS if upd.shape[0] > 2 else None
    step = (
        float(np.median(np.diff(y_edge_max[moved][np.isin(y_ts[moved], upd)])))
        if upd.shape[0] > 2
        else None
    )
    ev: list[Evidence] = []
    for i in li[:4]:
        ev.append(Evidence(int(s_frame[last[i]]), "sent_to_window_edge", int(t_last[i])))
        k = int(np.searchsorted(y_ts, t_resume[i] - d_x + tol, side="right") - 1)
        if k >= 0:
            ev.append(Evidence(int(p.frame[yi[k]]), "window_update", int(y_ts[k])))
        ev.append(Evidence(int(s_frame[resume[i]]), "resumed_data", int(t_resume[i])))
    rtt = ctx.rtt_ns(f)
    reader = ctx.peer(f, d)
    per_rtt = rtt is not None and cadence is not None and abs(cadence * MS - rtt) < 0.25 * rtt
    stream = int(ctx.flow(f).stream)
    return Finding(
        kind="receiver_limited",
        flow=f,
        dir=("c2s", "s2c")[d],
        t_start_ns=int(t_last[li[0]]),
        t_end_ns=int(t_resume[li[-1]]),
        cost_ms=cost,
        cost_method="lower_bound",
        evidence=ev,
        vantage=ctx.vantage(f),
        confidence=0.6 if per_rtt else 0.75,
        checks=[
            f"{n_lim} of {pz.shape[0]} sender pauses > {pause_ms:g} ms ended within "
            f"{limit} B of the advertised right edge",
            "no zero window and no retransmission during those pauses (not zero_window, "
            "not loss recovery)",
            f"median window at those pauses {med_win:.0f} B ≤ {capped_fraction:g} × the "
            f"largest advertised {max_win} B (the buffer holds unread data: not a small "
            "SO_RCVBUF with a prompt reader)",
        ],
        explanation=(
            f"The {ctx.endpoint(f, d)} sent up to the {reader}'s advertised receive window "
            f"and waited {n_lim} times ({cost:.1f} ms in all): the window stayed small "
            f"(median {med_win / 1024:.1f} KiB, the largest advertised was "
            f"{max_win / 1024:.1f} KiB) but never reached zero"
            + (
                f", and its right edge advanced every {cadence:.1f} ms by a median {step:.0f} B"
                if cadence is not None and step is not None
                else ""
            )
            + ". The receiving application read the socket more slowly than the data "
            "arrived (backpressure): the transfer ran at the reader's pace, not the "
            "network's. The wire cannot say why the reader was slow (slow consumer, busy "
            "event loop, or deliberate flow control)."
        ),
        remedy=(
            f"Look at the reader on the {reader}, not the network: read promptly and in "
            "large chunks on a dedicated reader (queue the work to another task/thread), "
            "keep blocking work off the read path, do not shrink SO_RCVBUF; raise "
            "tcp_rmem only if the window, not the reader, binds."
        ),
        display_filter=f"tcp.stream == {stream} && (tcp.analysis.window_full || "
        f"tcp.analysis.window_update || {frame_filter([e.frame for e in ev])})",
        details={
            "limited_pauses": n_lim,
            "pauses": int(pz.shape[0]),
            "median_gap_bytes": float(np.median(gap[at_edge])),
            "median_window_bytes": med_win,
            "max_window_bytes": max_win,
            "edge_cadence_ms": cadence,
            "edge_step_bytes": step,
            "per_rtt": bool(per_rtt),
        },
    )


def _window_known(y_ts: np.ndarray, win: np.ndarray, t_ns: np.ndarray, lag_ns: int) -> np.ndarray:
    k = np.searchsorted(y_ts, t_ns - lag_ns, side="right") - 1
    return win[np.maximum(k, 0)]


def _scale(row: Any, d: int) -> int:
    """Window scale of the receiver of direction ``d`` (its ACKs carry the window)."""
    v = getattr(row, ("s_wscale", "c_wscale")[d], None)
    try:
        return int(v) if v is not None and v == v else 0
    except (TypeError, ValueError):
        return 0

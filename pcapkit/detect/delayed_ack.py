"""Delayed ACK that stalls a waiting sender (D1: DETECTION.md §2.7).

Mechanism (§2.1).  RFC 1122 §4.2.3.2 / RFC 5681 §4.2: a receiver SHOULD delay ACKs,
"the delay MUST be less than 0.5 seconds", and SHOULD ACK every second full-sized
segment.  Linux delays by ≥ ``TCP_DELACK_MIN`` = HZ/25 = 40 ms (≤ 200 ms), Windows by
200 ms, BSD/macOS by 100 ms.  Harmless on its own; it costs D when the sender cannot
send until that ACK arrives — cwnd- or rwnd-limited with a lone segment in flight, or
a classic (non-Minshall) Nagle sender.  Nagle × delayed ACK proper is reported by
:mod:`.nagle` (``nagle_delayed_ack``) and left out here.

Signature, per direction X → Y:

* a pure ACK A from Y that acknowledges everything X had sent, covering one segment or
  less than one MSS (a delayed ACK: the every-second-segment rule did not fire);
* D = t(A) − t(first segment it acknowledges) − d_Y ∈ [30 ms, 500 ms] (§1.1: the
  receiver's delay; 30 ms is below Linux's 40 ms floor, 500 ms is the RFC 1122 MUST);
* X sends new data S2 coupled to A (``t(S2) − t(A) ≈ d_X``, the §2.3 tolerance) after
  staying silent for at least a round trip, with no data from Y in between;
* X was provably waiting: S2 is a full segment (≥ 1 MSS was queued, which Nagle never
  holds: cwnd/rwnd), or S1 filled Y's advertised window (rwnd), or S1 is full-sized and
  S2 partial on a socket where Nagle is not shown off (classic RFC 896 Nagle, which
  holds behind any unacknowledged data).  A lone sub-MSS segment on a TCP_NODELAY socket
  with the window open was not waiting (cwnd ≥ 2 outside loss recovery): a coupling
  there is the application's own cadence.

* corroboration (§2.3: a coupling within ±tol of some ACK happens by chance with
  probability ≈ 2·tol/gap): unless S1 filled Y's window (proof that X could not send),
  fewer than ``MIN_REPEATS`` such stalls in a direction are believed only when the sender
  is ACK-clocked — at least ``MIN_COUPLED_SHARE`` of Y's
  pure ACKs that acknowledged new data (and were followed by more of X's data before Y
  spoke) released that data at once.  A paced or application-limited sender is not:
  nDPI's netflix.pcap (stream 23, a range download paced at one segment per 60–110 ms
  regardless of ACKs, many segments never captured) had one coupling in eight.

Cost = D (§2.7).  At the receiver's vantage (d_Y ≈ 0) D is a measured interval; at the
sender or in the middle it is an estimate through d_Y.  Each finding's ``details``
carry the direction's histogram of ACK delays for sub-MSS/PSH segments (bimodal
{≈0, ≈40 ms} is the Linux fingerprint).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..net.decode import FIN, RST, SYN
from .base import Evidence, Finding, frame_filter
from .constants import (
    DELACK_TIMER_MIN_NS,
    MIN_COUPLED_SHARE,
    MIN_REPEATS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
)
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import (
    VIEWS_AT_ONCE,
    DirView,
    accepted_holds,
    backwards,
    cost_stats,
    grouped,
    os_guess,
    role_name,
    scan_holds,
    scan_holds_all,
    view_segment_rows,
    y_groups,
)

SPEC = DetectorSpec(
    kinds=(Kind("delayed_ack", "D1", "DETECTION.md §2.7", holds=True),),
    thresholds=(
        Threshold(
            "delack_timer_min_ms",
            "ms",
            "DETECTION.md §2.3: a receiver delay ≥ 30 ms is a timer (Linux TCP_DELACK_MIN is 40 ms)",
        ),
        Threshold(
            "ack_delay_max_ms",
            "ms",
            "RFC 1122 §4.2.3.2: the ACK delay MUST be less than 0.5 seconds",
        ),
    ),
)
KINDS = SPEC.kind_names

# Histogram bins (ms) for the per-direction ACK-delay fingerprint (§2.7, §2.3 OS bands).
HIST_EDGES_MS = (0.0, 1.0, 10.0, 30.0, 60.0, 110.0, 220.0, 500.0)


def _ack_delay_histogram(v: DirView) -> dict[str, int]:
    """Delays D of Y's first ACK covering each sub-MSS or PSH segment of X."""
    p = v.p
    small = np.asarray(v.small(np.arange(v.s_end.size)), bool)
    j = np.nonzero((v.s_kind == "new") & (v.s_psh | small))[0]
    if not j.size or not v.y_idx.size:
        return {}
    k = np.searchsorted(v.y_ackmax, v.s_end[j], side="left")
    ok = (k < v.y_idx.size) & (k >= np.searchsorted(v.y_idx, v.s_pi[j], side="right"))
    if not ok.any():
        return {}
    delay = (p.ts[v.y_idx[k[ok]]] - p.ts[v.s_pi[j[ok]]] - v.d_y) / MS
    edges = list(HIST_EDGES_MS) + [float("inf")]
    counts, _ = np.histogram(np.clip(delay, 0, None), bins=edges)
    return {
        (f"{lo:g}-{hi:g}ms" if hi != float("inf") else f">{lo:g}ms"): int(c)
        for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
        if c
    }


def detect(
    ctx: DetectContext,
    *,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
) -> list[Finding]:
    """Delayed ACKs that a waiting sender paid for (``delayed_ack``)."""
    out: list[Finding] = []
    views = [
        v
        for f in ctx.tcp_flows()
        for d in (0, 1)
        if (v := DirView.timed(ctx, f, d)) is not None and v.y_idx.size
    ]
    pre = _prefix_all(ctx, views, delack_timer_min_ms, ack_delay_max_ms)
    # the hold scans of the directions with candidates (nagle asks for the same ones)
    scan_holds_all(
        ctx,
        [v for v in views if (c := pre.get(2 * v.f + v.d)) is None or c[0].size],
        delack_timer_min_ms=delack_timer_min_ms,
        ack_delay_max_ms=ack_delay_max_ms,
    )
    for v in views:
        got = pre.get(2 * v.f + v.d)
        if got is not None and not got[0].size:
            continue  # no candidate ACK: _events would say [] before the hold scan
        events = _events(
            ctx,
            v,
            delack_timer_min_ms=delack_timer_min_ms,
            ack_delay_max_ms=ack_delay_max_ms,
            pre=got,
        )
        if events:
            out.extend(_findings(ctx, v, events))
    return out


Candidates = tuple[np.ndarray, np.ndarray, np.ndarray]  # (cand, jl, jr)


def _events(
    ctx: DetectContext,
    v: DirView,
    *,
    delack_timer_min_ms: float,
    ack_delay_max_ms: float,
    pre: Candidates | None = None,
) -> list[dict[str, Any]]:
    p = v.p
    tol = v.tolerance()
    late = v.coupling.late_ns
    new = v.new_pos
    if not new.size:
        return []
    prev_max = np.concatenate(([-1], v.y_ackmax[:-1]))
    pure = ~v.y_data & ((p.flags[v.y_idx] & (SYN | FIN | RST)) == 0)
    if pre is None:
        pre = _prefix(v, tol, late, delack_timer_min_ms, ack_delay_max_ms)
    cand, jl_all, jr_all = pre
    if not cand.size:
        return []
    scan = scan_holds(
        ctx,
        v,
        delack_timer_min_ms=delack_timer_min_ms,
        ack_delay_max_ms=ack_delay_max_ms,
    )
    claimed = {h.a_pi for h in accepted_holds(ctx, v, scan=scan) if h.kind == "nagle_delayed_ack"}
    nagle_off = scan.nodelay_frames is not None
    # the prefilter above made every test on the ACK and its segments; what is left, for
    # all candidates at once: the ACK is not nagle's, S2 does not answer Y's data, no loss
    # recovery or capture gap, and X was waiting (a reason)
    ka, jl, jr = cand, jl_all, jr_all
    ia = v.y_idx[ka]
    ack = v.y_ack[ka]
    una = np.maximum(prev_max[ka], 0)
    s_first, s_last, s2 = new[jl], new[jr - 1], new[jr]
    i2 = v.s_pi[s2]
    cw = np.zeros(new.size + 1, np.int64)
    np.cumsum(v.s_wire[new], out=cw[1:])
    wire = cw[jr] - cw[jl]
    ta, t1, tl, t2 = p.ts[ia], p.ts[v.s_pi[s_first]], p.ts[v.s_pi[s_last]], p.ts[i2]
    delay, lag, gap = ta - t1 - v.d_y, t2 - ta, t2 - tl
    ok = v.y_data_reaching(ka, t2, tol) == 0  # else S2 may answer Y's data
    if claimed:
        ok &= ~np.isin(ia, np.fromiter(claimed, np.int64))
    bad = v.x_bad_ts  # loss recovery / RTO (cwnd = 1), or a capture gap
    if bad.size:
        ib = np.searchsorted(bad, t1 - 2 * v.rtt, side="left")
        ok &= ~((ib < bad.size) & (bad[np.minimum(ib, bad.size - 1)] <= t2))
    ok &= v.s_gap[s2] <= 0
    # was X waiting?  (see module docstring)
    s2_full, rwnd_full, last_full = _waiting(v, s2, s_last, ack, tol)
    classic = last_full & (not nagle_off)
    ok &= s2_full | rwnd_full | classic
    reason = np.where(s2_full, "cwnd", np.where(rwnd_full, "rwnd", "classic_nagle"))
    events: list[dict[str, Any]] = [
        {
            "ka": k_,
            "s_first": sf,
            "s_last": sl,
            "s2": s2_,
            "delay": de,
            "lag": la,
            "gap": ga,
            "tol": tol,
            "reason": r_,
            "acked": ac - un,
            "segments": wi,
        }
        for k_, sf, sl, s2_, de, la, ga, r_, ac, un, wi in zip(
            *(
                x[ok].tolist()
                for x in (ka, s_first, s_last, s2, delay, lag, gap, reason, ack, una, wire)
            ),
            strict=True,
        )
    ]
    inferred = [e for e in events if e["reason"] != "rwnd"]
    if inferred and len(inferred) < MIN_REPEATS:
        # S1 filling Y's window proves X could not send (rwnd); a full S2 (cwnd) or a
        # partial one after a full S1 (classic Nagle) only suggests it — a paced or
        # application-limited sender's next segment lands near some ACK now and then
        # (§2.3: ≈ 2·tol/gap per exchange), so a lone coupling needs an ACK-clocked sender
        share, n_opp = _ack_clocked_share(v, new, pure, prev_max, tol, late)
        if n_opp < MIN_REPEATS or share < MIN_COUPLED_SHARE:
            events = [e for e in events if e["reason"] == "rwnd"]
        else:
            for e in inferred:
                e["clocked"] = (share, n_opp)
    return events


def _prefix(
    v: DirView, tol: int, late: int, delack_timer_min_ms: float, ack_delay_max_ms: float
) -> Candidates:
    """The candidate ACKs of direction ``v`` (positions in ``y_idx``) and the new
    segments each acknowledged (``new[jl:jr]``): Y's pure ACKs that acknowledged new data
    ending on a segment boundary, ``delack_timer_min_ms`` … ``ack_delay_max_ms`` after
    the first of them, with X sending nothing more before it and again after it
    (coupled), the every-second-segment rule not firing and the gap before S2 not shorter
    than a round trip: every test of :func:`_events` that needs only this ACK and its
    segments, for all ACKs at once."""
    p = v.p
    new = v.new_pos
    n_end = v.s_end[new]
    prev_max = np.concatenate(([-1], v.y_ackmax[:-1]))
    pure = ~v.y_data & ((p.flags[v.y_idx] & (SYN | FIN | RST)) == 0)
    cand = np.nonzero(pure & (v.y_ack > prev_max) & (v.y_ack > 0))[0]
    # the ACK ends on a segment boundary and D is in the window
    jl_all = np.searchsorted(n_end, np.maximum(prev_max[cand], 0), side="right")
    jr_all = np.searchsorted(n_end, v.y_ack[cand], side="right")
    ok = (jr_all > jl_all) & (jr_all < new.size)
    cand = cand[ok]
    jl_all, jr_all = jl_all[ok], jr_all[ok]
    delay = p.ts[v.y_idx[cand]] - p.ts[v.s_pi[new[jl_all]]] - v.d_y
    keep = (delay >= delack_timer_min_ms * MS) & (delay <= ack_delay_max_ms * MS)
    cand, jl_all, jr_all = cand[keep], jl_all[keep], jr_all[keep]
    # the ACK ends on a segment boundary, X sent nothing more before it and sent again
    # after it, the every-second-segment rule did not fire, the ACK released S2 and the
    # gap before S2 is not shorter than a round trip
    if cand.size:
        ia_all = v.y_idx[cand]
        ack_all = v.y_ack[cand]
        s_last_all = new[jr_all - 1]
        i2_all = v.s_pi[new[jr_all]]
        cw = np.zeros(new.size + 1, np.int64)
        np.cumsum(v.s_wire[new], out=cw[1:])
        wire_all = cw[jr_all] - cw[jl_all]
        ta_all = p.ts[ia_all]
        t2_all = p.ts[i2_all]
        lag_all = t2_all - ta_all
        gap_all = t2_all - p.ts[v.s_pi[s_last_all]]
        una_all = np.maximum(prev_max[cand], 0)
        keep = (
            (n_end[jr_all - 1] == ack_all)
            & (v.s_pi[s_last_all] <= ia_all)
            & (i2_all >= ia_all)
            & ~((ack_all - una_all > v.mss) & (wire_all > 1))
            & v.coupled(lag_all, tol, late)
            & ~(gap_all < v.rtt - tol)
        )
        cand, jl_all, jr_all = cand[keep], jl_all[keep], jr_all[keep]
    if cand.size:
        # X may have been waiting: what _events asks last, less its Nagle switch
        s2_full, rwnd_full, last_full = _waiting(
            v, new[jr_all], new[jr_all - 1], v.y_ack[cand], tol
        )
        keep = s2_full | rwnd_full | last_full
        cand, jl_all, jr_all = cand[keep], jl_all[keep], jr_all[keep]
    return cand, jl_all, jr_all


def _waiting(
    v: DirView, s2: np.ndarray, s_last: np.ndarray, ack: np.ndarray, tol: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate ACK (acknowledging up to ``ack``; ``s_last`` the last segment it
    acknowledged, ``s2`` the next, as positions of X's segments): S2 is a full segment
    (cwnd), S1 filled Y's advertised window (rwnd), the last acknowledged segment was
    full (a classic Nagle sender's hold, when Nagle is on) — the reasons X may have
    been waiting for the ACK (see the module docstring)."""
    p = v.p
    s2_full = v.s_super[s2] | (v.s_len[s2] >= v.mss)
    kb = v.last_y_reaching_all(p.ts[v.s_pi[s_last]], tol)
    kb0 = np.maximum(kb, 0)
    w0, u0 = p.win[v.y_idx[kb0]], v.y_ack[kb0]
    rwnd_full = (kb >= 0) & (w0 >= 0) & (u0 >= 0) & (ack >= u0 + w0)
    last_full = np.asarray(v.sized(s_last), bool) & ~np.asarray(v.small(s_last), bool)
    return s2_full, rwnd_full, last_full


def _prefix_all(
    ctx: DetectContext, views: list[DirView], delack_timer_min_ms: float, ack_delay_max_ms: float
) -> dict[int, Candidates]:
    """:func:`_prefix_at_once` in passes of ``VIEWS_AT_ONCE`` views (its temporaries stay
    small: one pass over every view took ~the capture's size at 1M packets)."""
    out: dict[int, Candidates] = {}
    for a in range(0, len(views), VIEWS_AT_ONCE):
        out.update(
            _prefix_at_once(
                ctx, views[a : a + VIEWS_AT_ONCE], delack_timer_min_ms, ack_delay_max_ms
            )
        )
    return out


def _prefix_at_once(
    ctx: DetectContext, views: list[DirView], delack_timer_min_ms: float, ack_delay_max_ms: float
) -> dict[int, Candidates]:
    """:func:`_prefix` of many directions at once (``views``, in direction key order), by
    direction key ``2·flow + dir``: one pass over all their Y packets and new segments,
    each direction's searches in its new segments' ends made in one sorted array
    (:func:`~pcapkit.detect.tcp_model.grouped`).  A direction is absent — :func:`_events`
    then asks :func:`_prefix` itself — when its new segments' ends go backwards, or
    when the trace's values do not fit the grouped keys."""
    out: dict[int, Candidates] = {}
    got = view_segment_rows(ctx, views) if views else None
    if got is None:
        return out
    keys, job, rows = got
    nj = int(keys.shape[0])
    jobs = np.arange(nj)
    nrow = np.flatnonzero(ctx.seg_kind_is("new")[rows])  # X's new segments
    n_job = job[nrow]
    n_new = np.bincount(n_job, minlength=nj)
    n0 = np.cumsum(n_new) - n_new
    sc = ctx.seg_columns
    srow = rows[nrow]
    n_end = sc["end"][srow].astype(np.int64, copy=False)
    n_wire = sc["wire_segments"][srow].astype(np.int64, copy=False)
    pc = ctx.packet_columns
    pts, pack = pc["ts"], pc["ack"]
    fstart = np.searchsorted(ctx.packet_flows, keys >> 1, side="left")
    # the flow's packet index of each new segment, as a row of the packet columns
    n_pi = np.concatenate([v.s_pi for v in views])[nrow] + fstart[n_job]
    # Y's packets of each view (``y_idx``), as rows of the packet columns
    yg = y_groups(ctx)
    _g, y0, ny = yg.span(keys)
    if any(v.y_idx.shape[0] != n for v, n in zip(views, ny.tolist(), strict=True)):
        return out
    y_job = np.repeat(jobs, ny)
    yfirst = np.cumsum(ny) - ny
    ypos = np.arange(y_job.shape[0]) - yfirst[y_job]  # position in y_idx
    ygi = yg.yo[ypos + y0[y_job]]
    y_ack = pack[ygi]
    ya = grouped(y_job, y_ack, nj)
    ends = grouped(n_job, n_end, nj)
    if ya is None or ends is None:
        return out
    prev_max = np.empty(y_ack.shape[0], np.int64)
    if y_ack.shape[0]:
        prev_max[1:] = ya.running_max()[:-1]
        prev_max[yfirst[ny > 0]] = -1
    pure = (pc["length"][ygi] <= 0) & ((pc["flags"][ygi] & (SYN | FIN | RST)) == 0)
    cand = np.flatnonzero(pure & (y_ack > prev_max) & (y_ack > 0))
    cj = y_job[cand]
    una = np.maximum(prev_max[cand], 0)
    ack = y_ack[cand]
    jl = ends.search(cj, una, "right") - n0[cj]
    jr = ends.search(cj, ack, "right") - n0[cj]
    ok = (jr > jl) & (jr < n_new[cj])
    cand, cj, una, ack, jl, jr = cand[ok], cj[ok], una[ok], ack[ok], jl[ok], jr[ok]
    d_x_v = np.array([v.d_x for v in views], np.int64)
    mss_v = np.array([v.mss for v in views], np.int64)
    tol_v = np.array([v.tolerance() for v in views], np.int64)
    d_x, mss, tol = d_x_v[cj], mss_v[cj], tol_v[cj]
    d_y = np.array([v.d_y for v in views], np.int64)[cj]
    late = np.array([v.coupling.late_ns for v in views], np.int64)[cj]
    ia = ygi[cand]
    ta = pts[ia]
    delay = ta - pts[n_pi[n0[cj] + jl]] - d_y
    keep = (delay >= delack_timer_min_ms * MS) & (delay <= ack_delay_max_ms * MS)
    cw = np.zeros(nrow.shape[0] + 1, np.int64)
    np.cumsum(n_wire, out=cw[1:])
    g_l, g_r = n0[cj] + jl, n0[cj] + jr  # rows among the new segments
    g_r = np.minimum(g_r, max(nrow.shape[0] - 1, 0))  # (jr < n_new where ok)
    last_pi = n_pi[g_r - 1]
    i2 = n_pi[g_r]
    wire = cw[g_r] - cw[g_l]
    t2 = pts[i2]
    dev = t2 - ta - d_x  # DirView.coupled
    keep &= (
        (n_end[g_r - 1] == ack)
        & (last_pi <= ia)
        & (i2 >= ia)
        & ~((ack - una > mss) & (wire > 1))
        & (dev >= -tol)
        & (dev <= tol + late)
        & ~(t2 - pts[last_pi] < d_x + d_y - tol)
    )
    cand, cj, jl, jr = cand[keep], cj[keep], jl[keep], jr[keep]
    # X may have been waiting (_waiting, for every candidate at once): S2 full, the
    # last acknowledged segment full, or S1 filling Y's window — Y's last packet that
    # reached X before S1 left, searched in each direction's Y times
    y_ts = pts[ygi]
    yt = grouped(y_job, y_ts, nj)
    if yt is None:
        return out
    g_r = n0[cj] + jr
    s2_row, sl_row = srow[g_r], srow[g_r - 1]
    sup, ln = sc["super_segment"].astype(bool, copy=False), sc["length"]
    m, xk = mss_v[cj], np.array([v.x_mss_known for v in views], bool)[cj]
    s2_full = sup[s2_row] | (ln[s2_row] >= m)
    l_sup, l_len = sup[sl_row], ln[sl_row].astype(np.int64, copy=False)
    # DirView.small / .sized (an MSS of 0: numpy's x % 0 is 0, as x % 1)
    small = np.where(l_sup, xk & (l_len % np.maximum(m, 1) != 0), l_len < m)
    last_full = (~l_sup | xk) & ~small
    tl = pts[n_pi[g_r - 1]]
    bound = np.minimum(tl - d_x_v[cj] + tol_v[cj], tl - 1)
    at = yt.search(cj, bound, "right")  # the group's first row + how many reached X
    kb = np.maximum(at - 1, 0)
    w0, u0 = pc["win"][ygi[kb]], y_ack[kb]
    rwnd_full = (at > yfirst[cj]) & (w0 >= 0) & (u0 >= 0) & (y_ack[cand] >= u0 + w0)
    keep = s2_full | rwnd_full | last_full
    cand, cj, jl, jr = cand[keep], cj[keep], jl[keep], jr[keep]
    local = cand - yfirst[cj]
    n_c = np.bincount(cj, minlength=nj)
    cut = np.cumsum(n_c).tolist()
    back = backwards(n_job, n_end, nj) | backwards(y_job, y_ts, nj)
    z = np.zeros(0, np.int64)
    a = 0
    for i, b in enumerate(cut):
        if back[i]:
            a = b
            continue
        out[int(keys[i])] = (local[a:b], jl[a:b], jr[a:b]) if b > a else (z, z, z)
        a = b
    return out


def _ack_clocked_share(
    v: DirView,
    new: np.ndarray,
    pure: np.ndarray,
    prev_max: np.ndarray,
    tol: int,
    late: int,
) -> tuple[float, int]:
    """(share, opportunities): of Y's pure ACKs that acknowledged new data and were
    followed by more new data from X before Y spoke again, the share whose next data
    left coupled to the ACK (``DirView.coupled``).  A sender held by its window (cwnd,
    rwnd, classic Nagle) answers nearly every such ACK at once; a paced or
    application-limited sender rarely does."""
    p = v.p
    adv = np.nonzero(pure & (v.y_ack > prev_max) & (v.y_ack > 0))[0]
    if not adv.size or not new.size:
        return 0.0, 0
    ia = v.y_idx[adv]
    nxt = np.searchsorted(v.s_pi[new], ia, side="right")
    has = nxt < new.size
    adv, ia, nxt = adv[has], ia[has], nxt[has]
    if not adv.size:
        return 0.0, 0
    i2 = v.s_pi[new[nxt]]
    # no data from Y between the ACK and X's next data (that would be an exchange)
    ky2 = np.searchsorted(v.y_idx, i2, side="left")
    quiet = v.y_data_count(adv + 1, ky2) == 0
    lag = p.ts[i2] - p.ts[ia]
    coupled = np.asarray(v.coupled(lag, tol, late), bool) & quiet
    n_opp = int(quiet.sum())
    return (float(coupled.sum()) / n_opp if n_opp else 0.0), n_opp


_REASON = {
    "cwnd": "a full segment was ready (S2 is ≥ 1 MSS, which Nagle never holds), so a limit "
    "on packets in flight (congestion window) kept it back until the ACK",
    "rwnd": "its data filled the receiver's advertised window",
    "classic_nagle": "a classic (RFC 896, non-Minshall) Nagle sender holds a partial segment "
    "behind any unacknowledged data",
}


def _findings(ctx: DetectContext, v: DirView, events: list[dict[str, Any]]) -> list[Finding]:
    f, d, p = v.f, v.d, v.p
    vant = ctx.vantage(f)
    x_role, y_role = role_name(d), role_name(1 - d)
    sender, receiver = ctx.endpoint(f, d), ctx.peer(f, d)
    receiver_side = vant == y_role
    stats = cost_stats([e["delay"] / MS for e in events])
    hist = _ack_delay_histogram(v)
    stream = int(ctx.flow(f).stream)
    out = []
    for e in events:
        ia = int(v.y_idx[e["ka"]])
        i1, il, i2 = (int(v.s_pi[e[k]]) for k in ("s_first", "s_last", "s2"))
        f1, fl, fa, f2 = (int(p.frame[i]) for i in (i1, il, ia, i2))
        d_ms = e["delay"] / MS
        os_name, os_words = os_guess(d_ms)
        ev = [Evidence(f1, "acknowledged_segment", int(p.ts[i1]))]
        if fl != f1:
            ev.append(Evidence(fl, "acknowledged_segment", int(p.ts[il])))
        ev += [
            Evidence(fa, "delayed_ack", int(p.ts[ia])),
            Evidence(f2, "released_segment", int(p.ts[i2])),
        ]
        frames = [x.frame for x in ev]
        expl = (
            f"The {receiver} delayed its ACK of the {sender}'s {e['acked']}-byte "
            f"{'segment' if e['segments'] == 1 else 'segments'} by ≈{d_ms:.1f} ms "
            f"({os_words}), and the {x_role} was waiting for it: {_REASON[e['reason']]}. "
            f"Its next data left {e['lag'] / MS:.1f} ms after the ACK was seen — frames "
            + ", ".join(str(x) for x in frames)
            + "."
        )
        if stats["count"] > 1:
            expl += (
                f" One of {stats['count']} such stalls in this direction (p50 "
                f"{stats['p50_ms']:.1f} ms, {stats['total_ms']:.0f} ms in all)."
            )
        remedy = (
            f"On the {y_role} ({receiver.split(' ', 1)[1]}): TCP_QUICKACK after each recv "
            "(Linux; it is not permanent, re-arm it) or the route option `quickack 1`. "
        )
        remedy += {
            "cwnd": f"On the {x_role}: avoid bursts that end in a lone segment the peer "
            "will delay-ACK (write whole responses at once; a larger initial congestion "
            "window, `initcwnd`, for short responses).",
            "rwnd": f"Give the {y_role} a larger receive buffer (SO_RCVBUF / tcp_rmem) so the "
            "sender does not fill the window.",
            "classic_nagle": f"Set TCP_NODELAY on the {x_role}'s socket.",
        }[e["reason"]]
        out.append(
            Finding(
                kind="delayed_ack",
                flow=f,
                dir=DIRS[d],
                t_start_ns=int(p.ts[i1]),
                t_end_ns=int(p.ts[i2]),
                cost_ms=d_ms,
                cost_method="measured_interval" if receiver_side else "estimate",
                evidence=ev,
                explanation=expl,
                remedy=remedy,
                display_filter=f"tcp.stream == {stream} && frame.number >= {f1} && "
                f"frame.number <= {f2}",
                vantage=vant,
                confidence=0.7 if e["reason"] != "classic_nagle" else 0.55,
                checks=[
                    f"pure ACK covering {e['segments']} segment(s), {e['acked']} B, and "
                    "everything sent: a delayed ACK, not the every-second-segment ACK",
                    f"receiver delay D = {d_ms:.1f} ms within [30, 500] ms (RFC 1122 MUST)",
                    f"next data {e['lag'] / MS:.3f} ms after the ACK (d_X = {v.d_x / MS:.3f} "
                    "ms): released by it",
                    "no data from Y between the ACK and the release (not a reply)",
                    "no retransmission within 2 RTT (not RTO recovery), no capture gap",
                    f"sender was waiting: {e['reason']}",
                    "not a Nagle × delayed-ACK hold (reported as nagle_delayed_ack)",
                ]
                + (
                    [
                        f"sender ACK-clocked: {e['clocked'][0]:.0%} of {e['clocked'][1]} "
                        "ACKs of new data released more at once (not a chance coupling)"
                    ]
                    if "clocked" in e
                    else (
                        [f"{len(events)} such stalls in this direction"]
                        if e["reason"] != "rwnd"
                        else []
                    )
                ),
                details={
                    "ack_delay_ms": round(d_ms, 3),
                    "os_guess": os_name,
                    "waiting_on": e["reason"],
                    "lag_ms": round(e["lag"] / MS, 3),
                    "d_x_ms": round(v.d_x / MS, 3),
                    "d_y_ms": round(v.d_y / MS, 3),
                    "direction_delayed_acks": stats,
                    "ack_delay_histogram": hist,
                    "frames_filter": frame_filter(frames),
                },
            )
        )
    return out

"""Reference implementations for tests/detect/test_vectorised.py: detector loops as they
stood before the issue-16 rewrites (main 8c48adc), one item per Python step.  Kept only
as oracles for the equivalence tests; the package never imports them."""

# ruff: noqa: E501

from __future__ import annotations

from typing import Any

import numpy as np

from pcapkit.detect.constants import (
    DELACK_TIMER_MIN_NS,
    JITTER_MIN_SAMPLES,
    MIN_COUPLED_SHARE,
    MIN_REPEATS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
    ContentType,
)
from pcapkit.detect.context import DetectContext
from pcapkit.detect.delayed_ack import _ack_clocked_share
from pcapkit.detect.tcp_model import DirView, Hold, Scan, _tls_evidence, nagle_off_evidence
from pcapkit.net.decode import FIN, RST, SYN


def find_holds_reference(
    ctx: DetectContext,
    view: DirView,
    *,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
) -> Scan:
    """Every S1/A/S2 triple of this direction that passes §2.3 and the §2.5 checks.

    The structural and timing rules are applied to all pairs at once (numpy); only the
    survivors — coupled holds, a handful per connection — are looped over.
    """
    v, p = view, view.p
    m = v.s_frame.size
    tol = v.tolerance()
    late = v.coupling.late_ns
    if m < 2:
        return Scan([], 0, None)
    j2 = np.arange(1, m)
    j1 = j2 - 1
    new = v.s_kind == "new"
    cand = (
        new[j1]
        & new[j2]
        & (v.s_off[j2] == v.s_end[j1])
        & (v.s_gap[j2] == 0)
        & ~v.s_fin[j2]
        & np.asarray(v.small(j1), bool)
        & np.asarray(v.partial(j2), bool)
    )
    a_all, b_all = j1[cand], j2[cand]
    if not a_all.size or not v.y_idx.size:
        return Scan([], 0, nagle_off_evidence(v, tol))
    i1, i2 = v.s_pi[a_all], v.s_pi[b_all]
    end1 = v.s_end[a_all]
    ka = v.first_acks(i1, end1)
    ok = ka >= 0
    kc = np.maximum(ka, 0)
    ia = v.y_idx[kc]
    # A before S2, acknowledging exactly what X sent (not bytes the capture missed)
    ok &= (ia < i2) & (v.y_ack[kc] == end1)
    t1, ta, t2 = p.ts[i1], p.ts[ia], p.ts[i2]
    # no data from Y reached X between A and S2 (S2 would be its answer)
    ok &= v.y_data_reaching(kc, t2, tol) == 0
    # a piggy-backed A counts only when Y was sending on its own: data after S1 that did
    # not yet acknowledge it; otherwise A is Y's reply and S2 the next turn
    pure = ~v.y_data[kc] & ((p.flags[ia] & (SYN | FIN | RST)) == 0)
    ok &= pure | v.y_sent_data_between(i1, kc)
    opportunities = int(ok.sum())  # S2 could have been held behind S1 and released by A
    lag, gap = t2 - ta, t2 - t1
    ok &= v.coupled(lag, tol, late)  # released by the ACK
    ok &= (gap >= v.d_x + v.d_y - tol) & (gap >= 2 * tol)  # waited a round trip
    new_end = v.s_end[new]  # new data: increasing offsets
    new_rank = np.cumsum(new) - 1  # position of a new segment among the new ones
    out: list[Hold] = []
    for c in np.nonzero(ok)[0].tolist():
        a, b, k = int(a_all[c]), int(b_all[c]), int(kc[c])
        e1, ia_c = int(end1[c]), int(ia[c])
        t1_c, ta_c, t2_c = int(t1[c]), int(ta[c]), int(t2[c])
        lag_c, gap_c, pure_c = int(lag[c]), int(gap[c]), bool(pure[c])
        # cwnd (§2.5): A acknowledges < 2·MSS and at most one segment besides S1 (cwnd ≥ 2
        # outside loss recovery: tcp_reno_ssthresh/cubic floor ssthresh at 2), and no
        # retransmission within 2 RTT (cwnd = 1 after an RTO mimics Nagle)
        una_before = max(int(v.y_ackmax[k - 1]) if k > 0 else 0, 0)
        acked = int(new_rank[a]) - int(np.searchsorted(new_end, una_before, side="right")) + 1
        had_loss = v.x_bad_ts.size > 0 and int(v.x_bad_ts[0]) < t2_c
        if e1 - una_before >= 2 * v.mss or acked > 2 or (acked == 2 and had_loss):
            continue
        if v.x_trouble_between(t1_c - 2 * v.rtt, t2_c):
            continue
        # rwnd: S1 must not have filled Y's window; A must leave room for S2
        kb = v.last_y_reaching(t1_c, tol)
        if kb is not None:
            w0 = int(p.win[v.y_idx[kb]])
            una0 = int(v.y_ack[kb])
            if w0 >= 0 and una0 >= 0 and e1 >= una0 + w0:
                continue
        wa = int(p.win[ia_c])
        if wa >= 0 and wa < int(v.s_len[b]):
            continue
        delay = ta_c - t1_c - v.d_y
        d_ms = delay / MS
        if pure_c and delack_timer_min_ms <= d_ms <= ack_delay_max_ms:
            kind, note = "nagle_delayed_ack", "delayed_ack"
        elif pure_c and d_ms > ack_delay_max_ms:
            kind, note = "nagle", "ack_too_late"
        elif pure_c:
            kind, note = "nagle", "quick_ack"
        else:
            kind, note = "nagle", "piggybacked"
        checks = [
            f"S1 is sub-MSS ({int(v.s_len[a])} B {'mod' if v.s_super[a] else '<'} "
            f"{v.mss} B: Minshall's rule) and S2 is partial (a full segment is never held)",
            "nothing else sent by X between S1 and S2; no capture gap, no FIN",
            f"S2 left {lag_c / MS:.3f} ms after the ACK; d_X = {v.d_x / MS:.3f} ms, "
            f"tolerance −{tol / MS:.2f}/+{(tol + late) / MS:.2f} ms (released by the ACK: "
            "not pacing, not an application timer)",
            f"S2 waited {gap_c / MS:.1f} ms ≥ d_X + d_Y − tol = {(v.rtt - tol) / MS:.1f} ms",
            "no data from Y between the ACK and S2 (not a reply to Y's data)",
            f"not cwnd-limited: the ACK covered {e1 - una_before} B in {acked} segment(s) "
            "(< 2·MSS), no retransmission within 2 RTT",
            "not rwnd-limited: S1 did not fill Y's window and the ACK leaves room for S2",
        ]
        if not pure_c:
            checks.append("Y was sending on its own (data after S1 before acknowledging it)")
        out.append(
            Hold(
                view=v,
                j1=a,
                j2=b,
                ka=k,
                lag_ns=lag_c,
                gap_ns=gap_c,
                delay_ns=delay,
                tol_ns=tol,
                pure=pure_c,
                kind=kind,
                note=note,
                checks=checks,
            )
        )
    return Scan(out, opportunities, nagle_off_evidence(v, tol))


def accepted_holds_reference(
    ctx, view, *, min_repeats=MIN_REPEATS, min_coupled_share=MIN_COUPLED_SHARE, scan=None
):
    """tcp_model.accepted_holds before the rewrite (it appended to the scan's holds)."""
    if scan is None:
        scan = find_holds_reference(ctx, view)
    if not scan.holds or scan.nodelay_frames is not None:
        return []
    n = len(scan.holds)
    repeated = n >= min_repeats and n >= min_coupled_share * scan.opportunities
    kept = []
    _tls_evidence(ctx, view, scan.holds)
    for h in scan.holds:
        if h.kind == "nagle":
            if not (repeated or h.tls_records >= 2 or h.tls_split):
                continue
        h.checks.append(
            f"Nagle not disabled: no partial segment left while an earlier small one was "
            f"unacknowledged; {n} of {scan.opportunities} testable pairs coupled to an ACK"
        )
        kept.append(h)
    return kept


def events_reference(
    ctx: DetectContext,
    v: DirView,
    *,
    delack_timer_min_ms: float,
    ack_delay_max_ms: float,
) -> list[dict[str, Any]]:
    p = v.p
    tol = v.tolerance()
    late = v.coupling.late_ns
    new = np.nonzero(v.s_kind == "new")[0]
    if not new.size:
        return []
    n_end = v.s_end[new]
    prev_max = np.concatenate(([-1], v.y_ackmax[:-1]))
    pure = ~v.y_data & ((p.flags[v.y_idx] & (SYN | FIN | RST)) == 0)
    cand = np.nonzero(pure & (v.y_ack > prev_max) & (v.y_ack > 0))[0]
    # vectorised prefilter: the ACK ends on a segment boundary and D is in the window
    jl_all = np.searchsorted(n_end, np.maximum(prev_max[cand], 0), side="right")
    jr_all = np.searchsorted(n_end, v.y_ack[cand], side="right")
    ok = (jr_all > jl_all) & (jr_all < new.size)
    cand = cand[ok]
    jl_all, jr_all = jl_all[ok], jr_all[ok]
    delay = p.ts[v.y_idx[cand]] - p.ts[v.s_pi[new[jl_all]]] - v.d_y
    keep = (delay >= delack_timer_min_ms * MS) & (delay <= ack_delay_max_ms * MS)
    cand, jl_all, jr_all = cand[keep], jl_all[keep], jr_all[keep]
    # the loop's other tests that need only this ACK and its segments, for all at once:
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
    jl_all, jr_all = jl_all.tolist(), jr_all.tolist()
    if not cand.size:
        return []
    scan = find_holds_reference(
        ctx,
        v,
        delack_timer_min_ms=delack_timer_min_ms,
        ack_delay_max_ms=ack_delay_max_ms,
    )
    claimed = {
        h.a_pi for h in accepted_holds_reference(ctx, v, scan=scan) if h.kind == "nagle_delayed_ack"
    }
    nagle_off = scan.nodelay_frames is not None
    events: list[dict[str, Any]] = []
    for ka, jl, jr in zip(cand.tolist(), jl_all, jr_all, strict=True):
        ia = int(v.y_idx[ka])
        if ia in claimed:
            continue
        ack = int(v.y_ack[ka])
        una = max(int(prev_max[ka]), 0)
        # jl, jr: the searches of the prefilter above, for this same (una, ack)
        if jr <= jl or int(n_end[jr - 1]) != ack:
            continue  # acknowledges bytes not seen, or mid-segment
        s_first, s_last = int(new[jl]), int(new[jr - 1])
        if int(v.s_pi[s_last]) > ia:
            continue
        if jr >= new.size:
            continue  # X never sent again: nobody waited
        s2 = int(new[jr])
        i2 = int(v.s_pi[s2])
        if i2 < ia:
            continue  # X sent more before the ACK: not everything was acknowledged
        wire = int(v.s_wire[new[jl:jr]].sum())
        if ack - una > v.mss and wire > 1:
            continue  # ≥ 2 wire segments and > 1 MSS: the every-second-segment rule fired
        ta, t1, tl, t2 = (
            int(p.ts[ia]),
            int(p.ts[v.s_pi[s_first]]),
            int(p.ts[v.s_pi[s_last]]),
            int(p.ts[i2]),
        )
        delay = ta - t1 - v.d_y
        if not (delack_timer_min_ms * MS <= delay <= ack_delay_max_ms * MS):
            continue
        lag, gap = t2 - ta, t2 - tl
        if not v.coupled(lag, tol, late):
            continue  # S2 not released by the ACK
        if gap < v.rtt - tol:
            continue
        if v.y_data_reaching(ka, t2, tol) > 0:
            continue  # S2 may answer Y's data
        if v.x_trouble_between(t1 - 2 * v.rtt, t2) or int(v.s_gap[s2]) > 0:
            continue  # loss recovery / RTO (cwnd = 1), or a capture gap
        # was X waiting?  (see module docstring)
        s2_full = bool(v.s_super[s2] or v.s_len[s2] >= v.mss)
        kb = v.last_y_reaching(tl, tol)
        rwnd_full = False
        if kb is not None:
            w0, u0 = int(p.win[v.y_idx[kb]]), int(v.y_ack[kb])
            rwnd_full = w0 >= 0 and u0 >= 0 and ack >= u0 + w0
        last_full = bool(v.sized(s_last)) and not bool(v.small(s_last))
        if s2_full:
            reason = "cwnd"
        elif rwnd_full:
            reason = "rwnd"
        elif last_full and not nagle_off:
            reason = "classic_nagle"
        else:
            continue
        events.append(
            {
                "ka": ka,
                "s_first": s_first,
                "s_last": s_last,
                "s2": s2,
                "delay": delay,
                "lag": lag,
                "gap": gap,
                "tol": tol,
                "reason": reason,
                "acked": ack - una,
                "segments": wire,
            }
        )
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


def app_units_reference(ctx, f, d):
    """cork._app_units before the rewrite: one direction's records at a time."""
    r = ctx.rec_arrays(f, d)
    if not r["flow"].shape[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ct = np.nan_to_num(r["content_type"].astype(float), nan=-1)
    first = r["first_frame"].astype(np.int64)
    last = r["last_byte_frame"].astype(np.int64)
    epoch = r["epoch"]
    ok = (ct == ContentType.APPLICATION_DATA.value) & (epoch != "handshake") & (first == last)
    fr, n = np.unique(first[ok], return_counts=True)
    return fr, n


def coalesced_reference(v, units, max_gap, quiet):
    """The candidate loop of cork._coalescing before the rewrite."""
    p = v.p
    new = np.nonzero(v.s_kind == "new")[0]
    hits = []
    multi = units[0][units[1] >= 2].astype(np.int64)
    where = np.nonzero(np.isin(v.s_frame[new], multi))[0]
    for pos in where[where > 0].tolist():
        a, b = int(new[pos - 1]), int(new[pos])
        gap = int(v.s_ts[b] - v.s_ts[a])
        if gap > max_gap:
            continue
        i = int(v.s_pi[b])
        kb = v.last_y_reaching(int(p.ts[i]), quiet)
        if kb is not None and int(p.ts[i]) - int(p.ts[v.y_idx[kb]]) - v.d_x < quiet:
            continue
        hits.append((b, a, gap))
    return hits


def reaction_jitter_reference(ctx: DetectContext, f: int, d: int, d_x: int) -> int | None:
    """Robust σ (1.4826·MAD) of X's immediate pure-ACK reactions to Y's data at the
    capture point (X sends in direction ``d``) — the same "X reacts in the kernel to a
    packet from Y" event as a release by an ACK; None with fewer than JITTER_MIN_SAMPLES."""
    p = ctx.packets_of(f)
    seg = ctx.seg_arrays(f, 1 - d)
    new = seg["kind"] == "new"
    x = np.nonzero(p.dir == d)[0]
    if int(new.sum()) < JITTER_MIN_SAMPLES or not x.size:
        return None
    ackmax = np.maximum.accumulate(p.ack[x])
    pi = np.searchsorted(p.frame, seg["frame"][new].astype(np.int64, copy=False))
    k = np.searchsorted(ackmax, seg["end"][new].astype(np.int64, copy=False), side="left")
    ok = (k < x.size) & (k >= np.searchsorted(x, pi, side="right"))
    if not ok.any():
        return None
    xa = x[k[ok]]
    pure = (p.length[xa] == 0) & ((p.flags[xa] & (SYN | FIN | RST)) == 0)
    lag = (p.ts[xa] - p.ts[pi[ok]])[pure]
    # immediate ones only: a delayed ACK (≥ 30 ms later) is not a reaction time
    lag = lag[lag < d_x + DELACK_TIMER_MIN_NS / 2]
    if lag.size < JITTER_MIN_SAMPLES:
        return None
    return int(1.4826 * np.median(np.abs(lag - np.median(lag))))


def sampled_legs_reference(ctx: DetectContext, f: int) -> tuple[int | None, int | None]:
    legs: list[int | None] = [None, None]
    p = ctx.packets_of(f)
    for d in (0, 1):
        leg = 1 if d == 0 else 0  # c2s data is acknowledged across the server leg
        seg = ctx.seg_arrays(f, d)
        new = seg["kind"] == "new"
        y = np.nonzero(p.dir == 1 - d)[0]
        if not new.any() or not y.size:
            continue
        ackmax = np.maximum.accumulate(p.ack[y])
        pi = np.searchsorted(p.frame, seg["frame"][new].astype(np.int64, copy=False))
        k = np.searchsorted(ackmax, seg["end"][new].astype(np.int64, copy=False), side="left")
        ok = (k < y.size) & (k >= np.searchsorted(y, pi, side="right"))
        if ok.any():
            legs[leg] = max(0, int((p.ts[y[k[ok]]] - p.ts[pi[ok]]).min()))
    return legs[0], legs[1]


def request_complete_at_reference(v: DirView, kb: int, tb: int, t: int) -> int | None:
    """cork._request_complete_at before the rewrite (main 3ae7b8c): a mask over the whole
    flow's packets and a prefix max of Y's data ends per call."""
    p = v.p
    y_end = int(np.max(p.end[v.y_idx[: kb + 1]][v.y_data[: kb + 1]], initial=0))
    x = np.nonzero((p.dir == v.d) & (p.ts > tb + v.d_x) & (p.ts <= t) & (p.ack >= 0))[0]
    if not x.size:
        return None
    covered = p.ack[x] >= y_end
    if covered.all() or not covered.any():
        return None
    k = int(np.argmax(covered))
    return int(p.ts[x[k]]) if k > 0 else None

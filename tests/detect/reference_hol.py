"""Reference implementations for tests/detect/test_hol_vectorised.py: the HoL
detector's per-direction, per-hole and per-episode steps as they stood before the
issue-16 rewrite of pcapkit/detect/hol.py (main 82535da), one question per numpy mask.
Kept only as oracles for the equivalence tests; the package never imports them.
What the rewrite did not change (``_Dir``, ``_episodes``, ``_overlapping_after``, the
texts) is imported from the package."""

# ruff: noqa: E501

from __future__ import annotations

from typing import Any

import numpy as np

from pcapkit.detect.base import Evidence, Finding, frame_filter
from pcapkit.detect.context import DIRS, DetectContext
from pcapkit.detect.hol import (
    _REMEDY,
    _REMEDY_REORDERING,
    _RETX_KINDS,
    LOSS_MIN_RTT_FRACTION,
    MAX_DUPACK_FRAMES,
    MAX_VICTIM_FRAMES,
    MIN_DUPACKS,
    REORDER_FELT_NS,
    REORDER_STALL_MIN_NS,
    REORDER_WINDOW_NO_RTT_MS,
    _candidates,
    _Dir,
    _display_filter,
    _episodes,
    _Hole,
    _later,
    _multiplex_note,
    _name_by_what_waited,
    _overlapping_after,
    _PacketExtras,
)


def detect(
    ctx: DetectContext,
    *,
    loss_min_rtt_fraction: float = LOSS_MIN_RTT_FRACTION,
    reorder_window_no_rtt_ms: float = REORDER_WINDOW_NO_RTT_MS,
    min_dupacks: int = MIN_DUPACKS,
    min_episode_ms: float = 0.0,  # report every episode with victims; the CLI's
    #                               --min-cost-ms hides small ones for all detectors alike
) -> list[Finding]:
    """HoL-blocking episodes per flow and data direction (the direction of the lost data)."""
    out: list[Finding] = []
    cands = _candidates(ctx)
    if not cands:
        return out
    extras = _PacketExtras(ctx.packets)
    rto = [f for f in ctx.prior if f.kind == "rto_stall"]
    for f, d in cands:
        found = _flow_dir(
            ctx,
            extras,
            f,
            d,
            loss_min_rtt_fraction=loss_min_rtt_fraction,
            reorder_window_no_rtt_ms=reorder_window_no_rtt_ms,
            min_dupacks=min_dupacks,
            min_episode_ms=min_episode_ms,
        )
        for fnd in found:
            named = _name_by_what_waited(ctx, fnd, rto)
            if named is not None:
                out.append(named)
    return out


def _flow_dir(
    ctx: DetectContext,
    extras: _PacketExtras,
    f: int,
    d: int,
    *,
    loss_min_rtt_fraction: float,
    reorder_window_no_rtt_ms: float,
    min_dupacks: int,
    min_episode_ms: float,
) -> list[Finding]:
    x = _Dir(ctx, extras, f, d)
    rtt = ctx.rtt_ns(f)
    _, d_y = ctx.sender_receiver_legs(f, d)
    holes = _holes_at_p(x, rtt, loss_min_rtt_fraction, reorder_window_no_rtt_ms, min_dupacks)
    out: list[Finding] = []
    for ep in _episodes([h for h in holes if h.status == "ok"]):
        fnd = _finding_from_holes(ctx, x, ep, holes, min_episode_ms)
        if fnd is not None:
            out.append(fnd)
    # a hole filled by the late original (reordering on the path, often the tail of a
    # delivery stall) blocks what arrived behind it just the same: one episode, one
    # finding, its cause named — not a loss, and not the records' size
    for ep in _episodes([h for h in holes if h.status == "reordering"]):
        fnd = _finding_from_holes(
            ctx, x, ep, holes, max(min_episode_ms, REORDER_FELT_NS / 1e6), cause="reordering"
        )
        if fnd is not None:
            out.append(fnd)
    covered = [(h.a, h.b) for h in holes]
    out.extend(_ack_stream_episodes(ctx, x, covered, d_y, loss_min_rtt_fraction, min_episode_ms))
    return out


def _holes_at_p(
    x: _Dir, rtt: int | None, frac: float, no_rtt_ms: float, min_dupacks: int
) -> list[_Hole]:
    holes: list[_Hole] = []
    for i in np.nonzero(x.seg_gap > 0)[0].tolist():
        b = int(x.seg_off[i])
        a = b - int(x.seg_gap[i])
        h = _Hole(a=a, b=b, open_i=i, t_open=int(x.seg_ts[i]))
        # fill: later segments covering [a, b) until nothing is missing
        missing = [(a, b)]
        later = _overlapping_after(x, i, a, b)
        for j in later.tolist():
            lo, hi = int(x.seg_off[j]), int(x.seg_end[j])
            nxt = []
            for m0, m1 in missing:
                if hi <= m0 or lo >= m1:
                    nxt.append((m0, m1))
                    continue
                if lo > m0:
                    nxt.append((m0, lo))
                if hi < m1:
                    nxt.append((hi, m1))
            missing = nxt
            if not missing:
                h.fill_i, h.t_fill = j, int(x.seg_ts[j])
                break
        fill_frame = int(x.seg_frame[h.fill_i]) if h.fill_i is not None else 1 << 62
        open_frame = int(x.seg_frame[i])
        # capture drop: Y acknowledged bytes of the hole before P saw them (an ACK that
        # advances as the fill arrives in pieces acknowledges only what P saw)
        if _acked_unseen(x, a, b, i, fill_frame):
            h.status = "capture_drop"
            holes.append(h)
            continue
        if h.fill_i is None:
            h.status = "unfilled"
            holes.append(h)
            continue
        dup = x.dupacks_at(a, open_frame - 1, fill_frame + 1)
        h.dupacks = dup.tolist()
        if len(h.dupacks) < min_dupacks:
            h.status = "no_dupack"
            holes.append(h)
            continue
        h.checks.append(
            f"not a capture drop: the receiver's ACKs stayed at the hole ({len(h.dupacks)} "
            "dupACKs) until the fill"
        )
        # reordering: was the fill the original?
        j, t_fill = h.fill_i, h.t_fill
        assert j is not None and t_fill is not None
        dur = t_fill - h.t_open
        resent_after = _overlapping_after(x, j, a, b)
        resent_after = resent_after[x.seg_retx[resent_after]]
        ts_fill, ts_open = int(x.seg_tsval[j]), int(x.seg_tsval[i])
        if ts_fill >= 0 and ts_open >= 0:
            if not _later(ts_fill, ts_open):
                h.status = "reordering"
                holes.append(h)
                continue
            h.ts_confirmed = True
            h.checks.append(
                f"not reordering: the fill was sent after the data behind the hole "
                f"(TSval {ts_fill} > {ts_open})"
            )
        elif resent_after.shape[0]:
            # the hole's range was sent again after the fill: the fill may have been the
            # original (the later copy spurious) — or itself a retransmission followed by
            # more (an RTO backing off): not a loss for sure, not reordering for sure
            h.status = "ambiguous"
            holes.append(h)
            continue
        else:
            floor = frac * rtt if rtt else no_rtt_ms * 1e6
            if dur < floor:
                h.status = "reordering"
                holes.append(h)
                continue
            h.checks.append(
                f"not reordering: the hole lasted {dur / 1e6:.1f} ms, longer than a "
                f"reordered original would ({floor / 1e6:.1f} ms"
                + (f" = {frac:g} RTT)" if rtt else ", Wireshark's ooo window)")
            )
        holes.append(h)
    return holes


def _acked_unseen(x: _Dir, a: int, b: int, open_i: int, fill_frame: int) -> bool:
    """Y acknowledged bytes of the hole [a, b) that P had not seen by then (before the frame
    that completed the fill): the receiver had them, the capture point missed them."""
    ys = np.nonzero((x.y_ack > a) & (x.y_frame < fill_frame))[0]
    if not ys.shape[0]:
        return False
    later = _overlapping_after(x, open_i, a, b)
    fr, so, se = x.seg_frame[later], x.seg_off[later], x.seg_end[later]
    for k in ys.tolist():
        ack, f = int(x.y_ack[k]), int(x.y_frame[k])
        # the contiguous stretch from a that P had seen before this ACK
        got = sorted(zip(so[fr < f].tolist(), se[fr < f].tolist(), strict=True))
        cover = a
        for lo, hi in got:
            if lo > cover:
                break
            cover = max(cover, hi)
        if ack > min(cover, b) and ack > a:
            return True
    return False


def _units_at_p(
    ctx: DetectContext, x: _Dir, ep: list[_Hole], all_holes: list[_Hole]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(victims, hit units, unit name) for an episode seen as a hole at P."""
    t0 = min(h.t_open for h in ep)
    t1 = max(h.t_fill for h in ep if h.t_fill is not None)
    a0 = min(h.a for h in ep)
    spans = [(h.a, h.b) for h in all_holes]
    recs = ctx.rec_arrays(x.f, x.d)
    victims: list[dict[str, Any]] = []
    hit: list[dict[str, Any]] = []
    if recs["flow"].shape[0]:
        off = recs["offset"]
        end = off + recs["length"]
        lb_ts = recs["last_byte_ts_ns"]
        lb_fr = recs["last_byte_frame"]
        rd_ts = recs["last_ts_ns"]
        rd_fr = recs["last_frame"]
        ctype = recs["content_type"]  # float, NaN when missing
        for k in np.nonzero((end > a0) & (rd_ts >= t0) & (lb_ts <= t1))[0].tolist():
            o, e = int(off[k]), int(end[k])
            touches = any(o < sb and sa < e for sa, sb in spans)
            u = {
                "offset": o,
                "length": e - o,
                "content_type": int(ctype[k]),
                "arrived_frame": int(lb_fr[k]),
                "arrived_ns": int(lb_ts[k]),
                "readable_frame": int(rd_fr[k]),
                "readable_ns": int(rd_ts[k]),
                "wait_ms": (int(rd_ts[k]) - int(lb_ts[k])) / 1e6,
            }
            if touches:
                hit.append(u)
            elif rd_ts[k] > lb_ts[k] and t0 <= lb_ts[k] < t1:
                victims.append(u)
        return victims, hit, "TLS record"
    # no TLS: the units are writes, a PSH-terminated segment ends one (DETECTION.md §1.5)
    for k in np.nonzero(
        x.seg_psh & (x.seg_off >= a0) & (x.seg_ts >= t0) & (x.seg_ts < t1) & (x.seg_gap >= 0)
    )[0].tolist():
        o, e = int(x.seg_off[k]), int(x.seg_end[k])
        if x.seg_kind[k] not in ("new", "prev_not_captured"):
            continue
        tu = int(x.seg_ts[k])
        below = [h for h in ep if h.a < e and h.t_open <= tu and h.t_fill is not None]
        if not below:
            continue
        rd = max(h.t_fill for h in below if h.t_fill is not None)
        if rd <= tu:
            continue
        victims.append(
            {
                "offset": o,
                "length": e - o,
                "content_type": None,
                "arrived_frame": int(x.seg_frame[k]),
                "arrived_ns": tu,
                "readable_frame": None,
                "readable_ns": rd,
                "wait_ms": (rd - tu) / 1e6,
            }
        )
    return victims, hit, "write (PSH-terminated segment)"


def _finding_from_holes(
    ctx: DetectContext,
    x: _Dir,
    ep: list[_Hole],
    all_holes: list[_Hole],
    min_episode_ms: float,
    *,
    cause: str = "loss",
) -> Finding | None:
    t0 = min(h.t_open for h in ep)
    t1 = max(h.t_fill for h in ep if h.t_fill is not None)
    victims, hit, unit = _units_at_p(ctx, x, ep, all_holes)
    if not victims:
        return None  # nothing complete waited behind the hole: no HoL (the hole's own unit
        # is the record-spanning detector's business)
    first = ep[0]
    a = first.a
    # the ACK stream's view of the same episode: first dupACK at a → first ACK past a
    dup_all = sorted({k for h in ep for k in h.dupacks})
    jump = np.nonzero((x.y_ack > a) & (x.y_ts >= t0))[0]
    ack_t1 = int(x.y_ts[jump[0]]) if jump.shape[0] else None
    ack_ep_ns = (ack_t1 - int(x.y_ts[dup_all[0]])) if ack_t1 is not None and dup_all else None
    gro = bool(x.seg_super.any())
    checks = [c for h in ep for c in h.checks]
    duration = t1 - t0
    method_note = "first segment after the hole → the segment that filled it"
    if gro and ack_ep_ns is not None:
        duration = ack_ep_ns
        method_note = (
            "first dupACK → first ACK past the hole (GRO super-segments hide arrival order)"
        )
        checks.append("GRO/TSO super-segments in this direction: timed from the ACK stream")
    elif x.at_sender and ack_ep_ns is not None:
        duration = ack_ep_ns
        method_note = (
            "first dupACK → first ACK past the hole (the capture point is at the sender: "
            "its hole is segments it missed, the receiver's wait shows in its ACKs)"
        )
        checks.append("capture at the sender: the receiver's blocking timed from its ACK stream")
    if duration / 1e6 < min_episode_ms:
        return None
    ev: list[Evidence] = []
    for h in ep:
        ev.append(Evidence(int(x.seg_frame[h.open_i]), "hole", h.t_open))
    for k in dup_all[:MAX_DUPACK_FRAMES]:
        ev.append(Evidence(int(x.y_frame[k]), "dupack", int(x.y_ts[k])))
    for h in ep:
        assert h.fill_i is not None
        ev.append(
            Evidence(
                int(x.seg_frame[h.fill_i]),
                "retransmission" if h.ts_confirmed and cause == "loss" else "fill",
                h.t_fill,
            )
        )
    worst = sorted(victims, key=lambda u: -u["wait_ms"])
    vframes: dict[int, int] = {}
    for u in worst:
        if len(vframes) >= MAX_VICTIM_FRAMES:
            break
        vframes.setdefault(u["arrived_frame"], u["arrived_ns"])
    for fr, ts in sorted(vframes.items()):
        ev.append(Evidence(fr, "victim", ts))
    total = sum(u["wait_ms"] for u in victims)
    vmax = worst[0]["wait_ms"]
    nbytes = sum(u["length"] for u in victims)
    lost = sum(h.b - h.a for h in ep)
    sender, receiver = ctx.endpoint(x.f, x.d), ctx.peer(x.f, x.d)
    units = f"{len(victims)} {unit}{'s' if len(victims) != 1 else ''}"
    fills = ", ".join(str(int(x.seg_frame[h.fill_i])) for h in ep if h.fill_i is not None)
    stall_ms = None
    if cause == "reordering":
        # what came before the hole opened: a silence of the whole direction is a delivery
        # stall (named, not priced here: nothing was waiting behind a hole then)
        before = x.seg_ts[: ep[0].open_i]
        if before.shape[0]:
            gap = t0 - int(before.max())
            rtt = ctx.rtt_ns(x.f)
            if gap >= max(2 * rtt if rtt else 0, REORDER_STALL_MIN_NS):
                stall_ms = gap / 1e6
        explanation = (
            f"{lost} bytes from the {sender} (stream offset {a}, Wireshark seq {a + 1}"
            + (f", {len(ep)} holes" if len(ep) > 1 else "")
            + ") arrived out of order: later data reached this capture point first"
            + (
                f" — after {stall_ms:.0f} ms in which nothing of this direction arrived at "
                "all (a delivery stall on the path, not priced here)"
                if stall_ms is not None
                else ""
            )
            + f" — and the originals filled the hole (frame {fills}, no retransmission) "
            f"{duration / 1e6:.1f} ms later. Meanwhile the {receiver} held everything behind "
            f"the hole: {units} ({nbytes} bytes) had fully arrived but could not be handed to "
            f"the application — they waited up to {vmax:.1f} ms. One episode of reordering, "
            "not a loss, and not the records' size." + _multiplex_note(ctx, x.f)
        )
        checks.append(
            "reordering, not loss: the hole was filled by the original segments (TCP "
            "timestamps, or sooner than a retransmission could come)"
        )
    else:
        explanation = (
            f"{lost} bytes from the {sender} (stream offset {a}, Wireshark seq {a + 1}"
            + (f", {len(ep)} holes" if len(ep) > 1 else "")
            + (
                ") were missing from this capture (taken at the sender) and did not reach the "
                f"{receiver} either (its ACKs stayed at the hole with SACK blocks beyond it): "
                f"for {duration / 1e6:.1f} ms it held everything behind the hole."
                if x.at_sender and method_note.startswith("first dupACK") and not gro
                else f") never reached this capture point in order: for {duration / 1e6:.1f} "
                f"ms the {receiver} held everything behind the hole."
            )
            + f" {units} ({nbytes} bytes) had fully "
            f"arrived but could not be handed to the application until frame {fills} filled "
            f"the hole — they waited up to {vmax:.1f} ms ({total:.1f} ms summed over units)."
            + _multiplex_note(ctx, x.f)
        )
    conf = 0.9 if all(h.ts_confirmed for h in ep) else 0.75
    if cause == "reordering":
        conf = 0.7
    if unit != "TLS record":
        conf -= 0.1
    return Finding(
        kind="tcp_hol_blocking",
        flow=x.f,
        dir=DIRS[x.d],
        t_start_ns=t0,
        t_end_ns=t0 + duration,
        cost_ms=duration / 1e6,
        cost_method="measured_interval",
        evidence=ev,
        vantage=ctx.vantage(x.f),
        confidence=conf,
        checks=[
            *dict.fromkeys(checks),
            f"victims are whole {unit}s that arrived behind the hole before it was filled",
        ],
        explanation=explanation,
        remedy=_REMEDY if cause == "loss" else _REMEDY_REORDERING,
        display_filter=_display_filter(ctx, x, a),
        details={
            "view": "hole_at_capture_point",
            "cause": cause,
            "stall_before_ms": stall_ms,
            "hole_offset": a,
            "hole_bytes": lost,
            "holes": [{"offset": h.a, "length": h.b - h.a} for h in ep],
            "episode_method": method_note,
            "ack_episode_ms": None if ack_ep_ns is None else ack_ep_ns / 1e6,
            "dupacks": len(dup_all),
            "unit": unit,
            "victims": len(victims),
            "victim_bytes": nbytes,
            "victim_wait_ms_max": vmax,
            "victim_wait_ms_total": total,
            "victim_wait_method": "measured_interval (readable in order − last byte arrived)",
            "victim_units": victims,
            "hit_units": hit,
            "frames_filter": frame_filter([e.frame for e in ev]),
        },
    )


def _ack_stream_episodes(
    ctx: DetectContext,
    x: _Dir,
    covered: list[tuple[int, int]],
    d_y: int | None,
    frac: float,
    min_episode_ms: float,
) -> list[Finding]:
    """Sender-side view: dupACK period at h, a retransmission of h, the ACK that jumps."""
    out: list[Finding] = []
    n = x.y_idx.shape[0]
    if n < 2:
        return out
    same = np.zeros(n, bool)
    same[1:] = x.y_ack[1:] == x.y_ack[:-1]
    dup = same & x.y_pure
    if x.sack_ok:
        dup &= x.y_sack > 0
    else:  # Wireshark's rule without SACK: same ack and same window (packet-tcp.c)
        wsame = np.zeros(n, bool)
        wsame[1:] = x.y_win[1:] == x.y_win[:-1]
        dup &= wsame
    if not dup.any():
        return out
    # each ACK value's first index (the first ACK that reached it), and the running
    # maximum: the first ACK past h after k0 is a search of it when no ACK before k0
    # went past h already (cumulative ACKs: the usual case)
    ack_vals, ack_first = np.unique(x.y_ack, return_index=True)
    top = np.maximum.accumulate(x.y_ack)
    # the first dupACK at each value h, in order
    kd = np.nonzero(dup)[0]
    _, first = np.unique(x.y_ack[kd], return_index=True)
    k0s = kd[np.sort(first)]
    hs = x.y_ack[k0s]
    seen = np.zeros(hs.shape[0], bool)
    for a, b in covered:
        seen |= (hs >= a) & (hs < b)  # the capture point saw this hole itself: handled above
    for k0, h in zip(k0s[~seen].tolist(), hs[~seen].tolist(), strict=True):
        if top[k0] <= h:
            kj = int(np.searchsorted(top, h, side="right"))
            if kj >= n:
                continue  # the episode never ended in the capture
        else:
            after = x.y_ack[k0 + 1 :] > h
            if not after.any():
                continue  # the episode never ended in the capture
            kj = k0 + 1 + int(np.argmax(after))
        t_h0, t_h1 = int(x.y_ts[k0]), int(x.y_ts[kj])
        dups = k0 + np.nonzero(dup[k0:kj] & (x.y_ack[k0:kj] == h))[0]
        # the first ACK that reached h: the data after it is what Y reports out of order
        f_reach = int(x.y_frame[ack_first[np.searchsorted(ack_vals, h)]])
        f_jump = int(x.y_frame[kj])
        cover = np.nonzero((x.seg_off <= h) & (x.seg_end > h))[0]
        rx = [
            j
            for j in cover.tolist()
            if f_reach < x.seg_frame[j] < f_jump and x.seg_kind[j] in _RETX_KINDS
        ]
        if not rx:
            continue  # no retransmission: Y's ACK jumped on its own (reordering)
        j = rx[-1]
        if x.seg_kind[j] == "spurious_retransmission":
            continue
        t_rx = int(x.seg_ts[j])
        checks = [
            f"loss, not reordering: {dups.shape[0]} dupACKs pinned at the hole, then a "
            f"retransmission (frame {int(x.seg_frame[j])}) before the ACK moved past it"
        ]
        if d_y is not None and d_y > 0:
            if t_h1 - t_rx < frac * d_y:
                continue  # the jump came too soon to be the copy's doing: original was late
            checks.append(
                f"the ACK jump came {(t_h1 - t_rx) / 1e6:.1f} ms after the retransmission, "
                f"≥ {frac:g} × the {d_y / 1e6:.1f} ms round trip to the receiver"
            )
        duration = t_h1 - t_h0
        if duration / 1e6 < min_episode_ms:
            continue
        hole_end = int(x.seg_end[j])
        orig = [i for i in cover.tolist() if x.seg_frame[i] < x.seg_frame[j]]
        victims = _victims_at_sender(ctx, x, hole_end, t_rx, t_h1, d_y)
        if not victims["units"]:
            continue  # nothing complete reached Y behind the hole: no unit was blocked
        # cross-check from the data direction (X → P, also unbiased by the vantage): the
        # first segment sent behind the lost one → the retransmission.  The two agree unless
        # one path direction's delay changed during the episode (queueing, a stalled hop)
        conf = 0.8
        send_side = None
        caveats: list[str] = []
        if orig:
            behind = np.nonzero(
                (x.seg_frame > x.seg_frame[orig[0]]) & (x.seg_off >= hole_end) & (x.seg_ts < t_rx)
            )[0]
            if behind.shape[0]:
                send_side = t_rx - int(x.seg_ts[behind[0]])
        if send_side is not None and send_side > 0:
            ratio = (t_h1 - t_h0) / send_side
            if 0.8 <= ratio <= 1.25:
                checks.append(
                    f"the data direction agrees: first segment sent behind the hole → "
                    f"retransmission {send_side / 1e6:.1f} ms"
                )
            else:
                conf = 0.6
                caveats.append(
                    f"the data direction disagrees ({send_side / 1e6:.1f} ms from the first "
                    "segment behind the hole to the retransmission): one direction's path delay "
                    "changed during the episode, so the ACK-stream duration is uncertain"
                )
        ev: list[Evidence] = []
        if orig:
            ev.append(Evidence(int(x.seg_frame[orig[0]]), "lost_original", int(x.seg_ts[orig[0]])))
        for k in dups[:MAX_DUPACK_FRAMES].tolist():
            ev.append(Evidence(int(x.y_frame[k]), "dupack", int(x.y_ts[k])))
        ev.append(Evidence(int(x.seg_frame[j]), "retransmission", t_rx))
        ev.append(Evidence(f_jump, "ack_past_hole", t_h1))
        vframes: dict[int, int] = {}
        for u in sorted(victims["units"], key=lambda u: -(u["wait_ms"] or 0.0)):
            if len(vframes) >= MAX_VICTIM_FRAMES:
                break
            vframes.setdefault(u["sent_frame"], u["sent_ns"])
        for fr, ts in sorted(vframes.items()):
            ev.append(Evidence(fr, "victim", ts))
        sender, receiver = ctx.endpoint(x.f, x.d), ctx.peer(x.f, x.d)
        nv = len(victims["units"])
        unit = victims["unit"]
        est = (
            f" An estimated {nv} {unit}{'s' if nv != 1 else ''} sent behind the hole had "
            f"reached the receiver before the retransmission and waited up to "
            f"{victims['max_ms']:.1f} ms."
            if nv and victims["max_ms"] is not None
            else f" {victims['sent_behind']} bytes sent behind the hole waited with it."
        )
        out.append(
            Finding(
                kind="tcp_hol_blocking",
                flow=x.f,
                dir=DIRS[x.d],
                t_start_ns=t_h0,
                t_end_ns=t_h1,
                cost_ms=duration / 1e6,
                cost_method="measured_interval",
                evidence=ev,
                vantage=ctx.vantage(x.f),
                confidence=conf,
                checks=checks,
                explanation=(
                    f"A segment the {sender} sent (stream offset {h}, Wireshark seq {h + 1}) "
                    f"was lost before reaching the {receiver}: its ACKs stayed at that byte "
                    f"for {duration / 1e6:.1f} ms ({dups.shape[0]} dupACKs reporting data "
                    f"behind the hole) until the retransmission in frame {int(x.seg_frame[j])} "
                    f"filled it; meanwhile nothing behind the hole could be delivered."
                    + est
                    + _multiplex_note(ctx, x.f)
                ),
                remedy=_REMEDY,
                display_filter=_display_filter(ctx, x, h),
                details={
                    "view": "ack_stream",
                    "hole_offset": h,
                    "hole_bytes": hole_end - h,
                    "episode_method": "first dupACK → first ACK past the hole (both Y → P)",
                    "dupacks": int(dups.shape[0]),
                    "unit": unit,
                    "victims": nv,
                    "victim_wait_ms_max": victims["max_ms"],
                    "victim_wait_ms_total": victims["total_ms"],
                    "victim_wait_method": "estimate (t_jump − t_sent − d_Y)",
                    "victim_units": victims["units"],
                    "bytes_sent_behind_hole": victims["sent_behind"],
                    "send_side_hole_ms": None if send_side is None else send_side / 1e6,
                    "caveats": caveats,
                    "frames_filter": frame_filter([e.frame for e in ev]),
                },
            )
        )
    return out


def _victims_at_sender(
    ctx: DetectContext, x: _Dir, hole_end: int, t_rx: int, t_h1: int, d_y: int | None
) -> dict[str, Any]:
    """Units sent behind the hole that reached Y before the fill (estimated at P = X)."""
    sent = (x.seg_off >= hole_end) & (x.seg_ts < t_rx) & x.seg_new
    behind = int((x.seg_end[sent] - x.seg_off[sent]).sum()) if sent.any() else 0
    units: list[dict[str, Any]] = []
    recs = ctx.rec_arrays(x.f, x.d)
    if recs["flow"].shape[0]:
        unit = "TLS record"
        off = recs["offset"]
        ln = recs["length"]
        lb_ts = recs["last_byte_ts_ns"]
        lb_fr = recs["last_byte_frame"]
        sel = np.nonzero((off >= hole_end) & (lb_ts < t_rx))[0]
        rows = [(int(off[k]), int(ln[k]), int(lb_fr[k]), int(lb_ts[k])) for k in sel.tolist()]
    else:
        unit = "write (PSH-terminated segment)"
        sel = np.nonzero(sent & x.seg_psh)[0]
        rows = [
            (
                int(x.seg_off[k]),
                int(x.seg_end[k] - x.seg_off[k]),
                int(x.seg_frame[k]),
                int(x.seg_ts[k]),
            )
            for k in sel.tolist()
        ]
    waits = []
    for o, ln_, fr, ts in rows:
        # sent before the retransmission (rows are), so it reached Y before the fill and
        # waited ≥ t_rx − ts there (module doc): the cross-direction estimate is floored
        w = None if d_y is None else max(t_h1 - ts - d_y, t_rx - ts) / 1e6
        units.append({"offset": o, "length": ln_, "sent_frame": fr, "sent_ns": ts, "wait_ms": w})
        if w is not None:
            waits.append(w)
    return {
        "unit": unit,
        "units": units,
        "sent_behind": behind,
        "max_ms": max(waits) if waits else None,
        "total_ms": sum(waits) if waits else None,
    }

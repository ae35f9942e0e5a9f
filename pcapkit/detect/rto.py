"""Retransmission timeouts and dead connections: ``rto_stall``, ``connection_dead``
(issue 22).

Mechanism.  A sender repairs a loss in one of two ways.  Fast: the receiver's duplicate
ACKs / SACK blocks reach it and it retransmits about one round trip after the loss (RFC
5681 §3.2, RFC 6675, RACK, RFC 8985), or a tail-loss probe fires two round trips after
the last send with several segments in flight.  Or by a timer: with nothing coming back —
a lost tail (and its probe), too few later segments to report the hole, a lost fast
retransmission, lost ACK clocking — only the retransmission timer repairs it (RFC 6298:
RTO = SRTT + max(G, 4·RTTVAR), Linux floors the variance term at ``TCP_RTO_MIN`` = 200 ms;
a probe with one segment in flight waits 2·SRTT + 200 ms), doubling on every expiry (§5.5).
If the peer never answers the sender gives up (Linux ``tcp_retries2``: ~15 doublings,
about 15 minutes by default; other stacks reset after 5 tries or a fixed time).

Signature (one flow direction X → Y, any vantage):

* an **episode** is the retransmissions of one stream offset ``h`` (a timer always resends
  from the first unacknowledged byte, so every copy of a backing-off series starts at h);
* a copy is **timer-driven** when nothing from Y reached X for at least ``TCP_RTO_MIN``
  before it left (the last Y packet seen at P more than d_X + that floor earlier, §1.1:
  what reaches X shows at P d_X before X's reaction), at least that floor after the
  original where P saw it (the timer is armed no earlier), and it resends the first byte Y
  had not acknowledged — a dupACK-triggered repair leaves X d_X after the dupACK, a tail-loss
  probe with several segments in flight resends the *last* segment;
* the episode was **repaired** by the last copy before Y's cumulative ACK passed h, if
  that ACK came at least ½ d_Y after it at P (the copy could have caused it); an ACK past
  h sooner than that (or before the first copy) says the original arrived: a spurious
  retransmission, no stall (the receiver had the data in time);
* ``rto_stall``: the repairing copy was timer-driven.  Cost = t(repairing copy) −
  t(first sight of the lost bytes at P: the original, or — at a receiver-side capture
  that never saw it — the first segment after the hole), two packets of one direction,
  unbiased by the vantage; the receiver got those bytes that much later;
* ``connection_dead``: ≥ ``min_retransmissions`` timer-driven copies of h with backoff
  (each gap ≥ ``backoff_min_ratio`` × the one before) and no progress after the last of
  them — X never heard Y's acknowledgment (lost, or a dead path from Y to X: at Y's side
  the copies arrive as retransmissions of data Y had acknowledged) until a RST, the
  connection's last packet or the capture's end.  Cost = from the first send of h to
  then: the time until the connection was given up (a lower bound when the capture ends
  first).

What each vantage sees: the sender sees the original, every copy and the ACKs; a receiver
sees a hole (a lost original with later data after it) and its fill — but not a lost tail
with nothing after it: the late bytes arrive as new data, indistinguishable there from a
sender that wrote late (the wait then shows as unexplained in the request timeline, never
as server time).  A copy lost before P is invisible to P.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..net.decode import RST
from .base import Evidence, Finding
from .constants import JIFFY_HZ100_NS, MS, TCP_RTO_MIN_NS
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import DirView, refined_legs_ns
from .waits import request_waiting, request_words, tcp_options

SPEC = DetectorSpec(
    kinds=(
        Kind("rto_stall", "L2", "issue 22; RFC 6298 §5, RFC 8985 §7", holds=True),
        Kind("connection_dead", "L3", "issue 22; RFC 6298 §5.5, RFC 1122 §4.2.3.5", holds=True),
    ),
    thresholds=(
        Threshold(
            "rto_min_ms",
            "ms",
            "Linux TCP_RTO_MIN = HZ/5 (include/net/tcp.h): no retransmission timer fires "
            "sooner than this after the last packet from the peer (less one HZ=100 jiffy)",
        ),
        Threshold(
            "min_retransmissions",
            "count",
            "RFC 6298 §5.5 backoff: three timer expiries in a row without an answer (1 + 2 + 4 "
            "RTOs ≥ 1.4 s) is no burst of loss but a peer that does not hear us (judgement; "
            "RFC 1122 §4.2.3.5 R1 = 3 retransmissions before telling IP)",
        ),
        Threshold(
            "backoff_min_ratio",
            "ratio",
            "RFC 6298 §5.5: the timer doubles on each expiry; 1.4 leaves room for timer "
            "granularity (judgement)",
        ),
        Threshold(
            "ack_min_rtt_fraction",
            "fraction",
            "a copy can cause an ACK at P no sooner than the round trip P ↔ receiver; ½ "
            "leaves room for jitter (as tcp_hol_blocking's loss_min_rtt_fraction)",
            maximum=1.0,
        ),
    ),
)
KINDS = SPEC.kind_names

RTO_FLOOR_NS = TCP_RTO_MIN_NS - JIFFY_HZ100_NS
MIN_RETRANSMISSIONS = 3
BACKOFF_MIN_RATIO = 1.4
ACK_MIN_RTT_FRACTION = 0.5
MAX_COPY_FRAMES = 12  # evidence: enough copies to see the backoff, not every one

_RETX = ("retransmission", "out_of_order", "spurious_retransmission")
_ORIGINAL = ("new", "prev_not_captured")


@dataclass
class Episode:
    """The copies of one stream offset ``h`` of one direction."""

    h: int
    copies: list[int]  # segment positions (DirView), frame order
    t_first: int  # first sight of the bytes at P (original, or the hole's opening)
    first_j: int | None  # the original's segment position (None: never seen at P)
    first_role: str
    open_j: int | None = None  # at a receiver: the first segment after the hole
    timer: list[bool] = field(default_factory=list)
    silence: list[int] = field(default_factory=list)  # ns of Y silence at X before each copy
    ack_k: int | None = None  # position in y_idx of Y's first ACK past h
    repaired_by: int | None = None  # index into copies
    spurious: bool = False
    eifel: bool = False  # spurious by the ACK's TSecr (RFC 3522)


def detect(
    ctx: DetectContext,
    *,
    rto_min_ms: float = RTO_FLOOR_NS / MS,
    min_retransmissions: int = MIN_RETRANSMISSIONS,
    backoff_min_ratio: float = BACKOFF_MIN_RATIO,
    ack_min_rtt_fraction: float = ACK_MIN_RTT_FRACTION,
) -> list[Finding]:
    out: list[Finding] = []
    s = ctx.segments
    if s.empty:
        return out
    kind = s["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):  # codes: no text per segment
        retx = np.nonzero(kind.cat.categories.isin(list(_RETX)))[0]
        hit = np.isin(kind.cat.codes.to_numpy(), retx)
    else:
        hit = np.isin(kind.astype(str).to_numpy(), _RETX)
    if not hit.any():
        return out
    fl = s["flow"].to_numpy(np.int64)[hit]
    dd = s["dir"].cat.codes.to_numpy(np.int64)[hit]
    tcp = set(ctx.tcp_flows())
    for f, d in sorted({(int(a), int(b)) for a, b in zip(fl, dd, strict=True) if int(a) in tcp}):
        out.extend(
            _direction(
                ctx,
                f,
                d,
                floor=int(rto_min_ms * MS),
                min_rtx=min_retransmissions,
                ratio=backoff_min_ratio,
                frac=ack_min_rtt_fraction,
            )
        )
    return out


def _episodes(v: DirView) -> list[Episode]:
    k = v.s_kind
    rx = np.nonzero(
        ((k == "retransmission") | (k == "out_of_order") | (k == "spurious_retransmission"))
        & (v.s_len > 0)
    )[0]
    by_h: dict[int, list[int]] = {}
    for j in rx.tolist():
        by_h.setdefault(int(v.s_off[j]), []).append(j)
    # first sightings: X's new segments in frame order carry increasing offsets, so the
    # segment that first carried byte h (or the first one beyond a hole at h) is a binary
    # search away
    first = np.nonzero((k == "new") | (k == "prev_not_captured"))[0]
    f_off, f_end = v.s_off[first], v.s_end[first]
    f_endmax = np.maximum.accumulate(f_end) if first.shape[0] else f_end
    eps = []
    for h, js in sorted(by_h.items(), key=lambda kv: kv[1][0]):
        j1 = js[0]
        q = int(np.searchsorted(f_endmax, h, side="right"))  # first new segment ending past h
        if q < first.shape[0] and int(first[q]) < j1:
            j0 = int(first[q])
            if int(f_off[q]) <= h:
                eps.append(Episode(h, js, int(v.s_ts[j0]), j0, "original"))
            else:  # never seen at P: a hole (later data arrived first), timed from its opening
                eps.append(Episode(h, js, int(v.s_ts[j0]), None, "hole", open_j=j0))
    return eps


def _ts_before(a: int, b: int) -> bool:
    """TSval a is earlier than b (RFC 7323 §5.2 modular comparison)."""
    return 0 < ((b - a) & 0xFFFFFFFF) < 0x80000000


def _classify(ctx: DetectContext, v: DirView, ep: Episode, floor: int, frac: float) -> None:
    p = v.p
    tol = v.tolerance()
    for j in ep.copies:
        t = int(v.s_ts[j])
        k = v.last_y_reaching(t, tol)
        # silence at X before this copy left: since the last packet from Y reached it
        silence = t - int(v.y_ts[k]) - v.d_x if k is not None else t - ep.t_first
        # the first unacknowledged byte: a timer resends from snd_una (Y's cumulative ACK
        # as X knew it); a copy beyond it is a probe of the tail or a SACK repair
        una = int(v.y_ackmax[k]) if k is not None else 0
        ep.silence.append(silence)
        # and no timer expires sooner than the floor after the bytes were first sent (it is
        # armed, or restarted, no earlier): where P saw the original, a copy sooner than
        # that is a probe or a fast repair, whatever the silence before it
        soon = ep.first_j is not None and t - ep.t_first < floor
        ep.timer.append(silence >= floor and not soon and int(v.s_off[j]) <= max(una, 0))
    # Y's first cumulative ACK past h (after the first sight of the bytes)
    first_frame = int(v.s_frame[ep.copies[0]]) if ep.first_j is None else int(v.s_frame[ep.first_j])
    pos0 = int(np.searchsorted(v.y_idx, np.searchsorted(p.frame, first_frame), side="right"))
    k = max(int(np.searchsorted(v.y_ackmax, ep.h, side="right")), pos0)
    if k >= v.y_ack.shape[0]:
        return
    if int(v.y_ack[k]) <= ep.h:  # an older ACK reordered behind: look on from there
        past = np.nonzero(v.y_ack[k:] > ep.h)[0]
        if not past.shape[0]:
            return
        k += int(past[0])
    ep.ack_k = k
    t_ack = int(v.y_ts[k])
    i_ack = int(v.y_idx[k])
    cand = [n for n, j in enumerate(ep.copies) if int(v.s_pi[j]) < i_ack]
    if not cand:
        ep.spurious = True  # acknowledged before any copy: the original arrived
        return
    # the last copy that could have caused the ACK (≥ frac·d_Y before it at P)
    need = frac * v.d_y
    ok = [n for n in cand if t_ack - int(v.s_ts[ep.copies[n]]) >= need]
    if not ok:
        ep.spurious = True  # the ACK came too soon for any copy: the original arrived late
        return
    ep.repaired_by = ok[-1]
    # Eifel (RFC 3522): the ACK echoes the TSval of the segment that made it; one older
    # than the repairing copy's was caused by an earlier transmission — the original
    # arrived, the copy was spurious (the ACKs were late, not the data)
    opts = tcp_options(ctx)
    rep = ep.copies[ep.repaired_by]
    ecr = int(opts.ecr(np.array([p.frame[i_ack]]))[0])
    tsv = int(opts.ts(np.array([v.s_frame[rep]]))[0])
    if ecr >= 0 and tsv >= 0 and ecr != tsv and _ts_before(ecr, tsv):
        ep.repaired_by = None
        ep.spurious = True
        ep.eifel = True


def _end_of_connection(
    v: DirView, after_i: int, t_last: int, last_gap: int, capture_end: int
) -> tuple[int | None, int, str, str]:
    """(packet index or None, ts, how, cost method) where the connection was given up after
    X's last copy (packet ``after_i``): a RST; else X's next timer expiry, one doubled
    interval after its last copy (RFC 6298 §5.5) — a sender gives up at an expiry, and no
    copy came then: measured when the capture goes on past it, else an estimate."""
    p = v.p
    later = np.arange(after_i + 1, p.frame.shape[0])
    rst = later[(p.flags[later] & RST) != 0]
    if rst.shape[0]:
        i = int(rst[0])
        return (
            i,
            int(p.ts[i]),
            f"a RST from the {'client' if p.dir[i] == 0 else 'server'}",
            ("measured_interval"),
        )
    t_next = t_last + 2 * last_gap
    if capture_end >= t_next:
        return (
            None,
            t_next,
            "its next retransmission timeout, when no copy came",
            ("measured_interval"),
        )
    return (
        None,
        t_next,
        ("its next retransmission timeout (estimated: the capture ends before it)"),
        "estimate",
    )


def _direction(
    ctx: DetectContext, f: int, d: int, *, floor: int, min_rtx: int, ratio: float, frac: float
) -> list[Finding]:
    v = DirView.build(ctx, f, d)
    if not v.legs_known:
        dc, ds = refined_legs_ns(ctx, f)
        if dc is None and ds is None:
            return []  # no legs at all: when Y's packets reached X is unknown (§1.1)
    # a quick look first: without one copy that left after ≥ floor of silence from Y, no
    # episode here can be a timeout's (every fast repair on a busy bulk flow ends here)
    k = v.s_kind
    rx = np.nonzero(
        ((k == "retransmission") | (k == "out_of_order") | (k == "spurious_retransmission"))
        & (v.s_len > 0)
    )[0]
    if not rx.shape[0] or not v.y_ts.shape[0]:
        return []
    t_rx = v.s_ts[rx].astype(np.int64)
    ky = v.last_y_reaching_all(t_rx, v.tolerance())
    silence = np.where(ky >= 0, t_rx - v.y_ts[np.maximum(ky, 0)] - v.d_x, floor)
    if not (silence >= floor).any():
        return []
    out: list[Finding] = []
    used: set[int] = set()
    eps = _episodes(v)
    for ep in eps:
        _classify(ctx, v, ep, floor, frac)
    for ep in eps:
        if ep.copies[0] in used:
            continue
        dead = _dead(ctx, v, ep, min_rtx, ratio)
        if dead is not None:
            out.append(dead)
            used.update(ep.copies)
            continue
        if ep.repaired_by is None or ep.spurious or not ep.timer[ep.repaired_by]:
            continue
        rest = _recovery_copies(v, ep)
        out.append(_rto_finding(ctx, v, ep, rest))
        used.update(ep.copies)
        used.update(rest)
    return out


def _dead(
    ctx: DetectContext, v: DirView, ep: Episode, min_rtx: int, ratio: float
) -> Finding | None:
    """A backing-off series of timer-driven copies that nothing answered."""
    p = v.p
    n = len(ep.copies)
    if n < min_rtx or ep.repaired_by is not None:
        return None
    # the copies that form the series: timer-driven, each gap ≥ ratio × the one before
    # (the first timer copy may follow a fast retransmission)
    first = next((k for k in range(n) if ep.timer[k]), None)
    if first is None:
        return None
    series = ep.copies[first:]
    if len(series) < min_rtx or not all(ep.timer[first:]):
        return None
    ts = v.s_ts[np.array(series)].astype(np.int64)
    gaps = np.diff(ts)
    if gaps.shape[0] >= 2 and not np.all(gaps[1:] >= ratio * gaps[:-1]):
        return None
    last = series[-1]
    i_last = int(v.s_pi[last])
    # no progress after the last copy: X sent no new data beyond, Y's ACK never passed h
    # after it (an ACK past h that X had before the series did not reach it either)
    later_x = np.nonzero((v.s_ts > ts[-1]) & (v.s_off > ep.h) & np.isin(v.s_kind, _ORIGINAL))[0]
    if later_x.shape[0]:
        return None
    if ep.ack_k is not None and int(v.y_idx[ep.ack_k]) > i_last:
        return None
    capture_end = int(ctx.packets["ts_ns"].max())
    i_end, t_end, how, method = _end_of_connection(
        v, i_last, int(ts[-1]), int(gaps[-1]) if gaps.shape[0] else 0, capture_end
    )
    acked_before = bool(ep.spurious)
    sender, receiver = ctx.endpoint(v.f, v.d), ctx.peer(v.f, v.d)
    t0 = ep.t_first
    cost = t_end - t0
    ev = _first_evidence(v, ep)
    for j in series[:MAX_COPY_FRAMES]:
        ev.append(Evidence(int(v.s_frame[j]), "timed-out retransmission", int(v.s_ts[j])))
    if len(series) > MAX_COPY_FRAMES:
        j = series[-1]
        ev.append(Evidence(int(v.s_frame[j]), "timed-out retransmission", int(v.s_ts[j])))
    if i_end is not None:
        ev.append(Evidence(int(p.frame[i_end]), "reset", t_end))
    spacing = ", ".join(f"{g / MS:.0f}" for g in gaps[:8])
    req = request_waiting(ctx, v.f, t0)
    who = request_words(req)
    why = (
        f"the {receiver} had acknowledged these bytes (its ACKs passed this capture point) but "
        f"the {sender} never heard it: the path from the {receiver} to the {sender} was dead"
        if acked_before
        else f"no acknowledgment from the {receiver} came back"
    )
    explanation = (
        f"The {sender} sent the bytes at stream offset {ep.h} (Wireshark seq {ep.h + 1}) "
        f"{len(series) + (0 if ep.first_j is None else 1)} times: after the first, "
        f"{len(series)} retransmission timeouts with exponential backoff ({spacing} ms "
        f"apart) — {why}. The connection made no progress for {cost / MS:.0f} ms until "
        f"{how}"
        + (": it was given up." if how.startswith("RST") else ".")
        + (f" It was carrying {who}." if who else "")
    )
    return Finding(
        kind="connection_dead",
        request=None if req is None else req["id"],
        flow=v.f,
        dir=DIRS[v.d],
        t_start_ns=t0,
        t_end_ns=t_end,
        cost_ms=cost / MS,
        cost_method=method,
        evidence=ev,
        vantage=ctx.vantage(v.f),
        confidence=0.85,
        checks=[
            f"{len(series)} copies of the same bytes, each after ≥ "
            f"{min(ep.silence[first:]) / MS:.0f} ms with nothing from the {receiver} reaching "
            f"the {sender}: retransmission timeouts, not fast retransmits",
            "exponential backoff: each timeout at least "
            f"{min((gaps[1:] / gaps[:-1]).tolist() or [2.0]):.1f}× the one before",
            "no progress after the last copy: no new data, no acknowledgment past the bytes",
        ],
        explanation=explanation,
        remedy=(
            "Something on the path stopped passing this connection's packets (a NAT or "
            "firewall that dropped its state, a failed link, a peer that vanished). Detect "
            "it sooner and reconnect: application-level timeouts or HTTP/2 PING, TCP "
            "keep-alive, TCP_USER_TIMEOUT (RFC 5482) or a lower net.ipv4.tcp_retries2 "
            "instead of the default ~15 minutes, and retry idempotent requests on a new "
            "connection."
        ),
        display_filter=_filter(ctx, v, ep.h),
        details={
            "offset": ep.h,
            "retransmissions": len(series),
            "intervals_ms": [round(g / MS, 3) for g in gaps.tolist()],
            "ended_by": how,
            "acked_at_capture_point": acked_before,
            "request": req,
        },
    )


def _first_evidence(v: DirView, ep: Episode) -> list[Evidence]:
    if ep.first_j is not None:
        j = ep.first_j
        return [Evidence(int(v.s_frame[j]), "original", int(v.s_ts[j]))]
    assert ep.open_j is not None
    j0 = ep.open_j
    return [Evidence(int(v.s_frame[j0]), "hole", int(v.s_ts[j0]))]


def _recovery_copies(v: DirView, ep: Episode) -> list[int]:
    """After a timeout the sender resends, ACK-clocked from a window of one segment, all it
    had outstanding when the timer fired (RFC 6298 §5.4, RFC 5681 §3.1): the copies of
    bytes in [h, recovery point) sent after the repairing one, that Y had not acknowledged
    when they left, until Y's ACK reached the recovery point — the same episode."""
    assert ep.repaired_by is not None
    rep = ep.copies[ep.repaired_by]
    rp = int(v.s_end[:rep].max()) if rep > 0 else int(v.s_end[rep])
    later = np.nonzero(
        (np.arange(v.s_frame.shape[0]) > rep)
        & np.isin(v.s_kind, _RETX)
        & (v.s_off > ep.h)
        & (v.s_off < rp)
    )[0]
    done = np.nonzero(v.y_ackmax >= rp)[0]
    i_done = int(v.y_idx[done[0]]) if done.shape[0] else None
    out = []
    for j in later.tolist():
        if i_done is not None and int(v.s_pi[j]) > i_done:
            break
        k = int(np.searchsorted(v.y_idx, v.s_pi[j])) - 1
        una = int(v.y_ackmax[k]) if k >= 0 else 0
        if int(v.s_off[j]) >= una:  # still needed when it left
            out.append(j)
    return out


def _rto_finding(ctx: DetectContext, v: DirView, ep: Episode, rest: list[int]) -> Finding:
    assert ep.repaired_by is not None
    p = v.p
    rep = ep.copies[ep.repaired_by]
    last = rest[-1] if rest else rep
    t_rep = int(v.s_ts[last])
    t0 = ep.t_first
    cost = t_rep - t0
    ev = _first_evidence(v, ep)
    for n, j in enumerate(ep.copies[: ep.repaired_by + 1]):
        role = "timed-out retransmission" if ep.timer[n] else "retransmission"
        if n == ep.repaired_by:
            role = "repairing retransmission (timer)"
        ev.append(Evidence(int(v.s_frame[j]), role, int(v.s_ts[j])))
    for j in rest[:MAX_COPY_FRAMES]:
        ev.append(
            Evidence(int(v.s_frame[j]), "retransmission in the timeout's recovery", int(v.s_ts[j]))
        )
    if ep.ack_k is not None:
        k = ep.ack_k
        ev.append(Evidence(int(p.frame[v.y_idx[k]]), "ACK past the bytes", int(v.y_ts[k])))
    sender, receiver = ctx.endpoint(v.f, v.d), ctx.peer(v.f, v.d)
    lost = ep.repaired_by  # copies before the repairing one were lost too
    sil = ep.silence[ep.repaired_by]
    # which timer: the first unacknowledged byte resent after the last packet sent by X
    # with nothing in flight beyond it is a probe with one segment in flight, or the RTO
    seen = "its original" if ep.first_j is not None else "the data after it (a hole)"
    tail = (
        " Nothing was sent after them that could have revealed the hole (a tail loss)."
        if _nothing_after(v, ep)
        else ""
    )
    req = request_waiting(ctx, v.f, t_rep)
    who = request_words(req)
    more = (
        f" After the timeout it resent the rest of what it had outstanding one round trip at a "
        f"time ({len(rest)} more copies, the last in frame {int(v.s_frame[last])})."
        if rest
        else ""
    )
    again = (
        f" — and so {'were' if lost > 1 else 'was'} {lost} "
        f"retransmission{'s' if lost > 1 else ''} of them"
        if lost
        else ""
    )
    # Y's duplicate ACKs at h before the repair: the hole was reported; a fast repair, if
    # one was sent, never arrived (at this vantage perhaps never seen)
    dup = (v.y_ack == ep.h) & ~v.y_data & (v.y_ts > t0) & (v.y_ts < int(v.s_ts[rep]))
    ndup = int(dup.sum())
    if ndup and not lost:
        told = (
            f"The {receiver} reported the hole ({ndup} duplicate ACK"
            f"{'s' if ndup > 1 else ''}), but no repair it triggered arrived (a fast "
            "retransmission lost on the way, unseen here), and then nothing more came back"
        )
    elif lost:
        told = f"Nothing more came back from the {receiver} to report the lost copy"
    else:
        told = f"Nothing came back from the {receiver} to report the loss"
    explanation = (
        f"Bytes from the {sender} at stream offset {ep.h} (Wireshark seq {ep.h + 1}) were "
        f"lost{again}. "
        + told
        + f" (no new duplicate ACKs or SACK blocks), so only the {sender}'s retransmission "
        "timer could repair it: "
        f"{sil / MS:.0f} ms with nothing from the {receiver}, then the copy in frame "
        f"{int(v.s_frame[rep])}, {(int(v.s_ts[rep]) - t0) / MS:.0f} ms after this capture "
        f"point first saw {seen}.{tail}{more} The {receiver} got the lost bytes "
        f"{cost / MS:.0f} ms late" + (f" — {who} waited." if who else ".")
    )
    checks = [
        f"timer, not fast recovery: nothing from the {receiver} reached the {sender} for "
        f"{sil / MS:.0f} ms before the copy (≥ the {TCP_RTO_MIN_NS / MS:.0f} ms RTO floor), "
        "and it resent the first unacknowledged byte",
        "not spurious: the acknowledgment past the bytes came after the copy could have "
        "reached the receiver",
    ]
    return Finding(
        kind="rto_stall",
        request=None if req is None else req["id"],
        flow=v.f,
        dir=DIRS[v.d],
        t_start_ns=t0,
        t_end_ns=t_rep,
        cost_ms=cost / MS,
        cost_method="measured_interval",
        evidence=ev,
        vantage=ctx.vantage(v.f),
        confidence=0.85 if ep.first_j is not None else 0.8,
        checks=checks,
        explanation=explanation,
        remedy=(
            "The loss is on the path; what made it expensive is that nothing followed it to "
            "report it. Keep RACK-TLP on (Linux default: net.ipv4.tcp_early_retrans = 3) so a "
            "lost tail is probed after two round trips instead of an RTO; avoid ending a "
            "response with a lone small segment after an idle period (send the tail with the "
            "rest, or let the application ping); on lossy paths (radio) prefer QUIC, whose "
            "probe timeout needs no duplicate ACKs."
        ),
        display_filter=_filter(ctx, v, ep.h),
        details={
            "offset": ep.h,
            "first_seen": "original" if ep.first_j is not None else "hole",
            "copies_lost": lost,
            "dupacks_before_repair": ndup,
            "recovery_copies": len(rest),
            "silence_ms": round(sil / MS, 3),
            "tail_loss": bool(tail),
            "request": req,
        },
    )


def _nothing_after(v: DirView, ep: Episode) -> bool:
    """No later data of X reached P (or the receiver) between the original and the
    repair: a tail loss."""
    rep = ep.copies[ep.repaired_by or 0]
    t_rep = int(v.s_ts[rep])
    if ep.first_j is None:
        return False  # a hole at P: later data arrived
    later = (v.s_off > ep.h) & (v.s_ts > ep.t_first) & (v.s_ts < t_rep)
    return not bool((later & np.isin(v.s_kind, _ORIGINAL)).any())


def _filter(ctx: DetectContext, v: DirView, h: int) -> str:
    r = ctx.flow(v.f)
    return (
        f"tcp.stream == {int(r.stream)} && (tcp.analysis.retransmission || "
        f"tcp.analysis.rto || tcp.seq == {h + 1})"
    )

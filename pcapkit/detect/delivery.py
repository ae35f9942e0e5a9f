"""Delivery stalls: ``delivery_stall`` (issue 22).

Mechanism: the path stops delivering a direction for many round trips while the sender
keeps (or has) data in flight — a radio outage, a handover, a middlebox or a queue that
holds packets — and then delivers the backlog at once, often out of order.  Nothing is
lost, so no retransmission repairs anything and no loss detector fires; the receiving
application simply gets nothing, then everything.  The cause is not on the wire; the
wait is.

Signature at a capture point downstream of the stall (the receiver, a middle box past it):

* **TCP timestamps** (RFC 7323 §3: TSval is the sender's clock when it sent the segment):
  the first segment after a silence of the direction was *sent* much earlier than it
  arrived — its TSval advanced by far less than the arrival gap.  Lateness = arrival gap −
  TSval gap (the sender's clock in ms, its rate estimated from the flow, rounded to the
  usual 1 kHz / 250 Hz / 100 Hz / 10 Hz clocks).  A sender that wrote late (server think
  time) advances its TSval with the gap: no lateness.  A retransmission carries a fresh
  TSval: a loss repaired late is not a stall (rto_stall's).  The segment after the silence
  must continue what the capture point had seen, and the receiver must have acknowledged
  nothing the capture missed meanwhile: a capture that drops packets shows the first and
  a late segment of one burst paced by a bottleneck (same TSval), which is no stall.
* **reordering after a silence** (with or without timestamps): the hole that tcp_hol_blocking reports
  as filled by the late *originals* (``cause = reordering``) right after a silence of the
  whole direction (its ``stall_before_ms``): the data was in flight during the silence.

Episode and cost (one finding per episode, the reordering that followed it included):
from the last arrival before the silence to the end of the catch-up (the hole's fill);
cost = the lateness (timestamps) or the silence (reordering), plus the refill.  The
tcp_hol_blocking or tls_record_spanning findings inside the episode lie inside its
interval, so the verdict's ``time_lost_ms`` counts the episode once.

Counter-checks: the receiver got no data of other connections during the silence (a
bottleneck shared with parallel connections delivered theirs while this one's queued:
queueing, not an outage — nDPI's netflix.pcap, 12 parallel connections); the receiver's
window was open (a zero window is ``zero_window``'s); the
segment after the silence is new data, not a retransmission; the silence is at least
``min_rtts`` round trips and ``min_stall_ms``.  What each vantage sees: upstream of the
stall (the sender's side) the segments leave on time and only the ACKs stop — a stall
shorter than a delayed-ACK timer and a round trip cannot be told from a slow ACK there,
and a longer one makes the sender's RTO fire (a spurious retransmission): not reported
at the sender.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Evidence, Finding
from .constants import MS
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import DirView, key_chunks, refined_legs_ns
from .waits import (
    TS_CLOCK_FIT,
    TS_CLOCKS,
    TS_MIN_SPAN_NS,
    TS_RATE_RANGE,
    TS_SLOPE_SPAN_NS,
    request_waiting,
    request_words,
    tcp_options,
    tsval_rate,
)

SPEC = DetectorSpec(
    kinds=(
        Kind(
            "delivery_stall",
            "L4",
            "issue 22: a path that delivers nothing for many round trips",
            holds=True,
        ),
    ),
    thresholds=(
        Threshold(
            "min_rtts",
            "rtt",
            "issue 22 'many RTTs': 4 round trips — more than a delayed ACK, a reordering "
            "window or one lost round of ACK clocking explains (judgement)",
        ),
        Threshold(
            "min_stall_ms",
            "ms",
            "a stall a user feels (base.HIGH_COST_MS = 100 ms); also the floor on paths with "
            "a sub-ms RTT, where 4 round trips are scheduling noise",
        ),
    ),
    reads=("tcp_hol_blocking",),
)
KINDS = SPEC.kind_names

MIN_RTTS = 4.0
MIN_STALL_MS = 100.0


def detect(
    ctx: DetectContext, *, min_rtts: float = MIN_RTTS, min_stall_ms: float = MIN_STALL_MS
) -> list[Finding]:
    out: list[Finding] = []
    opts = tcp_options(ctx)
    hol = [
        f
        for f in ctx.prior
        if f.kind == "tcp_hol_blocking" and (f.details or {}).get("stall_before_ms") is not None
    ]
    floors: dict[int, int] = {}
    for f in ctx.tcp_flows():
        dc, ds = refined_legs_ns(ctx, f)
        rtt = (dc or 0) + (ds or 0)
        floors[f] = max(int(min_rtts * rtt), int(min_stall_ms * MS))
    maybe = _late_candidates(ctx, opts, floors)
    for f, floor in floors.items():
        for d in (0, 1):
            seg = ctx.seg_arrays(f, d)
            if seg["frame"].shape[0] < 3:
                continue
            here = [h for h in hol if h.flow == f and h.dir == DIRS[d]]
            silent = bool(np.diff(seg["ts_ns"].astype(np.int64)).max() >= floor)
            if not silent and not here:
                continue  # no silence of this direction at all: nothing to price
            found: list[Finding] = []
            if silent and 2 * f + d in maybe:
                found = _timestamped(ctx, opts, f, d, floor, hol) or []
            # a silence the late originals ended out of order: the reordering signature
            # (with or without timestamps), unless the timestamps already priced it
            for g in (_reordered(ctx, f, d, floor, here) or []) if here else []:
                if not any(g.t_start_ns < x.t_end_ns and x.t_start_ns < g.t_end_ns for x in found):
                    found.append(g)
            # the receiver got data of other connections during the silence: the path
            # delivered, this connection's data queued behind theirs (a shared bottleneck
            # busy with parallel connections) — no outage the wire cannot explain
            if not found:
                continue
            busy = ctx.memo(("delivery._Busy",), lambda: _Busy(ctx))
            dst = _receiver_ip(ctx, f, d)
            for g in found:
                t_a = int(g.evidence[0].ts_ns or g.t_start_ns)
                t_b = int(g.evidence[1].ts_ns or g.t_end_ns)
                if busy.others(f, dst, t_a, t_b) == 0:
                    out.append(g)
    return out


class _Busy:
    """Payload packets of every flow, to ask whether a receiver got data from other
    connections during a silence (a shared bottleneck busy with them is queueing, not an
    outage of the path)."""

    def __init__(self, ctx: DetectContext) -> None:
        p = ctx.packets
        m = (p["payload_len"].fillna(0).to_numpy() > 0) & p["flow"].notna().to_numpy()
        self.ts = p["ts_ns"].to_numpy(np.int64)[m]
        self.dst = p["dst"].astype(str).to_numpy()[m]
        self.flow = p["flow"].to_numpy(np.int64, na_value=-1)[m]
        o = np.argsort(self.ts, kind="stable")
        self.ts, self.dst, self.flow = self.ts[o], self.dst[o], self.flow[o]

    def others(self, f: int, dst: str, t0: int, t1: int) -> int:
        a = int(np.searchsorted(self.ts, t0, side="right"))
        b = int(np.searchsorted(self.ts, t1, side="left"))
        return int(((self.dst[a:b] == dst) & (self.flow[a:b] != f)).sum())


def _receiver_ip(ctx: DetectContext, f: int, d: int) -> str:
    r = ctx.flow(f)
    return str(r.server_ip if d == 0 else r.client_ip)


def _window_open(v: DirView, t_ns: int) -> bool:
    """Y's last advertised window before ``t_ns`` was not zero."""
    k = int(np.searchsorted(v.y_ts, t_ns, side="right")) - 1
    if k < 0:
        return True
    return int(v.p.win_raw[v.y_idx[k]]) > 0


def _late_candidates(ctx: DetectContext, opts: Any, floors: dict[int, int]) -> set[int]:
    """The direction keys ``2·flow + dir`` where :func:`_timestamped` has a gap to look at
    (one of at least ``floors[flow]`` at P and, by the sender's TSval clock, late by as
    much), every direction at once over the segments table (the rows a view slices, a
    slice of whole directions at a time: :func:`~.tcp_model.key_chunks`), with
    :func:`~.waits.tsval_rate`'s clock per direction.  At sse-1M: none of the 2,713
    directions with a silence (0.18 s of one-direction-at-a-time numpy)."""
    sk = ctx.seg_dir_keys  # sorted (DetectContext orders the segments by flow and dir)
    wanted = ctx.seg_kind_is("new") | ctx.seg_kind_is("prev_not_captured")
    frame, ts_all = ctx.seg_columns["frame"], ctx.seg_columns["ts_ns"]
    out: set[int] = set()
    for a0, b0 in key_chunks(sk):
        rows = np.flatnonzero(wanted[a0:b0]) + a0
        if rows.shape[0] < 3:
            continue
        k = sk[rows].astype(np.int64)
        ts = ts_all[rows].astype(np.int64)
        tsval = opts.ts(frame[rows].astype(np.int64, copy=False))
        out.update(_late_in(k, ts, tsval, floors))
    return out


def _late_in(k: np.ndarray, ts: np.ndarray, tsval: np.ndarray, floors: dict[int, int]) -> list[int]:
    """:func:`_late_candidates` of the new rows of whole directions (``k`` their keys,
    sorted; ``ts`` their times at P; ``tsval`` their TSvals, −1 without one)."""
    # each direction's rows [head, end) and its first and last rows with a TSval
    head = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
    end = np.append(head[1:], k.shape[0])
    gk = k[head]
    ok = tsval >= 0
    n_ok = np.add.reduceat(ok.astype(np.int64), head)
    pos = np.arange(k.shape[0])
    first = np.minimum.reduceat(np.where(ok, pos, k.shape[0]), head)
    last = np.maximum.reduceat(np.where(ok, pos, -1), head)
    usable = (end - head >= 3) & (n_ok >= 2)
    a, b = np.where(usable, first, 0), np.where(usable, last, 0)
    span = ts[b] - ts[a]
    dv = (tsval[b] - tsval[a]) & 0xFFFFFFFF
    usable &= (span >= TS_MIN_SPAN_NS) & (dv != 0) & (dv < 0x80000000)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = dv / (span / 1e6)
    # tsval_rate: the slope over ≥ 1 s when plausible, else a usual clock within 10 %
    good = (span >= TS_SLOPE_SPAN_NS) & (rate >= TS_RATE_RANGE[0]) & (rate <= TS_RATE_RANGE[1])
    snapped = np.full(rate.shape, np.nan)
    for c in reversed(TS_CLOCKS):  # the first clock that fits wins, as in tsval_rate
        snapped = np.where(np.abs(rate - c) <= TS_CLOCK_FIT * c, c, snapped)
    rate = np.where(good, rate, snapped)
    usable &= ~np.isnan(rate)
    if not usable.any():
        return []
    # every pair of consecutive rows of a usable direction: its gap and lateness
    g = np.repeat(np.arange(gk.shape[0]), end - head)
    i = np.flatnonzero((k[1:] == k[:-1]) & usable[g[1:]])
    gi = g[i + 1]
    r = rate[gi]
    gap = ts[i + 1] - ts[i]
    dts = ((tsval[i + 1] - tsval[i]) & 0xFFFFFFFF).astype(np.int64)
    dts = np.where(dts >= 0x80000000, 0, dts)
    late = gap - (dts / r * MS).astype(np.int64) - (MS / r).astype(np.int64)
    floor = np.array([floors.get(int(x) >> 1, 0) for x in gk.tolist()], np.int64)[gi]
    return gk[np.unique(gi[(gap >= floor) & (late >= floor)])].tolist()  # type: ignore[no-any-return]


def _timestamped(
    ctx: DetectContext, opts: Any, f: int, d: int, floor: int, hol: list[Any]
) -> list[Finding] | None:
    v = DirView.build(ctx, f, d)
    rows = ctx.seg_rows(f, d)  # = np.isin(v.s_kind, ("new", "prev_not_captured")), from
    # masks over every segment made once
    new = ctx.seg_kind_is("new")[rows] | ctx.seg_kind_is("prev_not_captured")[rows]
    idx = np.nonzero(new)[0]
    if idx.shape[0] < 3:
        return None
    tsval = opts.ts(v.s_frame[idx])
    if (tsval < 0).all():
        return None  # no timestamps: the reordering signature decides
    rate = tsval_rate(v.s_ts[idx], tsval)
    if rate is None:
        return []
    ts = v.s_ts[idx].astype(np.int64)
    gap = np.diff(ts)
    dts = ((tsval[1:] - tsval[:-1]) & 0xFFFFFFFF).astype(np.int64)
    dts = np.where(dts >= 0x80000000, 0, dts)  # an older TSval (reordering): sent no later
    sent_gap = (dts / rate * MS).astype(np.int64)
    late = gap - sent_gap - int(MS / rate)  # minus one tick of the sender's clock
    out: list[Finding] = []
    for k in np.nonzero((gap >= floor) & (late >= floor))[0].tolist():
        a, b = int(idx[k]), int(idx[k + 1])
        if tsval[k] < 0 or tsval[k + 1] < 0:
            continue
        t_a, t_b = int(v.s_ts[a]), int(v.s_ts[b])
        if not _window_open(v, t_a):
            continue
        # the silence is the path's, not the capture's: b continues what P had seen (no
        # segment missing at P between them — a capture that drops packets shows the
        # first and a late one of a burst paced by a bottleneck), and the receiver
        # acknowledged nothing beyond a meanwhile (it got nothing P missed)
        if int(v.s_gap[b]) != 0 or int(v.s_off[b]) > int(v.s_end[:b].max()):
            continue
        ky = (v.y_ts > t_a) & (v.y_ts < t_b)
        if ky.any() and int(v.y_ack[ky].max()) > int(v.s_end[:b].max()):
            continue
        out.append(
            _finding(
                ctx,
                v,
                a,
                b,
                t_a,
                t_b,
                int(late[k]),
                hol,
                method="timestamps",
                note=(
                    f"frame {int(v.s_frame[b])} was sent {int(sent_gap[k]) / MS:.0f} ms after "
                    f"frame {int(v.s_frame[a])} by the sender's clock (TSval "
                    f"{int(tsval[k])} → {int(tsval[k + 1])}, {rate:g} tick/ms) but arrived "
                    f"{int(gap[k]) / MS:.0f} ms after it"
                ),
            )
        )
    return out


def _reordered(
    ctx: DetectContext, f: int, d: int, floor: int, hol: list[Any]
) -> list[Finding] | None:
    v = DirView.build(ctx, f, d)
    out: list[Finding] = []
    for h in hol:
        if h.flow != f or h.dir != DIRS[d]:
            continue
        stall_ns = int(round(h.details["stall_before_ms"] * MS))
        if stall_ns < floor:
            continue
        t_b = int(h.t_start_ns)
        b = int(np.searchsorted(v.s_ts, t_b))
        if b <= 0 or b >= v.s_ts.shape[0]:
            continue
        a = b - 1
        t_a = int(v.s_ts[a])
        if not _window_open(v, t_a):
            continue
        out.append(
            _finding(
                ctx,
                v,
                a,
                b,
                t_a,
                t_b,
                stall_ns,
                hol,
                method="reordering",
                note=(
                    f"after {stall_ns / MS:.0f} ms with nothing of this direction, frame "
                    f"{int(v.s_frame[b])} landed ahead of a hole that the original segments "
                    "then filled, no retransmission (the data was in flight all along)"
                ),
            )
        )
    return out


def _finding(
    ctx: DetectContext,
    v: DirView,
    a: int,
    b: int,
    t_a: int,
    t_b: int,
    late: int,
    hol: list[Any],
    *,
    method: str,
    note: str,
) -> Finding:
    # the catch-up that followed: a reordering hole opened at the stall's end and its fill
    t_end = t_b
    refill = None
    for h in hol:
        if h.flow == v.f and h.dir == DIRS[v.d] and t_b - MS <= h.t_start_ns <= t_b + late:
            refill = h
            t_end = max(t_end, int(h.t_end_ns))
    cost = late + (t_end - t_b)
    sender = ctx.endpoint(v.f, v.d)
    ev = [
        Evidence(int(v.s_frame[a]), "last arrival before the stall", t_a),
        Evidence(int(v.s_frame[b]), "first arrival after the stall", t_b),
    ]
    if refill is not None:
        ev += [e for e in refill.evidence if e.role in ("hole", "fill")][:4]
    req = request_waiting(ctx, v.f, t_b)
    who = request_words(req)
    checks = [
        "the receiver's window was open (not a zero-window stall)",
        f"new data after the silence, no retransmission: nothing was lost ({note})",
        f"at least {late / MS:.0f} ms ≥ the stall threshold (many round trips)",
    ]
    explanation = (
        f"For {(t_b - t_a) / MS:.0f} ms nothing from the {sender} arrived here although it had "
        f"sent data: {note}. The path held the data {late / MS:.0f} ms"
        + (
            f", and it arrived out of order — the catch-up took {(t_end - t_b) / MS:.1f} ms more"
            if refill is not None
            else ""
        )
        + ". No loss, no retransmission and no closed window explain it: a delivery stall on "
        "the path (radio outage or handover, a middlebox or a queue holding packets); the "
        "findings inside this episode are this stall's, not causes of their own"
        + (f". {who} waited." if who else ".")
    )
    r = ctx.flow(v.f)
    return Finding(
        kind="delivery_stall",
        request=None if req is None else req["id"],
        flow=v.f,
        dir=DIRS[v.d],
        t_start_ns=t_end - cost,
        t_end_ns=t_end,
        cost_ms=cost / MS,
        cost_method="measured_interval" if method == "timestamps" else "upper_bound",
        evidence=ev,
        vantage=ctx.vantage(v.f),
        confidence=0.8 if method == "timestamps" else 0.6,
        checks=checks,
        explanation=explanation,
        remedy=(
            "The path stopped delivering for a while (find the hop: a radio link, a handover, "
            "a middlebox or a shaper's queue). The endpoints cannot prevent it; they can make "
            "it cheaper: QUIC's connection migration and per-stream delivery, smaller "
            "send-side backlogs (tcp_notsent_lowat) so less queues up behind the stall, and "
            "application-level heartbeats to tell a stall from a slow server."
        ),
        display_filter=(
            f"tcp.stream == {int(r.stream)} && frame.number >= {int(v.s_frame[a])} && "
            f"frame.number <= {int(v.s_frame[b]) + 20}"
        ),
        details={
            "method": method,
            "silence_ms": (t_b - t_a) / MS,
            "late_ms": late / MS,
            "refill_ms": (t_end - t_b) / MS,
            "request": req,
        },
    )

"""Slow-start restart after idle (R1, DETECTION.md §7.1).

Mechanism: RFC 5681 §4.1 (and RFC 2861): a TCP that has not sent for more than an RTO
SHOULD restart from the restart window RW = min(IW, cwnd).  Linux
(``tcp_slow_start_after_idle_check`` → ``tcp_cwnd_restart``) halves cwnd once per RTO of
idle time, floored at min(IW, cwnd), when nothing is in flight — unless
``net.ipv4.tcp_slow_start_after_idle = 0`` or the congestion module has its own
``cong_control`` (BBR).  A burst after the idle therefore starts from a first flight of
≈ IW = 10 segments (RFC 6928) instead of the window the connection had built, and needs
more round trips.

Signature (per direction, sender X): an idle gap G with everything acknowledged and
G > RTO_est = srtt + max(200 ms, 4·mdev) (Linux ``__tcp_set_rto``; only the handshake RTT is
known, so the 200 ms ``TCP_RTO_MIN`` term stands for the variance); the next burst's first
flight F1 (what X sends before an ACK for the burst can return: segments until the first
one sent ≥ ½ RTT after the flight began with an ACK seen in between — at a receiver
vantage the same boundaries arrive shifted by the one-way delay) is < ½ × the largest
flight of the active period before the idle, the burst continues after F1 (backlog) with
a second flight that follows an ACK after a silence ≥ ½ RTT (ACK-clocked, not paced), and
Y's advertised window was not what stopped F1.

Cost (§7.1): extra round trips = flights the burst took − flights it would have taken
from the pre-idle window, × RTT.  The pre-idle window is estimated the way Linux grows it
in slow start without loss: cwnd += segments acknowledged (``tcp_slow_start``) but only
while cwnd < 2 × the packets in flight (``tcp_is_cwnd_limited``), so IW + the segments of
the active period before the idle, capped at twice its largest flight, at least that
flight, at most Y's window; when the period had retransmissions (cwnd then ≈ the flight)
the largest flight itself.  The lower bound (pre-idle window = the largest flight seen)
is in ``details``.

Counter-checks (the false-positive traps of §7.1): bursts no larger than F1 (app-limited:
nothing was lost), SSE/token streams whose events are smaller than IW (same rule), a
receiver window smaller than F1 + 1 segment, pacing (fq/BBR spreads a burst with no
ACK-coupled silence), BBR in general (its restart keeps cwnd: F1 is not small), a loss in
the first flights (flights then measure recovery, not cwnd: reported with lower confidence), and a first flight smaller than min(IW, the pre-idle
flight) — below any restart window, so the application's writes, not cwnd, cut it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .base import Evidence, Finding, frame_filter
from .constants import FLIGHT_BREAK_RTT, FLIGHT_GAP_MIN_NS, IW_SEGMENTS, TCP_RTO_MIN_NS
from .context import DetectContext, FlowPackets
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(Kind("slow_start_restart", "R1", "DETECTION.md §7.1", holds=True),),
    thresholds=(
        Threshold(
            "iw_segments", "segments", "RFC 6928 initial window; Linux TCP_INIT_CWND", minimum=1
        ),
        Threshold(
            "rto_min_ns", "ns", "Linux TCP_RTO_MIN (HZ/5): RTO_est = srtt + max(200 ms, 4·mdev)"
        ),
        Threshold(
            "flight_shrink",
            "fraction",
            "DETECTION.md §7.1: the first flight after the idle < 0.5 × the largest before it",
            maximum=1.0,
        ),
        Threshold(
            "burst_continue_rtt",
            "rtt",
            "judgement: ACK-clocked flights start within 1.5 RTT of the previous one",
        ),
    ),
)
KINDS = SPEC.kind_names

# RTO_est = srtt + max(TCP_RTO_MIN, 4·mdev); the first flight is measured against the RFC
# 6928 initial window (IW_SEGMENTS); a new flight starts ≥ FLIGHT_BREAK_RTT × RTT after the
# previous one began (the lab's truth.flights rule): all from .constants.
FLIGHT_SHRINK = 0.5  # §7.1: F1 < 0.5 × the largest flight before the idle
# the ACK-coupled silence after the first flight must also be ≥ FLIGHT_GAP_MIN_NS (1 ms):
# on loopback and LANs sub-millisecond gaps are scheduling, not flights (§1.4), and the
# restart costs µs there
# a burst goes on while each flight starts within 1.5 RTT of the previous one (ACK-clocked);
# a longer pause is the application's, not the window's (judgement, halfway to the next RTT)
BURST_CONTINUE_RTT = 1.5
DATA_KINDS = ("new", "prev_not_captured", "out_of_order", "retransmission")


@dataclass
class Flight:
    first: int  # index into the segment arrays
    last: int
    segments: int  # wire segments (a super-segment counts as several)
    start_ns: int
    end_ns: int


def flights_needed(burst: int, window: int) -> int:
    """Round trips to send ``burst`` segments from ``window``, doubling per RTT (slow start)."""
    n, sent, w = 0, 0, max(window, 1)
    while sent < burst:
        sent += w
        w *= 2
        n += 1
    return n


def _successors(
    ts: np.ndarray, wire: np.ndarray, lo: int, hi: int, ack_ts: np.ndarray, rtt: int
) -> tuple[list[int], np.ndarray, list[int]]:
    """For the segments [lo, hi): where the flight starting at each segment would end (the
    next flight's first segment, relative to ``lo``), the running count of wire segments
    (``cum[j] − cum[i]``: segments i … j − 1) and the send times — the searches of the walk
    in :func:`_flights`, for every segment at once."""
    seg_ts = ts[lo:hi]
    cum = np.concatenate(([0], np.cumsum(wire[lo:hi])))
    n = hi - lo
    j1 = np.searchsorted(seg_ts, seg_ts + FLIGHT_BREAK_RTT * rtt, side="left")
    a = np.searchsorted(ack_ts, seg_ts, side="right")
    if ack_ts.shape[0]:
        j2 = np.searchsorted(seg_ts, ack_ts[np.minimum(a, ack_ts.shape[0] - 1)], side="left")
        j2 = np.where(a < ack_ts.shape[0], j2, n)
    else:
        j2 = np.full(n, n, np.int64)
    nxt = np.minimum(np.maximum(np.maximum(j1, j2), np.arange(1, n + 1)), n).tolist()
    return nxt, cum, seg_ts.tolist()


def _flights(
    ts: np.ndarray,
    wire: np.ndarray,
    idx: np.ndarray,
    ack_ts: np.ndarray,
    rtt: int,
    continue_ns: float | None = None,
) -> list[Flight]:
    """Group the consecutive segments ``idx`` into flights (``ack_ts``: Y's ACK times, sorted).

    A flight is what X sends before an ACK for it can return: the next flight starts with
    the first segment sent ≥ ½ RTT after the flight began *and* after an ACK from Y was seen
    (the lab's ``truth.flights`` rule).  One step per flight, not per segment.  With
    ``continue_ns``: only the burst — the flights while each starts within ``continue_ns``
    of the one before.
    """
    out: list[Flight] = []
    if idx.shape[0] == 0:
        return out
    lo, hi = int(idx[0]), int(idx[-1]) + 1
    nxt, cum_a, t = _successors(ts, wire, lo, hi, ack_ts, rtt)
    cum = cum_a.tolist()
    n = hi - lo
    i = 0
    while i < n:
        if continue_ns is not None and out and t[i] - out[-1].start_ns > continue_ns:
            break
        j = nxt[i]
        out.append(Flight(lo + i, lo + j - 1, int(cum[j] - cum[i]), t[i], t[j - 1]))
        i = j
    return out


def _largest_flight(
    ts: np.ndarray, wire: np.ndarray, idx: np.ndarray, ack_ts: np.ndarray, rtt: int
) -> tuple[int, int]:
    """(first segment, wire segments) of the largest of :func:`_flights` (the first of
    equals), without a :class:`Flight` per flight; ``idx`` not empty."""
    lo, hi = int(idx[0]), int(idx[-1]) + 1
    nxt, cum, _ = _successors(ts, wire, lo, hi, ack_ts, rtt)
    n = hi - lo
    starts: list[int] = []
    i = 0
    while i < n:
        starts.append(i)
        i = nxt[i]
    first = np.array(starts, np.int64)
    segs = cum[np.append(first[1:], n)] - cum[first]
    k = int(np.argmax(segs))
    return lo + int(first[k]), int(segs[k])


# :func:`detect` asks :func:`_bursts_of_two` which idles can be followed by a burst of two
# flights or more before it walks any (False: every idle walked, the oracle's path)
IDLES_AT_ONCE = True
_EXACT = float(1 << 52)  # |int| below this compares with a float as Python compares it


def _bursts_of_two(
    ts: np.ndarray, idles: list[int], ack_sorted: np.ndarray, rtt: int, continue_ns: float
) -> list[bool]:
    """Per idle gap ``g`` of ``idles`` (its burst: segments ``g + 1`` … the next idle's
    ``g``, or the last): False when :func:`_flights` of the burst with ``continue_ns``
    certainly has fewer than two flights — the first flight (:func:`_successors` at the
    burst's first segment) ends the burst, or the next flight starts more than
    ``continue_ns`` after it — else True.  The searches of all idles at once; all True
    when the segment times go backwards (a search per burst would not equal one search
    of all)."""
    n_idle = len(idles)
    if not n_idle or (ts.shape[0] > 1 and bool((ts[1:] < ts[:-1]).any())):
        return [True] * n_idle
    g = np.array(idles, np.int64)
    lo = g + 1
    hi = np.append(g[1:], ts.shape[0] - 1) + 1
    n = hi - lo
    t0 = ts[lo]
    j1 = np.clip(np.searchsorted(ts, t0 + FLIGHT_BREAK_RTT * rtt, side="left"), lo, hi) - lo
    if ack_sorted.shape[0]:
        a = np.searchsorted(ack_sorted, t0, side="right")
        at = ack_sorted[np.minimum(a, ack_sorted.shape[0] - 1)]
        j2 = np.clip(np.searchsorted(ts, at, side="left"), lo, hi) - lo
        j2 = np.where(a < ack_sorted.shape[0], j2, n)
    else:
        j2 = n
    nxt = np.minimum(np.maximum(np.maximum(j1, j2), 1), n)
    second = nxt < n
    gap = ts[np.where(second, lo + nxt, lo)] - t0
    # a gap too large to compare exactly as a float is left to the walk
    late = (gap > continue_ns) & (np.abs(gap) < _EXACT)
    return (second & ~late | (np.abs(gap) >= _EXACT)).tolist()  # type: ignore[no-any-return]


def _window_before(p: FlowPackets, d: int, t: int) -> int:
    """Y's last advertised (scaled) window before ``t``; -1 when unknown."""
    y = np.nonzero((p.dir == 1 - d) & (p.ts <= t) & (p.ack >= 0))[0]
    return int(p.win[y[-1]]) if y.shape[0] else -1


def detect(
    ctx: DetectContext,
    *,
    iw_segments: int = IW_SEGMENTS,
    rto_min_ns: int = TCP_RTO_MIN_NS,
    flight_shrink: float = FLIGHT_SHRINK,
    burst_continue_rtt: float = BURST_CONTINUE_RTT,
) -> list[Finding]:
    out: list[Finding] = []
    # the kinds as masks over every segment, made once (comparing the text
    # per direction cost one object comparison per segment and kind)
    data_all = np.zeros(ctx.seg_dir_keys.shape[0], bool)
    for x in DATA_KINDS:
        data_all |= ctx.seg_kind_is(x)
    rtx_all = ctx.seg_kind_is("retransmission") | ctx.seg_kind_is("out_of_order")
    for f in ctx.tcp_flows():
        rtt = ctx.rtt_ns(f)
        mss = ctx.eff_mss(f)
        if not rtt or not mss:
            continue  # flights need the RTT and segment counts need the MSS
        rto = rtt + rto_min_ns
        p = ctx.packets_of(f)
        for d in (0, 1):
            seg = ctx.seg_arrays(f, d)
            if not seg["frame"].shape[0]:
                continue
            rows = ctx.seg_rows(f, d)
            keep = data_all[rows]  # = np.isin(seg["kind"], DATA_KINDS)
            if int(seg["wire_segments"][keep].sum()) < 2 * iw_segments:
                continue  # too little data to restart from anything
            ts = seg["ts_ns"][keep]
            if not (np.diff(ts) > rto).any():
                continue  # no idle gap: nothing to restart
            end = seg["end"][keep]
            frames = seg["frame"][keep]
            wire = seg["wire_segments"][keep]
            rtx = rtx_all[rows][keep]
            ys = (p.dir == 1 - d) & (p.ack >= 0)
            ack_ts, ack_val = p.ts[ys], p.ack[ys]
            ack_frames = p.frame[ys]
            ack_sorted = np.sort(ack_ts)
            gaps = np.diff(ts)
            period_start = 0
            idles = np.nonzero(gaps > rto)[0].tolist()
            end_max = np.maximum.accumulate(end)  # end_max[g] = end[: g + 1].max()
            two = (
                _bursts_of_two(ts, idles, ack_sorted, rtt, burst_continue_rtt * rtt)
                if IDLES_AT_ONCE
                else [True] * len(idles)
            )
            for i_idle, g in enumerate(idles):
                pre = np.arange(period_start, g + 1)
                post_start = g + 1
                period_start = post_start
                if not two[i_idle]:
                    continue  # app-limited: the burst is one flight (_flights would say so)
                # everything sent before the idle was acknowledged before the burst
                high = int(end_max[g])
                acked = np.nonzero((ack_val >= high) & (ack_ts <= ts[post_start]))[0]
                if acked.shape[0] == 0:
                    continue
                # idle as Linux measures it: since the last send (tcp_cwnd_restart: now −
                # lsndtime); a same-direction interval, equal at every vantage
                idle = int(ts[post_start]) - int(ts[g])
                if idle <= rto:
                    continue
                # the burst: flights while each starts within burst_continue_rtt of the last
                burst_end = idles[i_idle + 1] if i_idle + 1 < len(idles) else len(ts) - 1
                burst_fl = _flights(
                    ts,
                    wire,
                    np.arange(post_start, burst_end + 1),
                    ack_sorted,
                    rtt,
                    continue_ns=burst_continue_rtt * rtt,
                )
                f1 = burst_fl[0].segments
                burst = sum(x.segments for x in burst_fl)
                if len(burst_fl) < 2 or burst <= f1:
                    continue  # app-limited: the whole burst fit the first flight
                # no flight before the idle is larger than all of it: a first flight that
                # big already shrank too little, without the walk (at sse-1M, 1,089 of the
                # 2,535 walks)
                pre_segments = int(wire[pre].sum())
                if not f1 < flight_shrink * pre_segments:
                    continue
                w_max_first, w_max = _largest_flight(ts, wire, pre, ack_sorted, rtt)
                if not f1 < flight_shrink * w_max:
                    continue
                if f1 < min(iw_segments, w_max):
                    # a restart never goes below min(IW, cwnd) (tcp_cwnd_restart): a smaller
                    # first flight was cut by the application's writes, not by cwnd
                    continue
                # ACK-clocked, not paced: silence ≥ ½ RTT between F1 and F2, an ACK in it
                f2 = burst_fl[1]
                silence = f2.start_ns - burst_fl[0].end_ns
                if silence < max(FLIGHT_BREAK_RTT * rtt, FLIGHT_GAP_MIN_NS):
                    continue
                win = _window_before(p, d, int(ts[post_start]))
                if win >= 0 and win < (f1 + 1) * mss:
                    continue  # the receiver's window, not cwnd, stopped the first flight
                first_ack = np.nonzero((ack_ts > ts[post_start]) & (ack_val > high))[0]
                # cost: flights taken − flights from the pre-idle window (slow-start estimate)
                pre_lossy = bool(rtx[pre].any())
                # slow start without loss: cwnd += segments acknowledged (tcp_slow_start), but
                # only while cwnd < 2 × packets in flight (tcp_is_cwnd_limited): ≤ 2 × flight
                w_prev = (
                    w_max if pre_lossy else max(w_max, min(iw_segments + pre_segments, 2 * w_max))
                )
                if win > 0:
                    w_prev = max(w_max, min(w_prev, win // mss))
                taken = len(burst_fl)
                extra = max(0, taken - flights_needed(burst, w_prev))
                extra_low = max(0, taken - flights_needed(burst, w_max))
                if extra == 0:
                    continue
                pre_fl = _flights(ts, wire, pre, ack_sorted, rtt)
                cost_ns = extra * rtt
                burst_lossy = bool(rtx[burst_fl[0].first : burst_fl[-1].last + 1].any())
                # Linux's expectation: cwnd halved once per RTO of idle, floored at min(IW, cwnd)
                restart = min(iw_segments, w_prev)
                cw, delta = w_prev, idle
                while (delta := delta - rto) > 0 and cw > restart:
                    cw >>= 1
                f1_expected = max(cw, restart)
                sender = ctx.endpoint(f, d)
                ev = [
                    Evidence(
                        int(frames[w_max_first]),
                        "largest flight before idle (start)",
                        int(ts[w_max_first]),
                    ),
                    Evidence(int(frames[g]), "last segment before idle", int(ts[g])),
                    Evidence(
                        int(ack_frames[acked[0]]), "all data acknowledged", int(ack_ts[acked[0]])
                    ),
                    Evidence(
                        int(frames[post_start]),
                        "first flight after idle (start)",
                        int(ts[post_start]),
                    ),
                    Evidence(
                        int(frames[burst_fl[0].last]),
                        "first flight after idle (end)",
                        int(ts[burst_fl[0].last]),
                    ),
                ]
                if first_ack.shape[0]:
                    j = int(first_ack[0])
                    ev.append(
                        Evidence(int(ack_frames[j]), "first ACK of the burst", int(ack_ts[j]))
                    )
                ev.append(
                    Evidence(int(frames[f2.first]), "second flight (after the ACK)", f2.start_ns)
                )
                t_end = int(ts[burst_fl[-1].last])
                rtt_ms = rtt / 1e6
                flights_txt = ", ".join(str(x.segments) for x in burst_fl)
                pre_txt = ", ".join(str(x.segments) for x in pre_fl)
                out.append(
                    Finding(
                        kind="slow_start_restart",
                        flow=f,
                        dir=("c2s", "s2c")[d],
                        t_start_ns=int(ts[post_start]),
                        t_end_ns=t_end,
                        cost_ms=cost_ns / 1e6,
                        cost_method="estimate",
                        evidence=ev,
                        vantage=ctx.vantage(f),
                        confidence=0.6 if burst_lossy else 0.85,
                        checks=[
                            f"idle {idle / 1e6:.0f} ms > RTO_est {rto / 1e6:.0f} ms "
                            "(srtt + 200 ms TCP_RTO_MIN), everything acknowledged",
                            f"first flight {f1} < {flight_shrink:g} × largest flight before "
                            f"idle {w_max}",
                            f"backlog: the burst ({burst} segments) continued after the first "
                            "flight",
                            f"ACK-clocked, not paced: {silence / 1e6:.1f} ms silence "
                            "(≥ ½ RTT and ≥ 1 ms) before the second flight",
                            "receiver window open"
                            + (f" ({win} B ≥ {f1 + 1} segments)" if win >= 0 else " (unknown)"),
                            "no retransmission in the burst"
                            if not burst_lossy
                            else "retransmissions in the burst: flights partly measure recovery",
                        ],
                        explanation=(
                            f"The {sender} was idle for {idle / 1e6:.0f} ms (longer than its "
                            f"retransmission timeout, ≈ {rto / 1e6:.0f} ms) and then sent a "
                            f"{burst}-segment burst starting with a flight of only {f1} segments "
                            f"(Linux expects {f1_expected} after this idle), although before "
                            f"the pause it had sent flights of up to {w_max} segments "
                            f"({pre_txt}). TCP's slow-start restart (RFC 5681 §4.1, Linux "
                            "tcp_slow_start_after_idle) threw the congestion window away, so "
                            f"the burst took {taken} round trips (flights {flights_txt}) instead "
                            f"of ≈ {taken - extra}: ≈ {extra} extra RTT × {rtt_ms:.1f} ms = "
                            f"{cost_ns / 1e6:.1f} ms"
                            + (
                                f" (at least {extra_low * rtt_ms:.1f} ms counting only the "
                                "flights actually seen before the idle)."
                                if extra_low < extra
                                else "."
                            )
                        ),
                        remedy=(
                            f"On the sending host ({sender.split()[0]}): `sysctl -w "
                            "net.ipv4.tcp_slow_start_after_idle=0` (per network namespace; "
                            "persist it in /etc/sysctl.d), or keep the connection warm (send "
                            "small keep-alive traffic more often than the RTO), or use BBR "
                            "(`net.ipv4.tcp_congestion_control=bbr` / TCP_CONGESTION), which "
                            "does not restart from IW after idle."
                        ),
                        display_filter=f"tcp.stream == {int(ctx.flow(f).stream)} && "
                        + frame_filter([e.frame for e in ev]),
                        details={
                            "idle_ms": round(idle / 1e6, 3),
                            "rto_est_ms": round(rto / 1e6, 3),
                            "flights_before_idle": [x.segments for x in pre_fl],
                            "flights_after_idle": [x.segments for x in burst_fl],
                            "first_flight": f1,
                            "first_flight_expected_linux": f1_expected,
                            "largest_flight_before_idle": w_max,
                            "window_before_idle_est": w_prev,
                            "burst_segments": burst,
                            "extra_rtts": extra,
                            "extra_rtts_lower_bound": extra_low,
                            "cost_lower_bound_ms": round(extra_low * rtt_ms, 3),
                        },
                    )
                )
    return out

"""Nagle's algorithm and its interaction with delayed ACK (N1, N2: DETECTION.md §2).

Mechanism (§2.1).  RFC 896 and RFC 9293 §3.7.4: "If there is unacknowledged data
(i.e., SND.NXT > SND.UNA), then the sending TCP endpoint buffers all user data
(regardless of the PSH bit) until the outstanding data has been acknowledged or
until the TCP endpoint can send a full-sized segment" — SHOULD implement, MUST be
disableable (TCP_NODELAY).  Linux uses Minshall's variant: a partial segment is held
only while a previously sent *small* segment is unacknowledged (``tcp_nagle_check``,
``tcp_minshall_check``); full-sized segments and FIN are never held.  When the
receiver delays its ACK (RFC 1122 §4.2.3.2 / RFC 5681 §4.2: SHOULD delay, MUST ACK
within 0.5 s; Linux ≥ ``TCP_DELACK_MIN`` = 40 ms, Windows 200 ms, BSD/macOS 100 ms)
the held write waits one delayed-ACK timer plus one round trip.

Signature (§2.3), per direction X → Y, on new data only:

* S1, S2 consecutive new-data segments from X (nothing else from X in between,
  contiguous, no capture gap); S1 small in Minshall's sense (``len < eff_mss``; a GSO
  super-segment is small iff ``len mod eff_mss ≠ 0``, §1.3/§1.4); S2 partial too (a
  full MSS is never held by Nagle) and without FIN (``tcp_nagle_test`` lets FIN go);
* A = first packet from Y acknowledging S1, before S2, acknowledging exactly what X
  had sent (every sub-MSS segment);
* coupling: ``t(S2) − t(A) − d_X ∈ [−tol, tol + late slack]`` with ``tol = max(0.5 ms,
  3·jitter_X)`` when X's reaction jitter can be measured, else ``max(0.5 ms, 0.25·d_X)``
  (§2.3); a release is never early, but may be late on a busy sender;
* the wait: ``t(S2) − t(S1) ≥ d_X + d_Y − tol`` (S2 waited at least one RTT: not
  pacing, not back-to-back writes);
* ``D = t(A) − t(S1) − d_Y`` (the receiver's ACK delay, §1.1).  A pure ACK with
  D ∈ [30 ms, 500 ms] ⇒ ``nagle_delayed_ack`` (N2) with an OS guess from D; otherwise
  (quick ACK, piggy-backed release, ACK later than RFC 1122 allows) ⇒ ``nagle`` (N1).

The legs d_C, d_S are the handshake's, lowered by min-filtered data→ACK samples (§1.2:
the SYN/ACK leg includes the server's SYN processing).  Every "what had reached X"
question is asked causally: a packet from Y seen at P reaches X d_X after P sees it.

Cost (§2.4): t(S2) − t(S1).  At the sender's vantage it is an upper bound (it assumes
S2 was written right after S1, true for write-write-read; serialisation of a sub-MSS
segment is µs and neglected); at the receiver or in the middle it is a measured
interval (same-direction packets, unbiased by the vantage, §1.1).  ``details`` carry
the expected cost d_X + d_Y + D and the direction's count/total/p50/p95.

Counter-hypotheses (§2.5) checked per event and listed in ``checks``: cwnd-limited
(A acknowledges < 2·MSS in at most two segments — cwnd ≥ 2 outside loss recovery —
and no retransmission within 2 RTT: cwnd = 1 after an RTO mimics Nagle), rwnd-limited
(S1 did not fill Y's window, A opens room for S2), application request/response (no
data from Y reached X between A and S2; a piggy-backed A counts only when Y was sending
on its own, i.e. sent data after S1 before acknowledging it), pacing (coupling to the
ACK), loopback MSS (small is relative to the negotiated MSS), GSO super-segments,
capture drops (no gap, A does not acknowledge unseen data), keep-alives and zero-window
probes (not new data: they break the S1/S2 pair).  Nagle switched off: a partial
segment that left while an earlier small one could not yet have been acknowledged is
impossible with Nagle on, so such a direction (TCP_NODELAY) reports nothing.  A hold
released by a non-delayed ACK (N1) is reported only with corroboration: ≥ 3 coupled
holds that are also ≥ half of the direction's testable pairs (a chance coincidence
within ±tol of an ACK has probability ≈ 2·tol/gap per exchange, §2.3; an application
cadence near the RTT couples now and then, §8.1a), or TLS evidence that the held bytes
were waiting (several records completed in S2, or S1 ending inside a record).

Shared helpers used by :mod:`.delayed_ack` and :mod:`.cork` live here
(:class:`DirView`, :func:`refined_legs_ns`, :func:`reaction_jitter_ns`,
:func:`accepted_holds`, :func:`os_guess`, :func:`cost_stats`, :func:`side_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..net.decode import FIN, RST, SYN
from .base import Evidence, Finding, frame_filter
from .constants import (
    DELACK_OS_BANDS_MS,
    DELACK_TIMER_MIN_NS,
    JITTER_MIN_SAMPLES,
    LAG_TOL_FRACTION,
    LAG_TOL_MIN_NS,
    LATE_SLACK_NS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
)
from .context import DIRS, DetectContext

KINDS = ("nagle", "nagle_delayed_ack")

# Minimum share of testable S1/S2 pairs of a direction that must be coupled to an ACK
# before quick-ACK (N1) holds are believed: an application cadence close to the RTT
# couples now and then by chance (DETECTION.md §8.1a), Nagle couples every time.
MIN_COUPLED_SHARE = 0.5
# TCP options can shrink a full segment below eff_mss (SACK blocks: up to 40 B of
# options); used only for the "Nagle is off" evidence, where a false "small" would hide
# real holds rather than invent them.
OPTION_MARGIN = 40
# DETECTION.md §2.3: "≥ 3 coupled exchanges make coincidence negligible".
MIN_REPEATS = 3


def os_guess(d_ms: float) -> tuple[str, str]:
    """(short guess, words) for a receiver ACK delay of ``d_ms`` (DETECTION.md §2.3)."""
    for lo, hi, name, words in DELACK_OS_BANDS_MS:
        if lo <= d_ms <= hi:
            return name, words
    return "unknown", "a delayed-ACK timer of an unrecognised stack"


def lag_tolerance_ns(
    d_x_ns: int, jitter_ns: int | None, *, tol_min_ms: float, tol_fraction: float
) -> int:
    """DETECTION.md §2.3 coupling tolerance (``constants.LAG_TOL_*``)."""
    if jitter_ns is not None:
        return int(max(tol_min_ms * MS, 3 * jitter_ns))
    return int(max(tol_min_ms * MS, tol_fraction * d_x_ns))


def reaction_jitter_ns(ctx: DetectContext, f: int, d: int, d_x: int) -> int | None:
    """Robust σ of X's immediate pure-ACK reactions to Y's data at the capture point
    (X sends in direction ``d``); None with fewer than JITTER_MIN_SAMPLES."""
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


def side_of(ctx: DetectContext, f: int, d: int) -> str:
    """Where the capture point sits relative to the sender of direction ``d``."""
    v = ctx.vantage(f)
    sender = "client" if d == 0 else "server"
    if v == sender:
        return "sender"
    if v in ("client", "server"):
        return "receiver"
    return v  # middle / unknown


def cost_method_for(side: str) -> str:
    """§2.4: an upper bound at the sender, a measured interval at the receiver/middle."""
    if side == "sender":
        return "upper_bound"
    if side in ("receiver", "middle"):
        return "measured_interval"
    return "estimate"


def cost_stats(costs: list[float]) -> dict[str, Any]:
    a = np.asarray(costs, dtype=float)
    if a.size == 0:
        return {"count": 0}
    return {
        "count": int(a.size),
        "total_ms": round(float(a.sum()), 3),
        "p50_ms": round(float(np.percentile(a, 50)), 3),
        "p95_ms": round(float(np.percentile(a, 95)), 3),
        "max_ms": round(float(a.max()), 3),
    }


def refined_legs_ns(ctx: DetectContext, f: int) -> tuple[int, int] | None:
    """(d_C, d_S) at the capture point: the handshake legs (§1.1), lowered by the
    min-filtered data → first-covering-ACK samples of each leg (§1.2).

    The SYN → SYN/ACK leg includes the server's SYN processing (0.3 ms in the lab), and
    a single handshake sample carries that path's jitter; a data segment answered by an
    immediate ACK is a cleaner sample.  Every sample is ≥ the true leg (a segment cannot
    be acknowledged before it arrives), so the minimum is the best estimate.  None
    without a handshake.
    """
    return ctx.memo(("nagle.refined_legs", f), lambda: _refined_legs(ctx, f))  # type: ignore[no-any-return]


def _refined_legs(ctx: DetectContext, f: int) -> tuple[int, int] | None:
    dc, ds = ctx.legs_ns(f)
    if dc is None or ds is None:
        return None
    legs = [dc, ds]
    p = ctx.packets_of(f)
    for d in (0, 1):
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
            sample = int((p.ts[y[k[ok]]] - p.ts[pi[ok]]).min())
            leg = 1 if d == 0 else 0  # c2s data is acknowledged across the server leg
            legs[leg] = max(0, min(legs[leg], sample))
    return legs[0], legs[1]


def role_name(d: int) -> str:
    return "client" if d == 0 else "server"


@dataclass
class DirView:
    """One flow direction X → Y as arrays: X's segments, and every packet of the flow.

    Segment arrays (``s_*``) are in frame order and cover every segment row of X (new
    data, retransmissions, keep-alives, probes); ``s_pi`` maps a segment to its index in
    the flow's packet arrays ``p``.  ``y_idx`` are the packet indices of Y, ``y_ackmax``
    the running maximum of Y's cumulative ACK (for "first packet from Y acknowledging
    offset o": a binary search).
    """

    f: int
    d: int
    p: Any
    mss: int
    d_x: int
    d_y: int
    s_frame: np.ndarray
    s_ts: np.ndarray
    s_off: np.ndarray
    s_len: np.ndarray
    s_end: np.ndarray
    s_kind: np.ndarray
    s_psh: np.ndarray
    s_fin: np.ndarray
    s_super: np.ndarray
    s_gap: np.ndarray
    s_wire: np.ndarray
    s_pi: np.ndarray
    y_idx: np.ndarray
    y_ack: np.ndarray
    y_ackmax: np.ndarray
    y_data: np.ndarray  # bool per Y packet: carries payload
    y_ts: np.ndarray
    jitter: int | None = None  # robust σ of X's reaction at P (ns), None if unmeasured
    x_bad_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def rtt(self) -> int:
        return self.d_x + self.d_y

    @classmethod
    def build(cls, ctx: DetectContext, f: int, d: int) -> DirView | None:
        """None when the direction has no segments, or the flow lacks the handshake legs
        (no vantage model without them, §1.1) or an MSS.  Built once per direction and
        trace (``ctx.memo``): cork, delayed_ack and nagle share it, read-only."""
        return ctx.memo(("nagle.DirView", f, d), lambda: cls._build(ctx, f, d))  # type: ignore[no-any-return]

    @classmethod
    def _build(cls, ctx: DetectContext, f: int, d: int) -> DirView | None:
        legs = refined_legs_ns(ctx, f)
        if legs is None:
            return None
        d_x, d_y = (legs[0], legs[1]) if d == 0 else (legs[1], legs[0])
        mss = ctx.eff_mss(f)
        if mss is None or mss <= 0:
            return None
        seg = ctx.seg_arrays(f, d)
        if seg["frame"].shape[0] < 1:
            return None
        p = ctx.packets_of(f)
        s_frame = seg["frame"].astype(np.int64, copy=False)
        y = np.nonzero(p.dir == 1 - d)[0]
        y_ack = p.ack[y]
        kinds = seg["kind"]
        s_ts = seg["ts_ns"].astype(np.int64, copy=False)
        return cls(
            f=f,
            d=d,
            p=p,
            mss=mss,
            d_x=d_x,
            d_y=d_y,
            s_frame=s_frame,
            s_ts=s_ts,
            s_off=seg["offset"].astype(np.int64, copy=False),
            s_len=seg["length"].astype(np.int64, copy=False),
            s_end=seg["end"].astype(np.int64, copy=False),
            s_kind=kinds,
            s_psh=seg["psh"].astype(bool, copy=False),
            s_fin=seg["fin"].astype(bool, copy=False),
            s_super=seg["super_segment"].astype(bool, copy=False),
            s_gap=seg["gap_before"].astype(np.int64, copy=False),
            s_wire=seg["wire_segments"].astype(np.int64, copy=False),
            s_pi=np.searchsorted(p.frame, s_frame),
            y_idx=y,
            y_ack=y_ack,
            y_ackmax=np.maximum.accumulate(y_ack) if y.size else y_ack,
            y_data=p.length[y] > 0,
            y_ts=p.ts[y],
            jitter=reaction_jitter_ns(ctx, f, d, d_x),
            x_bad_ts=s_ts[(kinds != "new") & (kinds != "prev_not_captured")],
        )

    def tolerance(self, *, tol_min_ms: float, tol_fraction: float) -> int:
        return lag_tolerance_ns(
            self.d_x, self.jitter, tol_min_ms=tol_min_ms, tol_fraction=tol_fraction
        )

    # -- Minshall's "small" (§1.3) --------------------------------------------------
    def small(self, j: np.ndarray | int) -> np.ndarray | bool:
        """Sub-MSS in Minshall's sense; super-segments are small iff len mod MSS ≠ 0."""
        ln, sup = self.s_len[j], self.s_super[j]
        return np.where(sup, ln % self.mss != 0, ln < self.mss)

    def partial(self, j: np.ndarray | int) -> np.ndarray | bool:
        """Less than one full segment (what Nagle can hold as a whole)."""
        return (~self.s_super[j]) & (self.s_len[j] < self.mss)

    # -- Y's packets -----------------------------------------------------------------
    def first_acks(self, after_pi: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """For each (X packet index, stream offset): the position in ``y_idx`` of the
        first Y packet after it whose cumulative ACK covers the offset; −1 when Y never
        acknowledged it in the capture, −2 when it did before it was sent (an anomaly)."""
        n = self.y_idx.size
        if n == 0:
            return np.full(offsets.shape, -1, np.int64)
        k = np.searchsorted(self.y_ackmax, offsets, side="left")
        pos0 = np.searchsorted(self.y_idx, after_pi, side="right")
        return np.where(k >= n, -1, np.where(k < pos0, -2, k)).astype(np.int64)

    def last_y_reaching_all(self, t_ns: np.ndarray, slack_ns: int) -> np.ndarray:
        """Vectorised :meth:`last_y_reaching` (−1 when none)."""
        bound = np.minimum(t_ns - self.d_x + slack_ns, t_ns - 1)
        return np.searchsorted(self.y_ts, bound, side="right") - 1

    def y_data_count(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """How many Y packets at positions [lo, hi) of ``y_idx`` carry data."""
        cd = np.concatenate(([0], np.cumsum(self.y_data)))
        lo = np.clip(lo, 0, self.y_idx.size)
        hi = np.clip(hi, 0, self.y_idx.size)
        return np.where(hi > lo, cd[hi] - cd[lo], 0)

    def last_y_reaching(self, t_ns: int, slack_ns: int) -> int | None:
        """Position in ``y_idx`` of the last Y packet that could have reached X before X
        sent the packet P saw at ``t_ns``: seen at P by t − d_X (+ slack), and before it
        (§1.1: a packet from Y seen at P reaches X, and X's reaction is back at P, d_X
        later).  At a receiver-side capture the latest Y packets before X's segment in
        frame order were still on their way to X."""
        bound = min(t_ns - self.d_x + slack_ns, t_ns - 1)
        k = int(np.searchsorted(self.y_ts, bound, side="right")) - 1
        return k if k >= 0 else None

    def x_trouble_between(self, t0: int, t1: int) -> bool:
        """A retransmission/probe/keep-alive of X in [t0, t1]."""
        a = np.searchsorted(self.x_bad_ts, t0, side="left")
        return bool(a < self.x_bad_ts.size and self.x_bad_ts[a] <= t1)


@dataclass
class Hold:
    """One Nagle hold: S1 (first segment), A (releasing ACK), S2 (held segment)."""

    view: DirView
    j1: int  # segment positions
    j2: int
    ka: int  # position in y_idx
    lag_ns: int
    gap_ns: int
    delay_ns: int  # D = t(A) − t(S1) − d_Y
    tol_ns: int
    pure: bool
    kind: str  # "nagle_delayed_ack" | "nagle"
    note: str  # "delayed_ack", "quick_ack", "piggybacked", "ack_too_late"
    checks: list[str]
    tls_records: int = 0
    tls_split: bool = False

    @property
    def a_pi(self) -> int:
        return int(self.view.y_idx[self.ka])


@dataclass
class Scan:
    """What one direction showed: the holds, how many S1/S2 pairs could have been held
    (``opportunities``), and frames proving Nagle was off (``nodelay_frames``)."""

    holds: list[Hold]
    opportunities: int
    nodelay_frames: tuple[int, int] | None


def nagle_off_evidence(view: DirView, tol: int) -> tuple[int, int] | None:
    """(S, S') frames where X sent a partial segment S' while its earlier small segment S
    could not yet have been acknowledged at X — impossible with Nagle on (Minshall's
    check holds any partial segment while the last small one is unacknowledged), so the
    socket has TCP_NODELAY (or uncorked with TCP_NAGLE_PUSH).  At P, the ACK of S reaches
    X d_X after P sees it; S' would have left X no earlier than that."""
    v, p = view, view.p
    m = v.s_frame.size
    if m < 2 or not v.y_idx.size:
        return None
    j2 = np.arange(1, m)
    j1 = j2 - 1
    new = v.s_kind == "new"
    full = v.mss - OPTION_MARGIN
    small1 = np.where(v.s_super[j1], v.s_len[j1] % v.mss != 0, v.s_len[j1] < full)
    part2 = ~v.s_super[j2] & (v.s_len[j2] < full)
    cand = new[j1] & new[j2] & (v.s_off[j2] == v.s_end[j1]) & ~v.s_fin[j2] & small1 & part2
    a, b = j1[cand], j2[cand]
    if not a.size:
        return None
    i1, i2 = v.s_pi[a], v.s_pi[b]
    ka = v.first_acks(i1, v.s_end[a])
    ia = v.y_idx[np.maximum(ka, 0)]
    # never acknowledged although the capture goes on past S'; or acknowledged too late
    # for the ACK to have reached X before S' left
    ev = ((ka == -1) & (v.y_idx[-1] > i2)) | (
        (ka >= 0) & ((ia > i2) | (p.ts[i2] - p.ts[ia] < v.d_x - tol))
    )
    hit = np.nonzero(ev)[0]
    if not hit.size:
        return None
    return int(v.s_frame[a[hit[0]]]), int(v.s_frame[b[hit[0]]])


def find_holds(
    ctx: DetectContext,
    view: DirView,
    *,
    tol_min_ms: float = LAG_TOL_MIN_NS / MS,
    tol_fraction: float = LAG_TOL_FRACTION,
    late_slack_ms: float = LATE_SLACK_NS / MS,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
) -> Scan:
    """Every S1/A/S2 triple of this direction that passes §2.3 and the §2.5 checks.

    The structural and timing rules are applied to all pairs at once (numpy); only the
    survivors — coupled holds, a handful per connection — are looped over.
    """
    v, p = view, view.p
    m = v.s_frame.size
    tol = v.tolerance(tol_min_ms=tol_min_ms, tol_fraction=tol_fraction)
    late = int(late_slack_ms * MS)
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
    kr = v.last_y_reaching_all(t2, tol)
    ok &= v.y_data_count(kc + 1, kr + 1) == 0
    # a piggy-backed A counts only when Y was sending on its own: data after S1 that did
    # not yet acknowledge it; otherwise A is Y's reply and S2 the next turn
    pure = ~v.y_data[kc] & ((p.flags[ia] & (SYN | FIN | RST)) == 0)
    pos0 = np.searchsorted(v.y_idx, i1, side="right")
    ok &= pure | (v.y_data_count(pos0, kc) > 0)
    opportunities = int(ok.sum())  # S2 could have been held behind S1 and released by A
    lag, gap = t2 - ta, t2 - t1
    ok &= (lag - v.d_x >= -tol) & (lag - v.d_x <= tol + late)  # released by the ACK
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


def _tls_evidence(ctx: DetectContext, v: DirView, holds: list[Hold]) -> None:
    """Records completed inside each held segment, and whether S1 ended inside a record
    (§1.6: the bytes of S2 were already part of a record the application had begun)."""
    if not holds:
        return
    recs = ctx.rec_arrays(v.f, v.d)
    if not recs["flow"].shape[0]:
        return
    first = recs["first_frame"]
    last = recs["last_byte_frame"]
    whole = np.sort(first[first == last])
    off = recs["offset"]  # sorted by offset (rec_arrays)
    end = off + recs["length"]
    for h in holds:
        f2 = int(v.s_frame[h.j2])
        h.tls_records = int(
            np.searchsorted(whole, f2, side="right") - np.searchsorted(whole, f2, side="left")
        )
        e1 = int(v.s_end[h.j1])
        k = int(np.searchsorted(off, e1, side="left")) - 1  # last record starting before e1
        h.tls_split = bool(k >= 0 and end[k] > e1)


def accepted_holds(
    ctx: DetectContext,
    view: DirView,
    *,
    tol_min_ms: float = LAG_TOL_MIN_NS / MS,
    tol_fraction: float = LAG_TOL_FRACTION,
    late_slack_ms: float = LATE_SLACK_NS / MS,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
    min_repeats: int = MIN_REPEATS,
    min_coupled_share: float = MIN_COUPLED_SHARE,
    scan: Scan | None = None,
) -> list[Hold]:
    """The holds of one direction that this detector reports (also used by
    :mod:`.delayed_ack` to leave Nagle × delayed-ACK events to this module; it passes
    the ``scan`` it already made)."""
    if scan is None:
        scan = find_holds(
            ctx,
            view,
            tol_min_ms=tol_min_ms,
            tol_fraction=tol_fraction,
            late_slack_ms=late_slack_ms,
            delack_timer_min_ms=delack_timer_min_ms,
            ack_delay_max_ms=ack_delay_max_ms,
        )
    if not scan.holds or scan.nodelay_frames is not None:
        return []  # Nagle is off on this socket: the couplings are something else
    n = len(scan.holds)
    repeated = n >= min_repeats and n >= min_coupled_share * scan.opportunities
    kept: list[Hold] = []
    _tls_evidence(ctx, view, scan.holds)
    for h in scan.holds:
        if h.kind == "nagle":
            if not (repeated or h.tls_records >= 2 or h.tls_split):
                continue  # a lone coupling to a quick ACK can be chance (§2.3, §8.1a)
        h.checks.append(
            f"Nagle not disabled: no partial segment left while an earlier small one was "
            f"unacknowledged; {n} of {scan.opportunities} testable pairs coupled to an ACK"
        )
        kept.append(h)
    return kept


def detect(
    ctx: DetectContext,
    *,
    tol_min_ms: float = LAG_TOL_MIN_NS / MS,
    tol_fraction: float = LAG_TOL_FRACTION,
    late_slack_ms: float = LATE_SLACK_NS / MS,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
    min_repeats: int = MIN_REPEATS,
    min_coupled_share: float = MIN_COUPLED_SHARE,
) -> list[Finding]:
    """Nagle holds (``nagle``) and Nagle × delayed-ACK holds (``nagle_delayed_ack``)."""
    out: list[Finding] = []
    for f in ctx.tcp_flows():
        for d in (0, 1):
            view = DirView.build(ctx, f, d)
            if view is None:
                continue
            kept = accepted_holds(
                ctx,
                view,
                tol_min_ms=tol_min_ms,
                tol_fraction=tol_fraction,
                late_slack_ms=late_slack_ms,
                delack_timer_min_ms=delack_timer_min_ms,
                ack_delay_max_ms=ack_delay_max_ms,
                min_repeats=min_repeats,
                min_coupled_share=min_coupled_share,
            )
            if kept:
                out.extend(_findings(ctx, view, kept))
    return out


def _findings(ctx: DetectContext, v: DirView, holds: list[Hold]) -> list[Finding]:
    f, d, p = v.f, v.d, v.p
    side = side_of(ctx, f, d)
    method = cost_method_for(side)
    sender, receiver = ctx.endpoint(f, d), ctx.peer(f, d)
    x_role, y_role = role_name(d), role_name(1 - d)
    stream = int(ctx.flow(f).stream)
    small_psh = int((np.asarray(v.small(np.arange(v.s_frame.size)), bool) & v.s_psh).sum())
    stats = {
        k: cost_stats([h.gap_ns / MS for h in holds if h.kind == k])
        for k in ("nagle", "nagle_delayed_ack")
    }
    out = []
    for h in holds:
        i1, ia, i2 = int(v.s_pi[h.j1]), h.a_pi, int(v.s_pi[h.j2])
        f1, fa, f2 = int(p.frame[i1]), int(p.frame[ia]), int(p.frame[i2])
        l1, l2 = int(v.s_len[h.j1]), int(v.s_len[h.j2])
        cost = h.gap_ns / MS
        d_ms = h.delay_ns / MS
        ev = [
            Evidence(f1, "first_segment", int(p.ts[i1])),
            Evidence(fa, "releasing_ack", int(p.ts[ia])),
            Evidence(f2, "held_segment", int(p.ts[i2])),
        ]
        frames_txt = f"frames {f1}, {fa}, {f2}"
        if h.kind == "nagle_delayed_ack":
            os_name, os_words = os_guess(d_ms)
            expl = (
                f"The {sender}'s {l2}-byte segment waited {cost:.1f} ms: Nagle's algorithm "
                f"held it behind the unacknowledged {l1}-byte segment before it until the "
                f"{receiver}'s delayed ACK arrived, and the {y_role} had held that ACK "
                f"≈{d_ms:.1f} ms ({os_words}) — {frames_txt}."
            )
            confidence = 0.95 if len(holds) >= 3 else 0.85
            expected = (v.d_x + v.d_y + h.delay_ns) / MS
        else:
            os_name = None
            why = {
                "quick_ack": f"the {y_role} acknowledged it at once, so the hold cost one round "
                "trip",
                "piggybacked": f"the ACK came piggy-backed on the {y_role}'s own data",
                "ack_too_late": f"the {y_role}'s ACK came {d_ms:.0f} ms late — longer than "
                "RFC 1122's 500 ms limit for a delayed ACK, so not a delayed-ACK timer "
                "(receiver stall or lost ACK)",
            }[h.note]
            expl = (
                f"The {sender}'s {l2}-byte segment waited {cost:.1f} ms: Nagle's algorithm "
                f"held it behind the unacknowledged {l1}-byte segment before it until the "
                f"{receiver} acknowledged that segment; {why} — {frames_txt}."
            )
            confidence = (0.7 if h.pure else 0.5) + (0.1 if len(holds) >= 3 else 0.0)
            expected = (v.d_x + v.d_y + max(h.delay_ns, 0)) / MS
        st = stats[h.kind]
        if st["count"] > 1:
            expl += (
                f" One of {st['count']} such holds in this direction (p50 {st['p50_ms']:.1f} ms, "
                f"p95 {st['p95_ms']:.1f} ms, {st['total_ms']:.0f} ms in all)."
            )
        remedy = (
            f"Set TCP_NODELAY on the {x_role}'s socket ({sender.split(' ', 1)[1]}), or hand each "
            "message to the kernel in one call (build header and body in one buffer, or "
            "writev/sendmsg with all parts) so no small write follows another small write "
            "within a round trip."
        )
        if h.kind == "nagle_delayed_ack":
            remedy += (
                f" TCP_QUICKACK on the {y_role}'s socket (re-armed after every recv) would only "
                "hide the symptom."
            )
        details: dict[str, Any] = {
            "s1_len": l1,
            "s2_len": l2,
            "gap_ms": round(cost, 3),
            "lag_ms": round(h.lag_ns / MS, 3),
            "ack_delay_ms": round(d_ms, 3),
            "d_x_ms": round(v.d_x / MS, 3),
            "d_y_ms": round(v.d_y / MS, 3),
            "tolerance_ms": round(h.tol_ns / MS, 3),
            "release": "pure_ack" if h.pure else "piggybacked",
            "expected_cost_ms": round(expected, 3),
            "vantage_side": side,
            "eff_mss": v.mss,
            "direction_holds": {k: s for k, s in stats.items() if s["count"]},
            "share_of_small_psh_segments": round(len(holds) / small_psh, 3) if small_psh else None,
            "frames_filter": frame_filter([f1, fa, f2]),
        }
        if os_name is not None:
            details["os_guess"] = os_name
        if h.note != "delayed_ack":
            details["note"] = h.note
        if h.tls_records or h.tls_split:
            details["tls_records_in_held_segment"] = h.tls_records
            details["s1_ends_inside_record"] = h.tls_split
        out.append(
            Finding(
                kind=h.kind,
                flow=f,
                dir=DIRS[d],
                t_start_ns=int(p.ts[i1]),
                t_end_ns=int(p.ts[i2]),
                cost_ms=cost,
                cost_method=method,
                evidence=ev,
                explanation=expl,
                remedy=remedy,
                display_filter=f"tcp.stream == {stream} && frame.number >= {f1} && "
                f"frame.number <= {f2}",
                vantage=ctx.vantage(f),
                confidence=min(confidence, 0.99),
                checks=list(h.checks),
                details=details,
            )
        )
    return out

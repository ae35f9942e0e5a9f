"""The one TCP model the detectors share (DETECTION.md §1.1–§1.3, §1.8, §2.3).

Detectors import this module, not each other.  It holds:

* **Vantage and legs** (§1.1, §1.2): the capture point P sees a packet from Y reach X
  d_X later; d_C and d_S are the handshake legs, lowered by min-filtered data → ACK
  samples (:func:`refined_legs_ns`).  Where P sits relative to a sender
  (:func:`side_of`) decides how a cost is measured (:func:`cost_method_for`, §2.4).
* **One direction view** (:class:`DirView`): X's segments and Y's packets of one flow
  direction as numpy arrays, built once per direction and trace (``DetectContext.memo``)
  and shared read-only by nagle, cork, delayed_ack and tls_records.
* **"Released by an ACK"** (§1.1, §2.3): a segment released by a packet from Y leaves X
  when that packet arrives, so at P ``t(S) − t(packet) ≈ d_X``.  One tolerance
  (:meth:`DirView.tolerance`: measured reaction jitter, else a fraction of d_X, see
  ``constants.LAG_TOL_*``), one coupling test (:meth:`DirView.coupled`), one "was it an
  answer to Y's data" test (:meth:`DirView.y_data_reaching`).
* **Nagle holds** (§2.3, §2.5): the S1/A/S2 scan (:func:`find_holds`,
  :func:`accepted_holds`) that nagle reports and delayed_ack leaves to it.
* **Cost statistics** per direction (§1.8) and the delayed-ACK OS guess (§2.3).
* **Connection timelines** (:class:`ConnTimeline`): when a TCP/TLS connection started
  (SYN, ClientHello), became usable, was used and closed — what reuse (§7.3) and
  resumption (§7.4) compare across connections.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from ..net.decode import ACK, FIN, RST, SYN
from ..schema import is_missing as _na
from .constants import (
    AUTOCORK_MAX_GAP_NS,
    DELACK_OS_BANDS_MS,
    DELACK_TIMER_MIN_NS,
    JIFFY_HZ100_NS,
    JITTER_MIN_SAMPLES,
    MIN_COUPLED_SHARE,
    MIN_REPEATS,
    MS,
    RFC1122_ACK_DELAY_MAX_NS,
    RTO_HIGH_FACTOR,
    TCP_RTO_MIN_NS,
    ContentType,
    Coupling,
)
from .context import DetectContext, FlowPackets


def _sorted_list(a: np.ndarray) -> list[int] | None:
    """``a`` as a list of Python ints when it is sorted integers (what ``bisect`` needs to
    answer as ``np.searchsorted`` does), else None."""
    if a.dtype.kind not in "iu" or (a.size > 1 and bool((a[1:] < a[:-1]).any())):
        return None
    return a.tolist()  # type: ignore[no-any-return]


# The probe timer (≥ TCP_RTO_MIN after the write) fires within one HZ=100 jiffy of its
# time (DETECTION.md §2.1); a release classified as a cork release lies in
# [TCP_RTO_MIN − slack, RTO_HIGH_FACTOR × (srtt + TCP_RTO_MIN) + slack].
CORK_SLACK_NS = JIFFY_HZ100_NS
# TCP options can shrink a full segment below eff_mss (SACK blocks: up to 40 B of
# options); used only for the "Nagle is off" evidence, where a false "small" would hide
# real holds rather than invent them.
OPTION_MARGIN = 40
# A TCP-terminating relay between the capture point and the server (split TCP: a VPN
# capture app's userspace stack, a proxy that connects upstream before it answers the
# SYN) acknowledges the client's data within µs while its SYN/ACK waited for the upstream
# connect: the server's data → ACK reaction (the refined leg, §1.2) is a small fraction of
# the handshake leg.  A genuine server's ACK cannot come sooner than the path allows, and
# its SYN/ACK costs it at most its SYN processing (0.3 ms in the lab) beyond that, so
# "< 1/10 of a handshake leg of ≥ 1 ms" leaves such servers out [judgement; nDPI's
# whatsapp_voice_and_message.pcap: SYN/ACK 61 ms, data ACKed in 0.06 ms].
RELAY_LEG_RATIO = 0.1
RELAY_MIN_HANDSHAKE_LEG_NS = 1 * MS


# --- vantage, legs, cost accounting ----------------------------------------------------------
def refined_legs_ns(ctx: DetectContext, f: int) -> tuple[int | None, int | None]:
    """(d_C, d_S) at the capture point: the handshake legs (§1.1), each lowered by the
    min-filtered data → first-covering-ACK samples across it (§1.2); None for a leg the
    handshake did not show.

    The SYN → SYN/ACK leg includes the server's SYN processing (0.3 ms in the lab), and
    a single handshake sample carries that path's jitter; a data segment answered by an
    immediate ACK is a cleaner sample.  Every sample is ≥ the true leg (a segment cannot
    be acknowledged before it arrives), so the minimum is the best estimate.
    """
    return ctx.memo(("tcp_model.refined_legs", f), lambda: _refined_legs(ctx, f))  # type: ignore[no-any-return]


def _refined_legs(ctx: DetectContext, f: int) -> tuple[int | None, int | None]:
    legs = list(ctx.legs_ns(f))
    if legs[0] is None and legs[1] is None:
        return None, None
    samples = sampled_legs_ns(ctx, f)
    for leg in (0, 1):
        cur, sample = legs[leg], samples[leg]
        if cur is not None and sample is not None:
            legs[leg] = max(0, min(cur, sample))
    return legs[0], legs[1]


def sampled_legs_ns(ctx: DetectContext, f: int) -> tuple[int | None, int | None]:
    """(d_C, d_S) from data → first-covering-ACK samples alone (§1.2: the minimum over the
    flow's new data segments), None for a leg without a sample — what repeated handshake
    packets (a lost SYN or SYN/ACK) cannot corrupt."""
    return ctx.memo(("tcp_model.sampled_legs", f), lambda: _sampled_legs(ctx, f))  # type: ignore[no-any-return]


def _sampled_legs(ctx: DetectContext, f: int) -> tuple[int | None, int | None]:
    legs: list[int | None] = [None, None]
    every = ctx.memo(("tcp_model.all_data_acks",), lambda: _all_data_acks(ctx))
    if every is not None and ctx.memoised(("tcp_model.leg_minima",)):
        # every direction's least sample, made with the pairs (:func:`_all_data_acks`)
        minima = ctx.memo(("tcp_model.leg_minima",), dict)
        for d in (0, 1):
            least = minima.get(2 * f + d)
            if least is not None:
                legs[1 if d == 0 else 0] = max(0, least)
        return legs[0], legs[1]
    p = ctx.packets_of(f)
    for d in (0, 1):
        leg = 1 if d == 0 else 0  # c2s data is acknowledged across the server leg
        pairs = _data_acks(ctx, f, d)
        if pairs is not None and pairs[1].size:
            pi, ya = pairs[1], pairs[2]
            legs[leg] = max(0, int((p.ts[ya] - p.ts[pi]).min()))
    return legs[0], legs[1]


def _data_acks(ctx: DetectContext, f: int, d: int) -> tuple[int, np.ndarray, np.ndarray] | None:
    """Direction ``d``'s new data segments and the first packet of the other side after
    each whose cumulative ACK covers it: (new segments, their packet indices, the ACKs'
    packet indices) for the segments so acknowledged; None without new data or without a
    packet from the other side.  Once per direction and trace: the leg samples (§1.2)
    and the reaction jitter of the other side (:func:`reaction_jitter_ns`) both read it."""
    every = ctx.memo(("tcp_model.all_data_acks",), lambda: _all_data_acks(ctx))
    if every is not None:
        return every.get(2 * f + d)  # type: ignore[no-any-return]
    return ctx.memo(("tcp_model.data_acks", f, d), lambda: _make_data_acks(ctx, f, d))  # type: ignore[no-any-return]


_FRAME_BITS = 40  # a (flow, frame) pair as one int64: flow << 40 | frame
_FLOW_MAX = 1 << 22


def _all_data_acks(
    ctx: DetectContext,
) -> dict[int, tuple[int, np.ndarray, np.ndarray]] | None:
    """:func:`_make_data_acks` of every direction at once, by direction key ``2·flow +
    dir`` (absent: None): one pass over all new segments and all packets (segmented
    searches: a group's number times a bound plus the value, so one sorted array holds
    every direction's).  None when frames, flows or offsets do not fit those keys (then
    each direction on its own)."""
    pc = ctx.packet_columns
    pflow = ctx.packet_flows
    new = ctx.seg_kind_is("new")
    nk = ctx.seg_dir_keys[new]
    out: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
    if not nk.shape[0] or not pflow.shape[0]:
        return out
    # the flow's packet index of each new segment (``searchsorted(p.frame, frame)``),
    # and its row of the packet columns (None: flows or frames do not fit the keys)
    local = seg_packet_index(ctx)
    if local is None:
        return None
    pi = local[new]
    gpi = pi + np.searchsorted(pflow, nk >> 1, side="left")
    ack = pc["ack"]
    s_end = ctx.seg_columns["end"][new].astype(np.int64, copy=False)
    yg = y_groups(ctx)
    yo, gid, gkeys = yg.yo, yg.gid, yg.keys
    if not yo.shape[0]:
        return out
    # Y's running max ACK and Y's packet indices, per group, each one sorted array
    n_g = int(gkeys.shape[0])
    acks, at = grouped(gid, ack[yo], n_g), grouped(gid, yo, n_g)
    if acks is None or at is None:
        return None
    acks.running_max()
    # each new segment's group among Y's
    gc, lo, ny = yg.span(nk)
    has_y = ny > 0
    k = acks.search(gc, s_end, "left") - lo
    pos0 = at.search(gc, gpi, "right") - lo
    ok = has_y & (k < ny) & (k >= pos0)
    yloc = yo[np.where(ok, lo + k, 0)] - (gpi - pi)
    # per direction: (number of new segments, pi[ok], Y's ACK packet index)
    cut = np.flatnonzero(np.concatenate(([True], nk[1:] != nk[:-1], [True])))
    # and the leg sample of each (:func:`_sampled_legs`: the least ACK − data time)
    pts = pc["ts"]
    lag = np.where(ok, pts[yo[np.where(ok, lo + k, 0)]] - pts[gpi], np.iinfo(np.int64).max)
    least = np.minimum.reduceat(lag, cut[:-1]).tolist()
    n_ok = np.add.reduceat(ok, cut[:-1]).tolist()
    minima: dict[int, int] = {}
    for i, (a, b) in enumerate(zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True)):
        if not bool(has_y[a]):
            continue
        sel = ok[a:b]
        out[int(nk[a])] = (b - a, pi[a:b][sel], yloc[a:b][sel])
        if n_ok[i]:
            minima[int(nk[a])] = int(least[i])
    ctx.memo(("tcp_model.leg_minima",), lambda: minima)
    return out


def _make_data_acks(
    ctx: DetectContext, f: int, d: int
) -> tuple[int, np.ndarray, np.ndarray] | None:
    p = ctx.packets_of(f)
    seg = ctx.seg_arrays(f, d)
    new = seg["kind"] == "new"
    n_new = int(new.sum())
    y = np.nonzero(p.dir == 1 - d)[0]
    if not n_new or not y.size:
        return None
    ackmax = np.maximum.accumulate(p.ack[y])
    pi = np.searchsorted(p.frame, seg["frame"][new].astype(np.int64, copy=False))
    k = np.searchsorted(ackmax, seg["end"][new].astype(np.int64, copy=False), side="left")
    ok = (k < y.size) & (k >= np.searchsorted(y, pi, side="right"))
    return n_new, pi[ok], y[k[ok]]


@dataclass(frozen=True)
class YGroups:
    """Every direction's Y packets (the other side's: ``DirView.y_idx``) at once: ``yo``
    the global packet indices (:attr:`DetectContext.packet_columns` rows) grouped by the
    direction key ``2·flow + d`` of the direction they answer, in frame order within a
    group; ``gid`` each row's group number, ``head`` each group's first row, ``keys``
    each group's direction key (sorted)."""

    yo: np.ndarray
    gid: np.ndarray
    head: np.ndarray
    keys: np.ndarray

    def span(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each direction key: (its group number, clipped; first row; row count —
        0 for a direction without Y packets)."""
        if not self.keys.shape[0]:
            z = np.zeros(keys.shape, np.int64)
            return z, z, z
        g = np.minimum(np.searchsorted(self.keys, keys, side="left"), self.keys.shape[0] - 1)
        bounds = np.append(self.head, self.yo.shape[0])
        n = np.where(self.keys[g] == keys, bounds[g + 1] - bounds[g], 0)
        return g, bounds[g], n


@dataclass(frozen=True)
class Grouped:
    """Values in consecutive groups as one int64 array sorted as a whole: ``keys = gid ·
    span + (value − base)``, every value in ``[base, base + span − 2]``, so one search
    answers each group's own question (:meth:`search`).  The searches equal a per-group
    ``np.searchsorted`` only for groups whose values do not go backwards
    (:func:`backwards` tells which do).  Built by :func:`grouped`."""

    keys: np.ndarray
    gid: np.ndarray
    base: int
    span: int

    def search(self, g: np.ndarray, v: np.ndarray, side: str) -> np.ndarray:
        """For each query: ``np.searchsorted(values of group g, v, side)`` plus the
        group's first row (a row of ``keys``).  ``g`` must name a group of the keys or
        one with no rows (the answer is then where it would be)."""
        q = np.clip(v, self.base - 1, self.base + self.span - 1) - self.base
        return np.searchsorted(self.keys, g * self.span + q, side=side)  # type: ignore[call-overload,no-any-return]

    def running_max(self) -> np.ndarray:
        """Each group's running maximum of its values (in place of ``keys``: the group
        offset keeps one group's values out of the next's)."""
        np.maximum.accumulate(self.keys, out=self.keys)
        return self.keys - self.gid * self.span + self.base  # type: ignore[no-any-return]


def grouped(gid: np.ndarray, values: np.ndarray, n_groups: int) -> Grouped | None:
    """:class:`Grouped` of ``values`` (int) by non-decreasing group numbers ``gid`` in
    ``[0, n_groups)``; None when the keys would not fit int64 (then the caller asks each
    group on its own)."""
    if values.dtype.kind != "i":
        return None
    base = int(values.min()) if values.shape[0] else 0
    top = int(values.max()) if values.shape[0] else 0
    span = top - base + 2
    if (n_groups + 2) * span >= 1 << 62 or base - 1 < -(1 << 62) or top + 2 >= 1 << 62:
        return None
    keys = gid * span
    keys += values
    keys -= base
    return Grouped(keys, gid, base, span)


def view_segment_rows(
    ctx: DetectContext, views: list[DirView]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Every segment row of ``views``' directions (rows of ``ctx.seg_columns``, in view
    order) with its view's number (``job``), and the views' direction keys ``2·flow +
    dir``: ``(keys, job, rows)``.  None when the keys are not strictly increasing or a
    view's segments are not its direction's rows (the caller then asks each view on
    its own)."""
    keys = np.array([2 * v.f + v.d for v in views], np.int64)
    if keys.shape[0] > 1 and bool((keys[1:] <= keys[:-1]).any()):
        return None
    skey = ctx.seg_dir_keys
    sa = np.searchsorted(skey, keys, side="left")
    nseg = np.searchsorted(skey, keys, side="right") - sa
    if any(v.s_frame.shape[0] != n for v, n in zip(views, nseg.tolist(), strict=True)):
        return None
    job = np.repeat(np.arange(keys.shape[0]), nseg)
    rows = np.arange(job.shape[0]) - (np.cumsum(nseg) - nseg)[job] + sa[job]
    return keys, job, rows


# Rows per pass of the passes over every direction's segments or records that go a slice
# of whole directions at a time (:func:`key_chunks`): their temporaries (~0.5 MB an array)
# reused from the heap pass after pass, never a full-size set of them at the detectors'
# peak (at h2-1M, full-size ones raised the analysis's peak ~25 MiB and the forked side's
# ~40 MiB)
ROWS_AT_ONCE = 1 << 16


def key_chunks(keys: np.ndarray, size: int | None = None) -> Iterator[tuple[int, int]]:
    """``[a, b)`` row ranges of ``keys`` (sorted) that cover it in order, each about
    ``size`` (default :data:`ROWS_AT_ONCE`) rows and cut where the key changes (a key
    with more rows: all of them in one range)."""
    size = ROWS_AT_ONCE if size is None else max(int(size), 1)
    n = int(keys.shape[0])
    a = 0
    while a < n:
        b = n
        if a + size < n:
            b = int(np.searchsorted(keys, keys[a + size], side="left"))
            if b <= a:  # one key longer than a range: all of it
                b = int(np.searchsorted(keys, keys[a], side="right"))
        yield a, b
        a = b


def backwards(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group: whether its values go backwards somewhere (``gid`` non-decreasing).
    At least one entry (False when there is no group: what a clipped group number 0
    reads)."""
    out = np.zeros(max(n_groups, 1), bool)
    if values.shape[0] > 1:
        down = np.flatnonzero((values[1:] < values[:-1]) & (gid[1:] == gid[:-1]))
        out[gid[down + 1]] = True
    return out


def y_groups(ctx: DetectContext) -> YGroups:
    """:class:`YGroups` of the trace, built once per :meth:`DetectContext.memo` lifetime."""
    return ctx.memo(("tcp_model.y_groups",), lambda: _y_groups(ctx))  # type: ignore[no-any-return]


def _y_groups(ctx: DetectContext) -> YGroups:
    pc = ctx.packet_columns
    pflow, pdir = ctx.packet_flows, pc["dir"]
    ok_dir = (pdir == 0) | (pdir == 1)  # a packet of no known direction is nobody's Y
    ykey = pflow * 2 + (1 - pdir)
    yo = np.flatnonzero(ok_dir)
    yo = yo[np.argsort(ykey[yo], kind="stable")]
    yk = ykey[yo]
    head = np.flatnonzero(np.concatenate(([True], yk[1:] != yk[:-1]))) if yk.shape[0] else yo
    gid = np.zeros(yk.shape[0], np.int64)
    gid[head[1:]] = 1
    np.cumsum(gid, out=gid)
    return YGroups(yo, gid, head, yk[head])


def relay_server(ctx: DetectContext, f: int) -> bool:
    """The flow's server-side TCP endpoint is a relay near the capture point (split TCP,
    :data:`RELAY_LEG_RATIO`): its ACKs answer the client's data far sooner than its SYN/ACK
    answered the SYN.  Its sending (Nagle? a window of one segment? a timer?) is the
    relay's own and not the server application's: the timing rules do not apply to it.
    Not judged at a server-side capture, where the server leg is the server's own
    SYN processing."""
    if ctx.vantage(f) == "server":
        return False
    _, ds = ctx.legs_ns(f)
    if ds is None or ds < RELAY_MIN_HANDSHAKE_LEG_NS:
        return False
    _, rs = refined_legs_ns(ctx, f)
    return rs is not None and rs < RELAY_LEG_RATIO * ds


def role_name(d: int) -> str:
    return "client" if d == 0 else "server"


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
    """§1.8 per-direction aggregate: count, total, p50/p95, max (ms)."""
    a = np.asarray(costs, dtype=float)
    if a.size == 0:
        return {"count": 0}
    p50, p95 = _percentiles(a, (0.5, 0.95))
    return {
        "count": int(a.size),
        "total_ms": round(float(a.sum()), 3),
        "p50_ms": round(p50, 3),
        "p95_ms": round(p95, 3),
        "max_ms": round(float(a.max()), 3),
    }


def _percentiles(a: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """``np.percentile(a, 100·q).tolist()`` for a non-empty float64 array and fractions
    ``qs`` (numpy's default "linear" method, its arithmetic step by step: virtual index
    (n − 1)·q, then ``_lerp`` from the lower value below ½ and from the upper one from ½
    on) — for a fraction of ``np.percentile``'s per-call cost on the small arrays of one
    direction.  Not finite values or a −0.0 (numpy's partition may place it before
    or after a 0.0): np.percentile itself."""
    s = np.sort(a)
    if not bool(np.isfinite(a).all()) or bool(np.any((a == 0) & np.signbit(a))):
        return np.percentile(a, [100 * q for q in qs]).tolist()  # type: ignore[no-any-return]
    n = s.shape[0]
    out = []
    for q in qs:
        v = (n - 1) * q
        if v >= n - 1:
            out.append(float(s[n - 1]))
            continue
        i = int(v)  # floor: v ≥ 0
        lo, hi = float(s[i]), float(s[i + 1])
        t = v - i
        diff = hi - lo
        out.append(hi - diff * (1 - t) if t >= 0.5 else lo + diff * t)
    return out


def os_guess(d_ms: float) -> tuple[str, str]:
    """(short guess, words) for a receiver ACK delay of ``d_ms`` (DETECTION.md §2.3)."""
    for lo, hi, name, words in DELACK_OS_BANDS_MS:
        if lo <= d_ms <= hi:
            return name, words
    return "unknown", "a delayed-ACK timer of an unrecognised stack"


# --- the coupling tolerance ------------------------------------------------------------------
def lag_tolerance_ns(
    d_x_ns: int, jitter_ns: int | None, *, tol_min_ms: float, tol_fraction: float
) -> int:
    """DETECTION.md §2.3 coupling tolerance (``constants.LAG_TOL_*``): max(tol_min,
    3·jitter_X) with X's reaction jitter measured, else max(tol_min, tol_fraction·d_X)."""
    if jitter_ns is not None:
        return int(max(tol_min_ms * MS, 3 * jitter_ns))
    return int(max(tol_min_ms * MS, tol_fraction * d_x_ns))


def reaction_jitter_ns(ctx: DetectContext, f: int, d: int, d_x: int) -> int | None:
    """Robust σ (1.4826·MAD) of X's immediate pure-ACK reactions to Y's data at the
    capture point (X sends in direction ``d``) — the same "X reacts in the kernel to a
    packet from Y" event as a release by an ACK; None with fewer than JITTER_MIN_SAMPLES."""
    p = ctx.packets_of(f)
    pairs = _data_acks(ctx, f, 1 - d)  # Y's new data and X's first ACK covering each
    if pairs is None or pairs[0] < JITTER_MIN_SAMPLES or not pairs[1].size:
        return None
    pi, xa = pairs[1], pairs[2]
    pure = (p.length[xa] == 0) & ((p.flags[xa] & (SYN | FIN | RST)) == 0)
    lag = (p.ts[xa] - p.ts[pi])[pure]
    # immediate ones only: a delayed ACK (≥ 30 ms later) is not a reaction time
    lag = lag[lag < d_x + DELACK_TIMER_MIN_NS / 2]
    if lag.size < JITTER_MIN_SAMPLES:
        return None
    return int(1.4826 * median_of(np.abs(lag - median_of(lag))))


# lags below this are whole numbers of ns whose halves float64 holds exactly, so twice a
# deviation from a median is a whole number (:func:`reaction_jitters_ns`)
_HALVES_EXACT_NS = 1 << 50


def reaction_jitters_ns(
    ctx: DetectContext, asked: list[tuple[int, int, int, int]]
) -> dict[int, int]:
    """:func:`reaction_jitter_ns` of many directions at once: ``asked`` lists (a number,
    flow, direction, d_X); the answer maps each number whose jitter is measured to it
    (absent: None).  The pure-ACK lags of every direction are filtered in one pass and
    each direction's two medians are read from one sort of all of them."""
    out: dict[int, int] = {}
    pflow = ctx.packet_flows
    pc = ctx.packet_columns
    cand: list[tuple[int, int, int, np.ndarray, np.ndarray]] = []
    for i, f, d, d_x in asked:
        pairs = _data_acks(ctx, f, 1 - d)  # Y's new data and X's first ACK covering each
        if pairs is None or pairs[0] < JITTER_MIN_SAMPLES or not pairs[1].size:
            continue
        cand.append((i, f, d_x, pairs[1], pairs[2]))
    if not cand:
        return out
    flows = np.array([c[1] for c in cand], np.int64)
    start = np.searchsorted(pflow, flows, side="left")
    n = np.array([c[3].shape[0] for c in cand], np.int64)
    gid = np.repeat(np.arange(len(cand)), n)
    at = start[gid]
    pi = np.concatenate([c[3] for c in cand]) + at
    xa = np.concatenate([c[4] for c in cand]) + at
    del at
    length, flags, ts = pc["length"], pc["flags"], pc["ts"]
    pure = (length[xa] == 0) & ((flags[xa] & (SYN | FIN | RST)) == 0)
    lag = ts[xa] - ts[pi]
    # immediate ones only: a delayed ACK (≥ 30 ms later) is not a reaction time
    limit = np.array([c[2] + DELACK_TIMER_MIN_NS / 2 for c in cand], np.float64)
    keep = pure & (lag < limit[gid])
    lag, gid = lag[keep], gid[keep]
    del pi, xa, pure, keep
    counts = np.bincount(gid, minlength=len(cand))
    med = _medians_sorted(_sorted_in_groups(gid, lag, len(cand)), counts)
    dev = np.abs(lag - med[gid])
    twice = dev * 2.0  # whole numbers (a median is a whole or half number of ns)
    exact = bool(np.abs(lag).max(initial=0) < _HALVES_EXACT_NS)
    med2 = _medians_sorted(
        _sorted_in_groups(gid, twice.astype(np.int64), len(cand)).astype(np.float64) / 2.0
        if exact
        else dev[np.lexsort((dev, gid))],
        counts,
    )
    for c, k, m in zip(cand, counts.tolist(), med2.tolist(), strict=True):
        if k >= JITTER_MIN_SAMPLES:
            out[c[0]] = int(1.4826 * m)
    return out


def _sorted_in_groups(gid: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """``values`` (int64) sorted within each group of the non-decreasing ``gid``: one
    sort of :class:`Grouped` keys where they fit, else a lexsort."""
    g = grouped(gid, values, n_groups)
    if g is None:
        return values[np.lexsort((values, gid))]
    k = np.sort(g.keys)
    k -= g.gid * g.span  # gid is the same after the sort: groups stay in place
    k += g.base
    return k


def _medians_sorted(s: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per group of ``s`` (consecutive groups of ``counts`` rows, each sorted; ``gid``
    non-decreasing keeps them so in ``np.lexsort((values, gid))``): the group's
    :func:`median_of` as float64 (NaN for an empty group)."""
    first = np.cumsum(counts) - counts
    m = counts // 2
    hi = np.minimum(first + m, max(s.shape[0] - 1, 0))
    lo = np.maximum(hi - 1, 0)
    if not s.shape[0]:
        return np.full(counts.shape, np.nan)
    a = s[lo].astype(np.float64)
    b = s[hi].astype(np.float64)
    out = np.where(counts % 2 == 1, b, (a + b) / 2.0)
    return np.where(counts > 0, out, np.nan)


def median_of(a: np.ndarray) -> float:
    """``float(np.median(a))`` of a non-empty array without NaN — the middle value, or the
    mean of the two middle ones as ``np.mean`` forms it (both as float64, added, halved) —
    for a fraction of ``np.median``'s per-call cost on the small arrays of one direction."""
    s = np.sort(a)
    m = s.shape[0] // 2
    if s.shape[0] % 2:
        return float(s[m])
    return (float(s[m - 1]) + float(s[m])) / 2.0


# --- one flow direction --------------------------------------------------------------------
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
    p: FlowPackets
    mss: int  # the flow's effective MSS (§1.3); 0 when unknown
    d_x: int  # leg P ↔ X (refined, ns); 0 when the handshake did not show it
    d_y: int  # leg P ↔ Y
    legs_known: bool  # both legs from the handshake: the vantage model applies (§1.1)
    x_mss_known: bool  # X's own segment size is known (its SYN's MSS, or a full segment seen)
    relay: bool  # X is a TCP-terminating relay near P (:func:`relay_server`)
    seg: dict[str, np.ndarray]  # X's segments as ``ctx.seg_arrays`` gives them (views)
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
    coupling: Coupling = field(default_factory=Coupling)  # the trace's (ctx.coupling)

    @property
    def rtt(self) -> int:
        return self.d_x + self.d_y

    @cached_property
    def s_new(self) -> np.ndarray:
        """Per segment: new data (``kind == "new"``), compared once per view."""
        return np.asarray(self.s_kind == "new", bool)

    @cached_property
    def new_pos(self) -> np.ndarray:
        """Positions of X's new-data segments."""
        return np.nonzero(self.s_new)[0]

    @classmethod
    def build(cls, ctx: DetectContext, f: int, d: int) -> DirView:
        """The view of direction ``d`` of TCP flow ``f``, built once per direction and
        trace (``ctx.memo``) and shared read-only by every detector that asks.  The first
        view asked for builds every TCP direction's at once (:func:`build_views`: the
        detectors that read views read them all); a direction it did not build (not a
        TCP flow of the trace, or keys that do not fit its searches) is built on its
        own (:meth:`_build`)."""
        key = ("tcp_model.DirView", f, d)
        if not ctx.memoised(key):
            ctx.memo(("tcp_model.views_built",), lambda: build_views(ctx))
        return ctx.memo(key, lambda: cls._build(ctx, f, d))  # type: ignore[no-any-return]

    @classmethod
    def timed(cls, ctx: DetectContext, f: int, d: int) -> DirView | None:
        """The view when timing questions can be asked of it, else None: the direction has
        segments and the flow has both handshake legs (no vantage model without them,
        §1.1) and an MSS (nagle, cork and delayed_ack need all three), and its sender is
        an end host's TCP, not a relay near the capture point (:func:`relay_server`)."""
        v = cls.build(ctx, f, d)
        return v if v.timing_applies and v.s_frame.size > 0 else None

    @property
    def timing_applies(self) -> bool:
        """The vantage model (§1.1) and Minshall's rule can be applied to this sender."""
        return self.legs_known and self.mss > 0 and not self.relay

    @classmethod
    def _build(cls, ctx: DetectContext, f: int, d: int) -> DirView:
        dc, ds = refined_legs_ns(ctx, f)
        d_x, d_y = (dc, ds) if d == 0 else (ds, dc)
        legs_known = d_x is not None and d_y is not None
        mss = ctx.eff_mss(f)
        seg = ctx.seg_arrays(f, d)
        p = ctx.packets_of(f)
        s_frame = seg["frame"].astype(np.int64, copy=False)
        y = np.nonzero(p.dir == 1 - d)[0]
        y_ack = p.ack[y]
        kinds = seg["kind"]
        rows = ctx.seg_rows(f, d)  # the kinds as masks over every segment, made once
        s_new = ctx.seg_kind_is("new")[rows]
        s_ts = seg["ts_ns"].astype(np.int64, copy=False)
        mss_i = mss if mss is not None and mss > 0 else 0
        # X's segment size (gso_size) is min(Y's MSS option, X's own): known when X's SYN
        # announced its own, or when X sent an ordinary segment of exactly eff_mss
        row = ctx.flow(f)
        own = row.c_mss if d == 0 else row.s_mss
        x_mss_known = not _na(own) or bool(
            mss_i
            and np.any((seg["length"] == mss_i) & ~seg["super_segment"].astype(bool, copy=False))
        )
        view = cls(
            f=f,
            d=d,
            p=p,
            mss=mss_i,
            d_x=d_x or 0,
            d_y=d_y or 0,
            legs_known=legs_known,
            x_mss_known=x_mss_known,
            relay=d == 1 and relay_server(ctx, f),
            seg=seg,
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
            jitter=reaction_jitter_ns(ctx, f, d, d_x) if d_x is not None and legs_known else None,
            x_bad_ts=s_ts[~s_new & ~ctx.seg_kind_is("prev_not_captured")[rows]],
            coupling=ctx.coupling,
        )
        view.s_new = s_new  # (the cached property's value: kind == "new")
        return view

    # -- "released by an ACK" (§1.1, §2.3) ------------------------------------------------
    def tolerance(self) -> int:
        """The coupling tolerance of this direction (one rule: :func:`lag_tolerance_ns`
        with the trace's :class:`Coupling`)."""
        c = self.coupling
        return lag_tolerance_ns(
            self.d_x, self.jitter, tol_min_ms=c.tol_min_ms, tol_fraction=c.tol_fraction
        )

    def coupled(self, lag_ns: Any, tol_ns: int, late_ns: int = 0) -> Any:
        """X's packet seen ``lag_ns`` after a packet from Y was released by it: the lag is
        d_X within −tol … +tol (+ ``late_ns``, a busy sender's allowance: a release can be
        late, never early).  Scalars or arrays."""
        dev = lag_ns - self.d_x
        return (dev >= -tol_ns) & (dev <= tol_ns + late_ns)

    # -- Minshall's "small" (§1.3) --------------------------------------------------
    def small(self, j: np.ndarray | int) -> np.ndarray | bool:
        """Sub-MSS in Minshall's sense; super-segments are small iff len mod MSS ≠ 0 —
        which needs X's own segment size: a super-segment of a sender that never showed it
        (no MSS option in its SYN, no full segment seen) is not known to be small (a
        2800-byte GSO burst is two full segments of a 1400-byte MSS, and "small" under a
        1460-byte one)."""
        ln, sup = self.s_len[j], self.s_super[j]
        return np.where(sup, self.x_mss_known & (ln % self.mss != 0), ln < self.mss)

    def sized(self, j: np.ndarray | int) -> np.ndarray | bool:
        """Whether the segment's size relative to X's MSS is known (see :meth:`small`)."""
        return ~self.s_super[j] | self.x_mss_known

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

    @cached_property
    def _y_data_cum(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.y_data)))

    def y_data_count(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """How many Y packets at positions [lo, hi) of ``y_idx`` carry data."""
        cd = self._y_data_cum
        lo = np.clip(lo, 0, self.y_idx.size)
        hi = np.clip(hi, 0, self.y_idx.size)
        return np.where(hi > lo, cd[hi] - cd[lo], 0)

    def y_data_reaching(self, k: Any, t_ns: Any, slack_ns: int) -> Any:
        """How many data packets Y sent after its packet at position ``k`` of ``y_idx``
        that reached X before X's packet seen at ``t_ns`` left (:meth:`last_y_reaching`):
        when > 0, X's packet may answer Y's data — an application exchange (§2.5), not a
        release by the ACK at ``k``.  Scalars or arrays."""
        if np.ndim(k) == 0 and np.ndim(t_ns) == 0:  # one question: no array round trip
            kr = self.last_y_reaching(int(t_ns), slack_ns)
            if kr is None or kr <= int(k):
                return 0
            cd = self._y_data_cum
            return int(cd[kr + 1] - cd[int(k) + 1])
        return self.y_data_count(
            np.asarray(k) + 1, self.last_y_reaching_all(np.asarray(t_ns), slack_ns) + 1
        )

    def y_sent_data_between(self, after_pi: Any, k: Any) -> Any:
        """Y sent data after X's packet ``after_pi`` (packet index) and before its packet
        at position ``k`` of ``y_idx``: Y was sending on its own, so an ACK piggy-backed
        on Y's data at ``k`` is not Y's reply to X (§2.5).  Scalars or arrays."""
        pos0 = np.searchsorted(self.y_idx, after_pi, side="right")
        if np.ndim(pos0) == 0 and np.ndim(k) == 0:
            cd = self._y_data_cum
            return int(k) > int(pos0) and int(cd[int(k)] - cd[int(pos0)]) > 0
        return self.y_data_count(pos0, np.asarray(k)) > 0

    def last_y_reaching(self, t_ns: int, slack_ns: int) -> int | None:
        """Position in ``y_idx`` of the last Y packet that could have reached X before X
        sent the packet P saw at ``t_ns``: seen at P by t − d_X (+ slack), and before it
        (§1.1: a packet from Y seen at P reaches X, and X's reaction is back at P, d_X
        later).  At a receiver-side capture the latest Y packets before X's segment in
        frame order were still on their way to X."""
        bound = min(t_ns - self.d_x + slack_ns, t_ns - 1)
        ys = self._y_ts_list
        if ys is not None and type(bound) is int:
            # the same answer as the search below (an int, a sorted list of ints), for a
            # tenth of the cost per call
            k = bisect_right(ys, bound) - 1
        else:
            k = int(np.searchsorted(self.y_ts, bound, side="right")) - 1
        return k if k >= 0 else None

    @cached_property
    def y_end_max(self) -> np.ndarray:
        """Per position ``k`` of ``y_idx``: the highest stream end of Y's data packets at
        positions ≤ k, 0 when none (``np.max(ends, initial=0)`` of that prefix)."""
        e = np.where(self.y_data, self.p.end[self.y_idx], 0)
        np.maximum(e, 0, out=e)
        return np.maximum.accumulate(e) if e.size else e

    @cached_property
    def x_acks(self) -> tuple[np.ndarray, np.ndarray] | None:
        """X's packets that carry an ACK: their times and ACK values, in frame order; None
        when their times are not integers or go backwards (a search by time would not find
        the packets a mask by time finds)."""
        p = self.p
        xi = np.nonzero((p.dir == self.d) & (p.ack >= 0))[0]
        ts = p.ts[xi]
        if ts.dtype.kind not in "iu" or (ts.size > 1 and bool((ts[1:] < ts[:-1]).any())):
            return None
        return ts, p.ack[xi]

    @cached_property
    def _y_ts_list(self) -> list[int] | None:
        return _sorted_list(self.y_ts)

    @cached_property
    def _x_bad_list(self) -> list[int] | None:
        return _sorted_list(self.x_bad_ts)

    def x_trouble_between(self, t0: int, t1: int) -> bool:
        """A retransmission/probe/keep-alive of X in [t0, t1]."""
        bad = self._x_bad_list
        if bad is not None and type(t0) is int and type(t1) is int:
            i = bisect_left(bad, t0)
            return i < len(bad) and bad[i] <= t1
        a = np.searchsorted(self.x_bad_ts, t0, side="left")
        return bool(a < self.x_bad_ts.size and self.x_bad_ts[a] <= t1)

    # -- what released X's packet i (T1, T3a, T3b: §5.4 → §2.3, §3.2) --------------------
    @cached_property
    def _releases(self) -> _ReleaseIndex:
        return _ReleaseIndex(self)

    def release(self, i: int, *, autocork_max_ns: int = AUTOCORK_MAX_GAP_NS) -> Release:
        """Why X's data packet ``i`` (packet index) left when it did.

        The same "released by an ACK" test as the Nagle scan (:func:`find_holds`): the
        releasing ACK is the packet from Y acknowledging new data whose lag before ``i`` is
        closest to d_X within the coupling window (:meth:`coupled`: the direction's
        tolerance, the late slack of the trace's :class:`Coupling`); the packet is Y's *answer*, an
        application exchange (§2.5) and not a hold, when data from Y reached X between the
        ACK and ``i`` (:meth:`y_data_reaching`) or the ACK rode on Y's data that replied to
        X (:meth:`y_sent_data_between`).  If the ACK covers every byte X had sent and at
        most one segment was in flight, Minshall's Nagle rule held the data; if more was in
        flight, the congestion (or receive) window did.  Without a trigger: the probe
        timer ≈ RTO after the last possible trigger (cork, §3.2), µs after X's previous
        segment (autocork), else the application's own pace (write).
        """
        r = self._releases
        p, dx = self.p, self.d_x
        tol, late = self.tolerance(), self.coupling.late_ns
        t = int(p.ts[i])
        k = int(np.searchsorted(r.x_pos, i)) - 1  # X's data packets before i
        prev = int(r.x_pos[k]) if k >= 0 else None
        wait = t - int(p.ts[prev]) if prev is not None else 0
        if not self.legs_known or self.relay:
            # no vantage model (no handshake: what reached X when is unknown), or a relay
            # near P whose sending is its own: nothing can be said about the trigger
            return Release("unknown", None, None, prev, wait, 0)
        sent_end = int(r.x_end_max[k]) if k >= 0 else 0
        # the coupling window (:meth:`coupled`) −tol ≤ t − t(ACK) − d_X ≤ tol + late, in
        # ACK times
        a = int(np.searchsorted(r.ack_ts, t - dx - tol - late, side="left"))
        b = int(np.searchsorted(r.ack_ts, t - dx + tol, side="right"))
        cand = r.ack_pos[a:b]
        cand = cand[cand < i]
        if cand.shape[0]:
            c = int(np.argmin(np.abs(t - p.ts[cand] - dx)))
            trigger = int(cand[c])
            lag = t - int(p.ts[trigger])
            ky = int(np.searchsorted(self.y_idx, trigger))
            answer = bool(self.y_data_reaching(ky, t, tol) > 0)
            if p.length[trigger] > 0:
                # a piggy-backed ACK releases only when Y was sending on its own (data
                # after X's previous segment, before this ACK); else it is Y's reply
                answer |= prev is None or not self.y_sent_data_between(prev, ky)
            if answer:
                return Release("response", trigger, lag, prev, wait, 0)
            ack = int(p.ack[trigger])
            # X's segments in flight when the ACK reached X: everything X sent before packet
            # i (the release follows the ACK's arrival by µs, whatever the vantage) that Y had
            # not acknowledged before it (running max of ends: resends do not count twice)
            before = int(r.ack_prior[a:b][r.ack_pos[a:b] < i][c])
            in_flight = (k + 1) - int(np.searchsorted(r.x_end_max[: k + 1], before, side="right"))
            # Minshall's Nagle (tcp_minshall_check) never lets a second small segment out
            # while one is unacknowledged: with ≥ 2 in flight the hold was the window's; and
            # Nagle releases only when everything small is acknowledged
            nagle = ack >= sent_end and in_flight <= 1
            return Release(
                "nagle" if nagle else "cwnd", trigger, lag, prev, wait, max(in_flight, 0)
            )
        # a probe-timer release (§3.2): ≈ RTO_est = srtt + 200 ms after the last thing that
        # could have triggered the write — Y's last packet or X's previous segment — with
        # nothing from Y in between; much later is the application's own pace (think time)
        j = int(np.searchsorted(self.y_idx, i)) - 1
        since_y = t - int(self.y_ts[j]) - dx if j >= 0 else None
        triggers = [x for x in (since_y, wait if prev is not None else None) if x is not None]
        since = min(triggers) if triggers else None
        rto_est = r.rtt + TCP_RTO_MIN_NS
        if since is not None and (
            TCP_RTO_MIN_NS - CORK_SLACK_NS <= since <= RTO_HIGH_FACTOR * rto_est + CORK_SLACK_NS
        ):
            return Release("cork", None, None, prev, wait, 0)
        if prev is not None and wait <= autocork_max_ns:
            return Release("autocork", None, None, prev, wait, 0)
        return Release("write", None, None, prev, wait, 0)


def warm_shared(ctx: DetectContext) -> None:
    """Build the memos that most detectors read (every direction's view, every flow's
    refined legs and the data → ACK pairs under them, the Y-packet groups): what two
    processes running half the detectors each would otherwise both build
    (:func:`pcapkit.detect.run_detectors` calls it before it forks)."""
    for f in ctx.tcp_flows():
        DirView.build(ctx, f, 0)  # the first builds every view (build_views)
        refined_legs_ns(ctx, f)
    y_groups(ctx)


def seg_packet_index(ctx: DetectContext) -> np.ndarray | None:
    """Every segment's index among its flow's packets (``searchsorted(p.frame,
    s_frame)`` per flow), for every row of :attr:`DetectContext.seg_columns`: one
    search of (flow, frame) keys, made once per memo lifetime (each view holds a slice;
    the data → ACK pairs read it too).  None when flows or frames do not fit those
    keys."""
    return ctx.memo(("tcp_model.seg_packet_index",), lambda: _seg_packet_index(ctx))  # type: ignore[no-any-return]


def _seg_packet_index(ctx: DetectContext) -> np.ndarray | None:
    pflow, frame = ctx.packet_flows, ctx.packet_columns["frame"]
    skey = ctx.seg_dir_keys
    s_frame = ctx.seg_columns["frame"].astype(np.int64, copy=False)
    if pflow.shape[0] and (
        int(pflow[0]) < 0
        or int(pflow[-1]) >= _FLOW_MAX
        or int(frame.min()) < 0
        or int(frame.max()) >> _FRAME_BITS
    ):
        return None
    if s_frame.shape[0] and (
        int(skey[0]) < 0
        or int(skey[-1]) >> 1 >= _FLOW_MAX
        or int(s_frame.min()) < 0
        or int(s_frame.max()) >> _FRAME_BITS
    ):
        return None
    sflow = skey >> 1
    pkey = (pflow << _FRAME_BITS) | frame
    pi = np.searchsorted(pkey, (sflow << _FRAME_BITS) | s_frame, side="left")
    del pkey
    pi -= np.searchsorted(pflow, sflow, side="left")
    return pi


def build_views(ctx: DetectContext) -> int:
    """:meth:`DirView._build` of both directions of every TCP flow at once, into the memo
    (``("tcp_model.DirView", f, d)``): the per-segment and per-Y-packet columns are made
    for every segment and packet in one pass (each view slices them), so the per-direction
    work left is the flow's scalars and one reaction-jitter median.  Returns the number
    of views built; 0 when frames or flows do not fit the one-array search keys (each
    view is then built on its own, when asked)."""
    flows = ctx.tcp_flows()
    if not flows:
        return 0
    pc = ctx.packet_columns
    pflow = ctx.packet_flows
    sc = ctx.seg_columns
    s_frame = sc["frame"].astype(np.int64, copy=False)
    # every segment's index in its flow's packets (``searchsorted(p.frame, s_frame)``)
    s_pi = seg_packet_index(ctx)
    if s_pi is None:
        return 0
    new_all = ctx.seg_kind_is("new")
    bad = ~new_all & ~ctx.seg_kind_is("prev_not_captured")
    s_ts = sc["ts_ns"].astype(np.int64, copy=False)
    bad_rows = np.flatnonzero(bad)
    bad_ts = s_ts[bad_rows]
    del bad
    cols = {
        "s_off": sc["offset"].astype(np.int64, copy=False),
        "s_len": sc["length"].astype(np.int64, copy=False),
        "s_end": sc["end"].astype(np.int64, copy=False),
        "s_psh": sc["psh"].astype(bool, copy=False),
        "s_fin": sc["fin"].astype(bool, copy=False),
        "s_super": sc["super_segment"].astype(bool, copy=False),
        "s_gap": sc["gap_before"].astype(np.int64, copy=False),
        "s_wire": sc["wire_segments"].astype(np.int64, copy=False),
    }
    # every direction's Y packets: flow-local indices, ACKs, data, times
    yg = y_groups(ctx)
    yo = yg.yo
    y_loc = yo - np.searchsorted(pflow, pflow[yo], side="left")
    y_ack_all = pc["ack"][yo]
    y_data_all = pc["length"][yo] > 0
    y_ts_all = pc["ts"][yo]
    fds = [(f, d) for f in flows for d in (0, 1)]
    keys = np.array([2 * f + d for f, d in fds], np.int64)
    sa, sb = ctx.seg_bounds(keys)
    _, ya, yn = yg.span(keys)
    sa_l, sb_l = sa.tolist(), sb.tolist()
    # each view's rows of bad_ts: the bad segments before its first row and its end
    ba_l = np.searchsorted(bad_rows, sa).tolist()
    bb_l = np.searchsorted(bad_rows, sb).tolist()
    del bad_rows
    ya_l, yb_l = ya.tolist(), (ya + yn).tolist()
    segs = ctx.seg_arrays_many(fds, sa_l, sb_l)
    packets = ctx.packets_of_many(flows)
    coupling = ctx.coupling
    legs: list[tuple[int | None, int | None]] = []
    asked: list[tuple[int, int, int, int]] = []  # (view number, flow, dir, d_x)
    for i, (f, d) in enumerate(fds):
        dc, ds = refined_legs_ns(ctx, f)
        legs.append((dc, ds) if d == 0 else (ds, dc))
        d_x, d_y = legs[-1]
        if d_x is not None and d_y is not None:
            asked.append((i, f, d, d_x))
    jitters = reaction_jitters_ns(ctx, asked)
    for i, (f, d) in enumerate(fds):
        p = packets[i >> 1]
        a, b, y0, y1 = sa_l[i], sb_l[i], ya_l[i], yb_l[i]
        seg = segs[i]
        d_x, d_y = legs[i]
        legs_known = d_x is not None and d_y is not None
        mss = ctx.eff_mss(f)
        mss_i = mss if mss is not None and mss > 0 else 0
        row = ctx.flow(f)
        own = row.c_mss if d == 0 else row.s_mss
        s_len, s_super = cols["s_len"][a:b], cols["s_super"][a:b]
        x_mss_known = not _na(own) or bool(mss_i and np.any((s_len == mss_i) & ~s_super))
        y_ack = y_ack_all[y0:y1]
        view = DirView(
            f=f,
            d=d,
            p=p,
            mss=mss_i,
            d_x=d_x or 0,
            d_y=d_y or 0,
            legs_known=legs_known,
            x_mss_known=x_mss_known,
            relay=d == 1 and relay_server(ctx, f),
            seg=seg,
            s_frame=s_frame[a:b],
            s_ts=s_ts[a:b],
            s_off=cols["s_off"][a:b],
            s_len=s_len,
            s_end=cols["s_end"][a:b],
            s_kind=seg["kind"],
            s_psh=cols["s_psh"][a:b],
            s_fin=cols["s_fin"][a:b],
            s_super=s_super,
            s_gap=cols["s_gap"][a:b],
            s_wire=cols["s_wire"][a:b],
            s_pi=s_pi[a:b],
            y_idx=y_loc[y0:y1],
            y_ack=y_ack,
            # (its own array: one for every view, made at once, stayed resident as a
            # fresh mapping where these come from the heap's free pages: +8 MB at h2-1M)
            y_ackmax=np.maximum.accumulate(y_ack) if y1 > y0 else y_ack,
            y_data=y_data_all[y0:y1],
            y_ts=y_ts_all[y0:y1],
            jitter=jitters.get(i),
            x_bad_ts=bad_ts[ba_l[i] : bb_l[i]],
            coupling=coupling,
        )
        view.s_new = new_all[a:b]  # (the cached property's value: kind == "new")
        ctx.memo(("tcp_model.DirView", f, d), lambda v=view: v)
    return len(fds)


@dataclass
class Release:
    """What released one packet of X (:meth:`DirView.release`)."""

    cause: str  # "nagle", "cwnd", "cork", "autocork", "response", "write", "unknown"
    trigger_idx: int | None  # packet index of the releasing ACK
    lag_ns: int | None  # t(segment) − t(ACK) at the capture point
    prev_idx: int | None  # X's previous data packet
    wait_ns: int  # t(segment) − t(previous data from X): how long the oldest byte could wait
    in_flight_segments: int  # X data segments unacknowledged when the ACK reached X


class _ReleaseIndex:
    """One direction's packets arranged for O(log n) release questions, built once per
    view, so classifying every push unit of a long stream stays linear (DESIGN.md §3)."""

    def __init__(self, v: DirView) -> None:
        p, d = v.p, v.d
        pos = np.arange(p.frame.shape[0])
        x = (p.dir == d) & (p.length > 0)
        self.x_pos = pos[x]  # X's data packets
        self.x_end_max = np.maximum.accumulate(p.end[x]) if x.any() else np.zeros(0, np.int64)
        ya = (p.dir == 1 - d) & (p.ack >= 0)
        acks = p.ack[ya]
        prior = np.concatenate(([-1], np.maximum.accumulate(acks)[:-1])) if acks.shape[0] else acks
        new = acks > prior  # acknowledges data no earlier ACK from Y did
        ya_pos = pos[ya][new]
        order = np.argsort(p.ts[ya_pos], kind="stable")
        self.ack_pos = ya_pos[order]  # new-data ACKs from Y, by time
        self.ack_ts = p.ts[self.ack_pos]
        self.ack_prior = prior[new][order]  # what Y had acknowledged before each of them
        self.rtt = v.rtt if v.legs_known else 0  # the probe timer's srtt term


# --- Nagle holds (§2.3, §2.5): reported by nagle, left to it by delayed_ack -------------------
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
    new = v.s_new
    full = v.mss - OPTION_MARGIN
    small1 = np.where(v.s_super[j1], v.x_mss_known & (v.s_len[j1] % v.mss != 0), v.s_len[j1] < full)
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
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
    holds_if_nagle_off: bool = True,
) -> Scan:
    """Every S1/A/S2 triple of this direction that passes §2.3 and the §2.5 checks.

    Every rule is applied to all pairs at once (numpy); only the holds themselves are
    looped over, to describe them.  ``holds_if_nagle_off=False``: no holds when the
    direction shows Nagle off (``nodelay_frames``), where :func:`accepted_holds` keeps
    none of them (what :func:`scan_holds` asks for).
    """
    v, p = view, view.p
    m = v.s_frame.size
    tol = v.tolerance()
    late = v.coupling.late_ns
    if m < 2:
        return Scan([], 0, None)
    j2 = np.arange(1, m)
    j1 = j2 - 1
    new = v.s_new
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
    nodelay = nagle_off_evidence(v, tol)
    if nodelay is not None and not holds_if_nagle_off:
        return Scan([], opportunities, nodelay)
    lag, gap = t2 - ta, t2 - t1
    ok &= v.coupled(lag, tol, late)  # released by the ACK
    ok &= (gap >= v.d_x + v.d_y - tol) & (gap >= 2 * tol)  # waited a round trip
    c = np.nonzero(ok)[0]
    a_c, b_c, k_c = a_all[c], b_all[c], kc[c]
    e1, ia_c, t1_c, ta_c, t2_c = end1[c], ia[c], t1[c], ta[c], t2[c]
    # cwnd (§2.5): A acknowledges < 2·MSS and at most one segment besides S1 (cwnd ≥ 2
    # outside loss recovery: tcp_reno_ssthresh/cubic floor ssthresh at 2), and no
    # retransmission within 2 RTT (cwnd = 1 after an RTO mimics Nagle)
    una_before = np.maximum(np.where(k_c > 0, v.y_ackmax[np.maximum(k_c - 1, 0)], 0), 0)
    new_end = v.s_end[new]  # new data: increasing offsets
    new_rank = np.cumsum(new) - 1  # position of a new segment among the new ones
    acked = new_rank[a_c] - np.searchsorted(new_end, una_before, side="right") + 1
    bad = v.x_bad_ts
    had_loss = (t2_c > bad[0]) if bad.size else np.zeros(c.shape[0], bool)
    keep = ~((e1 - una_before >= 2 * v.mss) | (acked > 2) | ((acked == 2) & had_loss))
    if bad.size:  # a retransmission/probe/keep-alive of X in [t1 − 2·RTT, t2]
        ib = np.searchsorted(bad, t1_c - 2 * v.rtt, side="left")
        keep &= ~((ib < bad.size) & (bad[np.minimum(ib, bad.size - 1)] <= t2_c))
    # rwnd: S1 must not have filled Y's window; A must leave room for S2
    kb = v.last_y_reaching_all(t1_c, tol)
    kb0 = np.maximum(kb, 0)
    w0, una0 = p.win[v.y_idx[kb0]], v.y_ack[kb0]
    keep &= ~((kb >= 0) & (w0 >= 0) & (una0 >= 0) & (e1 >= una0 + w0))
    wa = p.win[ia_c]
    keep &= ~((wa >= 0) & (wa < v.s_len[b_c]))
    out: list[Hold] = []
    for q in np.nonzero(keep)[0].tolist():
        a, b, k = int(a_c[q]), int(b_c[q]), int(k_c[q])
        e1_q, t1_q, ta_q, cq = int(e1[q]), int(t1_c[q]), int(ta_c[q]), int(c[q])
        lag_c, gap_c, pure_c = int(lag[cq]), int(gap[cq]), bool(pure[cq])
        una_q, acked_q = int(una_before[q]), int(acked[q])
        delay = ta_q - t1_q - v.d_y
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
            f"not cwnd-limited: the ACK covered {e1_q - una_q} B in {acked_q} segment(s) "
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
    return Scan(out, opportunities, nodelay)


def scan_holds(
    ctx: DetectContext,
    view: DirView,
    *,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
) -> Scan:
    """:func:`find_holds` for :func:`accepted_holds`, made once per direction, thresholds
    and trace (``ctx.memo``; nagle and delayed_ack both ask): no holds listed when Nagle
    is off on the socket.  Read-only: :func:`accepted_holds` returns copies."""
    key = ("tcp_model.scan_holds", view.f, view.d, delack_timer_min_ms, ack_delay_max_ms)
    return ctx.memo(  # type: ignore[no-any-return]
        key,
        lambda: find_holds(
            ctx,
            view,
            delack_timer_min_ms=delack_timer_min_ms,
            ack_delay_max_ms=ack_delay_max_ms,
            holds_if_nagle_off=False,
        ),
    )


def scan_holds_all(
    ctx: DetectContext,
    views: list[DirView],
    *,
    delack_timer_min_ms: float = DELACK_TIMER_MIN_NS / MS,
    ack_delay_max_ms: float = RFC1122_ACK_DELAY_MAX_NS / MS,
) -> int:
    """:func:`scan_holds` of many directions at once (``views``, in direction key order,
    each with packets from Y), for the scans that list no hold: a direction without an
    S1/S2 pair, or one showing Nagle off (:func:`nagle_off_evidence`) — its opportunities
    counted and its evidence found in one pass over all the views' segment pairs (each
    direction's searches in Y's packets made in one sorted array: :func:`grouped`).  The
    scans go where :func:`scan_holds` keeps them; the others (holds to describe, Y's times
    going backwards) are left to it, and so are the views whose scan was made before.
    Returns how many scans it made."""

    def key(v: DirView) -> tuple[Any, ...]:
        return ("tcp_model.scan_holds", v.f, v.d, delack_timer_min_ms, ack_delay_max_ms)

    views = [v for v in views if not ctx.memoised(key(v))]  # (one made before stays)
    if not views:
        return 0
    got = _hold_counts(ctx, views)
    if got is None:
        return 0
    n_pairs, opportunities, nodelay, back_ts = got
    made = 0
    for i, v in enumerate(views):
        if v.s_frame.shape[0] < 2:
            scan = Scan([], 0, None)
        elif not n_pairs[i]:
            scan = Scan([], 0, nodelay.get(i))
        elif i in nodelay and not back_ts[i]:
            scan = Scan([], opportunities[i], nodelay[i])
        else:
            continue  # holds to describe, or Y's times going backwards: find_holds
        ctx.memo(key(v), lambda scan=scan: scan)
        made += 1
    return made


VIEWS_AT_ONCE = 256  # views per segmented pass: its temporaries stay ~10 MB, not ~capture size


def _hold_counts(
    ctx: DetectContext, views: list[DirView]
) -> tuple[list[int], list[int], dict[int, tuple[int, int]], np.ndarray] | None:
    """For each of ``views`` (by position): its S1/S2 pairs (:func:`find_holds`), the
    opportunities among them (right only where its Y times do not go backwards: the
    last item, per view), and :func:`nagle_off_evidence` where there is some (a dict);
    None when the views cannot be taken at once (or there are none).  In passes of
    :data:`VIEWS_AT_ONCE` views."""
    if not views:
        return None
    pairs: list[int] = []
    opportunities: list[int] = []
    nodelay: dict[int, tuple[int, int]] = {}
    back: list[np.ndarray] = []
    for a in range(0, len(views), VIEWS_AT_ONCE):
        got = _hold_counts_at_once(ctx, views[a : a + VIEWS_AT_ONCE])
        if got is None:
            return None
        pairs += got[0]
        opportunities += got[1]
        nodelay.update((a + i, ev) for i, ev in got[2].items())
        back.append(got[3][: len(got[0])])
    return pairs, opportunities, nodelay, np.concatenate(back)


def _hold_counts_at_once(
    ctx: DetectContext, views: list[DirView]
) -> tuple[list[int], list[int], dict[int, tuple[int, int]], np.ndarray] | None:
    """:func:`_hold_counts` of ``views`` (not empty) in one pass."""
    got = view_segment_rows(ctx, views)
    if got is None:
        return None
    keys, job, rows = got
    nj = int(keys.shape[0])
    jobs = np.arange(nj)
    sc = ctx.seg_columns
    s_off = sc["offset"][rows].astype(np.int64, copy=False)
    s_len = sc["length"][rows].astype(np.int64, copy=False)
    s_end = sc["end"][rows].astype(np.int64, copy=False)
    s_gap = sc["gap_before"][rows].astype(np.int64, copy=False)
    s_fin = sc["fin"][rows].astype(bool, copy=False)
    s_sup = sc["super_segment"][rows].astype(bool, copy=False)
    s_frame = sc["frame"][rows].astype(np.int64, copy=False)
    s_new = ctx.seg_kind_is("new")[rows]
    pc = ctx.packet_columns
    pts = pc["ts"]
    fstart = np.searchsorted(ctx.packet_flows, keys >> 1, side="left")
    s_pi = np.concatenate([v.s_pi for v in views]) + fstart[job]  # packet column rows
    # Y's packets of each view (``y_idx``), as rows of the packet columns
    yg = y_groups(ctx)
    _g, y0, ny = yg.span(keys)
    if any(v.y_idx.shape[0] != n or not n for v, n in zip(views, ny.tolist(), strict=True)):
        return None
    y_job = np.repeat(jobs, ny)
    yfirst = np.cumsum(ny) - ny
    ygi = yg.yo[np.arange(y_job.shape[0]) - yfirst[y_job] + y0[y_job]]
    y_ack, y_ts = pc["ack"][ygi], pts[ygi]
    y_data = pc["length"][ygi] > 0
    cd = np.zeros(ygi.shape[0] + 1, np.int64)  # Y's data packets before each row
    np.cumsum(y_data, out=cd[1:])
    ackmax, at, times = grouped(y_job, y_ack, nj), grouped(y_job, ygi, nj), grouped(y_job, y_ts, nj)
    if ackmax is None or at is None or times is None:
        return None
    ackmax.running_max()
    back_ts = backwards(y_job, y_ts, nj)
    mss = np.array([v.mss for v in views], np.int64)
    if bool((mss <= 0).any()):
        return None
    d_x = np.array([v.d_x for v in views], np.int64)
    tol = np.array([v.tolerance() for v in views], np.int64)
    x_known = np.array([v.x_mss_known for v in views], bool)

    def first_acks(gj: np.ndarray, after: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        k = ackmax.search(gj, offsets, "left") - yfirst[gj]  # DirView.first_acks
        pos0 = at.search(gj, after, "right") - yfirst[gj]
        return np.where(k >= ny[gj], -1, np.where(k < pos0, -2, k))

    def y_rows(gj: np.ndarray, k: np.ndarray) -> np.ndarray:
        return np.minimum(yfirst[gj] + np.maximum(k, 0), max(ygi.shape[0] - 1, 0))  # type: ignore[no-any-return]

    def data_count(gj: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        lo, hi = np.clip(lo, 0, ny[gj]), np.clip(hi, 0, ny[gj])  # DirView.y_data_count
        return np.where(hi > lo, cd[yfirst[gj] + hi] - cd[yfirst[gj] + lo], 0)

    # consecutive segments of one direction: (j1, j2)
    j2 = np.flatnonzero(job[1:] == job[:-1]) + 1
    j1 = j2 - 1
    pj = job[j2]
    m_j = mss[pj]
    link = s_new[j1] & s_new[j2] & (s_off[j2] == s_end[j1]) & ~s_fin[j2]
    # nagle_off_evidence: the first pair per direction
    full = m_j - OPTION_MARGIN
    small1 = np.where(s_sup[j1], x_known[pj] & (s_len[j1] % m_j != 0), s_len[j1] < full)
    part2 = ~s_sup[j2] & (s_len[j2] < full)
    ev_pair = np.flatnonzero(link & small1 & part2)
    a, b = j1[ev_pair], j2[ev_pair]
    aj = job[a]
    i2 = s_pi[b]
    ka = first_acks(aj, s_pi[a], s_end[a])
    ia = ygi[y_rows(aj, ka)]
    last_y = ygi[yfirst[aj] + ny[aj] - 1]
    ev = ((ka == -1) & (last_y > i2)) | (
        (ka >= 0) & ((ia > i2) | (pts[i2] - pts[ia] < d_x[aj] - tol[aj]))
    )
    hit = np.flatnonzero(ev)
    hj, first_hit = np.unique(aj[hit], return_index=True)
    nodelay: dict[int, tuple[int, int]] = {
        j: (f1, f2)
        for j, f1, f2 in zip(
            hj.tolist(),
            s_frame[a[hit[first_hit]]].tolist(),
            s_frame[b[hit[first_hit]]].tolist(),
            strict=True,
        )
    }
    # find_holds' pairs and its opportunities
    small_j1 = np.where(s_sup[j1], x_known[pj] & (s_len[j1] % m_j != 0), s_len[j1] < m_j)
    partial_j2 = ~s_sup[j2] & (s_len[j2] < m_j)
    pair = np.flatnonzero(link & (s_gap[j2] == 0) & small_j1 & partial_j2)
    a, b = j1[pair], j2[pair]
    aj = job[a]
    i1, i2 = s_pi[a], s_pi[b]
    end1 = s_end[a]
    ka = first_acks(aj, i1, end1)
    kc = np.maximum(ka, 0)
    yr = y_rows(aj, kc)
    ia = ygi[yr]
    ok = (ka >= 0) & (ia < i2) & (y_ack[yr] == end1)
    t2 = pts[i2]
    bound = np.minimum(t2 - d_x[aj] + tol[aj], t2 - 1)
    kr = times.search(aj, bound, "right") - 1 - yfirst[aj]  # DirView.y_data_reaching
    ok &= data_count(aj, kc + 1, kr + 1) == 0
    pure = ~y_data[yr] & ((pc["flags"][ia] & (SYN | FIN | RST)) == 0)
    pos0 = at.search(aj, i1, "right") - yfirst[aj]  # DirView.y_sent_data_between
    ok &= pure | (data_count(aj, pos0, kc) > 0)
    opportunities = np.bincount(aj[ok], minlength=nj).tolist()
    n_pairs = np.bincount(aj, minlength=nj).tolist()
    return n_pairs, opportunities, nodelay, back_ts


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
        scan = scan_holds(
            ctx,
            view,
            delack_timer_min_ms=delack_timer_min_ms,
            ack_delay_max_ms=ack_delay_max_ms,
        )
    if not scan.holds or scan.nodelay_frames is not None:
        return []  # Nagle is off on this socket: the couplings are something else
    n = len(scan.holds)
    repeated = n >= min_repeats and n >= min_coupled_share * scan.opportunities
    kept: list[Hold] = []
    _tls_evidence(ctx, view, scan.holds)  # the same values each time it runs
    for h in scan.holds:
        if h.kind == "nagle":
            if not (repeated or h.tls_records >= 2 or h.tls_split):
                continue  # a lone coupling to a quick ACK can be chance (§2.3, §8.1a)
        check = (
            f"Nagle not disabled: no partial segment left while an earlier small one was "
            f"unacknowledged; {n} of {scan.opportunities} testable pairs coupled to an ACK"
        )
        # a copy: the scan may be shared (:func:`scan_holds`)
        kept.append(replace(h, checks=[*h.checks, check]))
    return kept


# --- connection timeline (TCP + TLS handshake timing; reuse and resumption) ----------------
@dataclass
class ConnTimeline:
    """When one connection started, became usable, was used, and ended (capture clock)."""

    flow: int
    stream: int
    client_ip: str
    client_port: int
    server_ip: str
    server_port: int
    sni: str | None
    alpn: str | None
    version: str | None
    cipher: str | None  # the negotiated suite's name
    suites_offered: tuple[int, ...]  # the ClientHello's cipher suites (none if not seen)
    tls: bool
    syn_frame: int | None
    syn_ts: int | None
    ch_frame: int | None  # ClientHello at stream offset 0
    ch_ts: int | None
    app_frame: int | None  # first application byte from the client
    app_ts: int | None
    cfin_ts: int | None  # the client's Finished (TLS handshake done at the client)
    sess_frame: int | None  # first server record after the client's Finished
    sess_ts: int | None
    close_ts: int | None
    close_frame: int | None
    close_by: str | None  # "client" | "server"
    close_how: str | None  # "FIN" | "RST" | "TLS close_notify/alert"
    first_ts: int
    last_ts: int

    @property
    def start_ts(self) -> int | None:
        return self.syn_ts if self.syn_ts is not None else self.ch_ts

    @property
    def start_frame(self) -> int | None:
        return self.syn_frame if self.syn_frame is not None else self.ch_frame

    @property
    def ready_ts(self) -> int | None:
        """When the client could send a request on it (its first application byte)."""
        return self.app_ts


def _str(v: Any) -> str | None:
    return None if _na(v) else str(v)


def timeline(ctx: DetectContext, f: int) -> ConnTimeline:
    """The connection's timeline from its packets and TLS records (built once per
    flow and trace: reuse and resumption share it, read-only)."""
    return ctx.memo(("tcp_model.timeline", f), lambda: _timeline(ctx, f))  # type: ignore[no-any-return]


def _timeline(ctx: DetectContext, f: int) -> ConnTimeline:
    r = ctx.flow(f)
    p = ctx.packets_of(f)
    tls = ctx.tls_row(f)
    syn = np.nonzero((p.dir == 0) & ((p.flags & SYN) != 0) & ((p.flags & ACK) == 0))[0]
    syn_frame = int(p.frame[syn[0]]) if syn.shape[0] else None
    syn_ts = int(p.ts[syn[0]]) if syn.shape[0] else None
    c = ctx.rec_arrays(f, 0)
    s = ctx.rec_arrays(f, 1)
    ch_frame = ch_ts = app_frame = app_ts = cfin_ts = sess_frame = sess_ts = None
    close: list[tuple[int, int, str, str]] = []  # (ts, frame, by, how)
    version = _str(tls.version) if tls is not None else None
    is_tls = tls is not None and c["flow"].shape[0] > 0
    if is_tls:
        off = c["offset"]
        ch = np.nonzero(ctx.rec_text_contains("handshake", "ClientHello", f, 0))[0]
        if ch.shape[0] and off[ch[0]] == 0:
            ch_frame = int(c["first_frame"][ch[0]])
            ch_ts = int(c["first_ts_ns"][ch[0]])
        app = _client_app_record(c, version)
        if app is not None:
            app_frame = int(c["first_frame"][app])
            app_ts = int(c["first_ts_ns"][app])
        fin = _client_finished(c, version)
        if fin is not None:
            cfin_ts = int(c["last_ts_ns"][fin])
            later = np.nonzero(s["first_ts_ns"] > cfin_ts)[0]
            if later.shape[0]:
                sess_frame = int(s["first_frame"][later[0]])
                sess_ts = int(s["first_ts_ns"][later[0]])
        for rec, by in ((c, "client"), (s, "server")):
            if not rec["flow"].shape[0]:
                continue
            al = np.nonzero(
                (rec["content_type"] == ContentType.ALERT.value)
                | (rec["outer_content_type"] == ContentType.ALERT.value)
            )[0]
            if al.shape[0]:
                k = int(al[0])
                close.append(
                    (
                        int(rec["first_ts_ns"][k]),
                        int(rec["first_frame"][k]),
                        by,
                        "TLS close_notify/alert",
                    )
                )
    else:
        seg = ctx.segments_of(f, 0)
        if len(seg):
            app_frame = int(seg["frame"].iloc[0])
            app_ts = int(seg["ts_ns"].iloc[0])
    for mask, how in (((p.flags & FIN) != 0, "FIN"), ((p.flags & RST) != 0, "RST")):
        hit = np.nonzero(mask)[0]
        if hit.shape[0]:
            i = int(hit[0])
            close.append((int(p.ts[i]), int(p.frame[i]), ("client", "server")[int(p.dir[i])], how))
    close.sort()
    return ConnTimeline(
        flow=f,
        stream=int(r.stream),
        client_ip=str(r.client_ip),
        client_port=int(r.client_port),
        server_ip=str(r.server_ip),
        server_port=int(r.server_port),
        sni=_str(tls.sni) if tls is not None else None,
        alpn=_str(tls.alpn) if tls is not None else None,
        version=version,
        cipher=_str(tls.cipher) if tls is not None else None,
        suites_offered=_suites(tls),
        tls=is_tls,
        syn_frame=syn_frame,
        syn_ts=syn_ts,
        ch_frame=ch_frame,
        ch_ts=ch_ts,
        app_frame=app_frame,
        app_ts=app_ts,
        cfin_ts=cfin_ts,
        sess_frame=sess_frame,
        sess_ts=sess_ts,
        close_ts=close[0][0] if close else None,
        close_frame=close[0][1] if close else None,
        close_by=close[0][2] if close else None,
        close_how=close[0][3] if close else None,
        first_ts=int(r.first_ts_ns),
        last_ts=int(r.last_ts_ns),
    )


def _suites(tls: Any) -> tuple[int, ...]:
    v = None if tls is None else getattr(tls, "cipher_suites_offered", None)
    if v is None or _na(v) or not str(v):
        return ()
    return tuple(int(x, 16) for x in str(v).split(","))


def _client_app_record(c: Mapping[str, np.ndarray], version: str | None) -> int | None:
    """Row (position) of the client's first application-data record, None if it sent none
    (``c``: the client's records as ``DetectContext.rec_arrays`` gives them)."""
    ct = c["content_type"]
    outer = c["outer_content_type"]
    status = c["status"]
    early = c["early_data"].astype(bool)
    dec = status == "decrypted"
    if dec.any():
        k = np.nonzero(dec & (ct == ContentType.APPLICATION_DATA.value))[0]
        return int(k[0]) if k.shape[0] else None
    prot = np.nonzero((outer == ContentType.APPLICATION_DATA.value) & ~early)[0]
    first_early = np.nonzero((outer == ContentType.APPLICATION_DATA.value) & early)[0]
    if version == "TLS 1.3":
        # without keys: the first protected record is the client's Finished flight
        cand = prot[1:2]
    else:
        cand = prot[:1]
    opts = [int(x) for x in (*cand.tolist(), *first_early[:1].tolist())]
    return min(opts) if opts else None


def _client_finished(c: Mapping[str, np.ndarray], version: str | None) -> int | None:
    """Row of the client's Finished record (first protected non-early handshake record)."""
    outer = c["outer_content_type"]
    early = c["early_data"].astype(bool)
    if version == "TLS 1.3":
        k = np.nonzero((outer == ContentType.APPLICATION_DATA.value) & ~early)[0]
        return int(k[0]) if k.shape[0] else None
    ccs = np.nonzero(outer == ContentType.CHANGE_CIPHER_SPEC.value)[0]
    if not ccs.shape[0] or ccs[0] + 1 >= outer.shape[0]:
        return None
    return int(ccs[0] + 1)


def timelines(ctx: DetectContext) -> list[ConnTimeline]:
    return [timeline(ctx, f) for f in ctx.tcp_flows()]

"""TCP head-of-line blocking (H1, DETECTION.md §4.1).

Mechanism: TCP delivers in order, so one lost segment holds every later byte —
of every HTTP/2 stream, of every TLS record — in the receiver's out-of-order
queue until the retransmission fills the hole (Marx et al. 2020; Langley et al.,
SIGCOMM 2017).  The units that had fully arrived behind the hole but could not
be handed to the application are the victims.

Two views of one episode, by where the capture point P sits (§0.1, §1.1):

* **Hole at P** (receiver side, or a middle box downstream of the loss): a
  segment arrives beyond the highest byte seen (``prev_not_captured``), Y's ACKs
  pin at the hole start h (dupACKs, with SACK blocks), a later segment fills the
  hole.  Episode = first segment after the hole → fill; per unit U (TLS record;
  without TLS, a PSH-terminated write) complete behind the hole:
  ``cost_U = t(readable in order) − t(last byte arrived)`` — the records table's
  ``last_ts_ns`` − ``last_byte_ts_ns``.
* **ACK stream only** (sender side, or loss downstream of P): Y's dupACKs at h,
  X's retransmission of h, then the ACK that jumps past h.  Episode = first
  dupACK → jump; both packets travel Y → P, so the interval is unbiased by the
  vantage.  Unit costs are estimates: a unit sent at t_U reached Y at about
  t_U + d_Y/2 and was released when Y sent the jump, d_Y/2 before P saw it, so
  ``cost_U ≈ t_jump − t_U − d_Y``.  A unit whose last byte left before the
  retransmission reached Y before it on an in-order path, so it is a victim, and
  it waited at least ``t_rx − t_U`` (same-direction, unbiased by P): the estimate
  is floored there — without the floor a unit sent µs before the retransmission
  got a noise-dominated estimate ≤ 0 and was dropped at the sender while the
  receiver counted it (h2_hol_drop: 36 vs 37 victims, the odd one waiting 0.08 ms).

Headline cost = the episode duration (how long the receiving application got
nothing from this connection); the per-unit waits are in ``details``.

Counter-hypotheses ruled out (§4.1 "False positives", §1.4):

* **Reordering without loss** — the hole was filled by the *original*: TCP
  timestamps say so (the fill's TSval is not newer than the segment after the
  hole), or the hole range was re-sent again after the fill (the later copy is
  the spurious retransmission), or — without timestamps — the fill came sooner
  than a retransmission possibly could (a repair needs the dupACK to reach X and
  the copy to come back: ≥ 1 RTT, RFC 5681 §3.2 / RFC 8985).  At the sender, an
  ACK jump that comes sooner after the retransmission than d_Y means the original
  arrived late, not the copy.
* **Capture drop at P** — Y acknowledged bytes that P never saw (ACK beyond the
  hole start before any fill): the network delivered them, the capture lost them.
* **GRO** at the receiver merges segments and hides their order: with
  super-segments in the data direction the headline comes from the ACK stream.

Stream attribution (which HTTP/2 streams were victims) arrives with the HTTP/2
issue; here the units are TLS records.  SACK edges are not in the tables (only
per-packet ``sack_n``), so dupACKs are recognised by ACK pinning (and ``sack_n``
when SACK was negotiated) and the hole's extent at a sender-side capture is the
retransmission's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from ..net.decode import ACK, FIN, RST, SYN
from ..rows import itertuples
from .base import Evidence, Finding, frame_filter
from .constants import FLIGHT_GAP_MIN_NS
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import DirView, grouped

SPEC = DetectorSpec(
    kinds=(
        Kind("tcp_hol_blocking", "H1", "DETECTION.md §4.1", holds=True),
        Kind("loss_recovery", "L5", "issue 22; RFC 5681 §3.2, RFC 8985", holds=True),
    ),
    # a single response's loss repaired by the retransmission timer is rto_stall's
    reads=("rto_stall",),
    thresholds=(
        Threshold(
            "loss_min_rtt_fraction",
            "rtt",
            "RFC 5681 §3.2 / RFC 8985 §6.2: a retransmission fills a hole ~1 RTT after it shows; "
            "½ RTT leaves room for jitter",
        ),
        Threshold(
            "reorder_window_no_rtt_ms",
            "ms",
            "Wireshark packet-tcp.c ooo_thres = 3 ms when the iRTT is unknown",
        ),
        Threshold(
            "min_dupacks",
            "count",
            "RFC 5681 §4.2: a receiver SHOULD send an immediate duplicate ACK for out-of-order data",
        ),
        Threshold("min_episode_ms", "ms", "report every episode with victims (0)"),
    ),
)
KINDS = SPEC.kind_names

# A retransmission cannot fill a hole sooner than ~1 RTT after the hole shows:
# the dupACK must reach the sender and the copy come back (RFC 5681 §3.2 fast
# retransmit; RFC 8985 §6.2 RACK waits a further reo_wnd = min_RTT/4).  Half an
# RTT leaves room for jitter; a fill sooner than that is a reordered original.
LOSS_MIN_RTT_FRACTION = 0.5
# Without an RTT (no handshake) and without timestamps: Wireshark's own reordering
# window when iRTT is unknown (packet-tcp.c ``ooo_thres`` = 3 ms).
REORDER_WINDOW_NO_RTT_MS = 3.0
# RFC 5681 §4.2: a receiver SHOULD send an immediate duplicate ACK for an
# out-of-order segment — so a real hole at Y shows at least one.
MIN_DUPACKS = 1
# A hole filled by the late original (reordering) is reported when it held the data
# behind it this long: below, it is capture-point or multi-queue reordering of µs that no
# reader feels (DETECTION.md §1.4; one HZ=1000 jiffy, .constants.FLIGHT_GAP_MIN_NS).
REORDER_FELT_NS = FLIGHT_GAP_MIN_NS
# A silence of the whole direction before the hole opened, ≥ 2 RTT (and ≥ this without an
# RTT), is named in the finding as a delivery stall (issue 22 prices those).
REORDER_STALL_MIN_NS = 100_000_000
# Evidence sizes: enough frames to open in Wireshark, not every packet.
MAX_DUPACK_FRAMES = 3
MAX_VICTIM_FRAMES = 5

# a direction with this many holes asks Y's ACKs about all of them at once (one sort of
# Y's ACKs, then searches); with fewer, a mask over Y's ACKs per hole is cheaper
HOLES_AT_ONCE_MIN = 8

_RETX_KINDS = frozenset({"retransmission", "out_of_order", "spurious_retransmission"})


@dataclass
class _Hole:
    a: int  # first missing byte (stream offset)
    b: int  # first byte after the hole
    open_i: int  # index (segments of this direction) of the first segment after it
    t_open: int
    fill_i: int | None = None
    t_fill: int | None = None
    status: str = "ok"  # ok | capture_drop | reordering | ambiguous | unfilled | no_dupack
    dupacks: list[int] = field(default_factory=list)  # packet indices (FlowPackets)
    checks: list[str] = field(default_factory=list)
    ts_confirmed: bool = False


def _later(x: int, y: int) -> bool:
    """TSval x is later than y (RFC 7323 §5.2 modular comparison)."""
    return 0 < ((x - y) & 0xFFFFFFFF) < 0x80000000


class _PacketExtras:
    """sack_n and TSval for any frame (the per-flow arrays do not carry them)."""

    def __init__(self, packets: pd.DataFrame) -> None:
        self.frame = packets["frame"].to_numpy(np.int64)
        self.sorted = bool(np.all(self.frame[1:] > self.frame[:-1])) if len(self.frame) else True
        self.order = None if self.sorted else np.argsort(self.frame, kind="stable")
        # every frame once, in order (the packets table of a whole capture): a frame's row
        # is its distance from the first — no search of a million-row array per direction
        n = self.frame.shape[0]
        self.first = (
            int(self.frame[0])
            if n and self.sorted and int(self.frame[-1]) - int(self.frame[0]) == n - 1
            else None
        )
        self.sack_n = packets["sack_n"].to_numpy(np.int64, na_value=0)
        self.tsval = packets["tsval"].to_numpy(np.int64, na_value=-1)

    def _idx(self, frames: np.ndarray) -> np.ndarray:
        if self.first is not None:
            return frames - self.first
        if self.sorted:
            return np.searchsorted(self.frame, frames)
        assert self.order is not None
        return self.order[np.searchsorted(self.frame[self.order], frames)]

    def sack(self, frames: np.ndarray) -> np.ndarray:
        return self.sack_n[self._idx(frames)]

    def ts(self, frames: np.ndarray) -> np.ndarray:
        return self.tsval[self._idx(frames)]


def _candidates(ctx: DetectContext) -> list[tuple[int, int]]:
    """(flow, dir) pairs with a hole or a re-sent segment: only those can hold an episode."""
    s = ctx.segments
    if s.empty:
        return []
    kind = s["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype):  # codes: no text per segment
        cats = kind.cat.categories
        retx = np.isin(kind.cat.codes.to_numpy(), np.nonzero(cats.isin(list(_RETX_KINDS)))[0])
    else:
        retx = np.isin(kind.astype(str).to_numpy(), list(_RETX_KINDS))
    hit = (s["gap_before"].to_numpy(np.int64) > 0) | retx
    if not hit.any():
        return []
    f = s["flow"].to_numpy(np.int64)[hit]
    d = s["dir"].cat.codes.to_numpy(np.int64)[hit]
    tcp = set(ctx.tcp_flows())
    return sorted({(int(a), int(b)) for a, b in zip(f, d, strict=True) if int(a) in tcp})


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


def _requests_by_flow(ctx: DetectContext) -> dict[int, list[Any]]:
    """The requests table's rows per flow (built once per trace)."""

    def make() -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        r = ctx.requests
        if r is not None and not r.empty:
            for q in itertuples(r):
                out.setdefault(int(q.flow), []).append(q)
        return out

    return ctx.memo(("hol.requests_by_flow",), make)  # type: ignore[no-any-return]


def _in_flight(ctx: DetectContext, f: int, t0: int, t1: int) -> list[Any] | None:
    """The HTTP exchanges of flow ``f`` in progress during [t0, t1] (request started, its
    response not complete before t0); None when the flow's HTTP was not read (no keys, not
    HTTP) — then the wire cannot say what else waited."""
    rows = _requests_by_flow(ctx).get(f)
    if not rows:
        return None
    out = []
    for q in rows:
        start = q.request_start_ts_ns
        end = q.last_byte_ts_ns
        if pd.isna(start) or int(start) > t1:
            continue
        if not pd.isna(end) and int(end) < t0:
            continue
        out.append(q)
    return out


def _name_by_what_waited(ctx: DetectContext, fnd: Finding, rto: list[Any]) -> Finding | None:
    """Head-of-line blocking is other work waiting behind a hole (issue 22): other streams
    or requests, or other messages of one stream.  A hole in the only response in flight
    whose later bytes are just more of that response is loss recovery: named so
    (``loss_recovery``), or left to ``rto_stall`` when the retransmission timer repaired it
    (one episode, one finding)."""
    assert fnd.flow is not None
    # from the first evidence (the lost original at a sender-side capture: the bytes were in
    # flight from then on, though the response was all sent before the first dupACK)
    t0 = min([e.ts_ns for e in fnd.evidence if e.ts_ns is not None] + [fnd.t_start_ns])
    live = _in_flight(ctx, fnd.flow, t0, fnd.t_end_ns)
    if live is None or len(live) != 1:
        if live:
            fnd.checks.append(
                f"{len(live)} HTTP exchanges were in progress on this connection during the "
                "episode: they all waited behind the hole"
            )
        return fnd
    q = live[0]
    events = 0 if pd.isna(q.events) else int(q.events)
    what = f"{q.method} {q.path}".strip() if not pd.isna(q.method) else "one request"
    if events > 1:
        fnd.explanation += (
            f" Only {what} was in progress, but its response is a stream of {events} "
            "messages: the complete messages behind the hole could not be delivered — "
            "head-of-line blocking among the messages of one stream (HTTP/3 would not help "
            "a single stream either)."
        )
        fnd.checks.append("one exchange in flight, its messages blocked behind the hole")
        return fnd
    hole = fnd.details.get("hole_offset")
    for r in rto:
        if (
            r.flow == fnd.flow
            and r.dir == fnd.dir
            and r.t_start_ns <= fnd.t_end_ns
            and r.t_end_ns >= fnd.t_start_ns
            and (hole is None or r.details.get("offset") == hole)
        ):
            return None  # the timer repaired it: rto_stall names the episode
    fnd.kind = "loss_recovery"
    rid = getattr(q, "request", None)
    fnd.request = None if pd.isna(rid) else int(rid)  # the one exchange it delayed
    fnd.severity = None
    fnd.__post_init__()
    fnd.explanation = (
        f"Loss recovery inside the only response in flight ({what}): "
        + fnd.explanation.replace(
            " Every message queued behind the hole waited, whichever "
            "request or stream it belonged to.",
            "",
        )
        + " No other request or stream was on this connection, so nothing else was "
        "head-of-line blocked: the response's later bytes waited for its own lost ones."
    )
    fnd.checks.append(
        "one HTTP exchange in flight and no message boundaries in its response: loss "
        "recovery, not head-of-line blocking of other work"
    )
    fnd.remedy = (
        "The loss is on the path (find the link, queue or shaper that dropped it). The repair "
        "took about a round trip, as designed: keep SACK and RACK-TLP on (Linux defaults) so "
        "it stays that way; on lossy paths a smaller backlog (tcp_notsent_lowat) and earlier "
        "loss detection shorten it."
    )
    return fnd


# --------------------------------------------------------------------------- per direction


class _Dir:
    """One flow direction: X's segments (the shared :class:`.tcp_model.DirView`), and Y's
    ACK-carrying packets with their SACK counts and window (what HoL reads beyond it)."""

    def __init__(self, ctx: DetectContext, extras: _PacketExtras, f: int, d: int) -> None:
        self.f, self.d = f, d
        v = DirView.build(ctx, f, d)
        self.seg_frame = v.s_frame
        self.seg_ts = v.s_ts
        self.seg_off = v.s_off
        self.seg_end = v.s_end
        self.seg_gap = v.s_gap
        self.seg_psh = v.s_psh
        self.seg_kind = v.s_kind
        self.seg_super = v.s_super
        # the kind tests every hole asks, once per direction: masks over every segment
        # made once (from the categories), sliced
        rows = ctx.seg_rows(f, d)
        self.seg_retx = (
            ctx.seg_kind_is("retransmission")[rows]
            | ctx.seg_kind_is("spurious_retransmission")[rows]
        )
        self.seg_new = v.s_new
        # the segments a repair can be (kind in _RETX_KINDS), ascending
        self.seg_resent = np.nonzero(self.seg_retx | ctx.seg_kind_is("out_of_order")[rows])[0]
        # segments starting below the highest byte sent before them: only these can
        # cover bytes of a hole opened by an earlier segment (a hole [a, b) opened at i
        # has b = off[i] < end[i] ≤ that maximum for every later segment)
        n_seg = self.seg_off.shape[0]
        if n_seg:
            top = np.maximum.accumulate(self.seg_end)
            below = np.zeros(n_seg, bool)
            below[1:] = self.seg_off[1:] < top[:-1]
            self.seg_behind = np.nonzero(below)[0]
        else:
            self.seg_behind = np.zeros(0, np.int64)
        p = v.p
        self.p = p
        y = (p.dir == 1 - d) & (p.ack >= 0) & ((p.flags & ACK) != 0)
        self.y_idx = np.nonzero(y)[0]  # Y's packets carrying an ACK, frame order
        self.y_ack = p.ack[self.y_idx]
        self.y_ts = p.ts[self.y_idx]
        self.y_frame = p.frame[self.y_idx]
        pure = (p.length == 0) & ((p.flags & (SYN | FIN | RST)) == 0)
        self.y_pure = pure[self.y_idx]
        self.y_sack = extras.sack(self.y_frame) if self.y_idx.shape[0] else np.zeros(0, np.int64)
        self.y_win = p.win_raw[self.y_idx]
        self.seg_tsval = extras.ts(self.seg_frame) if self.seg_frame.shape[0] else self.seg_frame
        row = ctx.flow(f)
        self.sack_ok = bool(row.sack_permitted)
        # P sits at the sender (refined legs, §1.2: sturdier than the handshake's label): a
        # hole in P's view of X's own data is P missing X's segments, not the receiver's
        # view — what the receiver held shows in its ACKs
        self.at_sender = v.legs_known and v.d_x <= max(500_000, v.d_y // 10) < v.d_y
        self._ctx = ctx
        self._recs: dict[str, np.ndarray] | None = None
        self._rec_min: np.ndarray | None = None

    def any_record_behind(self, hole_end: int, t_rx: int) -> bool:
        """Some record of X at or after ``hole_end`` had its last byte at P before
        ``t_rx`` (what :func:`_victims_at_sender` lists, asked once per episode as one
        search: a suffix minimum of the arrival times over the records in offset order;
        True — ask the records — when their offsets are not in order)."""
        if self._rec_min is None:
            off = self.recs["offset"]
            if off.shape[0] > 1 and not bool((off[1:] >= off[:-1]).all()):
                self._rec_min = np.zeros(0)
            else:
                # fmin: a missing time (NaN) is no record, as ``NaN < t`` is False
                self._rec_min = np.fmin.accumulate(self.recs["last_byte_ts_ns"][::-1])[::-1]
        off = self.recs["offset"]
        if off.shape[0] and not self._rec_min.shape[0]:
            return True
        i = int(np.searchsorted(off, hole_end, side="left"))
        return i < off.shape[0] and bool(self._rec_min[i] < t_rx)

    @cached_property
    def has_records(self) -> bool:
        rows = self._ctx.rec_rows(self.f, self.d)
        return bool(rows.stop > rows.start)

    @cached_property
    def rec_end(self) -> np.ndarray:
        """Each record's end offset (``offset + length``), made once per direction."""
        return self.recs["offset"] + self.recs["length"]  # type: ignore[no-any-return]

    @property
    def recs(self) -> dict[str, np.ndarray]:
        """X's records columns that HoL reads (``ctx.rec_arrays``), read once per
        direction, not once per episode; empty when the direction has no records."""
        if self._recs is None:
            r = self._ctx.rec_arrays(self.f, self.d)
            if r["flow"].shape[0]:
                off = r["offset"]
                self._recs = {
                    "offset": off,
                    "length": r["length"],
                    "last_byte_ts_ns": r["last_byte_ts_ns"],
                    "last_byte_frame": r["last_byte_frame"],
                    "last_ts_ns": r["last_ts_ns"],
                    "last_frame": r["last_frame"],
                    "content_type": r["content_type"],  # float, NaN when missing
                }
            else:
                self._recs = {}
        return self._recs

    @cached_property
    def _frames_rising(self) -> bool:
        f = self.seg_frame
        return f.shape[0] < 2 or bool((f[1:] > f[:-1]).all())

    @cached_property
    def _end_top(self) -> np.ndarray:
        return np.maximum.accumulate(self.seg_end) if self.seg_end.shape[0] else self.seg_end

    def first_covering_before(self, h: int, j: int) -> list[int]:
        """``[i]``: the first segment carrying byte h (``off <= h < end``) if its frame is
        before segment j's, else ``[]``.  None can come before the first segment whose
        running maximum end passes h: the scan starts there (was a mask over every
        segment per period)."""
        if not self._frames_rising:
            cover = np.nonzero((self.seg_off <= h) & (self.seg_end > h))[0]
            got = [i for i in cover.tolist() if self.seg_frame[i] < self.seg_frame[j]]
            return got[:1]
        i0 = int(np.searchsorted(self._end_top, h, side="right"))
        if i0 >= j:
            return []
        c = np.nonzero((self.seg_off[i0:j] <= h) & (self.seg_end[i0:j] > h))[0]
        return [i0 + int(c[0])] if c.shape[0] else []

    def first_sent_behind(self, i: int, hole_end: int, t_rx: int, j: int) -> int | None:
        """The first segment after segment i (frame order) at or beyond ``hole_end`` seen
        before ``t_rx``; the segments up to the retransmission j are asked first."""
        if not self._frames_rising:
            k = np.nonzero(
                (self.seg_frame > self.seg_frame[i])
                & (self.seg_off >= hole_end)
                & (self.seg_ts < t_rx)
            )[0]
            return int(k[0]) if k.shape[0] else None
        for lo, hi in ((i + 1, max(j, i + 1)), (max(j, i + 1), self.seg_off.shape[0])):
            k = np.nonzero((self.seg_off[lo:hi] >= hole_end) & (self.seg_ts[lo:hi] < t_rx))[0]
            if k.shape[0]:
                return lo + int(k[0])
        return None

    def acked_past(self, a: np.ndarray, frame_hi: np.ndarray) -> np.ndarray:
        """Per (a, frame_hi): some ACK of Y before frame ``frame_hi`` is beyond ``a`` — a
        search of Y's running maximum ACK (Y's frames ascending); all True (ask each)
        when Y's frames are not in order."""
        n = self.y_frame.shape[0]
        if not n:
            return np.zeros(a.shape, bool)
        if n > 1 and not bool((self.y_frame[1:] > self.y_frame[:-1]).all()):
            return np.ones(a.shape, bool)
        k = np.searchsorted(self.y_frame, frame_hi, side="left")  # ACKs before frame_hi
        top = np.maximum.accumulate(self.y_ack)
        return (k > 0) & (top[np.maximum(k - 1, 0)] > a)

    def dupacks_all(
        self, h: np.ndarray, frame_lo: np.ndarray, frame_hi: np.ndarray
    ) -> list[list[int]] | None:
        """:meth:`dupacks_at` for many (h, lo, hi) at once, as lists: Y's eligible ACKs
        sorted by (ACK, frame), each question's answer one range of them (two grouped
        searches).  None when Y's frames are not in order or the keys do not fit int64
        (then ask :meth:`dupacks_at`)."""
        m = self.y_pure
        if self.sack_ok:
            m = m & (self.y_sack > 0)
        e = np.nonzero(m)[0]
        if not e.shape[0]:
            return [[] for _ in range(h.shape[0])]
        fr = self.y_frame[e]
        if e.shape[0] > 1 and not bool((fr[1:] > fr[:-1]).all()):
            return None
        order = np.argsort(self.y_ack[e], kind="stable")
        e, fr = e[order], fr[order]  # by ACK value, frames ascending within one value
        vals, head = np.unique(self.y_ack[e], return_index=True)
        gid = np.repeat(np.arange(vals.shape[0]), np.diff(np.append(head, e.shape[0])))
        got = grouped(gid, fr, vals.shape[0])
        if got is None:
            return None
        g = np.minimum(np.searchsorted(vals, h), vals.shape[0] - 1)
        lo = got.search(g, frame_lo, "right")
        hi = np.where(vals[g] == h, got.search(g, frame_hi, "left"), lo)
        return [e[u:w].tolist() for u, w in zip(lo.tolist(), hi.tolist(), strict=True)]

    def dupacks_at(self, h: int, frame_lo: int, frame_hi: int) -> np.ndarray:
        """Indices into y_* of Y's pure ACKs pinned at h with frame in (lo, hi)."""
        m = self.y_pure & (self.y_ack == h) & (self.y_frame > frame_lo) & (self.y_frame < frame_hi)
        if self.sack_ok:
            # with SACK negotiated, an ACK reporting out-of-order data carries SACK
            # blocks (RFC 2018 §4); a bare one at h is a window update
            m &= self.y_sack > 0
        return np.nonzero(m)[0]


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
    spans = _Spans([(h.a, h.b) for h in holes])
    for ep in _episodes([h for h in holes if h.status == "ok"]):
        fnd = _finding_from_holes(ctx, x, ep, holes, min_episode_ms, spans=spans)
        if fnd is not None:
            out.append(fnd)
    # a hole filled by the late original (reordering on the path, often the tail of a
    # delivery stall) blocks what arrived behind it just the same: one episode, one
    # finding, its cause named — not a loss, and not the records' size
    for ep in _episodes([h for h in holes if h.status == "reordering"]):
        fnd = _finding_from_holes(
            ctx,
            x,
            ep,
            holes,
            max(min_episode_ms, REORDER_FELT_NS / 1e6),
            cause="reordering",
            spans=spans,
        )
        if fnd is not None:
            out.append(fnd)
    out.extend(_ack_stream_episodes(ctx, x, spans, d_y, loss_min_rtt_fraction, min_episode_ms))
    return out


# --------------------------------------------------------------------------- hole at P


def _holes_at_p(
    x: _Dir, rtt: int | None, frac: float, no_rtt_ms: float, min_dupacks: int
) -> list[_Hole]:
    holes: list[_Hole] = []
    laters: list[np.ndarray] = []
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
        holes.append(h)
        laters.append(later)
    if not holes:
        return holes
    # what Y's ACKs say of every hole at once (searches, not a mask over Y per hole)
    fill_frame = np.array(
        [int(x.seg_frame[h.fill_i]) if h.fill_i is not None else 1 << 62 for h in holes],
        np.int64,
    )
    open_frame = x.seg_frame[np.array([h.open_i for h in holes], np.int64)]
    hole_a = np.array([h.a for h in holes], np.int64)
    maybe_acked = x.acked_past(hole_a, fill_frame)
    dup_lists = (
        x.dupacks_all(hole_a, open_frame - 1, fill_frame + 1)
        if len(holes) >= HOLES_AT_ONCE_MIN
        else None
    )
    for q, h in enumerate(holes):
        a, b, i = h.a, h.b, h.open_i
        # capture drop: Y acknowledged bytes of the hole before P saw them (an ACK that
        # advances as the fill arrives in pieces acknowledges only what P saw)
        if maybe_acked[q] and _acked_unseen(x, a, b, i, int(fill_frame[q]), laters[q]):
            h.status = "capture_drop"
            continue
        if h.fill_i is None:
            h.status = "unfilled"
            continue
        h.dupacks = (
            dup_lists[q]
            if dup_lists is not None
            else x.dupacks_at(a, int(open_frame[q]) - 1, int(fill_frame[q]) + 1).tolist()
        )
        if len(h.dupacks) < min_dupacks:
            h.status = "no_dupack"
            continue
        h.checks.append(
            f"not a capture drop: the receiver's ACKs stayed at the hole ({len(h.dupacks)} "
            "dupACKs) until the fill"
        )
        # reordering: was the fill the original?
        j, t_fill = h.fill_i, h.t_fill
        assert j is not None and t_fill is not None
        dur = t_fill - h.t_open
        ts_fill, ts_open = int(x.seg_tsval[j]), int(x.seg_tsval[i])
        if ts_fill >= 0 and ts_open >= 0:
            if not _later(ts_fill, ts_open):
                h.status = "reordering"
                continue
            h.ts_confirmed = True
            h.checks.append(
                f"not reordering: the fill was sent after the data behind the hole "
                f"(TSval {ts_fill} > {ts_open})"
            )
            continue
        resent_after = _overlapping_after(x, j, a, b)
        if x.seg_retx[resent_after].any():
            # the hole's range was sent again after the fill: the fill may have been the
            # original (the later copy spurious) — or itself a retransmission followed by
            # more (an RTO backing off): not a loss for sure, not reordering for sure
            h.status = "ambiguous"
            continue
        floor = frac * rtt if rtt else no_rtt_ms * 1e6
        if dur < floor:
            h.status = "reordering"
            continue
        h.checks.append(
            f"not reordering: the hole lasted {dur / 1e6:.1f} ms, longer than a "
            f"reordered original would ({floor / 1e6:.1f} ms"
            + (f" = {frac:g} RTT)" if rtt else ", Wireshark's ooo window)")
        )
    return holes


def _overlapping_after(x: _Dir, i: int, a: int, b: int) -> np.ndarray:
    """Indices (ascending) of the segments after segment ``i`` that cover bytes of
    [a, b), where ``b`` ≤ segment ``i``'s offset: only segments behind the highest byte
    sent before them can (``_Dir.seg_behind``)."""
    cand = x.seg_behind[np.searchsorted(x.seg_behind, i, side="right") :]
    return cand[(x.seg_off[cand] < b) & (x.seg_end[cand] > a)]


def _acked_unseen(
    x: _Dir, a: int, b: int, open_i: int, fill_frame: int, later: np.ndarray | None = None
) -> bool:
    """Y acknowledged bytes of the hole [a, b) that P had not seen by then (before the frame
    that completed the fill): the receiver had them, the capture point missed them.
    ``later``: ``_overlapping_after(x, open_i, a, b)`` when the caller has it."""
    ys = np.nonzero((x.y_ack > a) & (x.y_frame < fill_frame))[0]
    if not ys.shape[0]:
        return False
    if later is None:
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


def _episodes(holes: list[_Hole]) -> list[list[_Hole]]:
    """Holes whose blocking periods overlap form one episode."""
    eps: list[list[_Hole]] = []
    end = -1
    for h in sorted(holes, key=lambda h: h.t_open):
        assert h.t_fill is not None
        if eps and h.t_open < end:
            eps[-1].append(h)
            end = max(end, h.t_fill)
        else:
            eps.append([h])
            end = h.t_fill
    return eps


class _Spans:
    """A direction's holes [a, b) sorted by a, with the running maximum of b: whether a
    unit [o, e) touches any of them (``o < b and a < e``), or a byte h lies in one
    (``a <= h < b``), is one search per question — the holes with ``a < e`` (``a <= h``)
    are a prefix, and one of them reaches past o (h) iff its maximum b does.  Was a
    Python ``any()`` over every hole per unit and episode."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        a = np.array([s[0] for s in spans], np.int64)
        b = np.array([s[1] for s in spans], np.int64)
        order = np.argsort(a, kind="stable")
        self.a = a[order]
        self.b_max = np.maximum.accumulate(b[order]) if b.shape[0] else b

    def touches(self, o: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Per unit [o, e): it overlaps a hole."""
        if not self.a.shape[0]:
            return np.zeros(o.shape, bool)
        m = np.searchsorted(self.a, e, side="left")  # holes with a < e
        return (m > 0) & (self.b_max[np.maximum(m - 1, 0)] > o)

    def holds(self, h: np.ndarray) -> np.ndarray:
        """Per byte offset h: it lies in a hole."""
        if not self.a.shape[0]:
            return np.zeros(h.shape, bool)
        m = np.searchsorted(self.a, h, side="right")  # holes with a <= h
        return (m > 0) & (self.b_max[np.maximum(m - 1, 0)] > h)


def _units_at_p(
    ctx: DetectContext,
    x: _Dir,
    ep: list[_Hole],
    all_holes: list[_Hole],
    spans: _Spans | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(victims, hit units, unit name) for an episode seen as a hole at P (``spans``:
    :class:`_Spans` of ``all_holes``, made once per direction by the caller)."""
    t0 = min(h.t_open for h in ep)
    t1 = max(h.t_fill for h in ep if h.t_fill is not None)
    a0 = min(h.a for h in ep)
    victims: list[dict[str, Any]] = []
    hit: list[dict[str, Any]] = []
    recs = x.recs
    if recs:
        end = x.rec_end
        lb_ts = recs["last_byte_ts_ns"]
        rd_ts = recs["last_ts_ns"]
        sel = np.nonzero((end > a0) & (rd_ts >= t0) & (lb_ts <= t1))[0]
        if not sel.shape[0]:
            return victims, hit, "TLS record"
        if spans is None:
            spans = _Spans([(h.a, h.b) for h in all_holes])
        off_s = recs["offset"][sel]
        end_s = end[sel]
        touch = spans.touches(off_s, end_s).tolist()
        lb_s = lb_ts[sel].tolist()
        rd_s = rd_ts[sel].tolist()
        for o, e, ct, lbf, lb, rdf, rd, touches in zip(
            off_s.tolist(),
            end_s.tolist(),
            recs["content_type"][sel].tolist(),
            recs["last_byte_frame"][sel].tolist(),
            lb_s,
            recs["last_frame"][sel].tolist(),
            rd_s,
            touch,
            strict=True,
        ):
            o, e, lb, rd = int(o), int(e), int(lb), int(rd)
            u = {
                "offset": o,
                "length": e - o,
                "content_type": int(ct),
                "arrived_frame": int(lbf),
                "arrived_ns": lb,
                "readable_frame": int(rdf),
                "readable_ns": rd,
                "wait_ms": (rd - lb) / 1e6,
            }
            if touches:
                hit.append(u)
            elif rd > lb and t0 <= lb < t1:
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
    spans: _Spans | None = None,
) -> Finding | None:
    t0 = min(h.t_open for h in ep)
    t1 = max(h.t_fill for h in ep if h.t_fill is not None)
    victims, hit, unit = _units_at_p(ctx, x, ep, all_holes, spans)
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


# --------------------------------------------------------------------------- ACK stream


def _ack_stream_episodes(
    ctx: DetectContext,
    x: _Dir,
    covered: _Spans,
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
    # the running maximum of the ACKs: the first ACK past h after k0 is a search of it
    # when no ACK before k0 went past h already (cumulative ACKs: the usual case)
    top = np.maximum.accumulate(x.y_ack)
    # the first dupACK at each value h, in order
    kd = np.nonzero(dup)[0]
    rising = bool((top == x.y_ack).all())  # ACKs never go back (the usual case)
    ak = x.y_ack[kd]
    if rising:  # each value's first dupACK: where the value changes
        first = np.flatnonzero(np.append(True, ak[1:] != ak[:-1]))
    else:
        first = np.sort(np.unique(ak, return_index=True)[1])
    k0s = kd[first]
    hs = x.y_ack[k0s]
    # the capture point saw this hole itself (h inside a covered [a, b)): handled above
    keep = ~covered.holds(hs)
    k0s, hs = k0s[keep], hs[keep]
    # every dupACK period of the direction at once (arrays over the periods): the jump,
    # the frames around it, and the last retransmission of h between them
    kj = np.searchsorted(top, hs, side="right")
    for q in np.nonzero(top[k0s] > hs)[0].tolist():  # an ACK before k0 went past h already
        after = x.y_ack[k0s[q] + 1 :] > hs[q]
        kj[q] = k0s[q] + 1 + int(np.argmax(after)) if after.any() else n
    live = kj < n  # else the episode never ended in the capture
    k0s, hs, kj = k0s[live], hs[live], kj[live]
    if not k0s.shape[0]:
        return out
    # the first ACK that reached h: the data after it is what Y reports out of order
    if rising:  # a search
        reach_fr = x.y_frame[np.searchsorted(x.y_ack, hs, side="left")]
    else:  # each ACK value's first index: a sort of them all
        ack_vals, ack_first = np.unique(x.y_ack, return_index=True)
        reach_fr = x.y_frame[ack_first[np.searchsorted(ack_vals, hs)]]
    jump_fr = x.y_frame[kj]
    rx_j = _last_retx_covering(x, hs, reach_fr, jump_fr)
    # with a few periods, asking the records directly is cheaper than their suffix minimum
    ask_first = k0s.shape[0] >= PERIODS_FOR_SUFFIX_MIN and x.has_records
    for k0, h, k_j, j, f_jump in zip(
        k0s.tolist(), hs.tolist(), kj.tolist(), rx_j.tolist(), jump_fr.tolist(), strict=True
    ):
        if j < 0:
            continue  # no retransmission: Y's ACK jumped on its own (reordering)
        if x.seg_kind[j] == "spurious_retransmission":
            continue
        t_h0, t_h1 = int(x.y_ts[k0]), int(x.y_ts[k_j])
        t_rx = int(x.seg_ts[j])
        if d_y is not None and d_y > 0 and t_h1 - t_rx < frac * d_y:
            continue  # the jump came too soon to be the copy's doing: original was late
        duration = t_h1 - t_h0
        if duration / 1e6 < min_episode_ms:
            continue
        hole_end = int(x.seg_end[j])
        if ask_first and not x.any_record_behind(hole_end, t_rx):
            continue  # nothing complete reached Y behind the hole: no unit was blocked
        victims = _victims_at_sender(ctx, x, hole_end, t_rx, t_h1, d_y)
        if not victims["units"]:
            continue
        dups = k0 + np.nonzero(dup[k0:k_j] & (x.y_ack[k0:k_j] == h))[0]
        checks = [
            f"loss, not reordering: {dups.shape[0]} dupACKs pinned at the hole, then a "
            f"retransmission (frame {int(x.seg_frame[j])}) before the ACK moved past it"
        ]
        if d_y is not None and d_y > 0:
            checks.append(
                f"the ACK jump came {(t_h1 - t_rx) / 1e6:.1f} ms after the retransmission, "
                f"≥ {frac:g} × the {d_y / 1e6:.1f} ms round trip to the receiver"
            )
        # the first segment that carried byte h, when it came before the retransmission
        orig = x.first_covering_before(h, j)
        # cross-check from the data direction (X → P, also unbiased by the vantage): the
        # first segment sent behind the lost one → the retransmission.  The two agree unless
        # one path direction's delay changed during the episode (queueing, a stalled hop)
        conf = 0.8
        send_side = None
        caveats: list[str] = []
        if orig:
            k = x.first_sent_behind(orig[0], hole_end, t_rx, j)
            if k is not None:
                send_side = t_rx - int(x.seg_ts[k])
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


# a direction with this many dupACK periods asks "any record behind the hole, arrived
# before the retransmission?" of a suffix minimum over its records (made once); with
# fewer, _victims_at_sender's masks answer it
PERIODS_FOR_SUFFIX_MIN = 4

# at most this many (dupACK period, re-sent segment) pairs are listed at once by
# _last_retx_covering (its temporaries ~4 × 8 B each: ~8 MB) — beyond, one period at a time
PAIRS_AT_ONCE = 1 << 18


def _last_retx_covering(
    x: _Dir, hs: np.ndarray, lo_fr: np.ndarray, hi_fr: np.ndarray
) -> np.ndarray:
    """For each byte offset ``hs[q]``: the last of X's segments with frame strictly between
    ``lo_fr[q]`` and ``hi_fr[q]``, of a re-sent kind (``_RETX_KINDS``), covering the byte;
    −1 when there is none.  The re-sent segments of each window are a range of them
    (frames ascending): every (window, segment) pair is listed and tested at once."""
    out = np.full(hs.shape, -1, np.int64)
    r = x.seg_resent
    if not r.shape[0] or not hs.shape[0]:
        return out
    fr = x.seg_frame[r]
    lo = np.searchsorted(fr, lo_fr, side="right")
    cnt = np.maximum(np.searchsorted(fr, hi_fr, side="left") - lo, 0)
    total = int(cnt.sum())
    if (fr.shape[0] > 1 and bool((fr[1:] < fr[:-1]).any())) or total > PAIRS_AT_ONCE:
        for q in range(hs.shape[0]):  # frames out of order (a hand-made table), or huge
            h = hs[q]
            m = (x.seg_off[r] <= h) & (x.seg_end[r] > h) & (fr > lo_fr[q]) & (fr < hi_fr[q])
            if m.any():
                out[q] = r[np.nonzero(m)[0][-1]]
        return out
    item = np.repeat(np.arange(hs.shape[0]), cnt)
    seg = r[np.arange(total) - (np.cumsum(cnt) - cnt)[item] + lo[item]]
    h = hs[item]
    ok = (x.seg_off[seg] <= h) & (x.seg_end[seg] > h)
    np.maximum.at(out, item[ok], seg[ok])
    return out


def _victims_at_sender(
    ctx: DetectContext, x: _Dir, hole_end: int, t_rx: int, t_h1: int, d_y: int | None
) -> dict[str, Any]:
    """Units sent behind the hole that reached Y before the fill (estimated at P = X)."""
    sent = (x.seg_off >= hole_end) & (x.seg_ts < t_rx) & x.seg_new
    behind = int((x.seg_end[sent] - x.seg_off[sent]).sum()) if sent.any() else 0
    units: list[dict[str, Any]] = []
    recs = x.recs
    if recs:
        unit = "TLS record"
        off = recs["offset"]
        lb_ts = recs["last_byte_ts_ns"]
        sel = np.nonzero((off >= hole_end) & (lb_ts < t_rx))[0]
        rows = list(
            zip(
                map(int, off[sel].tolist()),
                map(int, recs["length"][sel].tolist()),
                map(int, recs["last_byte_frame"][sel].tolist()),
                map(int, lb_ts[sel].tolist()),
                strict=True,
            )
        )
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


# --------------------------------------------------------------------------- text


_REMEDY = (
    "The loss is on the path (find the link, queue or shaper that dropped it). To stop one "
    "loss from stalling independent streams: serve them over HTTP/3 (QUIC), where a loss "
    "blocks only the streams in the lost packet, or put independent streams on separate "
    "connections; keep the sender's unsent backlog small (tcp_notsent_lowat, smaller send "
    "buffers) so less data queues behind a hole; keep RACK/TLP loss detection on (Linux "
    "default) so holes are repaired in about one RTT rather than an RTO."
)


_REMEDY_REORDERING = (
    "The path reordered the segments (parallel links or queues, Wi-Fi aggregation, a "
    "delivery stall whose backlog was released out of order); find the hop — the sender "
    "did nothing wrong and no retransmission was needed. To keep one late segment from "
    "stalling independent streams: HTTP/3 (QUIC) blocks only the streams in the late "
    "packet; independent streams on separate connections."
)


def _multiplex_note(ctx: DetectContext, f: int) -> str:
    row = ctx.tls_row(f)
    alpn = None if row is None else row.alpn
    if isinstance(alpn, str) and alpn.startswith("h2"):
        return (
            " This connection speaks HTTP/2: every stream multiplexed on it waited, not only "
            "the ones whose bytes were lost."
        )
    return (
        " Every message queued behind the hole waited, whichever request or stream it belonged to."
    )


def _display_filter(ctx: DetectContext, x: _Dir, h: int) -> str:
    r = ctx.flow(x.f)
    src_y = r.client_ip if x.d == 1 else r.server_ip
    src_x = r.server_ip if x.d == 1 else r.client_ip
    ipf = "ipv6.src" if ":" in str(src_y) else "ip.src"
    return (
        f"tcp.stream == {int(r.stream)} && ("
        f"({ipf} == {src_y} && tcp.ack == {h + 1} && tcp.len == 0) || "
        f"({ipf} == {src_x} && tcp.seq <= {h + 1} && tcp.nxtseq > {h + 1}) || "
        "tcp.analysis.lost_segment || tcp.analysis.retransmission || "
        "tcp.analysis.out_of_order)"
    )

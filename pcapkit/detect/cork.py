"""TCP_CORK / MSG_MORE left on (C1) and autocork/TSQ write coalescing (C2): DETECTION.md §3.

Mechanism (§3.1).  man 7 tcp, TCP_CORK: "If set, don't send out partial frames … there
is a 200 millisecond ceiling on the time for which output is corked".  In the kernel
the ceiling is the probe timer: with nothing in flight and corked data pending,
``tcp_check_probe_timer()`` arms ICSK_TIME_PROBE0 at ``tcp_probe0_base()`` = max(RTO,
TCP_RTO_MIN = 200 ms), and ``tcp_write_wakeup()`` sends the pending partial segment
**with PSH** when it fires.  Linux's RTO is srtt + rttvar with rttvar floored at
``tcp_rto_min`` (``__tcp_set_rto``), so the hold is ≈ 200 ms + RTT (+ a jiffy).
MSG_MORE on a send corks that call (``tcp_push``).  Full-sized segments are never held.

C1 signature (§3.2), per direction X → Y, on sub-MSS PSH segments R of new data sent
with nothing in flight and no inbound packet shortly before (timer-driven, unlike
Nagle).  The write time is not on the wire, so an *anchor* is needed:

* (a) request/response: R is X's first data after a request from Y and leaves
  ``t(R) − t(request) − d_X`` within the RTO window after it (≈ TCP_RTO_MIN + RTT, see
  RTO_*), and — when there are several — the answers are held alike (a timer; an
  application's service time varies);
* (b) streaming: R leaves that long after Y's last ACK and carries ≥ 2 application
  units (TLS records) — writes that accumulated while corked; or R is the partial tail
  of a write whose full-sized segments left at once (the segment before R is full and
  without PSH: the write did not end there; a corked socket sends full segments and
  holds the tail until the probe timer fires after their ACK);
* (c) setup: R is the server's first data (a server-first greeting) and leaves that
  long after the handshake (not for clients: a pre-connected client sends its first
  request whenever the application wants).

A client's *next* HTTP request is never an anchor either, whatever answer came before it
(the requests table says where requests start: cleartext, or TLS with keys): the client
sends it when its application wants — think time, a retry's backoff sleep of 250 ms.

Known blind spot: an application whose own delay is a constant close to the RTO (a
client polling 250 ms after each answer when its requests are not decoded — no keys —,
a server batching for 250 ms) looks the same from the wire; hence the medium confidence (0.6, 0.8 for several answers held alike).
A *lone* late answer or greeting — one request or setup anchor, nothing chained to it,
a single unit — is not reported at all: a proxy fetching upstream or a slow handshake
step takes 200–300 ms as often as a cork holds a write (issue 13 review: nDPI's
http-proxy.pcapng and teams.pcap).

What the anchors measure from: a request is timed from when X had all of it — the ACK
of X that first covered it, when X's earlier ACKs showed it incomplete (a segment
delayed or lost on the way, netflix.pcap frame 1441) — never from Y's last packet alone;
a tail anchor needs the write's full segments to have left together (a write trickling
out ≥ ½ RTT apart is the application's pace, netflix.pcap 1348/1356/1380); and a
retransmission by X between the trigger and the segment (X's view of the ACKs lagged the
capture point's: loss recovery, netflix.pcap 1726/1739) rules the segment out.

A socket shown corked stays corked until something shows otherwise: every later R of
the direction that is cork-consistent (sub-MSS, PSH, nothing in flight, no inbound
packet within the coupling tolerance before it, ≥ RTO_lo after X's previous data) is
reported too, with the anchor's hold as its estimated cost; a partial segment that left
promptly after a packet from Y, or while data was in flight, or an answer to a request
held outside the RTO window, ends the chain (the cork was cleared).  An answer held
outside the window also discredits every request anchor of the direction (the
application's own service time is long and varies).  Cost of an anchor: t(R) − t(trigger) − d_X, an upper bound (it includes
the application's service time; minus the median prompt service time of the same
direction when one exists, then an estimate).

False positives (§3.3): RTO retransmissions (same sequence ⇒ not new data), zero-window
probes (Y's window 0 ⇒ §7.2), keep-alives (not new data), application timers at
≈ 200 ms (no request/setup anchor, a single unit per segment, a whole write before it
⇒ not anchored), slow application answers (they vary; a timer does not).

C2 (§3.2): several complete application records (TLS records) in one segment emitted
µs–sub-ms after X's previous segment with no ACK trigger: coalescing by autocork/TSQ
(``tcp_should_autocork``) — informational, one finding per direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._pages import release_free_memory
from .base import Evidence, Finding, frame_filter
from .constants import (
    AUTOCORK_MAX_GAP_NS,
    FLIGHT_BREAK_RTT,
    FLIGHT_GAP_MIN_NS,
    JIFFY_HZ100_NS,
    MS,
    RTO_HIGH_FACTOR,
    TCP_RTO_MIN_NS,
    ContentType,
)
from .context import DIRS, DetectContext
from .spec import DetectorSpec, Kind, Threshold
from .tcp_model import (
    DirView,
    Grouped,
    YGroups,
    backwards,
    cost_stats,
    grouped,
    key_chunks,
    median_of,
    role_name,
    y_groups,
)

SPEC = DetectorSpec(
    kinds=(
        Kind("tcp_cork", "C1", "DETECTION.md §3", holds=True),
        Kind("write_coalescing", "C2", "DETECTION.md §3.2", severity="info"),
    ),
    thresholds=(
        Threshold(
            "rto_min_ms",
            "ms",
            "Linux TCP_RTO_MIN = HZ/5 = 200 ms (include/net/tcp.h): floor of the probe timer",
        ),
        Threshold("rto_low_factor", "ratio", "−5 % of m + 200 ms for RTT noise [judgement]"),
        Threshold(
            "rto_high_factor",
            "ratio",
            "+25 % of the RTO estimate [judgement; lab: 236 ms for an RTO of 232 ms]",
        ),
        Threshold("rto_high_slack_ms", "ms", "two jiffies at HZ=100 for rttvar above its floor"),
        Threshold(
            "autocork_max_gap_ms",
            "ms",
            "DETECTION.md §3.2 C2: autocork releases on TX completion, µs to sub-ms later",
        ),
    ),
)
KINDS = SPEC.kind_names

# The cork ceiling is the probe timer, ≥ TCP_RTO_MIN (constants) + srtt.  The RTO after
# the first RTT sample m (tcp_rtt_estimator: mdev = 2m, "make sure rto = 3*rtt"; rttvar
# floored at TCP_RTO_MIN) is m + max(200 ms, 2m).  Window: from −5 % of m + 200 ms (RTT
# noise) to +25 % of that estimate (constants.RTO_HIGH_FACTOR) plus two jiffies at HZ=100
# (20 ms) for rttvar above its floor and timer granularity [judgement; lab: 236 ms for RTO
# 232 ms, loopback 208 ms].
RTO_LOW_FACTOR = 0.95
# the prefilter settles answers to requests itself from this many per direction on (fewer:
# the loop is cheaper than the fixed cost of the array searches; same results either way)
REQUESTS_AT_ONCE_MIN = 8
# The probe timer gives every corked answer the same hold; an application's service time
# varies.  Request anchors of one direction must agree within max(25 ms, 10 %) of their
# median (§3.2 a: "consistently") [judgement: 2 jiffies at HZ=100 plus RTT jitter].
ANCHOR_SPREAD_MS = 25.0
ANCHOR_SPREAD_FRACTION = 0.10


Units = tuple[np.ndarray, np.ndarray]  # (sorted frames, records carried by each)


def _app_units(ctx: DetectContext, f: int, d: int) -> Units:
    """The frames carrying complete application records (sorted) and how many each."""
    key, fr, n = ctx.memo(("cork.app_units",), lambda: _all_app_units(ctx))
    rows = slice(
        int(np.searchsorted(key, 2 * f + d, "left")), int(np.searchsorted(key, 2 * f + d, "right"))
    )
    return fr[rows], n[rows]


_CHUNK = 1 << 18  # records per step of _all_app_units' key building


def _all_app_units(ctx: DetectContext) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_app_units` of every direction at once: (direction key ``2·flow + dir``,
    frame, records) sorted by key and frame, one row per frame carrying complete
    application records."""
    z = np.zeros(0, np.int64)
    key = ctx.rec_dir_keys
    if not key.shape[0]:
        return z, z, z
    everything = slice(0, key.shape[0])
    first = ctx.rec_column("first_frame", everything).astype(np.int64, copy=False)
    last = ctx.rec_column("last_byte_frame", everything).astype(np.int64, copy=False)
    # application_data outside the handshake epoch ("plaintext" when the capture starts
    # mid-stream; a TLS 1.3 handshake record without keys shows outer type 23 too, but
    # its epoch is "handshake")
    ok = ctx.rec_int_is("content_type", ContentType.APPLICATION_DATA.value)
    ok &= ~ctx.rec_text_is("epoch", "handshake")
    ok &= first == last
    n_ok = int(np.count_nonzero(ok))
    if not n_ok:
        return z, z, z
    lo_fr, hi_fr = int(first.min(where=ok, initial=0)), int(first.max(where=ok, initial=0))
    if lo_fr >= 0 and hi_fr < 1 << 40 and int(key[-1]) < 1 << 22:
        # one int64 per (direction, frame) of the selected records, sorted: one sort
        # instead of a two-key lexsort, a stable one (timsort, fast on runs: the frames
        # are in order but for a few records behind holes).  A piece of whole directions
        # of about _CHUNK records at a time: the pieces' rows, in order, are the rows of
        # the whole, and their temporaries (2 MB) are reused pass after pass (at
        # sse-1M's 7.9 M records, one pass made 63 MB of fresh pages each time)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for a, b in key_chunks(key, _CHUNK):
            m = ok[a:b]
            k = key[a:b][m].astype(np.int64) << 40  # (int32 keys)
            k |= first[a:b][m]
            if not k.shape[0]:
                continue
            k.sort(kind="stable")
            head = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
            u = k[head]
            parts.append((u >> 40, u & ((1 << 40) - 1), np.diff(np.append(head, k.shape[0]))))
        del ok
        cat = np.concatenate
        return cat([p[0] for p in parts]), cat([p[1] for p in parts]), cat([p[2] for p in parts])
    k, fr = key[ok].astype(np.int64), first[ok]
    o = np.lexsort((fr, k))
    k, fr = k[o], fr[o]
    head = np.flatnonzero(np.concatenate(([True], (k[1:] != k[:-1]) | (fr[1:] != fr[:-1]))))
    n = np.diff(np.append(head, k.shape[0]))
    return k[head], fr[head], n.astype(np.int64)


def _units_at(units: Units, frames: Any) -> Any:
    """Records carried by each of ``frames`` (0 for a frame carrying none)."""
    fr, n = units
    if not fr.size:
        return np.zeros(np.shape(frames), np.int64)
    k = np.minimum(np.searchsorted(fr, frames), fr.size - 1)
    return np.where(fr[k] == frames, n[k], 0)


def detect(
    ctx: DetectContext,
    *,
    rto_min_ms: float = TCP_RTO_MIN_NS / MS,
    rto_low_factor: float = RTO_LOW_FACTOR,
    rto_high_factor: float = RTO_HIGH_FACTOR,
    rto_high_slack_ms: float = 2 * JIFFY_HZ100_NS / MS,
    autocork_max_gap_ms: float = AUTOCORK_MAX_GAP_NS / MS,
) -> list[Finding]:
    """Corked partial segments released by the probe timer (``tcp_cork``) and
    autocork/TSQ coalescing (``write_coalescing``, informational)."""
    out: list[Finding] = []
    starts = _request_starts(ctx)
    none = np.zeros(0, np.int64)
    jobs: list[tuple[DirView, int, int, int, int]] = []  # (view, lo, hi, quiet, rto_est)
    for f in ctx.tcp_flows():
        for d in (0, 1):
            v = DirView.timed(ctx, f, d)
            if v is None:
                continue
            tol = v.tolerance()
            quiet = tol + v.coupling.late_ns
            rto_est = v.rtt + max(int(rto_min_ms * MS), 2 * v.rtt)
            lo = int(rto_low_factor * (v.rtt + rto_min_ms * MS))
            hi = int(rto_high_factor * rto_est + rto_high_slack_ms * MS)
            jobs.append((v, lo, hi, quiet, rto_est))
    pre = _prefilter_all(ctx, jobs)
    max_gap = int(autocork_max_gap_ms * MS)
    coalescing = _coalescing_dirs(ctx, max_gap)
    # what the passes above left free in the C heap (their temporaries, reused pass after
    # pass) back to the kernel: kept, it stayed resident under the analysis's peak (h2-1M,
    # 6 alternating rounds: 825 → 848 MiB median; trimmed here, 817)
    release_free_memory()
    for v, lo, hi, quiet, rto_est in jobs:
        f, d = v.f, v.d
        units = _app_units(ctx, f, d)
        # the client's own requests (never anchors); none for the server's direction
        req = starts.get(f, none) if d == 0 else none
        got = pre.get(2 * f + d)
        out.extend(_cork(ctx, v, units, lo, hi, quiet, rto_est, req, got))
        if coalescing is None or 2 * f + d in coalescing:
            out.extend(_coalescing(ctx, v, units, max_gap, quiet))
    return out


def _coalescing_dirs(ctx: DetectContext, max_gap: int) -> set[int] | None:
    """The direction keys ``2·flow + dir`` where :func:`_coalesced` has a candidate to test
    (before its release test): a new segment, not its direction's first, carrying ≥ 2
    complete application records and leaving ≤ ``max_gap`` after the previous new
    segment — every direction at once, from the segments table (the rows a view
    slices).  None when the keys do not fit one int64 (then every direction asks).  At
    sse-1M, 38 of 5,341 directions with application records have one."""
    key_u, fr_u, n_u = ctx.memo(("cork.app_units",), lambda: _all_app_units(ctx))
    if not key_u.shape[0]:
        return set()
    if int(key_u[-1]) >= 1 << 22:
        return None
    sk = ctx.seg_dir_keys
    new_all = ctx.seg_kind_is("new")
    frame, ts_all = ctx.seg_columns["frame"], ctx.seg_columns["ts_ns"]
    out: set[int] = set()
    for a0, b0 in key_chunks(sk):  # whole directions: their pairs are in one pass
        rows = np.flatnonzero(new_all[a0:b0]) + a0
        if rows.shape[0] < 2:
            continue
        k = sk[rows].astype(np.int64)
        fr = frame[rows].astype(np.int64, copy=False)
        if int(k[-1]) >= 1 << 22 or int(fr.min()) < 0 or int(fr.max()) >= 1 << 40:
            return None
        ts = ts_all[rows].astype(np.int64, copy=False)
        # b: a new segment whose previous new segment is its direction's, ≤ max_gap before
        b = np.flatnonzero((k[1:] == k[:-1]) & (ts[1:] - ts[:-1] <= max_gap)) + 1
        if not b.shape[0]:
            continue
        # these directions' frames carrying ≥ 2 complete records (the units are sorted by
        # key, then frame)
        u0 = int(np.searchsorted(key_u, int(k[0]), side="left"))
        u1 = int(np.searchsorted(key_u, int(k[-1]), side="right"))
        m = n_u[u0:u1] >= 2
        if not m.any():
            continue
        multi = (key_u[u0:u1][m] << 40) | fr_u[u0:u1][m]
        q = (k[b] << 40) | fr[b]
        at = np.minimum(np.searchsorted(multi, q), multi.shape[0] - 1)
        out.update(k[b[multi[at] == q]].tolist())
    return out


def _request_starts(ctx: DetectContext) -> dict[int, np.ndarray]:
    """Per flow, when each HTTP request became readable (its first byte; capture clock,
    sorted); flows without decoded requests are absent.  Built once per run."""
    r = ctx.requests
    if not len(r):
        return {}
    ok = r["request_start_ts_ns"].notna().to_numpy(bool)
    flow = r["flow"].to_numpy(np.int64)[ok]
    ts = r["request_start_ts_ns"].to_numpy()[ok].astype(np.int64)
    order = np.lexsort((ts, flow))
    flow, ts = flow[order], ts[order]
    cuts = np.flatnonzero(np.diff(flow)) + 1
    groups = zip(np.split(flow, cuts), np.split(ts, cuts), strict=True)
    return {int(g[0]): t for g, t in groups if g.size}


def _starts_request(starts: np.ndarray, t: int, n_ts: np.ndarray, pos: int) -> bool:
    """The segment sent at ``t`` (X's new data number ``pos``) carries the first byte of a
    request: one became readable from ``t`` until X's next new segment."""
    if not starts.shape[0]:
        return False
    end = int(n_ts[pos + 1]) if pos + 1 < n_ts.shape[0] else t + 1
    k = int(np.searchsorted(starts, t, "left"))
    return k < starts.shape[0] and int(starts[k]) < max(end, t + 1)


def _cork(
    ctx: DetectContext,
    v: DirView,
    units: Units,
    lo: int,
    hi: int,
    quiet: int,
    rto_est: int,
    starts: np.ndarray,
    pre: Prefiltered | None = None,
) -> list[Finding]:
    """``starts``: when X's HTTP requests became readable (X the client; else empty);
    ``pre``: what :func:`_cork_prefilter` answers for this direction, when known
    (:func:`_prefilter_all`)."""
    p = v.p
    new = v.new_pos
    if not new.size:
        return []
    # full segments leave at write time even when corked: neutral, only remembered as
    # "the previous segment" (spacing, response tail)
    partial = ~v.s_super[new] & (v.s_len[new] < v.mss)
    n_ts = v.s_ts[new]
    events: list[dict[str, Any]] = []
    chain = False  # socket shown corked and not shown uncorked since
    slow_answers = 0
    if pre is None:
        pre = _cork_prefilter(v, new, partial, lo, hi, quiet)
    todo, resets, service = pre[0], pre[1], list(pre[2])
    # ``service``: prompt answers to requests, the application's service time (only its
    # median is read: the prefilter's answers first, then the loop's)
    seen = 0
    for pos in todo.tolist():
        if resets is not None:
            # a partial segment the prefilter settled as "not corked" came before
            r = int(resets[pos])
            if r != seen:
                chain = False
                seen = r
        j = int(new[pos])
        i = int(v.s_pi[j])
        t = int(p.ts[i])
        spacing = None if pos == 0 else t - int(n_ts[pos - 1])
        # the tail of a write whose full segments left first: the segment before is full
        # and has no PSH (the write had not ended there, §1.5 rule 2)
        after_full = pos > 0 and not bool(partial[pos - 1]) and not bool(v.s_psh[new[pos - 1]])
        kb = v.last_y_reaching(t, quiet)  # the last packet from Y that reached X first
        in_flight = kb is None and int(v.s_off[j]) > 0
        if kb is not None:
            in_flight = int(v.y_ackmax[kb]) < int(v.s_off[j])
        if in_flight or int(v.s_gap[j]) > 0:
            chain = False  # a partial segment sent with data in flight: not corked
            continue
        if kb is None:
            continue
        ib = int(v.y_idx[kb])
        tb = int(p.ts[ib])
        hold = t - tb - v.d_x
        w = int(p.win[ib])
        if w == 0 or (w > 0 and w < int(v.s_len[j])):
            chain = False
            continue  # window-limited: zero-window probe territory (§7.2)
        if v.x_trouble_between(tb, t):
            # X retransmitted meanwhile (an RTO, a spurious resend of data P saw
            # acknowledged): X's own view of what was in flight lagged P's, so the
            # segment may have waited for the window after loss recovery (§3.3)
            chain = False
            continue
        if bool(v.y_data[kb]):
            # the request was readable at X only once X's cumulative ACK covered it: when
            # X's ACKs stayed below its end after it arrived (a hole: loss or reordering
            # on the way), X got it with the ACK that finally covered it (both X → P:
            # unbiased by the vantage)
            done = _request_complete_at(v, kb, tb, t)
            if done is not None:
                hold = min(hold, t - done)
        if hold < quiet:
            # released right after a packet from Y: a reply or an ACK release, not a timer
            if bool(v.y_data[kb]) and hold < lo // 2:
                service.append(max(hold, 0))
            chain = False
            continue
        psh = bool(v.s_psh[j])
        first_data = int(v.s_off[j]) == 0
        if bool(v.y_data[kb]) and _starts_request(starts, t, n_ts, pos):
            # the client's next HTTP request after an answer: sent when its application
            # wanted (think time, a backoff sleep), like its first one — never an anchor
            trigger = "next_request"
        elif bool(v.y_data[kb]):
            trigger = "request"
        elif first_data and v.d == 1:
            trigger = "setup"  # a server-first greeting; a client's first request may
            # wait for the application as long as it likes (pre-connected pools)
        else:
            trigger = "ack"
        n_units = int(_units_at(units, int(v.s_frame[j])))
        if trigger == "ack" and after_full and n_units < 2 and _full_run_left_at_once(v, new, pos):
            trigger = "tail"  # the write's full segments left at once, its tail was held
        anchored = (
            psh
            and lo <= hold <= hi
            and trigger != "next_request"
            and (trigger in ("request", "setup", "tail") or n_units >= 2)
        )
        if anchored:
            chain = True
            events.append(
                {
                    "j": j,
                    "kb": kb,
                    "hold": hold,
                    "trigger": trigger,
                    "anchor": None,
                    "units": n_units,
                }
            )
            continue
        if trigger == "request":
            # an answer held, but not for the timer: the application's own service time
            # is long and varies — anchors on answers are not to be trusted either
            slow_answers += 1
            chain = False
            continue
        if chain and psh and (spacing is None or spacing >= lo) and events:
            anchor = next(e for e in reversed(events) if e["anchor"] is None)
            events.append(
                {
                    "j": j,
                    "kb": kb,
                    "hold": hold,
                    "trigger": trigger,
                    "anchor": anchor["j"],
                    "units": n_units,
                }
            )
            continue
        if not (lo <= hold):
            chain = False
    events = _consistent(events, slow_answers)
    if len(events) == 1 and events[0]["trigger"] in ("request", "setup") and events[0]["units"] < 2:
        # one answer (or greeting) ≈ RTO late and nothing else: an application (a proxy
        # fetching upstream, a server's slow handshake step) takes 200–300 ms as often as
        # a forgotten cork does — the wire cannot tell a lone one (§3.2 a: "consistently")
        return []
    if not events:
        return []
    return _cork_findings(ctx, v, events, service, lo, hi, rto_est)


def _cork_prefilter(
    v: DirView, new: np.ndarray, partial: np.ndarray, lo: int, hi: int, quiet: int
) -> tuple[np.ndarray, np.ndarray | None, list[int]]:
    """The partial segments (positions in ``new``) :func:`_cork`'s loop must look at one by
    one, the running count of those it can skip that end a chain (``chain = False``), and
    the service times of the prompt answers it settled.

    The same tests as the loop, over all partial segments at once, for the outcomes that
    need no state: data in flight or a gap before it, a window-limited segment, a
    retransmission of X since the last packet from Y, or — no data from Y — released
    within ``quiet`` of Y's packet, or without PSH, or with PSH but held outside the RTO
    window less than ``lo`` after X's previous data (no anchor, no link of a chain: it ends
    one only when held less than ``lo``) all end a chain or change nothing; no packet from Y
    yet with nothing sent before changes nothing.  Everything else (requests, PSH segments held ≥ ``quiet``)
    goes through the loop unchanged — except an answer to Y's data released within
    ``quiet`` of when X had the request (:func:`_request_hold_all`): it ends a chain
    and its hold is a service time.  Only when ``y_ts`` and ``x_bad_ts`` are sorted (what
    the loop's searches assume); else every partial segment goes through the loop."""
    ppos = np.nonzero(partial)[0]
    ys, bad = v.y_ts, v.x_bad_ts
    if not ppos.size or ys.dtype.kind not in "iu" or bad.dtype.kind not in "iu":
        return ppos, None, []
    if (ys.size > 1 and bool((ys[1:] < ys[:-1]).any())) or (
        bad.size > 1 and bool((bad[1:] < bad[:-1]).any())
    ):
        return ppos, None, []
    service: list[int] = []
    p = v.p
    jj = new[ppos]
    t = p.ts[v.s_pi[jj]].astype(np.int64)
    bound = np.minimum(t - v.d_x + quiet, t - 1)
    kb = np.searchsorted(ys, bound, side="right") - 1
    has = kb >= 0
    off = v.s_off[jj]
    if not ys.size:
        reset = (off > 0) | (v.s_gap[jj] > 0)
        live = np.zeros(ppos.size, bool)
    else:
        kbc = np.where(has, kb, 0)
        in_flight = np.where(has, v.y_ackmax[kbc] < off, off > 0)
        reset = in_flight | (v.s_gap[jj] > 0)
        live = ~reset & has
        ib = v.y_idx[kbc]
        tb = p.ts[ib].astype(np.int64)
        w = p.win[ib]
        hold = t - tb - v.d_x
        win_limited = (w == 0) | ((w > 0) & (w < v.s_len[jj]))
        trouble = np.zeros(ppos.size, bool)
        if bad.size:
            a = np.searchsorted(bad, tb, side="left")
            trouble = (a < bad.size) & (bad[np.minimum(a, bad.size - 1)] <= t)
        ydata = v.y_data[kbc].astype(bool)
        psh = v.s_psh[jj].astype(bool)
        # a PSH segment held outside the RTO window, less than ``lo`` after X's previous
        # data: neither an anchor nor a link of a chain
        n_ts = v.s_ts[new]
        close = np.zeros(ppos.size, bool)
        close[ppos > 0] = (t - n_ts[ppos - 1])[ppos > 0] < lo
        unchained = psh & (hold >= quiet) & ((hold < lo) | (hold > hi)) & close
        settled = win_limited | trouble | (~ydata & ((hold < quiet) | (~psh & (hold < lo))))
        settled |= ~ydata & unchained & (hold < lo)
        quiet_end = live & settled
        reset |= quiet_end
        # no data from Y, not in trouble, held ≥ lo: without PSH, or unchained, nothing
        # happens
        noop = live & ~settled & ~ydata & (~psh | unchained)
        live &= ~settled & ~noop
        # answers to Y's data: held less than ``quiet`` after X had the request
        req = np.nonzero(live & ydata)[0]
        if req.size >= REQUESTS_AT_ONCE_MIN:
            hold_r, known = _request_hold_all(v, kbc[req], tb[req], t[req], hold[req])
            prompt = known & (hold_r < quiet)
            service = np.maximum(hold_r[prompt & (hold_r < lo // 2)], 0).tolist()
            done = req[prompt]
            reset[done] = True
            live[done] = False
    cum = np.zeros(partial.size + 1, np.int64)
    cum[ppos + 1] = reset
    cum = np.cumsum(cum)
    return ppos[live], cum[:-1], service


Prefiltered = tuple[np.ndarray, "np.ndarray | None", list[int]]


# Segments per pass of :func:`_prefilter_all`: its temporaries (a few dozen arrays of a
# value per segment or partial segment) stay ~0.5 MB each, their pages reused from the
# heap pass after pass.  In one pass over sse-1M's 3.2 M segments each was ~25 MB of
# fresh pages: 0.47 s; in passes of 2**18 segments, 0.2 s (fresh processes, measured
# alone) but the analysis's peak at h2-1M ~25 MiB higher (what the passes' heap kept).
PREFILTER_CHUNK = 1 << 16


def _prefilter_all(
    ctx: DetectContext, jobs: list[tuple[DirView, int, int, int, int]]
) -> dict[int, Prefiltered]:
    """:func:`_cork_prefilter` of many directions at once (``jobs``: (view, lo, hi, quiet,
    rto_est)), by direction key ``2·flow + dir``: one pass over all their partial
    segments (of about :data:`PREFILTER_CHUNK` segments' worth of directions at a time),
    each direction's searches in Y's packets and X's retransmissions made in one sorted
    array (a group's number times a time bound plus the time).  A direction is absent —
    :func:`_cork` then asks :func:`_cork_prefilter` itself — when its Y times or X's
    retransmission times go backwards, when it has ≥ ``REQUESTS_AT_ONCE_MIN`` answers to
    Y's data to settle, or when the trace's times or frames do not fit."""
    out: dict[int, Prefiltered] = {}
    if not jobs:
        return out
    keys = np.array([2 * v.f + v.d for v, *_ in jobs], np.int64)
    if keys.shape[0] > 1 and bool((keys[1:] <= keys[:-1]).any()):
        return out
    skey = ctx.seg_dir_keys
    sa = np.searchsorted(skey, keys, side="left")
    nseg = np.searchsorted(skey, keys, side="right") - sa
    if any(v.s_frame.shape[0] != n for (v, *_), n in zip(jobs, nseg.tolist(), strict=True)):
        return out
    pts = ctx.packet_columns["ts"]
    if not pts.shape[0] or not int(nseg.sum()):
        return out
    # Y's packets of every direction: their times and running maximum of their ACKs, each
    # in one sorted array (grouped), for every pass
    yg = y_groups(ctx)
    n_yg = int(yg.keys.shape[0])
    y_ts = pts[yg.yo]
    y_times = grouped(yg.gid, y_ts, n_yg)
    back_y = backwards(yg.gid, y_ts, n_yg)
    del y_ts
    y_acks = grouped(yg.gid, ctx.packet_columns["ack"][yg.yo], n_yg)  # ACKs ≥ −1
    if y_times is None or y_acks is None:
        return out
    y = _YSide(yg, y_times, back_y, y_acks.running_max())
    del y_acks
    ends = np.cumsum(nseg)
    a = 0
    while a < len(jobs):
        done = int(ends[a - 1]) if a else 0
        b = max(a + 1, int(np.searchsorted(ends, done + PREFILTER_CHUNK, side="right")))
        _prefilter_part(ctx, jobs[a:b], keys[a:b], sa[a:b], nseg[a:b], y, out)
        a = b
    return out


@dataclass(frozen=True)
class _YSide:
    """:func:`_prefilter_all`'s view of every direction's Y packets."""

    groups: YGroups
    times: Grouped
    back: np.ndarray  # per group: its times go backwards somewhere
    ackmax: np.ndarray  # per row of ``groups``: the running maximum of its group's ACKs


def _prefilter_part(
    ctx: DetectContext,
    jobs: list[tuple[DirView, int, int, int, int]],
    keys: np.ndarray,
    sa: np.ndarray,
    nseg: np.ndarray,
    y: _YSide,
    out: dict[int, Prefiltered],
) -> None:
    """One pass of :func:`_prefilter_all`: the directions of ``jobs`` (their keys, first
    rows in the segments and segment counts), their entries added to ``out``."""
    z = np.zeros(0, np.int64)
    # every segment row of the jobs' directions, and its job
    job = np.repeat(np.arange(keys.shape[0]), nseg)
    first = np.cumsum(nseg) - nseg
    rows = np.arange(job.shape[0]) - first[job] + sa[job]
    # the views' own arrays, concatenated (the same values the per-view code reads)
    cat = np.concatenate
    views = [j[0] for j in jobs]
    is_new = ctx.seg_kind_is("new")[rows]
    pnc = ctx.seg_kind_is("prev_not_captured")[rows]
    del rows  # (each temporary dropped after its last use)
    s_ts = cat([v.s_ts for v in views])
    if not s_ts.shape[0] or s_ts.dtype.kind not in "iu":
        return
    s_len = cat([v.s_len for v in views])
    s_off = cat([v.s_off for v in views])
    s_gap = cat([v.s_gap for v in views])
    s_psh = cat([v.s_psh for v in views])
    s_super = cat([v.s_super for v in views])
    # the packet times of each segment (``p.ts[s_pi]``): packet rows by (flow, frame)
    pc = ctx.packet_columns
    pflow, pts = ctx.packet_flows, pc["ts"]
    s_pi = cat([v.s_pi for v in views])
    fstart = np.searchsorted(pflow, keys >> 1, side="left")
    gpi = s_pi + fstart[job]
    del s_pi
    d_x = np.array([v.d_x for v in views], np.int64)
    mss = np.array([v.mss for v in views], np.int64)
    lo = np.array([j[1] for j in jobs], np.int64)
    hi = np.array([j[2] for j in jobs], np.int64)
    quiet = np.array([j[3] for j in jobs], np.int64)
    # each direction's searches in Y's times and X's retransmission times, made in one
    # sorted array each (grouped); a group going backwards: that direction on its own
    yg = y.groups
    gy, y0, ny = yg.span(keys)
    # X's retransmissions/probes (``x_bad_ts``) per job
    bad = ~is_new & ~pnc
    b_job, b_ts = job[bad], s_ts[bad].astype(np.int64, copy=False)
    del bad, pnc
    n_bad = np.bincount(b_job, minlength=keys.shape[0])
    b0 = np.cumsum(n_bad) - n_bad
    x_bad = grouped(b_job, b_ts, int(keys.shape[0]))
    back_x = backwards(b_job, b_ts, int(keys.shape[0]))
    if x_bad is None:
        return
    # X's new segments: each one's position among its direction's (``new``)
    nrow = np.flatnonzero(is_new)
    n_job = job[nrow]
    del is_new, job
    n_new = np.bincount(n_job, minlength=keys.shape[0])
    n0 = np.cumsum(n_new) - n_new
    npos = np.arange(nrow.shape[0]) - n0[n_job]
    partial = ~s_super[nrow] & (s_len[nrow] < mss[n_job])
    pr = nrow[partial]  # the partial segments' rows
    jb = n_job[partial]
    ppos = npos[partial]
    del n_job, npos
    t = pts[gpi[pr]].astype(np.int64)
    del gpi
    bound = np.minimum(t - d_x[jb] + quiet[jb], t - 1)
    kb = y.times.search(gy[jb], bound, "right") - 1
    kb = np.where(ny[jb] > 0, kb - y0[jb], -1)
    has = kb >= 0
    off = s_off[pr]
    grow = y0[jb] + np.where(has, kb, 0)  # Y's packet kb as a YGroups row
    grow = np.minimum(grow, max(yg.yo.shape[0] - 1, 0))
    if yg.yo.shape[0]:
        in_flight = np.where(has, y.ackmax[grow] < off, off > 0)
        ib = yg.yo[grow]
    else:
        in_flight = off > 0
        ib = np.zeros(pr.shape[0], np.int64)
    reset = in_flight | (s_gap[pr] > 0)
    live = ~reset & has
    tb = pts[ib].astype(np.int64)
    w = pc["win"][ib]
    hold = t - tb - d_x[jb]
    win_limited = (w == 0) | ((w > 0) & (w < s_len[pr]))
    trouble = np.zeros(pr.shape[0], bool)
    if b_ts.shape[0]:
        # X's first retransmission at or after tb, when it came by t
        a = x_bad.search(jb, tb, "left") - b0[jb]
        nb = n_bad[jb]
        at = np.where(nb > 0, b0[jb] + np.minimum(a, nb - 1), 0)
        trouble = (nb > 0) & (a < nb) & (b_ts[at] <= t)
    ydata = (pc["length"][ib] > 0) & has if yg.yo.shape[0] else np.zeros(pr.shape[0], bool)
    psh = s_psh[pr]
    prev_ts = s_ts[nrow[np.maximum(np.flatnonzero(partial) - 1, 0)]]
    close = (ppos > 0) & (t - prev_ts < lo[jb])
    lo_j, hi_j, quiet_j = lo[jb], hi[jb], quiet[jb]
    unchained = psh & (hold >= quiet_j) & ((hold < lo_j) | (hold > hi_j)) & close
    settled = win_limited | trouble | (~ydata & ((hold < quiet_j) | (~psh & (hold < lo_j))))
    settled |= ~ydata & unchained & (hold < lo_j)
    reset |= live & settled
    noop = live & ~settled & ~ydata & (~psh | unchained)
    live &= ~settled & ~noop
    n_req = np.bincount(jb[live & ydata], minlength=keys.shape[0])
    # resets before each new segment, per direction: an exclusive running count
    rc = np.zeros(nrow.shape[0] + 1, np.int64)
    rc[np.flatnonzero(partial) + 1] = reset
    np.cumsum(rc, out=rc)
    n_part = np.bincount(jb, minlength=keys.shape[0])
    p0 = np.cumsum(n_part) - n_part
    ok = ~back_x & (n_req < REQUESTS_AT_ONCE_MIN) & ~(y.back[gy] & (ny > 0))
    for i in np.flatnonzero(ok).tolist():
        k = int(keys[i])
        if not n_part[i]:
            out[k] = (z, None, [])
            continue
        a0, a1 = int(n0[i]), int(n0[i] + n_new[i])
        q0, q1 = int(p0[i]), int(p0[i] + n_part[i])
        out[k] = (ppos[q0:q1][live[q0:q1]], rc[a0:a1] - rc[a0], [])


def _request_hold_all(
    v: DirView, kb: np.ndarray, tb: np.ndarray, t: np.ndarray, hold: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_cork`'s hold of an answer, ``min(hold, t − done)`` with ``done`` from
    :func:`_request_complete_at`, for many answers at once: (holds, known).  ``known`` is
    False where the search cannot stand for the scan — X's times go backwards, or an ACK
    of X before the window already covered the request (its first covering ACK inside
    the window is then not the first one by the running maximum); those answers stay
    with the loop."""
    xa = v.x_acks
    if xa is None:
        return hold, np.zeros(hold.shape, bool)
    x_ts, x_ack = xa
    if not x_ts.size:
        return hold, np.ones(hold.shape, bool)  # no ACK of X anywhere: never late
    x_max = np.maximum.accumulate(x_ack)
    a = x_ts.searchsorted(tb + v.d_x, side="right")
    b = x_ts.searchsorted(t, side="right")
    y_end = v.y_end_max[kb]
    before = np.where(a > 0, x_max[np.maximum(a - 1, 0)], y_end - 1)
    known = before < y_end
    c = x_max.searchsorted(y_end, side="left")  # X's first ACK covering it (when known)
    late = known & (a < b) & (c > a) & (c < b)
    done = x_ts[np.minimum(c, x_ts.size - 1)]
    return np.where(late, np.minimum(hold, t - done), hold), known


def _request_complete_at(v: DirView, kb: int, tb: int, t: int) -> int | None:
    """When X had all of Y's data up to Y's packet ``kb`` (seen at ``tb``), seen at P as X's
    first packet acknowledging it — but only if X showed it incomplete first (a packet of X,
    after the data could have arrived, acknowledging less); None when nothing says it was
    late (the request arrived whole: the vantage model's arrival time holds).

    X's ACK-carrying packets seen in (tb + d_X, t] by a search in their times
    (:attr:`DirView.x_acks`); when those go backwards, by :func:`_request_complete_scan`
    (a mask over the flow: what the search stands for)."""
    xa = v.x_acks
    if xa is None:
        return _request_complete_scan(v, kb, tb, t)
    x_ts, x_ack = xa
    a = int(x_ts.searchsorted(tb + v.d_x, side="right"))
    b = int(x_ts.searchsorted(t, side="right"))
    if a >= b:
        return None
    y_end = int(v.y_end_max[kb])
    if int(x_ack[a]) >= y_end:
        return None  # X's first ACK covered it: it arrived whole (or all of them did)
    later = x_ack[a + 1 : b] >= y_end
    k = int(np.argmax(later)) if later.size else 0
    if not later.size or not bool(later[k]):
        return None  # never covered in the window: nothing says when X had it
    return int(x_ts[a + 1 + k])


def _request_complete_scan(v: DirView, kb: int, tb: int, t: int) -> int | None:
    """:func:`_request_complete_at` by a mask over all of the flow's packets (times that
    go backwards)."""
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


def _full_run_left_at_once(v: DirView, new: np.ndarray, pos: int) -> bool:
    """The full segments before partial segment ``new[pos]`` (back to the previous PSH or
    partial segment: one write) left back to back, as a queued write does — not trickling
    out ≥ ½ RTT apart with no ACK to release them, the pace of an application producing the
    write piece by piece (whose tail may simply come later)."""
    brk = max(FLIGHT_BREAK_RTT * v.rtt, FLIGHT_GAP_MIN_NS)
    k = pos - 1
    while k > 0:
        a, b = int(new[k - 1]), int(new[k])
        if bool(v.s_psh[a]) or v.s_super[a] or int(v.s_len[a]) < v.mss:
            break
        if int(v.s_ts[b]) - int(v.s_ts[a]) >= brk:
            return False
        k -= 1
    return True


def _consistent(events: list[dict[str, Any]], slow_answers: int) -> list[dict[str, Any]]:
    """Drop request anchors whose hold strays from the others' (and what they anchored):
    a timer holds every corked answer equally long (ANCHOR_SPREAD_*).  All of them when
    other answers were slow too but outside the RTO window: long, varying service."""
    req = [e for e in events if e["anchor"] is None and e["trigger"] == "request"]
    if req and slow_answers:
        bad = {e["j"] for e in req}
        kept = [e for e in events if e["j"] not in bad and e["anchor"] not in bad]
        for e in kept:
            e["agreeing"] = 0
        return kept
    if len(req) < 2:
        for e in events:
            e["agreeing"] = len(req)
        return events
    med = float(np.median([e["hold"] for e in req]))
    spread = max(ANCHOR_SPREAD_MS * MS, ANCHOR_SPREAD_FRACTION * med)
    bad = {e["j"] for e in req if abs(e["hold"] - med) > spread}
    kept = [e for e in events if e["j"] not in bad and e["anchor"] not in bad]
    for e in kept:
        e["agreeing"] = len(req) - len(bad)
    return kept


def _cork_findings(
    ctx: DetectContext,
    v: DirView,
    events: list[dict[str, Any]],
    service: list[int],
    lo: int,
    hi: int,
    rto_est: int,
) -> list[Finding]:
    f, d, p = v.f, v.d, v.p
    x_role, y_role = role_name(d), role_name(1 - d)
    sender, receiver = ctx.endpoint(f, d), ctx.peer(f, d)
    stream = int(ctx.flow(f).stream)
    svc = int(median_of(np.asarray(service))) if service else 0  # = np.median
    anchor_cost = {e["j"]: (e["hold"] - svc) / MS for e in events if e["anchor"] is None}
    costs = []
    for e in events:
        e["cost"] = anchor_cost[e["j"]] if e["anchor"] is None else anchor_cost[e["anchor"]]
        costs.append(e["cost"])
    stats = cost_stats(costs)
    window = f"[{lo / MS:.0f}, {hi / MS:.0f}] ms"
    out = []
    for e in events:
        j, kb = e["j"], e["kb"]
        i, ib = int(v.s_pi[j]), int(v.y_idx[kb])
        fr, fb = int(p.frame[i]), int(p.frame[ib])
        t, tb = int(p.ts[i]), int(p.ts[ib])
        ln = int(v.s_len[j])
        quiet_ms = (t - tb) / MS
        cost = e["cost"]
        checks = [
            f"sub-MSS ({ln} B < {v.mss} B) segment of new data with PSH (tcp_write_wakeup "
            "sets PSH); not a retransmission, keep-alive or zero-window probe",
            "nothing in flight when it left (everything before it acknowledged)",
            f"no inbound packet from the {y_role} in the {quiet_ms:.1f} ms before it (not "
            "released by an ACK: not Nagle, not cwnd)",
            f"the {y_role}'s window was open (not a zero-window probe)",
        ]
        if e["anchor"] is None:
            what = {
                "request": f"the {y_role}'s request (frame {fb})",
                "setup": f"the end of the handshake (frame {fb})",
                "ack": f"the {y_role}'s last ACK (frame {fb})",
                "tail": f"the {y_role}'s ACK of the full-sized segments before it (frame {fb})",
            }[e["trigger"]]
            hold_ms = e["hold"] / MS
            checks.append(
                f"left {hold_ms:.1f} ms after {what} less d_X: within the RTO window "
                f"{window} (TCP_RTO_MIN 200 ms + RTT {v.rtt / MS:.1f} ms)"
            )
            if e["trigger"] == "ack":
                checks.append(f"carries {e['units']} application records written while held")
            ev = [
                Evidence(
                    fb, "trigger" if e["trigger"] in ("request", "setup") else "last_inbound", tb
                ),
                Evidence(fr, "held_segment", t),
            ]
            expl = (
                f"The {sender}'s {ln}-byte segment (frame {fr}, PSH) left {hold_ms:.1f} ms "
                f"after {what}, with no packet from the {receiver} in between to release it "
                f"— the kernel's cork ceiling: the probe timer (RTO ≈ {rto_est / MS:.0f} ms, "
                "≥ TCP_RTO_MIN 200 ms + RTT) flushing a partial segment held by TCP_CORK (or "
                f"MSG_MORE on the last write). Frames {fb}, {fr}."
            )
            method = "estimate" if svc else "upper_bound"
            confidence = 0.6
            if e["trigger"] == "request" and e["agreeing"] >= 2:
                confidence = 0.8
                checks.append(
                    f"{e['agreeing']} answers in this direction held alike (a timer, not "
                    "the application's service time)"
                )
        else:
            ja = e["anchor"]
            fa = int(v.s_frame[ja])
            checks.append(
                f"≥ {lo / MS:.0f} ms after the {x_role}'s previous data (a corked socket "
                "releases partial segments at most once per probe timer)"
            )
            checks.append(
                f"the socket held a partial segment for {cost:.1f} ms at frame {fa} and no "
                "segment since shows the cork cleared"
            )
            ev = [
                Evidence(fb, "last_inbound", tb),
                Evidence(fr, "held_segment", t),
                Evidence(fa, "cork_anchor", int(p.ts[v.s_pi[ja]])),
            ]
            expl = (
                f"The {sender}'s {ln}-byte segment (frame {fr}, PSH) left with nothing in "
                f"flight and no packet from the {receiver} for {quiet_ms:.1f} ms, like every "
                f"partial segment of this corked socket: at frame {fa} it held a write "
                f"{cost:.1f} ms for the probe timer and nothing since shows the cork cleared, "
                f"so this write most likely waited the same ≈{cost:.0f} ms (the write time "
                "is not on the wire: estimate)."
            )
            method = "estimate"
            confidence = 0.5
        if stats["count"] > 1:
            expl += (
                f" One of {stats['count']} corked writes in this direction "
                f"({stats['total_ms']:.0f} ms in all)."
            )
        out.append(
            Finding(
                kind="tcp_cork",
                flow=f,
                dir=DIRS[d],
                t_start_ns=tb if e["anchor"] is None else t - int(cost * MS),
                t_end_ns=t,
                cost_ms=cost,
                cost_method=method,
                evidence=ev,
                explanation=expl,
                remedy=(
                    f"On the {x_role} ({sender.split(' ', 1)[1]}): clear TCP_CORK after the "
                    "last write of each message (setting it to 0 flushes at once), or pass "
                    "MSG_MORE only on non-final writes; to coalesce header and body, use one "
                    "writev/sendmsg instead of corking."
                ),
                display_filter=f"tcp.stream == {stream} && frame.number >= {fb} && "
                f"frame.number <= {fr}",
                vantage=ctx.vantage(f),
                confidence=confidence,
                checks=checks,
                details={
                    "hold_ms": round(cost, 3),
                    "quiet_before_ms": round(quiet_ms, 3),
                    "trigger": e["trigger"] if e["anchor"] is None else "inferred",
                    "rto_estimate_ms": round(rto_est / MS, 3),
                    "rto_window_ms": [round(lo / MS, 3), round(hi / MS, 3)],
                    "service_time_ms": round(svc / MS, 3),
                    "units": e["units"],
                    "direction_holds": stats,
                    "frames_filter": frame_filter([x.frame for x in ev]),
                },
            )
        )
    return out


# -- C2 ------------------------------------------------------------------------------


def _coalesced(v: DirView, units: Units, max_gap: int, quiet: int) -> list[tuple[int, int, int]]:
    """(segment, previous segment, gap) of X's new segments carrying ≥ 2 complete
    records that left ≤ ``max_gap`` after the previous new segment, not released by an
    inbound packet (all candidates at once)."""
    p = v.p
    new = v.new_pos
    multi = units[0][units[1] >= 2].astype(np.int64)  # sorted
    nf = v.s_frame[new]
    at = np.minimum(np.searchsorted(multi, nf), max(multi.size - 1, 0))
    where = np.nonzero((multi[at] == nf) if multi.size else np.zeros(nf.size, bool))[0]
    where = where[where > 0]
    a_all, b_all = new[where - 1], new[where]
    gap_all = v.s_ts[b_all] - v.s_ts[a_all]
    near = gap_all <= max_gap
    a_all, b_all, gap_all = a_all[near], b_all[near], gap_all[near]
    t = p.ts[v.s_pi[b_all]]
    kb = v.last_y_reaching_all(t, quiet)
    # released by an inbound packet: Nagle/cwnd territory, not autocork
    released = (kb >= 0) & (
        t - p.ts[v.y_idx[np.maximum(kb, 0)]] - v.d_x < quiet if v.y_idx.size else False
    )
    hits = [  # (segment pos, previous pos, gap)
        (b, a, g)
        for b, a, g, r in zip(
            b_all.tolist(), a_all.tolist(), gap_all.tolist(), released.tolist(), strict=True
        )
        if not r
    ]
    return hits


def _coalescing(
    ctx: DetectContext, v: DirView, units: Units, max_gap: int, quiet: int
) -> list[Finding]:
    if not units[0].size:
        return []
    hits = _coalesced(v, units, max_gap, quiet)
    total_records = int(units[1].sum())
    if not hits:
        return []
    f, d = v.f, v.d
    stream = int(ctx.flow(f).stream)
    per = _units_at(units, v.s_frame[[b for b, _, _ in hits]]).tolist()
    gaps_ms = [g / MS for _, _, g in hits]
    ev: list[Evidence] = []
    for b, a, _ in hits[:5]:
        ev.append(Evidence(int(v.s_frame[a]), "previous_segment", int(v.s_ts[a])))
        ev.append(Evidence(int(v.s_frame[b]), "coalesced_segment", int(v.s_ts[b])))
    frames = [int(v.s_frame[b]) for b, _, _ in hits]
    coalesced = int(sum(per))
    sender = ctx.endpoint(f, d)
    return [
        Finding(
            kind="write_coalescing",
            flow=f,
            dir=DIRS[d],
            t_start_ns=int(v.s_ts[hits[0][1]]),
            t_end_ns=int(v.s_ts[hits[-1][0]]),
            cost_ms=max(gaps_ms),
            cost_method="upper_bound",
            evidence=ev,
            explanation=(
                f"The {sender} put {coalesced} of its {total_records} application records "
                f"into {len(hits)} segment(s) carrying {min(per)}–{max(per)} records each, "
                f"each leaving {min(gaps_ms) * 1000:.0f}–{max(gaps_ms) * 1000:.0f} µs after "
                "the previous segment with no ACK to trigger it: small writes coalesced by "
                "autocorking/TSQ while the previous packet was still in the transmit queue. "
                "Harmless on its own (µs), unless combined with Nagle."
            ),
            remedy=(
                "Nothing to fix on its own. If the records should travel separately, write "
                "them in one call anyway; net.ipv4.tcp_autocorking=0 disables autocork."
            ),
            display_filter=f"tcp.stream == {stream} && frame.number in "
            "{" + ", ".join(str(x) for x in frames[:50]) + "}",
            vantage=ctx.vantage(f),
            confidence=0.6,
            checks=[
                "several complete application records in one segment",
                f"segment left ≤ {max_gap / MS:.1f} ms after the previous one (TX completion)",
                "no inbound packet just before it (not an ACK release: not Nagle, not cwnd)",
            ],
            details={
                "segments": len(hits),
                "records_coalesced": coalesced,
                "records_total": total_records,
                "records_per_segment": {str(k): per.count(k) for k in sorted(set(per))},
                "gap_ms": cost_stats(gaps_ms),
                "frames": frames[:200],
            },
        )
    ]

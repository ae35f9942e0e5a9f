"""TCP per-direction analysis: relative sequence space, segment classes, reassembly.

Each direction of a connection is a byte stream addressed by *offset*: offset 0
is the byte after the ISN (DESIGN.md §2).  Sequence numbers are unwrapped with
signed 32-bit differences between consecutive packets of a direction, so
streams longer than 4 GiB and wrap-around of the raw sequence number are
handled.

Classification of every segment that carries payload (plus zero-length
keep-alives and zero-window probes), mirroring Wireshark's
``tcp_analyze_sequence_number`` but with explicit byte coverage instead of a
single ``nextseq`` (DETECTION.md §6 lists where Wireshark's rules mislead):

``new``                  every byte is beyond the highest byte seen so far
``prev_not_captured``    new, but bytes before it were never seen (a hole opens)
``out_of_order``         fills a hole with bytes never seen, within the
                         out-of-order threshold (the handshake RTT, or 3 ms —
                         Wireshark's ``ooo_thres``) of the packet that set the
                         highest sequence number
``retransmission``       only bytes seen before (identical), or a hole filled
                         after that threshold (the original was lost before the
                         capture point)
``spurious_retransmission`` like retransmission, but the peer had already
                         acknowledged all of it
``overlap_same``         mixes already-seen bytes (identical) with new ones
``overlap_diff``         some already-seen byte differs from what was seen first
                         (the first-seen bytes stay in the stream)
``keep_alive``           0/1 byte at one before the next expected offset
``zero_window_probe``    a keep-alive-shaped or 1-byte segment while the peer
                         advertises a zero window (Linux probes are 0-byte at
                         snd_una − 1, DETECTION.md §7.2)

Holes stay holes: stream bytes are never zero-filled; the gaps are listed.
GSO/TSO super-segments (payload > the direction's effective MSS, DETECTION.md
§1.3–§1.4) are flagged with the number of wire segments they stand for.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from .._parallel import map_in_threads
from ..io.reader import drop_pages
from .decode import ACK, FIN, PROTO_TCP, PSH, RST, SYN, Decoded
from .flows import VANTAGE_LEG_RATIO, FlowTable

# Wireshark's default out-of-order threshold when the handshake RTT is unknown
# (packet-tcp.c: ooo_thres = iRTT, or 3 ms).
OOO_THRESHOLD_NS_DEFAULT = 3_000_000
# Linux subtracts the timestamp option (10 bytes + 2 NOP) from the MSS when both
# SYNs carry timestamps (tcp_output.c, tcp_syn_build_options; DETECTION.md §1.3).
TCP_TS_OPTION_BYTES = 12
# Without a handshake, the effective MSS is guessed from the largest segments
# not above a plausible jumbo MTU (DETECTION.md §1.3).
MAX_PLAUSIBLE_MSS = 9000

KINDS = (
    "new",
    "prev_not_captured",
    "out_of_order",
    "retransmission",
    "spurious_retransmission",
    "overlap_same",
    "overlap_diff",
    "keep_alive",
    "zero_window_probe",
)
K_NEW, K_GAP, K_OOO, K_RETX, K_SPUR, K_OVS, K_OVD, K_KA, K_ZWP = range(len(KINDS))


@dataclass
class DirectionIndex:
    """Where each byte of one direction came from: sorted, non-overlapping pieces."""

    start: np.ndarray  # stream offset of the piece (int64)
    end: np.ndarray  # end offset in sequence space (exclusive)
    cap_end: np.ndarray  # end of the captured part (≤ end; snaplen can cut it)
    frame: np.ndarray  # frame number (1-based)
    ts_ns: np.ndarray
    buf_off: np.ndarray  # offset in the capture buffer of the piece's first byte

    def locate(self, offsets: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Frame and time of the segment that first delivered each offset (-1 if none)."""
        off = np.atleast_1d(np.asarray(offsets, dtype=np.int64))
        i = np.searchsorted(self.start, off, side="right") - 1
        ok = (
            (i >= 0) & (off < self.end[np.maximum(i, 0)])
            if self.start.shape[0]
            else np.zeros(off.shape, bool)
        )
        j = np.maximum(i, 0)
        frame = np.where(ok, self.frame[j] if self.start.shape[0] else 0, -1)
        ts = np.where(ok, self.ts_ns[j] if self.start.shape[0] else 0, -1)
        return frame, ts

    def delivered(self, offsets: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Frame and time at which every byte up to each offset had arrived.

        This is when a receiver's TCP could hand the byte at ``offset`` to the
        application (in-order delivery): the latest arrival among the pieces that
        cover ``[0, offset]``.  Offsets behind a hole that was never filled give -1.
        Wireshark shows a reassembled PDU in exactly this frame.
        """
        off = np.atleast_1d(np.asarray(offsets, dtype=np.int64))
        k = self.start.shape[0]
        if k == 0:
            return np.full(off.shape, -1), np.full(off.shape, -1)
        cm = np.maximum.accumulate(self.frame)
        holder = np.maximum.accumulate(np.where(self.frame == cm, np.arange(k), -1))
        broken = np.zeros(k, bool)
        broken[0] = self.start[0] > 0
        broken[1:] = self.start[1:] > self.end[:-1]
        broken = np.logical_or.accumulate(broken)
        i = np.searchsorted(self.start, off, side="right") - 1
        j = np.maximum(i, 0)
        ok = (i >= 0) & (off < self.end[j]) & ~broken[j]
        return np.where(ok, cm[j], -1), np.where(ok, self.ts_ns[holder[j]], -1)


@dataclass
class TcpAnalysis:
    rel_seq: np.ndarray  # per packet, Wireshark's relative seq (-1 for non-TCP)
    rel_ack: np.ndarray  # per packet, relative ack (-1 when no ACK flag / non-TCP)
    window_scaled: np.ndarray  # per packet, window << scale when known (-1 unknown)
    segments: dict[str, np.ndarray]
    index: dict[tuple[int, int], DirectionIndex]
    flow_info: dict[str, np.ndarray]
    anomalies: list[dict[str, object]] = field(default_factory=list)


def _unwrap(seq: np.ndarray, grp: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Unwrap 32-bit values per group (rows sorted by group): first value relative to
    ``base`` (mod 2**32), then signed 32-bit steps."""
    m = seq.shape[0]
    if m == 0:
        return np.zeros(0, np.int64)
    first = np.ones(m, bool)
    first[1:] = grp[1:] != grp[:-1]
    d = np.empty(m, np.int64)
    d[1:] = ((seq[1:] - seq[:-1] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    start_val = (seq - base) & 0xFFFFFFFF
    d[first] = start_val[first]
    # cumulative sum restarted at each group start
    cs = np.cumsum(d)
    starts = np.nonzero(first)[0]
    offset = np.repeat(cs[starts] - d[starts], np.diff(np.append(starts, m)))
    return cs - offset


# TCP packets analysed per batch of whole flows: bounds the per-packet temporaries
# (~40 int64 arrays, ~40 MB at 2^17 packets) whatever the capture size; flows are
# independent (DESIGN.md §3), so batches run on a few threads at once.
TCP_BATCH_PACKETS = 1 << 17

# one batch's (segments columns, direction index, per-flow info)
BatchResult = tuple[
    dict[str, np.ndarray], dict[tuple[int, int], "DirectionIndex"], dict[str, np.ndarray]
]


def analyze_tcp(dec: Decoded, ft: FlowTable, ts_ns: np.ndarray, buf: np.ndarray) -> TcpAnalysis:
    """Analyse every TCP flow, in batches of whole flows, and merge the results."""
    c = dec.cols
    n = c["l4"].shape[0]
    nflow = ft.count
    is_tcp = (c["l4"] == PROTO_TCP) & (ft.pkt_flow >= 0)
    per_flow = np.bincount(ft.pkt_flow[is_tcp], minlength=nflow)
    # batch boundaries on flow ids: cut when the running packet count passes a multiple
    cum = np.cumsum(per_flow)
    cuts = (
        np.unique(
            np.searchsorted(
                cum,
                np.arange(TCP_BATCH_PACKETS, int(cum[-1]) if nflow else 0, TCP_BATCH_PACKETS),
                side="left",
            )
            + 1
        )
        if nflow
        else np.zeros(0, np.int64)
    )
    bounds = [0, *[int(x) for x in cuts if 0 < x < nflow], nflow]
    out = TcpAnalysis(
        rel_seq=np.full(n, -1, np.int64),
        rel_ack=np.full(n, -1, np.int64),
        window_scaled=np.full(n, -1, np.int64),
        segments={},
        index={},
        flow_info={},
    )
    pkt_flow = ft.pkt_flow

    def one(span: tuple[int, int]) -> BatchResult:
        lo, hi = span
        sel = (
            np.nonzero(is_tcp & (pkt_flow >= lo) & (pkt_flow < hi))[0]
            if (lo, hi) != (0, nflow)
            else np.nonzero(is_tcp)[0]
        )
        return _analyze_batch(dec, ft, ts_ns, buf, sel, lo, hi - lo, out)

    # batches are independent (their packets, hence their rows of the per-packet
    # arrays, are disjoint): a few threads; merged below in batch order
    spans = [
        (lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if hi > lo or not nflow
    ]
    seg_parts: list[dict[str, np.ndarray]] = []
    for (lo, hi), (part, index, info) in zip(spans, map_in_threads(one, spans), strict=True):
        seg_parts.append(part)
        out.index.update(index)
        for k, v in info.items():
            if k not in out.flow_info:
                fill: object = (
                    -1 if v.dtype.kind in "iu" else (False if v.dtype.kind == "b" else "unknown")
                )
                out.flow_info[k] = np.full(nflow, fill, dtype=v.dtype)
            out.flow_info[k][lo:hi] = v
    if len(seg_parts) == 1:
        out.segments = seg_parts[0]
    elif seg_parts:
        out.segments = _merge_by_frame(seg_parts)
    return out


def _merge_by_frame(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Segment rows of all batches in frame order: each batch is in frame order, but
    batches interleave in time.  Every row is written once, straight to its final
    place (no concatenation, then gather), one column per thread."""
    frames = np.concatenate([p["frame"] for p in parts])
    dest = np.empty(frames.shape[0], np.int64)
    dest[np.argsort(frames, kind="stable")] = np.arange(frames.shape[0])
    cuts = np.cumsum([0] + [p["frame"].shape[0] for p in parts]).tolist()

    def column(k: str) -> np.ndarray:
        col = np.empty(frames.shape[0], parts[0][k].dtype)
        for p, a, b in zip(parts, cuts[:-1], cuts[1:], strict=True):
            col[dest[a:b]] = p[k]
        return col

    keys = list(parts[0])
    return dict(zip(keys, map_in_threads(column, keys), strict=True))


def _analyze_batch(
    dec: Decoded,
    ft: FlowTable,
    ts_ns: np.ndarray,
    buf: np.ndarray,
    tcp: np.ndarray,
    f_lo: int,
    nflow: int,
    out: TcpAnalysis,
) -> BatchResult:
    """Flows [f_lo, f_lo + nflow) whose TCP packets are ``tcp``; flow ids are local inside.

    Writes this batch's rows of ``out``'s per-packet arrays; returns its segments,
    its direction index and its per-flow info (merged by the caller).
    """
    c = dec.cols
    rel_seq_all, rel_ack_all, win_all = out.rel_seq, out.rel_ack, out.window_scaled
    flow = ft.pkt_flow[tcp] - f_lo
    d = ft.pkt_dir[tcp].astype(np.int64)
    # by flow, dir, frame: ``tcp`` is in frame order, so a stable sort on (flow, dir)
    order = _stable_order(flow * 2 + d, 2 * nflow)
    P = tcp[order]  # packet indices in (flow, dir, frame) order
    f = flow[order]
    dd = d[order]
    g = f * 2 + dd
    flags = c["tcp_flags"][P].astype(np.int64)
    seq = c["tcp_seq"][P]
    ackv = c["tcp_ack"][P]
    plen = c["payload_len"][P].astype(np.int64)
    pcap_len = c["payload_caplen"][P].astype(np.int64)
    plen = np.where((flags & RST) != 0, 0, plen)  # RST payload is diagnostic text, not stream data
    is_syn = (flags & SYN) != 0
    has_ack = (flags & ACK) != 0
    m = P.shape[0]
    ngroups = nflow * 2

    # --- per direction ISN (Wireshark base_seq) ---------------------------
    gstart = np.ones(m, bool)
    gstart[1:] = g[1:] != g[:-1]
    first_pos = np.full(ngroups, -1, np.int64)
    first_pos[g[gstart]] = np.nonzero(gstart)[0]
    syn_pos = np.full(ngroups, m, np.int64)
    np.minimum.at(syn_pos, g[is_syn], np.nonzero(is_syn)[0])
    # A SYN (or SYN/ACK) repeated with another ISN before any data of its direction: the
    # data continue from the last one (the peer acknowledges that ISN); Wireshark re-bases
    # on it too ("TCP port numbers reused").
    data_pos = np.full(ngroups, m, np.int64)
    carries = plen > 0
    np.minimum.at(data_pos, g[carries], np.nonzero(carries)[0])
    pos_all = np.arange(m)
    early_syn = is_syn & (pos_all < data_pos[g])
    last_syn = np.full(ngroups, -1, np.int64)
    np.maximum.at(last_syn, g[early_syn], pos_all[early_syn])
    syn_pos = np.where(last_syn >= 0, last_syn, syn_pos)
    has_syn_dir = syn_pos < m
    isn = np.zeros(ngroups, np.int64)
    present = first_pos >= 0
    # Without a SYN, Wireshark takes the base from whichever comes first: the
    # direction's own first packet (seq − 1) or an ACK from the other side (ack − 1).
    own_frame = np.full(ngroups, np.iinfo(np.int64).max, np.int64)
    own_frame[present] = P[first_pos[present]]
    isn[present] = (seq[first_pos[present]] - 1) & 0xFFFFFFFF
    ack_frame = np.full(ngroups, np.iinfo(np.int64).max, np.int64)
    rev_g = g ^ 1
    np.minimum.at(ack_frame, rev_g[has_ack], P[has_ack])
    by_ack = ~has_syn_dir & (ack_frame < own_frame)
    if by_ack.any():
        p_order = np.argsort(P)
        pos = p_order[np.searchsorted(P[p_order], ack_frame[by_ack])]
        isn[by_ack] = (ackv[pos] - 1) & 0xFFFFFFFF
    isn[has_syn_dir] = seq[syn_pos[has_syn_dir]]

    rel = _unwrap(seq, g, isn[g])
    rel = np.where(early_syn, 0, rel)  # each SYN before data is the base of its time
    # data offsets: offset 0 = byte after the ISN; a SYN's data starts after it
    ds = rel - 1 + is_syn
    de = ds + plen
    rel_seq_all[P] = rel

    # --- relative ACK (against the reverse direction's ISN) ----------------
    rg = f * 2 + (1 - dd)
    rel_ack = np.full(m, -1, np.int64)
    ai = np.nonzero(has_ack)[0]
    if ai.shape[0]:
        rel_ack[ai] = _unwrap(ackv[ai], g[ai], isn[rg[ai]])
    rel_ack_all[P] = rel_ack
    ack_off = np.where(has_ack, rel_ack - 1, -1)  # next expected offset of the reverse stream

    # --- handshake parameters per flow ------------------------------------
    mss_opt = c["mss"][P].astype(np.int64)
    ws_opt = c["wscale"][P].astype(np.int64)
    sp_opt = c["sack_perm"][P]
    ts_opt = c["tsval"][P] >= 0
    info = _handshake(
        nflow,
        f,
        dd,
        flags,
        is_syn,
        syn_pos,
        has_syn_dir,
        mss_opt,
        ws_opt,
        sp_opt,
        ts_opt,
        ts_ns[P],
        rel_ack,
        seq,
        ackv,
        isn,
    )
    # scaled windows: SYN windows are never scaled (RFC 7323 §2.2)
    scale_ok = info["wscale_used"][f]
    shift = np.where(dd == 0, info["c_wscale"][f], info["s_wscale"][f])
    raw_win = c["tcp_window"][P].astype(np.int64)
    win = np.where(
        is_syn,
        raw_win,
        np.where(
            scale_ok, raw_win << np.maximum(shift, 0), np.where(info["handshake"][f], raw_win, -1)
        ),
    )
    win_all[P] = win

    # --- cross-direction context (flow-ordered by frame) --------------------
    # positions sorted by flow, then frame: a stable sort of the frame-ordered batch by
    # flow, mapped to positions in the (flow, dir, frame) order
    rank = np.empty(m, np.int64)
    rank[order] = np.arange(m)
    by_frame = rank[_stable_order(flow, nflow)]
    bf_flow = f[by_frame]
    bf_dir = dd[by_frame]
    ctx_win = np.full(m, -1, np.int64)
    ctx_ack = np.full(m, -1, np.int64)
    for side in (0, 1):
        other = bf_dir != side
        # last window the other side advertised before this packet (same flow)
        last = group_last_index(other, bf_flow)
        mine = ~other
        sel = by_frame[mine]
        li = last[mine]
        ctx_win[sel] = np.where(li >= 0, raw_win[by_frame[np.maximum(li, 0)]], -1)
        # highest ack the other side had sent (its next expected offset of our stream)
        acks = np.where(other, ack_off[by_frame], -1)
        ctx_ack[sel] = group_cummax(acks, bf_flow)[mine]

    # --- running highest byte per direction --------------------------------
    data = plen > 0
    run_end = group_cummax(np.where(data, de, -1), g)
    prev_max = np.empty(m, np.int64)
    prev_max[0:1] = 0
    prev_max[1:] = run_end[:-1]
    prev_max[gstart] = 0
    prev_max = np.maximum(prev_max, 0)
    # which packet set the current maximum (for the out-of-order time threshold)
    raised = data & (de > prev_max)
    setter = group_last_index(raised, g)
    prev_setter = np.empty(m, np.int64)
    prev_setter[0:1] = -1
    prev_setter[1:] = setter[:-1]
    prev_setter[gstart] = -1

    ts_sorted = ts_ns[P]
    bad_flags = (flags & (SYN | FIN | RST)) != 0
    peer_zero = ctx_win == 0
    ka0 = (plen == 0) & ~bad_flags & (prev_max > 0) & (ds == prev_max - 1)
    ka1 = (plen == 1) & ~bad_flags & (prev_max > 0) & (ds == prev_max - 1)
    zwp1 = (plen == 1) & ~bad_flags & (ds == prev_max) & peer_zero
    seg = data | ka0
    kind = np.full(m, K_NEW, np.int8)
    gap_before = np.where(data & (ds > prev_max), ds - prev_max, 0)
    kind[data & (gap_before > 0)] = K_GAP
    tail_start = np.maximum(ds, prev_max)
    new_bytes = np.where(data & (de > prev_max), de - tail_start, 0)
    exceptional = data & (ds < prev_max)

    # --- holes and pieces ---------------------------------------------------
    # Tail pieces: the part of each segment beyond the previous highest byte.
    tail = np.nonzero(new_bytes > 0)[0]
    pieces_g = g[tail]
    pieces_start = tail_start[tail]
    pieces_end = de[tail]
    pieces_pos = tail
    extra_pieces: list[tuple[int, int, int, int]] = []  # (group, start, end, pos)
    hole_idx = np.nonzero(gap_before > 0)[0]
    holes_by_g: dict[int, list[list[int]]] = {}
    for i in hole_idx.tolist():
        holes_by_g.setdefault(int(g[i]), []).append([int(prev_max[i]), int(ds[i])])
    seg_off_buf = c["payload_off"][P].astype(np.int64)
    ooo_thres = info["ooo_thres_ns"]

    exc = np.nonzero(exceptional)[0]
    if exc.shape[0]:
        # tail pieces per group, for byte comparison
        tp_bounds: dict[int, tuple[int, int]] = {}
        if tail.shape[0]:
            gs = np.nonzero(np.r_[True, pieces_g[1:] != pieces_g[:-1]])[0]
            ge = np.r_[gs[1:], tail.shape[0]]
            for a, b in zip(gs.tolist(), ge.tolist(), strict=True):
                tp_bounds[int(pieces_g[a])] = (a, b)
        fills_by_g: dict[int, list[tuple[int, int, int]]] = {}
        for n_exc, i in enumerate(exc.tolist()):
            if n_exc % 64 == 63:
                drop_pages(buf)  # scattered byte comparisons: bounded RSS
            gi = int(g[i])
            s0, e0 = int(ds[i]), int(de[i])
            old_end = min(e0, int(prev_max[i]))
            holes = holes_by_g.get(gi, [])
            fills: list[tuple[int, int]] = []
            k = 0
            while k < len(holes):
                ha, hb = holes[k]
                if hb <= s0 or ha >= old_end:
                    k += 1
                    continue
                a, b = max(ha, s0), min(hb, old_end)
                fills.append((a, b))
                repl = []
                if ha < a:
                    repl.append([ha, a])
                if b < hb:
                    repl.append([b, hb])
                holes[k : k + 1] = repl
                k += len(repl)
            filled = sum(b - a for a, b in fills)
            seen = (old_end - s0) - filled
            differs = False
            if seen > 0:
                differs = _differs(
                    buf,
                    s0,
                    old_end,
                    fills,
                    i,
                    ds,
                    pcap_len,
                    seg_off_buf,
                    tp_bounds.get(gi),
                    pieces_start,
                    pieces_end,
                    pieces_pos,
                    fills_by_g.get(gi, []),
                )
            for a, b in fills:
                extra_pieces.append((gi, a, b, i))
                lst = fills_by_g.setdefault(gi, [])
                bisect.insort(lst, (a, b, i))
            new_bytes[i] += filled
            if differs:
                kind[i] = K_OVD
            elif seen > 0 and (filled > 0 or e0 > prev_max[i]):
                kind[i] = K_OVS
            elif seen > 0:
                kind[i] = K_SPUR if 0 <= ctx_ack[i] and e0 <= ctx_ack[i] else K_RETX
            else:
                st = prev_setter[i]
                thr = int(ooo_thres[f[i]])
                kind[i] = K_OOO if st >= 0 and ts_sorted[i] - ts_sorted[st] < thr else K_RETX
    kind[ka0 | ka1] = np.where(peer_zero[ka0 | ka1], K_ZWP, K_KA)
    kind[zwp1] = K_ZWP

    # --- build the direction index (first-seen pieces) ----------------------
    if extra_pieces:
        eg = np.array([p[0] for p in extra_pieces], np.int64)
        es = np.array([p[1] for p in extra_pieces], np.int64)
        ee = np.array([p[2] for p in extra_pieces], np.int64)
        ep = np.array([p[3] for p in extra_pieces], np.int64)
        pieces_g = np.concatenate([pieces_g, eg])
        pieces_start = np.concatenate([pieces_start, es])
        pieces_end = np.concatenate([pieces_end, ee])
        pieces_pos = np.concatenate([pieces_pos, ep])
    # by (direction, start): tail pieces already are (each starts past the previous
    # maximum); only the hole fills appended above break the order
    if extra_pieces:
        top = int(pieces_start.max()) + 1 if pieces_start.shape[0] else 1
        if ngroups * top < (1 << 62):  # one int64 key: a near-sorted timsort
            po = np.argsort(pieces_g * top + pieces_start, kind="stable")
        else:
            po = np.lexsort((pieces_start, pieces_g))
    else:
        po = np.arange(pieces_g.shape[0])
    pieces_g, pieces_start, pieces_end, pieces_pos = (
        a[po] for a in (pieces_g, pieces_start, pieces_end, pieces_pos)
    )
    # captured end of each piece: the segment's captured bytes end at ds + caplen
    seg_cap_end = ds[pieces_pos] + pcap_len[pieces_pos]
    pieces_cap_end = np.clip(seg_cap_end, pieces_start, pieces_end)
    pieces_buf = seg_off_buf[pieces_pos] + (pieces_start - ds[pieces_pos])
    frames = P + 1
    index: dict[tuple[int, int], DirectionIndex] = {}
    if pieces_g.shape[0]:
        bnd = np.nonzero(np.r_[True, pieces_g[1:] != pieces_g[:-1]])[0]
        bend = np.r_[bnd[1:], pieces_g.shape[0]]
        for a, b in zip(bnd.tolist(), bend.tolist(), strict=True):
            gi = int(pieces_g[a])
            pp = pieces_pos[a:b]
            index[(gi // 2 + f_lo, gi % 2)] = DirectionIndex(
                start=pieces_start[a:b],
                end=pieces_end[a:b],
                cap_end=pieces_cap_end[a:b],
                frame=frames[pp],
                ts_ns=ts_sorted[pp],
                buf_off=pieces_buf[a:b],
            )

    # --- segments table -----------------------------------------------------
    si = np.nonzero(seg | ka1 | zwp1)[0]
    si = si[np.argsort(P[si], kind="stable")]  # frame order
    # flows without a handshake: the largest segment not above a jumbo MTU
    guess = np.zeros(nflow, np.int64)
    plausible = data & (plen <= MAX_PLAUSIBLE_MSS)
    np.maximum.at(guess, f[plausible], plen[plausible])
    for key in ("c_eff_mss", "s_eff_mss"):
        info[key] = np.where(info[key] > 0, info[key], np.where(guess > 0, guess, -1))
    eff = np.where(dd[si] == 0, info["c_eff_mss"][f[si]], info["s_eff_mss"][f[si]])
    lens = plen[si]
    sup = (eff > 0) & (lens > eff)
    segments = {
        "flow": f[si] + f_lo,
        "dir": dd[si].astype(np.int8),
        "frame": P[si] + 1,
        "ts_ns": ts_sorted[si],
        "offset": ds[si],
        "length": lens,
        "captured": pcap_len[si],
        "end": de[si],
        "psh": (flags[si] & PSH) != 0,
        "fin": (flags[si] & FIN) != 0,
        "kind": kind[si],
        "new_bytes": new_bytes[si],
        "gap_before": gap_before[si],
        "super_segment": sup,
        "wire_segments": np.where(sup, -(-lens // np.maximum(eff, 1)), 1),
        "ack": ack_off[si],
        "window": win[si],
    }

    # --- per flow byte totals -------------------------------------------------
    cap_bytes = np.zeros(ngroups, np.int64)
    seq_bytes = np.zeros(ngroups, np.int64)
    if pieces_g.shape[0]:
        np.add.at(cap_bytes, pieces_g, pieces_cap_end - pieces_start)
        np.add.at(seq_bytes, pieces_g, pieces_end - pieces_start)
    hi = np.zeros(ngroups, np.int64)
    if m:
        np.maximum.at(hi, g, np.where(data, de, 0))
    info["c2s_bytes"] = cap_bytes[0::2]
    info["s2c_bytes"] = cap_bytes[1::2]
    info["c2s_missing"] = hi[0::2] - cap_bytes[0::2]
    info["s2c_missing"] = hi[1::2] - cap_bytes[1::2]
    retx = np.isin(kind, (K_RETX, K_SPUR, K_OVS, K_OVD)) & data
    info["retransmissions"] = np.bincount(f[retx], minlength=nflow)
    ooo = (kind == K_OOO) & data
    info["out_of_order"] = np.bincount(f[ooo], minlength=nflow)
    fin_seen = np.zeros(nflow, bool)
    rst_seen = np.zeros(nflow, bool)
    fin_seen[f[(flags & FIN) != 0]] = True
    rst_seen[f[(flags & RST) != 0]] = True
    info["fin"] = fin_seen
    info["rst"] = rst_seen
    return segments, index, info


def _stable_order(key: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for keys in [0, bound): numpy radix-sorts
    16-bit keys, several times faster than sorting int64."""
    if bound <= 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def group_cummax(vals: np.ndarray, grp: np.ndarray) -> np.ndarray:
    """Running maximum restarted at each group (rows sorted by group), in numpy.

    Each group's values are shifted above every earlier group's, so one
    ``maximum.accumulate`` never carries a maximum across a group boundary.
    """
    m = vals.shape[0]
    if m == 0:
        return vals.copy()
    starts = np.nonzero(np.r_[True, grp[1:] != grp[:-1]])[0]
    lens = np.diff(np.r_[starts, m])
    gmin = np.minimum.reduceat(vals, starts)
    gmax = np.maximum.reduceat(vals, starts)
    span = gmax - gmin + 1
    base = np.r_[0, np.cumsum(span)[:-1]] - gmin
    shift = np.repeat(base, lens)
    return np.maximum.accumulate(vals + shift) - shift


def group_last_index(cond: np.ndarray, grp: np.ndarray) -> np.ndarray:
    """Index of the last row ≤ this one where ``cond`` holds, within the group (-1 if none)."""
    m = cond.shape[0]
    idx = np.maximum.accumulate(np.where(cond, np.arange(m), -1)) if m else np.zeros(0, np.int64)
    ok = idx >= 0
    ok[ok] = grp[idx[ok]] == grp[ok]
    return np.where(ok, idx, -1)


def _differs(
    buf: np.ndarray,
    s0: int,
    old_end: int,
    fills: list[tuple[int, int]],
    i: int,
    ds: np.ndarray,
    pcap_len: np.ndarray,
    seg_off_buf: np.ndarray,
    tp: tuple[int, int] | None,
    pieces_start: np.ndarray,
    pieces_end: np.ndarray,
    pieces_pos: np.ndarray,
    fills_g: list[tuple[int, int, int]],
) -> bool:
    """Do the already-seen bytes of segment ``i`` in [s0, old_end) differ from the first-seen ones?

    Only bytes captured in both places are compared (snaplen may hide the rest).
    """
    # ranges of [s0, old_end) not in this segment's fills = the seen ranges
    seen_ranges = []
    cur = s0
    for a, b in sorted(fills):
        if a > cur:
            seen_ranges.append((cur, a))
        cur = max(cur, b)
    if cur < old_end:
        seen_ranges.append((cur, old_end))
    mv = memoryview(buf)  # byte comparisons in C, without numpy's per-call overhead
    my_cap_end = int(ds[i] + pcap_len[i])
    my_base = int(seg_off_buf[i] - ds[i])  # buffer offset of stream offset 0 for this segment
    owners: list[tuple[int, int, int]] = []
    if tp is not None:
        a, b = tp
        st = pieces_start[a:b]
        en = pieces_end[a:b]
        for ra, rb in seen_ranges:
            lo = max(int(np.searchsorted(en, ra, side="right")), 0)
            hi = int(np.searchsorted(st, rb, side="left"))
            for k in range(lo, hi):
                owners.append((int(st[k]), int(en[k]), int(pieces_pos[a + k])))
    for fa, fb, fp in fills_g:
        owners.append((fa, fb, fp))
    for ra, rb in seen_ranges:
        for oa, ob, op in owners:
            a, b = max(ra, oa), min(rb, ob)
            if a >= b:
                continue
            o_cap_end = int(ds[op] + pcap_len[op])
            b = min(b, my_cap_end, o_cap_end)
            if a >= b:
                continue
            o_base = int(seg_off_buf[op] - ds[op])
            if mv[my_base + a : my_base + b] != mv[o_base + a : o_base + b]:
                return True
    return False


def _handshake(
    nflow: int,
    f: np.ndarray,
    dd: np.ndarray,
    flags: np.ndarray,
    is_syn: np.ndarray,
    syn_pos: np.ndarray,
    has_syn_dir: np.ndarray,
    mss_opt: np.ndarray,
    ws_opt: np.ndarray,
    sp_opt: np.ndarray,
    ts_opt: np.ndarray,
    ts: np.ndarray,
    rel_ack: np.ndarray,
    seq: np.ndarray,
    ackv: np.ndarray,
    isn: np.ndarray,
) -> dict[str, np.ndarray]:
    """MSS, window scale, SACK, timestamps from SYN and SYN/ACK; RTT legs; vantage."""
    info: dict[str, np.ndarray] = {}
    c_syn = syn_pos[0::2] if nflow else np.zeros(0, np.int64)
    s_syn = syn_pos[1::2] if nflow else np.zeros(0, np.int64)
    has_c = has_syn_dir[0::2] if nflow else np.zeros(0, bool)
    has_s = has_syn_dir[1::2] if nflow else np.zeros(0, bool)
    cs = np.where(has_c, c_syn, 0)
    ss = np.where(has_s, s_syn, 0)

    def opt(arr: np.ndarray, pos: np.ndarray, has: np.ndarray, missing: int) -> np.ndarray:
        if arr.shape[0] == 0:
            return np.full(pos.shape[0], missing, np.int64)
        return np.where(has, arr[pos], missing).astype(np.int64)

    info["c_mss"] = opt(mss_opt, cs, has_c, -1)
    info["s_mss"] = opt(mss_opt, ss, has_s, -1)
    info["c_wscale"] = opt(ws_opt, cs, has_c, -1)
    info["s_wscale"] = opt(ws_opt, ss, has_s, -1)
    both = has_c & has_s
    info["handshake"] = both
    info["wscale_used"] = both & (info["c_wscale"] >= 0) & (info["s_wscale"] >= 0)
    # RFC 7323 §2.2: if either side did not send the option, no scaling in either direction
    info["c_wscale"] = np.where(info["wscale_used"], info["c_wscale"], np.where(both, 0, -1))
    info["s_wscale"] = np.where(info["wscale_used"], info["s_wscale"], np.where(both, 0, -1))
    sp = sp_opt.astype(bool) if sp_opt.shape[0] else np.zeros(0, bool)
    info["sack_permitted"] = (
        both & (sp[cs] if sp.shape[0] else both) & (sp[ss] if sp.shape[0] else both)
    )
    tso = ts_opt if ts_opt.shape[0] else np.zeros(0, bool)
    info["timestamps"] = (
        both & (tso[cs] if tso.shape[0] else both) & (tso[ss] if tso.shape[0] else both)
    )

    mss_neg = np.where(
        (info["c_mss"] > 0) & (info["s_mss"] > 0),
        np.minimum(info["c_mss"], info["s_mss"]),
        np.maximum(info["c_mss"], info["s_mss"]),
    )
    eff = np.where(mss_neg > 0, mss_neg - np.where(info["timestamps"], TCP_TS_OPTION_BYTES, 0), -1)
    info["c_eff_mss"] = eff.copy()
    info["s_eff_mss"] = eff.copy()

    # RTT legs: SYN (last client SYN before the SYN/ACK) → SYN/ACK → first ACK of it
    m = f.shape[0]
    pos = np.arange(m)
    synack = is_syn & ((flags & ACK) != 0) & (dd == 1)
    first_synack = np.full(nflow, m, np.int64)
    np.minimum.at(first_synack, f[synack], pos[synack])
    syn_c = is_syn & ((flags & ACK) == 0) & (dd == 0)
    # positions are (flow, dir, frame)-sorted: dir-0 packets precede dir-1 ones, so
    # compare frame order through timestamps of the packets instead
    t_synack = np.where(first_synack < m, ts[np.minimum(first_synack, m - 1)] if m else 0, -1)
    last_syn_t = np.full(nflow, -1, np.int64)
    if m:
        cand = syn_c & (t_synack[f] >= 0) & (ts <= t_synack[f])
        np.maximum.at(last_syn_t, f[cand], ts[cand])
    # handshake-completing ACK: client, no SYN, acks server ISN + 1
    if m:
        hs_ack = (
            (dd == 0)
            & ~is_syn
            & ((flags & ACK) != 0)
            & (rel_ack == 1)
            & (t_synack[f] >= 0)
            & (ts >= t_synack[f])
        )
        first_ack_t = np.full(nflow, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first_ack_t, f[hs_ack], ts[hs_ack])
        first_ack_t = np.where(first_ack_t == np.iinfo(np.int64).max, -1, first_ack_t)
    else:
        first_ack_t = np.full(nflow, -1, np.int64)
    ok_s = (last_syn_t >= 0) & (t_synack >= 0)
    ok_c = ok_s & (first_ack_t >= 0)
    info["syn_ts_ns"] = last_syn_t
    info["synack_ts_ns"] = np.where(ok_s, t_synack, -1)
    info["ack_ts_ns"] = np.where(ok_c, first_ack_t, -1)
    d_s = np.where(ok_s, t_synack - last_syn_t, -1)
    d_c = np.where(ok_c, first_ack_t - t_synack, -1)
    info["server_leg_ns"] = d_s
    info["client_leg_ns"] = d_c
    irtt = np.where(ok_c, d_s + d_c, -1)
    info["irtt_ns"] = irtt
    info["ooo_thres_ns"] = np.where(irtt > 0, irtt, 3_000_000)
    vantage = np.full(nflow, "unknown", dtype=object)
    vantage[ok_c] = "middle"
    vantage[ok_c & (d_c <= VANTAGE_LEG_RATIO * d_s)] = "client"
    vantage[ok_c & (d_s <= VANTAGE_LEG_RATIO * d_c)] = "server"
    info["vantage"] = vantage
    return info

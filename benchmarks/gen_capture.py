#!/usr/bin/env python3
"""Generate a large, deterministic, realistic-looking TCP capture (classic pcap).

    python benchmarks/gen_capture.py -n 1000000 -o benchmarks/out/big.pcap --seed 1

Ethernet / IPv4 / TCP, link type 1, µs timestamps (``--ns`` for nanoseconds).
Same seed and arguments → byte-identical file.

What the traffic looks like
---------------------------
Connections are simulated one at a time (numpy inside each: no Python object per
packet) and then interleaved in time; the byte buffer is assembled with numpy
gathers and scatters, chunk by chunk.

* Four connection kinds: request/response (HTTP-like: several exchanges with idle
  gaps), SSE-like streams (a request, then many small server writes tens of ms
  apart, like LLM token streaming), bulk downloads and bulk uploads (1448-byte
  segments, slow start restarted after idle, then paced at a per-connection rate).
* Every connection opens with SYN / SYN-ACK / ACK carrying Linux's options
  (MSS 1460, SACK-permitted, timestamps, window scale) and closes with
  FIN / FIN / ACK (a few abort with RST instead).  All later segments carry the
  timestamp option; duplicate ACKs carry a SACK block.
* The capture point sits between client and server (a gateway, closer to the
  clients): each connection's RTT is split into a client leg and a server leg, so
  handshake timings, data→ACK delays and retransmission delays are consistent.
* Receivers ACK every second segment, immediately on out-of-order arrival and
  during quick-ack at connection start, else after a 40 ms delayed-ACK timer unless
  the ACK rides on data they send in the meantime.
* About 0.5 % of data segments are lost: half after the capture point (the
  original and the retransmission are both captured), half before it (the capture
  shows a hole, filled later by the retransmission).  Fast retransmit after three
  later segments, else a tail-loss probe after 2·RTT.  About 0.2 % of segments are
  reordered before the capture point.  ~1 % of SYNs are retransmitted after 1 s.
* ~1 % of connections reuse the 5-tuple of an earlier, closed connection with a
  new ISN (Wireshark starts a new ``tcp.stream`` for it).
* Payload is opaque pseudo-random bytes (like encrypted traffic), a function of
  (connection, direction, stream offset), so retransmissions carry the original
  bytes.  IPv4 and TCP checksums are valid.

A JSON manifest (``<output>.json``) records the ground truth: per connection its
endpoints and how many payload bytes each direction carries, so a reader's
reassembly can be checked without any other tool.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

MSS = 1460
SEG = 1448  # MSS minus the 12-byte timestamp option (Linux)
NS = 1_000_000_000
MS = 1_000_000
US = 1_000
EPOCH_S = 1_714_564_800  # 2024-05-01T12:00:00Z
DELACK_NS = 40 * MS  # Linux TCP_DELACK_MIN
QUICKACK_SEGS = 8  # segments ACKed one by one at connection start
IW_SEGS = 10  # initial congestion window
LINE_SPACING_NS = 12 * US  # 1448-byte segments back to back at ~1 Gbit/s

LOSS_P = 0.005
REORDER_P = 0.002
SYN_RETX_P = 0.01
RST_CLOSE_P = 0.03
PORT_REUSE_P = 0.01
PAYLOAD = "tls"
# traffic shape (issue 16, ``--shape``): "mixed" (the default above), "bulk", "sse", "h2",
# "quic"; see SHAPES
SHAPE = "mixed"
TOKEN_REC = 5 + 24 + 17  # sse shape: one TLS record per streamed token (24-byte plaintext)

F_FIN, F_SYN, F_RST, F_PSH, F_ACK = 1, 2, 4, 8, 16
OPT_TS, OPT_SYN, OPT_SACK = 0, 1, 2
OPT_LEN = {OPT_TS: 12, OPT_SYN: 20, OPT_SACK: 24}

POOL_SIZE = 1 << 24  # 16 MiB of random payload bytes, indexed by stream offset
POOL_PAD = 4096

KIND_NAMES = ("rr", "sse", "bulk_down", "bulk_up")
KIND_P = (0.55, 0.25, 0.14, 0.06)

# Synthetic traffic shapes for the analyze benchmark (issue 16).  Each is the mixed
# model above with one knob turned; the defaults (loss, concurrency) apply unless given.
SHAPES = {
    # full-size segments, 16 KiB TLS records: the shape tshark is fastest on
    "bulk": {"kind_p": (0.0, 0.0, 0.85, 0.15), "concurrency": 100},
    # thousands of token streams, one small TLS record per token, many per segment
    "sse": {"kind_p": (0.0, 1.0, 0.0, 0.0), "concurrency": 3000},
    # long-lived connections carrying many overlapping exchanges (what HTTP/2
    # multiplexing looks like under TLS: the frames themselves are encrypted), 2 % loss
    "h2": {"kind_p": (1.0, 0.0, 0.0, 0.0), "concurrency": 300, "loss": 0.02},
    # the mixed model carried over UDP as QUIC: long-header Initials for the handshake,
    # short-header 1-RTT packets after it (payload opaque: no keys, no decryption)
    # (no 5-tuple reuse: one UDP flow is one QUIC connection here)
    "quic": {"kind_p": KIND_P, "concurrency": 300, "port_reuse": 0.0},
}


def lognormal(rng: np.random.Generator, median: float, sigma: float, size, lo, hi) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(median), sigma, size), lo, hi)


# ---------------------------------------------------------------------------
# one direction of one connection


@dataclass
class Writes:
    """Application writes of one direction: capture time of the first segment and size."""

    t: np.ndarray  # int64 ns
    size: np.ndarray  # int64 bytes


def segment_writes(
    rng: np.random.Generator, w: Writes, rtt: int, spacing: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split writes into ≤ SEG-byte segments with capture times.

    Each write restarts slow start (Linux tcp_slow_start_after_idle): IW_SEGS
    segments back to back, doubling per RTT, until the connection's pacing rate
    (``spacing`` ns per full segment) is the limit.
    Returns (start offset, length, time, psh, write index) per segment.
    """
    nseg = -(-w.size // SEG)
    tot = int(nseg.sum())
    wi = np.repeat(np.arange(w.size.shape[0]), nseg)
    first = np.cumsum(nseg) - nseg
    k = np.arange(tot) - first[wi]
    last = k == nseg[wi] - 1
    length = np.where(last, w.size[wi] - (nseg[wi] - 1) * SEG, SEG)
    start = np.cumsum(length) - length
    rnd = np.floor(np.log2(k / IW_SEGS + 1)).astype(np.int64)
    ss = rnd * rtt + (k - IW_SEGS * (2**rnd - 1)) * LINE_SPACING_NS
    t_rel = np.maximum(ss, k * spacing) + rng.exponential(3 * US, tot).astype(np.int64)
    t = w.t[wi] + t_rel
    # per write monotone; writes may overlap in time only if the app wrote faster
    # than the network drains: keep the whole direction monotone
    t = np.maximum.accumulate(t)
    return start, length, t, last, wi


@dataclass
class Direction:
    # captured data segment copies
    c_t: np.ndarray
    c_start: np.ndarray
    c_len: np.ndarray
    c_psh: np.ndarray
    c_retx: np.ndarray
    # receiver state, in arrival order at the receiver
    arr_t: np.ndarray
    prefix: np.ndarray
    runmax: np.ndarray
    seg_start: np.ndarray  # all segments, in offset order
    seg_end: np.ndarray
    seg_t: np.ndarray  # capture time of the first transmission (captured or not)
    total: int
    ack_t: np.ndarray  # capture times of the receiver's pure ACKs
    lost: int
    reordered: int


def simulate_direction(
    rng: np.random.Generator,
    w: Writes,
    rtt: int,
    spacing: int,
    d_rcv: int,
    rcv_data_t: np.ndarray,
) -> Direction:
    """Segments, losses, reordering and the receiver's ACK schedule for one direction.

    ``d_rcv``: one-way delay capture point → receiver.  ``rcv_data_t``: capture
    times of the receiver's own data segments (a delayed ACK rides on them).
    """
    start, length, t, psh, _wi = segment_writes(rng, w, rtt, spacing)
    n = start.shape[0]
    end = start + length
    total = int(end[-1]) if n else 0

    # reordering before the capture point: swap with the next segment of the write
    reorder = np.nonzero((rng.random(n) < REORDER_P)[:-1] & ~psh[:-1] & (np.diff(t) < 5 * MS))[0]
    if reorder.shape[0]:
        reorder = reorder[np.concatenate([[True], np.diff(reorder) > 1])]  # no overlapping swaps
        t[reorder], t[reorder + 1] = t[reorder + 1].copy(), t[reorder].copy()

    lost = rng.random(n) < LOSS_P
    upstream = lost & (rng.random(n) < 0.5)  # lost before the capture point
    # retransmission time: fast retransmit once three later segments got through
    # within an RTT, else a tail-loss probe after 2·RTT (min 10 ms)
    idx3 = np.minimum(np.arange(n) + 3, n - 1)
    fast = (np.arange(n) + 3 < n) & (t[idx3] - t < rtt)
    t_retx = np.where(fast, t[idx3] + rtt, t + np.maximum(2 * rtt, 10 * MS))
    t_retx = t_retx + rng.integers(10 * US, 200 * US, n)

    orig = ~upstream
    rx = lost
    c_t = np.concatenate([t[orig], t_retx[rx]])
    c_start = np.concatenate([start[orig], start[rx]])
    c_len = np.concatenate([length[orig], length[rx]])
    c_psh = np.concatenate([psh[orig], psh[rx]])
    c_retx = np.concatenate([np.zeros(int(orig.sum()), bool), np.ones(int(rx.sum()), bool)])

    # receiver: every segment arrives exactly once (the retransmission if lost)
    arr = np.where(lost, t_retx, t) + d_rcv
    order = np.argsort(arr, kind="stable")
    arr_t = arr[order]
    a_start, a_end = start[order], end[order]
    runmax = np.maximum.accumulate(a_end) if n else a_end
    # contiguous prefix after each arrival: up to the first byte not yet arrived
    suf = np.minimum.accumulate(a_start[::-1])[::-1] if n else a_start
    next_missing = np.concatenate([suf[1:], [total]]) if n else suf
    prefix = np.minimum(runmax, next_missing)
    prev_prefix = np.concatenate([[0], prefix[:-1]]) if n else prefix

    # ACK schedule (receiver side), in arrival order
    ooo = (prefix < runmax) | (prefix != prev_prefix + (a_end - a_start))
    gap = np.diff(arr_t, prepend=np.int64(-(10**18)))
    burst_start = gap > DELACK_NS
    bid = np.cumsum(burst_start) - 1
    bfirst = np.nonzero(burst_start)[0]
    kb = np.arange(n) - bfirst[bid] if n else np.zeros(0, np.int64)
    blast = np.concatenate([burst_start[1:], [True]]) if n else burst_start
    quick = np.arange(n) < QUICKACK_SEGS
    now = ooo | quick | (kb % 2 == 1)
    delayed = blast & ~now
    if delayed.any() and rcv_data_t.shape[0]:
        # suppressed if the receiver sends data before the timer fires
        rd = np.sort(rcv_data_t) - d_rcv  # receiver's send times of its data
        nxt = np.searchsorted(rd, arr_t - d_rcv, side="right")
        nxt_t = np.where(nxt < rd.shape[0], rd[np.minimum(nxt, rd.shape[0] - 1)], 1 << 62)
        delayed &= ~(nxt_t - (arr_t - d_rcv) < DELACK_NS)
    proc = rng.integers(5 * US, 60 * US, n)
    ack_t = np.concatenate([arr_t[now] + proc[now] + d_rcv, arr_t[delayed] + DELACK_NS + d_rcv])

    return Direction(
        c_t=c_t,
        c_start=c_start,
        c_len=c_len,
        c_psh=c_psh,
        c_retx=c_retx,
        arr_t=arr_t,
        prefix=prefix,
        runmax=runmax,
        seg_start=start,
        seg_end=end,
        seg_t=t,
        total=total,
        ack_t=np.sort(ack_t),
        lost=int(lost.sum()),
        reordered=int(reorder.shape[0]),
    )


def receiver_state(d: Direction, t_send: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the receiver of ``d`` knows at its send times: (cum. ack offset, SACK l, r).

    SACK edges are -1 when there is no hole.
    """
    if d.arr_t.shape[0] == 0:
        z = np.zeros(t_send.shape[0], np.int64)
        return z, z - 1, z - 1
    k = np.searchsorted(d.arr_t, t_send, side="right") - 1
    ok = k >= 0
    kk = np.maximum(k, 0)
    pre = np.where(ok, d.prefix[kk], 0)
    rm = np.where(ok, d.runmax[kk], 0)
    hole = pre < rm
    # SACK block: from the end of the missing segment to the highest byte received
    j = np.minimum(np.searchsorted(d.seg_start, pre, side="left"), d.seg_start.shape[0] - 1)
    left = d.seg_end[j]
    return pre, np.where(hole, left, -1), np.where(hole, rm, -1)


# ---------------------------------------------------------------------------
# one connection


@dataclass
class Conn:
    kind: int
    t: np.ndarray  # relative capture time (ns)
    dir: np.ndarray  # 0 client→server, 1 server→client
    flags: np.ndarray
    seq: np.ndarray  # relative to the sender's ISN
    ack: np.ndarray  # relative to the receiver's ISN (0 without ACK)
    plen: np.ndarray
    opt: np.ndarray
    sack_l: np.ndarray  # relative to the receiver's ISN; -1 none
    sack_r: np.ndarray
    win: np.ndarray
    c2s: int
    s2c: int
    retx: int
    reordered: int
    duration: int
    d_c: int
    d_s: int
    records: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


# TLS 1.3 application-data records: 5-byte header, at most 2**14 bytes of plaintext,
# 1 byte of inner content type and a 16-byte AEAD tag (RFC 8446 §5.2).
TLS_REC_MAX = 5 + (1 << 14) + 17
TLS_REC_MIN = 5 + 1 + 17


def tls_records(w: Writes, rec_max: int = TLS_REC_MAX) -> tuple[np.ndarray, np.ndarray]:
    """Stream offset and wire length of each TLS record: every write is a run of
    records of ``rec_max`` bytes filling it exactly (a too-short tail is merged into
    the record before)."""
    size = w.size
    start = np.cumsum(size) - size
    nrec = np.maximum(-(-size // rec_max), 1)
    tail = size - (nrec - 1) * rec_max
    merge = (tail < TLS_REC_MIN) & (nrec > 1)
    nrec = nrec - merge
    wi = np.repeat(np.arange(size.shape[0]), nrec)
    k = np.arange(wi.shape[0]) - np.repeat(np.cumsum(nrec) - nrec, nrec)
    off = start[wi] + k * rec_max
    last = k == nrec[wi] - 1
    ln = np.where(last, start[wi] + size[wi] - off, rec_max)
    return off, ln


def plan_writes(
    rng: np.random.Generator, kind: int, d_c: int, d_s: int, t0: int, spacing: int, rtt: int
):
    """Client and server writes (capture time of the first segment, size)."""
    name = KIND_NAMES[kind]

    def dur(size: np.ndarray) -> np.ndarray:
        # duration of a write's segments (same model as segment_writes, no jitter)
        nseg = -(-size // SEG)
        k = nseg - 1
        rnd = np.floor(np.log2(k / IW_SEGS + 1)).astype(np.int64)
        ss = rnd * rtt + (k - IW_SEGS * (2**rnd - 1)) * LINE_SPACING_NS
        return np.maximum(ss, k * spacing)

    if name in ("rr", "bulk_down", "bulk_up"):
        if name == "rr" and SHAPE == "h2":
            # one long-lived connection, many exchanges back to back (multiplexed
            # streams: requests while earlier responses are still in flight)
            e = int(min(rng.geometric(0.02), 400))
            req = lognormal(rng, 250, 0.6, e, 60, 4000).astype(np.int64)
            resp = lognormal(rng, 6000, 1.6, e, 100, 3_000_000).astype(np.int64)
        elif name == "rr":
            e = int(min(1 + rng.geometric(0.3) - 1, 40))
            req = lognormal(rng, 350, 0.6, e, 60, 6000).astype(np.int64)
            resp = lognormal(rng, 2500, 1.6, e, 100, 3_000_000).astype(np.int64)
        elif name == "bulk_down":
            e = 1
            req = lognormal(rng, 300, 0.4, 1, 100, 2000).astype(np.int64)
            resp = lognormal(rng, 1_500_000, 1.1, 1, 64_000, 40_000_000).astype(np.int64)
        else:
            e = 1
            req = lognormal(rng, 800_000, 1.1, 1, 64_000, 20_000_000).astype(np.int64)
            resp = lognormal(rng, 250, 0.3, 1, 100, 1000).astype(np.int64)
        think = lognormal(rng, 3 * MS, 1.0, e, 50 * US, 2 * NS).astype(np.int64)
        idle = lognormal(rng, 150 * MS, 1.2, e, 1 * MS, 20 * NS).astype(np.int64)
        if SHAPE == "h2":
            idle = lognormal(rng, 2 * MS, 1.0, e, 50 * US, 1 * NS).astype(np.int64)
            # the next request goes out before the previous response ends
            idle = idle - (dur(resp) + 2 * d_c) // 2
        # exchange k: request at t_req[k]; response 2·d_S + think after the request's
        # last segment; next request 2·d_C + idle after the response's last segment
        step = dur(req) + 2 * d_s + think + dur(resp) + 2 * d_c + idle
        t_req = t0 + np.r_[0, np.cumsum(step)[:-1]]
        t_resp = t_req + dur(req) + 2 * d_s + think
        return Writes(t_req, req), Writes(t_resp, resp)
    # SSE: request, response headers, then a stream of small events
    req = lognormal(rng, 600, 0.8, 1, 100, 20_000).astype(np.int64)
    k = int(lognormal(rng, 120, 1.0, 1, 5, 5000)[0])
    ev = lognormal(rng, 110, 0.7, k, TLS_REC_MIN + 1, 16_000).astype(np.int64)
    if SHAPE == "sse":
        # several tokens flushed together: ~12 records of TOKEN_REC bytes per write
        ev = lognormal(rng, 12 * TOKEN_REC, 0.5, k, TOKEN_REC, 1400).astype(np.int64)
    gaps = lognormal(rng, 30 * MS, 0.9, k, 1 * MS, 15 * NS).astype(np.int64)
    ttft = int(lognormal(rng, 300 * MS, 0.8, 1, 20 * MS, 10 * NS)[0])
    t_hdr = t0 + int(dur(req)[0]) + 2 * d_s + int(rng.integers(1 * MS, 10 * MS))
    t_ev = t_hdr + ttft + np.cumsum(gaps)
    return (
        Writes(np.array([t0], np.int64), req),
        Writes(np.r_[t_hdr, t_ev].astype(np.int64), np.r_[250, ev].astype(np.int64)),
    )


def simulate_conn(rng: np.random.Generator, kind: int) -> Conn:
    rtt = int(lognormal(rng, 25 * MS, 0.8, 1, 500 * US, 400 * MS)[0])
    u = rng.uniform(0.01, 0.3)
    d_c = max(int(rtt / 2 * u), 5 * US)  # capture point ↔ client
    d_s = max(rtt // 2 - d_c, 5 * US)  # capture point ↔ server
    rtt = 2 * (d_c + d_s)
    rate = lognormal(rng, 80e6, 0.8, 1, 5e6, 1e9)[0]
    spacing = int(SEG * 8 / rate * NS)
    if LOSS_P > 0:
        # a lossy path cannot sustain more than ~1.22/sqrt(p) segments per RTT
        # (Mathis et al. 1997); without this cap a flow would be in loss recovery
        # (and its ACKs carry SACK blocks) most of the time
        spacing = max(spacing, int(rtt * np.sqrt(LOSS_P) / 1.22))

    # handshake (relative times)
    syn_retx = rng.random() < SYN_RETX_P
    t_syn = [0] + ([1 * NS] if syn_retx else [])
    t_sa = t_syn[-1] + 2 * d_s + int(rng.integers(10 * US, 100 * US))
    t_ack = t_sa + 2 * d_c + int(rng.integers(5 * US, 50 * US))
    t0 = t_ack + int(rng.integers(5 * US, 300 * US))

    cw, sw = plan_writes(rng, kind, d_c, d_s, t0, spacing, rtt)
    # server data times are needed for the client's delayed-ACK piggybacking and
    # vice versa: plan segments first (same rng draws are not required to match)
    s_dir = simulate_direction(rng, sw, rtt, spacing, d_c, cw.t)
    c_dir = simulate_direction(rng, cw, rtt, spacing, d_s, s_dir.c_t)

    # --- packets --------------------------------------------------------
    parts: list[dict[str, np.ndarray]] = []

    def add(t, d, flags, seq, plen, opt=OPT_TS):
        t = np.asarray(t, np.int64).reshape(-1)
        m = t.shape[0]
        parts.append(
            {
                "t": t,
                "dir": np.full(m, d, np.int8),
                "flags": np.broadcast_to(np.asarray(flags, np.int64), (m,)).copy(),
                "seq": np.broadcast_to(np.asarray(seq, np.int64), (m,)).copy(),
                "plen": np.broadcast_to(np.asarray(plen, np.int64), (m,)).copy(),
                "opt": np.full(m, opt, np.int8),
            }
        )

    for ts in t_syn:
        add([ts], 0, F_SYN, 0, 0, OPT_SYN)
    add([t_sa], 1, F_SYN | F_ACK, 0, 0, OPT_SYN)
    add([t_ack], 0, F_ACK, 1, 0)
    for d, dd in ((0, c_dir), (1, s_dir)):
        add(dd.c_t, d, F_ACK | np.where(dd.c_psh, F_PSH, 0), 1 + dd.c_start, dd.c_len)
    # pure ACKs: the client acknowledges server data and vice versa
    add(s_dir.ack_t, 0, F_ACK, 1 + c_dir.total, 0)
    add(c_dir.ack_t, 1, F_ACK, 1 + s_dir.total, 0)
    # pure ACKs sent before the sender's own data went out carry an older seq:
    # fixed below from the sender's own timeline

    t_all = np.concatenate([p["t"] for p in parts])
    t_end = int(t_all.max())
    closer = 0 if rng.random() < 0.7 else 1
    d_cl, d_pe = (d_c, d_s) if closer == 0 else (d_s, d_c)
    tot = (c_dir.total, s_dir.total)
    tc = t_end + int(lognormal(rng, 50 * MS, 1.0, 1, 1 * MS, 5 * NS)[0])
    rst = rng.random() < RST_CLOSE_P
    close_rows = []
    if rst:
        close_rows.append((tc, 0, F_RST | F_ACK, 1 + tot[0], 1 + tot[1]))
    else:
        t2 = tc + 2 * d_pe + int(rng.integers(10 * US, 200 * US))
        t3 = t2 + 2 * d_cl + int(rng.integers(5 * US, 50 * US))
        close_rows += [
            (tc, closer, F_FIN | F_ACK, 1 + tot[closer], 1 + tot[1 - closer]),
            (t2, 1 - closer, F_FIN | F_ACK, 1 + tot[1 - closer], 2 + tot[closer]),
            (t3, closer, F_ACK, 2 + tot[closer], 2 + tot[1 - closer]),
        ]

    t = np.concatenate([p["t"] for p in parts])
    d = np.concatenate([p["dir"] for p in parts])
    flags = np.concatenate([p["flags"] for p in parts])
    seq = np.concatenate([p["seq"] for p in parts])
    plen = np.concatenate([p["plen"] for p in parts])
    opt = np.concatenate([p["opt"] for p in parts])

    # pure ACKs carry the sender's next sequence number at their send time
    pure = (plen == 0) & (flags == F_ACK)
    for side, own in ((0, c_dir), (1, s_dir)):
        sel = pure & (d == side)
        if own.seg_t.shape[0] and sel.any():
            # snd_nxt: the end of everything sent so far, captured or lost upstream
            o = np.argsort(own.seg_t, kind="stable")
            sent_end = np.maximum.accumulate(own.seg_end[o])
            k = np.searchsorted(own.seg_t[o], t[sel], side="left") - 1
            seq[sel] = 1 + np.where(k >= 0, sent_end[np.maximum(k, 0)], 0)

    # ack numbers, SACK blocks: from the peer-direction receiver state at send time
    ack = np.zeros(t.shape[0], np.int64)
    sl = np.full(t.shape[0], -1, np.int64)
    sr = np.full(t.shape[0], -1, np.int64)
    for side, peer_dir, leg in ((0, s_dir, d_c), (1, c_dir, d_s)):
        sel = (d == side) & ((flags & F_ACK) != 0) & ((flags & F_SYN) == 0)
        # what this side had received when it sent the packet (capture time − its leg)
        pre, a, b = receiver_state(peer_dir, t[sel] - leg)
        ack[sel] = 1 + pre
        sl[sel] = np.where(a >= 0, 1 + a, -1)
        sr[sel] = np.where(b >= 0, 1 + b, -1)
    ack[(flags & F_SYN) != 0] = 0
    ack[(flags == (F_SYN | F_ACK))] = 1
    opt = np.where((opt == OPT_TS) & (sl >= 0) & (plen == 0), OPT_SACK, opt).astype(np.int8)
    sl = np.where(opt == OPT_SACK, sl, -1)
    sr = np.where(opt == OPT_SACK, sr, -1)

    cr = np.array(close_rows, np.int64).reshape(-1, 5)
    k = cr.shape[0]
    t = np.concatenate([t, cr[:, 0]])
    d = np.concatenate([d, cr[:, 1].astype(np.int8)])
    flags = np.concatenate([flags, cr[:, 2]])
    seq = np.concatenate([seq, cr[:, 3]])
    ack = np.concatenate([ack, cr[:, 4]])
    plen = np.concatenate([plen, np.zeros(k, np.int64)])
    opt = np.concatenate([opt, np.full(k, OPT_TS, np.int8)])
    sl = np.concatenate([sl, np.full(k, -1, np.int64)])
    sr = np.concatenate([sr, np.full(k, -1, np.int64)])

    # windows: raw field, scaled by 2**7 (client) / 2**9 (server) after the handshake;
    # constant per direction (a changed window on a pure ACK is a window update)
    cwin = int(rng.integers(500, 3000))
    swin = int(rng.integers(100, 600))
    win = np.where(d == 0, cwin, swin)
    win = np.where((flags & F_SYN) != 0, np.where(d == 0, 64240, 65160), win)

    o = np.argsort(t, kind="stable")
    return Conn(
        kind=kind,
        t=t[o],
        dir=d[o],
        flags=flags[o],
        seq=seq[o],
        ack=ack[o],
        plen=plen[o],
        opt=opt[o],
        sack_l=sl[o],
        sack_r=sr[o],
        win=win[o].astype(np.int64),
        c2s=c_dir.total,
        s2c=s_dir.total,
        retx=c_dir.lost + s_dir.lost,
        reordered=c_dir.reordered + s_dir.reordered,
        duration=int(t.max()),
        d_c=d_c,
        d_s=d_s,
        records=(
            tls_records(cw),
            tls_records(sw, TOKEN_REC if SHAPE == "sse" and kind == 1 else TLS_REC_MAX),
        ),
    )


# ---------------------------------------------------------------------------
# the whole capture


def simulate(n_target: int, seed: int, concurrency: int):
    rng = np.random.default_rng(seed)
    conns: list[Conn] = []
    total = 0
    while total < n_target:
        kind = int(rng.choice(4, p=KIND_P))
        c = simulate_conn(rng, kind)
        conns.append(c)
        total += c.t.shape[0]
    nc = len(conns)
    dur = np.array([c.duration for c in conns], np.int64)
    span = max(int(dur.sum() // max(concurrency, 1)), int(dur.max()) + 1)
    start = (rng.random(nc) * (span - dur).clip(0)).astype(np.int64)

    # endpoints: 400 client hosts in 10.1.0.0/16, 24 servers in documentation ranges
    n_clients = 400
    client_host = rng.integers(0, n_clients, nc)
    servers = np.array(
        [0xC0000200 + i for i in range(1, 9)]  # 192.0.2.x
        + [0xC6336400 + i for i in range(1, 9)]  # 198.51.100.x
        + [0xCB007100 + i for i in range(1, 9)],  # 203.0.113.x
        np.int64,
    )
    server_host = rng.integers(0, servers.shape[0], nc)
    # TLS-framed payload on 443; opaque random payload on ports no dissector owns
    server_ports = np.array([8443, 8443, 8443, 9000, 9443, 7443], np.int64)
    sport_srv = server_ports[rng.integers(0, server_ports.shape[0], nc)]
    if PAYLOAD == "tls":
        sport_srv[:] = 443
    # unique (client host, ephemeral port) per connection
    space = rng.choice(n_clients * 28232, size=nc, replace=False)
    client_host = space // 28232
    cport = 32768 + space % 28232
    client_ip = 0x0A010000 + ((client_host // 250) << 8) + (client_host % 250) + 2
    server_ip = servers[server_host]

    # port reuse: give a few connections the 5-tuple of an earlier closed one
    reused = 0
    tuple_busy: dict[int, list[tuple[int, int]]] = {
        i: [(int(start[i]), int(start[i] + dur[i]))] for i in range(nc)
    }
    owner = np.arange(nc)
    cand = np.nonzero(rng.random(nc) < PORT_REUSE_P)[0]
    by_start = np.argsort(start)
    for k in cand.tolist():
        s_k, e_k = int(start[k]), int(start[k] + dur[k])
        # look for an earlier connection (in time) whose tuple is free around k
        for j in by_start[: np.searchsorted(start[by_start], s_k - NS)][::-1][:50].tolist():
            tj = int(owner[j])
            if tj == owner[k]:
                continue
            if all(e + NS < s_k or s > e_k + NS for s, e in tuple_busy[tj]):
                tuple_busy[int(owner[k])].remove((s_k, e_k))
                tuple_busy[tj].append((s_k, e_k))
                owner[k] = tj
                reused += 1
                break
    client_ip, cport, server_ip, sport_srv = (
        a[owner] for a in (client_ip, cport, server_ip, sport_srv)
    )

    isn = rng.integers(0, 1 << 32, (nc, 2), dtype=np.int64)
    tsoff = rng.integers(0, 1 << 32, (nc, 2), dtype=np.int64)
    ipid = rng.integers(0, 1 << 16, (nc, 2), dtype=np.int64)
    pool_base = rng.integers(0, POOL_SIZE, (nc, 2), dtype=np.int64)
    ttl_srv = rng.integers(46, 60, nc)

    cnt = np.array([c.t.shape[0] for c in conns], np.int64)
    cid = np.repeat(np.arange(nc), cnt)

    def cat(attr: str) -> np.ndarray:
        return np.concatenate([getattr(c, attr) for c in conns])

    pk = {
        "t": cat("t") + start[cid],
        "conn": cid,
        "dir": cat("dir").astype(np.int64),
        "flags": cat("flags"),
        "seq": cat("seq"),
        "ack": cat("ack"),
        "plen": cat("plen"),
        "opt": cat("opt"),
        "sack_l": cat("sack_l"),
        "sack_r": cat("sack_r"),
        "win": cat("win"),
    }
    intra = np.arange(cid.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    order = np.lexsort((intra, cid, pk["t"]))
    pk = {k: v[order] for k, v in pk.items()}
    cid, dr = pk["conn"], pk["dir"]

    # per-packet header fields
    d_leg = np.array([[c.d_c, c.d_s] for c in conns], np.int64)  # sender's leg
    one_way = d_leg.sum(axis=1)
    t_send = pk["t"] - d_leg[cid, dr]
    tsval = (tsoff[cid, dr] + t_send // MS) & 0xFFFFFFFF
    tsecr = (tsoff[cid, 1 - dr] + (t_send - one_way[cid]) // MS) & 0xFFFFFFFF
    syn_only = pk["flags"] == F_SYN
    tsecr = np.where(syn_only, 0, tsecr)
    g = cid * 2 + dr
    go = np.argsort(g, kind="stable")
    gs = g[go]
    first = np.r_[True, gs[1:] != gs[:-1]]
    rank_sorted = np.arange(gs.shape[0]) - np.maximum.accumulate(
        np.where(first, np.arange(gs.shape[0]), 0)
    )
    rank = np.empty_like(rank_sorted)
    rank[go] = rank_sorted

    src_ip = np.where(dr == 0, client_ip[cid], server_ip[cid])
    dst_ip = np.where(dr == 0, server_ip[cid], client_ip[cid])
    sport = np.where(dr == 0, cport[cid], sport_srv[cid])
    dport = np.where(dr == 0, sport_srv[cid], cport[cid])
    peer = 1 - dr
    rel_ack = pk["ack"]
    fields = {
        "ts": (EPOCH_S * NS + pk["t"]),
        "src_ip": src_ip,
        "dst_ip": dst_ip,
        "client_side": dr == 0,
        "client_host": (client_ip[cid] & 0xFFFF),
        "ttl": np.where(dr == 0, 64, ttl_srv[cid]),
        "ipid": (ipid[cid, dr] + rank) & 0xFFFF,
        "sport": sport,
        "dport": dport,
        "seq": (isn[cid, dr] + pk["seq"]) & 0xFFFFFFFF,
        "ack": np.where((pk["flags"] & F_ACK) != 0, (isn[cid, peer] + rel_ack) & 0xFFFFFFFF, 0),
        "flags": pk["flags"],
        "win": pk["win"],
        "plen": pk["plen"],
        "opt": pk["opt"],
        "tsval": tsval,
        "tsecr": tsecr,
        "wscale": np.where(dr == 0, 7, 9),
        "sack_l": np.where(pk["sack_l"] >= 0, (isn[cid, peer] + pk["sack_l"]) & 0xFFFFFFFF, 0),
        "sack_r": np.where(pk["sack_r"] >= 0, (isn[cid, peer] + pk["sack_r"]) & 0xFFFFFFFF, 0),
        "pool": (pool_base[cid, dr] + pk["seq"] - 1) % POOL_SIZE,
        "stream_key": ((cid * 2 + dr) << 40) + pk["seq"] - 1,  # (connection, dir, offset)
        "conn": cid,
    }
    # TLS record headers, as (connection, dir, stream offset) keys → header bytes
    keys, vals = [], []
    for i, c in enumerate(conns):
        for d_, (off, ln) in enumerate(c.records):
            body = ln - 5
            hdr = np.stack(
                [
                    np.full_like(body, 0x17),
                    np.full_like(body, 3),
                    np.full_like(body, 3),
                    body >> 8,
                    body & 0xFF,
                ],
                axis=1,
            )
            keys.append((((i * 2 + d_) << 40) + off)[:, None] + np.arange(5))
            vals.append(hdr)
    fields_tls = (
        np.concatenate([k.reshape(-1) for k in keys]),
        np.concatenate([v.reshape(-1) for v in vals]).astype(np.uint8),
    )

    manifest = {
        "seed": seed,
        "shape": SHAPE,
        "transport": "udp" if SHAPE == "quic" else "tcp",
        "payload": "quic" if SHAPE == "quic" else PAYLOAD,
        "packets": int(cid.shape[0]),
        "connections": nc,
        "tcp_streams": nc,
        "port_reuse": reused,
        "span_s": span / NS,
        "kinds": {KIND_NAMES[k]: int(sum(c.kind == k for c in conns)) for k in range(4)},
        "data_segments_lost": int(sum(c.retx for c in conns)),
        "data_segments_reordered": int(sum(c.reordered for c in conns)),
        "tls_records": int(sum(r[0].shape[0] for c in conns for r in c.records)),
        # per connection in order of first packet (= Wireshark's tcp.stream order)
        "streams": [],
    }
    first_pkt = np.full(nc, cid.shape[0], np.int64)
    np.minimum.at(first_pkt, cid, np.arange(cid.shape[0]))
    for s, i in enumerate(np.argsort(first_pkt, kind="stable").tolist()):
        c = conns[i]
        manifest["streams"].append(
            {
                "stream": s,
                "kind": KIND_NAMES[c.kind],
                "client": f"{_ip(int(client_ip[i]))}:{int(cport[i])}",
                "server": f"{_ip(int(server_ip[i]))}:{int(sport_srv[i])}",
                "c2s_bytes": c.c2s,
                "s2c_bytes": c.s2c,
                "packets": int(c.t.shape[0]),
                "lost": c.retx,
                "reordered": c.reordered,
                "reuses_tuple": bool(owner[i] != i),
            }
        )
    return fields, fields_tls, manifest


def _ip(v: int) -> str:
    return ".".join(str((v >> s) & 255) for s in (24, 16, 8, 0))


# ---------------------------------------------------------------------------
# byte assembly


def _put(h: np.ndarray, col: int, v: np.ndarray, nbytes: int, little: bool = False) -> None:
    for k in range(nbytes):
        shift = 8 * k if little else 8 * (nbytes - 1 - k)
        h[:, col + k] = (v >> shift) & 0xFF


def _csum_words(h: np.ndarray, a: int, b: int) -> np.ndarray:
    w = h[:, a:b].astype(np.int64)
    return (w[:, 0::2] << 8).sum(axis=1) + w[:, 1::2].sum(axis=1)


def _fold(s: np.ndarray) -> np.ndarray:
    for _ in range(4):
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def _copy_payloads(
    buf: np.ndarray, dst: np.ndarray, pool: np.ndarray, src: np.ndarray, ln: np.ndarray
) -> None:
    """buf[dst[i] : dst[i] + ln[i]] = pool[src[i] : src[i] + ln[i]] for all i, vectorised.

    Packets are bucketed by length (full 1448-byte segments, then powers of two) and
    each bucket is one 2-D gather/scatter, masked to each packet's length.
    """
    # Lengths shared by many packets (full segments above all): row copies through
    # overlapping strided views, one contiguous memcpy per packet inside numpy.
    vals, counts = np.unique(ln[ln > 0], return_counts=True)
    common = vals[counts >= 64]
    done = np.zeros(ln.shape[0], bool)
    for width in common.tolist():
        i = np.nonzero(ln == width)[0]
        done[i] = True
        dv = np.lib.stride_tricks.as_strided(
            buf, (buf.shape[0] - width + 1, width), (1, 1), writeable=True
        )
        pv = np.lib.stride_tricks.as_strided(
            pool, (pool.shape[0] - width + 1, width), (1, 1), writeable=False
        )
        dv[dst[i]] = pv[src[i]]
    # the rest: bucketed by powers of two, one masked 2-D gather/scatter per bucket
    rest = ~done & (ln > 0)
    lo, w = 0, 16
    while rest.any() and lo < int(ln[rest].max()):
        i = np.nonzero(rest & (ln > lo) & (ln <= w))[0]
        lo, w = w, w * 2
        if i.shape[0] == 0:
            continue
        ar = np.arange(lo)
        m = ar < ln[i][:, None]
        buf[(dst[i][:, None] + ar)[m]] = pool[(src[i][:, None] + ar)[m]]


def write_pcap(
    path: str,
    f: dict[str, np.ndarray],
    pool: np.ndarray,
    ns: bool,
    tls: tuple[np.ndarray, np.ndarray] | None = None,
    chunk: int = 16384,
) -> int:
    n = f["ts"].shape[0]
    # pool prefix sums of bytes at even / odd positions for the payload checksum
    # (sum of pool[j] for even j < i is ce[(i + 1) // 2], for odd j < i co[i // 2])
    ce = np.r_[0, np.cumsum(pool[0::2], dtype=np.int64)]
    co = np.r_[0, np.cumsum(pool[1::2], dtype=np.int64)]

    magic = 0xA1B23C4D if ns else 0xA1B2C3D4
    written = 0
    with open(path, "wb") as out:
        out.write(np.array([magic], "<u4").tobytes())
        out.write(np.array([2, 4], "<u2").tobytes())
        out.write(np.array([0, 0, 262144, 1], "<u4").tobytes())
        written += 24
        for c0 in range(0, n, chunk):
            c1 = min(c0 + chunk, n)
            g = {k: v[c0:c1] for k, v in f.items()}
            optlen = np.select([g["opt"] == OPT_SYN, g["opt"] == OPT_SACK], [20, 24], 12)
            thl = 20 + optlen
            frame = 14 + 20 + thl + g["plen"]
            rec = 16 + frame
            rec_off = np.cumsum(rec) - rec
            buf = np.empty(int(rec.sum()), np.uint8)
            tcp_len = thl + g["plen"]
            # payload checksum part from the pool prefix sums
            s0, ln = g["pool"], g["plen"]
            s1 = s0 + ln
            ev = ce[(s1 + 1) // 2] - ce[(s0 + 1) // 2]  # bytes at even pool positions
            od = co[s1 // 2] - co[s0 // 2]
            hi = np.where(s0 % 2 == 0, ev, od)  # high bytes of the 16-bit words
            lo = np.where(s0 % 2 == 0, od, ev)
            pay_sum = (hi << 8) + lo
            pay_dst = rec_off + 16 + 14 + 20 + thl
            if tls is not None:
                # TLS record header bytes inside these payloads (by stream offset)
                tk, tv = tls
                sk = g["stream_key"]
                a = np.searchsorted(tk, sk, side="left")
                b = np.searchsorted(tk, sk + ln, side="left")
                cnt = np.where(ln > 0, b - a, 0)
                pi = np.repeat(np.arange(cnt.shape[0]), cnt)
                ki = a[pi] + np.arange(pi.shape[0]) - np.repeat(np.cumsum(cnt) - cnt, cnt)
                j = tk[ki] - sk[pi]  # position in the payload
                new = tv[ki].astype(np.int64)
                old = pool[s0[pi] + j].astype(np.int64)
                w = np.where(j % 2 == 0, 256, 1)
                pay_sum = pay_sum + np.bincount(
                    pi, weights=(new - old) * w, minlength=cnt.shape[0]
                ).astype(np.int64)
            for ok in (OPT_TS, OPT_SYN, OPT_SACK):
                sel = np.nonzero(g["opt"] == ok)[0]
                if sel.shape[0] == 0:
                    continue
                H = 16 + 54 + OPT_LEN[ok]
                h = np.zeros((sel.shape[0], H), np.uint8)
                ts = g["ts"][sel]
                sec = ts // NS
                sub = ts % NS if ns else (ts % NS) // 1000
                fl = frame[sel]
                _put(h, 0, sec, 4, True)
                _put(h, 4, sub, 4, True)
                _put(h, 8, fl, 4, True)
                _put(h, 12, fl, 4, True)
                # Ethernet: client MACs 02:00:0a:01:xx:xx, the gateway 02:00:00:00:00:01
                ch = g["client_host"][sel]
                cs = g["client_side"][sel]
                gw = np.array([2, 0, 0, 0, 0, 1], np.uint8)
                e = 16
                for side_client, col_cli, col_gw in ((True, e + 6, e), (False, e, e + 6)):
                    r = cs == side_client
                    h[np.ix_(r, np.arange(col_gw, col_gw + 6))] = gw
                    rr = np.nonzero(r)[0]
                    h[rr, col_cli] = 2
                    h[rr, col_cli + 1] = 0
                    h[rr, col_cli + 2] = 10
                    h[rr, col_cli + 3] = 1
                    h[rr, col_cli + 4] = (ch[r] >> 8) & 0xFF
                    h[rr, col_cli + 5] = ch[r] & 0xFF
                h[:, e + 12] = 0x08
                h[:, e + 13] = 0x00
                ip = 30
                h[:, ip] = 0x45
                _put(h, ip + 2, 20 + tcp_len[sel], 2)
                _put(h, ip + 4, g["ipid"][sel], 2)
                h[:, ip + 6] = 0x40
                h[:, ip + 8] = g["ttl"][sel]
                h[:, ip + 9] = 6
                _put(h, ip + 12, g["src_ip"][sel], 4)
                _put(h, ip + 16, g["dst_ip"][sel], 4)
                _put(h, ip + 10, _fold(_csum_words(h, ip, ip + 20)), 2)
                tcp = 50
                _put(h, tcp, g["sport"][sel], 2)
                _put(h, tcp + 2, g["dport"][sel], 2)
                _put(h, tcp + 4, g["seq"][sel], 4)
                _put(h, tcp + 8, g["ack"][sel], 4)
                h[:, tcp + 12] = (thl[sel] // 4) << 4
                h[:, tcp + 13] = g["flags"][sel]
                _put(h, tcp + 14, g["win"][sel], 2)
                o = tcp + 20
                if ok == OPT_SYN:
                    h[:, o : o + 4] = (2, 4, MSS >> 8, MSS & 0xFF)
                    h[:, o + 4 : o + 8] = (4, 2, 8, 10)
                    _put(h, o + 8, g["tsval"][sel], 4)
                    _put(h, o + 12, g["tsecr"][sel], 4)
                    h[:, o + 16 : o + 19] = (1, 3, 3)
                    h[:, o + 19] = g["wscale"][sel]
                else:
                    h[:, o : o + 4] = (1, 1, 8, 10)
                    _put(h, o + 4, g["tsval"][sel], 4)
                    _put(h, o + 8, g["tsecr"][sel], 4)
                    if ok == OPT_SACK:
                        h[:, o + 12 : o + 16] = (1, 1, 5, 10)
                        _put(h, o + 16, g["sack_l"][sel], 4)
                        _put(h, o + 20, g["sack_r"][sel], 4)
                pseudo = (
                    (g["src_ip"][sel] >> 16)
                    + (g["src_ip"][sel] & 0xFFFF)
                    + (g["dst_ip"][sel] >> 16)
                    + (g["dst_ip"][sel] & 0xFFFF)
                    + 6
                    + tcp_len[sel]
                )
                s = pseudo + _csum_words(h, tcp, H) + pay_sum[sel]
                _put(h, tcp + 16, _fold(s), 2)
                rows = np.lib.stride_tricks.as_strided(
                    buf, (buf.shape[0] - H + 1, H), (1, 1), writeable=True
                )
                rows[rec_off[sel]] = h
            # payload: gather from the pool (a function of stream offset)
            _copy_payloads(buf, pay_dst, pool, s0, ln)
            if tls is not None:
                buf[pay_dst[pi] + j] = tv[ki]
            out.write(buf)
            written += buf.shape[0]
    return written


QUIC_INITIAL = 1200  # a padded Initial datagram (RFC 9000 §14.1)
QUIC_SHORT_HDR = 1 + 8  # first byte, 8-byte destination connection ID
QUIC_ACK_ONLY = QUIC_SHORT_HDR + 31  # a 1-RTT packet carrying an ACK frame and the tag


def write_pcap_quic(
    path: str, f: dict[str, np.ndarray], pool: np.ndarray, ns: bool, chunk: int = 16384
) -> int:
    """The simulated connections carried over UDP as QUIC v1 (``--shape quic``).

    Every TCP packet of the model becomes one datagram: SYN / SYN-ACK → a 1200-byte
    long-header Initial, a data segment → a short-header 1-RTT packet of the segment's
    size plus its 9-byte header, a pure ACK / FIN / RST → a 40-byte 1-RTT packet.
    Header bytes are valid QUIC v1 (8-byte connection IDs per endpoint); everything
    after them is the pool's opaque bytes (no keys exist: nothing decrypts).  IPv4
    checksums are valid; the UDP checksum is 0 (allowed over IPv4, RFC 768).
    """
    n = f["ts"].shape[0]
    magic = 0xA1B23C4D if ns else 0xA1B2C3D4
    written = 0
    with open(path, "wb") as out:
        out.write(np.array([magic], "<u4").tobytes())
        out.write(np.array([2, 4], "<u2").tobytes())
        out.write(np.array([0, 0, 262144, 1], "<u4").tobytes())
        written += 24
        for c0 in range(0, n, chunk):
            c1 = min(c0 + chunk, n)
            g = {k: v[c0:c1] for k, v in f.items()}
            conn = g["conn"]
            long_ = (g["flags"] & F_SYN) != 0
            qlen = np.where(
                long_,
                QUIC_INITIAL,
                np.where(g["plen"] > 0, g["plen"] + QUIC_SHORT_HDR, QUIC_ACK_ONLY),
            )
            frame = 14 + 20 + 8 + qlen
            rec = 16 + frame
            rec_off = np.cumsum(rec) - rec
            buf = np.empty(int(rec.sum()), np.uint8)
            m = c1 - c0
            H = 16 + 42
            h = np.zeros((m, H), np.uint8)
            ts = g["ts"]
            _put(h, 0, ts // NS, 4, True)
            _put(h, 4, ts % NS if ns else (ts % NS) // 1000, 4, True)
            _put(h, 8, frame, 4, True)
            _put(h, 12, frame, 4, True)
            e = 16
            ch = g["client_host"]
            cs = g["client_side"]
            gw = np.array([2, 0, 0, 0, 0, 1], np.uint8)
            for side_client, col_cli, col_gw in ((True, e + 6, e), (False, e, e + 6)):
                r = cs == side_client
                h[np.ix_(r, np.arange(col_gw, col_gw + 6))] = gw
                rr = np.nonzero(r)[0]
                h[rr, col_cli : col_cli + 4] = (2, 0, 10, 1)
                h[rr, col_cli + 4] = (ch[r] >> 8) & 0xFF
                h[rr, col_cli + 5] = ch[r] & 0xFF
            h[:, e + 12] = 0x08
            ip = 30
            h[:, ip] = 0x45
            _put(h, ip + 2, 20 + 8 + qlen, 2)
            _put(h, ip + 4, g["ipid"], 2)
            h[:, ip + 6] = 0x40
            h[:, ip + 8] = g["ttl"]
            h[:, ip + 9] = 17
            _put(h, ip + 12, g["src_ip"], 4)
            _put(h, ip + 16, g["dst_ip"], 4)
            _put(h, ip + 10, _fold(_csum_words(h, ip, ip + 20)), 2)
            udp = 50
            _put(h, udp, g["sport"], 2)
            _put(h, udp + 2, g["dport"], 2)
            _put(h, udp + 4, 8 + qlen, 2)
            rows = np.lib.stride_tricks.as_strided(
                buf, (buf.shape[0] - H + 1, H), (1, 1), writeable=True
            )
            rows[rec_off] = h
            pay = rec_off + H
            _copy_payloads(buf, pay, pool, g["pool"], qlen)
            # QUIC headers over the opaque bytes; connection IDs: 8 bytes per endpoint
            dst_cid = conn * 2 + (1 - (~cs).astype(np.int64))  # the receiver's CID
            src_cid = conn * 2 + (~cs).astype(np.int64)
            lo = np.nonzero(long_)[0]
            if lo.shape[0]:
                lh = np.zeros((lo.shape[0], 26), np.uint8)
                lh[:, 0] = 0xC3  # long header, Initial, 4-byte packet number
                lh[:, 1:5] = (0, 0, 0, 1)
                lh[:, 5] = 8
                _put(lh, 6, 0x5143000000000000 + dst_cid[lo], 8)
                lh[:, 14] = 8
                _put(lh, 15, 0x5143000000000000 + src_cid[lo], 8)
                lh[:, 23] = 0  # token length
                _put(lh, 24, 0x4000 | (QUIC_INITIAL - 26), 2)
                rows26 = np.lib.stride_tricks.as_strided(
                    buf, (buf.shape[0] - 26 + 1, 26), (1, 1), writeable=True
                )
                rows26[pay[lo]] = lh
            sh = np.nonzero(~long_)[0]
            if sh.shape[0]:
                hh = np.zeros((sh.shape[0], QUIC_SHORT_HDR), np.uint8)
                hh[:, 0] = 0x43  # short header, fixed bit, 4-byte packet number
                _put(hh, 1, 0x5143000000000000 + dst_cid[sh], 8)
                rows9 = np.lib.stride_tricks.as_strided(
                    buf, (buf.shape[0] - QUIC_SHORT_HDR + 1, QUIC_SHORT_HDR), (1, 1), writeable=True
                )
                rows9[pay[sh]] = hh
            out.write(buf)
            written += buf.shape[0]
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "-n",
        "--packets",
        type=int,
        default=1_000_000,
        help="at least this many packets (whole connections are kept)",
    )
    ap.add_argument("-o", "--output", default="benchmarks/out/big.pcap")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="mean number of open connections (default 300, or the shape's)",
    )
    ap.add_argument(
        "--shape",
        choices=("mixed", *SHAPES),
        default="mixed",
        help="traffic shape (issue 16): mixed (default), bulk, sse, h2, quic — see SHAPES",
    )
    ap.add_argument(
        "--ns", action="store_true", help="nanosecond timestamps (default: microseconds)"
    )
    ap.add_argument(
        "--loss", type=float, default=None, help=f"data segments lost (fraction; default {LOSS_P})"
    )
    ap.add_argument(
        "--reorder", type=float, default=REORDER_P, help="segments reordered (fraction)"
    )
    ap.add_argument(
        "--port-reuse",
        type=float,
        default=None,
        help=f"connections reusing a closed 5-tuple (fraction; default {PORT_REUSE_P})",
    )
    ap.add_argument(
        "--payload",
        choices=("tls", "random"),
        default=PAYLOAD,
        help="tls: TLS 1.3 application-data records on port 443 (default); random: opaque "
        "bytes on ports 7443/8443/9000/9443 (tshark's heuristic dissectors then misfire on a few)",
    )
    ap.add_argument("--no-manifest", action="store_true", help="do not write <output>.json")
    a = ap.parse_args(argv)
    preset = SHAPES.get(a.shape, {})
    loss = a.loss if a.loss is not None else preset.get("loss", LOSS_P)
    conc = a.concurrency if a.concurrency is not None else preset.get("concurrency", 300)
    globals().update(
        LOSS_P=loss,
        REORDER_P=a.reorder,
        PORT_REUSE_P=a.port_reuse
        if a.port_reuse is not None
        else preset.get("port_reuse", PORT_REUSE_P),
        PAYLOAD=a.payload,
        SHAPE=a.shape,
        KIND_P=preset.get("kind_p", KIND_P),
    )
    t0 = time.perf_counter()
    fields, tls, manifest = simulate(a.packets, a.seed, conc)
    t1 = time.perf_counter()
    pool_rng = np.random.default_rng([a.seed, 0x9E3779B9])
    pool = pool_rng.integers(0, 256, POOL_SIZE, dtype=np.uint8)
    pool = np.concatenate([pool, pool[:POOL_PAD]])
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    if a.shape == "quic":
        size = write_pcap_quic(a.output, fields, pool, a.ns)
    else:
        size = write_pcap(a.output, fields, pool, a.ns, tls if a.payload == "tls" else None)
    t2 = time.perf_counter()
    manifest["file_bytes"] = size
    manifest["timestamps"] = "ns" if a.ns else "us"
    if not a.no_manifest:
        with open(a.output + ".json", "w") as fh:
            json.dump(manifest, fh, indent=1)
    k = manifest["kinds"]
    print(
        f"{a.output}: {manifest['packets']} packets, {manifest['connections']} connections "
        f"({', '.join(f'{v} {n}' for n, v in k.items())}; {manifest['port_reuse']} reuse a 5-tuple), "
        f"{manifest['span_s']:.1f} s, {size / 1e6:.1f} MB; "
        f"{manifest['data_segments_lost']} segments lost, {manifest['data_segments_reordered']} reordered; "
        f"simulate {t1 - t0:.1f} s, write {t2 - t1:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Vectorised link → IP → TCP/UDP decoding into packet-table columns.

Every field is gathered with numpy from the capture's byte array; the only
Python loops run over link types, over the (≤ 8) links of an IPv6
extension-header chain and over the (≤ 40) bytes of TCP option space — each
iteration processing all packets at once.

Link types: Ethernet (DLT 1, with 802.1Q / 802.1ad / QinQ tags), raw IP (12, 14,
101, 228 IPv4, 229 IPv6), BSD NULL (0) and OpenBSD LOOP (108), Linux SLL (113)
and SLL2 (276), PPP (9, 50).  IPv4 (RFC 791, options skipped by IHL; fragments
are reported, not reassembled), IPv6 (RFC 8200 §4 extension headers), TCP
(RFC 9293 §3.1; options MSS, window scale RFC 7323 §2, SACK-permitted and SACK
RFC 2018, timestamps RFC 7323 §3), UDP (RFC 768).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._parallel import map_in_threads
from ..io.reader import HEAD_BYTES, RawCapture, rows_at

# Cap on anomaly rows of one kind: a capture full of fragments must not turn into
# a million Python dicts.  The rest is summarised in one extra row.
MAX_ANOMALY_ROWS_PER_KIND = 10_000

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
MAX_VLAN_TAGS = 4  # QinQ stacks deeper than this are not real traffic

IPV6_EXT = (0, 43, 44, 51, 60, 135, 139, 140)  # RFC 8200 §4 + AH, Mobility, HIP, Shim6
MAX_IPV6_EXT = 8

PROTO_TCP = 6
PROTO_UDP = 17

LINKTYPE_NAMES = {
    0: "null",
    1: "ethernet",
    9: "ppp",
    12: "raw",
    14: "raw",
    50: "ppp_hdlc",
    101: "raw",
    108: "loop",
    113: "linux_sll",
    228: "ipv4",
    229: "ipv6",
    276: "linux_sll2",
}
SUPPORTED_LINKTYPES = frozenset(LINKTYPE_NAMES)

# TCP flag bits (RFC 9293 §3.1, RFC 3168 for ECE/CWR, RFC 3540 for NS/AE)
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR, NS = 1, 2, 4, 8, 16, 32, 64, 128, 256


@dataclass
class Decoded:
    """Per-packet columns (all arrays of length n) plus sparse side tables.

    Addresses: ``cols["src4"]``/``cols["dst4"]`` hold IPv4 addresses as uint32;
    IPv6 packets are listed in ``v6_idx`` with their addresses in ``src6``/``dst6``
    (k × 16 bytes) — no 16-byte array per packet.  SACK blocks likewise live only
    for the packets that carry them (``sack_idx``, ``sack_blocks`` k × 4 × 2).
    """

    cols: dict[str, np.ndarray]
    v6_idx: np.ndarray
    src6: np.ndarray
    dst6: np.ndarray
    sack_idx: np.ndarray
    sack_blocks: np.ndarray
    anomalies: list[dict[str, Any]] = field(default_factory=list)

    def sack(self, i: int) -> list[tuple[int, int]]:
        """Raw SACK blocks of packet index ``i`` (0-based)."""
        k = int(np.searchsorted(self.sack_idx, i))
        if k >= self.sack_idx.shape[0] or self.sack_idx[k] != i:
            return []
        n = int(self.cols["sack_n"][i])
        return [(int(a), int(b)) for a, b in self.sack_blocks[k][:n]]


class _Bytes:
    """Bounded reads of one chunk's packets.

    Every read names its packets (``rows``, indices into the chunk) and absolute
    offsets in the capture buffer; ``end`` is the per-packet end of captured data.
    Reads past it yield 0 and a False entry in the returned mask, never an
    IndexError.  Reads inside the first :data:`~pcapkit.io.reader.HEAD_BYTES` of a
    packet come from a compact copy of those bytes (``head``: the reader's, else
    gathered here once), the rest from the file.
    """

    def __init__(self, buf: np.ndarray, start: np.ndarray, head: np.ndarray | None) -> None:
        self.buf = buf
        self.start = start
        n = buf.shape[0]
        self.w = HEAD_BYTES if n >= HEAD_BYTES else 0
        # a packet whose window would run past the end of the file reads from the file
        self.has_head = (start + self.w <= n) if self.w else np.zeros(start.shape[0], bool)
        if self.w:
            if head is None:
                head = rows_at(buf, np.where(self.has_head, start, 0), self.w)
            self.head = np.ascontiguousarray(head).reshape(-1)

    def header(
        self, rows: np.ndarray, idx: np.ndarray, end: np.ndarray, width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``width`` bytes at each offset as an (n, width) matrix; rows not fully captured are zero."""
        ok = idx + width <= end
        m = idx.shape[0]
        k = idx - self.start[rows]
        hit = ok & (k >= 0) & (k + width <= self.w) & self.has_head[rows]
        if m and hit.all():
            h = rows_at(self.head, rows * self.w + k, width)
        else:
            h = np.zeros((m, width), np.uint8)
            if hit.any():
                h[hit] = rows_at(self.head, (rows * self.w + k)[hit], width)
            miss = ok & ~hit
            if miss.any():
                h[miss] = rows_at(self.buf, idx[miss], width)
        return h, ok

    def u8(
        self, rows: np.ndarray, idx: np.ndarray, end: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        h, ok = self.header(rows, idx, end, 1)
        return h[:, 0].astype(np.int64), ok

    def u16(
        self, rows: np.ndarray, idx: np.ndarray, end: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        h, ok = self.header(rows, idx, end, 2)
        return _be16(h, 0), ok

    def u32(
        self, rows: np.ndarray, idx: np.ndarray, end: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        h, ok = self.header(rows, idx, end, 4)
        return _be32(h, 0), ok

    def u32le(
        self, rows: np.ndarray, idx: np.ndarray, end: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        h, ok = self.header(rows, idx, end, 4)
        return np.ascontiguousarray(h).view("<u4").reshape(-1).astype(np.int64), ok


def _be16(h: np.ndarray, o: int) -> np.ndarray:
    return (h[:, o].astype(np.int64) << 8) | h[:, o + 1]


def _be32(h: np.ndarray, o: int) -> np.ndarray:
    return np.ascontiguousarray(h[:, o : o + 4]).view(">u4").reshape(-1).astype(np.int64)


class _Anoms:
    def __init__(self, base: int = 0) -> None:
        self.rows: list[dict[str, Any]] = []
        self.base = base  # index of the chunk's first packet

    def add(self, name: str, frames_idx: np.ndarray, detail: str | list[str]) -> None:
        idx = np.asarray(frames_idx)
        if idx.shape[0] == 0:
            return
        shown = idx[:MAX_ANOMALY_ROWS_PER_KIND]
        for k, i in enumerate(shown.tolist()):
            d = detail if isinstance(detail, str) else detail[k]
            self.rows.append(
                {"name": name, "frame": i + 1, "flow": None, "offset": None, "detail": d}
            )
        if idx.shape[0] > shown.shape[0]:
            self.rows.append(
                {
                    "name": name,
                    "frame": None,
                    "flow": None,
                    "offset": None,
                    "detail": f"{idx.shape[0] - shown.shape[0]} more frames with this anomaly not listed",
                }
            )


# Packets decoded per chunk: bounds the temporaries of the vectorised decode
# (a few dozen int64 arrays per chunk: ~50 MB at 2^17 packets) whatever the file
# size; chunks run on up to MAX_THREADS threads, so that many are alive at once.
DECODE_CHUNK = 1 << 17


def decode(cap: RawCapture) -> Decoded:
    """Decode every frame of ``cap`` into packet-table columns (chunk by chunk).

    Chunks are independent: after the first (which fixes the column dtypes) they
    run on a few threads (:mod:`pcapkit._parallel`), each writing its slice of the
    columns; the result does not depend on the thread count.
    """
    n = cap.frames
    linktype = cap.linktype
    if n <= DECODE_CHUNK:
        return _decode_chunk(cap, linktype, 0, n)
    cols: dict[str, np.ndarray] = {}

    def one(lo: int) -> Decoded:
        hi = min(lo + DECODE_CHUNK, n)
        part = _decode_chunk(cap, linktype, lo, hi)
        if not cols:
            cols.update({k: np.empty(n, v.dtype) for k, v in part.cols.items()})
        for k, v in part.cols.items():
            cols[k][lo:hi] = v
        part.cols = {}  # only the sparse tables are kept
        part.v6_idx = part.v6_idx + lo
        part.sack_idx = part.sack_idx + lo
        # this chunk's headers are decoded: let its pages go (bounded RSS)
        cap.release(
            int(cap.data_off[lo:hi].min()), int((cap.data_off[lo:hi] + cap.caplen[lo:hi]).max())
        )
        return part

    starts = list(range(0, n, DECODE_CHUNK))
    side = [one(starts[0])] + map_in_threads(one, starts[1:])
    return Decoded(
        cols=cols,
        v6_idx=np.concatenate([p.v6_idx for p in side]),
        src6=np.concatenate([p.src6 for p in side]),
        dst6=np.concatenate([p.dst6 for p in side]),
        sack_idx=np.concatenate([p.sack_idx for p in side]),
        sack_blocks=np.concatenate([p.sack_blocks for p in side]),
        anomalies=[a for p in side for a in p.anomalies],
    )


def _decode_chunk(cap: RawCapture, linktype_all: np.ndarray, lo: int, hi: int) -> Decoded:
    n = hi - lo
    g = _Bytes(cap.buf, cap.data_off[lo:hi], cap.head_rows(lo, hi))
    an = _Anoms(lo)
    start = cap.data_off[lo:hi]
    end = start + cap.caplen[lo:hi]  # end of captured bytes
    rep_end = start + np.maximum(
        cap.origlen[lo:hi], cap.caplen[lo:hi]
    )  # end of reported (wire) bytes
    linktype = linktype_all[lo:hi]

    l3 = np.full(n, -1, np.int64)  # offset of the IP header
    l3_kind = np.zeros(n, np.int64)  # 4, 6 or 0
    vlan_n = np.zeros(n, np.int8)

    # ---- link layer -------------------------------------------------------
    for lt in np.unique(linktype).tolist():
        sel = np.nonzero(linktype == lt)[0]
        s, e = start[sel], end[sel]
        if lt == 1:  # Ethernet II, 802.1Q/802.1ad tags
            pos = s + 12
            et, ok = g.u16(sel, pos, e)
            tags = np.zeros(sel.shape[0], np.int8)
            for _ in range(MAX_VLAN_TAGS):
                tagged = ok & np.isin(et, VLAN_TPIDS)
                if not tagged.any():
                    break
                pos = np.where(tagged, pos + 4, pos)
                tags += tagged
                et2, ok2 = g.u16(sel, pos, e)
                et = np.where(tagged, et2, et)
                ok = np.where(tagged, ok2, ok)
            vlan_n[sel] = tags
            _set_l3(l3, l3_kind, sel, pos + 2, et, ok)
        elif lt in (0, 108):  # BSD NULL (host order) / OpenBSD LOOP (network order)
            fam_be, ok = g.u32(sel, s, e)
            if lt == 0:
                fam_le, _ = g.u32le(sel, s, e)
                fam = np.where((fam_be & 0xFFFF0000) != 0, fam_le, fam_be)
            else:
                fam = fam_be
            kind = np.where(fam == 2, 4, np.where(np.isin(fam, (10, 24, 28, 30)), 6, 0))
            l3[sel] = np.where(ok & (kind > 0), s + 4, -1)
            l3_kind[sel] = np.where(ok, kind, 0)
        elif lt in (12, 14, 101, 228, 229):
            v, ok = g.u8(sel, s, e)
            ver = v >> 4
            kind = np.where(ver == 4, 4, np.where(ver == 6, 6, 0))
            if lt == 228:
                kind = np.where(ok, 4, 0)
            elif lt == 229:
                kind = np.where(ok, 6, 0)
            l3[sel] = np.where(ok & (kind > 0), s, -1)
            l3_kind[sel] = kind
        elif lt == 113:  # Linux cooked v1: protocol at 14, header 16 bytes
            et, ok = g.u16(sel, s + 14, e)
            _set_l3(l3, l3_kind, sel, s + 16, et, ok)
        elif lt == 276:  # Linux cooked v2: protocol at 0, header 20 bytes
            et, ok = g.u16(sel, s, e)
            _set_l3(l3, l3_kind, sel, s + 20, et, ok)
        elif lt in (9, 50):  # PPP (RFC 1661), optional HDLC address/control ff 03
            b0, ok0 = g.u8(sel, s, e)
            b1, _ = g.u8(sel, s + 1, e)
            pos = np.where(ok0 & (b0 == 0xFF) & (b1 == 0x03), s + 2, s)
            p0, ok = g.u8(sel, pos, e)
            pfc = (p0 & 1) == 1  # protocol field compression: one byte
            p16, ok16 = g.u16(sel, pos, e)
            proto = np.where(pfc, p0, p16)
            ok = np.where(pfc, ok, ok16)
            kind = np.where(proto == 0x21, 4, np.where(proto == 0x57, 6, 0))
            l3[sel] = np.where(ok & (kind > 0), pos + np.where(pfc, 1, 2), -1)
            l3_kind[sel] = np.where(ok, kind, 0)
        # unsupported link types are reported per interface by the caller

    # ---- IP ---------------------------------------------------------------
    ip_version = np.zeros(n, np.int8)
    ip_proto = np.full(n, -1, np.int16)
    ttl = np.zeros(n, np.int16)
    ip_id = np.zeros(n, np.int32)
    l4 = np.full(n, -1, np.int64)
    l4_rep_end = np.zeros(n, np.int64)  # end of the L4 segment as the IP header reports it
    frag = np.zeros(n, bool)
    src4 = np.zeros(n, np.uint32)
    dst4 = np.zeros(n, np.uint32)

    v4 = np.nonzero(l3_kind == 4)[0]
    if v4.shape[0]:
        p, e, re = l3[v4], end[v4], rep_end[v4]
        h, ok = g.header(v4, p, e, 20)
        vihl = h[:, 0].astype(np.int64)
        ihl = (vihl & 0x0F) * 4
        good = ok & ((vihl >> 4) == 4) & (ihl >= 20) & (p + ihl <= e)
        an.add("ip_bad_header", v4[~good], "IPv4 header is cut short, has version != 4 or IHL < 5")
        tot = _be16(h, 2)
        ident = _be16(h, 4)
        ff = _be16(h, 6)
        t8 = h[:, 8]
        pr = h[:, 9]
        reported = re - p
        # ip.len == 0 happens in captures of TSO-offloaded packets: use the frame length
        ip_len = np.where(tot == 0, reported, tot)
        too_long = good & (ip_len > reported)
        an.add(
            "ip_length_exceeds_frame", v4[too_long], "IPv4 total length is larger than the frame"
        )
        ip_len = np.minimum(ip_len, reported)
        short = good & (ip_len < ihl)
        an.add("ip_bad_header", v4[short], "IPv4 total length smaller than its header")
        good &= ~short
        mf = (ff & 0x2000) != 0
        foff = ff & 0x1FFF
        is_frag = good & (mf | (foff > 0))
        an.add("ip_fragment", v4[is_frag], "IPv4 fragment (fragments are not reassembled)")
        sel = v4[good]
        ip_version[sel] = 4
        ip_proto[sel] = pr[good]
        ttl[sel] = t8[good]
        ip_id[sel] = ident[good]
        frag[v4[is_frag]] = True
        l4[sel] = (p + ihl)[good]
        l4_rep_end[sel] = (p + ip_len)[good]
        src4[sel] = _be32(h, 12)[good]
        dst4[sel] = _be32(h, 16)[good]

    v6 = np.nonzero(l3_kind == 6)[0]
    if v6.shape[0]:
        p, e, re = l3[v6], end[v6], rep_end[v6]
        b0, ok = g.u8(v6, p, e)
        good = ok & ((b0 >> 4) == 6) & (p + 40 <= e)
        an.add("ip_bad_header", v6[~good], "IPv6 header is cut short or version != 6")
        plen, _ = g.u16(v6, p + 4, e)
        nh, _ = g.u8(v6, p + 6, e)
        hl, _ = g.u8(v6, p + 7, e)
        reported = re - p - 40
        plen = np.where(plen == 0, reported, plen)  # jumbogram / TSO: take the frame
        too_long = good & (plen > reported)
        an.add(
            "ip_length_exceeds_frame", v6[too_long], "IPv6 payload length is larger than the frame"
        )
        plen = np.minimum(plen, np.maximum(reported, 0))
        pay_end = p + 40 + plen
        pos = p + 40
        is_frag = np.zeros(v6.shape[0], bool)
        bad_ext = np.zeros(v6.shape[0], bool)
        for _ in range(MAX_IPV6_EXT):
            ext = good & ~bad_ext & np.isin(nh, IPV6_EXT)
            if not ext.any():
                break
            nxt, ok1 = g.u8(v6, pos, e)
            hlen8, ok2 = g.u8(v6, pos + 1, e)
            ln = np.where(nh == 44, 8, np.where(nh == 51, (hlen8 + 2) * 4, (hlen8 + 1) * 8))
            fo, _ = g.u16(v6, pos + 2, e)
            fr = ext & (nh == 44) & (((fo >> 3) > 0) | ((fo & 1) == 1))
            is_frag |= fr
            bad_ext |= ext & ~(ok1 & ok2 & (pos + ln <= pay_end))
            pos = np.where(ext, pos + ln, pos)
            nh = np.where(ext, nxt, nh)
        an.add("ip_bad_header", v6[bad_ext], "IPv6 extension header chain runs past the packet")
        an.add(
            "ip_fragment", v6[is_frag & ~bad_ext], "IPv6 fragment (fragments are not reassembled)"
        )
        good &= ~bad_ext
        sel = v6[good]
        ip_version[sel] = 6
        ip_proto[sel] = nh[good]
        ttl[sel] = hl[good]
        frag[v6[is_frag & good]] = True
        l4[sel] = pos[good]
        l4_rep_end[sel] = pay_end[good]
        src6, _ = g.header(v6[good], (p + 8)[good], e[good], 16)
        dst6, _ = g.header(v6[good], (p + 24)[good], e[good], 16)
        v6_idx = sel
    else:
        v6_idx = np.zeros(0, np.int64)
        src6 = np.zeros((0, 16), np.uint8)
        dst6 = np.zeros((0, 16), np.uint8)

    # fragments carry no usable transport header for us
    l4[frag] = -1

    # ---- TCP --------------------------------------------------------------
    sport = np.zeros(n, np.int32)
    dport = np.zeros(n, np.int32)
    seq = np.zeros(n, np.int64)
    ack = np.zeros(n, np.int64)
    flags = np.zeros(n, np.int16)
    window = np.zeros(n, np.int32)
    tcp_hdr_len = np.zeros(n, np.int16)
    payload_off = np.zeros(n, np.int64)
    payload_len = np.zeros(n, np.int64)  # reported (on the wire)
    payload_caplen = np.zeros(n, np.int64)  # captured
    mss = np.full(n, -1, np.int32)
    wscale = np.full(n, -1, np.int16)
    sack_perm = np.zeros(n, bool)
    tsval = np.full(n, -1, np.int64)
    tsecr = np.full(n, -1, np.int64)
    sack_n = np.zeros(n, np.int8)
    sack: dict[str, np.ndarray] = {}
    l4proto = np.zeros(n, np.int8)  # 6 / 17 when the transport header was decoded

    t = np.nonzero((l4 >= 0) & (ip_proto == PROTO_TCP))[0]
    if t.shape[0]:
        p, e, rend = l4[t], end[t], l4_rep_end[t]
        ok = p + 20 <= e
        an.add("tcp_truncated_header", t[~ok], "TCP header is cut short in the capture")
        t, p, e, rend = t[ok], p[ok], e[ok], rend[ok]
        h, _ = g.header(t, p, e, 20)
        sp = _be16(h, 0)
        dp = _be16(h, 2)
        sq = _be32(h, 4)
        ak = _be32(h, 8)
        b12 = h[:, 12].astype(np.int64)
        b13 = h[:, 13].astype(np.int64)
        win = _be16(h, 14)
        del h
        doff = (b12 >> 4) * 4
        bad = (doff < 20) | (p + doff > rend)
        an.add("tcp_bad_header_len", t[bad], "TCP data offset < 5 words or beyond the IP payload")
        t, p, e, rend = t[~bad], p[~bad], e[~bad], rend[~bad]
        sp, dp, sq, ak, b12, b13, win, doff = (
            a[~bad] for a in (sp, dp, sq, ak, b12, b13, win, doff)
        )
        l4proto[t] = PROTO_TCP
        sport[t] = sp
        dport[t] = dp
        seq[t] = sq
        ack[t] = ak
        flags[t] = ((b12 & 1) << 8) | b13
        window[t] = win
        tcp_hdr_len[t] = doff
        po = p + doff
        payload_off[t] = po
        payload_len[t] = rend - po
        payload_caplen[t] = np.clip(e - po, 0, rend - po)
        cut = payload_caplen[t] < payload_len[t]
        an.add("snaplen_truncated_payload", t[cut], "TCP payload not fully captured (snaplen)")
        _tcp_options(
            g,
            t,
            p + 20,
            np.minimum(p + doff, e),
            mss,
            wscale,
            sack_perm,
            tsval,
            tsecr,
            sack_n,
            sack,
            an,
        )

    # ---- UDP --------------------------------------------------------------
    u = np.nonzero((l4 >= 0) & (ip_proto == PROTO_UDP))[0]
    if u.shape[0]:
        p, e, rend = l4[u], end[u], l4_rep_end[u]
        ok = p + 8 <= e
        an.add("udp_truncated_header", u[~ok], "UDP header is cut short in the capture")
        u, p, e, rend = u[ok], p[ok], e[ok], rend[ok]
        sp, _ = g.u16(u, p, e)
        dp, _ = g.u16(u, p + 2, e)
        ulen, _ = g.u16(u, p + 4, e)
        avail = rend - p
        bad = (ulen < 8) | (ulen > avail)
        an.add("udp_bad_length", u[bad], "UDP length field is < 8 or beyond the IP payload")
        ulen = np.where(bad, avail, ulen)
        l4proto[u] = PROTO_UDP
        sport[u] = sp
        dport[u] = dp
        payload_off[u] = p + 8
        payload_len[u] = np.maximum(ulen - 8, 0)
        payload_caplen[u] = np.clip(e - (p + 8), 0, payload_len[u])

    cols = {
        "src4": src4,
        "dst4": dst4,
        "vlan_tags": vlan_n,
        "ip_version": ip_version,
        "ip_proto": ip_proto,
        "ttl": ttl,
        "ip_id": ip_id,
        "ip_fragment": frag,
        "l4": l4proto,
        "sport": sport,
        "dport": dport,
        "tcp_seq": seq,
        "tcp_ack": ack,
        "tcp_flags": flags,
        "tcp_window": window,
        "tcp_hdr_len": tcp_hdr_len,
        "mss": mss,
        "wscale": wscale,
        "sack_perm": sack_perm,
        "tsval": tsval,
        "tsecr": tsecr,
        "sack_n": sack_n,
        "payload_off": payload_off,
        "payload_len": payload_len,
        "payload_caplen": payload_caplen,
    }
    sack_idx = sack.get("idx", np.zeros(0, np.int64))
    sack_blocks = sack.get("blocks", np.zeros((0, 4, 2), np.uint32))
    return Decoded(
        cols=cols,
        v6_idx=v6_idx,
        src6=src6,
        dst6=dst6,
        sack_idx=sack_idx,
        sack_blocks=sack_blocks,
        anomalies=an.rows,
    )


def _set_l3(
    l3: np.ndarray,
    l3_kind: np.ndarray,
    sel: np.ndarray,
    pos: np.ndarray,
    et: np.ndarray,
    ok: np.ndarray,
) -> None:
    kind = np.where(et == ETH_IPV4, 4, np.where(et == ETH_IPV6, 6, 0))
    kind = np.where(ok, kind, 0)
    l3[sel] = np.where(kind > 0, pos, -1)
    l3_kind[sel] = kind


def _tcp_options(
    g: _Bytes,
    t: np.ndarray,
    pos: np.ndarray,
    oend: np.ndarray,
    mss: np.ndarray,
    wscale: np.ndarray,
    sack_perm: np.ndarray,
    tsval: np.ndarray,
    tsecr: np.ndarray,
    sack_n: np.ndarray,
    sack: dict[str, np.ndarray],
    an: _Anoms,
) -> None:
    """Walk TCP options of all packets in lockstep (≤ 40 steps: 40 bytes of option space).

    Fast path first: the layout Linux puts on almost every non-SYN segment —
    NOP, NOP, Timestamps (``01 01 08 0a``) and nothing else (a 32-byte header) —
    is read at fixed offsets; only the other packets take the walk.
    """
    active = pos < oend
    t, pos, oend = t[active], pos[active], oend[active]
    if t.shape[0]:
        h, ok = g.header(t, pos, oend, 12)
        fast = (
            ok
            & (oend - pos == 12)
            & (h[:, 0] == 1)
            & (h[:, 1] == 1)
            & (h[:, 2] == 8)
            & (h[:, 3] == 10)
        )
        if fast.any():
            tf, hf = t[fast], h[fast]
            tsval[tf] = _be32(hf, 4)
            tsecr[tf] = _be32(hf, 8)
            t, pos, oend = t[~fast], pos[~fast], oend[~fast]
    malformed = np.zeros(t.shape[0], bool)
    live = np.ones(t.shape[0], bool)
    blocks = np.zeros((t.shape[0], 4, 2), np.uint32)
    has_sack = np.zeros(t.shape[0], bool)
    for _ in range(40):
        live &= pos < oend
        if not live.any():
            break
        kind, _ = g.u8(t, pos, oend)
        eol = live & (kind == 0)
        live &= ~eol
        nop = live & (kind == 1)
        ln, okl = g.u8(t, pos + 1, oend)
        other = live & ~nop
        bad = other & (~okl | (ln < 2) | (pos + ln > oend))
        malformed |= bad
        live &= ~bad
        other &= ~bad
        k = other & (kind == 2) & (ln == 4)
        if k.any():
            v, _ = g.u16(t, pos + 2, oend)
            mss[t[k]] = v[k]
        k = other & (kind == 3) & (ln == 3)
        if k.any():
            v, _ = g.u8(t, pos + 2, oend)
            wscale[t[k]] = v[k]
        k = other & (kind == 4) & (ln == 2)
        sack_perm[t[k]] = True
        k = other & (kind == 8) & (ln == 10)
        if k.any():
            a, _ = g.u32(t, pos + 2, oend)
            b, _ = g.u32(t, pos + 6, oend)
            tsval[t[k]] = a[k]
            tsecr[t[k]] = b[k]
        k = other & (kind == 5) & (ln >= 10) & ((ln - 2) % 8 == 0)
        if k.any():
            nb = np.minimum((ln - 2) // 8, 4)
            for j in range(4):
                kj = k & (nb > j)
                if not kj.any():
                    break
                a, _ = g.u32(t, pos + 2 + 8 * j, oend)
                b, _ = g.u32(t, pos + 6 + 8 * j, oend)
                blocks[kj, j, 0] = a[kj]
                blocks[kj, j, 1] = b[kj]
            sack_n[t[k]] = nb[k]
            has_sack |= k
        pos = np.where(nop, pos + 1, np.where(other, pos + ln, pos))
    an.add("tcp_bad_option", t[malformed], "TCP option with a bad length")
    sack["idx"] = t[has_sack]
    sack["blocks"] = blocks[has_sack]

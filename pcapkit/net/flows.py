"""Flows: connection identity, client/server roles, handshake parameters, RTT legs.

Connection identity follows Wireshark's ``tcp.stream`` / ``udp.stream``
(epan/dissectors/packet-tcp.c, packet-udp.c): packets are grouped by their
unordered 5-tuple; for TCP, a SYN (without ACK) whose sequence number differs
from the base sequence number of the current connection in its direction starts
a new connection on the same 5-tuple ("TCP port numbers reused") — which is what
happens when a client reconnects after FIN/RST.  Flow ids are global, in order of
first frame; ``stream`` is the per-protocol index that Wireshark shows, so
``tcp.stream == N`` opens the same connection there.

Roles: the sender of the SYN is the client; else the receiver of the SYN/ACK;
else (capture started mid-connection, UDP) the port heuristic below.
RTT legs (DETECTION.md §1.1): d_S = t(SYN/ACK) − t(SYN), d_C = t(ACK of the
SYN/ACK) − t(SYN/ACK), both at the capture point; their ratio places the vantage.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .decode import ACK, FIN, PROTO_TCP, PROTO_UDP, RST, SYN, Decoded

# Ports below this are "well known" (IANA system ports, RFC 6335 §6).
WELL_KNOWN_PORT_MAX = 1023
# Linux's default ephemeral range starts at 32768 (net.ipv4.ip_local_port_range),
# IANA's at 49152; a port at or above 32768 facing one below it is a client port.
EPHEMERAL_PORT_MIN = 32768
# A leg at most this fraction of the other puts the capture point beside that
# end (client-side capture: d_C ≈ tens of µs vs d_S ≈ RTT; DETECTION.md §1.1).
VANTAGE_LEG_RATIO = 0.1

NO_IDX = np.iinfo(np.int64).max


@dataclass
class FlowTable:
    """Per-packet flow assignment and per-flow attributes (arrays)."""

    pkt_flow: np.ndarray  # int64 per packet, -1 if not TCP/UDP
    pkt_dir: np.ndarray  # int8 per packet: 0 client→server, 1 server→client, -1 none
    addr_strings: list[str]  # address id -> text
    pkt_src_addr: np.ndarray  # int32 address id per packet (-1 none)
    pkt_dst_addr: np.ndarray
    # per flow
    proto: np.ndarray  # 6 / 17
    stream: np.ndarray  # Wireshark's tcp.stream / udp.stream
    client_addr: np.ndarray
    client_port: np.ndarray
    server_addr: np.ndarray
    server_port: np.ndarray
    roles_from: list[str]
    first_idx: np.ndarray
    last_idx: np.ndarray

    @property
    def count(self) -> int:
        return int(self.proto.shape[0])


def _addresses(dec: Decoded, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Small integer ids for the addresses of the selected packets (IPv4 first, then IPv6)."""
    c = dec.cols
    n = c["l4"].shape[0]
    src_id = np.full(n, -1, np.int32)
    dst_id = np.full(n, -1, np.int32)
    if sel.shape[0] == 0:
        return src_id, dst_id, []
    is4 = np.zeros(n, bool)
    is4[sel] = c["ip_version"][sel] == 4
    s4 = np.nonzero(is4)[0]
    strings: list[str] = []
    if s4.shape[0]:
        both = np.concatenate([c["src4"][s4], c["dst4"][s4]])
        uniq, inv = _sorted_ids(both)
        src_id[s4] = inv[: s4.shape[0]]
        dst_id[s4] = inv[s4.shape[0] :]
        strings = [str(ipaddress.IPv4Address(int(u))) for u in uniq]
    # IPv6: only the packets that have it; v6_idx is sorted, select those in sel
    is6 = np.zeros(n, bool)
    is6[sel] = c["ip_version"][sel] == 6
    k = np.nonzero(is6[dec.v6_idx])[0] if dec.v6_idx.shape[0] else np.zeros(0, np.int64)
    if k.shape[0]:
        rows = dec.v6_idx[k]
        both6 = np.concatenate([dec.src6[k], dec.dst6[k]])
        view = np.ascontiguousarray(both6).view(np.dtype((np.void, 16))).reshape(-1)
        uniq6, inv6 = np.unique(view, return_inverse=True)
        inv6 = inv6.reshape(-1) + len(strings)
        src_id[rows] = inv6[: rows.shape[0]]
        dst_id[rows] = inv6[rows.shape[0] :]
        strings += [str(ipaddress.IPv6Address(bytes(u))) for u in uniq6]
    return src_id, dst_id, strings


def _sorted_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` by hashing: a capture holds few
    distinct addresses, so a hash table (``pandas.factorize``) beats sorting every
    packet's address; ids are ranks in sorted order, exactly as ``np.unique`` numbers them.
    """
    codes, uniq = pd.factorize(values)
    order = np.argsort(uniq, kind="stable")
    rank = np.empty(order.shape[0], np.int64)
    rank[order] = np.arange(order.shape[0])
    return uniq[order], rank[codes]


def _group_ids(*keys: np.ndarray) -> np.ndarray:
    """Dense ids of equal key tuples, numbered in order of first occurrence.

    Each key is factorised (hashing, no sort over the packets) and folded into the
    codes so far; every fold stays below m² < 2**63, so no tuple is ever merged.
    """
    m = keys[0].shape[0]
    if m == 0:
        return np.zeros(0, np.int64)
    codes, _ = pd.factorize(keys[0])
    for k in keys[1:]:
        kc, ku = pd.factorize(k)
        codes, _ = pd.factorize(codes * ku.shape[0] + kc)
    return codes.astype(np.int64, copy=False)


def build_flows(dec: Decoded) -> FlowTable:
    c = dec.cols
    n = c["l4"].shape[0]
    l4 = c["l4"].astype(np.int64)
    sel = np.nonzero((l4 == PROTO_TCP) | (l4 == PROTO_UDP))[0]
    src_id, dst_id, strings = _addresses(dec, sel)

    sp = c["sport"].astype(np.int64)[sel]
    dp = c["dport"].astype(np.int64)[sel]
    ea = (src_id[sel].astype(np.int64) << 16) | sp
    eb = (dst_id[sel].astype(np.int64) << 16) | dp
    lo = np.minimum(ea, eb)
    hi = np.maximum(ea, eb)
    # (protocol, lo, hi): endpoints are < 2**47, so the protocol bit packs into lo
    conv = _group_ids((lo << 1) | (l4[sel] == PROTO_UDP), hi)
    fwd_is_lo = ea <= eb  # direction within the conversation (0: lo→hi)

    # --- split TCP conversations on port reuse (Wireshark rule) --------------
    flags = c["tcp_flags"].astype(np.int64)[sel]
    seq = c["tcp_seq"][sel]
    is_tcp = l4[sel] == PROTO_TCP
    syn_only = is_tcp & ((flags & (SYN | ACK)) == SYN)
    conn = conv.copy()
    nconv = int(conv.max()) + 1 if conv.shape[0] else 0
    if syn_only.any():
        # Only conversations where a SYN is not the first packet of its direction
        # can split; walk just those (port reuse is rare).
        d = (~fwd_is_lo).astype(np.int64)
        key = conv * 2 + d
        first_in_dir = np.full(nconv * 2, len(key), np.int64)
        np.minimum.at(first_in_dir, key, np.arange(len(key)))
        late_syn = syn_only & (np.arange(len(key)) != first_in_dir[key])
        cand = np.unique(conv[late_syn])
        if cand.shape[0]:
            next_id = nconv
            rows = np.nonzero(np.isin(conv, cand))[0]
            order = rows[np.argsort(conv[rows], kind="stable")]
            bounds = np.searchsorted(conv[order], np.stack([cand, cand + 1]))
            for ci, (a, b) in zip(cand.tolist(), bounds.T.tolist(), strict=True):
                idx = order[a:b]
                base: list[int | None] = [None, None]
                cur = ci
                for i in idx.tolist():
                    di = int(d[i])
                    if syn_only[i] and base[di] is not None and int(seq[i]) != base[di]:
                        cur = next_id
                        next_id += 1
                        base = [None, None]
                    if base[di] is None:
                        base[di] = int(seq[i]) if flags[i] & SYN else (int(seq[i]) - 1) & 0xFFFFFFFF
                    conn[i] = cur
            if next_id > nconv:  # some connection split: renumber by first packet
                conn = _group_ids(conn)

    nflow = int(conn.max()) + 1 if conn.shape[0] else 0
    m = sel.shape[0]
    pos = np.arange(m)
    first = np.full(nflow, m, np.int64)
    last = np.full(nflow, -1, np.int64)
    np.minimum.at(first, conn, pos)
    np.maximum.at(last, conn, pos)

    # --- roles ------------------------------------------------------------
    # client side expressed as "lo endpoint is client" per flow
    def first_where(mask: np.ndarray) -> np.ndarray:
        out = np.full(nflow, NO_IDX, np.int64)
        np.minimum.at(out, conn[mask], pos[mask])
        return out

    synack = is_tcp & ((flags & (SYN | ACK)) == (SYN | ACK))
    f_syn = first_where(syn_only)
    f_synack = first_where(synack)
    f_any = first
    lo_is_client = np.zeros(nflow, bool)
    roles_from = np.empty(nflow, dtype=object)
    has_syn = f_syn != NO_IDX
    has_synack = ~has_syn & (f_synack != NO_IDX)
    lo_is_client[has_syn] = fwd_is_lo[f_syn[has_syn]]
    roles_from[has_syn] = "syn"
    lo_is_client[has_synack] = ~fwd_is_lo[f_synack[has_synack]]
    roles_from[has_synack] = "synack"
    rest = ~has_syn & ~has_synack
    if rest.any():
        fi = f_any[rest]
        s_port, d_port = sp[fi], dp[fi]
        # default: the first packet's sender is the client
        src_server = ((s_port <= WELL_KNOWN_PORT_MAX) & (d_port > WELL_KNOWN_PORT_MAX)) | (
            (s_port < EPHEMERAL_PORT_MIN) & (d_port >= EPHEMERAL_PORT_MIN)
        )
        dst_server_clear = ((d_port <= WELL_KNOWN_PORT_MAX) & (s_port > WELL_KNOWN_PORT_MAX)) | (
            (d_port < EPHEMERAL_PORT_MIN) & (s_port >= EPHEMERAL_PORT_MIN)
        )
        src_server &= ~dst_server_clear
        sender_is_lo = fwd_is_lo[fi]
        lo_is_client[rest] = np.where(src_server, ~sender_is_lo, sender_is_lo)
        roles_from[rest] = np.where(src_server | dst_server_clear, "ports", "first_packet")

    # per packet direction: 0 if the sender is the client
    sender_lo = fwd_is_lo
    pdir = np.where(sender_lo == lo_is_client[conn], 0, 1).astype(np.int8)

    ep_client = np.where(lo_is_client, lo[first], hi[first])
    ep_server = np.where(lo_is_client, hi[first], lo[first])
    proto = l4[sel][first] if nflow else np.zeros(0, np.int64)
    stream = np.zeros(nflow, np.int64)
    for pr in (PROTO_TCP, PROTO_UDP):
        mk = proto == pr
        stream[mk] = np.arange(int(mk.sum()))

    pkt_flow = np.full(n, -1, np.int64)
    pkt_dir = np.full(n, -1, np.int8)
    pkt_flow[sel] = conn
    pkt_dir[sel] = pdir
    return FlowTable(
        pkt_flow=pkt_flow,
        pkt_dir=pkt_dir,
        addr_strings=strings,
        pkt_src_addr=src_id,
        pkt_dst_addr=dst_id,
        proto=proto,
        stream=stream,
        client_addr=(ep_client >> 16).astype(np.int64),
        client_port=(ep_client & 0xFFFF).astype(np.int64),
        server_addr=(ep_server >> 16).astype(np.int64),
        server_port=(ep_server & 0xFFFF).astype(np.int64),
        roles_from=[str(r) for r in roles_from],
        first_idx=sel[first] if nflow else np.zeros(0, np.int64),
        last_idx=sel[last] if nflow else np.zeros(0, np.int64),
    )


__all__ = ["FlowTable", "build_flows", "FIN", "RST"]

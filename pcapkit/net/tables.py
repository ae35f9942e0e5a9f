"""The net layer's tables: ``packets``, ``flows`` and ``segments`` (DESIGN.md §2).

Built from the reader's :class:`RawCapture`, the decoded columns, the flow table and
the TCP analysis, with the columns and dtypes declared in :mod:`pcapkit.schema`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import schema
from ..io.reader import RawCapture
from .decode import PROTO_TCP, PROTO_UDP, SUPPORTED_LINKTYPES, Decoded
from .flows import FlowTable
from .tcp import KINDS, TcpAnalysis


def packets_table(
    raw: RawCapture, dec: Decoded, flows: FlowTable, tcp: TcpAnalysis
) -> pd.DataFrame:
    """One row per frame; see ``pcapkit.schema.describe("packets")``."""
    c = dec.cols
    ft = flows
    n = raw.frames
    has_ip = c["ip_version"] > 0
    l4 = c["l4"]
    is_tcp = l4 == PROTO_TCP
    has_l4 = l4 > 0
    flags = c["tcp_flags"].astype(np.int64)
    no_tcp = ~is_tcp
    data: dict[str, Any] = {
        "frame": np.arange(1, n + 1, dtype=np.int64),
        "ts_ns": raw.ts_ns,
        "caplen": raw.caplen,
        "wire_len": raw.origlen,
        "iface": raw.iface,
        "linktype": raw.linktype,
        "vlan_tags": c["vlan_tags"],
        "ip_version": schema.masked(c["ip_version"], ~has_ip, "Int8"),
        "src": schema.categorical(ft.pkt_src_addr, ft.addr_strings),
        "dst": schema.categorical(ft.pkt_dst_addr, ft.addr_strings),
        "ip_proto": schema.masked(c["ip_proto"], ~has_ip, "Int16"),
        "ttl": schema.masked(c["ttl"], ~has_ip, "Int16"),
        "ip_fragment": c["ip_fragment"],
        "proto": schema.categorical(
            np.where(is_tcp, 0, np.where(l4 == PROTO_UDP, 1, -1)), ["tcp", "udp"]
        ),
        "sport": schema.masked(c["sport"], ~has_l4, "Int32"),
        "dport": schema.masked(c["dport"], ~has_l4, "Int32"),
        "tcp_seq": schema.masked(c["tcp_seq"], no_tcp, "Int64"),
        "tcp_ack": schema.masked(c["tcp_ack"], no_tcp, "Int64"),
        "rel_seq": schema.masked(tcp.rel_seq, tcp.rel_seq < 0, "Int64"),
        "rel_ack": schema.masked(tcp.rel_ack, tcp.rel_ack < 0, "Int64"),
        "tcp_flags": schema.masked(flags, no_tcp, "Int16"),
        "tcp_window": schema.masked(c["tcp_window"], no_tcp, "Int32"),
        "window": schema.masked(tcp.window_scaled, tcp.window_scaled < 0, "Int64"),
        "tcp_hdr_len": schema.masked(c["tcp_hdr_len"], no_tcp, "Int16"),
        "mss": schema.masked(c["mss"], c["mss"] < 0, "Int32"),
        "wscale": schema.masked(c["wscale"], c["wscale"] < 0, "Int16"),
        "sack_perm": schema.masked(c["sack_perm"], no_tcp, "boolean"),
        "tsval": schema.masked(c["tsval"], c["tsval"] < 0, "Int64"),
        "tsecr": schema.masked(c["tsecr"], c["tsecr"] < 0, "Int64"),
        "sack_n": schema.masked(c["sack_n"], no_tcp, "Int8"),
        "payload_off": schema.masked(c["payload_off"], ~has_l4, "Int64"),
        "payload_len": schema.masked(c["payload_len"], ~has_l4, "Int64"),
        "payload_caplen": schema.masked(c["payload_caplen"], ~has_l4, "Int64"),
        "flow": schema.masked(ft.pkt_flow, ft.pkt_flow < 0, "Int64"),
        "dir": schema.categorical(ft.pkt_dir, schema.DIRS),
    }
    return schema.frame("packets", data, n)


def sack_blocks_table(dec: Decoded, packets: pd.DataFrame) -> pd.DataFrame:
    """One row per SACK block (RFC 2018 §3) of every TCP packet; see
    ``pcapkit.schema.describe("sack_blocks")``.  Edges are stream offsets of the direction
    the packet acknowledges (as Wireshark's relative ``tcp.options.sack_le``/``_re``, minus
    one: offsets count from the byte after the ISN), placed next to the packet's own
    relative ACK so a wrapped sequence space unwraps the same way."""
    idx = dec.sack_idx.astype(np.int64)
    if idx.shape[0] == 0:
        return schema.frame("sack_blocks", n=0)
    n = dec.cols["sack_n"][idx].astype(np.int64)
    raw_ack = packets["tcp_ack"].to_numpy(np.int64, na_value=-1)[idx]
    rel_ack = packets["rel_ack"].to_numpy(np.int64, na_value=-1)[idx]
    keep_pkt = (rel_ack >= 0) & (raw_ack >= 0)
    k = dec.sack_blocks.shape[1]
    j = np.arange(k)[None, :]
    use = (j < n[:, None]) & keep_pkt[:, None]
    rows, blk = np.nonzero(use)
    blocks = dec.sack_blocks.astype(np.int64)
    left_raw = blocks[rows, blk, 0]
    right_raw = blocks[rows, blk, 1]

    def rel(x: np.ndarray) -> np.ndarray:
        d = (x - raw_ack[rows]) & 0xFFFFFFFF
        d = np.where(d >= 0x80000000, d - 0x100000000, d)  # signed distance from the ACK
        out: np.ndarray = rel_ack[rows] - 1 + d
        return out

    pi = idx[rows]
    data: dict[str, Any] = {
        "frame": packets["frame"].to_numpy(np.int64)[pi],
        "ts_ns": packets["ts_ns"].to_numpy(np.int64)[pi],
        "flow": packets["flow"].to_numpy(np.int64, na_value=-1)[pi],
        "dir": schema.categorical(packets["dir"].cat.codes.to_numpy(np.int64)[pi], schema.DIRS),
        "block": blk.astype(np.int64),
        "left": rel(left_raw),
        "right": rel(right_raw),
    }
    return schema.frame("sack_blocks", data, int(rows.shape[0]))


def flows_table(raw: RawCapture, dec: Decoded, flows: FlowTable, tcp: TcpAnalysis) -> pd.DataFrame:
    """One row per TCP connection / UDP flow; see ``schema.describe("flows")``."""
    ft = flows
    nf = ft.count
    info = tcp.flow_info
    pkt_flow, pkt_dir = ft.pkt_flow, ft.pkt_dir
    sel = pkt_flow >= 0
    c2s_p = np.bincount(pkt_flow[sel & (pkt_dir == 0)], minlength=nf)
    s2c_p = np.bincount(pkt_flow[sel & (pkt_dir == 1)], minlength=nf)
    is_udp = ft.proto == PROTO_UDP
    c = dec.cols
    # UDP: bytes are the captured payloads of all datagrams
    udp_c = np.bincount(
        pkt_flow[sel & (pkt_dir == 0)],
        weights=c["payload_caplen"][sel & (pkt_dir == 0)],
        minlength=nf,
    ).astype(np.int64)
    udp_s = np.bincount(
        pkt_flow[sel & (pkt_dir == 1)],
        weights=c["payload_caplen"][sel & (pkt_dir == 1)],
        minlength=nf,
    ).astype(np.int64)
    udp_cm = np.bincount(
        pkt_flow[sel & (pkt_dir == 0)],
        weights=(c["payload_len"] - c["payload_caplen"])[sel & (pkt_dir == 0)],
        minlength=nf,
    ).astype(np.int64)
    udp_sm = np.bincount(
        pkt_flow[sel & (pkt_dir == 1)],
        weights=(c["payload_len"] - c["payload_caplen"])[sel & (pkt_dir == 1)],
        minlength=nf,
    ).astype(np.int64)
    addr = np.array(ft.addr_strings, dtype=object) if ft.addr_strings else np.zeros(0, dtype=object)
    is_tcp = ~is_udp
    hs = info["handshake"] & is_tcp

    def ms(v: np.ndarray) -> Any:
        return schema.masked(v / 1e6, (v < 0) | ~is_tcp, "Float64")

    def opt(v: np.ndarray) -> Any:
        return schema.masked(v, (v < 0) | ~is_tcp, "Int64")

    eff = np.maximum(info["c_eff_mss"], info["s_eff_mss"])
    data = {
        "flow": np.arange(nf, dtype=np.int64),
        "stream": ft.stream,
        "proto": np.where(is_udp, "udp", "tcp").tolist(),
        "client_ip": addr[ft.client_addr].tolist() if nf else [],
        "client_port": ft.client_port,
        "server_ip": addr[ft.server_addr].tolist() if nf else [],
        "server_port": ft.server_port,
        "roles_from": ft.roles_from,
        "first_frame": ft.first_idx + 1,
        "last_frame": ft.last_idx + 1,
        "first_ts_ns": raw.ts_ns[ft.first_idx] if nf else np.zeros(0, np.int64),
        "last_ts_ns": raw.ts_ns[ft.last_idx] if nf else np.zeros(0, np.int64),
        "c2s_packets": c2s_p,
        "s2c_packets": s2c_p,
        "c2s_bytes": np.where(is_udp, udp_c, info["c2s_bytes"]),
        "s2c_bytes": np.where(is_udp, udp_s, info["s2c_bytes"]),
        "c2s_missing": np.where(is_udp, udp_cm, info["c2s_missing"]),
        "s2c_missing": np.where(is_udp, udp_sm, info["s2c_missing"]),
        "handshake": hs,
        "c_mss": opt(info["c_mss"]),
        "s_mss": opt(info["s_mss"]),
        "c_wscale": opt(info["c_wscale"]),
        "s_wscale": opt(info["s_wscale"]),
        "sack_permitted": info["sack_permitted"] & is_tcp,
        "timestamps": info["timestamps"] & is_tcp,
        "eff_mss": opt(eff),
        "server_leg_ms": ms(info["server_leg_ns"]),
        "client_leg_ms": ms(info["client_leg_ns"]),
        "rtt_ms": ms(info["irtt_ns"]),
        "vantage": np.where(is_tcp, info["vantage"], "unknown").tolist(),
        "retransmissions": info["retransmissions"],
        "out_of_order": info["out_of_order"],
        "fin": info["fin"] & is_tcp,
        "rst": info["rst"] & is_tcp,
    }
    return schema.frame("flows", data, nf)


def segments_table(tcp: TcpAnalysis) -> pd.DataFrame:
    """TCP segments with payload, classified; see ``schema.describe("segments")``."""
    s: dict[str, Any] = dict(tcp.segments)
    s["dir"] = schema.categorical(s["dir"], schema.DIRS)
    s["kind"] = schema.categorical(s["kind"], list(KINDS))
    return schema.frame("segments", s)


def linktype_anomalies(raw: RawCapture) -> list[dict[str, Any]]:
    """One ``unsupported_linktype`` row per interface whose frames were not decoded."""
    rows: list[dict[str, Any]] = []
    for intf in raw.interfaces:
        if intf.linktype not in SUPPORTED_LINKTYPES:
            idx = np.nonzero(raw.iface == intf.index)[0]
            if idx.shape[0]:
                rows.append(
                    {
                        "name": "unsupported_linktype",
                        "frame": int(idx[0]) + 1,
                        "flow": None,
                        "offset": None,
                        "detail": f"interface {intf.index} has link type {intf.linktype}: "
                        f"{idx.shape[0]} frames not decoded",
                    }
                )
    return rows

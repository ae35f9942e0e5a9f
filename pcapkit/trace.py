"""``Trace``: the public facade over one capture (``pcapkit.open``).

Tables are computed lazily and cached; every one is a pandas DataFrame with the
columns declared in :mod:`pcapkit.schema` (``pcapkit.schema.describe(name)``):

* ``packets``   — one row per frame (Wireshark frame numbers).
* ``flows``     — one row per TCP connection / UDP flow.
* ``segments``  — one row per TCP segment with payload (plus keep-alives and
  zero-window probes), classified.
* ``anomalies`` — what could not be parsed, with a stable name.
* ``records``   — one row per TLS record, aligned with its frames and PSH.
* ``tls``       — one row per TLS session (versions, cipher, SNI, ALPN, resumption,
  0-RTT, handshake time, decrypted or why not, alignment KPIs).
* ``findings``  — pathologies (empty until the detectors exist).

``Trace.stream(flow, "c2s"|"s2c")`` returns one direction's reassembled bytes;
``Trace.plaintext(flow, dir)`` the decrypted application data of one direction.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from .errors import UnsupportedLinkType
from .io.reader import LINKTYPE_NONE, RawCapture, read_capture
from .net.decode import LINKTYPE_NAMES, PROTO_TCP, PROTO_UDP, SUPPORTED_LINKTYPES, Decoded, decode
from .net.flows import FlowTable, build_flows
from .net.tcp import KINDS, DirectionIndex, TcpAnalysis, analyze_tcp

# records columns computed by pcapkit.align.align_all
ALIGN_COLUMNS = (
    "first_frame",
    "last_frame",
    "first_ts_ns",
    "last_ts_ns",
    "last_byte_frame",
    "last_byte_ts_ns",
    "segments",
    "psh_end",
    "push_unit",
    "records_in_unit",
    "retransmitted",
    "missing_bytes",
)
TLS_VERSIONS = {
    0x0300: "SSL 3.0",
    0x0301: "TLS 1.0",
    0x0302: "TLS 1.1",
    0x0303: "TLS 1.2",
    0x0304: "TLS 1.3",
}

Progress = Callable[[str, float], None]
DIR_CODES = {"c2s": 0, "s2c": 1}


class StreamBytes(bytes):
    """Captured bytes of one stream direction, in offset order.

    Holes (bytes never captured) are *not* filled: the bytes on each side of a
    hole are simply adjacent here, and :attr:`gaps` lists each hole as
    ``(stream_offset, length)``.  :meth:`chunks` gives the contiguous pieces with
    their stream offsets; :meth:`at` maps a stream offset to a position here.
    """

    gaps: list[tuple[int, int]]
    _runs: np.ndarray  # (k, 3): stream offset, position here, length

    def __new__(cls, data: bytes, runs: np.ndarray, gaps: list[tuple[int, int]]) -> StreamBytes:
        obj = super().__new__(cls, data)
        obj._runs = runs
        obj.gaps = gaps
        return obj

    @property
    def complete(self) -> bool:
        return not self.gaps

    def chunks(self) -> list[tuple[int, bytes]]:
        return [(int(o), bytes(self[p : p + ln])) for o, p, ln in self._runs.tolist()]

    def at(self, offset: int) -> int | None:
        """Position in these bytes of stream ``offset`` (None if it falls in a hole)."""
        r = self._runs
        if r.shape[0] == 0:
            return None
        i = int(np.searchsorted(r[:, 0], offset, side="right")) - 1
        if i < 0 or offset >= r[i, 0] + r[i, 2]:
            return None
        return int(r[i, 1] + offset - r[i, 0])


@dataclass
class _Net:
    dec: Decoded
    flows: FlowTable
    tcp: TcpAnalysis


class Trace:
    """One capture, analysed on demand.  Use :func:`pcapkit.open`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        keylog: str | os.PathLike[str] | bytes | None = None,
        *,
        progress: Progress | None = None,
        redact: bool = True,
        embedded_keys: bool = True,
    ) -> None:
        self.path = os.fspath(path)
        self.redact_secrets = redact
        self.embedded_keys = embedded_keys
        self._progress = progress
        self._report("read", 0.0)
        self.raw: RawCapture = read_capture(self.path, lambda f: self._report("read", f))
        self._report("read", 1.0)
        self.keylog = keylog
        self.key_sources: list[str] = []  # filled when TLS is analysed (never the keys)
        lts = {i.linktype for i in self.raw.interfaces}
        used = set(np.unique(self.raw.linktype).tolist()) if self.raw.frames else set()
        if used and not (used & (SUPPORTED_LINKTYPES | {LINKTYPE_NONE})):
            names = ", ".join(str(x) for x in sorted(lts))
            self.raw.close()
            raise UnsupportedLinkType(
                f"{self.path}: link type {names} is not supported "
                f"(supported: {', '.join(str(x) for x in sorted(SUPPORTED_LINKTYPES))})"
            )

    # -- plumbing --------------------------------------------------------------
    def _report(self, stage: str, frac: float) -> None:
        if self._progress is not None:
            self._progress(stage, frac)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Trace {self.path!r}: {self.raw.frames} frames>"

    @cached_property
    def _net(self) -> _Net:
        self._report("decode", 0.0)
        dec = decode(self.raw)
        self.raw.head_parts = []  # the header bytes the reader copied are decoded: free them
        self._report("flows", 0.4)
        ft = build_flows(dec)
        self._report("reassembly", 0.6)
        tcp = analyze_tcp(dec, ft, self.raw.ts_ns, self.raw.buf)
        self._report("reassembly", 1.0)
        return _Net(dec=dec, flows=ft, tcp=tcp)

    # -- tables ----------------------------------------------------------------
    @property
    def frames(self) -> int:
        return self.raw.frames

    @cached_property
    def packets(self) -> pd.DataFrame:
        """One row per frame; see ``pcapkit.schema.describe("packets")``."""
        raw, net = self.raw, self._net
        c = net.dec.cols
        ft = net.flows
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
            "rel_seq": schema.masked(net.tcp.rel_seq, net.tcp.rel_seq < 0, "Int64"),
            "rel_ack": schema.masked(net.tcp.rel_ack, net.tcp.rel_ack < 0, "Int64"),
            "tcp_flags": schema.masked(flags, no_tcp, "Int16"),
            "tcp_window": schema.masked(c["tcp_window"], no_tcp, "Int32"),
            "window": schema.masked(net.tcp.window_scaled, net.tcp.window_scaled < 0, "Int64"),
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

    @cached_property
    def flows(self) -> pd.DataFrame:
        """One row per TCP connection / UDP flow; see ``schema.describe("flows")``."""
        net, raw = self._net, self.raw
        ft = net.flows
        nf = ft.count
        info = net.tcp.flow_info
        pkt_flow, pkt_dir = ft.pkt_flow, ft.pkt_dir
        sel = pkt_flow >= 0
        c2s_p = np.bincount(pkt_flow[sel & (pkt_dir == 0)], minlength=nf)
        s2c_p = np.bincount(pkt_flow[sel & (pkt_dir == 1)], minlength=nf)
        is_udp = ft.proto == PROTO_UDP
        c = net.dec.cols
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
        addr = (
            np.array(ft.addr_strings, dtype=object)
            if ft.addr_strings
            else np.zeros(0, dtype=object)
        )
        tcp = ~is_udp
        hs = info["handshake"] & tcp

        def ms(v: np.ndarray) -> Any:
            return schema.masked(v / 1e6, (v < 0) | ~tcp, "Float64")

        def opt(v: np.ndarray) -> Any:
            return schema.masked(v, (v < 0) | ~tcp, "Int64")

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
            "sack_permitted": info["sack_permitted"] & tcp,
            "timestamps": info["timestamps"] & tcp,
            "eff_mss": opt(eff),
            "server_leg_ms": ms(info["server_leg_ns"]),
            "client_leg_ms": ms(info["client_leg_ns"]),
            "rtt_ms": ms(info["irtt_ns"]),
            "vantage": np.where(tcp, info["vantage"], "unknown").tolist(),
            "retransmissions": info["retransmissions"],
            "out_of_order": info["out_of_order"],
            "fin": info["fin"] & tcp,
            "rst": info["rst"] & tcp,
        }
        return schema.frame("flows", data, nf)

    @cached_property
    def segments(self) -> pd.DataFrame:
        """TCP segments with payload, classified; see ``schema.describe("segments")``."""
        s = dict(self._net.tcp.segments)
        s["dir"] = schema.categorical(s["dir"], schema.DIRS)
        s["kind"] = schema.categorical(s["kind"], list(KINDS))
        return schema.frame("segments", s)

    @cached_property
    def anomalies(self) -> pd.DataFrame:
        """Everything that could not be parsed, one row each."""
        rows = (
            list(self.raw.anomalies)
            + list(self._net.dec.anomalies)
            + list(self._net.tcp.anomalies)
            + [dict(a) for a in self._app.anomalies]
            + [dict(a) for a in self.quic_anomalies]
        )
        for intf in self.raw.interfaces:
            if intf.linktype not in SUPPORTED_LINKTYPES:
                idx = np.nonzero(self.raw.iface == intf.index)[0]
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
        pkt_flow = self._net.flows.pkt_flow
        for r in rows:
            if (
                r.get("flow") is None
                and r.get("frame") is not None
                and 0 < r["frame"] <= len(pkt_flow)
            ):
                fl = int(pkt_flow[r["frame"] - 1])
                r["flow"] = fl if fl >= 0 else None
        rows.sort(key=lambda r: (r["frame"] is None, r["frame"] or 0))
        n = len(rows)
        if n == 0:
            return schema.frame("anomalies", n=0)

        def col(k: str) -> list[Any]:
            return [r.get(k) for r in rows]

        return schema.frame(
            "anomalies",
            {
                "name": col("name"),
                "frame": pd.array(col("frame"), dtype="Int64"),
                "flow": pd.array(col("flow"), dtype="Int64"),
                "offset": pd.array(col("offset"), dtype="Int64"),
                "detail": col("detail"),
            },
            n,
        )

    # -- TLS -----------------------------------------------------------------------
    @property
    def secrets(self) -> list[Any]:
        """The capture's Decryption Secrets Blocks, unless opened with embedded_keys=False."""
        return list(self.raw.secrets) if self.embedded_keys else []

    @cached_property
    def _tls(self) -> list[Any]:
        from .sessions.tls import load_keys, run_tls

        net = self._net
        self._report("tls", 0.0)
        keys = load_keys(self.keylog, self.secrets)
        self.key_sources = keys.sources
        tcp_flows = np.nonzero(net.flows.proto == PROTO_TCP)[0].tolist()
        out = run_tls(self.raw.buf, tcp_flows, net.tcp.index, keys)
        self._report("tls", 1.0)
        return out

    @cached_property
    def records(self) -> pd.DataFrame:
        """One row per TLS record, aligned with TCP frames and PSH; see ``schema.describe("records")``."""
        from dissectors.tls.session import DecryptStatus, Epoch

        from .align import ALIGN_SEGMENT_COLUMNS, align_all

        statuses = [x.value for x in DecryptStatus]
        epochs = [x.value for x in Epoch]
        net = self._net
        seg = net.tcp.segments
        # segments sliced per (flow, dir) by binary search, not by a mask per flow
        skey = seg["flow"] * 2 + seg["dir"]
        sorder = np.argsort(skey, kind="stable")
        # first sorted row of every (flow, dir) key, and one past the last key
        key_start = np.searchsorted(skey[sorder], np.arange(2 * net.flows.count + 1)).tolist()
        own = [c for c in schema.columns("records") if c not in ALIGN_COLUMNS]
        cols: dict[str, list[Any]] = {c: [] for c in own + ["_group", "_bulk"]}
        indexes: list[DirectionIndex] = []
        seg_rows: list[np.ndarray] = []
        # Per direction: the records the session dissected ("slow", a list) and those the
        # header walk found ("bulk", arrays).  Columns constant over a part are expanded
        # once at the end (np.repeat), so a capture with thousands of connections does
        # not pay a few numpy calls per column per direction.
        consts: dict[str, list[int]] = {c: [] for c in ("_group", "flow", "dir")}
        part_len: list[int] = []
        bulk_consts: dict[str, list[int]] = {
            c: [] for c in ("plaintext_len", "status", "epoch", "key_generation")
        }
        is_bulk: list[bool] = []
        for tf in self._tls:
            for d, name in enumerate(schema.DIRS):
                res = [r for r in tf.results if r.direction == name] if tf.results else []
                bulk = tf.bulk.get(name)
                nb = 0 if bulk is None else bulk.offset.shape[0]
                if not res and not nb:
                    continue
                g = len(indexes)
                indexes.append(self.stream_index(tf.flow, name))
                key = tf.flow * 2 + d
                seg_rows.append(sorder[key_start[key] : key_start[key + 1]])
                if res:
                    part_len.append(len(res))
                    is_bulk.append(False)
                    for c, v in (("_group", g), ("flow", tf.flow), ("dir", d)):
                        consts[c].append(v)
                    for c in bulk_consts:
                        bulk_consts[c].append(0)  # unused for slow parts
                    cols["offset"].append(np.array([r.offset for r in res], np.int64))
                    cols["length"].append(np.array([r.length for r in res], np.int64))
                    cols["outer_content_type"].append(
                        np.array([r.content_type for r in res], np.int64)
                    )
                    cols["content_type"].append(
                        np.array(
                            [
                                r.inner_content_type
                                if r.inner_content_type is not None
                                else r.content_type
                                for r in res
                            ],
                            np.int64,
                        )
                    )
                    cols["plaintext_len"].append(
                        np.array(
                            [-1 if r.plaintext_len is None else r.plaintext_len for r in res],
                            np.int64,
                        )
                    )
                    cols["version"].append(np.array([r.version for r in res], np.int64))
                    cols["status"].append(
                        np.array([statuses.index(r.status.value) for r in res], np.int64)
                    )
                    cols["epoch"].append(
                        np.array([epochs.index(r.epoch.value) for r in res], np.int64)
                    )
                    cols["key_generation"].append(
                        np.array([r.key_generation for r in res], np.int64)
                    )
                    cols["early_data"].append(np.array([r.early_data for r in res], bool))
                    hs = np.empty(len(res), dtype=object)
                    hs[:] = [",".join(type(m).__name__ for m in r.handshake) for r in res]
                    cols["handshake"].append(hs)
                if nb:
                    assert bulk is not None
                    part_len.append(nb)
                    is_bulk.append(True)
                    for c, v in (("_group", g), ("flow", tf.flow), ("dir", d)):
                        consts[c].append(v)
                    bulk_consts["plaintext_len"].append(-1)
                    bulk_consts["status"].append(statuses.index(bulk.status))
                    bulk_consts["epoch"].append(epochs.index(bulk.epoch))
                    bulk_consts["key_generation"].append(bulk.key_generation)
                    cols["offset"].append(bulk.offset)
                    cols["length"].append(bulk.length)
                    cols["outer_content_type"].append(bulk.content_type)
                    cols["content_type"].append(bulk.content_type)
                    cols["version"].append(bulk.version)
                    for c in ("plaintext_len", "status", "epoch", "key_generation"):
                        cols[c].append(None)  # filled from bulk_consts below
                    cols["early_data"].append(None)
                    cols["handshake"].append(None)
        plen = np.asarray(part_len, np.int64)
        bmask = np.asarray(is_bulk, bool)
        for c, vals in consts.items():
            cols[c] = [np.repeat(np.asarray(vals, np.int64), plen)]
        cols["_bulk"] = [np.repeat(bmask, plen)]
        starts = (np.cumsum(plen) - plen).tolist()

        def merged(parts: list[Any], fill: np.ndarray) -> list[np.ndarray]:
            """One array: each part's fill value repeated, overwritten by a part's own
            array where it has one (the session-dissected records)."""
            out = np.repeat(fill, plen)
            for s0, part in zip(starts, parts, strict=True):
                if part is not None:
                    out[s0 : s0 + len(part)] = part
            return [out]

        for c, vals in bulk_consts.items():
            cols[c] = merged(cols[c], np.asarray(vals, np.int64))
        cols["early_data"] = merged(cols["early_data"], np.zeros(len(part_len), bool))
        cols["handshake"] = merged(cols["handshake"], np.full(len(part_len), "", dtype=object))
        n = sum(len(x) for x in cols["flow"])
        if n == 0:
            return schema.frame("records", n=0)
        data: dict[str, Any] = {k: np.concatenate(parts) for k, parts in cols.items()}
        order = np.lexsort((data["offset"], data["_group"]))  # groups are (flow, dir) in order
        data = {k: v[order] for k, v in data.items()}
        rows = np.concatenate(seg_rows)
        seg_group = np.repeat(np.arange(len(indexes)), [r.shape[0] for r in seg_rows])
        al = align_all(
            data["_group"],
            data["offset"],
            data["length"],
            indexes,
            seg_group,
            {k: seg[k][rows] for k in ALIGN_SEGMENT_COLUMNS},
        )
        data.update(al)
        # header-walked records with bytes never captured are incomplete
        incomplete = data.pop("_bulk") & (al["missing_bytes"] > 0)
        data["status"] = np.where(incomplete, statuses.index("incomplete"), data["status"])
        del data["_group"]
        data["dir"] = schema.categorical(data["dir"], schema.DIRS)
        data["plaintext_len"] = schema.masked(
            data["plaintext_len"], data["plaintext_len"] < 0, "Int64"
        )
        data["status"] = schema.categorical(data["status"], statuses)
        data["epoch"] = schema.categorical(data["epoch"], epochs)
        data["handshake"] = data["handshake"].tolist()
        return schema.frame("records", data, n)

    @cached_property
    def tls(self) -> pd.DataFrame:
        """One row per TLS session; see ``schema.describe("tls")``."""
        from .align import alignment_kpis_by_flow

        recs = self.records
        kpis = alignment_kpis_by_flow(
            recs["flow"].to_numpy(np.int64),
            recs["dir"].cat.codes.to_numpy(np.int64),
            recs["content_type"].to_numpy(np.int64),
            recs["psh_end"].to_numpy(bool),
            recs["push_unit"].to_numpy(np.int64),
        )
        hs_ms = {f: (t1 - t0) / 1e6 for f, (t0, t1) in self._handshake_times.items()}
        counts = recs.groupby("flow").size().to_dict() if len(recs) else {}
        dec = (
            recs.loc[recs.status == "decrypted"].groupby("flow").size().to_dict()
            if len(recs)
            else {}
        )
        no_kpi = {"pct_psh_end": None, "pct_single_record_units": None, "records_per_unit_hist": {}}
        rows: dict[str, list[Any]] = {c: [] for c in schema.columns("tls")}
        for tf in self._tls:
            sm = tf.summary
            kpi = kpis.get(tf.flow, no_kpi)
            rows["flow"].append(tf.flow)
            rows["version"].append(
                TLS_VERSIONS.get(sm.version, f"0x{sm.version:04x}") if sm.version else None
            )
            rows["cipher"].append(sm.cipher_suite_name)
            rows["sni"].append(sm.sni)
            rows["alpn"].append(sm.alpn)
            rows["alpn_offered"].append(",".join(sm.alpn_offered) if sm.alpn_offered else None)
            rows["resumption_offered"].append(sm.resumption_offered)
            rows["resumption_accepted"].append(sm.resumption_accepted)
            rows["resumption_kind"].append(sm.resumption_kind)
            rows["early_data_offered"].append(sm.early_data_offered)
            rows["early_data_accepted"].append(sm.early_data_accepted)
            rows["hello_retry_request"].append(sm.hello_retry_request)
            rows["handshake_complete"].append(sm.handshake_complete)
            rows["handshake_ms"].append(hs_ms.get(tf.flow))
            rows["decrypted"].append(sm.decrypted)
            rows["why_not"].append(sm.why_not)
            rows["records"].append(int(counts.get(tf.flow, 0)))  # incl. header-walked (bulk)
            rows["decrypted_records"].append(int(dec.get(tf.flow, 0)))
            rows["key_updates"].append(sm.key_updates)
            rows["cert_chain_len"].append(len(sm.server_certificate_lengths) or None)
            rows["pct_psh_end"].append(kpi["pct_psh_end"])
            rows["pct_single_record_units"].append(kpi["pct_single_record_units"])
            rows["records_per_unit"].append(kpi["records_per_unit_hist"])
            rows["roles_swapped"].append(sm.roles_swapped)
        n = len(rows["flow"])
        if n == 0:
            return schema.frame("tls", n=0)
        data: dict[str, Any] = dict(rows)
        data["early_data_accepted"] = pd.array(rows["early_data_accepted"], dtype="boolean")
        for k in ("handshake_ms", "pct_psh_end", "pct_single_record_units"):
            data[k] = pd.array(rows[k], dtype="Float64")
        data["cert_chain_len"] = pd.array(rows["cert_chain_len"], dtype="Int64")
        return schema.frame("tls", data, n)

    @cached_property
    def _handshake_times(self) -> dict[int, tuple[int, int]]:
        versions = {tf.flow: tf.summary.version for tf in self._tls}
        return _handshake_times_by_flow(self.records, versions)

    # -- HTTP ----------------------------------------------------------------------
    @cached_property
    def _app(self) -> Any:
        from .app import build

        self._report("http", 0.0)
        out = build(self, redact_secrets=self.redact_secrets)
        self._report("http", 1.0)
        return out

    @cached_property
    def messages(self) -> pd.DataFrame:
        """HTTP/1.1 heads, SSE events, HTTP/2 frames, gRPC messages and QUIC frames, ordered
        by (flow, dir, stream, offset); see ``schema.describe("messages")``."""
        m = self._app.messages
        n = len(m["flow"])
        parts = []
        if n:
            data: dict[str, Any] = dict(m)
            data["dir"] = schema.categorical(
                np.asarray([DIR_CODES[d] for d in m["dir"]], np.int64), schema.DIRS
            )
            for k in ("stream", "frame", "ts_ns", "request"):
                data[k] = pd.array(m[k], dtype="Int64")
            parts.append(schema.frame("messages", data, n))
        q = self.quic_messages
        if len(q):
            parts.append(q)
        if not parts:
            return schema.frame("messages", n=0)
        df = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        return df.sort_values(["flow", "dir", "stream", "offset"], kind="stable").reset_index(
            drop=True
        )

    @cached_property
    def requests(self) -> pd.DataFrame:
        """One row per HTTP exchange with its timeline; see ``schema.describe("requests")``."""
        r = self._app.requests
        n = len(r["flow"])
        if n == 0:
            return schema.frame("requests", n=0)
        return schema.frame("requests", dict(r), n)

    @cached_property
    def gaps(self) -> pd.DataFrame:
        """Why each streamed response waited: the first event (TTFT) and every long gap,
        split into path, network findings and server time (:mod:`pcapkit.detect.gaps`)."""
        from .detect.gaps import attribute
        from .sessions.quic import server_leg_ms

        legs = {qf.flow: server_leg_ms(qf) for qf in self._quic}
        return attribute(
            self.requests,
            self.messages,
            self.flows,
            self.finding_objects,
            server_legs={f: v for f, v in legs.items() if v is not None},
        )

    # -- QUIC ----------------------------------------------------------------------
    @cached_property
    def _quic(self) -> list[Any]:
        """One :class:`pcapkit.sessions.quic.QuicFlow` per QUIC connection."""
        from .sessions.quic import quic_flow_ids, run_quic
        from .sessions.tls import load_keys

        self._report("quic", 0.0)
        c, ft, buf = self._net.dec.cols, self._net.flows, self.raw.buf
        ids = quic_flow_ids(buf, c["payload_off"], c["payload_caplen"], ft.proto, ft.first_idx)
        out = run_quic(
            ids,
            buf=buf,
            ts_ns=self.raw.ts_ns,
            payload_off=c["payload_off"],
            payload_caplen=c["payload_caplen"],
            payload_len=c["payload_len"],
            pkt_flow=ft.pkt_flow,
            pkt_dir=ft.pkt_dir,
            # the key log is read only when the capture has QUIC
            keylog=load_keys(self.keylog, self.secrets).keylog if ids else None,
        )
        self._report("quic", 1.0)
        return out

    @cached_property
    def quic(self) -> pd.DataFrame:
        """One row per QUIC connection; see ``schema.describe("quic")``."""
        from .sessions.quic import summary_rows

        rows = summary_rows(self._quic)
        n = len(rows["flow"])
        if n == 0:
            return schema.frame("quic", n=0)
        data: dict[str, Any] = dict(rows)
        data["handshake_ms"] = pd.array(rows["handshake_ms"], dtype="Float64")
        return schema.frame("quic", data, n)

    @cached_property
    def quic_messages(self) -> pd.DataFrame:
        """QUIC frames (not PADDING) with the columns of ``schema.describe("messages")``."""
        from .sessions.quic import message_rows

        m = message_rows(self._quic)
        n = len(m["flow"])
        if n == 0:
            return schema.frame("messages", n=0)
        data: dict[str, Any] = dict(m)
        data["dir"] = schema.categorical(
            np.asarray([DIR_CODES[d] for d in m["dir"]], np.int64), schema.DIRS
        )
        for k in ("stream", "frame", "ts_ns", "request"):
            data[k] = pd.array(m[k], dtype="Int64")
        return schema.frame("messages", data, n)

    @cached_property
    def quic_anomalies(self) -> list[dict[str, Any]]:
        """What the QUIC dissector could not parse (rows of the "anomalies" schema)."""
        from .sessions.quic import anomaly_rows

        return anomaly_rows(self._quic)

    @cached_property
    def quic_packets(self) -> pd.DataFrame:
        """One row per QUIC packet; see ``schema.describe("quic_packets")``."""
        from .sessions.quic import packet_table

        return packet_table(self._quic)

    @cached_property
    def quic_frames(self) -> pd.DataFrame:
        """One row per frame of every decrypted QUIC packet (PADDING included); see
        ``schema.describe("quic_frames")``."""
        from .sessions.quic import frame_table

        return frame_table(self._quic)

    @cached_property
    def quic_tls(self) -> pd.DataFrame:
        """TLS handshake messages of the QUIC connections with their extensions' facts and
        transport parameters; see ``schema.describe("quic_tls")``."""
        from .sessions.quic import tls_table

        return tls_table(self._quic)

    @cached_property
    def quic_handshake(self) -> pd.DataFrame:
        """Handshake milestones per QUIC connection; see ``schema.describe("quic_handshake")``."""
        from .sessions.quic import handshake_table

        return handshake_table(self._quic)

    def quic_stream(self, flow: int, stream_id: int, direction: str) -> StreamBytes:
        """Reassembled bytes of one QUIC stream direction (``c2s``/``s2c`` of the flow).

        Holes are not filled (``.gaps`` lists them, as for :meth:`stream`).  Raises
        KeyError when the flow is not a QUIC connection or the stream carried no data
        in that direction.
        """
        self._flow_dir(flow, direction)
        for qf in self._quic:
            if qf.flow != flow:
                continue
            qd = qf.quic_dir(direction)
            if (stream_id, qd) not in set(qf.conn.streams()):
                raise KeyError(f"flow {flow} has no QUIC stream {stream_id} in {direction}")
            sd = qf.conn.stream_bytes(stream_id, qd)
            runs, pos = [], 0
            for off, chunk in sd.chunks:
                runs.append((off, pos, len(chunk)))
                pos += len(chunk)
            return StreamBytes(
                sd.data, np.array(runs, np.int64).reshape(-1, 3), [tuple(g) for g in sd.gaps]
            )
        raise KeyError(f"flow {flow} is not a QUIC connection")

    def plaintext(self, flow: int, direction: str) -> bytes:
        """Decrypted application data of one direction, in order (b"" without keys).

        Records that could not be decrypted contribute nothing; ``Trace.records``
        says which and why (``status``).
        """
        self._flow_dir(flow, direction)
        parts = []
        for tf in self._tls:
            if tf.flow != flow:
                continue
            for r in tf.results:
                if (
                    r.direction == direction
                    and r.plaintext is not None
                    and r.inner_content_type == 23
                ):
                    parts.append(r.plaintext)
        return b"".join(parts)

    @cached_property
    def detect_context(self) -> Any:
        """The tables, indexed per flow for the detectors (:mod:`pcapkit.detect`)."""
        from .detect import DetectContext

        return DetectContext(
            self.packets,
            self.flows,
            self.segments,
            self.records,
            self.tls,
            requests=self.requests,
            messages=self.messages,
            h2_flow=self._app.h2_flow,
            h3=self._app.h3,
            quic=self.quic,
            quic_packets=self.quic_packets,
            quic_frames=self.quic_frames,
            quic_tls=self.quic_tls,
            quic_handshake=self.quic_handshake,
        )

    @cached_property
    def finding_objects(self) -> list[Any]:
        """Findings as :class:`pcapkit.detect.Finding` objects, worst first."""
        from .detect import run_detectors

        self._report("detect", 0.0)
        out = run_detectors(self.detect_context)
        self._report("detect", 1.0)
        return out

    @cached_property
    def findings(self) -> pd.DataFrame:
        """Pathologies found, worst first; see ``schema.describe("findings")``."""
        fs = self.finding_objects
        if not fs:
            return schema.frame("findings", n=0)
        data = {
            "kind": [f.kind for f in fs],
            "severity": [f.severity for f in fs],
            "flow": pd.array([f.flow for f in fs], dtype="Int64"),
            "dir": [f.dir for f in fs],
            "cost_ms": pd.array(
                [None if f.cost_ms is None else round(f.cost_ms, 3) for f in fs], dtype="Float64"
            ),
            "frames": [f.frames for f in fs],
            "explanation": [f.explanation for f in fs],
            "remedy": [f.remedy for f in fs],
            "cost_method": [f.cost_method for f in fs],
            "t_start_ns": np.array([f.t_start_ns for f in fs], np.int64),
            "t_end_ns": np.array([f.t_end_ns for f in fs], np.int64),
            "stream": pd.array([f.stream for f in fs], dtype="Int64"),
            "vantage": [f.vantage for f in fs],
            "confidence": np.array([f.confidence for f in fs], np.float64),
            "evidence": [
                [{"frame": e.frame, "role": e.role, "ts_ns": e.ts_ns} for e in f.evidence]
                for f in fs
            ],
            "checks": [list(f.checks) for f in fs],
            "display_filter": [f.display_filter for f in fs],
            "details": [dict(f.details) for f in fs],
        }
        return schema.frame("findings", data, len(fs))

    # -- streams -----------------------------------------------------------------
    def _flow_dir(self, flow: int, direction: str) -> tuple[int, int]:
        if direction not in DIR_CODES:
            raise ValueError(f"direction must be 'c2s' or 's2c', not {direction!r}")
        if not 0 <= flow < self._net.flows.count:
            raise KeyError(f"no flow {flow} (the capture has {self._net.flows.count})")
        return int(flow), DIR_CODES[direction]

    def stream_index(self, flow: int, direction: str) -> DirectionIndex:
        """Offset → (frame, ts_ns) index of one TCP direction (first-seen pieces)."""
        key = self._flow_dir(flow, direction)
        idx = self._net.tcp.index.get(key)
        if idx is None:
            z = np.zeros(0, np.int64)
            return DirectionIndex(z, z, z, z, z, z)
        return idx

    def stream(self, flow: int, direction: str) -> StreamBytes:
        """Reassembled payload of one direction (TCP) or concatenated datagrams (UDP)."""
        f, d = self._flow_dir(flow, direction)
        buf = self.raw.buf
        if self._net.flows.proto[f] == PROTO_UDP:
            return self._udp_stream(f, d)
        idx = self.stream_index(flow, direction)
        if idx.start.shape[0] == 0:
            return StreamBytes(b"", np.zeros((0, 3), np.int64), [])
        parts = []
        runs = []
        gaps: list[tuple[int, int]] = []
        pos = 0
        expect = 0
        for s, ce, e, bo in zip(
            idx.start.tolist(),
            idx.cap_end.tolist(),
            idx.end.tolist(),
            idx.buf_off.tolist(),
            strict=True,
        ):
            if s > expect:
                gaps.append((expect, s - expect))
            ln = ce - s
            if ln > 0:
                parts.append(buf[bo : bo + ln].tobytes())
                if runs and runs[-1][0] + runs[-1][2] == s:
                    runs[-1][2] += ln
                else:
                    runs.append([s, pos, ln])
                pos += ln
            if ce < e:
                gaps.append((ce, e - ce))
            expect = e
        return StreamBytes(b"".join(parts), np.array(runs, np.int64).reshape(-1, 3), gaps)

    def _udp_stream(self, f: int, d: int) -> StreamBytes:
        sel = self.datagram_frames(f, d)
        c = self._net.dec.cols
        buf = self.raw.buf
        parts = [
            buf[o : o + ln].tobytes()
            for o, ln in zip(
                c["payload_off"][sel].tolist(), c["payload_caplen"][sel].tolist(), strict=True
            )
        ]
        lens = np.array([len(p) for p in parts], np.int64)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if parts else np.zeros(0, np.int64)
        runs = np.stack([starts, starts, lens], axis=1) if parts else np.zeros((0, 3), np.int64)
        return StreamBytes(b"".join(parts), runs, [])

    def datagram_frames(self, flow: int, d: int) -> np.ndarray:
        ft = self._net.flows
        return np.nonzero((ft.pkt_flow == flow) & (ft.pkt_dir == d))[0]

    def datagrams(self, flow: int, direction: str) -> list[tuple[int, bytes]]:
        """UDP payloads of one direction as (frame, bytes)."""
        f, d = self._flow_dir(flow, direction)
        c = self._net.dec.cols
        buf = self.raw.buf
        sel = self.datagram_frames(f, d)
        return [
            (
                int(i) + 1,
                buf[
                    int(c["payload_off"][i]) : int(c["payload_off"][i] + c["payload_caplen"][i])
                ].tobytes(),
            )
            for i in sel
        ]

    # -- summary -------------------------------------------------------------------
    def capture_summary(self) -> dict[str, Any]:
        """The ``capture`` object of the JSON report."""
        _ = self._tls  # key sources are known once TLS ran
        raw = self.raw
        ts = raw.ts_ns
        c = self._net.dec.cols
        return {
            "path": self.path,
            "format": raw.format,
            "compressed": raw.compressed,
            "file_size": raw.file_size,
            "frames": raw.frames,
            "first_ts_ns": int(ts.min()) if raw.frames else None,
            "last_ts_ns": int(ts.max()) if raw.frames else None,
            "duration_ms": round((int(ts.max()) - int(ts.min())) / 1e6, 3) if raw.frames else 0.0,
            "interfaces": [
                {
                    "index": i.index,
                    "linktype": i.linktype,
                    "linktype_name": LINKTYPE_NAMES.get(i.linktype, "unsupported"),
                    "name": i.name,
                }
                for i in raw.interfaces
            ],
            "tcp_packets": int((c["l4"] == PROTO_TCP).sum()),
            "udp_packets": int((c["l4"] == PROTO_UDP).sum()),
            "flows": self._net.flows.count,
            "secrets_blocks": len(raw.secrets),
            "anomalies": int(len(self.anomalies)),
        }


def _handshake_times_by_flow(
    recs: pd.DataFrame, versions: dict[int, int | None]
) -> dict[int, tuple[int, int]]:
    """Per flow: (ClientHello first byte seen, the client's Finished record readable), ns.

    The Finished is the client's first record after the ClientHello in the
    handshake epoch (TLS 1.3) or the first encrypted one (TLS 1.2, after
    ChangeCipherSpec), never early data.  Records are sorted by (flow, dir,
    offset), so "first" is the first row of a mask.
    """
    if recs.empty:
        return {}
    flow = recs["flow"].to_numpy(np.int64)
    c2s = (recs["dir"] == "c2s").to_numpy(bool)
    outer = recs["outer_content_type"].to_numpy(np.int64)
    cand = np.nonzero(c2s & (outer == 22))[0]
    hs = recs["handshake"].to_numpy(object)
    ch_rows = [i for i in cand.tolist() if "ClientHello" in hs[i]]
    if not ch_rows:
        return {}
    ch_flow, first = np.unique(flow[ch_rows], return_index=True)
    ch_at = np.asarray(ch_rows)[first]
    t0 = dict(
        zip(ch_flow.tolist(), recs["first_ts_ns"].to_numpy(np.int64)[ch_at].tolist(), strict=True)
    )
    ch_off = np.full(int(flow.max()) + 1, np.iinfo(np.int64).max, np.int64)
    ch_off[ch_flow] = recs["offset"].to_numpy(np.int64)[ch_at]
    tls13 = np.zeros(ch_off.shape[0], bool)
    for f, v in versions.items():
        if f < tls13.shape[0]:
            tls13[f] = v == 0x0304
    epoch = recs["epoch"].to_numpy(object)
    want = np.where(tls13[flow], "handshake", "application")
    fin = (
        c2s
        & (epoch == want)
        & ~recs["early_data"].to_numpy(bool)
        & (recs["offset"].to_numpy(np.int64) > ch_off[flow])
    )
    rows = np.nonzero(fin)[0]
    f_flow, f_first = np.unique(flow[rows], return_index=True)
    last = recs["last_ts_ns"].to_numpy(np.int64)[rows[f_first]]
    return {f: (t0[f], t) for f, t in zip(f_flow.tolist(), last.tolist(), strict=True) if f in t0}


def open(  # noqa: A001 - the public name users type: pcapkit.open(path)
    path: str | os.PathLike[str],
    keylog: str | os.PathLike[str] | bytes | None = None,
    *,
    progress: Progress | None = None,
    redact: bool = True,
    embedded_keys: bool = True,
) -> Trace:
    """Open a pcap/pcapng capture (optionally gzip-compressed).

    ``keylog`` is an NSS key log (path or bytes) for TLS/QUIC decryption; keys in
    the file's Decryption Secrets Blocks are used as well.  ``redact`` (default)
    hides the values of credential headers (authorization, cookies) in
    ``Trace.requests``.  ``embedded_keys=False`` ignores the pcapng Decryption Secrets
    Blocks (analyse a capture as a third party without keys would).  Raises
    :class:`pcapkit.errors.PcapkitError` subclasses for whole-file problems.
    """
    return Trace(path, keylog, progress=progress, redact=redact, embedded_keys=embedded_keys)

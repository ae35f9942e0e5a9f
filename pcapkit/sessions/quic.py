"""Drive the QUIC dissector over the UDP flows of a capture (RFC 9000, RFC 9001).

A UDP flow is QUIC when its first datagram looks like a QUIC long header
(:func:`dissectors.quic.looks_like_quic`, by content, not port;
:func:`quic_flow_ids`).  All datagrams of both directions are fed, in frame order,
into one :class:`dissectors.quic.QuicConnection` with the capture's key log
(:func:`run_quic`): the same keys as TLS over TCP (``--keylog`` file,
``SSLKEYLOGFILE``, pcapng Decryption Secrets Blocks;
:func:`pcapkit.sessions.tls.load_keys`).  Initial packets decrypt without keys
(RFC 9001 §5.2).  Both functions take plain inputs — the capture buffer, per-packet
arrays of the decoded packets and the flow table, a key log — so they know nothing
of :class:`pcapkit.Trace`, which wires them.

The QUIC client is the endpoint that sent the flow's first datagram (RFC 9000 §7:
the client's Initial opens the connection).  When the flow table decided the
roles the other way (ports, first packet lost), ``QuicFlow.swapped`` is set and
every table here speaks in the *flow's* directions (``Trace.flows`` c2s/s2c),
like ``Trace.tls`` does for TLS.

This module also turns the connections into the rows of ``Trace.quic``,
``Trace.quic_messages`` and the QUIC anomalies, and into the declared tables
``Trace.quic_packets``, ``quic_frames``, ``quic_tls`` and ``quic_handshake``
(:mod:`pcapkit.schema`) that the QUIC detectors and the qlog export read instead of
the dissector's objects — per-connection loops over the dissector's records, no
per-packet pandas.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dissectors.errors import DissectError
from dissectors.quic import PacketSpace, PacketType, QuicConnection, looks_like_quic
from dissectors.quic import version_name as quic_version_name
from dissectors.quic.frames import (
    Ack,
    ConnectionClose,
    Crypto,
    DataBlocked,
    Datagram,
    MaxData,
    MaxStreamData,
    MaxStreams,
    NewConnectionId,
    Padding,
    ResetStream,
    RetireConnectionId,
    StopSending,
    Stream,
    StreamDataBlocked,
    StreamsBlocked,
    frame_name,
)
from dissectors.quic.transport_params import from_extensions
from dissectors.tls.suites import group_name
from dissectors.tls.versions import version_name

from .. import schema
from ..anomalies import isolate
from ..io.reader import drop_pages, rows_at_released
from ..limits import Limits, limit_anomaly
from ..net.decode import PROTO_UDP
from .timing import Split, split_handshake

__all__ = [
    "QuicFlow",
    "anomaly_rows",
    "frame_table",
    "handshake_table",
    "message_rows",
    "packet_table",
    "quic_flow_ids",
    "run_quic",
    "summary_rows",
    "tls_table",
]

DIRS = ("c2s", "s2c")
_FLIP = {"c2s": "s2c", "s2c": "c2s"}
# Packets that are not protected by design: not "undecryptable".
_CLEAR = (PacketType.RETRY, PacketType.VERSION_NEGOTIATION)
_STREAM_ID_FRAMES = (ResetStream, StopSending, MaxStreamData, StreamDataBlocked)
_KEY_NAMES = {
    PacketType.INITIAL: "Initial",
    PacketType.HANDSHAKE: "Handshake",
    PacketType.ZERO_RTT: "0-RTT",
    PacketType.ONE_RTT: "1-RTT",
}


@dataclass
class QuicFlow:
    """One UDP flow dissected as one QUIC connection."""

    flow: int
    conn: QuicConnection
    swapped: bool  # the QUIC client is the flow's server (roles decided otherwise)
    datagrams: int
    # per datagram of the flow, in frame order: its frame number and UDP payload bytes
    # on the wire (the datagram index and size of Trace.quic_packets)
    datagram_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    datagram_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    limits: Limits = field(default_factory=Limits.default)
    # 1-RTT datagrams that no key could open (no key log, or no ClientHello yet), taken
    # as columns instead of one PacketRecord each (:func:`run_quic`); not in conn.packets.
    # Per datagram (one packet, one quic_packets row each): its position among the flow's
    # datagrams, sent by the QUIC client, the DCID (hex) and the record's reason — those
    # two as codes into the name lists — capture time and captured UDP payload bytes
    short_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    short_from_client: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    short_dcid: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    short_dcid_names: list[str] = field(default_factory=list)
    short_reason: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    short_reason_names: list[str] = field(default_factory=list)
    # per frame of the capture (shared, not copied): capture time, captured UDP payload
    frame_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    frame_caplen: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def short_ts(self) -> np.ndarray:
        """Capture time of each short datagram."""
        return self.frame_ts[self.datagram_frames[self.short_pos] - 1]

    @property
    def short_len(self) -> np.ndarray:
        """Captured UDP payload bytes of each short datagram."""
        return self.frame_caplen[self.datagram_frames[self.short_pos] - 1]

    @property
    def packet_count(self) -> int:
        """QUIC packets of the connection: the dissector's records and the short columns."""
        return len(self.conn.packets) + int(self.short_pos.shape[0])

    def flow_dir(self, quic_direction: str) -> str:
        """The flow direction (``Trace.flows`` roles) of a QUIC direction."""
        return _FLIP[quic_direction] if self.swapped else quic_direction

    def quic_dir(self, flow_direction: str) -> str:
        """The QUIC direction (the dissector's c2s/s2c) of a flow direction."""
        return _FLIP[flow_direction] if self.swapped else flow_direction


def quic_flow_ids(
    buf: Any,
    payload_off: np.ndarray,
    payload_caplen: np.ndarray,
    flow_proto: np.ndarray,
    flow_first_idx: np.ndarray,
) -> list[int]:
    """The UDP flows whose first datagram looks like a QUIC long header, in flow order.

    ``buf`` is the capture buffer; ``payload_off`` / ``payload_caplen`` the per-packet
    L4 payload offset in it and captured length (the decoded packet columns);
    ``flow_proto`` / ``flow_first_idx`` the flow table's IP protocol and first packet
    (0-based row) per flow.
    """
    udp_flows = np.nonzero(flow_proto == PROTO_UDP)[0]
    out = []
    for k, f in enumerate(udp_flows.tolist()):
        i0 = int(flow_first_idx[f])
        o = int(payload_off[i0])
        if looks_like_quic(buf[o : o + int(payload_caplen[i0])]):
            out.append(f)
        if k % _DROP_EVERY == _DROP_EVERY - 1 and isinstance(buf, np.ndarray):
            drop_pages(buf)  # scattered reads: each maps a large span of the file
    if isinstance(buf, np.ndarray):
        drop_pages(buf)
    return out


def run_quic(
    flows: list[int],
    *,
    buf: Any,
    ts_ns: np.ndarray,
    payload_off: np.ndarray,
    payload_caplen: np.ndarray,
    payload_len: np.ndarray,
    pkt_flow: np.ndarray,
    pkt_dir: np.ndarray,
    keylog: Any = None,
    errors: list[dict[str, Any]] | None = None,
    limits: Limits | None = None,
) -> list[QuicFlow]:
    """Dissect each of ``flows`` (from :func:`quic_flow_ids`) as one QUIC connection.

    An unexpected exception while dissecting one connection drops it and becomes an
    ``internal_error`` row in ``errors`` (:func:`pcapkit.anomalies.isolate`).

    Per-packet arrays (one entry per frame, 0-based): capture time ``ts_ns``, the L4
    payload's offset in ``buf``, captured and on-the-wire length; the flow table's
    ``pkt_flow`` (flow id, -1 none) and ``pkt_dir`` (0 c2s, 1 s2c).  ``keylog`` is a
    :class:`dissectors.tls.keylog.KeyLog` (or a mapping accepted by
    :class:`QuicConnection`); without it only Initial packets decrypt.
    """
    if not flows:
        return []
    lim = Limits.default() if limits is None else limits
    if not isinstance(buf, np.ndarray):  # header bytes are gathered with numpy
        buf = np.frombuffer(buf, np.uint8)
    # packets of the QUIC flows grouped by flow, frame order inside each group
    sel = np.nonzero(np.isin(pkt_flow, np.asarray(flows, np.int64)))[0]
    order = sel[np.argsort(pkt_flow[sel], kind="stable")]
    keys = pkt_flow[order]
    bounds = np.searchsorted(keys, np.asarray(flows, np.int64), side="left").tolist() + [
        order.shape[0]
    ]
    # the first bytes of every datagram, gathered once in file order with the mapping's
    # pages dropped as the gather passes (most datagrams are never read again)
    heads = _heads(buf, payload_off[order])
    fed = [0]  # datagrams fed (read from the file) so far
    out: list[QuicFlow] = []
    with _gc_paused():  # many objects per connection, no reference cycles
        for k, f in enumerate(flows):
            rows = order[bounds[k] : bounds[k + 1]]
            if rows.shape[0] == 0:
                continue
            head = heads[bounds[k] : bounds[k + 1]]
            swapped = int(pkt_dir[rows[0]]) == 1  # the first datagram is the QUIC client's
            conn = QuicConnection(
                keylog,
                max_streams=lim["quic_streams"],
                max_handshake_message=lim["handshake_message_bytes"],
            )
            short: list[tuple[Any, ...]] = []
            try:
                _feed_flow(
                    conn,
                    buf,
                    head,
                    rows,
                    payload_off,
                    payload_caplen,
                    ts_ns,
                    pkt_dir,
                    swapped,
                    short,
                    fed,
                )
            except Exception as exc:  # noqa: BLE001 - one connection's bug, not the capture's
                if errors is None:
                    raise
                errors.append(isolate("quic", exc, flow=f))
                continue
            out.append(
                QuicFlow(
                    flow=f,
                    conn=conn,
                    swapped=swapped,
                    datagrams=int(rows.shape[0]),
                    datagram_frames=(rows + 1).astype(np.int64),
                    datagram_bytes=np.asarray(payload_len[rows], np.int64),
                    limits=lim,
                    frame_ts=ts_ns,
                    frame_caplen=payload_caplen,
                    **_short_columns(short),
                )
            )
    return out


# the bytes of a short header the DCID is resolved from: first byte + MAX_CID_LENGTH
_HEAD = 1 + 20
_MAX_CANDIDATES = 64  # more receiver CIDs than this: datagrams are fed one by one
_DROP_EVERY = 64  # scattered datagram reads between drops of the mapping's pages
_HEX = np.array([f"{i:02x}" for i in range(256)], "<U2")


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic-GC passes inside (each would walk every object the dissector keeps)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _heads(buf: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """``_HEAD`` bytes of ``buf`` at each offset (an (n, _HEAD) matrix), bytes past the
    buffer's end 0; read in offset order, the pages dropped behind the read."""
    n = buf.shape[0]
    ok = offs + _HEAD <= n
    if ok.all():
        return rows_at_released(buf, offs, _HEAD)
    out = np.zeros((offs.shape[0], _HEAD), np.uint8)
    out[ok] = rows_at_released(buf, offs[ok], _HEAD)
    tail = np.nonzero(~ok)[0]
    idx = offs[tail, None] + np.arange(_HEAD)
    out[tail] = np.where(idx < n, buf[np.minimum(idx, n - 1)], 0) if n else 0
    return out


def _feed_flow(
    conn: QuicConnection,
    buf: Any,
    heads: np.ndarray,
    rows: np.ndarray,
    payload_off: np.ndarray,
    payload_caplen: np.ndarray,
    ts_ns: np.ndarray,
    pkt_dir: np.ndarray,
    swapped: bool,
    short: list[tuple[Any, ...]],
    fed: list[int],
) -> None:
    """Feed one flow's datagrams (``rows``, frame order; ``heads``: their first bytes)
    to ``conn``.

    Runs of short-header datagrams that no key can open (``conn.unkeyed_1rtt``: no key
    log, or no ClientHello yet) change nothing in the connection: each would be one
    undecrypted 1-RTT record.  Those are taken as columns (appended to ``short``:
    position in ``rows``, from the client, DCID hex, reason) with the DCID length
    resolved as the dissector does (``conn.short_dcid_candidates``), vectorised; every
    other datagram, and one whose DCID would not fit, goes through ``conn.feed``.
    """
    lens = payload_caplen[rows]
    offs = payload_off[rows]
    live = np.nonzero(lens > 0)[0]
    if live.shape[0] == 0:
        return
    first = heads[live, 0]
    is_short = (first & 0x80) == 0
    # runs of consecutive live datagrams with the same header form
    cut = np.nonzero(is_short[1:] != is_short[:-1])[0] + 1
    starts = np.concatenate(([0], cut)).tolist()
    ends = np.concatenate((cut, [live.shape[0]])).tolist()
    dirs = pkt_dir[rows]
    from_client = (dirs == 0) != swapped

    def feed(ks: np.ndarray) -> None:
        for k in ks.tolist():
            o, ln = int(offs[k]), int(lens[k])
            conn.feed(buf[o : o + ln], int(rows[k]) + 1, int(ts_ns[rows[k]]), bool(from_client[k]))
            fed[0] += 1
            if fed[0] % _DROP_EVERY == 0:
                drop_pages(buf)  # scattered reads: each maps a large span of the file

    for a, b in zip(starts, ends, strict=True):
        ks = live[a:b]
        if not is_short[a]:
            feed(ks)
            continue
        why = {d: conn.unkeyed_1rtt(d) for d in DIRS}
        cand = {d: conn.short_dcid_candidates(d) for d in DIRS}
        if any(w is None for w in why.values()) or any(
            c is not None and len(c[0]) > _MAX_CANDIDATES for c in cand.values()
        ):
            feed(ks)
            continue
        _take_short(heads, lens, ks, from_client[ks], why, cand, short, feed)


def _take_short(
    heads: np.ndarray,
    lens_all: np.ndarray,
    ks: np.ndarray,
    fc: np.ndarray,
    why: dict[str, Any],
    cand: dict[str, Any],
    short: list[tuple[Any, ...]],
    feed: Any,
) -> None:
    """One run of unkeyed short-header datagrams as columns (see :func:`_feed_flow`).

    The DCID and the reason of each row are codes into name lists (most DCIDs are one
    of the receiver's CIDs: their names are those CIDs in hex)."""
    n = ks.shape[0]
    lens = lens_all[ks]
    # first byte + the DCID bytes any resolution can read (bytes past a datagram's end
    # are never compared: ``rest`` and ``fits`` below)
    w = 1 + max((max(len(c[0][0]), c[1]) for c in cand.values() if c is not None), default=0)
    head = heads[ks, :w]
    rest = np.minimum(lens - 1, _HEAD - 1)  # bytes the dissector resolves from
    dlen = np.full(n, -1, np.int64)  # -1: DCID length unknown (no receiver CID)
    dcode = np.full(n, -1, np.int64)  # DCID name: -1 not one of the receiver's CIDs
    dnames: list[str] = [""]  # code 0: no DCID bytes
    reason = np.zeros(n, np.int64)
    rnames: list[str] = []
    for d, client in (("c2s", True), ("s2c", False)):
        sel = fc == client
        if not sel.any():
            continue
        known, unknown = why[d]
        c = cand[d]
        reason[sel] = len(rnames)
        if c is None:
            rnames.append(unknown)
            continue
        rnames.append(known)
        ordered, common = c
        got = np.full(n, -1, np.int64)
        for cid in ordered:  # longest first: the first prefix that matches wins
            m = len(cid)
            hit = sel & (got < 0) & (rest >= m)
            if m:
                hit &= (head[:, 1 : 1 + m] == np.frombuffer(cid, np.uint8)).all(axis=1)
            got[hit] = m
            dcode[hit] = len(dnames)
            dnames.append(cid.hex())
        got[sel & (got < 0)] = common
        dlen[sel] = got[sel]
    fits = lens - 1 >= dlen  # a DCID past the datagram's end: malformed, fed
    if not fits.all():
        feed(ks[~fits])
        keep = fits
        ks, fc, head, dlen = ks[keep], fc[keep], head[keep], dlen[keep]
        dcode, reason = dcode[keep], reason[keep]
    dcode[dlen <= 0] = 0
    other = np.nonzero(dcode < 0)[0]  # the most common length, bytes of no known CID
    for m in np.unique(dlen[other]).tolist():
        rows = other[dlen[other] == m]
        raw = np.ascontiguousarray(head[rows, 1 : 1 + m]).view(f"V{m}").reshape(-1)
        uniq, inv = np.unique(raw, return_inverse=True)
        dcode[rows] = len(dnames) + inv.reshape(-1)
        dnames.extend(bytes(u).hex() for u in uniq)
    short.append((ks, fc, dcode, dnames, reason, rnames))


def _short_columns(short: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The QuicFlow short_* fields from :func:`_take_short`'s runs (codes made global
    to the flow's name lists)."""
    if not short:
        return {}
    dcodes, rcodes, dnames, rnames = [], [], [], []
    for _ks, _fc, dc, dn, rc, rn in short:
        dcodes.append(dc + len(dnames))
        rcodes.append(rc + len(rnames))
        dnames.extend(dn)
        rnames.extend(rn)
    return {
        "short_pos": np.concatenate([s[0] for s in short]).astype(np.int32),
        "short_from_client": np.concatenate([s[1] for s in short]).astype(bool),
        "short_dcid": np.concatenate(dcodes).astype(np.int32),
        "short_dcid_names": dnames,
        "short_reason": np.concatenate(rcodes).astype(np.int32),
        "short_reason_names": rnames,
    }


# --------------------------------------------------------------------------- tables


def summary_rows(flows: list[QuicFlow]) -> dict[str, list[Any]]:
    """Columns of ``Trace.quic`` (schema "quic"), one row per connection."""
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "flow",
            "version",
            "version_name",
            "client_dcid",
            "sni",
            "alpn",
            "alpn_offered",
            "tls_versions_offered",
            "cipher",
            "key_exchange_group",
            "client_scid",
            "server_scid",
            "decrypted",
            "packets",
            "undecrypted_packets",
            "why_not",
            "handshake_ms",
            "handshake_network_ms",
            "handshake_server_ms",
            "handshake_flight_ms",
            "handshake_client_ms",
            "retry",
            "version_negotiation",
            "key_updates",
            "streams",
            "stream_bytes",
            "retransmitted_stream_bytes",
            "roles_swapped",
        )
    }
    for qf in flows:
        c = qf.conn
        prot = [p for p in c.packets if p.packet_type not in _CLEAR]
        bad = [p for p in prot if not p.decrypted]
        n_short = int(qf.short_pos.shape[0])  # undecrypted 1-RTT packets too
        why_not = bad[0].reason if bad else None
        if n_short and (not bad or int(qf.datagram_frames[qf.short_pos[0]]) < bad[0].frame):
            why_not = qf.short_reason_names[int(qf.short_reason[0])]
        hs = c.handshake
        cols["flow"].append(qf.flow)
        # the version in use; a connection that never got past a version this package does
        # not know (e.g. RFC 9000 §15 0x?a?a?a?a forcing negotiation) shows the one it tried
        v = c.version if c.version is not None else c.first_version
        cols["version"].append(None if v is None else f"0x{v:08x}")
        cols["version_name"].append(quic_version_name(v) or None)
        cols["client_dcid"].append(c.client_dcid_hex)
        cols["sni"].append(c.sni)
        cols["alpn"].append(c.alpn)
        cols["alpn_offered"].append(",".join(c.alpn_offered) if c.alpn_offered else None)
        cols["tls_versions_offered"].append(
            ",".join(version_name(v) for v in c.tls_versions_offered) or None
        )
        cols["cipher"].append(c.cipher_name)
        g = c.key_share_group
        cols["key_exchange_group"].append(None if g is None else group_name(g))
        cols["client_scid"].append(None if c.client_scid is None else c.client_scid.hex())
        cols["server_scid"].append(None if c.server_scid is None else c.server_scid.hex())
        cols["decrypted"].append(bool(prot) and not bad and not n_short)
        cols["packets"].append(len(c.packets) + n_short)
        cols["undecrypted_packets"].append(len(bad) + n_short)
        cols["why_not"].append(why_not)
        cols["handshake_ms"].append(hs.handshake_ms)
        sp = _split(qf)
        cols["handshake_network_ms"].append(sp.network_ms)
        cols["handshake_server_ms"].append(sp.server_ms)
        cols["handshake_flight_ms"].append(sp.flight_ms)
        cols["handshake_client_ms"].append(sp.client_ms)
        cols["retry"].append(hs.retry is not None)
        cols["version_negotiation"].append(hs.version_negotiation is not None)
        cols["key_updates"].append(sum(c.key_updates.values()))
        cols["streams"].append(len({s for s, _ in c.streams()}))
        cols["stream_bytes"].append(sum(r.new_bytes for r in c.stream_frames))
        cols["retransmitted_stream_bytes"].append(sum(r.duplicate_bytes for r in c.stream_frames))
        cols["roles_swapped"].append(qf.swapped)
    return cols


def _detail(p: Any, f: Any) -> str:
    kind = _KEY_NAMES.get(p.packet_type, str(p.packet_type))
    head = f"{kind} pn {p.packet_number}"
    if isinstance(f, Stream):
        return f"{head} stream {f.stream_id}" + (" FIN" if f.fin else "")
    if isinstance(f, Ack):
        rng = ",".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in reversed(f.ranges))
        return f"{head} acks {rng}"
    if isinstance(f, Crypto):
        return head
    if isinstance(f, _STREAM_ID_FRAMES):
        return f"{head} stream {f.stream_id}"
    return head


def message_rows(flows: list[QuicFlow]) -> dict[str, list[Any]]:
    """Columns of the "messages" schema: one row per QUIC frame except PADDING.

    ``offset``/``length`` are the stream (or CRYPTO) offset and data length for
    STREAM and CRYPTO frames; for every other frame the packet's offset in its
    datagram and the frame's length on the wire.  ``frame``/``ts_ns`` are the
    packet's (when the frame arrived at the capture point).
    """
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "flow",
            "dir",
            "stream",
            "protocol",
            "type",
            "offset",
            "length",
            "frame",
            "ts_ns",
            "request",
            "detail",
        )
    }
    for qf in flows:
        dmap = {d: qf.flow_dir(d) for d in DIRS}
        left = qf.limits["messages"]  # rows per connection (message_limit_exceeded)
        for p in qf.conn.packets:
            if not p.frames or left <= 0:
                continue
            d = dmap[p.direction]
            for f in p.frames:
                if isinstance(f, Padding):
                    continue
                left -= 1
                if left < 0:
                    break
                if isinstance(f, (Stream, Crypto)):
                    off, ln = f.offset, f.length
                else:
                    off, ln = p.offset, f.frame_length
                sid = f.stream_id if isinstance(f, (Stream, *_STREAM_ID_FRAMES)) else None
                cols["flow"].append(qf.flow)
                cols["dir"].append(d)
                cols["stream"].append(sid)
                cols["protocol"].append("quic")
                cols["type"].append(frame_name(f.frame_type))
                cols["offset"].append(off)
                cols["length"].append(ln)
                cols["frame"].append(p.frame)
                cols["ts_ns"].append(p.ts_ns)
                cols["request"].append(None)
                cols["detail"].append(_detail(p, f))
    return cols


def anomaly_rows(flows: list[QuicFlow]) -> list[dict[str, Any]]:
    """The dissector's anomalies as rows of the "anomalies" schema, and the TLS messages
    whose quic_transport_parameters do not parse (``transport_parameters_malformed``)."""
    out = [
        {"name": a.name, "frame": a.frame, "flow": qf.flow, "offset": None, "detail": a.detail}
        for qf in flows
        for a in qf.conn.anomalies
    ]
    for qf in flows:  # the limits: what was only counted
        c, lim = qf.conn, qf.limits
        if c.streams_over_limit:
            out.append(
                limit_anomaly(
                    "quic_stream_limit_exceeded",
                    f"{len(c.streams()) + c.streams_over_limit} stream directions, the "
                    f"quic_streams limit is {lim['quic_streams']}: {c.streams_over_limit} more "
                    f"({c.stream_bytes_over_limit} STREAM bytes) are counted, not reassembled "
                    "(--limit quic_streams=N)",
                    flow=qf.flow,
                )
            )
        n = sum(1 for p in c.packets for f in p.frames if not isinstance(f, Padding))
        if n > lim["messages"]:
            out.append(
                limit_anomaly(
                    "message_limit_exceeded",
                    f"{n} QUIC frames, the messages limit is {lim['messages']}: {n - lim['messages']} "
                    "more are counted, not listed in messages (--limit messages=N)",
                    flow=qf.flow,
                )
            )
    for qf in flows:
        for m in qf.conn.tls_messages:
            err = _transport_params(m.decoded, qf.conn.version)[1]
            if err is not None:
                out.append(
                    {
                        "name": "transport_parameters_malformed",
                        "frame": m.frame,
                        "flow": qf.flow,
                        "offset": None,
                        "detail": f"{qf.flow_dir(m.direction)} {m.name}: {err}",
                    }
                )
    return out


# --------------------------------------------------------------------------- declared tables
#
# Trace.quic_packets, quic_frames, quic_tls and quic_handshake (pcapkit.schema): what the
# QUIC detectors and the qlog export read, so that neither touches a dissector object.
# Rows keep the dissector's order: connections in flow order, packets in capture order
# (coalesced packets in datagram order), frames in packet order.

_DIR_CODE = {"c2s": 0, "s2c": 1}
_EXT_PRE_SHARED_KEY = 41  # RFC 8446 §4.2
_EXT_EARLY_DATA = 42
# quic_transport_parameters names (dissectors.quic.transport_params) → quic_tls columns
_TP_INT = {
    "initial_max_data": "initial_max_data",
    "initial_max_stream_data_bidi_local": "initial_max_stream_data_bidi_local",
    "initial_max_stream_data_bidi_remote": "initial_max_stream_data_bidi_remote",
    "initial_max_stream_data_uni": "initial_max_stream_data_uni",
    "initial_max_streams_bidi": "initial_max_streams_bidi",
    "initial_max_streams_uni": "initial_max_streams_uni",
    "max_idle_timeout": "max_idle_timeout_ms",
    "max_udp_payload_size": "max_udp_payload_size",
    "ack_delay_exponent": "ack_delay_exponent",
    "max_ack_delay": "max_ack_delay_ms",
    "active_connection_id_limit": "active_connection_id_limit",
    "max_datagram_frame_size": "max_datagram_frame_size",
}
_TP_HEX = (
    "original_destination_connection_id",
    "initial_source_connection_id",
    "retry_source_connection_id",
)
_TP_COLUMNS = (*_TP_INT.values(), "disable_active_migration", *_TP_HEX)
_HS_EVENTS = {  # HandshakeTiming field → quic_handshake column prefix
    "client_initial": "client_initial",
    "version_negotiation": "version_negotiation",
    "retry": "retry",
    "server_initial": "server_initial",
    "client_hello": "client_hello",
    "server_hello": "server_hello",
    "server_finished": "server_finished",
    "client_finished": "client_finished",
    "handshake_done": "handshake_done",
    "first_1rtt_c2s": "client_first_1rtt",
    "first_1rtt_s2c": "server_first_1rtt",
}
# quic_frames columns that depend on the frame type, in schema order
_FRAME_FIELDS = tuple(
    schema.columns("quic_frames")[schema.columns("quic_frames").index("stream_id") :]
)


def _transport_params(
    decoded: Any, version: int | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """(parameters, None), (None, None) when absent, (None, why) when they do not parse;
    ``version`` is the connection's (drafts before 27 encode them differently)."""
    try:
        return from_extensions(getattr(decoded, "extensions", None), version), None
    except DissectError as e:
        return None, str(e)


def _frame_fields(f: Any, srow: Any) -> dict[str, Any]:
    """The type-specific quic_frames columns of one frame (``srow``: its StreamFrameRow)."""
    if isinstance(f, Stream):
        out = {"stream_id": f.stream_id, "offset": f.offset, "length": f.length, "fin": f.fin}
        if srow is not None:
            out["retransmission"] = srow.retransmission
            out["new_bytes"] = srow.new_bytes
            out["duplicate_bytes"] = srow.duplicate_bytes
            out["contiguous_end"] = srow.contiguous_end
        return out
    if isinstance(f, Ack):
        out = {
            "largest_acknowledged": f.largest_acknowledged,
            "ack_delay": f.ack_delay,
            "ack_ranges": f.ranges,
        }
        if f.ecn_counts:
            out["ecn_ect0"], out["ecn_ect1"], out["ecn_ce"] = f.ecn_counts
        return out
    if isinstance(f, Crypto):
        return {"offset": f.offset, "length": f.length}
    if isinstance(f, MaxData):
        return {"maximum": f.maximum_data}
    if isinstance(f, MaxStreamData):
        return {"stream_id": f.stream_id, "maximum": f.maximum_stream_data}
    if isinstance(f, (MaxStreams, StreamsBlocked)):
        return {"maximum": f.maximum_streams, "bidirectional": f.bidirectional}
    if isinstance(f, DataBlocked):
        return {"maximum": f.maximum_data}
    if isinstance(f, StreamDataBlocked):
        return {"stream_id": f.stream_id, "maximum": f.maximum_stream_data}
    if isinstance(f, ResetStream):
        return {
            "stream_id": f.stream_id,
            "error_code": f.application_protocol_error_code,
            "final_size": f.final_size,
        }
    if isinstance(f, StopSending):
        return {"stream_id": f.stream_id, "error_code": f.application_protocol_error_code}
    if isinstance(f, ConnectionClose):
        return {
            "error_code": f.error_code,
            "error_frame_type": f.error_frame_type,
            "reason": f.reason_phrase.decode("utf-8", "replace"),
        }
    if isinstance(f, NewConnectionId):
        return {
            "sequence_number": f.sequence_number,
            "retire_prior_to": f.retire_prior_to,
            "connection_id": f.connection_id.hex(),
        }
    if isinstance(f, RetireConnectionId):
        return {"sequence_number": f.sequence_number}
    if isinstance(f, Datagram):
        return {"length": len(f.data)}
    return {}


_EMPTY: dict[str, pd.DataFrame] = {}
# numpy base type of the nullable columns the QUIC tables use (schema dtypes)
_MASKED_BASE = {"Int64": np.int64, "Int8": np.int64, "Float64": np.float64, "boolean": bool}


def _columns(table: str, rows: list[tuple[Any, ...]], names: tuple[str, ...]) -> pd.DataFrame:
    """A declared table from row tuples (``names`` gives the tuple's columns).

    Nullable columns are built as masked arrays from the values directly (``None`` =
    missing), not through pandas' inference per column; an empty table is a copy of
    one built once (most captures have no QUIC, and the detectors get these tables).
    """
    n = len(rows)
    if n == 0:
        if table not in _EMPTY:
            _EMPTY[table] = schema.frame(table, n=0)
        return _EMPTY[table].copy(deep=True)
    dtypes = {c: dt for c, dt, _ in schema.SCHEMAS[table]}
    cols: dict[str, Any] = {}
    for name, vals in zip(names, zip(*rows, strict=True), strict=True):
        dt = dtypes[name]
        if name == "dir":
            cols[name] = schema.categorical(np.asarray(vals, np.int64), schema.DIRS)
        elif dt in _MASKED_BASE:
            miss = np.fromiter((v is None for v in vals), bool, n)
            base = _MASKED_BASE[dt]
            zero = base(0)
            arr = np.fromiter((zero if v is None else v for v in vals), base, n)
            cols[name] = schema.masked(arr, miss, dt)
        else:
            cols[name] = vals
    return schema.frame(table, cols, n)


_PACKET_COLS = tuple(schema.columns("quic_packets"))


def packet_table(flows: list[QuicFlow]) -> pd.DataFrame:
    """``Trace.quic_packets``: one row per QUIC packet (schema "quic_packets").

    The dissector's records become rows one by one; the short-header datagrams
    :func:`run_quic` took as columns (``QuicFlow.short_*``) become rows as arrays, merged
    in by frame (one packet per such datagram, none of them coalesced)."""
    rows: list[tuple[Any, ...]] = []
    short_n = sum(int(qf.short_pos.shape[0]) for qf in flows)
    if short_n == 0:
        for qf in flows:
            rows.extend(_packet_rows(qf))
        return _columns("quic_packets", rows, _PACKET_COLS)
    # the records' rows and the short rows, each in the dissector's order, merged:
    # connections in flow order, packets by frame (coalesced packets keep their order)
    rec_conn: list[int] = []
    for k, qf in enumerate(flows):
        got = _packet_rows(qf)
        rows.extend(got)
        rec_conn.extend([k] * len(got))
    r = len(rows)
    n = r + short_n
    dtypes = {c: dt for c, dt, _ in schema.SCHEMAS["quic_packets"]}
    rec_cols = list(zip(*rows, strict=True)) if rows else [()] * len(_PACKET_COLS)
    rec = dict(zip(_PACKET_COLS, rec_cols, strict=True))
    sc = _short_packet_columns(flows)
    pos_rec, pos_short = _merge_positions(
        np.asarray(rec_conn, np.int64), np.asarray(rec["frame"], np.int64).reshape(r),
        sc.pop("_conn"), sc["frame"],
    )  # fmt: skip
    data: dict[str, Any] = {}
    for name in _PACKET_COLS:
        vals, short_v, dt = rec[name], sc[name], dtypes[name]
        if dt == "str":
            data[name] = _str_column(vals, short_v, n, pos_rec, pos_short, sc["_n"])
            continue
        if dt in _MASKED_BASE:
            base = np.dtype(dt.lower()) if dt[0] == "I" else np.dtype(_MASKED_BASE[dt])
            values = np.zeros(n, base)
            miss = np.zeros(n, bool)
            miss[pos_rec] = np.fromiter((v is None for v in vals), bool, r)
            values[pos_rec] = np.fromiter((0 if x is None else x for x in vals), np.int64, r)
            if short_v is None:  # missing in every short row
                miss[pos_short] = True
            else:
                _put(values, pos_short, short_v, sc["_n"])
            data[name] = (
                pd.arrays.IntegerArray(values, miss)
                if dt[0] == "I"
                else schema.masked(values, miss, dt)
            )
            continue
        col = np.empty(n, np.int64 if name == "dir" else np.dtype(dt))
        col[pos_rec] = np.asarray(vals, col.dtype).reshape(r)
        _put(col, pos_short, short_v, sc["_n"])
        data[name] = schema.categorical(col, schema.DIRS) if name == "dir" else col
    return schema.frame("quic_packets", data, n)


def _merge_positions(
    rec_conn: np.ndarray, rec_frame: np.ndarray, short_conn: np.ndarray, short_frame: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers of the records' rows and of the short rows once merged by
    (connection, frame).  Each side is in that order already (connections in order, frames
    rising inside each; records of one datagram share a frame, no short row does)."""
    span = int(max(rec_frame.max(initial=0), short_frame.max(initial=0))) + 1
    conns = int(max(rec_conn.max(initial=0), short_conn.max(initial=0))) + 1
    if conns * span < 2**62:
        rk, sk = rec_conn * span + rec_frame, short_conn * span + short_frame
        pos_rec = np.arange(rk.shape[0]) + np.searchsorted(sk, rk)
        pos_short = np.arange(sk.shape[0]) + np.searchsorted(rk, sk)
        return pos_rec, pos_short
    order = np.lexsort(
        (np.concatenate((rec_frame, short_frame)), np.concatenate((rec_conn, short_conn)))
    )
    pos = np.empty(order.shape[0], np.int64)
    pos[order] = np.arange(order.shape[0])
    return pos[: rec_frame.shape[0]], pos[rec_frame.shape[0] :]


def _str_column(
    vals: tuple[Any, ...],
    short: Any,
    n: int,
    pos_rec: np.ndarray,
    pos_short: np.ndarray,
    counts: list[int],
) -> Any:
    """A "str" column of ``n`` rows: the records' values (str or None) at ``pos_rec``,
    the short rows' ((codes, names), or one value for all of them) at ``pos_short`` — as
    dictionary codes, not one Python object per row (the pyarrow-backed string dtype
    decodes them)."""
    cats: dict[str, int] = {}
    codes = np.empty(n, np.int32)
    codes[pos_rec] = np.fromiter(
        (-1 if v is None else cats.setdefault(v, len(cats)) for v in vals), np.int32, len(vals)
    )
    if isinstance(short, _PerFlow):  # (codes, names) per connection
        names = list(cats)
        parts = _PerFlow()
        for c, nm in short:
            parts.append(c + len(names))
            names.extend(nm)
        _put(codes, pos_short, parts, counts)
    else:
        codes[pos_short] = -1 if short is None else cats.setdefault(short, len(cats))
        names = list(cats)
    dtype = pd.StringDtype(na_value=np.nan)
    if dtype.storage == "pyarrow":
        import pyarrow as pa

        idx = pa.array(codes, mask=codes < 0)
        arr = pa.DictionaryArray.from_arrays(idx, pa.array(names, type=pa.large_string()))
        return pd.array(arr.cast(pa.large_string()), dtype="str")
    out = np.array([*names, None], dtype=object)[codes]  # -1: the None at the end
    return pd.array(out, dtype="str")


def _packet_rows(qf: QuicFlow) -> list[tuple[Any, ...]]:
    """The quic_packets rows of one connection's PacketRecords, in its order."""
    pk = qf.conn.packets
    if not pk:
        return []
    # each record's datagram: its position among the flow's datagrams (frame order)
    at = np.searchsorted(
        qf.datagram_frames, np.fromiter((p.frame for p in pk), np.int64, len(pk))
    ).tolist()
    sizes = qf.datagram_bytes[at].tolist()
    rows: list[tuple[Any, ...]] = []
    for p, k, size in zip(pk, at, sizes, strict=True):
        pt = p.packet_type
        space = p.space
        rows.append(
            (
                qf.flow,
                _DIR_CODE[qf.flow_dir(p.direction)],
                p.direction == "c2s",
                p.frame,
                p.ts_ns,
                k,
                size,
                p.index,
                p.offset,
                p.length,
                None if pt is None else pt.value,
                None if space is None else space.value,
                p.version,
                p.dcid.hex(),
                p.scid.hex(),
                len(p.token) if pt in (PacketType.INITIAL, PacketType.RETRY) else None,
                p.packet_number,
                p.key_phase,
                p.decrypted,
                p.reason,
            )
        )
    return rows


class _PerFlow(list):  # type: ignore[type-arg]
    """A short-row column given per connection (one array or value per flow, in
    order), written into the table at the short rows' positions without concatenating."""


def _short_packet_columns(flows: list[QuicFlow]) -> dict[str, Any]:
    """quic_packets columns of the short rows of every connection (flow order, frame
    order inside each): a scalar is the same in every row (None: missing), a
    :class:`_PerFlow` one entry per connection; ``_conn`` (the connection's position in
    ``flows``) and ``frame`` are whole arrays (the merge needs them)."""

    def per(fn: Any) -> _PerFlow:
        return _PerFlow(fn(qf) for qf in flows)

    counts = [int(qf.short_pos.shape[0]) for qf in flows]
    return {
        "_n": counts,
        "_conn": np.repeat(np.arange(len(flows)), counts),
        "flow": per(lambda qf: qf.flow),
        # QUIC direction → flow direction: the same unless the roles are swapped
        "dir": per(lambda qf: qf.short_from_client if qf.swapped else ~qf.short_from_client),
        "from_client": per(lambda qf: qf.short_from_client),
        "frame": np.concatenate([qf.datagram_frames[qf.short_pos] for qf in flows]),
        "ts_ns": per(lambda qf: qf.short_ts),
        "datagram": per(lambda qf: qf.short_pos),
        "datagram_bytes": per(lambda qf: qf.datagram_bytes[qf.short_pos]),
        "coalesced_index": 0,
        "offset": 0,
        "length": per(lambda qf: qf.short_len),
        "packet_type": PacketType.ONE_RTT.value,
        "space": PacketSpace.APPLICATION.value,
        "version": None,
        "dcid": per(lambda qf: (qf.short_dcid, qf.short_dcid_names)),
        "scid": "",
        "token_bytes": None,
        "packet_number": None,
        "key_phase": None,
        "decrypted": False,
        "why_not": per(lambda qf: (qf.short_reason, qf.short_reason_names)),
    }


def _put(col: np.ndarray, pos: np.ndarray, value: Any, counts: list[int]) -> None:
    """``col[pos] = value``; a :class:`_PerFlow` value one connection's rows at a time."""
    if not isinstance(value, _PerFlow):
        col[pos] = value
        return
    a = 0
    for v, k in zip(value, counts, strict=True):
        if k:
            col[pos[a : a + k]] = v
        a += k


_FRAME_HEAD = (
    "flow",
    "dir",
    "from_client",
    "packet",
    "frame",
    "ts_ns",
    "space",
    "packet_number",
    "frame_type",
    "type",
    "frame_offset",
    "frame_length",
)


def frame_table(flows: list[QuicFlow]) -> pd.DataFrame:
    """``Trace.quic_frames``: one row per frame of every decrypted packet, PADDING
    included (schema "quic_frames").  STREAM frames that were reassembled carry the
    dissector's reassembly facts (retransmission, new bytes, contiguous end)."""
    rows: list[tuple[Any, ...]] = []
    base = 0  # first row of the connection in quic_packets
    for qf in flows:
        # row of quic_packets of each record: the short rows before it (by frame) count
        n_rec = len(qf.conn.packets)
        at = np.arange(n_rec, dtype=np.int64) + base
        if qf.short_pos.shape[0]:
            rec_frames = np.fromiter((p.frame for p in qf.conn.packets), np.int64, n_rec)
            at += np.searchsorted(qf.datagram_frames[qf.short_pos], rec_frames)
        base += qf.packet_count
        packet_row = at.tolist()
        # the reassembly row of every STREAM frame the dissector applied, by identity of
        # (direction, frame, packet number, stream, offset, length), in order
        srows: dict[tuple[Any, ...], list[Any]] = {}
        for r in qf.conn.stream_frames:
            key = (r.direction, r.frame, r.packet_number, r.stream_id, r.offset, r.length)
            srows.setdefault(key, []).append(r)
        for j, p in enumerate(qf.conn.packets):
            if not p.frames:
                continue
            i = packet_row[j]
            d = _DIR_CODE[qf.flow_dir(p.direction)]
            fc = p.direction == "c2s"
            space = p.space.value if p.space is not None else None
            for f in p.frames:
                srow = None
                if isinstance(f, Stream):
                    key = (p.direction, p.frame, p.packet_number, f.stream_id, f.offset, f.length)
                    got = srows.get(key)
                    srow = got.pop(0) if got else None
                extra = _frame_fields(f, srow)
                rows.append(
                    (
                        qf.flow, d, fc, i, p.frame, p.ts_ns, space, p.packet_number,
                        f.frame_type, frame_name(f.frame_type), f.frame_offset, f.frame_length,
                        *(extra.get(c) for c in _FRAME_FIELDS),
                    )
                )  # fmt: skip
    return _columns("quic_frames", rows, _FRAME_HEAD + _FRAME_FIELDS)


_TLS_HEAD = (
    "flow",
    "dir",
    "from_client",
    "frame",
    "ts_ns",
    "space",
    "msg_type",
    "name",
    "offset",
    "length",
    "decoded",
    "extensions",
    "pre_shared_key",
    "early_data",
)


def tls_table(flows: list[QuicFlow]) -> pd.DataFrame:
    """``Trace.quic_tls``: one row per TLS handshake message carried in CRYPTO frames,
    with the facts of its extensions and the transport parameters it announced."""
    rows: list[tuple[Any, ...]] = []
    for qf in flows:
        for m in qf.conn.tls_messages:
            ext = getattr(m.decoded, "extensions", None)
            types = None if ext is None else tuple(t for t, _ in ext)
            tp = _transport_params(m.decoded, qf.conn.version)[0]
            tpv: list[Any] = [None] * len(_TP_COLUMNS)
            if tp is not None:
                tpv = [tp.get(k) for k in _TP_INT]
                tpv.append(bool(tp.get("disable_active_migration", False)))
                tpv.extend(None if tp.get(k) is None else bytes(tp[k]).hex() for k in _TP_HEX)
            rows.append(
                (
                    qf.flow,
                    _DIR_CODE[qf.flow_dir(m.direction)],
                    m.direction == "c2s",
                    m.frame,
                    m.ts_ns,
                    m.space.value,
                    m.msg_type,
                    m.name,
                    m.offset,
                    m.length,
                    m.decoded is not None,
                    types,
                    _EXT_PRE_SHARED_KEY in (types or ()),
                    _EXT_EARLY_DATA in (types or ()),
                    *tpv,
                )
            )
    return _columns("quic_tls", rows, _TLS_HEAD + _TP_COLUMNS)


def handshake_table(flows: list[QuicFlow]) -> pd.DataFrame:
    """``Trace.quic_handshake``: one row per connection, the frame and time of each
    handshake milestone (first occurrence) as the dissector saw them."""
    rows: list[tuple[Any, ...]] = []
    names: tuple[str, ...] = ("flow",)
    for col in _HS_EVENTS.values():
        names += (f"{col}_frame", f"{col}_ts_ns")
    names += ("confirmed_ms",)
    for qf in flows:
        hs = qf.conn.handshake
        row: list[Any] = [qf.flow]
        for ev in _HS_EVENTS:
            e = getattr(hs, ev)
            row += [None, None] if e is None else [e.frame, e.ts_ns]
        row.append(hs.confirmed_ms)
        rows.append(tuple(row))
    return _columns("quic_handshake", rows, names)


def server_leg_ms(qf: QuicFlow) -> float | None:
    """Round trip between the capture point and the QUIC server, from ACK timing.

    RFC 9002 §5.3's RTT sample taken at the capture point: a client packet seen at t,
    the server's ACK frame whose Largest Acknowledged is that packet seen at t', minus
    the ACK Delay the server reported (ack_delay_exponent 3 assumed, RFC 9000 §18.2).
    At a client-side capture that is the path's RTT, at a server-side one ≈ 0; the
    minimum over the connection's 1-RTT samples is used (queueing only adds).
    Handshake timing would include the server's certificate work.
    """
    return _leg_ms(qf, "c2s")


def client_leg_ms(qf: QuicFlow) -> float | None:
    """Round trip between the capture point and the QUIC client (as :func:`server_leg_ms`,
    with the roles exchanged: server packets and the client's ACKs)."""
    return _leg_ms(qf, "s2c")


def _leg_ms(qf: QuicFlow, sender: str) -> float | None:
    """Minimum RTT sample between P and the endpoint acknowledging ``sender``'s packets."""
    from dissectors.quic.frames import Ack

    conn = qf.conn
    sent: dict[int, int] = {}
    best: int | None = None
    for p in conn.packets:
        ptype = str(getattr(p.packet_type, "value", ""))
        if ptype != "1rtt" or p.packet_number is None:
            continue
        if p.direction == sender:
            sent.setdefault(p.packet_number, p.ts_ns)
            continue
        for fr in p.frames:
            if isinstance(fr, Ack) and fr.largest_acknowledged in sent:
                sample = p.ts_ns - sent[fr.largest_acknowledged] - fr.ack_delay * 8_000
                if sample >= 0 and (best is None or sample < best):
                    best = sample
    return None if best is None else best / 1e6


def _split(qf: QuicFlow) -> Split:
    """The handshake split (:mod:`pcapkit.sessions.timing`): from the client Initial the
    server answered (after a Retry or Version Negotiation, the one sent again: that
    extra round trip is quic_handshake_extra_rtt's) to the client's Finished, with the
    server's first Initial and its Finished between, and the legs from ACK timing."""
    hs = qf.conn.handshake
    si = hs.server_initial
    if si is None:
        return Split()
    asked = [
        p.ts_ns
        for p in qf.conn.packets
        if p.direction == "c2s"
        and str(getattr(p.packet_type, "value", "")) == "initial"
        and p.ts_ns <= si.ts_ns
    ]
    dc, ds = client_leg_ms(qf), server_leg_ms(qf)

    def ns(ms: float | None) -> int | None:
        return None if ms is None else int(round(ms * 1e6))

    return split_handshake(
        asked[-1] if asked else None,
        si.ts_ns,
        None if hs.server_finished is None else hs.server_finished.ts_ns,
        None if hs.client_finished is None else hs.client_finished.ts_ns,  # its answer
        None if hs.client_finished is None else hs.client_finished.ts_ns,
        ns(dc),
        ns(ds),
    )

"""QUIC connections of a capture as qlog traces (JSON-SEQ), for qvis and other qlog tools.

Format: the qlog main schema (draft-ietf-quic-qlog-main-schema, ``qlog_version``
"0.3", the version qvis reads) serialised as JSON text sequences (RFC 7464: each
record starts with RS 0x1E and ends with LF), with the QUIC event definitions of
draft-ietf-quic-qlog-quic-events: ``transport:packet_sent`` / ``packet_received``
with ``header`` (packet_type, packet_number, dcid, scid), ``raw`` (length) and
``frames``.

A capture is a *network* vantage point (main schema §6: ``type: "network"``);
``flow: "client"`` says that events are named from the client's side: packets
the client sent are ``packet_sent``, the server's are ``packet_received``.  Times
are milliseconds relative to ``reference_time`` (the connection's first packet,
ms since the epoch).  Packets that could not be decrypted keep their header and
carry ``"frames": []`` with the reason under ``pcapkit_undecrypted``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

QLOG_VERSION = "0.3"
RS = "\x1e"
_PACKET_TYPES = {
    "initial": "initial",
    "handshake": "handshake",
    "0rtt": "0RTT",
    "1rtt": "1RTT",
    "retry": "retry",
    "version_negotiation": "version_negotiation",
}


def _frame(fr: Any) -> dict[str, Any] | None:
    """One QUIC frame in qlog's QuicFrame shape (quic-events §8.13)."""
    name = type(fr).__name__
    if name == "Padding":
        return {"frame_type": "padding", "raw": {"length": fr.frame_length}}
    if name == "Ping":
        return {"frame_type": "ping"}
    if name == "Ack":
        ranges = [[int(a), int(b)] for a, b in sorted(fr.ranges)] if fr.ranges else []
        out: dict[str, Any] = {
            "frame_type": "ack",
            # ms; the peer's ack_delay_exponent (a transport parameter) is assumed to be
            # the default 3 (RFC 9000 §18.2): raw value × 2³ µs
            "ack_delay": fr.ack_delay * 8 / 1000,
            "acked_ranges": ranges,
        }
        if fr.ecn_counts:
            out["ect0"], out["ect1"], out["ce"] = fr.ecn_counts
        return out
    if name == "Stream":
        return {
            "frame_type": "stream",
            "stream_id": fr.stream_id,
            "offset": fr.offset,
            "length": fr.length,
            "fin": bool(fr.fin),
        }
    if name == "Crypto":
        return {"frame_type": "crypto", "offset": fr.offset, "length": fr.length}
    simple = {
        "ResetStream": (
            "reset_stream",
            {
                "stream_id": "stream_id",
                "application_protocol_error_code": "error_code",
                "final_size": "final_size",
            },
        ),
        "StopSending": (
            "stop_sending",
            {"stream_id": "stream_id", "application_protocol_error_code": "error_code"},
        ),
        "NewToken": ("new_token", {}),
        "MaxData": ("max_data", {"maximum_data": "maximum"}),
        "MaxStreamData": (
            "max_stream_data",
            {"stream_id": "stream_id", "maximum_stream_data": "maximum"},
        ),
        "MaxStreams": ("max_streams", {"maximum_streams": "maximum"}),
        "DataBlocked": ("data_blocked", {"maximum_data": "limit"}),
        "StreamDataBlocked": (
            "stream_data_blocked",
            {"stream_id": "stream_id", "maximum_stream_data": "limit"},
        ),
        "StreamsBlocked": ("streams_blocked", {"maximum_streams": "limit"}),
        "NewConnectionId": (
            "new_connection_id",
            {"sequence_number": "sequence_number", "retire_prior_to": "retire_prior_to"},
        ),
        "RetireConnectionId": ("retire_connection_id", {"sequence_number": "sequence_number"}),
        "PathChallenge": ("path_challenge", {}),
        "PathResponse": ("path_response", {}),
        "HandshakeDone": ("handshake_done", {}),
    }
    if name in simple:
        kind, fields = simple[name]
        out = {"frame_type": kind}
        for src, dst in fields.items():
            out[dst] = getattr(fr, src)
        if name in ("MaxStreams", "StreamsBlocked"):
            out["stream_type"] = "bidirectional" if fr.bidirectional else "unidirectional"
        if name == "NewConnectionId":
            out["connection_id"] = fr.connection_id.hex()
        return out
    if name == "ConnectionClose":
        return {
            "frame_type": "connection_close",
            "error_space": "transport" if fr.frame_type == 0x1C else "application",
            "error_code": fr.error_code,
            "reason": fr.reason_phrase.decode("utf-8", "replace"),
        }
    if name == "Datagram":
        return {"frame_type": "datagram", "length": len(fr.data)}
    return {"frame_type": "unknown", "raw_frame_type": getattr(fr, "frame_type", None)}


def connection_records(qf: Any, *, title: str) -> list[dict[str, Any]]:
    """The qlog header record and one event per packet of one QUIC connection."""
    conn = qf.conn
    pkts = conn.packets
    t0 = min((p.ts_ns for p in pkts), default=0)
    header = {
        "qlog_version": QLOG_VERSION,
        "qlog_format": "JSON-SEQ",
        "title": title,
        "description": "converted by pcapkit from a packet capture (network vantage)",
        "trace": {
            "title": f"flow {qf.flow}",
            "vantage_point": {"name": "capture", "type": "network", "flow": "client"},
            "common_fields": {
                "ODCID": conn.client_dcid_hex,
                "reference_time": t0 / 1e6,
                "time_format": "relative",
                "protocol_type": ["QUIC", "HTTP3"],
            },
        },
    }
    out: list[dict[str, Any]] = [header]
    for p in pkts:
        ptype = getattr(p.packet_type, "value", None)
        hdr: dict[str, Any] = {"packet_type": _PACKET_TYPES.get(str(ptype), "unknown")}
        if p.packet_number is not None:
            hdr["packet_number"] = p.packet_number
        if p.dcid:
            hdr["dcid"] = p.dcid.hex()
        if p.scid:
            hdr["scid"] = p.scid.hex()
        if p.version is not None:
            hdr["version"] = f"{p.version:08x}"
        data: dict[str, Any] = {"header": hdr, "raw": {"length": p.length}}
        frames = [f for f in (_frame(fr) for fr in p.frames) if f is not None]
        data["frames"] = frames
        if not p.decrypted and p.reason:
            data["pcapkit_undecrypted"] = p.reason
        data["pcapkit_frame"] = p.frame
        out.append(
            {
                "time": round((p.ts_ns - t0) / 1e6, 6),
                "name": "transport:packet_sent"
                if p.direction == "c2s"
                else "transport:packet_received",
                "data": data,
            }
        )
    return out


def dumps_seq(records: list[dict[str, Any]]) -> str:
    """RFC 7464 JSON text sequence."""
    return "".join(RS + json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def export_qlog(trace: Any, outdir: str | os.PathLike[str]) -> list[Path]:
    """Write one ``<capture>-flow<N>.sqlog`` per QUIC connection into ``outdir``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(trace.path).name.split(".")[0]
    written = []
    for qf in trace._quic:
        path = out / f"{stem}-flow{qf.flow}.sqlog"
        recs = connection_records(qf, title=f"{Path(trace.path).name} flow {qf.flow}")
        path.write_text(dumps_seq(recs), encoding="utf-8")
        written.append(path)
    return written

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

Built from the declared tables ``Trace.quic``, ``Trace.quic_packets`` and
``Trace.quic_frames`` only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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
# frame types (RFC 9000 §19, RFC 9221 §4) whose qlog form carries no field
_BARE = {0x01: "ping", 0x07: "new_token", 0x1A: "path_challenge", 0x1B: "path_response",
         0x1E: "handshake_done"}  # fmt: skip
# quic_frames columns the qlog frames are built from
_FRAME_COLUMNS = (
    "packet", "frame_type", "frame_length", "stream_id", "offset", "length", "fin",
    "ack_delay", "ack_ranges", "ecn_ect0", "ecn_ect1", "ecn_ce", "maximum", "bidirectional",
    "error_code", "final_size", "reason", "sequence_number", "retire_prior_to",
    "connection_id",
)  # fmt: skip
_PACKET_COLUMNS = (
    "frame", "ts_ns", "from_client", "packet_type", "packet_number", "dcid", "scid",
    "version", "length", "decrypted", "why_not",
)  # fmt: skip


def _py(col: pd.Series) -> list[Any]:
    """A column as JSON-ready Python values, ``None`` where missing."""
    if isinstance(col.dtype, np.dtype) and col.dtype.kind != "O":
        return col.to_numpy().tolist()
    return col.to_numpy(dtype=object, na_value=None).tolist()


def _records(df: pd.DataFrame, columns: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    cols = [_py(df[c]) for c in columns]
    for vals in zip(*cols, strict=True):
        yield dict(zip(columns, vals, strict=True))


def _stream_type(fr: dict[str, Any]) -> str:
    return "bidirectional" if fr["bidirectional"] else "unidirectional"


def _frame(fr: dict[str, Any]) -> dict[str, Any]:
    """One row of ``Trace.quic_frames`` in qlog's QuicFrame shape (quic-events §8.13)."""
    t = fr["frame_type"]
    if t == 0x00:
        return {"frame_type": "padding", "raw": {"length": fr["frame_length"]}}
    if t in _BARE:
        return {"frame_type": _BARE[t]}
    if t in (0x02, 0x03):
        ranges = [[int(a), int(b)] for a, b in sorted(fr["ack_ranges"])] if fr["ack_ranges"] else []
        out: dict[str, Any] = {
            "frame_type": "ack",
            # ms; the peer's ack_delay_exponent (a transport parameter) is assumed to be
            # the default 3 (RFC 9000 §18.2): raw value × 2³ µs
            "ack_delay": fr["ack_delay"] * 8 / 1000,
            "acked_ranges": ranges,
        }
        if fr["ecn_ect0"] is not None:
            out["ect0"], out["ect1"], out["ce"] = fr["ecn_ect0"], fr["ecn_ect1"], fr["ecn_ce"]
        return out
    if 0x08 <= t <= 0x0F:
        return {
            "frame_type": "stream",
            "stream_id": fr["stream_id"],
            "offset": fr["offset"],
            "length": fr["length"],
            "fin": bool(fr["fin"]),
        }
    if t == 0x06:
        return {"frame_type": "crypto", "offset": fr["offset"], "length": fr["length"]}
    if t == 0x04:
        return {
            "frame_type": "reset_stream",
            "stream_id": fr["stream_id"],
            "error_code": fr["error_code"],
            "final_size": fr["final_size"],
        }
    if t == 0x05:
        return {
            "frame_type": "stop_sending",
            "stream_id": fr["stream_id"],
            "error_code": fr["error_code"],
        }
    if t == 0x10:
        return {"frame_type": "max_data", "maximum": fr["maximum"]}
    if t == 0x11:
        return {
            "frame_type": "max_stream_data",
            "stream_id": fr["stream_id"],
            "maximum": fr["maximum"],
        }
    if t in (0x12, 0x13):
        return {
            "frame_type": "max_streams",
            "maximum": fr["maximum"],
            "stream_type": _stream_type(fr),
        }
    if t == 0x14:
        return {"frame_type": "data_blocked", "limit": fr["maximum"]}
    if t == 0x15:
        return {
            "frame_type": "stream_data_blocked",
            "stream_id": fr["stream_id"],
            "limit": fr["maximum"],
        }
    if t in (0x16, 0x17):
        return {
            "frame_type": "streams_blocked",
            "limit": fr["maximum"],
            "stream_type": _stream_type(fr),
        }
    if t == 0x18:
        return {
            "frame_type": "new_connection_id",
            "sequence_number": fr["sequence_number"],
            "retire_prior_to": fr["retire_prior_to"],
            "connection_id": fr["connection_id"],
        }
    if t == 0x19:
        return {"frame_type": "retire_connection_id", "sequence_number": fr["sequence_number"]}
    if t in (0x1C, 0x1D):
        return {
            "frame_type": "connection_close",
            "error_space": "transport" if t == 0x1C else "application",
            "error_code": fr["error_code"],
            "reason": fr["reason"],
        }
    if t in (0x30, 0x31):
        return {"frame_type": "datagram", "length": fr["length"]}
    return {"frame_type": "unknown", "raw_frame_type": t}


def connection_records(
    flow: int,
    client_dcid: str | None,
    packets: pd.DataFrame,
    frames: pd.DataFrame,
    *,
    title: str,
) -> list[dict[str, Any]]:
    """The qlog header record and one event per packet of one QUIC connection.

    ``packets`` are the connection's rows of ``Trace.quic_packets`` (capture order),
    ``frames`` its rows of ``Trace.quic_frames``; ``client_dcid`` is ``quic.client_dcid``.
    """
    by_packet: dict[int, list[dict[str, Any]]] = {}
    for fr in _records(frames, _FRAME_COLUMNS):
        by_packet.setdefault(fr["packet"], []).append(_frame(fr))
    ts = packets["ts_ns"]
    t0 = int(ts.min()) if len(ts) else 0
    header = {
        "qlog_version": QLOG_VERSION,
        "qlog_format": "JSON-SEQ",
        "title": title,
        "description": "converted by pcapkit from a packet capture (network vantage)",
        "trace": {
            "title": f"flow {flow}",
            "vantage_point": {"name": "capture", "type": "network", "flow": "client"},
            "common_fields": {
                "ODCID": client_dcid,
                "reference_time": t0 / 1e6,
                "time_format": "relative",
                "protocol_type": ["QUIC", "HTTP3"],
            },
        },
    }
    out: list[dict[str, Any]] = [header]
    for row, p in zip(packets.index.tolist(), _records(packets, _PACKET_COLUMNS), strict=True):
        hdr: dict[str, Any] = {"packet_type": _PACKET_TYPES.get(str(p["packet_type"]), "unknown")}
        if p["packet_number"] is not None:
            hdr["packet_number"] = p["packet_number"]
        if p["dcid"]:
            hdr["dcid"] = p["dcid"]
        if p["scid"]:
            hdr["scid"] = p["scid"]
        if p["version"] is not None:
            hdr["version"] = f"{p['version']:08x}"
        data: dict[str, Any] = {"header": hdr, "raw": {"length": p["length"]}}
        data["frames"] = by_packet.get(row, [])
        if not p["decrypted"] and p["why_not"]:
            data["pcapkit_undecrypted"] = p["why_not"]
        data["pcapkit_frame"] = p["frame"]
        out.append(
            {
                "time": round((p["ts_ns"] - t0) / 1e6, 6),
                "name": "transport:packet_sent"
                if p["from_client"]
                else "transport:packet_received",
                "data": data,
            }
        )
    return out


def dumps_seq(records: list[dict[str, Any]]) -> str:
    """RFC 7464 JSON text sequence."""
    return "".join(RS + json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def export_qlog(trace: Any, outdir: str | os.PathLike[str]) -> list[Path]:
    """Write one ``<capture>-flow<N>.sqlog`` per QUIC connection into ``outdir``, from
    ``trace.quic``, ``trace.quic_packets`` and ``trace.quic_frames``."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(trace.path).name.split(".")[0]
    quic, packets, frames = trace.quic, trace.quic_packets, trace.quic_frames
    pk_flow = packets["flow"].to_numpy()
    fr_flow = frames["flow"].to_numpy()
    written = []
    for flow, dcid in zip(quic["flow"].tolist(), _py(quic["client_dcid"]), strict=True):
        path = out / f"{stem}-flow{flow}.sqlog"
        recs = connection_records(
            flow,
            dcid,
            packets[pk_flow == flow],
            frames[fr_flow == flow],
            title=f"{Path(trace.path).name} flow {flow}",
        )
        path.write_text(dumps_seq(recs), encoding="utf-8")
        written.append(path)
    return written

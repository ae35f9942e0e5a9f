"""Small QUIC tables built by hand for the QUIC detector tests.

The detectors read the declared tables only (``quic``, ``quic_packets``,
``quic_frames``, ``quic_tls``, ``quic_handshake``; :mod:`pcapkit.schema`), so a test
writes the few rows a situation needs — in QUIC roles, like a packet trace written
on paper — and runs the detector on a :class:`pcapkit.detect.DetectContext` over
them.  Columns a test does not give are missing (or 0 / False where the schema has
no missing value).

STREAM rows get the reassembly facts the sessions layer computes (new bytes,
duplicate bytes, retransmission, contiguous end) from the frames given before them,
per stream and direction, as :class:`dissectors.quic.QuicConnection` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pcapkit import schema
from pcapkit.detect import DetectContext

MS = 1_000_000  # ns
T0 = 1_700_000_000 * 10**9  # an arbitrary epoch time for frame 1
_SPACE = {
    "initial": "initial",
    "handshake": "handshake",
    "0rtt": "application",
    "1rtt": "application",
}


def table(name: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A declared table from row dicts (columns not given: missing, or 0 / False)."""
    n = len(rows)
    if n == 0:
        return schema.frame(name, n=0)
    data: dict[str, Any] = {}
    for col, dtype, _ in schema.SCHEMAS[name]:
        vals = [r.get(col) for r in rows]
        if all(v is None for v in vals):
            continue
        if col == "dir":
            codes = np.asarray([schema.DIRS.index(v) for v in vals], np.int64)
            data[col] = schema.categorical(codes, schema.DIRS)
            continue
        if dtype == "int64":
            vals = [0 if v is None else v for v in vals]
        elif dtype == "bool":
            vals = [bool(v) for v in vals]
        data[col] = vals
    return schema.frame(name, data, n)


def stream(sid: int, offset: int, length: int, *, fin: bool = False) -> dict[str, Any]:
    return {"frame_type": 0x08 | 0x04 | 0x02 | int(fin), "type": "STREAM",
            "stream_id": sid, "offset": offset, "length": length, "fin": fin}  # fmt: skip


def ack(*ranges: tuple[int, int], delay: int = 0) -> dict[str, Any]:
    """ACK of packet-number ranges (smallest, largest), highest first as on the wire."""
    rs = tuple(sorted(ranges, reverse=True))
    return {"frame_type": 0x02, "type": "ACK", "largest_acknowledged": rs[0][1],
            "ack_delay": delay, "ack_ranges": rs}  # fmt: skip


def max_stream_data(sid: int, maximum: int) -> dict[str, Any]:
    return {"frame_type": 0x11, "type": "MAX_STREAM_DATA", "stream_id": sid, "maximum": maximum}


def max_data(maximum: int) -> dict[str, Any]:
    return {"frame_type": 0x10, "type": "MAX_DATA", "maximum": maximum}


class Conn:
    """One QUIC connection written row by row; ``qdir`` is "c2s" for the QUIC client."""

    def __init__(self, flow: int = 0, *, swapped: bool = False, sni: str | None = None) -> None:
        self.flow, self.swapped, self.sni = flow, swapped, sni
        self.packets: list[dict[str, Any]] = []
        self.frames: list[dict[str, Any]] = []
        self.tls: list[dict[str, Any]] = []
        self.handshake: dict[str, Any] = {}
        self.requests: list[dict[str, Any]] = []
        self._got: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self._fin: set[tuple[str, int]] = set()
        self._frame = 0

    def _dir(self, qdir: str) -> str:
        return {"c2s": "s2c", "s2c": "c2s"}[qdir] if self.swapped else qdir

    def packet(
        self,
        qdir: str,
        ms: float,
        *frames: dict[str, Any],
        ptype: str = "1rtt",
        pn: int | None = None,
        decrypted: bool = True,
        size: int = 1200,
        frame: int | None = None,
    ) -> int:
        """A packet sent in ``qdir`` captured at ``ms`` with ``frames``; a new datagram
        (frame) unless ``frame`` names the datagram it is coalesced into.  Returns the
        frame number."""
        if frame is None:
            self._frame += 1
            frame = self._frame
        ts = T0 + round(ms * MS)
        same = [p for p in self.packets if p["frame"] == frame]
        row = {
            "flow": self.flow, "dir": self._dir(qdir), "from_client": qdir == "c2s",
            "frame": frame, "ts_ns": same[0]["ts_ns"] if same else ts,
            "datagram": len({p["frame"] for p in self.packets if p["frame"] != frame}),
            "datagram_bytes": size, "coalesced_index": len(same), "length": size,
            "packet_type": ptype, "space": _SPACE.get(ptype), "packet_number": pn,
            "decrypted": decrypted,
            "why_not": None if decrypted else "no keys for 1-RTT: no key log",
        }  # fmt: skip
        idx = len(self.packets)
        self.packets.append(row)
        for f in frames if decrypted else ():
            fr = {
                "flow": self.flow, "dir": row["dir"], "from_client": row["from_client"],
                "packet": idx, "frame": frame, "ts_ns": row["ts_ns"], "space": row["space"],
                "packet_number": pn, **f,
            }  # fmt: skip
            if f.get("type") == "STREAM":
                fr.update(
                    self._reassemble(qdir, f["stream_id"], f["offset"], f["length"], f["fin"])
                )
            self.frames.append(fr)
        return frame

    def _reassemble(self, qdir: str, sid: int, off: int, ln: int, fin: bool) -> dict[str, Any]:
        got = self._got.setdefault((qdir, sid), [])
        dup = sum(max(0, min(b, off + ln) - max(a, off)) for a, b in got)
        had_fin = (qdir, sid) in self._fin
        if fin:
            self._fin.add((qdir, sid))
        got.append((off, off + ln))
        got.sort()
        end = 0
        for a, b in got:
            if a > end:
                break
            end = max(end, b)
        return {"retransmission": dup > 0 or (ln == 0 and fin and had_fin),
                "new_bytes": ln - dup, "duplicate_bytes": dup, "contiguous_end": end}  # fmt: skip

    def tls_message(self, qdir: str, name: str, frame: int, **facts: Any) -> None:
        """A TLS handshake message completed in ``frame`` (its packet's time), with
        extension facts / transport parameters as quic_tls columns."""
        p = next(p for p in self.packets if p["frame"] == frame)
        self.tls.append({
            "flow": self.flow, "dir": self._dir(qdir), "from_client": qdir == "c2s",
            "frame": frame, "ts_ns": p["ts_ns"], "space": p["space"], "name": name,
            "decoded": True, **facts,
        })  # fmt: skip

    def event(self, name: str, frame: int) -> None:
        """A quic_handshake milestone ("client_initial", "server_initial", …)."""
        p = next(p for p in self.packets if p["frame"] == frame)
        self.handshake[f"{name}_frame"] = frame
        self.handshake[f"{name}_ts_ns"] = p["ts_ns"]

    def context(self) -> DetectContext:
        flows = table("flows", [{"flow": self.flow, "stream": 0, "proto": "udp"}])
        quic = table(
            "quic",
            [{"flow": self.flow, "version_name": "v1", "sni": self.sni,
              "roles_swapped": self.swapped}],
        )  # fmt: skip
        return DetectContext(
            schema.frame("packets", n=0),
            flows,
            schema.frame("segments", n=0),
            schema.frame("records", n=0),
            schema.frame("tls", n=0),
            requests=table("requests", self.requests),
            quic=quic,
            quic_packets=table("quic_packets", self.packets),
            quic_frames=table("quic_frames", self.frames),
            quic_tls=table("quic_tls", self.tls),
            quic_handshake=table("quic_handshake", [{"flow": self.flow, **self.handshake}]),
        )

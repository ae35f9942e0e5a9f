"""Test helper: drive :class:`dissectors.http2.H2Connection` over a capture's HTTP/2 flows.

Uses the project's reader (``pcapkit.open``): ``Trace.plaintext`` pieces per TLS record
(cut by the ``records`` table's plaintext lengths) or ``Trace.stream`` pieces per TCP
segment for cleartext, fed to the parser in capture order (by the frame that completed
each piece) so that both directions interleave as they did on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pcapkit
from dissectors.http2 import H2Connection, H2Error, H2Event, H2Frame, HeaderBlock, is_h2_preface

Piece = tuple[int, str, int, bytes]  # (frame, direction, stream offset, bytes)


@dataclass
class H2Flow:
    flow: int
    tls: bool
    conn: H2Connection
    events: list[H2Event] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)

    @property
    def frames(self) -> list[H2Frame]:
        return [e for e in self.events if isinstance(e, H2Frame)]

    @property
    def blocks(self) -> list[HeaderBlock]:
        return [e for e in self.events if isinstance(e, HeaderBlock)]

    @property
    def errors(self) -> list[H2Error]:
        return [e for e in self.events if isinstance(e, H2Error)]


def _tls_pieces(trace: pcapkit.Trace, flow: int) -> list[Piece]:
    r = trace.records
    r = r[(r.flow == flow) & (r.status == "decrypted") & (r.content_type == 23)]
    out: list[Piece] = []
    for d in ("c2s", "s2c"):
        data = trace.plaintext(flow, d)
        rows = r[r.dir == d]
        pos = 0
        for n, frame in zip(rows.plaintext_len.tolist(), rows.last_frame.tolist(), strict=True):
            out.append((int(frame), d, pos, data[pos : pos + n]))
            pos += n
        assert pos == len(data), "records table and Trace.plaintext disagree"
    return out


def _tcp_pieces(trace: pcapkit.Trace, flow: int) -> list[Piece]:
    out: list[Piece] = []
    for d in ("c2s", "s2c"):
        data = trace.stream(flow, d)
        idx = trace.stream_index(flow, d)
        for s, ce, fr in zip(
            idx.start.tolist(), idx.cap_end.tolist(), idx.frame.tolist(), strict=True
        ):
            if ce > s:
                at = data.at(s)
                assert at is not None
                out.append((int(fr), d, s, bytes(data[at : at + ce - s])))
    return out


def h2_flows(path: Path | str, keylog: Path | str | None = None) -> list[H2Flow]:
    """Every flow of the capture whose client stream starts with the HTTP/2 preface."""
    trace = pcapkit.open(path, keylog=keylog)
    try:
        out = []
        for flow in range(len(trace.flows)):
            plain = trace.plaintext(flow, "c2s")
            if is_h2_preface(plain):
                pieces = _tls_pieces(trace, flow)
                tls = True
            elif is_h2_preface(trace.stream(flow, "c2s")):
                pieces = _tcp_pieces(trace, flow)
                tls = False
            else:
                continue
            pieces.sort(key=lambda p: p[0])  # stable: capture order, then direction order
            h = H2Flow(flow, tls, H2Connection(), pieces=pieces)
            for _, d, off, data in pieces:
                h.events += h.conn.feed(d, data, off)
            h.events += h.conn.close()
            out.append(h)
        return out
    finally:
        trace.close()


def frame_at(flow: H2Flow, direction: str, offset: int) -> int:
    """The capture frame whose piece holds stream ``offset`` of ``direction``."""
    for fr, d, off, data in flow.pieces:
        if d == direction and off <= offset < off + len(data):
            return fr
    raise KeyError(offset)

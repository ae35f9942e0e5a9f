"""Capture helpers for the QUIC dissector tests (a uniquely named module: several test
folders have a ``conftest``): run a capture's UDP flows through QuicConnection.

Captures are read with ``pcapkit.open`` (datagrams per flow and direction); the corpus
(``../shared/corpus``, see its MANIFEST.md) is read in place, never copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pcapkit
from dissectors.quic import QuicConnection
from dissectors.tls.keylog import KeyLog

CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


@dataclass
class Flow:
    flow: int
    conn: QuicConnection
    datagrams: list[tuple[int, bool]]  # (frame, from_client) in capture order


def run_capture(
    path: Path, keylog: Path | None = None, *, use_dsb: bool = True, keep_plaintext: bool = False
) -> list[Flow]:
    """Every UDP flow of ``path`` through its own QuicConnection, in frame order."""
    with pcapkit.open(path) as trace:
        keys = KeyLog()
        if keylog is not None:
            keys.add_text(keylog.read_bytes(), source=str(keylog))
        if use_dsb:
            for s in trace.raw.secrets:
                keys.add_text(s.data, source="dsb")
        ts = trace.packets.ts_ns.to_numpy()
        flows = trace.flows
        out = []
        for fl in flows[flows.proto == "udp"].flow.tolist():
            dgs = [(f, b, True) for f, b in trace.datagrams(fl, "c2s")]
            dgs += [(f, b, False) for f, b in trace.datagrams(fl, "s2c")]
            dgs.sort(key=lambda x: x[0])
            conn = QuicConnection(keys if len(keys) else None, keep_plaintext=keep_plaintext)
            for f, b, c in dgs:
                conn.feed(b, f, int(ts[f - 1]), c)
            out.append(Flow(fl, conn, [(f, c) for f, _, c in dgs]))
        return out

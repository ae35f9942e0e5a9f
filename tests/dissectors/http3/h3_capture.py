"""Capture helpers for the HTTP/3 tests (uniquely named: several test folders have helpers).

A capture is opened with ``pcapkit.open``; its keys come from ``load_keys(trace.keylog,
trace.raw.secrets)`` (key log file and pcapng Decryption Secrets Blocks); each UDP flow's
datagrams go, in frame order, through a ``QuicConnection``, whose STREAM frames then go
through :func:`dissectors.http3.dissect_quic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pcapkit
from dissectors.http3 import H3Connection, dissect_quic
from dissectors.quic import QuicConnection
from dissectors.tls.keylog import KeyLog
from pcapkit.sessions.tls import load_keys

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"
CORPUS = REPO.parent / "shared" / "corpus"


@dataclass
class H3Flow:
    flow: int
    quic: QuicConnection
    h3: H3Connection | None


def quic_flows(path: Path, keylog: Path | None = None) -> list[tuple[int, QuicConnection]]:
    """Every UDP flow of ``path`` through its own QuicConnection (frame order)."""
    with pcapkit.open(path) as trace:
        keys = load_keys(keylog, trace.raw.secrets, env={}).keylog
        ts = trace.packets.ts_ns.to_numpy()
        flows = trace.flows
        out = []
        for fl in flows[flows.proto == "udp"].flow.tolist():
            dgs = [(f, b, True) for f, b in trace.datagrams(fl, "c2s")]
            dgs += [(f, b, False) for f, b in trace.datagrams(fl, "s2c")]
            dgs.sort(key=lambda x: x[0])
            conn = QuicConnection(keys if isinstance(keys, KeyLog) and len(keys) else None)
            for f, b, c in dgs:
                conn.feed(b, f, int(ts[f - 1]), c)
            out.append((fl, conn))
        return out


def h3_flows(path: Path, keylog: Path | None = None, *, force: bool = False) -> list[H3Flow]:
    return [H3Flow(fl, q, dissect_quic(q, force=force)) for fl, q in quic_flows(path, keylog)]

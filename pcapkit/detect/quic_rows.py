"""The declared QUIC tables of a :class:`DetectContext`, as rows per connection.

The QUIC detectors (:mod:`.quic`, :mod:`.quic_fc`, :mod:`.quic_handshake`) read
``ctx.quic``, ``ctx.quic_packets``, ``ctx.quic_frames``, ``ctx.quic_tls`` and
``ctx.quic_handshake`` (:mod:`pcapkit.schema`) and nothing else of QUIC.  Their
algorithms walk one connection's packets and frames in capture order; this module
turns the tables into that shape once per trace (``ctx.memo``): one
:class:`QuicConn` per row of ``ctx.quic``, with the rows of the other tables as
named tuples of the columns the detectors read (``PACKET_COLUMNS``, …) whose
values are plain Python (``None`` for missing).

Undecrypted 1-RTT packets (without keys: nearly every packet of a connection) are
not turned into rows up front: ``QuicConn.key_packets`` holds every other packet
(long headers, decrypted packets), ``QuicConn.pk`` the columns the detectors scan of
all packets as arrays, and ``QuicConn.packets`` builds the rows of all on demand.

Each row also gets ``qdir``, its direction in QUIC roles ("c2s" = sent by the QUIC
client), which is what the detectors reason in; a finding's ``dir`` is the flow's
(:meth:`QuicConn.flow_dir`), as in every table.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .context import DetectContext

# RFC 9000 §19.3 / §19.8: ACK (0x02, 0x03 with ECN counts), STREAM (0x08..0x0f)
ACK_TYPES = (0x02, 0x03)
CRYPTO = 0x06  # §19.6
STREAM_TYPES = range(0x08, 0x10)
MAX_DATA = 0x10  # §19.9
MAX_STREAM_DATA = 0x11  # §19.10

_FLIP = {"c2s": "s2c", "s2c": "c2s"}

# The columns the QUIC detectors read, per table (a detector that needs another one adds
# it here): converting only these keeps the view cheap next to the tables themselves.
PACKET_COLUMNS = (
    "flow", "frame", "ts_ns", "from_client", "datagram_bytes", "packet_type", "space",
    "packet_number", "decrypted",
)  # fmt: skip
FRAME_COLUMNS = (
    "flow", "frame", "ts_ns", "from_client", "space", "packet_number", "frame_type",
    "stream_id", "offset", "length", "fin", "retransmission", "new_bytes", "contiguous_end",
    "largest_acknowledged", "ack_ranges", "maximum",
)  # fmt: skip
TLS_COLUMNS = (
    "flow", "frame", "ts_ns", "from_client", "name", "decoded", "extensions",
    "pre_shared_key", "early_data", "initial_max_data", "initial_max_stream_data_bidi_local",
    "initial_max_stream_data_bidi_remote", "initial_max_stream_data_uni",
)  # fmt: skip

Event = namedtuple("Event", ["frame", "ts_ns"])


@dataclass(frozen=True)
class PacketArrays:
    """Columns of one connection's quic_packets rows (capture order) as numpy arrays."""

    frame: np.ndarray
    ts_ns: np.ndarray
    c2s: np.ndarray  # from_client: qdir == "c2s"
    datagram_bytes: np.ndarray
    # packet_type of the table (a Series) and this connection's rows of it: converted to
    # Python only for the rows asked (:meth:`packet_types`)
    _types: Any = None
    _rows: Any = None

    @classmethod
    def empty(cls) -> PacketArrays:
        z = np.zeros(0, np.int64)
        return cls(z, z, np.zeros(0, bool), z)

    def packet_types(self, idx: np.ndarray) -> list[str | None]:
        """packet_type (None when missing) of the connection's packets ``idx``."""
        if self._types is None or idx.shape[0] == 0:
            return [None] * idx.shape[0]
        rows = self._rows.start + idx if isinstance(self._rows, slice) else self._rows[idx]
        out: list[str | None] = _py(self._types.iloc[rows])
        return out


@dataclass(frozen=True)
class QuicConn:
    """One QUIC connection: its ``ctx.quic`` facts and its rows of the other tables."""

    flow: int
    swapped: bool  # quic.roles_swapped: the QUIC client is the flow's server
    sni: str | None
    version_name: str | None
    # quic_packets rows, capture order, but for the 1-RTT packets that did not decrypt
    key_packets: list[Any] = field(default_factory=list)
    pk: PacketArrays = field(default_factory=PacketArrays.empty)  # every packet
    frames: list[Any] = field(default_factory=list)  # quic_frames rows, packet order
    tls: list[Any] = field(default_factory=list)  # quic_tls rows, completion order
    handshake: Any = None  # its quic_handshake row
    # STREAM frames the dissector reassembled (quic_frames rows with new_bytes), in order
    stream_rows: list[Any] = field(default_factory=list)
    # how to build every packet's row: (quic_packets, its rows of this connection)
    _all: tuple[pd.DataFrame, np.ndarray] | None = field(default=None, repr=False)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def packets(self) -> list[Any]:
        """Every quic_packets row of the connection, capture order (built on first use)."""
        if "packets" not in self._memo:
            if self._all is None:
                self._memo["packets"] = list(self.key_packets)
            else:
                df, rows = self._all
                self._memo["packets"] = _rows(df.iloc[rows], "QuicPacket", PACKET_COLUMNS)
        out: list[Any] = self._memo["packets"]
        return out

    def flow_dir(self, quic_direction: str) -> str:
        """The flow direction (``Trace.flows`` roles) of a QUIC direction."""
        return _FLIP[quic_direction] if self.swapped else quic_direction

    def event(self, name: str) -> Event | None:
        """A handshake milestone of ``quic_handshake`` (e.g. "client_initial") or None."""
        h = self.handshake
        if h is None or getattr(h, f"{name}_frame") is None:
            return None
        return Event(getattr(h, f"{name}_frame"), getattr(h, f"{name}_ts_ns"))


def _py(col: pd.Series) -> list[Any]:
    """A column as Python values, ``None`` where missing (one conversion per column)."""
    dt = col.dtype
    if isinstance(dt, np.dtype) and dt.kind != "O":
        return col.to_numpy().tolist()  # int64 / bool: never missing
    if isinstance(dt, pd.CategoricalDtype):
        return col.astype(object).where(col.notna(), None).tolist()
    return col.to_numpy(dtype=object, na_value=None).tolist()


@functools.lru_cache(maxsize=32)
def _row_type(name: str, fields: tuple[str, ...]) -> Any:
    """The namedtuple class of ``name`` and ``fields``, defined once (a definition costs
    ~0.2 ms: four per capture with QUIC)."""
    return namedtuple(name, fields)  # noqa: PYI024


def _rows(df: pd.DataFrame, name: str, columns: tuple[str, ...] | None = None) -> list[Any]:
    """Named tuples of ``columns`` (all by default) plus ``qdir`` (None without
    ``from_client``), one per row."""
    if df.empty:
        return []
    cols = [str(c) for c in df.columns] if columns is None else list(columns)
    row = _row_type(name, (*cols, "qdir"))
    qdir: list[Any] = (
        ["c2s" if x else "s2c" for x in df["from_client"].tolist()]
        if "from_client" in df
        else [None] * len(df)
    )
    return [row(*r) for r in zip(*(_py(df[c]) for c in cols), qdir, strict=True)]


def _by_flow(rows: list[Any]) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for r in rows:
        out.setdefault(r.flow, []).append(r)
    return out


def _build(ctx: DetectContext) -> list[QuicConn]:
    q = ctx.quic
    if q.empty:
        return []
    qp = ctx.quic_packets
    pflow = qp["flow"].to_numpy(np.int64)
    one_rtt = (qp["packet_type"] == "1rtt").to_numpy(dtype=bool, na_value=False)
    key = ~(one_rtt & ~qp["decrypted"].to_numpy(bool))
    packets = _by_flow(_rows(qp[key], "QuicPacket", PACKET_COLUMNS))
    # every packet's row numbers per flow, capture order (stable)
    by = np.argsort(pflow, kind="stable")
    flows_sorted = pflow[by]
    cols = {
        "frame": qp["frame"].to_numpy(np.int64),
        "ts_ns": qp["ts_ns"].to_numpy(np.int64),
        "c2s": qp["from_client"].to_numpy(bool),
        "datagram_bytes": qp["datagram_bytes"].to_numpy(np.int64),
    }
    types = qp["packet_type"]
    frames = _by_flow(_rows(ctx.quic_frames, "QuicFrame", FRAME_COLUMNS))
    tls = _by_flow(_rows(ctx.quic_tls, "QuicTlsMessage", TLS_COLUMNS))
    hs = {r.flow: r for r in _rows(ctx.quic_handshake, "QuicHandshake")}
    out = []
    for flow, swapped, sni, version_name in zip(
        q["flow"].tolist(),
        q["roles_swapped"].tolist(),
        _py(q["sni"]),
        _py(q["version_name"]),
        strict=True,
    ):
        fr = frames.get(flow, [])
        lo, hi = np.searchsorted(flows_sorted, [flow, flow + 1]).tolist()
        rows: Any = by[lo:hi]
        if hi > lo and rows[-1] - rows[0] == hi - lo - 1 and bool((np.diff(rows) == 1).all()):
            rows = slice(int(rows[0]), int(rows[-1]) + 1)  # contiguous: views, not copies
        out.append(
            QuicConn(
                flow=int(flow),
                swapped=bool(swapped),
                sni=sni,
                version_name=version_name,
                key_packets=packets.get(flow, []),
                pk=PacketArrays(
                    frame=cols["frame"][rows],
                    ts_ns=cols["ts_ns"][rows],
                    c2s=cols["c2s"][rows],
                    datagram_bytes=cols["datagram_bytes"][rows],
                    _types=types,
                    _rows=rows,
                ),
                _all=(qp, rows),
                frames=fr,
                tls=tls.get(flow, []),
                handshake=hs.get(flow),
                stream_rows=[
                    r for r in fr if r.frame_type in STREAM_TYPES and r.new_bytes is not None
                ],
            )
        )
    return out


def connections(ctx: DetectContext) -> list[QuicConn]:
    """The QUIC connections of the trace, in flow order (built once, shared: read only)."""
    out: list[QuicConn] = ctx.memo(("quic_connections",), lambda: _build(ctx))
    return out

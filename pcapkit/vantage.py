"""Two vantages, one timeline (issue 18): a client capture and a server capture of the
same traffic, their clocks aligned, and what both views prove together.

**Matching.**  A packet seen at both ends is recognised by what the path does not
change: for TCP the sequence and acknowledgment numbers, payload length, flags, IP ID
and the timestamp option (TSval, TSecr); for UDP (QUIC) the datagram's length, first 8
and last 16 payload bytes (a QUIC packet's DCID and packet number, and the AEAD tag
that ends every protected packet).  The fields are hashed to one 64-bit key per packet
(addresses and ports are left out, so a NAT between the two hosts does not hide the
match); a key that occurs twice in one capture is ambiguous and dropped; the keys of
the two captures are joined with ``numpy.intersect1d`` — no Python object per packet.

**Clock.**  Let ``x = t_first − t_second`` for each matched packet (the first capture's
time minus the second's).  With ``θ`` the number to add to the second clock to get the
first (``offset_ms``), a packet sent by the first host (client → server) arrives after
it left, so ``θ ≥ x``; one sent by the second host arrives later at the first, so
``θ ≤ x``.  Hence, the way NTP bounds a clock with the minimum delays of each direction
(RFC 5905 §8; Mills, *Computer Network Time Synchronization*, ch. 3),

    max over client→server of x  ≤  θ  ≤  min over server→client of x,

the interval's width being the sum of the smallest one-way delays (one round trip
between the vantages).  ``offset_ms`` is its middle (exact when the path is
symmetric) and ``uncertainty_ms`` its half-width: the true offset is inside unless the
path delays differ by more than that — which no pair of captures can tell.  Drift
makes θ a line over time, ``θ(t) = θ₀ + ρ·(t − t_ref)``: the two bounds are the
upper envelope of the client→server points and the lower envelope of the
server→client points.  The corridor between them is widest at the true slope (the
width is a concave function of the slope: a ternary search finds its maximum, each
step one vectorised pass); every slope whose corridor is within the timing noise
(``DRIFT_SLACK_NS``) of the widest is consistent with the data
(``drift_uncertainty_ppm``), and ``drift_ppm`` is the one of them closest to zero: a
capture of a second or two cannot tell tens of ppm from none (tens of µs, below the
noise) and says so, a long one pins the drift down.

**Both views.**  ``TwoVantageTrace`` (``pcapkit.open([client, server])``) is the
client's :class:`~pcapkit.trace.Trace` with the server's capture beside it
(``.server``) on the client's clock; ``one_way`` has one row per TCP segment carrying
payload with its one-way delay, or where it was lost; ``gaps`` splits each wait of a
streamed response exactly into client, network (each direction) and server time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from . import schema
from .errors import PcapkitError
from .io.reader import RawCapture, read_capture, rows_at
from .io.writer import SECRETS_TLS_KEYLOG, PcapngWriter
from .limits import resolve as resolve_limits
from .net.decode import PROTO_TCP, PROTO_UDP, decode
from .net.flows import build_flows
from .trace import Progress, Trace

__all__ = [
    "CapturesSwapped",
    "ClockFit",
    "NoCommonTraffic",
    "TwoVantageTrace",
    "WireKeys",
    "align",
    "fit_clock",
    "match",
    "merge",
    "wire_keys",
    "write_merged",
]

# Drift beyond ±500 ppm is not a working clock: NTP's reference implementation will not
# discipline one (RFC 5905 Appendix A, MAXFREQ 500e-6) and the kernel's adjtimex clamps
# its frequency correction to the same ±500 ppm.
MAX_DRIFT_PPM = 500.0
# Ternary-search steps over the slope: each shrinks the bracket to 2/3, so 80 steps
# narrow ±500 ppm to far below 1e-9 ppm.
SEARCH_STEPS = 80
# A clock fit needs matched packets in both directions; with fewer than this many in
# either direction the drift is not fitted (it is 0, the offset bound still holds).
MIN_DRIFT_MATCHES = 8
# The drift's uncertainty: the slopes whose corridor is at most this much narrower than
# the widest one.  0.1 ms is twice the capture-timestamp noise DETECTION.md warns of
# ("never infer causality from gaps < 50 µs": multi-queue and scheduling skew), and
# above the 0–44 µs the fixtures' minimum one-way delays scatter by.
DRIFT_SLACK_NS = 100_000

# hashing: splitmix64's finaliser constants (Steele, Lea, Flood 2014)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class NoCommonTraffic(PcapkitError):
    """The two captures share too few packets to align their clocks."""


class CapturesSwapped(PcapkitError):
    """The server's capture was given first: no clock fits that way round."""


@dataclass(frozen=True)
class WireKeys:
    """One row per TCP/UDP packet of a capture: what the path keeps (``key``), when
    (``ts_ns``), where (``frame``, ``flow``) and which way (``dir``: 0 c2s, 1 s2c)."""

    ts_ns: np.ndarray  # int64
    key: np.ndarray  # uint64
    frame: np.ndarray  # int64, Wireshark's number
    flow: np.ndarray  # int64
    dir: np.ndarray  # int8
    proto: np.ndarray  # int64 (6 / 17)

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])


def _mix(h: np.ndarray, v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (h ^ v.astype(np.uint64)) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def wire_keys(raw: RawCapture) -> WireKeys:
    """The packets of ``raw`` that can be matched at another vantage, with their keys."""
    dec = decode(raw)
    ft = build_flows(dec)
    c = dec.cols
    l4 = c["l4"].astype(np.int64)
    rows = np.nonzero(((l4 == PROTO_TCP) | (l4 == PROTO_UDP)) & (ft.pkt_flow >= 0))[0]
    h = _mix(np.zeros(rows.shape[0], np.uint64), l4[rows])
    tcp = l4[rows] == PROTO_TCP
    plen = c["payload_len"][rows].astype(np.int64)
    h = _mix(h, plen)
    for name in ("tcp_seq", "tcp_ack", "tcp_flags", "tsval", "tsecr", "ip_id"):
        h = _mix(h, np.where(tcp, c[name][rows].astype(np.int64), 0))
    # UDP: the first 8 and last 16 payload bytes (what was captured of them)
    udp = ~tcp
    if udp.any():
        r = rows[udp]
        off = c["payload_off"][r].astype(np.int64)
        cap = c["payload_caplen"][r].astype(np.int64)
        buf = raw.buf
        nbuf = int(buf.shape[0])
        head = rows_at(buf, np.clip(off, 0, max(nbuf - 8, 0)), 8).copy()
        head[cap < 8] = 0
        tail_off = np.clip(off + cap - 16, 0, max(nbuf - 16, 0))
        tail = rows_at(buf, tail_off, 16).copy()
        tail[cap < 16] = 0
        hu = h[udp]
        for part in (head.view(np.uint64), tail.view(np.uint64)):
            for j in range(part.shape[1]):
                hu = _mix(hu, part[:, j])
        h[udp] = hu
    return WireKeys(
        ts_ns=raw.ts_ns[rows].astype(np.int64),
        key=h,
        frame=rows.astype(np.int64) + 1,
        flow=ft.pkt_flow[rows].astype(np.int64),
        dir=ft.pkt_dir[rows].astype(np.int8),
        proto=l4[rows],
    )


def _unique_rows(key: np.ndarray) -> np.ndarray:
    """Rows whose key occurs once."""
    _, first, counts = np.unique(key, return_index=True, return_counts=True)
    out: np.ndarray = np.sort(first[counts == 1])
    return out


def match(a: WireKeys, b: WireKeys) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``a`` and ``b`` that are the same packet: unique keys in both, joined; a
    pair whose flows disagree with the flow pairing most of its flow's matches make
    (a key collision) is dropped."""
    ua, ub = _unique_rows(a.key), _unique_rows(b.key)
    _, ia, ib = np.intersect1d(a.key[ua], b.key[ub], assume_unique=True, return_indices=True)
    ia, ib = ua[ia], ub[ib]
    if ia.shape[0] == 0:
        return ia, ib
    # flow pairing: each flow of a goes with the flow of b most of its matches name
    fa, fb = a.flow[ia], b.flow[ib]
    pair = fa * (int(b.flow.max()) + 1) + fb
    up, cnt = np.unique(pair, return_counts=True)
    pa = up // (int(b.flow.max()) + 1)
    best = np.zeros(int(a.flow.max()) + 1, np.int64)
    order = np.lexsort((-cnt, pa))  # per flow of a, the largest count first
    firsts = order[np.r_[True, pa[order][1:] != pa[order][:-1]]]
    best[pa[firsts]] = up[firsts]
    keep = pair == best[fa]
    ia, ib = ia[keep], ib[keep]
    o = np.argsort(a.ts_ns[ia], kind="stable")
    return ia[o], ib[o]


@dataclass(frozen=True)
class ClockFit:
    """How the second capture's clock maps onto the first's.

    ``first_ns = second_ns + offset + drift · (second_ns − reference_ts_ns)``.
    """

    offset_ms: float  # add to the second capture's clock (at reference_ts_ns) → the first's
    drift_ppm: float  # how much faster the first clock runs than the second (ppm)
    uncertainty_ms: float  # half-width of the offset bound (half the least round trip)
    offset_low_ms: float  # the bound: every client→server packet arrived after it left
    offset_high_ms: float  # every server→client packet arrived after it left
    drift_uncertainty_ppm: float
    reference_ts_ns: int  # the second capture's first matched packet, on its own clock
    matched: int
    matched_c2s: int
    matched_s2c: int
    span_ms: float  # time between the first and last matched packet

    def to_first(self, ts_ns: np.ndarray) -> np.ndarray:
        """Times of the second capture's clock on the first capture's clock (int64 ns)."""
        t = np.asarray(ts_ns, np.int64)
        corr = self.offset_ms * 1e6 + self.drift_ppm * 1e-6 * (t - self.reference_ts_ns)
        out: np.ndarray = t + np.rint(corr).astype(np.int64)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _width(x: np.ndarray, t: np.ndarray, up: np.ndarray, k: float) -> tuple[float, float]:
    """(low, high) of the offset bound at slope ``k`` (x, t in ns; ``up`` c2s rows)."""
    y = x - k * t
    return float(y[up].max()), float(y[~up].min())


def _fit_files(a: WireKeys, b: WireKeys, first: str, second: str) -> ClockFit:
    try:
        return fit_clock(a, b)
    except (NoCommonTraffic, CapturesSwapped) as exc:
        raise type(exc)(f"{first} and {second}: {exc}") from None


def fit_clock(a: WireKeys, b: WireKeys) -> ClockFit:
    """Offset, drift and uncertainty of ``b``'s clock against ``a``'s (``a`` is the
    client's capture: its c2s packets left from its host).  Raises
    :class:`NoCommonTraffic` when fewer than one packet per direction match, and
    :class:`CapturesSwapped` when the bound is empty this way round and not the other."""
    ia, ib = match(a, b)
    up = a.dir[ia] == 0
    n_up, n_down = int(up.sum()), int((~up).sum())
    if n_up == 0 or n_down == 0:
        raise NoCommonTraffic(
            f"the captures share no traffic in both directions ({ia.shape[0]} packets "
            f"matched: {n_up} client→server, {n_down} server→client)"
        )
    ta, tb = a.ts_ns[ia], b.ts_ns[ib]
    ref = int(tb.min())
    t = (tb - ref).astype(np.float64)
    x = (ta - tb).astype(np.float64)
    # centre x and t: float64 keeps ns precision for the residuals
    x0 = float(np.median(x))
    x = x - x0
    x, t, up = _candidates(x, t, up, MAX_DRIFT_PPM * 1e-6)
    k = 0.0
    k_lo, k_hi = -MAX_DRIFT_PPM * 1e-6, MAX_DRIFT_PPM * 1e-6  # not fitted: unknown
    if min(n_up, n_down) >= MIN_DRIFT_MATCHES and float(t.max()) > 0:

        def w(s: float) -> float:
            lo, hi = _width(x, t, up, s)
            return hi - lo

        lo_k, hi_k = -MAX_DRIFT_PPM * 1e-6, MAX_DRIFT_PPM * 1e-6
        for _ in range(SEARCH_STEPS):
            m1 = lo_k + (hi_k - lo_k) / 3
            m2 = hi_k - (hi_k - lo_k) / 3
            if w(m1) < w(m2):
                lo_k = m1
            else:
                hi_k = m2
        best_k = (lo_k + hi_k) / 2
        best = w(best_k)
        k_lo = _edge(w, best_k, best - DRIFT_SLACK_NS, -MAX_DRIFT_PPM * 1e-6)
        k_hi = _edge(w, best_k, best - DRIFT_SLACK_NS, MAX_DRIFT_PPM * 1e-6)
        # the smallest drift the envelopes allow within the timing noise: a short
        # capture cannot tell tens of ppm from none, and says so (the interval)
        k = min(max(0.0, k_lo), k_hi)
    low, high = _width(x, t, up, k)
    if high < low:
        flo, fhi = _width(x, t, ~up, k)  # the other way round: the first is the server's?
        if fhi >= flo:
            raise CapturesSwapped(
                "the first capture looks like the server's: the clients' packets reach it "
                "after the second capture and the servers' before; give the client's first"
            )
    low, high = low + x0, high + x0
    return ClockFit(
        offset_ms=(low + high) / 2 / 1e6,
        drift_ppm=k * 1e6,
        uncertainty_ms=abs(high - low) / 2 / 1e6,
        offset_low_ms=low / 1e6,
        offset_high_ms=high / 1e6,
        drift_uncertainty_ppm=max(k - k_lo, k_hi - k) * 1e6,
        reference_ts_ns=ref,
        matched=int(ia.shape[0]),
        matched_c2s=n_up,
        matched_s2c=n_down,
        span_ms=float(t.max()) / 1e6,
    )


# time bins for pruning the points that can never bound the offset
PRUNE_BINS = 4096


def _candidates(
    x: np.ndarray, t: np.ndarray, up: np.ndarray, k_max: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points that can be extreme at some slope |k| ≤ ``k_max``: in a time bin of
    width Δ, a client→server point more than ``k_max``·Δ below the bin's highest (a
    server→client one above the lowest) is beaten by it at every such slope.  Exact,
    and most points go."""
    span = float(t.max()) if t.shape[0] else 0.0
    if span <= 0 or t.shape[0] < 4 * PRUNE_BINS:
        return x, t, up
    width = span / PRUNE_BINS
    b = np.minimum((t / width).astype(np.int64), PRUNE_BINS - 1)
    hi = np.full(PRUNE_BINS, -np.inf)
    lo = np.full(PRUNE_BINS, np.inf)
    np.maximum.at(hi, b[up], x[up])
    np.minimum.at(lo, b[~up], x[~up])
    slack = k_max * width
    keep = np.where(up, x >= hi[b] - slack, x <= lo[b] + slack)
    return x[keep], t[keep], up[keep]


def _edge(w: Any, k: float, level: float, limit: float) -> float:
    """The slope between ``k`` and ``limit`` where the concave ``w`` falls to ``level``."""
    if w(limit) >= level:
        return limit
    a, b = k, limit
    for _ in range(SEARCH_STEPS):
        m = (a + b) / 2
        if w(m) >= level:
            a = m
        else:
            b = m
    return (a + b) / 2


def align(
    first: str | os.PathLike[str] | RawCapture, second: str | os.PathLike[str] | RawCapture
) -> ClockFit:
    """The clock of capture ``second`` (the server's) against ``first`` (the client's)."""
    ra = first if isinstance(first, RawCapture) else read_capture(first)
    rb = second if isinstance(second, RawCapture) else read_capture(second)
    try:
        return _fit_files(wire_keys(ra), wire_keys(rb), ra.path, rb.path)
    finally:
        if ra is not first:
            ra.close()
        if rb is not second:
            rb.close()


def write_merged(
    first: RawCapture,
    second: RawCapture,
    clock: ClockFit,
    path: str | os.PathLike[str],
    names: tuple[str, str] = ("client", "server"),
) -> int:
    """Write both captures to one pcapng at ``path``: each capture's interfaces (named
    ``client:…`` / ``server:…``), the second's timestamps moved onto the first's clock,
    frames in time order (ties: the first capture first), both captures' key logs in
    one Decryption Secrets Block.  Returns the number of frames written."""
    ts = np.concatenate([first.ts_ns.astype(np.int64), clock.to_first(second.ts_ns)])
    src = np.concatenate([np.zeros(first.frames, np.int8), np.ones(second.frames, np.int8)])
    row = np.concatenate([np.arange(first.frames), np.arange(second.frames)])
    order = np.lexsort((row, src, ts))
    keys: list[bytes] = []
    for cap in (first, second):
        for s in cap.secrets:
            if s.secrets_type == SECRETS_TLS_KEYLOG:
                for line in bytes(s.data).splitlines():
                    if line.strip() and line not in keys:
                        keys.append(line)
    n = 0
    with open(path, "wb") as f:
        w = PcapngWriter(f)
        for name, cap in zip(names, (first, second), strict=True):
            for intf in cap.interfaces:
                label = f"{name}:{intf.name}" if intf.name else name
                w.add_interface(intf.linktype, snaplen=intf.snaplen, name=label)
        base = [0, len(first.interfaces)]
        if keys:
            w.write_secrets(b"\n".join(keys) + b"\n")
        caps = (first, second)
        iface = np.concatenate([first.iface, second.iface]).astype(np.int64)
        iface = np.where(iface >= 0, iface + np.where(src == 1, base[1], 0), -1)
        keep = order[iface[order] >= 0]
        ts = np.maximum(ts, 0)  # a clock moved before the epoch: pcapng has no sign
        for lo in range(0, keep.shape[0], WRITE_CHUNK):
            rows = keep[lo : lo + WRITE_CHUNK]
            f.write(_epbs(rows, src, row, iface, ts, caps))
            n += int(rows.shape[0])
    return n


# Enhanced Packet Blocks are built this many at a time (bounded memory: the chunk's
# bytes plus one int64 source index per byte of it)
WRITE_CHUNK = 16_384


def _epbs(
    rows: np.ndarray,
    src: np.ndarray,
    row: np.ndarray,
    iface: np.ndarray,
    ts: np.ndarray,
    caps: tuple[RawCapture, RawCapture],
) -> bytes:
    """Little-endian pcapng Enhanced Packet Blocks (§4.3) for ``rows`` of the merged
    order, built with numpy: a 28-byte header, the captured bytes padded to 4, the
    block length again."""
    which = src[rows]
    r = row[rows]
    caplen = np.empty(rows.shape[0], np.int64)
    origlen = np.empty(rows.shape[0], np.int64)
    data_off = np.empty(rows.shape[0], np.int64)
    for k, cap in enumerate(caps):
        m = which == k
        caplen[m] = cap.caplen[r[m]]
        origlen[m] = cap.origlen[r[m]]
        data_off[m] = cap.data_off[r[m]]
    blen = 32 + ((caplen + 3) & ~3)
    start = np.concatenate([[0], np.cumsum(blen)[:-1]]).astype(np.int64)
    out = np.zeros(int(blen.sum()), np.uint8)
    words = out.view("<u4")
    w0 = start // 4
    t = ts[rows].astype(np.uint64)
    for k, v in enumerate(
        (np.full(rows.shape[0], 6), blen, iface[rows], t >> np.uint64(32), t & 0xFFFFFFFF)
    ):
        words[w0 + k] = np.asarray(v).astype(np.uint32)
    words[w0 + 5] = caplen.astype(np.uint32)
    words[w0 + 6] = origlen.astype(np.uint32)
    words[(start + blen) // 4 - 1] = blen.astype(np.uint32)
    # the captured bytes: one slice copy per packet (a per-byte gather costs more)
    view = out.data
    dst = (start + 28).tolist()
    for k, cap in enumerate(caps):
        src_buf = cap.buf.data
        for i in np.nonzero(which == k)[0].tolist():
            o, c, d = int(data_off[i]), int(caplen[i]), dst[i]
            view[d : d + c] = src_buf[o : o + c]
    return out.tobytes()


def merge(
    client: str | os.PathLike[str],
    server: str | os.PathLike[str],
    output: str | os.PathLike[str],
    limits: Mapping[str, Any] | None = None,
) -> tuple[ClockFit, int]:
    """Align ``server``'s clock to ``client``'s and write both to the pcapng ``output``
    (:func:`write_merged`): ``pcapkit merge``.  Returns the fit and the frames written.
    Raises :class:`NoCommonTraffic` (and nothing is written) when the two share no
    traffic.  ``limits`` as :func:`pcapkit.open`'s (the reader's apply)."""
    lim = resolve_limits(limits)
    ra = read_capture(client, limits=lim)
    try:
        rb = read_capture(server, limits=lim)
        try:
            clock = _fit_files(wire_keys(ra), wire_keys(rb), ra.path, rb.path)
            return clock, write_merged(ra, rb, clock, output)
        finally:
            rb.close()
    finally:
        ra.close()


class TwoVantageTrace(Trace):
    """The client's capture with the server's beside it, on the client's clock.

    Every table of :class:`~pcapkit.trace.Trace` is the client capture's; ``server``
    is the server capture's Trace with its timestamps moved onto the client's clock
    (``clock``); ``one_way`` and ``gaps`` use both.  Use ``pcapkit.open([client,
    server])``.
    """

    def __init__(
        self,
        client: str | os.PathLike[str],
        server: str | os.PathLike[str],
        keylog: str | os.PathLike[str] | bytes | None = None,
        *,
        progress: Progress | None = None,
        redact: bool = True,
        embedded_keys: bool = True,
        thresholds: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            client,
            keylog,
            progress=progress,
            redact=redact,
            embedded_keys=embedded_keys,
            thresholds=thresholds,
            limits=limits,
        )
        try:
            ka = wire_keys(self.raw)
            rb = read_capture(server, limits=self.limits)
            try:
                kb = wire_keys(rb)
            finally:
                rb.close()
            self.clock: ClockFit = _fit_files(ka, kb, self.path, os.fspath(server))
            ia, ib = match(ka, kb)
            self.matched_frames = pd.DataFrame(
                {"client_frame": ka.frame[ia], "server_frame": kb.frame[ib]}
            )
            self.server = Trace(
                server,
                keylog,
                redact=redact,
                embedded_keys=embedded_keys,
                thresholds=thresholds,
                limits=limits,
                retime=self.clock.to_first,
            )
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        super().close()
        srv = self.__dict__.get("server")
        if srv is not None:
            srv.close()

    def __repr__(self) -> str:
        return (
            f"<TwoVantageTrace {self.path!r} + {self.server.path!r}: offset "
            f"{self.clock.offset_ms:.3f} ± {self.clock.uncertainty_ms:.3f} ms>"
        )

    @cached_property
    def one_way(self) -> pd.DataFrame:
        """One row per TCP segment with payload and per UDP datagram (QUIC) seen at
        either end: its one-way delay, or where it was lost; see
        ``pcapkit.schema.describe("one_way")``."""
        return one_way_table(
            _with_datagrams(self.segments, self.packets),
            _with_datagrams(self.server.segments, self.server.packets),
            self.matched_frames,
            self.flow_map,
        )

    @cached_property
    def flow_map(self) -> dict[int, int]:
        """Server capture's flow id → the client capture's, from the matched packets."""
        return _flow_map(self.packets, self.server.packets, self.matched_frames)

    @cached_property
    def findings(self) -> pd.DataFrame:
        """The client capture's findings; each one's ``details`` gains ``both_views``
        (:func:`both_views`): its evidence as seen at both ends on one clock and, for a
        Nagle hold released by a delayed ACK, each half measured where it happened."""
        df: pd.DataFrame = super().findings.copy()
        if df.empty:
            return df
        views = both_views(
            df["evidence"].tolist(),
            df["dir"].astype(str).tolist(),
            self.matched_frames,
            self.server.packets["ts_ns"].to_numpy(np.int64),
        )
        details = np.empty(len(df), dtype=object)
        details[:] = [
            {**(d if isinstance(d, dict) else {}), "both_views": v}
            for d, v in zip(df["details"].tolist(), views, strict=True)
        ]
        df["details"] = details
        return df

    @cached_property
    def gaps(self) -> pd.DataFrame:
        """The client's gaps with each wait split exactly into client, network (each
        direction) and server time (``client_ms``, ``c2s_ms``, ``server_side_ms``,
        ``s2c_ms``)."""
        holds = gap_holds(self.finding_objects, self.server.finding_objects, self.flow_map)
        return split_gaps(
            super().gaps,
            self.requests,
            self.server.requests,
            self.server.messages,
            self.flow_map,
            holds,
        )


def open_pair(
    paths: Sequence[str | os.PathLike[str]],
    keylog: str | os.PathLike[str] | bytes | None = None,
    **kw: Any,
) -> TwoVantageTrace:
    """``pcapkit.open([client, server])``."""
    if len(paths) != 2:
        raise ValueError(f"two captures (client, server) are needed, not {len(paths)}")
    return TwoVantageTrace(paths[0], paths[1], keylog, **kw)


def both_views(
    evidence: Sequence[Any],
    dirs: Sequence[str],
    pairs: pd.DataFrame,
    server_ts_ns: np.ndarray,
) -> list[dict[str, Any]]:
    """For each finding (its client-capture ``evidence``: frame, role, ts_ns), the same
    frames at the server's capture point: ``evidence`` (role, client and server frame
    and time, on the client's clock).  For a Nagle hold released by a delayed ACK
    (roles first_segment, releasing_ack, held_segment) the two halves are measured
    where they happen: ``receiver_ack_delay_ms`` (the first segment's arrival → the
    ACK leaving the receiver: its delayed-ACK timer) and ``sender_release_lag_ms`` (the
    ACK's arrival → the held segment leaving the sender: Nagle's release)."""
    to_server = dict(
        zip(
            pairs["client_frame"].to_numpy(np.int64).tolist(),
            pairs["server_frame"].to_numpy(np.int64).tolist(),
            strict=True,
        )
    )
    out: list[dict[str, Any]] = []
    for ev, d in zip(evidence, dirs, strict=True):
        rows: list[dict[str, Any]] = []
        at: dict[str, tuple[int, int | None]] = {}
        for e in ev if isinstance(ev, list) else []:
            fr = int(e["frame"])
            sf = to_server.get(fr)
            sts = int(server_ts_ns[sf - 1]) if sf is not None else None
            rows.append(
                {
                    "role": e.get("role"),
                    "client_frame": fr,
                    "server_frame": sf,
                    "client_ts_ns": int(e["ts_ns"]),
                    "server_ts_ns": sts,
                }
            )
            at.setdefault(str(e.get("role")), (int(e["ts_ns"]), sts))
        doc: dict[str, Any] = {"evidence": rows}
        roles = ("first_segment", "releasing_ack", "held_segment")
        if all(r in at for r in roles) and d in ("c2s", "s2c"):
            # the receiver is the client for s2c data, the server for c2s
            rx = 0 if d == "s2c" else 1
            tx = 1 - rx
            first, ack, held = (at[r] for r in roles)
            f_rx, a_rx, a_tx, h_tx = first[rx], ack[rx], ack[tx], held[tx]
            if f_rx is not None and a_rx is not None:
                doc["receiver_ack_delay_ms"] = round((a_rx - f_rx) / 1e6, 3)
            if a_tx is not None and h_tx is not None:
                doc["sender_release_lag_ms"] = round((h_tx - a_tx) / 1e6, 3)
        out.append(doc)
    return out


def _flow_map(
    client_packets: pd.DataFrame, server_packets: pd.DataFrame, pairs: pd.DataFrame
) -> dict[int, int]:
    """Server flow → client flow, by the matched packets (each pair of flows the majority
    of its packets name)."""
    if pairs.empty:
        return {}
    cf = client_packets["flow"].to_numpy(np.int64, na_value=-1)
    sf = server_packets["flow"].to_numpy(np.int64, na_value=-1)
    a = cf[pairs["client_frame"].to_numpy(np.int64) - 1]
    b = sf[pairs["server_frame"].to_numpy(np.int64) - 1]
    df = pd.DataFrame({"c": a, "s": b})
    df = df[(df.c >= 0) & (df.s >= 0)]
    top = df.groupby(["s", "c"]).size().reset_index(name="n").sort_values(["s", "n"])
    top = top.drop_duplicates("s", keep="last")
    return {int(x): int(y) for x, y in zip(top.s.tolist(), top.c.tolist(), strict=True)}


def _with_datagrams(segments: pd.DataFrame, packets: pd.DataFrame) -> pd.DataFrame:
    """The segments table plus one row per UDP datagram (offset −1: no stream offset)."""
    udp = packets[(packets["proto"] == "udp") & packets["flow"].notna()]
    if udp.empty:
        return segments
    rows = pd.DataFrame(
        {
            "flow": udp["flow"].to_numpy(np.int64),
            "dir": udp["dir"].astype(str).to_numpy(),
            "frame": udp["frame"].to_numpy(np.int64),
            "ts_ns": udp["ts_ns"].to_numpy(np.int64),
            "offset": np.full(len(udp), -1, np.int64),
            "length": udp["payload_len"].to_numpy(np.int64, na_value=0),
            "kind": np.full(len(udp), "datagram", object),
        }
    )
    cols = ["flow", "dir", "frame", "ts_ns", "offset", "length", "kind"]
    seg = segments[cols].assign(dir=segments["dir"].astype(str), kind=segments["kind"].astype(str))
    out: pd.DataFrame = pd.concat([seg, rows], ignore_index=True)
    return out


def one_way_table(
    client_segments: pd.DataFrame,
    server_segments: pd.DataFrame,
    pairs: pd.DataFrame,
    flow_map: Mapping[int, int] | None = None,
) -> pd.DataFrame:
    """One row per TCP segment with payload seen at either capture point (both tables on
    one clock); ``pairs`` holds the matched frames (``client_frame``, ``server_frame``),
    ``flow_map`` each server flow's client flow (default: from the matched segments)."""
    c, sv = client_segments, server_segments
    nc, ns = len(c), len(sv)
    c_frame = c["frame"].to_numpy(np.int64)
    s_frame = sv["frame"].to_numpy(np.int64)
    # the server row of each client row (-1: none), through the matched frames
    pc = pairs["client_frame"].to_numpy(np.int64)
    ps = pairs["server_frame"].to_numpy(np.int64)
    s_row_of_frame = np.full(int(s_frame.max(initial=0)) + 1, -1, np.int64)
    s_row_of_frame[s_frame] = np.arange(ns)
    srv_frame_of = np.full(int(max(c_frame.max(initial=0), pc.max(initial=0))) + 1, -1, np.int64)
    srv_frame_of[pc] = ps
    partner = srv_frame_of[c_frame]
    ok = (partner >= 0) & (partner < s_row_of_frame.shape[0])
    s_row = np.where(ok, s_row_of_frame[np.where(ok, partner, 0)], -1)
    matched_s = np.zeros(ns, bool)
    matched_s[s_row[s_row >= 0]] = True
    s_only = np.nonzero(~matched_s)[0]
    # rows: every client segment (with its server partner or none), then server-only ones
    ci = np.concatenate([np.arange(nc), np.full(s_only.shape[0], -1)])
    si = np.concatenate([s_row, s_only])
    n = ci.shape[0]
    has_c, has_s = ci >= 0, si >= 0

    def col(df: pd.DataFrame, name: str, idx: np.ndarray, fill: int = -1) -> np.ndarray:
        v = df[name].to_numpy(np.int64) if len(df) else np.zeros(0, np.int64)
        out: np.ndarray = np.where(idx >= 0, v[np.maximum(idx, 0)] if len(v) else fill, fill)
        return out

    c_dir = (c["dir"].astype(str).to_numpy() == "s2c").astype(np.int64)
    s_dir = (sv["dir"].astype(str).to_numpy() == "s2c").astype(np.int64)
    c_dirs = np.where(has_c, c_dir[np.maximum(ci, 0)] if nc else 0, -1)
    s_dirs = np.where(has_s, s_dir[np.maximum(si, 0)] if ns else 0, -1)
    down = np.where(has_c, c_dirs, s_dirs) == 1
    if flow_map is None:
        fmap = _segment_flow_map(col(c, "flow", ci), col(sv, "flow", si))
    else:
        table = np.full(max(flow_map, default=-1) + 1, -1, np.int64)
        table[list(flow_map)] = list(flow_map.values())
        fmap = _FlowMap(table)
    c_flow = col(c, "flow", ci)
    s_flow = col(sv, "flow", si)
    flow = np.where(has_c, c_flow, fmap.get_many(s_flow))
    c_ts, s_ts = col(c, "ts_ns", ci), col(sv, "ts_ns", si)
    sent = np.where(down, s_ts, c_ts)
    recv = np.where(down, c_ts, s_ts)
    at_sender = np.where(down, has_s, has_c)
    at_receiver = np.where(down, has_c, has_s)
    status = np.where(at_sender & at_receiver, "delivered", "lost").astype(object)
    status[~at_sender] = "receiver_only"
    seq = np.where(down & has_s, col(sv, "offset", si), -1)
    seq = np.where(~down & has_c, col(c, "offset", ci), seq)
    seq = np.where(seq < 0, np.where(has_c, col(c, "offset", ci), col(sv, "offset", si)), seq)
    length = np.where(has_c, col(c, "length", ci), col(sv, "length", si))
    c_kind = c["kind"].astype(str).to_numpy() if nc else np.zeros(0, object)
    s_kind = sv["kind"].astype(str).to_numpy() if ns else np.zeros(0, object)
    kind = np.where(
        down,
        np.where(has_s, s_kind[np.maximum(si, 0)] if ns else "", ""),
        np.where(has_c, c_kind[np.maximum(ci, 0)] if nc else "", ""),
    )
    # resent at the sender: a retransmission, or bytes that fill a hole in the sender's
    # own stream (out of order at the sender: its capture missed the first sending)
    retrans = (np.char.find(kind.astype(str), "retransmission") >= 0) | (kind == "out_of_order")
    c_fr = np.where(has_c, c_frame[np.maximum(ci, 0)] if nc else -1, -1)
    s_fr = np.where(has_s, s_frame[np.maximum(si, 0)] if ns else -1, -1)
    # a sender's segment that arrived cut in pieces (offload): its first piece, unseen at
    # the sender's capture point, starts at the same offset of the same flow and direction
    keep = np.ones(n, bool)
    lost = np.nonzero((status == "lost") & (seq >= 0))[0]
    only = np.nonzero((status == "receiver_only") & (seq >= 0))[0]
    if lost.shape[0] and only.shape[0]:
        key_l = pd.DataFrame({"flow": flow[lost], "down": down[lost], "seq": seq[lost], "i": lost})
        key_o = pd.DataFrame({"flow": flow[only], "down": down[only], "seq": seq[only], "j": only})
        j = key_l.merge(key_o, on=["flow", "down", "seq"])
        j = j[(length[j.j] < length[j.i]) & (recv[j.j] >= sent[j.i])]
        j = j.drop_duplicates("i").drop_duplicates("j")
        if len(j):
            i_, j_ = j["i"].to_numpy(), j["j"].to_numpy()
            status[i_] = "resegmented"
            recv[i_] = recv[j_]
            c_fr[i_] = np.where(down[i_], c_fr[j_], c_fr[i_])
            s_fr[i_] = np.where(down[i_], s_fr[i_], s_fr[j_])
            keep[j_] = False
            # the later pieces of those segments are theirs too
            seg = pd.DataFrame(
                {"flow": flow[i_], "down": down[i_], "lo": seq[i_], "hi": seq[i_] + length[i_]}
            )
            rest = key_o[keep[key_o["j"].to_numpy()]]
            inside = rest.merge(seg, on=["flow", "down"])
            inside = inside[(inside["seq"] > inside["lo"]) & (inside["seq"] < inside["hi"])]
            keep[inside["j"].to_numpy(np.int64)] = False
    # where each retransmission's earlier transmission (same flow, dir, seq) went: it
    # arrived (a spurious retransmission), it was lost between the capture points, or
    # neither capture saw it (lost before the sender's capture point: inside the host)
    original = np.full(n, None, object)
    if retrans.any():
        rank = np.where(status == "lost", 1, 2)  # delivered, resegmented, receiver_only: 2
        early = pd.DataFrame({"flow": flow, "down": down, "seq": seq, "rank": rank})
        best = early[~retrans & keep].groupby(["flow", "down", "seq"])["rank"].max()
        r = np.nonzero(retrans)[0]
        probe = pd.MultiIndex.from_arrays([flow[r], down[r], seq[r]])
        got = best.reindex(probe).to_numpy(np.float64, na_value=0.0)
        original[r] = np.where(got == 2, "delivered", np.where(got == 1, "lost", "unseen"))
    spurious = original == "delivered"
    order = np.lexsort((np.where(recv >= 0, recv, np.iinfo(np.int64).max), sent))
    order = order[keep[order]]
    sent_ok, recv_ok = sent >= 0, recv >= 0
    one_way = np.where(sent_ok & recv_ok, (recv - sent) / 1e6, 0.0)
    o = order

    def nullable(v: np.ndarray, missing: np.ndarray) -> Any:
        return schema.masked(np.where(missing, 0, v)[o], missing[o], "Int64")

    data: dict[str, Any] = {
        "flow": nullable(flow, flow < 0),
        "server_flow": nullable(s_flow, s_flow < 0),
        "dir": schema.categorical(down[o].astype(np.int64), schema.DIRS),
        "seq": nullable(seq + 1, seq < 0),
        "length": length[o],
        "client_frame": nullable(c_fr, c_fr < 0),
        "server_frame": nullable(s_fr, s_fr < 0),
        "sent_ts_ns": nullable(sent, ~sent_ok),
        "received_ts_ns": nullable(recv, ~recv_ok),
        "one_way_ms": schema.masked(np.round(one_way, 6)[o], ~(sent_ok & recv_ok)[o], "Float64"),
        "status": status[o].tolist(),
        "retransmission": pd.array(retrans[o], dtype="boolean"),
        "spurious": pd.array(spurious[o], dtype="boolean"),
        "original": original[o].tolist(),
    }
    return schema.frame("one_way", data, int(o.shape[0]))


class _FlowMap:
    """Server flow id → client flow id (-1: unknown), vectorised."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def get_many(self, server_flows: np.ndarray) -> np.ndarray:
        ok = (server_flows >= 0) & (server_flows < self.table.shape[0])
        out: np.ndarray = np.where(ok, self.table[np.where(ok, server_flows, 0)], -1)
        return out


def _segment_flow_map(client_flow: np.ndarray, server_flow: np.ndarray) -> _FlowMap:
    """Each server flow's client flow: the one most of their matched rows pair it with."""
    both = (client_flow >= 0) & (server_flow >= 0)
    size = int(server_flow.max(initial=-1)) + 1
    table = np.full(size, -1, np.int64)
    if both.any():
        df = pd.DataFrame({"s": server_flow[both], "c": client_flow[both]})
        top = df.groupby(["s", "c"]).size().reset_index(name="n").sort_values(["s", "n"])
        top = top.drop_duplicates("s", keep="last")
        table[top["s"].to_numpy(np.int64)] = top["c"].to_numpy(np.int64)
    return _FlowMap(table)


# Findings in which the server had bytes to send and waited on the client: its closed
# receive window, its delayed ACK (that a Nagle-held segment waited for), its HTTP/2 or
# QUIC flow-control credit.  Their time inside the server's share is the client's.
CLIENT_WAITS = frozenset(
    {
        "zero_window",
        "nagle_delayed_ack",
        "delayed_ack",
        "h2_flow_control_stall",
        "quic_flow_control_stall",
    }
)

# Findings of the server's own sending (its stack or its writes held the bytes): they
# name the server's share.  The other holding kinds (a retransmission wait, a record or
# stream blocked behind a hole) happen on the way and name the s2c share.
SENDER_HOLDS = frozenset(
    {"nagle", "tcp_cork", "h2_send_buffer_hol", "slow_start_restart", "tls_record_split_write"}
)


def gap_holds(
    client_findings: Sequence[Any], server_findings: Sequence[Any], flow_map: Mapping[int, int]
) -> list[tuple[str, int, int, int]]:
    """The s2c findings of both views that held bytes (or made the server wait on the
    client), costliest first, as (kind, client flow, start, end) for
    :func:`split_gaps`; the server's on the clock its Trace has."""
    from .detect import HOLDING_KINDS

    rows: list[tuple[float, tuple[str, int, int, int]]] = []
    for fs, fmap in ((client_findings, None), (server_findings, flow_map)):
        for f in fs:
            if f.dir != "s2c" or f.flow is None:
                continue
            if f.kind not in HOLDING_KINDS and f.kind not in CLIENT_WAITS:
                continue
            flow = int(f.flow) if fmap is None else fmap.get(int(f.flow), -1)
            if flow >= 0:
                rows.append((-(f.cost_ms or 0.0), (f.kind, flow, f.t_start_ns, f.t_end_ns)))
    rows.sort(key=lambda r: r[0])
    return [h for _, h in rows]


def split_gaps(
    gaps: pd.DataFrame,
    requests: pd.DataFrame,
    server_requests: pd.DataFrame,
    server_messages: pd.DataFrame,
    flow_map: Mapping[int, int],
    holds: Sequence[tuple[str, int, int, int]] = (),
) -> pd.DataFrame:
    """The client's ``gaps`` with each wait split exactly along one timeline: ``c2s_ms``
    (request start of the wait → the request complete at the server's capture point;
    first event only), then the server's share (→ the event's last byte leaving the
    server's capture point), ``s2c_ms`` (→ the event readable at the client's).  Of the
    server's share, ``client_ms`` is the time inside a finding of :data:`CLIENT_WAITS`
    (the server waited on the client), ``server_side_ms`` the rest.  ``holds`` are the
    s2c findings of both views as (kind, client flow, start, end), on the client clock.
    The four add up to ``gap_ms``; ``cause`` names the largest: the client's share by
    its finding, the server's by an overlapping finding of :data:`SENDER_HOLDS` (else
    ``server``), the s2c share by the costliest other finding overlapping the wait
    (else ``network_s2c``), or ``network_c2s``."""
    out: pd.DataFrame = gaps.copy()
    if out.empty or server_requests.empty:
        return out
    # server request ↔ client request: same connection, stream and order in it
    sr = server_requests[["request", "flow", "stream", "request_start_ts_ns", "request_end_ts_ns"]]
    sr = sr.assign(cflow=sr["flow"].map(flow_map))
    sr = sr[sr["cflow"].notna()].copy()
    sr["stream_k"] = sr["stream"].fillna(-1).astype(np.int64)
    sr["nth"] = sr.groupby(["cflow", "stream_k"]).cumcount()
    cr = requests[["request", "flow", "stream"]].copy()
    cr["stream_k"] = cr["stream"].fillna(-1).astype(np.int64)
    cr["nth"] = cr.groupby(["flow", "stream_k"]).cumcount()
    m = cr.merge(
        sr.rename(columns={"request": "srv_request", "flow": "srv_flow"}).drop(columns="stream"),
        left_on=["flow", "stream_k", "nth"],
        right_on=["cflow", "stream_k", "nth"],
        how="inner",
    )
    srv_of = dict(zip(m["request"].tolist(), m["srv_request"].tolist(), strict=True))
    start_of: dict[int, int | None] = {}
    for r in m.itertuples(index=False):
        t = r.request_end_ts_ns if not pd.isna(r.request_end_ts_ns) else r.request_start_ts_ns
        start_of[int(r.request)] = None if pd.isna(t) else int(t)
    ev = server_messages[
        server_messages["type"].isin(["event", "message"]) & server_messages["request"].notna()
    ]
    ev_ts = {int(q): g["ts_ns"].to_numpy(np.int64, na_value=-1) for q, g in ev.groupby("request")}
    cols: dict[str, list[float | None]] = {
        c: [None] * len(out) for c in ("client_ms", "c2s_ms", "server_side_ms", "s2c_ms")
    }
    causes = out["cause"].tolist()
    rows = zip(
        out["request"].tolist(),
        out["event"].tolist(),
        out["from_ts_ns"].tolist(),
        out["to_ts_ns"].tolist(),
        out["findings"].tolist(),
        out["flow"].tolist(),
        strict=True,
    )
    for i, (q, k, t0, t1, found, flow) in enumerate(rows):
        sq = srv_of.get(q)
        ts = ev_ts.get(int(sq)) if sq is not None else None
        if ts is None or k >= ts.shape[0] or ts[k] < 0:
            continue
        arrive = start_of.get(q) if k == 0 else t0
        if arrive is None:
            continue
        a = min(max(arrive, t0), t1)
        b = min(max(int(ts[k]), a), t1)
        mine = [h for h in holds if h[1] == flow and h[2] < b and h[3] > a]
        waits = [h for h in mine if h[0] in CLIENT_WAITS]
        blocked = _union_ns([(max(x, a), min(y, b)) for _, _, x, y in waits])
        held = [h[0] for h in mine if h[0] in SENDER_HOLDS]
        c2s, srv, s2c = (a - t0) / 1e6, (b - a) / 1e6, (t1 - b) / 1e6
        client = blocked / 1e6
        cols["client_ms"][i] = round(client, 3)
        cols["c2s_ms"][i] = round(c2s, 3)
        cols["server_side_ms"][i] = round(srv - client, 3)
        cols["s2c_ms"][i] = round(s2c, 3)
        kinds = [
            str(x)
            for x in (found if isinstance(found, list) else [])
            if x not in CLIENT_WAITS and x not in SENDER_HOLDS
        ]
        shares = {
            waits[0][0] if waits else "client": client,
            "network_c2s": c2s,
            held[0] if held else "server": srv - client,
        }
        key = kinds[0] if kinds else "network_s2c"
        shares[key] = shares.get(key, 0.0) + s2c
        causes[i] = max(shares, key=lambda s: shares[s])
    for c, v in cols.items():
        out[c] = pd.array(v, dtype="Float64")
    out["cause"] = pd.array(causes, dtype="str")
    return out


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    tot, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            tot, end = tot + b - a, b
        elif b > end:
            tot, end = tot + b - end, b
    return tot

"""Split one capture into N by a symmetric hash of each connection (issue 20).

``pcapkit shard trace.pcap -n N -o DIR`` writes ``DIR/shard-K.pcapng`` (K = 0…N−1), the
way Zeek clusters and NIC receive-side scaling balance flows: every frame goes to the
shard of ``hash(sorted((src, sport), (dst, dport)), protocol) mod N``, so both
directions of a connection, and all of it (handshake included, and a later connection
that reuses the 5-tuple), land in one shard, and per-connection results on a shard
equal the whole file's.  ``by="hosts"`` hashes the two addresses alone: all the
connections between two hosts share a shard, so the findings that relate connections
(a connection not reused, a session not resumed) are found there too — what
``pcapkit analyze`` uses on a capture larger than memory.

Where the rest goes, deterministically:

* IP fragments carry no transport header pcapkit reads (they are reported, not
  reassembled: :mod:`pcapkit.net.decode`), so they hash on the addresses and protocol
  alone, ports zero: every fragment of a datagram, the first included, lands together.
* other IP traffic (ICMP, …) likewise hashes on its addresses and protocol;
* frames that are not IP (ARP, an unsupported link type, pcapng journal entries) go to
  shard 0.

One streaming pass in bounded memory (:func:`pcapkit.io.reader.iter_windows`): each
window is decoded by the packet decoder the analysis uses (link types, VLAN tags, IPv6
extension headers) and its frames appended to the shards.  Every shard is a pcapng with
every interface of the input (link type, snaplen, name; nanosecond timestamps) and every
Decryption Secrets Block, in stream order, so each decrypts alone; classic pcap input
gives pcapng shards.  ``DIR/shard-K.frames`` holds, for each frame of shard K, its frame
number in the input (little-endian uint64), so a finding on a shard maps back to
``frame.number == N`` in the original.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..io.reader import LINKTYPE_NONE, WINDOW_BYTES, RawCapture, iter_windows
from ..io.writer import PcapngWriter
from ..limits import resolve as resolve_limits
from .decode import decode

# splitmix64's finaliser (Steele, Lea, Flood 2014): every input bit reaches every output
# bit, so ``mod N`` of it balances any N.
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_K = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio increment: folds a second word in

SHARD_NAME = "shard-{k}.pcapng"
FRAMES_NAME = "shard-{k}.frames"
MAX_SHARDS = 4096  # one open file per shard
# What a shard keeps together: each connection (5-tuple, the default), or every
# connection between two hosts — what the detectors that relate connections
# (connection_not_reused, tls_resumption_missing) need, at the cost of balance.
KEYS = ("connection", "hosts")


def _mix(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= _M1
        x ^= x >> np.uint64(27)
        x *= _M2
        x ^= x >> np.uint64(31)
    return x


def flow_hash(
    cols: dict[str, np.ndarray],
    v6_idx: np.ndarray,
    src6: np.ndarray,
    dst6: np.ndarray,
    *,
    by: str = "connection",
) -> np.ndarray:
    """A uint64 per packet, equal for both directions of a 5-tuple (ports zero for
    fragments and protocols without ports); 0 for frames that are not IP.  ``by="hosts"``
    hashes the two addresses only (every connection between two hosts together)."""
    if by not in KEYS:
        raise ValueError(f"by must be one of {', '.join(KEYS)}, not {by!r}")
    n = cols["ip_version"].shape[0]
    sport, dport = cols["sport"], cols["dport"]
    if by == "hosts":
        sport = dport = np.zeros(n, np.int32)
    # an endpoint as one 64-bit word: IPv4 address and port exactly, IPv6 folded
    ea = (cols["src4"].astype(np.uint64) << np.uint64(16)) | sport.astype(np.uint64)
    eb = (cols["dst4"].astype(np.uint64) << np.uint64(16)) | dport.astype(np.uint64)
    ports = {"sport": sport, "dport": dport}
    if v6_idx.shape[0]:
        with np.errstate(over="ignore"):
            for src, e, port in ((src6, ea, "sport"), (dst6, eb, "dport")):
                w = np.ascontiguousarray(src).view(">u8").reshape(-1, 2).astype(np.uint64)
                folded = _mix(w[:, 0]) + _mix(w[:, 1] ^ _K)
                e[v6_idx] = _mix(folded ^ ports[port][v6_idx].astype(np.uint64))
    lo = np.minimum(ea, eb)
    hi = np.maximum(ea, eb)
    proto = np.maximum(cols["ip_proto"], 0).astype(np.uint64)
    if by == "hosts":
        proto = np.zeros(n, np.uint64)
    with np.errstate(over="ignore"):
        h = _mix(_mix(lo ^ (proto << np.uint64(56))) + hi * _K)
    out: np.ndarray = np.where(cols["ip_version"] > 0, h, np.uint64(0)) if n else h
    return out


def shard_index(cap: RawCapture, n: int, by: str = "connection") -> np.ndarray:
    """The shard (0…n−1) of every frame of ``cap``."""
    dec = decode(cap)
    h = flow_hash(dec.cols, dec.v6_idx, dec.src6, dec.dst6, by=by)
    k: np.ndarray = (h % np.uint64(n)).astype(np.int64)
    k[dec.cols["ip_version"] <= 0] = 0  # not IP: shard 0
    return k


@dataclass
class ShardResult:
    paths: list[Path]
    frames: list[int] = field(default_factory=list)  # frames written per shard
    secrets: int = 0  # Decryption Secrets Blocks copied (into each shard)
    anomalies: list[dict[str, object]] = field(default_factory=list)  # of the read


def epb_bytes(caplen: np.ndarray) -> np.ndarray:
    """The length of the Enhanced Packet Block :func:`shard_capture` writes for a frame
    of each captured length (32 bytes of block around the data padded to 4)."""
    out: np.ndarray = 32 + ((caplen + 3) & ~3)
    return out


def packet_frames(cap: RawCapture) -> np.ndarray:
    """Which frames of ``cap`` a shard copies: not those that are not packets (journal
    entries, a bad interface)."""
    out: np.ndarray = (cap.iface >= 0) & (cap.linktype != LINKTYPE_NONE)
    return out


def _epbs(cap: RawCapture, rows: np.ndarray) -> np.ndarray:
    """Enhanced Packet Blocks (little-endian, nanosecond ticks) of ``rows``: the headers
    and trailers are written with numpy, only the data copy loops."""
    if rows.shape[0] == 0:
        return np.zeros(0, "<u4")
    cl = cap.caplen[rows]
    blen = epb_bytes(cl)
    starts = np.zeros(rows.shape[0], np.int64)
    np.cumsum(blen[:-1], out=starts[1:])
    total = int(starts[-1] + blen[-1])
    out = np.zeros(total // 4, "<u4")
    w = starts // 4
    ts = cap.ts_ns[rows].astype(np.uint64)
    out[w] = 6
    out[w + 1] = blen
    out[w + 2] = cap.iface[rows]
    out[w + 3] = ts >> np.uint64(32)
    out[w + 4] = ts & np.uint64(0xFFFFFFFF)
    out[w + 5] = cl
    out[w + 6] = cap.origlen[rows]
    out[w + blen // 4 - 1] = blen
    dst = memoryview(out.data).cast("B")
    src = memoryview(cap.buf.data)
    for s, o, c in zip(
        (starts + 28).tolist(), cap.data_off[rows].tolist(), cl.tolist(), strict=True
    ):
        dst[s : s + c] = src[o : o + c]
    return out


def shard_capture(
    path: str | os.PathLike[str],
    n: int,
    outdir: str | os.PathLike[str],
    *,
    by: str = "connection",
    window_bytes: int = WINDOW_BYTES,
    progress: Callable[[int], None] | None = None,
    limits: Mapping[str, Any] | None = None,
) -> ShardResult:
    """Split ``path`` into ``n`` pcapng shards in ``outdir`` (see the module docstring);
    ``by="hosts"`` keeps every connection between two hosts in one shard;
    ``progress`` is called with the frames done after each window; ``limits`` (settings
    as :func:`pcapkit.limits.resolve` takes them) bound a gzip input's inflation, as
    for a whole-file read (past them: read up to there, a ``gzip_limit_exceeded``
    anomaly)."""
    if by not in KEYS:
        raise ValueError(f"by must be one of {', '.join(KEYS)}, not {by!r}")
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"the number of shards must be 1…{MAX_SHARDS}, not {n}")
    windows = iter_windows(path, window_bytes, resolve_limits(limits))
    first = next(windows, None)  # not a capture: raises before any file is written
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / SHARD_NAME.format(k=k) for k in range(n)]
    files: list[BinaryIO] = []
    maps: list[BinaryIO] = []
    res = ShardResult(paths, [0] * n)
    try:
        for p in paths:
            files.append(open(p, "wb", buffering=1 << 20))  # noqa: SIM115 - closed below
            side = out / FRAMES_NAME.format(k=len(maps))
            maps.append(open(side, "wb", buffering=1 << 16))  # noqa: SIM115 - closed below
        writers = [PcapngWriter(f) for f in files]
        written_ifaces = 0
        for win in itertools.chain([first] if first is not None else [], windows):
            cap = win.cap
            for intf in cap.interfaces[written_ifaces:]:
                for w in writers:
                    w.add_interface(intf.linktype, snaplen=intf.snaplen, name=intf.name)
            written_ifaces = len(cap.interfaces)
            for s in cap.secrets:
                res.secrets += 1
                for w in writers:
                    w.write_secrets(s.data, s.secrets_type)
            res.anomalies += cap.anomalies
            if cap.frames == 0:
                continue
            k = shard_index(cap, n, by)
            keep = packet_frames(cap)
            orig = np.arange(win.first_frame + 1, win.first_frame + cap.frames + 1, dtype="<u8")
            for j in range(n):
                rows = np.nonzero((k == j) & keep)[0]
                if rows.shape[0] == 0:
                    continue
                files[j].write(memoryview(_epbs(cap, rows).data).cast("B"))
                maps[j].write(orig[rows].tobytes())
                res.frames[j] += int(rows.shape[0])
            if progress is not None:
                progress(win.first_frame + cap.frames)
            cap.close()
    finally:
        for f in files + maps:
            f.close()
    return res


def frame_map(shard_path: str | os.PathLike[str]) -> np.ndarray | None:
    """The input's frame number of each frame of a shard (``shard-K.frames`` beside
    ``shard-K.pcapng``), or None when there is none."""
    p = Path(shard_path)
    side = p.with_name(p.name.removesuffix(".pcapng") + ".frames")
    if not side.is_file():
        return None
    return np.fromfile(side, dtype="<u8").astype(np.int64)

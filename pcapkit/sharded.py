"""A capture larger than memory, analysed as flow-hash shards and merged (issue 20).

``pcapkit analyze`` on a capture whose analysis would not fit the memory it may use
(:func:`memory_budget`: the address-space limit, the cgroup's limit, the memory
available) splits it with :func:`pcapkit.net.shard.shard_capture` into a temporary
directory (one streaming pass, bounded by a window), analyses each shard alone and
merges the tables here, so the user types the same command and reads the same report.

Why shards and not bounded windows over the file: a connection's analysis (reassembly,
TLS, HTTP, the detectors) needs all of the connection, and a connection can span the
whole capture; shards by host pair keep each connection — and every connection between
two hosts, which the detectors that relate connections need (connection_not_reused) —
whole, so each shard's findings are the whole file's for those connections.

The merge gives every row the whole file's numbering: frame numbers through each
shard's frame map (``shard-K.frames``), flow ids and ``tcp.stream``/``udp.stream`` by
the order of each connection's first frame (how :mod:`pcapkit.net.flows` numbers them),
request ids in flow order; texts (explanations, display filters, checks) have their
``frame N``, ``frame.number``, ``tcp.stream``/``udp.stream``, ``flow N`` and
``request N`` references rewritten.  :class:`ShardedTrace` offers the tables the text
and JSON reports read (``packets`` holds only ``frame`` and ``flow``).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .io.reader import GZIP_RATIO_GRACE, PCAP_MAGICS, WINDOW_BYTES, iter_windows
from .limits import resolve as resolve_limits
from .net.decode import decode
from .net.shard import epb_bytes, flow_hash, frame_map, packet_frames, shard_capture
from .trace import Trace

# Address space the analysis of a capture needs beyond the file itself, per byte of file:
# measured 2.0 (a 50.8 MB synthetic capture needs a 440–470 MiB address-space limit, a
# 9 kB one 380 MiB) and 2–3× in issue 20's report of RSS; 3 leaves room.
PEAK_PER_BYTE = 3.0
# Address space the analysis takes beyond ``import pcapkit`` whatever the capture, under
# an address-space limit: a 9 kB fixture analyses within 380 MiB where the import alone
# maps 377 MiB (unlimited, the process maps ~1 GB more — thread and allocator arenas it
# does without under a limit).  About ten times that, for the merge's tables.
FIXED_BYTES = 32 << 20
# The least budget assumed when the limit leaves less (the shard count follows from it).
MIN_BUDGET = 16 << 20
# Never fewer than this many shards once sharding (a split in two of a capture that is
# just too big would leave no room for the reader's window and the merge).
MIN_SHARDS = 4
MAX_AUTO_SHARDS = 1024
# Finding kinds that relate connections between one client and one server (a connection
# not reused, a TLS session not resumed by a later connection, a request retried on
# another connection, timeouts counted over several): found only when those connections
# share a shard — always by host pair, not always by connection.
CROSS_CONNECTION_KINDS = (
    "connection_not_reused",
    "tls_resumption_missing",
    "retry_ignored_retry_after",
    "retry_amplification",
    "client_timeout",
    "connection_pool_queueing",
)
# ``PCAPKIT_MEMORY_MB`` overrides the detected budget (MB of address space for the
# analysis of the capture: e.g. to force the shard path, or to keep off it).
ENV_BUDGET = "PCAPKIT_MEMORY_MB"

_FRAME_CMP = re.compile(r"(frame\.number\s*(?:==|>=|<=|!=|>|<)\s*)(\d+)")
_FRAME_SET = re.compile(r"(frame\.number\s+in\s+\{)([\d,\s.]+)(\})")
_STREAM = re.compile(r"((?:tcp|udp)\.stream\s*(?:==)?\s*)(\d+)")
_STREAM_SET = re.compile(r"((?:tcp|udp)\.stream\s+in\s+\{)([\d,\s]+)(\})")
_FRAME_WORD = re.compile(r"(\bframes?\s+)(\d+(?:(?:\s*(?:,|–|-|and|to)\s*)\d+)*)")
_FLOW_WORD = re.compile(r"(\b[Ff]low\s+)(\d+)")
_REQUEST_WORD = re.compile(r"(\b[Rr]equest\s+)(\d+)")


def _vm_bytes(field: str) -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_budget() -> int | None:
    """Bytes the analysis of one capture may take beyond its fixed cost, or None when
    nothing limits it (``PCAPKIT_MEMORY_MB`` overrides)."""
    raw = os.environ.get(ENV_BUDGET, "").strip()
    if raw:
        try:
            return max(int(float(raw) * (1 << 20)), 0)
        except ValueError:
            pass
    limits: list[int] = []
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            limits.append(soft - _vm_bytes("VmSize") - FIXED_BYTES)
    except (ImportError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            limits.append(int(text) - _vm_bytes("VmRSS") - (FIXED_BYTES // 4))
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    return max(min(limits), MIN_BUDGET) if limits else None


def capture_bytes(path: str, limits: Mapping[str, Any] | None = None) -> int:
    """The bytes the analysis will read: the file's size, or for gzip the larger of that
    and the last member's ISIZE (RFC 1952 §2.3.1: the input size mod 2^32) — at most what
    ``limits``' gzip limits let inflate (``gzip_bytes``; ``gzip_ratio`` times the file
    once the grace is inflated: the reader stops there, and ISIZE is the file's word,
    not a fact); 0 for stdin, a pipe or a path that cannot be read (those take the
    whole-file path, which says what is wrong)."""
    try:
        if path == "-" or not os.path.isfile(path):
            return 0
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b" or size < 18:
                return size
            f.seek(-4, os.SEEK_END)
            isize = int.from_bytes(f.read(4), "little")
    except OSError:
        return 0
    lim = resolve_limits(limits)
    most = min(lim["gzip_bytes"], max(GZIP_RATIO_GRACE, lim["gzip_ratio"] * size))
    return max(size, min(isize, most))


def shards_needed(size: int, budget: int | None) -> int:
    """0 when a capture of ``size`` bytes fits ``budget`` whole, else how many shards."""
    need = size * PEAK_PER_BYTE
    if budget is None or need <= budget:
        return 0
    return min(max(MIN_SHARDS, math.ceil(2 * need / max(budget, 1))), MAX_AUTO_SHARDS)


def host_pair_bytes(
    path: str | os.PathLike[str],
    window_bytes: int = WINDOW_BYTES,
    limits: Mapping[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of hosts of the capture (its ``by="hosts"`` flow hash, 0 for what is not
    IP) and the bytes its frames take in a shard (Enhanced Packet Blocks, as
    :func:`pcapkit.net.shard.shard_capture` writes them), in one streaming pass (a gzip
    input inflated within ``limits``, as the shards are)."""
    hashes: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    for win in iter_windows(path, window_bytes, resolve_limits(limits)):
        cap = win.cap
        if cap.frames:
            dec = decode(cap)
            h = flow_hash(dec.cols, dec.v6_idx, dec.src6, dec.dst6, by="hosts")
            blen = np.where(packet_frames(cap), epb_bytes(cap.caplen), 0)
            u, inv = np.unique(h, return_inverse=True)
            hashes.append(u)
            sizes.append(np.bincount(inv, weights=blen, minlength=u.shape[0]))
        cap.close()
    if not hashes:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    u, inv = np.unique(np.concatenate(hashes), return_inverse=True)
    total = np.bincount(inv, weights=np.concatenate(sizes), minlength=u.shape[0])
    return u, total.astype(np.int64)


def host_pair_shards(hashes: np.ndarray, sizes: np.ndarray, shards: int, budget: int) -> int | None:
    """The least count of shards from ``shards`` to twice that (at most MAX_AUTO_SHARDS)
    whose every host-pair shard fits ``budget`` (``PEAK_PER_BYTE`` × its bytes); None
    when the biggest pair alone does not, or no count in that range spreads the pairs
    so."""
    if sizes.shape[0] == 0:
        return shards
    if int(sizes.max()) * PEAK_PER_BYTE > budget:
        return None
    for n in range(shards, min(2 * shards, MAX_AUTO_SHARDS) + 1):
        k = (hashes % np.uint64(n)).astype(np.int64)
        if np.bincount(k, weights=sizes, minlength=n).max() * PEAK_PER_BYTE <= budget:
            return n
    return None


# ---------------------------------------------------------------------------
# the merge


def _ints(text: str) -> list[str]:
    return re.findall(r"\d+", text)


def _sub_numbers(text: str, fn: Callable[[int], int]) -> str:
    return re.sub(r"\d+", lambda m: str(fn(int(m.group(0)))), text)


@dataclass
class _Maps:
    frame: np.ndarray  # shard frame (1-based) - 1 → input frame
    flow: dict[int, int]
    stream: dict[int, int]  # local tcp/udp stream number → global (per proto)
    stream_proto: dict[tuple[str, int], int]
    request: dict[int, int]

    def f(self, x: Any) -> Any:
        if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
            return x
        i = int(x)
        return int(self.frame[i - 1]) if 1 <= i <= self.frame.shape[0] else i

    def text(self, s: Any) -> Any:
        if not isinstance(s, str):
            return s
        s = _FRAME_SET.sub(lambda m: m.group(1) + _sub_numbers(m.group(2), self.f) + m.group(3), s)
        s = _FRAME_CMP.sub(lambda m: m.group(1) + str(self.f(int(m.group(2)))), s)
        s = _FRAME_WORD.sub(lambda m: m.group(1) + _sub_numbers(m.group(2), self.f), s)

        def stream(m: re.Match[str]) -> str:
            proto = "tcp" if m.group(1).startswith("tcp") else "udp"
            return (
                m.group(1)
                + _sub_numbers(m.group(2), lambda k: self.stream_proto.get((proto, k), k))
                + (m.group(3) if m.lastindex and m.lastindex >= 3 else "")
            )

        s = _STREAM_SET.sub(stream, s)
        s = _STREAM.sub(stream, s)
        s = _FLOW_WORD.sub(
            lambda m: m.group(1) + str(self.flow.get(int(m.group(2)), m.group(2))), s
        )
        return _REQUEST_WORD.sub(
            lambda m: m.group(1) + str(self.request.get(int(m.group(2)), m.group(2))), s
        )

    def value(self, v: Any, key: str = "") -> Any:
        """Frames, flows and requests inside nested values (evidence, details, checks)."""
        if isinstance(v, dict):
            return {k: self.value(x, str(k)) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            out = [self.value(x, key) for x in v]
            return tuple(out) if isinstance(v, tuple) else out
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            if key in ("frame", "frames") or key.endswith(("_frame", "_frames")):
                return self.f(v)
            if key in ("flow", "flows") or key.endswith(("_flow", "_flows")):
                return self.flow.get(int(v), v)
            if key in ("request", "requests") or key.endswith(("_request", "_requests")):
                return self.request.get(int(v), v)
        return v


def _remap_col(df: pd.DataFrame, col: str, fn: Callable[[Any], Any]) -> None:
    if col in df.columns and len(df):
        df[col] = pd.array([fn(x) for x in df[col].tolist()], dtype=df[col].dtype)


def _remap_obj(df: pd.DataFrame, col: str, fn: Callable[[Any], Any]) -> None:
    if col in df.columns and len(df):
        df[col] = pd.Series([fn(x) for x in df[col].tolist()], index=df.index, dtype=object)


TABLES = ("flows", "flows_in_detail", "tls", "quic", "requests", "gaps", "findings", "anomalies")
TABLES += ("hol_counterfactual",)
FRAME_COLS = ("first_frame", "last_frame", "request_frame", "response_frame")
FRAME_COLS += ("response_head_frame", "frame", "last_byte_frame")


class ShardedTrace:
    """The tables of one capture analysed shard by shard (see the module docstring).
    Quacks like :class:`pcapkit.trace.Trace` for :func:`pcapkit.report.analysis_text` and
    :func:`pcapkit.report.write_analysis_json`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        keylog: str | os.PathLike[str] | bytes | None = None,
        *,
        shards: int,
        thresholds: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        redact: bool = True,
        window_bytes: int | None = None,
        tmpdir: str | None = None,
        budget: int | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.shards = shards
        with open(self.path, "rb") as f:
            head = f.read(4)
        self._format_compressed = head[:2] == b"\x1f\x8b"
        self._format = "pcap" if head in PCAP_MAGICS else "pcapng"
        parts: list[dict[str, Any]] = []
        # by host pair first (the findings that relate connections stay whole); when that
        # puts more in one shard than ``budget`` allows, the least count of shards (from
        # ``shards`` up) whose host-pair shards all fit, from every pair's bytes; only when
        # one host pair alone is too big (or no count up to twice as many fits), by
        # connection.  (At one count, whether two big pairs share a shard is the hash's
        # lottery: the 155 MB test capture fits at 9 and 11 shards but not at 10 or 12.)
        self.by = "hosts"
        self.largest_pair = 0  # bytes in shards of the biggest pair of hosts, when measured
        kw: dict[str, Any] = {"limits": limits}
        if window_bytes is not None:
            kw["window_bytes"] = window_bytes
        with tempfile.TemporaryDirectory(prefix="pcapkit-shards-", dir=tmpdir) as d:
            res = shard_capture(self.path, shards, d, by="hosts", **kw)
            biggest = max((p.stat().st_size for p in res.paths), default=0)
            if budget is not None and biggest * PEAK_PER_BYTE > budget:
                for p in res.paths:
                    p.unlink()
                hashes, sizes = host_pair_bytes(self.path, **kw)
                self.largest_pair = int(sizes.max(initial=0))
                fit = host_pair_shards(hashes, sizes, shards, budget)
                if fit is None:
                    self.by = "connection"
                    res = shard_capture(self.path, shards, d, by="connection", **kw)
                else:
                    self.shards = fit
                    for side in Path(d).glob("*.frames"):
                        side.unlink()
                    res = shard_capture(self.path, fit, d, by="hosts", **kw)
            self.read_anomalies = res.anomalies
            for sp, n in zip(res.paths, res.frames, strict=True):
                if n:
                    parts.append(self._one(sp, keylog, thresholds, limits, redact))
                os.unlink(sp)  # the disk of a shard is back once it is analysed
        self._merge(parts)

    @staticmethod
    def _one(
        sp: Path,
        keylog: Any,
        thresholds: Mapping[str, Any] | None,
        limits: Mapping[str, Any] | None,
        redact: bool,
    ) -> dict[str, Any]:
        fmap = frame_map(sp)
        assert fmap is not None
        with Trace(sp, keylog, thresholds=thresholds, limits=limits, redact=redact) as t:
            out: dict[str, Any] = {name: getattr(t, name).copy() for name in TABLES}
            out["records"] = t.records.copy()
            out["packets"] = t.packets[["frame", "flow"]].copy()
            out["summary"] = t.capture_summary()
            out["key_sources"] = list(t.key_sources)
            out["internal_errors"] = list(t.internal_errors)
            out["fmap"] = fmap
        return out

    def _merge(self, parts: list[dict[str, Any]]) -> None:
        # global flow ids and streams: by each connection's first frame in the input
        rows = []
        for k, p in enumerate(parts):
            fl = p["flows"]
            for flow, proto, stream, first in zip(
                fl.flow.tolist(),
                fl.proto.tolist(),
                fl.stream.tolist(),
                fl.first_frame.tolist(),
                strict=True,
            ):
                rows.append((int(p["fmap"][int(first) - 1]), k, int(flow), str(proto), int(stream)))
        rows.sort()
        flow_of: list[dict[int, int]] = [{} for _ in parts]
        stream_of: list[dict[tuple[str, int], int]] = [{} for _ in parts]
        per_proto: dict[str, int] = {}
        for g, (_first, k, flow, proto, stream) in enumerate(rows):
            flow_of[k][flow] = g
            stream_of[k][(proto, stream)] = per_proto.get(proto, 0)
            per_proto[proto] = per_proto.get(proto, 0) + 1
        # requests: in flow order, then their order within the flow
        reqs = []
        for k, p in enumerate(parts):
            for i, (rid, flow) in enumerate(
                zip(p["requests"].request.tolist(), p["requests"].flow.tolist(), strict=True)
            ):
                reqs.append((flow_of[k][int(flow)], i, k, int(rid)))
        reqs.sort()
        req_of: list[dict[int, int]] = [{} for _ in parts]
        for g, (_f, _i, k, rid) in enumerate(reqs):
            req_of[k][rid] = g
        tables: dict[str, list[pd.DataFrame]] = {t: [] for t in (*TABLES, "records", "packets")}
        for k, p in enumerate(parts):
            m = _Maps(p["fmap"], flow_of[k], {}, stream_of[k], req_of[k])
            for name in tables:
                df = p[name]
                for c in FRAME_COLS:
                    _remap_col(df, c, m.f)
                if name == "packets":
                    _remap_col(df, "frame", m.f)
                _remap_col(df, "flow", lambda x, m=m: x if pd.isna(x) else m.flow.get(int(x), x))
                _remap_col(
                    df, "request", lambda x, m=m: x if pd.isna(x) else m.request.get(int(x), x)
                )
                if name in ("flows", "flows_in_detail"):
                    df["stream"] = [
                        m.stream_proto[(str(pr), int(s))]
                        for pr, s in zip(df.proto, df.stream, strict=True)
                    ]
                for c in ("frames", "evidence", "checks", "details", "findings"):
                    if c in df.columns and df[c].dtype == object:
                        _remap_obj(df, c, lambda v, c=c, m=m: m.value(v, c))
                for c in ("explanation", "remedy", "display_filter", "detail"):
                    if c in df.columns:
                        _remap_col(df, c, m.text)
                tables[name].append(df)
        self._tables = {}
        for name, dfs in tables.items():
            df = pd.concat(dfs, ignore_index=True) if dfs else pd.DataFrame()
            self._tables[name] = df
        for name in (
            "flows",
            "flows_in_detail",
            "tls",
            "quic",
            "records",
            "packets",
            "hol_counterfactual",
        ):
            sort = [
                c for c in ("flow", "frame", "dir", "offset") if c in self._tables[name].columns
            ]
            if name == "packets":
                sort = ["frame"]
            self._tables[name] = (
                self._tables[name].sort_values(sort, kind="stable").reset_index(drop=True)
            )
        rq = self._tables["requests"].sort_values("request", kind="stable").reset_index(drop=True)
        self._tables["requests"] = rq
        gaps = self._tables["gaps"]
        if len(gaps):
            gaps = gaps.sort_values(["request", "event"], kind="stable").reset_index(drop=True)
        self._tables["gaps"] = gaps
        self._tables["anomalies"] = self._with_read_anomalies(self._tables["anomalies"])
        self._parts_summary = [p["summary"] for p in parts]
        self.key_sources = sorted({s for p in parts for s in p["key_sources"]})
        self.internal_errors = [e for p in parts for e in p["internal_errors"]]
        self._findings_order()

    def _with_read_anomalies(self, shards: pd.DataFrame) -> pd.DataFrame:
        """The shards' anomalies with those of reading the capture itself (a cut record, an
        absurd length, a gzip limit: the shards are written clean), in the whole file's
        order (by frame, those without one last), flows filled from the packets as
        :func:`pcapkit.anomalies.anomalies_table` fills them."""
        from .anomalies import anomalies_table

        pk = self._tables["packets"]
        frames = pk["frame"].to_numpy(np.int64) if len(pk) else np.zeros(0, np.int64)
        pkt_flow = np.full(int(frames.max(initial=0)), -1, np.int64)
        if len(pk):
            flow = pd.to_numeric(pk["flow"], errors="coerce").fillna(-1).to_numpy(np.int64)
            pkt_flow[frames - 1] = flow
        read = anomalies_table(self.read_anomalies, pkt_flow)
        both = [df for df in (read, shards) if len(df)]
        if not both:
            return shards
        out = pd.concat(both, ignore_index=True)
        return out.sort_values("frame", kind="stable", na_position="last").reset_index(drop=True)

    def _findings_order(self) -> None:
        """The whole file's order (:func:`pcapkit.detect.finding_order`) on the merged rows."""

        def key(r: Any) -> tuple[Any, ...]:
            flow = -1 if pd.isna(r.flow) else int(r.flow)
            cost = 0.0 if pd.isna(r.cost_ms) else float(r.cost_ms)
            frames = tuple(int(x) for x in r.frames)
            return (-cost, flow, r.t_start_ns, r.kind, r.dir or "", frames, r.t_end_ns)

        fd = self._tables["findings"]
        if len(fd):
            order = sorted(range(len(fd)), key=lambda i: key(fd.iloc[i]))
            fd = fd.iloc[order]
        self._tables["findings"] = fd.reset_index(drop=True)

    # -- the Trace surface the reports read -----------------------------------
    def __getattr__(self, name: str) -> Any:
        tables = self.__dict__.get("_tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    def __enter__(self) -> ShardedTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def close(self) -> None:
        return None

    def capture_summary(self) -> dict[str, Any]:
        ps = self._parts_summary
        first = [p["first_ts_ns"] for p in ps if p["first_ts_ns"] is not None]
        last = [p["last_ts_ns"] for p in ps if p["last_ts_ns"] is not None]
        size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
        t0, t1 = (min(first), max(last)) if first else (None, None)
        return {
            "path": self.path,
            "format": self._format,
            "compressed": self._format_compressed,
            "file_size": size,
            "frames": sum(p["frames"] for p in ps),
            "first_ts_ns": t0,
            "last_ts_ns": t1,
            "duration_ms": round((t1 - t0) / 1e6, 3) if t0 is not None and t1 is not None else 0.0,
            "interfaces": ps[0]["interfaces"] if ps else [],
            "tcp_packets": sum(p["tcp_packets"] for p in ps),
            "udp_packets": sum(p["udp_packets"] for p in ps),
            "flows": sum(p["flows"] for p in ps),
            "secrets_blocks": ps[0]["secrets_blocks"] if ps else 0,
            "anomalies": int(len(self._tables["anomalies"])),
        }

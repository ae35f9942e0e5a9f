"""The lab's userspace forwarder: a path with delay, rate, deterministic loss and reordering.

The machines this project runs on have no ``netem`` (DETECTION.md §8.1), so impairment comes
from this small forwarder.  It sits between two TUN devices — one in the client namespace,
one in the server namespace (see :mod:`pcapkit.lab.netns`) — and moves raw IP packets between
them:

* **fixed one-way delay** per direction, scheduled on the monotonic clock with a heap (a
  timer wheel is not needed at these packet rates); per-direction FIFO order is kept because
  release times never decrease, unless a packet is explicitly reordered;
* **rate limit** per direction as serialisation delay (a token bucket whose burst is one
  packet): a packet starts "transmitting" when the link is free and is released one
  serialisation time plus the delay later; a drop-tail queue bounds the backlog;
* **deterministic drop** of the N-th *payload* packet of a direction (TCP with payload
  length > 0, or any UDP datagram; 1-based, counted at ingress, retransmissions count too);
* **reordering**: the N-th payload packet is held an extra time so later packets overtake it;
* **lost handshakes**: the N-th SYN (client → server) or SYN/ACK (server → client) is dropped;
* **a black hole**: after the N-th payload packet of a direction, everything else in that
  direction is dropped (a NAT that lost its state, a dead link);
* **a delivery stall**: after the N-th payload packet, every packet of the direction arriving
  in the next T ms is held and released, in order, when the window ends (a radio outage or a
  middlebox that buffers: nothing is lost, everything is late);
* **TTL / hop-limit decrement** (one router hop) so captures look like a routed path and a
  TTL-based vantage guess (DETECTION.md §1.1 (b)) works.

Everything it does is logged with wall-clock times (``time.time_ns()``, the clock tcpdump
stamps the captures with): each drop/reorder with direction, TCP seq (absolute and relative
to the ISN, as Wireshark shows it) and length, and a per-packet trace (bounded; with each TCP
packet's window field and SACK block count) that scenarios use as a middle-vantage ground
truth, e.g. to measure the receiver's delayed-ACK wait or a zero-window episode.

Structure: :class:`Impairment` is the pure scheduling logic (no I/O, no clock);
:class:`Forwarder` is the loop that moves packets between two :class:`Port` objects using a
:class:`Clock`.  Tests drive it with :class:`MemoryPort` and :class:`VirtualClock`; the lab
runs it with :class:`TunPort` and :class:`RealClock` in a child process (``python
…/pcapkit/lab/forwarder.py``, by path: this module is stdlib-only), not a thread: a
separate process keeps the runner's GIL (and its subprocess bookkeeping) off the packet
path, can run at SCHED_FIFO priority without lifting the runner too, and dies with its TUN
devices if the runner is killed (parent-death signal, set by :mod:`pcapkit.lab.netns`).

**Middle vantage** (``ForwarderConfig.middle``): a capture point halfway along the path.
Physically, a tap in the middle of a path with one-way delay d sees each packet d/2 after the
sender sent it and d/2 before the receiver gets it.  So with the tap on, each direction's delay
is applied in two halves, ``delay_ns // 2`` before the tap and the rest after it, and the
forwarder writes every packet, at the moment it passes the tap, to a nanosecond pcap
(:class:`MiddleTap`, raw-IP link type like the TUN captures; ``--middle FILE``).  Its
timestamps come from ``time.time_ns()``, the clock tcpdump stamps the two end captures with,
so all three files share one clock; the end-to-end delay is the same as without the tap.
What happens where: the rate limit's serialisation and a reordered packet's extra hold are on
the sender-side half (the middle sees the bottleneck's spacing and the reordering), a
deterministic drop happens before the tap (the middle never sees a dropped packet, like a loss
on the sender-side half), the TTL is decremented before the tap (one hop from the sender).
Why a tap in the forwarder rather than a third "router" namespace with its own tcpdump: the
forwarder already *is* the router; a second forwarder hop would double the userspace
scheduling jitter on a 2-core host, and the tap is where the split delay is applied, so its
timestamps are exactly where the middle physically sits (within the ~50 µs release lateness).

Precision: waiting uses ``select`` (microsecond timeouts, unlike ``epoll``'s milliseconds)
with the timer slack lowered to 1 ns, the last :data:`SPIN_NS` before a release polled
rather than slept, the cyclic GC off and (by default) SCHED_FIFO: a release is late by
≈ 50 µs (median), so a 20 ms RTT path measures ≈ 20.1–20.3 ms (rare VM hiccups of ~1 ms).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import heapq
import json
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

C2S = 0  # read from the client-side TUN, written to the server-side TUN
S2C = 1  # read from the server-side TUN, written to the client-side TUN
DIRECTION_NAMES = ("c2s", "s2c")

# Caps, each with its reason.
MAX_PACKET = 65_535  # largest IP packet a TUN read can return (IPv4 total length field)
DEFAULT_QUEUE_LIMIT_BYTES = 1_048_576  # drop-tail limit of a rate-limited link: 1 MiB ≈ a
#   generous router buffer; large enough that a lab scenario never tail-drops by accident
MAX_TRACE_PACKETS = 200_000  # per-packet trace cap: bounds memory (~100 B/entry) for long runs
MAX_EVENTS = 10_000  # drop/reorder/queue-drop log cap, same reason
DEFAULT_REORDER_EXTRA_NS = 5_000_000  # a reordered packet is held 5 ms more than its peers
STOP_POLL_NS = 50_000_000  # the loop re-checks its stop flag at least every 50 ms
SPIN_NS = 250_000  # the last 250 µs before a release are polled, not slept: select() wake-up
#   latency on the lab VMs is ~150 µs (p50), which would add ~0.3 ms to every RTT
STALL_NS = 1_000_000  # a late wake-up, or a pass of the loop, this long is logged as a stall
WATCH_NS = 2_000_000  # the lab's forwarder wakes at least this often, so that a stall which
#   delays the read of an arriving packet (nothing due yet) is seen too: ~500 wake-ups/s
MAX_STALLS = 10_000
MAX_DRAIN_PER_WAKEUP = 256  # packets read from one TUN per wake-up before servicing timers
REALTIME_PRIORITY = 10  # SCHED_FIFO, low among RT priorities: above every normal task (so
#   the scenario's apps cannot delay a release), below kernel RT threads

MAX_MIDDLE_BYTES = 64 * 1024 * 1024  # middle pcap cap: a runaway scenario must not fill the disk;
#   lab fixtures are ~100 KB, the runner rejects captures above 5 MB anyway
LINKTYPE_RAW = 101  # raw IPv4/IPv6, what tcpdump records on a TUN device
STAGE_MIDDLE = 0  # heap entry reaches the middle tap (end of the sender-side half)
STAGE_OUT = 1  # heap entry is written to the receiver's TUN

IPPROTO_TCP = 6
IPPROTO_UDP = 17
TCP_FIN = 0x01
TCP_SYN = 0x02


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectionConfig:
    """Impairment of one direction of the path."""

    delay_ns: int = 0
    rate_bps: int | None = None  # None: unlimited
    drop: tuple[int, ...] = ()  # 1-based indices of payload packets to drop
    reorder: tuple[int, ...] = ()  # 1-based indices of payload packets to hold back
    reorder_extra_ns: int = DEFAULT_REORDER_EXTRA_NS
    queue_limit_bytes: int = DEFAULT_QUEUE_LIMIT_BYTES
    # 1-based indices of TCP SYN packets of this direction to drop (c2s: the client's SYN
    # and its retransmissions; s2c: the server's SYN/ACKs) — a lost handshake
    drop_syn: tuple[int, ...] = ()
    # a black hole: after the N-th payload packet of this direction has passed, every later
    # packet of the direction (data, ACKs, FIN, RST) is dropped
    blackhole_after: int | None = None
    # a delivery stall: after the N-th payload packet, every packet of this direction that
    # arrives in the next stall_ns is held and released at the window's end, in order
    stall_after: int | None = None
    stall_ns: int = 0

    def __post_init__(self) -> None:
        if self.delay_ns < 0 or self.reorder_extra_ns < 0 or self.stall_ns < 0:
            raise ValueError("delays must be >= 0")
        if any(n < 1 for n in self.drop_syn):
            raise ValueError("SYN indices are 1-based")
        for n in (self.blackhole_after, self.stall_after):
            if n is not None and n < 0:
                raise ValueError("packet counts must be >= 0")
        if self.rate_bps is not None and self.rate_bps <= 0:
            raise ValueError("rate_bps must be > 0 or None")
        if any(n < 1 for n in (*self.drop, *self.reorder)):
            raise ValueError("packet indices are 1-based")
        if self.queue_limit_bytes <= 0:
            raise ValueError("queue_limit_bytes must be > 0")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DirectionConfig:
        return cls(
            delay_ns=int(d.get("delay_ns", 0)),
            rate_bps=None if d.get("rate_bps") is None else int(d["rate_bps"]),
            drop=tuple(int(n) for n in d.get("drop", ())),
            reorder=tuple(int(n) for n in d.get("reorder", ())),
            reorder_extra_ns=int(d.get("reorder_extra_ns", DEFAULT_REORDER_EXTRA_NS)),
            queue_limit_bytes=int(d.get("queue_limit_bytes", DEFAULT_QUEUE_LIMIT_BYTES)),
            drop_syn=tuple(int(n) for n in d.get("drop_syn", ())),
            blackhole_after=None if d.get("blackhole_after") is None else int(d["blackhole_after"]),
            stall_after=None if d.get("stall_after") is None else int(d["stall_after"]),
            stall_ns=int(d.get("stall_ns", 0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ForwarderConfig:
    """Both directions plus global switches."""

    c2s: DirectionConfig = field(default_factory=DirectionConfig)
    s2c: DirectionConfig = field(default_factory=DirectionConfig)
    decrement_ttl: bool = True
    trace_limit: int = MAX_TRACE_PACKETS
    middle: bool = False  # split each delay in halves around a middle tap (module docstring)

    def direction(self, d: int) -> DirectionConfig:
        return self.c2s if d == C2S else self.s2c

    def delay_split_ns(self, d: int) -> tuple[int, int]:
        """(before the middle tap, after it) for direction ``d``; (delay, 0) without a tap."""
        delay = self.direction(d).delay_ns
        if not self.middle:
            return delay, 0
        return delay // 2, delay - delay // 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForwarderConfig:
        return cls(
            c2s=DirectionConfig.from_dict(d.get("c2s", {})),
            s2c=DirectionConfig.from_dict(d.get("s2c", {})),
            decrement_ttl=bool(d.get("decrement_ttl", True)),
            trace_limit=int(d.get("trace_limit", MAX_TRACE_PACKETS)),
            middle=bool(d.get("middle", False)),
        )


# --------------------------------------------------------------------------- packet parsing


@dataclass(frozen=True, slots=True)
class PacketInfo:
    """The few header fields the forwarder needs; ``proto`` 0 when not IPv4/IPv6."""

    ip_version: int
    proto: int
    src: bytes
    dst: bytes
    sport: int
    dport: int
    seq: int | None  # TCP only
    ack: int | None
    flags: int  # TCP flags (0 for UDP)
    payload_len: int
    window: int = 0  # TCP window field as sent (unscaled; 0 for UDP)
    sack_blocks: int = 0  # SACK blocks in the TCP options (a dupACK reporting a hole has ≥ 1)

    @property
    def is_payload(self) -> bool:
        """Counts for drop/reorder indices: TCP with data, or any UDP datagram."""
        return (self.proto == IPPROTO_TCP and self.payload_len > 0) or self.proto == IPPROTO_UDP


_UNKNOWN = PacketInfo(0, 0, b"", b"", 0, 0, None, None, 0, 0)


def parse_packet(pkt: bytes | bytearray) -> PacketInfo:
    """Decode IPv4/IPv6 + TCP/UDP headers of a raw IP packet; never raises."""
    n = len(pkt)
    if n < 1:
        return _UNKNOWN
    version = pkt[0] >> 4
    if version == 4 and n >= 20:
        ihl = (pkt[0] & 0x0F) * 4
        total = (pkt[2] << 8) | pkt[3]
        proto = pkt[9]
        src, dst = bytes(pkt[12:16]), bytes(pkt[16:20])
        end = min(total, n)
        frag = ((pkt[6] & 0x1F) << 8) | pkt[7]
        if frag:  # non-first fragment: no transport header
            return PacketInfo(4, proto, src, dst, 0, 0, None, None, 0, end - ihl)
    elif version == 6 and n >= 40:
        ihl = 40
        proto = pkt[6]
        end = min(40 + ((pkt[4] << 8) | pkt[5]), n)
        src, dst = bytes(pkt[8:24]), bytes(pkt[24:40])
    else:
        return _UNKNOWN
    if proto == IPPROTO_TCP and end >= ihl + 20:
        sport, dport, seq, ack, off_flags, window = struct.unpack_from("!HHIIHH", pkt, ihl)
        doff = (off_flags >> 12) * 4
        return PacketInfo(
            version,
            proto,
            src,
            dst,
            sport,
            dport,
            seq,
            ack,
            off_flags & 0x1FF,
            max(0, end - ihl - doff),
            window,
            _sack_blocks(pkt, ihl + 20, min(ihl + doff, end)) if doff > 20 else 0,
        )
    if proto == IPPROTO_UDP and end >= ihl + 8:
        sport, dport = struct.unpack_from("!HH", pkt, ihl)
        return PacketInfo(version, proto, src, dst, sport, dport, None, None, 0, end - ihl - 8)
    return PacketInfo(version, proto, src, dst, 0, 0, None, None, 0, max(0, end - ihl))


TCPOPT_EOL, TCPOPT_NOP, TCPOPT_SACK = 0, 1, 5


def _sack_blocks(pkt: bytes | bytearray, start: int, end: int) -> int:
    """Number of SACK blocks in the TCP options at ``pkt[start:end]`` (0 if none/malformed)."""
    i = start
    while i < end:
        kind = pkt[i]
        if kind == TCPOPT_EOL:
            break
        if kind == TCPOPT_NOP:
            i += 1
            continue
        if i + 1 >= end or pkt[i + 1] < 2:
            break
        if kind == TCPOPT_SACK:
            return (pkt[i + 1] - 2) // 8
        i += pkt[i + 1]
    return 0


def decrement_ttl(pkt: bytearray) -> bool:
    """One router hop: TTL/hop limit − 1, IPv4 checksum fixed incrementally (RFC 1624 eq. 3).

    Returns False when the packet must not be forwarded (TTL would reach 0).
    """
    version = pkt[0] >> 4 if pkt else 0
    if version == 4 and len(pkt) >= 20:
        if pkt[8] <= 1:
            return False
        old = (pkt[8] << 8) | pkt[9]
        pkt[8] -= 1
        new = (pkt[8] << 8) | pkt[9]
        hc = (pkt[10] << 8) | pkt[11]
        s = (~hc & 0xFFFF) + (~old & 0xFFFF) + new  # HC' = ~(~HC + ~m + m')
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        hc = ~s & 0xFFFF
        pkt[10], pkt[11] = hc >> 8, hc & 0xFF
        return True
    if version == 6 and len(pkt) >= 40:
        if pkt[7] <= 1:
            return False
        pkt[7] -= 1
    return True


def ipv4_header_checksum(hdr: bytes | bytearray) -> int:
    """Full RFC 791 header checksum (with the checksum field as stored); 0 means valid."""
    s = 0
    for i in range(0, len(hdr), 2):
        s += (hdr[i] << 8) | hdr[i + 1]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# --------------------------------------------------------------------------- pure logic

# Trace entry columns (a list per packet, kept small): see Impairment.trace_columns.
TRACE_COLUMNS = (
    "dir",
    "t_in_ns",
    "t_out_ns",
    "proto",
    "sport",
    "dport",
    "seq",
    "rel_seq",
    "ack",
    "flags",
    "len",
    "idx",
    "action",
    "win",
    "sack",
)
_T_OUT = 2
_T_ACTION = 12


@dataclass(slots=True)
class _DirState:
    payload_index: int = 0
    syn_index: int = 0  # TCP SYN packets seen (SYN or SYN/ACK), for drop_syn
    link_free_ns: int = 0  # monotonic time at which the rate-limited link is idle again
    queued_bytes: int = 0
    stall_end_ns: int | None = None  # monotonic end of the delivery stall, once it started


class Impairment:
    """Pure scheduling: what to drop, hold or release, and when (monotonic ns).

    ``ingress`` is called for every packet read from a port; ``pop_due`` returns what must be
    written now.  No I/O and no clock reads: callers pass ``now_ns`` (monotonic, for
    scheduling) and ``wall_ns`` (``time.time_ns()``, for the log).
    """

    trace_columns = TRACE_COLUMNS

    def __init__(self, config: ForwarderConfig) -> None:
        self.config = config
        self._state = (_DirState(), _DirState())
        self._drops = (frozenset(config.c2s.drop), frozenset(config.s2c.drop))
        self._reorders = (frozenset(config.c2s.reorder), frozenset(config.s2c.reorder))
        self._heap: list[tuple[int, int, int, bytes, list[Any] | None, int]] = []
        self._counter = 0
        self._split = (config.delay_split_ns(C2S), config.delay_split_ns(S2C))
        self._taps: list[tuple[int, bytes]] = []
        self._isn: dict[tuple[bytes, bytes, int, int], int] = {}
        self.events: list[dict[str, Any]] = []
        self.trace: list[list[Any]] = []
        self.trace_truncated = False
        self.stats = {
            "c2s_in": 0,
            "s2c_in": 0,
            "c2s_out": 0,
            "s2c_out": 0,
            "dropped": 0,
            "reordered": 0,
            "queue_dropped": 0,
            "ttl_expired": 0,
            "middle_tapped": 0,
            "blackholed": 0,
            "stalled": 0,
        }

    # -- helpers
    def _rel_seq(self, info: PacketInfo) -> int | None:
        if info.seq is None:
            return None
        key = (info.src, info.dst, info.sport, info.dport)
        if info.flags & TCP_SYN:
            self._isn[key] = info.seq
        isn = self._isn.get(key)
        return None if isn is None else (info.seq - isn - 1) & 0xFFFFFFFF

    def _event(
        self,
        kind: str,
        direction: int,
        info: PacketInfo,
        rel: int | None,
        idx: int,
        wall_ns: int,
        **extra: Any,
    ) -> None:
        if len(self.events) >= MAX_EVENTS:
            return
        ev: dict[str, Any] = {
            "event": kind,
            "dir": DIRECTION_NAMES[direction],
            "payload_index": idx,
            "t_ns": wall_ns,
            "proto": {IPPROTO_TCP: "tcp", IPPROTO_UDP: "udp"}.get(info.proto, str(info.proto)),
            "src_port": info.sport,
            "dst_port": info.dport,
            "seq": info.seq,
            "rel_seq": rel,
            "len": info.payload_len,
        }
        ev.update(extra)
        self.events.append(ev)

    # -- API
    def ingress(self, direction: int, pkt: bytes, now_ns: int, wall_ns: int) -> None:
        """Account for one packet read at ``now_ns``; drop it or schedule its release."""
        cfg = self.config.direction(direction)
        st = self._state[direction]
        self.stats[DIRECTION_NAMES[direction] + "_in"] += 1
        info = parse_packet(pkt)
        rel = self._rel_seq(info)
        idx = 0
        if info.is_payload:
            st.payload_index += 1
            idx = st.payload_index
        entry: list[Any] | None = None
        if len(self.trace) < self.config.trace_limit:
            entry = [
                DIRECTION_NAMES[direction],
                wall_ns,
                None,
                info.proto,
                info.sport,
                info.dport,
                info.seq,
                rel,
                info.ack,
                info.flags,
                info.payload_len,
                idx,
                "fwd",
                info.window,
                info.sack_blocks,
            ]
            self.trace.append(entry)
        else:
            self.trace_truncated = True
        if idx and idx in self._drops[direction]:
            self.stats["dropped"] += 1
            self._event("drop", direction, info, rel, idx, wall_ns)
            if entry is not None:
                entry[_T_ACTION] = "drop"
            return
        if info.proto == IPPROTO_TCP and info.flags & TCP_SYN:
            st.syn_index += 1
            if st.syn_index in cfg.drop_syn:
                self.stats["dropped"] += 1
                self._event("drop_syn", direction, info, rel, 0, wall_ns, syn_index=st.syn_index)
                if entry is not None:
                    entry[_T_ACTION] = "drop"
                return
        passed = st.payload_index - (1 if idx else 0)  # payload packets before this one
        if cfg.blackhole_after is not None and passed >= cfg.blackhole_after:
            self.stats["blackholed"] += 1
            if self.stats["blackholed"] == 1:
                self._event("blackhole", direction, info, rel, idx, wall_ns)
            if entry is not None:
                entry[_T_ACTION] = "blackhole"
            return
        out = pkt
        if self.config.decrement_ttl:
            buf = bytearray(pkt)
            if not decrement_ttl(buf):
                self.stats["ttl_expired"] += 1
                if entry is not None:
                    entry[_T_ACTION] = "ttl_expired"
                return
            out = bytes(buf)
        release = now_ns
        if cfg.rate_bps is not None:
            backlog_ns = max(0, st.link_free_ns - now_ns)
            backlog_bytes = backlog_ns * cfg.rate_bps // 8_000_000_000
            if backlog_bytes + len(pkt) > cfg.queue_limit_bytes:
                self.stats["queue_dropped"] += 1
                self._event(
                    "queue_drop", direction, info, rel, idx, wall_ns, backlog_bytes=backlog_bytes
                )
                if entry is not None:
                    entry[_T_ACTION] = "queue_drop"
                return
            start = max(now_ns, st.link_free_ns)
            st.link_free_ns = start + -(-len(pkt) * 8 * 1_000_000_000 // cfg.rate_bps)
            release = st.link_free_ns
        if cfg.stall_after is not None and passed >= cfg.stall_after and cfg.stall_ns:
            if st.stall_end_ns is None:
                st.stall_end_ns = now_ns + cfg.stall_ns
                self._event("stall", direction, info, rel, idx, wall_ns, stall_ns=cfg.stall_ns)
            if now_ns < st.stall_end_ns:
                release = max(release, st.stall_end_ns)
                self.stats["stalled"] += 1
                if entry is not None:
                    entry[_T_ACTION] = "stalled"
        before_tap, _ = self._split[direction]
        release += before_tap  # the whole delay when there is no middle tap
        if idx and idx in self._reorders[direction]:
            release += cfg.reorder_extra_ns
            self.stats["reordered"] += 1
            self._event(
                "reorder", direction, info, rel, idx, wall_ns, extra_ns=cfg.reorder_extra_ns
            )
            if entry is not None:
                entry[_T_ACTION] = "reorder"
        self._counter += 1
        stage = STAGE_MIDDLE if self.config.middle else STAGE_OUT
        heapq.heappush(self._heap, (release, self._counter, direction, out, entry, stage))

    def next_due_ns(self) -> int | None:
        """Monotonic time of the next release, or None when nothing is queued."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ns: int) -> list[tuple[int, bytes, list[Any] | None]]:
        """Packets whose release time has come, in release order: (direction, packet, trace).

        With a middle tap, packets reaching the tap are queued for :meth:`pop_taps` and
        rescheduled for the receiver-side half (from their due time, so lateness does not add).
        """
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            due, _, direction, pkt, entry, stage = heapq.heappop(heap)
            if stage == STAGE_MIDDLE:
                self._taps.append((direction, pkt))
                self.stats["middle_tapped"] += 1
                self._counter += 1
                after_tap = self._split[direction][1]
                heapq.heappush(
                    heap, (due + after_tap, self._counter, direction, pkt, entry, STAGE_OUT)
                )
                continue
            self.stats[DIRECTION_NAMES[direction] + "_out"] += 1
            out.append((direction, pkt, entry))
        return out

    def pop_taps(self) -> list[tuple[int, bytes]]:
        """Packets that passed the middle tap since the last call: (direction, packet)."""
        taps, self._taps = self._taps, []
        return taps

    def pending(self) -> int:
        return len(self._heap)


# --------------------------------------------------------------------------- I/O abstractions


class Port(Protocol):
    """One side of the forwarder: a TUN device, or a list in memory for tests."""

    def fileno(self) -> int: ...

    def recv(self) -> bytes | None:
        """Next packet, or None when nothing is readable now."""
        ...

    def send(self, pkt: bytes) -> None: ...


class Clock(Protocol):
    def monotonic_ns(self) -> int: ...

    def time_ns(self) -> int: ...

    def wait(self, ports: Sequence[Port], timeout_ns: int) -> list[int]:
        """Block up to ``timeout_ns``; return the indices of readable ports."""
        ...


class RealClock:
    """Monotonic scheduling, wall-clock logging, ``select`` with µs timeouts."""

    monotonic_ns = staticmethod(time.monotonic_ns)
    time_ns = staticmethod(time.time_ns)

    def __init__(self) -> None:
        self._schedstat: int | None = None
        self._schedstat_tried = False

    def run_delay_ns(self) -> int | None:
        """ns this thread has spent runnable but not running (``/proc/thread-self/schedstat``'s
        run_delay), or None where the kernel does not say."""
        if not self._schedstat_tried:
            self._schedstat_tried = True
            try:
                self._schedstat = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError:
                self._schedstat = None
        if self._schedstat is None:
            return None
        try:
            return int(os.pread(self._schedstat, 128, 0).split()[1])
        except (OSError, ValueError, IndexError):
            return None

    def wait(self, ports: Sequence[Port], timeout_ns: int) -> list[int]:
        fds = [p.fileno() for p in ports]
        try:
            ready, _, _ = select.select(fds, [], [], max(0, timeout_ns) / 1e9)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for safety
            return []
        return [fds.index(fd) for fd in ready]


class TunPort:
    """A TUN file descriptor opened with IFF_TUN | IFF_NO_PI (raw IP packets), non-blocking."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self.fd

    def recv(self) -> bytes | None:
        try:
            return os.read(self.fd, MAX_PACKET)
        except BlockingIOError:
            return None

    def send(self, pkt: bytes) -> None:
        try:
            os.write(self.fd, pkt)
        except OSError:  # interface went down during teardown: nothing to deliver to
            pass


class VirtualClock:
    """A clock for tests: time only moves when the forwarder waits."""

    def __init__(self, start_ns: int = 1_000_000_000) -> None:
        self.now = start_ns
        self.wall_offset = 1_700_000_000_000_000_000 - start_ns

    def monotonic_ns(self) -> int:
        return self.now

    def time_ns(self) -> int:
        return self.now + self.wall_offset

    def wait(self, ports: Sequence[Port], timeout_ns: int) -> list[int]:
        deadline = self.now + max(0, timeout_ns)
        arrivals = [
            (p.next_arrival_ns(), i)
            for i, p in enumerate(ports)
            if isinstance(p, MemoryPort) and p.next_arrival_ns() is not None
        ]
        first = min((t for t, _ in arrivals if t is not None), default=None)
        if first is not None and first <= deadline:
            self.now = max(self.now, first)
            return [i for t, i in arrivals if t is not None and t <= self.now]
        self.now = deadline
        return []


class MemoryPort:
    """In-memory port: packets scheduled to arrive at given (virtual) times; sent ones kept."""

    def __init__(self, clock: VirtualClock, fd: int = -1) -> None:
        self.clock = clock
        self._fd = fd
        self._inbox: list[tuple[int, int, bytes]] = []
        self._n = 0
        self.sent: list[tuple[int, bytes]] = []

    def inject(self, at_ns: int, pkt: bytes) -> None:
        self._n += 1
        heapq.heappush(self._inbox, (at_ns, self._n, pkt))

    def next_arrival_ns(self) -> int | None:
        return self._inbox[0][0] if self._inbox else None

    def fileno(self) -> int:
        return self._fd

    def recv(self) -> bytes | None:
        if self._inbox and self._inbox[0][0] <= self.clock.now:
            return heapq.heappop(self._inbox)[2]
        return None

    def send(self, pkt: bytes) -> None:
        self.sent.append((self.clock.now, pkt))


# --------------------------------------------------------------------------- middle tap


class Tap(Protocol):
    """Where the middle vantage's packets go: ``write(wall-clock ns, raw IP packet)``."""

    def write(self, ts_ns: int, pkt: bytes) -> None: ...


class MiddleTap:
    """Nanosecond classic pcap of raw IP packets (LINKTYPE_RAW), written as packets pass.

    Stdlib-only on purpose (this module runs by path, without pcapkit); the runner turns the
    file into pcapng with the key log, like the two end captures.  Stops writing, and says
    so in :meth:`result`, beyond :data:`MAX_MIDDLE_BYTES`.
    """

    def __init__(self, path: str, *, max_bytes: int = MAX_MIDDLE_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._f = open(path, "wb")  # closed by close(): it lives as long as the loop
        # magic a1b23c4d: nanosecond timestamps; version 2.4; snaplen 65535; link type RAW
        self._f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, MAX_PACKET, LINKTYPE_RAW))
        self.bytes = 24
        self.packets = 0
        self.truncated = False

    def write(self, ts_ns: int, pkt: bytes) -> None:
        if self.bytes + 16 + len(pkt) > self.max_bytes:
            self.truncated = True
            return
        sec, nsec = divmod(ts_ns, 1_000_000_000)
        self._f.write(struct.pack("<IIII", sec, nsec, len(pkt), len(pkt)))
        self._f.write(pkt)
        self.bytes += 16 + len(pkt)
        self.packets += 1

    def close(self) -> None:
        self._f.close()

    def result(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "packets": self.packets,
            "bytes": self.bytes,
            "truncated": self.truncated,
        }


# --------------------------------------------------------------------------- the loop


class Forwarder:
    """Moves packets between ``ports[C2S]`` (client side) and ``ports[S2C]`` (server side)."""

    def __init__(
        self,
        ports: tuple[Port, Port],
        config: ForwarderConfig,
        clock: Clock | None = None,
        *,
        spin_ns: int = 0,
        tap: Tap | None = None,
        watch_ns: int = 0,
    ) -> None:
        self.ports = ports
        self.spin_ns = spin_ns
        # With ``watch_ns``, waits last at most that long, and every time the loop was not
        # where it should have been for more than STALL_NS is logged as [wall ns it began,
        # ns]: a wake-up that came late after its timeout, a wake-up the kernel kept on the
        # run queue (schedstat run_delay), or a pass of releasing and reading that took that
        # long by the wall clock.  The forwarder's own work per pass is tens of µs; such a
        # pass is the machine's (this VM's kernel is PREEMPT_NONE: a SCHED_FIFO task waits
        # for another task's kernel code to yield; or the hypervisor took the vCPU, and that
        # time is charged to the forwarder as CPU time: 2026-12-02, passes that read one
        # packet took 75 ms of wall and 40 ms of "CPU"), so what was due or arriving in it
        # is late by the machine.
        self.watch_ns = watch_ns
        self.stalls: list[list[int]] = []
        self.tap = tap
        self.clock: Clock = clock if clock is not None else RealClock()
        self.impairment = Impairment(config)
        self.stopping = False

    def _release_due(self) -> None:
        clock = self.clock
        due = self.impairment.pop_due(clock.monotonic_ns())
        taps = self.impairment.pop_taps()
        if taps:
            now = clock.time_ns()  # the moment the packets pass the middle of the path
            for _, pkt in taps:
                if self.tap is not None:
                    self.tap.write(now, pkt)
        for direction, pkt, entry in due:
            # stamped *before* the write: the receiving namespace's capture stamps the
            # packet inside it (the TUN write hands it to the stack), so a stamp taken after
            # the write returned came 12–243 µs (median 59) after the capture's, for every
            # packet of 5 nagle_wwr runs — and ACK waits from it (truth.py) were short by that
            if entry is not None:
                entry[_T_OUT] = clock.time_ns()
            # a packet read from the client side (C2S) is written to the server side port
            self.ports[1 - direction].send(pkt)

    def _stalled(self, start_mono: int, ns: int) -> None:
        """Log [wall ns, ns] for a stall that began at ``start_mono`` (monotonic)."""
        if ns > STALL_NS and len(self.stalls) < MAX_STALLS:
            clock = self.clock
            self.stalls.append([clock.time_ns() - (clock.monotonic_ns() - start_mono), ns])

    def run_once(self, max_wait_ns: int = STOP_POLL_NS) -> None:
        """Release what is due, wait for input or the next release, read what arrived."""
        clock = self.clock
        watch = self.watch_ns
        run_delay = getattr(clock, "run_delay_ns", None) if watch else None
        if watch:
            t0 = clock.monotonic_ns()
        self._release_due()
        nxt = self.impairment.next_due_ns()
        now = clock.monotonic_ns()
        if watch:
            self._stalled(t0, now - t0)
        timeout = max_wait_ns if nxt is None else min(max_wait_ns, nxt - now)
        if self.spin_ns and nxt is not None:
            # sleep until SPIN_NS before the release, then poll (timeout 0) until it is due
            timeout = timeout - self.spin_ns if timeout > self.spin_ns else 0
        if watch:
            timeout = min(timeout, watch)
        queued0 = run_delay() if run_delay is not None else None
        ready = clock.wait(self.ports, max(0, timeout))
        woke = clock.monotonic_ns()
        waited = woke - now
        if watch:
            # late after the timeout, or woken (by a packet) but left on the run queue
            late = waited - max(0, timeout)
            if queued0 is not None and run_delay is not None:
                late = max(late, run_delay() - queued0)
            self._stalled(woke - late, late)
        for i in ready:
            port = self.ports[i]
            for _ in range(MAX_DRAIN_PER_WAKEUP):
                pkt = port.recv()
                if pkt is None:
                    break
                self.impairment.ingress(i, pkt, clock.monotonic_ns(), clock.time_ns())
        self._release_due()
        if watch:
            # by the wall clock: the hypervisor's time is charged to this thread as CPU time
            self._stalled(woke, clock.monotonic_ns() - woke)

    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Loop until ``stop()`` is called (signal handler) or ``until()`` is true."""
        while not self.stopping and not (until is not None and until()):
            self.run_once()

    def stop(self) -> None:
        self.stopping = True

    def result(self) -> dict[str, Any]:
        imp = self.impairment
        return {
            "config": imp.config.to_dict(),
            "stats": dict(imp.stats),
            "events": imp.events,
            "trace_columns": list(TRACE_COLUMNS),
            "trace": imp.trace,
            "trace_truncated": imp.trace_truncated,
            "stalls": self.stalls,
        }


# --------------------------------------------------------------------------- child process

_PR_SET_TIMERSLACK = 29


def _lower_timer_slack() -> None:
    """Ask for 1 ns timer slack (default 50 µs) so select() wakes on time."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        pass


def main(argv: list[str] | None = None) -> int:
    """Child-process entry: ``--fds C,S --config FILE --log FILE`` (fds inherited)."""
    ap = argparse.ArgumentParser(prog="forwarder.py")
    ap.add_argument("--fds", required=True, help="client-side and server-side TUN fds: C,S")
    ap.add_argument("--config", required=True, help="ForwarderConfig as JSON file")
    ap.add_argument("--log", required=True, help="where to write the result JSON on exit")
    ap.add_argument("--ready", type=int, default=-1, help="fd to write one byte to when ready")
    ap.add_argument("--realtime", action="store_true", help="SCHED_FIFO priority (less jitter)")
    ap.add_argument("--middle", default=None, help="write the middle vantage to this pcap")
    args = ap.parse_args(argv)
    with open(args.config, encoding="utf-8") as f:
        config = ForwarderConfig.from_dict(json.load(f))
    if config.middle and not args.middle:
        ap.error("the config splits the delay around a middle tap: --middle FILE is required")
    fd_c, fd_s = (int(x) for x in args.fds.split(","))
    tap = MiddleTap(args.middle) if args.middle else None
    fwd = Forwarder(
        (TunPort(fd_c), TunPort(fd_s)), config, spin_ns=SPIN_NS, tap=tap, watch_ns=WATCH_NS
    )

    def _on_signal(signum: int, frame: object) -> None:
        fwd.stop()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    _lower_timer_slack()
    gc.disable()  # no reference cycles are made per packet; a gen-2 pass over a large trace
    #               would stall releases by milliseconds
    realtime = False
    if args.realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
            realtime = True
        except (OSError, AttributeError):
            pass
    if args.ready >= 0:
        os.write(args.ready, b"R")
        os.close(args.ready)
    try:
        fwd.run()
    finally:
        if tap is not None:
            tap.close()
    doc = {**fwd.result(), "realtime": realtime, "spin_ns": fwd.spin_ns}
    if tap is not None:
        doc["middle"] = {
            **tap.result(),
            "split_ns": {
                name: list(config.delay_split_ns(d)) for d, name in enumerate(DIRECTION_NAMES)
            },
        }
    tmp = args.log + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The forwarder's delay / drop / rate / reorder logic, without namespaces or root.

Packets are fed through the in-memory port abstraction (:class:`MemoryPort`) on a
:class:`VirtualClock`, so every time below is exact; one test uses real datagram sockets and
the real clock to check that the select-based loop never releases early.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Sequence

import pytest

from pcapkit.lab.forwarder import (
    C2S,
    S2C,
    DirectionConfig,
    Forwarder,
    ForwarderConfig,
    Impairment,
    MemoryPort,
    Port,
    VirtualClock,
    decrement_ttl,
    ipv4_header_checksum,
    parse_packet,
)

MS = 1_000_000
CLI, SRV = bytes([10, 77, 0, 1]), bytes([10, 77, 0, 2])


def ipv4(payload: bytes, proto: int, src: bytes = CLI, dst: bytes = SRV, ttl: int = 64) -> bytes:
    hdr = bytearray(
        struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0x4000, ttl, proto, 0, src, dst)
    )
    c = ipv4_header_checksum(hdr)
    hdr[10:12] = struct.pack("!H", c)
    return bytes(hdr) + payload


def tcp(
    seq: int,
    data: bytes = b"",
    *,
    flags: int = 0x18,
    ack: int = 1,
    sport: int = 40000,
    dport: int = 9000,
    src: bytes = CLI,
    dst: bytes = SRV,
) -> bytes:
    seg = struct.pack("!HHIIHHHH", sport, dport, seq, ack, (5 << 12) | flags, 65535, 0, 0)
    return ipv4(seg + data, 6, src, dst)


def udp(data: bytes, sport: int = 5000, dport: int = 4433) -> bytes:
    return ipv4(struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data, 17)


def make(
    c2s: DirectionConfig | None = None, s2c: DirectionConfig | None = None, trace_limit: int = 1000
) -> tuple[Forwarder, VirtualClock, MemoryPort, MemoryPort]:
    clock = VirtualClock(start_ns=0)
    cport, sport = MemoryPort(clock), MemoryPort(clock)
    cfg = ForwarderConfig(
        c2s=c2s or DirectionConfig(), s2c=s2c or DirectionConfig(), trace_limit=trace_limit
    )
    return Forwarder((cport, sport), cfg, clock), clock, cport, sport


def drain(fwd: Forwarder, *ports: MemoryPort) -> None:
    """Run until nothing is queued in the forwarder or waiting in the ports."""
    for _ in range(100_000):
        if fwd.impairment.pending() == 0 and all(p.next_arrival_ns() is None for p in ports):
            return
        fwd.run_once()
    raise AssertionError("forwarder did not drain")


def seqs(sent: list[tuple[int, bytes]]) -> list[int | None]:
    return [parse_packet(p).seq for _, p in sent]


def test_fixed_delay_keeps_fifo_and_exact_times() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(delay_ns=10 * MS))
    for i, t in enumerate((0, 1 * MS, 1 * MS, 2 * MS)):
        cport.inject(t, tcp(1000 + i, b"x"))
    drain(fwd, cport, sport)
    assert [t for t, _ in sport.sent] == [10 * MS, 11 * MS, 11 * MS, 12 * MS]
    assert seqs(sport.sent) == [1000, 1001, 1002, 1003]
    assert cport.sent == []  # nothing goes back to the sender


def test_directions_have_independent_delays() -> None:
    fwd, clock, cport, sport = make(
        DirectionConfig(delay_ns=5 * MS), DirectionConfig(delay_ns=20 * MS)
    )
    cport.inject(0, tcp(1, b"q"))
    sport.inject(0, tcp(7, b"r", src=SRV, dst=CLI, sport=9000, dport=40000))
    drain(fwd, cport, sport)
    assert [t for t, _ in sport.sent] == [5 * MS]
    assert [t for t, _ in cport.sent] == [20 * MS]


def test_ttl_decremented_and_checksum_valid() -> None:
    fwd, clock, cport, sport = make()
    cport.inject(0, tcp(1, b"abc"))
    drain(fwd, cport, sport)
    out = sport.sent[0][1]
    assert out[8] == 63
    assert ipv4_header_checksum(out[:20]) == 0


def test_incremental_checksum_matches_full_recompute() -> None:
    rng = random.Random(4)
    for _ in range(500):
        hdr = bytearray(rng.randbytes(20))
        hdr[0], hdr[8] = 0x45, rng.randint(2, 255)
        hdr[10:12] = b"\0\0"
        hdr[10:12] = struct.pack("!H", ipv4_header_checksum(hdr))
        assert decrement_ttl(hdr)
        assert ipv4_header_checksum(hdr) == 0


def test_ttl_one_is_not_forwarded() -> None:
    fwd, clock, cport, sport = make()
    cport.inject(0, ipv4(b"\0" * 8, 17, ttl=1))
    drain(fwd, cport, sport)
    assert sport.sent == []
    assert fwd.impairment.stats["ttl_expired"] == 1


def test_drop_counts_payload_packets_only_and_logs_ground_truth() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(delay_ns=1 * MS, drop=(2,)))
    isn = 5000
    cport.inject(0, tcp(isn, flags=0x02))  # SYN: not payload
    cport.inject(1 * MS, tcp(isn + 1, flags=0x10))  # pure ACK: not payload
    cport.inject(2 * MS, tcp(isn + 1, b"a" * 100))  # payload #1
    cport.inject(3 * MS, tcp(isn + 101, flags=0x10))  # pure ACK
    cport.inject(4 * MS, tcp(isn + 101, b"b" * 50))  # payload #2 -> dropped
    cport.inject(5 * MS, tcp(isn + 151, b"c" * 10))  # payload #3
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [isn, isn + 1, isn + 1, isn + 101, isn + 151]
    assert [len(p) for _, p in sport.sent][-1] == 40 + 10
    (ev,) = fwd.impairment.events
    assert ev["event"] == "drop" and ev["dir"] == "c2s" and ev["payload_index"] == 2
    assert ev["seq"] == isn + 101 and ev["rel_seq"] == 100 and ev["len"] == 50
    assert ev["t_ns"] == clock.wall_offset + 4 * MS
    assert fwd.impairment.stats["dropped"] == 1


def test_drop_is_per_direction() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(drop=(1,)), DirectionConfig())
    cport.inject(0, tcp(1, b"c"))
    sport.inject(0, tcp(9, b"s", src=SRV, dst=CLI, sport=9000, dport=40000))
    drain(fwd, cport, sport)
    assert sport.sent == []
    assert seqs(cport.sent) == [9]


def test_udp_datagrams_count_even_when_empty() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(drop=(2, 3)))
    for i, data in enumerate((b"one", b"", b"three", b"four")):
        cport.inject(i * MS, udp(data))
    drain(fwd, cport, sport)
    assert [parse_packet(p).payload_len for _, p in sport.sent] == [3, 4]
    assert [e["payload_index"] for e in fwd.impairment.events] == [2, 3]


def test_rate_limit_serialises_packets() -> None:
    # 1 Mbit/s: a 1250-byte packet takes exactly 10 ms on the wire
    fwd, clock, cport, sport = make(DirectionConfig(delay_ns=5 * MS, rate_bps=1_000_000))
    data = b"z" * (1250 - 40)
    for i in range(3):
        cport.inject(0, tcp(i, data))
    cport.inject(100 * MS, tcp(3, data))  # link idle again: no queueing
    drain(fwd, cport, sport)
    assert [t for t, _ in sport.sent] == [15 * MS, 25 * MS, 35 * MS, 115 * MS]


def test_rate_limit_tail_drops_beyond_queue_limit() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(rate_bps=1_000_000, queue_limit_bytes=2600))
    data = b"z" * (1250 - 40)
    for i in range(4):
        cport.inject(0, tcp(i, data))
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [0, 1]
    assert [e["event"] for e in fwd.impairment.events] == ["queue_drop", "queue_drop"]


def test_reorder_lets_later_packets_overtake() -> None:
    fwd, clock, cport, sport = make(
        DirectionConfig(delay_ns=10 * MS, reorder=(2,), reorder_extra_ns=5 * MS)
    )
    for i in range(4):
        cport.inject(i * MS, tcp(100 + i, b"r"))
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [100, 102, 103, 101]
    assert [t for t, _ in sport.sent] == [10 * MS, 12 * MS, 13 * MS, 16 * MS]
    assert fwd.impairment.events[0]["event"] == "reorder"


def test_trace_records_in_and_out_times() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(delay_ns=3 * MS, drop=(2,)))
    cport.inject(0, tcp(1, b"a"))
    cport.inject(1 * MS, tcp(2, b"b"))
    drain(fwd, cport, sport)
    res = fwd.result()
    cols = res["trace_columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in res["trace"]]
    assert [r["action"] for r in rows] == ["fwd", "drop"]
    assert rows[0]["t_out_ns"] - rows[0]["t_in_ns"] == 3 * MS
    assert rows[1]["t_out_ns"] is None


def test_trace_is_capped() -> None:
    fwd, clock, cport, sport = make(trace_limit=3)
    for i in range(5):
        cport.inject(i, tcp(i, b"x"))
    drain(fwd, cport, sport)
    assert len(fwd.result()["trace"]) == 3 and fwd.result()["trace_truncated"]
    assert len(sport.sent) == 5


def test_impairment_pop_due_is_pure() -> None:
    imp = Impairment(ForwarderConfig(s2c=DirectionConfig(delay_ns=7)))
    imp.ingress(S2C, tcp(1, b"x"), now_ns=100, wall_ns=0)
    assert imp.next_due_ns() == 107
    assert imp.pop_due(106) == []
    ((d, pkt, _),) = imp.pop_due(107)
    assert d == S2C and parse_packet(pkt).seq == 1
    assert C2S != S2C


@pytest.mark.parametrize("n", range(0, 64, 3))
def test_parse_packet_never_raises_on_truncated_input(n: int) -> None:
    pkt = tcp(1, b"payload")
    info = parse_packet(pkt[:n])
    assert info.payload_len >= 0
    rng = random.Random(n)
    parse_packet(rng.randbytes(n))


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValueError):
        DirectionConfig(drop=(0,))
    with pytest.raises(ValueError):
        DirectionConfig(rate_bps=0)
    cfg = ForwarderConfig(c2s=DirectionConfig(delay_ns=5, drop=(1, 4)))
    assert ForwarderConfig.from_dict(cfg.to_dict()) == cfg


class _DgramPort:
    """A real file descriptor (AF_UNIX datagram socket) standing in for a TUN device."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self) -> bytes | None:
        try:
            return self.sock.recv(65535)
        except BlockingIOError:
            return None

    def send(self, pkt: bytes) -> None:
        self.sock.send(pkt)


def test_real_clock_loop_never_releases_early() -> None:
    a_out, a_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b_out, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    fwd = Forwarder(
        (_DgramPort(a_in), _DgramPort(b_in)),
        ForwarderConfig(c2s=DirectionConfig(delay_ns=10 * MS)),
        spin_ns=200_000,
    )
    b_out.settimeout(2)
    lags = []
    for i in range(5):
        t0 = time.monotonic_ns()
        a_out.send(tcp(i, b"x"))
        while fwd.impairment.stats["c2s_out"] <= i:
            fwd.run_once(max_wait_ns=20 * MS)
        got = b_out.recv(65535)
        lags.append(time.monotonic_ns() - t0)
        assert parse_packet(got).seq == i
    assert min(lags) >= 10 * MS  # never early
    for s in (a_out, a_in, b_out, b_in):
        s.close()


class _StallingClock(VirtualClock):
    """A virtual clock whose wait ending at ``at_ns`` oversleeps by ``stall_ns`` (the kernel
    not running the forwarder: what the lab's CI machine does now and then)."""

    def __init__(self, at_ns: int, stall_ns: int) -> None:
        super().__init__(start_ns=0)
        self.at_ns, self.stall_ns = at_ns, stall_ns

    def wait(self, ports: Sequence[Port], timeout_ns: int) -> list[int]:
        ready = super().wait(ports, timeout_ns)
        if not ready and self.now >= self.at_ns and self.stall_ns:
            self.now += self.stall_ns
            self.stall_ns = 0
        return ready


def test_watch_logs_the_stall_that_made_a_release_late() -> None:
    """Packets at 0, 1, 2 and 20 ms, 5 ms delay; the wait that should end at 5 ms (the
    first release) wakes 6 ms late.  The three releases due in it leave 6, 5, 4 ms late,
    the last one on time, and the stall log says when and how long; without ``watch_ns``
    nothing is logged."""
    for watch in (2 * MS, 0):
        clock = _StallingClock(at_ns=5 * MS, stall_ns=6 * MS)
        cport, sport = MemoryPort(clock), MemoryPort(clock)
        cfg = ForwarderConfig(c2s=DirectionConfig(delay_ns=5 * MS))
        fwd = Forwarder((cport, sport), cfg, clock, watch_ns=watch)
        for i in (0, 1, 2, 20):
            cport.inject(i * MS, tcp(i, b"x"))
        drain(fwd, cport, sport)
        assert [(t, parse_packet(p).seq) for t, p in sport.sent] == [
            (11 * MS, 0),
            (11 * MS, 1),
            (11 * MS, 2),
            (25 * MS, 20),
        ]
        want = [[clock.wall_offset + 5 * MS, 6 * MS]] if watch else []
        assert fwd.result()["stalls"] == want


class _SlowPort(_DgramPort):
    """A port whose send sleeps ``pause_s`` the first time: the forwarder off the CPU while
    releasing (a TUN write running the receiver's stack, the hypervisor's steal)."""

    def __init__(self, sock: socket.socket, pause_s: float) -> None:
        super().__init__(sock)
        self.pause_s = pause_s

    def send(self, pkt: bytes) -> None:
        time.sleep(self.pause_s)
        self.pause_s = 0.0
        super().send(pkt)


class _BusyPort(_SlowPort):
    """A port whose first send spins ``pause_s`` on the CPU: time the hypervisor took from
    the vCPU is charged to the forwarder as CPU time, so a pass is judged by the wall."""

    def send(self, pkt: bytes) -> None:
        end = time.monotonic() + self.pause_s
        while time.monotonic() < end:
            pass
        self.pause_s = 0.0
        _DgramPort.send(self, pkt)


@pytest.mark.parametrize("port", [_SlowPort, _BusyPort])
def test_watch_logs_a_long_pass_outside_the_wait(port: type[_SlowPort]) -> None:
    """Real clock: a release that takes 5 ms (asleep, or spinning on the CPU) is logged as
    a stall of about that long; the waits themselves log nothing on an idle loop."""
    a_out, a_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b_out, b_in = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    fwd = Forwarder(
        (_DgramPort(a_in), port(b_in, 0.005)),
        ForwarderConfig(c2s=DirectionConfig(delay_ns=1 * MS)),
        watch_ns=2 * MS,
    )
    t0 = time.time_ns()
    a_out.send(tcp(1, b"x"))
    while fwd.impairment.stats["c2s_out"] < 1:
        fwd.run_once(max_wait_ns=20 * MS)
    busy = [s for s in fwd.stalls if s[1] >= 4 * MS]
    assert busy and all(t0 <= t <= time.time_ns() and ns < 50 * MS for t, ns in busy), fwd.stalls
    for s in (a_out, a_in, b_out, b_in):
        s.close()


class _QueuedClock(VirtualClock):
    """A virtual clock whose kernel kept the forwarder ``queued_ns`` on the run queue after
    the packet arriving at ``at_ns`` woke it (schedstat's run_delay)."""

    def __init__(self, at_ns: int, queued_ns: int) -> None:
        super().__init__(start_ns=0)
        self.at_ns, self.queued_ns, self.run_delay = at_ns, queued_ns, 0

    def run_delay_ns(self) -> int:
        return self.run_delay

    def wait(self, ports: Sequence[Port], timeout_ns: int) -> list[int]:
        ready = super().wait(ports, timeout_ns)
        if ready and self.now >= self.at_ns and self.queued_ns:
            self.now += self.queued_ns
            self.run_delay += self.queued_ns
            self.queued_ns = 0
        return ready


def test_watch_logs_a_wake_up_left_on_the_run_queue() -> None:
    """A packet at 1 ms wakes the forwarder (inside its 2 ms wait, so not late after any
    timeout), but it runs 1.5 ms later: logged from 1 ms, 1.5 ms long, from run_delay."""
    clock = _QueuedClock(at_ns=1 * MS, queued_ns=3 * MS // 2)
    cport, sport = MemoryPort(clock), MemoryPort(clock)
    fwd = Forwarder(
        (cport, sport),
        ForwarderConfig(c2s=DirectionConfig(delay_ns=5 * MS)),
        clock,
        watch_ns=2 * MS,
    )
    cport.inject(1 * MS, tcp(1, b"x"))
    drain(fwd, cport, sport)
    assert [t for t, _ in sport.sent] == [int(7.5 * MS)]  # read 1.5 ms late, held 5 ms
    assert fwd.result()["stalls"] == [[clock.wall_offset + 1 * MS, 3 * MS // 2]]


# --------------------------------------------------------------------------- issue 22 stalls


def test_drop_syn_drops_the_nth_syn_only() -> None:
    """drop_syn counts SYN-flagged packets of the direction: the first SYN is lost, its
    retransmission (same ISN) passes; data and ACKs are not counted."""
    fwd, clock, cport, sport = make(DirectionConfig(delay_ns=1 * MS, drop_syn=(1,)))
    isn = 7000
    cport.inject(0, tcp(isn, flags=0x02))  # SYN #1 -> dropped
    cport.inject(1000 * MS, tcp(isn, flags=0x02))  # SYN #2 (retransmission)
    cport.inject(1031 * MS, tcp(isn + 1, b"GET", flags=0x18))
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [isn, isn + 1]
    (ev,) = fwd.impairment.events
    assert ev["event"] == "drop_syn" and ev["syn_index"] == 1 and ev["dir"] == "c2s"


def test_blackhole_drops_everything_after_n_payload_packets() -> None:
    fwd, clock, cport, sport = make(DirectionConfig(blackhole_after=1))
    cport.inject(0, tcp(1, flags=0x02))
    cport.inject(1 * MS, tcp(2, b"request"))  # payload #1 passes
    cport.inject(2 * MS, tcp(9, flags=0x10))  # a pure ACK after it: dropped
    cport.inject(3 * MS, tcp(9, b"more"))  # dropped
    cport.inject(4 * MS, tcp(13, flags=0x11))  # FIN: dropped
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [1, 2]
    assert fwd.impairment.stats["blackholed"] == 3
    assert [e["event"] for e in fwd.impairment.events] == ["blackhole"]


def test_stall_holds_a_window_and_releases_in_order() -> None:
    """After the 2nd payload packet, packets arriving in the next 100 ms are held and leave,
    in order, when the window ends; later packets are not delayed."""
    fwd, clock, cport, sport = make(
        DirectionConfig(delay_ns=5 * MS, stall_after=2, stall_ns=100 * MS)
    )
    for i, t in enumerate((0, 10, 20, 30, 40, 150)):
        cport.inject(t * MS, tcp(100 + i, b"x"))
    drain(fwd, cport, sport)
    assert seqs(sport.sent) == [100, 101, 102, 103, 104, 105]
    out = [t // MS for t, _ in sport.sent]
    assert out[:2] == [5, 15]
    assert out[2:5] == [125, 125, 125]  # held from 20 ms (the window's start) to 120, + 5 ms
    assert out[5] == 155
    assert fwd.impairment.stats["stalled"] == 3
    (ev,) = fwd.impairment.events
    assert ev["event"] == "stall" and ev["stall_ns"] == 100 * MS

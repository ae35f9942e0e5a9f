"""Ground truth from the forwarder's per-packet trace (a middle vantage on the lab's clock).

The forwarder sees every packet when it leaves one end (``t_in_ns``: read from the sender's
TUN, µs after the sender's own capture stamped it) and when it is handed to the other end
(``t_out_ns``: written to the receiver's TUN, µs before the receiver's capture stamps it).
So, for a packet P from X and the first packet A from Y acknowledging it:

* Y's ACK wait (e.g. its delayed-ACK timer) = ``A.t_in − P.t_out`` — exact up to µs;
* the handshake RTT seen at the client = ``SYNACK.t_out − SYN.t_in``.

These numbers come from the scenario's own instrumentation, not from parsing the captures,
so they can check the project's readers and detectors independently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TCP_SYN = 0x02
TCP_ACK = 0x10
IPPROTO_TCP = 6


@dataclass(frozen=True, slots=True)
class TracePacket:
    dir: str
    t_in_ns: int
    t_out_ns: int | None
    proto: int
    sport: int
    dport: int
    seq: int | None
    rel_seq: int | None
    ack: int | None
    flags: int
    len: int
    idx: int
    action: str
    rel_ack: int | None = None
    win: int = 0  # TCP window field as sent (unscaled); absent in old logs
    sack: int = 0  # SACK blocks in the TCP options; absent in old logs


def packets(fwd_log: Mapping[str, Any]) -> list[TracePacket]:
    """The trace as objects, with ``rel_ack`` (relative to the peer's ISN) filled in."""
    cols = list(fwd_log["trace_columns"])
    rows = [dict(zip(cols, r, strict=True)) for r in fwd_log["trace"]]
    isn: dict[tuple[str, int, int], int] = {}  # (dir, sport, dport) -> ISN
    for r in rows:
        if r["proto"] == IPPROTO_TCP and r["flags"] & TCP_SYN and r["seq"] is not None:
            isn.setdefault((r["dir"], r["sport"], r["dport"]), r["seq"])
    out = []
    for r in rows:
        rel_ack = None
        if r["proto"] == IPPROTO_TCP and r["flags"] & TCP_ACK and r["ack"] is not None:
            peer_dir = "s2c" if r["dir"] == "c2s" else "c2s"
            peer_isn = isn.get((peer_dir, r["dport"], r["sport"]))
            if peer_isn is not None:
                rel_ack = (r["ack"] - peer_isn - 1) & 0xFFFFFFFF
        out.append(TracePacket(**r, rel_ack=rel_ack))
    return out


def first_transmission(
    pkts: Sequence[TracePacket], direction: str, rel_offset: int, *, forwarded_only: bool = False
) -> TracePacket | None:
    """First payload packet of ``direction`` whose bytes cover stream offset ``rel_offset``."""
    for p in pkts:
        if (
            p.dir == direction
            and p.len > 0
            and p.rel_seq is not None
            and p.rel_seq <= rel_offset < p.rel_seq + p.len
            and (not forwarded_only or p.t_out_ns is not None)
        ):
            return p
    return None


def releasing_ack(pkts: Sequence[TracePacket], data: TracePacket) -> TracePacket | None:
    """First packet from the other side, after ``data`` was delivered, that ACKs all of it."""
    if data.rel_seq is None or data.t_out_ns is None:
        return None
    end = data.rel_seq + data.len
    other = "s2c" if data.dir == "c2s" else "c2s"
    for p in pkts:
        if (
            p.dir == other
            and p.t_in_ns >= data.t_out_ns
            and p.rel_ack is not None
            and p.rel_ack >= end
            and p.sport == data.dport
            and p.dport == data.sport
        ):
            return p
    return None


DELAYED_ACK_MIN_MS = 30.0  # below Linux's 40 ms floor, above lab jitter (DETECTION.md §2.3)


def ack_waits(pkts: Sequence[TracePacket], data_dir: str) -> list[dict[str, Any]]:
    """For each first transmission of ``data_dir`` payload: how long the receiver took to ACK.

    ``wait_ms`` = releasing packet leaves the receiver − data reached it; ``delayed`` marks a
    pure ACK that waited ≥ :data:`DELAYED_ACK_MIN_MS` (a delayed-ACK timer).
    """
    out = []
    seen: set[tuple[int, int, int]] = set()
    for p in pkts:
        if p.dir != data_dir or p.len == 0 or p.rel_seq is None or p.t_out_ns is None:
            continue
        key = (p.sport, p.rel_seq, p.len)
        if key in seen:
            continue
        seen.add(key)
        ack = releasing_ack(pkts, p)
        if ack is None:
            continue
        wait = ms(ack.t_in_ns - p.t_out_ns)
        out.append(
            {
                "rel_seq": p.rel_seq,
                "len": p.len,
                "t_ns": p.t_out_ns,
                "wait_ms": wait,
                "pure": ack.len == 0,
                "delayed": ack.len == 0 and wait is not None and wait >= DELAYED_ACK_MIN_MS,
            }
        )
    return out


def handshake(pkts: Sequence[TracePacket]) -> Iterator[dict[str, Any]]:
    """Per TCP connection: the client-side handshake RTT (SYN leaves → SYN/ACK arrives)."""
    syns: dict[tuple[int, int], TracePacket] = {}
    for p in pkts:
        if p.proto != IPPROTO_TCP or not p.flags & TCP_SYN:
            continue
        if not p.flags & TCP_ACK:
            syns.setdefault((p.sport, p.dport), p)
        elif (p.dport, p.sport) in syns and p.t_out_ns is not None:
            syn = syns.pop((p.dport, p.sport))
            yield {
                "client_port": syn.sport,
                "server_port": syn.dport,
                "syn_ns": syn.t_in_ns,
                "rtt_ms": (p.t_out_ns - syn.t_in_ns) / 1e6,
            }


def ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def data_packets(pkts: Sequence[TracePacket], direction: str) -> list[TracePacket]:
    """TCP payload packets of ``direction`` (first transmissions and retransmissions)."""
    return [
        p
        for p in pkts
        if p.dir == direction and p.proto == IPPROTO_TCP and p.len > 0 and p.rel_seq is not None
    ]


def tcp_drops(pkts: Sequence[TracePacket], fwd_log: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each TCP packet the forwarder dropped, with what the two ends did about it.

    ``rel_seq`` is relative to the ISN (Wireshark shows ``rel_seq + 1``).  Times: ``t_ns`` is
    when the dropped original left the sender (forwarder ingress);
    ``retransmit_after_ms`` = first retransmission leaves − original left (the sender's
    loss detection); ``receiver_hole_ms`` = retransmission reaches the receiver − first later
    segment reached it (how long bytes behind the hole sat undeliverable); ``dupacks`` = ACKs
    from the receiver pinned at the hole with SACK blocks, before the ACK that jumps past it.
    """
    out = []
    for ev in fwd_log.get("events", []):
        if ev["event"] != "drop" or ev["proto"] != "tcp" or ev["rel_seq"] is None:
            continue
        d, seq = ev["dir"], ev["rel_seq"]
        other = "s2c" if d == "c2s" else "c2s"
        same = [p for p in data_packets(pkts, d) if p.sport == ev["src_port"]]
        orig = next((p for p in same if p.action == "drop" and p.idx == ev["payload_index"]), None)
        if orig is None:
            continue
        rtx = [p for p in same if p.t_in_ns > orig.t_in_ns and p.rel_seq <= seq < p.rel_seq + p.len]  # type: ignore[operator]
        later = [
            p
            for p in same
            if p.t_in_ns > orig.t_in_ns and p.rel_seq > seq and p.t_out_ns is not None  # type: ignore[operator]
        ]
        delivered = next((p for p in rtx if p.t_out_ns is not None), None)
        first_later = min((p.t_out_ns for p in later), default=None)  # type: ignore[type-var]
        acks = [
            p
            for p in pkts
            if p.dir == other
            and p.sport == ev["dst_port"]
            and p.rel_ack is not None
            and p.t_in_ns > orig.t_in_ns
        ]
        # dupACKs: ACKs pinned at the hole that report (SACK) bytes behind it
        stuck = [p for p in acks if p.rel_ack == seq and p.sack > 0]
        jump = next((p for p in acks if p.rel_ack > seq), None)  # type: ignore[operator]
        row: dict[str, Any] = {
            "dir": d,
            "payload_index": ev["payload_index"],
            "rel_seq": seq,
            "wireshark_seq": seq + 1,
            "len": ev["len"],
            "t_ns": orig.t_in_ns,
            "retransmissions": [
                {"rel_seq": p.rel_seq, "len": p.len, "t_in_ns": p.t_in_ns, "t_out_ns": p.t_out_ns}
                for p in rtx
            ],
            "retransmit_after_ms": ms(rtx[0].t_in_ns - orig.t_in_ns) if rtx else None,
            "receiver_hole_ms": (
                ms(delivered.t_out_ns - first_later)  # type: ignore[operator]
                if delivered is not None and first_later is not None
                else None
            ),
            "dupacks": len([p for p in stuck if jump is None or p.t_in_ns < jump.t_in_ns]),
            "hole_filled_ack_ns": None if jump is None else jump.t_in_ns,
        }
        out.append(row)
    return out


def flights(
    pkts: Sequence[TracePacket], direction: str, *, start_ns: int, rtt_ns: int
) -> list[dict[str, Any]]:
    """Group ``direction``'s data packets sent at or after ``start_ns`` into flights.

    A flight is what the sender emits before the first ACK for any of it can return: a new
    flight starts with the first packet leaving ≥ ½ RTT after the previous flight's first
    packet *and* after an ACK from the peer arrived.  Returns ``[{start_ns, segments,
    bytes}]``; at a sender vantage these are cwnd's steps (DETECTION.md §7.1).
    """
    other = "s2c" if direction == "c2s" else "c2s"
    acks = sorted(
        p.t_out_ns for p in pkts if p.dir == other and p.t_out_ns is not None and p.rel_ack
    )
    out: list[dict[str, Any]] = []
    for p in data_packets(pkts, direction):
        if p.t_in_ns < start_ns:
            continue
        if out:
            cur = out[-1]
            acked_since = any(cur["start_ns"] < t <= p.t_in_ns for t in acks)
            if not (p.t_in_ns - cur["start_ns"] >= rtt_ns // 2 and acked_since):
                cur["segments"] += 1
                cur["bytes"] += p.len
                continue
        out.append({"start_ns": p.t_in_ns, "segments": 1, "bytes": p.len})
    return out

"""``pcapkit lab fixtures``: run the scenarios into ``fixtures/<name>/`` and write its README.

:func:`generate` runs every registered scenario (or the ones named), each into a scratch
folder beside its destination; the run must pass its scenario's own ``validate`` check
(the positive shows its pathology, the control does not) and stay within the fixture
budget (:data:`CAPTURE_BUDGET_BYTES` per capture), else it is retried (up to ``attempts``
times: a run on a busy 2-core machine can be disturbed) and finally reported as failed,
leaving the previous fixture in place.  A good run replaces ``<name>/`` whole.

Middle vantage (the default): a scenario on the forwarder path whose ``fixture_middle`` is
true is run with ``middle=True``, so its folder also holds ``middle.pcapng`` (the tap halfway
along the path, DETECTION.md §1.1) and every detector is checked at three vantages.
``fixture_middle=False`` marks the scenarios the folder budget has no room for; ``pcapkit lab
fixtures --no-middle`` turns the middle capture off for a whole run.  Loopback and veth
scenarios have no forwarder, hence no middle; a loopback fixture has only ``client.pcapng``
(the one capture on ``lo`` is both ends' vantage).

Path fidelity: on a busy host the forwarder (or a namespace's softirq) can deliver a packet
tens of ms late; the ends then see a path the scenario did not configure (a lab run showed a
pure ACK 40 ms late on a 15 ms leg, which breaks every ACK-coupling rule at the vantages
beyond it).  :func:`check_fixture` matches each TCP packet across the vantages and rejects
the run when one crossed a leg more than :data:`PATH_LATE_MAX_NS` later than configured.

:func:`render_readme` describes every fixture folder present — scenario, variant, what
it shows, packets per vantage, size, and its *frames of interest* — from the committed
files alone (``scenario.json`` + both captures), so the README can be regenerated and
checked without root.  Frames of interest are computed from the captures (Wireshark frame
numbers, Wireshark relative sequence numbers) guided by the scenario's ground truth: e.g.
the held segment and the releasing ACK, the dropped packet's seq and the retransmission
at each vantage.  Captures are read with :mod:`pcapkit.io.reader` and decoded with the
forwarder's header parser — nothing from the analysis stack (DESIGN.md §1).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import scenarios as registry
from .errors import LabError
from .forwarder import IPPROTO_TCP, IPPROTO_UDP, parse_packet
from .netns import CLIENT_IP

CAPTURE_BUDGET_BYTES = 200_000  # issue 4: each capture under ~200 KB
# issue 4 asked for "under ~5 MB" for its ten scenario pairs; the pairs of issues 6 and 7
# (SSE, gRPC, HTTP/2 send buffer, QUIC flow control) bring the folder to ~5.5 MB with
# every capture still under CAPTURE_BUDGET_BYTES and middle captures dropped where they
# add nothing.  6 MB kept the repository small without deleting evidence.  Issue 22's six
# stall pairs (lost handshakes, RTOs, a black hole, a delivery stall) need all three
# vantages — what each can and cannot see is the point — at a few kB each (plain HTTP, no
# TLS): ~0.3 MB more.  Issue 21's request-level pairs (retries, timeouts, pools, stream
# limits, slow readers) are TLS/QUIC with keys embedded (the evidence is the decrypted
# requests) at all three vantages (the HTTP/3 stream-limit pair: client and server, as
# the other h3 fixtures), ~55 kB per fixture with its scenario.json: the first half's 12
# fixtures (retries and timeouts over HTTP/1.1, HTTP/2, HTTP/3) take 0.67 MB; the second
# half's pools and stream limits ~0.5 MB, and receiver_limited needs a transfer past the
# default 64 KiB window (160 KiB: ~180 kB per capture, 1.1 MB for its pair).
FOLDER_BUDGET_BYTES = 9_200_000
README = "README.md"
ROLES = ("client", "server")
VANTAGES = ("client", "server", "middle")  # capture files a fixture may hold (role.pcapng)
# A lone packet may cross a leg this much later than the configured delay: the forwarder's
# releases are ≈ 50 µs late (p50) with rare ~1–3 ms hiccups on a busy 2-core host; 5 ms is
# under every coupling tolerance the detectors use on the lab's 15 ms legs (¼·d_X ≈ 3.7 ms
# plus a 2 ms late slack), so a run within it shows the path the scenario asked for.
PATH_LATE_MAX_NS = 5_000_000
# … for packets that left alone: nothing else in their direction for 1 ms before them (a
# burst's later packets wait behind the earlier ones in the forwarder's queue, up to ~10 ms
# for a 60-segment flight on a busy host — queueing, which the timing rules expect).
PATH_ISOLATED_NS = 1_000_000
TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
MS = 1_000_000
_CLIENT_IP = bytes(int(x) for x in CLIENT_IP.split("."))
LINKTYPE_RAW = (101, 228, 12, 14)  # raw IP (DLT 101/12/14), IPv4 (228)
LINKTYPE_ETHERNET = 1  # veth and lo captures (lo has zeroed MAC addresses)
ETHERTYPE_IPV4 = b"\x08\x00"


def ip_packet(cap: Any, i: int) -> bytes | None:
    """The IP packet of frame ``i`` (0-based) of a lab capture; None for non-IP frames."""
    iface = int(cap.iface[i])
    if iface < 0:
        return None
    lt = cap.interfaces[iface].linktype
    raw = cap.frame_bytes(i + 1)
    if lt in LINKTYPE_RAW:
        return bytes(raw)
    if lt == LINKTYPE_ETHERNET and bytes(raw[12:14]) == ETHERTYPE_IPV4:
        return bytes(raw[14:])
    return None


# --------------------------------------------------------------------------- capture reading


@dataclass(frozen=True, slots=True)
class Pkt:
    """One captured packet, as the fixture README needs it."""

    frame: int  # Wireshark frame number
    ts_ns: int
    dir: str  # "c2s" | "s2c"
    proto: int
    len: int  # TCP payload or UDP payload length
    flags: int = 0
    seq: int | None = None  # relative to the ISN, 0 = first byte (Wireshark shows seq + 1)
    ack: int | None = None  # relative to the peer's ISN (Wireshark ack − 1)
    win: int = 0

    @property
    def ws_seq(self) -> int | None:
        return None if self.seq is None else self.seq + 1


def read_packets(path: str | Path) -> list[Pkt]:
    """Every IPv4/IPv6 TCP/UDP packet of a lab capture, with relative seq/ack per direction."""
    from pcapkit.io.reader import read_capture

    cap = read_capture(path)
    out: list[Pkt] = []
    isn: dict[str, int] = {}
    try:
        for i in range(cap.frames):
            pkt = ip_packet(cap, i)
            if pkt is None:
                continue
            info = parse_packet(pkt)
            if info.proto not in (IPPROTO_TCP, IPPROTO_UDP):
                continue
            d = "c2s" if info.src == _CLIENT_IP else "s2c"
            seq = ack = None
            if info.proto == IPPROTO_TCP and info.seq is not None:
                if info.flags & TCP_SYN:
                    isn.setdefault(d, info.seq)
                if d in isn:
                    seq = (info.seq - isn[d] - 1) & 0xFFFFFFFF
                peer = "s2c" if d == "c2s" else "c2s"
                if info.flags & TCP_ACK and info.ack is not None and peer in isn:
                    ack = (info.ack - isn[peer] - 1) & 0xFFFFFFFF
            out.append(
                Pkt(
                    frame=i + 1,
                    ts_ns=int(cap.ts_ns[i]),
                    dir=d,
                    proto=info.proto,
                    len=info.payload_len,
                    flags=info.flags,
                    seq=seq,
                    ack=ack,
                    win=info.window,
                )
            )
    finally:
        cap.close()
    return out


def data(pkts: Sequence[Pkt], direction: str) -> list[Pkt]:
    return [p for p in pkts if p.dir == direction and p.len > 0]


def covering(pkts: Sequence[Pkt], direction: str, rel_seq: int) -> list[Pkt]:
    """Every TCP segment of ``direction`` carrying stream offset ``rel_seq`` (orig. + rexmits)."""
    return [
        p
        for p in data(pkts, direction)
        if p.proto == IPPROTO_TCP and p.seq is not None and p.seq <= rel_seq < p.seq + p.len
    ]


def first_after(pkts: Sequence[Pkt], t_ns: int, pred: Callable[[Pkt], bool]) -> Pkt | None:
    return next((p for p in pkts if p.ts_ns >= t_ns and pred(p)), None)


def last_before(pkts: Sequence[Pkt], t_ns: int, pred: Callable[[Pkt], bool]) -> Pkt | None:
    found = None
    for p in pkts:
        if p.ts_ns > t_ns:
            break
        if pred(p):
            found = p
    return found


def _ms(ns: int | float | None) -> str:
    return "?" if ns is None else f"{ns / MS:.1f} ms"


# --------------------------------------------------------------------------- frames of interest

Caps = dict[str, list[Pkt]]
FoiFn = Callable[[dict[str, Any], Caps], list[str]]


def _tcp_drop_lines(doc: dict[str, Any], caps: Caps) -> list[str]:
    """Dropped segment: original at the sender, the hole at the receiver, each retransmission."""
    out = []
    for ev in doc["forwarder"]["events"]:
        if ev["event"] != "drop" or ev["proto"] != "tcp":
            continue
        d, seq = ev["dir"], ev["rel_seq"]
        snd, rcv = ("client", "server") if d == "c2s" else ("server", "client")
        at_snd = covering(caps[snd], d, seq)
        at_rcv = covering(caps[rcv], d, seq)
        orig = at_snd[0] if at_snd else None
        line = f"drop {d} #{ev['payload_index']}: seq {seq + 1} len {ev['len']}"
        if orig is not None:
            line += f" = {snd} frame {orig.frame}"
            if len(at_snd) > 1:
                rx = at_snd[1]
                line += f", retransmitted in {snd} frame {rx.frame} (+{_ms(rx.ts_ns - orig.ts_ns)})"
        out.append(line)
        later = next((p for p in data(caps[rcv], d) if p.seq is not None and p.seq > seq), None)
        if at_rcv:
            fill = at_rcv[0]
            hole = "" if later is None else f"hole from frame {later.frame} "
            out.append(
                f"{rcv}: {hole}filled by frame {fill.frame}"
                + ("" if later is None else f" ({_ms(fill.ts_ns - later.ts_ns)} later)")
            )
        dup = [
            p
            for p in caps[rcv]
            if p.dir != d and p.len == 0 and p.ack == seq and later and p.ts_ns >= later.ts_ns
        ]
        if dup:
            out.append(
                f"{rcv}: {len(dup)} dupACKs/SACKs at ack {seq + 1}, frames {dup[0].frame}–{dup[-1].frame}"
            )
    return out


def _nagle(doc: dict[str, Any], caps: Caps) -> list[str]:
    cli = caps["client"]
    out = []
    for ex in doc["ground_truth"]["exchanges"][1:3]:
        if "header_rel_seq" not in ex:
            continue
        s1 = covering(cli, "c2s", ex["header_rel_seq"])
        s2 = covering(cli, "c2s", ex["body_rel_seq"])
        if not s1 or not s2:
            continue
        end = s1[0].seq + s1[0].len  # type: ignore[operator]
        ack = first_after(
            cli, s1[0].ts_ns, lambda p, end=end: p.dir == "s2c" and (p.ack or 0) >= end
        )
        line = f"client, exchange {ex['exchange']}: header frame {s1[0].frame}, body frame {s2[0].frame}"
        if s2[0] is not s1[0]:
            line += f" (+{_ms(s2[0].ts_ns - s1[0].ts_ns)})"
        if s2[0] is not s1[0] and ack is not None and ack.ts_ns <= s2[0].ts_ns:
            line += (
                f", releasing ACK frame {ack.frame}"
                f" ({'pure' if ack.len == 0 else 'data'}, {_ms(s2[0].ts_ns - ack.ts_ns)} before the body)"
            )
        out.append(line)
    return out


def _tls_sse(doc: dict[str, Any], caps: Caps) -> list[str]:
    srv = caps["server"]
    gt = doc["ground_truth"]
    out = []
    ev = gt["events"][0]
    seg = first_after(srv, ev["write_ns"], lambda p: p.dir == "s2c" and p.len > 0)
    if seg is not None:
        trig = last_before(srv, seg.ts_ns, lambda p: p.dir == "c2s")
        line = f"server: event 1 written, leaves in frame {seg.frame} (+{_ms(seg.ts_ns - ev['write_ns'])})"
        held = seg.ts_ns - ev["write_ns"] > MS
        if held and trig is not None and seg.ts_ns - trig.ts_ns < MS:
            line += f", released by client ACK frame {trig.frame}"
        out.append(line)
    for w in gt["client_ack_waits"]:
        if w["delayed"]:
            ack = first_after(
                caps["client"],
                w["t_ns"],
                lambda p, w=w: p.dir == "c2s" and (p.ack or 0) >= w["rel_seq"] + w["len"],
            )
            if ack is not None:
                out.append(
                    f"client: delayed ACK frame {ack.frame} ({w['wait_ms']:.1f} ms) of server seq {w['rel_seq'] + 1}"
                )
    out.append(f"first event latency {gt['first_event_latency_ms']:.1f} ms")
    return out


def _tls_sse_gap(doc: dict[str, Any], caps: Caps) -> list[str]:
    """The planted gap: server think time, or the dropped event's retransmission."""
    gt, p = doc["ground_truth"], doc["params"]
    ev = gt["events"]
    out = []
    if p.get("think_before"):
        k = p["think_before"] - 1
        out.append(
            f"server: event {k + 1} written {_ms(ev[k]['write_ns'] - ev[k - 1]['write_ns'])} "
            f"after event {k} (planted think time {p['think_ms']:.0f} ms)"
        )
    for n in p.get("drop_s2c") or []:
        late = [e for e in ev if e["latency_ms"] and e["latency_ms"] > float(p["delay_ms"]) + 5]
        out.append(
            f"s2c payload packet {n} dropped; events "
            + ", ".join(str(e["n"]) for e in late)
            + " late by "
            + ", ".join(f"{e['latency_ms'] - float(p['delay_ms']):.1f}" for e in late)
            + " ms (write → read minus the path delay)"
        )
    return out + _tls_sse(doc, caps)[-1:]


def _tiny(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    rec = gt["app_records"]
    start, end = gt["response_rel_seq"], gt["response_rel_seq"] + gt["response_wire_len"]
    out = []
    for role in ROLES:
        segs = [p for p in data(caps[role], "s2c") if p.seq is not None and start <= p.seq < end]
        if not segs:
            continue
        single = sum(1 for p in segs if p.len == rec["wire_len"])
        out.append(
            f"{role}: response frames {segs[0].frame}–{segs[-1].frame}: {len(segs)} segments, "
            f"{single} of them exactly one {rec['wire_len']}-byte record"
        )
    out.append(
        f"{rec['count']} records of {rec['plaintext_len']} B plaintext "
        f"(tls.record.length {rec['record_length']}), response seq {start + 1}–{end}"
    )
    return out


def _large(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    s = gt["summary"]
    out = _tcp_drop_lines(doc, caps)
    if gt["drops"]:
        d = gt["drops"][0]
        out.append(
            f"lost bytes are in record {d['in_record']} of {s['records']} "
            f"({s['record_plaintext_max']} B plaintext); app had {d['app_bytes_before_fill']} B before the fill"
        )
    return out


def _cork(doc: dict[str, Any], caps: Caps) -> list[str]:
    srv = caps["server"]
    out = []
    for m in doc["ground_truth"]["messages"][:2]:
        seg = covering(srv, "s2c", m["rel_seq"])
        if not seg:
            continue
        p = seg[0]
        trig = last_before(srv, p.ts_ns, lambda x: x.dir == "c2s")
        psh = "PSH" if p.flags & TCP_PSH else "no PSH"
        line = (
            f"server: message {m['message'] + 1} written {_ms(p.ts_ns - m['write_ns'])} before frame "
            f"{p.frame} ({p.len} B, {psh})"
        )
        if trig is not None:
            line += f"; last client packet before it: frame {trig.frame}, {_ms(p.ts_ns - trig.ts_ns)} earlier"
        out.append(line)
    out.append(f"server RTO {doc['ground_truth']['server_rto_ms']:.0f} ms (TCP_INFO)")
    return out


def _zero_window(doc: dict[str, Any], caps: Caps) -> list[str]:
    out = []
    for role in ROLES:
        pk = caps[role]
        zero = [
            p
            for p in pk
            if p.dir == "c2s"
            and p.proto == IPPROTO_TCP
            and p.win == 0
            and not p.flags & (TCP_SYN | TCP_FIN | TCP_RST)
        ]
        if not zero:
            out.append(f"{role}: no zero-window ACK")
            continue
        reopen = first_after(pk, zero[-1].ts_ns + 1, lambda p: p.dir == "c2s" and p.win > 0)
        probes = [
            p
            for p in pk
            if p.dir == "s2c"
            and p.len == 0
            and zero[0].ts_ns < p.ts_ns
            and (reopen is None or p.ts_ns < reopen.ts_ns)
            and p.seq is not None
            and p.seq + 1 == (zero[-1].ack or 0)
        ]
        line = f"{role}: zero-window ACK frames {', '.join(str(p.frame) for p in zero)}"
        if probes:
            line += f"; probes {', '.join(str(p.frame) for p in probes)}"
        if reopen is not None:
            line += f"; window update frame {reopen.frame} (+{_ms(reopen.ts_ns - zero[0].ts_ns)})"
            resume = first_after(pk, reopen.ts_ns, lambda p: p.dir == "s2c" and p.len > 0)
            if resume is not None:
                line += f"; data resumes frame {resume.frame}"
        out.append(line)
    return out


def _ssr(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    srv = caps["server"]
    start = gt.get("burst2_first_flight_start_ns")
    out = []
    if start is not None:
        segs = [p for p in data(srv, "s2c") if p.ts_ns >= start - MS]
        first = segs[:1]
        if first:
            ack = first_after(
                srv, first[0].ts_ns, lambda p: p.dir == "c2s" and (p.ack or 0) > (first[0].seq or 0)
            )
            flight = [p for p in segs if ack is None or p.ts_ns <= ack.ts_ns]
            out.append(
                f"server: after {gt['idle_gap_ms']:.0f} ms idle, first flight frames "
                f"{flight[0].frame}–{flight[-1].frame} ({len(flight)} segments)"
                + ("" if ack is None else f", first ACK frame {ack.frame}")
            )
    out.append(
        f"flights before idle {gt['burst1_flights']}, after {gt['burst2_flights']}; "
        f"cwnd {gt['cwnd_after_burst1']} → {gt['cwnd_after_burst2_write']} (TCP_INFO)"
    )
    return out


def _h2(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    out = _tcp_drop_lines(doc, caps)
    if gt["drops"]:
        d = gt["drops"][0]
        out.append(
            f"lost segment carries DATA of streams {d['streams_hit']}; the fill releases "
            f"streams {d['streams_released_by_fill']} (app idle {d['app_idle_ms']} ms)"
        )
    srv = caps["server"]
    for i, s in enumerate(gt["stalls"][:3]):
        last = last_before(srv, s["last_data_ns"] + MS, lambda p: p.dir == "s2c" and p.len > 0)
        wu = (
            None
            if s["window_update_ns"] is None
            else last_before(srv, s["window_update_ns"], lambda p: p.dir == "c2s" and p.len > 0)
        )
        res = (
            None
            if s["resume_ns"] is None
            else first_after(srv, s["resume_ns"], lambda p: p.dir == "s2c" and p.len > 0)
        )
        out.append(
            f"server, stall {i + 1}: last DATA frame {last.frame if last else '?'}, "
            f"WINDOW_UPDATE in frame {wu.frame if wu else '?'}, resumes frame "
            f"{res.frame if res else '?'} (idle {s['idle_ms']} ms)"
        )
    if not gt["drops"] and not gt["stalls"]:
        out.append(
            f"{gt['summary']['streams']} stream(s), {gt['summary']['bytes']} B, no drop, no stall, "
            f"{gt['summary']['transfer_ms']} ms; client window {gt['client_window']}"
        )
    return out


def _udp_datagrams(pkts: Sequence[Pkt], direction: str) -> list[Pkt]:
    return [p for p in pkts if p.dir == direction and p.proto == IPPROTO_UDP]


def _h3(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    out = []
    srv_dg = _udp_datagrams(caps["server"], "s2c")
    cli_dg = _udp_datagrams(caps["client"], "s2c")
    dropped = sorted(
        e["payload_index"]
        for e in doc["forwarder"]["events"]
        if e["event"] == "drop" and e["dir"] == "s2c"
    )

    def at_client(idx: int) -> Pkt | None:  # the n-th server datagram as the client saw it
        if idx in dropped:
            return None
        k = idx - sum(1 for x in dropped if x < idx)
        return cli_dg[k - 1] if 0 < k <= len(cli_dg) else None

    for d in gt["drops"]:
        idx = d["payload_index"]
        orig = srv_dg[idx - 1] if idx <= len(srv_dg) else None
        frames = ", ".join(f"stream {f[0]} off {f[1]} len {f[2]}" for f in d["stream_frames"])
        out.append(
            f"drop s2c datagram #{idx} = server frame {orig.frame if orig else '?'} "
            f"(1-RTT pn {', '.join(str(p['pn']) for p in d['packets'])}: {frames})"
        )
        for r in d["retransmissions"]:
            s = (
                srv_dg[r["datagram"] - 1]
                if r["datagram"] and r["datagram"] <= len(srv_dg)
                else None
            )
            c = at_client(r["datagram"]) if r["datagram"] else None
            out.append(
                f"retransmitted in pn {r['pn']}: server frame {s.frame if s else '?'}, "
                f"client frame {c.frame if c else '?'}"
            )
        out.append(
            f"client: stream(s) {d['streams_hit']} wait {d['hole_ms']} ms; streams "
            f"{gt['summary']['streams_progressing_during_hole']} keep receiving"
        )
    if not gt["drops"]:
        out.append(
            f"{len(srv_dg)} server datagrams, {gt['summary']['lost_packets']} lost; "
            f"{gt['summary']['streams']} streams × {doc['params']['body_len']} B in "
            f"{gt['summary']['transfer_ms']} ms"
        )
    return out


def _h3_fc(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt = doc["ground_truth"]
    out = [
        f"server stalled at {s['limit']} B (pn {s['last_pn']} → {s['resume_pn']}), "
        f"{s['wire_idle_ms']} ms on the wire"
        for s in gt.get("server_stalls", [])
    ]
    n = len(gt.get("client_limit_updates", []))
    out.append(f"client sent MAX_STREAM_DATA/MAX_DATA in {n} packets")
    return out


def _h3_sse(doc: dict[str, Any], caps: Caps) -> list[str]:
    gt, p = doc["ground_truth"], doc["params"]
    one_way = float(p["delay_ms"])
    late = [e for e in gt["events"] if e["latency_ms"] and e["latency_ms"] > one_way + 5]
    out = [f"{len(gt['events'])} events, write → read minus the path delay:"]
    if late:
        out.append(", ".join(f"event {e['n']} +{e['latency_ms'] - one_way:.1f} ms" for e in late))
    else:
        out.append("every event within 5 ms")
    if gt["drops"]:
        d = gt["drops"][0]
        out.append(
            f"dropped datagram {d['payload_index']}: stream frames {d['stream_frames']}, "
            f"hole {d['hole_ms']} ms at the client"
        )
    return out


def _h3_amp(doc: dict[str, Any], caps: Caps) -> list[str]:
    fp = doc["ground_truth"].get("first_flight_pause") or {}
    return [
        f"server flight: longest pause {fp.get('pause_ms')} ms after datagram "
        f"{fp.get('after_datagram')} ({fp.get('flight_bytes_before')} B of QUIC packets sent)"
    ]


def _h3_resume(doc: dict[str, Any], caps: Caps) -> list[str]:
    r = doc["ground_truth"].get("resumption", {})
    return [
        f"second connection resumed: {r.get('session_resumed')}, 0-RTT packets sent: "
        f"{r.get('client_0rtt_packets')}, early data accepted: {r.get('early_data_accepted')}; "
        f"request {r.get('request_after_connect_ms')} ms after connect()"
    ]


def _split(doc: dict[str, Any], caps: Caps) -> list[str]:
    """T3a: records handed to TCP in two writes — head segment, tail segment, wait."""
    out = []
    for r in [x for x in doc["ground_truth"]["records"] if x["psh_inside"]][:3]:
        for side in ("server", "client"):
            segs = [q for q in data(caps[side], "s2c") if q.seq is not None]
            head = next((q for q in segs if q.seq <= r["rel_seq"] < q.seq + q.len), None)
            tail = next(
                (q for q in segs if q.seq < r["rel_seq"] + r["wire_len"] <= q.seq + q.len), None
            )
            if head and tail and head.frame != tail.frame:
                out.append(
                    f"{side}: record {r['message']} ({r['wire_len']} B) head frame {head.frame}, "
                    f"tail frame {tail.frame} (+{_ms(tail.ts_ns - head.ts_ns)})"
                )
    n = doc["ground_truth"]["summary"]["records_split"]
    out.append(f"{n} of {doc['ground_truth']['summary']['records']} records split across writes")
    return out


def _reuse(doc: dict[str, Any], caps: Caps) -> list[str]:
    from .scenarios.reuse import frames_of_interest

    return frames_of_interest(doc, caps)


def _receiver_limited(doc: dict[str, Any], caps: Caps) -> list[str]:
    s = doc["ground_truth"]["summary"]
    out = [
        f"server TCP_INFO: rwnd-limited {_ms(s['rwnd_limited_ms'] * 1e6)} of "
        f"{_ms(s['busy_ms'] * 1e6)} busy; transfer {_ms(s['transfer_ms'] * 1e6)}; "
        f"{s['zero_window_acks']} zero-window ACKs"
    ]
    for role in ROLES:
        d = data(caps[role], "s2c")
        resumed = [b for a, b in zip(d, d[1:], strict=False) if b.ts_ns - a.ts_ns > 3_000_000]
        out.append(
            f"{role}: {len(resumed)} server pauses > 3 ms; data resumes at frames "
            + ", ".join(str(x.frame) for x in resumed[:8])
            + (" …" if len(resumed) > 8 else "")
        )
    return out


def _queueing(doc: dict[str, Any], caps: Caps) -> list[str]:
    g = doc["ground_truth"]
    syns = [
        x.frame for x in caps["client"] if x.proto == IPPROTO_TCP and (x.flags & 0x12) == TCP_SYN
    ]
    waits = ", ".join(f"{w:.0f}" for w in g["queued_waits_ms"]) or "none"
    blocked = g.get("streams_blocked_sent")
    return [
        f"client: {len(syns)} connection(s), SYN frames {', '.join(map(str, syns))}"
        if syns
        else f"client: one QUIC connection, {len(blocked or [])} STREAMS_BLOCKED sent",
        f"{g['queued']} requests waited (ms after the first was sent): {waits}; "
        f"Σ {g['queueing_ms']:.0f} ms; all done after {g['done_ms']:.0f} ms",
    ]


def _retries(doc: dict[str, Any], caps: Caps) -> list[str]:
    from .scenarios.retries import frames_of_interest

    return frames_of_interest(doc, caps)


def _generic(doc: dict[str, Any], caps: Caps) -> list[str]:
    return _tcp_drop_lines(doc, caps)


def _bulk(doc: dict[str, Any], caps: Caps) -> list[str]:
    """Healthy bulk over an offloading path: segment sizes against the MSS at each vantage."""
    gt = doc["ground_truth"]
    s = gt["summary"]
    mss = s["server_snd_mss"]
    loopback = doc["topology"].get("topology") == "loopback"
    out = []
    for role, pk in caps.items():
        segs = [p for p in data(pk, "s2c") if p.proto == IPPROTO_TCP]
        if not segs:
            continue
        big = max(segs, key=lambda p: p.len)
        where = "lo, both ends" if loopback else role
        if loopback:
            full = [p for p in segs if p.len == mss]
            what = f"{len(full)} full {mss}-byte segments (frames {', '.join(str(p.frame) for p in full)})"
        else:
            sup = [p for p in segs if p.len > mss]
            what = (
                f"{len(sup)} GSO super-segments > MSS {mss} B "
                f"(frames {sup[0].frame}–{sup[-1].frame})"
                if sup
                else f"no segment above the MSS {mss} B"
            )
        out.append(
            f"{where}: {len(segs)} server data segments, {what}; largest {big.len} B "
            f"(frame {big.frame})"
        )
    out.append(
        f"{s['records']} records of 16 KiB in {s['ssl_writes']} sends; {s['response_len']} B in "
        f"{s['transfer_ms']} ms, {s['retransmissions']} retransmissions"
    )
    return out


def _h2_stream(doc: dict[str, Any], caps: Caps) -> list[str]:
    """SSE / gRPC over HTTP/2: the dropped event's segment, or the steady control."""
    gt = doc["ground_truth"]
    s = gt["summary"]
    unit = "event" if s["mode"] == "sse" else "gRPC message"
    out = _tcp_drop_lines(doc, caps)
    one_way = float(doc["params"]["delay_ms"])
    late = [e for e in gt["events"] if e["n"] in s["late_events"]]
    if gt["drops"]:
        d = gt["drops"][0]
        out.append(
            f"lost segment carries {unit} {d['events_hit']} (stream(s) {d['streams_hit']}); "
            + ", ".join(f"{unit} {e['n']} +{e['latency_ms'] - one_way:.1f} ms" for e in late)
            + " late (write → read minus the path delay)"
        )
    else:
        out.append(
            f"{s['events_read']} {unit}s, write → read {s['latency_ms_min']}–{s['latency_ms_max']} ms"
        )
    if s["mode"] == "sse":
        out.append(f"stream 3: {s['blob_bytes']} B blob done {s['blob_done_ms']} ms after the GETs")
    else:
        out.append(f"grpc-status {s['grpc_status']}")
    return out


def _h2_send_buffer(doc: dict[str, Any], caps: Caps) -> list[str]:
    """The urgent request, its response leaving the server, the bytes queued ahead."""
    gt = doc["ground_truth"]
    u, s = gt["urgent"], gt["summary"]
    out = []
    req = first_after(caps["client"], u["client_write_ns"], lambda p: p.dir == "c2s" and p.len > 0)
    if req is not None:
        out.append(f"client: urgent GET (stream {u['stream']}) frame {req.frame}")
    if u["left_server_ns"] is not None:
        resp = last_before(
            caps["server"], u["left_server_ns"], lambda p: p.dir == "s2c" and p.len > 0
        )
        if resp is not None:
            out.append(
                f"server: response written {_ms(u['write_ns'] - u['read_ns'])} after the request, "
                f"leaves in frame {resp.frame} (+{_ms(u['left_server_ns'] - u['write_ns'])})"
            )
    out.append(
        f"{s['queued_ahead_bytes']} B unsent ahead of it (SIOCOUTQNSD), "
        f"{s['outq_bytes']} B in the send queue; TCP_NOTSENT_LOWAT {s['notsent_lowat']}; "
        f"client waited {s['urgent_extra_ms']} ms beyond the one-way delay"
    )
    return out


def _stall(doc: dict[str, Any], caps: Caps) -> list[str]:
    """Issue 22: what each vantage saw of the lost SYNs, the timed-out copies, the dead path
    or the held packets, and the ground truth's cost."""
    gt = doc["ground_truth"]
    out = []
    syn = gt.get("syn") or {}
    if syn.get("syns_dropped") or syn.get("syn_acks_dropped"):
        for role in VANTAGES:
            if role not in caps:
                continue
            s = [p for p in caps[role] if p.flags & TCP_SYN and not p.flags & TCP_ACK]
            sa = [p for p in caps[role] if p.flags & TCP_SYN and p.flags & TCP_ACK]
            out.append(
                f"{role}: SYN frames {', '.join(str(p.frame) for p in s)}; SYN/ACK frames "
                f"{', '.join(str(p.frame) for p in sa)}"
            )
        out.append(
            f"{syn['syns_dropped']} SYN and {syn['syn_acks_dropped']} SYN/ACK dropped; handshake "
            f"{syn['handshake_ms']} ms, cost {syn['cost_ms']} ms"
        )
    rto = gt.get("rto") or {}
    if rto.get("drops"):
        out += _tcp_drop_lines(doc, caps)
        out.append(f"lost bytes repaired {rto['cost_ms']} ms after their first send")
    dead = gt.get("dead") or {}
    if dead.get("copies"):
        srv = covering(caps["server"], "s2c", dead["unacked_rel_seq"])
        out.append(
            f"server: seq {dead['unacked_rel_seq'] + 1} sent in frames "
            f"{', '.join(str(p.frame) for p in srv)}; "
            + (
                f"gave up {dead['cost_ms']} ms after the first ({dead['error']})"
                if dead["error"]
                else "recovered"
            )
        )
    st = gt.get("stall") or {}
    if st.get("held_packets"):
        out.append(f"{st['held_packets']} packets held {st['stall_ms']} ms by the path")
    if not out:
        out.append("nothing dropped or held")
    return out


FRAMES_OF_INTEREST: dict[str, FoiFn] = {
    "nagle_wwr": _nagle,
    "nagle_wwr_nodelay": _nagle,
    "tls_sse_nagle": _tls_sse,
    "tls_sse_nodelay": _tls_sse,
    "tls_sse_think": _tls_sse_gap,
    "tls_sse_drop": _tls_sse_gap,
    "tls_tiny_records": _tiny,
    "tls_buffered_records": _tiny,
    "tls_large_record_drop": _large,
    "tls_small_records_drop": _large,
    "tcp_cork": _cork,
    "tcp_cork_cleared": _cork,
    "zero_window": _zero_window,
    "zero_window_control": _zero_window,
    "receiver_limited": _receiver_limited,
    "receiver_limited_control": _receiver_limited,
    "connection_pool_queueing": _queueing,
    "connection_pool_queueing_control": _queueing,
    "h2_concurrency_limited": _queueing,
    "h2_concurrency_limited_control": _queueing,
    "h3_concurrency_limited": _queueing,
    "connection_pool_one": _queueing,
    "h2_client_cap": _queueing,
    "h3_concurrency_limited_control": _queueing,
    "slow_start_restart": _ssr,
    "slow_start_restart_off": _ssr,
    "h2_hol_drop": _h2,
    "h2_hol_nodrop": _h2,
    "h2_flow_control": _h2,
    "h2_flow_control_large": _h2,
    "h2_sse_drop": _h2_stream,
    "h2_sse_nodrop": _h2_stream,
    "grpc_stream": _h2_stream,
    "grpc_stream_control": _h2_stream,
    "h2_send_buffer": _h2_send_buffer,
    "h2_send_buffer_lowat": _h2_send_buffer,
    "h3_streams_drop": _h3,
    "h3_streams_nodrop": _h3,
    "h3_flow_control": _h3_fc,
    "h3_flow_control_large": _h3_fc,
    "h3_sse_drop": _h3_sse,
    "h3_sse_nodrop": _h3_sse,
    "h3_amplification_limit": _h3_amp,
    "h3_small_certificate": _h3_amp,
    "h3_resumed_no_0rtt": _h3_resume,
    "h3_resumed_0rtt": _h3_resume,
    "tls_record_split_write": _split,
    "tls_record_whole_write": _split,
    "tls_no_reuse": _reuse,
    "tls_reuse": _reuse,
    "tls_resumption_rejected": _reuse,
    "tls_resumed": _reuse,
    "bulk_loopback_tls": _bulk,
    **{
        n: _retries
        for n in (
            "retry_early",
            "retry_honoured",
            "hedged_duplicate",
            "single_attempt",
            "stream_timeout",
            "stream_complete",
            "h2_stream_timeout",
            "h2_stream_complete",
            "layered_retries",
            "single_layer_retries",
            "h3_stream_timeout",
            "h3_stream_complete",
        )
    },
    "bulk_veth_gso_tls": _bulk,
    **{
        n: _stall
        for n in (
            "synack_lost",
            "handshake_ok",
            "syn_lost",
            "syn_ok",
            "rto_lost_retransmission",
            "fast_retransmit",
            "rto_tail_loss",
            "tail_ok",
            "black_hole",
            "ack_stall",
            "delivery_stall",
            "server_think",
        )
    },
}


# --------------------------------------------------------------------------- README


def describe(folder: str | Path) -> dict[str, Any]:
    """One fixture folder: scenario.json essentials, packets per vantage, sizes, frames."""
    folder = Path(folder)
    doc = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    roles = [v for v in VANTAGES if (folder / f"{v}.pcapng").exists()]
    caps = {role: read_packets(folder / f"{role}.pcapng") for role in roles}
    sizes = {role: (folder / f"{role}.pcapng").stat().st_size for role in roles}
    fn = FRAMES_OF_INTEREST.get(doc["scenario"], _generic)
    controls = doc.get("controls")
    if controls is None:  # scenario.json written before the field existed
        try:
            sc = registry.get(doc["scenario"])
            controls = list(sc.controls) or (
                list(registry.get(sc.pair).expected) if sc.pair else []
            )
        except KeyError:
            controls = []
    try:
        frames = fn(doc, caps)
    except (KeyError, IndexError, TypeError, ValueError) as e:  # an old scenario.json shape
        frames = [f"(frames of interest unavailable: {type(e).__name__}: {e})"]
    return {
        "name": folder.name,
        "scenario": doc["scenario"],
        "variant": doc["variant"],
        "expected": doc["expected"],
        "controls": controls if doc["variant"] == "control" else [],
        "incidental": doc.get("incidental", []),
        "unseen": doc.get("unseen") or {},
        "what": doc.get("what") or doc["summary"],
        "rtt_ms": doc["path"]["rtt_ms"],
        "tls": doc.get("tls") is not None,
        "packets": {role: len(caps[role]) for role in roles},
        "bytes": sizes,
        "frames": frames,
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_readme(root: str | Path) -> str:
    """The fixtures README for every ``<root>/*/scenario.json`` (sorted by name)."""
    root = Path(root)
    rows = [
        describe(p.parent)
        for p in sorted(root.glob("*/scenario.json"))
        if not p.parent.name.startswith(".")  # scratch folders of a run in progress
    ]
    total = sum(sum(r["bytes"].values()) for r in rows)
    lines = [
        "# Fixtures: real captures made by the lab",
        "",
        "Generated by `pcapkit lab fixtures -o fixtures` (`make fixtures`; needs root) — do not",
        "edit by hand: the table is recomputed from the files in each folder.  Each folder holds",
        "`client.pcapng` and `server.pcapng` (both vantages of one run, one clock, raw-IP link",
        "type, nanosecond timestamps; TLS/QUIC secrets embedded as a Decryption Secrets Block),",
        "most also `middle.pcapng` (the forwarder's tap halfway along the path, same clock: each",
        "one-way delay split in halves around it), and `scenario.json` (what was done and the",
        "ground truth: schema in `pcapkit/lab/runner.py`).  The bulk controls run without the",
        "forwarder: `bulk_veth_gso_tls` over a veth pair (Ethernet link type, GSO super-segments",
        "at both ends), `bulk_loopback_tls` over `lo` with one capture, `client.pcapng`, that is",
        "both ends' vantage.  Scenarios, parameters and the reasoning behind each are in",
        "`pcapkit/lab/scenarios/`; the recipes are DETECTION.md §8.2.",
        "",
        "Frame numbers are Wireshark's; sequence numbers are Wireshark's relative ones (first",
        "payload byte = 1).  *expected* lists the pathologies a detector must report; a control",
        "lists `[]` and names what it controls for; *incidental* pathologies are present in both",
        "variants by construction (e.g. the TCP head-of-line blocking any drop causes) and may",
        "be reported or not.  tshark needs `-o tcp.reassemble_out_of_order:TRUE` to decrypt past",
        "a hole at the receiver vantage.",
        "",
        "| fixture | variant | what it shows | packets cli/srv/mid | size cli/srv/mid "
        "| frames of interest |",
        "|---|---|---|---|---|---|",
    ]

    def per_vantage(values: dict[str, Any], fmt: Callable[[Any], str]) -> str:
        return " / ".join(fmt(values[v]) if v in values else "–" for v in VANTAGES)

    for r in rows:
        if r["variant"] == "positive":
            variant = "positive: " + ", ".join(f"`{p}`" for p in r["expected"])
        else:
            variant = "control for " + ", ".join(f"`{p}`" for p in r["controls"])
        if r["incidental"]:
            variant += "; incidental " + ", ".join(f"`{p}`" for p in r["incidental"])
        for p, where in r["unseen"].items():
            variant += f"; `{p}` not on the wire at {', '.join(where)}"
        what = f"{r['what']} (RTT {r['rtt_ms']:g} ms{', TLS keys embedded' if r['tls'] else ''})"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{r['name']}`",
                    variant,
                    _cell(what),
                    per_vantage(r["packets"], str),
                    per_vantage(r["bytes"], lambda b: f"{b / 1000:.1f}") + " kB",
                    "<br>".join(_cell(f) for f in r["frames"]),
                ]
            )
            + " |"
        )
    lines += ["", f"{len(rows)} fixtures, {total / 1e6:.2f} MB of captures.", ""]
    return "\n".join(lines)


def write_readme(root: str | Path) -> Path:
    path = Path(root) / README
    path.write_text(render_readme(root), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- generation


HANDSHAKE_RTT_TOLERANCE = 0.05  # a fixture's SYN→SYN/ACK may exceed the path RTT by 5 %


def handshake_rtt_ns(pkts: Sequence[Pkt]) -> int | None:
    """SYN → SYN/ACK at a capture (the RTT at the client vantage), None without a handshake
    or when the SYN or the SYN/ACK was sent more than once (a lost handshake: the 1 s SYN
    timer and the server's SYN/ACK timer cross, so no pair of them is a round trip)."""
    syns = [p for p in pkts if p.flags & TCP_SYN and not p.flags & TCP_ACK]
    synacks = [p for p in pkts if p.flags & TCP_SYN and p.flags & TCP_ACK]
    if not syns or not synacks or len(syns) > 1 or len(synacks) > 1:
        return None
    return synacks[0].ts_ns - syns[0].ts_ns


def check_fixture(doc: dict[str, Any], folder: Path) -> list[str]:
    """Problems that disqualify a run as a fixture (validation, path fidelity, budget).

    Path fidelity: the forwarder occasionally reads a packet late on a busy host (its own
    ground truth, taken at that read, cannot see it); the client capture's handshake RTT
    must be within :data:`HANDSHAKE_RTT_TOLERANCE` of the configured RTT, since readers of
    the fixtures place the vantage and the RTT legs from it.
    """
    sc = registry.get(doc["scenario"])
    problems = list(sc.validate(doc)) if sc.validate is not None else []
    if topology_of(doc) == "tun":  # loopback/veth: no configured path to compare with
        rtt = handshake_rtt_ns(read_packets(folder / "client.pcapng"))
        want = doc["path"]["rtt_ms"] * MS
        if rtt is not None and not want <= rtt <= want * (1 + HANDSHAKE_RTT_TOLERANCE):
            problems.append(f"handshake RTT {rtt / MS:.2f} ms at the client, path {want / MS:g} ms")
        problems += path_lateness(doc, folder)
    for role in VANTAGES:
        if not (folder / f"{role}.pcapng").exists():
            continue
        size = (folder / f"{role}.pcapng").stat().st_size
        if size > CAPTURE_BUDGET_BYTES:
            problems.append(f"{role}.pcapng is {size} bytes (> {CAPTURE_BUDGET_BYTES})")
    return problems


def topology_of(doc: dict[str, Any]) -> str:
    """ "tun" | "loopback" | "veth" (scenario.json written before the field: "tun")."""
    return str(doc["topology"].get("topology", "tun"))


def _tcp_send_times(path: Path) -> dict[tuple[Any, ...], list[int]]:
    """TCP packets of a capture by header identity (addresses, ports, seq, ack, flags,
    length, window): the capture times of each, in frame order."""
    from pcapkit.io.reader import read_capture

    out: dict[tuple[Any, ...], list[int]] = {}
    cap = read_capture(path)
    try:
        for i in range(cap.frames):
            pkt = ip_packet(cap, i)
            if pkt is None:
                continue
            p = parse_packet(pkt)
            if p.proto != IPPROTO_TCP or p.seq is None:
                continue
            key = (p.src, p.sport, p.dport, p.seq, p.ack, p.flags, p.payload_len, p.window)
            out.setdefault(key, []).append(int(cap.ts_ns[i]))
    finally:
        cap.close()
    return out


def path_lateness(
    doc: dict[str, Any],
    folder: Path,
    *,
    max_late_ns: int = PATH_LATE_MAX_NS,
    isolated_ns: int = PATH_ISOLATED_NS,
) -> list[str]:
    """Packets that crossed a leg more than ``max_late_ns`` later than its configured delay.

    Legs: client → server (the whole one-way delay), and with ``middle.pcapng`` client →
    middle and middle → server (the halves in ``path.middle``).  Timed are the *isolated*
    packets — the sender sent nothing else in that direction for ``isolated_ns`` before
    (a burst member queues behind its predecessors in the forwarder, as at any router: that
    lateness is the burst's, not a hiccup) — seen exactly once on each side of the leg (a
    retransmission or a repeated dupACK/probe has the same header and cannot be paired).
    Directions with a rate limit, reordering or a delivery stall are skipped (their extra
    delay is the scenario's).  Isolated packets — the lone ACKs and small segments that the coupling
    rules read — are the ones a hiccup misplaces.
    """
    path = doc["path"]
    timed = [
        d
        for d in ("c2s", "s2c")
        if not path[d].get("rate_mbit")
        and not path[d].get("reorder")
        and path[d].get("stall_after") is None
    ]
    full = {d: path[d]["delay_ms"] for d in ("c2s", "s2c")}
    legs: list[tuple[str, str, dict[str, float]]] = [("client", "server", full)]
    mid = path.get("middle")
    if mid and (folder / "middle.pcapng").exists():
        # the tap splits each delay: c2s "before" is client → tap, s2c "before" is server → tap
        legs.append(
            ("client", "middle", {"c2s": mid["c2s"]["before_ms"], "s2c": mid["s2c"]["after_ms"]})
        )
        legs.append(
            ("middle", "server", {"c2s": mid["c2s"]["after_ms"], "s2c": mid["s2c"]["before_ms"]})
        )
    times = {
        v: _tcp_send_times(folder / f"{v}.pcapng")
        for v in {x for leg in legs for x in leg[:2]}
        if (folder / f"{v}.pcapng").exists()
    }

    def isolated(v: str, d: str) -> set[int]:
        """Capture times at ``v`` of direction ``d``'s packets with nothing before them
        in that direction for ``isolated_ns``."""
        ts = sorted(
            t for k, tl in times[v].items() if (k[0] == _CLIENT_IP) == (d == "c2s") for t in tl
        )
        return {t for i, t in enumerate(ts) if i == 0 or t - ts[i - 1] >= isolated_ns}

    problems = []
    for near, far, delay in legs:
        if near not in times or far not in times:
            continue
        # the sending side of the leg: near for c2s (near is the client-side one), far for s2c
        lone = {"c2s": isolated(near, "c2s"), "s2c": isolated(far, "s2c")}
        late: list[int] = []
        for key, t_near in times[near].items():
            t_far = times[far].get(key)
            if t_far is None or len(t_near) != 1 or len(t_far) != 1:
                continue
            d = "c2s" if key[0] == _CLIENT_IP else "s2c"
            sent = t_near[0] if d == "c2s" else t_far[0]
            if d not in timed or sent not in lone[d]:
                continue
            one_way = t_far[0] - t_near[0] if d == "c2s" else t_near[0] - t_far[0]
            excess = one_way - round(delay[d] * MS)
            if excess > max_late_ns:
                late.append(excess)
        if late:
            problems.append(
                f"{len(late)} packet(s) crossed {near} ↔ {far} up to {max(late) / MS:.1f} ms "
                f"later than the path's delay (> {max_late_ns / MS:g} ms): a host hiccup, "
                "not the configured path"
            )
    return problems


def wants_middle(name: str) -> bool:
    """Does ``name``'s fixture carry a middle capture (module doc)?"""
    sc = registry.get(name)
    return sc.topology == "tun" and sc.fixture_middle


def generate(
    root: str | Path,
    only: Iterable[str] | None = None,
    *,
    attempts: int = 3,
    log: Callable[[str], None] = print,
    runner: Callable[..., dict[str, Any]] | None = None,
    middle: bool = True,
) -> dict[str, Any]:
    """Run scenarios into ``root/<name>/``, then rewrite ``root/README.md``.

    ``middle`` (default): scenarios for which :func:`wants_middle` holds are run with the
    middle tap (``runner(name, dir, middle=True)``); False runs every scenario without it.
    Returns ``{"ok": [names], "failed": {name: [problems]}, "readme": path}``.  Raises
    :class:`LabError` when the folder would exceed :data:`FOLDER_BUDGET_BYTES`.
    """
    if runner is None:
        from .runner import run as runner
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    names = sorted(registry.load_all()) if only is None else list(only)
    for n in names:
        registry.get(n)  # unknown names fail before anything runs
    ok: list[str] = []
    failed: dict[str, list[str]] = {}
    for name in names:
        scratch = root / f".{name}.tmp"
        problems: list[str] = []
        for attempt in range(1, attempts + 1):
            shutil.rmtree(scratch, ignore_errors=True)
            t0 = time.monotonic()
            try:
                kw = {"middle": True} if middle and wants_middle(name) else {}
                doc = runner(name, scratch, **kw)
                problems = check_fixture(doc, scratch)
            except LabError as e:
                problems = [str(e)]
            status = "ok" if not problems else "; ".join(problems)
            log(f"{name}: attempt {attempt}: {status} ({time.monotonic() - t0:.1f} s)")
            if not problems:
                break
        if problems:
            shutil.rmtree(scratch, ignore_errors=True)
            failed[name] = problems
            continue
        dest = root / name
        shutil.rmtree(dest, ignore_errors=True)
        scratch.rename(dest)
        ok.append(name)
    readme = write_readme(root)
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    if total > FOLDER_BUDGET_BYTES:
        raise LabError(f"{root} holds {total} bytes (> {FOLDER_BUDGET_BYTES}): over budget")
    return {"ok": ok, "failed": failed, "readme": str(readme)}

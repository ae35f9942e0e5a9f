"""QUIC stream-level head-of-line blocking (Q1, Q3; DETECTION.md §4.4, §4.5).

Mechanism: QUIC orders bytes per stream, not per connection (RFC 9000 §2.2), so a
lost packet stalls only the streams whose STREAM frames it carried; the other
streams keep delivering.  Lost *frames* are sent again in new packets with new
packet numbers (RFC 9002 §6, §13.3).  This detector needs the 1-RTT keys (the
STREAM frames are encrypted); without them a connection yields nothing.

Two views of one loss, by where the capture point P sits relative to it:

* **Hole at P** (receiver side, or a middle box downstream of the loss): a STREAM
  frame arrives beyond the highest byte of its stream seen so far; a later frame,
  in a packet with a *higher* packet number, fills the hole.  The stalled bytes
  should have arrived with the missing packet number m; the episode runs from the
  arrival of the first packet numbered above m (when the receiver could first
  have had the lost bytes) to the packet that completed the fill.
* **Retransmission at P** (sender side, or upstream of the loss): a STREAM frame
  re-sends bytes already seen, in a new packet.  The episode runs from the first
  packet sent after the lost original to the retransmission (DETECTION.md §4.4
  "Sender vantage"): both travel X → Y, so the interval is what Y saw, unbiased
  by the vantage.

Per affected stream, ``cost_ms`` is the episode duration (how long the stream's
reader got nothing, though data behind the hole had arrived).  ``details`` also
carry the bytes the *other* streams delivered in that interval — what TCP, which
orders the whole connection, would have held as well ("the HoL QUIC saved").
When the stalled stream carried ≥ 90 % of the stream bytes in the interval (one
request per connection, SSE or gRPC streaming over HTTP/3), QUIC saved nothing
and the finding is ``h3_single_stream_hol`` (§4.5 case 1).

Counter-hypotheses ruled out:

* **Reordering** — the fill came in a packet numbered *below* the one that opened
  the hole: the original arrived late, nothing was lost (skipped).
* **Capture drop at P** — Y acknowledged the packet number P never saw (ACK
  frames, RFC 9000 §19.3): the network delivered it, the capture lost it.
* **Spurious retransmission** — at the sender, Y had acknowledged the original
  packet before the copy left: nothing waited (skipped).
* **Tail loss** — no later byte of the stream arrived (or was sent) before the
  repair: the stream was late, but nothing queued behind the hole.

Reads the declared tables only: ``quic_packets`` (1-RTT packet numbers per
direction), ``quic_frames`` (STREAM rows with their reassembly facts, ACK ranges),
``quic_handshake`` (Initial timing, for the vantage) and ``quic`` (roles).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .base import Evidence, Finding, frame_filter
from .context import DetectContext
from .quic_rows import ACK_TYPES, QuicConn, connections
from .spec import DetectorSpec, Kind, Threshold

SPEC = DetectorSpec(
    kinds=(
        Kind("quic_stream_hol", "Q1", "DETECTION.md §4.4", holds=True),
        Kind("h3_single_stream_hol", "Q3", "DETECTION.md §4.5", holds=True),
    ),
    thresholds=(
        Threshold(
            "single_stream_share",
            "fraction",
            "DETECTION.md §4.5 case 1: ≥ 90 % of the STREAM bytes in the loss window on one stream",
            maximum=1.0,
        ),
    ),
)
KINDS = SPEC.kind_names

# §4.5 case 1: "≥ 90 % of STREAM bytes in the loss window belong to one stream" —
# then a loss blocks everything, exactly like TCP.
SINGLE_STREAM_SHARE = 0.9
# QUIC handshakes are processed in user space (certificate signing, verification: a
# few ms at each end), so the capture point is called client/server when its own
# leg is below 30 % of the other (TCP's kernel-answered SYN/ACK allows 10 %,
# pcapkit.net.flows.VANTAGE_LEG_RATIO).
VANTAGE_LEG_RATIO = 0.3

_FLIP = {"c2s": "s2c", "s2c": "c2s"}


# --------------------------------------------------------------------------- connection view


@dataclass
class _Conn:
    """One QUIC connection's 1-RTT packets, ACKs and STREAM frames, per QUIC direction
    (quic_packets, quic_frames rows; ``qdir`` is the QUIC client's c2s)."""

    qc: QuicConn
    app: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # (pn, frame, ts)
    pns: dict[str, set[int]] = field(default_factory=dict)
    acks: dict[str, list[tuple[int, int, Any]]] = field(default_factory=dict)  # (ts, frame, ack)
    streams: dict[tuple[str, int], list[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, qc: QuicConn) -> _Conn:
        c = cls(qc)
        for d in ("c2s", "s2c"):
            c.app[d], c.pns[d], c.acks[d] = [], set(), []
        for p in qc.key_packets:  # every decrypted packet is there
            if not p.decrypted or p.space != "application":
                continue
            c.app[p.qdir].append((p.packet_number, p.frame, p.ts_ns))
            c.pns[p.qdir].add(p.packet_number)
        for f in qc.frames:  # frames exist only in decrypted packets
            if f.frame_type in ACK_TYPES and f.space == "application":
                c.acks[f.qdir].append((f.ts_ns, f.frame, f))
        for r in qc.stream_rows:
            c.streams.setdefault((r.qdir, r.stream_id), []).append(r)
        return c

    def acked(self, d: str, pn: int, t_hi: int) -> tuple[int, int] | None:
        """First ACK from the receiver of ``d`` (before t_hi) covering packet ``pn``."""
        for ts, fr, a in self.acks[_FLIP[d]]:
            if ts > t_hi:
                break
            if any(lo <= pn <= hi for lo, hi in a.ack_ranges):
                return fr, ts
        return None

    def skipped(self, d: str, pn: int, t_hi: int) -> tuple[int, int, int] | None:
        """First ACK (before t_hi) acknowledging a packet above ``pn`` but not ``pn``."""
        for ts, fr, a in self.acks[_FLIP[d]]:
            if ts > t_hi:
                break
            if a.largest_acknowledged > pn and not any(lo <= pn <= hi for lo, hi in a.ack_ranges):
                return fr, ts, a.largest_acknowledged
        return None

    def first_after(self, d: str, pn: int, t_lo: int) -> tuple[int, int, int] | None:
        """First packet of ``d`` captured at/after t_lo numbered above ``pn``."""
        for q, fr, ts in self.app[d]:
            if ts >= t_lo and q > pn:
                return q, fr, ts
        return None

    def delivered(self, d: str, t0: int, t1: int, exclude: set[int]) -> dict[int, int]:
        """In-order bytes each other stream of ``d`` made readable in [t0, t1]."""
        out: dict[int, int] = {}
        for (dd, sid), rows in self.streams.items():
            if dd != d or sid in exclude:
                continue
            before = after = 0
            for r in rows:
                if r.ts_ns < t0:
                    before = max(before, r.contiguous_end)
                if r.ts_ns <= t1:
                    after = max(after, r.contiguous_end)
                else:
                    break
            if after > before:
                out[sid] = after - before
        return out


@dataclass
class _Episode:
    d: str  # QUIC direction of the stalled data
    stream: int
    view: str  # "hole_at_capture_point" | "retransmission_at_capture_point"
    hole: tuple[int, int]  # stream offsets [a, b)
    t_start: int
    t_end: int
    evidence: list[Evidence]
    checks: list[str]
    lost_pn: int | None
    fill_pns: list[int]
    blocked_bytes: int  # bytes of the stream behind the hole that waited
    confidence: float
    t_stream_open: int  # the stream's first byte behind the hole (receiver) / sent after


def _subtract(missing: list[tuple[int, int]], o: int, e: int) -> list[tuple[int, int]]:
    out = []
    for a, b in missing:
        if e <= a or o >= b:
            out.append((a, b))
            continue
        if a < o:
            out.append((a, o))
        if e < b:
            out.append((e, b))
    return out


# --------------------------------------------------------------------------- hole at P


def _holes_at_p(c: _Conn, d: str, sid: int, rows: list[Any]) -> list[_Episode]:
    out: list[_Episode] = []
    hi = 0
    hi_pn: int | None = None
    open_: list[dict[str, Any]] = []
    for r in rows:
        o, e = r.offset, r.offset + r.length
        for h in open_:
            if h["done"] or e <= h["a"] or o >= h["b"]:
                continue
            h["missing"] = _subtract(h["missing"], o, e)
            h["fills"].append(r)
            if not h["missing"]:
                h["done"] = True
        if r.length and o > hi:
            open_.append(
                {"a": hi, "b": o, "open": r, "before_pn": hi_pn, "missing": [(hi, o)],
                 "fills": [], "done": False}
            )  # fmt: skip
        if e > hi:
            hi, hi_pn = e, r.packet_number
    for h in open_:
        if not h["done"]:
            continue  # never repaired in this capture
        op = h["open"]
        fills = h["fills"]
        last = fills[-1]
        if all(f.packet_number < op.packet_number for f in fills):
            continue  # the original arrived late: reordering, not loss
        checks = [
            f"not reordering: the hole was filled by packet {last.packet_number} (frame "
            f"{last.frame}), numbered above packet {op.packet_number} that opened it — a "
            "retransmission, not the late original"
        ]
        # the packet number(s) P never saw between the last byte before the hole and
        # the first byte after it: the lost packet is among them
        lo = -1 if h["before_pn"] is None else h["before_pn"]
        missing_pns = [q for q in range(lo + 1, op.packet_number) if q not in c.pns[d]]
        lost = missing_pns[0] if missing_pns else None
        if lost is not None:
            ack = c.acked(d, lost, last.ts_ns)
            if ack is not None:
                continue  # Y acknowledged it: the capture, not the network, lost it
            sk = c.skipped(d, lost, last.ts_ns)
            if sk is not None:
                checks.append(
                    f"not a capture drop: the receiver's ACK in frame {sk[0]} acknowledged up "
                    f"to packet {sk[2]} but not packet {lost}"
                )
        nxt = c.first_after(d, lost, 0) if lost is not None else None
        t_start = nxt[2] if nxt is not None and nxt[2] <= op.ts_ns else op.ts_ns
        ev = []
        if nxt is not None and nxt[1] != op.frame and nxt[2] <= op.ts_ns:
            ev.append(Evidence(nxt[1], "first packet after the lost one", nxt[2]))
        ev.append(Evidence(op.frame, "stream data behind the hole", op.ts_ns))
        for f in fills:
            if f.packet_number > op.packet_number:
                ev.append(Evidence(f.frame, "retransmission", f.ts_ns))
        blocked = sum(
            r.new_bytes for r in rows if r.offset >= h["b"] and op.ts_ns <= r.ts_ns < last.ts_ns
        )
        out.append(
            _Episode(
                d=d, stream=sid, view="hole_at_capture_point", hole=(h["a"], h["b"]),
                t_start=t_start, t_end=last.ts_ns, evidence=ev, checks=checks, lost_pn=lost,
                fill_pns=sorted({f.packet_number for f in fills}), blocked_bytes=blocked,
                confidence=0.9 if len(checks) > 1 else 0.75, t_stream_open=op.ts_ns,
            )
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------- sender side


def _retransmissions_at_p(c: _Conn, d: str, sid: int, rows: list[Any]) -> list[_Episode]:
    out: list[_Episode] = []
    # the original packet of every retransmitted range: the first frame that carried it
    done: set[int] = set()
    for i, r in enumerate(rows):
        if not r.retransmission or r.length == 0:
            continue
        o, e = r.offset, r.offset + r.length
        orig = next(
            (q for q in rows[:i] if q.offset < e and q.offset + q.length > o and q.length), None
        )
        if orig is None or orig.packet_number in done or orig.packet_number >= r.packet_number:
            continue
        done.add(orig.packet_number)
        lost = orig.packet_number
        oa, ob = orig.offset, orig.offset + orig.length
        # every re-send of the original's range, until all of it was sent again
        missing = [(oa, ob)]
        fills = []
        for q in rows[i:]:
            if q.packet_number <= lost or q.offset >= ob or q.offset + q.length <= oa:
                continue
            missing = _subtract(missing, q.offset, q.offset + q.length)
            fills.append(q)
            if not missing:
                break
        last = fills[-1]
        ack = c.acked(d, lost, r.ts_ns)
        if ack is not None:
            continue  # Y had the original before the copy left: spurious, nothing waited
        behind = [
            q for q in rows if q.offset >= ob and orig.ts_ns < q.ts_ns < last.ts_ns and q.new_bytes
        ]
        if not behind:
            continue  # tail loss: nothing of this stream queued behind the hole
        checks = [
            f"not spurious: the receiver never acknowledged packet {lost} before the "
            f"retransmission (frame {r.frame})"
        ]
        sk = c.skipped(d, lost, last.ts_ns)
        if sk is not None:
            checks.append(
                f"loss confirmed: the receiver's ACK in frame {sk[0]} acknowledged up to packet "
                f"{sk[2]} but not packet {lost}"
            )
        nxt = c.first_after(d, lost, orig.ts_ns)
        t_start = nxt[2] if nxt is not None else orig.ts_ns
        ev = [Evidence(orig.frame, "lost packet (original)", orig.ts_ns)]
        if nxt is not None:
            ev.append(Evidence(nxt[1], "first packet after the lost one", nxt[2]))
        ev.extend(Evidence(q.frame, "retransmission", q.ts_ns) for q in fills)
        out.append(
            _Episode(
                d=d, stream=sid, view="retransmission_at_capture_point", hole=(oa, ob),
                t_start=t_start, t_end=last.ts_ns, evidence=ev, checks=checks, lost_pn=lost,
                fill_pns=sorted({q.packet_number for q in fills}),
                blocked_bytes=sum(q.new_bytes for q in behind),
                confidence=0.85 if sk is not None else 0.6, t_stream_open=behind[0].ts_ns,
            )
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------- detector


def _vantage(qc: QuicConn) -> str:
    """client / server / middle from the handshake legs (as pcapkit.net.tcp does for SYNs)."""
    ci, si = qc.event("client_initial"), qc.event("server_initial")
    if ci is None or si is None:
        return "unknown"
    pk = qc.pk  # the first client packet after the server's Initial
    after = pk.c2s & (pk.frame > si.frame)
    if not after.any():
        return "unknown"
    d_s = si.ts_ns - ci.ts_ns
    d_c = int(pk.ts_ns[int(np.argmax(after))]) - si.ts_ns
    if d_s <= 0 or d_c < 0:
        return "unknown"
    if d_c <= VANTAGE_LEG_RATIO * d_s:
        return "client"
    if d_s <= VANTAGE_LEG_RATIO * d_c:
        return "server"
    return "middle"


def detect(
    ctx: DetectContext, *, single_stream_share: float = SINGLE_STREAM_SHARE
) -> list[Finding]:
    """Stream stalls behind lost QUIC packets, one finding per (loss, stream)."""
    out: list[Finding] = []
    for qc in connections(ctx):
        if not qc.stream_rows:
            continue
        c = _Conn.of(qc)
        vantage = _vantage(qc)
        for (d, sid), rows in sorted(c.streams.items()):
            eps = _holes_at_p(c, d, sid, rows) + _retransmissions_at_p(c, d, sid, rows)
            for ep in eps:
                out.append(_finding(ctx, c, ep, vantage, single_stream_share))
    return out


def _finding(
    ctx: DetectContext, c: _Conn, ep: _Episode, vantage: str, single_share: float
) -> Finding:
    qc = c.qc
    d = ep.d
    # streams whose bytes were in the same lost packet stall too: they are not "saved"
    same_loss = {
        s
        for (dd, s), rows in c.streams.items()
        if dd == d and s != ep.stream and ep.lost_pn is not None
        for r in rows
        if r.packet_number == ep.lost_pn
    }
    others = c.delivered(d, ep.t_start, ep.t_end, {ep.stream} | same_loss)
    saved = sum(others.values())
    total = saved + ep.blocked_bytes
    single = total > 0 and ep.blocked_bytes >= single_share * total
    kind = "h3_single_stream_hol" if single else "quic_stream_hol"
    flow_dir = qc.flow_dir(d)
    sender = "server" if d == "s2c" else "client"
    receiver = "client" if d == "s2c" else "server"
    dur_ns = ep.t_end - ep.t_start
    ms = dur_ns / 1e6
    a, b = ep.hole
    lost = f"packet {ep.lost_pn}" if ep.lost_pn is not None else "a packet"
    rtx = [e.frame for e in ep.evidence if e.role == "retransmission"]
    behind = "had arrived" if ep.view == "hole_at_capture_point" else "were sent"
    head = (
        f"A QUIC {lost} from the {sender} carrying bytes {a}–{b} of stream {ep.stream} was "
        f"lost; for {ms:.1f} ms the {receiver} could not read stream {ep.stream} past offset "
        f"{a} ({ep.blocked_bytes} bytes of it {behind} behind the hole and waited) until "
        f"the retransmission in frame {', '.join(map(str, rtx))} filled it."
    )
    if single:
        others_txt = (
            f" Only {saved} bytes of other streams moved meanwhile: this connection carries "
            "(almost) everything on one stream, so QUIC's per-stream delivery could not help "
            "— the loss blocked it exactly as it would have over TCP."
        )
        remedy = (
            "The loss is on the path (find the link, queue or shaper that dropped it). QUIC "
            "only isolates losses between streams: put independent messages on separate "
            "streams (one request per stream instead of one long-lived stream; for "
            "latency-critical, loss-tolerant updates, QUIC DATAGRAM frames / WebTransport "
            "datagrams), and keep loss recovery fast (packet-threshold and time-threshold "
            "detection, RFC 9002 §6.1; pacing to avoid self-inflicted bursts)."
        )
    else:
        per = ", ".join(f"stream {s}: {n} B" for s, n in sorted(others.items()))
        others_txt = (
            f" Meanwhile the other streams kept delivering ({saved} bytes in order: {per}); "
            "over TCP (HTTP/2) those bytes would have waited behind the same hole — the "
            "head-of-line blocking QUIC saved."
            if others
            else " No other stream delivered data meanwhile."
        )
        if same_loss:
            others_txt += (
                " Streams "
                + ", ".join(map(str, sorted(same_loss)))
                + " also had bytes in the lost packet (separate findings)."
            )
        remedy = (
            "The loss is on the path (find the link, queue or shaper that dropped it); QUIC "
            f"already confined the stall to stream {ep.stream}. To shorten it: keep loss "
            "recovery fast (RFC 9002 packet/time thresholds, a small max_ack_delay so the "
            "receiver's ACKs reveal the gap quickly), pace sends to avoid burst losses, and "
            "schedule streams round-robin/incremental (RFC 9218) so one stream's stall does "
            "not also starve the others of sending opportunities."
        )
    frames = [e.frame for e in ep.evidence]
    r = ctx.flow(qc.flow)
    return Finding(
        kind=kind,
        flow=qc.flow,
        dir=flow_dir,
        stream=ep.stream,
        t_start_ns=ep.t_start,
        t_end_ns=ep.t_end,
        cost_ms=ms,
        cost_method="measured_interval",
        evidence=ep.evidence,
        vantage=vantage,
        confidence=ep.confidence,
        checks=[
            *ep.checks,
            f"only stream {ep.stream}"
            + (f" (and {sorted(same_loss)})" if same_loss else "")
            + " had bytes in the lost packet; the others are not charged",
        ],
        explanation=head + others_txt,
        remedy=remedy,
        display_filter=(
            f"udp.stream == {int(r.stream)} && (quic.stream.stream_id == {ep.stream} || "
            f"{frame_filter(frames)})"
        ),
        details={
            "view": ep.view,
            "hole_offset": a,
            "hole_bytes": b - a,
            "lost_packet_number": ep.lost_pn,
            "retransmission_packet_numbers": ep.fill_pns,
            "episode_method": (
                "first packet numbered after the lost one → retransmission that filled the "
                "hole (both sender → receiver, unbiased by the vantage)"
            ),
            "stream_wait_ms": (ep.t_end - ep.t_stream_open) / 1e6,
            "blocked_bytes": ep.blocked_bytes,
            "other_streams_bytes": saved,
            "other_streams": {str(s): n for s, n in sorted(others.items())},
            "streams_in_lost_packet": sorted({ep.stream} | same_loss),
            "single_stream_share": None if total == 0 else ep.blocked_bytes / total,
            "frames_filter": frame_filter(frames),
        },
    )

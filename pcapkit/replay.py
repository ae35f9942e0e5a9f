"""Replay (issue 19): re-enact a captured exchange over real stacks, with and without a remedy.

Socket level — ``replay(capture, flow=N, outdir=DIR, remedies=[...])``:

1. **Derive** (:func:`derive`) from one TCP flow of the capture
   * the *path*: the flow's RTT (from the handshake, ``flows.rtt_ms``) split evenly into
     the two one-way delays, and the drops the capture shows — every transmission of a
     sequence range that had to be sent again, as the forwarder's 1-based payload-packet
     index of its direction (at the sender's vantage: each copy but the last; at the
     receiver's: the packet missing before each segment that arrived after a hole);
   * the peer's packets held or lost on their way back (:func:`_peer_path`, at the
     sender's vantage): a silence then a burst of held ACKs is a stall of the
     forwarder's (``stall_<dir>_after``, ``stall_ms``), no answer until the end a black
     hole (``blackhole_<dir>_after``, and the sender's ``tcp_retries2``); the copies the
     silence caused are not drops;
   * each end's *units* — one application write each: a TLS application-data record
     (≈ one ``SSL_write``) with keys, a PSH-terminated run of segments without TLS — with
     its size, its payload (the decrypted or plain stream bytes; same-size filler when
     the capture has no keys, with a warning), and its timing relative to its trigger:
     the peer's last unit (``after: "peer"``: the gap minus the round trip between the
     capture point and that end, ``flows.server_leg_ms`` / ``client_leg_ms``) or the end's
     own previous write (``after: "self"``).  A unit that a TCP hold released (a
     ``nagle``, ``nagle_delayed_ack``, ``tcp_cork`` finding of its direction whose interval
     holds the unit's time) was written when the hold began (the finding's ``t_start``),
     not when it left: the replay must hold it again by itself, not by script;
   * each end's *socket behaviour* from the findings: Nagle on where a Nagle finding
     names that end (TCP_NODELAY otherwise: the wire showed no hold), TCP_CORK left set
     where ``tcp_cork`` does, record header and body written apart where
     ``tls_record_split_write`` does.
2. **Re-enact** it through the lab (:mod:`pcapkit.lab.reenact`: a scripted client and
   server in two namespaces, the userspace forwarder between them, tcpdump at both ends,
   keys embedded) — once faithfully (``DIR/faithful/``) and once per remedy
   (``DIR/remedy-NAME/``).
3. **Analyse** every run at the original's vantage and write ``DIR/summary.json``: per
   run the findings' kinds (with their summed cost), the request metrics (TTFB, TTFT,
   gap p95) and, for the faithful run, its error against the original with the verdict
   against :data:`TOLERANCE_MS` / :data:`TOLERANCE_PCT`; for each remedy, the kinds it
   removed and whether the ones it addresses are gone.  ``DIR/diff-NAME.txt`` is
   ``pcapkit diff`` of the faithful run against each remedy run.

Remedies (:data:`REMEDIES`): ``nodelay`` (nagle, nagle_delayed_ack), ``uncork``
(tcp_cork), ``coalesce-writes`` (tls_tiny_records, tls_record_split_write,
tls_records_coalesced: back-to-back writes handed over as one), ``record-size=N``
(tls_tiny_records: back-to-back writes buffered into records of ≤ N bytes),
``notsent-lowat=N`` (h2_send_buffer_hol: TCP_NOTSENT_LOWAT, the writer keeps its backlog);
``auto`` picks the remedies the original's findings propose.

``h2-window=N`` (h2_flow_control_stall: each end's SETTINGS advertises N, the sender's DATA
waits only for the credit N lacks); ``quic-window=N`` (quic_flow_control_stall) and
``smaller-certificate`` (quic_handshake_extra_rtt) for QUIC flows.

Several TCP connections (:func:`derive_many`, ``--flow`` repeated): each flow's plan, each
connection started as in the capture, TLS resumption offered / accepted as captured;
remedies ``keep-alive`` (one connection for all) and ``session-tickets``.

QUIC (:func:`derive_quic`): a UDP flow that is a QUIC connection replays with aioquic at
both ends (:mod:`pcapkit.lab.reenact_quic`): the path (RTT from ACK samples, lost
datagrams), each end's writes of decrypted STREAM bytes over every stream (and its
STOP_SENDING / RESET_STREAM), its receive limits (transport parameters) and the
certificate's size.

Refusals (:class:`ReplayError`, one line): not TCP or QUIC, no handshake in the capture
(no RTT, no ISN), one direction only, an ALPN other than HTTP/1.1 or h2 over TCP, HTTP/2
or QUIC without keys, a flow with no application data.

Packet level — :func:`replay_packets`: the frames of a capture sent onto an interface in
a lab namespace at their original pacing (scaled, or as fast as possible), like
tcpreplay; the sender runs inside the namespace (:mod:`pcapkit.lab.pktsend`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .trace import Trace
from .trace import open as open_trace

# Fidelity tolerance for a request metric (TTFB, TTFT, gap p95): the larger of 5 ms (a
# few scheduler quanta of two Python processes plus the forwarder's release jitter on a
# busy 2-core host) and 10 % of the original's value.
TOLERANCE_MS = 5.0
TOLERANCE_PCT = 10.0
# A run whose programs woke later than TOLERANCE_MS for a timed write is run again, up to
# this many runs in all (the host was busy: another run is cheaper than a wrong verdict).
ATTEMPTS = 3
# Kinds that hold bytes in the sender's TCP: a unit they released was written earlier.
HOLD_KINDS = ("nagle", "nagle_delayed_ack", "tcp_cork")
# Findings whose interval the receive window paced the sender through: what it sent then
# was queued when the interval began (see window_held)
WINDOW_HELD_KINDS = ("zero_window", "receiver_limited")
# A unit released within this long after a hold's end was released by it (the releasing
# ACK and the released segment are consecutive frames; gaps.RELEASE_SLACK_NS).
RELEASE_SLACK_NS = 1_000_000
# Bottleneck rate (see _bottleneck_mbit): at least this many packet spacings, the middle
# half within this ratio (a 1 Mbit/s lab link: 1.00–1.00; unlimited paths: 4×–1000×).
RATE_MIN_SAMPLES = 16
RATE_SPREAD = 1.25
RATE_MIN_BYTES = 1000  # only near-full packets (or ACKs of as much): small messages are
#                        spaced by the application (an SSE stream at 50 ms looks like 15 kbit/s)
HEADER_BYTES = 52  # IPv4 20 + TCP 32 (timestamps): what a segment adds to its payload
MSS_GUESS = 1448
DEFAULT_RCV_WINDOW = 64_000  # Linux's first windows are ≥ 64 KiB unless SO_RCVBUF is set
SNDBUF_WRITE_AHEAD = 2 * 1024 * 1024  # SO_SNDBUF (bytes) when the capture shows write-ahead
# A backlog seen queued in the sender's socket (h2_send_buffer_hol) stayed there because the
# sender paced at the path's rate: BBR does (cubic sends a window at once and the backlog
# waits in the path's queue instead, where the sender's capture no longer sees it)
PACING_CC = "bbr"
QUEUE_SLACK = 1.5  # a unit this close behind the previous one's serialisation was queued
# Linux's initial window (RFC 6928: 10 segments) and minimum RTO (TCP_RTO_MIN, 200 ms):
# a sender idle longer than its RTO restarts from the initial window unless told not to.
INIT_CWND = 10
MIN_RTO_NS = 200_000_000
# Units handed to the socket this close together count as one burst for coalescing.
COALESCE_MS = 1.0
TLS13_OVERHEAD = 22  # header 5 + inner content type 1 + AEAD tag 16 (RFC 8446 §5.2)
# an encrypted TLS 1.3 alert (2 bytes) on the wire: what a keyless capture's last record
# of a direction is when it is the close_notify
CLOSE_NOTIFY_LEN = 2 + TLS13_OVERHEAD
METRICS = ("ttfb_ms", "ttft_ms", "gap_p95_ms")
# shown and compared too, but not part of the fidelity verdict: the request's start to its
# response's last byte (what a flow-control or bandwidth remedy gains)
EXTRA_METRICS = ("ttlb_ms",)
# Held return traffic (see _peer_path): packets a hold released arrive back to back (the
# forwarder releases them in one pass: µs apart); a silent peer while this end resent the
# same bytes this many times is a black hole (rto.py's min_retransmissions: 3 expiries).
STALL_BURST_NS = 1_000_000
BLACKHOLE_COPIES = 3
# A unit written less than the round trip (capture point ↔ its end) after a peer unit was
# seen at the capture point did not wait for it (it crossed it in flight), less this slack
# (the larger of 1 ms and a tenth of that round trip: jitter, a reaction on the spot).
# A server's NewSessionTickets later than this after the client's Finished are replayed as
# late (the lab's servers: 0.3–1.4 ms on 38 of 40 TLS fixtures; 4 ms where the host stalled)
TICKETS_DELAY_MIN_MS = 1.5
CROSS_TOL_MS = 1.0
CROSS_TOL_FRACTION = 0.1
ANSWER_RTTS = 1.5  # an answer to a send comes one round trip after it (a held one later)

# HTTP/2 flow control (RFC 9113 §6.9): the windows every stream and the connection start
# with, the largest a window may be, and --remedy auto's window (16 MiB: what the
# h2_flow_control_large control and Firefox's streams get; Chrome's stream window is 6 MiB)
H2_DEFAULT_WINDOW = 65_535
H2_MAX_WINDOW = (1 << 31) - 1
H2_AUTO_WINDOW = 16 * 1024 * 1024
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_SETTINGS, H2_WINDOW_UPDATE = 0x0, 0x4, 0x8
H2_HEADERS = 0x1
H2_SETTINGS_INITIAL_WINDOW_SIZE = 0x4

# remedy name → (the finding kinds it addresses, whether it takes a value)
REMEDIES: dict[str, tuple[tuple[str, ...], bool]] = {
    "nodelay": (("nagle", "nagle_delayed_ack"), False),
    "uncork": (("tcp_cork",), False),
    "coalesce-writes": (
        ("tls_tiny_records", "tls_record_split_write", "tls_records_coalesced"),
        False,
    ),
    "record-size": (("tls_tiny_records",), True),
    "notsent-lowat": (("h2_send_buffer_hol",), True),
    "h2-window": (("h2_flow_control_stall",), True),
    "quic-window": (("quic_flow_control_stall",), True),
    "smaller-certificate": (("quic_handshake_extra_rtt",), False),
    # the same requests and responses over HTTP/3 (HTTP/2, HTTP/1.1): one lost packet stalls
    # only its stream (not every stream behind it in one TCP byte stream)
    "http3": (("tcp_hol_blocking",), False),
    # several connections (--flow N --flow M …): one connection for all (HTTP/1.1 or
    # plain TCP), or each later one resuming the TLS session of the one before
    "keep-alive": (("connection_not_reused", "tls_resumption_missing"), False),
    "session-tickets": (("tls_resumption_missing",), False),
    # a resumed QUIC connection that sends its first request in 0-RTT (with the ClientHello)
    "zero-rtt": (("zero_rtt_unused",), False),
}
# --remedy auto: the first remedy listed for each kind the original shows
AUTO: dict[str, str] = {
    "nagle": "nodelay",
    "nagle_delayed_ack": "nodelay",
    "tcp_cork": "uncork",
    "tls_record_split_write": "coalesce-writes",
    "tls_tiny_records": "coalesce-writes",
    "h2_send_buffer_hol": "notsent-lowat=16384",  # Cloudflare's value (detect/h2_send_buffer)
    "h2_flow_control_stall": f"h2-window={H2_AUTO_WINDOW}",
    "quic_flow_control_stall": f"quic-window={H2_AUTO_WINDOW}",
    "quic_handshake_extra_rtt": "smaller-certificate",
    "connection_not_reused": "keep-alive",
    "tls_resumption_missing": "session-tickets",
    "zero_rtt_unused": "zero-rtt",
}


class ReplayError(Exception):
    """The capture lacks what a faithful replay needs (one line for the user)."""


@dataclass
class Plan:
    """What a replay re-enacts: the path, the script, and what was seen."""

    flow: int
    vantage: str
    tls: bool
    port: int
    delay_ms: float
    drop_c2s: list[int]
    drop_s2c: list[int]
    script: dict[str, Any]
    drop_syn_c2s: list[int] = field(default_factory=list)
    drop_syn_s2c: list[int] = field(default_factory=list)
    sysctls: dict[str, dict[str, int]] = field(default_factory=dict)  # "cli"/"srv" → sysctls
    rate_mbit: float | None = None  # the bottleneck, both directions (the lab's rate_mbit)
    # the peer's packets held / lost (see _peer_path): "c2s"/"s2c" → after N payload packets
    blackhole_after: dict[str, int] = field(default_factory=dict)
    stall_after: dict[str, int] = field(default_factory=dict)
    stall_ms: float = 0.0
    warnings: list[str] = field(default_factory=list)
    quic: bool = False  # a QUIC connection (HTTP/3): pcapkit.lab.reenact_quic plays it
    cc: str | None = None  # TCP_CONGESTION for both ends (None: the lab's default, cubic)

    def lab_params(self) -> dict[str, Any]:
        return {
            "delay_ms": round(self.delay_ms, 3),
            "drop_c2s": self.drop_c2s,
            "drop_s2c": self.drop_s2c,
            "drop_syn_c2s": self.drop_syn_c2s,
            "drop_syn_s2c": self.drop_syn_s2c,
            "rate_mbit": self.rate_mbit,
            **{f"blackhole_{d}_after": n for d, n in self.blackhole_after.items()},
            **{f"stall_{d}_after": n for d, n in self.stall_after.items()},
            **({"stall_ms": self.stall_ms} if self.stall_after else {}),
            "sysctl_cli": self.sysctls.get("cli", {}),
            "sysctl_srv": self.sysctls.get("srv", {}),
            "port": self.port,
            "tls": self.tls,
            **({"cc": self.cc} if self.cc else {}),
        }


def parse_remedy(text: str) -> tuple[str, int | None]:
    """``"record-size=4096"`` → ("record-size", 4096); unknown names raise ValueError."""
    name, sep, raw = text.partition("=")
    if name not in REMEDIES and name != "auto":
        raise ValueError(f"unknown remedy {name!r} (known: auto, {', '.join(REMEDIES)})")
    if name == "auto":
        return name, None
    takes_value = REMEDIES[name][1]
    if takes_value != bool(sep):
        raise ValueError(
            f"remedy {name} {'needs =N' if takes_value else 'takes no value'}: {text!r}"
        )
    if not sep:
        return name, None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"remedy {name}: {raw!r} is not an integer") from None
    # RFC 8446 §5.1: a record ≤ 2^14 B; RFC 9113 §6.9.1: a window ≤ 2^31 − 1
    top = {"record-size": 16_384, "h2-window": H2_MAX_WINDOW}.get(name, 1 << 30)
    if name == "quic-window":
        top = (1 << 62) - 1  # RFC 9000 §16: a variable-length integer
    if not 1 <= value <= top:
        raise ValueError(f"remedy {name}: {value} is outside 1..{top}")
    return name, value


def auto_remedies(kinds: Iterable[str]) -> list[str]:
    """The remedies the findings propose, in a stable order."""
    chosen = {AUTO[k] for k in kinds if k in AUTO}
    return [r for name in REMEDIES for r in sorted(chosen) if r.partition("=")[0] == name]


# ---------------------------------------------------------------------------- derive


def _flow_row(trace: Trace, flow: int) -> Any:
    f = trace.flows
    sel = f[f["flow"] == flow]
    if sel.empty:
        known = ", ".join(str(int(x)) for x in f["flow"].head(10))
        raise ReplayError(f"no flow {flow} in the capture (flows: {known or 'none'})")
    return sel.iloc[0]


def _drops(
    segments: pd.DataFrame,
    vantage_is_sender: bool,
    acks: pd.DataFrame | None = None,
    rtt_ms: float = 0.0,
    silent: tuple[int, int | None] | None = None,
) -> list[int]:
    """1-based payload-packet indices (forwarder numbering) of the lost transmissions.

    At the sender, a copy sent again was lost — unless the ACK covering it came back less
    than half a round trip after the last copy left (``acks``: the peer's packets, with
    ``ts_ns`` and Wireshark's ``rel_ack``): that ACK answers the earlier copy, the
    retransmission was spurious (a tail-loss probe or RTO while the receiver held its
    ACKs, as an application that stopped reading makes it) — and so was a copy sent while
    the peer was silenced (``silent``: (start, end or None) ns from :func:`_peer_path`):
    the peer's answer was held or lost, not the data."""
    # probes are not lost data: a zero-window probe or keep-alive repeats a byte on purpose
    segments = segments[~segments["kind"].isin(("zero_window_probe", "keep_alive"))]
    if segments.empty:
        return []
    offsets = segments["offset"].tolist()
    kinds = segments["kind"].tolist()
    drops: list[int] = []
    if vantage_is_sender:
        last: dict[int, int] = {}
        for i, off in enumerate(offsets):
            last[int(off)] = i
        spurious: set[int] = set()
        if acks is not None and not acks.empty:
            ack_ts = acks["ts_ns"].astype("int64").to_numpy()
            ack_no = acks["rel_ack"].astype("float64").to_numpy()
            ts = segments["ts_ns"].astype("int64").to_numpy()
            ends = (segments["offset"] + segments["length"]).astype("int64").to_numpy()
            for off, j in last.items():
                if offsets.count(off) < 2:
                    continue
                covered = (ack_ts > ts[j]) & (ack_no >= ends[j] + 1)  # rel_ack is 1-based
                if covered.any() and ack_ts[covered].min() - ts[j] < rtt_ms * 1e6 / 2:
                    spurious.add(off)
        if silent is not None:
            lo, hi = silent
            for i, t in enumerate(segments["ts_ns"].astype("int64").tolist()):
                if t > lo and (hi is None or t < hi):
                    spurious.add(int(offsets[i]))
        drops = [
            i + 1
            for i, off in enumerate(offsets)
            if last[int(off)] != i and int(off) not in spurious
        ]
    else:
        for i, k in enumerate(kinds):
            if k == "prev_not_captured":
                drops.append(i + 1 + len(drops))
    return drops


def _syn_drops(packets: pd.DataFrame, flow: int, vantage: str) -> dict[str, list[int]]:
    """Lost handshake packets, as the forwarder's 1-based SYN / SYN-ACK indices.

    At the client: k SYNs sent before the SYN/ACK that came means k − 1 went unanswered
    (lost either way; dropping the SYNs gives the client the same wait).  At the server:
    k SYN/ACKs sent means the first k − 1 never reached the client (it sent its SYN
    again, or the server's timer fired)."""
    p = packets[(packets["flow"] == flow) & (packets["proto"] == "tcp")]
    flags = p["tcp_flags"].astype("int64")
    syn = p[(flags & 0x12) == 0x02]  # SYN without ACK: the client's
    synack = p[(flags & 0x12) == 0x12]
    out: dict[str, list[int]] = {"c2s": [], "s2c": []}
    if vantage == "client" and len(syn) > 1 and len(synack) >= 1:
        out["c2s"] = list(range(1, len(syn)))
    elif vantage == "server" and len(synack) > 1:
        out["s2c"] = list(range(1, len(synack)))
    return out


def _peer_path(
    packets: pd.DataFrame, seg: pd.DataFrame, flow: int, vantage: str, rtt_ms: float
) -> dict[str, Any]:
    """The peer's packets held or lost on their way to the capture's end.

    At the sender of the data (the server's vantage for a response), a *return path* that
    held or lost the peer's packets — its ACKs and all — looks like data loss (the sender
    retransmits) but is not: the data got through, the answer did not.

    * **stall** (the forwarder's ``stall_<dir>_after`` / ``stall_ms``): after a silence of
      the peer longer than the minimum RTO, during which this end retransmitted, the peer's
      packets arrive as one burst (:data:`STALL_BURST_NS` apart at most, ≥ 2 packets): a
      hold released them together.  The hold's length is the burst's arrival minus when
      its first packet would have come unheld — one round trip after the first sending of
      the data it acknowledges; the stall starts after the peer's payload packets seen
      before the silence.  Not a stall: a burst whose first packet came within
      :data:`ANSWER_RTTS` round trips of this end's last send (the answer to a
      retransmission, then the peer's FIN), or whose ACKs do not step forward at least
      twice (one answer, not a held backlog).
    * **black hole** (``blackhole_<dir>_after``): nothing from the peer after its last
      packet while this end retransmitted the same bytes at least :data:`BLACKHOLE_COPIES`
      times and its data stays unacknowledged to the capture's end; the hole opens after
      all the peer's payload packets.  (At the server's vantage a black hole towards the
      client looks the same — it too silences the client —; the re-enactment of either
      shows the server's side the same way.)  ``retries``: the most copies of one range
      minus one — the sender's ``tcp_retries2`` (it gave up after as many timer expiries),
      so that the replay gives up too, not after ~15 minutes.

    Returns ``{"dir", "blackhole_after", "stall_after", "stall_ms", "window", "retries"}``
    (``window``: the (start, end) ns in which this end's copies were caused by the peer's
    silence, not by loss — not drops); empty values when neither shows."""
    out: dict[str, Any] = {
        "dir": None,
        "blackhole_after": None,
        "stall_after": None,
        "stall_ms": 0.0,
        "window": None,
        "retries": None,
    }
    if vantage not in ("server", "client"):
        return out
    d_data = "s2c" if vantage == "server" else "c2s"
    d_peer = "c2s" if vantage == "server" else "s2c"
    p = packets[(packets["flow"] == flow) & (packets["proto"] == "tcp")].sort_values("ts_ns")
    peer = p[p["dir"] == d_peer]
    data = seg[seg["dir"] == d_data].sort_values("ts_ns")
    if peer.empty or data.empty:
        return out
    pts = peer["ts_ns"].astype("int64").to_numpy()
    payload = (peer["payload_len"].astype("int64") > 0).to_numpy()
    dts = data["ts_ns"].astype("int64").to_numpy()
    retx = (data["kind"] == "retransmission").to_numpy()
    acks = peer["rel_ack"].astype("float64").to_numpy()  # NA (no ACK flag) → NaN
    out["dir"] = d_peer
    # black hole: silence from the peer's last packet on, with this end backing off
    last = int(pts[-1])
    after = data[data["ts_ns"] > last]
    copies = after[after["kind"] == "retransmission"]["offset"].value_counts()
    acked = np.nanmax(acks) if not np.isnan(acks).all() else 0.0
    top = float((data["offset"] + data["length"]).max()) + 1  # rel_ack is 1-based
    if not copies.empty and int(copies.max()) >= BLACKHOLE_COPIES and not acked >= top:
        out["blackhole_after"] = int(payload.sum())
        out["window"] = (last, None)
        counts = data["offset"].value_counts()
        out["retries"] = int(counts.max()) - 1
        return out
    # stall: a silence longer than the minimum RTO ended by a burst of held packets
    for i in range(1, len(pts) - 1):
        if pts[i] - pts[i - 1] <= MIN_RTO_NS or pts[i + 1] - pts[i] > STALL_BURST_NS:
            continue
        if not (retx & (dts > pts[i - 1]) & (dts < pts[i])).any():
            continue
        # no answer to this end's last send (that would come one round trip after it) ...
        sent = dts[dts < pts[i]]
        if sent.shape[0] and pts[i] - int(sent[-1]) < ANSWER_RTTS * rtt_ms * 1e6:
            continue
        # ... but a backlog: the burst's ACKs step forward as if the data arrived just now
        burst = acks[i:][pts[i:] - pts[i] <= STALL_BURST_NS]
        burst = burst[~np.isnan(burst)]
        if np.unique(burst).shape[0] < 2:
            continue
        ack = acks[i]
        t0 = None
        if not np.isnan(ack):
            new = data[data["kind"] == "new"]
            hit = new[(new["offset"] + new["length"] + 1) == float(ack)]
            if not hit.empty:
                t0 = int(hit["ts_ns"].min())
        if t0 is None:  # no data to date it: the peer's last packet before the silence
            t0 = int(pts[i - 1])
        out["stall_after"] = int(payload[:i].sum())
        out["stall_ms"] = round(max(0.0, (int(pts[i]) - t0) / 1e6 - rtt_ms), 1)
        out["window"] = (int(pts[i - 1]), int(pts[i]))
        return out
    return out


def _no_restart_after_idle(seg: pd.DataFrame, rtt_ms: float) -> bool:
    """Did this direction send more than an initial window in the first round trip after
    an idle longer than the minimum RTO?  Then its kernel did not restart slow start
    (``net.ipv4.tcp_slow_start_after_idle=0``, RFC 5681 §4.1 / RFC 7661): the replay sets
    the same."""
    new = seg[seg["kind"] == "new"]["ts_ns"].sort_values().to_numpy()
    if new.shape[0] < INIT_CWND + 2:
        return False
    rtt_ns = rtt_ms * 1e6
    for i in range(1, new.shape[0]):
        if new[i] - new[i - 1] > MIN_RTO_NS + rtt_ns:
            flight = int(((new >= new[i]) & (new < new[i] + 0.9 * rtt_ns)).sum())
            if flight > INIT_CWND:
                return True
    return False


def _bottleneck_mbit(packets: pd.DataFrame, flow: int, vantage: str) -> float | None:
    """The bottleneck rate of the server → client direction, where the capture shows one.

    Behind a rate limit, back-to-back data arrives at the client spaced by its
    serialisation time, and the client's ACKs reach the server spaced the same way: the
    per-packet rate (IP bytes × 8 / spacing; at the server, bytes newly acknowledged plus
    their headers over the ACK spacing) is then the same for most packets.  Without one,
    the spacing follows the sender's bursts and the application, and the rates spread over
    orders of magnitude.  Only packets (or ACKed amounts) of :data:`RATE_MIN_BYTES` or
    more count: small messages are spaced by the application.  A rate is returned only
    when the middle half of the per-packet rates lies within :data:`RATE_SPREAD` (and
    there are :data:`RATE_MIN_SAMPLES`)."""
    p = packets[(packets["flow"] == flow) & (packets["proto"] == "tcp")]
    if vantage == "client":
        d = p[(p["dir"] == "s2c") & (p["payload_len"] > 0)].sort_values("ts_ns")
        size = d["wire_len"].astype("float64").to_numpy()[1:]
        gap = np.diff(d["ts_ns"].astype("int64").to_numpy())
    elif vantage == "server":
        a = p[p["dir"] == "c2s"].sort_values("ts_ns")
        adv = np.diff(a["rel_ack"].astype("float64").to_numpy())  # NA (no ACK flag) → NaN
        gap = np.diff(a["ts_ns"].astype("int64").to_numpy())
        keep = adv > 0
        size = adv[keep] + HEADER_BYTES * np.ceil(adv[keep] / MSS_GUESS)
        gap = gap[keep]
    else:
        return None
    ok = (gap > 0) & (size >= RATE_MIN_BYTES)  # packet pairs of data, not paced messages
    rates = size[ok] * 8 / (gap[ok] / 1e9) / 1e6
    if rates.shape[0] < RATE_MIN_SAMPLES:
        return None
    q25, q50, q75 = np.percentile(rates, [25, 50, 75])
    if q25 <= 0 or q75 / q25 > RATE_SPREAD:
        return None
    return float(f"{q50:.3g}")


def _read_pauses(
    packets: pd.DataFrame, findings: pd.DataFrame, flow: int, rtt_ms: float
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Reader pauses from ``zero_window`` findings, and each end's receive buffer.

    An end whose largest advertised window stays below :data:`DEFAULT_RCV_WINDOW` set a
    small SO_RCVBUF: the replay sets its largest window (Linux doubles the value and
    advertises about half: the same window).  A zero window of direction d means d's
    receiver stopped reading: it had acknowledged A bytes when the window closed, with
    about one window W unread, so it stopped after A − W bytes, for the zero-window
    interval plus one round trip (the window filled first).  Approximate by design:
    zero_window's replay shows the episode, not its exact byte."""
    p = packets[(packets["flow"] == flow) & (packets["proto"] == "tcp")]
    rcvbuf: dict[str, int] = {}
    wmax: dict[str, int] = {}
    for side, d in (("client", "c2s"), ("server", "s2c")):
        w = p[p["dir"] == d]["window"].astype("float64").max()
        if pd.notna(w) and w > 0:
            wmax[side] = int(w)
            if w < DEFAULT_RCV_WINDOW:
                rcvbuf[side] = int(w)
    pauses: list[dict[str, Any]] = []
    if findings.empty:
        return pauses, rcvbuf
    for fr in findings[findings["kind"] == "zero_window"].itertuples():
        if fr.dir not in ("c2s", "s2c") or pd.isna(fr.t_start_ns) or pd.isna(fr.t_end_ns):
            continue
        reader, rdir = ("client", "c2s") if fr.dir == "s2c" else ("server", "s2c")
        acks = p[(p["dir"] == rdir) & (p["ts_ns"] <= fr.t_start_ns)]["rel_ack"]
        acked = acks.astype("float64").max()
        if pd.isna(acked):
            continue
        pauses.append(
            {
                "side": reader,
                "after_bytes": max(0, int(acked) - wmax.get(reader, 0)),
                "pause_ms": round((fr.t_end_ns - fr.t_start_ns) / 1e6 + rtt_ms, 3),
            }
        )
    return pauses, rcvbuf


def _read_pace(findings: pd.DataFrame) -> dict[str, dict[str, float]]:
    """A slow reader from ``receiver_limited`` (the window's right edge advanced by about
    one read every so often): the reader's end reads that many bytes at that cadence
    (``{"bytes", "every_ms"}``, the finding's ``edge_step_bytes`` / ``edge_cadence_ms``)."""
    out: dict[str, dict[str, float]] = {}
    if findings.empty:
        return out
    for fr in findings[findings["kind"] == "receiver_limited"].itertuples():
        d = fr.details if isinstance(fr.details, dict) else {}
        step, every = d.get("edge_step_bytes"), d.get("edge_cadence_ms")
        if fr.dir not in ("c2s", "s2c") or not step or not every:
            continue
        reader = "client" if fr.dir == "s2c" else "server"
        out[reader] = {"bytes": int(step), "every_ms": round(float(every), 3)}
    return out


def _client_close(
    trace: Trace, flow: int, script_units: list[dict[str, Any]], units: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """A client that gave up: its request's response incomplete, its FIN (or RST) ahead of
    the server's, and a RST of its own (the server's data still came).  The replay's client closes its socket as long after its own last
    write as the capture shows (``{"delay_ms"}``), whatever the server still sends."""
    q = trace.requests
    q = q[q["flow"] == flow] if not q.empty else q
    if q.empty or bool(q["complete"].fillna(True).all()):
        return None
    p = trace.packets
    p = p[(p["flow"] == flow) & (p["proto"] == "tcp")]
    flags = p["tcp_flags"].astype("int64")
    end = p[(flags & 0x05) > 0]  # FIN or RST
    cli = end[end["dir"] == "c2s"]["ts_ns"]
    srv = end[end["dir"] == "s2c"]["ts_ns"]
    if cli.empty or (not srv.empty and int(srv.min()) < int(cli.min())):
        return None
    # ... and reset by the client: data still came after it closed (a client that read
    # to the end and closed first, as the lab's do, sends no RST)
    if not ((flags & 0x04) > 0)[p["dir"] == "c2s"].any():
        return None
    mine = [u["ts"] for u in units if u["dir"] == "c2s"]
    if not mine:
        return None
    return {"delay_ms": round((int(cli.min()) - int(mine[-1])) / 1e6, 3)}


def _held_start(t: int, holds: list[tuple[int, int]]) -> int | None:
    for start, end in holds:
        if start < t <= end + RELEASE_SLACK_NS:
            return start
    return None


def _tls_units(trace: Trace, flow: int, warnings: list[str]) -> tuple[list[dict[str, Any]], int]:
    """Application-data records of both directions: (units, base ts = client Finished)."""
    r = trace.records
    r = r[r["flow"] == flow]
    hs = trace.tls_handshake
    hs = hs[hs["flow"] == flow]
    base: int | None = None
    if not hs.empty and pd.notna(hs["client_finished_ts_ns"].iloc[0]):
        base = int(hs["client_finished_ts_ns"].iloc[0])
    decrypted = r[r["status"] == "decrypted"]
    units: list[dict[str, Any]] = []
    if not decrypted.empty:
        app = r[(r["content_type"] == 23) & (r["status"] == "decrypted")]
        for d in ("c2s", "s2c"):
            plain = trace.plaintext(flow, d)
            pos = 0
            # plaintext() concatenates every decrypted application-data record in order
            for row in app[app["dir"] == d].itertuples():
                n = int(row.plaintext_len)
                units.append(
                    {
                        "dir": d,
                        "ts": int(row.first_ts_ns),
                        "ts_last": int(row.last_ts_ns),  # readable from then on
                        "len": n,
                        "data": plain[pos : pos + n],
                    }
                )
                pos += n
    else:
        warnings.append(
            "no TLS keys for this flow: the replay writes same-size filler, and the server's "
            "session tickets cannot be told from data (each is replayed as a unit)"
        )
        outer = r[r["outer_content_type"] == 23]
        for d in ("c2s", "s2c"):
            rows = outer[outer["dir"] == d]
            # TLS 1.3: the client's first encrypted record is its Finished, the server's
            # encrypted records before the client's Finished are its handshake flight
            if base is not None:  # TLS 1.3: encrypted handshake records come before it
                rows = rows[rows["first_ts_ns"] > base]
            if not rows.empty and int(rows["length"].iloc[-1]) == CLOSE_NOTIFY_LEN:
                rows = rows.iloc[:-1]  # the direction's last record: its close_notify
            for row in rows.itertuples():
                n = max(0, int(row.length) - TLS13_OVERHEAD)
                units.append(
                    {
                        "dir": d,
                        "ts": int(row.first_ts_ns),
                        "ts_last": int(row.last_ts_ns),
                        "len": n,
                        "data": None,
                    }
                )
    if base is None:
        raise ReplayError(f"flow {flow}: no TLS handshake in the capture")
    return units, base


def _tickets_delay_ms(trace: Trace, flow: int, base_ts: int, legs: dict[str, float]) -> float:
    """How long after the client's Finished the server wrote its NewSessionTickets (the
    first decrypted handshake record it sent after it, less the round trip capture point ↔
    server), when that is more than :data:`TICKETS_DELAY_MIN_MS`: the replay's server
    sends them that late (they move the client's first ACKs, and with them the server's
    congestion-window flights).  0 without keys or tickets."""
    r = trace.records
    r = r[(r["flow"] == flow) & (r["dir"] == "s2c") & (r["status"] == "decrypted")]
    r = r[(r["content_type"] == 22) & (r["first_ts_ns"] > base_ts)]
    if r.empty:
        return 0.0
    delay = (int(r["first_ts_ns"].min()) - base_ts) / 1e6 - legs["server"]
    return round(delay, 3) if delay > TICKETS_DELAY_MIN_MS else 0.0


def _tcp_unit(stream: Any, d: str, ts: int, start: int, end: int) -> dict[str, Any]:
    """A unit over stream bytes [start, end); filler when they were not captured."""
    p0, p1 = stream.at(start), stream.at(end - 1)
    if p0 is None or p1 is None or p1 - p0 != end - start - 1:  # a hole inside
        return {"dir": d, "ts": ts, "len": end - start, "data": None}
    data = bytes(stream[p0 : p1 + 1])
    return {"dir": d, "ts": ts, "len": end - start, "data": data}


def _tcp_units(trace: Trace, flow: int, segments: pd.DataFrame) -> list[dict[str, Any]]:
    """PSH-terminated runs of new data, one unit per run.

    Retransmissions, zero-window probes and keep-alives carry no new bytes (a probe sits at
    snd_una − 1: counted, it added a byte and started a run at the probe's time)."""
    units: list[dict[str, Any]] = []
    old = ("retransmission", "zero_window_probe", "keep_alive")
    for d in ("c2s", "s2c"):
        seg = segments[(segments["dir"] == d) & ~segments["kind"].isin(old)]
        seg = seg.sort_values("offset", kind="stable")
        stream = trace.stream(flow, d)
        start: int | None = None
        ts = 0
        for row in seg.itertuples():
            if start is None:
                start, ts = int(row.offset), int(row.ts_ns)
            if bool(row.psh) or bool(row.fin):
                end = int(row.offset) + int(row.length)
                if end > start:
                    units.append(_tcp_unit(stream, d, ts, start, end))
                start = None
        if start is not None:
            row = seg.iloc[-1]
            units.append(_tcp_unit(stream, d, ts, start, int(row["offset"]) + int(row["length"])))
    return units


def ready_times(
    units: list[dict[str, Any]],
    holds: dict[str, list[tuple[int, int]]],
    rate_mbit: float | None = None,
    legs: dict[str, float] | None = None,
) -> list[int]:
    """When each unit was written (capture clock): its wire time unless a hold released it.

    Behind a bottleneck of ``rate_mbit``, a unit that follows its end's previous unit
    within :data:`QUEUE_SLACK` × that unit's serialisation time (+ 1 ms) was queued behind
    it: it was written with it (the application wrote ahead; the link paced it), or as
    soon as its trigger — the peer's latest unit, plus the round trip between the
    capture point and this end (``legs``, ms) — could have reached it.

    A held unit was written between the hold's start and its release.  Within a *turn*
    (consecutive units of one end, no peer unit between), held units are placed back from
    the turn's next unheld unit at the end's cadence (the median gap between its unheld
    consecutive units), clamped to [hold start, release]; with no cadence or no later
    unheld unit, at the hold's start.  Times never go backwards within an end.
    """
    n = len(units)
    held = [_held_start(u["ts"], holds[u["dir"]]) for u in units]
    gaps: dict[str, list[int]] = {"c2s": [], "s2c": []}
    for i in range(1, n):
        a, b = units[i - 1], units[i]
        if a["dir"] == b["dir"] and held[i] is None and held[i - 1] is None:
            gaps[b["dir"]].append(b["ts"] - a["ts"])
    cadence = {
        d: (sorted(g)[len(g) // 2] if g and sorted(g)[len(g) // 2] > RELEASE_SLACK_NS else None)
        for d, g in gaps.items()
    }
    ready = [int(u["ts"]) for u in units]
    i = 0
    while i < n:
        if held[i] is None:
            i += 1
            continue
        j = i  # the run of held units [i, j) within one turn
        while j < n and held[j] is not None and units[j]["dir"] == units[i]["dir"]:
            j += 1
        d = units[i]["dir"]
        nxt = j if j < n and units[j]["dir"] == d else None
        for k in range(j - 1, i - 1, -1):
            start = int(held[k] or 0)
            est = start
            step = cadence[d]
            if nxt is not None and step is not None:
                est = units[nxt]["ts"] - (nxt - k) * step
            ready[k] = min(int(units[k]["ts"]), max(start, est))
        i = j
    if rate_mbit:
        prev: dict[str, int] = {}  # the end's previous unit
        trigger: dict[str, int] = {}  # when the peer's latest unit could have reached it
        for k, b in enumerate(units):
            d = b["dir"]
            if d in prev:
                a = units[prev[d]]
                serial_ns = (a["len"] + HEADER_BYTES) * 8 / (rate_mbit * 1e6) * 1e9
                if b["ts"] - a["ts"] <= QUEUE_SLACK * serial_ns + RELEASE_SLACK_NS:
                    ready[k] = min(ready[k], max(ready[prev[d]], trigger.get(d, 0)))
            prev[d] = k
            other = "s2c" if d == "c2s" else "c2s"
            leg_ms = (legs or {}).get("server" if other == "s2c" else "client", 0.0)
            trigger[other] = int(b["ts"] + leg_ms * 1e6)
    last: dict[str, int] = {}
    for k, u in enumerate(units):
        ready[k] = max(ready[k], last.get(u["dir"], ready[k]))
        last[u["dir"]] = ready[k]
    return ready


def _serial_ns(nbytes: int, rate_mbit: float) -> float:
    """How long ``nbytes`` of payload (and a header a segment) take at ``rate_mbit``."""
    return (nbytes + HEADER_BYTES * -(-nbytes // MSS_GUESS)) * 8 / (rate_mbit * 1e6) * 1e9


def window_held(
    units: list[dict[str, Any]], ready: list[int], closed: dict[str, list[tuple[int, int]]]
) -> list[int]:
    """Write times with the units a closed receive window held moved back to its closing.

    ``closed``: per direction, the (start, end) of each ``zero_window`` finding.  Linux
    probes a zero window only with data queued, so what the sender sent between the
    window's closing and its reopening (+ :data:`RELEASE_SLACK_NS`: the reopening ACK
    releases it at once) was written by then: the replay's sender must have it queued when
    the window closes, or the window never closes (its writes would follow the reader,
    as the capture's wire times do).  Earlier units keep their times (never later ones).

    The same for a ``receiver_limited`` finding (a slow reader's window never closes, but
    the sender waited at its edge): the PSH-terminated runs it sent at the reader's
    cadence were queued when the limited stretch began.  Written at their wire times
    instead, the replay's server was paced twice — by the script's delays and by the
    replay's own slow reader — and when the two drifted out of phase it paused with the
    window open (a faithful replay of fixtures/receiver_limited: 7 of 16 pauses at the
    edge, under the detector's half, in 1 of 8 runs; the original: 11 of 13)."""
    out = list(ready)
    for k, u in enumerate(units):
        for start, end in closed.get(u["dir"], ()):
            if start < u["ts"] <= end + RELEASE_SLACK_NS:
                before = [out[i] for i in range(k) if units[i]["dir"] == u["dir"]]
                at = before[-1] if before and before[-1] < start else start
                out[k] = min(out[k], at)
    return out


def derive(trace: Trace, flow: int) -> Plan:
    """The replay plan of ``flow`` (see the module doc); ReplayError when impossible."""
    row = _flow_row(trace, flow)
    if row["proto"] == "udp":
        return derive_quic(trace, flow, row)
    if row["proto"] != "tcp":
        raise ReplayError(f"flow {flow} is {row['proto']}: only TCP and QUIC flows replay")
    if not bool(row["handshake"]) or pd.isna(row["rtt_ms"]):
        raise ReplayError(
            f"flow {flow}: no TCP handshake in the capture: the RTT and the stream starts "
            "are unknown, a faithful replay is impossible"
        )
    if int(row["c2s_packets"]) == 0 or int(row["s2c_packets"]) == 0:
        raise ReplayError(f"flow {flow}: the capture shows one direction only")
    warnings: list[str] = []
    vantage = str(row["vantage"])
    seg = trace.segments
    seg = seg[seg["flow"] == flow]
    port = int(row["server_port"])
    hs = trace.tls
    r = trace.records
    tls = bool((r["flow"] == flow).any())
    alpn = None
    version = "TLSv1.3"
    if tls and hs is not None and not hs.empty and "flow" in hs.columns:
        h = hs[hs["flow"] == flow]
        if not h.empty:
            if "alpn" in h.columns and pd.notna(h["alpn"].iloc[0]):
                alpn = str(h["alpn"].iloc[0])
            elif pd.notna(h["alpn_offered"].iloc[0]) and "h2" in str(h["alpn_offered"].iloc[0]):
                # TLS 1.3 encrypts the server's choice: without keys, an offer of h2 may
                # have been taken
                alpn = "h2"
            if str(h["version"].iloc[0]) == "TLS 1.2":
                version = "TLSv1.2"
    if alpn not in (None, "http/1.1", "h2"):
        raise ReplayError(f"flow {flow}: ALPN {alpn!r}: only HTTP/1.1, HTTP/2 and plain TCP replay")
    if alpn == "h2":
        warnings.append(
            "HTTP/2: the frames are replayed as captured, each TLS record at its time after "
            "its trigger (no HTTP/2 state machine: flow control and priorities act only "
            "through the wire order the capture shows)"
        )
    rtt_ms = float(row["rtt_ms"])
    legs = {
        "server": float(row["server_leg_ms"]) if pd.notna(row["server_leg_ms"]) else 0.0,
        "client": float(row["client_leg_ms"]) if pd.notna(row["client_leg_ms"]) else 0.0,
    }
    if tls:
        units, base_ts = _tls_units(trace, flow, warnings)
        base_delay_ms = 0.0  # the client's Finished: both ends' handshake is done by then
    else:
        units = _tcp_units(trace, flow, seg)
        base_ts = int(row["first_ts_ns"])  # the SYN
        base_delay_ms = rtt_ms  # the client can write one RTT after its SYN
    if not units:
        raise ReplayError(f"flow {flow}: no application data to replay")
    if alpn == "h2" and any(u["data"] is None for u in units):
        raise ReplayError(
            f"flow {flow}: HTTP/2 without TLS keys: same-size filler is not HTTP/2, the "
            "replay would not be one (give --keylog)"
        )
    units.sort(key=lambda u: (u["ts"], 0 if u["dir"] == "c2s" else 1))
    f = trace.findings
    f = f[f["flow"] == flow] if not f.empty else f
    holds: dict[str, list[tuple[int, int]]] = {"c2s": [], "s2c": []}
    closed: dict[str, list[tuple[int, int]]] = {"c2s": [], "s2c": []}  # zero windows
    kinds_by_dir: dict[str, set[str]] = {"c2s": set(), "s2c": set()}
    for fr in f.itertuples():
        if fr.dir in holds:
            kinds_by_dir[str(fr.dir)].add(str(fr.kind))
            cause = fr.details.get("cause") if isinstance(fr.details, dict) else None
            if cause in ("nagle", "nagle_delayed_ack"):  # e.g. records coalesced by Nagle
                kinds_by_dir[str(fr.dir)].add(str(cause))
            if fr.kind in WINDOW_HELD_KINDS and pd.notna(fr.t_start_ns) and pd.notna(fr.t_end_ns):
                closed[str(fr.dir)].append((int(fr.t_start_ns), int(fr.t_end_ns)))
            if fr.kind in HOLD_KINDS and pd.notna(fr.t_start_ns) and pd.notna(fr.t_end_ns):
                holds[str(fr.dir)].append((int(fr.t_start_ns), int(fr.t_end_ns)))
            elif cause == "cwnd" and pd.notna(fr.t_end_ns):
                # records that waited for the congestion window were written right after
                # the end's previous unit (back to back), not when the window opened
                before = [u["ts"] for u in units if u["dir"] == fr.dir and u["ts"] < fr.t_end_ns]
                if before:
                    holds[str(fr.dir)].append((int(before[-1]) - 1, int(fr.t_end_ns)))
    script_units: list[dict[str, Any]] = []
    ready_prev: dict[str, int | None] = {"client": None, "server": None}
    needs_prev = {"client": 0, "server": 0}
    totals = {"client": 0, "server": 0}  # bytes of each end's units so far (script order)
    written: dict[str, list[tuple[int, int]]] = {"client": [], "server": []}  # (ts, total)
    through = {"client": 0, "server": 0}  # when the end's previous unit left the bottleneck
    prev_side: str | None = None
    prev_ts = base_ts
    rate_mbit = _bottleneck_mbit(trace.packets, flow, vantage)
    readies = window_held(units, ready_times(units, holds, rate_mbit, legs), closed)
    for u, ready in zip(units, readies, strict=True):
        side = "client" if u["dir"] == "c2s" else "server"
        other = "server" if side == "client" else "client"
        # what of the peer's could this end have read when it wrote the unit?  Its units
        # whose last byte was seen at the capture point a round trip (capture ↔ this end)
        # earlier (a record is readable once whole); a later one
        # crossed this unit in flight (HTTP/2: both ends write at once) — waiting for it,
        # as the script's order alone would, delays the unit by a round trip
        tol_ms = max(CROSS_TOL_MS, legs[side] * CROSS_TOL_FRACTION)
        reach = ready - (legs[side] - tol_ms) * 1e6
        seen = [(ts, tot) for ts, tot in written[other] if ts <= reach]
        # (only for a unit that left when written: a held one's write time is an estimate)
        crossed = ready == u["ts"] and bool(written[other]) and len(seen) < len(written[other])
        needs = max(needs_prev[side], seen[-1][1] if seen else 0) if crossed else totals[other]
        own = ready_prev[side]
        if crossed:
            peer_base = seen[-1][0] + legs[side] * 1e6 if seen else None
            if own is not None and (peer_base is None or own >= peer_base):
                after, delay = "self", (ready - own) / 1e6
            elif seen:
                after, delay = "peer", (ready - seen[-1][0]) / 1e6 - legs[side]
            else:  # nothing of the peer's yet: after this end's handshake
                after = "self"
                leg = legs["server"] if side == "server" else 0.0
                delay = (ready - base_ts) / 1e6 - base_delay_ms - leg
        elif prev_side == side and own is not None:
            after = "self"
            delay = (ready - own) / 1e6
        elif prev_side is None:  # the first unit: after this end's handshake
            after = "self"
            leg = legs["server"] if side == "server" else 0.0
            delay = (ready - base_ts) / 1e6 - base_delay_ms - leg
        else:
            after = "peer"
            delay = (ready - prev_ts) / 1e6 - legs[side]
        data = u["data"]
        script_units.append(
            {
                "side": side,
                "after": after,
                "delay_ms": round(max(0.0, delay), 3),
                "len": int(u["len"]),
                "needs": needs,  # the peer's bytes read before writing it
                "data": None if data is None else base64.b64encode(bytes(data)).decode(),
            }
        )
        ready_prev[side] = ready
        needs_prev[side] = needs
        totals[side] += int(u["len"])
        last = int(u.get("ts_last", u["ts"]))
        if rate_mbit:
            # behind the bottleneck the unit is readable only once it is through it: after
            # the bytes queued ahead of it (a sender's capture sees it leave, not arrive)
            serial_ns = _serial_ns(int(u["len"]), rate_mbit)
            last = max(last, int(max(u["ts"], through[side]) + serial_ns))
            through[side] = last
        written[side].append((last, totals[side]))
        prev_side, prev_ts = side, u["ts"]
    sides: dict[str, dict[str, Any]] = {}
    for side, d in (("client", "c2s"), ("server", "s2c")):
        k = kinds_by_dir[d]
        sides[side] = {
            "nodelay": not (k & {"nagle", "nagle_delayed_ack"}),
            "cork": "tcp_cork" in k,
            "split_records": "tls_record_split_write" in k,
            "coalesce_ms": 0.0,
            "record_size": None,
            # a server that queued a response behind another in its socket buffer had the
            # room to write ahead: the replay gives it as much (Linux's default wmem max)
            "sndbuf": SNDBUF_WRITE_AHEAD if "h2_send_buffer_hol" in k else None,
            "notsent_lowat": None,
        }
    peer = _peer_path(trace.packets, seg, flow, vantage, rtt_ms)
    drops = {}
    for d, sender in (("c2s", "client"), ("s2c", "server")):
        back = trace.packets
        back = back[(back["flow"] == flow) & (back["dir"] != d)]
        drops[d] = _drops(
            seg[seg["dir"] == d].sort_values("frame"),
            vantage == sender,
            back,
            rtt_ms,
            silent=peer["window"] if peer["dir"] not in (None, d) else None,
        )
    syn_drops = _syn_drops(trace.packets, flow, vantage)
    sysctls = {
        role: {"net.ipv4.tcp_slow_start_after_idle": 0}
        for role, d in (("cli", "c2s"), ("srv", "s2c"))
        if _no_restart_after_idle(seg[seg["dir"] == d], rtt_ms)
    }
    if peer["retries"] is not None:  # the sender gave up after as many timer expiries
        sysctls.setdefault("srv" if vantage == "server" else "cli", {})["net.ipv4.tcp_retries2"] = (
            peer["retries"]
        )
    pauses, rcvbuf = _read_pauses(trace.packets, f, flow, rtt_ms)
    for side, size in rcvbuf.items():
        sides[side]["rcvbuf"] = size
    for side, pace in _read_pace(f).items():
        sides[side]["read_pace"] = pace
    close = _client_close(trace, flow, script_units, units)
    script = {
        "pauses": pauses,
        "tickets_delay_ms": _tickets_delay_ms(trace, flow, base_ts, legs) if tls else 0.0,
        "tls": tls,
        "tls_version": version,
        "alpn": alpn,
        "sides": sides,
        "units": script_units,
        "source": {
            "flow": flow,
            "vantage": vantage,
            "rtt_ms": rtt_ms,
            # the client's last write (at the capture point): keep-alive times from it
            "client_last_write_ns": max(
                (u["ts"] for u in units if u["dir"] == "c2s"), default=None
            ),
            "server_last_write_ns": max(
                (u["ts"] for u in units if u["dir"] == "s2c"), default=None
            ),
        },
    }
    if close is not None:
        script["client_close"] = close
    return Plan(
        flow=flow,
        vantage=vantage,
        tls=tls,
        port=port,
        delay_ms=rtt_ms / 2,
        drop_c2s=drops["c2s"],
        drop_s2c=drops["s2c"],
        drop_syn_c2s=syn_drops["c2s"],
        drop_syn_s2c=syn_drops["s2c"],
        sysctls=sysctls,
        rate_mbit=rate_mbit,
        blackhole_after=(
            {} if peer["blackhole_after"] is None else {peer["dir"]: peer["blackhole_after"]}
        ),
        stall_after={} if peer["stall_after"] is None else {peer["dir"]: peer["stall_after"]},
        stall_ms=peer["stall_ms"],
        script=script,
        warnings=warnings,
        cc=PACING_CC if "h2_send_buffer_hol" in kinds_by_dir["s2c"] else None,
    )


# ---------------------------------------------------------------------- QUIC / HTTP/3

# QUIC units (see derive_quic): new STREAM data of one direction is one write unless it
# followed the direction's previous new data within QUIC_BURST_MS (aioquic paces a burst
# over a few ms: 0.1–6.5 ms between its packets on the lab fixtures), or within
# QUIC_CLOCK_MS after a packet of the peer that carried no data (an ACK or a credit
# frame released it: the congestion or flow-control window) — always a new write after
# the peer's data (a request).
QUIC_BURST_MS = 10.0
# the lab's certificate (certs.make_self_signed): its Certificate message is 368 B with one
# name, 6 129 B with 250 more (h3_small_certificate, h3_amplification_limit): 23 B a name
LAB_CERT_BYTES = 368
LAB_SAN_BYTES = (6129 - 368) / 250
QUIC_CLOCK_MS = 3.0


def _quic_vantage_rtt(trace: Trace, flow: int) -> tuple[str, float]:
    """(vantage, RTT ms) of a QUIC connection.

    Vantage: the Initial → server Initial interval is the round trip at the client and
    the server's processing at the server; the server Initial → client Finished interval
    the other way round.  RTT: the smallest ACK sample of packets sent at the vantage —
    the ACK's arrival minus the acknowledged packet's sending minus the peer's stated
    ACK delay (1-RTT: ``ack_delay × 2^ack_delay_exponent`` µs)."""
    hs = trace.quic_handshake
    hs = hs[hs["flow"] == flow]
    if hs.empty or pd.isna(hs["server_initial_ts_ns"].iloc[0]):
        raise ReplayError(f"flow {flow}: no QUIC handshake in the capture")
    h = hs.iloc[0]
    a = int(h["server_initial_ts_ns"]) - int(h["client_initial_ts_ns"])
    fin = h["client_finished_ts_ns"]
    if pd.isna(fin):
        raise ReplayError(f"flow {flow}: the QUIC handshake did not finish in the capture")
    b = int(fin) - int(h["server_initial_ts_ns"])
    vantage = "client" if a > b else "server"
    mine = "c2s" if vantage == "client" else "s2c"
    pk = trace.quic_packets
    pk = pk[(pk["flow"] == flow) & (pk["dir"] == mine) & pk["packet_number"].notna()]
    sent = dict(zip(pk["packet_number"].astype("int64"), pk["ts_ns"].astype("int64"), strict=False))
    q = trace.quic_frames
    acks = q[(q["flow"] == flow) & (q["dir"] != mine) & (q["type"] == "ACK")]
    samples = []
    for r in acks.itertuples():
        t = sent.get(int(r.largest_acknowledged)) if pd.notna(r.largest_acknowledged) else None
        if t is None:
            continue
        delay_us = int(r.ack_delay) * 8 if r.space == "application" and pd.notna(r.ack_delay) else 0
        samples.append((int(r.ts_ns) - t) / 1e6 - delay_us / 1e3)
    good = [s for s in samples if s > 0]
    rtt = min(good) if good else max(a, b) / 1e6
    return vantage, rtt


def _quic_drops(trace: Trace, flow: int, vantage: str) -> dict[str, list[int]]:
    """Lost datagrams as the forwarder's 1-based datagram index of their direction.

    At the sender: a packet whose STREAM data was sent again (a frame marked as a
    retransmission covering the same stream offset) and that the peer never acknowledged
    (a probe's copy of data that had arrived is no loss).  At the receiver: a packet number
    that never arrived (aioquic numbers every space from one counter; a gap is a loss),
    placed after the datagrams that came before it."""
    pk = trace.quic_packets
    pk = pk[(pk["flow"] == flow) & pk["packet_number"].notna() & pk["datagram"].notna()]
    q = trace.quic_frames
    q = q[(q["flow"] == flow) & (q["type"] == "STREAM")]
    out: dict[str, list[int]] = {"c2s": [], "s2c": []}
    for d, sender in (("c2s", "client"), ("s2c", "server")):
        p = pk[pk["dir"] == d].sort_values("ts_ns", kind="stable")
        grams = list(dict.fromkeys(p["datagram"].astype("int64")))  # in order, distinct
        index = {g: i + 1 for i, g in enumerate(grams)}
        if vantage == sender:
            f = q[q["dir"] == d]
            first: dict[tuple[int, int], int] = {}
            lost: set[int] = set()
            for r in f.sort_values("ts_ns", kind="stable").itertuples():
                key = (int(r.stream_id), int(r.offset))
                if bool(r.retransmission) and key in first:
                    lost.add(first[key])
                first.setdefault(key, int(r.packet_number))
            acks = trace.quic_frames
            acks = acks[(acks["flow"] == flow) & (acks["dir"] != d) & (acks["type"] == "ACK")]
            acked: set[int] = set()
            for ranges in acks["ack_ranges"]:
                for lo, hi in ranges or ():
                    acked.update(range(int(lo), int(hi) + 1))
            lost -= acked  # acknowledged after all: the copy was spurious (a probe)
            gram_of = dict(
                zip(p["packet_number"].astype("int64"), p["datagram"].astype("int64"), strict=False)
            )
            out[d] = sorted(index[gram_of[n]] for n in lost if n in gram_of)
        else:
            pns = sorted(set(p["packet_number"].astype("int64")))
            if not pns:
                continue
            missing = sorted(set(range(pns[0], pns[-1] + 1)) - set(pns))
            top = p.groupby("datagram", sort=False)["packet_number"].max()
            for k, n in enumerate(missing):
                before = sum(1 for g in grams if int(top[g]) < n)
                out[d].append(before + 1 + k)
    return out


def _quic_units(trace: Trace, flow: int, vantage: str, rtt_ms: float) -> list[dict[str, Any]]:
    """Write units of both directions: new STREAM bytes, grouped (see QUIC_BURST_MS).

    Only data on bidirectional streams (requests and responses) starts a new unit of the
    other direction: the HTTP/3 control and QPACK streams (unidirectional) answer, they
    do not trigger.

    At the receiver's vantage a piece that fills a hole of its stream (its first copy was
    lost) was written before the pieces that overtook it: it is placed halfway between
    the arrivals of the stream's pieces on either side of the hole."""
    q = trace.quic_frames
    q = q[q["flow"] == flow].sort_values(["ts_ns", "frame"], kind="stable")
    streams: dict[tuple[int, str], bytes] = {}
    peer_ctl: dict[str, list[int]] = {"c2s": [], "s2c": []}  # peer packets without data
    with_data = {(str(d), int(k)) for d, k in q[q["type"] == "STREAM"][["dir", "packet"]].values}
    seen_pkts: set[tuple[str, int]] = set()
    # (t_eff, t, dir, sid, bytes, fin, {"stop"|"reset": code} or None)
    pieces: list[tuple[int, int, str, int, bytes, bool, dict[str, int] | None]] = []
    stopped: set[tuple[str, str, int]] = set()
    arrivals: dict[tuple[int, str], list[tuple[int, int]]] = {}  # stream → [(end, t)]
    for r in q.itertuples():
        d = str(r.dir)
        other = "s2c" if d == "c2s" else "c2s"
        key = (d, int(r.packet))
        if key not in seen_pkts:
            seen_pkts.add(key)
            if key not in with_data and r.space == "application":
                peer_ctl[other].append(int(r.ts_ns))
        if r.type in ("STOP_SENDING", "RESET_STREAM") and pd.notna(r.stream_id):
            what = "stop" if r.type == "STOP_SENDING" else "reset"
            if (d, what, int(r.stream_id)) not in stopped:  # once (a resent frame: no)
                stopped.add((d, what, int(r.stream_id)))
                t = int(r.ts_ns)
                code = int(r.error_code) if pd.notna(r.error_code) else 0
                pieces.append((t, t, d, int(r.stream_id), b"", False, {what: code}))
            continue
        if r.type != "STREAM" or pd.isna(r.new_bytes) or int(r.new_bytes) <= 0:
            continue
        sid = int(r.stream_id)
        if (sid, d) not in streams:
            try:
                streams[(sid, d)] = bytes(trace.quic_stream(flow, sid, d)[:])
            except KeyError:
                streams[(sid, d)] = b""
        data = streams[(sid, d)]
        off, n, new = int(r.offset), int(r.length), int(r.new_bytes)
        if off + n > len(data):
            raise ReplayError(f"flow {flow}: QUIC stream {sid} has bytes missing from the capture")
        piece = data[off + n - new : off + n]  # only what was not sent before
        fin = bool(r.fin) if pd.notna(r.fin) else False
        t = t_eff = int(r.ts_ns)
        seen = arrivals.setdefault((sid, d), [])
        top = max((e for e, _ in seen), default=0)
        if off < top:  # fills a hole: written between the pieces around it
            before = [ts for e, ts in seen if e <= off]
            after = [ts for e, ts in seen if e > off]
            if before and after:
                t_eff = (max(before) + min(after)) // 2
        seen.append((off + n, t))
        pieces.append((t_eff, t, d, sid, piece, fin, None))
    pieces.sort(key=lambda x: x[0])
    units: list[dict[str, Any]] = []
    last: dict[str, dict[str, Any]] = {}
    answered: set[tuple[str, int]] = set()
    peer_data_since: dict[str, bool] = {"c2s": False, "s2c": False}
    for t_eff, t, d, sid, piece, fin, extra in pieces:
        other = "s2c" if d == "c2s" else "c2s"
        prev = last.get(d)
        merge = False
        # the first bytes an end writes on a request stream the peer opened answer that
        # request: a write of their own, never part of an earlier burst
        answer = not sid & 0x2 and (sid & 0x1) == (d == "c2s") and (d, sid) not in answered
        answered.add((d, sid))
        if prev is not None and not peer_data_since[d] and t_eff == t and not answer:
            if t - prev["t_eff_last"] <= QUIC_BURST_MS * 1e6:
                merge = True
            else:
                # released by an ACK / credit of the peer's (seen a round trip before it
                # at the receiver's vantage)
                shift = 0.0 if vantage == ("server" if d == "s2c" else "client") else rtt_ms
                lo = t - (shift + QUIC_CLOCK_MS) * 1e6
                hi = t - (shift - QUIC_CLOCK_MS) * 1e6 if shift else t
                merge = any(lo <= x <= hi for x in peer_ctl[d])
        if merge and prev is not None:
            prev["pieces"].append([sid, piece, fin, extra])
            prev["len"] += len(piece) or (1 if extra else 0)
            prev["ts_last"] = max(prev["ts_last"], t)
            prev["t_eff_last"] = t_eff
        else:
            u: dict[str, Any] = {
                "dir": d,
                "ts": t_eff,
                "ts_last": t,  # its last byte readable from then on
                "t_eff_last": t_eff,
                # a STOP_SENDING / RESET_STREAM counts as one byte: the peer can wait for it
                "len": len(piece) or (1 if extra else 0),
                "pieces": [[sid, piece, fin, extra]],
                "marks": [],  # (arrival, unit bytes so far) after each request/response piece
            }
            units.append(u)
            last[d] = u
            peer_data_since[d] = False
        cur = prev if merge and prev is not None else units[-1]
        if not sid & 0x2:  # a request or response (bidirectional stream): a trigger
            peer_data_since[other] = True
            cur["marks"].append((t, cur["len"]))
    for u in units:  # consecutive pieces of one stream joined
        joined: list[list[Any]] = []
        for sid, piece, fin, extra in u["pieces"]:
            if joined and joined[-1][0] == sid and not joined[-1][2] and not extra:
                if not joined[-1][3]:
                    joined[-1][1] += piece
                    joined[-1][2] = fin
                    continue
            joined.append([sid, piece, fin, extra])
        u["pieces"] = joined
    return units


def _quic_transport(trace: Trace, flow: int) -> dict[str, dict[str, int]]:
    """Each end's receive limits from its transport parameters (what the replay's aioquic
    configures: max_data, max_stream_data, max_streams_bidi)."""
    t = trace.quic_tls
    t = t[t["flow"] == flow]
    out: dict[str, dict[str, int]] = {"client": {}, "server": {}}
    for side, d in (("client", "c2s"), ("server", "s2c")):
        rows = t[(t["dir"] == d) & t["initial_max_data"].notna()]
        if rows.empty:
            continue
        r = rows.iloc[0]
        local = (
            "initial_max_stream_data_bidi_local"
            if side == "client"
            else "initial_max_stream_data_bidi_remote"
        )
        for name, col in (
            ("max_data", "initial_max_data"),
            ("max_stream_data", local),
            ("max_streams_bidi", "initial_max_streams_bidi"),
        ):
            if pd.notna(r[col]):
                out[side][name] = int(r[col])
    return out


def _cert_extra_sans(trace: Trace, flow: int) -> int:
    """How many names to add to the lab's certificate for a Certificate message as large
    as the server's in the capture (it decides whether the server's first flight fits
    the 3 × anti-amplification budget, RFC 9000 §8.1)."""
    t = trace.quic_tls
    t = t[(t["flow"] == flow) & (t["name"] == "CERTIFICATE") & (t["dir"] == "s2c")]
    if t.empty or pd.isna(t["length"].iloc[0]):
        return 0
    return max(0, round((int(t["length"].iloc[0]) - LAB_CERT_BYTES) / LAB_SAN_BYTES))


def derive_quic(trace: Trace, flow: int, row: Any) -> Plan:
    """The replay plan of a QUIC (HTTP/3) connection: the path (RTT, lost datagrams), each
    end's writes of STREAM data (every stream: requests, responses, the HTTP/3 control and
    QPACK streams — the decrypted bytes as captured) timed from their trigger like TCP
    units, and each end's receive limits (transport parameters).  Needs keys."""
    q = trace.quic_packets
    q = q[q["flow"] == flow]
    if q.empty:
        raise ReplayError(f"flow {flow} is udp but not QUIC: only TCP and QUIC flows replay")
    if int(row["c2s_packets"]) == 0 or int(row["s2c_packets"]) == 0:
        raise ReplayError(f"flow {flow}: the capture shows one direction only")
    app = q[q["space"] == "application"]
    if app.empty or not app["decrypted"].fillna(False).astype(bool).any():
        raise ReplayError(
            f"flow {flow}: QUIC without keys: its streams cannot be read, the replay would "
            "not be one (give --keylog)"
        )
    t = trace.quic_tls
    t = t[(t["flow"] == flow) & (t["name"] == "CLIENT_HELLO")]
    if not t.empty and bool(t["pre_shared_key"].fillna(False).iloc[0]):
        warnings0 = ["a resumed connection: the replay makes a full handshake (no ticket)"]
    else:
        warnings0 = []
    vantage, rtt_ms = _quic_vantage_rtt(trace, flow)
    units = _quic_units(trace, flow, vantage, rtt_ms)
    if not units:
        raise ReplayError(f"flow {flow}: no application data to replay")
    hs = trace.quic_handshake
    base_ts = int(hs[hs["flow"] == flow]["client_finished_ts_ns"].iloc[0])
    legs = {
        "server": 0.0 if vantage == "server" else rtt_ms,
        "client": 0.0 if vantage == "client" else rtt_ms,
    }
    script_units: list[dict[str, Any]] = []
    totals = {"client": 0, "server": 0}
    written: dict[str, list[tuple[int, int]]] = {"client": [], "server": []}
    own: dict[str, int | None] = {"client": None, "server": None}
    for u in units:
        side = "client" if u["dir"] == "c2s" else "server"
        other = "server" if side == "client" else "client"
        tol_ms = max(CROSS_TOL_MS, legs[side] * CROSS_TOL_FRACTION)
        reach = u["ts"] - (legs[side] - tol_ms) * 1e6
        seen = [(ts, tot) for ts, tot in written[other] if ts <= reach]
        needs = seen[-1][1] if seen else 0
        peer_base = seen[-1][0] + legs[side] * 1e6 if seen else None
        mine = own[side]
        if mine is not None and (peer_base is None or mine >= peer_base):
            after, delay = "self", (u["ts"] - mine) / 1e6
        elif seen:
            after, delay = "peer", (u["ts"] - seen[-1][0]) / 1e6 - legs[side]
        else:  # the first: after this end's handshake
            after = "self"
            delay = (u["ts"] - base_ts) / 1e6 - (legs["server"] if side == "server" else 0.0)
        script_units.append(
            {
                "side": side,
                "after": after,
                "delay_ms": round(max(0.0, delay), 3),
                "len": int(u["len"]),
                "needs": int(needs),
                "pieces": [
                    [int(sid), base64.b64encode(piece).decode(), bool(fin)]
                    + ([extra] if extra else [])
                    for sid, piece, fin, extra in u["pieces"]
                ],
            }
        )
        # what the peer can wait for: each request/response piece, once it arrived
        written[side] += [(int(t), totals[side] + n) for t, n in u["marks"]]
        totals[side] += int(u["len"])
        own[side] = int(u["ts"])
    drops = _quic_drops(trace, flow, vantage)
    script = {
        "quic": True,
        "cert_extra_sans": _cert_extra_sans(trace, flow),
        "alpn": "h3",
        "transport": _quic_transport(trace, flow),
        "units": script_units,
        "source": {"flow": flow, "vantage": vantage, "rtt_ms": round(rtt_ms, 3)},
    }
    return Plan(
        flow=flow,
        vantage=vantage,
        tls=True,
        port=int(row["server_port"]),
        delay_ms=rtt_ms / 2,
        drop_c2s=drops["c2s"],
        drop_s2c=drops["s2c"],
        script=script,
        warnings=warnings0,
        quic=True,
    )


def remedied(plan: Plan, name: str, value: int | None) -> dict[str, Any]:
    """The plan's script with one remedy applied (a new dict; the plan is unchanged)."""
    script: dict[str, Any] = json.loads(json.dumps(plan.script))
    if name == "zero-rtt":
        if not script.get("quic") or "connections" not in script:
            raise ReplayError("remedy zero-rtt: needs several QUIC connections (a resumed one)")
        for c in script["connections"]:
            c["early_data"] = bool(c.get("resume"))
        return script
    if name in ("keep-alive", "session-tickets"):
        if "connections" not in script:
            raise ReplayError(f"remedy {name}: needs several connections (--flow N --flow M …)")
        return _keep_alive(script) if name == "keep-alive" else _session_tickets(script)
    if "connections" in script:  # the rest: per connection
        for c in script["connections"]:
            c["script"] = remedied(dataclasses.replace(plan, script=c["script"]), name, value)
        return script
    quic_only = ("quic-window", "smaller-certificate")
    if script.get("quic") and name not in quic_only:
        raise ReplayError(f"remedy {name}: a TCP / HTTP/2 remedy, the flow is QUIC")
    sides = script.get("sides", {})
    for s in sides.values():
        if name == "nodelay":
            s["nodelay"] = True
        elif name == "uncork":
            s["cork"] = False
        elif name == "coalesce-writes":
            s["split_records"] = False
            s["coalesce_ms"] = COALESCE_MS
        elif name == "record-size":
            s["coalesce_ms"] = COALESCE_MS
            s["record_size"] = value
        elif name == "notsent-lowat":
            s["notsent_lowat"] = value
    if name == "notsent-lowat" and script.get("alpn") == "h2":
        _h2_answers_first(script["units"])
    if name in ("quic-window", "smaller-certificate") and not script.get("quic"):
        raise ReplayError(f"remedy {name}: the flow is not QUIC")
    if name == "quic-window":
        assert value is not None
        for limits in script["transport"].values():
            for key in ("max_data", "max_stream_data"):
                limits[key] = max(int(limits.get(key) or 0), value)
    if name == "smaller-certificate":
        script["cert_extra_sans"] = 0
    if name == "http3":
        if script.get("alpn") == "h2":
            return _h2_to_h3(script)
        return _h1_to_h3(script)
    if name == "h2-window":
        if script.get("alpn") != "h2":
            raise ReplayError("remedy h2-window: the flow is not HTTP/2")
        assert value is not None
        _h2_window(script, value)
    return script


def _h2_answers_first(units: list[dict[str, Any]]) -> None:
    """notsent-lowat on HTTP/2: a response whose request arrived while the server wrote a
    backlog goes ahead of the rest of that backlog (in place, in ``units``).

    In the capture the response's frames left after the backlog queued in the socket; the
    server wrote them right after the request came.  With TCP_NOTSENT_LOWAT the backlog
    stays in the server (poll says writable only below the mark), so the response is the
    next write (Cloudflare's point).  Moved only past whole DATA-only units (HPACK state
    and framing stay intact): a unit of whole frames that starts a response (HEADERS) of a
    stream whose request the server's run of writes follows."""
    heads: list[set[int]] = [set() for _ in units]
    data_only = [True] * len(units)
    bounds: dict[str, set[int]] = {}
    start_of: list[int] = [0] * len(units)
    for side in ("client", "server"):
        idx = [i for i, u in enumerate(units) if u["side"] == side]
        chunks = [base64.b64decode(units[i]["data"] or "") for i in idx]
        stream = b"".join(chunks)
        offs = np.cumsum([0] + [len(c) for c in chunks])
        for i, off in zip(idx, offs[:-1], strict=True):
            start_of[i] = int(off)
        frames = _h2_frames(stream, len(H2_PREFACE) if stream.startswith(H2_PREFACE) else 0)
        bounds[side] = {f[0] for f in frames} | {len(stream)}
        for off, kind, _flags, sid, _payload in frames:
            k = idx[int(np.searchsorted(offs, off, side="right")) - 1]
            if kind in (H2_HEADERS, 5, 9):  # HEADERS, PUSH_PROMISE, CONTINUATION: HPACK
                data_only[k] = False
                if kind == H2_HEADERS:
                    heads[k].add(sid)
    requested: dict[int, int] = {}
    i = 0
    while i < len(units):
        u = units[i]
        if u["side"] == "client":
            requested.update({sid: i for sid in heads[i]})
        elif (
            any(requested.get(sid) is not None for sid in heads[i])
            and start_of[i] in bounds["server"]
            and start_of[i] + int(u["len"]) in bounds["server"]
        ):
            c = max(requested[sid] for sid in heads[i] if sid in requested)
            run = range(c + 1, i)
            if (
                len(run) > 0
                and all(units[j]["side"] == "server" and data_only[j] for j in run)
                and start_of[c + 1] in bounds["server"]
            ):
                first = units[c + 1]
                moved = dict(u, after=first["after"], delay_ms=first["delay_ms"])
                moved["needs"] = first["needs"]
                units[c + 1] = dict(first, after="self", delay_ms=0.0)
                units[c + 1 : i + 1] = [moved, *units[c + 1 : i]]
                heads[c + 1 : i + 1] = [heads[i], *heads[c + 1 : i]]
                data_only[c + 1 : i + 1] = [data_only[i], *data_only[c + 1 : i]]
                start_of[c + 1 : i + 1] = [start_of[i], *start_of[c + 1 : i]]
                for sid in heads[c + 1]:
                    requested.pop(sid, None)
        i += 1


def _h2_frames(stream: bytes, start: int) -> list[tuple[int, int, int, int, bytes]]:
    """(offset, type, flags, stream id, payload) of each whole HTTP/2 frame of ``stream``
    from ``start`` (RFC 9113 §4.1); a truncated last frame is left out."""
    out = []
    off = start
    while off + 9 <= len(stream):
        n = int.from_bytes(stream[off : off + 3], "big")
        if off + 9 + n > len(stream):
            break
        sid = int.from_bytes(stream[off + 5 : off + 9], "big") & 0x7FFF_FFFF
        out.append((off, stream[off + 3], stream[off + 4], sid, stream[off + 9 : off + 9 + n]))
        off += 9 + n
    return out


def _h2_frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + sid.to_bytes(4, "big") + payload


def _all_units(script: dict[str, Any]) -> list[dict[str, Any]]:
    if "connections" in script:
        return [u for c in script["connections"] for u in c["script"]["units"]]
    return list(script["units"])


def _session_tickets(script: dict[str, Any]) -> dict[str, Any]:
    """``--remedy session-tickets``: every later connection resumes the TLS session of the
    one before (its ticket offered, the server accepting it)."""
    if not script["connections"][0]["script"].get("tls"):
        raise ReplayError("remedy session-tickets: the connections are not TLS")
    for c in script["connections"][1:]:
        c["resume"] = True
        c["server_resumes"] = True
    return script


def _keep_alive(script: dict[str, Any]) -> dict[str, Any]:
    """``--remedy keep-alive``: the connections' exchanges one after another on the first
    connection (HTTP/1.1 or plain TCP: the requests are sequential on one connection).

    A later connection's first client write follows the client's previous write by the
    time from that write to the later connection's SYN (when the application wanted the
    connection: its handshake is what keep-alive saves); the rest keeps its timing; what
    each end waits for adds the bytes of the connections before.  Connections that
    overlapped in time (a pool, a hedge) cannot share one HTTP/1.1 connection: refused."""
    conns = script["connections"]
    first = conns[0]["script"]
    if first.get("alpn") not in (None, "http/1.1"):
        raise ReplayError("remedy keep-alive: HTTP/1.1 or plain TCP only (h2 multiplexes)")
    if any(c["script"].get("client_close") for c in conns[:-1]):
        raise ReplayError("remedy keep-alive: a connection the client gave up is not reused")
    merged: list[dict[str, Any]] = []
    totals = {"client": 0, "server": 0}
    last_client_ms: float | None = None
    busy_until = 0.0
    for c in conns:
        units = c["script"]["units"]
        if c["start_ms"] < busy_until:
            raise ReplayError(
                "remedy keep-alive: the connections overlapped in time (several requests "
                "at once need several HTTP/1.1 connections)"
            )
        for i, u in enumerate(units):
            v = dict(u)
            other = "server" if u["side"] == "client" else "client"
            v["needs"] = int(u.get("needs", 0)) + totals[other]
            if merged and i == next(j for j, x in enumerate(units) if x["side"] == u["side"]):
                if u["side"] == "client" and last_client_ms is not None:
                    v["after"] = "self"
                    v["delay_ms"] = round(max(0.0, c["start_ms"] - last_client_ms), 3)
                elif u["side"] == "server" and v["after"] == "self":
                    v["after"] = "peer"  # the server answers the request, not its handshake
            merged.append(v)
        for side in ("client", "server"):
            totals[side] += sum(int(u["len"]) for u in units if u["side"] == side)
        last_client_ms = c["start_ms"] + float(c.get("last_client_ms") or 0.0)
        busy_until = c["start_ms"] + float(c.get("last_server_ms") or 0.0)
    out = dict(first)
    out["units"] = merged
    out.pop("client_close", None)
    last = conns[-1]["script"]
    if last.get("client_close"):
        out["client_close"] = last["client_close"]
    return out


def derive_many(trace: Trace, flows: Sequence[int]) -> Plan:
    """Several TCP connections replayed together: each flow's plan (:func:`derive`), each
    connection started as long after the first as in the capture (its SYN), a TLS
    connection whose ClientHello offered a session resuming the one before (accepted or
    refused by the server as in the capture).  Losses are not replayed across connections
    (the forwarder numbers the packets of a direction over all of them): refused."""
    plans = [derive(trace, f) for f in flows]
    if any(p.quic for p in plans):
        return _derive_many_quic(trace, flows, plans)
    if len({p.port for p in plans}) != 1:
        raise ReplayError("several flows: they must go to one server port")
    if len({p.vantage for p in plans}) != 1:
        raise ReplayError("several flows: seen from different vantages")
    for p in plans:
        if (
            p.drop_c2s
            or p.drop_s2c
            or p.drop_syn_c2s
            or p.drop_syn_s2c
            or p.blackhole_after
            or p.stall_after
        ):
            raise ReplayError(
                f"flow {p.flow}: losses on one of several connections are not replayed "
                "(replay it alone)"
            )
    fl = trace.flows.set_index("flow")
    tls = trace.tls
    t0 = int(fl.loc[flows[0], "first_ts_ns"])
    conns = []
    for f, p in zip(flows, plans, strict=True):
        h = tls[tls["flow"] == f] if tls is not None and not tls.empty else tls
        offered = bool(h["resumption_offered"].iloc[0]) if h is not None and not h.empty else False
        accepted = (
            bool(h["resumption_accepted"].iloc[0]) if h is not None and not h.empty else False
        )
        first = int(fl.loc[f, "first_ts_ns"])
        last_write = p.script["source"].get("client_last_write_ns")
        last_answer = p.script["source"].get("server_last_write_ns")
        conns.append(
            {
                "flow": int(f),
                "start_ms": round((first - t0) / 1e6, 3),
                "resume": offered,
                "server_resumes": accepted or not offered,
                # the client's last write, ms after this connection's SYN (keep-alive)
                "last_client_ms": 0.0
                if last_write is None
                else round((int(last_write) - first) / 1e6, 3),
                "last_server_ms": 0.0
                if last_answer is None
                else round((int(last_answer) - first) / 1e6, 3),
                "script": p.script,
            }
        )
    p0 = plans[0]
    sysctls: dict[str, dict[str, int]] = {}
    for p in plans:
        for role, kv in p.sysctls.items():
            sysctls.setdefault(role, {}).update(kv)
    warnings = [w for p in plans for w in p.warnings]
    return Plan(
        flow=int(flows[0]),
        vantage=p0.vantage,
        tls=p0.tls,
        port=p0.port,
        delay_ms=float(np.mean([p.delay_ms for p in plans])),
        drop_c2s=[],
        drop_s2c=[],
        sysctls=sysctls,
        rate_mbit=p0.rate_mbit if len({p.rate_mbit for p in plans}) == 1 else None,
        script={"connections": conns, "tls": p0.tls, "alpn": p0.script.get("alpn")},
        warnings=list(dict.fromkeys(warnings)),
        cc=next((p.cc for p in plans if p.cc), None),  # one pacing connection: all pace
    )


def _derive_many_quic(trace: Trace, flows: Sequence[int], plans: list[Plan]) -> Plan:
    """Several QUIC connections (one after another): each at its start; one whose
    ClientHello carried a pre-shared key resumes with the ticket the one before left, in
    0-RTT where it sent 0-RTT packets."""
    if not all(p.quic for p in plans):
        raise ReplayError("several flows: all TCP or all QUIC")
    for p in plans:
        if p.drop_c2s or p.drop_s2c:
            raise ReplayError(
                f"flow {p.flow}: losses on one of several connections are not replayed "
                "(replay it alone)"
            )
    fl = trace.flows.set_index("flow")
    t0 = int(fl.loc[flows[0], "first_ts_ns"])
    hello = trace.quic_tls
    hello = hello[hello["name"] == "CLIENT_HELLO"]
    pk = trace.quic_packets
    conns = []
    for f, p in zip(flows, plans, strict=True):
        h = hello[hello["flow"] == f]
        conns.append(
            {
                "flow": int(f),
                "start_ms": round((int(fl.loc[f, "first_ts_ns"]) - t0) / 1e6, 3),
                "resume": bool(h["pre_shared_key"].fillna(False).any()),
                # 0-RTT packets sent, not just offered (aioquic offers whenever it may)
                "early_data": bool(((pk["flow"] == f) & (pk["packet_type"] == "0rtt")).any()),
                "server_resumes": True,
                "script": p.script,
            }
        )
    p0 = plans[0]
    warnings = [w for p in plans for w in p.warnings if "full handshake" not in w]
    return Plan(
        flow=int(flows[0]),
        vantage=p0.vantage,
        tls=True,
        port=p0.port,
        delay_ms=float(np.mean([p.delay_ms for p in plans])),
        drop_c2s=[],
        drop_s2c=[],
        script={
            "connections": conns,
            "quic": True,
            "tls": True,
            "alpn": "h3",
            "cert_extra_sans": p0.script.get("cert_extra_sans", 0),
        },
        warnings=list(dict.fromkeys(warnings)),
        quic=True,
    )


def _h2_to_h3(script: dict[str, Any]) -> dict[str, Any]:
    """``--remedy http3``: an HTTP/2 script's requests and responses as HTTP/3 actions.

    Each unit keeps its side and timing; its frames become actions for aioquic's HTTP/3
    layer (:mod:`pcapkit.lab.reenact_quic`): HEADERS (+ CONTINUATION, HPACK-decoded in
    order per direction) → ``["headers", stream, [[name, value] …], end]``, DATA (padding
    removed) → ``["data", stream, bytes, end]``, RST_STREAM → ``["reset", stream, code]``;
    connection frames (SETTINGS, WINDOW_UPDATE, PING, PRIORITY, GOAWAY) have no part (HTTP/3
    has its own, aioquic's).  A frame belongs to the unit that holds its last byte.  HTTP/2
    stream n (client-initiated, odd) is QUIC stream 4 × (n − 1) / 2.  What an end waits for
    (``needs``) is counted as the receiver counts it: a header block or a reset as 1, DATA
    as its bytes — up to the same peer units as before.  QUIC limits: aioquic's defaults."""
    from hpack import Decoder

    from .lab.reenact import unit_bytes

    units = script["units"]
    actions: list[list[list[Any]]] = [[] for _ in units]
    for side in ("client", "server"):
        idx = [i for i, u in enumerate(units) if u["side"] == side]
        data = [unit_bytes(units[i]) for i in idx]
        ends = list(np.cumsum([len(d) for d in data]))
        stream = b"".join(data)
        decoder = Decoder()
        block: bytearray | None = None
        block_sid, block_end = 0, False
        start = len(H2_PREFACE) if stream.startswith(H2_PREFACE) else 0
        for off, kind, flags, sid, payload in _h2_frames(stream, start):
            k = int(np.searchsorted(ends, off + 9 + len(payload) - 1, side="right"))
            act = actions[idx[k]]
            qsid = 4 * ((sid - 1) // 2)
            if kind in (0x0, 0x1) and flags & 0x8:  # PADDED: pad length first, padding last
                pad = payload[0]
                payload = payload[1 : len(payload) - pad]
            if kind == 0x0 and sid % 2:
                act.append(["data", qsid, base64.b64encode(payload).decode(), bool(flags & 0x1)])
            elif kind == 0x1 and sid % 2:
                if flags & 0x20:  # PRIORITY: 5 bytes before the block
                    payload = payload[5:]
                block, block_sid, block_end = bytearray(payload), sid, bool(flags & 0x1)
            elif kind == 0x9 and block is not None:
                block += payload
            elif kind == 0x3 and sid % 2:
                act.append(["reset", qsid, int.from_bytes(payload[:4], "big")])
            if block is not None and kind in (0x1, 0x9) and flags & 0x4:  # END_HEADERS
                headers = [
                    [base64.b64encode(n).decode(), base64.b64encode(v).decode()]
                    for n, v in decoder.decode(bytes(block), raw=True)
                ]
                act.append(["headers", 4 * ((block_sid - 1) // 2), headers, block_end])
                block = None
    return _as_h3(script, actions, "h2")


# HTTP/1.1 header fields with no place in HTTP/3 (RFC 9114 §4.2: connection-specific)
H1_HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"upgrade",
    b"te",
    b"host",
}


def _h1_messages(stream: bytes, request: bool) -> list[dict[str, Any]]:
    """HTTP/1.1 messages of one direction: head end offset, fields, and body pieces
    ``(stream offset, bytes)`` (de-chunked; Content-Length, chunked, or to the end)."""
    out: list[dict[str, Any]] = []
    off = 0
    while off < len(stream):
        end = stream.find(b"\r\n\r\n", off)
        if end < 0:
            break
        lines = stream[off:end].split(b"\r\n")
        first = lines[0].split(b" ", 2)
        fields = []
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields.append((name.strip().lower(), value.strip()))
        f = dict(fields)
        msg: dict[str, Any] = {"head_end": end + 4, "first": first, "fields": fields, "body": []}
        pos = end + 4
        if b"chunked" in f.get(b"transfer-encoding", b"").lower():
            while pos < len(stream):
                eol = stream.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(stream[pos:eol].split(b";")[0] or b"0", 16)
                if size == 0:  # the last chunk, then trailers up to an empty line
                    tail = stream.find(b"\r\n\r\n", eol)
                    pos = len(stream) if tail < 0 else tail + 4
                    break
                msg["body"].append((eol + 2, stream[eol + 2 : eol + 2 + size]))
                pos = eol + 2 + size + 2
        elif b"content-length" in f:
            n = int(f[b"content-length"])
            if n:
                msg["body"].append((pos, stream[pos : pos + n]))
            pos += n
        elif not request:  # no length: the body runs to the close
            msg["body"].append((pos, stream[pos:]))
            pos = len(stream)
        msg["end"] = pos
        out.append(msg)
        off = pos
    return out


def _h1_to_h3(script: dict[str, Any]) -> dict[str, Any]:
    """``--remedy http3`` for HTTP/1.1 (TLS or plain): request i (in order on the connection)
    becomes QUIC stream 4i — its head as an HTTP/3 header block (``:method``, ``:scheme``,
    ``:authority`` from Host, ``:path``; connection-specific fields dropped), the response
    head with ``:status``, the bodies de-chunked — each piece in the unit that wrote it
    (a body's bytes split over the units that carried them), timing kept."""
    from .lab.reenact import unit_bytes

    units = script["units"]
    actions: list[list[list[Any]]] = [[] for _ in units]
    b64 = base64.b64encode
    for side in ("client", "server"):
        idx = [i for i, u in enumerate(units) if u["side"] == side]
        data = [unit_bytes(units[i]) for i in idx]
        if any(units[i].get("data") is None for i in idx):
            raise ReplayError("remedy http3: the HTTP/1.1 bytes are not in the capture (no keys)")
        ends = list(np.cumsum([len(d) for d in data]))
        stream = b"".join(data)
        messages = _h1_messages(stream, side == "client")
        if side == "client" and not (
            messages and messages[0]["first"][0].isalpha() and len(messages[0]["first"]) == 3
        ):
            raise ReplayError("remedy http3: the flow is not HTTP/1.1 or HTTP/2 (no request)")
        for n, msg in enumerate(messages):
            sid = 4 * n
            if side == "client":
                method, target = msg["first"][0], msg["first"][1] if len(msg["first"]) > 1 else b"/"
                host = dict(msg["fields"]).get(b"host", b"")
                pseudo = [(b":method", method), (b":scheme", b"https"), (b":authority", host)]
                pseudo.append((b":path", target))
            else:
                pseudo = [(b":status", msg["first"][1] if len(msg["first"]) > 1 else b"200")]
            fields = pseudo + [(k, v) for k, v in msg["fields"] if k not in H1_HOP_BY_HOP]
            headers = [[b64(k).decode(), b64(v).decode()] for k, v in fields]
            body = [(o, b) for o, b in msg["body"] if b]
            head_unit = int(np.searchsorted(ends, msg["head_end"] - 1, side="right"))
            actions[idx[head_unit]].append(["headers", sid, headers, not body])
            for j, (o, piece) in enumerate(body):
                while piece:  # split at unit boundaries: each unit writes what it carried
                    k = int(np.searchsorted(ends, o, side="right"))
                    take = min(len(piece), int(ends[k]) - o)
                    last = j == len(body) - 1 and take == len(piece)
                    actions[idx[k]].append(["data", sid, b64(piece[:take]).decode(), last])
                    piece, o = piece[take:], o + take
    return _as_h3(script, actions, "http/1.1")


def _as_h3(script: dict[str, Any], actions: list[list[list[Any]]], source: str) -> dict[str, Any]:
    """The HTTP/3 script from per-unit actions (see :func:`_h2_to_h3`)."""
    units = script["units"]
    new_len = [
        sum(len(base64.b64decode(a[2])) if a[0] == "data" else 1 for a in acts) for acts in actions
    ]
    out = []
    old_totals = {"client": [0], "server": [0]}
    new_totals = {"client": [0], "server": [0]}
    for u, n in zip(units, new_len, strict=True):
        old_totals[u["side"]].append(old_totals[u["side"]][-1] + int(u["len"]))
        new_totals[u["side"]].append(new_totals[u["side"]][-1] + n)
    for u, acts, n in zip(units, actions, new_len, strict=True):
        other = "server" if u["side"] == "client" else "client"
        k = int(np.searchsorted(old_totals[other], int(u.get("needs", 0)), side="right")) - 1
        out.append(
            {
                "side": u["side"],
                "after": u["after"],
                "delay_ms": u["delay_ms"],
                "len": n,
                "needs": new_totals[other][max(0, k)],
                "actions": acts,
            }
        )
    return {
        "quic": True,
        "h3": True,
        "alpn": "h3",
        "cert_extra_sans": 0,
        "transport": {"client": {}, "server": {}},
        "units": out,
        "source": {**script.get("source", {}), "remedy": "http3", "from_alpn": source},
    }


def _h2_window(script: dict[str, Any], window: int) -> None:
    """``--remedy h2-window=N`` on a frame-for-frame HTTP/2 script (in place).

    Each end (as a receiver) advertises ``window``: its first SETTINGS carries
    SETTINGS_INITIAL_WINDOW_SIZE = N (every stream's window) and is followed by a
    connection WINDOW_UPDATE of N − 65 535 (the connection window has no setting,
    RFC 9113 §6.9.2); its later WINDOW_UPDATEs stay as captured (it still returns credit
    as it reads).  Then each DATA-sending unit of the peer waits only for what it needs:
    the peer's units that carried something other than WINDOW_UPDATEs (a request, a
    SETTINGS ACK …) up to what it waited for in the capture, and as many more as the
    credit under the new windows requires (both the stream's and the connection's).  A
    unit that no longer waits for the WINDOW_UPDATE that triggered it follows its own
    end's previous write by the think time it showed after that trigger."""
    units = script["units"]
    for receiver, sender in (("client", "server"), ("server", "client")):
        _h2_window_one(units, receiver, sender, window)


def _h2_window_one(units: list[dict[str, Any]], receiver: str, sender: str, window: int) -> None:
    from .lab.reenact import unit_bytes

    rx = [i for i, u in enumerate(units) if u["side"] == receiver]
    tx = [i for i, u in enumerate(units) if u["side"] == sender]
    if not rx or not tx:
        return
    old_len = [int(units[i]["len"]) for i in rx]
    old_ends = list(np.cumsum(old_len))  # receiver bytes after each of its units (old)
    # the receiver's stream: its frames, each in the unit that holds its first byte
    data = [unit_bytes(units[i]) for i in rx]
    stream = b"".join(data)
    starts = [0, *old_ends[:-1]]
    frames = _h2_frames(stream, len(H2_PREFACE) if stream.startswith(H2_PREFACE) else 0)

    def unit_of(off: int) -> int:
        return int(np.searchsorted(old_ends, off, side="right"))

    credit: list[list[tuple[int, int]]] = [[] for _ in rx]  # per unit: (stream id, increment)
    only_wu = [True] * len(rx)
    settings_done = False
    for off, kind, flags, sid, payload in frames:
        k = unit_of(off)
        if kind != H2_WINDOW_UPDATE:
            only_wu[k] = False
        else:
            credit[k].append((sid, int.from_bytes(payload[:4], "big") & 0x7FFF_FFFF))
        if kind == H2_SETTINGS and not flags & 0x1 and not settings_done:
            settings_done = True
            if off + 9 + len(payload) > old_ends[k]:
                raise ReplayError("remedy h2-window: the SETTINGS frame spans two writes")
            params = [
                (int.from_bytes(payload[j : j + 2], "big"), payload[j + 2 : j + 6])
                for j in range(0, len(payload) - 5, 6)
            ]
            params = [(pid, v) for pid, v in params if pid != H2_SETTINGS_INITIAL_WINDOW_SIZE]
            params.append((H2_SETTINGS_INITIAL_WINDOW_SIZE, window.to_bytes(4, "big")))
            new = _h2_frame(
                H2_SETTINGS, 0, 0, b"".join(p.to_bytes(2, "big") + v for p, v in params)
            )
            if window > H2_DEFAULT_WINDOW:
                inc = window - H2_DEFAULT_WINDOW
                new += _h2_frame(H2_WINDOW_UPDATE, 0, 0, inc.to_bytes(4, "big"))
                credit[k].append((0, inc))
            rel = off - starts[k]
            d = data[k]
            data[k] = d[:rel] + new + d[rel + 9 + len(payload) :]
            credit[k].append((-1, window))  # every stream's window is now this
    if not settings_done:
        raise ReplayError(f"remedy h2-window: no SETTINGS frame from the {receiver}")
    for k, i in enumerate(rx):
        units[i]["len"] = len(data[k])
        units[i]["data"] = base64.b64encode(data[k]).decode()
    new_ends = list(np.cumsum([len(d) for d in data]))
    # credit after the first k receiver units: (connection, per-stream initial, per-stream)
    conn = [H2_DEFAULT_WINDOW]
    initial = [H2_DEFAULT_WINDOW]
    per_stream: list[dict[int, int]] = [{}]
    for k in range(len(rx)):
        c, ini, ps = conn[-1], initial[-1], dict(per_stream[-1])
        for sid, inc in credit[k]:
            if sid == -1:
                ini = inc
            elif sid == 0:
                c += inc
            else:
                ps[sid] = ps.get(sid, 0) + inc
        conn.append(c)
        initial.append(ini)
        per_stream.append(ps)
    # the sender's DATA so far, at the start of each of its units (flow-controlled bytes)
    sdata = [unit_bytes(units[i]) for i in tx]
    s_ends = list(np.cumsum([len(d) for d in sdata]))
    sent_conn = 0
    sent_stream: dict[int, int] = {}
    need_conn = [0] * len(tx)
    need_stream: list[dict[int, int]] = [{} for _ in tx]
    for off, kind, _flags, sid, payload in _h2_frames(b"".join(sdata), 0):
        if kind != H2_DATA:
            continue
        j = int(np.searchsorted(s_ends, off, side="right"))
        sent_conn += len(payload)
        sent_stream[sid] = sent_stream.get(sid, 0) + len(payload)
        need_conn[j] = max(need_conn[j], sent_conn)
        need_stream[j][sid] = max(need_stream[j].get(sid, 0), sent_stream[sid])

    def enough(k: int, j: int) -> bool:
        if need_conn[j] > conn[k]:
            return False
        return all(n <= initial[k] + per_stream[k].get(s, 0) for s, n in need_stream[j].items())

    for j, i in enumerate(tx):
        u = units[i]
        old = int(u.get("needs", 0))
        k0 = int(np.searchsorted(old_ends, old, side="right")) if old else 0  # units read
        k1 = max((k + 1 for k in range(k0) if not only_wu[k]), default=0)
        if need_conn[j] or need_stream[j]:
            k = k1
            while k < k0 and not enough(k, j):
                k += 1
        else:
            k = k0
        u["needs"] = int(new_ends[k - 1]) if k else 0
        if k < k0 and u["after"] == "peer":
            u["after"] = "self"  # its trigger was credit it no longer waits for


# --------------------------------------------------------------------------- measure


def _num(v: Any) -> float | None:
    if v is None or pd.isna(v):
        return None
    x = float(v)
    return None if math.isnan(x) else round(x, 3)


def measure(trace: Trace, flow: int | Sequence[int]) -> dict[str, Any]:
    """One run's findings (kinds with summed cost) and request metrics for ``flow`` (or
    several flows: their findings together, the metrics of the first one's request)."""
    flows = [flow] if isinstance(flow, int) else list(flow)
    f = trace.findings
    f = f[f["flow"].isin(flows)] if not f.empty else f
    kinds: dict[str, dict[str, Any]] = {}
    for r in f.itertuples():
        k = kinds.setdefault(str(r.kind), {"count": 0, "cost_ms": 0.0})
        k["count"] += 1
        k["cost_ms"] = round(k["cost_ms"] + (float(r.cost_ms) if pd.notna(r.cost_ms) else 0.0), 3)
    q = trace.requests
    q = q[q["flow"].isin(flows)].sort_values("request_start_ts_ns") if not q.empty else q
    reqs = [
        {
            **{m: _num(getattr(r, m)) for m in METRICS},
            "ttlb_ms": _num((r.last_byte_ts_ns - r.request_start_ts_ns) / 1e6)
            if pd.notna(r.last_byte_ts_ns) and pd.notna(r.request_start_ts_ns)
            else None,
        }
        for r in q.itertuples()
    ]
    first = reqs[0] if reqs else {m: None for m in (*METRICS, *EXTRA_METRICS)}
    return {"kinds": dict(sorted(kinds.items())), "requests": reqs, **first}


def _within(orig: float | None, rep: float | None) -> tuple[float | None, bool | None]:
    if orig is None and rep is None:
        return None, None
    if orig is None or rep is None:
        return None, False
    err = rep - orig
    return round(err, 3), abs(err) <= max(TOLERANCE_MS, abs(orig) * TOLERANCE_PCT / 100)


def fidelity(original: dict[str, Any], faithful: dict[str, Any]) -> dict[str, Any]:
    """Errors of the faithful run against the original, and the verdict."""
    out: dict[str, Any] = {
        "tolerance": f"max({TOLERANCE_MS} ms, {TOLERANCE_PCT} % of the original)",
        "kinds_missing": sorted(set(original["kinds"]) - set(faithful["kinds"])),
        "kinds_extra": sorted(set(faithful["kinds"]) - set(original["kinds"])),
    }
    ok = not out["kinds_missing"] and not out["kinds_extra"]
    for m in METRICS:
        err, good = _within(original[m], faithful[m])
        out[f"{m}_error"] = err
        if good is False:
            ok = False
    for m in EXTRA_METRICS:  # reported, not judged
        out[f"{m}_error"] = _within(original.get(m), faithful.get(m))[0]
    out["reproduced"] = ok
    return out


# ------------------------------------------------------------------------------ run


def _vantage_file(vantage: str) -> str:
    return "server.pcapng" if vantage == "server" else "client.pcapng"


def _run_once(plan: Plan, script: dict[str, Any], outdir: Path) -> dict[str, Any]:
    """One lab run of ``script``; rerun (up to :data:`ATTEMPTS` in all) while the programs
    woke more than :data:`TOLERANCE_MS` late for a timed write (a busy host, not the
    replay).  Returns how the run went: attempts and the worst wake-up lateness."""
    from .lab import reenact, reenact_quic
    from .lab.runner import run_scenario

    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "script.json"
    path.write_text(json.dumps(script, indent=1) + "\n", encoding="utf-8")
    params = plan.lab_params()
    if script.get("quic"):
        params["cert_extra_sans"] = int(script.get("cert_extra_sans") or 0)
    late: float | None = None
    attempts = 0
    while attempts < ATTEMPTS:
        attempts += 1
        doc = run_scenario(
            reenact_quic.scenario() if script.get("quic") else reenact.scenario(tls=plan.tls),
            outdir,
            script=str(path.resolve()),
            **params,
        )
        gt = doc.get("ground_truth") or {}
        lates = [gt[r]["woke_late_ms_max"] for r in ("client", "server") if r in gt]
        late = max((x for x in lates if x is not None), default=None)
        if late is None or late <= TOLERANCE_MS:
            break
    return {"attempts": attempts, "woke_late_ms_max": None if late is None else round(late, 3)}


def replay(
    capture: str | os.PathLike[str],
    *,
    flow: int | Sequence[int],
    outdir: str | os.PathLike[str],
    remedies: Sequence[str] = (),
    keylog: str | None = None,
) -> dict[str, Any]:
    """Socket-level replay of ``flow`` (module doc) — or of several flows, each its own
    connection at its own start (:func:`derive_many`); writes and returns summary.json."""
    parsed = [parse_remedy(r) for r in remedies]
    out = Path(outdir)
    flows = [flow] if isinstance(flow, int) else list(dict.fromkeys(flow))
    with open_trace(capture, keylog=keylog) as trace:
        plan = derive(trace, flows[0]) if len(flows) == 1 else derive_many(trace, flows)
        original = measure(trace, flows)
    replayed = list(range(len(flows)))  # the replay's flows: the connections, in order
    if any(n == "auto" for n, _ in parsed):
        parsed = [p for p in parsed if p[0] != "auto"]
        for r in auto_remedies(original["kinds"]):
            name, value = parse_remedy(r)
            try:  # auto proposes; a remedy this capture cannot take is left out, said so
                remedied(plan, name, value)
            except ReplayError as e:
                plan.warnings.append(f"--remedy auto: {r} left out ({e})")
                continue
            if (name, value) not in parsed:
                parsed.append((name, value))
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = {"original": {"capture": str(capture), **original}}
    how = _run_once(plan, plan.script, out / "faithful")
    vfile = _vantage_file(plan.vantage)
    with open_trace(out / "faithful" / vfile) as t:
        runs["faithful"] = {**measure(t, replayed), "run": how}
    runs["faithful"]["fidelity"] = fidelity(original, runs["faithful"])
    for name, value in parsed:
        label = name if value is None else f"{name}={value}"
        d = out / f"remedy-{label}"
        how = _run_once(plan, remedied(plan, name, value), d)
        with open_trace(d / vfile) as t:
            m = {**measure(t, replayed), "run": how}
        addressed = [k for k in REMEDIES[name][0] if k in runs["faithful"]["kinds"]]
        m["remedy"] = {
            "name": name,
            "value": value,
            "addresses": list(REMEDIES[name][0]),
            "removed": sorted(set(runs["faithful"]["kinds"]) - set(m["kinds"])),
            "appeared": sorted(set(m["kinds"]) - set(runs["faithful"]["kinds"])),
            "addressed_gone": all(k not in m["kinds"] for k in addressed) if addressed else None,
        }
        runs[f"remedy-{label}"] = m
        _write_diff(out / "faithful" / vfile, d / vfile, out / f"diff-{label}.txt")
    summary = {
        "schema": "pcapkit.replay/1",
        "capture": str(capture),
        "flow": flows[0] if len(flows) == 1 else flows,
        "vantage": plan.vantage,
        "path": {
            "delay_ms": round(plan.delay_ms, 3),
            "drop_c2s": plan.drop_c2s,
            "drop_s2c": plan.drop_s2c,
            "drop_syn_c2s": plan.drop_syn_c2s,
            "drop_syn_s2c": plan.drop_syn_s2c,
            "sysctls": plan.sysctls,
            "rate_mbit": plan.rate_mbit,
            "cc": plan.cc or "cubic",  # TCP_CONGESTION at both ends
            "blackhole_after": plan.blackhole_after,
            "stall_after": plan.stall_after,
            "stall_ms": plan.stall_ms,
        },
        "sides": plan.script.get("sides")
        or plan.script.get("transport")
        or plan.script["connections"][0]["script"].get("sides")
        or plan.script["connections"][0]["script"].get("transport"),
        "units": len(_all_units(plan.script)),
        "payload": _payload_kind(_all_units(plan.script)),
        "connections": [
            {k: c[k] for k in ("flow", "start_ms", "resume", "server_resumes")}
            for c in plan.script.get("connections", ())
        ],
        "warnings": plan.warnings,
        "runs": runs,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _flows_text(flow: int | list[int]) -> str:
    return f"flow {flow}" if isinstance(flow, int) else "flows " + ", ".join(map(str, flow))


def _payload_kind(units: list[dict[str, Any]]) -> str:
    """ "captured" (every unit's bytes from the capture), "filler", or "mixed"."""
    have = {u.get("data") is not None or "pieces" in u for u in units}
    return "captured" if have == {True} else "filler" if have == {False} else "mixed"


def _write_diff(before: Path, after: Path, dst: Path) -> None:
    from .report.diff import diff, diff_text

    dst.write_text(diff_text(diff(before, after)), encoding="utf-8")


def summary_text(summary: dict[str, Any]) -> str:
    """Original, faithful replay and each remedy side by side (a few lines)."""
    runs = summary["runs"]
    names = list(runs)
    lines = [
        f"replay of {_flows_text(summary['flow'])} ({summary['vantage']} vantage), "
        f"one-way delay {summary['path']['delay_ms']} ms, drops c2s {summary['path']['drop_c2s']} "
        f"s2c {summary['path']['drop_s2c']}, {summary['units']} units ({summary['payload']})"
    ]
    path = summary["path"]
    for d, n in (path.get("stall_after") or {}).items():
        lines.append(f"{d} held {path['stall_ms']} ms after {n} payload packets (a stall)")
    for d, n in (path.get("blackhole_after") or {}).items():
        lines.append(f"{d} lost after {n} payload packets (a black hole)")
    lines += [f"warning: {w}" for w in summary["warnings"]]
    width = max(len(n) for n in names)
    for m in (*METRICS, *EXTRA_METRICS):
        vals = " → ".join(
            f"{n} {'–' if runs[n].get(m) is None else format(runs[n][m], '.1f') + ' ms'}"
            for n in names
        )
        lines.append(f"{m[:-3].upper():<6} {vals}")
    for n in names:
        kinds = ", ".join(runs[n]["kinds"]) or "none"
        lines.append(f"{n:<{width}}  findings: {kinds}")
    fid = runs["faithful"]["fidelity"]
    lines.append(
        "faithful replay "
        + ("reproduces the original" if fid["reproduced"] else "differs from the original")
        + f" (tolerance {fid['tolerance']}; missing {fid['kinds_missing'] or 'none'}, "
        f"extra {fid['kinds_extra'] or 'none'})"
    )
    for n in names[2:]:
        rem = runs[n]["remedy"]
        gone = ", ".join(rem["removed"]) or "nothing"
        lines.append(f"{n}: removed {gone}; appeared {', '.join(rem['appeared']) or 'nothing'}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------- packet level


def replay_packets(
    capture: str | os.PathLike[str],
    *,
    into: str,
    speed: float | None = 1.0,
    loop: int = 1,
    host_iface: bool = False,
) -> dict[str, Any]:
    """Send ``capture``'s frames onto ``into`` (``NETNS:IFACE``, or a host interface name
    with ``host_iface=True``) at their pacing × 1/``speed`` (``None``: as fast as
    possible), ``loop`` times.  Returns the sender's report (packets, seconds, timing
    error percentiles).  Needs root."""
    from .lab.pktsend import PROGRAM

    netns, sep, iface = into.partition(":")
    if host_iface:
        if sep:
            raise ReplayError("--host-iface takes a bare interface name, not NETNS:IFACE")
        netns, iface = "", into
    elif not sep or not netns or not iface:
        raise ReplayError(
            f"--into {into!r}: expected NETNS:IFACE (a lab namespace); a host interface "
            "only with --host-iface"
        )
    elif not Path("/run/netns", netns).exists():
        raise ReplayError(f"no network namespace {netns!r} (ip netns list)")
    argv = [sys.executable, PROGRAM, str(Path(capture).resolve()), iface]
    argv += ["--speed", "max" if speed is None else repr(speed), "--loop", str(loop)]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise ReplayError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
    return json.loads(p.stdout)  # type: ignore[no-any-return]

"""HTTP/3 over QUIC (aioquic client and server): stream-level HoL of one lost packet (Q1).

DETECTION.md §4.4: QUIC orders bytes per stream, so a lost packet blocks only the streams
whose STREAM frames it carried.  The client opens ``streams`` (4) request streams at once;
the server answers each with ``body_len`` (16 KiB) after all requests arrived, queueing
every body before sending, and aioquic's scheduler fills each packet from one stream and
rotates the streams (round-robin per packet).  ``h3_streams_drop``: the forwarder drops one
server→client datagram in the middle of the response data — a 1-RTT packet carrying
STREAM data of one stream (checked from the server's qlog, never a handshake packet).
Only that stream waits for the retransmission; the others keep receiving.
``h3_streams_nodrop``: the same without the drop.

The forwarder counts every UDP datagram as a payload packet: 1 = the server's Initial +
Handshake flight, 2 = the rest of its Handshake flight, then 1-RTT packets (HANDSHAKE_DONE,
control-stream SETTINGS, ACKs); the default ``drop_s2c`` lands ≈ 20 data packets into
the response.  Both ends use UDP port 443 (tshark decodes QUIC there), aioquic's default
1200-byte datagrams and Reno, and write ``secrets_log_file`` (NSS key log with QUIC's
traffic secrets), which the runner embeds in both captures.

Ground truth: the server's and client's qlog (aioquic ``QuicLogger``) reduced to a compact
per-packet list — packet number, type, size, STREAM frames (stream, offset, length) — and
the datagram index each packet went out in, which maps the forwarder's dropped datagram to
the lost packet number and its frames; ``packet_lost`` events; the retransmitted frames'
packet; and the client application's per-stream DATA arrival times.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from typing import Any

from .. import truth
from ..apps import now_ns
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register

_EVENT_RE = re.compile(rb"data: token (\d+)\n\n")

PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "streams": 4,
    "body_len": 16_384,
    # s2c datagrams: 1-2 handshake flight, then 1-RTT; #24 is a 1-RTT packet carrying
    # STREAM data ≈ 20 packets into the response (≥ 3 later packets: packet-threshold loss)
    "drop_s2c": [24],
    "idle_timeout_s": 10.0,
    # the client's receive limits (transport parameters initial_max_data /
    # initial_max_stream_data_*); None: aioquic's default 1 MiB each
    "client_max_data": None,
    "client_max_stream_data": None,
    # resumption: a first connection fetches the streams and keeps the session ticket; a
    # second connection resumes with it and fetches them again, its requests in 0-RTT
    # packets when zero_rtt (aioquic: connect(wait_connected=False)), else after the
    # handshake
    "resume": False,
    "zero_rtt": False,
    # > 0: the (single) response is an SSE stream of this many events, one every
    # sse_interval_ms, each its own DATA frame and packet (text/event-stream)
    "sse_events": 0,
    "sse_interval_ms": 50.0,
    # DNS names added to the server certificate (certs.make_self_signed): 250 make a
    # ~7 KB certificate, over the 3 × 1200-byte anti-amplification budget of its flight
    "cert_extra_sans": 0,
}


def _compact_qlog(qlog: dict[str, Any]) -> dict[str, Any]:
    """Packets sent (with the 1-based datagram each went out in), received, lost."""
    sent: list[dict[str, Any]] = []
    received: list[dict[str, Any]] = []
    lost: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    datagram = 0
    for trace in qlog.get("traces", []):
        for ev in trace.get("events", []):
            name, data = ev["name"], ev["data"]
            if name in ("transport:packet_sent", "transport:packet_received"):
                frames = data.get("frames", [])
                row = {
                    "t_ns": round(ev["time"] * 1e6),
                    "pn": data["header"]["packet_number"],
                    "type": data["header"]["packet_type"],
                    "len": data.get("raw", {}).get("length"),
                    "stream_frames": [
                        [f["stream_id"], f["offset"], f["length"], bool(f.get("fin"))]
                        for f in frames
                        if f.get("frame_type") == "stream"
                    ],
                    "frames": sorted({f.get("frame_type", "?") for f in frames}),
                    # credit granted: [stream id or None (MAX_DATA), maximum]
                    "limits": [
                        [f.get("stream_id"), f["maximum"]]
                        for f in frames
                        if f.get("frame_type") in ("max_data", "max_stream_data") and "maximum" in f
                    ],
                }
                if name == "transport:packet_sent":
                    sent.append(row)
                    pending.append(row)
                else:
                    received.append(row)
            elif name == "transport:datagrams_sent":
                for raw in data.get("raw", []):
                    datagram += 1
                    left = raw.get("payload_length", 0)
                    while pending and left > 0:
                        pkt = pending.pop(0)
                        pkt["datagram"] = datagram
                        left -= pkt["len"] or left
            elif name == "recovery:packet_lost":
                lost.append(
                    {
                        "t_ns": round(ev["time"] * 1e6),
                        "pn": data["packet_number"],
                        "type": data["type"],
                    }
                )
    return {"datagrams_sent": datagram, "sent": sent, "received": received, "lost": lost}


def server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    return asyncio.run(_server(p, ready))


async def _server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    from aioquic.asyncio import QuicConnectionProtocol, serve
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated
    from aioquic.quic.logger import QuicLogger

    done = asyncio.Event()
    state: dict[str, Any] = {"requests": [], "responded_ns": None, "terminated": 0}
    connections = 2 if p["resume"] else 1
    tickets: dict[bytes, Any] = {}
    body = bytes(range(256)) * (p["body_len"] // 256 + 1)
    body = body[: p["body_len"]]

    class Server(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._h3 = H3Connection(self._quic)
            self._requests: list[dict[str, Any]] = []

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, ConnectionTerminated):
                state["terminated"] += 1
                if state["terminated"] >= connections:
                    done.set()
                return
            for ev in self._h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    path = dict(ev.headers).get(b":path", b"").decode()
                    r = {"stream": ev.stream_id, "path": path, "t_ns": now_ns()}
                    state["requests"].append(r)
                    self._requests.append(r)
                    if len(self._requests) == p["streams"]:
                        self._respond()

        def _respond(self) -> None:
            state["responded_ns"] = now_ns()
            if p["sse_events"]:
                asyncio.ensure_future(self._stream_events(self._requests[0]["stream"]))
                return
            for r in self._requests:
                self._h3.send_headers(
                    r["stream"],
                    [
                        (b":status", b"200"),
                        (b"content-type", b"application/octet-stream"),
                        (b"content-length", str(p["body_len"]).encode()),
                    ],
                )
            for r in self._requests:  # queue every body; aioquic rotates the streams
                self._h3.send_data(r["stream"], body, end_stream=True)
            self.transmit()

        async def _stream_events(self, sid: int) -> None:
            self._h3.send_headers(
                sid, [(b":status", b"200"), (b"content-type", b"text/event-stream")]
            )
            self.transmit()
            loop = asyncio.get_running_loop()
            start = loop.time()
            for n in range(1, p["sse_events"] + 1):
                delay = start + (n - 1) * p["sse_interval_ms"] / 1000 - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                state.setdefault("events", []).append({"n": n, "write_ns": now_ns()})
                self._h3.send_data(sid, b"data: token %d\n\n" % n, end_stream=n == p["sse_events"])
                self.transmit()

    logger = QuicLogger()
    with open(p["keylog_server"], "a", encoding="ascii") as keylog:
        cfg = QuicConfiguration(
            is_client=False,
            alpn_protocols=H3_ALPN,
            secrets_log_file=keylog,
            quic_logger=logger,
            idle_timeout=p["idle_timeout_s"],
        )
        cfg.load_cert_chain(p["cert"], p["key"])
        srv = await serve(
            p["server_ip"],
            p["port"],
            configuration=cfg,
            create_protocol=Server,
            session_ticket_fetcher=lambda label: tickets.pop(label, None),
            session_ticket_handler=lambda t: tickets.__setitem__(t.ticket, t),
        )
        ready()
        try:
            await asyncio.wait_for(done.wait(), timeout=float(p["timeout_s"]))
        finally:
            srv.close()
    return {
        "socket": None,
        "requests": state["requests"],
        "responded_ns": state["responded_ns"],
        "events": state.get("events", []),
        "qlog": _compact_qlog(logger.to_dict()),
    }


def client(p: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(_client(p))


async def _client(p: dict[str, Any]) -> dict[str, Any]:
    from aioquic.asyncio import QuicConnectionProtocol, connect
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import HandshakeCompleted
    from aioquic.quic.logger import QuicLogger

    all_done = asyncio.Event()
    data: list[list[int]] = []  # [t_ns, stream, bytes]
    sse_buf = bytearray()
    sse_reads: dict[int, int] = {}
    ended: set[int] = set()
    meta: dict[str, Any] = {}

    class Client(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self._h3 = H3Connection(self._quic)

        def quic_event_received(self, event: Any) -> None:
            if isinstance(event, HandshakeCompleted):
                meta["handshake_done_ns"] = now_ns()
                meta["alpn"] = event.alpn_protocol
                meta["session_resumed"] = event.session_resumed
                meta["early_data_accepted"] = event.early_data_accepted
            for ev in self._h3.handle_event(event):
                t = now_ns()
                if isinstance(ev, HeadersReceived):
                    meta.setdefault("first_headers_ns", t)
                elif isinstance(ev, DataReceived):
                    if ev.data:
                        data.append([t, ev.stream_id, len(ev.data)])
                        sse_buf.extend(ev.data)
                        for m in _EVENT_RE.finditer(bytes(sse_buf)):
                            sse_reads.setdefault(int(m.group(1)), t)
                    if ev.stream_ended:
                        ended.add(ev.stream_id)
                        if len(ended) == p["streams"]:
                            all_done.set()

        def request_all(self) -> None:
            for i in range(p["streams"]):
                sid = self._quic.get_next_available_stream_id()
                self._h3.send_headers(
                    sid,
                    [
                        (b":method", b"GET"),
                        (b":scheme", b"https"),
                        (b":authority", DEFAULT_HOSTNAME.encode()),
                        (b":path", f"/blob/{i}".encode()),
                    ],
                    end_stream=True,
                )
            self.transmit()

    logger = QuicLogger()
    ticket: list[Any] = []
    first: dict[str, Any] = {}
    with open(p["keylog_client"], "a", encoding="ascii") as keylog:
        for n in range(2 if p["resume"] else 1):
            cfg = QuicConfiguration(
                is_client=True,
                alpn_protocols=H3_ALPN,
                secrets_log_file=keylog,
                quic_logger=logger,
                server_name=DEFAULT_HOSTNAME,
                idle_timeout=p["idle_timeout_s"],
            )
            if p["client_max_data"]:
                cfg.max_data = int(p["client_max_data"])
            if p["client_max_stream_data"]:
                cfg.max_stream_data = int(p["client_max_stream_data"])
            cfg.load_verify_locations(cafile=p["cert"])
            last = n == (1 if p["resume"] else 0)
            if n == 1:
                cfg.session_ticket = ticket[-1] if ticket else None
            if last:  # the connection the ground truth describes
                data.clear()
                ended.clear()
                all_done.clear()
                meta["connect_ns"] = now_ns()
            async with connect(
                p["server_ip"],
                p["port"],
                configuration=cfg,
                create_protocol=Client,
                session_ticket_handler=ticket.append,
                wait_connected=not (last and p["zero_rtt"]),
            ) as conn:
                t_get = now_ns()
                conn.request_all()  # type: ignore[attr-defined]
                await asyncio.wait_for(all_done.wait(), timeout=float(p["timeout_s"]))
                if last:
                    meta["get_write_ns"] = t_get
                    meta["done_ns"] = now_ns()
                    meta["resumed_with_ticket"] = cfg.session_ticket is not None
                else:
                    first["done_ns"] = now_ns()
                    await asyncio.sleep(0.05)  # let the ticket arrive and the close finish
    meta["first_connection"] = first
    meta["sse_reads"] = [{"n": n, "read_ns": t} for n, t in sorted(sse_reads.items())]
    return {
        "socket": None,
        "tls": {"version": "TLSv1.3", "cipher": None, "alpn": meta.get("alpn")},
        **meta,
        "data": data,
        "qlog": _compact_qlog(logger.to_dict()),
    }


def _overlaps(a: list[Any], b: list[Any]) -> bool:
    return a[0] == b[0] and a[1] < b[1] + b[2] and b[1] < a[1] + a[2]


def ground_truth(run: RunData) -> dict[str, Any]:
    srv, cli = run.server, run.client
    sq, cq = srv["qlog"], cli["qlog"]
    drops = []
    for ev in run.forwarder.get("events", []):
        if ev["event"] != "drop" or ev["dir"] != "s2c":
            continue
        pkts = [x for x in sq["sent"] if x.get("datagram") == ev["payload_index"]]
        frames = [f for x in pkts for f in x["stream_frames"]]
        pns = [x["pn"] for x in pkts]
        lost = [x for x in sq["lost"] if x["pn"] in pns]
        rtx = [
            x
            for x in sq["sent"]
            if x["pn"] > max(pns, default=-1)
            and any(_overlaps(f, g) for f in x["stream_frames"] for g in frames)
        ]
        streams = sorted({f[0] for f in frames})
        # when the last retransmitted piece reached the client (aioquic may split it)
        rtx_pns = {x["pn"] for x in rtx}
        rtx_rcv = [x["t_ns"] for x in cq["received"] if x["pn"] in rtx_pns and x["type"] == "1RTT"]
        fill_ns = max(rtx_rcv) if rtx_rcv else None
        t_drop = ev["t_ns"]
        # the receiver-side hole: from the first later packet reaching the client to the fill
        later = [
            x["t_ns"]
            for x in cq["received"]
            if x["type"] == "1RTT" and x["pn"] > max(pns, default=-1) and x["t_ns"] > t_drop
        ]
        gap_start = min(later) if later else None
        per_stream = {}
        for sid in sorted({e[1] for e in cli["data"]}):
            during = [
                e
                for e in cli["data"]
                if e[1] == sid and gap_start and fill_ns and gap_start <= e[0] < fill_ns
            ]
            per_stream[str(sid)] = {
                "bytes_during_hole": sum(e[2] for e in during),
                "events_during_hole": len(during),
                "in_lost_packet": sid in streams,
            }
        drops.append(
            {
                "dir": "s2c",
                "payload_index": ev["payload_index"],
                "udp_len": ev["len"],
                "t_ns": t_drop,
                "packets": [{"pn": x["pn"], "type": x["type"], "len": x["len"]} for x in pkts],
                "packet_types": sorted({x["type"] for x in pkts}),
                "stream_frames": frames,
                "streams_hit": streams,
                "lost_detected_ns": lost[0]["t_ns"] if lost else None,
                "retransmissions": [
                    {
                        "pn": x["pn"],
                        "datagram": x.get("datagram"),
                        "t_ns": x["t_ns"],
                        "stream_frames": x["stream_frames"],
                    }
                    for x in rtx
                ],
                "retransmit_after_ms": truth.ms(rtx[0]["t_ns"] - t_drop) if rtx else None,
                "gap_start_at_client_ns": gap_start,
                "fill_at_client_ns": fill_ns,
                "hole_ms": None
                if fill_ns is None or gap_start is None
                else truth.ms(fill_ns - gap_start),
                "per_stream": per_stream,
            }
        )
    # the server's credit stalls (aioquic's own logs): a pause in its STREAM data right
    # after the data reached a stream limit the client had granted (the initial
    # transport parameter or a MAX_STREAM_DATA value the client logged sending)
    granted = {int(run.params.get("client_max_stream_data") or 1_048_576)}
    granted |= {m for x in cq["sent"] for s_, m in x.get("limits", []) if s_ is not None}
    data_pkts = [x for x in sq["sent"] if x["stream_frames"] and x["type"] == "1RTT"]
    wire = {p.idx: p.t_in_ns for p in truth.packets(run.forwarder) if p.dir == "s2c" and p.len > 0}
    stalls = []
    for a, b in zip(data_pkts, data_pkts[1:], strict=False):
        idle = (b["t_ns"] - a["t_ns"]) / 1e6
        end = max(f[1] + f[2] for f in a["stream_frames"])
        if end in granted and idle > 1.0:
            # the same pause on the wire: the forwarder's arrival times of the two
            # datagrams (aioquic logs a packet when it builds it, pacing sends it later)
            ta, tb = wire.get(a.get("datagram")), wire.get(b.get("datagram"))
            stalls.append(
                {
                    "last_pn": a["pn"],
                    "resume_pn": b["pn"],
                    "t_ns": a["t_ns"],
                    "limit": end,
                    "idle_ms": round(idle, 3),
                    "wire_idle_ms": None if ta is None or tb is None else truth.ms(tb - ta),
                }
            )
    limit_updates = [
        {
            "t_ns": x["t_ns"],
            "pn": x["pn"],
            "frames": [f for f in x["frames"] if f.startswith("max_")],
            "limits": x.get("limits", []),
        }
        for x in cq["sent"]
        if any(f in ("max_data", "max_stream_data") for f in x["frames"])
    ]
    per: dict[str, int] = {}
    for _, sid, n in cli["data"]:
        per[str(sid)] = per.get(str(sid), 0) + n
    d0 = drops[0] if drops else None
    return {
        "handshake_ms": truth.ms(cli["handshake_done_ns"] - cli["connect_ns"])
        if cli.get("handshake_done_ns")
        else None,
        "handshake": [],
        "alpn": cli.get("alpn"),
        "server_datagrams": sq["datagrams_sent"],
        "server_lost": sq["lost"],
        "drops": drops,
        "stream_bytes": per,
        "server_packets": sq["sent"],
        "server_stalls": stalls,
        "events": _event_truth(srv, cli),
        "first_flight_pause": _first_flight_pause(sq, wire),
        "resumption": {
            "resumed_with_ticket": cli.get("resumed_with_ticket", False),
            "session_resumed": cli.get("session_resumed"),
            "early_data_accepted": cli.get("early_data_accepted"),
            "client_0rtt_packets": sum(1 for x in cq["sent"] if x["type"] == "0RTT"),
            "first_connection_done_ns": (cli.get("first_connection") or {}).get("done_ns"),
            # how long the resumed connection's application waited before its request
            "request_after_connect_ms": truth.ms(cli["get_write_ns"] - cli["connect_ns"])
            if cli.get("get_write_ns") and cli.get("connect_ns")
            else None,
        },
        "client_limit_updates": limit_updates,
        "summary": {
            "server_stalls": len(stalls),
            "streams": len(per),
            "bytes": sum(per.values()),
            "transfer_ms": truth.ms(cli["done_ns"] - cli["get_write_ns"]),
            "lost_packets": len(sq["lost"]),
            "drop_streams_hit": None if d0 is None else d0["streams_hit"],
            "drop_packet_types": None if d0 is None else d0["packet_types"],
            "streams_progressing_during_hole": None
            if d0 is None
            else sorted(int(k) for k, v in d0["per_stream"].items() if v["events_during_hole"]),
            "hole_ms": None if d0 is None else d0["hole_ms"],
            "retransmit_after_ms": None if d0 is None else d0["retransmit_after_ms"],
        },
    }


def _first_flight_pause(sq: Mapping[str, Any], wire: Mapping[int, int]) -> dict[str, Any] | None:
    """The longest pause inside the server's Initial/Handshake flight on the wire (the
    forwarder's arrival times of its datagrams): the anti-amplification wait, if any."""
    hs = [x for x in sq["sent"] if x["type"] in ("initial", "handshake") and x.get("datagram")]
    grams = sorted({x["datagram"] for x in hs})
    best = None
    for a, b in zip(grams, grams[1:], strict=False):
        ta, tb = wire.get(a), wire.get(b)
        if ta is None or tb is None:
            continue
        if best is None or tb - ta > best["pause_ms"] * 1e6:
            best = {"after_datagram": a, "resume_datagram": b, "pause_ms": truth.ms(tb - ta)}
    if best is not None:
        best["flight_bytes_before"] = sum(
            x["len"] or 0 for x in hs if x["datagram"] <= best["after_datagram"]
        )
    return best


def _event_truth(srv: Mapping[str, Any], cli: Mapping[str, Any]) -> list[dict[str, Any]]:
    """SSE mode: each event's write (server) and read (client application) time."""
    reads = {e["n"]: e["read_ns"] for e in cli.get("sse_reads", [])}
    out = []
    for w in srv.get("events", []):
        r = reads.get(w["n"])
        out.append(
            {
                "n": w["n"],
                "write_ns": w["write_ns"],
                "read_ns": r,
                "latency_ms": truth.ms(None if r is None else r - w["write_ns"]),
            }
        )
    return out


def _validate(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"], doc["params"]
    s = gt["summary"]
    problems = []
    if p.get("sse_events"):
        if sum(1 for e in gt.get("events", []) if e["read_ns"]) != p["sse_events"]:
            problems.append(f"events lost: {gt.get('events')}")
    elif s["bytes"] != p["streams"] * p["body_len"]:
        problems.append(f"incomplete transfer: {s}")
    if p["drop_s2c"]:
        if s["drop_packet_types"] != ["1RTT"] or not s["drop_streams_hit"]:
            problems.append(f"the drop did not hit a 1-RTT STREAM packet: {s}")
        elif not gt["drops"][0]["retransmissions"]:
            problems.append("the lost STREAM data was not retransmitted")
        elif p.get("sse_events"):
            if len([e for e in gt["events"] if e["read_ns"]]) != p["sse_events"]:
                problems.append("events lost")
        elif set(s["streams_progressing_during_hole"]) & set(s["drop_streams_hit"]):
            problems.append(f"a stream of the lost packet progressed during the hole: {s}")
        elif not set(s["streams_progressing_during_hole"]) - set(s["drop_streams_hit"]):
            problems.append(f"no other stream progressed during the hole: {s}")
    elif s["lost_packets"]:
        problems.append(f"control lost packets: {gt['server_lost']}")
    if p.get("resume"):
        r = gt.get("resumption", {})
        if not r.get("session_resumed"):
            problems.append(f"the second connection did not resume: {r}")
        elif p.get("zero_rtt") and not (r["early_data_accepted"] and r["client_0rtt_packets"]):
            problems.append(f"0-RTT was not used and accepted: {r}")
        elif not p.get("zero_rtt") and r["client_0rtt_packets"]:
            problems.append(f"0-RTT used although the scenario waits for the handshake: {r}")
    if p.get("client_max_stream_data") and s.get("server_stalls", 0) < 2:
        problems.append(f"small windows but the server never stalled: {s}")
    if not p.get("client_max_stream_data") and not p["drop_s2c"] and s.get("server_stalls"):
        problems.append(f"the control stalled: {gt['server_stalls']}")
    return problems


_M = __name__
# s2c datagrams in SSE mode: 1–2 handshake flight, then HANDSHAKE_DONE/SETTINGS, the
# response headers, one per event: #14 carries an event in the middle of the stream
# (checked by the validation: a 1-RTT packet of stream 0)
SSE_DROP_INDEX = 14
register(
    Scenario(
        name="h3_streams_drop",
        summary="HTTP/3 (aioquic), 4 streams, one s2c 1-RTT packet dropped: only its stream waits",
        what="4 h3 streams × 16 KiB; one lost packet stalls only the stream it carried",
        expected=("quic_stream_hol",),
        pair="h3_streams_nodrop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params=PARAMS,
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,  # QUIC: no detector reads it yet; 80 KB a capture (budget)
    )
)
register(
    Scenario(
        name="h3_streams_nodrop",
        summary="HTTP/3 (aioquic), 4 streams, no drop (control for QUIC stream HoL)",
        what="the same 4 streams without a drop: no gap on any stream",
        expected=(),
        controls=("quic_stream_hol",),
        pair="h3_streams_drop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "drop_s2c": []},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,  # QUIC: no detector reads it yet; 80 KB a capture (budget)
    )
)
register(
    Scenario(
        name="h3_flow_control",
        summary="HTTP/3 (aioquic), one 32 KiB response, client stream window 8 KiB: the server stalls on credit",
        what="1 h3 stream × 32 KiB; the client allows 8 KiB per stream and raises it "
        "(MAX_STREAM_DATA) only after half is consumed: the server waits a round trip per window",
        expected=("quic_flow_control_stall",),
        pair="h3_flow_control_large",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={
            **PARAMS,
            "streams": 1,
            "body_len": 32_768,
            "drop_s2c": [],
            "client_max_stream_data": 8_192,
        },
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_flow_control_large",
        summary="HTTP/3 (aioquic), one 32 KiB response with 1 MiB windows (control for QUIC flow-control stalls)",
        what="the same response with aioquic's default 1 MiB limits: no credit stall",
        expected=(),
        controls=("quic_flow_control_stall",),
        pair="h3_flow_control",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "body_len": 32_768, "drop_s2c": []},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_resumed_no_0rtt",
        summary="HTTP/3 (aioquic), a resumed connection that waits for the handshake before its request",
        what="2 connections; the second resumes with the first's ticket (0-RTT allowed by the "
        "server) but sends its GET only after the handshake: one round trip spent for nothing",
        expected=("zero_rtt_unused",),
        pair="h3_resumed_0rtt",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "body_len": 4_096, "drop_s2c": [], "resume": True},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_resumed_0rtt",
        summary="HTTP/3 (aioquic), a resumed connection that sends its request in 0-RTT (control)",
        what="the same two connections; the second sends its GET in 0-RTT packets with the "
        "ClientHello and the server accepts them",
        expected=(),
        controls=("zero_rtt_unused",),
        pair="h3_resumed_no_0rtt",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={
            **PARAMS,
            "streams": 1,
            "body_len": 4_096,
            "drop_s2c": [],
            "resume": True,
            "zero_rtt": True,
        },
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_sse_drop",
        summary="SSE over HTTP/3 (aioquic) on one stream, 20 events / 50 ms; one event's packet dropped",
        what="one h3 request stream carrying 20 SSE events every 50 ms; the packet of a middle "
        "event is lost: everything behind it waits — QUIC cannot help a single stream",
        expected=("h3_single_stream_hol",),
        # the client sees the held events arrive together; the server sent on schedule
        incidental=("sse_batching",),
        pair="h3_sse_nodrop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "sse_events": 20, "drop_s2c": [SSE_DROP_INDEX]},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_sse_nodrop",
        summary="SSE over HTTP/3 (aioquic) on one stream, no drop (control)",
        what="the same event stream without a drop: every event on time",
        expected=(),
        controls=("h3_single_stream_hol",),
        incidental=("sse_batching",),
        pair="h3_sse_drop",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "sse_events": 20, "drop_s2c": []},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_amplification_limit",
        summary="HTTP/3 (aioquic) with a 7 KB certificate: the server's first flight stops at 3× what "
        "the client sent until the client's next datagram (anti-amplification)",
        what="a certificate with 250 names makes the server's handshake flight larger than 3 × the "
        "client's 1200-byte Initial (RFC 9000 §8.1): it waits one round trip for more budget",
        expected=("quic_handshake_extra_rtt",),
        pair="h3_small_certificate",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "body_len": 1_024, "drop_s2c": [], "cert_extra_sans": 250},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)
register(
    Scenario(
        name="h3_small_certificate",
        summary="HTTP/3 (aioquic) with the usual small certificate: one flight (control)",
        what="the same request with a one-name certificate: the server's flight fits the budget",
        expected=(),
        controls=("quic_handshake_extra_rtt",),
        pair="h3_amplification_limit",
        server=f"{_M}:server",
        client=f"{_M}:client",
        params={**PARAMS, "streams": 1, "body_len": 1_024, "drop_s2c": []},
        tls=True,
        ground_truth=ground_truth,
        validate=_validate,
        fixture_middle=False,
    )
)

"""Streams over HTTP/2 over TLS (``h2`` at both ends): SSE and gRPC with a drop, send-buffer HoL.

Same stack as :mod:`.h2` (Python ``ssl`` TLS 1.3 with ALPN ``h2`` and key logs, TCP_NODELAY
at both ends, port 443, one HTTP/2 connection); its frame logger, frame parser and TLS
wire layout are reused.  Three pairs:

* ``h2_sse_drop`` / ``h2_sse_nodrop`` (DETECTION.md §4.1, issue 6): stream 1 =
  ``GET /v1/stream`` answered ``text/event-stream`` with 20 events (``data: token N``, one
  DATA frame = one ``SSL_write`` each) every 50 ms, while stream 3 = ``GET /blob`` downloads
  64 KiB in the background during the first ticks (``blob_per_tick`` 4 KiB frames per tick,
  one write, always after that tick's event so the event never queues behind the blob).
  The positive drops the s2c segment carrying event 10: TCP holds events 10–12 until the
  retransmission.  Ground truth: each event's server write and client read time, which
  streams' frames (and which event) the dropped segment carried.
* ``grpc_stream`` / ``grpc_stream_control``: gRPC wire format over ``h2`` — ``POST
  /pkg.Svc/Stream``, ``content-type: application/grpc``, ``te: trailers``, one request
  message, then a server-streaming response of 20 length-prefixed messages (1-byte
  compressed flag + 4-byte big-endian length + a protobuf-shaped payload) every 50 ms and
  trailers ``grpc-status: 0``, ``grpc-message``.  The positive drops the segment carrying
  message 10 (TCP HoL, the realistic and deterministic stall of a streaming RPC on a lossy
  path; flow-control stalls need bodies far over the fixture budget).
* ``h2_send_buffer`` / ``h2_send_buffer_lowat`` (DETECTION.md §4.3): one connection, stream
  1 = ``GET /big`` (80 KiB in 4 KiB DATA frames) over a 1 Mbit/s path with BBR (pacing:
  its startup puts ≈ 25 KB in flight, the rest of the backlog stays in the sender's socket,
  where cubic would push it all into the bottleneck queue); the server
  (non-blocking, ``poll``) writes stream 1 whenever the socket is writable into a 2 MiB send
  buffer, so nearly the whole body is queued in the kernel at once.  ``urgent_after_ms``
  after the first DATA arrives the client sends ``GET /urgent`` on stream 3; the server
  answers it at once, but its frames leave only after every stream-1 byte already queued
  (≈ queued bytes / 125 kB/s).  The control sets ``TCP_NOTSENT_LOWAT`` = 16 384 on the
  server socket: ``poll`` reports writable only below 16 KiB unsent, so at most 16 KiB +
  one frame is ahead of the urgent response (Cloudflare, "Optimizing HTTP/2
  prioritization with BBR and tcp_notsent_lowat", 2018).  Ground truth: when the server
  read request 3 and wrote its response, the unsent bytes ahead of it (``SIOCOUTQNSD``),
  when the client read the response.
"""

from __future__ import annotations

import fcntl
import select
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any

from .. import truth
from ..apps import (
    CONNECT_TIMEOUT_S,
    IO_TIMEOUT_S,
    apply_tcp_options,
    listen,
    now_ns,
    tcp_options,
    tls_client_context,
    tls_info,
    tls_server_context,
)
from ..certs import DEFAULT_HOSTNAME
from . import RunData, Scenario, register
from .h2 import DEFAULT_WINDOW, Writer, frames_in, wire_layout

TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)  # Linux include/uapi/linux/tcp.h
SIOCOUTQ = 0x5411  # TIOCOUTQ: bytes in the send queue (unacked + unsent)
SIOCOUTQNSD = 0x894B  # bytes in the send queue not yet sent
GRPC_PATH = "/pkg.Svc/Stream"

STREAM_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "mode": "sse",  # "sse" | "grpc"
    "events": 20,
    "interval_ms": 50.0,
    "blob_len": 65_536,  # sse: stream 3's body, sent during the first ticks
    "blob_frame": 4_096,
    "blob_per_tick": 4,
    "message_len": 96,  # grpc: payload bytes per message (+ 5-byte prefix)
    "client_window": 1_048_576,
    "server_nodelay": True,
    "client_nodelay": True,
    "drop_s2c": [],
}
SSE_DROP_EVENT = 10  # the event whose segment the positives drop (checked by the validation)
# s2c payload packets (sse): server flight, 2 tickets, SETTINGS, SETTINGS ACK, headers,
# event 1, then per tick of the blob 11 full segments + the tail of its 2 records; one per
# event after the blob: #67 carries event 10 (checked by the validation)
SSE_DROP_INDEX = 67
GRPC_DROP_INDEX = 16  # the same count without a blob: #16 carries message 10

SENDBUF_PARAMS: dict[str, Any] = {
    "delay_ms": 15.0,
    "port": 443,
    "mode": "sendbuf",
    "cc": "bbr",  # paces at the bottleneck rate: the backlog stays in the sender's socket
    "rate_mbit": 1.0,
    "body_len": 81_920,
    "frame_len": 4_096,
    "urgent_len": 256,
    # after the first DATA of stream 1 reached the client: early, while BBR's startup has
    # little in flight, so most of the body is still unsent in the server's socket
    "urgent_after_ms": 20.0,
    "sndbuf": 1_048_576,  # SO_SNDBUF (the kernel doubles it): the whole body fits
    "notsent_lowat": None,  # the control: 16 384
    "client_window": 16_777_216,
    "server_nodelay": True,
    "client_nodelay": True,
}


# --------------------------------------------------------------------------- helpers


def _h2_conn(client_side: bool) -> Any:
    import h2.config
    import h2.connection

    return h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=client_side, header_encoding="utf-8")
    )


def _accept(p: dict[str, Any], ready: Callable[[], None]) -> tuple[Any, ...]:
    """Listen, accept, socket options, TLS handshake (ALPN h2), server SETTINGS written."""
    ctx = tls_server_context(p["cert"], p["key"], p["keylog_server"], alpn="h2")
    ls = listen(p["server_ip"], p["port"], cc=p["cc"], nodelay=p["server_nodelay"])
    ready()
    raw, _ = ls.accept()
    raw.settimeout(IO_TIMEOUT_S)
    if p.get("sndbuf"):
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, p["sndbuf"])
    if p.get("notsent_lowat"):
        raw.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, p["notsent_lowat"])
    opts = tcp_options(raw)
    opts["SO_SNDBUF"] = raw.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    opts["TCP_NOTSENT_LOWAT"] = raw.getsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT)
    sock = ctx.wrap_socket(raw, server_side=True)
    if sock.selected_alpn_protocol() != "h2":
        raise ConnectionError(f"ALPN gave {sock.selected_alpn_protocol()!r}, not h2")
    conn = _h2_conn(False)
    w = Writer(sock, conn)
    conn.initiate_connection()
    w.flush()
    return ls, sock, conn, w, opts


def _connect(p: dict[str, Any]) -> tuple[Any, ...]:
    """Client: connect, TLS (ALPN h2), SETTINGS with ``client_window`` for streams and conn."""
    import h2.settings

    ctx = tls_client_context(p["cert"], p["keylog_client"], alpn="h2")
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    apply_tcp_options(raw, cc=p["cc"], nodelay=p["client_nodelay"])
    raw.settimeout(CONNECT_TIMEOUT_S)
    t_connect = now_ns()
    raw.connect((p["server_ip"], p["port"]))
    sock = ctx.wrap_socket(raw, server_hostname=DEFAULT_HOSTNAME)
    sock.settimeout(IO_TIMEOUT_S)
    conn = _h2_conn(True)
    win = p["client_window"]
    conn.local_settings = h2.settings.Settings(
        client=True,
        initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: conn.DEFAULT_MAX_HEADER_LIST_SIZE,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: win,
        },
    )
    conn.initiate_connection()
    conn.increment_flow_control_window(win - DEFAULT_WINDOW)
    w = Writer(sock, conn)
    w.flush()
    info = {"socket": tcp_options(sock), "tls": tls_info(sock), "connect_ns": t_connect}
    return sock, conn, w, info


def _close(sock: ssl.SSLSocket) -> None:
    try:
        sock.unwrap().close()
    except (OSError, ssl.SSLError, ValueError):
        sock.close()


def _drain_until_close(sock: ssl.SSLSocket, conn: Any, w: Writer) -> None:
    """Server: read until the client's GOAWAY / close_notify / FIN."""
    try:
        sock.setblocking(True)
        sock.settimeout(IO_TIMEOUT_S)
        while True:
            data = sock.recv(65_536)
            if not data:
                break
            conn.receive_data(data)
            w.flush()
    except (OSError, ssl.SSLError):
        pass


def _readable(sock: ssl.SSLSocket, timeout_s: float) -> bool:
    if sock.pending():
        return True
    r, _, _ = select.select([sock], [], [], max(timeout_s, 0.0))
    return bool(r)


def grpc_frame(payload: bytes) -> bytes:
    """A gRPC length-prefixed message: compressed flag 0, 4-byte big-endian length."""
    return struct.pack("!BI", 0, len(payload)) + payload


def grpc_payload(n: int, size: int) -> bytes:
    """A protobuf-shaped message: field 1 (string) ``token N``, field 2 (bytes) padding."""
    text = b"token %d" % n
    pad = max(size - len(text) - 5, 0)
    return b"\x0a" + bytes([len(text)]) + text + b"\x12" + bytes([pad]) + b"x" * pad


def _grpc_split(buf: bytes) -> tuple[list[bytes], bytes]:
    out = []
    while len(buf) >= 5:
        n = struct.unpack_from("!I", buf, 1)[0]
        if len(buf) < 5 + n:
            break
        out.append(buf[5 : 5 + n])
        buf = buf[5 + n :]
    return out, buf


def _token(payload: bytes) -> int:
    return int(payload[2 : 2 + payload[1]].split()[1])


# --------------------------------------------------------------------------- SSE / gRPC


def stream_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import h2.events

    ls, sock, conn, w, opts = _accept(p, ready)
    requests: dict[int, dict[str, Any]] = {}
    ended: set[int] = set()

    def pump() -> None:
        data = sock.recv(65_536)
        if not data:
            raise ConnectionError("client closed early")
        t = now_ns()
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                requests[ev.stream_id] = {"path": dict(ev.headers)[":path"], "read_ns": t}
            elif isinstance(ev, h2.events.DataReceived):
                requests[ev.stream_id]["body_len"] = requests[ev.stream_id].get(
                    "body_len", 0
                ) + len(ev.data)
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
        w.flush()

    def read_until(deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            if _readable(sock, left):
                pump()

    want = 2 if p["mode"] == "sse" else 1
    while len(ended) < want:
        pump()
    t_requests = now_ns()
    by_path = {r["path"]: sid for sid, r in requests.items()}
    if p["mode"] == "sse":
        sid = by_path["/v1/stream"]
        blob_sid = by_path["/blob"]
        head = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    else:
        sid, blob_sid = by_path[GRPC_PATH], None
        head = [("content-type", "application/grpc")]
    conn.send_headers(sid, [(":status", "200"), *head])
    w.flush()
    blob = bytes(range(256)) * (p["blob_len"] // 256 + 1)
    blob_sent = 0
    events = []
    start = time.monotonic()
    for n in range(1, p["events"] + 1):
        read_until(start + (n - 1) * p["interval_ms"] / 1000)
        if p["mode"] == "sse":
            conn.send_data(sid, b"data: token %d\n\n" % n)
        else:
            conn.send_data(sid, grpc_frame(grpc_payload(n, p["message_len"])))
        w.flush()
        events.append({"n": n, "write_ns": w.log[-1]["t_ns"]})
        if blob_sid is not None and blob_sent < p["blob_len"]:
            if blob_sent == 0:
                conn.send_headers(
                    blob_sid,
                    [
                        (":status", "200"),
                        ("content-type", "application/octet-stream"),
                        ("content-length", str(p["blob_len"])),
                    ],
                )
            for _ in range(p["blob_per_tick"]):
                k = min(p["blob_frame"], p["blob_len"] - blob_sent)
                if k <= 0:
                    break
                end = blob_sent + k == p["blob_len"]
                conn.send_data(blob_sid, blob[blob_sent : blob_sent + k], end_stream=end)
                blob_sent += k
            w.flush()
    if p["mode"] == "sse":
        conn.end_stream(sid)
    else:
        conn.send_headers(sid, [("grpc-status", "0"), ("grpc-message", "")], end_stream=True)
    w.flush()
    t_end = now_ns()
    _drain_until_close(sock, conn, w)
    _close(sock)
    ls.close()
    return {
        "socket": opts,
        "requests": {str(k): v for k, v in requests.items()},
        "requests_done_ns": t_requests,
        "events": events,
        "end_write_ns": t_end,
        "writes": w.log,
    }


def stream_client(p: dict[str, Any]) -> dict[str, Any]:
    import h2.events

    sock, conn, w, info = _connect(p)
    auth = [(":scheme", "https"), (":authority", DEFAULT_HOSTNAME)]
    if p["mode"] == "sse":
        sse_sid = conn.get_next_available_stream_id()
        conn.send_headers(
            sse_sid,
            [(":method", "GET"), *auth, (":path", "/v1/stream"), ("accept", "text/event-stream")],
            end_stream=True,
        )
        blob_sid = conn.get_next_available_stream_id()
        conn.send_headers(
            blob_sid, [(":method", "GET"), *auth, (":path", "/blob")], end_stream=True
        )
        streams = 2
    else:
        sse_sid = conn.get_next_available_stream_id()
        blob_sid = None
        conn.send_headers(
            sse_sid,
            [
                (":method", "POST"),
                *auth,
                (":path", GRPC_PATH),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        conn.send_data(sse_sid, grpc_frame(b"\x0a\x05hello"), end_stream=True)
        streams = 1
    w.flush()
    t_get = w.log[-1]["t_ns"]
    buf = b""
    reads: dict[int, int] = {}
    trailers: dict[str, str] = {}
    blob_bytes = 0
    t_head = t_blob_done = None
    ended: set[int] = set()
    while len(ended) < streams:
        data = sock.recv(65_536)
        t = now_ns()
        if not data:
            raise ConnectionError("server closed early")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sse_sid:
                t_head = t
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id == sse_sid:
                    buf += ev.data
                else:
                    blob_bytes += len(ev.data)
            elif isinstance(ev, h2.events.TrailersReceived):
                trailers = dict(ev.headers)
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
                if ev.stream_id == blob_sid:
                    t_blob_done = t
        if p["mode"] == "sse":
            while b"\n\n" in buf:
                line, buf = buf.split(b"\n\n", 1)
                reads.setdefault(int(line.split()[-1]), t)
        else:
            msgs, buf = _grpc_split(buf)
            for m in msgs:
                reads.setdefault(_token(m), t)
        w.flush()
    t_done = now_ns()
    conn.close_connection()
    w.flush()
    _close(sock)
    return {
        **info,
        "get_write_ns": t_get,
        "head_read_ns": t_head,
        "events": [{"n": n, "read_ns": t} for n, t in sorted(reads.items())],
        "blob_bytes": blob_bytes,
        "blob_done_ns": t_blob_done,
        "trailers": trailers,
        "done_ns": t_done,
        "writes": w.log,
    }


def _layout(run: RunData) -> list[dict[str, Any]]:
    """Wire position of every frame the server wrote after its first write (see h2.py)."""
    pkts = truth.packets(run.forwarder)
    writes = run.server["writes"]
    s2c = truth.data_packets(pkts, "s2c")
    first = next((x for x in s2c if writes and x.t_in_ns >= writes[0]["t_ns"]), None)
    return [] if first is None else wire_layout(writes, first.rel_seq or 0)


def stream_ground_truth(run: RunData) -> dict[str, Any]:
    p, srv, cli = run.params, run.server, run.client
    pkts = truth.packets(run.forwarder)
    layout = _layout(run)
    write_to_event = {e["write_ns"]: e["n"] for e in srv["events"]}
    drops = truth.tcp_drops(pkts, run.forwarder)
    for d in drops:
        lo, hi = d["rel_seq"], d["rel_seq"] + d["len"]
        hit = [f for f in layout if f["wire_start"] < hi and lo < f["wire_end"]]
        d["frames_hit"] = [{"type": f["type"], "stream": f["stream"], "len": f["len"]} for f in hit]
        d["streams_hit"] = sorted({f["stream"] for f in hit if f["type"] == "DATA"})
        d["events_hit"] = sorted(
            {write_to_event[f["t_ns"]] for f in hit if f["t_ns"] in write_to_event}
        )
    reads = {e["n"]: e["read_ns"] for e in cli["events"]}
    events = []
    for e in srv["events"]:
        r = reads.get(e["n"])
        events.append(
            {
                "n": e["n"],
                "write_ns": e["write_ns"],
                "read_ns": r,
                "latency_ms": truth.ms(None if r is None else r - e["write_ns"]),
            }
        )
    one_way = float(p["delay_s2c_ms"] or p["delay_ms"])
    lat = sorted(e["latency_ms"] for e in events if e["latency_ms"] is not None)
    late = [e["n"] for e in events if e["latency_ms"] is not None and e["latency_ms"] > one_way + 5]
    return {
        "handshake": list(truth.handshake(pkts)),
        "drops": drops,
        "events": events,
        "trailers": cli["trailers"],
        "summary": {
            "mode": p["mode"],
            "events_written": len(events),
            "events_read": len(reads),
            "first_event_latency_ms": events[0]["latency_ms"] if events else None,
            "ttft_client_ms": truth.ms(reads[1] - cli["get_write_ns"]) if 1 in reads else None,
            "latency_ms_min": lat[0] if lat else None,
            "latency_ms_max": lat[-1] if lat else None,
            "late_events": late,
            "blob_bytes": cli["blob_bytes"],
            "blob_done_ms": truth.ms(cli["blob_done_ns"] - cli["get_write_ns"])
            if cli["blob_done_ns"]
            else None,
            "grpc_status": cli["trailers"].get("grpc-status"),
            "drop_streams_hit": drops[0]["streams_hit"] if drops else None,
            "drop_events_hit": drops[0]["events_hit"] if drops else None,
            "retransmit_after_ms": drops[0]["retransmit_after_ms"] if drops else None,
        },
    }


def _validate_stream(doc: dict[str, Any]) -> list[str]:
    gt, p = doc["ground_truth"], doc["params"]
    s = gt["summary"]
    problems = []
    if s["events_read"] != p["events"]:
        problems.append(f"events lost: {s}")
    if p["mode"] == "sse" and s["blob_bytes"] != p["blob_len"]:
        problems.append(f"blob incomplete: {s}")
    if p["mode"] == "grpc" and s["grpc_status"] != "0":
        problems.append(f"grpc-status {s['grpc_status']!r}")
    if p["drop_s2c"]:
        if s["drop_events_hit"] != [SSE_DROP_EVENT] or s["drop_streams_hit"] != [1]:
            problems.append(f"the drop did not land on event {SSE_DROP_EVENT} alone: {s}")
        elif SSE_DROP_EVENT not in s["late_events"]:
            problems.append(f"the dropped event was not late: {s}")
    elif s["late_events"]:
        problems.append(f"control with late events: {s['late_events']}")
    return problems


# --------------------------------------------------------------------------- send-buffer HoL


def _ioctl_int(sock: Any, req: int) -> int:
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), req, b"\0\0\0\0"))[0]


def sendbuf_server(p: dict[str, Any], ready: Callable[[], None]) -> dict[str, Any]:
    import h2.events

    ls, sock, conn, w, opts = _accept(p, ready)
    sock.setblocking(False)
    fd = sock.fileno()
    out: list[tuple[str, bytes]] = []  # chunks in write order (one h2 operation each)
    log: list[dict[str, Any]] = list(w.log)
    w.log = log
    big_sid: int | None = None
    big_sent = 0
    urgent: dict[str, Any] = {}
    body = bytes(range(256)) * (p["body_len"] // 256 + 1)
    t_big_done = None

    def queue(label: str) -> None:
        data = conn.data_to_send()
        if data:
            out.append((label, data))

    def on_read() -> None:
        nonlocal big_sid
        while True:
            try:
                data = sock.recv(65_536)
            except ssl.SSLWantReadError:
                return
            if not data:
                raise ConnectionError("client closed early")
            t = now_ns()
            for ev in conn.receive_data(data):
                if not isinstance(ev, h2.events.RequestReceived):
                    continue
                path = dict(ev.headers)[":path"]
                if path == "/big":
                    big_sid = ev.stream_id
                    conn.send_headers(
                        big_sid,
                        [
                            (":status", "200"),
                            ("content-type", "application/octet-stream"),
                            ("content-length", str(p["body_len"])),
                        ],
                    )
                    queue("big-headers")
                else:  # the urgent request: answered at once
                    urgent.update(
                        stream=ev.stream_id,
                        read_ns=t,
                        notsent_bytes=_ioctl_int(sock, SIOCOUTQNSD),
                        outq_bytes=_ioctl_int(sock, SIOCOUTQ),
                        big_sent_before=big_sent,
                        unwritten_chunks=len(out),
                    )
                    small = b'{"urgent":true,"pad":"' + b"u" * p["urgent_len"] + b'"}'
                    conn.send_headers(
                        ev.stream_id,
                        [
                            (":status", "200"),
                            ("content-type", "application/json"),
                            ("content-length", str(len(small))),
                        ],
                    )
                    conn.send_data(ev.stream_id, small, end_stream=True)
                    queue("urgent")
            queue("control")  # SETTINGS ACK etc.

    deadline = time.monotonic() + IO_TIMEOUT_S
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not (urgent.get("write_ns") and big_sid and big_sent >= p["body_len"] and not out):
        if time.monotonic() > deadline:
            raise TimeoutError("send-buffer server made no progress")
        more = big_sid is not None and big_sent < p["body_len"]
        poller.modify(fd, select.POLLIN | (select.POLLOUT if out or more else 0))
        evs = [(fd, select.POLLIN)] if sock.pending() else poller.poll(1000)
        for _, mask in evs:
            if mask & select.POLLIN:
                on_read()
            if not mask & select.POLLOUT:
                continue
            if not out and big_sid is not None and big_sent < p["body_len"]:
                n = min(p["frame_len"], p["body_len"] - big_sent)
                n = min(n, conn.local_flow_control_window(big_sid))
                if n > 0:
                    last = big_sent + n == p["body_len"]
                    conn.send_data(big_sid, body[big_sent : big_sent + n], end_stream=last)
                    big_sent += n
                    queue("big")
            while out:  # write queued chunks in order until the socket pushes back
                label, data = out[0]
                try:
                    sock.send(data)
                except ssl.SSLWantWriteError:
                    break
                t = now_ns()
                out.pop(0)
                log.append({"t_ns": t, "len": len(data), "frames": frames_in(data), "label": label})
                if label == "urgent":
                    urgent["write_ns"] = t
                if label == "big" and big_sent >= p["body_len"]:
                    t_big_done = t
    _drain_until_close(sock, conn, w)
    _close(sock)
    ls.close()
    return {
        "socket": opts,
        "urgent": urgent,
        "big_written_ns": t_big_done,
        "writes": log,
    }


def sendbuf_client(p: dict[str, Any]) -> dict[str, Any]:
    import h2.events

    sock, conn, w, info = _connect(p)
    auth = [(":scheme", "https"), (":authority", DEFAULT_HOSTNAME)]
    big = conn.get_next_available_stream_id()
    conn.send_headers(big, [(":method", "GET"), *auth, (":path", "/big")], end_stream=True)
    w.flush()
    t_get = w.log[-1]["t_ns"]
    urgent_at: float | None = None
    urgent_sid: int | None = None
    t_urgent = None
    data_events: list[list[int]] = []  # [t_ns, stream, bytes]
    heads: dict[int, int] = {}
    ended: set[int] = set()
    while len(ended) < 2:
        if urgent_at is not None and urgent_sid is None and time.monotonic() >= urgent_at:
            urgent_sid = conn.get_next_available_stream_id()
            conn.send_headers(
                urgent_sid, [(":method", "GET"), *auth, (":path", "/urgent")], end_stream=True
            )
            w.flush()
            t_urgent = w.log[-1]["t_ns"]
        wait = IO_TIMEOUT_S if urgent_at is None or urgent_sid else urgent_at - time.monotonic()
        if not _readable(sock, wait):
            continue
        data = sock.recv(65_536)
        t = now_ns()
        if not data:
            raise ConnectionError("server closed early")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                heads[ev.stream_id] = t
            elif isinstance(ev, h2.events.DataReceived):
                data_events.append([t, ev.stream_id, len(ev.data)])
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id == big and urgent_at is None:
                    urgent_at = time.monotonic() + p["urgent_after_ms"] / 1000
            elif isinstance(ev, h2.events.StreamEnded):
                ended.add(ev.stream_id)
        w.flush()
    t_done = now_ns()
    conn.close_connection()
    w.flush()
    _close(sock)
    return {
        **info,
        "get_write_ns": t_get,
        "urgent_stream": urgent_sid,
        "urgent_write_ns": t_urgent,
        "heads": {str(k): v for k, v in heads.items()},
        "data": data_events,
        "done_ns": t_done,
        "writes": w.log,
    }


def sendbuf_ground_truth(run: RunData) -> dict[str, Any]:
    p, srv, cli = run.params, run.server, run.client
    pkts = truth.packets(run.forwarder)
    u = srv["urgent"]
    sid = cli["urgent_stream"]
    head_read = cli["heads"].get(str(sid))
    one_way = float(p["delay_s2c_ms"] or p["delay_ms"])
    layout = _layout(run)
    # stream-1 DATA the server had handed to the kernel before the urgent response
    ahead = [
        f
        for f in layout
        if f["type"] == "DATA" and f["stream"] != sid and f["t_ns"] < u["write_ns"]
    ]
    urgent_frames = [f for f in layout if f["stream"] == sid]
    s2c = truth.data_packets(pkts, "s2c")
    urgent_seq = urgent_frames[0]["wire_start"] if urgent_frames else None
    # when the urgent response's first byte left the server (forwarder ingress)
    left = next(
        (
            x.t_in_ns
            for x in s2c
            if urgent_seq is not None and x.rel_seq <= urgent_seq < x.rel_seq + x.len  # type: ignore[operator]
        ),
        None,
    )
    # stream-1 bytes that left the server between the urgent request's arrival and the
    # urgent response (sent after the request was read: queued ahead of it)
    after_read = [
        x for x in s2c if left is not None and u["read_ns"] <= x.t_in_ns < left and x.len > 0
    ]
    return {
        "handshake": list(truth.handshake(pkts)),
        "urgent": {
            **u,
            "stream": sid,
            "client_write_ns": cli["urgent_write_ns"],
            "client_head_read_ns": head_read,
            "left_server_ns": left,
        },
        "summary": {
            "notsent_lowat": srv["socket"]["TCP_NOTSENT_LOWAT"],
            "queued_ahead_bytes": u["notsent_bytes"],
            "outq_bytes": u["outq_bytes"],
            "stream1_wire_bytes_after_request": sum(x.len for x in after_read),
            "stream1_data_written_before_urgent": sum(f["len"] for f in ahead),
            "server_turnaround_ms": truth.ms(u["write_ns"] - u["read_ns"]),
            "urgent_left_after_ms": truth.ms(left - u["write_ns"]) if left else None,
            # what the user felt: urgent request written → response read, minus one RTT
            "urgent_latency_ms": truth.ms(head_read - cli["urgent_write_ns"])
            if head_read
            else None,
            "urgent_extra_ms": truth.ms(head_read - u["write_ns"] - int(one_way * 1e6))
            if head_read
            else None,
            "body_bytes": sum(n for _, s, n in cli["data"] if s != sid),
            "transfer_ms": truth.ms(cli["done_ns"] - cli["get_write_ns"]),
            "rate_mbit": p["rate_mbit"],
        },
    }


# A positive needs ≥ 2× the detector's threshold (32 KiB) queued; the control at most the
# low-water mark + one frame + record overhead.
SENDBUF_MIN_QUEUED = 40_000


def _validate_sendbuf(doc: dict[str, Any]) -> list[str]:
    s, p = doc["ground_truth"]["summary"], doc["params"]
    problems = []
    if s["body_bytes"] != p["body_len"] or s["urgent_latency_ms"] is None:
        problems.append(f"incomplete: {s}")
    elif p["notsent_lowat"]:
        cap = p["notsent_lowat"] + p["frame_len"] + 64
        if s["queued_ahead_bytes"] > cap:
            problems.append(f"control queued {s['queued_ahead_bytes']} B > {cap}: {s}")
    elif s["queued_ahead_bytes"] < SENDBUF_MIN_QUEUED or s["urgent_extra_ms"] < 200:
        problems.append(f"urgent response not queued behind enough bytes: {s}")
    return problems


_M = __name__
_STREAM = {"server": f"{_M}:stream_server", "client": f"{_M}:stream_client"}
_SENDBUF = {"server": f"{_M}:sendbuf_server", "client": f"{_M}:sendbuf_client"}

register(
    Scenario(
        name="h2_sse_drop",
        summary="SSE on HTTP/2 stream 1 beside a 64 KiB download on stream 3; event 10's segment dropped",
        what="h2 SSE stream (20 events / 50 ms) + a 64 KiB blob on stream 3 at the start; the s2c "
        "segment of event 10 is lost: events 10–12 wait for the retransmission",
        expected=("tcp_hol_blocking",),
        incidental=("sse_batching", "tls_record_spanning"),
        pair="h2_sse_nodrop",
        **_STREAM,
        params={**STREAM_PARAMS, "drop_s2c": [SSE_DROP_INDEX]},
        tls=True,
        ground_truth=stream_ground_truth,
        validate=_validate_stream,
        fixture_middle=False,  # fixtures folder budget (~5 MB): client and server suffice
    )
)
register(
    Scenario(
        name="h2_sse_nodrop",
        summary="SSE on HTTP/2 beside a 64 KiB download, no drop (control)",
        what="the same h2 SSE stream and blob without a drop: every event on time",
        expected=(),
        controls=("tcp_hol_blocking",),
        incidental=("sse_batching", "tls_record_spanning"),
        pair="h2_sse_drop",
        **_STREAM,
        params=STREAM_PARAMS,
        tls=True,
        ground_truth=stream_ground_truth,
        validate=_validate_stream,
        fixture_middle=False,  # fixtures folder budget (~5 MB): client and server suffice
    )
)
register(
    Scenario(
        name="grpc_stream",
        summary="gRPC server-streaming call over h2 (20 messages / 50 ms); message 10's segment dropped",
        what="gRPC server stream of 20 messages every 50 ms; the s2c segment of message 10 is lost: "
        "messages 10–12 wait for the retransmission",
        expected=("tcp_hol_blocking",),
        pair="grpc_stream_control",
        **_STREAM,
        params={**STREAM_PARAMS, "mode": "grpc", "drop_s2c": [GRPC_DROP_INDEX]},
        tls=True,
        ground_truth=stream_ground_truth,
        validate=_validate_stream,
    )
)
register(
    Scenario(
        name="grpc_stream_control",
        summary="gRPC server-streaming call over h2, no drop (control)",
        what="the same gRPC stream without a drop: every message on time, grpc-status 0",
        expected=(),
        controls=("tcp_hol_blocking",),
        pair="grpc_stream",
        **_STREAM,
        params={**STREAM_PARAMS, "mode": "grpc"},
        tls=True,
        ground_truth=stream_ground_truth,
        validate=_validate_stream,
    )
)
register(
    Scenario(
        name="h2_send_buffer",
        summary="urgent h2 request answered at once but queued behind ~48 KB already in the socket",
        what="80 KiB on stream 1 written eagerly into a 2 MiB send buffer over 1 Mbit/s; the urgent "
        "stream-3 response leaves only after the queued stream-1 bytes",
        expected=("h2_send_buffer_hol",),
        pair="h2_send_buffer_lowat",
        **_SENDBUF,
        params=SENDBUF_PARAMS,
        tls=True,
        ground_truth=sendbuf_ground_truth,
        validate=_validate_sendbuf,
        incidental=("tls_record_spanning",),
        fixture_middle=False,  # fixtures folder budget (~5 MB): client and server suffice
    )
)
register(
    Scenario(
        name="h2_send_buffer_lowat",
        summary="same with TCP_NOTSENT_LOWAT 16 KiB on the server socket (control)",
        what="TCP_NOTSENT_LOWAT 16 384: at most 16 KiB + one frame is queued ahead of the urgent response",
        expected=(),
        controls=("h2_send_buffer_hol",),
        pair="h2_send_buffer",
        **_SENDBUF,
        params={**SENDBUF_PARAMS, "notsent_lowat": 16_384},
        tls=True,
        ground_truth=sendbuf_ground_truth,
        validate=_validate_sendbuf,
        incidental=("tls_record_spanning",),
        fixture_middle=False,  # fixtures folder budget (~5 MB): client and server suffice
    )
)
